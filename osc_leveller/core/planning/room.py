"""Make room for new servers of a flavor: the fewest live migrations, then
the fewest GiB, after which COUNT servers of it fit.

A cloud with plenty of free RAM in total still answers "No valid host" for
a large flavor when the free RAM is in pieces. This module finds the
hypervisors a new server of the flavor could land on (what Nova's
scheduler checks of a new server: the compute service, the zone, the
aggregates' extra specs and tenant isolation, the traits the flavor asks
for, judged with the destination rules on a stand-in server of the flavor
with no group and no history) and, where none has the room, the cheapest
set of a hypervisor's servers to move elsewhere so that one does. Those
moves keep every rule of the make-room kind (core/planning/kinds.py),
each judged against the state after the moves before it.

Room is Placement's: for each resource class the flavor allocates,
(total - reserved) x allocation_ratio less what is used, and its
min_unit, max_unit and step_size. The new servers' load is unknown: the
ceiling and the saturation check bound the moves only.

For COUNT > 1 the room is made one server at a time, each on the
hypervisor that costs the fewest moves, then GiB, to clear (a greedy);
the room kept for the servers before is never given away. For one
hypervisor the cheapest set is exact: every set of its servers, the
smallest first and the lightest of a size first, up to EXACT_SETS sets,
then the largest servers first.
"""

import collections
import dataclasses
import itertools
import time

from osc_leveller.core.load import scoring
from osc_leveller.core.model import errors
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters

# Sets of a hypervisor's servers tried for the exact cheapest one.
EXACT_SETS = 2000
# Hypervisors tried to clear for each new server, those with the least to
# move first.
CANDIDATES = 50
# What bounds a new server's hypervisor (Nova's scheduler, the scope), as
# the destination rules check it of the stand-in; capacity is counted here.
NEW_SERVER_RULES = filters.BOOT_FILTERS
NO_ROOM = 'no_room'  # the code of a re-check's refusal, and of NoRoom


class NoRoom(errors.LevellerError, ValueError):
    """No sequence of moves makes the room; the message names what limits."""


@dataclasses.dataclass(frozen=True)
class Ask:
    """Where COUNT servers of flavor must fit: zone, aggregate ('': any)."""
    flavor: model.Flavor
    count: int = 1
    zone: str = ''
    aggregate: str = ''

    @property
    def resources(self):
        return snapshot_io.flavor_resources(self.flavor, False)

    def document(self):
        """How a plan file's options record it."""
        return {'flavor': self.flavor.name, 'count': self.count,
                'availability_zone': self.zone or None,
                'aggregate': self.aggregate or None}

    def text(self):
        where = ' in availability zone %s' % self.zone if self.zone else ''
        where += ' in aggregate %s' % self.aggregate if self.aggregate else ''
        return '%d server%s of flavor %s%s' % (
            self.count, 's' * (self.count > 1), self.flavor.name, where)


def stand_in(flavor, zone=''):
    """A new server of the flavor, as the destination rules see it: no
    project, group or history; pinned to the zone asked, if any."""
    return model.Server(
        id='new server of %s' % flavor.name, name='new %s' % flavor.name,
        hypervisor='', flavor=flavor, pinned_availability_zone=zone,
        resources=model.frozen_mapping(
            snapshot_io.flavor_resources(flavor, False)))


def flavor_in(snapshot, name):
    """The flavor of that name (or ID-less original name) a server of the
    snapshot has, or None: a snapshot does not hold unused flavors."""
    for server in snapshot.servers:
        if server.flavor.name == name:
            return server.flavor
    return None


def unit_refusal(amount, rc, inv):
    """Why Placement refuses an allocation of amount whatever is used."""
    if inv is None:
        return 'has no %s inventory' % rc
    if inv.max_unit is not None and amount > inv.max_unit:
        return 'needs %d %s, above max_unit %d' % (amount, rc, inv.max_unit)
    if amount < inv.min_unit:
        return 'needs %d %s, below min_unit %d' % (amount, rc, inv.min_unit)
    if inv.step_size > 1 and amount % inv.step_size:
        return 'needs %d %s, not a multiple of step_size %d' % (
            amount, rc, inv.step_size)
    return None


class _Room:
    """The search: state holds the moves so far, kept[host] the new
    servers whose room is kept on it."""

    def __init__(self, planning, ask):
        self.snapshot = planning.snapshot
        self.rules = planning.rules
        self.state = planning.new_state()
        self.ask = ask
        self.need = ask.resources
        self.policy = kinds.MAKE_ROOM.policy
        self.kept = collections.Counter()
        self.moves = []
        self.waves = plan_mod.Waves()
        self.refused = {}  # hypervisor -> why no new server goes there
        self.hosts = []
        self.order = {s.id: i for i, s in enumerate(self.snapshot.servers)}
        new = stand_in(ask.flavor, ask.zone)
        for hyp in self.snapshot.hypervisors:
            why = self._static(new, hyp)
            if why:
                self.refused[hyp.name] = why
            else:
                self.hosts.append(hyp)

    def _static(self, new, hyp):
        if not hyp.usable:
            return 'not usable'
        if self.ask.zone and hyp.availability_zone != self.ask.zone:
            return 'in availability zone %s' % (hyp.availability_zone
                                                or 'none')
        if self.ask.aggregate and self.ask.aggregate not in {
                a.name for a in hyp.aggregates}:
            return 'not in aggregate %s' % self.ask.aggregate
        why = filters.first_reason(NEW_SERVER_RULES, new, hyp, self.state,
                                   self.rules)
        if why:
            return why
        for rc, amount in sorted(self.need.items()):
            why = unit_refusal(amount, rc, hyp.inventories.get(rc))
            if why:
                return why
        return None

    def free(self, name, state=None):
        """{rc: what is left on the hypervisor for more servers}."""
        state = state or self.state
        hyp = self.snapshot.hypervisor(name)
        return {rc: hyp.inventories[rc].capacity - state.usage(name, rc)
                - self.kept[name] * amount for rc, amount in self.need.items()}

    def short(self, name, state=None):
        """{rc: amount missing} for one more new server there."""
        return {rc: amount - left for rc, amount in self.need.items()
                for left in [self.free(name, state)[rc]] if left < amount}

    def run(self):
        left = self.ask.count
        while left > 0:
            fits = [h for h in self.hosts if not self.short(h.name)]
            if not fits:
                self._clear_one()
                left -= 1
                continue
            # The tightest fit keeps the larger holes. It stays the
            # tightest as it fills, so each is filled in turn.
            for hyp in sorted(fits, key=lambda h: (
                    self.free(h.name)[model.MEMORY_MB]
                    if model.MEMORY_MB in self.need else 0, h.name)):
                while left > 0 and not self.short(hyp.name):
                    self.kept[hyp.name] += 1
                    left -= 1
        return self.moves

    def _clear_one(self):
        ranked = sorted(self.hosts, key=lambda h: (
            self.short(h.name).get(model.MEMORY_MB, 0),
            self.short(h.name).get(model.VCPU, 0), h.name))[:CANDIDATES]
        best, why_not = None, {}
        for hyp in ranked:
            found = self._clearing(hyp.name, best and best[0])
            if found is None:  # cannot cost less than the best
                continue
            if isinstance(found, str):
                why_not[hyp.name] = found
                continue
            cost = (len(found[0]), sum(s.ram_gb for s, _ in found[0]),
                    hyp.name)
            if best is None or cost < best[0]:
                best = (cost, hyp.name, found)
        if best is None:
            raise NoRoom(self._limit(why_not))
        _, name, (placed, _state) = best
        for server, dest in placed:
            self._move(server, dest, name)
        self.kept[name] += 1

    def _clearing(self, name, bound=None):
        """([(server, destination)], state) clearing room for one more new
        server on the hypervisor, or why it cannot be; None when it cannot
        cost less than bound (moves, GiB, hypervisor): no set of its
        servers is placed that could not win (the sets of a size are
        tried the lightest first)."""
        short = self.short(name)
        here = self._servers_on(name)
        movable, stay = [], []
        for server in here:
            why = self.policy.why_not(server, self.rules) if \
                server.id not in self.state.moved else \
                filters.Refusal('it is moved once already', NO_ROOM)
            (stay if why else movable).append((server, why))
        movable = [s for s, _ in movable]
        if not self._frees(movable, short):
            parts = ['its servers that may move free too little: %s short'
                     % _amounts(short)]
            parts += ['%s stays: %s' % (s.label, why) for s, why in stay[:3]]
            return '; '.join(parts)
        # The fewest servers that could free enough: the largest first, per
        # resource class short.
        lower = max(next(i for i in range(1, len(movable) + 1) if sum(
            sorted((s.resources.get(rc, 0) for s in movable),
                   reverse=True)[:i]) >= amount)
            for rc, amount in short.items())
        looked, failed = 0, None
        for size in range(lower, len(movable) + 1):
            if bound and size > bound[0]:
                return None
            sets = []
            for chosen in itertools.combinations(movable, size):
                looked += 1
                if looked > EXACT_SETS * 10:  # too many to look at all
                    return self._greedy(movable, short, name)
                if self._frees(chosen, short):
                    sets.append(chosen)
            sets.sort(key=lambda c: (sum(s.ram_gb for s in c),
                                     sorted(s.id for s in c)))
            for tried, chosen in enumerate(sets, start=1):
                if bound and (size, sum(s.ram_gb for s in chosen),
                              name) > bound:
                    return None
                placed = self._place(chosen, name)
                if not isinstance(placed, str):
                    return placed
                failed = failed or placed
                if tried >= EXACT_SETS:
                    return self._greedy(movable, short, name)
        return failed

    def _servers_on(self, name):
        """The servers on the hypervisor now, in the snapshot's order (the
        order the sets of them are tried in)."""
        state = self.state
        found = {s.id: s for s in self.snapshot.servers_on(name)}
        found.update((server_id, self.snapshot.server(server_id))
                     for server_id, _, dest in state.history if dest == name)
        return sorted((s for s in found.values()
                       if state.host_of(s.id) == name),
                      key=lambda s: self.order[s.id])

    def _greedy(self, movable, short, name):
        """Largest first until enough is freed: the placed servers, or why
        they do not fit."""
        chosen = []
        for server in sorted(movable, key=lambda s: (-s.ram_gb, s.id)):
            chosen.append(server)
            if self._frees(chosen, short):
                return self._place(chosen, name)
        return 'its servers that may move free too little'

    def _frees(self, servers, short):
        return all(sum(s.resources.get(rc, 0) for s in servers) >= amount
                   for rc, amount in short.items())

    def _place(self, servers, name):
        """Each server, largest first, to the coolest hypervisor that takes
        it without eating room kept for a new server: ([(server, dest)],
        state), or why one fits nowhere."""
        state = self.state.copy()
        placed = []
        for server in sorted(servers, key=lambda s: (-s.ram_gb, s.id)):
            best, refusals = None, collections.Counter()
            for dest in self.snapshot.hypervisors:
                if dest.name == name:
                    continue
                why = self.policy.why_not_destination(server, dest, state,
                                                      self.rules)
                if not why and self.kept[dest.name] and any(
                        left < server.resources.get(rc, 0)
                        for rc, left in self.free(dest.name, state).items()):
                    why = 'the room kept there for a new server'
                if why:
                    refusals[why.split(':')[0]] += 1
                    continue
                key = (state.score(dest.name) + state.load_model.delta(
                    server.id, dest.name), dest.name)
                if best is None or key < best[0]:
                    best = (key, dest)
            if best is None:
                return '%s fits nowhere else (%s)' % (server.label, '; '.join(
                    '%s: %d hypervisor%s' % (why, n, 's' * (n > 1))
                    for why, n in refusals.most_common(3)) or 'no other '
                    'hypervisor')
            state.apply(server.id, best[1].name)
            placed.append((server, best[1]))
        return placed, state

    def _move(self, server, dest, name):
        state = self.state
        source = state.host_of(server.id)
        before = (state.score(source), state.score(dest.name))
        state.apply(server.id, dest.name)
        self.moves.append(plan_mod.Move(
            server_id=server.id, server_name=server.name, source=source,
            destination=dest.name, destination_host=dest.host,
            wave=self.waves.next(source, dest.name),
            domain=scoring.domain_of(dest, self.rules.options.by_model),
            ram_gb=server.ram_gb, gain=0.0,
            source_score=(before[0], state.score(source)),
            destination_score=(before[1], state.score(dest.name)),
            imbalance=(0.0, 0.0),
            reason='make room on %s for a new %s; %s goes %.2f -> %.2f' % (
                name, self.ask.flavor.name, dest.host, before[1],
                state.score(dest.name))))

    def _limit(self, why_not):
        """The message of NoRoom: the resource that limits, what is free
        in all against what one server needs, and why each hypervisor
        tried cannot be cleared."""
        where = self.ask.zone or self.ask.aggregate or 'the cloud'
        if not self.hosts:
            return 'no room for %s: no hypervisor takes a new server of ' \
                'it: %s' % (self.ask.text(), '; '.join(
                    '%s: %s' % item for item in sorted(
                        self.refused.items())[:5]) or 'there is none')
        shorts = collections.Counter(
            rc for h in self.hosts for rc in self.short(h.name))
        rc = shorts.most_common(1)[0][0] if shorts else model.MEMORY_MB
        total = sum(max(0, self.free(h.name)[rc]) for h in self.hosts)
        placed = sum(self.kept.values())
        return 'no room for %s%s: %s limits: %s has %s free in all on %d ' \
            'hypervisor%s, %s needed per server, but no hypervisor can be ' \
            'cleared to %s: %s' % (
                self.ask.text(),
                ' (room for %d found)' % placed if placed else '', rc, where,
                _amount(rc, total), len(self.hosts),
                's' * (len(self.hosts) > 1), _amount(rc, self.need[rc]),
                _amount(rc, self.need[rc]), '; '.join(
                    '%s: %s' % item for item in sorted(why_not.items())[:5]))


def _amount(rc, value):
    if rc == model.MEMORY_MB:
        return '%g GiB' % round(value / 1024.0, 1)
    return '%d %s' % (value, rc)


def _amounts(short):
    return ', '.join(_amount(rc, v) for rc, v in sorted(short.items()))


def make_plan(snapshot, ask, options):
    """A make-room plan (plan.Plan, kind make-room) for ask (an Ask);
    NoRoom when no sequence of moves makes it."""
    created = time.time()
    planning = context.Context(snapshot, options, kinds.MAKE_ROOM.load)
    room = _Room(planning, ask)
    start = room.state.copy()
    moves = room.run()
    made = plan_mod.build(
        snapshot, options, tuple(moves), _stats(room, start),
        _stats(room, room.state), created,
        note='' if moves else 'there is room already for %s' % ask.text(),
        kind=kinds.MAKE_ROOM)
    return dataclasses.replace(made, options=dict(
        made.options, make_room=ask.document()))


def _stats(room, state):
    options = room.rules.options  # the domains in scope, as the report's
    hosts = [h for h in room.snapshot.hypervisors
             if h.usable and filters.in_scope(h, options)]
    by_model = options.by_model
    return scoring.domain_stats(
        {h.name: state.score(h.name) for h in hosts},
        {h.name: scoring.domain_of(h, by_model) for h in hosts})


def parse(text):
    """'FLAVOR[:COUNT]' -> (flavor name, count); ValueError saying why."""
    name, sep, count = text.rpartition(':') if ':' in text else \
        (text, '', '')
    if not name.strip():
        raise ValueError('--make-room %s: no flavor named (FLAVOR or '
                         'FLAVOR:COUNT)' % text)
    if sep:
        if not count.isdigit() or not 0 < int(count) <= 10000:
            raise ValueError('--make-room %s: COUNT must be a whole number '
                             'from 1 to 10000, not "%s"' % (text, count))
        return name, int(count)
    return name, 1
