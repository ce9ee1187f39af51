"""The planner's knobs, with their defaults, in one frozen object."""

import dataclasses

from osc_leveller.core import errors
from osc_leveller.core import scoring

CPU_MODEL = 'model'
CPU_FEATURES = 'features'

OPT_OUT_KEY = 'leveller:exclude'


class OptionsError(errors.LevellerError, ValueError):
    """Options that make no sense together; the message names them."""


@dataclasses.dataclass(frozen=True)
class PlannerOptions:
    weights: dict = dataclasses.field(
        default_factory=lambda: dict(scoring.DEFAULT_WEIGHTS))
    # Domains whose imbalance (std of host scores) is below this are left alone.
    threshold: float = 0.05
    # Least reduction of the sum of squared score deviations a move must bring.
    min_gain: float = 0.0005
    max_moves: int = 25
    # No destination may be pushed above this score by a move.
    ceiling: float = 0.85
    # Fixed cost of any migration, in GiB of RAM copied: favours fewer moves.
    move_cost_gb: float = 64.0
    cpu_compatibility: str = CPU_MODEL
    include_locked: bool = False
    cooldown_hours: float = 6.0
    projects: frozenset = frozenset()
    exclude_projects: frozenset = frozenset()
    exclude_hosts: frozenset = frozenset()
    availability_zones: frozenset = frozenset()
    # Reference time for cooldowns; None means the snapshot's taken_at.
    now: float = None

    def validate(self):
        """Raise OptionsError naming the first option that makes no sense."""
        checks = (
            ('threshold', self.threshold >= 0),
            ('min-gain', self.min_gain >= 0),
            ('max-moves', self.max_moves >= 0),
            ('ceiling', 0 < self.ceiling),
            ('move-cost', self.move_cost_gb >= 0),
            ('cooldown', self.cooldown_hours >= 0),
        )
        for name, ok in checks:
            if not ok:
                raise OptionsError('--%s must not be negative%s' % (
                    name, ' or zero' if name == 'ceiling' else ''))
        check_weights(self.weights)
        if self.cpu_compatibility not in (CPU_MODEL, CPU_FEATURES):
            raise OptionsError('--cpu-compatibility must be %s or %s' % (
                CPU_MODEL, CPU_FEATURES))
        return self


def check_weights(weights):
    if weights['cpu'] + weights['ram'] <= 0:
        raise OptionsError('the cpu and ram weights cannot both be 0')
    return weights


def weights_of(settings):
    """{dimension: weight} from a core.config.Settings; OptionsError if bad."""
    return check_weights({d: settings['weights.' + d]
                          for d in scoring.DIMENSIONS})


def from_settings(settings, **extra):
    """PlannerOptions from a core.config.Settings, plus fields not in it."""
    fields = dict(
        weights=weights_of(settings),
        threshold=settings['threshold'],
        min_gain=settings['min_gain'],
        max_moves=settings['max_moves'],
        ceiling=settings['ceiling'],
        move_cost_gb=settings['move_cost'],
        cpu_compatibility=settings['cpu_compatibility'],
        include_locked=settings['include_locked'],
        cooldown_hours=settings['cooldown'],
        projects=frozenset(settings['projects']),
        exclude_projects=frozenset(settings['exclude_projects']),
        exclude_hosts=frozenset(settings['exclude_hosts']),
        availability_zones=frozenset(settings['availability_zones']),
    )
    fields.update(extra)
    return PlannerOptions(**fields).validate()


def to_document(options):
    """The options as a plan file records them."""
    return {
        'weights': dict(options.weights),
        'threshold': options.threshold,
        'min_gain': options.min_gain,
        'max_moves': options.max_moves,
        'ceiling': options.ceiling,
        'move_cost_gb': options.move_cost_gb,
        'cpu_compatibility': options.cpu_compatibility,
        'include_locked': options.include_locked,
        'cooldown_hours': options.cooldown_hours,
        'projects': sorted(options.projects),
        'exclude_projects': sorted(options.exclude_projects),
        'exclude_hosts': sorted(options.exclude_hosts),
        'availability_zones': sorted(options.availability_zones),
    }
