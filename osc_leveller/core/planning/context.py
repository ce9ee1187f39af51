"""What a plan is made, re-checked and reported on, built once per read.

Every kind of plan (core/planning/kinds.py) is made on one load, and apply re-checks
its moves on the same one, or the ceiling and saturation checks could
pass a move at planning that apply then refuses:

- PLANNED: the forecast blend, then the load that lasted, when the
  snapshot carries them (core/load/forecast.py planned()); the measured load
  when it carries neither;
- NOW: the load as measured, what ``score`` shows and a run's metrics file
  counts its imbalance on.

The rules (filters.Rules) read only where servers are, their groups and
the migration history, which both loads share.
"""

import functools

from osc_leveller.core.load import forecast
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.rules import filters

PLANNED = 'planned'
NOW = 'now'


class Context:
    """measured: the snapshot as read; snapshot: it on the load given;
    rules: the filters' indexes; state: the State the moves are planned
    or re-checked in (where N+1 is kept, if asked). Each is built when
    first asked for."""

    def __init__(self, snapshot, options, load=PLANNED):
        self.measured = snapshot
        self.options = options
        self.load = load

    @functools.cached_property
    def snapshot(self):
        if self.load == NOW:
            return self.measured
        return forecast.planned(self.measured, self.options.by_model)

    @functools.cached_property
    def rules(self):
        return filters.Rules(self.snapshot, self.options)

    @functools.cached_property
    def state(self):
        state = self.new_state()
        self.rules.kept_state = state
        return state

    def new_state(self):
        """A State of the snapshot with no move made."""
        return state_mod.new_state(self.snapshot, self.options.weights)

    def state_now(self):
        """A State of the load as measured, with no move made."""
        return state_mod.new_state(self.measured, self.options.weights)
