"""The planner's objective: how even a balancing domain is, and what a move
gains.

A balancing domain is the hypervisors a server may move between (an AZ and
a CPU class). Its imbalance is the standard deviation of their host scores;
the planner minimises the sum of squared deviations from the mean (SSE) of
each part of the score, CPU and RAM, so a host hot on RAM and idle on CPU
does not pass for balanced. A move changes exactly two hosts by amounts the
LoadModel knows in advance, so its gain is O(1) from running sums.
"""


class Domain:
    """Running sums of one domain's host scores, split by dimension.

    A host's score is the sum of its CPU part and its RAM part (see
    scoring.LoadModel); the planner minimises the SSE of each part, so a host
    hot on RAM and idle on CPU does not pass for balanced.
    """

    def __init__(self, name, hosts, state):
        self.name = name
        self.hosts = hosts
        self.total = [0.0, 0.0]
        self.squares = [0.0, 0.0]
        self.cross = 0.0  # sum of cpu part x ram part, for the score's std
        for h in hosts:
            self.update((0.0, 0.0), state.parts(h))

    def mean(self):
        return sum(self.total) / len(self.hosts)

    def hot(self, scores):
        """The hosts above the mean, hottest first (then by name).
        scores: {host: score} of the domain's hosts."""
        mean = self.mean()
        return sorted((h for h in self.hosts if scores[h] > mean),
                      key=lambda h: (-scores[h], h))

    def coolest(self, scores):
        """Every host, coolest first (then by name)."""
        return sorted(self.hosts, key=lambda h: (scores[h], h))

    def std(self):
        """Standard deviation of the host scores (parts summed)."""
        n = len(self.hosts)
        total = self.total[0] + self.total[1]
        squares = self.squares[0] + self.squares[1] + 2 * self.cross
        return (max(0.0, squares - total ** 2 / n) / n) ** 0.5

    def spread(self):
        """sqrt of the parts' SSE per host: what a move's drop is of."""
        n = len(self.hosts)
        sse = sum(self.squares[i] - self.total[i] ** 2 / n for i in (0, 1))
        return (max(0.0, sse) / n) ** 0.5

    def gain(self, src, a, dst, b):
        """Reduction of the parts' SSE when a host with parts src loses
        parts a and one with parts dst gains parts b."""
        n = len(self.hosts)
        result = 0.0
        for i in (0, 1):
            d_total = b[i] - a[i]
            result -= (-2 * a[i] * src[i] + a[i] * a[i] + 2 * b[i] * dst[i]
                       + b[i] * b[i] - (2 * self.total[i] * d_total
                                        + d_total ** 2) / n)
        return result

    def update(self, old, new):
        for i in (0, 1):
            self.total[i] += new[i] - old[i]
            self.squares[i] += new[i] * new[i] - old[i] * old[i]
        self.cross += new[0] * new[1] - old[0] * old[1]

    def std_after(self, changes):
        """std() once hosts' parts change: [(old parts, new parts)]."""
        saved = (list(self.total), list(self.squares), self.cross)
        for old, new in changes:
            self.update(old, new)
        result = self.std()
        self.total, self.squares, self.cross = saved
        return result

    def score_gain(self, s_src, a, s_dst, b):
        """The SSE reduction of the scores themselves: the parts may even
        out while the scores spread (a CPU-hot host taking RAM load), and
        the imbalance shown is the scores' std, so no move may raise it."""
        n = len(self.hosts)
        total = self.total[0] + self.total[1]
        d_total = b - a
        return -(-2 * a * s_src + a * a + 2 * b * s_dst + b * b
                 - (2 * total * d_total + d_total ** 2) / n)
