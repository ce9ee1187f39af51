"""The stand-in cloud (tests/unit/standin.py) against the real clients.

The collector, the actions, openstacksdk, keystoneauth, requests and the
``openstack`` shell run unmodified over HTTP on 127.0.0.1; these tests show
the stand-in answers them like the real services, and that each fault it
injects reaches a client the way a real failure would.
"""

import collections
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from importlib import resources
from unittest import mock

import requests
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import actions
from osc_leveller.cloud import collect
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.run import executor
from tests.unit import builders
from tests.unit import standin

TAKEN_AT = '2026-11-20T12:00:00Z'


def demo_slice(step=10):
    """Every step-th hypervisor of the bundled demo, with its servers.

    The whole demo (800 servers) takes seconds through openstacksdk, whose
    resource objects cost milliseconds each.
    """
    doc = json.loads(resources.files('osc_leveller.data').joinpath(
        'demo-snapshot.json').read_text(encoding='utf-8'))
    doc['hypervisors'] = doc['hypervisors'][::step]
    names = {h['name'] for h in doc['hypervisors']}
    doc['servers'] = [s for s in doc['servers'] if s['hypervisor'] in names]
    ids = {s['id'] for s in doc['servers']}
    groups = [dict(g, members=[m for m in g['members'] if m in ids])
              for g in doc['server_groups']]
    doc['server_groups'] = [g for g in groups if g['members']]
    doc['migrations'] = [m for m in doc['migrations'] if m['server_id'] in ids]
    return doc


def small_cloud():
    hyps, servers = builders.three_hosts()
    return builders.document(hyps, servers)


def normalized(document):
    """The parsed document, minus what the collector does not read and
    what the stand-in makes up for a snapshot without it (libvirt's
    hypervisor type and version, a plain image per flavor)."""
    doc = snapshot_io.to_document(snapshot_io.parse(copy.deepcopy(document)))
    for hyp in doc['hypervisors']:
        hyp['aggregates'].sort(key=lambda a: a['name'])
        del hyp['metrics']  # Prometheus; not collected
        hyp.pop('hypervisor_type', None)
        hyp.pop('hypervisor_version', None)
    for server in doc['servers']:
        del server['usage'], server['server_groups'], server['blockers']
        server.pop('image', None)
    doc.pop('images', None)
    return doc


class TestCollector(unittest.TestCase):
    def test_collects_the_snapshot_it_serves(self):
        source = demo_slice()
        # libvirt versions of an upgrade half done, as Nova says them
        for i, hyp in enumerate(source['hypervisors']):
            hyp.update(hypervisor_type='QEMU',
                       hypervisor_version=(8002000, 9000000)[i % 2])
        with standin.StandIn(source) as cloud:
            document = collect.Collector(cloud.connection()).collect(
                now=cloud.taken_at)
            self.assertEqual([], cloud.errors)
        snap = snapshot_io.parse(document, origin='the stand-in')
        self.assertEqual(len(source['servers']), len(snap.servers))
        got, want = normalized(document), normalized(source)
        self.assertEqual([h['name'] for h in want['hypervisors']],
                         [h['name'] for h in got['hypervisors']])
        for mine, theirs in zip(got['hypervisors'], want['hypervisors']):
            # name, host, uuid, zone, aggregates, service, inventories,
            # usages, CPU, traits and hypervisor type and version
            self.assertEqual(theirs, mine)
        self.assertEqual({s['id']: s for s in want['servers']},
                         {s['id']: s for s in got['servers']})
        self.assertEqual(
            [(g['id'], g['policy'], g['members']) for g in
             want['server_groups']],
            [(g['id'], g['policy'], g['members']) for g in
             got['server_groups']])
        self.assertEqual(('cloud', 'RegionOne'), (
            document['source']['kind'], document['source']['region']))

    def test_placements_endpoint_is_looked_up_once_a_read(self):
        # keystoneauth looks the endpoint up in the catalog for every
        # request made with a path: not for each provider's reads.
        from keystoneauth1 import session as ksa_session
        looked_up = collections.Counter()
        lookup = ksa_session.Session.get_endpoint

        def counted(session, *args, **kwargs):
            looked_up[kwargs.get('service_type')] += 1
            return lookup(session, *args, **kwargs)

        source = demo_slice()
        with standin.StandIn(source) as cloud:
            with mock.patch.object(ksa_session.Session, 'get_endpoint',
                                   counted):
                document = collect.Collector(cloud.connection()).collect(
                    now=cloud.taken_at)
            self.assertEqual([], cloud.errors)
            per_provider = sum(
                n for (service, _, path), n in cloud.counts.items()
                if service == 'placement' and '{id}' in path)
        # inventories, allocations and traits of each hypervisor's
        self.assertEqual(3 * len(source['hypervisors']), per_provider)
        self.assertEqual(len(source['hypervisors']),
                         len(document['hypervisors']))
        self.assertLessEqual(looked_up['placement'], 3)

    def test_images_as_glance_shows_them(self):
        source = builders.document(
            [builders.hypervisor('hv1', hypervisor_type='fake',
                                 hypervisor_version=1000)],
            [builders.server('a', 'hv1', image='img-a'),
             builders.server('b', 'hv1', image='img-gone'),
             builders.server('c', 'hv1', boot_from_volume=True)])
        source['images'] = {
            'img-a': {'name': 'cirros', 'disk_format': 'raw', 'properties': {
                'hw_architecture': 'x86_64', 'trait:CUSTOM_A': 'required'}},
            'img-gone': None}
        with standin.StandIn(source) as cloud:
            document = collect.Collector(cloud.connection()).collect(
                now=cloud.taken_at)
            conn = cloud.connection()
            answer = conn.image.get('/images/img-a').json()
            gone = conn.image.get('/images/img-gone')
            self.assertEqual(source['images'], cloud.document()['images'])
            self.assertEqual([], cloud.errors)
        # Properties are top-level keys of Glance's answer; 404 for an
        # image it does not have, with webob's JSON error page.
        self.assertEqual(('cirros', 'x86_64', 'required', 'active'), (
            answer['name'], answer['hw_architecture'],
            answer['trait:CUSTOM_A'], answer['status']))
        self.assertEqual((404, '404 Not Found'), (gone.status_code,
                                                  gone.json()['code']))
        self.assertEqual(source['images']['img-a'],
                         document['images']['img-a'])
        self.assertEqual('gone from Glance (404)',
                         document['images']['img-gone']['why'])
        hyp = document['hypervisors'][0]
        self.assertEqual(('fake', 1000), (hyp['hypervisor_type'],
                                          hyp['hypervisor_version']))
        self.assertEqual(['img-a', 'img-gone', None], [
            s.get('image') for s in document['servers']])

    def test_migrations_allocations_and_child_providers(self):
        hyps, servers = builders.three_hosts(hot_servers=2)
        # hv1 holds 4 VCPU more than its servers: the source side of the
        # running migration, whose consumer is the migration's uuid. The
        # other hypervisors' usages are their servers'.
        hyps[0]['usages'] = {'VCPU': 12, 'MEMORY_MB': 32768, 'DISK_GB': 20}
        migrations = [
            {'id': '0c8e3b2a-1111-4c1e-9a3e-000000000001',
             'server_id': 'id-hot1', 'status': 'running',
             'migration_type': 'live-migration', 'source_compute': 'cmp-hv1',
             'dest_compute': 'cmp-hv2', 'created_at': '2026-11-20T11:50:00Z',
             'updated_at': '2026-11-20T11:55:00Z'},
            # Older than the collector's 24 hours.
            {'id': 'mig-old', 'server_id': 'id-cool2-0',
             'status': 'completed', 'migration_type': 'live-migration',
             'source_compute': 'cmp-hv3', 'dest_compute': 'cmp-hv2',
             'created_at': '2026-11-18T10:00:00Z',
             'updated_at': '2026-11-18T10:05:00Z'},
            # Never updated: Nova's changes-since compares updated_at.
            {'id': 'mig-new', 'server_id': 'id-hot0', 'status': 'queued',
             'migration_type': 'live-migration', 'source_compute': 'cmp-hv1',
             'dest_compute': 'cmp-hv3', 'created_at': '2026-11-20T11:59:00Z',
             'updated_at': None}]
        source = builders.document(hyps, servers, migrations=migrations)
        children = {'hv1': [{'name': 'hv1_pci_0000_81_00_0',
                             'inventories': {'VGPU': {'total': 4}},
                             'allocations': {'id-hot0': {'VGPU': 1}}}]}
        with standin.StandIn(source, child_providers=children) as cloud:
            document = collect.Collector(cloud.connection()).collect(
                now=cloud.taken_at)
        snap = snapshot_io.parse(document)
        self.assertEqual(12, snap.hypervisor('hv1').usage('VCPU'))
        # Only the running one: one is too old, one never updated. (Its id
        # is Nova's integer id: openstacksdk maps 'id' before 'uuid'.)
        self.assertEqual([('id-hot1', 'running', 'cmp-hv1', 'cmp-hv2')], [
            (m.server_id, m.status, m.source_compute, m.dest_compute)
            for m in snap.migrations])
        self.assertTrue(snap.migrations[0].in_progress)
        self.assertEqual(
            ('allocation on child resource provider hv1_pci_0000_81_00_0 '
             '(VGPU)',), snap.server('id-hot0').blockers)
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 16384, 'DISK_GB': 10},
                         dict(snap.server('id-hot1').resources))

    def test_servers_of_other_projects_need_all_projects(self):
        with standin.StandIn(small_cloud()) as cloud:
            conn = cloud.connection()
            self.assertEqual([], list(conn.compute.servers(details=True)))
            self.assertEqual(8, len(list(conn.compute.servers(
                details=True, all_projects=True))))
        with standin.StandIn(small_cloud(), project_id='p1') as cloud:
            self.assertEqual(8, len(list(cloud.connection().compute.servers(
                details=True))))

    def test_without_the_admin_role(self):
        with standin.StandIn(small_cloud(), roles=('member',)) as cloud:
            with self.assertRaises(collect.CollectError) as ctx:
                collect.Collector(cloud.connection()).collect()
        self.assertIn('needs an admin role', str(ctx.exception))

    def test_pages_follow_next_links(self):
        with standin.StandIn(small_cloud(), max_limit=2) as cloud:
            document = collect.Collector(cloud.connection()).collect()
            counts = cloud.counts
        self.assertEqual(3, len(document['hypervisors']))
        self.assertEqual(8, len(document['servers']))
        # 3 hypervisors: 2 + 1; 8 servers: 4 full pages and an empty one.
        self.assertEqual(2, counts['nova', 'GET', '/v2.1/os-hypervisors/detail'])
        self.assertEqual(5, counts['nova', 'GET', '/v2.1/servers/detail'])

    def test_a_reset_read_is_sent_again(self):
        with standin.StandIn(small_cloud()) as cloud:
            cloud.fault('nova', '/v2.1/os-hypervisors', 'reset', times=1)
            document = collect.Collector(cloud.connection()).collect()
            self.assertEqual(
                2, cloud.counts['nova', 'GET', '/v2.1/os-hypervisors/detail'])
        self.assertEqual(3, len(document['hypervisors']))


class TestActions(unittest.TestCase):
    def test_migrations_services_and_refusals(self):
        with standin.StandIn(small_cloud()) as cloud:
            acts = actions.Actions(cloud.connection())
            since = time.time()
            acts.live_migrate('id-hot0', 'cmp-hv2')
            self.assertEqual(('ACTIVE', 'cmp-hv2', 'hv2'), (
                lambda v: (v.status, v.host, v.hypervisor))(
                    acts.server('id-hot0')))
            self.assertEqual('completed',
                             acts.migration('id-hot0', since).status)

            cloud.migration_outcome = 'running'
            acts.live_migrate('id-hot1', 'cmp-hv3')
            running = acts.migration('id-hot1', since)
            self.assertEqual('running', running.status)
            self.assertEqual('MIGRATING', acts.server('id-hot1').status)
            acts.abort('id-hot1', running.id)
            self.assertEqual('cancelled',
                             acts.migration('id-hot1', since).status)
            self.assertEqual('hv1', acts.server('id-hot1').hypervisor)

            cloud.migration_outcome = 'completed'
            acts.cold_migrate('id-hot2', 'cmp-hv3')
            self.assertEqual('VERIFY_RESIZE', acts.server('id-hot2').status)
            acts.confirm('id-hot2')
            self.assertEqual('confirmed', acts.migration(
                'id-hot2', since, cold=True).status)

            acts.set_service('cmp-hv3', False, 'maintenance')
            acts.live_migrate('id-hot3', 'cmp-hv3')  # the scheduler refuses
            self.assertEqual('error', acts.migration('id-hot3', since).status)
            with self.assertRaises(executor.ActionError) as ctx:
                acts.live_migrate('id-hot3', 'cmp-nowhere')
            self.assertIn('Compute host cmp-nowhere could not be found',
                          str(ctx.exception))
            self.assertIsNone(acts.server('no-such-server'))

            snap = snapshot_io.parse(cloud.document())
            self.assertEqual(('disabled', 'maintenance'), (
                snap.hypervisor('hv3').service.status,
                snap.hypervisor('hv3').service.disabled_reason))
            # hv1 lost hot0 and hot2 (4 VCPU each) of its six servers
            self.assertEqual(16, snap.hypervisor('hv1').usage('VCPU'))
            self.assertEqual([], cloud.errors)


class TestFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cloud = standin.StandIn(small_cloud()).start()
        cls.headers = {'X-Auth-Token': cls.cloud.token(),
                       'OpenStack-API-Version': 'compute 2.87'}
        cls.url = cls.cloud.nova_url + '/os-hypervisors/detail'

    @classmethod
    def tearDownClass(cls):
        cls.cloud.stop()

    def tearDown(self):
        self.cloud.clear_faults()

    def get(self, **kwargs):
        return requests.get(self.url, headers=self.headers, **kwargs)

    def test_non_json(self):
        self.cloud.fault('nova', '/v2.1/os-hypervisors', 'non-json')
        response = self.get()
        self.assertEqual(200, response.status_code)
        self.assertTrue(response.headers['Content-Type'].startswith(
            'text/html'))
        with self.assertRaises(ValueError):
            response.json()

    def test_wrong_shapes(self):
        expected = {
            'shape': lambda body: body is None,
            'shape:null': lambda body: body is None,
            'shape:list': lambda body: isinstance(body, list),
            'shape:string': lambda body: body['hypervisors'] == 'unexpected',
            'shape:items': lambda body: body['hypervisors'] and not any(
                isinstance(item, dict) for item in body['hypervisors']),
        }
        for kind, check in expected.items():
            fault = self.cloud.fault('nova', '/v2.1/os-hyp', kind)
            response = self.get()
            self.cloud.clear_faults(fault)
            self.assertEqual(200, response.status_code, kind)
            self.assertTrue(check(response.json()), kind)

    def test_status_with_the_services_error_bodies(self):
        self.cloud.fault('nova', '/v2.1/os-hypervisors', 'status:503')
        response = self.get()
        self.assertEqual(503, response.status_code)
        self.assertEqual(503, response.json()['serviceUnavailable']['code'])
        # through the SDK, as the collector sees it
        conn = self.cloud.connection()
        with self.assertRaises(sdk_exc.HttpException) as ctx:
            sdk_exc.raise_from_response(conn.compute.get(
                '/os-hypervisors/detail', microversion='2.87'))
        self.assertEqual(503, ctx.exception.status_code)

        self.cloud.fault('placement', '/resource_providers', 'status:409')
        response = requests.get(self.cloud.placement_url +
                                '/resource_providers', headers=self.headers)
        self.assertEqual(409, response.json()['errors'][0]['status'])

    def test_reset_is_a_connection_error(self):
        self.cloud.fault('nova', '/v2.1/os-hypervisors', 'reset')
        with self.assertRaises(requests.ConnectionError):
            self.get()

    def test_stall_is_a_read_timeout(self):
        self.cloud.fault('nova', '/v2.1/os-hypervisors', 'stall')
        start = time.monotonic()
        with self.assertRaises(requests.ReadTimeout):
            self.get(timeout=(2, 0.3))
        self.assertGreaterEqual(time.monotonic() - start, 0.29)
        self.assertLess(time.monotonic() - start, 1.5)

    def test_a_cleared_stall_answers(self):
        fault = self.cloud.fault('nova', '/v2.1/os-hypervisors', 'stall')
        result = []
        thread = threading.Thread(target=lambda: result.append(
            self.get(timeout=10).status_code))
        thread.start()
        while not fault.hits:  # the request has arrived and stalls
            time.sleep(0.01)
        self.assertEqual([], result)
        self.cloud.clear_faults(fault)
        thread.join(5)
        self.assertEqual([200], result)

    def test_slow_times_and_method(self):
        self.cloud.fault('nova', '/v2.1/os-hypervisors', 'slow:0.2', times=1)
        start = time.monotonic()
        self.assertEqual(200, self.get().status_code)
        self.assertGreaterEqual(time.monotonic() - start, 0.19)
        start = time.monotonic()
        self.assertEqual(200, self.get().status_code)  # only once
        self.assertLess(time.monotonic() - start, 0.19)
        self.cloud.fault('nova', '/v2.1/os-hypervisors', 'status:500',
                         method='POST')
        self.assertEqual(200, self.get().status_code)

    def test_unknown_faults(self):
        for kind in ('status:abc', 'shape:bad', 'slow', 'boom'):
            with self.assertRaises(ValueError):
                self.cloud.fault('nova', '/', kind)
        with self.assertRaises(ValueError):
            self.cloud.fault('cinder', '/', 'reset')

    def test_stop_ends_stalled_requests(self):
        with standin.StandIn(small_cloud()) as cloud:
            fault = cloud.fault('placement', '/', 'stall')
            errors = []

            def call():
                try:
                    requests.get(cloud.placement_url + '/', timeout=30)
                except requests.ConnectionError as exc:
                    errors.append(exc)
            thread = threading.Thread(target=call)
            thread.start()
            while not fault.hits:
                time.sleep(0.01)
            start = time.monotonic()
        thread.join(5)
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertEqual(1, len(errors))

    def test_connect_stall_is_a_connect_timeout(self):
        with standin.StalledPort() as port:
            start = time.monotonic()
            with self.assertRaises(requests.ConnectTimeout):
                requests.get(port.url, timeout=(0.3, 5))
            self.assertGreaterEqual(time.monotonic() - start, 0.29)
            self.assertLess(time.monotonic() - start, 2.0)


class TestProtocol(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cloud = standin.StandIn(small_cloud()).start()
        cls.token = cls.cloud.token()

    @classmethod
    def tearDownClass(cls):
        cls.cloud.stop()

    def nova(self, path, version=None, legacy=None):
        headers = {'X-Auth-Token': self.token}
        if version:
            headers['OpenStack-API-Version'] = 'compute ' + version
        if legacy:
            headers['X-OpenStack-Nova-API-Version'] = legacy
        return requests.get(self.cloud.nova_url + path, headers=headers)

    def test_microversions_are_honoured_and_echoed(self):
        response = self.nova('/os-hypervisors/detail', '2.87')
        self.assertEqual('compute 2.87',
                         response.headers['OpenStack-API-Version'])
        cpu_info = response.json()['hypervisors'][0]['cpu_info']
        self.assertEqual('Gen1', cpu_info['model'])  # an object since 2.28
        response = self.nova('/os-hypervisors/detail', legacy='2.27')
        self.assertEqual('2.27',
                         response.headers['X-OpenStack-Nova-API-Version'])
        self.assertEqual('Gen1', json.loads(
            response.json()['hypervisors'][0]['cpu_info'])['model'])
        self.assertEqual('compute 2.1', self.nova('/os-services').headers[
            'OpenStack-API-Version'])
        self.assertEqual('compute 2.100', self.nova(
            '/os-services', 'latest').headers['OpenStack-API-Version'])
        self.assertEqual(406, self.nova('/os-services', '2.101').status_code)
        self.assertEqual(400, self.nova('/os-services', '2.x').status_code)
        self.assertEqual(401, requests.get(
            self.cloud.nova_url + '/os-services').status_code)

    def test_sdk_field_names(self):
        conn = self.cloud.connection()
        server = conn.compute.get_server('id-hot0')
        self.assertEqual(('cmp-hv1', 'hv1', 'p1', False, 4, 'f4x16'), (
            server.compute_host, server.hypervisor_hostname,
            server.project_id, server.is_locked, server.flavor.vcpus,
            server.flavor.original_name))
        service = list(conn.compute.services(host='cmp-hv2'))[0]
        self.assertEqual(('az1', 'enabled', 'up', False), (
            service.availability_zone, service.status, service.state,
            service.is_forced_down))
        provider = next(iter(conn.placement.resource_providers(name='hv3')))
        self.assertEqual(provider.id, provider.root_provider_id)
        self.assertEqual('az1', next(iter(conn.compute.aggregates())).name)

    def test_requests_are_counted_without_ids(self):
        self.cloud.reset_counts()
        conn = self.cloud.connection(global_request_id='req-standin-test')
        collect.Collector(conn).collect()
        counts = self.cloud.counts
        self.assertEqual(collections.Counter({
            ('nova', 'GET', '/v2.1/os-services'): 1,
            ('nova', 'GET', '/v2.1/os-hypervisors/detail'): 1,
            ('nova', 'GET', '/v2.1/os-aggregates'): 1,
            ('nova', 'GET', '/v2.1/servers/detail'): 1,
            ('nova', 'GET', '/v2.1/os-server-groups'): 1,
            ('nova', 'GET', '/v2.1/os-migrations'): 1,
            ('placement', 'GET', '/resource_providers'): 1,
            ('placement', 'GET', '/resource_providers/{id}/inventories'): 3,
            ('placement', 'GET', '/resource_providers/{id}/allocations'): 3,
            ('placement', 'GET', '/resource_providers/{id}/traits'): 3,
            # Its servers are of one flavor: one plain image.
            ('glance', 'GET', '/v2/images/{id}'): 1,
        }), collections.Counter({k: v for k, v in counts.items()
                                 if k[2] not in ('/', '/v2.1', '/v3')
                                 and k[0] != 'keystone'}))
        self.assertEqual(1, counts['keystone', 'POST', '/v3/auth/tokens'])
        seen = [r for r in self.cloud.requests
                if r.template == '/v2.1/os-hypervisors/detail'][0]
        self.assertEqual('compute 2.87', seen.headers['OpenStack-API-Version'])
        self.assertEqual('req-standin-test',
                         seen.headers['X-OpenStack-Request-ID'])
        self.cloud.reset_counts()
        self.assertEqual(collections.Counter(), self.cloud.counts)


class TestPrometheus(unittest.TestCase):
    def test_instant_vectors(self):
        series = {'up': [({'hypervisor': 'hv1'}, 0.5),
                         ({'hypervisor': 'hv2'}, float('nan'))]}

        def answer(query):
            if query == 'bad(':
                raise standin.PromQLError('1:5: parse error')
            return series.get(query, [])
        with standin.StandIn(small_cloud()) as cloud:
            client = prometheus.Client(cloud.prometheus_url, retries=0)
            self.assertEqual([], client.query('up'))  # default: no series
            cloud.prometheus = answer
            samples = client.query('up')
            self.assertEqual([{'hypervisor': 'hv1'}, {'hypervisor': 'hv2'}],
                             [labels for labels, _ in samples])
            self.assertEqual(0.5, samples[0][1])
            self.assertNotEqual(samples[1][1], samples[1][1])  # NaN
            with self.assertRaises(prometheus.PrometheusError) as ctx:
                client.query('bad(')
            self.assertIn('parse error', str(ctx.exception))
            response = requests.post(cloud.prometheus_url + '/api/v1/query',
                                     data={'query': 'up'})
            self.assertEqual('vector', response.json()['data']['resultType'])
            self.assertEqual(3, cloud.counts[
                'prometheus', 'GET', '/api/v1/query'])

    def test_range_queries(self):
        with standin.StandIn(small_cloud(), prometheus=lambda q: [
                ({'hypervisor': 'hv1'}, 0.5)] if q == 'up' else []) as cloud:
            client = prometheus.Client(cloud.prometheus_url, retries=0)
            # Default: the instant answer at every time of the range.
            self.assertEqual([({'hypervisor': 'hv1'}, [
                (100.0, .5), (160.0, .5), (220.0, .5)])],
                client.query_range('up', 100, 250, 60))
            self.assertEqual([], client.query_range('down', 100, 250, 60))
            # Past 11,000 points, Prometheus' error: the client asks in
            # parts.
            response = requests.get(
                cloud.prometheus_url + '/api/v1/query_range', params={
                    'query': 'up', 'start': 0, 'end': 11001, 'step': 1})
            self.assertEqual(400, response.status_code)
            self.assertIn('exceeded maximum resolution',
                          response.json()['error'])
            self.assertEqual(11002, len(client.query_range(
                'up', 0, 11001, 1)[0][1]))
            cloud.prometheus_range = lambda q, start, end, step: [
                ({'hypervisor': 'hv2'}, [(end, float('nan')), (end, 0.25)])]
            self.assertEqual([({'hypervisor': 'hv2'}, [(220.0, .25)])],
                             client.query_range('up', 100, 250, 60))
            cloud.prometheus_range = lambda *args: (200, b'{"status": 1}')
            with self.assertRaises(prometheus.PrometheusError) as ctx:
                client.query_range('up', 100, 250, 60)
            self.assertIn('does not answer like Prometheus (HTTP 200 on '
                          '/api/v1/query_range)', str(ctx.exception))

    def test_metrics_reach_the_snapshot(self):
        # kolla-ansible's labels: instance is Nova's host_ip and a port.
        loads = {'192.0.2.2:9100': 0.9, '192.0.2.3:9100': 0.2,
                 '192.0.2.4:9100': 0.1}

        def answer(query):
            if 'libvirt' in query:
                return [({'instance': '192.0.2.2:9177', 'domain': 'i-1',
                          'job': 'libvirt_exporter',
                          'instance_id': 'id-hot0'}, 0.75)]
            return [({'instance': instance, 'job': 'node'}, value)
                    for instance, value in loads.items()]
        with standin.StandIn(small_cloud(), prometheus=answer,
                             prometheus_names=[
                                 'libvirt_domain_openstack_info']) as cloud:
            reader = measure.Reader(prometheus.Client(
                cloud.prometheus_url, retries=0))
            collector = collect.Collector(cloud.connection(), metrics=reader)
            snap = snapshot_io.parse(collector.collect())
        self.assertEqual(0.9, snap.hypervisor('hv1').metrics.cpu)
        self.assertEqual(0.1, snap.hypervisor('hv3').metrics.cpu)
        self.assertEqual(0.75, snap.server('id-hot0').usage.cpu)
        self.assertEqual('host_ip 192.0.2.2',
                         collector.coverage.rows[0].matched_by)


class TestShell(unittest.TestCase):
    def test_openstack_leveller_snapshot_with_clouds_yaml(self):
        openstack = shutil.which('openstack', path=os.path.dirname(
            sys.executable)) or shutil.which('openstack')
        if not openstack:
            self.skipTest('no openstack command')
        with standin.StandIn(small_cloud()) as cloud, \
                tempfile.TemporaryDirectory() as tmp:
            clouds_yaml = cloud.write_clouds_yaml(
                os.path.join(tmp, 'clouds.yaml'), extra={
                    'leveller': {'prometheus': {'url': ''}}})
            output = os.path.join(tmp, 'snapshot.json')
            result = subprocess.run(
                [openstack, '--os-cloud', 'standin', 'leveller', 'snapshot',
                 '--output-file', output, '-f', 'json'],
                env=cloud.shell_env(clouds_yaml), capture_output=True,
                text=True, timeout=60)
            self.assertEqual(0, result.returncode, result.stderr)
            with open(output, encoding='utf-8') as f:
                snap = snapshot_io.parse(json.load(f))
        self.assertEqual(('standin', 3, 8), (
            snap.source['cloud'], len(snap.hypervisors), len(snap.servers)))


def kolla_prometheus(hosts=('hv1', 'hv2', 'hv3'), servers=('id-hot0',)):
    """Series as kolla-ansible's Prometheus has them: node_exporter and the
    inovex libvirt exporter at Nova's host_ip (the stand-in's 192.0.2.N+1).
    """
    ip = {'hv1': '192.0.2.2', 'hv2': '192.0.2.3', 'hv3': '192.0.2.4'}
    where = {'id-hot0': 'hv1', 'id-cool2-0': 'hv2'}

    def answer(query):
        if 'libvirt' in query:
            return [({'instance': ip[where[s]] + ':9177', 'domain': 'i-' + s,
                      'job': 'libvirt_exporter', 'instance_id': s}, 0.5)
                    for s in servers]
        return [({'instance': ip[h] + ':9100', 'job': 'node',
                  'nodename': h}, 0.5) for h in hosts]
    return answer


class TestMetricsCheck(unittest.TestCase):
    def run_shell(self, cloud, tmp, *args):
        openstack = shutil.which('openstack', path=os.path.dirname(
            sys.executable)) or shutil.which('openstack')
        if not openstack:
            self.skipTest('no openstack command')
        clouds_yaml = cloud.write_clouds_yaml(
            os.path.join(tmp, 'clouds.yaml'), extra={'leveller': {
                'prometheus': {'url': cloud.prometheus_url}}})
        return subprocess.run(
            [openstack, '--os-cloud', 'standin', 'leveller'] + list(args),
            env=cloud.shell_env(clouds_yaml), capture_output=True,
            text=True, timeout=60)

    def test_the_report_and_its_exit_code(self):
        with standin.StandIn(small_cloud(), prometheus=kolla_prometheus(
                hosts=('hv1', 'hv2')), prometheus_names=[
                    'libvirt_domain_openstack_info']) as cloud, \
                tempfile.TemporaryDirectory() as tmp:
            result = self.run_shell(cloud, tmp, 'metrics', 'check',
                                    '-f', 'json')
            self.assertEqual(0, result.returncode, result.stderr)
            rows = {r['Hypervisor']: r for r in json.loads(result.stdout)}
            self.assertEqual({
                'Hypervisor': 'hv1', 'Matched By': 'host_ip 192.0.2.2',
                'Load From': 'metrics', 'Why': None, 'Pressure': True,
                'Servers': 6, 'Matched Servers': 1, 'CPU Series': 1,
                'RAM Series': 1, 'Steal Series': 1}, rows['hv1'])
            self.assertEqual(('allocations', None), (
                rows['hv3']['Load From'], rows['hv3']['Matched By']))
            self.assertIn('no node_exporter target matches it',
                          rows['hv3']['Why'])
            self.assertIn('Hypervisors: 2 of 3 scored from their own '
                          'node_exporter series (targets placed by '
                          'node_uname_info)', result.stderr)
            self.assertIn('Servers: inovex prometheus-libvirt-exporter; 1 of '
                          '8 running servers with series of their own '
                          '(CPU 1, RAM 1, CPU steal 1)', result.stderr)
            result = self.run_shell(cloud, tmp, 'metrics', 'check',
                                    '--min-hosts', '100', '-f', 'value')
            self.assertEqual(3, result.returncode, result.stderr)
            self.assertIn('Coverage below what was asked: 2 of 3 hypervisors '
                          '(67 %, at least 100 % asked)', result.stderr)
            self.assertNotIn('Traceback', result.stderr)
            result = self.run_shell(cloud, tmp, 'metrics', 'check',
                                    '--min-servers', 'nan')
            self.assertEqual(1, result.returncode)
            self.assertIn('a percentage from 0 to 100 is needed (got nan)',
                          result.stderr)
            # score says in one line what falls back, and where to look.
            result = self.run_shell(cloud, tmp, 'score', '-f', 'json')
            self.assertEqual(0, result.returncode, result.stderr)
            self.assertIn(
                "Prometheus: 1 of 3 hypervisors scored from Placement "
                "allocations (hv3: no node_exporter target matches it (tried "
                "label hostname, instance as a host name, instance as its "
                "host_ip, node_uname_info nodename)); CPU of 6 of 7 running "
                "servers from a "
                "share of their hypervisor's; RAM of 6 of 7 running servers "
                "from a share of their hypervisor's: 'openstack leveller "
                "metrics check' says why", result.stderr)

    def test_no_libvirt_exporter_names_the_profiles_looked_for(self):
        with standin.StandIn(small_cloud(), prometheus=kolla_prometheus(
                hosts=('hv1', 'hv2')), prometheus_names=[]) as cloud, \
                tempfile.TemporaryDirectory() as tmp:
            result = self.run_shell(cloud, tmp, 'metrics', 'check')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('Servers: no libvirt exporter series (none of inovex, '
                      'tinkoff, vexxhost or kumina): every server gets a '
                      'per-vCPU share of its hypervisor\'s load',
                      result.stderr)

    def test_full_coverage_says_nothing_in_score(self):
        servers = ('id-hot0', 'id-cool2-0')
        doc = small_cloud()
        doc['servers'] = [s for s in doc['servers'] if s['id'] in servers]
        for hyp in doc['hypervisors']:
            hyp['usages'] = {}
        with standin.StandIn(doc, prometheus=kolla_prometheus(
                servers=servers), prometheus_names=[
                    'libvirt_domain_openstack_info']) as cloud, \
                tempfile.TemporaryDirectory() as tmp:
            result = self.run_shell(cloud, tmp, 'metrics', 'check',
                                    '--min-hosts', '100', '--min-servers',
                                    '100', '-f', 'json')
            self.assertEqual(0, result.returncode, result.stderr)
            result = self.run_shell(cloud, tmp, 'score', '-f', 'json')
            self.assertEqual(0, result.returncode, result.stderr)
            self.assertNotIn('Prometheus', result.stderr)
