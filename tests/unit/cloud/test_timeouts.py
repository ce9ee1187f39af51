"""A stalled service ends in a clear error within the configured time.

The stand-in cloud (tests/unit/standin.py) reads a request and never
answers, or its port never completes a TCP connect; the plugin's own
connection code (cloud/connection.py, the shell's cloud selection through
a clouds.yaml) and collector must give up after the connect or read
timeout (times the retries of a read) with a message naming what stalled.
The bounds are generous: what is proven is that nothing hangs.
"""

import argparse
import os
import tempfile
import time
import unittest

from openstack.config import loader

from osc_leveller.cloud import collect
from osc_leveller.cloud import connection
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from tests.unit import builders as b
from tests.unit import standin

TIMEOUT = 1.0
SLACK = 4.0  # keystoneauth's back-off between retries, thread scheduling


class StallTest(unittest.TestCase):
    def setUp(self):
        hyps, servers = b.three_hosts()
        self.cloud = standin.StandIn(b.document(hyps, servers))
        self.cloud.start()
        self.addCleanup(self.cloud.stop)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.clouds_yaml = os.path.join(tmp.name, 'clouds.yaml')

    def config(self, extra=None):
        self.cloud.write_clouds_yaml(self.clouds_yaml, extra=extra)
        return loader.OpenStackConfig(config_files=[self.clouds_yaml],
                                      vendor_files=[])

    def collect(self, retries=0, auth_url=None):
        """Collector(...).collect() through the plugin's own connection;
        (error, seconds)."""
        extra = {'auth': dict(self.cloud.auth_args(), auth_url=auth_url)} \
            if auth_url else None
        config = self.config(extra)
        started = time.monotonic()
        with self.assertRaises(collect.CollectError) as ctx:
            conn = connection.open_connection(
                config, argparse.Namespace(cloud='standin'), {
                    'connect_timeout': TIMEOUT, 'read_timeout': TIMEOUT,
                    'retries': retries})
            collect.Collector(conn, retries=retries).collect()
        return str(ctx.exception), time.monotonic() - started


class TestCloudStalls(StallTest):
    def test_keystone_stalls(self):
        self.cloud.fault('keystone', '/v3/auth/tokens', 'stall')
        error, seconds = self.collect()
        self.assertLess(seconds, TIMEOUT + SLACK)
        self.assertIn('/v3/auth/tokens timed out', error)

    def test_nova_stalls_and_reads_are_retried(self):
        stall = self.cloud.fault('nova', '/v2.1/servers/detail', 'stall')
        error, seconds = self.collect(retries=1)
        self.assertLess(seconds, 2 * TIMEOUT + SLACK)
        self.assertIn('Nova GET /servers/detail failed', error)
        self.assertIn('timed out', error)
        self.assertEqual(2, stall.hits)  # the read, and its one retry

    def test_placement_stalls(self):
        self.cloud.fault('placement', '/resource_providers/', 'stall')
        error, seconds = self.collect()
        self.assertLess(seconds, TIMEOUT + SLACK)
        self.assertEqual('Placement answered for none of the 3 hypervisors: '
                         'hv1 (timed out), hv2 (timed out), hv3 (timed out)',
                         error)

    def test_placement_stalls_for_some_providers(self):
        # Those hypervisors are left out and named; the read goes on.
        uuids = {h['name']: h['uuid']
                 for h in self.cloud.document()['hypervisors']}
        self.cloud.fault('placement', '/resource_providers/%s/allocations'
                         % uuids['hv2'], 'stall')
        self.cloud.fault('placement', '/resource_providers/%s/'
                         % uuids['hv3'], 'status:503')
        started = time.monotonic()
        conn = connection.open_connection(
            self.config(), argparse.Namespace(cloud='standin'), {
                'connect_timeout': TIMEOUT, 'read_timeout': TIMEOUT,
                'retries': 0})
        document = collect.Collector(conn, retries=0).collect()
        self.assertLess(time.monotonic() - started, TIMEOUT + SLACK)
        self.assertEqual(['hv1'], [h['name'] for h in document['hypervisors']])
        self.assertEqual({'hv1'}, {s['hypervisor']
                                   for s in document['servers']})
        self.assertEqual('left out, Placement did not answer for them: '
                         'hv2 (timed out), hv3 (HTTP 503)',
                         document['source']['note'])

    def test_connect_that_never_completes(self):
        with standin.StalledPort() as port:
            error, seconds = self.collect(auth_url=port.url + '/v3')
        self.assertLess(seconds, TIMEOUT + SLACK)
        self.assertIn('timed out', error)
        self.assertIn('127.0.0.1:%d' % port.port, error)


class TestPrometheusStalls(unittest.TestCase):
    def test_a_stalled_prometheus_is_unreachable_in_time(self):
        with standin.StandIn(b.document(*b.three_hosts())) as cloud:
            cloud.fault('prometheus', '/api/v1/query', 'stall')
            client = prometheus.Client(cloud.prometheus_url, retries=1,
                                       timeout=TIMEOUT,
                                       connect_timeout=TIMEOUT)
            started = time.monotonic()
            with self.assertRaises(prometheus.Unreachable) as ctx:
                client.query('up')
            self.assertLess(time.monotonic() - started, 2 * TIMEOUT + SLACK)
        self.assertIn('cannot reach Prometheus at %s: ReadTimeout'
                      % cloud.prometheus_url, str(ctx.exception))

    def test_a_whole_reading_gives_up_at_the_first_stall(self):
        # Every query would stall: the reading stops at the first, so the
        # fallback costs one query's time, not one per query.
        with standin.StandIn(b.document(*b.three_hosts())) as cloud:
            cloud.fault('prometheus', '/api/v1/query', 'stall')
            reader = measure.Reader(prometheus.Client(
                cloud.prometheus_url, retries=1, timeout=TIMEOUT,
                connect_timeout=TIMEOUT))
            started = time.monotonic()
            snap = collect.Collector(cloud.connection(),
                                     metrics=reader).collect()
            seconds = time.monotonic() - started
            asked = cloud.counts['prometheus', 'GET', '/api/v1/query']
        self.assertLess(seconds, 2 * TIMEOUT + SLACK)
        self.assertEqual(2, asked)  # one query, one retry
        self.assertIn('cannot reach Prometheus at %s: ReadTimeout: load from '
                      'Placement allocations' % cloud.prometheus_url,
                      snap['source']['note'])
        self.assertEqual([None] * 3,
                         [h['metrics'] for h in snap['hypervisors']])

    def test_a_prometheus_port_that_never_connects(self):
        with standin.StalledPort() as port:
            client = prometheus.Client(port.url, retries=0, timeout=30,
                                       connect_timeout=TIMEOUT)
            started = time.monotonic()
            with self.assertRaises(prometheus.Unreachable) as ctx:
                client.query('up')
            self.assertLess(time.monotonic() - started, TIMEOUT + SLACK)
        self.assertIn('ConnectTimeout', str(ctx.exception))


class TestConnectionPool(StallTest):
    def test_parallel_placement_reads_find_a_free_connection(self):
        # 16 threads read Placement; urllib3's default pool holds 10 and
        # warns "Connection pool is full, discarding connection" beyond.
        hyps = [b.hypervisor('hv%02d' % i) for i in range(24)]
        servers = [b.server('s%02d' % i, 'hv%02d' % i) for i in range(24)]
        self.cloud.stop()
        self.cloud = standin.StandIn(b.document(hyps, servers))
        self.cloud.start()
        self.addCleanup(self.cloud.stop)
        self.cloud.fault('placement', '/resource_providers/', 'slow:0.05')
        self.cloud.write_clouds_yaml(self.clouds_yaml)
        config = loader.OpenStackConfig(config_files=[self.clouds_yaml],
                                        vendor_files=[])
        conn = connection.open_connection(
            config, argparse.Namespace(cloud='standin'), {})
        with self.assertLogs('urllib3.connectionpool', 'DEBUG') as logs:
            collect.Collector(conn).collect()
        self.assertEqual([], [line for line in logs.output
                              if 'pool is full' in line])
        self.assertGreater(len(logs.output), 48)  # it did log its requests
