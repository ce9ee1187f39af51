import dataclasses
import json
import unittest

from osc_leveller.core.load import scoring
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import freeing
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.planning import report
from osc_leveller.core.planning import spread
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as opts


def demo_plan():
    snap = snapshot_io.load('demo')
    options = opts.PlannerOptions()
    return snap, options, planner.make_plan(snap, options)


class TestPlanReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.snap, cls.options, cls.plan = demo_plan()
        cls.report = report.of_plan(cls.snap, cls.plan, cls.options)

    def test_domains_are_the_plans_most_imbalanced_first(self):
        domains = {d['domain']: d for d in self.plan.domains}
        self.assertEqual(sorted(domains),
                         sorted(d.name for d in self.report.domains))
        figures = [d.imbalance_before for d in self.report.domains]
        self.assertEqual(sorted(figures, reverse=True), figures)
        for domain in self.report.domains:
            self.assertEqual(domains[domain.name]['before'],
                             domain.imbalance_before)
            self.assertEqual(domains[domain.name]['after'],
                             domain.imbalance_after)
            # The after bars are the state the plan predicts: their
            # spread is the plan's imbalance after.
            scores = [h.after.score for h in domain.hosts]
            mean = sum(scores) / len(scores)
            self.assertAlmostEqual(mean, domain.mean_after)
            self.assertAlmostEqual(domain.imbalance_after, (sum(
                (s - mean) ** 2 for s in scores) / len(scores)) ** 0.5)
        self.assertEqual(self.plan.imbalance_after,
                         self.report.imbalance_after)
        self.assertEqual((0.05, 0.045, 0.85), (
            self.report.threshold, round(self.report.target, 6),
            self.report.ceiling))

    def test_each_hypervisor_before_and_after_the_moves(self):
        last = {}  # hypervisor -> its score after the last move touching it
        for move in self.plan.moves:
            last[move.source] = move.source_score[1]
            last[move.destination] = move.destination_score[1]
        hosts = [h for d in self.report.domains for h in d.hosts]
        # cmp-b07's compute service is disabled: no bar, as in score.
        self.assertEqual(
            sorted(h.name for h in self.snap.hypervisors if h.usable),
            sorted(h.hypervisor for h in hosts))
        self.assertNotIn('cmp-b07.cloud.example.net',
                         [h.hypervisor for h in hosts])
        for host in hosts:
            if host.hypervisor in last:
                self.assertAlmostEqual(last[host.hypervisor],
                                       host.after.score)
            else:
                self.assertEqual(host.before, host.after)
        hottest = self.report.domains[0].hosts
        self.assertEqual(sorted((h.before.score for h in hottest),
                                reverse=True),
                         [h.before.score for h in hottest])
        # cmp-a03 gives four servers away: less CPU after than before.
        a03 = hottest[0]
        self.assertEqual(('cmp-a03.cloud.example.net', 'cmp-a03'),
                         (a03.hypervisor, a03.label))
        self.assertLess(a03.after.cpu, a03.before.cpu - 0.3)

    def test_moves_refusals_and_held_of_their_domain(self):
        by_name = {d.name: d for d in self.report.domains}
        self.assertEqual(len(self.plan.moves), self.report.moves)
        for domain in self.report.domains:
            self.assertEqual(
                [m for m in self.plan.moves if m.domain == domain.name],
                list(domain.moves))
        icelake = by_name['az2/Icelake-Server']
        self.assertEqual([report.Refusal(
            'vm-0079', 'cmp-b19.cloud.example.net',
            'aggregate finance is reserved for other projects')],
            list(icelake.refused))
        self.assertIn('its best move, vm-0432', icelake.held)
        self.assertEqual(
            ['az2/Icelake-Server'],
            [d.name for d in self.report.domains if d.held])


class TestGoalReports(unittest.TestCase):
    """A plan of a goal beyond levelling says what it was asked for, and
    what it made: the hypervisors freed, the server counts."""

    def test_a_balancing_plan_names_no_goal(self):
        snap, options, plan = demo_plan()
        got = report.of_plan(snap, plan, options)
        self.assertEqual(('', False), (got.goal, got.counts))
        self.assertEqual(set(), {d.freed or d.not_freed for d in got.domains
                                 if d.freed or d.not_freed})

    def test_free_hosts_lists_each_domains_freed_and_not_freed(self):
        snap = snapshot_io.load('demo')
        options = opts.PlannerOptions()
        for count, asked in ((None, 'as many hypervisors as possible'),
                             (1, '1 hypervisor')):
            plan = freeing.make_plan(snap, options, count)
            got = report.of_plan(snap, plan, options)
            self.assertEqual('Free hosts: %s emptied in each balancing '
                             'domain' % asked, got.goal)
            by_name = {d.name: d for d in got.domains}
            for entry in plan.domains:
                domain = by_name[entry['domain']]
                self.assertEqual(
                    [(f['hypervisor'], tuple(f['servers']), f['ram_gb'])
                     for f in entry.get('freed', ())],
                    [(f.hypervisor, f.servers, f.ram_gb)
                     for f in domain.freed])
                self.assertEqual(
                    [(n['hypervisor'], n['reason'])
                     for n in entry.get('not_freed', ())],
                    [(n.hypervisor, n.reason) for n in domain.not_freed])
                # A freed hypervisor holds no server after the plan.
                for freed in domain.freed:
                    host = next(h for h in domain.hosts
                                if h.hypervisor == freed.hypervisor)
                    self.assertEqual(0, host.servers[1])
            self.assertTrue(any(d.freed for d in got.domains))
            self.assertTrue(any(d.not_freed for d in got.domains))
        kept = opts.PlannerOptions(keep_n_plus_one=True)
        plan = freeing.make_plan(snap, kept, None, 2)
        self.assertEqual('Free hosts: as many hypervisors as possible '
                         'emptied in each balancing domain, keeping N+2 '
                         'headroom', report.of_plan(snap, plan, kept).goal)

    def test_spread_counts_the_servers_before_and_after(self):
        snap = snapshot_io.load('demo')
        options = opts.PlannerOptions()
        plan = spread.make_plan(snap, options)
        self.assertTrue(plan.moves)
        got = report.of_plan(snap, plan, options)
        self.assertEqual('Spread by server count: server counts per '
                         'hypervisor within one of each other in each '
                         'balancing domain', got.goal)
        self.assertTrue(got.counts)
        where = {s.id: s.hypervisor for s in snap.servers}
        before = {h.name: sum(1 for v in where.values() if v == h.name)
                  for h in snap.hypervisors}
        for move in plan.moves:
            where[move.server_id] = move.destination
        for domain in got.domains:
            for host in domain.hosts:
                self.assertEqual(
                    (before[host.hypervisor],
                     sum(1 for v in where.values() if v == host.hypervisor)),
                    host.servers)
        moved = {m.source for m in plan.moves} | {
            m.destination for m in plan.moves}
        self.assertTrue(all(
            h.servers[0] != h.servers[1] for d in got.domains
            for h in d.hosts if h.hypervisor in moved))


class TestStateReport(unittest.TestCase):
    def test_the_current_state_as_score_shows_it(self):
        snap = snapshot_io.load('demo')
        weights = dict(config.DEFAULT_WEIGHTS)
        got = report.of_state(snap, opts.PlannerOptions(
            weights=weights, threshold=0.05, ceiling=0.85))
        state = state_mod.new_state(snap, weights)
        usable = [h for h in snap.hypervisors if h.usable]
        stats = scoring.domain_stats(
            {h.name: state.score(h.name) for h in usable},
            {h.name: scoring.domain_of(h) for h in usable})
        self.assertEqual('score', got.kind)
        self.assertIsNone(got.imbalance_after)
        self.assertAlmostEqual(scoring.pooled_imbalance(stats),
                               got.imbalance_before)
        self.assertEqual(
            sorted((s.domain, round(s.imbalance, 9)) for s in stats),
            sorted((d.name, round(d.imbalance_before, 9))
                   for d in got.domains))
        for domain in got.domains:
            self.assertEqual((), domain.moves)
            for host in domain.hosts:
                self.assertIsNone(host.after)
                self.assertEqual(state.score(host.hypervisor),
                                 host.before.score)
        self.assertAlmostEqual(0.045, got.target)


class TestLabels(unittest.TestCase):
    def test_short_names_only_when_unique(self):
        self.assertEqual(
            {'hv1.a.example': 'hv1.a.example', 'hv1.b.example':
             'hv1.b.example', 'hv2.a.example': 'hv2', 'hv3': 'hv3',
             '.odd': '.odd'},
            report.short_labels(['hv1.a.example', 'hv1.b.example',
                                 'hv2.a.example', 'hv3', '.odd']))


def large_plan():
    """A cloud of 240 hypervisors in six domains, three of them of more
    than report.FOLD_ABOVE, and its plan."""
    from benchmarks import generate
    snap = snapshot_io.parse(generate.generate(240, 6000, seed=4))
    options = opts.PlannerOptions()
    return snap, options, planner.make_plan(snap, options)


class TestFold(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.snap, cls.options, cls.plan = large_plan()
        cls.report = report.of_plan(cls.snap, cls.plan, cls.options)

    def test_a_large_domain_shows_its_ends_and_what_moves_touch(self):
        large = [d for d in self.report.domains
                 if len(d.hosts) > report.FOLD_ABOVE]
        small = [d for d in self.report.domains if d not in large]
        self.assertTrue(large and small)
        for domain in small:
            self.assertEqual(report.Fold(domain.hosts, ()),
                             report.fold(domain))
        for domain in large:
            fold = report.fold(domain)
            by_score = sorted(domain.hosts, key=lambda h: -h.before.score)
            touched = {e for m in domain.moves
                       for e in (m.source, m.destination)}
            expected = {h.hypervisor for h in by_score[:report.ENDS] +
                        by_score[-report.ENDS:]} | touched
            self.assertEqual(expected, {h.hypervisor for h in fold.shown})
            # Every hypervisor once, each part hottest first.
            self.assertEqual(sorted(h.hypervisor for h in domain.hosts),
                             sorted(h.hypervisor for h in fold.shown +
                                    fold.folded))
            for part in (fold.shown, fold.folded):
                scores = [h.before.score for h in part]
                self.assertEqual(sorted(scores, reverse=True), scores)

    def test_a_move_between_middle_hypervisors_unfolds_both(self):
        domain = next(d for d in self.report.domains
                      if len(d.hosts) > report.FOLD_ABOVE)
        middle = domain.hosts[len(domain.hosts) // 2:][:2]
        self.assertEqual(2, len(middle))
        self.assertTrue(set(middle) <= set(report.fold(domain).folded))
        move = dataclasses.replace(self.plan.moves[0],
                                   source=middle[0].hypervisor,
                                   destination=middle[1].hypervisor)
        fold = report.fold(dataclasses.replace(domain, moves=(move,)))
        self.assertEqual(2 * report.ENDS + 2, len(fold.shown))
        self.assertTrue(set(middle) <= set(fold.shown))
        # A hypervisor freed, or tried and not freed, is shown too.
        freed = dataclasses.replace(domain, moves=(), not_freed=(
            report.NotFreed(middle[0].hypervisor, 'reason'),))
        self.assertIn(middle[0], report.fold(freed).shown)


class TestSavedPlan(unittest.TestCase):
    def test_a_saved_plan_on_its_snapshot_is_the_plans_report(self):
        snap, options, plan = demo_plan()
        saved = plan_mod.from_document(json.loads(plan_mod.dumps(plan)))
        self.assertEqual(report.of_plan(snap, plan, options),
                         report.of_file(snap, saved))

    def test_another_state_is_said_and_a_move_that_cannot_be_is_refused(
            self):
        snap, options, plan = demo_plan()
        later = dataclasses.replace(snap, taken_at=snap.taken_at + 3600)
        drawn = report.of_file(later, plan)
        self.assertEqual((later.taken_at, False),
                         (drawn.drawn_at, drawn.changed))
        # A server gone that the plan does not move: the placement changed.
        moved = {m.server_id for m in plan.moves}
        gone = next(s for s in snap.servers if s.id not in moved)
        fewer = dataclasses.replace(snap, servers=tuple(
            s for s in snap.servers if s is not gone))
        self.assertTrue(report.of_file(fewer, plan).changed)
        first = plan.moves[0]
        for servers, message in (
                ([s for s in snap.servers if s.id != first.server_id],
                 'moves[0]: server %s is not in the snapshot'),
                ([dataclasses.replace(s, hypervisor=first.destination)
                  if s.id == first.server_id else s for s in snap.servers],
                 "moves[0]: server %s is on " + first.destination +
                 " in the snapshot, not on the move's source")):
            with self.assertRaises(report.ReportError) as caught:
                report.of_file(dataclasses.replace(
                    snap, servers=tuple(servers)), plan)
            self.assertTrue(str(caught.exception).startswith(
                message % first.server_id), caught.exception)
        bad = dataclasses.replace(plan, options=dict(plan.options,
                                                     ceiling='high'))
        with self.assertRaisesRegex(opts.OptionsError, 'options.ceiling'):
            report.of_file(snap, bad)
