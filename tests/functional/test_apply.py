"""openstack leveller apply against the devcloud's real Nova and Placement."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import requests
import yaml
from prometheus_client import parser

from tests.functional import base

DESTINATIONS = ('hv02', 'hv03', 'hv04')  # service hosts (nodes: self.node)


class ApplyTestCase(base.DevcloudTestCase):
    SCENARIO = 'hot-host'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Right after a load the host series lag the new servers (the rate
        # window is 30 s): wait until the leveller itself sees hv01 hot.
        base.wait_for(lambda: base.openstack('leveller', 'plan',
                                             '--max-moves', '1'),
                      120, interval=5, message='a plan with a move on the '
                      'freshly loaded hot-host scenario')

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.journal_path = self.path('journal.jsonl')
        self.config = self.path('leveller.yaml')
        with open(self.config, 'w') as f:
            yaml.safe_dump({'apply': {
                'journal': self.journal_path, 'poll_interval': 0.5,
                'lock_file': self.path('apply.lock')}}, f)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def apply(self, *args):
        """(exit code, rows, stderr) of one apply run."""
        result = base.openstack('leveller', 'apply', '--config', self.config,
                                '-f', 'json', *args, parse=False, check=False,
                                timeout=600)
        rows = json.loads(result.stdout) if result.stdout.strip() else []
        return result.returncode, rows, result.stderr

    def apply_in_background(self, *args):
        exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
        process = subprocess.Popen(
            [exe, '--os-cloud', 'devcloud', 'leveller', 'apply', '--config',
             self.config, '-f', 'json'] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        base.wait_for(lambda: 'migrate' in self.events(), 120,
                      interval=0.5, message='the background run to migrate')
        return process

    def journal(self):
        if not os.path.exists(self.journal_path):
            return []
        with open(self.journal_path) as f:
            return [json.loads(line) for line in f]

    def events(self):
        return [e['event'] for e in self.journal()]

    def plan_file(self, *args):
        path = self.path('plan-%d.json' % time.monotonic_ns())
        base.openstack('leveller', 'plan', '--output-file', path, *args)
        with open(path) as f:
            document = json.load(f)
        self.assertTrue(document['moves'], 'the plan has no moves')
        return path, document

    def host_of(self, server):
        """The server's compute service host (hv01)."""
        return base.openstack('server', 'show', server)['OS-EXT-SRV-ATTR:host']

    def node_of(self, server):
        """The server's hypervisor (hv01.devcloud.test), as plans name it."""
        return base.openstack('server', 'show', server)[
            'OS-EXT-SRV-ATTR:hypervisor_hostname']

    def fault_all(self, *fault):
        for host in DESTINATIONS:
            base.devcloud('fault', host, *fault)
            self.addCleanup(base.devcloud, 'fault', host, 'clear')


class TestApplyGuards(ApplyTestCase):
    def test_dry_run_changes_nothing(self):
        before = {s['Name']: s['Host'] for s in base.openstack(
            'server', 'list', '--all-projects', '--long')}
        code, rows, err = self.apply('--dry-run')
        self.assertEqual(0, code, err)
        self.assertTrue(rows)
        self.assertEqual({'would run'}, {r['Status'] for r in rows})
        after = {s['Name']: s['Host'] for s in base.openstack(
            'server', 'list', '--all-projects', '--long')}
        self.assertEqual(before, after)
        self.assertNotIn('migrate', self.events())

    def test_failed_migration_is_reported_and_the_server_stays(self):
        self.fault_all('fail-incoming')
        code, rows, err = self.apply('--batch', '1')
        self.assertEqual(3, code, err)
        self.assertEqual('failed', rows[0]['Status'])
        self.assertIn('the server is ACTIVE on %s' % self.node['hv01'],
                      rows[0]['Reason'])
        server = base.openstack('server', 'show', rows[0]['Server'])
        self.assertEqual('hv01', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('ACTIVE', server['status'])
        # Nova's own record: the migration failed, towards the faulty host.
        last = max(base.connection().compute.migrations(
            instance_uuid=server['id']), key=lambda m: m.created_at)
        self.assertEqual('failed', last.status)
        self.assertNotEqual('hv01', last.dest_compute)
        failed = [e for e in self.journal() if e['event'] == 'failed']
        self.assertEqual(rows[0]['Server'], failed[0]['server'])
        self.assertEqual(3, self.journal()[-1]['exit_code'])

    def test_server_moved_by_hand_is_skipped(self):
        path, document = self.plan_file('--max-moves', '1')
        move = document['moves'][0]
        self.assertEqual(self.node['hv01'], move['source'])
        elsewhere = next(h for h in DESTINATIONS
                         if self.node[h] != move['destination'])
        base.openstack('server', 'migrate', '--live-migration', '--host',
                       elsewhere, '--wait', move['server_id'], parse=False)
        code, rows, err = self.apply(path)
        self.assertEqual(6, code, err)  # its every move skipped
        self.assertEqual('skipped', rows[0]['Status'])
        self.assertIn('it is now on %s, not on the planned source %s' % (
            self.node[elsewhere], self.node['hv01']), rows[0]['Reason'])
        self.assertIn('The cloud changed since the plan was made', err)

    def test_a_tampered_plan_cannot_steer_the_migration(self):
        # The plan file names another compute host for the move and turns
        # the balancing plan into a target placement: the placement is
        # refused, and the host sent to Nova is the destination's own.
        path, document = self.plan_file('--max-moves', '1')
        move = document['moves'][0]
        decoy = next(h for h in DESTINATIONS
                     if self.node[h] != move['destination'])
        placement = dict(document, kind='placement')
        with open(path, 'w') as f:
            json.dump(placement, f)
        code, rows, err = self.apply(path)
        self.assertEqual(1, code, err)
        self.assertIn('is a path to a target placement (kind placement)',
                      err)
        self.assertNotIn('migrate', self.events())
        tampered = dict(document, moves=[dict(
            move, destination_host=decoy, server_name='not-its-name')])
        with open(path, 'w') as f:
            json.dump(tampered, f)
        code, rows, err = self.apply(path)
        self.assertEqual(0, code, err)
        self.assertEqual('done', rows[0]['Status'], rows[0]['Reason'])
        sent = [e for e in self.journal() if e['event'] == 'migrate']
        self.assertEqual([self.host[move['destination']]],
                         [e['destination_host'] for e in sent])
        self.assertEqual(move['destination'], self.node_of(move['server_id']))
        self.assertNotEqual(decoy, self.host_of(move['server_id']))

    def test_cooldown_stops_a_second_move(self):
        path, document = self.plan_file('--max-moves', '1')
        code, rows, err = self.apply(path)
        self.assertEqual(0, code, err)
        self.assertEqual('done', rows[0]['Status'], rows[0]['Reason'])
        moved = document['moves'][0]
        now_on = self.node_of(moved['server_id'])
        self.assertEqual(moved['destination'], now_on)
        self.assertEqual(self.host[now_on], moved['destination_host'])
        # The same server, planned again from where it is now.
        again = dict(document, moves=[dict(
            moved, source=now_on, destination=self.node['hv01'],
            destination_host='hv01')])
        with open(path, 'w') as f:
            json.dump(again, f)
        code, rows, err = self.apply(path)
        self.assertEqual(6, code, err)  # its every move skipped
        self.assertEqual('skipped', rows[0]['Status'])
        self.assertIn('inside the 6 h cooldown', rows[0]['Reason'])
        self.assertEqual(now_on, self.node_of(moved['server_id']))

    def test_a_target_placement_runs_even_inside_the_cooldown(self):
        home = self.host_of('web-1')
        away = next(h for h in DESTINATIONS if h != home)
        for target in (away, home):  # the way back is inside the cooldown
            path = self.path('target-%s.yaml' % target)
            with open(path, 'w') as f:  # a service host: accepted too
                yaml.safe_dump({'web-1': target}, f)
            plan = self.path('path-%s.json' % target)
            # The hot host may be above the default ceiling of 0.85.
            base.openstack('leveller', 'plan', '--target-placement', path,
                           '--ceiling', '2', '--output-file', plan)
            with open(plan) as f:
                self.assertEqual('placement', json.load(f)['kind'])
            code, rows, err = self.apply(plan, '--placement-plan',
                                         '--ceiling', '2')
            self.assertEqual(0, code, err)
            self.assertEqual([('web-1', self.node[target], 'done')],
                             [(r['Server'], r['Destination'], r['Status'])
                              for r in rows])
            self.assertEqual(target, self.host_of('web-1'))

    def test_second_run_is_refused(self):
        self.fault_all('slow-incoming', '20')
        first = self.apply_in_background('--batch', '1')
        code, rows, err = self.apply('--batch', '1')
        self.assertEqual(4, code, err)
        self.assertIn('Refused: another leveller run holds the lock', err)
        # Another machine (another lock) still sees Nova's running migration.
        with open(self.config) as f:
            settings = yaml.safe_load(f)
        settings['apply']['lock_file'] = self.path('other.lock')
        with open(self.config, 'w') as f:
            yaml.safe_dump(settings, f)
        code, rows, err = self.apply('--batch', '1')
        self.assertEqual(4, code, err)
        self.assertIn('1 migration already running', err)
        out, err = first.communicate(timeout=300)
        self.assertEqual(0, first.returncode, err)
        self.assertEqual('done', json.loads(out)[0]['Status'])

    def test_server_deleted_mid_run(self):
        self.fault_all('slow-incoming', '30')
        run = self.apply_in_background('--batch', '1')
        server = next(e for e in self.journal()
                      if e['event'] == 'migrate')['server_id']
        base.openstack('server', 'delete', '--wait', server, parse=False)
        out, err = run.communicate(timeout=300)
        self.assertEqual(3, run.returncode, err)
        row = json.loads(out)[0]
        self.assertEqual('failed', row['Status'])
        self.assertIn('deleted during its migration', row['Reason'])

    def test_two_controllers_one_acts(self):
        """The same job on two controllers (their own lock files and
        journals), started together: one takes the cloud lock and moves,
        the other is refused, and so is the next run in the interval."""
        configs = []
        for name in ('ctl1', 'ctl2'):
            os.makedirs(self.path(name))
            configs.append(self.path(name + '/leveller.yaml'))
            with open(configs[-1], 'w') as f:
                # A move whatever the class's earlier tests moved: no
                # threshold, no cooldown.
                yaml.safe_dump({'threshold': 0, 'cooldown': 0,
                                'cooldown_max': 0, 'apply': {
                                    'journal': self.path(
                                        name + '/journal.jsonl'),
                                    'lock_file': self.path(
                                        name + '/apply.lock'),
                                    'poll_interval': 0.5,
                                    'cloud_lock': '10m'}}, f)
        self.addCleanup(self.remove_cloud_lock)
        exe = os.path.join(os.path.dirname(sys.executable), 'openstack')
        runs = [subprocess.Popen(
            [exe, '--os-cloud', 'devcloud', 'leveller', 'apply', '--config',
             path, '--batch', '1', '-f', 'json'], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True) for path in configs]
        for run in runs:
            self.addCleanup(lambda r=run: r.poll() is None and r.kill())
        ended = [run.communicate(timeout=600) + (run.returncode,)
                 for run in runs]
        self.assertEqual([0, 4], sorted(code for _, _, code in ended), ended)
        won = next(i for i, (_, _, code) in enumerate(ended) if code == 0)
        out, err, _ = ended[won]
        statuses = [r['Status'] for r in json.loads(out)]
        self.assertEqual(['done'] + ['not started'] * (len(statuses) - 1),
                         statuses)  # --batch 1
        self.assertIn('holds the cloud lock', ended[1 - won][1])
        journals = []
        for name in ('ctl1', 'ctl2'):
            with open(self.path(name + '/journal.jsonl')) as f:
                journals.append([json.loads(line) for line in f])
        self.assertEqual([1, 0], [
            sum(e['event'] == 'migrate' for e in journals[i])
            for i in (won, 1 - won)])
        # Nova keeps the winner's lock: an aggregate without hosts.
        lock = self.cloud_lock()
        self.assertEqual([], lock['hosts'])
        self.assertIn(journals[won][0]['request_id'],
                      lock['metadata']['osc_leveller_holder'])
        # The loser's next run in the same interval is refused again.
        code, rows, err = self.apply_with(configs[1 - won], '--batch', '1')
        self.assertEqual(4, code, err)
        self.assertIn('until', err)

    def apply_with(self, config_path, *args):
        result = base.openstack('leveller', 'apply', '--config', config_path,
                                '-f', 'json', *args, parse=False, check=False,
                                timeout=600)
        return result.returncode, result.stdout, result.stderr

    def cloud_lock(self):
        found = base.connection().compute.get('/os-aggregates').json()
        return next((a for a in found['aggregates']
                     if a['name'] == 'osc-leveller-apply-lock'), None)

    def remove_cloud_lock(self):
        lock = self.cloud_lock()
        if lock is not None:
            base.connection().compute.delete('/os-aggregates/%d' % lock['id'])


class TestWholeExchange(ApplyTestCase):
    """A class of its own: it needs hv01 hot as the scenario loads it,
    which the other classes' moves change."""

    def calm_hv01(self):
        """hv01's busy servers at 40 %, so that it is hot but not
        saturated (no move onto a saturated hypervisor passes): 6 x 4 x 0.4
        + 2 x 2 x 0.9 at most, and the host's own, of 16 threads. The
        scenario's load back at cleanup."""
        busy = sorted(s['Name'] for s in base.openstack(
            'server', 'list', '--all-projects', '--long')
            if s['Name'].startswith('busy-'))

        def load(cpu):
            for name in busy:
                base.openstack('server', 'set', '--property',
                               'devcloud:cpu=%s' % cpu, name, parse=False)
        self.addCleanup(load, '0.9')
        load('0.4')

        def calm():
            rows = base.openstack('leveller', 'score')
            cpu = {r['Hypervisor']: r['CPU %'] for r in rows}
            return cpu[self.node['hv01']] < 95
        base.wait_for(calm, 120, interval=5, message='hv01 below its threads')

    def test_whole_exchange_runs_in_one_batch(self):
        # An exchange as the planner writes it when no single move helps:
        # a busy server of hv01 parks, an idle one takes its place, the busy
        # one moves on. Its second move follows a migration seconds old.
        self.calm_hv01()

        def planned():  # the runs before it moved servers: their rates lag
            path = self.path('plan-%d.json' % time.monotonic_ns())
            base.openstack('leveller', 'plan', '--output-file', path,
                           '--max-moves', '1')
            with open(path) as f:
                document = json.load(f)
            return (path, document) if document['moves'] else None
        path, document = base.wait_for(planned, 120, interval=5,
                                       message='a plan with a move')
        busy = document['moves'][0]
        hot = self.host[busy['source']]  # service hosts from here on
        # server list --long: Host is the hypervisor (node) name
        hosts = {s['Name']: (s['ID'], self.host[s['Host']])
                 for s in base.openstack('server', 'list', '--all-projects',
                                         '--long')}
        idle, (idle_id, cool) = next(
            (name, where) for name, where in sorted(hosts.items())
            if name.startswith('idle-') and where[1] != 'hv01')
        park = next(h for h in DESTINATIONS if h != cool)

        def move(server_id, name, source, destination):
            return dict(busy, server_id=server_id, server_name=name,
                        source=self.node[source],
                        destination=self.node[destination],
                        destination_host=destination, exchange='exchange 1',
                        reason='exchange 1 (functional test)')
        moves = [move(busy['server_id'], busy['server_name'], hot, park),
                 move(idle_id, idle, cool, hot),
                 move(busy['server_id'], busy['server_name'], park, cool)]
        for wave, entry in enumerate(moves, start=1):
            entry['wave'] = wave
        with open(path, 'w') as f:
            json.dump(dict(document, moves=moves), f)

        code, rows, err = self.apply(path, '--batch', '1', '--ceiling', '2')
        self.assertEqual(0, code, err)
        self.assertEqual(['done'] * 3, [r['Status'] for r in rows], rows)
        self.assertEqual((cool, 'hv01'), (self.host_of(busy['server_id']),
                                          self.host_of(idle_id)))


class TestCronLoop(ApplyTestCase):
    def imbalance(self):
        result = base.openstack('leveller', 'score', '--summary')
        return max(r['Imbalance'] for r in result)

    def test_batch_one_runs_lower_the_imbalance(self):
        base.wait_for(lambda: len(base.by_hypervisor(base.CPU)) >= 4, 60,
                      message='series for the 4 hypervisors')
        start = self.imbalance()
        textfiles = self.path('textfile')
        scrape = node_exporter(self, textfiles)
        moved = []
        for _ in range(4):
            code, rows, err = self.apply('--batch', '1', '--metrics-file',
                                         os.path.join(textfiles, 'l.prom'))
            self.assertEqual(0, code, err)
            # Debian's node_exporter reads the file as a cron job leaves it.
            metrics = scrape()
            self.assertEqual(0.0, metrics['node_textfile_scrape_error', ()])
            self.assertEqual(0.0, metrics[
                'openstack_leveller_last_run_exit_code', (('command',
                                                           'apply'),)])
            if not rows:
                break  # below the threshold: nothing to do
            done = [r for r in rows if r['Status'] == 'done']
            self.assertEqual(1, len(done), rows)
            self.assertNotIn(done[0]['Server'], moved)  # cooldown holds
            moved.append(done[0]['Server'])
            self.assertEqual(1.0, metrics['openstack_leveller_last_run_moves', (
                ('command', 'apply'), ('reason', 'migrated'),
                ('status', 'done'))])
            # hot-host: one balancing domain, evened out by the move.
            (before, domain), = [
                (v, labels) for (name, labels), v in metrics.items()
                if name == 'openstack_leveller_last_run_imbalance_before']
            self.assertLess(metrics[
                'openstack_leveller_last_run_imbalance_after', domain], before)
            time.sleep(10)  # the devcloud's 30 s rate window catches up
        self.assertGreaterEqual(len(moved), 2)
        base.wait_for(lambda: self.imbalance() < start * 0.7, 90,
                      interval=5, message='the imbalance to fall by 30 %')


def node_exporter(test, directory):
    """Start Debian's node_exporter with only its textfile collector on
    directory; returns scrape(): {(name, sorted labels): value}."""
    os.makedirs(directory, exist_ok=True)
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        ['/usr/bin/prometheus-node-exporter', '--collector.disable-defaults',
         '--collector.textfile',
         '--collector.textfile.directory=%s' % directory,
         '--web.listen-address=127.0.0.1:%d' % port],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    test.addCleanup(process.wait)
    test.addCleanup(process.terminate)
    url = 'http://127.0.0.1:%d/metrics' % port

    def scrape():
        text = requests.get(url, timeout=10).text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in parser.text_string_to_metric_families(text)
                for s in f.samples}

    def listening():
        try:
            return requests.get(url, timeout=2).ok
        except requests.ConnectionError:
            return False
    base.wait_for(listening, 30, interval=0.5,
                  message='node_exporter to listen')
    return scrape
