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
import tempfile

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
        for result in (score, plan):
            fallback = [line for line in result.stderr.splitlines()
                        if 'Prometheus' in line]
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


class TestCounterReset(base.DevcloudTestCase):
    """A guest started again counts its CPU time from zero, as libvirt's
    does: rate() in the profile's query takes the reset, so the server
    keeps its own series and a value in 0..1, never a fallback."""

    SCENARIO = 'hot-host'

    def test_a_guest_restart(self):
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
