"""The guard against implausible metrics: domains whose load cannot be true.

An exporter that restarts, a scrape that fails for half the fleet or a
relabelling mistake can make hypervisors look idle or saturated all at
once, and a plan made on that is a mass migration (in Xen Orchestra, #8965,
a host wrongly reported with 0 CPUs caused one). Before any move is planned
from measured load, each balancing domain goes through these checks, on
what the snapshot's ``guard`` facts say (cloud/measure.py reads them):

``capacity``
    a hypervisor whose node_exporter shows no CPUs or no memory, or a CPU
    count or memory further from Placement's totals than
    ``guard.capacity_tolerance``: the series are another machine's, or the
    exporter is broken.
``coverage_drop``
    the share of the domain's hypervisors with metrics, or the number of
    its servers with CPU series of their own, fell by ``guard.coverage_drop``
    or more since the reference time; or Prometheus did not answer at all
    (every hypervisor would be scored from allocations at once).
``load_jump``
    more than half of the domain's hypervisors moved their CPU, or their
    RAM, the same way by more than ``guard.load_jump`` since the reference
    time.
``impossible_load``
    a server read busier than its vCPUs, or the servers of a hypervisor
    busier than it reads itself, by more than ``guard.impossible_load``.

Each finding holds its domain: no move is planned there, and a Held line
says why. Moves an operator asks for (evacuate, a target placement) still
go, placed on Placement allocations in that domain (without_metrics). A
hypervisor whose own series are missing or outside 0..1 is not held: it is
scored from allocations, as before (cloud/measure.py); if many go at once,
coverage_drop sees it.
"""

import collections
import dataclasses

from osc_leveller.core.load import scoring
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.settings import config

CHECKS = config.GUARD_CHECKS
# Where the reference time came from.
METRICS_FILE = 'metrics_file'  # the last run that found the metrics plausible
SINCE = 'since'  # guard.since ago
# The checks that compare with the reference time: while one of them holds
# a domain, the metrics file keeps the reference it compared with.
COMPARING = ('coverage_drop', 'load_jump')
SHOWN = 3  # hypervisors or servers named in one finding
# A migration's destination reads its arrived server at once and its own
# CPU over the window: a hypervisor with one in or out this recently (in
# windows) is not held for its servers being busier than itself.
SETTLE_WINDOWS = 2
DEFAULT_WINDOW = 300.0


@dataclasses.dataclass(frozen=True)
class Limits:
    """The guard's settings (guard.*)."""

    checks: frozenset = frozenset(CHECKS)
    capacity_tolerance: float = 0.25
    coverage_drop: float = 0.2
    load_jump: float = 0.4
    impossible_load: float = 0.1


def limits_of(settings):
    """Limits from a core.config.Settings."""
    return Limits(checks=frozenset(settings['guard.checks']),
                  capacity_tolerance=settings['guard.capacity_tolerance'],
                  coverage_drop=settings['guard.coverage_drop'],
                  load_jump=settings['guard.load_jump'],
                  impossible_load=settings['guard.impossible_load'])


@dataclasses.dataclass(frozen=True)
class Reference:
    """The time Prometheus' figures are compared with, and why that one."""

    time: float  # seconds since the epoch
    source: str  # METRICS_FILE or SINCE


def reference(last_plausible, now, since):
    """The Reference of a run: the last plausible run the metrics file
    records (seconds since the epoch, or None), else since seconds before
    now; None without either."""
    if last_plausible is not None and last_plausible < now:
        return Reference(last_plausible, METRICS_FILE)
    if since and since > 0:
        return Reference(now - since, SINCE)
    return None


@dataclasses.dataclass(frozen=True)
class Finding:
    domain: str
    check: str  # one of CHECKS: the metrics file's reason
    why: str


def examine(snapshot, hosts, limits, by_model=True):
    """[Finding] of the balancing domains of hosts (hypervisor names),
    by domain and in the order of CHECKS."""
    facts = snapshot.guard or _NO_FACTS
    domains = collections.defaultdict(list)
    for name in hosts:
        hyp = snapshot.hypervisor(name)
        domains[scoring.domain_of(hyp, by_model)].append(hyp)
    findings = []
    for domain, hyps in sorted(domains.items()):
        hyps.sort(key=lambda h: h.name)
        for check in CHECKS:
            if check in limits.checks:
                why = _CHECKS[check](snapshot, hyps, facts, limits)
                if why:
                    findings.append(Finding(domain, check, why))
    return findings


def reasons(findings):
    """{domain: 'check: why; check: why'} of findings."""
    by_domain = collections.defaultdict(list)
    for finding in findings:
        by_domain[finding.domain].append('%s: %s' % (finding.check,
                                                     finding.why))
    return {domain: '; '.join(parts) for domain, parts in by_domain.items()}


def held(findings):
    """{domain: the Held line's reason} of findings, for the planner."""
    return {domain: 'implausible metrics, nothing planned: %s' % why
            for domain, why in reasons(findings).items()}


def notes(snapshot, limits):
    """What keeps the comparing checks from comparing, one line or none."""
    facts = snapshot.guard
    if facts is None or facts.reference is None or \
            not limits.checks & set(COMPARING):
        return []
    if any(f.before is not None for f in facts.hypervisors.values()) or \
            not any(h.metrics for h in snapshot.hypervisors):
        return []
    return ['Prometheus has no figures of %s (a Prometheus younger than '
            'that, or past its retention): coverage and load jumps not '
            'compared' % _when(facts)]


def plausible(findings):
    """The run may be the next one's reference: no comparing check held."""
    return not any(f.check in COMPARING for f in findings)


def without_metrics(snapshot, domains, by_model=True):
    """The snapshot with the hypervisors of these domains scored from
    Placement allocations: what moves an operator asks for are placed on
    there."""
    if not domains:
        return snapshot
    return dataclasses.replace(snapshot, hypervisors=tuple(
        dataclasses.replace(h, metrics=None)
        if h.metrics is not None and
        scoring.domain_of(h, by_model) in domains else h
        for h in snapshot.hypervisors))


_NO_FACTS = model.GuardFacts()


def _facts(facts, hyp):
    return facts.hypervisors.get(hyp.name)


def _when(facts):
    return snapshot_io.format_time(facts.reference)


def _listed(items):
    shown = ', '.join(items[:SHOWN])
    return shown + (', and %d more' % (len(items) - SHOWN)
                    if len(items) > SHOWN else '')


def _far(shown, placement, tolerance):
    return min(shown, placement) < (1.0 - tolerance) * max(shown, placement)


def _capacity(snapshot, hyps, facts, limits):
    wrong = []
    for hyp in hyps:
        found = _facts(facts, hyp)
        if found is None:
            continue
        if found.cpus == 0:
            wrong.append('%s shows no CPUs (Placement: %d)' % (
                hyp.name, hyp.threads))
        elif found.cpus is not None and hyp.threads and _far(
                found.cpus, hyp.threads, limits.capacity_tolerance):
            wrong.append('%s shows %d CPUs, Placement %d' % (
                hyp.name, found.cpus, hyp.threads))
        if found.memory_mb is not None and found.memory_mb <= 0:
            wrong.append('%s shows no memory (Placement: %.0f GiB)' % (
                hyp.name, hyp.memory_mb / 1024.0))
        elif found.memory_mb is not None and hyp.memory_mb and _far(
                found.memory_mb, hyp.memory_mb, limits.capacity_tolerance):
            wrong.append('%s shows %.0f GiB of memory, Placement %.0f GiB'
                         % (hyp.name, found.memory_mb / 1024.0,
                            hyp.memory_mb / 1024.0))
    if wrong:
        return 'node_exporter of %s' % _listed(wrong)
    return None


def _measured(hyp):
    return hyp.metrics is not None and hyp.metrics.cpu is not None and \
        hyp.metrics.ram is not None


def _coverage(snapshot, hyps, facts, limits):
    if facts.unreachable:
        return 'no hypervisor has metrics: %s' % facts.unreachable
    if facts.reference is None:
        return None
    then = [h for h in hyps if (_facts(facts, h) or _NO_HOST).before]
    if not then:
        return None  # nothing at that time at all: notes() says so
    parts = []
    lost = [h.name for h in then if not _measured(h)]
    now = sum(1 for h in hyps if _measured(h))
    if len(then) > now and \
            len(then) - now >= limits.coverage_drop * len(hyps) - 1e-9:
        parts.append('%d of %d hypervisors have metrics, %d had at %s '
                     '(lost: %s)' % (now, len(hyps), len(then),
                                     _when(facts), _listed(lost)))
    counts = [f.servers_before for f in (_facts(facts, h) for h in hyps)
              if f is not None and f.servers_before is not None]
    if counts:
        had = sum(counts)
        own = sum(1 for h in hyps for s in snapshot.servers_on(h.name)
                  if s.usage.cpu is not None)
        if had > own and had - own >= limits.coverage_drop * had - 1e-9:
            parts.append('%d servers have CPU series of their own, %d had '
                         'at %s' % (own, had, _when(facts)))
    return '; '.join(parts) or None


def _jump(snapshot, hyps, facts, limits):
    if facts.reference is None or len(hyps) < 2:
        return None
    parts = []
    for metric in ('cpu', 'ram'):
        for sign, verb in ((1, 'rose'), (-1, 'fell')):
            moved = []
            for hyp in hyps:
                found = _facts(facts, hyp)
                if found is None or found.before is None or \
                        hyp.metrics is None:
                    continue
                then = getattr(found.before, metric)
                now = getattr(hyp.metrics, metric)
                if then is not None and now is not None and \
                        (now - then) * sign > limits.load_jump:
                    moved.append('%s %.2f -> %.2f' % (hyp.name, then, now))
            if 2 * len(moved) > len(hyps):
                parts.append('%d of %d hypervisors\' %s %s by more than %g '
                             'since %s (%s)' % (
                                 len(moved), len(hyps), metric.upper(),
                                 verb, limits.load_jump, _when(facts),
                                 _listed(moved)))
    return '; '.join(parts) or None


def _impossible(snapshot, hyps, facts, limits):
    slack = limits.impossible_load
    settle = SETTLE_WINDOWS * (facts.window or DEFAULT_WINDOW)
    wrong = []
    for hyp in hyps:
        found = _facts(facts, hyp)
        if found is not None and found.busiest_cpu is not None and \
                found.busiest_cpu > 1.0 + slack:
            server = snapshot.server(found.busiest_server)
            wrong.append('server %s on %s reads %.2f times its vCPUs busy'
                         % (server.label if server else found.busiest_server,
                            hyp.name, found.busiest_cpu))
        # Guests run on the hypervisor's CPUs: together they cannot be
        # busier than node_exporter reads them all (Placement may count
        # fewer CPUs: cpu_shared_set, cpu_dedicated_set).
        cpus = found.cpus if found is not None else None
        if not cpus or hyp.metrics is None or hyp.metrics.cpu is None or \
                _moved_lately(snapshot, hyp, settle):
            continue
        cores = sum(s.usage.cpu * scoring.cpu_allocated(s.resources)
                    for s in snapshot.servers_on(hyp.name)
                    if s.usage.cpu is not None)
        busy = hyp.metrics.cpu * cpus
        if cores > busy + slack * cpus:
            wrong.append('the servers on %s read %.1f cores busy, its '
                         'node_exporter %.1f of its %d' % (
                             hyp.name, cores, busy, cpus))
    if wrong:
        return _listed(wrong)
    return None


def _moved_lately(snapshot, hyp, seconds):
    """A migration into or out of hyp is in progress or ended less than
    seconds before the snapshot."""
    for migration in snapshot.migrations:
        if hyp.host not in (migration.source_compute,
                            migration.dest_compute):
            continue
        ended = migration.updated_at or migration.created_at
        if migration.in_progress or (
                ended is not None and snapshot.taken_at - ended < seconds):
            return True
    return False


_NO_HOST = model.HostFacts()
_CHECKS = {'capacity': _capacity, 'coverage_drop': _coverage,
           'load_jump': _jump, 'impossible_load': _impossible}
