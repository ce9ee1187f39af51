"""Freeing hypervisors: hosts freed, GiB moved and moves Nova would refuse.

On generated clusters (benchmarks/generate.py, a light fill so that hosts
can be freed), side by side in one run:

- leveller: ``plan --free-hosts`` (core/planning/freeing.py), when this
  checkout has it;
- watcher: Watcher's ``vm_workload_consolidation``, run offline by the
  harness in ../shared/bench/watcher_baseline (when its venv exists), as
  one audit of the whole cloud and as one audit per AZ (the harness's
  ``--az`` scope), the way operators keep servers in their zones;
- ffd: a first-fit-decreasing packer, what a home-made script does: the
  emptiest hypervisors first, each server (largest first) onto the fullest
  other hypervisor with room under Placement's capacity, a host freed only
  when all its servers fit;
- milp: the exact optimum (scipy.optimize.milp, HiGHS) on clusters of at
  most --milp-hosts hypervisors: the most hypervisors freed with at most as
  many moves as the leveller made, then the fewest GiB (no gap allowed),
  under the rules a plan must keep (below); and the most with any number
  of moves.

Every plan is replayed, in order, through the leveller's rules (plan
--free-hosts' policy: Nova's rules, locks, opt-outs, every destination rule
including capacity, server groups, the ceiling and saturation; a stopped
server migrates cold, as evacuate --cold-migrate-stopped moves it). A move
that one of Nova's rules refuses is infeasible; one that only the
leveller's own rules (filters.CHOICES: keeping a server in its zone, soft
groups as hard ...) or its load limits (the ceiling, CPU saturation)
refuse is counted apart: Nova would run it.
A hypervisor is freed when it hosted servers and hosts none after the plan:
as planned, as Nova would run it (the moves Nova refuses not made), and
with every rule kept (the moves any rule refuses not made: what the
leveller's apply would run of the plan).

The MILP keeps: who may move at all (stopped servers cold), the static
destination rules (AZ, CPU, aggregates, traits, service, ...), Placement
capacity per resource class, hard anti-affinity (at most one member per
hypervisor) and affinity (members stay), the ceiling on the host score.
Its plan is replayed like the others.

With --cpu-compatibility features, every generated CPU model offers the
features of the older ones (GENERATIONS), and the leveller's CPU rule
compares features, as for a cloud of host-model guests: a move to a newer
model runs, to an older one Nova refuses.

    python benchmarks/consolidation.py --hosts 20 --servers 200 --seed 1 \\
        [--hosts 1000 --servers 20000 ...] [--cpu-compatibility features] \\
        [--json F]
"""

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from scipy import optimize
from scipy import sparse
import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from benchmarks import stamp  # noqa: E402
from osc_leveller.core.load import state as state_mod  # noqa: E402
from osc_leveller.core.model import model  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.model import watcher_cluster  # noqa: E402
from osc_leveller.core.planning import context  # noqa: E402
from osc_leveller.core.planning import paths  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.rules import policy  # noqa: E402
from osc_leveller.core.settings import config  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402

WATCHER = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'shared',
                       'bench', 'watcher_baseline')
WATCHER_PY = os.path.expanduser('~/.cache/watcher-baseline-venv/bin/python')
RESOURCES = (model.VCPU, model.MEMORY_MB, model.DISK_GB)
# Refusals of Nova's rules: the move would fail (not the leveller's own).
LOAD_LIMITS = frozenset(('ceiling', 'saturation'))
NOVA_REFUSES = frozenset(r.code for r in filters.RULES) - filters.CHOICES \
    - LOAD_LIMITS
EVERY_RULE = frozenset(r.code for r in filters.RULES) | {None}


# --cpu-compatibility features: each generation offers the CPU features of
# the ones before it, as Nova's libvirt driver compares a host-model
# guest's CPU with the destination's (a move to a newer model runs, to an
# older one fails). The generator gives models only.
GENERATIONS = ('Skylake-Server', 'Cascadelake-Server', 'Icelake-Server',
               'SapphireRapids')
CPU_COMPATIBILITY = [config.CPU_MODEL]  # set by --cpu-compatibility


def options():
    return dataclasses.replace(opts.PlannerOptions(), cooldown_hours=0.0,
                               cpu_compatibility=CPU_COMPATIBILITY[0])


def load(cluster, path):
    """The snapshot of the generated cluster; with features, each
    hypervisor's CPU features those of its generation and the older."""
    if CPU_COMPATIBILITY[0] != config.CPU_FEATURES:
        return snapshot_io.load(path)
    document = watcher_cluster.to_snapshot_document(cluster, path)
    for hyp in document['hypervisors']:
        model_ = hyp['cpu']['model']
        known = GENERATIONS.index(model_) + 1 if model_ in GENERATIONS else 0
        hyp['cpu'] = dict(hyp['cpu'], arch='x86_64', features=[
            'gen%d' % i for i in range(known)])
    return snapshot_io.parse(dict(document, format=snapshot_io.FORMAT), path)


def freed(snap, moves):
    """The hypervisors that hosted servers and host none after moves."""
    where = {s.id: s.hypervisor for s in snap.servers}
    for sid, dest in moves:
        where[sid] = dest
    before = {s.hypervisor for s in snap.servers}
    return sorted(before - set(where.values()))


def infeasible(snap, moves, skip=NOVA_REFUSES):
    """({rule code: moves the leveller's rules refuse}, the moves made),
    replayed in order; a move refused by a rule of skip is not made (by
    default Nova's rules: the moves Nova would make)."""
    ctx = context.Context(snap, options())
    state, refused, made = ctx.new_state(), collections.Counter(), []
    for sid, dest in moves:
        server = ctx.snapshot.server(sid)
        who = policy.DRAIN_COLD if server.status in \
            model.STOPPED_STATUSES else policy.FREE_HOSTS
        reason = who.why_not_to(
            server, ctx.snapshot.hypervisor(dest), state, ctx.rules)
        code = getattr(reason, 'code', None) if reason else None
        if reason:
            refused[code or str(reason)[:30]] += 1
        if not reason or code not in skip:
            state.apply(sid, dest)
            made.append((sid, dest))
    return dict(refused), made


def gib(snap, moves):
    return sum(snap.server(sid).ram_gb for sid, _ in moves)


# --- the packers ------------------------------------------------------------

def ffd(snap):
    """First-fit decreasing under Placement capacity alone: moves."""
    state = state_mod.new_state(snap)
    hosts = [h for h in snap.hypervisors if h.usable]
    on = collections.defaultdict(list)
    for server in snap.servers:
        on[server.hypervisor].append(server)

    def used(name):
        return state.usage(name, model.MEMORY_MB)
    moves, gone = [], set()
    for source in sorted(hosts, key=lambda h: (used(h.name), h.name)):
        if not on[source.name]:
            continue
        trial, planned = state.copy(), []
        for server in sorted(on[source.name],
                             key=lambda s: (-s.ram_gb, s.id)):
            fullest = sorted(hosts, key=lambda h: (
                -trial.usage(h.name, model.MEMORY_MB), h.name))
            dest = next((h for h in fullest if h.name != source.name and
                         h.name not in gone and _fits(server, h, trial)),
                        None)
            if dest is None:
                break
            trial.apply(server.id, dest.name)
            planned.append((server, dest.name))
        else:
            state = trial
            gone.add(source.name)
            for server, dest in planned:
                moves.append((server.id, dest))
                on[dest].append(server)
            on[source.name] = []
    return moves


def _fits(server, hyp, state):
    for rc, amount in server.resources.items():
        inv = hyp.inventories.get(rc)
        if inv is None or state.usage(hyp.name, rc) + amount > inv.capacity:
            return False
    return True


def watcher(path, azs=(None,)):
    """Watcher's vm_workload_consolidation, one audit per scope (None: the
    whole cloud; an AZ: that zone alone, as operators scope audits):
    (moves, seconds, status)."""
    if not os.path.exists(WATCHER_PY):
        return None, 0.0, 'no venv (bash %s/setup.sh)' % WATCHER
    moves, seconds, statuses = [], 0.0, set()
    for az in azs:
        argv = [WATCHER_PY, os.path.join(WATCHER, 'run_watcher.py'),
                '--strategy', 'vm_workload_consolidation', '--cluster', path]
        if az is not None:
            argv += ['--az', az]
        result = subprocess.run(argv, capture_output=True, text=True)
        try:
            out = json.loads(result.stdout)
        except ValueError:
            return None, 0.0, 'error: %s' % result.stderr.strip()[-300:]
        moves += [(m['server'], m['destination'])
                  for m in out.get('migrations', ())]
        seconds += out.get('wall_time_s', 0.0)
        statuses.add(out.get('status'))
    return moves, seconds, ', '.join(sorted(map(str, statuses)))


def leveller(snap, cold):
    """plan --free-hosts (--cold-migrate-stopped when cold), when this
    checkout has it: (moves, seconds)."""
    try:
        from osc_leveller.core.planning import freeing
    except ImportError:
        return None, 0.0
    started = time.process_time()
    try:
        plan = freeing.make_plan(snap, options(), cold=cold)
    except TypeError:  # a checkout before --cold-migrate-stopped
        if cold:
            return None, 0.0
        plan = freeing.make_plan(snap, options())
    return ([(m.server_id, m.destination) for m in plan.moves],
            time.process_time() - started)


def leveller_as_many(snap, target):
    """plan --free-hosts N --cold-migrate-stopped with the smallest N (a
    domain) that frees, as Nova runs it, at least target hypervisors in
    all: (moves, seconds, N), or (None, 0.0, None) when no N does."""
    try:
        from osc_leveller.core.planning import freeing
        freeing.free_hosts(snap, options(), 1, cold=True)
    except (ImportError, TypeError):
        return None, 0.0, None
    started, tried = time.process_time(), {}

    def run(count):
        if count not in tried:
            found = freeing.free_hosts(snap, options(), count, cold=True)
            moves = [(m.server_id, m.destination) for m in found.moves]
            tried[count] = moves, len(freed(snap, infeasible(snap, moves)[1]))
        return tried[count]

    low, high = 1, len(snap.hypervisors)
    if run(high)[1] < target:
        return None, 0.0, None
    while low < high:  # the freed count grows with N
        middle = (low + high) // 2
        if run(middle)[1] >= target:
            high = middle
        else:
            low = middle + 1
    return run(low)[0], time.process_time() - started, low


def milp(snap, max_moves, seconds=120.0):
    """The most hypervisors freed with at most max_moves moves, then the
    fewest GiB: (moves, status)."""
    ctx = context.Context(snap, options())
    snapshot, rules, state = ctx.snapshot, ctx.rules, ctx.new_state()
    hosts = [h for h in snapshot.hypervisors if h.usable]
    index = {h.name: i for i, h in enumerate(hosts)}
    servers = [s for s in snapshot.servers if s.hypervisor in index]
    may = {s.id: policy.FREE_HOSTS_COLD.why_not(s, rules) is None and
           not _in_affinity(s, rules) for s in servers}
    pairs = []  # (server index, host index)
    for i, server in enumerate(servers):
        home = index[server.hypervisor]
        pairs.append((i, home))
        if not may[server.id]:
            continue
        for h in hosts:
            if h.name != server.hypervisor and filters.first_reason(
                    paths.STATIC_FILTERS, server, h, state, rules) is None:
                pairs.append((i, index[h.name]))
    n_x, n_y = len(pairs), len(hosts)
    # Variables: x (server on host), then y (host still used).
    cost = np.zeros(n_x + n_y)
    cost[n_x:] = 1.0  # fewest hosts used ...
    for k, (i, h) in enumerate(pairs):  # ... then the fewest GiB moved
        if index[servers[i].hypervisor] != h:
            cost[k] = servers[i].ram_gb * 1e-6
    rows, cols, vals, lower, upper = [], [], [], [], []

    def constraint(terms, low, high):
        row = len(lower)
        for col, val in terms:
            rows.append(row)
            cols.append(col)
            vals.append(val)
        lower.append(low)
        upper.append(high)
    by_server = collections.defaultdict(list)
    by_host = collections.defaultdict(list)
    for k, (i, h) in enumerate(pairs):
        by_server[i].append(k)
        by_host[h].append(k)
    for i in range(len(servers)):  # each server on one host
        constraint([(k, 1.0) for k in by_server[i]], 1, 1)
    for h, hyp in enumerate(hosts):
        for rc in RESOURCES:
            inv = hyp.inventories.get(rc)
            need = [(k, float(servers[pairs[k][0]].resources.get(rc, 0)))
                    for k in by_host[h]]
            need = [(k, v) for k, v in need if v]
            if not need:
                continue
            capacity = inv.capacity if inv is not None else 0.0
            # Over capacity already: its current use is the limit.
            capacity = max(capacity, sum(
                v for k, v in need if index[servers[pairs[k][0]]
                                            .hypervisor] == h))
            constraint(need + [(n_x + h, -capacity)], -np.inf, 0)
        for k in by_host[h]:  # a host with a server is used
            constraint([(k, 1.0), (n_x + h, -1.0)], -np.inf, 0)
        # The ceiling: the host score with its servers' parts.
        parts = [(k, sum(state.load_model.server_parts(
            servers[pairs[k][0]].id, hyp.name))) for k in by_host[h]]
        base = state.score(hyp.name) - sum(
            v for k, v in parts if index[servers[pairs[k][0]].hypervisor]
            == h)
        limit = max(ctx.options.ceiling, state.score(hyp.name)) - base
        constraint(parts, -np.inf, limit)
    for group in snapshot.server_groups:  # hard anti-affinity
        if group.policy != 'anti-affinity':
            continue
        members = {i for i, s in enumerate(servers)
                   if s.id in rules.group_members.get(group.id, ())}
        for h in range(n_y):
            terms = [(k, 1.0) for k in by_host[h] if pairs[k][0] in members]
            if len(terms) > 1:
                constraint(terms, -np.inf, 1)
    moved = [(k, 1.0) for k, (i, h) in enumerate(pairs)
             if index[servers[i].hypervisor] != h]
    constraint(moved, -np.inf, max_moves)
    matrix = sparse.csr_array((vals, (rows, cols)),
                              shape=(len(lower), n_x + n_y))
    result = optimize.milp(
        cost, integrality=np.ones(n_x + n_y),
        bounds=optimize.Bounds(0, 1),
        constraints=optimize.LinearConstraint(matrix, lower, upper),
        options={'time_limit': seconds, 'mip_rel_gap': 0.0})
    if result.x is None:
        return None, result.message
    moves = [(servers[i].id, hosts[h].name)
             for k, (i, h) in enumerate(pairs)
             if result.x[k] > 0.5 and index[servers[i].hypervisor] != h]
    return moves, 'optimal' if result.status == 0 else result.message


def _in_affinity(server, rules):
    return any(g.policy == 'affinity' for g in rules.groups_of.get(
        server.id, ()))


# --- the run ----------------------------------------------------------------

def row(name, snap, moves, seconds, status=''):
    if moves is None:
        return dict(planner=name, status=status)
    refused, made = infeasible(snap, moves)
    _, kept = infeasible(snap, moves, EVERY_RULE)
    return dict(planner=name, freed=len(freed(snap, moves)),
                run=len(freed(snap, made)), kept=len(freed(snap, kept)),
                moves=len(moves), gib=round(gib(snap, moves)),
                infeasible=sum(n for code, n in refused.items()
                               if code in NOVA_REFUSES),
                own=sum(n for code, n in refused.items()
                        if code not in NOVA_REFUSES),
                refused=refused,
                seconds=round(seconds, 2), status=status or 'ok')


def bench(hosts, servers, seed, milp_hosts):
    cluster = generate.generate(hosts, servers, seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'c.json')
        with open(path, 'w') as stream:
            json.dump(cluster, stream)
        snap = load(cluster, path)
        rows = []
        ours, seconds = leveller(snap, cold=True)
        rows.append(row('leveller --cold-migrate-stopped', snap, ours,
                        seconds, '' if ours is not None
                        else 'not in this checkout'))
        moves, seconds = leveller(snap, cold=False)
        rows.append(row('leveller, stopped servers stay', snap, moves,
                        seconds, '' if moves is not None
                        else 'not in this checkout'))
        moves, seconds, status = watcher(path)
        rows.append(row('watcher', snap, moves, seconds, status))
        # The leveller freeing as many as Watcher's audit as Nova runs it,
        # and one more: the GiB the same result costs, and a better one.
        if moves is not None:
            freed_by_watcher = rows[-1]['run']
            for name, target in (('as many as', freed_by_watcher),
                                 ('one more than', freed_by_watcher + 1)):
                same, seconds, count = leveller_as_many(snap, target)
                rows.append(row('leveller --free-hosts N, %s watcher' % name,
                                snap, same, seconds, 'N=%s' % count
                                if same is not None else 'no N'))
        azs = sorted({h['az'] for h in cluster['hypervisors']})
        moves, seconds, status = watcher(path, azs)
        rows.append(row('watcher, an audit per AZ', snap, moves, seconds,
                        status))
        started = time.process_time()
        moves = ffd(snap)
        rows.append(row('ffd', snap, moves, time.process_time() - started))
        if hosts <= milp_hosts:
            limit = len(ours) if ours is not None else len(moves)
            started = time.process_time()
            moves, status = milp(snap, limit)
            rows.append(row('milp (at most %d moves)' % limit, snap, moves,
                            time.process_time() - started, status))
            started = time.process_time()
            moves, status = milp(snap, len(snap.servers))
            rows.append(row('milp (any number of moves)', snap, moves,
                            time.process_time() - started, status))
    return {'hosts': hosts, 'servers': len(cluster['servers']),
            'seed': seed, 'rows': rows}


COLUMNS = ('planner', 'freed', 'run', 'kept', 'moves', 'gib', 'infeasible',
           'own', 'seconds', 'status')


def table(results):
    lines = []
    for result in results:
        lines.append('\n%d hypervisors, %d servers, seed %d\n' % (
            result['hosts'], result['servers'], result['seed']))
        lines.append(tabulate.tabulate(
            [[r.get(c, '') for c in COLUMNS] for r in result['rows']],
            headers=('planner', 'hosts freed', 'freed as Nova runs it',
                     'freed, every rule kept', 'moves', 'GiB moved',
                     'Nova refuses', 'the leveller\'s own rules and load '
                     'limits refuse',
                     'seconds', 'status'),
            tablefmt='github', disable_numparse=True))
    return '\n'.join(lines)


def _by_n(row):
    """A cell of the leveller with --free-hosts N: freed (GiB, N=...), or
    why there is none ('no N'; '-' where the run had no such row)."""
    if row and 'freed' in row:
        return '%d (%d GiB, %s)' % (row['run'], row['gib'], row['status'])
    return row['status'] if row else '-'


def summary(run, tablefmt='github'):
    """One line per cluster of a run's results (--json), as the benchmark
    pages show it: freed as Nova runs it / freed with every rule kept."""
    lines = []
    for result in run['results']:
        rows = {r['planner'].split(' (')[0]: r for r in result['rows']}
        cold, stay = rows['leveller --cold-migrate-stopped'], \
            rows['leveller, stopped servers stay']
        same = rows.get('leveller --free-hosts N, as many as watcher')
        more = rows.get('leveller --free-hosts N, one more than watcher')
        one, per_az, ffd_ = rows['watcher'], \
            rows['watcher, an audit per AZ'], rows['ffd']
        # as Nova runs it, * where HiGHS stopped at its time limit (not
        # proven optimal)
        optimum = ['%d%s' % (r['run'], '' if r['status'] == 'optimal'
                             else '*') for r in result['rows']
                   if r['planner'].startswith('milp') and 'run' in r]
        lines.append([
            '%d / %d s%d' % (result['hosts'], result['servers'],
                             result['seed']),
            '%d (%d GiB, %.2f s)' % (cold['freed'], cold['gib'],
                                     cold['seconds']),
            '%d (%d GiB)' % (stay['freed'], stay['gib']),
            '%d / %d (%d GiB, %d refused)' % (
                one['run'], one['kept'], one['gib'], one['infeasible']),
            _by_n(same), _by_n(more),
            '%d / %d (%d GiB, %d refused)' % (
                per_az['run'], per_az['kept'], per_az['gib'],
                per_az['infeasible']),
            '%d / %d (%d GiB)' % (ffd_['run'], ffd_['kept'], ffd_['gib']),
            ' / '.join(map(str, optimum)) or '-'])
    return tabulate.tabulate(lines, headers=(
        'cluster', 'leveller --cold-migrate-stopped',
        'leveller, stopped stay', 'Watcher, one audit',
        'leveller, as many as Watcher', 'leveller, one more than Watcher',
        'Watcher, an audit per AZ',
        'first-fit decreasing', 'MILP: K moves / any'),
        tablefmt=tablefmt, disable_numparse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, action='append')
    parser.add_argument('--servers', type=int, action='append')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--milp-hosts', type=int, default=40,
                        help='the MILP runs on clusters of at most this '
                             'many hypervisors')
    parser.add_argument('--cpu-compatibility', default=config.CPU_MODEL,
                        choices=(config.CPU_MODEL, config.CPU_FEATURES),
                        help='the leveller\'s setting; features: each CPU '
                             'generation offers the features of the older')
    parser.add_argument('--json')
    parser.add_argument('--summary', metavar='JSON',
                        help='print the summary tables of a results file '
                             '(benchmarks/results/consolidation.json) and '
                             'exit')
    parser.add_argument('--format', default='github',
                        help='the summary\'s table format (rst: the docs)')
    args = parser.parse_args(argv)
    if args.summary:
        with open(args.summary) as stream:
            document = json.load(stream)
        for name, run in document.get('runs', {'': document}).items():
            print('%s\n%s\n' % (name, summary(run, args.format)))
        return 0
    CPU_COMPATIBILITY[0] = args.cpu_compatibility
    sizes = list(zip(args.hosts or [20], args.servers or [200]))
    results = [bench(h, s, args.seed, args.milp_hosts) for h, s in sizes]
    print(table(results))
    if args.json:
        stamp.write(args.json, stamp.stamped(
            cpu_compatibility=args.cpu_compatibility, results=results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
