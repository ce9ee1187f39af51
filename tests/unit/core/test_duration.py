"""Duration estimates of live migrations from Nova's own history."""

import json
import unittest

from osc_leveller.core.load import duration
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

NOW = snapshot_io.parse_time(b.TAKEN_AT)
MIB = 1024 * 1024


def record(server, seconds, status='completed', source='hv1', dest='hv2',
           ago=3600, number=[0]):
    """A live migration record as Nova's history has it: times in whole
    seconds, no progress figures."""
    number[0] += 1
    start = NOW - ago
    return {'id': str(number[0]), 'server_id': 'id-' + server,
            'status': status, 'migration_type': 'live-migration',
            'source_compute': b.compute_host(source),
            'dest_compute': b.compute_host(dest),
            'created_at': snapshot_io.format_time(start),
            'updated_at': snapshot_io.format_time(start + seconds)}


SIZES = (0.5, 1, 2, 0.5, 1)  # GiB of the servers moved before


def history(fixed=3, rate_mib=50, sizes=SIZES):
    """Completed moves of servers old0.. from hv1 to hv2 that took
    fixed + RAM / rate seconds."""
    return [record('old%d' % i, round(fixed + size * 1024 / rate_mib),
                   ago=7200 - 60 * i) for i, size in enumerate(sizes)]


def old_servers(sizes=SIZES):
    """The servers of history(), where it left them."""
    return [b.server('old%d' % i, 'hv2', ram_gb=size)
            for i, size in enumerate(sizes)]


def cloud(migrations, ram_gb=1, sizes=SIZES):
    hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
    servers = [b.server('web', 'hv1', ram_gb=ram_gb)] + old_servers(sizes)
    return b.snapshot(hyps, servers, migrations=migrations)


class TestEstimate(unittest.TestCase):
    def estimate(self, migrations, dest='hv2', **cloud_args):
        snap = cloud(migrations, **cloud_args)
        durations = duration.Durations(snap)
        return durations, durations.of(snap.server('id-web'),
                                       b.compute_host('hv1'),
                                       b.compute_host(dest))

    def test_no_history_no_estimate(self):
        durations, estimate = self.estimate([])
        self.assertFalse(durations)
        self.assertIsNone(estimate)

    def test_servers_gone_tell_nothing(self):
        # Their RAM is not known any more.
        durations, estimate = self.estimate(history(), sizes=())
        self.assertFalse(durations)
        self.assertIsNone(estimate)

    def test_fixed_cost_and_rate_are_told_apart(self):
        durations, estimate = self.estimate(history())
        self.assertAlmostEqual(3, durations.fixed, delta=1)
        self.assertAlmostEqual(50, durations.rate / MIB, delta=3)
        self.assertAlmostEqual(3 + 1024 / 50, estimate.seconds, delta=2)
        self.assertRegex(estimate.basis, r'^1024 MiB of RAM at \d+ MiB/s \(5 '
                         r'between these hosts\), \d s fixed; from 5 '
                         r'completed live migrations$')

    def test_other_hosts_use_the_cloud_wide_rate(self):
        _, estimate = self.estimate(history(), dest='hv3')
        self.assertIn('(cloud-wide)', estimate.basis)
        self.assertAlmostEqual(3 + 1024 / 50, estimate.seconds, delta=2)

    def test_a_faster_pair_has_its_own_rate(self):
        sizes = SIZES + (4, 8, 16)
        migs = history() + [
            record('old%d' % i, round(3 + sizes[i] * 1024 / 200),
                   source='hv3', dest='hv1', ago=600 + i)
            for i in range(len(SIZES), len(sizes))]
        _, slow = self.estimate(migs, dest='hv2', sizes=sizes)
        _, fast = self.estimate(migs, dest='hv3', sizes=sizes)
        self.assertAlmostEqual(3 + 1024 / 50, slow.seconds, delta=2)
        self.assertAlmostEqual(3 + 1024 / 200, fast.seconds, delta=2)
        self.assertIn('(3 between these hosts)', fast.basis)

    def test_its_own_pace(self):
        # Its last move took 2.5 times what its RAM alone would: it
        # writes to its memory while it is copied.
        migs = history() + [record('web', round(3 + 2.5 * 1024 / 50),
                                   source='hv2', dest='hv1', ago=1800)]
        _, estimate = self.estimate(migs)
        self.assertIn('x 2.5, the pace of its last live migration',
                      estimate.basis)
        self.assertAlmostEqual(3 + 2.5 * 1024 / 50, estimate.seconds,
                               delta=3)

    def test_an_unfinished_one_is_a_lower_bound(self):
        cancelled = record('web', 120, status='cancelled', ago=1800)
        _, estimate = self.estimate(history() + [cancelled])
        self.assertEqual(120, estimate.seconds)
        self.assertIn('; at least as long as its last live migration, '
                      'cancelled unfinished after 120 s', estimate.basis)
        # Alone, with no completed one to take a rate from.
        _, alone = self.estimate([cancelled])
        self.assertEqual(120, alone.seconds)
        # A move completed since says more.
        later = record('web', 20, source='hv2', dest='hv1', ago=600)
        _, estimate = self.estimate(history() + [cancelled, later])
        self.assertNotIn('unfinished', estimate.basis)

    def test_one_size_only_has_no_fixed_cost(self):
        _, estimate = self.estimate(history(sizes=(1, 1, 1)),
                                    sizes=(1, 1, 1))
        self.assertIn('no fixed cost told apart', estimate.basis)
        self.assertEqual(round(3 + 1024 / 50), estimate.seconds)

    def test_waits(self):
        timeout = 900.0
        self.assertEqual(timeout, duration.wait_for(None, timeout))
        self.assertEqual(duration.WAIT_AT_LEAST, duration.wait_for(
            duration.Estimate(5, ''), timeout))
        self.assertEqual(600, duration.wait_for(duration.Estimate(200, ''),
                                                timeout))
        self.assertEqual(timeout, duration.wait_for(
            duration.Estimate(400, ''), timeout))
        self.assertEqual(30, duration.wait_for(duration.Estimate(5, ''), 30))


def hot(migrations):
    """hv1 hot with four 8 GiB servers; the old ones on hv2."""
    hyps = [b.hypervisor('hv%d' % i, ram_gb=64) for i in (1, 2)]
    servers = [b.server('web%d' % i, 'hv1', vcpus=8, ram_gb=8)
               for i in range(4)] + old_servers()
    return b.snapshot(hyps, servers, migrations=migrations)


class TestPlanned(unittest.TestCase):
    def plan(self, migrations, **options):
        return planner.make_plan(hot(migrations), opts.PlannerOptions(
            now=NOW, cooldown_hours=0, return_window_hours=0, **options))

    def test_moves_carry_their_estimate_into_the_plan_file(self):
        plan = self.plan(history())
        self.assertTrue(plan.moves)
        for move in plan.moves:
            seconds, basis = move.estimate
            self.assertAlmostEqual(3 + 8192 / 50, seconds, delta=10)
            self.assertIn('completed live migrations', basis)
        document = json.loads(plan_mod.dumps(plan))
        self.assertEqual(plan.moves[0].estimate[0],
                         document['moves'][0]['estimate']['seconds'])
        again = plan_mod.from_document(document)
        self.assertEqual(plan.moves, again.moves)

    def test_no_history_no_estimate_key(self):
        plan = self.plan([])
        self.assertTrue(plan.moves)
        document = json.loads(plan_mod.dumps(plan))
        self.assertNotIn('estimate', document['moves'][0])

    def test_a_move_longer_than_the_timeout_is_not_planned(self):
        self.assertTrue(self.plan(history()).moves)
        self.assertEqual((), self.plan(history(), move_timeout=60).moves)
        snap = hot(history())
        rows = planner.Planner(snap, opts.PlannerOptions(
            now=NOW, move_timeout=60)).explain(snap.server('id-web0'))[1]
        reasons = [row[4] for row in rows if row[0] == 'hv2']
        self.assertRegex(reasons[0], r'^a live migration would take about '
                         r'\d min, more than apply.timeout \(60 s\): '
                         r'8192 MiB of RAM')

    def test_explain_shows_the_estimate_of_each_accepted_destination(self):
        snap = hot(history())
        rows = planner.Planner(snap, opts.PlannerOptions(now=NOW)).explain(
            snap.server('id-web0'))[1]
        accepted = [row for row in rows if row[3] == 'accepted']
        self.assertTrue(accepted)
        self.assertIn('; live migration about 3 min (8192 MiB of RAM',
                      accepted[0][4])

    def test_a_server_that_outlasted_the_timeout_waits(self):
        # Its last attempts were aborted at the timeout: not again, while
        # the history holds them.
        migs = history() + [record('web%d' % i, 900, status='cancelled',
                                   ago=1800) for i in range(4)]
        self.assertEqual((), self.plan(migs).moves)
        self.assertTrue(self.plan(migs, move_timeout=3600).moves)

    def test_the_schema_refuses_a_bad_estimate(self):
        document = json.loads(plan_mod.dumps(self.plan(history())))
        for bad in (-1, 'soon', None):
            broken = json.loads(json.dumps(document))
            broken['moves'][0]['estimate']['seconds'] = bad
            with self.assertRaisesRegex(plan_mod.PlanError,
                                        r'moves\[0\]\.estimate\.seconds'):
                plan_mod.from_document(broken)


if __name__ == '__main__':
    unittest.main()
