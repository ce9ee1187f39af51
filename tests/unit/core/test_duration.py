"""Duration estimates of live migrations from Nova's own history."""

import json
import math
import unittest

from osc_leveller.core import duration
from osc_leveller.core import options as opts
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import planner
from osc_leveller.core import snapshot as snapshot_io
from tests.unit import builders as b

NOW = snapshot_io.parse_time(b.TAKEN_AT)
MIB = 1024 * 1024


def record(server, seconds, processed_mib, total_mib=None, status='completed',
           source='hv1', dest='hv2', remaining_mib=0, ago=3600, number=[0]):
    """A live migration record as the collector keeps it, times in whole
    seconds as Nova's database has them."""
    number[0] += 1
    start = NOW - ago
    return {'id': str(number[0]), 'server_id': 'id-' + server,
            'status': status, 'migration_type': 'live-migration',
            'source_compute': b.compute_host(source),
            'dest_compute': b.compute_host(dest),
            'created_at': snapshot_io.format_time(start),
            'updated_at': snapshot_io.format_time(start + seconds),
            'memory_total_bytes': int((total_mib or processed_mib) * MIB),
            'memory_processed_bytes': int(processed_mib * MIB),
            'memory_remaining_bytes': int(remaining_mib * MIB)}


def history(fixed=3, rate_mib=50, sizes=(512, 1024, 2048, 512, 1024)):
    """Completed moves of other servers between hv1 and hv2 that took
    fixed + bytes / rate seconds."""
    return [record('old%d' % i, round(fixed + size / rate_mib), size,
                   ago=7200 - 60 * i)
            for i, size in enumerate(sizes)]


def cloud(migrations, ram_gb=1, status='ACTIVE'):
    hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
    servers = [b.server('web', 'hv1', ram_gb=ram_gb, status=status)]
    return b.snapshot(hyps, servers, migrations=migrations)


class TestEstimate(unittest.TestCase):
    def estimate(self, migrations, dest='hv2', **server):
        snap = cloud(migrations, **server)
        durations = duration.Durations(snap)
        return durations, durations.of(snap.server('id-web'),
                                       b.compute_host('hv1'),
                                       b.compute_host(dest))

    def test_no_figures_no_estimate(self):
        # The fake driver's records: no progress figures.
        migs = history()
        for mig in migs:
            for key in ('memory_total_bytes', 'memory_processed_bytes',
                        'memory_remaining_bytes'):
                del mig[key]
        durations, estimate = self.estimate(migs)
        self.assertFalse(durations)
        self.assertIsNone(estimate)

    def test_fixed_cost_and_rate_are_told_apart(self):
        durations, estimate = self.estimate(history())
        self.assertEqual('fitted', durations.how)
        self.assertAlmostEqual(3, durations.fixed, delta=1)
        self.assertAlmostEqual(50, 1 / durations.per_byte / MIB, delta=3)
        # Never migrated: its 1 GiB of RAM, sent at the rate between hv1
        # and hv2 (every record is of that pair).
        self.assertAlmostEqual(3 + 1024 / 50, estimate.seconds, delta=3)
        self.assertIn('its RAM x 1.00', estimate.basis)
        self.assertIn('between these hosts', estimate.basis)
        self.assertIn('from 5 completed live migrations', estimate.basis)

    def test_other_hosts_use_the_cloud_wide_rate(self):
        _, estimate = self.estimate(history(), dest='hv3')
        self.assertIn('cloud-wide', estimate.basis)
        self.assertAlmostEqual(3 + 1024 / 50, estimate.seconds, delta=3)

    def test_a_faster_pair_has_its_own_rate(self):
        migs = history() + [
            record('fast%d' % i, 3 + size // 200, size, source='hv3',
                   dest='hv1', ago=600 + i) for i, size in enumerate(
                       (400, 800, 1600))]
        _, slow = self.estimate(migs, dest='hv2')
        _, fast = self.estimate(migs, dest='hv3')
        self.assertLess(fast.seconds, slow.seconds / 2)
        self.assertIn('3 between these hosts', fast.basis)

    def test_its_own_last_migration_says_what_it_sends(self):
        # A guest that dirties memory sent 3 times its RAM last time.
        migs = history() + [record('web', 20, 768, total_mib=256, ago=1800)]
        _, estimate = self.estimate(migs, ram_gb=0.25)
        self.assertIn('768 MiB (what its last live migration sent)',
                      estimate.basis)
        self.assertGreater(estimate.seconds, 3 + 700 / 50)

    def test_one_that_never_converged_is_predicted_never_to(self):
        migs = history() + [record('web', 120, 900, total_mib=256,
                                   status='cancelled', remaining_mib=200,
                                   ago=1800)]
        _, estimate = self.estimate(migs, ram_gb=0.25)
        self.assertFalse(estimate.converges)
        self.assertEqual('never', estimate.text())
        self.assertIn('3.5 times its RAM, and was cancelled with 200 MiB '
                      'still to send', estimate.basis)
        # Even with no completed migration to take a rate from.
        _, alone = self.estimate(migs[-1:], ram_gb=0.25)
        self.assertTrue(math.isinf(alone.seconds))

    def test_a_short_abort_is_no_verdict(self):
        # Stopped early, having sent less than twice its RAM: what it sent
        # and had left is what it takes.
        migs = history() + [record('web', 10, 300, total_mib=256,
                                   status='cancelled', remaining_mib=100,
                                   ago=1800)]
        _, estimate = self.estimate(migs, ram_gb=0.25)
        self.assertTrue(estimate.converges)
        self.assertIn('400 MiB (what its last live migration sent and had '
                      'left)', estimate.basis)

    def test_one_size_only_has_no_fixed_cost(self):
        _, estimate = self.estimate(history(sizes=(128, 128, 128)))
        self.assertIn('no fixed cost told apart', estimate.basis)
        # 128 MiB took 6 s: 1 GiB is predicted eight times that.
        self.assertAlmostEqual(8 * 6, estimate.seconds, delta=1)

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
        self.assertEqual(timeout, duration.wait_for(
            duration.Estimate(math.inf, ''), timeout))


def hot(migrations):
    """hv1 hot with four 8 GiB servers of which web0 has a history."""
    hyps = [b.hypervisor('hv%d' % i, ram_gb=64) for i in (1, 2)]
    servers = [b.server('web%d' % i, 'hv1', vcpus=8, ram_gb=8)
               for i in range(4)]
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
        with_time = self.plan(history())
        self.assertTrue(with_time.moves)
        short = self.plan(history(), move_timeout=60)
        self.assertEqual((), short.moves)
        snap = hot(history())
        refusal = planner.Planner(snap, opts.PlannerOptions(
            now=NOW, move_timeout=60)).explain(snap.server('id-web0'))[1]
        reasons = [row[4] for row in refusal if row[0] == 'hv2']
        self.assertRegex(reasons[0], r'^a live migration would take about '
                         r'\d min, more than apply.timeout \(60 s\): '
                         r'8192 MiB')

    def test_explain_shows_the_estimate_of_each_accepted_destination(self):
        snap = hot(history())
        rows = planner.Planner(snap, opts.PlannerOptions(now=NOW)).explain(
            snap.server('id-web0'))[1]
        accepted = [row for row in rows if row[3] == 'accepted']
        self.assertTrue(accepted)
        self.assertIn('; live migration about 3 min (8192 MiB', accepted[0][4])

    def test_a_never_converging_server_stays(self):
        migs = history() + [
            record('web%d' % i, 300, 20000, total_mib=8192,
                   status='cancelled', remaining_mib=4000, ago=1800)
            for i in range(4)]
        plan = self.plan(migs)
        self.assertEqual((), plan.moves)
        # Its timeout is no help: it never converges.
        self.assertEqual((), self.plan(migs, move_timeout=10 ** 6).moves)

    def test_the_schema_refuses_a_bad_estimate(self):
        document = json.loads(plan_mod.dumps(self.plan(history())))
        for bad in (-1, 'soon', None):
            broken = json.loads(json.dumps(document))
            broken['moves'][0]['estimate']['seconds'] = bad
            with self.assertRaisesRegex(plan_mod.PlanError,
                                        r'moves\[0\]\.estimate\.seconds'):
                plan_mod.from_document(broken)


class TestSnapshotFigures(unittest.TestCase):
    def test_figures_round_trip(self):
        snap = cloud(history())
        document = snapshot_io.to_document(snap)
        self.assertEqual(512 * MIB,
                         document['migrations'][0]['memory_total_bytes'])
        again = snapshot_io.parse(json.loads(json.dumps(document)))
        self.assertEqual(snap.migrations, again.migrations)

    def test_bad_figures_are_refused(self):
        for bad in (-1, 1.5, 'many', 2 ** 60):
            migs = history()
            migs[0]['memory_processed_bytes'] = bad
            with self.assertRaisesRegex(
                    snapshot_io.SnapshotError,
                    r'migrations\[0\]\.memory_processed_bytes'):
                cloud(migs)

    def test_without_figures_nothing_is_written(self):
        migs = [dict(m) for m in history()]
        for mig in migs:
            for key in list(mig):
                if key.startswith('memory_'):
                    del mig[key]
        document = snapshot_io.to_document(cloud(migs))
        self.assertFalse([k for k in document['migrations'][0]
                          if k.startswith('memory_')])


if __name__ == '__main__':
    unittest.main()
