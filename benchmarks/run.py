"""Plan speed and quality, side by side with the peers, on one input.

For each generated cluster (benchmarks/generate.py) this runs, on the same
file in the same run:

- osc-leveller's planner, in a fresh process per cluster so its peak memory
  is its own: load time, plan time (median of --repeat), moves, GiB moved;
  once with the default --max-moves 25 (one cron run), once levelling
  fully (--max-moves 100000: the threshold or min-gain ends it), and once
  fully with --move-cost 1000000 (moves ranked by effect alone, whatever
  their size: the fewest moves);
- the man-group Load Leveller rule (../shared/reference/peers.md): hottest
  host, a random ACTIVE server on it, the lowest-score host of its AZ that
  fits, one move at a time until its trigger is off (capped);
- OpenStack Watcher's workload_stabilization (cpu+ram), through
  ../shared/bench/watcher_baseline when its venv exists, with its defaults
  and with one audit per AZ; after each, osc-leveller limited to half of
  Watcher's moves (--max-moves, --move-cost 1000000), with whether it reaches
  the imbalance Watcher's plan claims (the issue's target).

Every plan is scored the same way: the standard deviation of host CPU and
RAM utilisation (sum of util x size / host size) within each balancing
domain (AZ x CPU model), averaged over the domains, with all of a plan's
moves counted as done. Every move is also checked, in order, against
osc-leveller's filters (core/rules/filters.py): the moves Nova would refuse are
counted by reason.

    python benchmarks/run.py --hosts 100 --servers 2000 [--seed 1]
        [--baselines leveller,mangroup,watcher] [--repeat 5] [--json FILE]
"""

import argparse
import collections
import dataclasses
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from benchmarks import stamp  # noqa: E402
from osc_leveller.core.load import state as state_mod  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import planner  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.rules import policy  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402

WATCHER = os.path.join(HERE, '..', '..', 'shared', 'bench',
                       'watcher_baseline')
WATCHER_PY = os.path.expanduser('~/.cache/watcher-baseline-venv/bin/python')
FULL = 100000  # --max-moves for a full levelling run
MANGROUP_CAP = 5000  # the original loops forever; stop it somewhere
DEFAULT_COST = opts.PlannerOptions.move_cost_gb
FEWEST = 1e6  # --move-cost that ranks by effect alone: the fewest moves


def leveller_child(path, repeat, max_moves, move_cost):
    """In a fresh process: load and plan; the figures as a dict."""
    started = time.perf_counter()
    snap = snapshot_io.load(path)
    load_s = time.perf_counter() - started
    options = opts.PlannerOptions(max_moves=max_moves,
                                  move_cost_gb=move_cost)
    times, plan = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        plan = planner.make_plan(snap, options)
        times.append(time.perf_counter() - started)
    return {'load_s': load_s, 'plan_s': statistics.median(times),
            'plan_runs_s': times,
            'peak_mb': resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            'moves': [(m.server_id, m.destination) for m in plan.moves],
            'score_imbalance': [plan.imbalance_before, plan.imbalance_after]}


def run_leveller(path, repeat, max_moves, move_cost=DEFAULT_COST):
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), '--child', path,
         '--repeat', str(repeat), '--max-moves', str(max_moves),
         '--move-cost', str(move_cost)],
        capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def utilisation(cluster, placement):
    """{host: (cpu, ram)} the way the Watcher harness computes it."""
    hyps = {h['name']: h for h in cluster['hypervisors']}
    load = {name: [0.0, 0.0] for name in hyps}
    for s in cluster['servers']:
        host = load[placement[s['id']]]
        host[0] += s.get('cpu_util', 0.0) * s['vcpus']
        host[1] += s.get('mem_util', 0.0) * s['memory_mb']
    return {name: (cpu / hyps[name]['vcpus'], ram / hyps[name]['memory_mb'])
            for name, (cpu, ram) in load.items()}


def imbalance(cluster, moves):
    """Per-domain std of CPU and RAM utilisation, averaged; and overall."""
    placement = {s['id']: s['host'] for s in cluster['servers']}
    for server_id, destination in moves:
        placement[server_id] = destination
    util = utilisation(cluster, placement)
    domains = collections.defaultdict(list)
    for h in cluster['hypervisors']:
        if h.get('status', 'enabled') == 'enabled' and \
                h.get('state', 'up') == 'up':
            domains[(h.get('az'), h.get('cpu_model'))].append(util[h['name']])
    per = [d for d in domains.values() if len(d) > 1]
    everything = [u for d in domains.values() for u in d]
    return {
        'cpu': statistics.mean(statistics.pstdev(u[0] for u in d)
                               for d in per),
        'ram': statistics.mean(statistics.pstdev(u[1] for u in d)
                               for d in per),
        'cpu_all_hosts': statistics.pstdev(u[0] for u in everything),
        'ram_all_hosts': statistics.pstdev(u[1] for u in everything)}


def infeasible(snap, moves):
    """Moves our filters refuse, replayed in order: {reason kind: count}."""
    options = dataclasses.replace(opts.PlannerOptions(), cooldown_hours=0.0)
    rules = filters.Rules(snap, options)
    state = state_mod.new_state(snap, options.weights)
    refused = collections.Counter()
    for server_id, destination in moves:
        server = snap.server(server_id)
        reason = policy.BALANCE.why_not_to(
            server, snap.hypervisor(destination), state, rules)
        if reason:
            refused[_kind(reason)] += 1
        state.apply(server_id, destination)
    return dict(refused)


def _kind(reason):
    text = reason.split(':')[0]
    for word in ('availability zone', 'CPU', 'anti-affinity', 'affinity',
                 'full', 'ceiling', 'max_unit', 'status'):
        if word in reason:
            return word
    return text[:40]


def mangroup(cluster, seed, w_cpu=0.4, w_mem=2.0):
    """The man-group Load Leveller rule, run on the model until it stops.

    syn = w_cpu * cpu + w_mem * mem; it acts while the hottest host's syn is
    at least 1.5 and 10 % above the coolest; it moves a random ACTIVE server
    of the hottest host to the lowest-syn enabled host of the same AZ where
    mem + server RAM / host RAM stays <= 0.95.
    """
    rng = random.Random(seed)
    hyps = {h['name']: h for h in cluster['hypervisors']
            if h.get('status', 'enabled') == 'enabled'}
    placement = {s['id']: s['host'] for s in cluster['servers']}
    servers = {s['id']: s for s in cluster['servers']}
    util = {name: list(u) for name, u in utilisation(
        cluster, placement).items() if name in hyps}
    on = collections.defaultdict(list)
    for s in cluster['servers']:
        if s.get('status', 'ACTIVE') == 'ACTIVE':
            on[s['host']].append(s['id'])
    moves, stopped = [], 'trigger off'

    def syn(name):
        return w_cpu * util[name][0] + w_mem * util[name][1]

    while True:
        ranked = sorted(util, key=syn)
        hot, cold = ranked[-1], ranked[0]
        low = syn(cold)
        if syn(hot) < 1.5 or (low > 0 and syn(hot) / low - 1 < 0.1):
            break
        if len(moves) >= MANGROUP_CAP:
            stopped = 'capped at %d moves' % MANGROUP_CAP
            break
        if not on[hot]:
            stopped = 'hottest host has no ACTIVE server'
            break
        sid = rng.choice(on[hot])
        s = servers[sid]
        fits = [n for n in ranked if n != hot
                and hyps[n].get('az') == hyps[hot].get('az')
                and util[n][1] + s['memory_mb'] / hyps[n]['memory_mb']
                <= 0.95]
        if not fits:
            stopped = 'no destination fits'
            break
        dest = fits[0]
        cpu = s.get('cpu_util', 0.0) * s['vcpus']
        ram = s.get('mem_util', 0.0) * s['memory_mb']
        util[hot][0] -= cpu / hyps[hot]['vcpus']
        util[hot][1] -= ram / hyps[hot]['memory_mb']
        util[dest][0] += cpu / hyps[dest]['vcpus']
        util[dest][1] += ram / hyps[dest]['memory_mb']
        on[hot].remove(sid)
        on[dest].append(sid)
        moves.append((sid, dest))
    return moves, stopped


def watcher(path, cluster, per_az, timeout):
    """Watcher workload_stabilization (cpu+ram): moves, seconds, status."""
    scopes = [[az] for az in sorted({h.get('az') for h in
                                     cluster['hypervisors']})] \
        if per_az else [[]]
    moves, seconds, status = [], 0.0, 'ok'
    for scope in scopes:
        cmd = [WATCHER_PY, os.path.join(WATCHER, 'run_watcher.py'),
               '--strategy', 'workload_stabilization', '--cluster', path,
               '--param',
               'metrics=["instance_cpu_usage","instance_ram_usage"]',
               '--seed', '0', '--timeout', str(timeout)]
        for az in scope:
            cmd += ['--az', az]
        result = subprocess.run(cmd, capture_output=True, text=True)
        try:
            out = json.loads(result.stdout)
        except ValueError:
            return [], seconds, 'error: %s' % result.stderr.strip()[-200:]
        seconds += out.get('wall_time_s', 0.0)
        if out.get('status') != 'ok':
            status = out.get('status')
        moves += [(m['server'], m['destination'])
                  for m in out.get('migrations', [])]
    return moves, seconds, status


def row(name, cluster, snap, moves, **extra):
    gib = sum(s['memory_mb'] for s in cluster['servers']
              if s['id'] in {sid for sid, _ in moves}) / 1024.0
    return dict(planner=name, moves=len(moves), moved_gib=round(gib),
                after=imbalance(cluster, moves),
                refused=infeasible(snap, moves), **extra)


def bench(hosts, servers, seed, baselines, repeat, watcher_timeout):
    cluster = generate.generate(hosts, servers, seed)
    with tempfile.NamedTemporaryFile('w', suffix='.json',
                                     delete=False) as f:
        json.dump(cluster, f)
        path = f.name
    try:
        snap = snapshot_io.load(path)
        result = {'hosts': hosts, 'servers': len(cluster['servers']),
                  'seed': seed, 'before': imbalance(cluster, []), 'rows': []}
        if 'leveller' in baselines:
            for label, max_moves, cost in (
                    ('osc-leveller (25 moves)', 25, DEFAULT_COST),
                    ('osc-leveller (full)', FULL, DEFAULT_COST),
                    ('osc-leveller (full, fewest)', FULL, FEWEST)):
                figures = run_leveller(path, repeat, max_moves, cost)
                moves = figures.pop('moves')
                result['rows'].append(row(label, cluster, snap, moves,
                                          seconds=figures['plan_s'],
                                          **figures))
        if 'mangroup' in baselines:
            started = time.perf_counter()
            moves, stopped = mangroup(cluster, seed)
            result['rows'].append(row(
                'man-group rule', cluster, snap, moves,
                seconds=time.perf_counter() - started, note=stopped))
        if 'watcher' in baselines:
            if not os.path.exists(WATCHER_PY):
                result['notes'] = ['Watcher skipped: no venv at %s (run '
                                   'bash ../shared/bench/watcher_baseline/'
                                   'setup.sh)' % WATCHER_PY]
            else:
                for label, per_az in (('Watcher WS', False),
                                      ('Watcher WS per AZ', True)):
                    moves, seconds, status = watcher(path, cluster, per_az,
                                                     watcher_timeout)
                    result['rows'].append(row(label, cluster, snap, moves,
                                              seconds=seconds, note=status))
                    if 'leveller' in baselines and len(moves) >= 2:
                        result['rows'].append(half_of(
                            label, result['rows'][-1], path, cluster, snap))
        return result
    finally:
        os.unlink(path)


def half_of(label, theirs, path, cluster, snap):
    """osc-leveller with half Watcher's moves (--max-moves, fewest-moves
    cost), and whether it beats the imbalance Watcher's plan claims."""
    figures = run_leveller(path, 1, theirs['moves'] // 2, FEWEST)
    moves = figures.pop('moves')
    mine = row('osc-leveller (1/2 %s)' % label, cluster, snap, moves,
               seconds=figures['plan_s'], **figures)
    met = all(mine['after'][d] <= theirs['after'][d] for d in ('cpu', 'ram'))
    mine['target_met'] = met
    mine['note'] = 'target %s: CPU %.3f vs %.3f, RAM %.3f vs %.3f' % (
        'met' if met else 'NOT met', mine['after']['cpu'],
        theirs['after']['cpu'], mine['after']['ram'], theirs['after']['ram'])
    return mine


def table(result):
    rows = [(r['planner'], '%d' % r['moves'], '%d' % r['moved_gib'],
             '%.3f' % r['after']['cpu'], '%.3f' % r['after']['ram'],
             '%d' % sum(r['refused'].values()), '%.2f' % r['seconds'],
             '%.0f' % r['peak_mb'] if 'peak_mb' in r else '-',
             '; '.join(filter(None, [r.get('note'), ', '.join(
                 '%s %d' % kv for kv in sorted(r['refused'].items()))])))
            for r in result['rows']]
    return '\n'.join([
        '%d hosts / %d servers (seed %d): CPU std %.3f, RAM std %.3f per '
        'domain' % (result['hosts'], result['servers'], result['seed'],
                    result['before']['cpu'], result['before']['ram']),
        tabulate.tabulate(rows, ('planner', 'moves', 'GiB', 'CPU std',
                                 'RAM std', 'refused', 'time s', 'peak MB',
                                 'note'),
                          tablefmt='github', disable_numparse=True)]
        + result.get('notes', []))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, action='append')
    parser.add_argument('--servers', type=int, action='append')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--baselines', default='leveller,mangroup,watcher')
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--watcher-timeout', type=float, default=600)
    parser.add_argument('--json', metavar='FILE')
    parser.add_argument('--child', help=argparse.SUPPRESS)
    parser.add_argument('--max-moves', type=int, help=argparse.SUPPRESS)
    parser.add_argument('--move-cost', type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(leveller_child(args.child, args.repeat,
                                        args.max_moves, args.move_cost)))
        return 0
    if not args.hosts or len(args.hosts) != len(args.servers or []):
        parser.error('give --hosts and --servers, as many of each')
    results = []
    for hosts, servers in zip(args.hosts, args.servers):
        result = bench(hosts, servers, args.seed,
                       args.baselines.split(','), args.repeat,
                       args.watcher_timeout)
        print(table(result) + '\n', flush=True)
        results.append(result)
    if args.json:
        stamp.write(args.json, stamp.stamped(results=results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
