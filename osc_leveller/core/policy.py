"""May this server move at all, and why not: one answer per kind of move.

A policy is a named sequence of server predicates (core/filters.py); the
first that fails gives the reason an operator reads. Where the server may go
is the destination filters' question: Nova's, the same for every kind of
move, and for balancing one of its own.

- BALANCE (plan, and apply of its plans): everything, the cooldown and the
  balancing scope included; a server does not go back to a hypervisor it
  left within the return window; and with keep_n_plus_one, no move breaks
  N+1 (core/n_plus_one.py).
- PLACEMENT (plan --target): what Nova refuses, locks and opt-outs, and the
  projects and hypervisors the options select. An operator's target does
  not wait for a cooldown, nor need to even out the load; it may send a
  server back where it was, and onto a saturated hypervisor below the
  ceiling.
- DRAIN (evacuate): maintenance overrides what only balancing cares about
  (cooldown, scope). Stopped servers stay, unless DRAIN_COLD migrates them
  cold.
"""

import dataclasses

from osc_leveller.core import filters
from osc_leveller.core import images
from osc_leveller.core import n_plus_one
from osc_leveller.core import model

LIVE = 'live'
COLD = 'cold'


@dataclasses.dataclass(frozen=True)
class Policy:
    name: str
    checks: tuple  # predicates (server, rules) -> reason or None
    # predicates (server, dest, state, rules) -> reason or None
    destinations: tuple = filters.DESTINATION_FILTERS

    def why_not(self, server, rules):
        """The reason the server may not move, or None."""
        return filters.first_reason(self.checks, server, rules)

    def why_not_destination(self, server, dest, state, rules):
        """The reason the server may not go to dest in state, or None."""
        return filters.first_reason(self.destinations, server, dest, state,
                                    rules)

    def why_not_to(self, server, dest, state, rules):
        """The reason the server may not move to dest in state, or None."""
        return self.why_not(server, rules) or self.why_not_destination(
            server, dest, state, rules)

    def without(self, *checks):
        return dataclasses.replace(self, checks=tuple(
            c for c in self.checks if c not in checks))


# --- predicates of a drain ----------------------------------------------------

def stopped_stay(server, rules):
    if server.status in model.STOPPED_STATUSES:
        return 'status %s: stopped servers stay (use --cold-migrate-stopped ' \
            'to move them)' % server.status


def migratable(server, rules):
    if server.status not in model.LIVE_MIGRATABLE_STATUSES + \
            model.STOPPED_STATUSES:
        return 'status %s: Nova migrates only ACTIVE or PAUSED servers ' \
            'live, and stopped ones cold' % server.status


def live_blockers(server, rules):
    """What stops a live migration (a cold one takes the devices along),
    or what the leveller cannot check for one."""
    if server.status not in model.STOPPED_STATUSES:
        return filters.blockers(server, rules) or images.numa_reason(server)


def kind_of(server):
    """How a drain moves the server: LIVE, or COLD when it is stopped."""
    return COLD if server.status in model.STOPPED_STATUSES else LIVE


# What Nova refuses, and what the operator said must not move.
_NOVA = (filters.status, filters.task_state, filters.locked,
         filters.migration_in_flight, filters.blockers, images.numa_reason,
         filters.opted_out, filters.project)

BALANCE = Policy('balance', _NOVA + (
    filters.cooldown, filters.source_in_scope, filters.source_usable),
    filters.DESTINATION_FILTERS + (filters.returning, n_plus_one.headroom))
# A server its exchange parked a moment ago: the cooldown it is in is the
# one that parking move started.
BALANCE_AGAIN = BALANCE.without(filters.cooldown)
PLACEMENT = Policy('placement', _NOVA + (filters.source_in_scope,),
                   filters.TARGET_FILTERS)
_DRAIN = (migratable, live_blockers, filters.task_state, filters.locked,
          filters.migration_in_flight, filters.opted_out)
DRAIN = Policy('drain', (stopped_stay,) + _DRAIN)
DRAIN_COLD = Policy('drain, stopped servers cold', _DRAIN)


def drain(cold_migrate_stopped):
    return DRAIN_COLD if cold_migrate_stopped else DRAIN
