"""The kinds of plan, each declared once: who may move, how apply re-checks
a move, the load it is planned and re-checked on, and what a plan file of
it may hold.

A plan file names its kind (``kind``, balance by default); evacuate's
drains run at once and are not saved. Code that treats kinds differently
asks the kind here, never its name: a new goal is one declaration below
and the module that plans it.
"""

import dataclasses

from osc_leveller.core.planning import context
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import policy as policies


class UnknownKind(ValueError):
    """No kind of plan has this name."""


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str  # as plan files and messages name it
    policy: policies.Policy  # who may move, and where
    # recheck(moves) -> check(move, snapshot, state, rules): why a move of
    # these no longer holds in the cloud read now, or None.
    recheck: object
    load: str = context.PLANNED  # planned and re-checked on
    saved: bool = True  # written to plan files
    # A server may move more than once (parking on the way); without it,
    # a second move only within one exchange.
    repeats: bool = False
    exchanges: bool = False  # servers may trade places (core/planning/exchanges.py)
    # What a plan of this kind is, and what apply must be told to run a
    # file of it, when it skips a check of balancing: (flag, why, help);
    # apply offers the flag (v1/apply.py).
    title: str = 'a plan'
    asks: tuple = ()
    heading: str = 'Plan'  # of plan's summary line
    # The codes of its re-check's own refusals (beyond the rules'), each a
    # reason class of skipped moves in the metrics file.
    codes: tuple = ()
    # goal(options) -> what a plan of it was asked for, from the plan's
    # options (the report's heading says it); None: levelling the load.
    goal: object = None
    counts: bool = False  # its report charts the servers per hypervisor
    # Its stopped servers migrate cold: a move's method is what the server
    # is as the move starts (core/run/executor.py), never what it was.
    migrates_stopped: bool = False
    # The kind that migrates its stopped servers cold too, when
    # --cold-migrate-stopped asks for it: the same moves, its policy.
    cold: object = None


BY_NAME = {}  # every kind declared, in the order declared


def _room(options):
    # A plan file's options are as it was written: read each as text, so
    # a hand-edited ask is shown as it is rather than failing the report.
    asked = options.get('make_room')
    asked = asked if isinstance(asked, dict) else {}
    count = asked.get('count', 1)
    where = ''.join(' in %s %s' % (what, asked[key]) for key, what in (
        ('availability_zone', 'availability zone'),
        ('aggregate', 'aggregate')) if asked.get(key))
    return 'room for %s new server%s of flavor %s%s' % (
        count, 's' * (count != 1), asked.get('flavor', '?'), where)


def _free(options):
    count = options.get('free_hosts') or 0
    kept = ', keeping N+%s headroom' % options['headroom'] \
        if 'headroom' in options else ''
    cold = ', stopped servers cold' \
        if options.get('cold_migrate_stopped') is True else ''
    return '%s emptied in each balancing domain%s%s' % (
        '%s hypervisor%s' % (count, 's' * (count != 1)) if count else
        'as many hypervisors as possible', kept, cold)


def declare(kind):
    """Add a kind of plan; the kind."""
    if kind.name in BY_NAME:
        raise ValueError('kind %s is declared twice' % kind.name)
    BY_NAME[kind.name] = kind
    return kind


BALANCE = declare(Kind(
    'balance', policies.BALANCE, checks.BalancePlan, exchanges=True,
    title='a balancing plan'))
PLACEMENT = declare(Kind(
    'placement', policies.PLACEMENT, lambda moves: checks.placement,
    repeats=True, title='a path to a target placement',
    heading='Path to the target placement',
    asks=('--placement-plan', 'its moves need not even out the load and '
          'are not held by the cooldown',
          'The plan file is a path to a target placement (made by '
          '"openstack leveller plan --target-placement"): run its moves as '
          'the operator\'s, without the cooldown and without asking that '
          'each evens out the load; every other check still holds. Without '
          'this flag such a plan is refused'),
    goal=lambda options: 'servers to the hypervisors a target placement '
    'names'))
DRAIN_COLD = declare(Kind(
    'drain-cold', policies.DRAIN_COLD, lambda moves: checks.drain(True),
    saved=False, title='a drain, stopped servers cold',
    migrates_stopped=True))
DRAIN = declare(Kind(
    'drain', policies.DRAIN, lambda moves: checks.drain(False), saved=False,
    title='a drain', cold=DRAIN_COLD))

# plan --make-room FLAVOR[:COUNT] (core/planning/room.py): moves after which
# new servers of a flavor fit; each re-checked with every rule of its policy.
MAKE_ROOM = declare(Kind(
    'make-room', policies.MAKE_ROOM, lambda moves: checks.make_room,
    title='moves making room for a flavor',
    heading='Room for the flavor', goal=_room))
# plan --free-hosts (core/planning/freeing.py): every check, and each move
# must still free its source (checks.FreeHostsPlan).
# With --cold-migrate-stopped its stopped servers move too, cold; plan files
# keep the kind free-hosts, and apply runs them so only when told to.
FREE_HOSTS_COLD = declare(Kind(
    'free-hosts-cold', policies.FREE_HOSTS_COLD,
    lambda moves: checks.FreeHostsPlan(moves, policies.FREE_HOSTS_COLD),
    saved=False, title='a plan freeing hypervisors, stopped servers cold',
    heading='Free hosts', codes=(checks.NOT_FREED,), goal=_free,
    migrates_stopped=True))
FREE_HOSTS = declare(Kind(
    'free-hosts', policies.FREE_HOSTS, checks.FreeHostsPlan,
    title='a plan freeing hypervisors', heading='Free hosts',
    codes=(checks.NOT_FREED,), goal=_free, cold=FREE_HOSTS_COLD))
# plan --spread count (core/planning/spread.py): every rule of balancing,
# and each move must still narrow its two hypervisors' count gap.
SPREAD = declare(Kind(
    'spread', policies.SPREAD, lambda moves: checks.spread,
    title='a plan evening out server counts',
    heading='Spread by server count', codes=(checks.COUNT_EVEN,),
    goal=lambda options: 'server counts per hypervisor within one of each '
    'other in each balancing domain', counts=True))


def saved():
    """The names a plan file's kind may have."""
    return [kind.name for kind in BY_NAME.values() if kind.saved]


def asking():
    """The kinds a plan file may have that apply runs only when told so by
    their flag (asks)."""
    return [kind for kind in BY_NAME.values() if kind.saved and kind.asks]


def of(name):
    """The Kind of a plan file's kind; UnknownKind if none is saved so."""
    kind = BY_NAME.get(name)
    if kind is None or not kind.saved:
        raise UnknownKind(name)
    return kind


def drain(cold_migrate_stopped):
    return DRAIN.cold if cold_migrate_stopped else DRAIN
