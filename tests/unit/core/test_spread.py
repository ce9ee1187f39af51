"""plan --spread count: server counts even to within one, in the fewest
moves, every rule kept; what stops a domain short is said."""

import collections
import json
import random
import unittest

from benchmarks import generate
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import spread
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import filters
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b


def fewest_by_search(counts):
    """The fewest one-server moves to counts within one of each other, by
    breadth-first search over every move between any two hypervisors."""
    start = tuple(counts)
    seen, frontier, moves = {start}, [start], 0
    while True:
        for state in frontier:
            if max(state) - min(state) <= 1:
                return moves
        following = []
        for state in frontier:
            for i, here in enumerate(state):
                for j in range(len(state)):
                    if i != j and here:
                        step = list(state)
                        step[i] -= 1
                        step[j] += 1
                        step = tuple(step)
                        if step not in seen:
                            seen.add(step)
                            following.append(step)
        frontier, moves = following, moves + 1


def cloud(counts, az=None, **server_args):
    """Hypervisors hv1.. of roomy capacity holding counts servers each,
    s<host>-<i> of 2 + i GiB of RAM."""
    hyps = [b.hypervisor('hv%d' % i, az=az[i - 1] if az else 'az1')
            for i in range(1, len(counts) + 1)]
    servers = [b.server('s%d-%d' % (h, i), 'hv%d' % h, ram_gb=2 + i,
                        **server_args)
               for h, n in enumerate(counts, start=1) for i in range(n)]
    return hyps, servers


def plan_of(hyps, servers, groups=(), migrations=(), **options):
    snap = b.snapshot(hyps, servers, groups, migrations)
    options.setdefault('max_moves', 1000)
    return snap, spread.make_plan(snap, opts.PlannerOptions(
        now=snap.taken_at, **options))


def counts_after(snap, plan):
    counts = collections.Counter({h.name: 0 for h in snap.hypervisors})
    counts.update(s.hypervisor for s in snap.servers)
    for move in plan.moves:
        counts[move.source] -= 1
        counts[move.destination] += 1
    return counts


def replay(test, snap, plan, options=None):
    """Every move passes apply's re-check in wave order, as apply runs it."""
    options = options or opts.PlannerOptions(now=snap.taken_at)
    state = state_mod.new_state(snap)
    rules = filters.Rules(snap, options)
    check = kinds.of(plan.kind).recheck(plan.moves)
    for move in plan.moves:
        test.assertIsNone(check(move, snap, state, rules), move)
        state.apply(move.server_id, move.destination)
    test.assertEqual(sorted(m.wave for m in plan.moves),
                     [m.wave for m in plan.moves])


class TestMinimum(unittest.TestCase):
    def test_the_formula_is_the_fewest_moves(self):
        rng = random.Random(33)
        cases = {(0,), (5, 0), (3, 3, 0), (3, 3, 1), (7, 3, 0, 0)}
        while len(cases) < 150:
            n = rng.randint(2, 5)
            cases.add(tuple(rng.randint(0, 7) for _ in range(n)))
        for counts in sorted(cases):
            self.assertEqual(fewest_by_search(counts),
                             spread.minimum_moves(counts), counts)

    def test_the_planner_makes_the_fewest_moves(self):
        # Brute force against the plan itself, where no rule binds.
        rng = random.Random(7)
        for _ in range(40):
            counts = [rng.randint(0, 7) for _ in range(rng.randint(2, 5))]
            snap, plan = plan_of(*cloud(counts))
            self.assertEqual(fewest_by_search(counts), len(plan.moves),
                             counts)
            after = counts_after(snap, plan).values()
            self.assertLessEqual(max(after) - min(after), 1, counts)
            self.assertEqual('spread', plan.kind)
            self.assertFalse(any('held' in d for d in plan.domains))
            replay(self, snap, plan)


class TestSpread(unittest.TestCase):
    def test_already_even_is_an_empty_plan(self):
        snap, plan = plan_of(*cloud([3, 2, 3, 2]))
        self.assertEqual((), plan.moves)
        self.assertEqual('the server counts are already even (within one) '
                         'in every domain (widest gap: 1)', plan.note)
        self.assertEqual('spread', plan.kind)

    def test_most_crowded_to_least_with_the_least_ram(self):
        snap, plan = plan_of(*cloud([7, 3, 0, 0]))
        self.assertEqual(4, len(plan.moves))  # 10 servers: 3 3 2 2
        self.assertEqual({'hv1'}, {m.source for m in plan.moves})
        self.assertEqual(['s1-0', 's1-1', 's1-2', 's1-3'],
                         sorted(m.server_name for m in plan.moves))
        first = plan.moves[0]
        self.assertEqual('spread: 7 servers on the source, 0 on the '
                         'destination; the least RAM of those it accepts '
                         '(2 GiB)', first.reason)
        self.assertEqual(8.0 + 2 + 3 + 4 + 5 - 8, plan.migrated_gb)
        self.assertEqual({'hv1': 3, 'hv2': 3, 'hv3': 2, 'hv4': 2},
                         dict(counts_after(snap, plan)))

    def test_anti_affinity(self):
        # The two smallest servers of hv1 share a group with hv3's only
        # server: the third smallest goes to hv3, the others elsewhere.
        hyps, servers = cloud([6, 2, 1])
        group = {'id': 'g1', 'name': 'web', 'policy': 'anti-affinity',
                 'members': ['id-s1-0', 'id-s1-1', 'id-s3-0']}
        snap, plan = plan_of(hyps, servers, groups=[group])
        self.assertEqual(spread.minimum_moves([6, 2, 1]), len(plan.moves))
        for move in plan.moves:
            if move.destination == 'hv3':
                self.assertNotIn(move.server_id, group['members'])
        into_hv3 = [m for m in plan.moves if m.destination == 'hv3']
        self.assertEqual('s1-2', into_hv3[0].server_name)
        self.assertEqual('hv3', into_hv3[0].refused[0])
        self.assertIn('anti-affinity', into_hv3[0].refused[1])
        replay(self, snap, plan)

    def test_capacity(self):
        # hv3 has room for no server: the others take the moves, and the
        # domain stops one apart from where it could be, saying why.
        hyps, servers = cloud([6, 0, 0])
        hyps[2] = b.hypervisor('hv3', ram_gb=1)
        snap, plan = plan_of(hyps, servers)
        self.assertNotIn('hv3', {m.destination for m in plan.moves})
        after = counts_after(snap, plan)
        self.assertEqual({'hv1': 3, 'hv2': 3, 'hv3': 0}, dict(after))
        self.assertEqual(3, len(plan.moves))
        held = plan.domains[0]['held']
        self.assertIn('servers per hypervisor 0 to 3, 2 more moves short '
                      'of one apart (4 at the fewest when planning '
                      'started): capacity refuses 3 of the 3 moves that '
                      'would narrow a gap, from its most crowded '
                      'hypervisors (hv1, hv2, hv3); for example hv3: '
                      'needs 3072 MEMORY_MB', held)
        replay(self, snap, plan)

    def test_domains_are_evened_apart(self):
        hyps, servers = cloud([6, 0, 4, 0], az=['az1', 'az1', 'az2', 'az2'])
        snap, plan = plan_of(hyps, servers)
        zone = {h.name: h.availability_zone for h in snap.hypervisors}
        for move in plan.moves:
            self.assertEqual(zone[move.source], zone[move.destination])
        self.assertEqual({'hv1': 3, 'hv2': 3, 'hv3': 2, 'hv4': 2},
                         dict(counts_after(snap, plan)))
        self.assertEqual(5, len(plan.moves))
        self.assertEqual({'az1/Gen1': 3, 'az2/Gen1': 2},
                         {d['domain']: d['moves'] for d in plan.domains})

    def test_excluded_and_disabled_hypervisors_are_not_counted(self):
        hyps, servers = cloud([6, 0, 0, 0])
        hyps[3] = b.hypervisor('hv4', status='disabled')
        snap, plan = plan_of(hyps, servers, exclude_hosts=['hv3'])
        self.assertEqual({'hv2'}, {m.destination for m in plan.moves})
        self.assertEqual(3, len(plan.moves))

    def test_unmovable_servers_count_but_stay(self):
        hyps, servers = cloud([5, 0, 0])
        for server in servers[:2]:  # the two smallest
            server['locked'] = True
        snap, plan = plan_of(hyps, servers)
        self.assertEqual(3, len(plan.moves))
        self.assertNotIn('id-s1-0', {m.server_id for m in plan.moves})
        self.assertNotIn('id-s1-1', {m.server_id for m in plan.moves})
        self.assertEqual({'hv1': 2, 'hv2': 2, 'hv3': 1},
                         dict(counts_after(snap, plan)))

    def test_every_server_held_says_why(self):
        hyps, servers = cloud([4, 0], locked=True)
        snap, plan = plan_of(hyps, servers)
        self.assertEqual((), plan.moves)
        self.assertEqual('no move that evens out the server counts passes '
                         'the rules (see held)', plan.note)
        self.assertEqual(
            'servers per hypervisor 0 to 4, 2 more moves short of one apart '
            '(2 at the fewest when planning started): no server of its most '
            'crowded hypervisors (hv1, hv2) may move (4 held by locked)',
            plan.domains[0]['held'])

    def test_the_cooldown_holds(self):
        hyps, servers = cloud([4, 0])
        recent = {'server_id': 'id-s1-0', 'source_compute': 'cmp-hv2',
                  'dest_compute': 'cmp-hv1', 'status': 'completed',
                  'migration_type': 'live-migration',
                  'created_at': '2026-11-20T11:00:00Z',
                  'updated_at': '2026-11-20T11:01:00Z'}
        snap, plan = plan_of(hyps, servers, migrations=[recent])
        self.assertEqual(['s1-1', 's1-2'],
                         [m.server_name for m in plan.moves])

    def test_max_moves_stops_and_says_so(self):
        snap, plan = plan_of(*cloud([8, 0]), max_moves=2)
        self.assertEqual(2, len(plan.moves))
        self.assertIn('2 more moves short of one apart (4 at the fewest '
                      'when planning started): max_moves 2 reached',
                      plan.domains[0]['held'])

    def test_plan_file_round_trip(self):
        snap, plan = plan_of(*cloud([5, 1, 0]))
        document = json.loads(plan_mod.dumps(plan))
        self.assertEqual('spread', document['kind'])
        again = plan_mod.from_document(document, 'p.json')
        self.assertEqual('spread', again.kind)
        self.assertEqual(plan.moves, again.moves)
        self.assertIs(kinds.SPREAD, kinds.of(again.kind))


class TestRecheck(unittest.TestCase):
    def setUp(self):
        self.snap, self.plan = plan_of(*cloud([5, 1, 0]))
        self.move = self.plan.moves[0]
        self.options = opts.PlannerOptions(now=self.snap.taken_at)

    def check(self, snap, state=None):
        state = state or state_mod.new_state(snap)
        return kinds.SPREAD.recheck(self.plan.moves)(
            self.move, snap, state, filters.Rules(snap, self.options))

    def test_holds_in_the_cloud_planned_on(self):
        self.assertIsNone(self.check(self.snap))

    def test_the_gap_has_closed(self):
        # Since planning, two servers arrived on the destination.
        hyps, servers = cloud([5, 1, 0])
        servers += [b.server('new%d' % i, self.move.destination)
                    for i in range(4)]
        reason = self.check(b.snapshot(hyps, servers))
        self.assertEqual(checks.COUNT_EVEN, reason.code)
        self.assertEqual('no longer evens out the server counts: hv1 holds '
                         '5, %s 4' % self.move.destination, reason)

    def test_moves_made_before_count(self):
        # In a dry run the moves before count as made.
        state = state_mod.new_state(self.snap)
        for server in ('id-s1-1', 'id-s1-2', 'id-s1-3'):
            state.apply(server, self.move.destination)
        self.assertEqual(checks.COUNT_EVEN, self.check(self.snap,
                                                       state).code)

    def test_the_rules_of_balancing(self):
        hyps, servers = cloud([5, 1, 0])
        servers[0]['locked'] = True
        self.assertEqual('locked', self.check(b.snapshot(hyps, servers)).code)
        hyps[2] = b.hypervisor('hv3', ram_gb=1)
        hyps[1] = b.hypervisor('hv2', ram_gb=1)
        servers[0]['locked'] = False
        self.assertEqual('capacity',
                         self.check(b.snapshot(hyps, servers)).code)


class Forgetful(spread.Spreader):
    """The plan without what it remembers between moves."""

    def _try(self, movers, src, dst):
        self._blocked.clear()
        return super()._try(movers, src, dst)

    def _movers(self, host):
        self._movers_of.clear()
        return super()._movers(host)


class TestMemory(unittest.TestCase):
    def test_what_is_remembered_changes_no_move(self):
        # A generated cluster with near-full hosts, groups and stopped
        # servers: pairs refused, then freed by the moves that touch them.
        snap = snapshot_io.parse(generate.generate(40, 1600, 2))
        options = opts.PlannerOptions(now=snap.taken_at, max_moves=100000)
        plan = spread.make_plan(snap, options)
        again = Forgetful(snap, options).plan()
        self.assertGreater(len(plan.moves), 50)
        self.assertTrue(any('held' in d for d in plan.domains))
        self.assertEqual(plan.moves, again.moves)


class TestCountWeight(unittest.TestCase):
    """weights.count: the server count as a dimension of the score, so a
    balancing plan evens out the counts with the load (DRS's 'VM
    distribution'), in the proportion the weights say."""

    def cloud(self):
        # The same load on hv1 and hv2, in 8 servers and in 2; hv3 holds
        # two more like hv2's. Levelled by load alone, nothing moves.
        hyps = [b.hypervisor(h) for h in ('hv1', 'hv2', 'hv3')]
        servers = [b.server('a%d' % i, 'hv1', vcpus=2, ram_gb=8)
                   for i in range(8)] + [
            b.server('%s%d' % (h, i), h, vcpus=8, ram_gb=32)
            for h in ('hv2', 'hv3') for i in range(2)]
        return b.snapshot(hyps, servers)

    def counts(self, snap, plan):
        where = {s.id: s.hypervisor for s in snap.servers}
        for move in plan.moves:
            where[move.server_id] = move.destination
        return collections.Counter(where.values())

    def test_levelled_with_the_load(self):
        from osc_leveller.core.planning import planner
        snap = self.cloud()
        options = opts.PlannerOptions(max_moves=100)
        plain = planner.make_plan(snap, options)
        self.assertEqual((), plain.moves, plain.note)
        self.assertNotIn('count', plain.options['weights'])
        weighted = opts.PlannerOptions(max_moves=100, weights=dict(
            options.weights, count=1.0))
        plan = planner.make_plan(snap, weighted)
        counts = self.counts(snap, plan)
        self.assertTrue(plan.moves)
        self.assertEqual({'hv1': 6, 'hv2': 3, 'hv3': 3}, dict(counts))
        # Each move's figures are the scores with the count in them, and
        # the plan file says it was weighted.
        state = state_mod.new_state(snap, weighted.weights)
        for move in plan.moves:
            self.assertAlmostEqual(move.source_score[0],
                                   state.score(move.source))
            self.assertAlmostEqual(move.destination_score[0],
                                   state.score(move.destination))
            state.apply(move.server_id, move.destination)
            self.assertAlmostEqual(move.source_score[1],
                                   state.score(move.source))
        self.assertEqual(1.0, plan.options['weights']['count'])
        self.assertEqual(1.0, plan_mod.from_document(json.loads(
            plan_mod.dumps(plan))).options['weights']['count'])
