"""The traits a libvirt compute node reports to Placement, per CPU model.

What scalecloud's hypervisors have when the cluster file gives none (a
Watcher cluster): the HW_CPU_X86_* traits of the CPU's flags, as Nova's
libvirt driver maps them (nova/virt/libvirt/utils.py CPU_TRAITS_MAPPING),
plus the COMPUTE_* capability traits a KVM host reports
(nova/virt/driver.py CAPABILITY_TRAITS_MAP, the libvirt driver's
capabilities, its VIF models, disk buses and video models). A size, and a
spread between models, as on a real cloud; not a copy of any one host.
"""

# Every 64-bit Intel server CPU of the last decade.
_BASE = ('HW_CPU_X86_ABM', 'HW_CPU_X86_AESNI', 'HW_CPU_X86_AVX',
         'HW_CPU_X86_AVX2', 'HW_CPU_X86_BMI', 'HW_CPU_X86_BMI2',
         'HW_CPU_X86_CLMUL', 'HW_CPU_X86_F16C', 'HW_CPU_X86_FMA3',
         'HW_CPU_X86_MMX', 'HW_CPU_X86_SSE', 'HW_CPU_X86_SSE2',
         'HW_CPU_X86_SSE3', 'HW_CPU_X86_SSE41', 'HW_CPU_X86_SSE42',
         'HW_CPU_X86_SSSE3', 'HW_CPU_X86_VMX', 'HW_CPU_X86_INTEL_VMX')
_SKYLAKE = _BASE + ('HW_CPU_X86_AVX512F', 'HW_CPU_X86_AVX512CD',
                    'HW_CPU_X86_AVX512BW', 'HW_CPU_X86_AVX512DQ',
                    'HW_CPU_X86_AVX512VL', 'HW_CPU_X86_MPX')
_CASCADELAKE = _SKYLAKE + ('HW_CPU_X86_AVX512VNNI',)
# Ice Lake dropped MPX.
_ICELAKE = tuple(t for t in _CASCADELAKE if t != 'HW_CPU_X86_MPX') + (
    'HW_CPU_X86_AVX512VBMI', 'HW_CPU_X86_AVX512VBMI2',
    'HW_CPU_X86_AVX512BITALG', 'HW_CPU_X86_AVX512IFMA',
    'HW_CPU_X86_AVX512VPOPCNTDQ', 'HW_CPU_X86_AVX512VAES',
    'HW_CPU_X86_AVX512GFNI', 'HW_CPU_X86_AVX512VPCLMULQDQ',
    'HW_CPU_X86_SHA')
_SAPPHIRERAPIDS = _ICELAKE + ('HW_CPU_X86_AMXBF16', 'HW_CPU_X86_AMXINT8',
                              'HW_CPU_X86_AMXTILE')
CPU = {'Skylake-Server': _SKYLAKE, 'Cascadelake-Server': _CASCADELAKE,
       'Icelake-Server': _ICELAKE, 'SapphireRapids': _SAPPHIRERAPIDS}

COMPUTE = (
    'COMPUTE_NODE', 'COMPUTE_ACCELERATORS', 'COMPUTE_DEVICE_TAGGING',
    'COMPUTE_NET_ATTACH_INTERFACE', 'COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG',
    'COMPUTE_VOLUME_ATTACH_WITH_TAG', 'COMPUTE_VOLUME_EXTEND',
    'COMPUTE_VOLUME_MULTI_ATTACH', 'COMPUTE_TRUSTED_CERTS',
    'COMPUTE_RESCUE_BFV', 'COMPUTE_SOCKET_PCI_NUMA_AFFINITY',
    'COMPUTE_SECURITY_UEFI_SECURE_BOOT', 'COMPUTE_ADDRESS_SPACE_EMULATED',
    'COMPUTE_ADDRESS_SPACE_PASSTHROUGH',
    'COMPUTE_IMAGE_TYPE_AKI', 'COMPUTE_IMAGE_TYPE_AMI',
    'COMPUTE_IMAGE_TYPE_ARI', 'COMPUTE_IMAGE_TYPE_ISO',
    'COMPUTE_IMAGE_TYPE_QCOW2', 'COMPUTE_IMAGE_TYPE_RAW',
    'COMPUTE_NET_VIF_MODEL_E1000', 'COMPUTE_NET_VIF_MODEL_E1000E',
    'COMPUTE_NET_VIF_MODEL_NE2K_PCI', 'COMPUTE_NET_VIF_MODEL_PCNET',
    'COMPUTE_NET_VIF_MODEL_RTL8139', 'COMPUTE_NET_VIF_MODEL_VIRTIO',
    'COMPUTE_NET_VIF_MODEL_VMXNET3',
    'COMPUTE_STORAGE_BUS_FDC', 'COMPUTE_STORAGE_BUS_IDE',
    'COMPUTE_STORAGE_BUS_SATA', 'COMPUTE_STORAGE_BUS_SCSI',
    'COMPUTE_STORAGE_BUS_USB', 'COMPUTE_STORAGE_BUS_VIRTIO',
    'COMPUTE_GRAPHICS_MODEL_BOCHS', 'COMPUTE_GRAPHICS_MODEL_NONE',
    'COMPUTE_GRAPHICS_MODEL_VGA', 'COMPUTE_GRAPHICS_MODEL_VIRTIO')


ARCH = 'x86_64'  # of every model here


def of_model(model):
    """The sorted traits of a KVM host with this CPU model (the base
    x86-64 flags for a model not listed)."""
    return sorted(CPU.get(model, _BASE) + COMPUTE)
