"""N+k headroom: could the servers of any k hypervisors of a balancing
domain be placed on the others?

Adding up free capacity says yes when the servers would only fit in
pieces, or not at all where server groups, aggregates or traits forbid it.
Here the servers of each lost set are packed, largest first, each onto the
remaining hypervisor of the domain with the most free RAM left that the
planner's filters accept, as Nova's scheduler would judge it: capacity
under the allocation ratios, server groups, aggregates, traits, AZ, CPU
compatibility and service state. Not the leveller's own limits (ceiling,
saturation, exclusions): a host failure is when they give way. If that
spread leaves a server out, first-fit (most free RAM first, in the order
before packing) is tried, and its answer names the servers left out.

Either may miss a packing that exists, so a "no" is an answer for these
orders; a "yes" names a real placement. With keep_n_plus_one the planner
keeps each hypervisor's placement and holds every move to it (Guard).
"""

import dataclasses
import heapq
import itertools
import math

from osc_leveller.core import config
from osc_leveller.core import filters
from osc_leveller.core import model
from osc_leveller.core import scoring

FILTERS = (filters.service, filters.inventory, filters.availability_zone,
           filters.cpu_compatible, filters.aggregate_extra_specs,
           filters.tenant_isolation, filters.required_traits,
           filters.capacity)  # and server groups as a rebuild sees them
# Above this many sets of k hypervisors, only the heaviest sets are packed.
MAX_SETS = 200
SHOWN = 3  # servers named in a reason


@dataclasses.dataclass(frozen=True)
class Headroom:
    domain: str
    k: int
    hypervisors: int  # usable hypervisors of the domain
    lost: tuple = ()  # names of the first set whose servers do not fit
    unplaced: tuple = ()  # (server, reason) of that set
    sets: int = 0  # sets of k hypervisors packed
    every_set: bool = True  # False: only the heaviest sets (see MAX_SETS)

    @property
    def ok(self):
        return not self.lost

    def reason(self):
        """'yes', or 'no: ' and why not."""
        if self.ok:
            return 'yes' if self.every_set else \
                'yes for the %d heaviest sets of %d' % (self.sets, self.k)
        return 'no: ' + self.why()

    def why(self):
        """Why not: the servers that fit nowhere, and why the first did
        not fit on the hypervisor with the most free RAM."""
        if self.hypervisors <= self.k:
            return 'only %d hypervisor%s' % (self.hypervisors,
                                             's' * (self.hypervisors != 1))
        names = ', '.join(s.label for s, _ in self.unplaced[:SHOWN])
        more = ' and %d more' % (len(self.unplaced) - SHOWN) \
            if len(self.unplaced) > SHOWN else ''
        return 'losing %s, %d server%s fit nowhere: %s%s (%s)' % (
            ', '.join(self.lost), len(self.unplaced),
            's' * (len(self.unplaced) != 1), names, more,
            self.unplaced[0][1])


def of_domains(snapshot, state, rules, k=1, names=None):
    """[Headroom] of every balancing domain, over the usable hypervisors
    (or those named), in the given state."""
    by_model = rules.options.cpu_compatibility == config.CPU_MODEL
    members = {}
    for hyp in snapshot.hypervisors:
        if (hyp.usable if names is None else hyp.name in names):
            members.setdefault(scoring.domain_of(hyp, by_model), []).append(
                hyp)
    residents = {name: [] for hyps in members.values() for name in
                 (h.name for h in hyps)}
    for server in snapshot.servers:
        here = residents.get(state.host_of(server.id))
        if here is not None:
            here.append(server)
    return [of_domain(domain, hyps, state, rules, k, residents)
            for domain, hyps in sorted(members.items())]


def of_domain(domain, hypervisors, state, rules, k=1, residents=None):
    """Headroom of one domain: the first set of k that does not fit.
    residents: {hypervisor name: its servers in state}, if known."""
    if residents is None:
        return of_domains(rules.snapshot, state, rules, k, names={
            h.name for h in hypervisors})[0]
    if len(hypervisors) <= k:
        if any(residents[h.name] for h in hypervisors):
            return Headroom(domain, k, len(hypervisors),
                            tuple(h.name for h in hypervisors))
        return Headroom(domain, k, len(hypervisors))
    sets, every = _sets(hypervisors, residents, state, k)
    # Most free RAM first; packing never changes the state itself.
    roomiest = sorted(hypervisors, key=lambda h: (-_free(h, state), h.name))
    for lost in sets:
        unplaced = pack(lost, roomiest, residents, state, rules)
        if unplaced:
            return Headroom(domain, k, len(hypervisors),
                            tuple(h.name for h in lost), unplaced,
                            len(sets), every)
    return Headroom(domain, k, len(hypervisors), sets=len(sets),
                    every_set=every)


def pack(lost, roomiest, residents, state, rules):
    """[(server, reason)] of the lost hypervisors' servers that fit on no
    other (roomiest: the domain's hypervisors, in the order tried).

    The servers of a hard affinity group go together, to one hypervisor,
    as an operator rebuilds them; soft policies only weigh in Nova.
    """
    return _kept(lost, roomiest, residents, state, rules)[0]


def _packing(lost, roomiest, residents, state, rules, spread=False):
    """(unplaced as pack() gives it, {server id: hypervisor} of the
    others).

    spread: each unit to the hypervisor with the most free RAM left at
    that point instead of the first in roomiest that takes it, so that
    no hypervisor is filled to the brim; it gives up, with no servers
    named, at the first unit that fits nowhere.
    """
    gone = {h.name for h in lost}
    others = [h for h in roomiest if h.name not in gone]
    leaving = [s for h in lost for s in residents[h.name]]
    ids = {s.id for s in leaving}
    checks = FILTERS + (lambda server, dest, state, rules: _groups(
        server, dest, state, rules, ids),)
    trial = _Trial(state)
    unplaced = []
    heap = [(-_free(h, trial), h.name, h) for h in others] if spread \
        else None
    if spread:
        heapq.heapify(heap)
    for unit in _units(leaving, rules):
        if spread:
            tried = []
            while heap:
                entry = heapq.heappop(heap)
                if not _place(unit, entry[2], checks, trial, rules):
                    dest = entry[2]
                    heapq.heappush(heap, (-_free(dest, trial), dest.name,
                                          dest))
                    break
                tried.append(entry)
            else:
                return [(server, '') for server in unit], {}
            for entry in tried:
                heapq.heappush(heap, entry)
            continue
        first = None
        for dest in others:
            why = _place(unit, dest, checks, trial, rules)
            if not why:
                break
            first = first or (dest, why)
        else:
            unplaced.extend((server, _why(first)) for server in unit)
    placed = {s.id: trial.moved[s.id] for s in leaving
              if trial.moved.get(s.id) not in (None, *gone)}
    return unplaced, placed


def _place(unit, dest, checks, trial, rules):
    """Rebuild the unit's servers on dest in the trial, or say why not
    ('SERVER: reason') and leave the trial as it was."""
    done = []
    for server in unit:
        why = filters.first_reason(checks, server, dest, trial, rules)
        if why:
            for moved, home in reversed(done):
                trial.move(moved, home)
            return '%s: %s' % (server.label, why)
        done.append((server, trial.host_of(server.id)))
        trial.move(server, dest.name)
    return None


class _Trial:
    """A state with some servers rebuilt elsewhere: where servers are and
    the Placement usage, all that the filters of a rebuild read; the
    state under it is not changed."""

    def __init__(self, state):
        self.state = state
        self.moved = {}
        self.added = {}  # hypervisor -> {resource class: change}

    def host_of(self, server_id):
        return self.moved.get(server_id) or self.state.host_of(server_id)

    def usage(self, hypervisor_name, resource_class):
        added = self.added.get(hypervisor_name)
        return self.state.usage(hypervisor_name, resource_class) + (
            added.get(resource_class, 0) if added else 0)

    def move(self, server, destination):
        source = self.host_of(server.id)
        for name, sign in ((source, -1), (destination, 1)):
            added = self.added.setdefault(name, {})
            for rc, amount in server.resources.items():
                added[rc] = added.get(rc, 0) + sign * amount
        self.moved[server.id] = destination


def _kept(lost, roomiest, residents, state, rules):
    """_packing() for the Guard to keep: spread when it can be, so that
    few moves come near what it puts on a hypervisor; else first-fit, and
    its answer."""
    found = _packing(lost, roomiest, residents, state, rules, spread=True)
    if found[0]:
        found = _packing(lost, roomiest, residents, state, rules)
    return found


def _units(leaving, rules):
    """The leaving servers as units that go together, largest first: the
    members of a hard affinity group in one unit, any other alone."""
    units = {}
    for server in sorted(leaving, key=lambda s: (s.name, s.id)):
        group = next((g.id for g in rules.groups_of.get(server.id, ())
                      if g.policy == 'affinity'), None)
        units.setdefault(group or server.id, []).append(server)
    return sorted(units.values(), key=lambda unit: (
        -sum(s.ram_gb for s in unit), -sum(s.flavor.vcpus for s in unit),
        unit[0].name, unit[0].id))


def _groups(server, dest, state, rules, leaving):
    """Nova's hard server-group rules for a rebuild elsewhere."""
    for group in rules.groups_of.get(server.id, ()):
        others = [m for m in rules.group_members[group.id] if m != server.id]
        label = group.name or group.id
        if group.policy == 'anti-affinity':
            here = [m for m in others if state.host_of(m) == dest.name]
            if len(here) >= (group.max_server_per_host or 1):
                return 'anti-affinity group %s: %s already hosts %s' % (
                    label, dest.name, ', '.join(sorted(
                        rules.snapshot.server(m).label for m in here)))
        elif group.policy == 'affinity':
            staying = [m for m in others if m not in leaving]
            if staying and state.host_of(staying[0]) != dest.name:
                return 'affinity group %s: its other servers are on %s' % (
                    label, state.host_of(staying[0]))
    return None


def _why(first):
    if first is None:
        return 'no other hypervisor'
    dest, why = first
    return 'on %s, %s' % (dest.name, why)


def _free(hyp, state):
    inv = hyp.inventories.get(model.MEMORY_MB)
    return inv.capacity - state.usage(hyp.name, model.MEMORY_MB) \
        if inv else 0.0


def _sets(hypervisors, residents, state, k):
    """(the sets of k hypervisors to pack, whether they are all of them).

    Every set for k = 1 or while there are at most MAX_SETS; beyond, the
    k with the
    most RAM, the most vCPUs and the most servers allocated, and the sets
    that swap one of those for each next heaviest: the losses that are
    hardest to absorb.
    """
    if k == 1 or math.comb(len(hypervisors), k) <= MAX_SETS:
        return [tuple(c) for c in itertools.combinations(
            sorted(hypervisors, key=lambda h: h.name), k)], True
    sets = []
    for weight in (lambda h: state.usage(h.name, model.MEMORY_MB),
                   lambda h: scoring.cpu_allocated(
                       {rc: state.usage(h.name, rc)
                        for rc in (model.VCPU, model.PCPU)}),
                   lambda h: len(residents[h.name])):
        ranked = sorted(hypervisors, key=lambda h: (-weight(h), h.name))
        heaviest = tuple(ranked[:k])
        sets.append(heaviest)
        for other in ranked[k:k + MAX_SETS // 3]:
            sets.append(heaviest[:-1] + (other,))
    unique = {tuple(sorted(h.name for h in s)): s for s in sets}
    return list(unique.values())[:MAX_SETS], False


# --- keeping N+1 while balancing ----------------------------------------------

def headroom(server, dest, state, rules):
    """Balancing destination filter, with keep_n_plus_one: no move after
    which the loss of a hypervisor of the domain, absorbed before it,
    would leave servers nowhere. Only in the state kept (Rules.kept_state);
    an exchange is checked whole (exchange_breaks)."""
    if not rules.options.keep_n_plus_one or state is not rules.kept_state:
        return None
    return guard_of(state, rules).why_not(server, dest)


def exchange_breaks(state, rules, sequence):
    """Why the moves of an exchange, made in the kept state, would break
    N+1, or None."""
    if not rules.options.keep_n_plus_one or state is not rules.kept_state:
        return None
    return guard_of(state, rules).why_not_all(sequence)


def guard_of(state, rules):
    if rules.guard is None or rules.guard.state is not state:
        rules.guard = Guard(state, rules)
    return rules.guard


class Guard:
    """N+1 kept move by move, in one state as it changes.

    Each hypervisor's packing (where its servers would be rebuilt if it
    were lost, found as pack() finds it) is kept, with what it puts on each
    other hypervisor. A move s: src -> dst leaves a packing valid when dst
    has room for s on top of what the packing puts there, with no hard
    anti-affinity clash; src only gains room. Losing dst itself is absorbed
    by sending s back to src, which it has just left. Only a hypervisor
    whose packing that does not prove is packed again, in the state after
    the move. Losses not absorbed to start with are not held against any
    move (Guard.lost says which): they cannot be broken further than
    "no".
    """

    def __init__(self, state, rules):
        self.state = state
        self.rules = rules
        snapshot = state.snapshot
        by_model = rules.options.cpu_compatibility == config.CPU_MODEL
        self.domain_of = {}
        self.members = {}
        for hyp in snapshot.hypervisors:
            if hyp.usable:
                domain = scoring.domain_of(hyp, by_model)
                self.domain_of[hyp.name] = domain
                self.members.setdefault(domain, []).append(hyp)
        self.residents = {name: [] for name in self.domain_of}
        for server in snapshot.servers:
            here = self.residents.get(state.host_of(server.id))
            if here is not None:
                here.append(server)
        self.placed = {}  # hypervisor -> {server id: where it is rebuilt}
        self.on = {}  # hypervisor -> {other: ([server], {class: amount})}
        self.exempt = set()  # hypervisors whose loss is not absorbed
        self.lost = {}  # domain -> Headroom: the first such loss
        # domain -> {(server id, destination): {hypervisor: placed}}: what
        # a move found to keep N+1 meant, until a move in the domain.
        self.vetted = {}
        self.synced = len(state.history)
        for domain in sorted(self.members):
            self._pack_domain(domain, first=True)

    def why_not(self, server, dest):
        """Why moving the server to dest would break N+1, or None."""
        self._sync()
        domain = self.domain_of.get(dest.name)
        if domain is None:
            return None
        src = self.state.host_of(server.id)
        repacked = {}
        for hyp in self.members[domain]:
            if hyp.name in self.exempt or not self._doubt(
                    hyp.name, server, src, dest):
                continue
            placed, unplaced = self._repack(hyp, {server.id: dest.name})
            if unplaced:
                return 'would break N+1: ' + Headroom(
                    domain, 1, len(self.members[domain]), (hyp.name,),
                    unplaced).why()
            repacked[hyp.name] = placed
        self.vetted.setdefault(domain, {})[server.id, dest.name] = repacked
        return None

    def why_not_all(self, sequence):
        """Why these moves, all made, would break N+1, or None."""
        self._sync()
        moves = dict(sequence)
        domains = sorted({self.domain_of.get(dst) for _, dst in sequence}
                         - {None})
        for domain in domains:
            for hyp in self.members[domain]:
                if hyp.name in self.exempt:
                    continue
                unplaced = self._repack(hyp, moves)[1]
                if unplaced:
                    return 'would break N+1: ' + Headroom(
                        domain, 1, len(self.members[domain]), (hyp.name,),
                        unplaced).why()
        return None

    def _doubt(self, name, server, src, dest):
        """Whether the kept packing of hypervisor name may not hold once
        the server moves from src to dest."""
        placed = self.placed[name]
        if name == dest.name:
            # Lost with the server on it: the server goes back to src,
            # where it leaves the room it takes now, unless src is above
            # its capacity (an allocation ratio lowered, say).
            home = self.state.snapshot.hypervisor(src)
            if home is None:
                return True
            trial = _Trial(self.state)
            trial.move(server, dest.name)
            there = self.on[name].get(src)
            amounts = there[1] if there else {}
            return filters.first_reason(
                FILTERS[:-1], server, home, trial, self.rules) is not None \
                or any(amount and (
                    rc not in home.inventories or self.state.usage(src, rc)
                    + amounts.get(rc, 0) > home.inventories[rc].capacity)
                    for rc, amount in server.resources.items()) \
                or self._clash(server, there)
        if name == src and placed.get(server.id) == dest.name:
            return False
        there = self.on[name].get(dest.name)
        if there is None:
            return False  # the capacity filter saw dest's room
        servers, amounts = there
        for rc, amount in server.resources.items():
            if amount and self.state.usage(dest.name, rc) + amounts.get(
                    rc, 0) + amount > dest.inventories[rc].capacity:
                return True
        return self._clash(server, there)

    def _clash(self, server, there):
        """A hard anti-affinity group of the server among the servers a
        packing puts on one hypervisor."""
        if not there:
            return False
        groups = {g.id for g in self.rules.groups_of.get(server.id, ())
                  if g.policy == 'anti-affinity'}
        return bool(groups) and any(
            g.id in groups for other in there[0]
            for g in self.rules.groups_of.get(other.id, ()))

    def _repack(self, hyp, moves):
        """(placed, unplaced) of losing hyp once the moves
        {server id: destination} are made."""
        trial = _Trial(self.state)
        snapshot = self.state.snapshot
        leaving = [s for s in self.residents[hyp.name] if s.id not in moves]
        for sid, dst in moves.items():
            server = snapshot.server(sid)
            trial.move(server, dst)
            if dst == hyp.name:
                leaving.append(server)
        domain = self.domain_of[hyp.name]
        roomiest = sorted(self.members[domain],
                          key=lambda h: (-_free(h, trial), h.name))
        unplaced, placed = _kept((hyp,), roomiest, {hyp.name: leaving},
                                 trial, self.rules)
        return placed, unplaced

    def _pack_domain(self, domain, first=False):
        hyps = self.members[domain]
        roomiest = sorted(hyps, key=lambda h: (-_free(h, self.state), h.name))
        for hyp in sorted(hyps, key=lambda h: h.name):
            if hyp.name in self.exempt:
                continue  # once not absorbed, never held to it
            unplaced, placed = _kept((hyp,), roomiest, self.residents,
                                     self.state, self.rules)
            if unplaced:
                self.exempt.add(hyp.name)
                if first and domain not in self.lost:
                    self.lost[domain] = Headroom(domain, 1, len(hyps),
                                                 (hyp.name,), unplaced)
            else:
                self._keep(hyp.name, placed)

    def _keep(self, name, placed):
        self.placed[name] = placed
        on = self.on[name] = {}
        snapshot = self.state.snapshot
        for sid, there in placed.items():
            servers, amounts = on.setdefault(there, ([], {}))
            server = snapshot.server(sid)
            servers.append(server)
            for rc, amount in server.resources.items():
                amounts[rc] = amounts.get(rc, 0) + amount

    def _sync(self):
        """Follow the moves made in the state since the last look: one
        vetted in its domain's state updates the packings it touched;
        others (an exchange's) mean packing their domains again."""
        history = self.state.history
        new = history[self.synced:]
        self.synced = len(history)
        snapshot = self.state.snapshot
        again = set()
        for sid, src, dst in new:
            server = snapshot.server(sid)
            if src in self.residents:
                self.residents[src].remove(server)
            if dst in self.residents:
                self.residents[dst].append(server)
            domains = {self.domain_of.get(h) for h in (src, dst)} - {None}
            found = [self.vetted.get(d, {}).get((sid, dst)) for d in domains]
            for domain in domains:
                self.vetted.pop(domain, None)
            if domains & again or None in found:
                again |= domains
                continue
            self._moved(sid, src, dst)
            for vetted in found:
                for name, placed in vetted.items():
                    self._keep(name, placed)
        for domain in sorted(again):
            self._pack_domain(domain)

    def _moved(self, sid, src, dst):
        """The packings of src and dst once the server moved: it leaves
        src's, and dst's sends it back to src."""
        if sid in self.placed.get(src, ()):
            placed = dict(self.placed[src])
            del placed[sid]
            self._keep(src, placed)
        if dst in self.placed:
            self._keep(dst, dict(self.placed[dst], **{sid: src}))
