#!/usr/bin/env python3
"""Simulate cron running `openstack leveller apply --batch 1` on the devcloud.

    tools/devcloud/devcloud load hot-host
    eval "$(tools/devcloud/devcloud env)"
    python tools/devcloud/cron_loop.py --minutes 15 --every 20 --cooldown 0.1

Every --every seconds it runs one apply with the given cooldown (hours),
then records the imbalance that `leveller score --summary` reports. At the
end it reads Nova's migration history and checks that no server moved twice
inside the cooldown, and reads the journal: every run must end in an end
(or refused) record, with no torn line. Prints one line per run and a JSON
summary; exits 1 if the cooldown was broken, an apply exited with an error
code (0 done, 3 moves failed and 6 every move skipped are not errors), or
the journal is not whole.
"""

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time

import openstack

from osc_leveller.v1 import runfiles

import devcloud_retry  # beside this script

GOOD = (0, 3, 6)  # exit codes of apply that are not errors here


def openstack_cli(*args):
    result = subprocess.run(['openstack'] + list(args) + ['-f', 'json'],
                            capture_output=True, text=True, timeout=900)
    rows = json.loads(result.stdout) if result.stdout.strip() else []
    return result.returncode, rows, result.stderr


def imbalance():
    code, rows, err = openstack_cli('leveller', 'score', '--summary')
    return max((r['Imbalance'] for r in rows), default=0.0)


def parse(text):
    return datetime.datetime.fromisoformat(text.replace('Z', '')).replace(
        tzinfo=datetime.timezone.utc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--minutes', type=float, default=15)
    parser.add_argument('--every', type=float, default=20)
    parser.add_argument('--cooldown', type=float, default=0.1,
                        help='hours (default 0.1 = 6 minutes)')
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    deadline = time.monotonic() + args.minutes * 60
    journal = tempfile.NamedTemporaryFile(suffix='.jsonl', delete=False).name
    runs = []
    before = imbalance()
    print(json.dumps({'minute': 0, 'imbalance': before}), flush=True)
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        code, rows, err = openstack_cli(
            'leveller', 'apply', '--batch', '1', '--cooldown',
            str(args.cooldown), '--journal', journal)
        moved = [r for r in rows if r['Status'] == 'done']
        run = {'minute': round((time.monotonic() - deadline) / 60
                               + args.minutes, 1),
               'exit_code': code, 'imbalance': round(imbalance(), 4),
               'statuses': [r['Status'] for r in rows],
               'moved': ['%s %s->%s' % (r['Server'], r['Source'],
                                        r['Destination']) for r in moved]}
        if code not in GOOD:
            run['stderr'] = err.strip()[-300:]
        runs.append(run)
        print(json.dumps(run), flush=True)
        time.sleep(max(0.0, args.every - (time.monotonic() - t0)))
    conn = devcloud_retry.retrying(openstack.connect())  # GETs retried
    history = {}
    for mig in conn.compute.migrations(
            changes_since=started.strftime('%Y-%m-%dT%H:%M:%SZ')):
        if mig.migration_type == 'live-migration' and \
                mig.status == 'completed':
            history.setdefault(mig.server_id, []).append(
                parse(mig.created_at))
    records, torn = runfiles.read_journal(journal)
    ended = {r['request_id'] for r in records
             if r.get('event') in ('end', 'refused')}
    unended = sorted({r.get('request_id') for r in records} - ended)
    too_soon = []
    for server, times in history.items():
        times.sort()
        for a, b in zip(times, times[1:]):
            if (b - a).total_seconds() < args.cooldown * 3600:
                too_soon.append((server, str(a), str(b)))
    summary = {
        'runs': len(runs), 'minutes': args.minutes,
        'cooldown_hours': args.cooldown,
        'imbalance_before': before,
        'imbalance_last': runs[-1]['imbalance'] if runs else None,
        'imbalance_min': min(r['imbalance'] for r in runs) if runs else None,
        'migrations': sum(len(t) for t in history.values()),
        'servers_moved': len(history),
        'moved_twice_inside_cooldown': too_soon,
        'bad_exit_codes': [r for r in runs if r['exit_code'] not in GOOD],
        'journal': journal,
        'journal_runs_without_end': unended,
        'journal_lines_skipped': torn,
    }
    print(json.dumps(summary, indent=1))
    return 1 if too_soon or summary['bad_exit_codes'] or unended or torn \
        else 0


if __name__ == '__main__':
    sys.exit(main())
