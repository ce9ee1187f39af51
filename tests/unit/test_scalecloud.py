"""tools/scalecloud: latency, the concurrency limit, counts, paging, timed
migrations and Prometheus series, and that the plugin sends exactly the
calls tools/scalecloud/calls.py lists (which the functional test compares
with the devcloud's answers)."""

import collections
import concurrent.futures
import json
import time
import unittest
import urllib.request

import requests

from benchmarks import generate
from osc_leveller.cloud import actions
from osc_leveller.cloud import collect
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from osc_leveller.cloud import refresh
from tools.scalecloud import calls
from tools.scalecloud import cloud as scale

SERVERS = '/v2.1/servers/detail'


def cluster(hosts=3, servers=30):
    return generate.generate(hosts, servers, seed=3)


class Client:
    """Plain requests with a token, as the plugin's adapters send them."""

    def __init__(self, cloud):
        self.cloud = cloud
        self.token = cloud.token()

    def nova(self, path, version='2.87', session=requests, **kwargs):
        return session.get(self.cloud.nova_url + path, headers={
            'X-Auth-Token': self.token,
            'OpenStack-API-Version': 'compute ' + version}, **kwargs)

    def action(self, server, body):
        return requests.post(
            '%s/servers/%s/action' % (self.cloud.nova_url, server),
            json=body, headers={'X-Auth-Token': self.token,
                                'OpenStack-API-Version': 'compute 2.56'})

    def server(self, server):
        return self.nova('/servers/' + server, '2.96').json()['server']

    def allocations(self, provider):
        return requests.get(
            '%s/resource_providers/%s/allocations' % (
                self.cloud.placement_url, provider),
            headers={'X-Auth-Token': self.token}).json()['allocations']


class TestServing(unittest.TestCase):
    def test_latency_concurrency_and_in_flight(self):
        with scale.ScaleCloud(cluster(), latency=0.1,
                              concurrency=2) as cloud:
            client = Client(cloud)
            cloud.reset_counts()
            start = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                codes = list(pool.map(
                    lambda _: client.nova('/os-services').status_code,
                    range(6)))
            elapsed = time.monotonic() - start
            # A request leaves the counts just after its answer is sent.
            deadline = time.monotonic() + 5
            while cloud.stats()['services']['nova']['in_flight'] and \
                    time.monotonic() < deadline:
                time.sleep(0.01)
            stats = cloud.stats()
        self.assertEqual([200] * 6, codes)
        # Two at a time, 0.1 s each: three rounds.
        self.assertGreaterEqual(elapsed, 0.3)
        self.assertLess(elapsed, 0.6)
        self.assertEqual(6, stats['max_in_flight'])
        self.assertEqual({'in_flight': 0, 'max_in_flight': 6,
                          'max_serving': 2, 'max_waiting': 4},
                         stats['services']['nova'])

    def test_counts_paging_and_the_admin_listener(self):
        with scale.ScaleCloud(cluster(servers=20), latency=0,
                              max_limit=7) as cloud:
            client = Client(cloud)
            ids, url = [], '/servers/detail?all_tenants=1'
            session = requests.Session()
            while url:
                body = client.nova(url.replace(cloud.nova_url, ''),
                                   session=session).json()
                ids += [s['id'] for s in body['servers']]
                url = next((link['href'] for link in
                            body.get('servers_links', ())
                            if link['rel'] == 'next'), None)
            client.nova('/os-hypervisors/%s' % 'x')  # no such hypervisor
            with urllib.request.urlopen(cloud.admin_url + '/') as response:
                summary = json.load(response)
            urllib.request.urlopen(urllib.request.Request(
                cloud.admin_url + '/reset', method='POST')).close()
            after = cloud.counts
        self.assertEqual(20, len(set(ids)))
        self.assertEqual(20, len(ids))
        counts = {(c['service'], c['method'], c['path']): c['requests']
                  for c in summary['counts']}
        # 7 + 7 + 6: three pages, the last shorter, so no link after it.
        self.assertEqual(3, counts['nova', 'GET', SERVERS])
        self.assertEqual(1, counts['nova', 'GET', '/v2.1/os-hypervisors/{id}'])
        self.assertEqual(sum(counts.values()), summary['requests'])
        self.assertEqual({}, dict(after))

    def test_timed_live_migrations_queue_per_source_and_roll_back(self):
        doc = cluster()
        source = doc['servers'][0]['host']
        moving = [s for s in doc['servers']
                  if s['host'] == source and s['status'] == 'ACTIVE'][:3]
        dest = next(h['name'] for h in doc['hypervisors']
                    if h['name'] != source)
        uuid = {h['name']: h['uuid'] for h in doc['hypervisors']}
        seconds = [s['memory_mb'] / 1024.0 for s in moving]
        with scale.ScaleCloud(doc, latency=0, bandwidth=1024.0) as cloud:
            now = [time.time()]
            cloud.clock = lambda: now[0]  # the test says when time passes
            client = Client(cloud)

            def migrations():
                return [m['status'] for m in sorted(client.nova(
                    '/os-migrations', '2.80').json()['migrations'],
                    key=lambda m: m['id'])]

            for server in moving[:2]:
                self.assertEqual(202, client.action(server['id'], {
                    'os-migrateLive': {'host': dest,
                                       'block_migration': 'auto'}}
                ).status_code)
            self.assertEqual(['MIGRATING', 'MIGRATING'], [
                client.server(s['id'])['status'] for s in moving[:2]])
            # Nova's max_concurrent_live_migrations: one at a time.
            self.assertEqual(['running', 'queued'], migrations())
            self.assertIn(moving[0]['id'], client.allocations(uuid[dest]))
            self.assertEqual(409, client.action(moving[0]['id'], {
                'os-migrateLive': {'host': dest, 'block_migration': 'auto'}
            }).status_code)  # it has a task already

            now[0] += seconds[0] - 0.01
            self.assertEqual(['running', 'queued'], migrations())
            now[0] += 0.02
            self.assertEqual(['completed', 'running'], migrations())
            moved = client.server(moving[0]['id'])
            self.assertEqual(('ACTIVE', dest, None), (
                moved['status'], moved['OS-EXT-SRV-ATTR:hypervisor_hostname'],
                moved['OS-EXT-STS:task_state']))
            held = client.allocations(uuid[source])
            self.assertNotIn(moving[0]['id'], held)
            # the second moves now; its source allocation is its migration's
            self.assertNotIn(moving[1]['id'], held)
            now[0] += seconds[1]
            self.assertEqual(['completed', 'completed'], migrations())

            cloud.failure_rate = 1.0  # every migration from now on fails
            client.action(moving[2]['id'], {'os-migrateLive': {
                'host': dest, 'block_migration': 'auto'}})
            now[0] += seconds[2]
            self.assertEqual(['completed', 'completed', 'failed'],
                             migrations())
            failed = client.server(moving[2]['id'])
            self.assertEqual(('ACTIVE', source, None), (
                failed['status'],
                failed['OS-EXT-SRV-ATTR:hypervisor_hostname'],
                failed['OS-EXT-STS:task_state']))
            self.assertIn(moving[2]['id'], client.allocations(uuid[source]))
            self.assertNotIn(moving[2]['id'], client.allocations(uuid[dest]))
            self.assertEqual([], cloud.errors)

    def test_timed_cold_migration(self):
        doc = cluster()
        server = doc['servers'][0]
        dest = next(h['name'] for h in doc['hypervisors']
                    if h['name'] != server['host'])
        # in real time: 0.1 s
        with scale.ScaleCloud(doc, latency=0, bandwidth=server[
                'memory_mb'] / 0.1) as cloud:
            client = Client(cloud)
            client.action(server['id'], {'migrate': {'host': dest}})
            self.assertEqual('RESIZE', client.server(server['id'])['status'])
            while client.server(server['id'])['status'] != 'VERIFY_RESIZE':
                time.sleep(0.02)
            self.assertEqual(204, client.action(
                server['id'], {'confirmResize': None}).status_code)
            self.assertEqual(['confirmed'], list(cloud.summary()[
                'migrations']))


class TestPrometheus(unittest.TestCase):
    def test_every_hypervisor_and_running_server_is_measured(self):
        doc = cluster()
        with scale.ScaleCloud(doc, latency=0) as cloud:
            reader = measure.Reader(prometheus.Client(cloud.prometheus_url,
                                                      retries=0))
            collector = collect.Collector(cloud.connection(), metrics=reader)
            document = collector.collect()
            self.assertEqual({}, cloud.summary()['unknown_queries'])
        running = {s['id'] for s in doc['servers'] if s['status'] == 'ACTIVE'}
        measured = {s['id']: s['usage'] for s in document['servers']
                    if s.get('usage')}
        self.assertEqual(running, set(measured))
        by_id = {s['id']: s for s in doc['servers']}
        for server_id, usage in measured.items():
            self.assertEqual((by_id[server_id]['cpu_util'],
                              by_id[server_id]['mem_util']),
                             (usage['cpu'], usage['ram']))
        self.assertTrue(all(h['metrics'] for h in document['hypervisors']))
        # Nothing falls back (an image gone from Glance is no metric).
        self.assertFalse([part for part in document['source'].get(
            'note', '').split('; ') if 'image properties' not in part])


class TestTraits(unittest.TestCase):
    def test_a_libvirt_hosts_traits_by_cpu_model(self):
        doc = generate.generate(12, 30, seed=3)
        with scale.ScaleCloud(doc, latency=0) as cloud:
            document = collect.Collector(cloud.connection()).collect()
        model = {h['name']: h['cpu_model'] for h in doc['hypervisors']}
        traits = {h['name']: set(h['traits'])
                  for h in document['hypervisors']}
        self.assertEqual({'x86_64'}, {h['cpu']['arch']
                                      for h in document['hypervisors']})
        self.assertGreater(len(set(model.values())), 1)
        for name, found in traits.items():
            self.assertTrue({'COMPUTE_NODE', 'HW_CPU_X86_AVX2',
                             'COMPUTE_IMAGE_TYPE_QCOW2'} <= found, name)
            # Ice Lake brought AVX512-VBMI and dropped MPX.
            newer = model[name] in ('Icelake-Server', 'SapphireRapids')
            self.assertEqual(newer, 'HW_CPU_X86_AVX512VBMI' in found)
            self.assertEqual(not newer, 'HW_CPU_X86_MPX' in found)

    def test_a_clusters_servers_boot_from_glance_images(self):
        doc = generate.generate(12, 300, seed=3)
        with scale.ScaleCloud(doc, latency=0, images=40) as cloud:
            document = collect.Collector(cloud.connection()).collect()
            read = cloud.counts['glance', 'GET', '/v2/images/{id}']
        used = collections.Counter(s['image'] for s in document['servers'])
        images = document['images']
        # One request per image the servers use, the base images most.
        self.assertEqual(len(used), read)
        self.assertGreater(len(used), 20)
        self.assertEqual(set(used), set(images))
        top = [image for image, _ in used.most_common(3)]
        self.assertTrue(all(images[i]['properties'] is not None
                            for i in top))
        gone = [i for i, entry in images.items()
                if entry['properties'] is None]
        self.assertTrue(gone)
        self.assertEqual({'gone from Glance (404)'},
                         {images[i]['why'] for i in gone})
        self.assertIn('servers (gone from Glance (404))',
                      document['source']['note'])

    def test_a_snapshots_traits_are_its_own(self):
        hyps = [{'name': 'hv1', 'inventories': {'VCPU': {'total': 8}},
                 'cpu': {'model': 'Icelake-Server'},
                 'traits': ['CUSTOM_GOLD']}]
        doc = {'format': 'osc-leveller-snapshot/1',
               'taken_at': '2026-11-20T12:00:00Z', 'hypervisors': hyps,
               'servers': []}
        with scale.ScaleCloud(doc, latency=0) as cloud:
            document = collect.Collector(cloud.connection()).collect()
        self.assertEqual(['CUSTOM_GOLD'], document['hypervisors'][0]['traits'])


class TestCalls(unittest.TestCase):
    def test_the_plugin_sends_exactly_the_listed_calls(self):
        doc = cluster()
        grouped = doc['server_groups'][0]['members'][0]
        with scale.ScaleCloud(doc, latency=0, bandwidth=None,
                              keep_requests=True, max_limit=10) as cloud:
            conn = cloud.connection()
            collector = collect.Collector(conn, metrics=measure.Reader(
                prometheus.Client(cloud.prometheus_url, retries=0)))
            document = collector.collect()
            server = next(s for s in document['servers']
                          if s['id'] == grouped)
            other = next(h['name'] for h in document['hypervisors']
                         if h['name'] != server['hypervisor'])
            # Its own hypervisor not re-read: the server is read alone;
            # the other's provider known under an old uuid: found by name.
            stale = dict(document, hypervisors=[
                dict(h, uuid=scale.standin.derived_uuid('old', other))
                if h['name'] == other else h
                for h in document['hypervisors']])
            refresh.refresh(collector, stale, [grouped], [other])
            acts = actions.Actions(conn)
            since = time.time()
            cloud.migration_outcome = 'running'
            acts.live_migrate(grouped, other)
            acts.abort(grouped, acts.migration(grouped, since).id)
            acts.server(grouped)
            cloud.migration_outcome = 'completed'
            acts.cold_migrate(grouped, other)
            acts.confirm(grouped)
            acts.set_service(other, False, 'maintenance')
            acts.set_service(other, True)
            sent = {self.key(r) for r in cloud.requests}
            self.assertEqual([], cloud.errors)
        listed = {calls.key(c, '.'.join(map(str, scale.standin.NOVA_MAX)))
                  for c in calls.CALLS}
        self.assertEqual(set(), sent - listed, 'sent, not listed')
        self.assertEqual(set(), listed - sent, 'listed, not sent')

    @staticmethod
    def key(seen):
        version = (seen.headers.get('OpenStack-API-Version') or ' ').split(
            ' ', 1)[1] or None
        # the next pages of a listing: the same call
        params = tuple(sorted(set(seen.query) - {'marker'}))
        if seen.service == 'prometheus':  # a time as calls lists it
            params = tuple(sorted((k, '{time}' if k == 'time' else v[-1])
                                  for k, v in seen.query.items()))
        return (seen.service, seen.method, seen.template, params, version)
