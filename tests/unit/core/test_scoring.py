import math
import unittest

from osc_leveller.core.load import scoring
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.settings import config
from tests.unit import builders as b


class TestHostScore(unittest.TestCase):
    def test_allocations_use_placement_capacity(self):
        # 64 GiB total, 16 reserved, ratio 1.5: capacity 72 GiB; 36 used.
        hyps = [b.hypervisor('hv1', vcpus=8, ram_gb=64, cpu_ratio=2.0,
                             ram_ratio=1.5, reserved_mb=16 * 1024)]
        servers = [b.server('s1', 'hv1', vcpus=4, ram_gb=36)]
        state = state_mod.new_state(b.snapshot(hyps, servers))
        dims = state.dimensions('hv1')
        self.assertAlmostEqual(4 / 16.0, dims['cpu'])
        self.assertAlmostEqual(36 / 72.0, dims['ram'])
        self.assertIsNone(dims['cpu_pressure'])
        self.assertAlmostEqual((0.25 + 0.5) / 2, state.score('hv1'))
        self.assertEqual(scoring.ALLOCATIONS,
                         state.load_model.hosts['hv1'].mode)

    def test_metrics_win_over_allocations(self):
        hyps = [b.hypervisor('hv1', cpu=0.6, ram=0.2)]
        servers = [b.server('s1', 'hv1', vcpus=30)]
        state = state_mod.new_state(b.snapshot(hyps, servers))
        self.assertAlmostEqual(0.4, state.score('hv1'))
        self.assertEqual(scoring.METRICS, state.load_model.hosts['hv1'].mode)

    def test_weights_and_pressure(self):
        hyps = [b.hypervisor('hv1', metrics={
            'cpu': 0.8, 'ram': 0.4, 'cpu_pressure': 0.2, 'ram_pressure': 0.0})]
        snap = b.snapshot(hyps, [])
        weights = dict(config.DEFAULT_WEIGHTS, cpu=3.0)
        state = state_mod.new_state(snap, weights)
        expected = (3 * 0.8 + 1 * 0.4 + 0.5 * 0.2 + 0.5 * 0.0) / 5.0
        self.assertAlmostEqual(expected, state.score('hv1'))
        self.assertAlmostEqual(0.2, state.dimensions('hv1')['cpu_pressure'])

    def test_the_server_count_when_weighted(self):
        # hv1 and hv2 carry the same load, in 6 servers and in 2; hv3 has
        # none. The count that is 100 %: twice the mean, 2 x 8 / 3.
        hyps = [b.hypervisor(h) for h in ('hv1', 'hv2', 'hv3')]
        servers = [b.server('a%d' % i, 'hv1', vcpus=2, ram_gb=8)
                   for i in range(6)] + [
            b.server('b%d' % i, 'hv2', vcpus=6, ram_gb=24) for i in range(2)]
        snap = b.snapshot(hyps, servers)
        plain = state_mod.new_state(snap)
        self.assertAlmostEqual(plain.score('hv1'), plain.score('hv2'))
        state = state_mod.new_state(snap, dict(config.DEFAULT_WEIGHTS,
                                               count=2.0))
        size = 2 * 8 / 3
        for host, count in (('hv1', 6), ('hv2', 2), ('hv3', 0)):
            dims = state.dimensions(host)
            self.assertAlmostEqual(count / size, dims['count'])
            self.assertAlmostEqual(
                (dims['cpu'] + dims['ram'] + 2.0 * dims['count']) / 4.0,
                state.score(host))
            self.assertAlmostEqual(state.score(host), sum(state.parts(host)))
        # A move takes one server's count with it.
        before = state.score('hv3')
        delta = state.load_model.delta('id-a0', 'hv3')
        state.apply('id-a0', 'hv3')
        self.assertAlmostEqual(before + delta, state.score('hv3'))
        self.assertAlmostEqual(1 / size, state.dimensions('hv3')['count'])
        self.assertAlmostEqual(
            (0.5 / 32 + 8 / 128 / 1 + 2 * 1 / size) / 4, state.score('hv3'))

    def test_delta_is_the_score_change_of_a_move(self):
        hyps = [b.hypervisor('hv1', cpu=0.7, ram=0.6),
                b.hypervisor('hv2', vcpus=64, ram_gb=256),
                b.hypervisor('hv3', cpu=0.1, ram=0.1, vcpus=16)]
        servers = [b.server('s1', 'hv1', vcpus=4, ram_gb=16, cpu=0.5),
                   b.server('s2', 'hv1', vcpus=8, ram_gb=8)]
        snap = b.snapshot(hyps, servers)
        for sid in ('id-s1', 'id-s2'):
            for dest in ('hv2', 'hv3'):
                state = state_mod.new_state(snap)
                model = state.load_model
                before = {h: state.score(h) for h in ('hv1', dest)}
                src_delta = model.delta(sid, 'hv1')
                dest_delta = model.delta(sid, dest)
                state.apply(sid, dest)
                self.assertAlmostEqual(before['hv1'] - src_delta,
                                       state.score('hv1'))
                self.assertAlmostEqual(before[dest] + dest_delta,
                                       state.score(dest))

    def test_unmeasured_server_takes_its_host_average(self):
        # Host: 16 threads at 50 % = 8 busy threads over 16 allocated vCPUs.
        hyps = [b.hypervisor('hv1', vcpus=16, cpu=0.5, ram=0.5)]
        servers = [b.server('s1', 'hv1', vcpus=4),
                   b.server('s2', 'hv1', vcpus=12)]
        model = scoring.LoadModel(b.snapshot(hyps, servers))
        self.assertAlmostEqual(2.0, model.servers['id-s1'].cores)
        self.assertAlmostEqual(6.0, model.servers['id-s2'].cores)


class TestDemand(unittest.TestCase):
    """A host's measured CPU is what its servers asked for: the threads
    busy plus the time their vCPUs waited for one (steal)."""

    def saturated(self, steal=0.25, pressure=None):
        # 16 threads all busy; a 16-vCPU server using 12 of them, and
        # waiting for a thread a quarter of its vCPUs' time: 4 more.
        metrics = {'cpu': 1.0, 'ram': 0.5}
        if pressure is not None:
            metrics['cpu_pressure'] = pressure
        hyps = [b.hypervisor('hv1', vcpus=16, metrics=metrics),
                b.hypervisor('hv2', vcpus=16, cpu=0.1, ram=0.5)]
        servers = [b.server('s1', 'hv1', vcpus=16, cpu=0.75, ram=0.5),
                   b.server('s2', 'hv1', vcpus=1, ram_gb=1)]
        servers[0]['usage']['cpu_steal'] = steal
        return state_mod.new_state(b.snapshot(hyps, servers))

    def test_a_saturated_host_scores_its_demand(self):
        state = self.saturated()
        self.assertAlmostEqual(20 / 16.0, state.dimensions('hv1')['cpu'])
        self.assertAlmostEqual((1.25 + 0.5) / 2, state.score('hv1'))
        self.assertAlmostEqual(16.0, state.load_model.servers['id-s1'].cores)
        # Moving s1 takes all it asked for off: 4 threads are left.
        state.apply('id-s1', 'hv2')
        self.assertAlmostEqual(4 / 16.0, state.dimensions('hv1')['cpu'])

    def test_without_steal_it_stops_at_100_percent(self):
        state = self.saturated(steal=None)
        self.assertAlmostEqual(1.0, state.dimensions('hv1')['cpu'])
        self.assertAlmostEqual(12.0, state.load_model.servers['id-s1'].cores)

    def test_pressure_as_measured(self):
        """Pressure follows demand, and is what was measured now."""
        state = self.saturated(pressure=0.3)
        self.assertAlmostEqual(0.3, state.dimensions('hv1')['cpu_pressure'])

    def test_a_vcpu_runs_or_waits(self):
        """Used plus steal above 100 % of a vCPU (two rates read apart)
        counts as 100 %."""
        state = self.saturated(steal=0.5)
        self.assertAlmostEqual(16.0, state.load_model.servers['id-s1'].cores)
        self.assertAlmostEqual(20 / 16.0, state.dimensions('hv1')['cpu'])


class TestImbalance(unittest.TestCase):
    def test_domain_of(self):
        snap = b.snapshot([b.hypervisor('hv1', az='az2', model='Icelake'),
                           b.hypervisor('hv2', az='', model='')], [])
        self.assertEqual('az2/Icelake', scoring.domain_of(snap.hypervisor(
            'hv1')))
        self.assertEqual('no-az/x86_64', scoring.domain_of(
            snap.hypervisor('hv2')))

    def test_domain_stats_and_pooled(self):
        scores = {'a': 0.2, 'b': 0.4, 'c': 0.9, 'd': 0.9}
        domains = {'a': 'd1', 'b': 'd1', 'c': 'd2', 'd': 'd2'}
        stats = scoring.domain_stats(scores, domains)
        self.assertEqual(['d1', 'd2'], [s.domain for s in stats])
        self.assertAlmostEqual(0.1, stats[0].imbalance)
        self.assertAlmostEqual(0.2, stats[0].gap)
        self.assertEqual(('b', 'a'), (stats[0].hottest, stats[0].coolest))
        self.assertEqual(0.0, stats[1].imbalance)
        self.assertAlmostEqual(math.sqrt((2 * 0.01 + 0) / 4),
                               scoring.pooled_imbalance(stats))
        self.assertEqual(0.0, scoring.pooled_imbalance([]))
