"""N+k headroom packs the lost hypervisors' servers through the filters."""

import unittest

from benchmarks import generate
from osc_leveller.core import filters
from osc_leveller.core import headroom
from osc_leveller.core import model
from osc_leveller.core import options as opts
from osc_leveller.core import planner
from osc_leveller.core import snapshot as snapshot_io
from osc_leveller.core import state as state_mod
from tests.unit import builders as b


def check(hyps, servers, k=1, groups=()):
    snapshot = b.snapshot(hyps, servers, groups=groups)
    state = state_mod.new_state(snapshot)
    rules = filters.Rules(snapshot, opts.PlannerOptions())
    return snapshot, state, headroom.of_domains(snapshot, state, rules, k)


class TestHeadroom(unittest.TestCase):
    def test_free_capacity_in_pieces_is_no_headroom(self):
        hyps = [b.hypervisor('hv%d' % i, ram_gb=64) for i in (1, 2, 3)]
        servers = [b.server('big', 'hv1', ram_gb=48),
                   b.server('a', 'hv2', ram_gb=32),
                   b.server('b', 'hv3', ram_gb=32)]
        snapshot, state, (found,) = check(hyps, servers)
        # 64 GiB free on hv2 and hv3 together: adding up says yes.
        self.assertEqual(64 * 1024, sum(
            h.capacity(model.MEMORY_MB) - h.usage(model.MEMORY_MB)
            for h in snapshot.hypervisors[1:]))
        self.assertFalse(found.ok)
        self.assertEqual(('hv1',), found.lost)
        self.assertEqual(['big'], [s.name for s, _ in found.unplaced])
        self.assertEqual(
            'no: losing hv1, 1 server fit nowhere: big (on hv2, big: MEMORY_MB '
            'full: 32768 used + 49152 needed > 65536 capacity ((65536 total '
            '- 0 reserved) x 1))', found.reason())

    def test_anti_affinity_needs_a_spare_hypervisor(self):
        group = {'id': 'g1', 'name': 'db', 'policy': 'anti-affinity',
                 'members': ['id-db%d' % i for i in (1, 2, 3)]}
        servers = [b.server('db%d' % i, 'hv%d' % i, server_groups=['g1'])
                   for i in (1, 2, 3)]
        hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
        _, _, (found,) = check(hyps, servers, groups=[group])
        self.assertEqual(('hv1',), found.lost)
        self.assertIn('anti-affinity group db', found.reason())
        hyps.append(b.hypervisor('hv4'))
        _, _, (found,) = check(hyps, servers, groups=[group])
        self.assertTrue(found.ok)
        self.assertEqual(('yes', 4, True),
                         (found.reason(), found.sets, found.every_set))

    def test_an_affinity_group_goes_together(self):
        group = {'id': 'g1', 'name': 'pair', 'policy': 'affinity',
                 'members': ['id-p1', 'id-p2']}
        hyps = [b.hypervisor('hv%d' % i, ram_gb=64) for i in (1, 2, 3)]
        servers = [b.server('p%d' % i, 'hv1', ram_gb=20,
                            server_groups=['g1']) for i in (1, 2)]
        servers += [b.server('f2', 'hv2', ram_gb=16),
                    b.server('f3', 'hv3', ram_gb=30)]
        # hv2 takes the pair (48 free); losing hv2 or hv3, one server each.
        _, _, (found,) = check(hyps, servers, groups=[group])
        self.assertEqual('yes', found.reason())
        servers[2]['flavor']['ram'] = 30 * 1024  # 34 free each: no room
        _, _, (found,) = check(hyps, servers, groups=[group])
        self.assertEqual(['p1', 'p2'], [s.name for s, _ in found.unplaced])
        self.assertIn('on hv2, p2: MEMORY_MB full', found.reason())

    def test_soft_policies_do_not_refuse_a_rebuild(self):
        group = {'id': 'g1', 'name': 'web', 'policy': 'soft-anti-affinity',
                 'members': ['id-w1', 'id-w2']}
        hyps = [b.hypervisor('hv1'), b.hypervisor('hv2')]
        servers = [b.server('w1', 'hv1', server_groups=['g1']),
                   b.server('w2', 'hv2', server_groups=['g1'])]
        _, _, (found,) = check(hyps, servers, groups=[group])
        self.assertTrue(found.ok)
        group['policy'] = 'anti-affinity'
        _, _, (found,) = check(hyps, servers, groups=[group])
        self.assertIn('anti-affinity group web: hv2 already hosts w2',
                      found.reason())

    def test_the_state_is_left_as_it_was(self):
        hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
        servers = [b.server('s%d' % i, 'hv%d' % (i % 3 + 1), ram_gb=8)
                   for i in range(9)]
        snapshot, state, (found,) = check(hyps, servers)
        self.assertTrue(found.ok)
        for hyp in snapshot.hypervisors:
            self.assertEqual(hyp.usage(model.MEMORY_MB),
                             state.usage(hyp.name, model.MEMORY_MB))
        self.assertEqual({s.id: s.hypervisor for s in snapshot.servers},
                         {s.id: state.host_of(s.id)
                          for s in snapshot.servers})

    def test_n_plus_two(self):
        # Four hypervisors with 72 of 128 GiB allocated in 24 GiB servers:
        # one's three fit on the other three; two's six do not fit on two.
        hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3, 4)]
        servers = [b.server('s%d-%d' % (h, i), 'hv%d' % h, ram_gb=24)
                   for h in (1, 2, 3, 4) for i in range(3)]
        _, _, (one,) = check(hyps, servers, k=1)
        self.assertTrue(one.ok)
        _, _, (two,) = check(hyps, servers, k=2)
        self.assertEqual(('hv1', 'hv2'), two.lost)
        self.assertEqual(2, len(two.unplaced))
        self.assertTrue(two.reason().startswith(
            'no: losing hv1, hv2, 2 servers fit nowhere: '))

    def test_many_hypervisors_pack_the_heaviest_sets(self):
        hyps = [b.hypervisor('hv%02d' % i) for i in range(30)]
        servers = [b.server('s%d' % i, 'hv%02d' % (i % 30), ram_gb=4 + i % 7)
                   for i in range(90)]
        _, _, (found,) = check(hyps, servers, k=2)  # 435 sets of 2
        self.assertTrue(found.ok)
        self.assertFalse(found.every_set)
        self.assertLessEqual(found.sets, headroom.MAX_SETS)
        self.assertEqual('yes for the %d heaviest sets of 2' % found.sets,
                         found.reason())
        _, _, (found,) = check(hyps, servers, k=1)  # k = 1: every one
        self.assertEqual((30, True), (found.sets, found.every_set))

    def test_domains_apart_and_too_small_ones(self):
        hyps = [b.hypervisor('a1', az='az1'), b.hypervisor('a2', az='az1'),
                b.hypervisor('c1', az='az2')]
        servers = [b.server('x', 'c1')]
        _, _, found = check(hyps, servers)
        self.assertEqual([('az1/Gen1', 'yes'),
                          ('az2/Gen1', 'no: only 1 hypervisor')],
                         [(h.domain, h.reason()) for h in found])


def tight_cloud():
    """(hypervisors, servers): hv3 is hot; of its servers, g (24 GiB)
    would fill hv2, the one hypervisor where hv1's A (40 GiB) goes if hv1
    is lost; h (30 GiB) frees enough of hv3 for A instead."""
    hyps = [b.hypervisor('hv%d' % i, ram_gb=64, vcpus=16) for i in (1, 2, 3)]
    servers = [b.server('A', 'hv1', ram_gb=40, cpu=0.1),
               b.server('d', 'hv2', ram_gb=8, cpu=0.1),
               b.server('g', 'hv3', ram_gb=24, vcpus=8, cpu=0.9),
               b.server('h', 'hv3', ram_gb=30, vcpus=8, cpu=0.9)]
    return hyps, servers


def tight():
    return b.snapshot(*tight_cloud())


def kept(snapshot):
    """(state, rules) of a fresh state where N+1 is kept."""
    state = state_mod.new_state(snapshot)
    rules = filters.Rules(snapshot, opts.PlannerOptions(
        keep_n_plus_one=True))
    rules.kept_state = state
    return state, rules


def no_spare():
    """One db server per hypervisor, hard anti-affinity: no loss is
    absorbed to start with, so no move is held to it; hv3 is hot."""
    group = {'id': 'g1', 'name': 'db', 'policy': 'anti-affinity',
             'members': ['id-db%d' % i for i in (1, 2, 3)]}
    hyps = [b.hypervisor('hv%d' % i, ram_gb=64, vcpus=16) for i in (1, 2, 3)]
    servers = [b.server('db%d' % i, 'hv%d' % i, server_groups=['g1'],
                        cpu=0.1) for i in (1, 2, 3)]
    servers += [b.server('g', 'hv3', ram_gb=8, vcpus=8, cpu=0.9),
                b.server('h', 'hv3', ram_gb=8, vcpus=8, cpu=0.9)]
    return b.snapshot(hyps, servers, groups=[group])


def replayed(snapshot, plan):
    state = state_mod.new_state(snapshot)
    for move in plan.moves:
        state.apply(move.server_id, move.destination)
    return state


class TestKeepNPlusOne(unittest.TestCase):
    def plan(self, snapshot, keep):
        options = opts.PlannerOptions(keep_n_plus_one=keep)
        plan = planner.make_plan(snapshot, options)
        state = replayed(snapshot, plan)
        rules = filters.Rules(snapshot, options)
        return plan, [h.reason() for h in headroom.of_domains(
            snapshot, state, rules)]

    def test_plan_refuses_the_move_that_breaks_it(self):
        snapshot = tight()
        plan, after = self.plan(snapshot, keep=False)
        self.assertEqual([('g', 'hv2')], [(m.server_name, m.destination)
                                          for m in plan.moves])
        self.assertIn('no: losing hv1, 1 server fit nowhere: A', after[0])
        plan, after = self.plan(snapshot, keep=True)
        self.assertEqual([('h', 'hv2')], [(m.server_name, m.destination)
                                          for m in plan.moves])
        self.assertEqual(['yes'], after)
        self.assertTrue(plan.options['keep_n_plus_one'])
        self.assertNotIn('n_plus_one', plan.domains[0])

    def test_explain_names_the_loss(self):
        snapshot = tight()
        planner_ = planner.Planner(snapshot, opts.PlannerOptions(
            keep_n_plus_one=True))
        _, rows = planner_.explain(snapshot.server('id-g'))
        verdicts = {r[0]: (r[3], r[4]) for r in rows}
        self.assertEqual('rejected', verdicts['hv2'][0])
        self.assertTrue(verdicts['hv2'][1].startswith(
            'would break N+1: losing hv1, 1 server fit nowhere: A (on '),
            verdicts['hv2'][1])
        _, rows = planner_.explain(snapshot.server('id-h'))
        self.assertEqual('accepted', {r[0]: r[3] for r in rows}['hv2'])

    def test_an_exchange_is_checked_once_made(self):
        state, rules = kept(tight())
        self.assertIn('losing hv1', headroom.exchange_breaks(
            state, rules, [('id-g', 'hv2')]))
        # A parking move that a later one undoes counts where it ends.
        self.assertIsNone(headroom.exchange_breaks(
            state, rules, [('id-g', 'hv2'), ('id-g', 'hv1'),
                           ('id-h', 'hv2')]))
        # Trial states of the path finder are not held to it move by move.
        self.assertIsNone(headroom.exchange_breaks(
            state.copy(), rules, [('id-g', 'hv2')]))

    def test_a_domain_without_it_is_noted_not_blocked(self):
        snapshot = no_spare()
        plan, after = self.plan(snapshot, keep=True)
        self.assertTrue(plan.moves)
        self.assertEqual(self.plan(snapshot, keep=False)[0].moves, plan.moves)
        self.assertIn('losing hv1, 1 server fit nowhere: db1',
                      plan.domains[0]['n_plus_one'])

    def test_the_packings_kept_stay_valid_through_a_plan(self):
        """On generated clouds (seed 3 has hypervisors above their disk
        capacity), every hypervisor's packing the guard keeps is a
        placement the filters accept in the planned state, and the check
        of score --summary agrees; without the option the same planner
        loses N+1 on seed 2."""
        for seed in (2, 3):
            with self.subTest(seed=seed):
                self.check_kept(snapshot_io.parse(generate.generate(
                    40, 1600, seed=seed)), loses=seed == 2)

    def check_kept(self, snapshot, loses):
        plan, after = self.plan(snapshot, keep=False)
        self.assertEqual(loses, any(r.startswith('no') for r in after))
        options = opts.PlannerOptions(keep_n_plus_one=True)
        planner_ = planner.Planner(snapshot, options)
        plan = planner_.plan()
        self.assertGreater(len(plan.moves), 10)
        state, rules = planner_.state, planner_.rules
        guard = headroom.guard_of(state, rules)
        guard.why_not(snapshot.servers[0], snapshot.hypervisors[0])  # sync
        checked = 0
        for hyp in snapshot.hypervisors:
            if not hyp.usable or hyp.name in guard.exempt:
                continue
            residents = {s.id for s in snapshot.servers
                         if state.host_of(s.id) == hyp.name}
            placed = guard.placed[hyp.name]
            self.assertEqual(residents, set(placed), hyp.name)
            trial = headroom._Trial(state)
            for sid, there in placed.items():
                server, dest = snapshot.server(sid), snapshot.hypervisor(
                    there)
                self.assertIsNone(filters.first_reason(
                    headroom.FILTERS, server, dest, trial, rules) or
                    headroom._groups(server, dest, trial, rules, residents),
                    (hyp.name, server.name, there))
                trial.move(server, there)
            checked += 1
        self.assertGreater(checked, 20)
        lost = {h.domain: h for h in headroom.of_domains(
            snapshot, state_mod.new_state(snapshot), rules)}
        for found in headroom.of_domains(snapshot, state, rules):
            if lost[found.domain].ok:
                self.assertTrue(found.ok, found.reason())

    def test_moves_made_without_asking_repack_their_domain(self):
        snapshot = tight()
        state, rules = kept(snapshot)
        guard = headroom.guard_of(state, rules)
        self.assertFalse(guard.exempt)
        state.apply('id-g', 'hv2')  # not asked: hv1's loss now breaks
        self.assertIsNone(guard.why_not(snapshot.server('id-d'),
                                        snapshot.hypervisor('hv3')))
        self.assertEqual({'hv1'}, guard.exempt)
