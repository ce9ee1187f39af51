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

from osc_leveller.core import derived
from osc_leveller.core import lasting


def view(snap):
    """The snapshot with every figure that has a forecast blended with it;
    itself when it carries none."""
    if snap.forecast is None:
        return snap
    weight = snap.forecast.weight
    return derived.derive(snap, 'forecast', lambda now, ahead: (
        1.0 - weight) * now + weight * ahead)


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
