import dataclasses
import json
import operator
import os
import tempfile
import unittest
from unittest import mock

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.planning import freeing
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

OPTIONS = opts.PlannerOptions()


def cloud(extra=()):
    """Four hypervisors of 128 GiB in one domain holding 8, 16, 40 and 60
    GiB; another in az2, alone in its domain and empty."""
    hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3, 4)]
    hyps.append(b.hypervisor('lone', az='az2'))
    servers = [b.server('a1', 'hv1', ram_gb=8),
               b.server('b1', 'hv2', ram_gb=8), b.server('b2', 'hv2',
                                                         ram_gb=8),
               b.server('c1', 'hv3', ram_gb=32), b.server('c2', 'hv3',
                                                          ram_gb=8),
               b.server('d1', 'hv4', ram_gb=60)]
    return hyps, servers + list(extra)


def replay(test, snap, moves, options=OPTIONS, who=policy.FREE_HOSTS):
    """Every move passes every rule of the kind, in the order given."""
    state = state_mod.new_state(snap)
    rules = filters.Rules(snap, options)
    for move in moves:
        server = snap.server(move.server_id)
        test.assertEqual(move.source, state.host_of(server.id))
        test.assertIsNone(who.why_not_to(
            server, snap.hypervisor(move.destination), state, rules))
        state.apply(move.server_id, move.destination)
    return state


def freed(result):
    return [(f.hypervisor, f.ram_gb) for f in result.freed]


class TestFreeHosts(unittest.TestCase):
    def test_count_frees_the_lightest_onto_the_fullest(self):
        hyps, servers = cloud()
        snap = b.snapshot(hyps, servers)
        result = freeing.free_hosts(snap, OPTIONS, count=1)
        # In az1 hv1 holds the least RAM; its server goes to hv4, the
        # fullest. The lone hypervisor of az2 is free already, at no cost.
        self.assertEqual([('hv1', 8.0), ('lone', 0.0)], freed(result))
        self.assertEqual([('a1', 'hv1', 'hv4')],
                         [(m.server_name, m.source, m.destination)
                          for m in result.moves])
        self.assertIn('frees hv1: cmp-hv4 goes', result.moves[0].reason)
        replay(self, snap, result.moves)

    def test_as_many_as_possible_moves_the_fewest_gib(self):
        hyps, servers = cloud()
        snap = b.snapshot(hyps, servers)
        result = freeing.free_hosts(snap, OPTIONS)
        # hv1, hv2 and hv3 fit on hv4 (124 GiB of 128), 64 GiB moved; not
        # the 60 GiB of hv4 first, then more.
        self.assertEqual(['hv1', 'hv2', 'hv3', 'lone'],
                         [f.hypervisor for f in result.freed])
        self.assertEqual(64.0, sum(m.ram_gb for m in result.moves))
        self.assertEqual({'hv4'}, {m.destination for m in result.moves})
        state = replay(self, snap, result.moves)
        for name in ('hv1', 'hv2', 'hv3'):
            self.assertEqual(0, state.usage(name, 'MEMORY_MB'))
        # hv4 took servers: it keeps them (a server moves once).
        self.assertEqual((), result.not_freed)
        # A server moves once; waves share no hypervisor.
        self.assertEqual(len(result.moves),
                         len({m.server_id for m in result.moves}))
        for wave in {m.wave for m in result.moves}:
            touched = [h for m in result.moves if m.wave == wave
                       for h in (m.source, m.destination)]
            self.assertEqual(len(touched), len(set(touched)))

    def test_a_server_that_may_not_move_keeps_its_host(self):
        hyps, servers = cloud([b.server('pinned', 'hv1', locked=True),
                               b.server('gpu', 'hv2',
                                        blockers=['vGPU allocation'])])
        snap = b.snapshot(hyps, servers)
        result = freeing.free_hosts(snap, OPTIONS, count=1)
        self.assertEqual(['hv3', 'lone'],
                         [f.hypervisor for f in result.freed])
        why = dict((n, r) for n, _, r in result.not_freed)
        self.assertEqual('locked', why['hv1'].code)
        self.assertIn('pinned cannot move', why['hv1'])
        self.assertEqual('blockers', why['hv2'].code)
        self.assertIn('vGPU allocation', why['hv2'])
        replay(self, snap, result.moves)

    def test_hypervisors_that_stay_busy_are_filled_first(self):
        # hv1 cannot be freed: a locked server. Filling the fullest first,
        # hv2's 40 GiB would go to hv3 (60 GiB), which could then not be
        # freed; onto hv1 first, both are: 108 GiB of its 128.
        hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
        servers = [b.server('lock', 'hv1', ram_gb=8, locked=True),
                   b.server('b', 'hv2', ram_gb=40),
                   b.server('c', 'hv3', ram_gb=60)]
        snap = b.snapshot(hyps, servers)
        result = freeing.free_hosts(snap, OPTIONS)
        self.assertEqual([('hv2', 40.0), ('hv3', 60.0)], freed(result))
        self.assertEqual({'hv1'}, {m.destination for m in result.moves})
        # hv1 took servers; the plan still says why it stays busy.
        self.assertEqual([('hv1', 'locked')], [
            (n, r.code) for n, _, r in result.not_freed])
        replay(self, snap, result.moves)

    def test_a_domain_is_planned_again_around_what_it_could_not_free(self):
        # hv1's two servers keep together (hard affinity): neither moves
        # alone, so hv1 is not freed, which only trying tells. Planned
        # again with hv1 filled first, hv2 and hv3 are both freed.
        group = {'id': 'g1', 'name': 'pair', 'policy': 'affinity',
                 'members': ['id-p1', 'id-p2']}
        hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
        servers = [b.server('p1', 'hv1', ram_gb=4),
                   b.server('p2', 'hv1', ram_gb=4),
                   b.server('b', 'hv2', ram_gb=40),
                   b.server('c', 'hv3', ram_gb=60)]
        snap = b.snapshot(hyps, servers, groups=[group])
        result = freeing.free_hosts(snap, OPTIONS)
        self.assertEqual(['hv2', 'hv3'], [f.hypervisor for f in result.freed])
        self.assertEqual(100.0, sum(m.ram_gb for m in result.moves))
        self.assertEqual({'hv1'}, {m.destination for m in result.moves})
        replay(self, snap, result.moves)
        # One pass alone frees one: hv2's servers fill hv3, the fullest.
        with mock.patch.object(freeing, 'PASSES', 1):
            once = freeing.free_hosts(snap, OPTIONS)
        self.assertEqual(['hv2'], [f.hypervisor for f in once.freed])

    def test_stopped_servers_keep_their_host_unless_they_migrate_cold(self):
        hyps, servers = cloud([b.server('off', 'hv1', ram_gb=4,
                                        status='SHUTOFF')])
        snap = b.snapshot(hyps, servers)
        result = freeing.free_hosts(snap, OPTIONS, count=1)
        self.assertEqual(['hv2', 'lone'], [f.hypervisor
                                           for f in result.freed])
        why = dict((n, r) for n, _, r in result.not_freed)['hv1']
        self.assertEqual('stopped_stay', why.code)
        self.assertIn('off cannot move: status SHUTOFF: stopped servers stay '
                      '(use --cold-migrate-stopped', why)
        cold = freeing.free_hosts(snap, OPTIONS, count=1, cold=True)
        self.assertEqual(['hv1', 'lone'], [f.hypervisor for f in cold.freed])
        moved = {m.server_name: m for m in cold.moves}
        self.assertEqual({'a1', 'off'}, set(moved))
        self.assertTrue(moved['off'].reason.endswith(
            '; SHUTOFF: a cold migration'), moved['off'].reason)
        self.assertNotIn('cold', moved['a1'].reason)
        replay(self, snap, cold.moves, who=policy.FREE_HOSTS_COLD)
        # The plan says so: apply must be told to migrate them cold.
        plan = freeing.make_plan(snap, OPTIONS, 1, cold=True)
        self.assertEqual(kinds.FREE_HOSTS.name, plan.kind)
        self.assertIs(True, plan.options['cold_migrate_stopped'])
        self.assertNotIn('cold_migrate_stopped', freeing.make_plan(
            snap, OPTIONS, 1).options)

    def test_a_host_whose_servers_do_not_all_fit_is_left_as_it_was(self):
        # hv2 has room for one 20 GiB server of hv1, not two; hv2's own
        # 108 GiB fit nowhere either.
        hyps = [b.hypervisor('hv1'), b.hypervisor('hv2')]
        servers = [b.server('x', 'hv1', ram_gb=20),
                   b.server('y', 'hv1', ram_gb=20),
                   b.server('big', 'hv2', ram_gb=108)]
        result = freeing.free_hosts(b.snapshot(hyps, servers), OPTIONS)
        self.assertEqual((), result.moves)  # x's trial move rolled back
        self.assertEqual((), result.freed)
        why = dict((n, r) for n, _, r in result.not_freed)
        self.assertIn('no hypervisor of its domain accepts', why['hv1'])
        self.assertIn('MEMORY_MB full (1 hypervisor)', why['hv1'])
        self.assertEqual(freeing.UNPLACED, why['hv1'].code)

    def test_the_ceiling_and_anti_affinity_hold(self):
        group = {'id': 'g1', 'name': 'web', 'policy': 'anti-affinity',
                 'members': ['id-w1', 'id-w2']}
        hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
        servers = [b.server('w1', 'hv1', ram_gb=4),
                   b.server('w2', 'hv2', ram_gb=100),
                   b.server('s3', 'hv3', ram_gb=20)]
        snap = b.snapshot(hyps, servers, groups=[group])
        result = freeing.free_hosts(snap, OPTIONS, count=1)
        # hv2 is the fullest, but holds w1's group mate: w1 goes to hv3.
        self.assertEqual([('w1', 'hv3')], [(m.server_name, m.destination)
                                           for m in result.moves])
        replay(self, snap, result.moves)
        # A ceiling so low that no destination may take w1.
        low = dataclasses.replace(OPTIONS, ceiling=0.1)
        result = freeing.free_hosts(snap, low, count=1)
        self.assertEqual((), result.moves)
        self.assertIn('above the ceiling 0.10', dict(
            (n, r) for n, _, r in result.not_freed)['hv1'])

    def test_n_plus_k_is_kept(self):
        # Freeing hv1 leaves 52, 44 and 44 GiB on hv2, hv3 and hv4 (128
        # GiB each): the loss of any one fits on the others (N+1), not the
        # loss of two (N+2). Freeing another would leave 96 and 44: no N+1.
        hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3, 4)]
        servers = [b.server('a', 'hv1', ram_gb=8)] + [
            b.server('%s%d' % (h, i), h, ram_gb=22)
            for h in ('hv2', 'hv3', 'hv4') for i in (1, 2)]
        snap = b.snapshot(hyps, servers)
        keep = dataclasses.replace(OPTIONS, keep_n_plus_one=True)
        everything = freeing.free_hosts(snap, keep)
        self.assertEqual(['hv1'], [f.hypervisor for f in everything.freed])
        why = [r for _, _, r in everything.not_freed]
        self.assertEqual(2, len(why))
        self.assertEqual({freeing.NO_HEADROOM}, {r.code for r in why})
        self.assertIn('freeing it would leave az1/Gen1 without N+1 '
                      'headroom: losing hv2', why[0])
        unkept = freeing.free_hosts(snap, OPTIONS)
        self.assertEqual(2, len(unkept.freed))
        two = freeing.free_hosts(snap, keep, count=1, headroom_k=2)
        self.assertEqual([], [f.hypervisor for f in two.freed])
        self.assertIn('without N+2 headroom', two.not_freed[0][2])

    def test_n_larger_than_possible_says_what_is(self):
        hyps, servers = cloud()
        with self.assertRaises(freeing.TooMany) as caught:
            freeing.make_plan(b.snapshot(hyps, servers), OPTIONS, count=2)
        self.assertIn('2 hypervisors cannot be freed in every balancing '
                      'domain: at most 2 in az1/Gen1, 1 in az2/Gen1',
                      str(caught.exception))


class TestRecheck(unittest.TestCase):
    def setUp(self):
        hyps, servers = cloud()
        self.snap = b.snapshot(hyps, servers)
        self.moves = freeing.free_hosts(self.snap, OPTIONS, count=2).moves
        self.check = kinds.FREE_HOSTS.recheck(self.moves)

    def verdicts(self, snap):
        state = state_mod.new_state(snap)
        rules = filters.Rules(snap, OPTIONS)
        found = []
        for move in self.moves:
            why = self.check(move, snap, state, rules)
            found.append(why)
            if why is None:
                state.apply(move.server_id, move.destination)
        return found

    def test_as_planned(self):
        self.assertEqual([None] * len(self.moves), self.verdicts(self.snap))

    def test_a_server_arrived_on_a_source(self):
        hyps, servers = cloud([b.server('new', 'hv2', ram_gb=2)])
        found = self.verdicts(b.snapshot(hyps, servers))
        on_hv2 = [why for m, why in zip(self.moves, found)
                  if m.source == 'hv2']
        self.assertTrue(on_hv2)
        for why in on_hv2:
            self.assertEqual(checks.NOT_FREED, why.code)
            self.assertIn('hv2 would not be freed: new is on it and not in '
                          'the plan', why)
        self.assertEqual({None}, {why for m, why in zip(self.moves, found)
                                  if m.source != 'hv2'})

    def test_every_rule_still_holds(self):
        hyps, servers = cloud()
        servers[0]['locked'] = True  # a1, on hv1
        found = self.verdicts(b.snapshot(hyps, servers))
        self.assertEqual('locked', found[[m.server_name for m in
                                          self.moves].index('a1')].code)


class TestPlanFile(unittest.TestCase):
    def test_round_trip(self):
        hyps, servers = cloud()
        snap = b.snapshot(hyps, servers)
        plan = freeing.make_plan(snap, OPTIONS)
        self.assertEqual(kinds.FREE_HOSTS.name, plan.kind)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'plan.json')
            plan_mod.write(plan, path)
            again = plan_mod.read(path)
            with open(path) as f:
                document = json.load(f)
        self.assertEqual(plan_mod.dumps(plan), plan_mod.dumps(again))
        self.assertEqual('free-hosts', document['kind'])
        self.assertEqual(0, document['options']['free_hosts'])
        self.assertNotIn('headroom', document['options'])
        keep = dataclasses.replace(OPTIONS, keep_n_plus_one=True)
        self.assertEqual((1, 2), operator.itemgetter(
            'free_hosts', 'headroom')(freeing.make_plan(
                snap, keep, 1, 2).options))
        self.assertEqual({'lone': [], 'hv1': ['a1'], 'hv2': ['b1', 'b2'],
                          'hv3': ['c1', 'c2']}, freeing.freed_hosts(again))
        az1 = document['imbalance']['domains'][0]
        self.assertEqual({'hypervisor': 'hv3', 'servers': ['c1', 'c2'],
                          'ram_gb': 40.0}, az1['freed'][-1])
        self.assertNotIn('not_freed', az1)

    def test_the_schema_refuses_a_malformed_freed_entry(self):
        hyps, servers = cloud()
        document = plan_mod.to_document(freeing.make_plan(
            b.snapshot(hyps, servers), OPTIONS))
        document['imbalance']['domains'][0]['freed'][0]['ram_gb'] = -1
        with self.assertRaises(plan_mod.PlanError):
            plan_mod.from_document(document)


if __name__ == '__main__':
    unittest.main()
