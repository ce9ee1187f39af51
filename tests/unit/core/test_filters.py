import unittest

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b


def check(hyps, servers, server_name, dest, groups=(), migrations=(),
          **options):
    snap = b.snapshot(hyps, servers, groups, migrations)
    rules = filters.Rules(snap, opts.PlannerOptions(**options))
    server = snap.find_server(server_name)
    state = state_mod.new_state(snap)
    return policy.BALANCE.why_not_to(server, snap.hypervisor(dest), state,
                                     rules)


def pair(**dest_extra):
    """hv1 hosting s1, an empty hv2 configured by dest_extra."""
    return [b.hypervisor('hv1'), b.hypervisor('hv2', **dest_extra)]


class TestServerFilters(unittest.TestCase):
    def reason(self, server_extra=None, migrations=(), **options):
        servers = [b.server('s1', 'hv1', **(server_extra or {}))]
        return check(pair(), servers, 's1', 'hv2', migrations=migrations,
                     **options)

    def test_movable_server_passes(self):
        self.assertIsNone(self.reason())

    def test_paused_server_passes(self):
        self.assertIsNone(self.reason({'status': 'PAUSED'}))

    def test_shutoff_rejected(self):
        self.assertIn('status SHUTOFF', self.reason({'status': 'SHUTOFF'}))

    def test_task_state_rejected(self):
        self.assertIn('task_state image_snapshot',
                      self.reason({'task_state': 'image_snapshot'}))

    def test_locked_rejected_unless_included(self):
        self.assertIn('locked', self.reason({'locked': True}))
        self.assertIsNone(self.reason({'locked': True}, include_locked=True))

    def test_migration_in_flight_rejected(self):
        mig = {'server_id': 'id-s1', 'status': 'running',
               'migration_type': 'live-migration'}
        self.assertIn('already in progress (status running)',
                      self.reason(migrations=[mig]))

    def test_blocker_rejected(self):
        self.assertIn('cannot live-migrate: PCI device',
                      self.reason({'blockers': ['PCI device']}))

    def test_numa_topology_cannot_be_checked(self):
        """The API does not show free CPUs of NUMA cells: such a server
        does not live-migrate by the leveller's hand."""
        for specs, why in (({'hw:cpu_policy': 'dedicated'},
                            'hw:cpu_policy=dedicated'),
                           ({'hw:numa_nodes': '2'}, 'hw:numa_nodes=2'),
                           ({'hw:mem_page_size': 'large'},
                            'hw:mem_page_size=large'),
                           ({'hw:cpu_policy': 'shared'}, None)):
            flavor = {'name': 'f', 'vcpus': 2, 'ram': 4096,
                      'extra_specs': specs}
            reason = self.reason({'flavor': flavor})
            if why is None:
                self.assertIsNone(reason)
            else:
                self.assertEqual(
                    'has a NUMA topology (%s): the API does not show which '
                    'CPUs and memory of a hypervisor\'s NUMA cells are free, '
                    'so the leveller cannot check that a destination fits it '
                    '(NUMATopologyFilter)' % why, reason)
        # pinned CPUs an image asked for show in the allocation
        self.assertIn('has a NUMA topology (dedicated CPUs (PCPU))',
                      self.reason({'resources': {'PCPU': 2,
                                                 'MEMORY_MB': 4096}}))
        self.assertIn('numa', filters.CHOICES)

    def test_capabilities_cannot_be_checked(self):
        flavor = {'name': 'f', 'vcpus': 2, 'ram': 4096, 'extra_specs': {
            'capabilities:cpu_info:vendor': 'Intel'}}
        self.assertIn('flavor extra spec capabilities:cpu_info:vendor: the '
                      'API does not show', self.reason({'flavor': flavor}))

    def test_opt_out_by_metadata_or_tag(self):
        self.assertIn('opted out', self.reason(
            {'metadata': {'leveller:exclude': 'true'}}))
        self.assertIn('opted out', self.reason({'tags': ['leveller:exclude']}))
        self.assertIsNone(self.reason(
            {'metadata': {'leveller:exclude': 'false'}}))

    def test_project_filters(self):
        self.assertIn('project p1 is excluded', self.reason(
            exclude_projects=frozenset(['p1'])))
        self.assertIn('not among the selected projects', self.reason(
            projects=frozenset(['p2'])))
        self.assertIsNone(self.reason(projects=frozenset(['p1'])))

    def test_cooldown_from_migration_history(self):
        recent = {'server_id': 'id-s1', 'status': 'completed',
                  'updated_at': '2026-11-20T10:00:00Z'}
        self.assertIn('migrated 2.0 h ago, inside the 6 h cooldown',
                      self.reason(migrations=[recent]))
        self.assertIsNone(self.reason(migrations=[recent], cooldown_hours=1))
        failed = dict(recent, status='error')
        self.assertIsNone(self.reason(migrations=[failed]))

    def test_every_move_nova_finishes_starts_the_cooldown(self):
        # An evacuation ends 'done' (Nova's resource tracker), a cold
        # migration or resize 'confirmed', a live migration 'completed'.
        for status in ('completed', 'confirmed', 'done', 'Done'):
            moved = {'server_id': 'id-s1', 'status': status,
                     'migration_type': 'evacuation',
                     'updated_at': '2026-11-20T10:00:00Z'}
            self.assertIn('inside the 6 h cooldown',
                          self.reason(migrations=[moved]), status)
        # Back where it was: no cooldown.
        for status in ('reverted', 'failed', 'error', 'cancelled'):
            stayed = {'server_id': 'id-s1', 'status': status,
                      'updated_at': '2026-11-20T10:00:00Z'}
            self.assertIsNone(self.reason(migrations=[stayed]), status)

    def test_cooldown_doubles_with_each_move_in_the_last_24h(self):
        def moved(when, created=None):
            return {'server_id': 'id-s1', 'status': 'completed',
                    'created_at': created or when, 'updated_at': when}
        last = moved('2026-11-20T10:00:00Z')  # 2 h before the snapshot
        self.assertIn('migrated 2.0 h ago, inside the 6 h cooldown',
                      self.reason(migrations=[last]))
        two = [moved('2026-11-20T02:00:00Z'), last]
        reason = self.reason(migrations=two, cooldown_hours=1)
        self.assertIsNone(reason)  # 2 h after, a 1 h cooldown x 2 is over
        reason = self.reason(migrations=two)
        self.assertIn('migrated 2.0 h ago, inside its 12 h cooldown (6 h, '
                      'x 2 for its 2 moves in the last 24 h)', reason)
        three = [moved('2026-11-19T13:00:00Z')] + two
        self.assertIn('inside its 24 h cooldown (6 h, x 4 for its 3 moves',
                      self.reason(migrations=three))
        self.assertIn('inside its 10 h cooldown (6 h, x 4 for its 3 moves '
                      'in the last 24 h, capped at cooldown_max)',
                      self.reason(migrations=three, cooldown_max_hours=10))
        # A move 25 h ago does not count; a cap below the cooldown does not
        # lower it.
        old = [moved('2026-11-19T11:00:00Z'), last]
        self.assertIn('inside the 6 h cooldown',
                      self.reason(migrations=old))
        self.assertIn('inside the 6 h cooldown', self.reason(
            migrations=three, cooldown_max_hours=1))

    def test_cooldown_grows_with_the_last_migrations_duration(self):
        slow = {'server_id': 'id-s1', 'status': 'completed',
                'created_at': '2026-11-20T09:00:00Z',
                'updated_at': '2026-11-20T10:00:00Z'}
        self.assertIn('migrated 2.0 h ago, inside its 12 h cooldown (12 x '
                      'its last migration\'s 60 min)',
                      self.reason(migrations=[slow]))
        quick = dict(slow, created_at='2026-11-20T09:58:00Z')
        self.assertIn('inside the 6 h cooldown',
                      self.reason(migrations=[quick]))

    def test_statuses_nova_has_not_ended_are_in_flight(self):
        # 'finished': a resize on its destination awaiting confirmation;
        # a status we do not know is in flight, as in Nova's own queries.
        for status in ('accepted', 'queued', 'preparing', 'running',
                       'running (post-copy)', 'pre-migrating', 'migrating',
                       'post-migrating', 'finished', 'confirming',
                       'reverting', 'some-future-status'):
            mig = {'server_id': 'id-s1', 'status': status,
                   'migration_type': 'resize',
                   'updated_at': '2026-11-20T10:00:00Z'}
            self.assertIn('already in progress (status %s)' % status,
                          self.reason(migrations=[mig]), status)

    def test_source_out_of_scope(self):
        servers = [b.server('s1', 'hv1')]
        hyps = [b.hypervisor('hv1', status='disabled'), b.hypervisor('hv2')]
        self.assertIn('hv1 is disabled: plan only balances usable',
                      check(hyps, servers, 's1', 'hv2'))
        self.assertIn('hv1 is excluded', check(
            pair(), servers, 's1', 'hv2', exclude_hosts=frozenset(['hv1'])))
        self.assertIn('outside the selected availability zones', check(
            pair(), servers, 's1', 'hv2',
            availability_zones=frozenset(['az9'])))


class TestReturnWindow(unittest.TestCase):
    """Balancing sends no server back to a hypervisor it left lately."""

    def setUp(self):
        self.hyps = [b.hypervisor('hv1'), b.hypervisor('hv2'),
                     b.hypervisor('hv3')]
        self.servers = [b.server('s1', 'hv1')]
        # s1 came from hv2 ten hours before the snapshot.
        self.migrations = [{
            'server_id': 'id-s1', 'status': 'completed',
            'source_compute': b.compute_host('hv2'),
            'dest_compute': b.compute_host('hv1'),
            'updated_at': '2026-11-20T02:00:00Z'}]

    def reason(self, dest, hyps=None, the_policy=policy.BALANCE, **options):
        snap = b.snapshot(hyps or self.hyps, self.servers, (),
                          self.migrations)
        rules = filters.Rules(snap, opts.PlannerOptions(**options))
        return the_policy.why_not_to(snap.find_server('s1'),
                                     snap.hypervisor(dest),
                                     state_mod.new_state(snap), rules)

    def test_not_back_within_the_window(self):
        self.assertEqual(
            'it left %s 10.0 h ago, inside the 24 h return window (other '
            'hypervisors fit it)' % b.compute_host('hv2'), self.reason('hv2'))
        self.assertIsNone(self.reason('hv3'))

    def test_back_after_the_window_or_without_one(self):
        self.assertIsNone(self.reason('hv2', return_window_hours=8))
        self.assertIsNone(self.reason('hv2', return_window_hours=0))

    def test_back_when_it_is_the_only_fit(self):
        hyps = self.hyps[:2] + [b.hypervisor('hv3', status='disabled')]
        self.assertIsNone(self.reason('hv2', hyps))

    def test_only_balancing_keeps_it_away(self):
        # An operator's target placement, and a drain, may send it back.
        self.assertIsNone(self.reason('hv2', the_policy=policy.PLACEMENT))
        self.assertIsNone(self.reason('hv2', the_policy=policy.DRAIN))


class TestDestinationFilters(unittest.TestCase):
    def reason(self, dest_extra=None, server_extra=None, **options):
        servers = [b.server('s1', 'hv1', **(server_extra or {}))]
        return check(pair(**(dest_extra or {})), servers, 's1', 'hv2',
                     **options)

    def test_current_hypervisor_rejected(self):
        servers = [b.server('s1', 'hv1')]
        self.assertIn('current hypervisor', check(pair(), servers, 's1',
                                                  'hv1'))

    def test_excluded_host(self):
        self.assertEqual('excluded by --exclude-host', self.reason(
            exclude_hosts=frozenset(['hv2'])))

    def test_service_state(self):
        self.assertEqual('compute service is disabled (repair)', self.reason(
            {'service': {'status': 'disabled',
                         'disabled_reason': 'repair'}}))
        self.assertEqual('compute service is down', self.reason(
            {'state': 'down'}))
        self.assertEqual('compute service is forced down', self.reason(
            {'service': {'forced_down': True}}))

    def test_inventory_that_contradicts_allocations(self):
        # Placement says VCPU total 0, yet a server allocates 8 there.
        hyps = pair()
        hyps[1]['inventories']['VCPU']['total'] = 0
        servers = [b.server('s1', 'hv1'), b.server('s2', 'hv2', vcpus=8)]
        self.assertEqual(
            'its inventory contradicts its allocations: VCPU 8 allocated, '
            'but capacity 0 (total 0, reserved 0)',
            check(hyps, servers, 's1', 'hv2'))
        self.assertEqual(
            'its hypervisor hv2 is left out: VCPU 8 allocated, but capacity '
            '0 (total 0, reserved 0)', check(hyps, servers, 's2', 'hv1'))
        del hyps[1]['inventories']['VCPU']
        self.assertIn('VCPU 8 allocated, but no VCPU inventory',
                      check(hyps, servers, 's1', 'hv2'))

    def test_availability_zone(self):
        self.assertIn('availability zone az2 differs from the server\'s az1 '
                      '(the leveller keeps a server in its zone; Nova would '
                      'move this one, not pinned to a zone)',
                      self.reason({'az': 'az2'}))
        self.assertIn('same_zone', filters.CHOICES)

    def test_pinned_availability_zone(self):
        """Nova's prefilter (map_az_to_placement_aggregate): members of the
        aggregates that define the zone; the default zone, that no
        aggregate defines, restricts nothing."""
        def zone(name):
            return [{'name': 'agg-' + name,
                     'metadata': {'availability_zone': name}}]

        hyps = [b.hypervisor('hv1', az='az3', aggregates=zone('az3')),
                b.hypervisor('hv2', az='az1', aggregates=zone('az1')),
                b.hypervisor('hv3', az='az3', aggregates=zone('az3'))]
        servers = [b.server('s1', 'hv1', pinned_availability_zone='az3')]
        self.assertEqual('server is pinned to availability zone az3, '
                         'hypervisor is in az1',
                         check(hyps, servers, 's1', 'hv2'))
        self.assertIsNone(check(hyps, servers, 's1', 'hv3'))
        servers = [b.server('s1', 'hv1', pinned_availability_zone='nova')]
        snap = b.snapshot(hyps, servers)
        rules = filters.Rules(snap, opts.PlannerOptions())
        self.assertIsNone(filters.availability_zone(
            snap.servers[0], snap.hypervisor('hv2'),
            state_mod.new_state(snap), rules))

    def test_cpu_model(self):
        self.assertIn('CPU model Gen2 differs from the server\'s Gen1',
                      self.reason({'model': 'Gen2'}))

    def test_cpu_architecture(self):
        self.assertIn('CPU architecture aarch64 differs from x86_64',
                      self.reason({'cpu_info': {'arch': 'aarch64',
                                                'model': 'Gen1'}}))

    def test_cpu_features(self):
        def cpu(model, *features):
            return {'arch': 'x86_64', 'model': model,
                    'features': list(features)}

        hyps = [b.hypervisor('hv1', cpu_info=cpu('A', 'avx2', 'avx512f')),
                b.hypervisor('hv2', cpu_info=cpu('B', 'avx2')),
                b.hypervisor('hv3', cpu_info=cpu('C', 'avx2', 'avx512f',
                                                 'vaes'))]
        servers = [b.server('s1', 'hv1')]
        features = {'cpu_compatibility': config.CPU_FEATURES}
        self.assertIn('lacks CPU features of hv1: avx512f',
                      check(hyps, servers, 's1', 'hv2', **features))
        self.assertIsNone(check(hyps, servers, 's1', 'hv3', **features))
        self.assertIn('CPU model C differs', check(hyps, servers, 's1', 'hv3'))

    def test_hypervisor_version_and_type(self):
        """Nova's conductor: never to an older version, nor another type
        (_check_compatible_with_source_hypervisor)."""
        hyps = [b.hypervisor('hv1', hypervisor_type='QEMU',
                             hypervisor_version=8002000),
                b.hypervisor('hv2', hypervisor_type='QEMU',
                             hypervisor_version=7000000),
                b.hypervisor('hv3', hypervisor_type='QEMU',
                             hypervisor_version=9000000),
                b.hypervisor('hv4', hypervisor_type='VMware vCenter Server',
                             hypervisor_version=8002000),
                b.hypervisor('hv5')]
        servers = [b.server('s1', 'hv1')]
        self.assertEqual('hypervisor version 7.0.0 is older than hv1\'s '
                         '8.2.0', check(hyps, servers, 's1', 'hv2'))
        self.assertIsNone(check(hyps, servers, 's1', 'hv3'))
        self.assertEqual('hypervisor type VMware vCenter Server differs from '
                         'hv1\'s QEMU', check(hyps, servers, 's1', 'hv4'))
        # unknown (a snapshot of an older leveller): not compared
        self.assertIsNone(check(hyps, servers, 's1', 'hv5'))

    def test_aggregate_extra_specs(self):
        specs = {'aggregate_instance_extra_specs:ssd': 'true'}
        flavor = {'name': 'db', 'vcpus': 2, 'ram': 4096,
                  'extra_specs': specs}
        hyps = [b.hypervisor('hv1', aggregates=[
                    {'name': 'fast', 'metadata': {'ssd': 'true'}}]),
                b.hypervisor('hv2'),
                b.hypervisor('hv3', aggregates=[
                    {'name': 'slow', 'metadata': {'ssd': 'false'}},
                    {'name': 'fast2', 'metadata': {'ssd': 'true'}}]),
                b.hypervisor('hv4', aggregates=[
                    {'name': 'slow', 'metadata': {'ssd': 'false'}}])]
        servers = [b.server('s1', 'hv1', flavor=flavor)]
        self.assertIn('flavor wants aggregate metadata ssd=true, hypervisor '
                      'offers none', check(hyps, servers, 's1', 'hv2'))
        self.assertIsNone(check(hyps, servers, 's1', 'hv3'))
        self.assertIn('offers false', check(hyps, servers, 's1', 'hv4'))
        specs['aggregate_instance_extra_specs:ssd'] = '<or> maybe <or> false'
        self.assertIsNone(check(hyps, servers, 's1', 'hv4'))

    def test_aggregate_metadata_lists(self):
        """Nova splits each aggregate's value at commas
        (aggregate_metadata_get_by_host)."""
        flavor = {'name': 'db', 'vcpus': 2, 'ram': 4096, 'extra_specs': {
            'aggregate_instance_extra_specs:ssd': 'true'}}
        servers = [b.server('s1', 'hv1', flavor=flavor)]
        hyps = [b.hypervisor('hv1'), b.hypervisor('hv2', aggregates=[
            {'name': 'fast', 'metadata': {'ssd': 'nvme, true'}}])]
        self.assertIsNone(check(hyps, servers, 's1', 'hv2'))
        hyps[1]['aggregates'][0]['metadata']['ssd'] = 'nvme,truest'
        self.assertIn('offers nvme, truest', check(hyps, servers, 's1', 'hv2'))

    def test_scoped_specs_of_other_filters_are_ignored(self):
        flavor = {'vcpus': 2, 'ram': 4096,
                  'extra_specs': {'hw:watchdog_action': 'reset',
                                  'quota:cpu_shares': '2048'}}
        self.assertIsNone(self.reason(server_extra={'flavor': flavor}))

    def test_tenant_isolation(self):
        agg = [{'name': 'finance', 'metadata': {'filter_tenant_id': 'p9'}}]
        self.assertEqual('aggregate finance is reserved for other projects',
                         self.reason({'aggregates': agg}))
        self.assertIsNone(self.reason({'aggregates': agg},
                                      {'project_id': 'p9'}))

    def test_tenant_isolation_joins_every_aggregate(self):
        """AggregateMultiTenancyIsolation: the projects of every aggregate
        of the host together, lists split at commas, suffixed keys too."""
        aggs = [{'name': 'finance', 'metadata': {'filter_tenant_id': 'p9'}},
                {'name': 'shared', 'metadata': {
                    'filter_tenant_id': 'p7, p8', 'filter_tenant_id_2': 'p6'}}]
        for project in ('p9', 'p8', 'p6'):
            self.assertIsNone(self.reason({'aggregates': aggs},
                                          {'project_id': project}))
        self.assertEqual('aggregates finance, shared are reserved for other '
                         'projects', self.reason({'aggregates': aggs}))

    def test_tenant_confined_to_its_aggregates(self):
        """limit_tenants_to_placement_aggregate: a project a key names
        alone lands only in those aggregates; a list confines nobody."""
        finance = {'name': 'finance', 'metadata': {'filter_tenant_id_9': 'p1'}}
        shared = {'name': 'shared', 'metadata': {'filter_tenant_id': 'p1,p2'}}
        hyps = [b.hypervisor('hv1', aggregates=[finance]),
                b.hypervisor('hv2', aggregates=[shared]),
                b.hypervisor('hv3'),
                b.hypervisor('hv4', aggregates=[finance])]
        servers = [b.server('s1', 'hv1'),
                   b.server('s2', 'hv2', project_id='p2')]
        self.assertEqual('project p1 is confined to aggregate finance '
                         '(limit_tenants_to_placement_aggregate)',
                         check(hyps, servers, 's1', 'hv3'))
        self.assertIsNone(check(hyps, servers, 's1', 'hv4'))
        self.assertIsNone(check(hyps, servers, 's2', 'hv3'))

    def test_isolated_aggregate(self):
        """enable_isolated_aggregate_filtering: only flavors requiring the
        aggregate's trait (in any request group) go there."""
        agg = [{'name': 'gpu', 'metadata': {'trait:CUSTOM_GPU': 'required'}}]
        dest = {'aggregates': agg, 'traits': ['CUSTOM_GPU']}
        self.assertEqual('aggregate gpu takes only servers whose flavor '
                         'requires CUSTOM_GPU '
                         '(enable_isolated_aggregate_filtering)',
                         self.reason(dest))
        for key in ('trait:CUSTOM_GPU', 'trait1:CUSTOM_GPU'):
            flavor = {'name': 'g', 'vcpus': 2, 'ram': 4096,
                      'extra_specs': {key: 'required'}}
            self.assertIsNone(self.reason(dest, {'flavor': flavor}), key)

    def test_traits(self):
        flavor = {'name': 'nvme', 'vcpus': 2, 'ram': 4096,
                  'extra_specs': {'trait:CUSTOM_NVME': 'required'}}
        self.assertEqual('resource provider hv2 lacks trait CUSTOM_NVME '
                         'required by flavor nvme', self.reason(
                             server_extra={'flavor': flavor}))
        self.assertIsNone(self.reason({'traits': ['CUSTOM_NVME']},
                                      {'flavor': flavor}))
        flavor['extra_specs'] = {'trait:CUSTOM_SLOW': 'forbidden'}
        self.assertEqual('resource provider hv2 has trait CUSTOM_SLOW '
                         'forbidden by flavor nvme', self.reason(
                             {'traits': ['CUSTOM_SLOW']}, {'flavor': flavor}))
        self.assertIsNone(self.reason({'traits': ['CUSTOM_NVME']},
                                      {'flavor': flavor}))

    def test_traits_of_granular_groups_are_the_roots_too(self):
        # trait1:NAME belongs to request group 1; a server that may move
        # holds nothing on a child provider, so the root serves that
        # group as well.
        flavor = {'name': 'g', 'vcpus': 2, 'ram': 4096, 'extra_specs': {
            'resources1:VCPU': '2', 'trait1:CUSTOM_FAST': 'required',
            'trait_x-2:CUSTOM_SLOW': 'forbidden'}}
        self.assertIn('lacks trait CUSTOM_FAST', self.reason(
            server_extra={'flavor': flavor}))
        self.assertIn('has trait CUSTOM_SLOW forbidden', self.reason(
            {'traits': ['CUSTOM_FAST', 'CUSTOM_SLOW']}, {'flavor': flavor}))
        self.assertIsNone(self.reason({'traits': ['CUSTOM_FAST']},
                                      {'flavor': flavor}))

    def test_trait_values_nova_ignores_are_ignored(self):
        # Nova adds only the values required and forbidden (a warning for
        # any other); core/test_extra_specs.py has the keys it reads.
        for value in ('Required', 'preferred', ''):
            flavor = {'vcpus': 2, 'ram': 4096,
                      'extra_specs': {'trait:CUSTOM_NVME': value}}
            with self.subTest(value):
                self.assertIsNone(self.reason(
                    {'traits': None}, {'flavor': flavor}))

    def test_unknown_traits_refuse_trait_flavors_only(self):
        flavor = {'name': 'nvme', 'vcpus': 2, 'ram': 4096,
                  'extra_specs': {'trait:CUSTOM_SLOW': 'forbidden'}}
        self.assertEqual(
            'traits of resource provider hv2 are unknown (not read from '
            'Placement): cannot check trait CUSTOM_SLOW forbidden by flavor '
            'nvme', self.reason({'traits': None}, {'flavor': flavor}))
        # No list at all is unknown too, not "no traits".
        del flavor['extra_specs']
        self.assertIsNone(self.reason({'traits': None}, {'flavor': flavor}))

    def test_a_snapshot_without_traits_leaves_them_unknown(self):
        hyps = pair()
        del hyps[1]['traits']
        flavor = {'name': 'nvme', 'vcpus': 2, 'ram': 4096,
                  'extra_specs': {'trait:CUSTOM_NVME': 'required'}}
        servers = [b.server('s1', 'hv1', flavor=flavor)]
        self.assertIn('hv2 are unknown', check(hyps, servers, 's1', 'hv2'))

    def test_capacity_full(self):
        servers = [b.server('s1', 'hv1', ram_gb=64),
                   b.server('big', 'hv2', ram_gb=100)]
        reason = check(pair(), servers, 's1', 'hv2')
        self.assertIn('MEMORY_MB full: 102400 used + 65536 needed > 131072 '
                      'capacity ((131072 total - 0 reserved) x 1)', reason)

    def test_capacity_counts_reserved_and_ratio(self):
        servers = [b.server('s1', 'hv1', ram_gb=64)]
        self.assertIn('MEMORY_MB full', check(
            pair(reserved_mb=80 * 1024), servers, 's1', 'hv2'))
        self.assertIsNone(check(
            pair(reserved_mb=80 * 1024, ram_ratio=1.5), servers, 's1', 'hv2'))

    def test_capacity_missing_inventory_and_max_unit(self):
        servers = [b.server('s1', 'hv1', resources={'VCPU': 2,
                                                    'CUSTOM_FPGA': 1})]
        hyps = pair()
        hyps[0]['inventories']['CUSTOM_FPGA'] = {'total': 2}
        self.assertEqual('has no CUSTOM_FPGA inventory',
                         check(hyps, servers, 's1', 'hv2'))
        hyps = pair()
        hyps[1]['inventories']['VCPU']['max_unit'] = 4
        servers = [b.server('s1', 'hv1', vcpus=8)]
        self.assertEqual('needs 8 VCPU, above max_unit 4',
                         check(hyps, servers, 's1', 'hv2'))

    def test_capacity_min_unit_and_step_size(self):
        """Placement's _capacity_check_clause: min_unit <= amount, and
        amount a multiple of step_size."""
        hyps = pair()
        hyps[1]['inventories']['VCPU'].update(min_unit=4)
        self.assertEqual('needs 2 VCPU, below min_unit 4',
                         check(hyps, [b.server('s1', 'hv1')], 's1', 'hv2'))
        hyps = pair()
        hyps[1]['inventories']['MEMORY_MB'].update(step_size=3072)
        self.assertEqual('needs 4096 MEMORY_MB, not a multiple of step_size '
                         '3072',
                         check(hyps, [b.server('s1', 'hv1')], 's1', 'hv2'))

    def test_ceiling(self):
        hyps = [b.hypervisor('hv1', cpu=0.9),
                b.hypervisor('hv2', cpu=0.6, ram=0.95)]
        servers = [b.server('s1', 'hv1', vcpus=8, ram_gb=32, cpu=1.0)]
        self.assertIn('above the ceiling 0.85',
                      check(hyps, servers, 's1', 'hv2'))
        self.assertIsNone(check(hyps, servers, 's1', 'hv2', ceiling=1.5))

    def test_saturation(self):
        """25.6 of 32 threads busy, and a server asking for 8 more: its
        servers would queue, whatever the ceiling."""
        hyps = [b.hypervisor('hv1', cpu=0.9), b.hypervisor('hv2', cpu=0.8,
                                                           ram=0.1)]
        servers = [b.server('s1', 'hv1', vcpus=8, ram_gb=32, cpu=1.0)]
        self.assertEqual(
            'CPU would be saturated: its servers would ask for 33.6 of its '
            '32 threads (25.6 before this server)',
            check(hyps, servers, 's1', 'hv2', ceiling=1.5))
        hyps[1]['metrics']['cpu'] = 0.75
        self.assertIsNone(check(hyps, servers, 's1', 'hv2', ceiling=1.5))

    def test_saturation_counts_steal(self):
        """Steal is CPU asked for and not got: hv2 is 60 % busy (19.2
        threads) but its server waited 40 % of its 16 vCPUs' time (6.4
        more); s1 asks for what it used (6.4 threads) plus its own steal."""
        hyps = [b.hypervisor('hv1', cpu=0.9),
                b.hypervisor('hv2', cpu=0.6, ram=0.1)]
        servers = [b.server('s1', 'hv1', vcpus=8, ram_gb=8, cpu=0.8),
                   b.server('s2', 'hv2', vcpus=16, ram_gb=8, cpu=0.5)]
        servers[1]['usage']['cpu_steal'] = 0.4
        self.assertIsNone(check(hyps, servers, 's1', 'hv2', ceiling=1.5))
        servers[0]['usage']['cpu_steal'] = 0.2
        self.assertEqual(
            'CPU would be saturated: its servers would ask for 33.6 of its '
            '32 threads (25.6 before this server)',
            check(hyps, servers, 's1', 'hv2', ceiling=1.5))
        servers[1]['usage']['cpu_steal'] = 0.0
        self.assertIsNone(check(hyps, servers, 's1', 'hv2', ceiling=1.5))

    def test_no_saturation_without_measured_load(self):
        hyps = [b.hypervisor('hv1'), b.hypervisor('hv2')]
        servers = [b.server('s1', 'hv1', vcpus=32, ram_gb=8)]
        self.assertIsNone(check(hyps, servers, 's1', 'hv2', ceiling=1.5))


class TestServerGroups(unittest.TestCase):
    def setUp(self):
        self.hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]

    def group(self, policy, members, **rules):
        return {'id': 'g1', 'name': 'web', 'policy': policy,
                'members': ['id-' + m for m in members], 'rules': rules}

    def test_anti_affinity(self):
        servers = [b.server('web1', 'hv1'), b.server('web2', 'hv2')]
        group = self.group('anti-affinity', ['web1', 'web2'])
        self.assertEqual('anti-affinity group web: hv2 already hosts web2',
                         check(self.hyps, servers, 'web1', 'hv2', [group]))
        self.assertIsNone(check(self.hyps, servers, 'web1', 'hv3', [group]))

    def test_soft_anti_affinity_is_kept_too(self):
        servers = [b.server('web1', 'hv1'), b.server('web2', 'hv2')]
        group = self.group('soft-anti-affinity', ['web1', 'web2'])
        self.assertEqual(
            'soft-anti-affinity group web: hv2 already hosts web2 (a soft '
            'policy: Nova would allow it, the leveller keeps it)',
            check(self.hyps, servers, 'web1', 'hv2', [group]))
        self.assertIn('soft_server_groups', filters.CHOICES)

    def test_max_server_per_host(self):
        servers = [b.server('w1', 'hv1'), b.server('w2', 'hv2'),
                   b.server('w3', 'hv2')]
        group = self.group('anti-affinity', ['w1', 'w2'],
                           max_server_per_host=2)
        self.assertIsNone(check(self.hyps, servers, 'w1', 'hv2', [group]))
        group['members'].append('id-w3')
        self.assertIn('hv2 already hosts w2, w3',
                      check(self.hyps, servers, 'w1', 'hv2', [group]))

    def test_membership_from_the_server_side(self):
        servers = [b.server('web1', 'hv1'),
                   b.server('web2', 'hv2', server_groups=['g1'])]
        group = self.group('anti-affinity', ['web1'])
        self.assertIn('hv2 already hosts web2',
                      check(self.hyps, servers, 'web1', 'hv2', [group]))

    def test_deleted_members_do_not_count(self):
        servers = [b.server('web1', 'hv1')]
        group = self.group('anti-affinity', ['web1', 'gone'])
        self.assertIsNone(check(self.hyps, servers, 'web1', 'hv2', [group]))

    def moved(self, name, source, dest, status='completed', seconds_ago=60,
              kind='live-migration'):
        """A migration of name that ended seconds_ago before the snapshot
        (builders.TAKEN_AT, 12:00:00)."""
        when = '2026-11-20T11:%02d:%02dZ' % divmod(3600 - seconds_ago, 60)
        return {'server_id': 'id-' + name, 'status': status,
                'migration_type': kind, 'created_at': when,
                'updated_at': when, 'source_compute': b.compute_host(source),
                'dest_compute': dest and b.compute_host(dest)}

    def test_nova_still_counts_a_member_on_the_host_it_left(self):
        """The source compute reports the server as its own at the end of
        a live migration; the scheduler believes it until the compute's
        next instance sync (scheduler_instance_sync_interval, 120 s)."""
        servers = [b.server('web1', 'hv1'), b.server('web2', 'hv3')]
        group = self.group('anti-affinity', ['web1', 'web2'])
        left = [self.moved('web2', 'hv2', 'hv3', seconds_ago=60)]
        self.assertEqual(
            "anti-affinity group web: Nova's scheduler may still count web2 "
            "on hv2 (moved or tried there less than 120 s ago: it forgets "
            "once the compute syncs, scheduler_instance_sync_interval, and "
            "the API does not show when that is): the leveller waits that "
            "long", check(self.hyps, servers, 'web1', 'hv2', [group], left))
        # When it syncs is what the API cannot show: the wait is a choice.
        self.assertIn('lingering_members', filters.CHOICES)
        for kept in ([self.moved('web2', 'hv2', 'hv3', seconds_ago=180)],
                     [self.moved('web2', 'hv2', 'hv3', kind='migration')]):
            self.assertIsNone(check(self.hyps, servers, 'web1', 'hv2',
                                    [group], kept))
        self.assertIsNone(check(self.hyps, servers, 'web1', 'hv2', [group],
                                left, instance_sync_interval=30))
        # Only the strict filter reads the scheduler's list of servers.
        soft = self.group('soft-anti-affinity', ['web1', 'web2'])
        self.assertIsNone(check(self.hyps, servers, 'web1', 'hv2', [soft],
                                left))

    def test_and_on_the_host_it_was_tried_on(self):
        """The scheduler adds a member to the host it picks, even for a move
        the conductor then refuses; Nova records no destination then, so
        the member may be counted anywhere for a while."""
        self.hyps.append(b.hypervisor('hv4'))
        servers = [b.server('web1', 'hv1'), b.server('web2', 'hv3')]
        group = self.group('anti-affinity', ['web1', 'web2'])
        refused = [self.moved('web2', 'hv3', None, status='error',
                              seconds_ago=30)]
        for dest in ('hv2', 'hv4'):
            self.assertEqual(
                'anti-affinity group web: a move of web2 failed less than '
                '120 s ago, and Nova does not say which host its scheduler '
                'picked, where it counts it until the compute syncs '
                '(scheduler_instance_sync_interval): the leveller waits that '
                'long', check(self.hyps, servers, 'web1', dest, [group],
                              refused))
        self.assertIn('unrecorded_attempts', filters.CHOICES)
        tried = [self.moved('web2', 'hv3', 'hv2', status='error')]
        self.assertIn('count web2 on hv2', check(
            self.hyps, servers, 'web1', 'hv2', [group], tried))
        self.assertIsNone(check(self.hyps, servers, 'web1', 'hv4', [group],
                                tried))
        # With room for two, one ghost and no member is not full.
        two = self.group('anti-affinity', ['web1', 'web2'],
                         max_server_per_host=2)
        self.assertIsNone(check(self.hyps, servers, 'web1', 'hv2', [two],
                                tried))
        # One member there and one ghost fill it.
        three = self.group('anti-affinity', ['web1', 'web2', 'web3'],
                           max_server_per_host=2)
        there = servers + [b.server('web3', 'hv2')]
        self.assertIn('may still count web2 on hv2', check(
            self.hyps, there, 'web1', 'hv2', [three], tried))

    def test_affinity_never_split(self):
        servers = [b.server('db1', 'hv1'), b.server('db2', 'hv1')]
        group = self.group('affinity', ['db1', 'db2'])
        self.assertEqual(
            'affinity group web: moving it alone would split it from db2',
            check(self.hyps, servers, 'db1', 'hv2', [group]))

    def test_affinity_may_rejoin(self):
        servers = [b.server('db1', 'hv1'), b.server('db2', 'hv2')]
        group = self.group('affinity', ['db1', 'db2'])
        self.assertIsNone(check(self.hyps, servers, 'db1', 'hv2', [group]))

    def test_lone_affinity_member_stays(self):
        """Nova's group hosts include the member itself
        (ServerGroupAffinityFilter with scheduler utils'
        _get_group_details): its only member cannot leave its host."""
        servers = [b.server('db1', 'hv1')]
        group = self.group('affinity', ['db1'])
        self.assertEqual(
            'affinity group web: Nova keeps its only member on the host it '
            'is on', check(self.hyps, servers, 'db1', 'hv2', [group]))
        group['policy'] = 'soft-affinity'
        self.assertIsNone(check(self.hyps, servers, 'db1', 'hv2', [group]))
