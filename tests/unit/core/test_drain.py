import unittest

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.planning import drain
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import filters
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b


def cloud(extra_servers=(), hosts=4):
    hyps = [b.hypervisor('hv%d' % i) for i in range(1, hosts + 1)]
    hyps.append(b.hypervisor('other', az='az2'))
    servers = [b.server('s%d' % i, 'hv1', vcpus=2, ram_gb=8 + 2 * i)
               for i in range(6)]
    servers += [b.server('base%d' % h, 'hv%d' % h, vcpus=2, ram_gb=4 * h)
                for h in range(2, hosts + 1)]
    return hyps, servers + list(extra_servers)


class TestPlanDrain(unittest.TestCase):
    def drain(self, hyps, servers, groups=(), migrations=(), **kw):
        snap = b.snapshot(hyps, servers, groups, migrations)
        return snap, drain.plan_drain(snap, ['hv1'], opts.PlannerOptions(),
                                      **kw)

    def test_empties_the_host_within_every_rule(self):
        hyps, servers = cloud()
        snap, result = self.drain(hyps, servers)
        self.assertTrue(result.complete)
        self.assertEqual(6, len(result.moves))
        state = state_mod.new_state(snap)
        rules = filters.Rules(snap, opts.PlannerOptions())
        for move in result.moves:
            self.assertIn(move.destination, ('hv2', 'hv3', 'hv4'))
            self.assertIsNone(filters.why_not_destination(
                snap.server(move.server_id),
                snap.hypervisor(move.destination), state, rules))
            state.apply(move.server_id, move.destination)
        # Spread, not piled on one neighbour: every destination gets some.
        self.assertEqual({'hv2', 'hv3', 'hv4'},
                         {m.destination for m in result.moves})
        scores = [state.score(h) for h in ('hv2', 'hv3', 'hv4')]
        self.assertLess(max(scores) - min(scores), 0.1)
        # One move into each destination per wave.
        for wave in {m.wave for m in result.moves}:
            dests = [m.destination for m in result.moves if m.wave == wave]
            self.assertEqual(len(dests), len(set(dests)))
        self.assertEqual(sorted(m.wave for m in result.moves),
                         [m.wave for m in result.moves])
        self.assertIn('drain hv1: cmp-hv', result.moves[0].reason)

    def test_who_stays_and_why(self):
        hyps, servers = cloud([
            b.server('locked', 'hv1', locked=True),
            b.server('busy', 'hv1', task_state='rebooting'),
            b.server('stopped', 'hv1', status='SHUTOFF'),
            b.server('gpu', 'hv1', blockers=['vGPU allocation']),
            b.server('error', 'hv1', status='ERROR'),
            b.server('paused', 'hv1', status='PAUSED')])
        _, result = self.drain(hyps, servers)
        stay = {s.name: why for s, why in result.stay}
        self.assertIn('locked', stay['locked'])
        self.assertIn('task_state rebooting', stay['busy'])
        self.assertIn('--cold-migrate-stopped', stay['stopped'])
        self.assertIn('vGPU allocation', stay['gpu'])
        self.assertIn('status ERROR', stay['error'])
        self.assertNotIn('paused', stay)
        self.assertFalse(result.complete)

    def test_stopped_servers_go_cold_on_request(self):
        hyps, servers = cloud([b.server('stopped', 'hv1', status='SHUTOFF')])
        _, result = self.drain(hyps, servers, cold_migrate_stopped=True)
        self.assertTrue(result.complete)
        stopped = next(m for m in result.moves if m.server_name == 'stopped')
        self.assertEqual(drain.COLD, result.methods[stopped.server_id])
        self.assertEqual(drain.LIVE, result.methods['id-s0'])

    def test_cooldown_does_not_hold_back_maintenance(self):
        hyps, servers = cloud()
        recent = {'id': '1', 'server_id': 'id-s0', 'status': 'completed',
                  'migration_type': 'live-migration', 'source_compute': 'hv2',
                  'dest_compute': 'hv1', 'created_at': b.TAKEN_AT,
                  'updated_at': b.TAKEN_AT}
        _, result = self.drain(hyps, servers, migrations=[recent])
        self.assertTrue(result.complete)

    def test_anti_affinity_is_kept(self):
        members = ['id-s0', 'id-base2', 'id-base3']
        group = {'id': 'g1', 'name': 'web', 'policy': 'anti-affinity',
                 'members': members}
        hyps, servers = cloud()
        _, result = self.drain(hyps, servers, groups=[group])
        s0 = next(m for m in result.moves if m.server_id == 'id-s0')
        self.assertEqual('hv4', s0.destination)

    def test_what_does_not_fit_is_named(self):
        hyps, servers = cloud(hosts=2)
        servers.append(b.server('huge', 'hv1', vcpus=8, ram_gb=130))
        _, result = self.drain(hyps, servers)
        self.assertEqual(['huge'], [s.name for s, _ in result.unplaced])
        why = result.unplaced[0][1]
        self.assertIn('no hypervisor accepts it', why)
        self.assertIn('above max_unit 131072 (1 hypervisor)', why)
        self.assertIn('availability zone az2 differs from the server\'s az1 '
                      '(the leveller keeps a server in its zone; Nova would '
                      'move this one, not pinned to a zone) (1 hypervisor)',
                      why)
        self.assertFalse(result.complete)

    def test_n_plus_one_after_the_drain(self):
        hyps, servers = cloud()
        _, result = self.drain(hyps, servers)
        self.assertEqual((), result.no_headroom)
        hyps, servers = cloud(hosts=3)
        servers += [b.server('big%d' % i, 'hv1', vcpus=2, ram_gb=30)
                    for i in range(2)]
        _, result = self.drain(hyps, servers)
        self.assertTrue(result.complete)
        self.assertEqual('az1/Gen1', result.no_headroom[0][0])
        self.assertRegex(result.no_headroom[0][1],
                         r'^losing hv[23], \d servers fit nowhere: .*'
                         r'MEMORY_MB full')


def busy_neighbour(hv2_cpu):
    return b.snapshot(*busy_neighbour_cloud(hv2_cpu))


def busy_neighbour_cloud(hv2_cpu):
    """hv1 to drain: live (8 vCPUs, all busy) and a stopped server; hv2
    has hv2_cpu of its 32 threads busy; hv3 has no RAM left for live."""
    hyps = [b.hypervisor('hv1', cpu=0.5, ram=0.5),
            b.hypervisor('hv2', cpu=hv2_cpu, ram=0.2),
            b.hypervisor('hv3', cpu=0.1, ram=0.9, ram_gb=64)]
    servers = [b.server('live', 'hv1', vcpus=8, ram_gb=32, cpu=1.0),
               b.server('stopped', 'hv1', status='SHUTOFF'),
               b.server('full', 'hv3', vcpus=2, ram_gb=60, cpu=0.1)]
    return hyps, servers


class TestSaturation(unittest.TestCase):
    """A drain, cold or not, sends no server where the servers would ask
    for more CPU than the hypervisor has threads, when planned and when
    each move is checked again."""

    def test_planned_live_or_cold(self):
        # 25.6 threads busy on hv2, and live asks for 8 more.
        snap = busy_neighbour(0.8)
        for cold in (False, True):
            with self.subTest(cold=cold):
                result = drain.plan_drain(snap, ['hv1'],
                                          opts.PlannerOptions(),
                                          cold_migrate_stopped=cold)
                self.assertEqual(
                    [('live', 'no hypervisor accepts it: CPU would be '
                      'saturated (1 hypervisor); MEMORY_MB full (1 '
                      'hypervisor)')],
                    [(s.name, why) for s, why in result.unplaced])
                self.assertEqual([('stopped', 'hv2')] if cold else [], [
                    (m.server_name, m.destination) for m in result.moves])

    def test_checked_again_live_or_cold(self):
        """Planned with 22.4 threads busy on hv2; by the time the move
        starts, 25.6 are."""
        options = opts.PlannerOptions()
        for cold in (False, True):
            with self.subTest(cold=cold):
                planned = drain.plan_drain(busy_neighbour(0.7), ['hv1'],
                                           options, cold_migrate_stopped=cold)
                move = next(m for m in planned.moves
                            if m.server_name == 'live')
                self.assertEqual('hv2', move.destination)
                now = busy_neighbour(0.8)
                self.assertEqual(
                    'hv2: CPU would be saturated: its servers would ask for '
                    '33.6 of its 32 threads (25.6 before this server)',
                    checks.drain(cold)(move, now, state_mod.new_state(now),
                                       filters.Rules(now, options)))
                now = busy_neighbour(0.7)
                self.assertIsNone(checks.drain(cold)(
                    move, now, state_mod.new_state(now),
                    filters.Rules(now, options)))
