"""The collector against fake SDK proxies that count their calls."""

import collections
import datetime
import json
import types
import unittest
from unittest import mock

from osc_leveller.cloud import collect
from osc_leveller.core import config
from osc_leveller.core import model
from osc_leveller.core import snapshot as snapshot_io

NOW = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=datetime.timezone.utc)
NS = types.SimpleNamespace


class Response:
    def __init__(self, body, status=200):
        self.body, self.status_code = body, status
        self.headers = {}

    def json(self):
        return self.body


class FakeProxy:
    """Records every call as (method, url or name)."""

    def __init__(self, routes, lists):
        self.routes, self.lists = routes, lists
        self.calls = []

    def get(self, url, **kwargs):
        self.calls.append(('GET', url.split('?')[0]))
        body = self.routes(url, kwargs.get('params') or {})
        return Response(body)

    def __getattr__(self, name):
        if name not in self.lists:
            raise AttributeError(name)

        def listing(*args, **kwargs):
            self.calls.append(('list', name))
            return iter(self.lists[name])
        return listing


def cloud(n_hosts, groups=3, group_page=None):
    hosts = ['hv%02d' % i for i in range(n_hosts)]
    rps = [NS(id='rp-%s' % h, name=h, parent_provider_id=None)
           for h in hosts]
    rps.append(NS(id='rp-gpu', name='hv00_gpu', parent_provider_id='rp-hv00'))
    servers = [NS(id='s%d' % i, name='vm%d' % i, project_id='p1',
                  hypervisor_hostname=hosts[i % n_hosts],
                  compute_host=hosts[i % n_hosts], status='ACTIVE',
                  task_state=None, is_locked=False,
                  flavor={'original_name': 'm1', 'vcpus': 2, 'ram': 4096,
                          'disk': 20, 'ephemeral': 0, 'swap': 0,
                          'extra_specs': {}},
                  image=NS(id='img'), metadata={}, tags=[],
                  pinned_availability_zone=None)
               for i in range(2 * n_hosts)]
    services = [NS(host=h, status='enabled', state='up', is_forced_down=False,
                   disabled_reason=None, availability_zone='az1')
                for h in hosts]
    migration = NS(id='mig-1', server_id='s0', status='running',
                   migration_type='live-migration', source_compute='hv00',
                   dest_compute='hv01', created_at='2026-11-20T11:59:00.000000',
                   updated_at=None)

    def compute_routes(url, params):
        if url.startswith('/os-hypervisors/detail'):
            return {'hypervisors': [
                {'id': 'rp-%s' % h, 'hypervisor_hostname': h,
                 'hypervisor_type': 'fake', 'service': {'host': h},
                 'cpu_info': json.dumps({'arch': 'x86_64', 'model': 'M',
                                         'features': ['avx2']})}
                for h in hosts] + [{'hypervisor_hostname': 'bm1',
                                    'hypervisor_type': 'ironic'},
                                   {'hypervisor_hostname': 'new1',
                                    'hypervisor_type': 'fake',
                                    'service': {'host': 'new1'}}]}
        if url.startswith('/os-server-groups'):
            everything = [{'id': 'g%d' % i, 'name': 'g%d' % i,
                           'policy': 'anti-affinity', 'rules': {},
                           'members': []} for i in range(groups)]
            offset, limit = params['offset'], params['limit']
            return {'server_groups': everything[offset:offset + limit]}
        raise AssertionError(url)

    def placement_routes(url, params):
        rp_id = url.split('/')[2]
        if url.endswith('/inventories'):
            return {'inventories': {
                'VCPU': {'total': 16, 'reserved': 0, 'allocation_ratio': 4.0,
                         'min_unit': 1, 'max_unit': 16, 'step_size': 1},
                'MEMORY_MB': {'total': 65536, 'reserved': 2048,
                              'allocation_ratio': 1.0, 'min_unit': 1,
                              'max_unit': 65536, 'step_size': 1}}}
        if rp_id == 'rp-gpu':
            return {'allocations': {'s0': {'resources': {'VGPU': 1}}}}
        host = rp_id[3:]
        allocations = {s.id: {'resources': {'VCPU': 2, 'MEMORY_MB': 4096}}
                       for s in servers if s.hypervisor_hostname == host}
        if host == 'hv00':
            allocations['mig-1'] = {'resources': {'VCPU': 2,
                                                  'MEMORY_MB': 4096}}
        return {'allocations': allocations}

    compute = FakeProxy(compute_routes, {
        'services': services, 'aggregates': [
            NS(name='agg-az1', hosts=hosts, metadata={
                'availability_zone': 'az1'})],
        'servers': servers, 'migrations': [migration]})
    placement = FakeProxy(placement_routes, {'resource_providers': rps})
    conn = NS(compute=compute, placement=placement,
              config=NS(name='test', region_name='RegionOne'))
    return conn


def run(conn):
    with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                           return_value=True):
        return collect.Collector(conn, workers=4).collect(now=NOW)


class TestCollect(unittest.TestCase):
    def test_document_loads_and_joins(self):
        snap = snapshot_io.parse(run(cloud(3)), origin='live')
        self.assertEqual(['hv00', 'hv01', 'hv02'],
                         [h.name for h in snap.hypervisors])
        hv00 = snap.hypervisor('hv00')
        self.assertEqual('rp-hv00', hv00.uuid)
        self.assertEqual('az1', hv00.availability_zone)
        self.assertEqual('M', hv00.cpu_model)
        self.assertEqual(frozenset(['avx2']), hv00.cpu_features)
        self.assertEqual(2048, hv00.inventories[model.MEMORY_MB].reserved)
        # two servers and the in-flight migration's source allocation
        self.assertEqual(6, hv00.usage(model.VCPU))
        self.assertEqual(6, len(snap.servers))
        self.assertEqual({'VCPU': 2, 'MEMORY_MB': 4096},
                         dict(snap.server('s1').resources))
        self.assertEqual(
            ('allocation on child resource provider hv00_gpu (VGPU)',),
            snap.server('s0').blockers)
        self.assertTrue(snap.migrations[0].in_progress)
        self.assertEqual(3, len(snap.server_groups))
        self.assertEqual('cloud', snap.source['kind'])
        self.assertEqual('left out, no resource provider in Placement: new1',
                         snap.source['note'])

    def test_compute_calls_do_not_grow_with_hypervisors(self):
        counts = []
        for hosts in (3, 30):
            conn = cloud(hosts)
            run(conn)
            counts.append((collections.Counter(conn.compute.calls),
                           len(conn.placement.calls)))
        self.assertEqual(counts[0][0], counts[1][0])
        self.assertEqual(6, sum(counts[0][0].values()))
        # Placement: the provider list, then inventories and allocations
        # for each provider (3 or 30 hypervisors plus one child).
        self.assertEqual((1 + 2 * 4, 1 + 2 * 31),
                         (counts[0][1], counts[1][1]))

    def test_server_groups_page_by_offset(self):
        conn = cloud(2, groups=5)
        with mock.patch.object(collect, 'GROUP_PAGE', 2):
            document = run(conn)
        self.assertEqual(['g0', 'g1', 'g2', 'g3', 'g4'],
                         [g['id'] for g in document['server_groups']])
        self.assertEqual(3, conn.compute.calls.count(
            ('GET', '/os-server-groups')))

    def test_old_nova_and_missing_admin_rights(self):
        conn = cloud(2)
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=False):
            with self.assertRaises(collect.CollectError) as ctx:
                collect.Collector(conn).collect(now=NOW)
        self.assertIn('microversion 2.64 or later', str(ctx.exception))

        def forbidden(**kwargs):
            raise collect.sdk_exc.ForbiddenException('403')
        conn.compute.lists = dict(conn.compute.lists)
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True), \
                mock.patch.object(conn.compute, 'services', forbidden,
                                  create=True):
            with self.assertRaises(collect.CollectError) as ctx:
                collect.Collector(conn).collect(now=NOW)
        self.assertIn('needs an admin role', str(ctx.exception))


class TestConnection(unittest.TestCase):
    def test_config_errors_say_how_to_choose_a_cloud(self):
        from openstack import exceptions as sdk_exc

        from osc_leveller.cloud import connection
        config = mock.Mock()
        config.get_one.side_effect = sdk_exc.ConfigException(
            'Cloud nope was not found.')
        with self.assertRaises(collect.CollectError) as ctx:
            connection.open_connection(config, NS(cloud='nope'))
        self.assertIn('Cloud nope was not found', str(ctx.exception))
        self.assertIn('--os-cloud', str(ctx.exception))
        config.get_one.assert_called_once_with(
            cloud='nope', argparse=mock.ANY, validate=True,
            app_name='osc-leveller')


class FakeReader:
    def __init__(self, hosts=None, problems=None, servers=None, error=None):
        self.hosts, self.problems = hosts or {}, problems or {}
        self.servers, self.error = servers or {}, error

    def host_metrics(self, names):
        if self.error:
            raise self.error
        return self.hosts, self.problems

    def server_metrics(self):
        return self.servers


class TestMetrics(unittest.TestCase):
    def collect_with(self, reader):
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True):
            return collect.Collector(cloud(2), workers=2,
                                     metrics=reader).collect(now=NOW)

    def test_measured_load_goes_into_the_snapshot(self):
        reader = FakeReader(
            hosts={'hv00': {'cpu': 0.9, 'ram': 0.5, 'cpu_pressure': 0.2}},
            problems={'hv01': 'no cpu series'},
            servers={'s1': {'cpu': 0.7, 'ram': 0.4}})
        snap = snapshot_io.parse(self.collect_with(reader))
        self.assertEqual(0.9, snap.hypervisor('hv00').metrics.cpu)
        self.assertIsNone(snap.hypervisor('hv01').metrics)
        self.assertEqual(0.7, snap.server('s1').usage.cpu)
        self.assertIn('no metrics for hv01 (no cpu series): load from '
                      'Placement allocations', snap.source['note'])

    def test_unreachable_prometheus_falls_back_and_says_so(self):
        reader = FakeReader(error=collect.prometheus.Unreachable(
            'cannot reach Prometheus at http://127.0.0.1:9: ConnectionError'))
        snap = snapshot_io.parse(self.collect_with(reader))
        self.assertIsNone(snap.hypervisor('hv00').metrics)
        self.assertIn('cannot reach Prometheus at http://127.0.0.1:9: '
                      'ConnectionError: load from Placement allocations',
                      snap.source['note'])

    def test_a_rejected_query_is_an_error(self):
        reader = FakeReader(error=collect.prometheus.PrometheusError(
            "Prometheus rejected the query 'x': parse error"))
        with self.assertRaises(collect.CollectError) as ctx:
            self.collect_with(reader)
        self.assertIn('rejected the query', str(ctx.exception))

    def reader(self, section):
        settings = config.Settings([('test', config.flatten(
            {'prometheus': section}, 'test'))])
        return collect.prometheus.reader_from_settings(
            settings.section('prometheus'))

    def test_no_url_no_reader(self):
        self.assertIsNone(self.reader({}))
        self.assertIsNone(self.reader({'url': ''}))  # --no-prometheus

    def test_reader_from_settings(self):
        reader = self.reader({
            'url': 'http://127.0.0.1:9090/', 'token': 't', 'window': '2m',
            'host_label': 'instance', 'timeout': '3', 'retries': 0,
            'queries': {'ram': 'my_ram'}})
        self.assertEqual('http://127.0.0.1:9090', reader.client.url)
        self.assertEqual('Bearer t',
                         reader.client.session.headers['Authorization'])
        self.assertEqual((3.0, 0), (reader.client.timeout,
                                    reader.client.retries))
        self.assertEqual(('2m', 'instance', 'my_ram'), (
            reader.window, reader.host_label, reader.queries['ram']))
        self.assertEqual(collect.prometheus.DEFAULT_QUERIES['cpu_pressure'],
                         reader.queries['cpu_pressure'])

    def test_credentials_in_the_url_become_basic_auth(self):
        reader = self.reader({'url': 'https://ops:s3cret@prom.example:9090'})
        self.assertEqual('https://prom.example:9090', reader.client.url)
        self.assertEqual(('ops', 's3cret'), reader.client.session.auth)

    def test_profiles_and_disabled_queries(self):
        reader = self.reader({'url': 'http://p', 'profile': 'utilisation'})
        self.assertEqual({'cpu', 'ram'}, set(reader.queries))
        reader = self.reader({'url': 'http://p',
                              'queries': {'ram_pressure': ''}})
        self.assertEqual({'cpu', 'ram', 'cpu_pressure'}, set(reader.queries))
