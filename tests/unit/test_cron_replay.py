"""benchmarks/series.py and benchmarks/cron_replay.py: seeded series, the
snapshot a cron run sees, cooldowns kept, churn counted, imbalance
measured on the load the moves live in."""

import contextlib
import copy
import io
import json
import os
import tempfile
import types
import unittest

from benchmarks import cron_replay
from benchmarks import generate
from benchmarks import series as series_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.settings import options as opts

HOUR = 3600.0


def moved(hours, server, source, destination):
    return cron_replay.Moved(hours * HOUR, server, source, destination, 8.0)


def gaps(history):
    """Hours between a server's consecutive moves."""
    last, found = {}, []
    for move in history:
        if move.server in last:
            found.append((move.at - last[move.server]) / HOUR)
        last[move.server] = move.at
    return found


class TestSeries(unittest.TestCase):
    cluster = generate.generate(4, 80, seed=2)

    def test_deterministic_for_a_seed(self):
        one = series_mod.series(self.cluster, hours=24, seed=5)
        self.assertEqual(one, series_mod.series(self.cluster, 24, seed=5))
        reordered = dict(self.cluster,
                         servers=list(reversed(self.cluster['servers'])))
        self.assertEqual(one, series_mod.series(reordered, 24, seed=5))
        other = series_mod.series(self.cluster, 24, seed=6)
        self.assertNotEqual(one['servers'], other['servers'])

    def test_shapes(self):
        made = series_mod.series(self.cluster, hours=48, step_minutes=30)
        self.assertEqual(97, made['steps'])
        office = []
        for server in self.cluster['servers']:
            got = made['servers'][server['id']]
            self.assertEqual(97, len(got['cpu']))
            self.assertTrue(all(0 <= v <= 1 for v in got['cpu'] + got['ram']))
            if server['status'] == 'SHUTOFF':
                self.assertEqual('stopped', got['shape'])
                self.assertEqual(0, max(got['cpu']))
            if got['shape'] == 'office':
                office.append(got['cpu'])
        self.assertTrue(office)
        # Monday 13:00 and 03:00 UTC: local time is UTC -3 h to +3 h.
        day = sum(cpu[26] for cpu in office)
        night = sum(cpu[6] for cpu in office)
        self.assertGreater(day, 2 * night)


class TestSnapshot(unittest.TestCase):
    cluster = {
        'hypervisors': [
            {'name': 'cn1', 'vcpus': 4, 'memory_mb': 65536, 'cpu_ratio': 4.0,
             'az': 'az1', 'cpu_model': 'm'},
            {'name': 'cn2', 'vcpus': 4, 'memory_mb': 65536, 'cpu_ratio': 4.0,
             'az': 'az1', 'cpu_model': 'm'}],
        'servers': [
            {'id': 'a', 'host': 'cn1', 'vcpus': 2, 'memory_mb': 8192},
            {'id': 'b', 'host': 'cn1', 'vcpus': 4, 'memory_mb': 8192},
            {'id': 'c', 'host': 'cn1', 'vcpus': 2, 'memory_mb': 8192},
            {'id': 'd', 'host': 'cn2', 'vcpus': 2, 'memory_mb': 8192}]}
    series = {'start': '2026-11-23T00:00:00Z', 'step_minutes': 60,
              'steps': 2, 'servers': {
                  'a': {'cpu': [1.0, 0.0], 'ram': [0.5, 0.5]},
                  'b': {'cpu': [0.75, 0.0], 'ram': [0.5, 0.5]},
                  'c': {'cpu': [0.1, 0.0], 'ram': [0.5, 0.5]},
                  'd': {'cpu': [0.5, 0.0], 'ram': [0.25, 0.25]}}}

    def test_as_prometheus_reports_it(self):
        world = cron_replay.World(self.cluster, self.series)
        placement = {s['id']: s['host'] for s in self.cluster['servers']}
        start = world.time(0)
        history = [cron_replay.Moved(start - 5 * HOUR, 'd', 'cn1', 'cn2', 8)]
        snap = world.snapshot(0, placement, history)
        # cn1 is asked for 5.2 threads of 4: node_exporter shows 100 %;
        # c gets its 10 %, a and b a fair share of the rest, 3.8 / 6.
        self.assertEqual(5.2, round(world.demand(0, placement)['cn1'], 6))
        self.assertEqual(1.0, snap.hypervisor('cn1').metrics.cpu)
        self.assertAlmostEqual(0.1, snap.server('c').usage.cpu)
        self.assertAlmostEqual(3.8 / 6, snap.server('a').usage.cpu)
        self.assertAlmostEqual(3.8 / 6, snap.server('b').usage.cpu)
        self.assertAlmostEqual(0.25, snap.hypervisor('cn2').metrics.cpu)
        self.assertAlmostEqual(3 * 4096 / 65536,
                               snap.hypervisor('cn1').metrics.ram)
        self.assertEqual(start, snap.taken_at)
        # The cooldown is read from the snapshot's migration history.
        rules = filters.Rules(snap, opts.PlannerOptions())
        # Nova's record of the move is updated when it completed: 20 s to
        # set up, 1.6 s a GiB to copy.
        self.assertAlmostEqual(start - 5 * HOUR + 20 + 1.6 * 8,
                               rules.last_moved['d'], delta=1)
        self.assertIn('inside the 6 h cooldown',
                      filters.cooldown(snap.server('d'), rules))
        measure = world.measure(0, placement)
        self.assertEqual(1, measure.saturated)
        self.assertAlmostEqual(1.2, measure.unserved)
        self.assertAlmostEqual(1.3, measure.top_demand)


class TestChurn(unittest.TestCase):
    def test_hand_made_history(self):
        history = [
            moved(0, 's1', 'A', 'B'),
            moved(0, 's2', 'A', 'B'),
            moved(0, 's3', 'A', 'B'),
            # 6 h and 36 s on: the 32.8 s an 8 GiB move takes, and the
            # 6 h cooldown after it are over.
            moved(6.01, 's1', 'B', 'A'),  # back to A: a flip-flop
            moved(6.01, 's2', 'B', 'C'),  # on, not back
            moved(8, 's1', 'A', 'B'),  # A -> B -> A -> B, 2 h after
            moved(25, 's3', 'B', 'A'),  # back to A, but 25 h later
            moved(30.5, 's2', 'C', 'A'),  # left A 30.5 h ago
        ]
        tags = cron_replay.churn(history, cooldown_hours=6, interval_hours=1)
        self.assertEqual([3, 5], tags['flip_flop'])
        self.assertEqual([3, 4, 5], tags['again'])
        self.assertEqual([5], tags['inside_cooldown'])
        self.assertEqual([3, 4], tags['cooldown_end'])

    def test_first_units_as_apply_batch(self):
        moves = [types.SimpleNamespace(name=n, exchange=e) for n, e in (
            ('m1', ''), ('x1', 'exchange 1'), ('m2', ''),
            ('x2', 'exchange 1'), ('m3', ''))]
        self.assertEqual(['m1', 'x1', 'x2'], [
            m.name for m in cron_replay.first_units(moves, 2)])
        self.assertEqual(['m1'], [
            m.name for m in cron_replay.first_units(moves, 1)])
        self.assertEqual(5, len(cron_replay.first_units(moves, None)))


class TestReplay(unittest.TestCase):
    cluster = generate.generate(12, 480, seed=3)
    series = series_mod.series(cluster, hours=16, seed=3)

    def test_no_server_moved_inside_its_cooldown(self):
        world = cron_replay.World(self.cluster, self.series)
        # Every move that gains planned, levelling down to the threshold
        # only: without a cooldown a server moves again within 2 h here,
        # so the check below can fail.
        eager = {'min_drop': 0, 'min_drop_per_gb': 0, 'target': 0.05}
        free = cron_replay.replay(world, None, cooldown_hours=0,
                                  options=eager)
        self.assertTrue(any(g < 2 for g in gaps(free.history)))
        # Nova's record ends when the move completed, some seconds after
        # the run: a cooldown a little under 2 h ends before the run 2 h on.
        kept = cron_replay.replay(world, None, cooldown_hours=1.95,
                                  options=eager)
        found = gaps(kept.history)
        self.assertEqual(2, min(found))  # as soon as its cooldown ended
        self.assertNotIn('inside_cooldown', kept.tags)
        self.assertTrue(kept.tags['cooldown_end'])
        self.assertEqual(0, sum(r['inside_cooldown'] for r in kept.runs))

    def test_imbalance_measured_on_the_next_load(self):
        series = copy.deepcopy(self.series)
        series['steps'] = 3
        for got in series['servers'].values():
            got['cpu'][1] = 0.0  # an idle hour after the first run
        world = cron_replay.World(self.cluster, series)
        result = cron_replay.replay(world, None)
        self.assertEqual(2, len(result.runs))
        first = result.runs[0]
        self.assertGreater(first['moves'], 0)
        initial = {s['id']: s['host'] for s in self.cluster['servers']}
        placement = dict(initial)
        for move in result.history[:first['moves']]:
            placement[move.server] = move.destination
        after = cron_replay.imbalance(world.snapshot(1, placement))
        self.assertAlmostEqual(after, first['imbalance_leveller'], places=5)
        self.assertNotAlmostEqual(
            cron_replay.imbalance(world.snapshot(0, placement)),
            first['imbalance_leveller'], places=3)
        self.assertAlmostEqual(
            cron_replay.imbalance(world.snapshot(1, initial)),
            first['imbalance_none'], places=5)
        # Had the first run not moved: the cluster as generated.
        self.assertEqual(first['imbalance_none'], first['imbalance_unmoved'])
        self.assertAlmostEqual(
            cron_replay.imbalance(world.snapshot(0, initial)),
            first['imbalance_now'], places=5)

    def test_summary(self):
        world = cron_replay.World(self.cluster, self.series)
        result = cron_replay.replay(world, 1)
        whole = cron_replay.summary(result, world)
        self.assertEqual(16, whole['runs'])
        self.assertEqual(len(result.history), whole['moves'])
        self.assertLessEqual(whole['moves'], 16)
        self.assertEqual(16, whole['better'] + whole['equal']
                         + whole['worse'])
        later = cron_replay.summary(result, world, since_step=8)
        self.assertEqual(8, later['runs'])
        self.assertEqual(sum(r['moves'] for r in result.runs[8:]),
                         later['moves'])


class TestMix(unittest.TestCase):

    def replay(self, *argv):
        """The JSON of cron_replay.py run with argv on a small cluster."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, 'replay.json')
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                cron_replay.main(['--hosts', '8', '--servers', '200',
                                  '--seed', '1', '--settled-hours', '1',
                                  '--batch', '1', '--json', out] + list(argv))
            with open(out) as stream:
                return json.load(stream)

    def test_mixed_and_passed_on_to_previous(self):
        # This checkout as the previous one: it replays the same series
        # only if it was given the mix, from the levelled placement.
        checkout = os.path.dirname(cron_replay.HERE)
        got = self.replay('--hours', '3', '--mix', 'mixed', '--levelled',
                          '--previous', checkout)
        self.assertEqual('mixed', got['series']['mix'])
        self.assertEqual(series_mod.domain_mixes(
            generate.generate(8, 200, 1), 1), got['series']['domains'])
        self.assertIn('business', got['series']['shapes'])
        previous, this = got['rows']
        self.assertEqual('previous', previous['version'])

        def figures(row):
            return [(r['moves'], r['imbalance_none'], r['imbalance_leveller'])
                    for r in row['runs']]
        self.assertEqual(figures(this), figures(previous))

    def test_classic_by_default(self):
        got = self.replay('--hours', '2')
        self.assertEqual('classic', got['series']['mix'])
        self.assertNotIn('domains', got['series'])
        self.assertNotIn('business', got['series']['shapes'])


class TestSkill(unittest.TestCase):
    domains = {'hv1': 'az1/x', 'hv2': 'az1/x'}

    def scored(self, figure_at, steps=72, step=71, interval=1, days=2):
        hosts = {j: {h: {'cpu': figure_at(h, j), 'ram': 0.5}
                     for h in self.domains} for j in range(steps)}
        document = {'forecast': {'ahead': '1h', 'days': days,
                                 'weight': 0.7}}
        found = cron_replay.with_skill(document, hosts, step, interval,
                                       days, self.domains)
        self.assertNotIn('skill', document['forecast'])  # left as it was
        return found['forecast']['skill']['hypervisors']

    def test_a_load_that_repeats_every_day(self):
        def figure(host, step):
            return (step % 24) / 24.0 if host == 'hv1' else 0.2
        found = self.scored(figure)['hv1']['cpu']
        # Two days scored (index -48..-1, world steps 23 to 70), each on
        # the days before it there are: the day before predicts it.
        self.assertEqual(48, found['points'])
        self.assertAlmostEqual(0.0, found['ahead'])
        self.assertGreater(found['now'], 0.0)
        # Every 2 hours of the world in one step of 2 h: its own grid.
        two = self.scored(figure, interval=2)['hv1']['cpu']
        self.assertEqual(24, two['points'])
        self.assertAlmostEqual(0.0, two['ahead'])

    def test_a_load_that_holds(self):
        def figure(host, step):
            return 0.1 if host == 'hv1' or step < 30 else 0.6
        found = self.scored(figure)['hv1']['cpu']
        # One miss, at step 29: hv1 0.25 below the mean of step 30.
        self.assertEqual(0.25 * 0.25, round(found['now'], 9))
        self.assertGreater(found['ahead'], found['now'])

    def test_without_a_forecast_nothing(self):
        document = {'hypervisors': []}
        self.assertIs(document, cron_replay.with_skill(
            document, {}, 10, 1, 1, {}))
