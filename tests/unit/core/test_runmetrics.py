"""The metrics file's text, read back as Prometheus reads it."""

import dataclasses
import math
import pathlib
import unittest

import hypothesis
from hypothesis import strategies as st
from prometheus_client import parser

from osc_leveller.core.load import guard
from osc_leveller.core.load import skill
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import filters
from osc_leveller.core.run import executor
from osc_leveller.core.run import runmetrics
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b
from tests.unit.core import test_executor
from tests.unit.core import test_forecast
from tests.unit.core import test_n_plus_one

NOW = 1_800_000_000.0


def samples(text):
    """{(metric, frozenset(labels)): value} as prometheus_client parses it."""
    found = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            found[s.name, frozenset(s.labels.items())] = s.value
    return found


def move(name, destination='hv2', ram_gb=8):
    return plan_mod.Move(
        'id-' + name, name, 'hv1', destination, destination, 0, 'az1/Gen1',
        ram_gb, 0.1, (0.9, 0.8), (0.1, 0.2), (0.2, 0.1), 'why')


# The file the hand-made writer before prometheus_client wrote for
# every_figure(): what an upgraded run reads back, and must write again.
PREVIOUS = pathlib.Path(__file__).parent / 'previous-metrics.prom'


def every_figure():
    """(record, exit code, now, last success) of a run with a sample in
    every family, and label values that need escaping."""
    record = runmetrics.Record('apply', NOW - 42.5)
    record.results = [
        executor.Result(move('a', ram_gb=8), executor.DONE),
        executor.Result(move('b', ram_gb=16.5), executor.DONE),
        executor.Result(move('c'), executor.FAILED, 'boom'),
        executor.Result(move('d'), executor.SKIPPED, 'locked'),
        executor.Result(move('e'), executor.NOT_STARTED, filters.Refusal(
            'the batch limit of 2 was reached', 'batch_limit'))]
    record.imbalance = lambda: [('az1/Gen1', 0.2, 0.1),
                                ('az"2\\x\nGen2', 0.125, 0.0)]
    record.forecast = lambda: [('az1/Gen1', {
        'cpu': skill.Skill(24, 8, 0.2041, 0.0645, 0.1, 0.07, 0.6, 0.5),
        'ram': skill.Skill(24, 8, 0.02, 0.03, None, 0.02, 0.0, 0.0)})]
    record.examined([guard.Finding('az1/Gen1', 'load_jump', 'x')],
                    NOW - 20)
    record.previous_plausible = NOW - 600
    return record, 3, NOW, 1_799_996_400.25


class TestLabels(unittest.TestCase):
    """Each reason class of a skipped move, from the re-check that made the
    reason: the label reads its code, not its sentence."""

    def recheck(self, check, name='s1', source='hv1', destination='hv2',
                servers=(), migrations=(), **options):
        hyps = [b.hypervisor('hv%d' % i, ram_gb=64) for i in (1, 2, 3)]
        servers = list(servers) or [
            b.server('s1', 'hv1', vcpus=8, ram_gb=16, cpu=0.9),
            b.server('s2', 'hv1', vcpus=8, ram_gb=16, cpu=0.9),
            b.server('c', 'hv2', vcpus=1, ram_gb=1, cpu=0.1),
            b.server('big', 'hv3', ram_gb=60)]
        snap = b.snapshot(hyps, servers, migrations=migrations)
        rules = filters.Rules(snap, opts.PlannerOptions(**options))
        state = state_mod.new_state(snap)
        plan_move = dataclasses.replace(move(name, destination),
                                        source=source)
        reason = check(plan_move, snap, state, rules)
        self.assertTrue(reason)
        return runmetrics.labels_of(executor.Result(
            plan_move, executor.SKIPPED, reason))[1], reason

    def test_each_skip_falls_in_its_class(self):
        recent = {'server_id': 'id-s1', 'status': 'completed',
                  'updated_at': '2026-11-20T10:00:00Z'}
        cases = [
            ('server_gone', dict(name='ghost')),
            ('server_moved', dict(source='hv2', destination='hv3')),
            ('destination_gone', dict(destination='hv9')),
            ('no_gain', dict(check=checks.balance, name='c', source='hv2',
                             destination='hv1')),
            ('cooldown', dict(check=checks.balance, migrations=[recent])),
            ('count_even', dict(check=checks.spread, name='c', source='hv2',
                                destination='hv1')),
            ('server_not_movable', dict(servers=[
                b.server('s1', 'hv1', locked=True)])),
            ('destination_refused', dict(destination='hv3')),  # RAM full
        ]
        for expected, kwargs in cases:
            with self.subTest(expected):
                kwargs.setdefault('check', checks.placement)
                got, reason = self.recheck(**kwargs)
                self.assertEqual(expected, got, reason)
                self.assertIn(got, runmetrics.REASONS['skipped'])

    def test_n_plus_one(self):
        snap = test_n_plus_one.tight()
        state, rules = test_n_plus_one.kept(snap)
        plan_move = dataclasses.replace(move('g', 'hv2'), source='hv3')
        reason = checks.balance(plan_move, snap, state, rules)
        self.assertTrue(reason.startswith('hv2: would break N+1'), reason)
        self.assertEqual(('skipped', 'n_plus_one'), runmetrics.labels_of(
            executor.Result(plan_move, executor.SKIPPED, reason)))

    def test_the_code_decides_not_the_sentence(self):
        def label(reason):
            return runmetrics.labels_of(executor.Result(
                move('a'), executor.SKIPPED, reason))[1]
        words = 'migrated 2.0 h ago, inside the 6 h cooldown'
        cooldown = filters.rules_named('cooldown')[0]
        self.assertEqual('cooldown', label(filters.Refusal(
            words, 'cooldown', cooldown)))
        # The same words from another rule, or from none.
        self.assertEqual('destination_refused', label(filters.Refusal(
            'hv2: ' + words, 'ceiling', filters.rules_named('ceiling')[0])))
        self.assertEqual('server_not_movable', label(words))
        self.assertEqual('other', runmetrics.labels_of(executor.Result(
            move('a'), executor.NOT_STARTED, 'the batch limit of 1 was '
            'reached'))[1])

    def test_each_kind_of_plan_brings_its_own_classes(self):
        # Declared with the kind (core/planning/kinds.py), nowhere else.
        for kind in kinds.BY_NAME.values():
            for code in kind.codes:
                with self.subTest(code):
                    self.assertIn(code, runmetrics.REASONS['skipped'])
                    self.assertEqual(code, runmetrics.labels_of(
                        executor.Result(move('a'), executor.SKIPPED,
                                        filters.Refusal('why', code)))[1])
        self.assertEqual({'not_freed', 'count_even'}, {
            code for kind in kinds.BY_NAME.values() for code in kind.codes})

    def test_other_statuses(self):
        for status, reason, expected in [
                (executor.DONE, '', 'migrated'),
                (executor.FAILED, 'Nova: error', 'migration_failed'),
                (executor.TIMED_OUT, 'no result', 'timeout'),
                (executor.STARTED, 'migrating; not waited for',
                 'not_waited')]:
            self.assertEqual(expected, runmetrics.labels_of(
                executor.Result(move('a'), status, reason))[1])


class TestNotStartedLabels(test_executor.ExecutorTest):
    """Each reason class of a move not started, from a real run."""

    def classes(self, results):
        return {runmetrics.labels_of(r) for r in results
                if r.status == executor.NOT_STARTED}

    def test_batch_limit(self):
        self.assertEqual({('not_started', 'batch_limit')},
                         self.classes(self.run_plan(batch=1)))

    def test_not_waited(self):
        self.assertEqual({('not_started', 'not_waited')}, self.classes(
            self.run_plan(max_parallel=1, wait=False)))

    def test_earlier_failure(self):
        self.nova.behaviour[self.plan.moves[0].destination] = 'fail'
        self.assertEqual({('not_started', 'earlier_failure')},
                         self.classes(self.run_plan(max_parallel=1)))

    def test_cloud_unreadable(self):
        self.nova.unreadable_after(1)
        self.assertEqual({('not_started', 'cloud_unreadable')},
                         self.classes(self.run_plan(max_parallel=1)))

    def test_journal_unwritable(self):
        journal = test_executor.Journal(
            lambda event, fields: event == 'migrate' and any(
                e == 'migrate' for e, _ in journal.records))
        clock = test_executor.Clock()
        self.nova.wall = lambda: NOW + clock.now
        runner = executor.Executor(
            self.nova, self.planner_options, executor.ApplyOptions(
                poll_interval=1.0, max_parallel=1),
            journal=journal, clock=clock, sleep=clock.sleep,
            wall=lambda: NOW + clock.now)
        self.assertEqual({('not_started', 'journal_unwritable')},
                         self.classes(runner.run(self.plan.moves).results))

    def test_interrupted(self):
        real = self.nova.server

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt
        self.nova.server = interrupted
        self.assertRaises(KeyboardInterrupt, self.run_plan, max_parallel=1)
        self.nova.server = real
        self.assertEqual({('not_started', 'interrupted')}, self.classes(
            self.executor.interrupted.results))


class TestExposition(unittest.TestCase):
    def record(self):
        record = runmetrics.Record('apply', NOW - 42.5)
        record.results = [
            executor.Result(move('a', ram_gb=8), executor.DONE),
            executor.Result(move('b', ram_gb=16), executor.DONE),
            executor.Result(move('c'), executor.FAILED, 'boom'),
            executor.Result(move('d'), executor.NOT_STARTED,
                            filters.Refusal('the batch limit of 2 was '
                                            'reached', 'batch_limit'))]
        record.imbalance = lambda: [('az1/Gen"1', 0.2, 0.1)]
        return record

    def test_prometheus_reads_every_figure(self):
        text = runmetrics.exposition(self.record(), 3, NOW, NOW - 3600)
        got = samples(text)
        p = runmetrics.PREFIX
        cmd = ('command', 'apply')
        self.assertEqual(NOW, got[p + 'last_run_timestamp_seconds',
                                  frozenset([cmd])])
        # A failed run keeps the success it was given.
        self.assertEqual(NOW - 3600, got[
            p + 'last_success_timestamp_seconds', frozenset([cmd])])
        self.assertEqual(3, got[p + 'last_run_exit_code', frozenset([cmd])])
        self.assertEqual(42.5, got[p + 'last_run_duration_seconds',
                                   frozenset([cmd])])
        self.assertEqual(24 * 2 ** 30, got[p + 'last_run_migrated_bytes',
                                           frozenset([cmd])])

        def moves(status, reason):
            return got[p + 'last_run_moves', frozenset(
                [cmd, ('status', status), ('reason', reason)])]
        self.assertEqual(2, moves('done', 'migrated'))
        self.assertEqual(1, moves('failed', 'migration_failed'))
        self.assertEqual(1, moves('not_started', 'batch_limit'))
        domain = frozenset([cmd, ('domain', 'az1/Gen"1')])
        self.assertEqual(0.2, got[p + 'last_run_imbalance_before', domain])
        self.assertEqual(0.1, got[p + 'last_run_imbalance_after', domain])

    def test_success_is_now_and_unknown_is_absent(self):
        p = runmetrics.PREFIX + 'last_success_timestamp_seconds'
        got = samples(runmetrics.exposition(self.record(), 0, NOW, None))
        self.assertEqual(NOW, got[p, frozenset([('command', 'apply')])])
        got = samples(runmetrics.exposition(self.record(), 1, NOW, None))
        self.assertNotIn(p, {name for name, _ in got})

    def test_non_finite_figures_are_refused(self):
        record = self.record()
        record.imbalance = lambda: [('az1', math.nan, 0.1)]
        self.assertRaises(ValueError, runmetrics.exposition, record, 0, NOW,
                          None)


class TestUpgrade(unittest.TestCase):
    """prometheus_client writes what the hand-made writer wrote, numbers
    formatted its own way; an upgraded run reads the previous file."""

    @staticmethod
    def families(text):
        return [(f.name, f.documentation, f.type, [
            (s.name, s.labels, s.value) for s in f.samples])
            for f in parser.text_string_to_metric_families(text)]

    def test_the_same_families_and_samples_as_before(self):
        before = PREVIOUS.read_text()
        after = runmetrics.exposition(*every_figure())
        families = self.families(after)
        self.assertEqual(self.families(before), families)
        # Every family has samples, and the parser lost none.
        self.assertEqual(after.count('# HELP '), len(families))
        self.assertTrue(all(samples for *_, samples in families))
        self.assertNotEqual(before, after)  # 1.8e+09, not 1800000000.0

    def test_the_previous_file_is_read_back(self):
        for text in (PREVIOUS.read_text(),
                     runmetrics.exposition(*every_figure())):
            self.assertEqual(1_799_996_400.25, runmetrics.last_success(
                text, 'apply', NOW))
            self.assertEqual(NOW - 600, runmetrics.last_plausible(
                text, 'apply', NOW))

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(st.one_of(st.just(0.0), st.floats(1.0, NOW)))
    def test_every_time_written_is_read_back_exactly(self, when):
        # prometheus_client writes 1.8e+09, 1.70000000025e+09 or 0.0: the
        # strict reader takes each, to the last bit. (A time before one
        # second past the epoch would be 1e-05.)
        record = runmetrics.Record('apply', when)
        record.examined([], when)
        text = runmetrics.exposition(record, 0, when, None)
        self.assertEqual(when, runmetrics.last_success(text, 'apply', NOW))
        self.assertEqual(when, runmetrics.last_plausible(text, 'apply',
                                                         NOW))

    def test_no_figure_that_is_no_number(self):
        for bad in (math.nan, math.inf, -math.inf):
            record, code, now, success = every_figure()
            record.forecast = lambda: [('az1/Gen1', {'cpu': skill.Skill(
                24, 8, 0.2, bad, 0.1, 0.07, 0.6, 0.5)})]
            with self.assertRaises(ValueError) as ctx:
                runmetrics.exposition(record, code, now, success)
            self.assertIn('not a finite number', str(ctx.exception))
            with self.assertRaises(ValueError):
                runmetrics.exposition(record, code, now, bad)


class TestLastSuccess(unittest.TestCase):
    def text(self, command='apply', value=NOW - 60):
        record = runmetrics.Record(command, NOW - 100)
        return runmetrics.exposition(record, 0, value, None)

    def test_read_back_from_our_own_file(self):
        self.assertEqual(NOW - 60, runmetrics.last_success(
            self.text(), 'apply', NOW))
        self.assertIsNone(runmetrics.last_success(self.text(), 'evacuate',
                                                  NOW))

    def test_untrusted_text_means_no_success(self):
        p = runmetrics.PREFIX + 'last_success_timestamp_seconds'
        for text in ['', 'garbage\n',
                     '%s{command="apply"} NaN\n' % p,
                     '%s{command="apply"} +Inf\n' % p,
                     '%s{command="apply"} -5\n' % p,
                     '%s{command="apply"} %r\n' % (p, NOW + 3600),
                     self.text() + self.text(),  # twice: not ours
                     ]:
            self.assertIsNone(runmetrics.last_success(text, 'apply', NOW),
                              text)


class TestGuard(unittest.TestCase):
    """The guard's reasons, and the last run that found the metrics
    plausible: the next run's reference, kept while the guard holds."""

    P = runmetrics.PREFIX

    def record(self, findings, previous=NOW - 600):
        record = runmetrics.Record('apply', NOW - 30)
        record.previous_plausible = previous
        if findings is not None:
            record.examined(findings, NOW - 20)
        return samples(runmetrics.exposition(record, 0, NOW, None))

    def plausible(self, got):
        return got.get((self.P + 'last_plausible_timestamp_seconds',
                        frozenset([('command', 'apply')])))

    def test_each_finding_is_a_sample_with_its_reason(self):
        got = self.record([guard.Finding('az1/Gen1', 'capacity', 'x'),
                           guard.Finding('az1/Gen1', 'load_jump', 'y'),
                           guard.Finding('az2/Gen1', 'coverage_drop', 'z')])
        held = {(dict(labels)['domain'], dict(labels)['reason'])
                for name, labels in got
                if name == self.P + 'last_run_implausible_metrics'}
        self.assertEqual({('az1/Gen1', 'capacity'), ('az1/Gen1', 'load_jump'),
                          ('az2/Gen1', 'coverage_drop')}, held)
        self.assertTrue(held <= {(d, r) for d in ('az1/Gen1', 'az2/Gen1')
                                 for r in config.GUARD_CHECKS})
        # Compared and held: the reference stays the previous one.
        self.assertEqual(NOW - 600, self.plausible(got))

    def test_plausible_is_the_reads_time(self):
        self.assertEqual(NOW - 20, self.plausible(self.record([])))
        # A capacity finding compares nothing: the reference moves on.
        self.assertEqual(NOW - 20, self.plausible(self.record(
            [guard.Finding('az1/Gen1', 'capacity', 'x')])))

    def test_kept_when_the_run_never_looked(self):
        self.assertEqual(NOW - 600, self.plausible(self.record(None)))
        self.assertIsNone(self.plausible(self.record(None, previous=None)))

    def test_read_back_as_strictly_as_the_last_success(self):
        text = runmetrics.exposition(runmetrics.Record('apply', NOW), 0,
                                     NOW, None)
        self.assertIsNone(runmetrics.last_plausible(text, 'apply', NOW))
        record = runmetrics.Record('apply', NOW - 30)
        record.examined([], NOW - 20)
        text = runmetrics.exposition(record, 0, NOW, None)
        self.assertEqual(NOW - 20, runmetrics.last_plausible(
            text, 'apply', NOW))
        self.assertIsNone(runmetrics.last_plausible(text, 'evacuate', NOW))
        self.assertIsNone(runmetrics.last_plausible(text + text, 'apply',
                                                    NOW))
        self.assertIsNone(runmetrics.last_plausible(text, 'apply', NOW - 60))


class TestImbalance(unittest.TestCase):
    def test_before_and_after_the_moves_done(self):
        hyps, servers = test_executor.hot_cloud()
        snapshot = b.snapshot(hyps, servers)
        options = opts.PlannerOptions(now=test_executor.NOW)
        plan = planner.make_plan(snapshot, options)
        (domain, before, same), = runmetrics.imbalance(snapshot, options, ())
        self.assertEqual(before, same)
        self.assertEqual(plan.moves[0].domain, domain)
        self.assertAlmostEqual(plan.moves[0].imbalance[0], before, places=3)
        (_, before, after), = runmetrics.imbalance(snapshot, options,
                                                   plan.moves)
        self.assertLess(after, before)


class TestForecast(unittest.TestCase):
    def test_the_weight_and_errors_of_each_domain(self):
        doc = test_forecast.measured(test_forecast.office_world(),
                                     (1.0, 0.1, 0.0), ram=(0.1, 1.0, 0.2))
        record = runmetrics.Record('apply', NOW - 10)
        record.read(snapshot_io.parse(doc), opts.PlannerOptions())
        got = samples(runmetrics.exposition(record, 0, NOW, None))
        p = runmetrics.PREFIX

        def labels(**more):
            return frozenset(dict(command='apply', domain='az1/Gen1',
                                  **more).items())
        self.assertEqual(0.5, got[p + 'last_run_forecast_weight',
                                  labels(figure='cpu')])
        self.assertEqual(0, got[p + 'last_run_forecast_weight',
                                labels(figure='ram')])
        # 3 hypervisors of 24 steps with sums 1.0 and 0.1 each: sqrt(3 /
        # 72) and sqrt(0.3 / 72).
        self.assertAlmostEqual(0.2041, got[
            p + 'last_run_forecast_error',
            labels(figure='cpu', predictor='now')])
        self.assertAlmostEqual(0.0645, got[
            p + 'last_run_forecast_error',
            labels(figure='cpu', predictor='ahead')])
        self.assertIn((p + 'last_run_forecast_error',
                       labels(figure='ram', predictor='blend')), got)
        self.assertNotIn((p + 'last_run_forecast_error',
                          labels(figure='ram', predictor='lasting')), got)

    def test_none_without_a_measured_forecast(self):
        record = runmetrics.Record('apply', NOW - 10)
        record.read(snapshot_io.parse(test_forecast.office_world()),
                    opts.PlannerOptions())
        text = runmetrics.exposition(record, 0, NOW, None)
        self.assertNotIn('forecast_weight{', text)
