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

from osc_leveller.core.load import derived


def view(snap):
    """The snapshot with every measured figure replaced by the load that
    lasted (the lower of now and the period's average); itself when it
    carries no lasting figures."""
    if not snap.lasting:
        return snap
    return derived.derive(snap, 'lasting', _lower)


def _lower(hypervisor, figure, now, lasted):
    return min(now, lasted)


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
