"""The moves of a run not taken yet, in plan order.

The executor walks them from the first at every round, drops the ones it
takes, looks ahead of one of them for the moves one read of the cloud may
cover, and asks whether an exchange still has moves to run. Each of these
costs what it visits, not the length of the plan: a list would make a
dry run of 70,000 moves quadratic (``list.remove`` and ``list.index``
compare moves field by field).

Moves are known by their index in the plan.
"""

import collections


class Pending:
    def __init__(self, moves):
        self.moves = list(moves)
        count = len(self.moves)
        self.end = count  # the index after the last
        # A doubly linked list of the indices still pending.
        self._next = list(range(1, count + 1))
        self._prev = list(range(-1, count))
        self._live = [True] * count
        self.first = 0
        self.count = count
        self.waves = collections.Counter(m.wave for m in self.moves)
        self._exchanges = {}  # label -> its moves' indices, in plan order
        for index, move in enumerate(self.moves):
            if move.exchange:
                self._exchanges.setdefault(move.exchange, []).append(index)
        self._left = collections.Counter(
            {label: len(group) for label, group in self._exchanges.items()})

    def __len__(self):
        return self.count

    def walk(self, start=None):
        """The pending indices from start (the first one if None) on; the
        index just given may be removed before the next is asked for."""
        index = self.first if start is None else start
        while index != self.end:
            after = self._next[index]
            yield index
            index = self._next[index] if self._live[index] else after

    def after(self, index):
        """The pending indices after this one (pending or not)."""
        following = self._next[index]
        return self.walk(following) if following != self.end else iter(())

    def remove(self, index):
        before, after = self._prev[index], self._next[index]
        if before >= 0:
            self._next[before] = after
        else:
            self.first = after
        if after != self.end:
            self._prev[after] = before
        self._live[index] = False
        self.count -= 1
        move = self.moves[index]
        self.waves[move.wave] -= 1
        if move.exchange:
            self._left[move.exchange] -= 1

    def put_back(self, index):
        """Pending again, in its place (a round that could not finish)."""
        before = index - 1
        while before >= 0 and not self._live[before]:
            before -= 1
        after = self._next[before] if before >= 0 else self.first
        self._prev[index], self._next[index] = before, after
        if before >= 0:
            self._next[before] = index
        else:
            self.first = index
        if after != self.end:
            self._prev[after] = index
        self._live[index] = True
        self.count += 1
        move = self.moves[index]
        self.waves[move.wave] += 1
        if move.exchange:
            self._left[move.exchange] += 1

    def mates(self, index):
        """The other pending moves of its exchange, in plan order."""
        label = self.moves[index].exchange
        if not label:
            return []
        return [i for i in self._exchanges[label]
                if i != index and self._live[i]]

    def has_exchange(self, label):
        """Whether moves of this exchange are still pending."""
        return self._left.get(label, 0) > 0
