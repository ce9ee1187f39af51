"""The live commands at scale, against tools/scalecloud.

For each size (hypervisors, about 50 servers each; benchmarks/generate.py,
seed 1) a scalecloud serves the cluster with a per-request latency (20 ms)
and at most 64 requests in flight per service, and the ``openstack``
command runs as an operator runs it, in its own process:

- ``leveller snapshot``: a whole read of the cloud; wall time, requests by
  endpoint, the most requests in flight, peak memory;
- ``leveller score`` and ``leveller plan``, end to end, the same way;
- ``leveller apply PLAN`` of the plan made above (25 moves), migrations
  instant and status polled every 0.1 s: requests per move, split into the
  re-check's reads, status polls and the migration calls, and the time
  per move beyond a whole read, ``(apply - snapshot) / moves``.

Times are medians of --repeat runs (apply: one run, it changes the cloud).
--previous DIR runs the commands of another checkout (PYTHONPATH) as a
row of its own, for a comparison in the same run::

    python benchmarks/scale.py --hosts 100 --hosts 1000 --hosts 5000 \\
        --json benchmarks/results/scale.json

On a busy machine rows minutes apart differ by more than a small change
costs: --paired N then also runs snapshot and score of the two versions
in turn against one cloud (the first size), N times each after a warm-up,
and gives wall and CPU seconds (the process's own, user + system) with
their ratios taken pair by pair.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks import generate  # noqa: E402
from benchmarks import stamp  # noqa: E402
from tools.scalecloud import cloud as scale  # noqa: E402

PER_HOST = 50
COMMANDS = ('snapshot', 'score', 'plan')
# Calls of an apply that are not the re-check's reads.
POLLS = (('nova', 'GET', '/v2.1/servers/{id}'),)
ACTIONS = (('nova', 'POST', '/v2.1/servers/{id}/action'),)


def run(argv, env):
    """(wall seconds, stdout, stderr) of one command in its own process."""
    started = time.monotonic()
    process = subprocess.run(argv, env=env, capture_output=True)
    wall = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError('%s failed (%d): %s' % (
            ' '.join(argv), process.returncode,
            process.stderr.decode(errors='replace')[-2000:]))
    return wall, process.stdout, process.stderr


def measured(argv, env, cpu=None):
    """(wall, peak MB, stdout, stderr): /usr/bin/time keeps the child's
    own peak resident memory; cpu, a list, gets its user + system s."""
    with tempfile.NamedTemporaryFile('r') as stats:
        wall, out, err = run(['/usr/bin/time', '-f', '%M %U %S', '-o',
                              stats.name] + argv, env)
        peak, user, system = stats.read().split()[-3:]
    if cpu is not None:
        cpu.append(float(user) + float(system))
    return wall, int(peak) / 1024.0, out, err


def by_endpoint(summary):
    return {'%s %s %s' % (r['service'], r['method'], r['path']): r['requests']
            for r in summary['counts']}


def bench_size(hosts, args, tmp, label, pythonpath):
    path = cluster_file(hosts, args, tmp)
    row = {'version': label, 'hypervisors': hosts,
           'servers': hosts * PER_HOST}
    with scale.ScaleCloud(path, latency=args.latency,
                          concurrency=args.concurrency,
                          bandwidth=None) as cloud:
        row['cloud_load_s'] = round(cloud.load_seconds, 1)
        clouds = cloud.write_clouds_yaml(
            os.path.join(tmp, 'clouds.yaml'), extra={'leveller': {
                'prometheus': {'url': cloud.prometheus_url},
                'apply': {'poll_interval': 0.1,
                          'journal': os.path.join(tmp, 'journal.jsonl'),
                          'lock_file': os.path.join(tmp, 'apply.lock')}}})
        env = cloud.shell_env(clouds)
        if pythonpath:
            env['PYTHONPATH'] = pythonpath
        base = ['openstack', '--os-cloud', scale.CLOUD, 'leveller']
        plan_file = os.path.join(tmp, 'plan.json')
        argvs = {
            'snapshot': base + ['snapshot', '--output-file',
                                os.path.join(tmp, 'snap.json')],
            'score': base + ['score', '-f', 'json'],
            'plan': base + ['plan', '-f', 'json', '--output-file',
                            plan_file],
        }
        for name in COMMANDS:
            walls, peaks = [], []
            for _ in range(args.repeat):
                cloud.reset_counts()
                wall, peak, _, err = measured(argvs[name], env)
                walls.append(wall)
                peaks.append(peak)
                print('  %s %d: %s %.1f s, %.0f MB' % (
                    label, hosts, name, wall, peak), flush=True)
            summary = cloud.summary()
            row[name] = {
                'wall_s': round(statistics.median(walls), 2),
                'walls_s': [round(w, 2) for w in walls],
                'peak_mb': round(max(peaks)),
                'requests': summary['requests'],
                'max_in_flight': summary['stats']['max_in_flight'],
                'by_endpoint': by_endpoint(summary)}
        if args.apply:
            row['apply'] = bench_apply(cloud, base, plan_file, env, row)
    return row


def bench_apply(cloud, base, plan_file, env, row):
    with open(plan_file) as stream:
        moves = len(json.load(stream)['moves'])
    cloud.reset_counts()
    wall, peak, _, err = measured(base + ['apply', plan_file], env)
    counts = by_endpoint(cloud.summary())
    whole = row['snapshot']['by_endpoint']
    total = sum(counts.values())
    polls = 2 * sum(counts.get(' '.join(k), 0) for k in POLLS)
    actions = sum(counts.get(' '.join(k), 0) for k in ACTIONS)
    prometheus = sum(n for k, n in counts.items()
                     if k.startswith('prometheus ')) - sum(
        n for k, n in whole.items() if k.startswith('prometheus '))
    recheck = total - sum(whole.values()) - polls - actions
    print('  apply: %d moves in %.1f s, %s' % (moves, wall, err.decode(
        errors='replace').strip().splitlines()[-1]), flush=True)
    return {
        'moves': moves, 'wall_s': round(wall, 2), 'peak_mb': round(peak),
        'requests': total,
        'recheck_per_move': round(recheck / moves, 1) if moves else None,
        'recheck_nova_placement_per_move': round(
            (recheck - prometheus) / moves, 1) if moves else None,
        'polls_per_move': round(polls / moves, 1) if moves else None,
        'per_move_beyond_whole_read_s': round(
            (wall - row['snapshot']['wall_s']) / moves, 2) if moves else None,
        'by_endpoint': counts}


def cluster_file(hosts, args, tmp):
    path = os.path.join(tmp, 'c%d.json' % hosts)
    if not os.path.exists(path):
        with open(path, 'w') as stream:
            json.dump(generate.generate(hosts, hosts * PER_HOST, args.seed),
                      stream)
    return path


def bench_paired(hosts, args, tmp, previous):
    """snapshot and score of the previous version and this one in turn,
    against one cloud: medians and pairwise ratios."""
    result = {}
    with scale.ScaleCloud(cluster_file(hosts, args, tmp),
                          latency=args.latency, concurrency=args.concurrency,
                          bandwidth=None) as cloud:
        clouds = cloud.write_clouds_yaml(os.path.join(tmp, 'clouds.yaml'))
        envs = {'this': cloud.shell_env(clouds)}
        envs['previous'] = dict(envs['this'], PYTHONPATH=previous)
        base = ['openstack', '--os-cloud', scale.CLOUD, 'leveller']
        for name, argv in (
                ('snapshot', base + ['snapshot', '--output-file',
                                     os.path.join(tmp, 'paired.json')]),
                ('score', base + ['score', '-f', 'json'])):
            seen = {v: {'wall': [], 'cpu': []} for v in envs}
            for i in range(args.paired + 1):
                for version in ('previous', 'this'):
                    cpu = []
                    wall, _, _, _ = measured(argv, envs[version], cpu)
                    print('  paired %s %s %d: %.1f s, CPU %.1f s' % (
                        name, version, i, wall, cpu[0]), flush=True)
                    if i:  # the first of each is a warm-up
                        seen[version]['wall'].append(wall)
                        seen[version]['cpu'].append(cpu[0])
            walls = [t / p for t, p in zip(seen['this']['wall'],
                                           seen['previous']['wall'])]
            cpus = [t / p for t, p in zip(seen['this']['cpu'],
                                          seen['previous']['cpu'])]
            result[name] = {
                'previous_wall_median_s': round(statistics.median(
                    seen['previous']['wall']), 2),
                'this_wall_median_s': round(statistics.median(
                    seen['this']['wall']), 2),
                'ratio_wall_median': round(statistics.median(walls), 3),
                'ratio_wall_min_max': [round(min(walls), 3),
                                       round(max(walls), 3)],
                'previous_cpu_median_s': round(statistics.median(
                    seen['previous']['cpu']), 2),
                'this_cpu_median_s': round(statistics.median(
                    seen['this']['cpu']), 2),
                'ratio_cpu_median': round(statistics.median(cpus), 3),
                'pairs': args.paired}
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, action='append', required=True)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--latency', type=float, default=scale.LATENCY)
    parser.add_argument('--concurrency', type=int,
                        default=scale.CONCURRENCY)
    parser.add_argument('--no-apply', dest='apply', action='store_false')
    parser.add_argument('--previous', metavar='DIR',
                        help='also run the commands of this checkout')
    parser.add_argument('--previous-hosts', type=int, action='append',
                        help='sizes for --previous (default: all)')
    parser.add_argument('--paired', type=int, default=0, metavar='N',
                        help='with --previous: N runs of each in turn')
    parser.add_argument('--json', metavar='FILE')
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for hosts in args.hosts:
            runs = [('this', None)]
            if args.previous and (not args.previous_hosts
                                  or hosts in args.previous_hosts):
                runs.insert(0, ('previous', os.path.abspath(args.previous)))
            for label, pythonpath in runs:
                rows.append(bench_size(hosts, args, tmp, label, pythonpath))
        paired = bench_paired(args.hosts[0], args, tmp, os.path.abspath(
            args.previous)) if args.paired and args.previous else None
    result = stamp.stamped(latency_s=args.latency,
                           concurrency=args.concurrency, repeat=args.repeat,
                           rows=rows)
    if paired:
        result['paired'] = paired
    print(table(result))
    if args.json:
        stamp.write(args.json, result)
    return 0


def table(result):
    rows = []
    for row in result['rows']:
        snap = row['snapshot']
        compute = sum(n for k, n in snap['by_endpoint'].items()
                      if k.startswith('nova '))
        apply = row.get('apply') or {}
        rows.append((
            row['version'], '%d / %d' % (row['hypervisors'], row['servers']),
            '%.1f' % snap['wall_s'], '%d (%d)' % (snap['requests'], compute),
            '%d' % snap['max_in_flight'], '%.1f' % row['score']['wall_s'],
            '%.1f' % row['plan']['wall_s'],
            '%d' % max(row[c]['peak_mb'] for c in COMMANDS),
            '%s' % apply.get('recheck_per_move', '-'),
            '%s' % apply.get('per_move_beyond_whole_read_s', '-')))
    return tabulate.tabulate(
        rows, ('version', 'hypervisors / servers', 'snapshot s',
               'requests (compute)', 'in flight', 'score s', 'plan s',
               'peak MB', 'apply: re-check requests / move',
               's / move beyond a read'),
        tablefmt='github', disable_numparse=True)


if __name__ == '__main__':
    sys.exit(main())
