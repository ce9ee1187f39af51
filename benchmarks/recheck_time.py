"""apply's re-check of a move, alone, against tools/scalecloud.

Before each migration apply reads again what the move touches (its
server, source and destination, cloud/refresh.py) into the last document,
parses it and builds the rules and the state the move is checked in. This
times exactly that, in a process of each version (PYTHONPATH) against one
scalecloud: a whole read (cloud/actions.py ``Actions.snapshot()``), then
--moves re-checks, each of a server of another hypervisor to the next
hypervisor (``Actions.snapshot(moves=[move])`` and the checks' Context),
with the requests each sent (the scalecloud's counts) and the process's
peak memory. Prometheus is read again only when its last answer is a
minute old, as in apply; here it is not.

    python benchmarks/recheck_time.py --hosts 5000 --previous ../base \\
        --json benchmarks/results/recheck.json
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PER_HOST = 50


def child(args):
    """In the version's own process: the whole read, then the re-checks,
    one JSON line each."""
    import openstack

    from osc_leveller.cloud import actions as actions_mod
    from osc_leveller.cloud import measure
    from osc_leveller.core.planning import context
    from osc_leveller.core.settings import options as options_mod

    conn = openstack.connect(cloud='scalecloud')
    reader = measure.reader_from_settings({'url': args.prometheus})
    actions = actions_mod.Actions(conn, metrics=reader)
    options = options_mod.PlannerOptions()
    started = time.monotonic()
    snap = actions.snapshot()
    print(json.dumps({'whole_read_s': time.monotonic() - started}),
          flush=True)
    names = [h.name for h in snap.hypervisors]
    for i in range(args.moves):
        source = names[(i * 7) % len(names)]
        destination = names[(i * 7 + 1) % len(names)]
        server = snap.servers_on(source)[0]
        move = types.SimpleNamespace(server_id=server.id, source=source,
                                     destination=destination)
        _post(args.admin + '/reset')
        started = time.monotonic()
        cpu = time.process_time()
        fresh = actions.snapshot(moves=[move])
        checking = context.Context(fresh, options)
        checking.rules, checking.state
        print(json.dumps({
            'wall_s': time.monotonic() - started,
            'cpu_s': time.process_time() - cpu,
            'requests': _requests(args.admin)}), flush=True)
    print(json.dumps({'peak_mb': resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024.0}), flush=True)


def _post(url):
    urllib.request.urlopen(urllib.request.Request(url, method='POST'),
                           timeout=30).read()


def _requests(admin):
    with urllib.request.urlopen(admin, timeout=30) as answer:
        summary = json.load(answer)
    return {'%s %s %s' % (c['service'], c['method'], c['path']):
            c['requests'] for c in summary['counts'] if c['requests']}


def run_version(label, pythonpath, cloud, clouds_yaml, args):
    env = dict(cloud.shell_env(clouds_yaml), PYTHONPATH=pythonpath)
    argv = [sys.executable, os.path.abspath(__file__), '--child',
            '--moves', str(args.moves), '--prometheus', cloud.prometheus_url,
            '--admin', cloud.admin_url]
    out = subprocess.run(argv, env=env, capture_output=True, check=False)
    if out.returncode:
        raise RuntimeError('%s: %s' % (label, out.stderr.decode()[-3000:]))
    lines = [json.loads(line) for line in out.stdout.decode().splitlines()]
    checks = [line for line in lines if 'wall_s' in line]
    walls = [c['wall_s'] for c in checks]
    counts = [sum(c['requests'].values()) for c in checks]
    row = {'version': label, 'hypervisors': args.hosts,
           'servers': args.hosts * PER_HOST,
           'whole_read_s': round(lines[0]['whole_read_s'], 2),
           'recheck_s': round(statistics.median(walls), 3),
           'recheck_walls_s': [round(w, 3) for w in walls],
           'recheck_cpu_s': round(statistics.median(
               c['cpu_s'] for c in checks), 3),
           'requests_per_recheck': statistics.median(counts),
           'requests_by_endpoint': checks[-1]['requests'],
           'peak_mb': round(lines[-1]['peak_mb'])}
    print('  %s: whole read %.1f s, re-check %.3f s (%.3f s CPU), %s '
          'requests, peak %d MB' % (
              label, row['whole_read_s'], row['recheck_s'],
              row['recheck_cpu_s'], row['requests_per_recheck'],
              row['peak_mb']), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=5000)
    parser.add_argument('--moves', type=int, default=10)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--latency', type=float, default=0.02)
    parser.add_argument('--previous', metavar='DIR',
                        help='another checkout, run as a row of its own')
    parser.add_argument('--json', metavar='FILE')
    parser.add_argument('--child', action='store_true',
                        help=argparse.SUPPRESS)
    parser.add_argument('--prometheus', help=argparse.SUPPRESS)
    parser.add_argument('--admin', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    sys.path.insert(0, ROOT)
    from benchmarks import generate
    from benchmarks import stamp
    from tools.scalecloud import cloud as scale

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'cluster.json')
        with open(path, 'w') as stream:
            json.dump(generate.generate(args.hosts, args.hosts * PER_HOST,
                                        args.seed), stream)
        with scale.ScaleCloud(path, latency=args.latency,
                              bandwidth=None) as cloud:
            clouds_yaml = cloud.write_clouds_yaml(
                os.path.join(tmp, 'clouds.yaml'))
            versions = [('this', ROOT)]
            if args.previous:
                versions.insert(0, ('previous', os.path.abspath(
                    args.previous)))
            for label, pythonpath in versions:
                rows.append(run_version(label, pythonpath, cloud,
                                        clouds_yaml, args))
    if args.json:
        stamp.write(args.json, stamp.stamped(
            latency_s=args.latency, moves=args.moves, rows=rows))


if __name__ == '__main__':
    main()
