"""apply and evacuate on real QEMU guests moved by Nova's libvirt driver.

Only on the devcloud's real hypervisors, alone (devcloud start --real 2 0;
tox -e functional-real): skipped when it runs fewer than two, or fake
hypervisors beside them (the leveller would move the burners there).

The guests are shared, in order: test_1 moves a burner, test_2 boots a
dirtying guest and aborts its move, test_3 drains the hypervisor that
test_1 filled. setUpClass boots three guests at once, all real.128
(TCG boots take seconds each on two cores):

- burn-1, burn-2 (devcloud-guest-burn: a vCPU busy) on the first
  hypervisor, which they make hot;
- idle-1 (devcloud-guest: a heartbeat only) on the second.
"""

import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

from tests.functional import base
from tests.functional import test_evacuate
# the devcloud's self-checks of its real hypervisors (base puts tools/ on
# the path)
from devcloud.tests.functional import test_real  # noqa: I100

FLAVOR = 'real.128'
MIB = 1024 * 1024
# Guest's memory: what a live migration of a real.128 guest copies.
GUEST_MIB = 128
# The capped speed of the migration that must not converge, MiB/s: the
# dirtying guest rewrites 32 MiB as fast as its vCPU goes (about 40 MiB/s
# here, never under 10 even on a loaded machine).
CAPPED_MIBS = 4
ABORT_AFTER = 20  # apply --timeout of that migration, seconds
PROGRESS = re.compile(r'^\[1/1\] real-dirty-1 \S+ -> \S+: (\d+) of (\d+) MiB '
                      r'sent, (\d+) MiB remaining$', re.M)
# Host CPU of each hypervisor from its node series (realhv_node.py: its
# guests' CPU time), and each guest's from Debian's libvirt exporter.
HOST_CPU = base.CPU
GUEST_CPU = 'rate(libvirt_domain_info_cpu_time_seconds_total{uuid="%s"}[10s])'
HOST_CPUS = 'count by (instance, job) (node_cpu_seconds_total{mode="idle"})'


def boot(name, image, host):
    return base.openstack(
        '--os-compute-api-version', '2.37', 'server', 'create', '--image', image,
        '--flavor', FLAVOR, '--nic', 'none', '--availability-zone', 'nova:%s' % host,
        '--wait', name, timeout=600)


def address(instance):
    """The IP of a Prometheus target's instance label."""
    return instance.rsplit(':', 1)[0]


class TestRealGuests(test_evacuate.Evacuating, base.DevcloudTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.real = test_real.real_hypervisors()
        if len(cls.real) < 2:
            raise unittest.SkipTest('fewer than two real hypervisors '
                                    '(devcloud start --real 2 0)')
        if set(cls.real) != set(cls.node):
            raise unittest.SkipTest('fake hypervisors beside the real ones: '
                                    'these tests need them alone (devcloud '
                                    'start --real 2 0)')
        cls.hot, cls.cool = sorted(cls.real)[:2]
        cls.started = time.monotonic()
        guests = [('real-burn-1', 'devcloud-guest-burn', cls.hot),
                  ('real-burn-2', 'devcloud-guest-burn', cls.hot),
                  ('real-idle-1', 'devcloud-guest', cls.cool)]
        with concurrent.futures.ThreadPoolExecutor(len(guests)) as pool:
            booting = [pool.submit(boot, *guest) for guest in guests]
            # each deleted at the end even when another failed to boot
            servers = []
            for future in booting:
                try:
                    servers.append(future.result())
                except AssertionError:
                    servers.append(None)
        for server in servers:
            if server:
                cls.addClassCleanup(base.openstack, 'server', 'delete', '--wait',
                                    server['id'], parse=False, check=False)
        if None in servers:
            raise AssertionError('a guest did not boot: %s' % [
                g[0] for g, s in zip(guests, servers) if s is None])
        cls.ids = {s['name']: s['id'] for s in servers}
        print('3 guests booted at once: ACTIVE after %.1f s' % (
            time.monotonic() - cls.started))

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        print('module wall time: %.0f s' % (time.monotonic() - cls.started))

    def setUp(self):
        super().setUp()
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.journal_path = os.path.join(self.tmp, 'journal.jsonl')
        self.config = os.path.join(self.tmp, 'leveller.yaml')
        with open(self.config, 'w') as f:
            yaml.safe_dump({'apply': {
                'journal': self.journal_path, 'poll_interval': 1.0,
                'lock_file': os.path.join(self.tmp, 'apply.lock')}}, f)

    # ---------------------------------------------------------------- helpers
    def journal(self, event=None):
        if not os.path.exists(self.journal_path):
            return []
        with open(self.journal_path) as f:
            records = [json.loads(line) for line in f]
        return [r for r in records if event is None or r['event'] == event]

    def apply(self, *args):
        """(exit code, rows, stderr) of one apply run."""
        result = base.openstack('leveller', 'apply', '--config', self.config, '-f',
                                'json', *args, parse=False, check=False, timeout=600)
        rows = json.loads(result.stdout) if result.stdout.strip() else []
        return result.returncode, rows, result.stderr

    def server(self, name):
        return base.openstack('server', 'show', self.ids.get(name, name))

    def beats(self, name):
        """The guest's last heartbeat number on its console, or 0."""
        text = base.openstack('console', 'log', 'show', self.ids[name],
                              parse=False).stdout
        found = test_real.BEAT.findall(text)
        return int(found[-1]) if found else 0

    def beating(self, name, after, timeout=60):
        """Its heartbeat number once past `after`: the guest runs."""
        return base.wait_for(lambda: (lambda n: n if n > after else None)(
            self.beats(name)), timeout, message='a heartbeat of %s after %d' % (
                name, after))

    def virsh(self, host, *args):
        return test_real.virsh(self.real[host]['host_ip'], *args)

    def host_cpu(self):
        """{service host: busy share of its CPUs} from its node series."""
        return base.by_host(HOST_CPU)

    def guest_cpu(self, server_id):
        """{exporter address: cores} of the guest, per libvirt exporter
        that shows it."""
        return {address(item['metric']['instance']): float(item['value'][1])
                for item in base.prometheus_get('/api/v1/query', {
                    'query': GUEST_CPU % server_id})['result']}

    def exporter_address(self, host):
        """The address of a hypervisor's exporters: its node_exporter's."""
        found = base.prometheus_get('/api/v1/query', {
            'query': 'node_uname_info{nodename="%s"}' % host})['result']
        self.assertEqual(1, len(found), found)
        return address(found[0]['metric']['instance'])

    # ------------------------------------------------------------------ tests
    def test_1_closed_loop(self):
        hot, cool = self.hot, self.cool

        def scored_hot():
            rows = {r['Host']: r for r in base.openstack('leveller', 'score', '--long')}
            cpu = {h: rows[h]['CPU %'] for h in (hot, cool)}
            from_metrics = {rows[h]['Load Source'] for h in (hot, cool)} == {'metrics'}
            return cpu if from_metrics and cpu[hot] >= 40 and \
                cpu[hot] >= cpu[cool] + 30 else None
        scored = base.wait_for(scored_hot, 180, interval=5,
                               message='score to show %s hot from its metrics' % hot)
        before = self.host_cpu()
        burners = {name: self.ids[name] for name in ('real-burn-1', 'real-burn-2')}
        cpus = base.by_host(HOST_CPUS)[hot]
        share = {name: sum(self.guest_cpu(i).values()) / cpus
                 for name, i in burners.items()}

        code, rows, err = self.apply('--batch', '1')
        self.assertEqual(0, code, err)
        self.assertEqual(1, len(rows), rows)
        row = rows[0]
        self.assertEqual(('done', self.node[hot], self.node[cool]),
                         (row['Status'], row['Source'], row['Destination']), row)
        moved = row['Server']
        self.assertIn(moved, burners, 'apply moved %s, not a burner' % moved)
        self.assertEqual(cool, self.server(moved)['OS-EXT-SRV-ATTR:host'])
        # The journal holds the real duration: Nova's libvirt driver copied
        # the guest's memory for seconds, not the fake driver's instant.
        [done] = self.journal('done')
        self.assertEqual(burners[moved], done['server_id'])
        self.assertGreaterEqual(done['duration'], 1.0, done)
        self.assertLess(done['duration'], 120, done)

        # The destination's exporter now shows the guest's CPU time, the
        # source's none, and the source is cooler by about its share.
        there = self.exporter_address(cool)
        base.wait_for(lambda: (lambda cpu: set(cpu) == {there} and cpu[there] > 0.2)(
            self.guest_cpu(burners[moved])), 60, message='%s\'s CPU time on %s\'s '
            'exporter only' % (moved, cool))

        def settled():
            now = self.host_cpu()
            drop = before[hot] - now[hot]
            return now if abs(drop - share[moved]) <= 0.4 * share[moved] and \
                now[cool] >= 0.5 * share[moved] else None
        after = base.wait_for(settled, 90, interval=3, message='%s cooler by about '
                              '%s\'s share %.2f, %s warmer (before %r)' % (
                                  hot, moved, share[moved], cool, before))
        print('closed loop: score CPU %% %r; %s moved %s -> %s in %.1f s (journal); '
              'host CPU %s %.2f -> %.2f, %s %.2f -> %.2f; its share %.2f' % (
                  scored, moved, hot, cool, done['duration'], hot, before[hot],
                  after[hot], cool, before[cool], after[cool], share[moved]))

    def test_2_a_migration_that_cannot_converge_is_aborted(self):
        source, dest = self.cool, self.hot
        server = boot('real-dirty-1', 'devcloud-guest-dirty', source)
        self.ids['real-dirty-1'] = server['id']
        self.addCleanup(base.openstack, 'server', 'delete', '--wait', server['id'],
                        parse=False, check=False)
        instance = server['OS-EXT-SRV-ATTR:instance_name']
        self.beating('real-dirty-1', 0, timeout=120)  # its working set is being written
        target = os.path.join(self.tmp, 'target.yaml')
        with open(target, 'w') as f:
            yaml.safe_dump({'real-dirty-1': dest}, f)
        plan = os.path.join(self.tmp, 'plan.json')
        base.openstack('leveller', 'plan', '--target-placement', target,
                       '--ceiling', '2', '--output-file', plan)

        exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
        stderr = open(os.path.join(self.tmp, 'stderr'), 'w+')
        self.addCleanup(stderr.close)
        run = subprocess.Popen(
            [exe, '--os-cloud', 'devcloud', 'leveller', 'apply', '--config',
             self.config, '-f', 'json', plan, '--placement-plan', '--ceiling', '2',
             '--timeout', str(ABORT_AFTER)],
            stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        # Capped on the source's libvirt daemon once its job runs: for
        # this one migration of this one guest (Nova's
        # [libvirt]live_migration_bandwidth would cap every migration of
        # that compute, and needs it restarted).
        base.wait_for(lambda: 'Unbounded' in self.virsh(
            source, 'domjobinfo', instance).stdout, 60, interval=0.2,
            message='the migration job on %s' % source)
        capped = self.virsh(source, 'migrate-setspeed', instance, str(CAPPED_MIBS))
        self.assertEqual(0, capped.returncode, capped.stderr)
        out, _ = run.communicate(timeout=ABORT_AFTER + 300)
        stderr.seek(0)
        err = stderr.read()

        self.assertEqual(3, run.returncode, err)
        [row] = json.loads(out)
        self.assertEqual('aborted', row['Status'], row)
        self.assertIn('migration cancelled', row['Reason'])
        # ACTIVE on its source, no task, and Nova's record says it ended.
        shown = self.server('real-dirty-1')
        self.assertEqual(('ACTIVE', source, None), (
            shown['status'], shown['OS-EXT-SRV-ATTR:host'],
            shown['OS-EXT-STS:task_state']))
        migrations = base.connection().compute.get(
            '/os-migrations', params={'instance_uuid': server['id']},
            microversion='2.80').json()['migrations']
        [record] = [m for m in migrations if m['migration_type'] == 'live-migration']
        self.assertEqual('cancelled', record['status'])
        self.assertEqual('running', self.virsh(source, 'domstate', instance).stdout.strip())
        self.assertNotEqual(0, self.virsh(dest, 'domstate', instance).returncode)
        # and the guest went on running
        self.beating('real-dirty-1', self.beats('real-dirty-1'))

        # Progress: Nova's figures on stderr while it ran, the last ones
        # in the journal.
        lines = [tuple(int(x) for x in m) for m in PROGRESS.findall(err)]
        self.assertGreaterEqual(len(lines), 2, err)
        self.assertTrue(all(abs(total - GUEST_MIB) <= 2 for _, total, _ in lines), lines)
        self.assertGreater(lines[-1][0], lines[0][0], lines)
        [aborted] = self.journal('aborted')
        [abort] = self.journal('abort')
        self.assertEqual(str(record['id']), aborted['migration_id'])
        last = (aborted['memory_processed_mb'], aborted['memory_total_mb'],
                aborted['memory_remaining_mb'])
        self.assertTrue(all(isinstance(v, float) for v in last), aborted)
        # the last figures seen: at least those of the last line, from the
        # same migration (its total)
        self.assertGreaterEqual(last[0], lines[-1][0] - 1, (last, lines))
        self.assertLessEqual(abs(lines[-1][1] - last[1]), 1, (last, lines))
        seconds = (_when(aborted) - _when(abort))
        print('abort: apply asked Nova after %.0f s (timeout %d s), aborted %.1f s later; '
              'last figures %.0f of %.0f MiB sent, %.0f MiB remaining; %d progress lines' % (
                  aborted['duration'] - seconds, ABORT_AFTER, seconds, last[0], last[1],
                  last[2], len(lines)))

    def test_3_evacuate_and_restore(self):
        drained, other = self.cool, self.hot
        self.addCleanup(base.openstack, 'compute', 'service', 'set', '--enable',
                        drained, 'nova-compute', parse=False, check=False)
        on_it = sorted(n for n, h in self.hosts().items() if h == drained)
        self.assertEqual(2, len(on_it), self.hosts())  # idle-1 and test_1's burner
        beats = {name: self.beating(name, 0) for name in on_it}

        code, rows, err = self.evacuate(drained, '--reason', 'real guests')
        self.assertEqual(0, code, err)
        self.assertEqual({(n, 'done') for n in on_it},
                         {(r['Server'], r['Status']) for r in rows}, rows)
        hosts = self.hosts()
        self.assertEqual([], [n for n, h in hosts.items() if h == drained])
        for name in on_it:
            self.assertEqual(other, hosts[name])
            beats[name] = self.beating(name, beats[name])
        drain = {r['Server']: r['Duration (s)'] for r in rows}
        # Each move waited for as long as Nova's history says it takes
        # (test_1's move is in it): its estimate, three times over, at
        # least 60 s, within the 900 s timeout; never the timeout alone.
        started = self.journal('migrate')
        self.assertEqual(len(on_it), len(started), started)
        for record in started:
            self.assertGreater(record['estimate_seconds'], 0, record)
            self.assertAlmostEqual(min(900, max(60, 3 * record[
                'estimate_seconds'])), record['wait_seconds'], delta=0.5,
                msg=record)
        self.assertIn(' expected, waits up to ', err)
        estimates = {r['server']: r['estimate_seconds'] for r in started}

        code, rows, err = self.evacuate(drained, '--restore', '--move-back')
        self.assertEqual(0, code, err)
        self.assertEqual({(n, 'done') for n in on_it},
                         {(r['Server'], r['Status']) for r in rows}, rows)
        hosts = self.hosts()
        for name in on_it:
            self.assertEqual(drained, hosts[name])
            self.assertEqual('ACTIVE', self.server(name)['status'])
            self.beating(name, beats[name])
        service = base.openstack('compute', 'service', 'list', '--host', drained,
                                 '--service', 'nova-compute')[0]
        self.assertEqual('enabled', service['Status'])
        print('evacuate %s: %r (estimates %r); back: %r' % (
            drained, drain, estimates,
            {r['Server']: r['Duration (s)'] for r in rows}))


def _when(record):
    """A journal record's time, in seconds since the epoch."""
    return datetime.datetime.fromisoformat(record['time'].replace('Z', '+00:00')).timestamp()
