"""Load to come: plan on a blend of now and this time of day on past days.

A snapshot read with ``prometheus.forecast_days`` carries, next to each
measured figure, its average over the period ahead (``forecast_ahead``, the
cron interval) at this time of day on each of the past days. Moves live in
the next interval, not in this minute: where load follows the day (office
hours, nightly batches), the load that comes is partly known, and a move
that the next hour would undo is not worth its copy.

Each server's figure becomes (1 - weight) x now + weight x its forecast. A
hypervisor's load changes by what its servers' blend changes it by: its
own history is of the servers it had then. A hypervisor with no server
forecast blends its own figures. Applied before core/lasting.py's view, so
a server counts the lower of its blend and the load that lasted.
"""

import collections
import dataclasses

from osc_leveller.core import lasting
from osc_leveller.core import model
from osc_leveller.core import scoring

_NESTED = ('lasting', 'forecast')


def view(snap):
    """The snapshot with every figure that has a forecast blended with it;
    itself when it carries none."""
    if snap.forecast is None:
        return snap
    weight = snap.forecast.weight
    servers = []
    change = collections.defaultdict(lambda: [0.0, 0.0])  # threads, MiB
    for server in snap.servers:
        usage = server.usage
        if usage.forecast is not None:
            blended = _blend(usage, weight)
            delta = change[server.hypervisor]
            if usage.cpu is not None:
                delta[0] += (blended.cpu - usage.cpu) * \
                    scoring.cpu_allocated(server.resources)
            if usage.ram is not None:
                delta[1] += (blended.ram - usage.ram) * \
                    server.resources.get(model.MEMORY_MB, 0)
            server = dataclasses.replace(server, usage=blended)
        servers.append(server)
    hypervisors = []
    for hyp in snap.hypervisors:
        if hyp.metrics is not None:
            delta = change.get(hyp.name)
            hyp = dataclasses.replace(hyp, metrics=_blend(
                hyp.metrics, weight) if delta is None else
                _changed(hyp, weight, delta))
        hypervisors.append(hyp)
    return dataclasses.replace(snap, hypervisors=tuple(hypervisors),
                               servers=tuple(servers))


def _changed(hyp, weight, delta):
    """The hypervisor's metrics with its servers' change (threads, MiB);
    its pressure blended with its own forecast."""
    metrics = _blend(hyp.metrics, weight)
    cpu, ram = hyp.metrics.cpu, hyp.metrics.ram
    if cpu is not None and hyp.threads:
        cpu = min(1.0, max(0.0, cpu + delta[0] / hyp.threads))
    if ram is not None and hyp.memory_mb:
        ram = min(1.0, max(0.0, ram + delta[1] / hyp.memory_mb))
    return dataclasses.replace(metrics, cpu=cpu, ram=ram)


def _blend(figures, weight):
    """The figures blended with their forecast where both are known; no
    forecast figures left, the lasting ones kept."""
    ahead = figures.forecast
    if ahead is None:
        return figures
    values = {}
    for field in dataclasses.fields(figures):
        if field.name in _NESTED:
            continue
        now = getattr(figures, field.name)
        then = getattr(ahead, field.name)
        values[field.name] = now if now is None or then is None \
            else (1.0 - weight) * now + weight * then
    return type(figures)(lasting=figures.lasting, **values)


def planned(snap):
    """The load a plan is made on: the forecast blend, then the load that
    lasted."""
    return lasting.view(view(snap))


def held(now_stats, planned_stats, threshold, snap):
    """{domain: why it is left alone} for the domains above the threshold
    now that are below it on the load planned on. *_stats:
    scoring.DomainStats."""
    if snap.forecast is None:
        return lasting.momentary(now_stats, planned_stats, threshold,
                                 snap.lasting)
    then = {s.domain: s for s in planned_stats}
    how = 'now blended %g %% with the %s ahead on the last %s' % (
        100 * snap.forecast.weight, snap.forecast.ahead,
        'day' if snap.forecast.days == 1 else '%d days' % snap.forecast.days)
    if snap.lasting:
        how += ', and the load that lasted the last %s' % snap.lasting
    return {stat.domain: 'imbalance %.3f now but %.3f on the load to come '
            '(%s): left alone' % (stat.imbalance, then[stat.domain].imbalance,
                                  how)
            for stat in now_stats if stat.domain in then and
            stat.imbalance >= threshold > then[stat.domain].imbalance}
