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
(which never run here: the storage is shared) are left as they are.

One more difference, for a regression of Nova 34.0.0: an aborted live
migration (DELETE /servers/ID/migrations/ID) ends with the server in ERROR.
Its monitor sees libvirt's job cancelled and rolls the migration back
(status cancelled, the guest running on its source), but the driver now
collects the migration thread's result afterwards, whose migrateToURI3
failed with "operation aborted: job 'migration out' canceled by client",
and the compute manager then sets the migration to error and the server
to ERROR. Nova before 34 only logged that thread's failure, and so does
this driver for that one error; any other failure is raised as before.
"""

from oslo_log import log as logging

from nova.virt.libvirt import driver

LOG = logging.getLogger(__name__)


class DevCloudLibvirtDriver(driver.LibvirtDriver):

    def _parse_migration_flags(self):
        super()._parse_migration_flags()
        # driver.libvirt: the libvirt module, imported by the driver's
        # constructor before init_host gets here
        self._live_migration_flags |= driver.libvirt.VIR_MIGRATE_UNSAFE

    def _live_migration_operation(self, *args, **kwargs):
        try:
            super()._live_migration_operation(*args, **kwargs)
        except driver.libvirt.libvirtError as exc:
            if exc.get_error_code() != driver.libvirt.VIR_ERR_OPERATION_ABORTED:
                raise
            # the monitor rolls the cancelled migration back (see above)
            LOG.warning('devcloud: live migration aborted (%s): left to the '
                        'monitor, as Nova before 34 did', exc)
