"""Load that lasted: plan on it, not on a moment's peak.

A snapshot read with ``prometheus.lasting`` carries, next to each measured
figure, its average over that period. A server's load that lasted is the
lower of the two: a burst of the last minutes counts as far as it held
over the period, a load that has just ended not at all. Planning on it
moves the servers whose load stays, which is what holds the next hour;
a domain whose imbalance is only of the moment is left alone, and says so.

A hypervisor's load that lasted is its load now less the part of its
servers' load that did not last. Its own average would not do: it is of
the servers it had then, and a server that arrived an hour ago would
count for a third of its load over three hours. A hypervisor with no
measured servers takes the lower of now and its own average.
"""

import collections
import dataclasses

from osc_leveller.core import model
from osc_leveller.core import scoring


def view(snap):
    """The snapshot with every measured figure replaced by the load that
    lasted (the lower of now and the period's average); itself when it
    carries no lasting figures."""
    if not snap.lasting:
        return snap
    servers = []
    passed = collections.defaultdict(lambda: [0.0, 0.0])  # threads, MiB
    for server in snap.servers:
        usage = server.usage
        if usage.lasting is not None:
            lasted = _least(usage)
            gone = passed[server.hypervisor]
            if usage.cpu is not None:
                gone[0] += (usage.cpu - lasted.cpu) * \
                    scoring.cpu_allocated(server.resources)
            if usage.ram is not None:
                gone[1] += (usage.ram - lasted.ram) * \
                    server.resources.get(model.MEMORY_MB, 0)
            server = dataclasses.replace(server, usage=lasted)
        servers.append(server)
    hypervisors = []
    for hyp in snap.hypervisors:
        if hyp.metrics is not None:
            gone = passed.get(hyp.name)
            hyp = dataclasses.replace(hyp, metrics=_least(
                hyp.metrics) if gone is None else _less(hyp, gone))
        hypervisors.append(hyp)
    return dataclasses.replace(snap, hypervisors=tuple(hypervisors),
                               servers=tuple(servers))


def _less(hyp, gone):
    """The hypervisor's metrics less its servers' load that did not last
    (threads, MiB); its pressure the lower of now and its average."""
    metrics = _least(hyp.metrics)
    cpu, ram = hyp.metrics.cpu, hyp.metrics.ram
    if cpu is not None and hyp.threads:
        cpu = min(1.0, max(0.0, cpu - gone[0] / hyp.threads))
    if ram is not None and hyp.memory_mb:
        ram = min(1.0, max(0.0, ram - gone[1] / hyp.memory_mb))
    return dataclasses.replace(metrics, cpu=cpu, ram=ram)


def _least(figures):
    """The figures, each the lower of now and its lasting value where both
    are known; no lasting figures left."""
    lasting = figures.lasting
    if lasting is None:
        return figures
    values = {}
    for field in dataclasses.fields(figures):
        if field.name == 'lasting':
            continue
        now = getattr(figures, field.name)
        then = getattr(lasting, field.name)
        values[field.name] = now if now is None or then is None \
            else min(now, then)
    return type(figures)(**values)


def momentary(now_stats, lasting_stats, threshold, period):
    """{domain: why it is left alone} for the domains above the threshold
    now whose load that lasted is below it. *_stats: scoring.DomainStats."""
    then = {s.domain: s for s in lasting_stats}
    held = {}
    for stat in now_stats:
        lasted = then.get(stat.domain)
        if lasted is not None and stat.imbalance >= threshold > \
                lasted.imbalance:
            held[stat.domain] = (
                'imbalance %.3f now but %.3f on the load that lasted the '
                'last %s (the lower of now and its average): not acted on '
                'until it lasts' % (stat.imbalance, lasted.imbalance,
                                    period))
    return held
