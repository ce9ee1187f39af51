"""The forecast's skill, measured on the cloud's own history.

A forecast from the same hour of past days is right for load that follows
the day and wrong for load that comes in bursts: there this hour's value
predicts the next hour far better. So before the forecast gets any weight,
each predictor of the period ahead is scored on the history Prometheus
keeps, at every step (the period ahead, forecast_ahead) of the last days:

- ``now``: this step's value (what a plan without forecast uses);
- ``ahead``: the mean of the period ahead on past days (the forecast; as
  many of the forecast_days as the history has, at least one);
- ``lasting``: the lower of now and its lasting average, when set.

against what the period ahead then was (``actual``). A plan evens out the
hypervisors of a domain, so what counts is how far each is above or below
the others, not the load that rises and falls everywhere at once (office
hours): each error is taken from the domain's mean at that step.

Each hypervisor keeps its sums of squared errors (model.ForecastErrors), so a domain's
skill is the sum of its hypervisors', whatever the domains are when the
plan is made. The blend (1 - w) x now + w x ahead has the squared error
(1 - w)^2 now + 2w(1 - w) cross + w^2 ahead: its least is at
w = (now - cross) / (now + ahead - 2 cross). The weight used is that, at
most the forecast_weight setting, and 0 unless the forecast alone
predicted better than now: a forecast without skill gets no weight. Even
a small weight matters: the blend is nearer the domain's mean than either
figure, so a domain looks more even than it will be and is levelled less
(on the bursty load of benchmarks/forecast_replay.py, a weight of 0.2 to
0.3 the history earned left the next hour 6 % less even than no
forecast).
"""

import collections
import dataclasses
import math

from osc_leveller.core.model import model

FIGURES = ('cpu', 'ram')  # measured; the other figures follow their own
FOLLOWS = {'cpu': 'cpu', 'cpu_pressure': 'cpu', 'cpu_steal': 'cpu',
           'ram': 'ram', 'ram_pressure': 'ram'}
MIN_POINTS = 12  # steps a domain needs before its skill is trusted
MOST_DAYS = 7  # the history scored: the last forecast_days, at most this


@dataclasses.dataclass
class History:
    """Hypervisors' figures on a grid of `step` seconds; index 0 is the
    read, -1 one step before. {figure: {hypervisor: {index: value}}}."""

    step: float
    now: dict  # the figure at each index
    actual: dict  # its mean over the step before each index
    lasting: dict = None  # its lasting view at each index, if set


@dataclasses.dataclass(frozen=True)
class Skill:
    """A domain's skill for one figure: root mean square errors, the weight
    its history earns, and the weight used (why, when 0)."""

    points: int  # hypervisor-steps scored
    steps: int  # steps of the hypervisor with the most
    now: float
    ahead: float
    lasting: float
    blend: float  # at the weight used
    earned: float  # the least-error weight, before the bound
    weight: float
    why: str = ''

    def describe(self, figure):
        """'CPU error 0.14 against 0.05 for this hour; weight 0 (...)'."""
        if not self.points:
            return '%s: %s; weight 0' % (figure.upper(), self.why)
        text = '%s error %.3f against %.3f for now' % (
            figure.upper(), self.ahead, self.now)
        if self.lasting is not None:
            text += ' (%.3f for the load that lasted)' % self.lasting
        if self.weight:
            text += ', %.3f blended' % self.blend
        text += '; weight %s' % _percent(self.weight)
        if self.why:
            text += ' (%s)' % self.why
        elif self.weight < self.earned:
            text += ' (earned %s, bounded by forecast_weight)' % _percent(
                self.earned)
        return text


def _percent(weight):
    return '0' if weight <= 0 else '%.2f' % weight


def errors(history, domains, days):
    """{hypervisor: {figure: model.ForecastErrors}} over the history's steps.

    domains: {hypervisor: its balancing domain}; days: forecast_days. A
    step counts for a hypervisor where now, actual one step later and the
    same on one or more past days are known, and for two or more
    hypervisors of its domain (one alone has nothing to even out with).
    """
    per_day = 86400.0 / history.step
    found = collections.defaultdict(dict)
    for figure in FIGURES:
        now = history.now.get(figure) or {}
        actual = history.actual.get(figure) or {}
        lasting = (history.lasting or {}).get(figure) if \
            history.lasting is not None else None
        members = collections.defaultdict(list)
        for name in now:
            if name in domains:
                members[domains[name]].append(name)
        for names in members.values():
            sums = _domain_errors(names, now, actual, lasting, per_day, days)
            for name, value in sums.items():
                found[name][figure] = value
    return dict(found)


def _domain_errors(names, now, actual, lasting, per_day, days):
    steps = sorted({i for name in names for i in now[name]})
    sums = {name: [0, 0.0, 0.0, 0.0, 0.0] for name in names}
    for index in steps:
        rows = []  # (name, now, ahead, lasting, actual)
        for name in names:
            row = _predictions(name, index, now, actual, lasting, per_day,
                               days)
            if row is not None:
                rows.append(row)
        if len(rows) < 2:
            continue
        means = [None if rows[0][k] is None else
                 sum(r[k] for r in rows) / len(rows) for k in range(1, 5)]
        for name, *values in rows:
            truth = values[3] - means[3]
            e_now = values[0] - means[0] - truth
            e_ahead = values[1] - means[1] - truth
            total = sums[name]
            total[0] += 1
            total[1] += e_now * e_now
            total[2] += e_ahead * e_ahead
            total[3] += e_now * e_ahead
            if values[2] is not None:
                e_lasting = values[2] - means[2] - truth
                total[4] += e_lasting * e_lasting
    has_lasting = lasting is not None
    return {name: model.ForecastErrors(
        t[0], t[1], t[2], t[3], t[4] if has_lasting else None)
            for name, t in sums.items() if t[0]}


def _predictions(name, index, now, actual, lasting, per_day, days):
    """(name, now, ahead, lasting view, actual) at index, or None."""
    value = now[name].get(index)
    came = actual.get(name, {}).get(index + 1)
    if value is None or came is None:
        return None
    past = [actual[name].get(index + 1 - int(round(day * per_day)))
            for day in range(1, days + 1)]
    past = [p for p in past if p is not None]
    if not past:
        return None
    view = None
    if lasting is not None:
        average = lasting.get(name, {}).get(index)
        view = value if average is None else min(value, average)
    return name, value, sum(past) / len(past), view, came


def skill(errors_of, limit):
    """The Skill of a domain from its hypervisors' ForecastErrors (a list, maybe
    empty); limit: forecast_weight, the most the forecast may weigh."""
    total = sum(errors_of, model.ForecastErrors())
    steps = max((e.points for e in errors_of), default=0)
    if not total.points:
        return Skill(0, 0, None, None, None, None, 0.0, 0.0,
                     'no history to measure the forecast on')
    n = total.points
    earned = 0.0
    spread = total.now + total.ahead - 2 * total.cross
    if spread > 0:
        earned = min(1.0, max(0.0, (total.now - total.cross) / spread))
    why = ''
    if steps < MIN_POINTS:
        why = 'only %d steps of history, %d needed' % (steps, MIN_POINTS)
    elif total.ahead >= total.now:
        why = 'no better than now'
    weight = 0.0 if why else min(earned, limit)
    blend = ((1 - weight) ** 2 * total.now + 2 * weight * (1 - weight) *
             total.cross + weight ** 2 * total.ahead) / n
    return Skill(n, steps, _rms(total.now, n), _rms(total.ahead, n),
                 None if total.lasting is None else _rms(total.lasting, n),
                 _rms(max(0.0, blend) * n, n), round(earned, 4),
                 round(weight, 4), why)


def _rms(total, n):
    return round(math.sqrt(max(0.0, total) / n), 4)
