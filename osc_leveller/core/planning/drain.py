"""Drain hypervisors for maintenance: where each server goes, or why not.

Every destination is chosen with the planner's own destination filters (AZ,
CPU compatibility, aggregates, server groups, capacity under the allocation
ratios, the ceiling) against the state after the moves before it, so the
whole drain is known to fit before anything moves. Largest servers go first
(they are the hardest to place), each to the coolest hypervisor that accepts
it, which spreads the load instead of filling one neighbour.

Maintenance overrides what only balancing cares about: the cooldown, the
balancing scope and the "is this move worth it" gain do not apply. What Nova
itself refuses (PCI/vGPU, a task in progress, a migration in flight), locked
servers (unless included) and servers opted out stay, with the reason.
Who may leave is policy.DRAIN's answer. After the maintenance, move_back
plans the way home from Nova's migration history.
"""

import collections
import dataclasses
import datetime

from osc_leveller.core.load import scoring
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import headroom
from osc_leveller.core.rules import policy

LIVE = policy.LIVE
COLD = policy.COLD


@dataclasses.dataclass(frozen=True)
class Drain:
    moves: tuple  # plan.Move, in wave order
    methods: dict  # server id -> LIVE or COLD
    stay: tuple  # (server, reason): cannot move at all
    unplaced: tuple  # (server, reason): may move, but nowhere fits
    # Domains whose remaining hypervisors could not lose one more after the
    # drain: (domain, reason).
    no_headroom: tuple = ()

    @property
    def complete(self):
        return not self.stay and not self.unplaced


def plan_drain(snapshot, hosts, options, cold_migrate_stopped=False,
               headroom_k=1):
    """A Drain emptying the named hypervisors (hypervisor_hostname list);
    its no_headroom: the receiving domains that could not lose headroom_k
    more hypervisors afterwards."""
    draining = frozenset(hosts)
    options = dataclasses.replace(
        options, cooldown_hours=0.0,
        exclude_hosts=options.exclude_hosts | draining)
    kind = kinds.drain(cold_migrate_stopped)
    planning = context.Context(snapshot, options, kind.load)
    snapshot, rules, state = planning.snapshot, planning.rules, \
        planning.new_state()
    who = kind.policy
    by_model = options.by_model
    targets = [h for h in snapshot.hypervisors
               if h.name not in draining and h.usable]
    leaving = sorted(
        (s for s in snapshot.servers if s.hypervisor in draining),
        key=lambda s: (-s.ram_gb, -s.flavor.vcpus, s.name, s.id))
    moves, methods, stay, unplaced = [], {}, [], []
    into = collections.Counter()
    for server in leaving:
        reason = who.why_not(server, rules)
        if reason:
            stay.append((server, reason))
            continue
        best, refusals = None, collections.Counter()
        for dest in targets:
            reason = filters.why_not_destination(server, dest, state, rules)
            if reason:
                refusals[reason.code, _clause(reason)] += 1
                continue
            after = state.score(dest.name) + state.load_model.delta(
                server.id, dest.name)
            key = (after, into[dest.name], dest.name)
            if best is None or key < best[0]:
                best = (key, dest)
        if best is None:
            unplaced.append((server, 'no hypervisor accepts it: %s' % (
                '; '.join('%s (%d hypervisor%s)' % (why, n, 's' * (n > 1))
                          for (_, why), n in refusals.most_common(3))
                or 'there is no other usable hypervisor')))
            continue
        moves.append(_move(server, best[1], state, by_model, into))
        methods[server.id] = policy.kind_of(server)
    moves.sort(key=lambda m: m.wave)  # stable: largest first within a wave
    return Drain(tuple(moves), methods, tuple(stay), tuple(unplaced),
                 _headroom(targets, state, rules, moves, headroom_k))


def _headroom(targets, state, rules, moves, k):
    """N+k after the drain, in each domain that receives servers: could
    the servers of any k hypervisors left be placed on the others."""
    receiving = {m.domain for m in moves}
    return tuple(
        (found.domain, found.why()) for found in headroom.of_domains(
            rules.snapshot, state, rules, k, names={h.name for h in targets})
        if found.domain in receiving and not found.ok)


def _move(server, dest, state, by_model, into):
    source = server.hypervisor
    src_before, dst_before = state.score(source), state.score(dest.name)
    state.apply(server.id, dest.name)
    dst_after = state.score(dest.name)
    into[dest.name] += 1
    return plan_mod.Move(
        server_id=server.id, server_name=server.name, source=source,
        destination=dest.name, destination_host=dest.host,
        # One move into each destination per wave; any number out.
        wave=into[dest.name],
        domain=scoring.domain_of(dest, by_model), ram_gb=server.ram_gb,
        gain=0.0, source_score=(src_before, state.score(source)),
        destination_score=(dst_before, dst_after),
        imbalance=(0.0, 0.0),
        reason='drain %s: %s goes %.2f -> %.2f, the coolest hypervisor '
               'that accepts it' % (source, dest.host, dst_before, dst_after))


def _clause(reason):
    """'MEMORY_MB full: 60 used ...' -> 'MEMORY_MB full': what a rule's
    refusals are counted apart by and named with (the group, the resource
    class that is full)."""
    return reason.split(':')[0]


def move_back(snapshot, hosts):
    """Moves returning servers whose last migration left one of the hosts
    (model.Hypervisor list): what a restore after a drain migrates back.

    Nova's migration history is the record: a server qualifies if its newest
    migration that moved it (live, cold and confirmed, or an evacuation)
    came from the host and it has not moved since.
    """
    names = {h.host: h for h in hosts}
    last = {}
    for mig in snapshot.migrations:
        if not mig.moved:
            continue
        when = mig.created_at or 0
        if mig.server_id not in last or when > last[mig.server_id][0]:
            last[mig.server_id] = (when, mig)
    moves = []
    for when, mig in sorted(last.values(), key=lambda item: item[0]):
        hyp = names.get(mig.source_compute)
        server = snapshot.server(mig.server_id)
        if hyp is None or server is None or \
                server.hypervisor == hyp.name:
            continue
        moves.append(plan_mod.Move(
            server_id=server.id, server_name=server.name,
            source=server.hypervisor, destination=hyp.name,
            destination_host=hyp.host, wave=1 + sum(
                1 for m in moves if m.destination == hyp.name),
            domain='', ram_gb=server.ram_gb, gain=0.0,
            source_score=(0.0, 0.0), destination_score=(0.0, 0.0),
            imbalance=(0.0, 0.0),
            reason='moved off %s at %s; back where it was' % (
                hyp.name, datetime.datetime.fromtimestamp(
                    when, datetime.timezone.utc).strftime('%H:%M:%S UTC'))))
    return sorted(moves, key=lambda m: m.wave)
