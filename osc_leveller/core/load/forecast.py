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
forecast blends its own figures. Applied before core/load/lasting.py's view, so
a server counts the lower of its blend and the load that lasted.

The weight is earned: each domain's, for CPU and for RAM, is the one that
did best on the cloud's own history (core/load/skill.py), at most
forecast_weight. A snapshot without skill (of before it was measured)
blends at forecast_weight everywhere.
"""

from osc_leveller.core.load import derived
from osc_leveller.core.load import lasting
from osc_leveller.core.load import scoring
from osc_leveller.core.load import skill as skill_mod


def skills(snap, by_model=True):
    """{domain: {figure: skill.Skill}} of the snapshot's forecast, or None
    when it has no forecast or no skill measured."""
    if snap.forecast is None or snap.forecast.skill is None:
        return None
    measured = snap.forecast.skill
    members = {}
    for hyp in snap.hypervisors:
        members.setdefault(scoring.domain_of(hyp, by_model), []).append(
            hyp.name)
    return {domain: {figure: skill_mod.skill(
        [measured[n][figure] for n in names
         if figure in measured.get(n, {})], snap.forecast.weight)
        for figure in skill_mod.FIGURES}
        for domain, names in sorted(members.items())}


def weights_of(snap, by_model=True):
    """{hypervisor: {figure: weight}} the snapshot's forecast is blended
    with, or None without a forecast."""
    if snap.forecast is None:
        return None
    earned = skills(snap, by_model)
    if earned is None:
        fixed = dict.fromkeys(skill_mod.FIGURES, snap.forecast.weight)
        return {hyp.name: fixed for hyp in snap.hypervisors}
    return {hyp.name: {figure: found.weight for figure, found in earned[
        scoring.domain_of(hyp, by_model)].items()}
        for hyp in snap.hypervisors}


def weighing(snap, by_model=True):
    """The domains where the forecast has weight in the load planned on
    (for forecast_target)."""
    weights = weights_of(snap, by_model) or {}
    return {scoring.domain_of(hyp, by_model) for hyp in snap.hypervisors
            if any(weights.get(hyp.name, {}).values())}


def view(snap, by_model=True):
    """The snapshot with every figure that has a forecast blended with it;
    itself when it carries none."""
    weights = weights_of(snap, by_model)
    if weights is None:
        return snap

    def blend(hypervisor, figure, now, ahead):
        weight = weights[hypervisor][skill_mod.FOLLOWS[figure]]
        return (1.0 - weight) * now + weight * ahead
    return derived.derive(snap, 'forecast', blend)


def planned(snap, by_model=True):
    """The load a plan is made on: the forecast blend, then the load that
    lasted."""
    return lasting.view(view(snap, by_model))


def lines(snap, by_model=True):
    """[(domain, what its history says of the forecast)], for stderr and
    --explain; [] without a measured forecast."""
    return [(domain, 'Forecast: %s: %s' % (domain, '; '.join(
        found.describe(figure) for figure, found in figures.items())))
        for domain, figures in (skills(snap, by_model) or {}).items()]


def held(now_stats, planned_stats, threshold, snap, by_model=True):
    """{domain: why it is left alone} for the domains above the threshold
    now that are below it on the load planned on. *_stats:
    scoring.DomainStats."""
    if snap.forecast is None:
        return lasting.momentary(now_stats, planned_stats, threshold,
                                 snap.lasting)
    then = {s.domain: s for s in planned_stats}
    earned = skills(snap, by_model)
    days = 'day' if snap.forecast.days == 1 else \
        '%d days' % snap.forecast.days

    def how(domain):
        if earned is None or domain not in earned:
            text = 'now blended %g %% with the %s ahead on the last %s' % (
                100 * snap.forecast.weight, snap.forecast.ahead, days)
        else:
            text = 'now blended with the %s ahead on the last %s, ' \
                'weights earned on its history: %s' % (
                    snap.forecast.ahead, days, ', '.join(
                        '%s %g %%' % (figure.upper(), 100 * found.weight)
                        for figure, found in earned[domain].items()))
        if snap.lasting:
            text += ', and the load that lasted the last %s' % snap.lasting
        return text
    return {stat.domain: 'imbalance %.3f now but %.3f on the load to come '
            '(%s): left alone' % (stat.imbalance, then[stat.domain].imbalance,
                                  how(stat.domain))
            for stat in now_stats if stat.domain in then and
            stat.imbalance >= threshold > then[stat.domain].imbalance}
