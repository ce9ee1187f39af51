"""Nova's libvirt driver for the devcloud's real hypervisors.

Installed into the venv as nova/virt/devcloud_libvirt.py (nova loads
drivers from nova.virt only) and named by their configuration:
compute_driver = devcloud_libvirt.DevCloudLibvirtDriver.

The real hypervisors share one local directory as instances_path. Nova's
pre-checks find it shared (a file one compute writes there, the other
sees), so a live migration moves memory only. libvirt 9.0 (Debian 12)
though knows shared storage only by its file system type (NFS, GlusterFS,
Ceph, ...) and refuses the move: "Migration without shared storage is
unsafe". libvirt 10 lets qemu.conf name such a directory
(shared_filesystems); with 9.0 the flag VIR_MIGRATE_UNSAFE says the same,
and this driver adds it to Nova's live migration flags. Block migrations
(which never run here: the storage is shared) are left as they are, and
nothing else differs from Nova's driver.
"""

from nova.virt.libvirt import driver


class DevCloudLibvirtDriver(driver.LibvirtDriver):

    def _parse_migration_flags(self):
        super()._parse_migration_flags()
        # driver.libvirt: the libvirt module, imported by the driver's
        # constructor before init_host gets here
        self._live_migration_flags |= driver.libvirt.VIR_MIGRATE_UNSAFE
