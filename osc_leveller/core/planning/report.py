"""What the visual report shows, as data: per balancing domain, each
hypervisor's CPU, RAM and score before and after a plan, the plan's moves
with their reasons, and what refused them or holds the domain back.

Everything comes from the plan and the snapshot it is drawn on: the one it
was made on (``plan --report``), or for a saved plan (``report PLAN_FILE``)
the snapshot given or the cloud now, which of_file() checks the moves
against. The state after is the snapshot with the plan's moves applied, in
order. The current state (``score --report``) has no after. A domain of
more than FOLD_ABOVE hypervisors shows its hottest, its coolest and those
its moves touch (fold()). v1/report.py renders it.
"""

import dataclasses

from osc_leveller.core.load import scoring
from osc_leveller.core.model import errors
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.settings import options as opts

# A domain of more hypervisors than this shows ENDS of the hottest and of
# the coolest, and every one a move touches; the rest are folded. Forty
# rows keep a domain's charts about one screen high.
FOLD_ABOVE = 40
ENDS = 10


class ReportError(errors.LevellerError, ValueError):
    """A saved plan whose moves cannot be drawn on the snapshot given."""


@dataclasses.dataclass(frozen=True)
class Load:
    """A hypervisor's figures: utilisation (1.0 = full; measured CPU demand
    may be above) and score; None where it has no such figure."""
    cpu: float
    ram: float
    score: float


@dataclasses.dataclass(frozen=True)
class Host:
    hypervisor: str
    label: str  # the short name, when that is unique in its domain
    before: Load
    after: Load = None  # None: the current state only
    servers: tuple = ()  # (before, after) server counts; after None: now


@dataclasses.dataclass(frozen=True)
class Refusal:
    server: str
    hypervisor: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Domain:
    name: str
    imbalance_before: float
    imbalance_after: float  # None: the current state only
    mean_before: float
    mean_after: float
    hosts: tuple  # Host, hottest first
    moves: tuple  # plan.Move, in execution order
    refused: tuple  # Refusal, one per move whose better destination refused
    held: str = ''  # why it stays above the threshold with no move
    n_plus_one: str = ''  # keep_n_plus_one: the loss not absorbed at first
    freed: tuple = ()  # plan --free-hosts: Freed, in the order freed
    not_freed: tuple = ()  # plan --free-hosts: NotFreed


@dataclasses.dataclass(frozen=True)
class Freed:
    hypervisor: str
    servers: tuple  # labels of the servers it held
    ram_gb: float


@dataclasses.dataclass(frozen=True)
class NotFreed:
    hypervisor: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Report:
    kind: str  # 'plan' or 'score'
    snapshot_taken_at: float
    snapshot_source: dict
    threshold: float
    target: float
    ceiling: float
    imbalance_before: float
    imbalance_after: float  # None: the current state only
    note: str
    domains: tuple  # Domain, the most imbalanced first
    # What the plan was asked for beyond levelling (its kind's heading and
    # goal), and whether its kind charts server counts.
    goal: str = ''
    counts: bool = False
    # A saved plan drawn on another snapshot than its own: that one's time,
    # and whether its placement, capacity or rules differ (fingerprint).
    drawn_at: float = None
    changed: bool = False

    @property
    def moves(self):
        return sum(len(d.moves) for d in self.domains)


def of_plan(snapshot, plan, options):
    """The report of plan, made on snapshot with options (PlannerOptions)."""
    by_model = options.by_model
    planned = context.Context(snapshot, options)  # what was planned on
    before = planned.new_state()
    after = before.copy()
    counts = {h.name: [len(snapshot.servers_on(h.name))] * 2
              for h in snapshot.hypervisors}
    for move in plan.moves:
        after.apply(move.server_id, move.destination)
        counts[move.source][1] -= 1
        counts[move.destination][1] += 1
    members = _members(planned.snapshot, by_model,
                       lambda h: filters.in_scope(h, options))
    means = (_means(before, members), _means(after, members))
    domains = []
    for entry in plan.domains:
        name = entry['domain']
        domains.append(dataclasses.replace(_domain(
            name, members.get(name, ()), (before, after),
            (entry['before'], entry['after']),
            (means[0].get(name), means[1].get(name)),
            tuple(m for m in plan.moves if m.domain == name),
            entry.get('held', ''), entry.get('n_plus_one', ''), counts),
            freed=tuple(Freed(f['hypervisor'], tuple(f['servers']),
                              f['ram_gb']) for f in entry.get('freed', ())),
            not_freed=tuple(NotFreed(n['hypervisor'], n['reason'])
                            for n in entry.get('not_freed', ()))))
    kind = kinds.of(plan.kind)
    return Report(
        kind='plan', snapshot_taken_at=plan.snapshot_taken_at,
        snapshot_source=dict(plan.snapshot_source),
        threshold=options.threshold,
        target=opts.target_of(options.threshold, options.target),
        ceiling=options.ceiling,
        imbalance_before=plan.imbalance_before,
        imbalance_after=plan.imbalance_after, note=plan.note,
        domains=_hottest_first(domains),
        goal='%s: %s' % (kind.heading, kind.goal(plan.options))
        if kind.goal else '', counts=kind.counts)


def of_file(snapshot, plan):
    """The report of a saved plan drawn on snapshot, with the options the
    plan file records. ReportError when a move's server or hypervisors
    are not in the snapshot, or the server is not on the move's source
    when its turn comes; OptionsError when the options are wrong."""
    options = opts.from_document(plan.options)
    _check_moves(snapshot, plan)
    report = of_plan(snapshot, plan, options)
    changed = plan.fingerprint != plan_mod.fingerprint(snapshot)
    if not changed and snapshot.taken_at == plan.snapshot_taken_at:
        return report
    return dataclasses.replace(report, drawn_at=snapshot.taken_at,
                               changed=changed)


def _check_moves(snapshot, plan):
    where = {}
    for index, move in enumerate(plan.moves):
        server = snapshot.server(move.server_id)
        if server is None:
            raise ReportError('moves[%d]: server %s is not in the snapshot' %
                              (index, errors.name(move.server_id)))
        for end in (move.source, move.destination):
            if snapshot.hypervisor(end) is None:
                raise ReportError(
                    'moves[%d]: hypervisor %s is not in the snapshot' % (
                        index, errors.name(end)))
        now = where.get(move.server_id, server.hypervisor)
        if now != move.source:
            raise ReportError(
                'moves[%d]: server %s is on %s in the snapshot, not on the '
                'move\'s source %s' % (index, errors.name(move.server_id),
                                       errors.name(now),
                                       errors.name(move.source)))
        where[move.server_id] = move.destination


def of_state(snapshot, options):
    """The report of the current state: every domain of usable
    hypervisors, as score shows them, on the load as measured."""
    state = context.Context(snapshot, options, context.NOW).new_state()
    members = _members(snapshot, options.by_model, lambda h: True)
    stats = _stats(state, members)
    domains = [_domain(s.domain, members[s.domain], (state, None),
                       (s.imbalance, None), (s.mean, None), (), '')
               for s in stats]
    return Report(
        kind='score', snapshot_taken_at=snapshot.taken_at,
        snapshot_source=dict(snapshot.source), threshold=options.threshold,
        target=opts.target_of(options.threshold, options.target),
        ceiling=options.ceiling,
        imbalance_before=scoring.pooled_imbalance(stats),
        imbalance_after=None, note='', domains=_hottest_first(domains))


@dataclasses.dataclass(frozen=True)
class Fold:
    shown: tuple  # Host, hottest first
    folded: tuple  # Host, hottest first


def fold(domain):
    """A domain's hypervisors shown and folded: all shown up to
    FOLD_ABOVE; above, the ENDS hottest and coolest (by score before)
    and every one a move, a freed or a not freed names."""
    hosts = domain.hosts
    if len(hosts) <= FOLD_ABOVE:
        return Fold(hosts, ())
    keep = {h.hypervisor for h in hosts[:ENDS] + hosts[-ENDS:]}
    keep.update(end for m in domain.moves for end in (m.source,
                                                      m.destination))
    keep.update(f.hypervisor for f in domain.freed + domain.not_freed)
    return Fold(tuple(h for h in hosts if h.hypervisor in keep),
                tuple(h for h in hosts if h.hypervisor not in keep))


def _members(snapshot, by_model, in_scope):
    """{domain: [hypervisor names]} of the usable hypervisors in scope."""
    members = {}
    for hyp in snapshot.hypervisors:
        if hyp.usable and in_scope(hyp):
            members.setdefault(scoring.domain_of(hyp, by_model), []).append(
                hyp.name)
    return members


def _stats(state, members):
    """The scoring.DomainStats of each domain in state."""
    return scoring.domain_stats(
        {h: state.score(h) for hosts in members.values() for h in hosts},
        {h: name for name, hosts in members.items() for h in hosts})


def _means(state, members):
    return {s.domain: s.mean for s in _stats(state, members)}


def _domain(name, names, states, imbalance, mean, moves, held,
            n_plus_one='', counts=None):
    """states, imbalance, mean: (before, after), after None for the
    current state only; counts: {hypervisor: [servers before, after]}."""
    labels = short_labels(names)
    before, after = states
    hosts = sorted(
        (Host(n, labels[n], _load(before, n),
              _load(after, n) if after is not None else None,
              tuple(counts[n]) if counts else ())
         for n in names), key=lambda h: (-h.before.score, h.hypervisor))
    refused = tuple(Refusal(m.server_name or m.server_id, *m.refused)
                    for m in moves if m.refused)
    return Domain(name=name, imbalance_before=imbalance[0],
                  imbalance_after=imbalance[1], mean_before=mean[0],
                  mean_after=mean[1], hosts=tuple(hosts), moves=moves,
                  refused=refused, held=held, n_plus_one=n_plus_one)


def _load(state, name):
    dims = state.dimensions(name)
    return Load(cpu=dims['cpu'], ram=dims['ram'], score=state.score(name))


def _hottest_first(domains):
    return tuple(sorted(domains, key=lambda d: (-d.imbalance_before,
                                                d.name)))


def short_labels(names):
    """{name: label}: 'cmp-a03' for 'cmp-a03.cloud.example.net' when no
    other name of the group starts the same, else the whole name."""
    short = {n: n.split('.', 1)[0] or n for n in names}
    counts = {}
    for label in short.values():
        counts[label] = counts.get(label, 0) + 1
    return {n: short[n] if counts[short[n]] == 1 else n for n in names}
