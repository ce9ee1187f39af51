"""The load a plan is made on, derived from the measured figures and one of
their companions in the snapshot (``lasting``, ``forecast``).

A server's figures are combined with its companion's. A hypervisor's own
history is of the servers it had then, so its CPU and RAM change by what
its servers' combination changed them by; its other figures, and all of a
hypervisor with no server companions, are combined with its own.
"""

import collections
import dataclasses
import functools

from osc_leveller.core.load import scoring
from osc_leveller.core.model import model

NESTED = ('lasting', 'forecast')


def derive(snap, key, combine):
    """The snapshot with every figure that has a `key` companion replaced
    by combine(hypervisor, figure, now, companion), hypervisor the name of
    the server's or its own; the companions of that key dropped."""
    servers = []
    change = collections.defaultdict(lambda: [0.0, 0.0])  # threads, MiB
    for server in snap.servers:
        usage = server.usage
        if getattr(usage, key) is not None:
            derived = combined(usage, key, functools.partial(
                combine, server.hypervisor))
            delta = change[server.hypervisor]
            if usage.cpu is not None:
                delta[0] += (derived.cpu - usage.cpu) * \
                    scoring.cpu_allocated(server.resources)
            if usage.ram is not None:
                delta[1] += (derived.ram - usage.ram) * \
                    server.resources.get(model.MEMORY_MB, 0)
            server = dataclasses.replace(server, usage=derived)
        servers.append(server)
    hypervisors = []
    for hyp in snap.hypervisors:
        if hyp.metrics is not None:
            metrics = combined(hyp.metrics, key,
                               functools.partial(combine, hyp.name))
            delta = change.get(hyp.name)
            if delta is not None:
                metrics = dataclasses.replace(
                    metrics,
                    cpu=_shifted(hyp.metrics.cpu, delta[0], hyp.threads),
                    ram=_shifted(hyp.metrics.ram, delta[1], hyp.memory_mb))
            hyp = dataclasses.replace(hyp, metrics=metrics)
        hypervisors.append(hyp)
    return dataclasses.replace(snap, hypervisors=tuple(hypervisors),
                               servers=tuple(servers))


def combined(figures, key, combine):
    """A HostMetrics or ServerUsage with each figure combined with its
    `key` companion where both are known (combine(figure, now,
    companion)); that companion dropped."""
    other = getattr(figures, key)
    if other is None:
        return figures
    values = {}
    for field in dataclasses.fields(figures):
        now = getattr(figures, field.name)
        if field.name in NESTED:
            values[field.name] = None if field.name == key else now
            continue
        then = getattr(other, field.name)
        values[field.name] = now if now is None or then is None \
            else combine(field.name, now, then)
    return type(figures)(**values)


def _shifted(value, delta, size):
    if value is None or not size:
        return value
    return min(1.0, max(0.0, value + delta / size))
