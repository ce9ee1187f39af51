"""plan --spread count: even out the number of servers per hypervisor.

After a rolling restart or a failover, idle servers pile up on the
hypervisors that came back first; their load is too low for levelling to
notice. This evens out the count instead, within each balancing domain (the
usable hypervisors in scope, by AZ and CPU class), to within one server,
with the fewest moves.

The fewest: a domain of n hypervisors holding T servers ends with r = T mod
n of them holding q + 1 = T // n + 1 and the others q. A move takes one
server off one hypervisor, so no sequence is shorter than the servers above
those targets, given to the most crowded hypervisors (minimum_moves). Each
move made here lowers that figure by one, so where the rules allow every
step the plan has exactly that many moves. Each takes a server off the most
crowded hypervisor to the least crowded that lowers the figure (the coolest
of equal counts): the one with the least RAM that every destination rule
accepts, so the fewest GiB are copied.

Who may move and where is balancing's policy (policy.SPREAD). When no move
left lowers the figure, the domain stops short and its held reason says
what refuses the moves (no move that keeps the count would make room: that
would cost moves the operator did not ask for).
"""

import collections
import time

from osc_leveller.core.load import scoring
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import model
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import objective
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import n_plus_one

KIND = kinds.SPREAD
# The rules whose refusal may change with moves elsewhere in the domain.
LOOK_FURTHER = frozenset(('returning', n_plus_one.RULE.code))


def minimum_moves(counts):
    """The fewest moves that bring these server counts to within one of
    each other: the servers above q, less the r hypervisors that keep q + 1
    (at most those above q)."""
    counts = list(counts)
    if not counts:
        return 0
    q, r = divmod(sum(counts), len(counts))
    above = [c - q for c in counts if c > q]
    return sum(above) - min(r, len(above))


class _Domain:
    """The server count of each hypervisor of one domain, and what the
    fewest moves are made of: S, the servers above q, and h, the
    hypervisors above q (minimum_moves is S - min(r, h))."""

    def __init__(self, name, counts):
        self.name = name
        self.counts = counts  # {hypervisor: servers}
        self.q, self.r = divmod(sum(counts.values()), len(counts))
        self.above = sum(max(0, c - self.q) for c in counts.values())
        self.crowded = sum(1 for c in counts.values() if c > self.q)
        self.first = self.short()  # when planning started
        self.gap_before = self.gap()

    def short(self):
        """Moves still needed, at the fewest."""
        return self.above - min(self.r, self.crowded)

    def gap(self):
        return max(self.counts.values()) - min(self.counts.values())

    def _after(self, src, dst):
        q, a, b = self.q, self.counts[src], self.counts[dst]
        above = self.above - (a > q) + (b >= q)
        crowded = self.crowded - (a == q + 1) + (b == q)
        return above, crowded

    def narrows(self, src, dst):
        """Whether a move from src to dst lowers the moves still needed."""
        above, crowded = self._after(src, dst)
        return above - min(self.r, crowded) < self.short()

    def move(self, src, dst):
        self.above, self.crowded = self._after(src, dst)
        self.counts[src] -= 1
        self.counts[dst] += 1


class Spreader:
    def __init__(self, snapshot, options):
        self.options = options.validate()
        planning = context.Context(snapshot, self.options, KIND.load)
        self.snapshot = planning.snapshot
        self.rules = planning.rules
        self.state = planning.state  # where N+1 is kept, if asked
        self.policy = KIND.policy
        by_model = self.options.by_model
        self.scope = [h.name for h in self.snapshot.hypervisors
                      if h.usable and filters.in_scope(h, self.options)]
        self.domain_of = {h: scoring.domain_of(self.snapshot.hypervisor(h),
                                               by_model)
                          for h in self.scope}
        self._may_move = {}
        self._example = {}  # what refuses -> (hypervisor, its refusal)
        self._touched = collections.Counter()  # hypervisor -> moves
        self._blocked = {}  # (source, destination) -> what _try found
        self._movers_of = {}  # hypervisor -> (its moves, _movers())

    def stats(self, state):
        return scoring.domain_stats({h: state.score(h) for h in self.scope},
                                    self.domain_of)

    def domains(self):
        groups = collections.defaultdict(list)
        for host in self.scope:
            groups[self.domain_of[host]].append(host)
        return [_Domain(name, {h: len(self.snapshot.servers_on(h))
                               for h in sorted(hosts)})
                for name, hosts in sorted(groups.items()) if len(hosts) > 1]

    def plan(self):
        started = time.time()
        before = self.stats(self.state)
        domains = self.domains()
        planned, held = [], {}
        active = [d for d in domains if d.short()]
        while active:
            domain = max(active, key=lambda d: (d.short(), d.name))
            if len(planned) >= self.options.max_moves:
                limit = 'max_moves %d reached (--max-moves)' % (
                    self.options.max_moves)
                for d in active:
                    held[d.name] = self._stopped(d, limit)
                break
            found, refusals = self._find(domain)
            if found is None:
                held[domain.name] = self._stopped(domain, self._why(
                    domain, refusals))
                active.remove(domain)
                continue
            server, src, dst, refused = found
            domain.move(src, dst)
            self.state.apply(server.id, dst)
            self._touched.update((src, dst))
            planned.append((server, src, dst, domain.name, refused))
            if not domain.short():
                active.remove(domain)
        moves = self._in_wave_order(planned, domains)
        return plan_mod.build(
            self.snapshot, self.options, moves, before, self.stats(
                self._replayed), started,
            note=self._note(domains, moves, before), kind=KIND, held=held)

    def _movers(self, host):
        """The servers of host that may move, least RAM first (the same
        until a move leaves host)."""
        known = self._movers_of.get(host)
        if known is not None and known[0] == self._touched[host]:
            return known[1]
        result = []
        for server in self.snapshot.servers_on(host):
            if server.id in self.state.moved:
                continue
            if server.id not in self._may_move:
                self._may_move[server.id] = self.policy.why_not(server,
                                                                self.rules)
            if self._may_move[server.id] is None:
                result.append(server)
        result.sort(key=lambda s: (s.ram_gb, s.flavor.vcpus, s.name, s.id))
        self._movers_of[host] = (self._touched[host], result)
        return result

    def _find(self, domain):
        """(server, source, destination, refused) of the next move, or
        None; and the refusals met, counted by what refuses. A move that
        lowers the moves still needed comes first; when the rules leave
        none, one that narrows its two hypervisors' gap (it lowers the
        spread of the counts all the same)."""
        counts, state = domain.counts, self.state

        def order(crowded_first):
            sign = -1 if crowded_first else 1
            return sorted(counts, key=lambda h: (
                sign * counts[h], sign * state.score(h), h))
        sources, dests = order(True), order(False)
        fewest = counts[dests[0]]
        refusals = collections.Counter()
        fallback = None
        for src in sources:
            if counts[src] <= fewest + 1:
                break
            movers = self._movers(src)
            refused = ()
            for dst in dests:
                if counts[dst] + 1 >= counts[src]:
                    break
                narrows = domain.narrows(src, dst)
                if not narrows and fallback is not None:
                    continue
                server, pair, first = self._try(movers, src, dst)
                refused = refused or first
                if server is not None:
                    if narrows:
                        return (server, src, dst, refused), refusals
                    fallback = (server, src, dst, refused)
                    continue
                refusals.update(pair)
        return fallback, refusals

    def _try(self, movers, src, dst):
        """(the first of movers dst accepts, or None; the refusals before
        it counted by what refuses; the first as (dst, why), or ()).

        Where no server of src goes to dst, none will until a move touches
        one of the two: the rules read the server, dst and what is on it.
        Those that look further (N+1, the return window's "unless nothing
        else fits") are not remembered so.
        """
        touched = (self._touched[src], self._touched[dst])
        known = self._blocked.get((src, dst))
        if known is not None and known[0] == touched:
            return None, known[1], known[2]
        hyp = self.snapshot.hypervisor(dst)
        pair, first, lasting = collections.Counter(), (), True
        for i, server in enumerate(movers):
            why = self.policy.why_not_destination(server, hyp, self.state,
                                                  self.rules)
            if why is None:
                return server, pair, first
            what = _what(why)
            self._example.setdefault(what, (dst, why))
            first = first or (dst, str(why))
            lasting = lasting and why.code not in LOOK_FURTHER
            if why.resource == model.MEMORY_MB:
                # Least RAM first: the servers after it need more.
                pair[what] += len(movers) - i
                break
            pair[what] += 1
        if lasting:
            self._blocked[src, dst] = (touched, pair, first)
        return None, pair, first

    def _why(self, domain, refusals):
        crowded = sorted(domain.counts, key=lambda h: (
            -domain.counts[h], h))[:3]
        if not refusals:
            reasons = collections.Counter(
                _what(self._may_move[s.id])
                for h in crowded for s in self.snapshot.servers_on(h)
                if self._may_move.get(s.id))
            return 'no server of its most crowded hypervisors (%s) may ' \
                'move (%s)' % (', '.join(crowded), ', '.join(
                    '%d held by %s' % (n, what)
                    for what, n in reasons.most_common(3)) or
                    'they host none')
        what, count = refusals.most_common(1)[0]
        return '%s refuses %d of the %d moves that would narrow a gap, ' \
            'from its most crowded hypervisors (%s); for example %s: %s' % (
                what, count, sum(refusals.values()), ', '.join(crowded),
                *self._example[what])

    @staticmethod
    def _stopped(domain, why):
        return 'servers per hypervisor %d to %d, %d more move%s short of ' \
            'one apart (%d at the fewest when planning started): %s' % (
                min(domain.counts.values()), max(domain.counts.values()),
                domain.short(), 's' * (domain.short() != 1), domain.first,
                why)

    def _in_wave_order(self, planned, domains):
        """Moves in wave order, their figures computed in that order (a
        move's counts and scores depend only on the moves before it on its
        two hypervisors, which waves keep in order)."""
        waves = plan_mod.Waves()
        ordered = sorted(((waves.next(item[1], item[2]), i) + item
                          for i, item in enumerate(planned)),
                         key=lambda item: item[:2])
        state = self._replayed = state_mod.State(self.snapshot,
                                                 self.state.load_model)
        counts = {h: len(self.snapshot.servers_on(h)) for h in self.scope}
        spread = {d.name: objective.Domain(d.name, sorted(d.counts), state)
                  for d in domains}
        moves = []
        for wave, _, server, src, dst, name, refused in ordered:
            domain = spread[name]
            model = state.load_model
            before = (domain.std(), state.score(src), state.score(dst))
            src_parts, dst_parts = state.parts(src), state.parts(dst)
            gain = domain.gain(src_parts, model.server_parts(server.id, src),
                               dst_parts, model.server_parts(server.id, dst))
            state.apply(server.id, dst)
            domain.update(src_parts, state.parts(src))
            domain.update(dst_parts, state.parts(dst))
            moves.append(plan_mod.Move(
                server_id=server.id, server_name=server.name, source=src,
                destination=dst,
                destination_host=self.snapshot.hypervisor(dst).host,
                wave=wave, domain=name, ram_gb=server.ram_gb, gain=gain,
                source_score=(before[1], state.score(src)),
                destination_score=(before[2], state.score(dst)),
                imbalance=(before[0], domain.std()),
                reason='spread: %d servers on the source, %d on the '
                       'destination; the least RAM of those it accepts '
                       '(%g GiB)' % (counts[src], counts[dst],
                                     round(server.ram_gb, 1)),
                refused=refused))
            counts[src] -= 1
            counts[dst] += 1
        return tuple(moves)

    @staticmethod
    def _note(domains, moves, before):
        if moves:
            return ''
        if not before:
            return 'no enabled hypervisors in scope'
        if all(not d.first for d in domains):
            widest = max((d.gap_before for d in domains), default=0)
            return 'the server counts are already even (within one) in ' \
                'every domain (widest gap: %d)' % widest
        return 'no move that evens out the server counts passes the rules ' \
            '(see held)'


def _what(refusal):
    """What refuses: the resource that is full, or the rule's code."""
    if refusal.resource is not None:
        return '%s full' % refusal.resource
    return refusal.code.replace('_', ' ')


def make_plan(snapshot, options):
    """A plan (plan.Plan, kind spread) evening out the server counts."""
    return Spreader(snapshot, options).plan()
