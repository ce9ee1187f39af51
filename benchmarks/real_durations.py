"""Predicted against actual durations of real live migrations.

On a devcloud with real hypervisors (``devcloud start --real 2 0``: QEMU
guests moved by Nova's libvirt driver), it boots guests of several sizes and
dirty rates, then moves them between the two real hypervisors one at a
time, each move through the product as an operator would run it: ``plan
--target-placement`` of that one server, then ``apply`` of the plan file.
Each move's prediction is apply's own (the journal's ``estimate_seconds``,
made from Nova's history as it stood when the move started), so every
prediction only knows the moves before it. Actual durations are apply's
(request to verified landing, the journal's ``duration``) and Nova's
(``updated_at - created_at`` of the migration record, whole seconds), with
the downtime libvirt reports for the job.

    tools/devcloud/devcloud run -- python benchmarks/real_durations.py \\
        --rounds 5 --output benchmarks/results/real_durations.json

It leaves the guests it booted deleted. Progress on stderr; the table and
the summary on stdout.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import openstack
import tabulate

# (name, flavor, what the guest does: guest/init's kernel command line)
GUESTS = (
    ('idle-128', 'real.128', ''),
    ('idle-512', 'real.512', ''),
    ('burn-256', 'real.256', 'devcloud.cpu=100'),
    ('dirty-256-r8', 'real.256', 'devcloud.mem=96 devcloud.memrate=8'),
    ('dirty-512-r24', 'real.512', 'devcloud.mem=192 devcloud.memrate=24'),
)
PREFIX = 'rd-'
ADDR = {'rhv01': '127.0.0.41', 'rhv02': '127.0.0.42'}  # libvirt daemons


def say(text):
    print(text, file=sys.stderr, flush=True)


def image_for(conn, base, cmdline, cache):
    """An image of the devcloud guest whose command line adds cmdline."""
    if not cmdline:
        return base
    if cmdline in cache:
        return cache[cmdline]
    name = PREFIX + cmdline.replace(' ', '_').replace('devcloud.', '')
    found = conn.image.find_image(name)
    if found is None:
        data = conn.image.download_image(base).content
        found = conn.image.create_image(
            name=name, data=data, disk_format='ami', container_format='ami',
            kernel_id=base.kernel_id, ramdisk_id=base.ramdisk_id,
            os_command_line=(base.os_command_line + ' ' + cmdline).strip())
    cache[cmdline] = found
    return found


def boot(conn, hosts):
    base = conn.image.find_image('devcloud-guest')
    cache, servers = {}, []
    for index, (name, flavor, cmdline) in enumerate(GUESTS):
        image = image_for(conn, base, cmdline, cache)
        server = conn.compute.create_server(
            name=PREFIX + name, flavor_id=conn.compute.find_flavor(flavor).id,
            image_id=image.id, networks='none',
            availability_zone='nova:%s' % hosts[index % 2])
        servers.append(server)
    for server in servers:
        conn.compute.wait_for_server(server, wait=600, interval=2)
    say('booted %d guests' % len(servers))
    time.sleep(20)  # let the guests reach their working sets
    return [conn.compute.get_server(s.id) for s in servers]


def run(args, env):
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 2):
        say(' '.join(args) + '\n' + done.stderr)
    return done


def downtime(host, instance):
    """libvirt's downtime of the last job, in ms, on the destination."""
    out = subprocess.run(
        ['virsh', '-c', 'qemu+tcp://%s/system' % ADDR.get(host, host),
         'domjobinfo', instance, '--completed'],
        capture_output=True, text=True).stdout
    for line in out.splitlines():
        key, _, value = line.partition(':')
        if key.strip() == 'Total downtime':
            return float(value.split()[0])
    return None


def cap(host, instance, mibs):
    """Cap the guest's migration speed on its source daemon once its job
    runs (Nova passes its own bandwidth when it starts the job)."""
    uri = 'qemu+tcp://%s/system' % ADDR.get(host, host)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = subprocess.run(['virsh', '-c', uri, 'domjobinfo', instance],
                             capture_output=True, text=True).stdout
        if 'Unbounded' in job:
            subprocess.run(['virsh', '-c', uri, 'migrate-setspeed', instance,
                            str(mibs)], capture_output=True)
            return True
        time.sleep(0.1)
    return False


def move(conn, server, dest, work, env, speed=None):
    """Move the server to dest through plan + apply; its figures. speed:
    MiB/s its copy is capped at, as a slower network would."""
    target = os.path.join(work, 'target.yaml')
    with open(target, 'w') as f:
        f.write('%s: %s\n' % (server.id, dest))
    plan = os.path.join(work, 'plan.json')
    journal = os.path.join(work, 'journal.jsonl')
    if os.path.exists(journal):
        os.unlink(journal)
    config = os.path.join(work, 'config.yaml')
    run(['openstack', 'leveller', 'plan', '--target-placement', target,
         '--no-prometheus', '--ceiling', '2', '--config', config,
         '--output-file', plan, '-f', 'value', '-c', '#'], env)
    with open(plan) as f:
        planned = json.load(f)['moves']
    applying = subprocess.Popen(
        ['openstack', 'leveller', 'apply', plan, '--placement-plan',
         '--no-prometheus', '--ceiling', '2',
         '--config', config, '--journal', journal, '--lock-file',
         os.path.join(work, 'lock'), '-f', 'value', '-c', 'Status'], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if speed:
        cap(server.compute_host, server.instance_name, speed)
    _, err = applying.communicate()
    if applying.returncode not in (0, 2):
        say(err)
    records = [json.loads(line) for line in open(journal)]
    started = next(r for r in records if r['event'] == 'migrate')
    ended = next(r for r in records if r['event'] in (
        'done', 'failed', 'aborted', 'timed-out'))
    mig = conn.compute.get(
        '/os-migrations', params={'instance_uuid': server.id,
                                  'migration_type': 'live-migration'},
        microversion='2.80').json()['migrations']
    mig = max(mig, key=lambda m: m['id'])
    nova = (datetime.datetime.fromisoformat(mig['updated_at']) -
            datetime.datetime.fromisoformat(mig['created_at'])
            ).total_seconds()
    fresh = conn.compute.get_server(server.id)
    estimated = planned[0].get('estimate', {}) if planned else {}
    return {
        'server': server.name, 'from': server.compute_host, 'to': dest,
        'status': ended['event'],
        'planned_estimate': estimated.get('seconds'),
        'basis': estimated.get('basis'),
        'estimate': started.get('estimate_seconds'),
        'wait': started.get('wait_seconds'),
        'apply_seconds': ended.get('duration'),
        'nova_seconds': nova,
        'ram_mib': server.flavor['ram'],
        'behaviour': next(g[2] for g in GUESTS
                          if PREFIX + g[0] == server.name),
        'downtime_ms': downtime(dest, fresh.instance_name),
    }


def summary(rows):
    known = [r for r in rows if r['estimate'] is not None
             and r['status'] == 'done']
    lines = ['%d live migrations, %d with an estimate' % (
        len(rows), len(known))]
    for what in ('nova_seconds', 'apply_seconds'):
        errors = [abs(r['estimate'] - r[what]) for r in known]
        ratios = [r['estimate'] / r[what] for r in known if r[what]]
        if errors:
            lines.append(
                'against %s: median |error| %.1f s, 90th percentile %.1f s, '
                'median estimate/actual %.2f (min %.2f, max %.2f)' % (
                    what, statistics.median(errors),
                    sorted(errors)[int(0.9 * (len(errors) - 1))],
                    statistics.median(ratios), min(ratios), max(ratios)))
    return lines


def table(rows):
    cells = [('%d' % i, r['server'][len(PREFIX):], r['to'],
              '%.0f' % r['ram_mib'],
              '-' if r['estimate'] is None else '%.1f' % r['estimate'],
              '-' if r['apply_seconds'] is None
              else '%.1f' % r['apply_seconds'],
              '%.0f' % r['nova_seconds'],
              '-' if r['downtime_ms'] is None else '%.0f' % r['downtime_ms'])
             for i, r in enumerate(rows, 1)]
    return tabulate.tabulate(
        cells, ('#', 'server', 'to', 'RAM (MiB)', 'estimate (s)',
                'apply (s)', 'Nova (s)', 'downtime (ms)'),
        tablefmt='github', disable_numparse=True).splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=5,
                        help='moves of every guest (default 5)')
    parser.add_argument('--output', help='write the figures as JSON here')
    parser.add_argument('--speed', type=int,
                        help='cap each copy at this many MiB/s, as a slower '
                        'network would (virsh migrate-setspeed)')
    parser.add_argument('--keep', action='store_true',
                        help='leave the guests booted')
    args = parser.parse_args()
    conn = openstack.connect(compute_api_version='2.95')
    hosts = sorted(h.name.split('.')[0] for h in conn.compute.hypervisors()
                   if h.name.startswith('rhv'))
    if len(hosts) < 2:
        sys.exit('needs two real hypervisors (devcloud start --real 2 0)')
    hosts = hosts[:2]
    env = dict(os.environ)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, 'config.yaml'), 'w') as f:
            f.write('apply:\n  poll_interval: 0.5\n')
        servers = boot(conn, hosts)
        try:
            for number in range(args.rounds):
                for server in servers:
                    server = conn.compute.get_server(server.id)
                    dest = hosts[1 - hosts.index(server.compute_host)]
                    row = move(conn, server, dest, work, env, args.speed)
                    rows.append(row)
                    say('round %d %s -> %s: %s, estimate %s, apply %s s, '
                        'Nova %s s' % (number + 1, row['server'], dest,
                                       row['status'], row['estimate'],
                                       row['apply_seconds'],
                                       row['nova_seconds']))
        finally:
            if not args.keep:
                for server in servers:
                    conn.compute.delete_server(server.id)
    for line in table(rows) + [''] + summary(rows):
        print(line)
    if args.output:
        with open(args.output, 'w') as f:
            json.dump({'guests': [list(g) for g in GUESTS],
                       'speed_mib_s': args.speed, 'moves': rows,
                       'summary': summary(rows)}, f, indent=1)
            f.write('\n')


if __name__ == '__main__':
    main()
