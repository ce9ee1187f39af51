import collections
import copy
import unittest

import hypothesis
from hypothesis import strategies as st

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import paths
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

# Placement capacity is what these tests are about, not the score ceiling.
OPTIONS = opts.PlannerOptions(ceiling=100.0)


def hosts(count, ram_gb=32, **kw):
    return [b.hypervisor('hv%d' % i, ram_gb=ram_gb, **kw)
            for i in range(1, count + 1)]


def replay(snap, moves, options=OPTIONS):
    """The placement after the moves, each checked against every filter
    in the state the moves before it left."""
    state = state_mod.new_state(snap)
    rules = filters.Rules(snap, options)
    for index, move in enumerate(moves):
        server = snap.server(move.server_id)
        assert state.host_of(move.server_id) == move.source, (index, move)
        assert policy.PLACEMENT.why_not(server, rules) is None, (index, move)
        reason = filters.why_not_destination(
            server, snap.hypervisor(move.destination), state, rules)
        assert reason is None, (index, move.server_name, reason)
        state.apply(move.server_id, move.destination)
    return {s.id: state.host_of(s.id) for s in snap.servers}


class TestFindPath(unittest.TestCase):
    def check(self, snap, targets, options=OPTIONS):
        path = paths.find_path(snap, targets, options)
        placement = replay(snap, path.moves, options)
        for server in snap.servers:
            self.assertEqual(targets.get(server.id, server.hypervisor),
                             placement[server.id], server.name)
        self.assertEqual(sorted(m.wave for m in path.moves),
                         [m.wave for m in path.moves])
        for wave in {m.wave for m in path.moves}:
            touched = [h for m in path.moves if m.wave == wave
                       for h in (m.source, m.destination)]
            self.assertEqual(len(touched), len(set(touched)), wave)
        return path

    def test_a_swap_between_full_hosts_parks_one_server(self):
        snap = b.snapshot(hosts(3), [
            b.server('a', 'hv1', ram_gb=24), b.server('b', 'hv2', ram_gb=24),
            b.server('small', 'hv3', ram_gb=4)])
        path = self.check(snap, {'id-a': 'hv2', 'id-b': 'hv1'})
        self.assertEqual(1, path.parked)
        self.assertEqual([('a', 'hv1', 'hv3'), ('b', 'hv2', 'hv1'),
                          ('a', 'hv3', 'hv2')],
                         [(m.server_name, m.source, m.destination)
                          for m in path.moves])
        self.assertEqual([1, 2, 3], [m.wave for m in path.moves])
        self.assertEqual('parking: it leaves hv1 so that another server can '
                         'arrive there, and goes on to hv2 later; cmp-hv3 '
                         'goes 0.07 -> 0.45', path.moves[0].reason)
        self.assertEqual('target placement, after parking moves made room; '
                         'cmp-hv1 goes 0.00 -> 0.38', path.moves[1].reason)

    def test_the_smaller_server_parks(self):
        snap = b.snapshot(hosts(3), [
            b.server('big', 'hv1', ram_gb=28), b.server('b', 'hv2', ram_gb=20),
            b.server('small', 'hv3', ram_gb=4)])
        path = self.check(snap, {'id-big': 'hv2', 'id-b': 'hv1'})
        self.assertEqual(['b', 'big', 'b'],
                         [m.server_name for m in path.moves])
        self.assertEqual(68, sum(m.ram_gb for m in path.moves))

    def test_a_three_cycle_of_full_hosts(self):
        snap = b.snapshot(hosts(4), [
            b.server('a', 'hv1', ram_gb=20), b.server('b', 'hv2', ram_gb=20),
            b.server('c', 'hv3', ram_gb=20), b.server('d', 'hv4', ram_gb=8)])
        path = self.check(snap, {'id-a': 'hv2', 'id-b': 'hv3',
                                 'id-c': 'hv1'})
        self.assertEqual(4, len(path.moves))
        self.assertEqual(1, path.parked)

    def test_anti_affinity_swap_parks_a_member(self):
        group = {'id': 'g1', 'name': 'web', 'policy': 'anti-affinity',
                 'members': ['id-a', 'id-b']}
        snap = b.snapshot(hosts(3, ram_gb=128), [
            b.server('a', 'hv1'), b.server('b', 'hv2')], [group])
        path = self.check(snap, {'id-a': 'hv2', 'id-b': 'hv1'})
        self.assertEqual(3, len(path.moves))
        self.assertEqual('hv3', path.moves[0].destination)

    def test_a_bystander_parks_and_comes_back(self):
        # hv2 is full of a server that stays; the only way for a to reach
        # hv2 and b to reach hv1 is through hv3, which holds nothing movable
        # but has room for one.
        snap = b.snapshot(hosts(3), [
            b.server('a', 'hv1', ram_gb=16), b.server('x', 'hv1', ram_gb=12),
            b.server('b', 'hv2', ram_gb=16), b.server('y', 'hv2', ram_gb=12),
            b.server('z', 'hv3', ram_gb=16)])
        path = self.check(snap, {'id-a': 'hv2', 'id-b': 'hv1'})
        self.assertEqual(3, len(path.moves))

    def test_independent_moves_share_a_wave(self):
        snap = b.snapshot(hosts(4), [
            b.server('a', 'hv1'), b.server('c', 'hv3')])
        path = self.check(snap, {'id-a': 'hv2', 'id-c': 'hv4'})
        self.assertEqual([1, 1], [m.wave for m in path.moves])
        self.assertEqual(0, path.parked)

    def test_nothing_to_do(self):
        snap = b.snapshot(hosts(2), [b.server('a', 'hv1')])
        path = paths.find_path(snap, {'id-a': 'hv1'}, OPTIONS)
        self.assertEqual((), path.moves)

    def test_a_swap_with_nowhere_to_park_is_impossible(self):
        snap = b.snapshot(hosts(2), [
            b.server('a', 'hv1', ram_gb=24), b.server('b', 'hv2', ram_gb=24)])
        with self.assertRaises(paths.PathError) as cm:
            paths.find_path(snap, {'id-a': 'hv2', 'id-b': 'hv1'}, OPTIONS)
        text = str(cm.exception)
        self.assertIn('cannot be reached: no order of live migrations keeps '
                      'every step valid, parking included', text)
        self.assertIn('a to hv2 (MEMORY_MB full', text)

    def test_a_target_over_capacity_is_refused_before_searching(self):
        snap = b.snapshot(hosts(2), [
            b.server('a', 'hv1', ram_gb=24), b.server('b', 'hv2', ram_gb=24)])
        with self.assertRaises(paths.PathError) as cm:
            paths.find_path(snap, {'id-a': 'hv2'}, OPTIONS)
        self.assertIn('hv2 would hold 49152 MEMORY_MB, above its capacity '
                      '32768', str(cm.exception))

    def test_the_ceiling_still_holds(self):
        snap = b.snapshot(hosts(2), [
            b.server('a', 'hv1', ram_gb=16), b.server('b', 'hv2', ram_gb=12)])
        with self.assertRaises(paths.PathError) as cm:
            paths.find_path(snap, {'id-a': 'hv2'},
                            opts.PlannerOptions(ceiling=0.3))
        self.assertIn('above the ceiling 0.30 (see --ceiling)',
                      str(cm.exception))

    def test_what_cannot_move_or_go_there_is_named(self):
        snap = b.snapshot(
            hosts(2) + [b.hypervisor('far', az='az2')],
            [b.server('a', 'hv1', locked=True), b.server('b', 'hv1'),
             b.server('stopped', 'hv1', status='SHUTOFF')])
        with self.assertRaises(paths.PathError) as cm:
            paths.find_path(snap, {'id-a': 'hv2', 'id-b': 'far',
                                   'id-stopped': 'hv2'}, OPTIONS)
        text = str(cm.exception)
        self.assertIn('a cannot go to hv2: locked', text)
        self.assertIn('b cannot go to far: availability zone az2 differs',
                      text)
        self.assertIn('stopped cannot go to hv2: status SHUTOFF', text)

    def test_a_split_affinity_group_is_refused(self):
        group = {'id': 'g1', 'name': 'db', 'policy': 'affinity',
                 'members': ['id-a', 'id-b']}
        snap = b.snapshot(hosts(2), [b.server('a', 'hv1'),
                                     b.server('b', 'hv1')], [group])
        with self.assertRaises(paths.PathError) as cm:
            paths.find_path(snap, {'id-a': 'hv2'}, OPTIONS)
        self.assertIn('affinity group db would be split', str(cm.exception))

    def test_an_operator_target_may_saturate_below_the_ceiling(self):
        """hv2 has 28.8 of its 32 threads busy; the 8 a server asks for
        would saturate it. Balancing and drains refuse that, an operator's
        target does not: the ceiling, theirs to set, bounds it."""
        snap = b.snapshot(hosts(2, cpu=0.9), [
            b.server('a', 'hv1', vcpus=8, cpu=1.0)])
        path = paths.find_path(snap, {'id-a': 'hv2'}, OPTIONS)
        self.assertEqual(['hv2'], [m.destination for m in path.moves])
        state = state_mod.new_state(snap)
        rules = filters.Rules(snap, OPTIONS)
        args = snap.server('id-a'), snap.hypervisor('hv2'), state, rules
        self.assertIsNone(policy.PLACEMENT.why_not_destination(*args))
        for kind in (policy.BALANCE, policy.DRAIN):
            self.assertIn('CPU would be saturated',
                          kind.why_not_destination(*args))

    def test_cooldown_does_not_block_an_operator_target(self):
        migration = {'server_id': 'id-a', 'status': 'completed',
                     'created_at': b.TAKEN_AT, 'updated_at': b.TAKEN_AT}
        snap = b.snapshot(hosts(2), [b.server('a', 'hv1')],
                          migrations=[migration])
        path = self.check(snap, {'id-a': 'hv2'})
        self.assertEqual(1, len(path.moves))


class TestTargetsFrom(unittest.TestCase):
    snap = b.snapshot(hosts(2) + [b.hypervisor('node9', host='cmp9')], [
        b.server('a', 'hv1'), b.server('twin', 'hv1'),
        dict(b.server('twin', 'hv2'), id='id-twin2')])

    def test_names_ids_and_compute_hosts(self):
        self.assertEqual(
            {'id-a': 'node9', 'id-twin2': 'hv1'},
            paths.targets_from({'a': 'cmp9', 'id-twin2': 'hv1'}, self.snap,
                               'f.yaml'))

    def test_errors_name_the_entry(self):
        cases = [
            ([], 'f.yaml: expected a mapping of server'),
            ({'nope': 'hv1'}, 'f.yaml: nope: no such server'),
            ({'twin': 'hv1'}, 'f.yaml: twin: no such server (or the name is '
                              'not unique: use the ID)'),
            ({'a': 'hv7'}, 'f.yaml: a: no such hypervisor or compute host '
                           'hv7'),
            ({'a': 3}, 'f.yaml: a: the hypervisor must be a name, not 3'),
            ({'a': 'hv1', 'id-a': 'hv2'},
             'f.yaml: server id-a is given two targets'),
        ]
        for document, message in cases:
            with self.assertRaises(paths.PathError) as cm:
                paths.targets_from(document, self.snap, 'f.yaml')
            self.assertIn(message, str(cm.exception))


class TestPlacementPlanFile(unittest.TestCase):
    def plan(self, kind):
        snap = b.snapshot(hosts(3), [
            b.server('a', 'hv1', ram_gb=24), b.server('b', 'hv2', ram_gb=24),
            b.server('small', 'hv3', ram_gb=4)])
        path = paths.find_path(snap, {'id-a': 'hv2', 'id-b': 'hv1'}, OPTIONS)
        return plan_mod.Plan(
            moves=path.moves, imbalance_before=0.1, imbalance_after=0.1,
            domains=(), fingerprint=plan_mod.fingerprint(snap),
            snapshot_taken_at=snap.taken_at, snapshot_source={},
            options={}, created_at=snap.taken_at, kind=kind)

    def test_a_parked_server_may_move_again(self):
        document = plan_mod.to_document(self.plan(kinds.PLACEMENT.name))
        self.assertEqual('placement', document['kind'])
        again = plan_mod.from_document(copy.deepcopy(document))
        self.assertEqual(kinds.PLACEMENT.name, again.kind)
        self.assertEqual(3, len(again.moves))

    def test_only_in_a_placement_plan_and_only_on_from_where_it_went(self):
        document = plan_mod.to_document(self.plan(kinds.BALANCE.name))
        with self.assertRaises(plan_mod.PlanError) as cm:
            plan_mod.from_document(document, 'p.json')
        self.assertIn('moves[2].server_id: server id-a is moved twice',
                      str(cm.exception))
        document = plan_mod.to_document(self.plan(kinds.PLACEMENT.name))
        document['moves'][2]['source'] = 'hv1'
        with self.assertRaises(plan_mod.PlanError) as cm:
            plan_mod.from_document(document, 'p.json')
        self.assertIn('moves[2].source: server id-a is on hv3 after its '
                      'previous move, not on hv1', str(cm.exception))
        document = plan_mod.to_document(self.plan(kinds.PLACEMENT.name))
        document['kind'] = 'shuffle'
        with self.assertRaises(plan_mod.PlanError) as cm:
            plan_mod.from_document(document, 'p.json')
        self.assertIn('kind', str(cm.exception))


# --- property: valid whenever found, found whenever one exists -------------

def reachable(snap, targets, options=OPTIONS, limit=20000):
    """Brute force, independent of paths.py: breadth-first over every
    server moving to every hypervisor, each step checked by the filters."""
    rules = filters.Rules(snap, options)
    ids = [s.id for s in snap.servers]
    movable = {s.id for s in snap.servers
               if policy.PLACEMENT.why_not(s, rules) is None}
    names = [h.name for h in snap.hypervisors]
    start = tuple(snap.server(i).hypervisor for i in ids)
    goal = tuple(targets.get(i, snap.server(i).hypervisor) for i in ids)
    seen = {start: ()}
    queue = collections.deque([start])
    while queue:
        placement = queue.popleft()
        if placement == goal:
            return True
        assert len(seen) < limit
        state = state_mod.new_state(snap)
        for sid, dst in seen[placement]:
            state.apply(sid, dst)
        for i, sid in enumerate(ids):
            for dst in names:
                if sid not in movable or dst == placement[i] or filters.why_not_destination(
                        snap.server(sid), snap.hypervisor(dst), state, rules):
                    continue
                after = placement[:i] + (dst,) + placement[i + 1:]
                if after not in seen:
                    seen[after] = seen[placement] + ((sid, dst),)
                    queue.append(after)
    return False


@st.composite
def tight_clouds(draw):
    """A few small, nearly full hypervisors and a random target."""
    n_hosts = draw(st.integers(2, 4))
    hyps = [b.hypervisor('hv%d' % i, ram_gb=draw(st.sampled_from([16, 24])))
            for i in range(n_hosts)]
    servers = []
    for i in range(draw(st.integers(1, 5))):
        extra = {'locked': True} if draw(st.integers(0, 7)) == 0 else {}
        servers.append(b.server(
            's%d' % i, 'hv%d' % draw(st.integers(0, n_hosts - 1)),
            ram_gb=draw(st.sampled_from([4, 8, 12])), **extra))
    usage = collections.Counter()
    for s in servers:
        usage[s['hypervisor']] += s['flavor']['ram'] // 1024
    for h in hyps:  # start from a valid state
        h['inventories']['MEMORY_MB']['total'] = max(
            h['inventories']['MEMORY_MB']['total'],
            usage[h['name']] * 1024)
    groups = []
    if len(servers) >= 2 and draw(st.booleans()):
        groups.append({'id': 'g', 'policy': 'anti-affinity',
                       'members': [s['id'] for s in servers[:2]]})
        if servers[0]['hypervisor'] == servers[1]['hypervisor']:
            groups = []
    if draw(st.booleans()):  # swaps and cycles: the hard cases
        chosen = [s for s in servers if draw(st.booleans())]
        targets = {s['id']: chosen[i - 1]['hypervisor']
                   for i, s in enumerate(chosen)}
    else:
        targets = {s['id']: 'hv%d' % draw(st.integers(0, n_hosts - 1))
                   for s in servers if draw(st.booleans())}
    return b.document(hyps, servers, groups), targets


class TestPathProperties(unittest.TestCase):
    @hypothesis.settings(max_examples=120, deadline=None)
    @hypothesis.given(case=tight_clouds())
    def test_every_path_is_valid_and_one_is_found_when_one_exists(
            self, case):
        document, targets = case
        snap = snapshot_io.parse(copy.deepcopy(document))
        try:
            path = paths.find_path(snap, targets, OPTIONS)
        except paths.PathError as exc:
            self.assertIn('cannot be reached', str(exc))
            self.assertFalse(reachable(snap, targets), str(exc))
            return
        placement = replay(snap, path.moves)
        for server in snap.servers:
            self.assertEqual(targets.get(server.id, server.hypervisor),
                             placement[server.id])


class TestApplyingAPath(unittest.TestCase):
    """The executor runs a placement plan: a parked server moves twice."""

    def run_path(self, kind, since=None):
        """since(nova): what changes in the cloud once the path is found."""
        from tests.unit.core import test_executor as te
        hyps = hosts(3)
        servers = [b.server('a', 'hv1', ram_gb=24),
                   b.server('b', 'hv2', ram_gb=24),
                   b.server('small', 'hv3', ram_gb=4)]
        nova = te.FakeNova(hyps, servers)
        options = opts.PlannerOptions(ceiling=100.0, now=te.NOW)
        path = paths.find_path(nova.snapshot(), {'id-a': 'hv2',
                                                 'id-b': 'hv1'}, options)
        if since:
            since(nova)
        clock = te.Clock()
        results = executor.Executor(
            nova, options, executor.ApplyOptions(poll_interval=1.0),
            clock=clock, sleep=clock.sleep, wall=lambda: te.NOW + clock.now,
            kind=kind).run(path.moves).results
        return nova, results

    def test_every_step_runs_in_order(self):
        nova, results = self.run_path(kinds.PLACEMENT)
        self.assertEqual([executor.DONE] * 3, [r.status for r in results])
        self.assertEqual('hv2', nova.servers['id-a']['hypervisor'])
        self.assertEqual('hv1', nova.servers['id-b']['hypervisor'])
        self.assertEqual([('id-a', []), ('id-b', []), ('id-a', [])],
                         nova.started)  # one at a time: each needs the last

    KEPT_IN_ZONE = (' (the leveller keeps a server in its zone; Nova would '
                    'move this one, not pinned to a zone)')

    def test_the_availability_zones_are_checked_again(self):
        """Each move is checked again against the zones as they are now:
        hv1 put in another zone, or a server pinned to another zone, since
        the path was found. Nothing moves."""
        def hv1_elsewhere(nova):
            nova.hyps[0]['availability_zone'] = 'az2'

        def a_pinned(nova):
            nova.servers['id-a']['pinned_availability_zone'] = 'az3'
        for since, why in (
                (hv1_elsewhere, [
                    ('a', 'hv3: availability zone az1 differs from the '
                          'server\'s az2' + self.KEPT_IN_ZONE),
                    ('b', 'hv1: availability zone az2 differs from the '
                          'server\'s az1' + self.KEPT_IN_ZONE)]),
                (a_pinned, [
                    ('a', 'hv3: server is pinned to availability zone az3, '
                          'hypervisor is in az1')])):
            with self.subTest(since.__name__):
                nova, results = self.run_path(kinds.PLACEMENT, since)
                self.assertEqual([executor.SKIPPED] * 3,
                                 [r.status for r in results])
                self.assertEqual(why, [(r.move.server_name, r.reason)
                                       for r in results[:len(why)]])
                self.assertEqual([], nova.started)

    def test_a_balancing_check_would_refuse_the_parking_move(self):
        nova, results = self.run_path(kinds.BALANCE)
        self.assertEqual([executor.SKIPPED] * 3, [r.status for r in results])
        self.assertIn('no longer evens out the load', results[0].reason)
        self.assertEqual([], nova.started)
