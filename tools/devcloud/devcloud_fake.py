# Dev-cloud fake virt driver for nova (installed as nova/virt/devcloud_fake.py)
#
# compute_driver = devcloud_fake.DevCloudFakeDriver
#
# A thin subclass of nova.virt.fake.FakeDriver that makes every fake
# hypervisor individually configurable through a [devcloud_fake] section in
# that nova-compute's own config file:
#
#   [devcloud_fake]
#   vcpus = 32
#   memory_mb = 131072
#   local_gb = 2000
#   cpu_model = Cascadelake-Server
#   cpu_vendor = Intel
#   cpu_features = sse4_2,avx,avx2,avx512f
#   sockets = 2
#   cores = 8
#   threads = 2
#   hypervisor_version = 8002000     # int, as libvirt reports (8.2.0)
#   live_migration_seconds = 2.0     # simulated duration of a live migration
#   enforce_cpu_compat = true        # refuse live migration to a host that
#                                    # lacks a cpu feature of the source host
#   faults_dir = /path               # shared by all computes, see below
#   provider_config = true           # [compute] provider_config_location
#                                    # holds this hypervisor's provider.yaml
#   nodename = hv01.devcloud.test    # the hypervisor (compute node) name;
#                                    # empty: the service host, [DEFAULT] host
#
# Like a real cloud, the node name may differ from the service host: a short
# `host` for the compute service (what live migration, aggregates and
# `availability_zone=az:host` name) against an FQDN node, which is the
# hypervisor_hostname in os-hypervisors and on servers and the name of the
# Placement resource provider. A node's name must not change once Nova
# has recorded it (Nova refuses a known node uuid with another name).
#
# Fault injection, switched at run time by files in faults_dir (written by
# `devcloud fault`), read by the SOURCE compute when a live migration starts:
#   fail-incoming-<dest>   the transfer fails after its usual time and nova
#                          rolls the server back to ACTIVE on its source;
#   slow-incoming-<dest>   holds a number of seconds: the transfer takes that
#                          long instead (to test timeouts and aborts).
#   live-migration-seconds holds a number of seconds: every live migration
#                          takes that long instead of live_migration_seconds
#                          (0 for the conformance run's near-instant moves).
# An abort (DELETE /servers/{id}/migrations/{id}) ends a transfer early and
# rolls back the same way, with the migration 'cancelled' as libvirt's is.
#
# Dedicated CPUs as the libvirt driver reports them: [compute]
# cpu_dedicated_set (host CPU ids after the vcpus shared ones) becomes PCPU
# inventory, and the hypervisor a NUMA topology of one cell holding every
# CPU, so that hw:cpu_policy=dedicated servers boot, and live-migrate with
# a NUMA claim on the destination (the NUMA-aware live migration libvirt
# has had since Train).
#
# It also
#  * answers its own [DEFAULT] my_ip as its address (a resize's migration
#    records it as dest_host), as the libvirt driver does;
#  * uses the persistent node identity in $state_path/compute_id (like a
#    real single-node driver), so a compute can be restarted safely;
#  * reports CPU feature flags as HW_CPU_X86_* traits in placement;
#  * forgets the guest on the source host after a live migration.

import collections
import os
import threading

import os_traits
from oslo_config import cfg
from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova.compute import power_state
from nova import context as nova_context
from nova import exception
from nova import objects
import nova.conf
from nova.virt import fake
from nova.virt import hardware
import nova.virt.node

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

opts = [
    cfg.IntOpt('vcpus', default=16),
    cfg.IntOpt('memory_mb', default=65536),
    cfg.IntOpt('local_gb', default=1000),
    cfg.StrOpt('cpu_model', default='Nehalem'),
    cfg.StrOpt('cpu_vendor', default='Intel'),
    cfg.ListOpt('cpu_features', default=['pge', 'clflush']),
    cfg.IntOpt('sockets', default=1),
    cfg.IntOpt('cores', default=0,
               help='0 = vcpus / (sockets * threads)'),
    cfg.IntOpt('threads', default=1),
    cfg.IntOpt('hypervisor_version', default=1000),
    cfg.FloatOpt('live_migration_seconds', default=0.0),
    cfg.BoolOpt('enforce_cpu_compat', default=False),
    cfg.StrOpt('faults_dir', default=''),
    cfg.StrOpt('nodename', default='',
               help='hypervisor_hostname and resource provider name; '
                    'empty: the service host'),
]
CONF.register_opts(opts, group='devcloud_fake')


class DevCloudFakeDriver(fake.FakeDriver):

    def __init__(self, virtapi, read_only=False):
        c = CONF.devcloud_fake
        # FakeDriver.__init__ sizes its Resources() from these attributes.
        self.vcpus = c.vcpus
        self.memory_mb = c.memory_mb
        self.local_gb = c.local_gb
        super().__init__(virtapi, read_only)
        self.host_status_base['hypervisor_version'] = c.hypervisor_version
        self._aborts = {}  # instance uuid -> Event set by an abort

    # --- identity -----------------------------------------------------
    def init_host(self, host):
        self._host = host
        self._set_nodes([CONF.devcloud_fake.nodename or host])
        self._adopt_instances(host)

    def _adopt_instances(self, host):
        """Re-adopt the guests nova believes are on this host (the fake
        hypervisor's memory is lost when nova-compute restarts), so that a
        restarted compute does not power-sync them to SHUTOFF."""
        try:
            ctxt = nova_context.get_admin_context()
            insts = objects.InstanceList.get_by_host(
                ctxt, host, expected_attrs=['flavor'])
        except Exception as e:  # conductor not reachable yet, etc.
            LOG.warning('could not adopt existing instances: %s', e)
            return
        for inst in insts:
            if inst.uuid in self.instances:
                continue
            state = (power_state.RUNNING
                     if inst.power_state == power_state.RUNNING
                     else power_state.SHUTDOWN)
            self.instances[inst.uuid] = fake.FakeInstance(
                inst.name, state, inst.uuid)
            self.resources.claim(vcpus=inst.flavor.vcpus,
                                 mem=inst.flavor.memory_mb,
                                 disk=inst.flavor.root_gb)
        LOG.info('adopted %d existing instances on %s', len(insts), host)

    def _cpu_info(self):
        c = CONF.devcloud_fake
        cores = c.cores or max(1, c.vcpus // max(1, c.sockets * c.threads))
        return collections.OrderedDict([
            ('arch', 'x86_64'),
            ('model', c.cpu_model),
            ('vendor', c.cpu_vendor),
            ('features', list(c.cpu_features)),
            ('topology', {'cores': cores, 'threads': c.threads,
                          'sockets': c.sockets}),
        ])

    def get_available_resource(self, nodename):
        res = super().get_available_resource(nodename)
        if not res:
            return res
        res['cpu_info'] = jsonutils.dumps(self._cpu_info())
        res['uuid'] = nova.virt.node.get_local_node_uuid()
        topology = self._numa_topology()
        if topology is not None:
            res['numa_topology'] = topology._to_json()
        return res

    def _numa_topology(self):
        """One NUMA cell with the shared CPUs 0..vcpus-1 and the
        dedicated ones, if [compute] cpu_dedicated_set names any."""
        dedicated = hardware.get_cpu_dedicated_set()
        if not dedicated:
            return None
        memory = CONF.devcloud_fake.memory_mb
        shared = set(range(CONF.devcloud_fake.vcpus))
        return objects.NUMATopology(cells=[objects.NUMACell(
            id=0, socket=0, cpuset=shared, pcpuset=set(dedicated),
            memory=memory, cpu_usage=0, memory_usage=0, pinned_cpus=set(),
            # no SMT: each CPU its own thread sibling set, as libvirt says
            siblings=[{cpu} for cpu in sorted(shared | set(dedicated))],
            mempages=[objects.NUMAPagesTopology(
                size_kb=4, total=memory * 256, used=0, reserved=0)],
            network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False))])

    def get_nodenames_by_uuid(self, refresh=False):
        return {nova.virt.node.get_local_node_uuid():
                self.get_available_nodes()[0]}

    def get_host_ip_addr(self):
        # as the libvirt driver: the compute's own [DEFAULT] my_ip (the fake
        # driver's answer is one fixed address for every hypervisor)
        return CONF.my_ip

    def get_host_uptime(self):
        return ' 10:00:00 up 42 days,  1:23,  0 users,  load average: 0.10, 0.10, 0.10'

    # --- placement ----------------------------------------------------
    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        super().update_provider_tree(provider_tree, nodename, allocations)
        dedicated = hardware.get_cpu_dedicated_set()
        if dedicated:
            # as libvirt: PCPU from cpu_dedicated_set, never overcommitted
            inventory = dict(provider_tree.data(nodename).inventory)
            inventory['PCPU'] = {
                'total': len(dedicated), 'min_unit': 1,
                'max_unit': len(dedicated), 'step_size': 1,
                'allocation_ratio': 1.0, 'reserved': 0}
            provider_tree.update_inventory(nodename, inventory)
        traits = set()
        for feat in CONF.devcloud_fake.cpu_features:
            name = 'HW_CPU_X86_' + feat.strip().upper().replace('.', '_')
            if os_traits.is_custom(name) or name in os_traits.get_traits():
                traits.add(name)
        if traits:
            provider_tree.add_traits(nodename, *traits)

    # --- live migration -----------------------------------------------
    def check_can_live_migrate_destination(self, context, instance,
                                           src_compute_info, dst_compute_info,
                                           block_migration=False,
                                           disk_over_commit=False):
        if CONF.devcloud_fake.enforce_cpu_compat:
            try:
                src = jsonutils.loads(src_compute_info['cpu_info'])
                src_feats = set(src.get('features', []))
            except Exception:
                src_feats = set()
            missing = src_feats - set(CONF.devcloud_fake.cpu_features)
            if missing:
                raise exception.MigrationPreCheckError(
                    reason='destination %s CPU (%s) lacks features %s of '
                           'the source CPU (%s)' % (
                               self._host, CONF.devcloud_fake.cpu_model,
                               sorted(missing), src.get('model')))
        data = super().check_can_live_migrate_destination(
            context, instance, src_compute_info, dst_compute_info,
            block_migration, disk_over_commit)
        # As libvirt: a server with a NUMA topology (pinned CPUs) is
        # claimed on the destination, its CPUs pinned anew there.
        data.dst_supports_numa_live_migration = True
        return data

    def check_can_live_migrate_source(self, context, instance,
                                      dest_check_data, block_device_info=None):
        if 'dst_supports_numa_live_migration' in dest_check_data:
            dest_check_data.src_supports_numa_live_migration = True
        return dest_check_data

    def _fault(self, name, dest=None):
        faults = CONF.devcloud_fake.faults_dir
        if dest is not None:
            name = '%s-%s' % (name, dest)
        path = os.path.join(faults, name) if faults else ''
        if not path or not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read().strip() or 'on'

    def live_migration(self, context, instance, dest,
                       post_method, recover_method, block_migration=False,
                       migrate_data=None):
        secs = float(self._fault('live-migration-seconds') or
                     CONF.devcloud_fake.live_migration_seconds)
        slow = self._fault('slow-incoming', dest)
        if slow:
            secs = float(slow)
        aborted = self._aborts.setdefault(instance.uuid, threading.Event())
        LOG.info('Simulating live migration to %s for %.1fs', dest, secs,
                 instance=instance)
        aborted.wait(secs)
        self._aborts.pop(instance.uuid, None)
        failed = self._fault('fail-incoming', dest)
        if aborted.is_set() or failed:
            LOG.warning('Simulated live migration to %s %s: rolling back',
                        dest, 'aborted' if aborted.is_set() else 'failed',
                        instance=instance)
            # Like libvirt's monitor: an aborted job ends 'cancelled'.
            recover_method(context, instance, dest, migrate_data,
                           migration_status='cancelled' if aborted.is_set()
                           else 'failed')
            return
        post_method(context, instance, dest, block_migration, migrate_data)

    def live_migration_abort(self, instance):
        event = self._aborts.get(instance.uuid)
        if event is not None:
            event.set()

    def post_live_migration(self, context, instance, block_device_info,
                            migrate_data=None):
        # Runs on the source host: forget the guest here.
        self.destroy(context, instance, network_info=None,
                     block_device_info=block_device_info)
