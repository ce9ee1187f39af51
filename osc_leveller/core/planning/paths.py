"""Reach a target placement by live migrations that are each valid.

The migration-path problem: an operator says where servers should end up
(server -> hypervisor); find an order of live migrations from here to there
in which every intermediate state passes every destination filter (capacity
under the allocation ratios, server groups, AZ, CPU, the ceiling). Servers
that swap between full hypervisors, or a cycle of them, need a temporary
"parking" move to a hypervisor with room.

1. Greedy: make every move whose destination accepts the server now, largest
   first; when none does, park a server whose leaving lets another arrive
   (smallest first, preferring hypervisors nobody is headed for). Near-linear
   in the moves: what large targets use.
2. When that gets stuck, an A* search on GiB moved over the placements of
   the servers of the domains involved, bounded in states: it finds the
   cheapest sequence when one exists within the bound, and proves that none
   exists when it runs out of placements first.

The moves are then grouped into waves, the order apply runs them: no
hypervisor twice in a wave, and a move's validity depends only on the moves
before it on its two hypervisors, so wave order is as valid as search order.
"""

import collections
import dataclasses
import heapq
import itertools
import time

from osc_leveller.core.load import scoring
from osc_leveller.core.model import errors
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy

# Destination filters that do not depend on what else is on the hypervisor.
STATIC_FILTERS = tuple(r for r in filters.DESTINATION_FILTERS if r.static)
SEARCH_STATES = 3000  # placements the exhaustive search may expand
SEARCH_SERVERS = 24  # servers it may move; beyond, those of the touched hosts
PARKS_PER_SERVER = 2
STEP = 0.001  # GiB added per move, so fewer moves win a tie in GiB


class PathError(errors.LevellerError, ValueError):
    """No valid sequence reaches the target; the message says why."""


@dataclasses.dataclass(frozen=True)
class Path:
    moves: tuple  # plan.Move, in wave order
    parked: int  # parking moves among them
    searched: int  # placements the exhaustive search expanded (0: greedy)
    imbalance: tuple  # scoring.DomainStats lists (before, after)


class _At:
    """A state seen with one server elsewhere: enough for STATIC_FILTERS,
    which only ask where servers are."""

    def __init__(self, state, server_id, hypervisor):
        self.state, self.server_id, self.hypervisor = state, server_id, \
            hypervisor

    def host_of(self, server_id):
        return self.hypervisor if server_id == self.server_id else \
            self.state.host_of(server_id)


class _Finder:
    """state: where to start (copied); movers: the only servers that may
    move or park (default: any); movable: the policy.Policy of who may
    move (default: an operator's target placement's)."""

    def __init__(self, snapshot, targets, options, state, rules,
                 movers=None, movable=policy.PLACEMENT):
        self.snapshot = snapshot
        self.options = options
        self.rules = rules
        self.start = state.copy()
        self.movers = movers
        self.movable = movable
        self.by_model = options.by_model
        self.targets = dict(targets)
        self._domains = {}
        self.pending = {sid: dst for sid, dst in self.targets.items()
                        if self.start.host_of(sid) != dst}

    # --- what certainly cannot work -----------------------------------------

    def check(self):
        problems = []
        for sid, dst in sorted(self.pending.items(), key=self._name):
            server = self.snapshot.server(sid)
            reason = self.movable.why_not(server, self.rules) or self._static(
                server, self.snapshot.hypervisor(dst), self.start)
            if reason:
                problems.append('%s cannot go to %s: %s' % (
                    server.label, dst, reason))
        if not problems:
            problems = self._final_problems()
        if problems:
            raise PathError('the target placement cannot be reached: %s' %
                            '; '.join(problems))

    def _static(self, server, dest, state):
        return filters.first_reason(STATIC_FILTERS, server, dest, state,
                                    self.rules)

    def _final_problems(self):
        """What is wrong with the end state itself, on the hypervisors that
        receive a server (their last arrival would break it)."""
        final = self.start.copy()
        for sid, dst in self.pending.items():
            final.apply(sid, dst)
        problems = []
        for name in sorted(set(self.pending.values())):
            hyp = self.snapshot.hypervisor(name)
            for rc, inv in sorted(hyp.inventories.items()):
                used = final.usage(name, rc)
                if used > inv.capacity:
                    problems.append('%s would hold %d %s, above its capacity '
                                    '%g' % (name, used, rc, inv.capacity))
            demand = filters.saturated(final, name) \
                if self.movable.applies('saturation') else None
            if demand is not None:
                problems.append('%s would be CPU saturated: its servers '
                                'would ask for %.1f of its %d threads' % (
                                    name, demand, hyp.threads))
            score = final.score(name)
            if score > self.options.ceiling:
                problems.append('%s would reach score %.2f, above the ceiling '
                                '%.2f (see --ceiling)' % (
                                    name, score, self.options.ceiling))
        for sid, dst in sorted(self.pending.items(), key=self._name):
            server = self.snapshot.server(sid)
            for group in self.rules.groups_of.get(sid, ()):
                members = self.rules.group_members[group.id]
                here = [m for m in members if final.host_of(m) == dst]
                label = group.name or group.id
                if group.policy.endswith('anti-affinity'):
                    limit = (group.max_server_per_host or 1) \
                        if group.policy == 'anti-affinity' else 1
                    if len(here) > limit:
                        problems.append('%s group %s would have %d servers '
                                        'on %s' % (group.policy, label,
                                                   len(here), dst))
                elif len(here) < len(members):
                    problems.append('%s group %s would be split: %s on %s, '
                                    'others elsewhere' % (
                                        group.policy, label, server.label,
                                        dst))
        return sorted(set(problems), key=problems.index)

    # --- finding a sequence -------------------------------------------------

    def solve(self, max_states):
        """[(server id, destination)] in search order, and states searched."""
        state = self.start.copy()
        sequence = []
        if self._greedy(state, dict(self.pending), sequence):
            return sequence, 0
        rest, searched, complete = self._search(state, max_states)
        if rest is not None:
            return sequence + rest, searched
        if sequence:  # greedy's parking may have been the problem
            again, more, complete = self._search(self.start.copy(),
                                                 max_states)
            searched += more
            if again is not None:
                return again, searched
        stuck = self._blocked(state)
        if complete:
            raise PathError(
                'the target placement cannot be reached: no order of live '
                'migrations keeps every step valid, parking included '
                '(every reachable placement searched: %d). Blocked: %s' % (
                    searched, stuck))
        raise PathError(
            'no valid sequence found within %d placements searched; give '
            'the target in smaller steps. Blocked: %s' % (searched, stuck))

    def _blocked(self, state):
        found = []
        for sid in sorted(self._left(state), key=self._name):
            server = self.snapshot.server(sid)
            dst = self._final(sid)
            reason = self.movable.why_not_destination(
                server, self.snapshot.hypervisor(dst), state, self.rules)
            found.append('%s to %s (%s)' % (server.label, dst, reason))
        return '; '.join(found[:5]) + ('; ...' if len(found) > 5 else '')

    def _final(self, sid):
        return self.targets.get(sid) or self.start.host_of(sid)

    def _left(self, state):
        """Servers not yet where they must end: targets, and parked ones."""
        return [sid for sid in dict.fromkeys(itertools.chain(
                    self.targets, sorted(state.moved - self.start.moved)))
                if state.host_of(sid) != self._final(sid)]

    def _fits(self, sid, dst, state):
        return self.movable.why_not_destination(
            self.snapshot.server(sid), self.snapshot.hypervisor(dst), state,
            self.rules) is None

    def _greedy(self, state, pending, sequence):
        parks = collections.Counter()
        on = collections.defaultdict(set)  # who may park, by hypervisor
        for sid in self._candidates():
            on[state.host_of(sid)].add(sid)

        def move(sid, dst):
            on[state.host_of(sid)].discard(sid)
            on[dst].add(sid)
            state.apply(sid, dst)
            sequence.append((sid, dst))

        while pending:
            progress = False
            for sid in sorted(pending, key=self._largest):
                if self._fits(sid, pending[sid], state):
                    move(sid, pending.pop(sid))
                    progress = True
            if progress:
                continue
            choice = self._parking(state, pending, parks, on)
            if choice is None:
                return False
            sid, dst = choice
            pending.setdefault(sid, self._final(sid))
            parks[sid] += 1
            move(sid, dst)
        return True

    def _parking(self, state, pending, parks, on):
        """(server, hypervisor): a parking move that lets a blocked server
        arrive, or the best other one; None when nothing can park."""
        headed = set(pending.values())
        options = []
        for blocked in sorted(pending, key=self._largest)[:50]:
            crowded = pending[blocked]
            for sid in sorted(on[crowded] - {blocked}):
                server = self.snapshot.server(sid)
                if parks[sid] >= PARKS_PER_SERVER or \
                        self.movable.why_not(server, self.rules):
                    continue
                final = pending.get(sid, crowded)
                for hyp in self._neighbours(crowded):
                    if hyp.name in (crowded, final) or \
                            not self._fits(sid, hyp.name, state) or \
                            self._static(server, self.snapshot.hypervisor(
                                final), _At(state, sid, hyp.name)):
                        continue
                    options.append(((sid not in pending, hyp.name in headed,
                                     server.ram_gb, sid, hyp.name),
                                    blocked, crowded))
        options.sort()
        for key, blocked, crowded in options[:20]:
            trial = state.copy()
            trial.apply(key[3], key[4])
            if self._fits(blocked, crowded, trial):
                return key[3], key[4]
        return (options[0][0][3], options[0][0][4]) if options else None

    def _neighbours(self, name):
        """The usable hypervisors of name's balancing domain: the only
        ones its servers may go to."""
        domain = scoring.domain_of(self.snapshot.hypervisor(name),
                                   self.by_model)
        found = self._domains.get(domain)
        if found is None:
            found = self._domains[domain] = [
                h for h in self.snapshot.hypervisors if h.usable
                and scoring.domain_of(h, self.by_model) == domain]
        return found

    def _search(self, state, max_states):
        """A* on GiB moved: (moves or None, placements expanded, whether
        every reachable placement was expanded)."""
        left = self._left(state)
        zones = {scoring.domain_of(self.snapshot.hypervisor(
            state.host_of(sid)), self.by_model) for sid in left}
        hosts = [h.name for h in self.snapshot.hypervisors
                 if h.usable and
                 scoring.domain_of(h, self.by_model) in zones]
        inside = set(hosts)
        why_not = self.movable.why_not
        servers = [sid for sid in self._candidates()
                   if state.host_of(sid) in inside and
                   not why_not(self.snapshot.server(sid), self.rules)]
        every = len(servers)
        if len(servers) > SEARCH_SERVERS:
            touched = {state.host_of(sid) for sid in left} | \
                {self._final(sid) for sid in left}
            servers = [sid for sid in servers
                       if state.host_of(sid) in touched][:SEARCH_SERVERS]
        servers.sort()
        if not set(left) <= set(servers):
            return None, 0, False
        narrowed = len(servers) < every
        weight = [self.snapshot.server(sid).ram_gb + STEP for sid in servers]
        start = tuple(state.host_of(sid) for sid in servers)
        goal = tuple(self._final(sid) for sid in servers)

        def estimate(placement):
            return sum(w for w, at, end in zip(weight, placement, goal)
                       if at != end)

        tie = itertools.count()
        heap = [(estimate(start), 0.0, next(tie), start, ())]
        cost = {start: 0.0}
        expanded = 0
        while heap:
            _, spent, _, placement, path = heapq.heappop(heap)
            if spent > cost[placement]:
                continue
            if placement == goal:
                return list(path), expanded, True
            if expanded >= max_states:
                return None, expanded, False
            expanded += 1
            here = state.copy()
            for sid, dst in path:
                here.apply(sid, dst)
            for i, sid in enumerate(servers):
                for dst in hosts:
                    if dst == placement[i] or not self._fits(sid, dst, here):
                        continue
                    after = placement[:i] + (dst,) + placement[i + 1:]
                    total = spent + weight[i]
                    if total < cost.get(after, float('inf')):
                        cost[after] = total
                        heapq.heappush(heap, (
                            total + estimate(after), total, next(tie), after,
                            path + ((sid, dst),)))
        return None, expanded, not narrowed

    def _candidates(self):
        """Servers that may move or park, if the filters let them."""
        if self.movers is not None:
            return self.movers
        return [s.id for s in self.snapshot.servers]

    def _largest(self, sid):
        server = self.snapshot.server(sid)
        return (-server.ram_gb, -server.flavor.vcpus, server.label, sid)

    def _name(self, item):
        sid = item[0] if isinstance(item, tuple) else item
        return (self.snapshot.server(sid).label, sid)

    # --- the result ---------------------------------------------------------

    def path(self, sequence, searched):
        assign = plan_mod.Waves()
        waves = []
        at = {}
        for sid, dst in sequence:
            src = at.get(sid) or self.start.host_of(sid)
            waves.append((assign.next(src, dst), sid, src, dst))
            at[sid] = dst
        state = self.start.copy()
        moves = []
        parked = 0
        for wave, sid, src, dst in sorted(waves, key=lambda w: w[0]):
            server = self.snapshot.server(sid)
            dest = self.snapshot.hypervisor(dst)
            before = (state.score(src), state.score(dst))
            state.apply(sid, dst)
            if dst != self._final(sid):
                parked += 1
                why = 'parking: it leaves %s so that another server can ' \
                    'arrive there, and goes on to %s later' % (
                        src, self._final(sid))
            elif sid in self.targets:
                why = 'target placement' + (
                    ', after parking moves made room' if parked else '')
            else:
                why = 'back to where it was, after parking'
            moves.append(plan_mod.Move(
                server_id=sid, server_name=server.name, source=src,
                destination=dst, destination_host=dest.host, wave=wave,
                domain=scoring.domain_of(dest, self.by_model),
                ram_gb=server.ram_gb, gain=0.0,
                source_score=(before[0], state.score(src)),
                destination_score=(before[1], state.score(dst)),
                imbalance=(0.0, 0.0),
                reason='%s; %s goes %.2f -> %.2f' % (
                    why, dest.host, before[1], state.score(dst))))
        return Path(tuple(moves), parked, searched,
                    (self._stats(self.start), self._stats(state)))

    def _stats(self, state):
        hosts = [h for h in self.snapshot.hypervisors if h.usable]
        return scoring.domain_stats(
            {h.name: state.score(h.name) for h in hosts},
            {h.name: scoring.domain_of(h, self.by_model) for h in hosts})


def targets_from(document, snapshot, origin):
    """{server id: hypervisor name} from a mapping server -> hypervisor
    (server name or ID; hypervisor_hostname or compute service host)."""
    if not isinstance(document, dict) or not document:
        raise PathError('%s: expected a mapping of server (name or ID) to '
                        'hypervisor, one per line like "web-1: hv02"' % origin)
    targets = {}
    for ref, where in document.items():
        server = snapshot.find_server(str(ref))
        if server is None:
            raise PathError('%s: %s: no such server (or the name is not '
                            'unique: use the ID)' % (origin,
                                                     errors.name(ref)))
        if not isinstance(where, str):
            raise PathError('%s: %s: the hypervisor must be a name, not %s'
                            % (origin, server.label, errors.quote(where)))
        hyp = snapshot.find_hypervisor(where)
        if hyp is None:
            raise PathError('%s: %s: no such hypervisor or compute host %s'
                            % (origin, server.label, errors.name(where)))
        if targets.get(server.id, hyp.name) != hyp.name:
            raise PathError('%s: server %s is given two targets' % (
                origin, server.id))
        targets[server.id] = hyp.name
    return targets


def make_plan(snapshot, targets, options, max_states=SEARCH_STATES):
    """A placement plan (plan.Plan, kind placement) reaching targets."""
    created = time.time()
    path = find_path(snapshot, targets, options, max_states)
    before, after = path.imbalance
    return plan_mod.build(
        snapshot, options, path.moves, before, after, created,
        note='' if path.moves else 'every server is already on its target',
        kind=kinds.PLACEMENT)


def find_path(snapshot, targets, options, max_states=SEARCH_STATES):
    """A Path of valid moves reaching targets {server id: hypervisor name}.

    Servers not in targets end where they are (they may park on the way).
    PathError says why when no valid sequence is found.
    """
    planning = context.Context(snapshot, options, kinds.PLACEMENT.load)
    finder = _Finder(planning.snapshot, targets, options, planning.new_state(),
                     planning.rules)
    finder.check()
    if not finder.pending:
        return finder.path([], 0)
    return finder.path(*finder.solve(max_states))


def sequence(snapshot, targets, options, state, rules, movers,
             movable=policy.PLACEMENT, max_states=0):
    """[(server id, hypervisor)]: valid moves from state that reach targets,
    moving and parking only movers (the planner's exchanges). PathError
    when none is found; max_states 0 tries the greedy search alone."""
    finder = _Finder(snapshot, targets, options, state, rules, set(movers),
                     movable)
    finder.check()
    return finder.solve(max_states)[0]
