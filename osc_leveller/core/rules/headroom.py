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
keeps each hypervisor's placement and holds every move to it
(core/rules/n_plus_one.py).
"""

import dataclasses
import heapq
import itertools
import math

from osc_leveller.core.load import scoring
from osc_leveller.core.model import model
from osc_leveller.core.rules import filters
from osc_leveller.core.settings import config

# A rebuild goes through Nova's scheduler and its prefilters, not the
# conductor's live-migration checks (the hypervisor's version); and the
# server groups as a rebuild sees them (_groups).
FILTERS = tuple(r for r in filters.DESTINATION_FILTERS if r.rebuild)
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
    members = domains(snapshot, rules, names)
    on = residents(snapshot, state, members)
    return [of_domain(domain, hyps, state, rules, k, on)
            for domain, hyps in sorted(members.items())]


def domains(snapshot, rules, names=None):
    """{balancing domain: [hypervisor]} of the usable hypervisors, or of
    those named."""
    by_model = rules.options.cpu_compatibility == config.CPU_MODEL
    members = {}
    for hyp in snapshot.hypervisors:
        if (hyp.usable if names is None else hyp.name in names):
            members.setdefault(scoring.domain_of(hyp, by_model), []).append(
                hyp)
    return members


def residents(snapshot, state, members):
    """{hypervisor name: its servers in state}, for the hypervisors of
    members ({domain: [hypervisor]})."""
    found = {h.name: [] for hyps in members.values() for h in hyps}
    for server in snapshot.servers:
        here = found.get(state.host_of(server.id))
        if here is not None:
            here.append(server)
    return found


def of_domain(domain, hypervisors, state, rules, k, residents):
    """Headroom of one domain: the first set of k that does not fit.
    residents: {hypervisor name: its servers in state}."""
    if len(hypervisors) <= k:
        if any(residents[h.name] for h in hypervisors):
            return Headroom(domain, k, len(hypervisors),
                            tuple(h.name for h in hypervisors))
        return Headroom(domain, k, len(hypervisors))
    sets, every = _sets(hypervisors, residents, state, k)
    # Most free RAM first; packing never changes the state itself.
    roomiest = sorted(hypervisors, key=lambda h: (-free_ram(h, state), h.name))
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
    return placement(lost, roomiest, residents, state, rules)[0]


def _first_fit(lost, roomiest, residents, state, rules):
    """(unplaced as pack() gives it, {server id: hypervisor}): each unit
    onto the first of roomiest that takes it."""
    others, units, checks, trial = _start(lost, roomiest, residents, state,
                                          rules)
    unplaced = []
    for unit in units:
        first = None
        for dest in others:
            why = _place(unit, dest, checks, trial, rules)
            if not why:
                break
            first = first or (dest, why)
        else:
            unplaced.extend((server, _why(first)) for server in unit)
    return unplaced, _placed(units, trial, others)


def _spread(lost, roomiest, residents, state, rules):
    """{server id: hypervisor}, each unit onto the hypervisor with the
    most free RAM left at that point, so that none is filled to the brim;
    None at the first unit that fits nowhere."""
    others, units, checks, trial = _start(lost, roomiest, residents, state,
                                          rules)
    heap = [(-free_ram(h, trial), h.name, h) for h in others]
    heapq.heapify(heap)
    for unit in units:
        tried = []
        while heap:
            entry = heapq.heappop(heap)
            dest = entry[2]
            if not _place(unit, dest, checks, trial, rules):
                heapq.heappush(heap, (-free_ram(dest, trial), dest.name,
                                      dest))
                break
            tried.append(entry)
        else:
            return None
        for entry in tried:
            heapq.heappush(heap, entry)
    return _placed(units, trial, others)


def _start(lost, roomiest, residents, state, rules):
    """(the other hypervisors, the leaving units, the checks of a
    rebuild, a Trial over state) of packing the lost hypervisors."""
    gone = {h.name for h in lost}
    leaving = [s for h in lost for s in residents[h.name]]
    ids = {s.id for s in leaving}
    return ([h for h in roomiest if h.name not in gone],
            _units(leaving, rules), FILTERS + (_GROUPS,), Trial(state, ids))


def _placed(units, trial, others):
    """{server id: hypervisor} of the units' servers placed on others."""
    names = {h.name for h in others}
    return {s.id: trial.moved[s.id] for unit in units for s in unit
            if trial.moved.get(s.id) in names}


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


class Trial:
    """A state with some servers rebuilt elsewhere: where servers are and
    the Placement usage, all that the filters of a rebuild read; the
    state under it is not changed."""

    def __init__(self, state, leaving=frozenset()):
        self.state = state
        self.leaving = leaving  # ids of the servers rebuilt elsewhere
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


def placement(lost, roomiest, residents, state, rules):
    """(unplaced as pack() gives it, {server id: hypervisor} of the
    others): spread when it can be, so that no hypervisor is filled to
    the brim (core/rules/n_plus_one.py keeps these); else first-fit, and its
    answer."""
    placed = _spread(lost, roomiest, residents, state, rules)
    if placed is None:
        return _first_fit(lost, roomiest, residents, state, rules)
    return [], placed


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


def _groups(server, dest, trial, rules):
    """Nova's hard server-group rules for a rebuild elsewhere, in a Trial
    (the servers it rebuilds: trial.leaving)."""
    for group in rules.groups_of.get(server.id, ()):
        others = [m for m in rules.group_members[group.id] if m != server.id]
        label = group.name or group.id
        if group.policy == 'anti-affinity':
            here = [m for m in others if trial.host_of(m) == dest.name]
            if len(here) >= (group.max_server_per_host or 1):
                return 'anti-affinity group %s: %s already hosts %s' % (
                    label, dest.name, ', '.join(sorted(
                        rules.snapshot.server(m).label for m in here)))
        elif group.policy == 'affinity':
            staying = [m for m in others if m not in trial.leaving]
            if staying and trial.host_of(staying[0]) != dest.name:
                return 'affinity group %s: its other servers are on %s' % (
                    label, trial.host_of(staying[0]))
    return None


# Packing checks it after FILTERS.
_GROUPS = filters.Rule('server_groups', _groups, destination=True)


def _why(first):
    if first is None:
        return 'no other hypervisor'
    dest, why = first
    return 'on %s, %s' % (dest.name, why)


def free_ram(hyp, state):
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
