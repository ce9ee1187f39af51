"""What a server's image makes Nova's scheduler demand of a destination.

Nova schedules a live migration with the image properties it stored when
the server was booted (the RequestSpec's image). The leveller reads them
from Glance (cloud/collect.py), so they are the image's properties of now;
an image gone from Glance (404), one Glance would not show, and the image
of a server booted from a volume (Nova takes it from Cinder) have unknown
properties. What the rules make of them, after nova/scheduler:

- ``trait:NAME=required`` properties join the flavor's required traits in
  the unnamed request group (utils.py, ResourceRequest._process_image_meta;
  images cannot forbid a trait): see image_traits();
- with ``[scheduler] query_placement_for_image_type_support``, a server not
  booted from a volume needs COMPUTE_IMAGE_TYPE_<disk_format>; with
  ``image_metadata_prefilter``, hw_disk_bus and the like need their traits
  (request_filter.py): both off by default, as in Nova;
- ImagePropertiesFilter (a default filter) matches hw_architecture,
  img_hv_type and hw_vm_mode with the guests a hypervisor supports, and
  img_hv_requested_version with its version. The API shows a hypervisor's
  type, version and CPU architecture only, so the leveller passes a
  destination only where those prove the guest is supported;
- properties Nova turns into required traits the leveller does not model
  (vTPM, secure boot, memory encryption ...): see AS_CAPABLE_KEYS;
- properties that give the server a NUMA topology (pinned CPUs, NUMA
  nodes, huge pages) are fitted to NUMA cells the API does not show: the
  server does not move (filters.numa).

Where the properties are unknown, or set but not modelled, the leveller
moves the server only to a hypervisor as capable as its own: every trait
of its resource provider, the same hypervisor type and CPU architecture.
What the source satisfied when Nova placed the server there, such a
destination satisfies too: a deliberate conservative choice, which loses
the moves to less capable hypervisors rather than guess that Nova agrees.
"""

import functools
import re

from osc_leveller.core.model import extra_specs

DISABLED = 'COMPUTE_STATUS_DISABLED'  # Nova's own, on a disabled compute
TRAIT = 'trait:'
# The canonical names of nova/objects/fields.py (Architecture, HVType,
# VMMode) and the aliases its canonicalize() maps.
ARCHITECTURES = frozenset((
    'alpha', 'armv6', 'armv7l', 'armv7b', 'aarch64', 'cris', 'i686', 'ia64',
    'lm32', 'm68k', 'microblaze', 'microblazeel', 'mips', 'mipsel',
    'mips64', 'mips64el', 'openrisc', 'parisc', 'parisc64', 'ppc', 'ppcle',
    'ppc64', 'ppc64le', 'ppcemb', 's390', 's390x', 'sh4', 'sh4eb', 'sparc',
    'sparc64', 'unicore32', 'x86_64', 'xtensa', 'xtensaeb'))
ARCH_ALIASES = {'i386': 'i686', 'i486': 'i686', 'i586': 'i686',
                'x86_32': 'i686', 'x86_32p': 'i686', 'amd64': 'x86_64'}
HV_TYPES = frozenset((
    'baremetal', 'bhyve', 'docker', 'fake', 'hyperv', 'ironic', 'kqemu',
    'kvm', 'lxc', 'lxd', 'openvz', 'parallels', 'vz', 'phyp', 'qemu', 'test',
    'uml', 'vbox', 'vmware', 'xen', 'zvm', 'prsm'))
HV_ALIASES = {'xapi': 'xen'}
VM_MODES = frozenset(('hvm', 'xen', 'uml', 'exe'))
VM_ALIASES = {'pv': 'xen', 'hv': 'hvm', 'baremetal': 'hvm'}

# What ImagePropertiesFilter compares: (current name, legacy name, the
# canonical names, their aliases). Nova reads a legacy name unless the
# current one is set too (objects/image_meta.py).
ARCHITECTURE = ('hw_architecture', 'architecture', ARCHITECTURES,
                ARCH_ALIASES)
HV_TYPE = ('img_hv_type', 'hypervisor_type', HV_TYPES, HV_ALIASES)
VM_MODE = ('hw_vm_mode', 'vm_mode', VM_MODES, VM_ALIASES)
VERSION = ('img_hv_requested_version', 'hypervisor_version_requires')

# The guests a hypervisor surely supports, by the hypervisor_type Nova
# shows (os-hypervisors): (architecture, hypervisor type, VM mode), None
# for its own CPU architecture (nova/virt/*: each driver's
# supported_instances). libvirt shows QEMU whether its guests run under KVM
# or not, so only qemu guests are sure (and LXC's containers); the other
# drivers support fixed guests.
SURE_GUESTS = {
    'qemu': ((None, 'qemu', 'hvm'),),
    'lxc': ((None, 'lxc', 'exe'),),
    'vmware vcenter server': (('i686', 'vmware', 'hvm'),
                              ('x86_64', 'vmware', 'hvm')),
    'zvm': (('s390x', 'zvm', 'hvm'),),
    'fake': (('x86_64', 'fake', 'hvm'),),
}

# Image properties request_filter.transform_image_metadata turns into
# required traits (with image_metadata_prefilter): property -> prefix.
METADATA_TRAITS = {
    'hw_cdrom_bus': 'COMPUTE_STORAGE_BUS',
    'hw_disk_bus': 'COMPUTE_STORAGE_BUS',
    'hw_video_model': 'COMPUTE_GRAPHICS_MODEL',
    'hw_vif_model': 'COMPUTE_NET_VIF_MODEL',
    'hw_architecture': 'HW_ARCH',
    'hw_emulation_architecture': 'COMPUTE_ARCH',
    'hw_viommu_model': 'COMPUTE_VIOMMU',
}
# The disk formats os-traits has a COMPUTE_IMAGE_TYPE_ trait for: Nova
# requires none for another (require_image_type_support).
IMAGE_TYPES = frozenset(('aki', 'ami', 'ari', 'iso', 'ploop', 'qcow2',
                         'raw', 'vdi', 'vhd', 'vhdx', 'vmdk'))


def _true(value):
    """oslo's bool_from_string, as Nova reads a boolean property."""
    return value.strip().lower() in ('1', 't', 'true', 'on', 'y', 'yes')


# Properties Nova turns into required traits that the leveller does not
# model (scheduler/utils.py ResourceRequest._translate_*, request_filter
# .py), with the values that do so: a server of such an image moves only
# to a hypervisor as capable as its own.
AS_CAPABLE_KEYS = {
    'os_secure_boot': lambda v: v == 'required',
    'hw_tpm_version': lambda v: True,
    'hw_tpm_model': lambda v: True,
    'hw_mem_encryption': _true,
    'hw_mem_encryption_model': lambda v: True,
    'hw_maxphysaddr_mode': lambda v: True,
    'hw_firmware_stateless': _true,
    'hw_virtio_packed_ring': _true,
    'hw_sound_model': lambda v: v == 'virtio',
    'hw_ephemeral_encryption': _true,
    'hw_ephemeral_encryption_format': lambda v: True,
    'hw_pci_numa_affinity_policy': lambda v: v == 'socket',
}
# Properties that give the server a NUMA topology (nova/virt/hardware.py
# numa_get_constraints), with the values that do so.
NUMA_KEYS = {
    'hw_cpu_policy': lambda v: v in ('dedicated', 'mixed'),
    'hw_numa_nodes': lambda v: True,
    'hw_mem_page_size': lambda v: True,
}
MAXPHYSADDR_BITS = 'hw_maxphysaddr_bits'

# The properties a snapshot keeps: those the rules read. trait:* keys are
# kept too (TRAIT), and no more than MAX_PROPERTIES in all.
KEPT = frozenset(
    [ARCHITECTURE[0], ARCHITECTURE[1], HV_TYPE[0], HV_TYPE[1], VM_MODE[0],
     VM_MODE[1], MAXPHYSADDR_BITS] + list(VERSION) + list(METADATA_TRAITS) +
    list(AS_CAPABLE_KEYS) + list(NUMA_KEYS))
MAX_PROPERTIES = 1000
MAX_VALUE = 255  # Nova keeps a property's first 255 characters
_PREDICATE = re.compile(r'\s*(<=|>=|<|>|!=|==)\s*([0-9]+(?:\.[0-9]+)*)\s*')


def kept(key):
    """The rules read this image property: a snapshot keeps it."""
    return key in KEPT or key.startswith(TRAIT)


def _canonical(properties, what):
    """(property name, Nova's canonical value) of what the image asks,
    None when it asks nothing; ValueError when Nova knows no such value."""
    current, legacy, names, aliases = what
    key = current if current in properties else legacy
    value = properties.get(key)
    if value is None:
        return None
    name = value.lower()
    name = aliases.get(name, name)
    if name not in names:
        raise ValueError('%s=%s is not one Nova knows' % (key, value))
    return key, name


def version_text(version):
    """Nova's text of a hypervisor_version (oslo convert_version_to_str):
    8002000 is 8.2.0."""
    parts = []
    while version:
        parts.insert(0, str(version % 1000))
        version //= 1000
    return '.'.join(parts) or '0'


def _compare(left, right):
    width = max(len(left), len(right))
    left, right = (tuple(v) + (0,) * (width - len(v)) for v in (left, right))
    return (left > right) - (left < right)


_OPERATORS = {'<': lambda c: c < 0, '<=': lambda c: c <= 0,
              '==': lambda c: c == 0, '!=': lambda c: c != 0,
              '>=': lambda c: c >= 0, '>': lambda c: c > 0}


def version_satisfies(predicate, version):
    """Whether a hypervisor_version (an integer) satisfies Nova's
    img_hv_requested_version ('>= 8.0, < 10'), every comma-separated part;
    ValueError when the predicate is not one the leveller reads."""
    have = [int(p) for p in version_text(version).split('.')]
    for part in predicate.split(','):
        match = _PREDICATE.fullmatch(part)
        if not match:
            raise ValueError('cannot read %r' % predicate)
        op, wanted = match.groups()
        if not _OPERATORS[op](_compare(
                have, [int(p) for p in wanted.split('.')])):
            return False
    return True


def image_traits(image, boot_from_volume, options):
    """[(trait, why)] the server's image requires of its root resource
    provider, why naming the property; () when its properties are unknown
    (the conservative rule covers them)."""
    if image is None or not image.known:
        return ()
    return _image_traits(image, boot_from_volume,
                         getattr(options, 'image_type_prefilter', False),
                         getattr(options, 'image_metadata_prefilter', False))


@functools.lru_cache(maxsize=4096)  # asked for every (server, hypervisor)
def _image_traits(image, boot_from_volume, type_prefilter,
                  metadata_prefilter):
    props = image.properties
    label = 'image %s' % image.label
    found = [(key[len(TRAIT):], label) for key, value in sorted(
        props.items()) if key.startswith(TRAIT) and
        value == extra_specs.REQUIRED]
    if type_prefilter and not boot_from_volume and \
            image.disk_format in IMAGE_TYPES:
        found.append(('COMPUTE_IMAGE_TYPE_%s' % image.disk_format.upper(),
                      '%s (disk_format %s, query_placement_for_image_type_'
                      'support)' % (label, image.disk_format)))
    if metadata_prefilter:
        for key, prefix in sorted(METADATA_TRAITS.items()):
            if key in props:
                found.append(('%s_%s' % (prefix, props[key].replace(
                    '-', '_').upper()), '%s (%s=%s, image_metadata_'
                    'prefilter)' % (label, key, props[key])))
    return tuple(found)


def numa_property(image):
    """'image X: key=value' of the first property that gives the server a
    NUMA topology, or None (filters.numa refuses such a server)."""
    if image is None or not image.known:
        return None
    for key, applies in sorted(NUMA_KEYS.items()):
        if key in image.properties and applies(image.properties[key]):
            return 'image %s: %s=%s' % (image.label, key,
                                        image.properties[key])
    return None


def maxphysaddr_property(image):
    """The same for hw_maxphysaddr_bits, a host capability the API does not
    show (filters.capabilities)."""
    if image is not None and image.known and \
            MAXPHYSADDR_BITS in image.properties:
        return 'image %s: %s=%s' % (image.label, MAXPHYSADDR_BITS,
                                    image.properties[MAXPHYSADDR_BITS])
    return None


def _guests(hyp):
    """The (architecture, hypervisor type, VM mode) guests hyp surely
    supports, as the API shows it."""
    return _sure_guests(hyp.hypervisor_type or '', hyp.cpu_arch or '')


@functools.lru_cache(maxsize=256)  # a cloud has few kinds of hypervisor
def _sure_guests(hypervisor_type, cpu_arch):
    arch = cpu_arch.lower()
    arch = ARCH_ALIASES.get(arch, arch)
    return tuple((wanted or arch, hv, vm) for wanted, hv, vm in
                 SURE_GUESTS.get(hypervisor_type.lower(), ())
                 if wanted or arch)


class _Demands:
    """What a known image asks of any destination, worked out once."""

    def __init__(self, image):
        props = image.properties
        self.error = None
        try:
            self.asked = [_canonical(props, what)
                          for what in (ARCHITECTURE, HV_TYPE, VM_MODE)]
        except ValueError as exc:
            self.error, self.asked = str(exc), []
        self.wanted = tuple(a[1] if a else None for a in self.asked)
        key = VERSION[0] if VERSION[0] in props else VERSION[1]
        self.version_key, self.version = key, props.get(key)
        self.unmodelled = next(
            (key for key, applies in sorted(AS_CAPABLE_KEYS.items())
             if key in props and applies(props[key])), None)


def _fits(wanted, guest):
    return all(w is None or w == g for w, g in zip(wanted, guest))


@functools.lru_cache(maxsize=4096)  # asked for every (server, hypervisor)
def _demands(image):
    return _Demands(image)


def _image_properties(image, dest):
    """ImagePropertiesFilter on a known image: None or why not."""
    demands = _demands(image)
    if demands.error:
        return 'image %s: %s, so the leveller cannot check it ' \
            '(ImagePropertiesFilter)' % (image.label, demands.error)
    if not any(demands.asked):
        return None
    if not any(_fits(demands.wanted, guest) for guest in _guests(dest)):
        return 'image %s asks for %s: %s (hypervisor type %s, CPU ' \
            'architecture %s) is not known to run such guests: the API ' \
            'shows only those two (ImagePropertiesFilter)' % (
                image.label, ', '.join('%s=%s' % a for a in demands.asked
                                       if a),
                dest.name, dest.hypervisor_type or 'unknown',
                dest.cpu_arch or 'unknown')
    key, predicate = demands.version_key, demands.version
    if predicate is None:
        return None
    if dest.hypervisor_version is None:
        return 'image %s asks for hypervisor version %s: the version of ' \
            '%s is unknown (ImagePropertiesFilter)' % (
                image.label, predicate, dest.name)
    try:
        ok = version_satisfies(predicate, dest.hypervisor_version)
    except ValueError:
        return 'image %s: %s=%s is not a version requirement the ' \
            'leveller reads, so it cannot check it (ImagePropertiesFilter)' \
            % (image.label, key, predicate)
    if not ok:
        return 'image %s asks for hypervisor version %s, %s has %s ' \
            '(ImagePropertiesFilter)' % (
                image.label, predicate, dest.name,
                version_text(dest.hypervisor_version))
    return None


def as_capable(source, dest):
    """Why dest is less capable than source, or None: every trait of
    source's resource provider (but the one of a disabled compute), the
    same hypervisor type and CPU architecture, all known."""
    if source.traits is None or dest.traits is None:
        return 'the traits of %s are unknown' % (
            dest.name if source.traits is not None else source.name)
    missing = sorted(source.traits - dest.traits - {DISABLED})
    if missing:
        more = ' and %d more' % (len(missing) - 3) if len(missing) > 3 else ''
        return '%s lacks its trait%s %s%s' % (
            dest.name, 's' if len(missing) > 1 else '',
            ', '.join(missing[:3]), more)
    for what, mine, theirs in (
            ('hypervisor type', source.hypervisor_type, dest.hypervisor_type),
            ('CPU architecture', source.cpu_arch, dest.cpu_arch)):
        if not mine or not theirs:
            return 'the %s of %s is unknown' % (
                what, dest.name if mine else source.name)
        if mine != theirs:
            return '%s has %s %s, not %s' % (dest.name, what, theirs, mine)
    return None


def image_properties(server, dest, state, rules):
    """ImagePropertiesFilter on the server's image, when it is known.
    (Its required traits are the trait rule's.)"""
    image = server.image
    if image is not None and image.known:
        return _image_properties(image, dest)


def as_capable_image(server, dest, state, rules):
    """The leveller's conservative rule, where the image's properties are
    unknown or set but not modelled: the destination is as capable as the
    source (see the module's comment)."""
    image = server.image
    if image is None:  # not recorded: a snapshot of before they were read
        return None
    if image.known:
        key = _demands(image).unmodelled
        if key is None:
            return None
        why = 'image %s sets %s=%s, which Nova turns into required traits ' \
            'the leveller does not model' % (image.label, key,
                                             image.properties[key])
    else:
        why = 'the properties of image %s are unknown (%s)' % (
            image.label, image.why or 'not read')
    source = rules.snapshot.hypervisor(state.host_of(server.id))
    weaker = as_capable(source, dest)
    if weaker:
        return '%s: it moves only to a hypervisor as capable as %s (every ' \
            'trait, the same hypervisor type and CPU architecture), and ' \
            '%s' % (why, source.name, weaker)
    return None
