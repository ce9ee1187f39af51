"""The moves of a run not taken yet (core/run/pending.py)."""

import unittest

from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.run import pending as pending_mod


def move(name, wave=1, exchange=''):
    return plan_mod.Move(
        'id-' + name, name, 'hv1', 'hv2', 'cmp-hv2', wave, 'az1/Gen1', 1.0,
        0.1, (0.5, 0.4), (0.1, 0.2), (0.2, 0.1), 'test', exchange)


class TestPending(unittest.TestCase):
    def setUp(self):
        self.moves = [move('a'), move('b', exchange='x'), move('c', 2),
                      move('d', 2, exchange='x'), move('e', 3)]
        self.pending = pending_mod.Pending(self.moves)

    def names(self, indices):
        return [self.moves[i].server_name for i in indices]

    def test_walk_in_plan_order_while_taking(self):
        seen = []
        for index in self.pending.walk():
            seen.append(index)
            if index in (0, 2):
                self.pending.remove(index)
        self.assertEqual([0, 1, 2, 3, 4], seen)
        self.assertEqual(['b', 'd', 'e'], self.names(self.pending.walk()))
        self.assertEqual(3, len(self.pending))
        self.assertEqual(1, self.pending.first)

    def test_after_mates_and_counts(self):
        self.assertEqual(['c', 'd', 'e'], self.names(self.pending.after(1)))
        self.assertEqual([], list(self.pending.after(4)))
        self.assertEqual(['d'], self.names(self.pending.mates(1)))
        self.assertEqual([], self.pending.mates(0))
        self.assertEqual({1: 2, 2: 2, 3: 1}, dict(self.pending.waves))
        self.pending.remove(3)
        self.assertEqual([], self.pending.mates(1))
        self.assertEqual(1, self.pending.waves[2])
        self.assertTrue(self.pending.has_exchange('x'))
        self.pending.remove(1)
        self.assertFalse(self.pending.has_exchange('x'))
        self.assertFalse(self.pending.has_exchange('nosuch'))

    def test_put_back_in_its_place(self):
        for index in (0, 1, 3):
            self.pending.remove(index)
        self.pending.put_back(1)
        self.pending.put_back(0)
        self.assertEqual(['a', 'b', 'c', 'e'], self.names(self.pending.walk()))
        self.assertEqual(['c', 'e'], self.names(self.pending.after(1)))
        self.assertEqual(0, self.pending.first)
        self.assertEqual(4, len(self.pending))
        self.assertEqual({1: 2, 2: 1, 3: 1}, dict(self.pending.waves))
        self.assertTrue(self.pending.has_exchange('x'))

    def test_empty(self):
        empty = pending_mod.Pending([])
        self.assertEqual(0, len(empty))
        self.assertEqual([], list(empty.walk()))
