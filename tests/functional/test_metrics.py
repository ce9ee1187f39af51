"""Measured load with the exporters and labels that deployments really have.

For each devcloud flavour (tools/devcloud: its exporters emit exactly what
the real ones do, labelled as each deployment scrapes them; flavour debian
runs Debian's own node_exporter and libvirt exporter for one hypervisor),
the leveller is given only the Prometheus URL (and the devcloud's short
rate window): no queries, no labels, no profile. Every hypervisor and
every running server must be matched, the coverage report must say so and
how, and score, plan and apply must run without a fallback note.
"""

import json
import os
import re
import tempfile

from prometheus_client import parser
import yaml

from tests.functional import base

# flavour: (how node_exporter targets match, the libvirt exporter found)
FLAVOURS = {
    'kolla': ('host_ip ', 'inovex prometheus-libvirt-exporter'),
    'kolla-legacy': ('instance ', 'Tinkoff libvirt-exporter'),
    'helm': ('hostname=', 'vexxhost libvirtd_exporter'),
    'debian': ('nodename ', 'kumina libvirt_exporter'),
}
KUMINA_RAM = ('Server RAM: kumina libvirt_exporter: the exporter reports no '
              'resident or in-guest memory: a share of the hypervisor\'s')


class TestExportersAsDeployed(base.DevcloudTestCase):
    SCENARIO = 'mixed'

    @classmethod
    def tearDownClass(cls):
        base.devcloud('exporters', 'kolla')  # the other tests' flavour
        super().tearDownClass()

    def check(self):
        """The coverage report once every series is there; (rows, stderr)."""
        def covered():
            result = base.openstack(
                'leveller', 'metrics', 'check', '--min-hosts', '100',
                '--min-servers', '100', '-f', 'json', parse=False,
                check=False)
            self.assertIn(result.returncode, (0, 3), result.stderr)
            return result if result.returncode == 0 else None
        result = base.wait_for(covered, 90, interval=3,
                               message='full coverage')
        self.assertNotIn('Traceback', result.stderr)
        return json.loads(result.stdout), result.stderr

    def run_flavour(self, flavour):
        how, exporter = FLAVOURS[flavour]
        base.devcloud('exporters', flavour)
        rows, stderr = self.check()
        self.assertEqual(set(self.host), {r['Hypervisor'] for r in rows})
        running = {s['ID'] for s in base.openstack(
            'server', 'list', '--all-projects', '--status', 'ACTIVE')}
        self.assertEqual(len(running), sum(r['Servers'] for r in rows))
        for row in rows:
            name = row['Hypervisor']
            self.assertTrue(row['Matched By'].startswith(how), row)
            if how != 'host_ip ':
                self.assertIn(self.host[name], row['Matched By'])
            self.assertEqual(('metrics', None, True),
                             (row['Load From'], row['Why'], row['Pressure']),
                             row)
            self.assertEqual(row['Servers'], row['Matched Servers'], row)
            self.assertEqual(row['Servers'], row['CPU Series'], row)
            self.assertEqual(0 if flavour == 'debian' else row['Servers'],
                             row['RAM Series'], row)
            # vCPU delay: inovex and Tinkoff only.
            self.assertEqual(row['Servers'] if flavour in (
                'kolla', 'kolla-legacy') else 0, row['Steal Series'], row)
        self.assertIn('Hypervisors: 6 of 6 scored from their own '
                      'node_exporter series (targets placed by '
                      'node_uname_info)', stderr)
        self.assertIn('Servers: %s; %d of %d running servers' % (
            exporter, len(running), len(running)), stderr)
        self.assertEqual(flavour == 'debian', KUMINA_RAM in stderr)
        self.assertEqual(flavour in ('helm', 'debian'),
                         'Server CPU steal: ' in stderr, stderr)

        # score, plan and apply with the same settings: nothing falls back
        # but what the exporter cannot show (kumina's server RAM).
        score = base.openstack('leveller', 'score', '--long', '-f', 'json',
                               parse=False)
        self.assertEqual({'metrics'}, {
            r['Load Source'] for r in json.loads(score.stdout)})
        plan = base.openstack('leveller', 'plan', parse=False)
        # The guard finds healthy exporters plausible in every flavour, but
        # Debian's real node_exporter on hv01: it shows this machine's
        # CPUs and memory, not the 32 and 128 GiB Nova has.
        guarded = [line for line in plan.stderr.splitlines()
                   if 'implausible metrics' in line]
        if flavour == 'debian':
            self.assertEqual(1, len(guarded), plan.stderr)
            self.assertIn('capacity: node_exporter of %s shows ' %
                          self.node['hv01'], guarded[0])
            self.assertIn('Placement 32', guarded[0])
        else:
            self.assertEqual([], guarded, plan.stderr)
        for result in (score, plan):
            fallback = [line for line in result.stderr.splitlines()
                        if line.startswith('Note: Prometheus: ')]
            if flavour == 'debian':
                self.assertEqual(1, len(fallback), result.stderr)
                self.assertIn('RAM of', fallback[0])
                self.assertNotIn('hypervisors scored from', fallback[0])
                self.assertNotIn('CPU of', fallback[0])
            else:
                self.assertEqual([], fallback, result.stderr)
        applied = base.openstack('leveller', 'apply', '--dry-run',
                                 parse=False)
        self.assertNotIn('hypervisors scored from', applied.stderr)
        return rows, stderr

    def test_kolla(self):
        rows, _ = self.run_flavour('kolla')
        # kolla's instance label is the host's API address, Nova's host_ip.
        ips = {h['Hypervisor Hostname']: h['Host IP'] for h in base.openstack(
            'hypervisor', 'list', '--long')}
        for row in rows:
            self.assertEqual('host_ip %s' % ips[row['Hypervisor']],
                             row['Matched By'])

    def test_kolla_legacy(self):
        self.run_flavour('kolla-legacy')

    def test_openstack_helm(self):
        self.run_flavour('helm')

    def test_debian_exporters(self):
        self.run_flavour('debian')


class TestExporterFaults(base.DevcloudTestCase):
    """Faults of the exporters, on one loaded hot-host scenario (one
    balancing domain, hv01 busy: a plan moves servers off it).

    The guard cases run apply as cron does, with --batch 0 (nothing
    migrates) and a metrics file: a run that finds the metrics plausible
    is the next one's reference, and the run after each fault injected
    into the devcloud's exporters (devcloud fault HOST metrics MODE) is
    held, saying why in a Held line and in the metrics file. The leveller
    reads rates over 10 s here, so a fault shows, and goes, in seconds.
    """

    SCENARIO = 'hot-host'
    DOMAIN = 'az1/Cascadelake-Server'
    HOSTS = ('hv01', 'hv02', 'hv03', 'hv04')
    FAMILY = 'openstack_leveller_last_run_implausible_metrics'
    PLAUSIBLE = 'openstack_leveller_last_plausible_timestamp_seconds'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The reference run must see every hypervisor measured.
        base.wait_for(lambda: len(set(base.by_hypervisor(base.CPU)) -
                                  {None}) >= len(cls.HOSTS), 120,
                      message='series for the %d hypervisors' % len(
                          cls.HOSTS))
        cls.tmp = tempfile.TemporaryDirectory()
        cls.metrics_file = os.path.join(cls.tmp.name, 'leveller.prom')
        cls.config = os.path.join(cls.tmp.name, 'leveller.yaml')
        with open(cls.config, 'w') as f:
            yaml.safe_dump({'prometheus': {'window': '10s'}, 'apply': {
                'journal': os.path.join(cls.tmp.name, 'journal.jsonl'),
                'lock_file': os.path.join(cls.tmp.name, 'apply.lock')}}, f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        super().tearDownClass()

    def fault(self, mode, *hosts):
        for host in hosts:
            base.devcloud('fault', host, 'metrics', mode)
            self.addCleanup(base.devcloud, 'fault', host, 'metrics', 'clear')

    def cron(self):
        """One apply that starts no migration; (stderr, metrics file)."""
        result = base.openstack(
            'leveller', 'apply', '--batch', '0', '--config', self.config,
            '--metrics-file', self.metrics_file, parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        with open(self.metrics_file) as f:
            return result.stderr, f.read()

    def plausible(self):
        """Cron runs until one finds the metrics plausible: the reference
        of the next; its time."""
        _, text = base.wait_for(
            lambda: (lambda run: run if 'implausible' not in run[0] and
                     'Held:' not in run[0] else None)(self.cron()),
            60, interval=1, message='a run that finds the metrics plausible')
        return self.sample(text, self.PLAUSIBLE)

    def held(self, *checks, showing=None):
        """Cron runs until one is held by every check (with a Held line
        that matches the regular expression showing, when given; a fault
        may trip another finding of the check first, while rate() windows
        fill); its Held line, having checked the metrics file's line of
        each reason, and that a run held by a comparing check leaves the
        reference as it was."""
        line = 'Held: %s (imbalance ' % self.DOMAIN

        def run():
            with open(self.metrics_file) as f:
                reference = self.sample(f.read(), self.PLAUSIBLE)
            stderr, text = self.cron()
            held = [s for s in stderr.splitlines() if s.startswith(line)]
            if held and all('%s: ' % c in held[0] for c in checks) and (
                    showing is None or re.search(showing, held[0])):
                return held[0], stderr, text, reference
            return None
        held, stderr, text, reference = base.wait_for(
            run, 90, interval=1, message='a run held for %s%s' % (
                ', '.join(checks), ' showing %r' % showing if showing
                else ''))
        self.assertIn(': implausible metrics, nothing planned: ', held)
        held_for = {s.labels['reason']: s.value
                    for f in parser.text_string_to_metric_families(text)
                    for s in f.samples if s.name == self.FAMILY and
                    s.labels['domain'] == self.DOMAIN}
        for check in checks:
            self.assertEqual(1.0, held_for.get(check), check)
        # Nothing was planned there: no move even tried.
        self.assertIn('Nothing to do: implausible metrics hold every domain',
                      stderr)
        if set(checks) & {'coverage_drop', 'load_jump'}:
            self.assertEqual(reference, self.sample(text, self.PLAUSIBLE))
        return held

    def sample(self, text, family):
        line = '%s{command="apply"} ' % family
        values = [float(s[len(line):]) for s in text.splitlines()
                  if s.startswith(line)]
        return values[0] if values else None

    def test_1_no_cpus(self):
        self.plausible()
        self.fault('zero-cpus', 'hv02')
        # Without CPU series it has no metrics either (once its last CPU
        # samples leave the rate window): a quarter of the domain.
        held = self.held('capacity', 'coverage_drop')
        self.assertIn('capacity: node_exporter of %s shows no CPUs '
                      '(Placement: 16)' % self.node['hv02'], held)
        self.assertIn('coverage_drop: 3 of 4 hypervisors have metrics, 4 '
                      'had at ', held)
        # plan, without a metrics file, holds the domain as well.
        plan = base.openstack('leveller', 'plan', '--config', self.config,
                              parse=False)
        self.assertIn('Held: %s (imbalance ' % self.DOMAIN, plan.stderr)
        self.assertIn('shows no CPUs', plan.stderr)

    def test_2_scrapes_fail_for_half_the_fleet(self):
        self.plausible()
        self.fault('down', 'hv01', 'hv02')
        # Each target goes stale at its own next scrape: a run between
        # the two sees one of them lost.
        held = self.held('coverage_drop', showing='coverage_drop: 2 of 4 ')
        self.assertIn('coverage_drop: 2 of 4 hypervisors have metrics, 4 had '
                      'at ', held)
        self.assertIn('(lost: %s, %s)' % (self.node['hv01'],
                                          self.node['hv02']), held)

    def test_3_restarted_exporters_count_from_zero(self):
        """While no scrape succeeds the hypervisors have no metrics; then
        their counters start from zero, which rate() takes: not held."""
        self.plausible()
        # Every CPU counts a second a second in one mode or another.
        query = 'sum by (instance, job) (node_cpu_seconds_total)'
        counted = base.by_hypervisor(query)
        self.assertEqual(4, len(counted))
        self.fault('restart', *self.HOSTS)

        def started_again():
            now = base.by_hypervisor(query)
            return len(now) == 4 and all(now[n] < counted[n] for n in now)
        base.wait_for(started_again, 60, interval=1,
                      message='every counter started again')
        self.plausible()

    def test_4_servers_busier_than_their_vcpus(self):
        self.plausible()
        self.fault('impossible', 'hv01')
        # The host's sum may trip first, before a server's rate() shows
        # it busier than its vCPUs: the run held for the server is awaited.
        self.held('impossible_load', showing=r'impossible_load: (.*, )?'
                  r'server \S+ on %s reads [0-9.]+ times its vCPUs busy' %
                  re.escape(self.node['hv01']))

    def test_5_relabelled_node_exporter(self):
        self.plausible()
        self.fault('relabel', 'hv01')
        self.held('impossible_load', showing=r'impossible_load: (.*, )?'
                  r'the servers on %s read [0-9.]+ cores busy, its '
                  r'node_exporter [0-9.]+ of its 16' % re.escape(
                      self.node['hv01']))

    def test_6_most_of_the_domain_saturated_at_once(self):
        self.plausible()
        self.fault('saturate', 'hv02', 'hv03', 'hv04')
        held = self.held('load_jump')
        self.assertIn('load_jump: 3 of 4 hypervisors\' CPU rose by more '
                      'than 0.4 since', held)
        # Set aside the check for a run: held no more, and that run is the
        # reference from then on.
        with open(self.config) as f:
            settings = yaml.safe_load(f)
        settings['guard'] = {'checks': ['capacity', 'coverage_drop',
                                        'impossible_load']}
        accepting = os.path.join(self.tmp.name, 'accept.yaml')
        with open(accepting, 'w') as f:
            yaml.safe_dump(settings, f)
        with open(self.metrics_file) as f:
            kept = self.sample(f.read(), self.PLAUSIBLE)
        result = base.openstack(
            'leveller', 'apply', '--batch', '0', '--config', accepting,
            '--metrics-file', self.metrics_file, parse=False)
        self.assertNotIn('implausible', result.stderr)
        with open(self.metrics_file) as f:
            text = f.read()
        self.assertNotIn(self.FAMILY + '{', text)
        self.assertGreater(self.sample(text, self.PLAUSIBLE), kept)

    def test_a_guest_restart(self):
        """A guest started again counts its CPU time from zero, as
        libvirt's does: rate() in the profile's query takes the reset, so
        the server keeps its own series and a value in 0..1, never a
        fallback."""
        base.devcloud('exporters', 'kolla')
        server = base.openstack('server', 'show', 'busy-1')
        before = base.wait_for(lambda: base.by_label(
            'libvirt_domain_info_cpu_time_seconds_total', 'domain').get(
                server['OS-EXT-SRV-ATTR:instance_name']), 60,
            message='busy-1 CPU time')
        base.openstack('server', 'stop', 'busy-1', parse=False)
        base.wait_for(lambda: base.openstack(
            'server', 'show', 'busy-1')['status'] == 'SHUTOFF', 60,
            message='busy-1 SHUTOFF')
        base.openstack('server', 'start', 'busy-1', parse=False)
        base.wait_for(lambda: base.openstack(
            'server', 'show', 'busy-1')['status'] == 'ACTIVE', 60,
            message='busy-1 ACTIVE')
        domain = server['OS-EXT-SRV-ATTR:instance_name']
        base.wait_for(lambda: base.by_label(
            'libvirt_domain_info_cpu_time_seconds_total', 'domain').get(
                domain, before) < before, 30, message='the counter reset')
        result = base.openstack('leveller', 'metrics', 'check',
                                '--min-servers', '100', '-f', 'json',
                                parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        with tempfile.NamedTemporaryFile(suffix='.json') as f:
            base.openstack('leveller', 'snapshot', '--output-file', f.name)
            document = json.load(open(f.name))
        usage = {s['name']: s.get('usage') for s in
                 document['servers']}['busy-1']
        self.assertTrue(0.0 <= usage['cpu'] <= 1.0, usage)
