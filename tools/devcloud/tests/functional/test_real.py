"""The real hypervisors (devcloud start --real 2): QEMU guests under Nova's
libvirt driver, live-migrated by Nova, watched by Debian's libvirt exporter.

Skipped unless the devcloud runs at least two of them. One guest
(devcloud-guest, real.128, no network) is booted on the first for the
class; each test leaves it ACTIVE wherever it is.
"""

import os
import re
import subprocess
import time
import unittest

from devcloud.tests.functional import base

BEAT = re.compile(r'devcloud-guest: beat (\d+) uptime')


def real_hypervisors():
    """{service host: os-hypervisors entry} of those on the libvirt driver."""
    response = base.connection().compute.get('/os-hypervisors/detail', microversion='2.87')
    return {h['service']['host']: h for h in response.json()['hypervisors']
            if h['hypervisor_type'] != 'fake'}


def virsh(host_ip, *args):
    return subprocess.run(['virsh', '-c', 'qemu+tcp://%s/system' % host_ip] + list(args),
                          capture_output=True, text=True, timeout=60)


class TestRealHypervisors(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if 'OS_CLIENT_CONFIG_FILE' not in os.environ:
            raise RuntimeError('OS_CLIENT_CONFIG_FILE is not set: run the tests with '
                               'tox -e functional (or devcloud check)')
        cls.real = real_hypervisors()
        if len(cls.real) < 2:
            raise unittest.SkipTest('fewer than two real hypervisors (devcloud start --real 2)')
        cls.hosts = sorted(cls.real)
        started = time.monotonic()
        server = base.openstack(
            '--os-compute-api-version', '2.37', 'server', 'create', '--image',
            'devcloud-guest', '--flavor', 'real.128', '--nic', 'none',
            '--availability-zone', 'nova:%s' % cls.hosts[0], '--wait', 'realhv-selfcheck')
        cls.server = server['id']
        cls.boot_seconds = time.monotonic() - started
        cls.addClassCleanup(base.openstack, 'server', 'delete', '--wait', cls.server,
                            parse=False, check=False)
        cls.instance = server['OS-EXT-SRV-ATTR:instance_name']

    def show(self):
        return base.openstack('server', 'show', self.server)

    def beats(self):
        """The guest's last heartbeat number in its console log, or 0."""
        text = base.openstack('console', 'log', 'show', self.server, parse=False).stdout
        found = BEAT.findall(text)
        return int(found[-1]) if found else 0

    def domain_state(self, host):
        result = virsh(self.real[host]['host_ip'], 'domstate', self.instance)
        return result.stdout.strip() if result.returncode == 0 else None

    def test_the_guest_runs_on_its_hypervisor(self):
        server = self.show()
        self.assertEqual('ACTIVE', server['status'])
        host = server['OS-EXT-SRV-ATTR:host']
        self.assertIn(host, self.real)
        self.assertEqual('running', self.domain_state(host))
        first = base.wait_for(self.beats, 120, message='a heartbeat on the console')
        base.wait_for(lambda: self.beats() > first, 30, message='the next heartbeat')
        print('boot: ACTIVE after %.1f s' % self.boot_seconds)

    def test_nova_live_migrates_the_running_guest(self):
        source = self.show()['OS-EXT-SRV-ATTR:host']
        dest = next(h for h in self.hosts if h != source)
        before = base.wait_for(self.beats, 120, message='a heartbeat before the move')
        started = time.monotonic()
        base.openstack('--os-compute-api-version', '2.30', 'server', 'migrate',
                       '--live-migration', '--host', dest, '--wait', self.server,
                       parse=False)
        seconds = time.monotonic() - started
        server = self.show()
        self.assertEqual(('ACTIVE', dest, self.real[dest]['hypervisor_hostname']),
                         (server['status'], server['OS-EXT-SRV-ATTR:host'],
                          server['OS-EXT-SRV-ATTR:hypervisor_hostname']))
        migrations = [m for m in base.connection().compute.migrations(
            instance_uuid=self.server) if m.migration_type == 'live-migration']
        last = max(migrations, key=lambda m: m.created_at)
        self.assertEqual(('completed', source, dest),
                         (last.status, last.source_compute, last.dest_compute))
        # the guest itself moved, and kept running: QEMU on the destination's
        # daemon, none on the source's, and its heartbeat goes on counting
        self.assertEqual('running', self.domain_state(dest))
        self.assertIsNone(self.domain_state(source))
        base.wait_for(lambda: self.beats() > before, 30,
                      message='a heartbeat after the move')
        print('live migration %s -> %s: %.1f s (openstack server migrate --wait)' % (
            source, dest, seconds))

    def test_exporters_serve_the_guest_and_its_host(self):
        host = self.show()['OS-EXT-SRV-ATTR:host']
        query = 'libvirt_domain_info_cpu_time_seconds_total{uuid="%s"}' % self.server
        first = base.wait_for(lambda: base.promql(query), 60,
                              message='the guest\'s CPU time in Prometheus')
        self.assertEqual([self.server], list(first))
        later = base.wait_for(
            lambda: (lambda now: now if now.get(self.server, 0) > first[self.server]
                     else None)(base.promql(query)), 30, message='its CPU time growing')
        self.assertGreater(later[self.server], first[self.server])
        # the host's series: derived from its guests, named by its service host
        cpu = base.wait_for(
            lambda: base.by_host('1 - avg by (instance, job) '
                                 '(rate(node_cpu_seconds_total{mode="idle"}[10s]))'),
            60, message='node series of the real hypervisors')
        self.assertTrue(set(self.hosts) <= set(cpu), cpu)
        self.assertGreater(cpu[host], 0.0)
