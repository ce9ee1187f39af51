"""apply --dry-run of large plans, end to end, against scalecloud.

A scalecloud serves a generated cluster (benchmarks/generate.py, seed 1,
50 servers a hypervisor; no latency, no concurrency limit: the figures are
the command's own time). Plans of 1,000, 10,000 and 70,000 moves are made
from its snapshot: each move takes one server to another hypervisor of its
balancing domain (AZ x CPU model), its destination drawn at random, every
tenth a pair of servers that trade places (an exchange), waves as the
planner numbers them. Most of them the re-check skips (a random
destination seldom evens out the load), the rest would run: every move
goes through apply's checks as a reviewed plan file's would.

``openstack leveller apply PLAN --dry-run`` then runs in its own process,
as an operator runs it (a whole read of the cloud, the plan file read and
checked, every move re-checked, the table written), for this checkout and,
with --previous DIR, for another checkout (PYTHONPATH), in turn: previous,
this, previous, this, ... Wall time and peak memory are medians of
--repeat runs. Both versions' tables and journals (without times and
request ids) must be the same, or the benchmark says so.

A previous run still going after --previous-timeout seconds is stopped and
reported with the moves its journal shows checked by then.

The checks alone (--parts checks-alone, or both): each version, in a
process of its own, reads the snapshot and the plan file and times the
executor's dry run (CPU seconds, median of --repeat), which is what grows
with the number of moves; the moves' statuses of both must be the same.

    git worktree add --detach ../base <commit>
    python benchmarks/apply_time.py --previous ../base --parts end-to-end \\
        --previous-timeout 1800 --json benchmarks/results/apply.json
    python benchmarks/apply_time.py --previous ../base --parts checks-alone \\
        --previous-repeat 1 --previous-timeout 1200 \\
        --json benchmarks/results/apply_checks.json
"""

import argparse
import json
import os
import random
import signal
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
from osc_leveller.core.planning import kinds  # noqa: E402
from osc_leveller.core.planning import plan as plan_mod  # noqa: E402
from tools.scalecloud import cloud as scale  # noqa: E402

PER_HOST = 50
EXCHANGE_EVERY = 10
BENCH_TIME = '2026-11-26T12:00:00Z'


def synthetic_plan(snapshot, count, seed):
    """A balancing plan document of `count` moves of the snapshot's
    servers (see the module docstring)."""
    rng = random.Random(seed)
    hyps = {h['name']: h for h in snapshot['hypervisors']}
    domains = {}
    for h in snapshot['hypervisors']:
        domains.setdefault(_domain(h), []).append(h['name'])
    servers = [s for s in snapshot['servers'] if s['status'] == 'ACTIVE']
    if len(servers) < count:
        raise SystemExit('%d moves need as many active servers; the cloud '
                         'has %d (--hosts)' % (count, len(servers)))
    rng.shuffle(servers)
    on = {}
    for s in servers:
        on.setdefault(s['hypervisor'], []).append(s)
    waves = plan_mod.Waves()
    used, moves = set(), []

    def move(server, source, destination, wave, exchange=''):
        used.add(server['id'])
        moves.append({
            'server_id': server['id'], 'server_name': server['name'],
            'source': source, 'destination': destination,
            'destination_host': hyps[destination]['host'], 'wave': wave,
            'domain': 'synthetic', 'ram_gb': server['flavor']['ram'] / 1024,
            'gain': 0.001, 'source_score': {'before': 0.6, 'after': 0.55},
            'destination_score': {'before': 0.3, 'after': 0.35},
            'imbalance': {'before': 0.1, 'after': 0.099},
            'reason': 'synthetic', 'exchange': exchange})

    for index, server in enumerate(servers):
        if len(moves) >= count:
            break
        if server['id'] in used:
            continue
        source = server['hypervisor']
        others = [n for n in domains[_domain(hyps[source])] if n != source]
        if not others:
            continue
        destination = rng.choice(others)
        partner = next((s for s in on.get(destination, ())
                        if s['id'] not in used), None)
        if index % EXCHANGE_EVERY == 0 and partner and \
                len(moves) + 2 <= count:
            wave = waves.next(source, destination)
            label = 'exchange %d' % index
            move(server, source, destination, wave, label)
            move(partner, destination, source, wave, label)
            continue
        move(server, source, destination, waves.next(source, destination))
    moves.sort(key=lambda m: m['wave'])  # the planner's order: by wave
    return {
        'format': plan_mod.FORMAT, 'kind': kinds.BALANCE.name,
        'created_at': BENCH_TIME,
        'snapshot': {'taken_at': snapshot['taken_at'],
                     'source': snapshot.get('source', {}),
                     'fingerprint': 'sha256:' + '0' * 64},
        'options': {}, 'note': '',
        'imbalance': {'before': 0.1, 'after': 0.05},
        'moves': moves}


def _domain(hypervisor):
    return hypervisor['availability_zone'], hypervisor['cpu'].get('model')


def run(argv, env, timeout=None):
    """(wall s, peak MB, stdout, exit code); wall None when stopped at the
    timeout, the command and its children with it."""
    with tempfile.NamedTemporaryFile('r') as stats:
        started = time.monotonic()
        process = subprocess.Popen(
            ['/usr/bin/time', '-f', '%M', '-o', stats.name] + argv, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None, None, b'', None
        wall = time.monotonic() - started
        peak = int(stats.read().split()[-1]) / 1024.0
    if process.returncode not in (0, 3):
        raise RuntimeError('%s failed (%d): %s' % (
            ' '.join(argv), process.returncode,
            err.decode(errors='replace')[-2000:]))
    return wall, peak, out, process.returncode


def journal_of(path):
    """The journal's records without times and request ids; a missing
    file is an empty journal."""
    records = []
    if os.path.exists(path):
        with open(path, encoding='utf-8') as stream:
            for line in stream:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut when the run was stopped
                record.pop('time', None)
                record.pop('request_id', None)
                records.append(record)
    return records


def checked(records, plan):
    """How many of the plan's moves the journal shows checked: the place of
    the last one it names. A dry run journals the moves that would run
    only once its round ends, the skipped ones as it goes."""
    place = {m['server_id']: i for i, m in enumerate(plan['moves'])}
    return max([place[r['server_id']] + 1 for r in records
                if r.get('event') in ('would-run', 'skipped')] or [0])


# The executor's dry run alone, in a child process of the version timed:
# its own osc_leveller (PYTHONPATH), not this checkout's. Prints JSON.
CHECKS = """
import dataclasses, json, sys, time
from osc_leveller.core.model import snapshot
from osc_leveller.core.planning import plan
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options
snap = snapshot.load(sys.argv[1])
moves = plan.read(sys.argv[2]).moves
runner = executor.Executor(None, dataclasses.replace(
    options.PlannerOptions(), now=snap.taken_at),
    executor.ApplyOptions(dry_run=True))
started, cpu = time.perf_counter(), time.process_time()
run = runner.run(moves, snapshot=snap)
print(json.dumps({'wall_s': time.perf_counter() - started,
                  'cpu_s': time.process_time() - cpu,
                  'statuses': [r.status for r in run.results],
                  'code': executor.__file__}))
"""


def bench_checks(snap_file, plan_file, versions, args):
    """The executor's dry run alone, each version in its own process, in
    turn: {version: {cpu_s, wall_s (medians)}}; a previous run still going
    after --previous-timeout is stopped."""
    found, statuses = {}, {}
    for turn in range(args.repeat):
        for label, pythonpath in versions:
            entry = found.setdefault(label, {'runs': []})
            if entry.get('stopped_after_s') or (
                    label == 'previous' and args.previous_repeat and
                    turn >= args.previous_repeat):
                continue
            env = dict(os.environ)
            env.pop('PYTHONPATH', None)
            if pythonpath:
                env['PYTHONPATH'] = pythonpath
            try:
                done = subprocess.run(
                    [sys.executable, '-c', CHECKS, snap_file, plan_file],
                    env=env, cwd=tempfile.gettempdir(), capture_output=True,
                    check=True, timeout=args.previous_timeout
                    if label == 'previous' else None)
            except subprocess.TimeoutExpired:  # subprocess.run killed it
                entry['stopped_after_s'] = args.previous_timeout
                print('  checks alone, %s: stopped after %.0f s' % (
                    label, args.previous_timeout), flush=True)
                continue
            run = json.loads(done.stdout)
            statuses[label] = run.pop('statuses')
            entry['runs'].append(run)
            print('  checks alone, %s (%s): %.2f s CPU' % (
                label, run['code'], run['cpu_s']), flush=True)
    for entry in found.values():
        runs = entry.pop('runs')
        if runs:
            entry['cpu_s'] = round(statistics.median(
                r['cpu_s'] for r in runs), 2)
            entry['wall_s'] = round(statistics.median(
                r['wall_s'] for r in runs), 2)
    if len(statuses) == 2:
        found['same_statuses'] = statuses['previous'] == statuses['this']
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--moves', type=int, action='append')
    parser.add_argument('--hosts', type=int, default=1500)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--previous', metavar='DIR')
    parser.add_argument('--previous-timeout', type=float, default=1800.0)
    parser.add_argument('--previous-repeat', type=int,
                        help='runs of the previous version at each size '
                             '(default: --repeat)')
    parser.add_argument('--work', metavar='DIR',
                        help='keep the cluster and plans here')
    parser.add_argument('--json', metavar='FILE')
    parser.add_argument('--parts', choices=('both', 'end-to-end',
                                            'checks-alone'), default='both')
    args = parser.parse_args(argv)
    sizes = args.moves or [1000, 10000, 70000]
    work = args.work or tempfile.mkdtemp(prefix='apply-time-')
    os.makedirs(work, exist_ok=True)
    cluster = os.path.join(work, 'c%d.json' % args.hosts)
    if not os.path.exists(cluster):
        with open(cluster, 'w') as stream:
            json.dump(generate.generate(args.hosts, args.hosts * PER_HOST,
                                        args.seed), stream)
    versions = [('this', None)]
    if args.previous:
        versions.insert(0, ('previous', os.path.abspath(args.previous)))
    rows = []
    with scale.ScaleCloud(cluster, latency=0, concurrency=None,
                          bandwidth=None) as cloud:
        print('scalecloud: %d hypervisors, %d servers, loaded in %.0f s' % (
            args.hosts, args.hosts * PER_HOST, cloud.load_seconds),
            flush=True)
        clouds = cloud.write_clouds_yaml(
            os.path.join(work, 'clouds.yaml'), extra={'leveller': {
                'prometheus': {'url': cloud.prometheus_url},
                'apply': {'lock_file': os.path.join(work, 'apply.lock')}}})
        base = ['openstack', '--os-cloud', scale.CLOUD, 'leveller']
        env = cloud.shell_env(clouds)
        snap_file = os.path.join(work, 'snapshot.json')
        whole, _, _, _ = run(
            base + ['snapshot', '--output-file', snap_file], env)
        print('a whole read (leveller snapshot): %.1f s' % whole, flush=True)
        with open(snap_file, encoding='utf-8') as stream:
            snapshot = json.load(stream)
        for count in sizes:
            path = os.path.join(work, 'plan-%d.json' % count)
            plan = synthetic_plan(snapshot, count, args.seed)
            with open(path, 'w') as stream:
                json.dump(plan, stream)
            row = {'moves': count, 'plan_mb': round(
                os.path.getsize(path) / 2 ** 20, 1), 'runs': {}}
            outputs, journals = {}, {}
            for turn in range(args.repeat if args.parts != 'checks-alone'
                              else 0):
                for label, pythonpath in versions:
                    runs = row['runs'].setdefault(label, [])
                    limit = args.previous_repeat if label == 'previous' \
                        and args.previous_repeat else args.repeat
                    if turn >= limit or any(r['wall_s'] is None
                                            for r in runs):
                        continue
                    journal = os.path.join(work, 'journal-%s-%d.jsonl' % (
                        label, count))
                    if os.path.exists(journal):
                        os.remove(journal)
                    venv = dict(env, PYTHONPATH=pythonpath) if pythonpath \
                        else env
                    wall, peak, out, code = run(
                        base + ['apply', path, '--dry-run', '--journal',
                                journal], venv,
                        timeout=args.previous_timeout
                        if label == 'previous' else None)
                    records = journal_of(journal)
                    runs.append({'wall_s': None if wall is None else
                                 round(wall, 2), 'peak_mb': None if peak
                                 is None else round(peak),
                                 'checked': checked(records, plan)})
                    if wall is not None:
                        outputs.setdefault(label, out)
                        journals.setdefault(label, records)
                    print('  %d moves, %s: %s' % (
                        count, label, 'stopped after %.0f s with %d moves '
                        'checked' % (args.previous_timeout,
                                     checked(records, plan))
                        if wall is None else '%.1f s, %.0f MB, exit %d' % (
                            wall, peak, code)), flush=True)
            if args.parts != 'end-to-end':
                row['checks'] = bench_checks(snap_file, path, versions, args)
            if len(outputs) == 2:
                row['same_table'] = outputs['previous'] == outputs['this']
                row['same_journal'] = journals['previous'] == \
                    journals['this']
            for label, runs in row['runs'].items():
                walls = [r['wall_s'] for r in runs]
                row[label] = {
                    'wall_s': None if None in walls else round(
                        statistics.median(walls), 2),
                    'peak_mb': None if None in walls else round(
                        statistics.median(r['peak_mb'] for r in runs)),
                    'stopped_after_s': args.previous_timeout
                    if None in walls else None,
                    'checked_by_then': runs[-1]['checked']
                    if None in walls else None}
            rows.append(row)
    result = stamp.stamped(
        hypervisors=args.hosts, servers=args.hosts * PER_HOST,
        repeat=args.repeat, whole_read_s=round(whole, 1), rows=rows)
    print(table(result))
    if args.json:
        stamp.write(args.json, result)
    return 0


def table(result):
    rows = []
    for row in result['rows']:
        this, previous = row.get('this') or {}, row.get('previous') or {}
        checks = row.get('checks') or {}
        alone, before_alone = checks.get('this', {}), checks.get(
            'previous', {})
        rows.append((
            '{:,}'.format(row['moves']), '%.1f' % row['plan_mb'],
            _before(previous, 'wall_s', row), _figure(this, 'wall_s'),
            _ratio(previous, this, 'wall_s'),
            _before(before_alone, 'cpu_s'), _figure(alone, 'cpu_s'),
            _ratio(before_alone, alone, 'cpu_s'),
            '%.3f' % (alone['cpu_s'] * 1000 / row['moves'])
            if alone else '-',
            '%s / %s' % (previous.get('peak_mb') or '-',
                         this.get('peak_mb') or '-'),
            {True: 'yes', False: 'NO', None: '-'}[_same(row)]))
    return tabulate.tabulate(
        rows, ('moves', 'plan file MB', 'end to end: previous s', 'this s',
               'previous / this', 'checks alone, CPU s: previous', 'this',
               'previous / this', 'this, CPU s per 1,000 moves',
               'peak MB previous / this', 'same results'),
        tablefmt='github', disable_numparse=True)


def _figure(entry, key):
    return '%.2f' % entry[key] if entry.get(key) is not None else '-'


def _before(previous, key, row=None):
    if not previous:
        return '-'
    if previous.get('stopped_after_s'):
        return '> %.0f%s' % (previous['stopped_after_s'], (
            ' (%s of the moves checked)' % '{:,}'.format(
                previous['checked_by_then'])) if row else '')
    return '%.1f' % previous[key]


def _ratio(previous, this, key):
    if not previous or this.get(key) is None:
        return '-'
    if previous.get('stopped_after_s'):
        return '> %.0f' % (previous['stopped_after_s'] / this[key])
    return '%.1f' % (previous[key] / this[key])


def _same(row):
    """Both versions' tables and journals, and the checks' statuses."""
    found = [row[k] for k in ('same_table', 'same_journal') if k in row]
    found += [row['checks']['same_statuses']] if 'same_statuses' in \
        row.get('checks', {}) else []
    return all(found) if found else None


if __name__ == '__main__':
    sys.exit(main())
