"""The node_exporter textfile metrics of an apply or evacuate run.

A cron job reports to Prometheus by leaving a ``.prom`` file in
node_exporter's textfile directory. This module owns what goes into it:
the figures of one run (Record), their text in Prometheus' exposition
format, and the last success read back from the previous file, so that
"no successful run in 3 h" can be alerted on after failed runs too.

Labels stay few and bounded: the command, a move's status and a short
reason class from a fixed list, and the balancing domain. Never a server,
a host or a message: a new series per server would grow Prometheus'
index with every run.

The file also keeps when a run last found the metrics plausible
(core/load/guard.py): the next run compares Prometheus' figures of then with
now's, so it is kept from the previous file while the guard holds.
"""

import dataclasses
import math
import re

import prometheus_client
import prometheus_client.core

from osc_leveller.core.load import forecast
from osc_leveller.core.load import guard
from osc_leveller.core.load import scoring
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.rules import n_plus_one
from osc_leveller.core.run import executor

PREFIX = 'openstack_leveller_'
GIB = 2 ** 30
# The previous file is read up to this size; ours are a few KiB.
MAX_PREVIOUS = 1 << 20

# status label of each executor status (label values stay snake case).
STATUSES = {
    executor.DONE: 'done', executor.FAILED: 'failed',
    executor.TIMED_OUT: 'timed_out', executor.ABORTED: 'aborted',
    executor.SKIPPED: 'skipped', executor.NOT_STARTED: 'not_started',
    executor.STARTED: 'started'}  # a dry run writes no metrics
# The reason classes of skipped and not started moves, from the code their
# reason carries (filters.Refusal): the re-checks' and the executor's own
# codes are their classes (core/rules/checks.py, core/run/executor.py); a rule's
# refusal falls in its rule's class, a new rule's too, so that the label
# values stay this fixed list.
# The re-checks' own reason classes, then those each kind of plan declares
# (core/planning/kinds.py).
_SKIPPED = ('server_gone', 'server_moved', 'destination_gone', 'no_gain',
            'exchange_stopped') + tuple(dict.fromkeys(
                code for kind in kinds.BY_NAME.values() for code in kind.codes))
_RULES = {'cooldown': 'cooldown', n_plus_one.RULE.code: 'n_plus_one'}
_NOT_STARTED = ('batch_limit', 'earlier_failure', 'not_waited',
                'cloud_unreadable', 'journal_unwritable', 'interrupted')
REASONS = {
    'done': ('migrated',),
    'failed': ('migration_failed',),
    'timed_out': ('timeout',),
    'aborted': ('aborted',),
    'started': ('not_waited',),
    'skipped': _SKIPPED + ('cooldown', 'n_plus_one', 'destination_refused',
                           'server_not_movable'),
    'not_started': _NOT_STARTED + ('other',),
}


def labels_of(result):
    """(status, reason class) of an executor Result: both from fixed lists."""
    status = STATUSES.get(result.status, 'other')
    code = getattr(result.reason, 'code', None)
    if status == 'skipped':
        if code in _SKIPPED:
            return status, code
        if code in _RULES:
            return status, _RULES[code]
        rule = getattr(result.reason, 'rule', None)
        if rule is not None and rule.destination:
            return status, 'destination_refused'
        return status, 'server_not_movable'
    if status == 'not_started':
        return status, code if code in _NOT_STARTED else 'other'
    return status, REASONS.get(status, ('other',))[0]


@dataclasses.dataclass
class Record:
    """What one run did, filled in as it goes."""
    command: str  # apply or evacuate
    started: float  # seconds since the epoch
    results: list = dataclasses.field(default_factory=list)
    # The run's first read of the cloud and its planner options: the
    # imbalance before and after is scored on them only when the file is
    # written (a run without a metrics file does not pay for it).
    snapshot: object = None
    options: object = None
    # The hypervisors the imbalance covers: those in service after the run
    # (None: the usable ones of the first read).
    hosts: tuple = None
    # The guard's findings (guard.Finding) on the run's read; when it
    # found the metrics plausible, that read's time, else None; and the
    # previous file's last plausible run, kept until one is.
    implausible: list = dataclasses.field(default_factory=list)
    plausible_at: float = None
    previous_plausible: float = None

    def examined(self, findings, taken_at):
        """The guard's findings on the run's read of the cloud, whose
        figures are of taken_at."""
        self.implausible = list(findings)
        self.plausible_at = taken_at if guard.plausible(findings) else None

    @property
    def last_plausible(self):
        """When a run last found the metrics plausible, or None."""
        if self.plausible_at is not None:
            return self.plausible_at
        return self.previous_plausible

    def read(self, snapshot, options, hosts=None):
        """The run's first read of the cloud, and the hypervisors whose
        imbalance counts (None: the usable ones)."""
        self.snapshot, self.options = snapshot, options
        self.hosts = None if hosts is None else tuple(hosts)

    def forecast(self):
        """[(domain, {figure: skill.Skill})] of the forecast the run's
        first read measured, or []."""
        if self.snapshot is None:
            return []
        return sorted((forecast.skills(self.snapshot, self.options.by_model)
                       or {}).items())

    def imbalance(self):
        """[(domain, before, after)], or [] before the cloud was read."""
        if self.snapshot is None:
            return []
        return imbalance(self.snapshot, self.options, [
            r.move for r in self.results if r.status == executor.DONE],
            self.hosts)


def imbalance(snapshot, options, done, hosts=None):
    """[(domain, before, after)] of every balancing domain of hosts (None:
    the usable hypervisors), after: with the moves done applied to the
    first read (scored as score and plan score, without the forecast)."""
    state = context.Context(snapshot, options, context.NOW).new_state()
    by_model = options.by_model
    usable = [h.name for h in snapshot.hypervisors if h.usable] \
        if hosts is None else [h for h in hosts if snapshot.hypervisor(h)]
    domains = {name: scoring.domain_of(snapshot.hypervisor(name), by_model)
               for name in usable}
    before = scoring.domain_stats({h: state.score(h) for h in usable},
                                  domains)
    for move in done:
        if snapshot.server(move.server_id) is not None and \
                move.destination in domains:
            state.apply(move.server_id, move.destination)
    after = scoring.domain_stats({h: state.score(h) for h in usable},
                                 domains)
    return [(b.domain, b.imbalance, a.imbalance)
            for b, a in zip(before, after)]


def exposition(record, exit_code, now, last_success):
    """The text of the metrics file: HELP, TYPE and samples of each metric.

    last_success: when a run of this command last exited 0 (seconds since
    the epoch), this one's end if it did, or None if none is known.
    """
    if exit_code == 0:
        last_success = now
    command = {'command': record.command}
    counts = {}
    for result in record.results:
        key = labels_of(result)
        counts[key] = counts.get(key, 0) + 1
    moved = sum(r.move.ram_gb for r in record.results
                if r.status == executor.DONE) * GIB
    domains = record.imbalance()
    families = [
        ('last_run_timestamp_seconds',
         'When the last run ended, seconds since the epoch',
         [(command, now)]),
        ('last_success_timestamp_seconds',
         'When a run last exited 0, seconds since the epoch (kept from the '
         'previous file while runs fail)',
         [(command, last_success)] if last_success is not None else []),
        ('last_run_exit_code',
         'Exit code of the last run (0 done, 1 error before any move, 3 '
         'some moves failed, servers left or the run stopped part-way, 4 '
         'refused, 5 refused by the maintenance windows, 6 every move of '
         'the plan skipped, 130 interrupted, 143 terminated)',
         [(command, exit_code)]),
        ('last_run_duration_seconds', 'How long the last run took',
         [(command, max(0.0, now - record.started))]),
        ('last_run_moves',
         'Moves of the last run by status and reason class',
         [(dict(command, status=s, reason=r), n)
          for (s, r), n in sorted(counts.items())]),
        ('last_run_migrated_bytes',
         'RAM of the servers the last run moved (what live migration '
         'copies at least)', [(command, moved)]),
        ('last_run_imbalance_before',
         'Imbalance of each balancing domain when the last run read the '
         'cloud (standard deviation of hypervisor scores)',
         [(dict(command, domain=d), b) for d, b, _ in domains]),
        ('last_run_imbalance_after',
         'Imbalance of each balancing domain with the last run\'s moves '
         'done',
         [(dict(command, domain=d), a) for d, _, a in domains]),
    ]
    skills = record.forecast()
    families += [
        ('last_run_forecast_weight',
         'The forecast\'s weight in the load the last run planned on, per '
         'balancing domain and figure, as its history earned it '
         '(prometheus.forecast_days)',
         [(dict(command, domain=d, figure=f), s.weight)
          for d, figures in skills for f, s in figures.items()]),
        ('last_run_forecast_error',
         'Root mean square error of each predictor of the period ahead on '
         'the domain\'s history, from the domain\'s mean: now, the '
         'forecast (ahead), the load that lasted, and the blend used',
         [(dict(command, domain=d, figure=f, predictor=p), value)
          for d, figures in skills for f, s in figures.items()
          for p, value in (('now', s.now), ('ahead', s.ahead),
                           ('lasting', s.lasting), ('blend', s.blend))
          if value is not None]),
        ('last_run_implausible_metrics',
         'Balancing domains whose metrics the last run found implausible, '
         'by the check that found it (apply: no move planned there; '
         'evacuate: destinations there from Placement allocations)',
         [(dict(command, domain=f.domain, reason=f.check), 1)
          for f in record.implausible]),
        ('last_plausible_timestamp_seconds',
         'When a run last found the metrics plausible, seconds since the '
         'epoch: the next run compares with Prometheus\' figures of then '
         '(kept from the previous file while the guard holds)',
         [(command, record.last_plausible)]
         if record.last_plausible is not None else []),
    ]
    registry = prometheus_client.CollectorRegistry()
    registry.register(_Families(families))
    return prometheus_client.generate_latest(registry).decode('utf-8')


class _Families:
    """A collector of [(name, help, [(labels, value)])] as gauges.

    Every value must be a finite number: a NaN or an infinity in the file
    would be a figure that means nothing, so it is refused before writing.
    """

    def __init__(self, families):
        self.families = families

    def collect(self):
        for name, help_text, samples in self.families:
            names = list(samples[0][0]) if samples else []
            family = prometheus_client.core.GaugeMetricFamily(
                PREFIX + name, help_text, labels=names)
            for labels, value in samples:
                if not math.isfinite(value):
                    raise ValueError('not a finite number: %r' % value)
                family.add_metric([str(labels[n]) for n in names], value)
            yield family


def _sample(family):
    return re.compile(
        r'^%s%s\{command="([a-z]+)"\} '
        r'([0-9]+(?:\.[0-9]+)?(?:e\+?[0-9]+)?)$' % (PREFIX, family),
        re.MULTILINE)


_SUCCESS = _sample('last_success_timestamp_seconds')
_PLAUSIBLE = _sample('last_plausible_timestamp_seconds')


def last_success(text, command, now):
    """When the previous file says a run of command last succeeded, or None.

    The file is untrusted (anyone who can write the directory may have
    written it): only one strict sample line counts, its value a finite
    time not after now; anything else means no success known.
    """
    return _last(_SUCCESS, text, command, now)


def last_plausible(text, command, now):
    """When the previous file says a run of command last found the
    metrics plausible, or None; read as strictly as last_success."""
    return _last(_PLAUSIBLE, text, command, now)


def _last(sample, text, command, now):
    found = None
    for name, value in sample.findall(text[:MAX_PREVIOUS]):
        if name != command:
            continue
        try:
            seconds = float(value)
        except ValueError:
            return None
        if not math.isfinite(seconds) or seconds < 0 or seconds > now:
            return None
        if found is not None:
            return None  # twice: not a file we wrote
        found = seconds
    return found
