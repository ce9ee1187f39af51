"""May this server move at all, and why not: one answer per kind of move.

A policy is a named sequence of server predicates (filters.RULES); the
first that fails gives the reason an operator reads. Where the server may go
is the destination filters' question: Nova's, the same for every kind of
move, and for balancing one of its own.

- BALANCE (plan, and apply of its plans): everything, the cooldown and the
  balancing scope included; a server does not go back to a hypervisor it
  left within the return window; and with keep_n_plus_one, no move breaks
  N+1 (core/rules/n_plus_one.py).
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

from osc_leveller.core.model import model
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import n_plus_one

LIVE = 'live'
COLD = 'cold'


@dataclasses.dataclass(frozen=True)
class Policy:
    name: str
    checks: tuple  # filters.Rule of the server: (server, rules)
    # filters.Rule of the destination: (server, dest, state, rules)
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

    def without(self, *codes):
        return dataclasses.replace(self, checks=tuple(
            c for c in self.checks if c.code not in codes))

    def applies(self, code):
        """Whether the destination rule of this code applies."""
        return any(rule.code == code for rule in self.destinations)


def kind_of(server):
    """How a drain moves the server: LIVE, or COLD when it is stopped."""
    return COLD if server.status in model.STOPPED_STATUSES else LIVE


# What Nova refuses, what the leveller cannot check, and what the operator
# said must not move.
_NOVA = filters.rules_named(
    'status', 'task_state', 'locked', 'migration_in_flight') + \
    filters.LIVE_ONLY + filters.rules_named('opted_out', 'project')

BALANCE = Policy('balance', _NOVA + filters.rules_named(
    'cooldown', 'source_in_scope', 'source_usable'),
    filters.DESTINATION_FILTERS + filters.BALANCING + (n_plus_one.RULE,))
# A server its exchange parked a moment ago: the cooldown it is in is the
# one that parking move started.
BALANCE_AGAIN = BALANCE.without('cooldown')
PLACEMENT = Policy('placement', _NOVA + filters.rules_named(
    'source_in_scope'), filters.TARGET_FILTERS)
_DRAIN = filters.rules_named('migratable', 'live_blockers', 'task_state',
                             'locked', 'migration_in_flight', 'opted_out')
DRAIN = Policy('drain', filters.rules_named('stopped_stay') + _DRAIN)
DRAIN_COLD = Policy('drain, stopped servers cold', _DRAIN)


# plan --make-room (core/planning/room.py): what Nova refuses, locks and
# opt-outs, the projects and hypervisors the options select; every
# destination rule, the ceiling and saturation included. Making room does
# not wait for a cooldown, nor need to even out the load.
MAKE_ROOM = Policy('make-room', _NOVA + filters.rules_named(
    'source_in_scope'))


def drain(cold_migrate_stopped):
    return DRAIN_COLD if cold_migrate_stopped else DRAIN


# plan --free-hosts (core/planning/freeing.py): what Nova refuses, locks and
# opt-outs, and the hypervisors and projects in scope, as for a target
# placement; but every destination rule, the ceiling and saturation
# included: freeing hosts is the leveller's choice of destinations, so it
# makes no new hot spot.
FREE_HOSTS = Policy('free-hosts', filters.rules_named('stopped_stay') +
                    _NOVA + filters.rules_named('source_in_scope',
                                                'source_usable'))
# plan --free-hosts --cold-migrate-stopped: stopped servers too, cold, as a
# drain moves them.
FREE_HOSTS_COLD = Policy('free-hosts, stopped servers cold',
                         _DRAIN + filters.rules_named(
                             'project', 'source_in_scope', 'source_usable'))


# plan --spread count (core/planning/spread.py): a rearrangement run from
# cron like balancing, so balancing's rules all hold: the cooldown and the
# return window keep it from undoing the last run's moves (or a balancing
# run's), the scope is the operator's, and the ceiling, saturation and
# N+1 bound where servers may go.
SPREAD = dataclasses.replace(BALANCE, name='spread')
