"""N+k headroom packs the lost hypervisors' servers through the filters."""

import unittest

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import model
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import headroom
from osc_leveller.core.settings import options as opts
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
