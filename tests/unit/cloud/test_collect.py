"""The collector against fake SDK proxies that answer like Nova and Placement.

The fakes honour what the real services honour, so a collector that forgets
to ask for something gets what a real cloud would give it: servers and
server groups of the token's project only without all_tenants/all_projects,
id, name and links only from /servers (not /servers/detail), every migration
ever without changes-since, pages of Nova's max_limit with next links,
hypervisors without cpu_info above microversion 2.87, server groups without
"policy" below 2.64. The bodies are Nova's and Placement's JSON, field names
as they send them.
"""

import collections
import contextlib
import datetime
import http
import io
import json
import logging
import pathlib
import threading
import time
import types
import unittest
import urllib.parse
from unittest import mock
import warnings

from openstack import warnings as sdk_warnings
import requests

from osc_leveller.cloud import collect
from osc_leveller.cloud import document as document_mod
from osc_leveller.cloud import glance
from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import measure
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.settings import config

NOW = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=datetime.timezone.utc)
NS = types.SimpleNamespace
TOKEN_PROJECT = 'p1'  # the project the fake token is scoped to
NOVA_MAX_LIMIT = 1000  # Nova's [api] max_limit: the largest page
MIG_UUID = '0a5e2c44-6f47-4d5c-8e0b-1c2d3e4f5a61'  # s0, live, in flight
RESIZE_UUID = '7b1d9e02-3c4a-4b5f-9d6e-2f3a4b5c6d72'  # rs, awaits confirm
OLD_UUID = 'c4e8f1a3-9b2d-4e6f-8a1c-3d4e5f6a7b83'  # s1, three days ago
SMALL = (2, 4096)  # vCPUs, MiB
LARGE = (4, 8192)


def response(status, body=None, url='https://cloud.example/',
             method='GET'):
    """What a keystoneauth adapter returns with raise_exc=False."""
    resp = requests.Response()
    resp.status_code = status
    resp.reason = http.HTTPStatus(status).phrase
    resp.url = urllib.parse.urljoin('https://cloud.example/', url)
    resp.request = requests.Request(method, resp.url).prepare()
    if body is not None:
        resp.headers['content-type'] = 'application/json'
        resp._content = json.dumps(body).encode('utf-8')
    else:
        resp._content = b''
    resp.encoding = 'utf-8'
    return resp


@contextlib.contextmanager
def quiet():
    """Without the SDK's warning about its own internals, one per record
    it builds (a server's flavor too, when the collector reads it)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', sdk_warnings.RemovedInSDK50Warning)
        yield


def version(text):
    return tuple(int(part) for part in text.split('.'))


def _when(text):
    return datetime.datetime.fromisoformat(
        text.replace('Z', '+00:00').split('.')[0]).replace(
        tzinfo=datetime.timezone.utc)


def _truthy(value):
    return str(value).lower() in ('true', '1', 'yes')


class FakeProxy:
    """An SDK proxy's raw calls, all recorded."""

    default_version = '1.0'
    max_version = '1.39'

    def __init__(self):
        self.calls = []  # (method, path): what costs
        self.requests = []  # every call with its arguments

    endpoint = None  # the catalog's URL; None: paths are sent

    def get_endpoint(self):
        return self.endpoint

    def get_endpoint_data(self):
        """What version discovery found (openstack.utils reads it)."""
        return NS(min_microversion=self.default_version,
                  max_microversion=self.max_version)

    def get(self, url, microversion=None, params=None, **kwargs):
        parts = urllib.parse.urlsplit(url)
        path = parts.path
        if path.startswith('/v2.1/'):  # an absolute next link
            path = path[len('/v2.1'):]
        query = dict(urllib.parse.parse_qsl(parts.query))
        query.update({k: str(v) for k, v in (params or {}).items()})
        self.calls.append(('GET', path))
        self.requests.append({'method': 'GET', 'path': path, 'query': query,
                              'microversion': microversion,
                              'kwargs': kwargs})
        status, body = self.route(
            path, query, version(microversion or self.default_version))
        return response(status, body, url)


class FakeNova(FakeProxy):
    default_version = '2.1'  # what Nova assumes when none is sent
    max_version = '2.96'

    def __init__(self, world):
        super().__init__()
        self.world = world

    def route(self, path, query, at):
        world = self.world
        if path == '/os-hypervisors/detail':
            return 200, world.hypervisor_page(query, at)
        if path == '/os-server-groups':
            return 200, world.group_page(query, at)
        if path == '/os-services':
            return 200, {'services': [
                s for s in world.services
                if s['binary'] == query.get('binary', s['binary'])
                and s['host'] == query.get('host', s['host'])]}
        if path == '/os-aggregates':
            return 200, {'aggregates': world.aggregates}
        if path in ('/servers', '/servers/detail'):
            return 200, world.server_page(path, query, at)
        if path == '/os-migrations':
            since = query.get('changes-since')
            # Nova compares updated_at; one never updated does not match.
            return 200, {'migrations': [
                m for m in world.migrations
                if since is None or (m['updated_at'] and
                                     _when(m['updated_at']) >= _when(since))
                and m['instance_uuid'] == query.get('instance_uuid',
                                                    m['instance_uuid'])]}
        return 404, {'itemNotFound': {'code': 404, 'message': path}}


class FakePlacement(FakeProxy):
    endpoint = 'http://127.0.0.1:8778'

    def __init__(self, world):
        super().__init__()
        self.world = world

    def route(self, path, query, at):
        if path == '/resource_providers':
            return 200, {'resource_providers': self.world.providers}
        _, collection, uuid, what = path.split('/')
        known = {rp['uuid'] for rp in self.world.providers}
        if collection != 'resource_providers' or uuid not in known:
            return 404, {'errors': [{'status': 404, 'title': 'Not Found',
                                     'detail': 'No resource provider ' +
                                     uuid}]}
        if what == 'inventories':
            return 200, {'inventories': self.world.inventories,
                         'resource_provider_generation': 1}
        if what == 'allocations':
            return 200, {'allocations': self.world.allocations(uuid),
                         'resource_provider_generation': 1}
        if what == 'traits' and at >= (1, 6):
            return 200, {'traits': self.world.traits[uuid],
                         'resource_provider_generation': 1}
        return 404, None


class FakeGlance(FakeProxy):
    """GET /images/{id} as Glance v2 answers it: properties are
    top-level keys; 404 for an image it does not have."""

    def __init__(self, world):
        super().__init__()
        self.world = world

    def route(self, path, query, at):
        image = self.world.images.get(path[len('/images/'):])
        if not path.startswith('/images/') or image is None:
            return 404, {'message': 'No image found', 'code': '404 Not '
                         'Found', 'title': 'Not Found'}
        return 200, image


class World:
    """One small cloud as Nova and Placement record it.

    Hypervisor (node) names hvNN, compute service hosts cmp-hvNN. Servers
    sN alternate between projects p1 and p2. In flight: s0 live-migrating
    hvA -> hvB (Placement: the migration's uuid holds s0's allocation on the
    source, s0 its own on the destination); rs resized from 2 to 4 vCPUs,
    landed on hvC and awaiting confirmation (the migration holds the old
    flavor on hvB). s1 moved three days ago. sN (N = hosts) uses a vGPU of a
    child provider of hv00. Traits: the CPU's and COMPUTE_NODE on each
    hypervisor, CUSTOM_NVME on hv01, a vGPU type on the child. Images:
    servers boot from img, one Glance has (with properties the rules read
    and some they do not); rs from an image gone from Glance; sN from a
    volume.
    """

    def __init__(self, n_hosts, groups=3):
        n = n_hosts
        self.nodes = ['hv%02d' % i for i in range(n)]
        self.hosts = ['cmp-' + node for node in self.nodes]
        src, mid, dst = 0, 1 % n, 2 % n
        self.services = [
            {'id': 'svc-%s' % host, 'binary': 'nova-compute', 'host': host,
             'zone': 'az1', 'status': 'enabled', 'state': 'up',
             'forced_down': False, 'disabled_reason': None}
            for host in self.hosts] + [
            {'id': 'svc-conductor', 'binary': 'nova-conductor',
             'host': 'ctl1', 'zone': 'internal', 'status': 'enabled',
             'state': 'up', 'forced_down': False, 'disabled_reason': None}]
        self.aggregates = [{'id': 1, 'name': 'agg-az1', 'hosts': self.hosts,
                            'metadata': {'availability_zone': 'az1'}}]
        self.servers = []
        self.holdings = []  # (node, consumer, resources)
        for i in range(2 * n):
            node = i % n
            self.add_server('s%d' % i, 'p1' if i % 2 == 0 else 'p2', node,
                            SMALL)
        # s0 is on its source until the live migration ends.
        self.servers[0]['OS-EXT-STS:task_state'] = 'migrating'
        self.holdings[0] = (self.nodes[mid], 's0', _alloc(SMALL))
        self.holdings.append((self.nodes[src], MIG_UUID, _alloc(SMALL)))
        self.add_server('rs', 'p2', dst, LARGE, status='VERIFY_RESIZE')
        self.holdings.append((self.nodes[mid], RESIZE_UUID, _alloc(SMALL)))
        self.gpu_server = 's%d' % n  # on hv00
        self.servers[-1]['image'] = {'id': 'gone', 'links': []}
        for server in self.servers:
            if server['id'] == self.gpu_server:
                server['image'] = ''
        self.images = {'img': {
            'id': 'img', 'name': 'ubuntu-24.04', 'status': 'active',
            'disk_format': 'qcow2', 'container_format': 'bare',
            'visibility': 'public', 'size': 2361393152, 'tags': [],
            'hw_architecture': 'x86_64', 'hw_disk_bus': 'virtio',
            'trait:CUSTOM_NVME': 'required', 'os_distro': 'ubuntu',
            'self': '/v2/images/img', 'schema': '/v2/schemas/image'}}
        self.migrations = [
            _migration(40, OLD_UUID, 's1', 'completed', 'live-migration',
                       self.hosts[mid], self.hosts[src], NOW -
                       datetime.timedelta(days=3)),
            _migration(41, MIG_UUID, 's0', 'running', 'live-migration',
                       self.hosts[src], self.hosts[mid],
                       NOW - datetime.timedelta(minutes=1)),
            _migration(42, RESIZE_UUID, 'rs', 'finished', 'resize',
                       self.hosts[mid], self.hosts[dst],
                       NOW - datetime.timedelta(hours=1)),
        ]
        self.groups = [{'id': 'g%d' % i, 'name': 'g%d' % i,
                        'project_id': 'p1' if i % 2 == 0 else 'p2',
                        'user_id': 'u1', 'policy': 'anti-affinity',
                        'rules': {}, 'members': []} for i in range(groups)]
        self.providers = [
            {'uuid': 'rp-' + node, 'name': node, 'generation': 1,
             'parent_provider_uuid': None, 'root_provider_uuid': 'rp-' + node}
            for node in self.nodes]
        self.providers.append({
            'uuid': 'rp-gpu', 'name': 'hv00_pgpu0', 'generation': 1,
            'parent_provider_uuid': 'rp-hv00',
            'root_provider_uuid': 'rp-hv00'})
        self.traits = {'rp-' + node: ['COMPUTE_NODE', 'HW_CPU_X86_AVX2']
                       for node in self.nodes}
        self.traits['rp-' + self.nodes[mid]].append('CUSTOM_NVME')
        self.traits['rp-gpu'] = ['CUSTOM_NVIDIA_11']
        self.inventories = {
            'VCPU': {'total': 16, 'reserved': 0, 'allocation_ratio': 4.0,
                     'min_unit': 1, 'max_unit': 16, 'step_size': 1},
            'MEMORY_MB': {'total': 65536, 'reserved': 2048,
                          'allocation_ratio': 1.0, 'min_unit': 1,
                          'max_unit': 65536, 'step_size': 1}}

    def add_server(self, sid, project, node, flavor, status='ACTIVE'):
        vcpus, ram = flavor
        self.servers.append({
            'id': sid, 'name': 'vm-' + sid, 'tenant_id': project,
            'user_id': 'u1', 'status': status, 'OS-EXT-STS:task_state': None,
            'OS-EXT-SRV-ATTR:host': self.hosts[node],
            'OS-EXT-SRV-ATTR:hypervisor_hostname': self.nodes[node],
            'locked': False, 'metadata': {}, 'tags': [],
            'flavor': {'original_name': 'f%d' % vcpus, 'vcpus': vcpus,
                       'ram': ram, 'disk': 20, 'ephemeral': 0, 'swap': 0,
                       'extra_specs': {}},
            'image': {'id': 'img', 'links': []},
            'links': [{'rel': 'self', 'href': '/servers/' + sid}]})
        self.holdings.append((self.nodes[node], sid, _alloc(flavor)))

    def hypervisor_page(self, query, at):
        records = [self.hypervisor(i, node, at)
                   for i, node in enumerate(self.nodes)]
        records.insert(1, {'id': 901, 'hypervisor_hostname': 'bm1',
                           'hypervisor_type': 'ironic', 'state': 'up',
                           'status': 'enabled',
                           'service': {'host': 'ironic1'}})
        records.append({'id': 902, 'hypervisor_hostname': 'new1',
                        'hypervisor_type': 'QEMU', 'state': 'up',
                        'status': 'enabled', 'service': {'host': 'new1'}})
        if at < (2, 33):  # no paging before 2.33
            return {'hypervisors': records}
        ids = [str(r['id']) for r in records]
        start = ids.index(query['marker']) + 1 if 'marker' in query else 0
        limit = min(int(query.get('limit', NOVA_MAX_LIMIT)), NOVA_MAX_LIMIT)
        page = records[start:start + limit]
        body = {'hypervisors': page}
        if len(page) == limit:  # Nova links a full page to the next one
            body['hypervisors_links'] = [{
                'rel': 'next', 'href': 'https://nova.example/v2.1/'
                'os-hypervisors/detail?marker=%s' % page[-1]['id']}]
        return body

    def hypervisor(self, index, node, at):
        record = {'id': 'hyp-%s' % node if at >= (2, 53) else index + 1,
                  'hypervisor_hostname': node, 'hypervisor_type': 'QEMU',
                  'state': 'up', 'status': 'enabled',
                  'host_ip': '192.0.2.%d' % (index + 1),
                  'service': {'host': self.hosts[index],
                              'disabled_reason': None}}
        if at <= (2, 87):  # 2.88 dropped cpu_info; a string before 2.28
            info = {'arch': 'x86_64', 'model': 'M', 'features': ['avx2']}
            record['cpu_info'] = info if at >= (2, 28) else json.dumps(info)
        return record

    def server_page(self, path, query, at):
        """Servers of the token's project unless all_tenants; id, name and
        links only without /detail; pages of max_limit with next links."""
        found = [s for s in self.servers if _truthy(query.get(
            'all_tenants')) or s['tenant_id'] == TOKEN_PROJECT]
        if path == '/servers':
            found = [{k: s[k] for k in ('id', 'name', 'links')}
                     for s in found]
        ids = [s['id'] for s in found]
        start = ids.index(query['marker']) + 1 if 'marker' in query else 0
        limit = min(int(query.get('limit', NOVA_MAX_LIMIT)), NOVA_MAX_LIMIT)
        page = found[start:start + limit]
        body = {'servers': page}
        if len(page) == limit:
            body['servers_links'] = [{
                'rel': 'next', 'href': 'https://nova.example/v2.1%s?'
                'marker=%s' % (path, page[-1]['id'])}]
        return body

    def group_page(self, query, at):
        groups = self.groups if _truthy(query.get('all_projects')) else [
            g for g in self.groups if g['project_id'] == TOKEN_PROJECT]
        if at < (2, 64):  # "policies" and "metadata" until 2.64
            groups = [dict({k: v for k, v in g.items()
                            if k not in ('policy', 'rules')},
                           policies=[g['policy']], metadata={})
                      for g in groups]
        offset = int(query.get('offset', 0))
        limit = min(int(query.get('limit', NOVA_MAX_LIMIT)), NOVA_MAX_LIMIT)
        return {'server_groups': groups[offset:offset + limit]}

    def allocations(self, rp_uuid):
        if rp_uuid == 'rp-gpu':
            return {self.gpu_server: {'resources': {'VGPU': 1},
                                      'generation': 1}}
        node = rp_uuid[len('rp-'):]
        return {consumer: {'resources': dict(resources), 'generation': 1}
                for where, consumer, resources in self.holdings
                if where == node}


def _alloc(flavor):
    return {'VCPU': flavor[0], 'MEMORY_MB': flavor[1]}


def _migration(mid, uuid, server, status, kind, source, dest, when):
    stamp = when.strftime('%Y-%m-%dT%H:%M:%S.000000')
    return {'id': mid, 'uuid': uuid, 'instance_uuid': server,
            'status': status, 'migration_type': kind,
            'source_compute': source, 'dest_compute': dest,
            'source_node': source[len('cmp-'):],
            'dest_node': dest[len('cmp-'):], 'created_at': stamp,
            'updated_at': stamp, 'project_id': 'p1', 'user_id': 'u1'}


def cloud(n_hosts, groups=3):
    world = World(n_hosts, groups)
    return NS(compute=FakeNova(world), placement=FakePlacement(world),
              image=FakeGlance(world),
              config=NS(name='test', region_name='RegionOne'), world=world)


def run(conn):
    with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                           return_value=True), quiet():
        return collect.Collector(conn, workers=4).collect(now=NOW)


class TestCollect(unittest.TestCase):
    def test_document_loads_and_joins(self):
        document = run(cloud(3))
        snap = snapshot_io.parse(document, origin='live')
        self.assertEqual(['hv00', 'hv01', 'hv02'],
                         [h.name for h in snap.hypervisors])
        hv00 = snap.hypervisor('hv00')
        self.assertEqual(('rp-hv00', 'cmp-hv00'), (hv00.uuid, hv00.host))
        # Service and aggregates are joined on the compute host.
        self.assertEqual('az1', hv00.availability_zone)
        self.assertEqual(['agg-az1'], [a.name for a in hv00.aggregates])
        self.assertEqual(('M', frozenset(['avx2'])),
                         (hv00.cpu_model, hv00.cpu_features))
        self.assertEqual(2048, hv00.inventories[model.MEMORY_MB].reserved)
        self.assertEqual([{'COMPUTE_NODE', 'HW_CPU_X86_AVX2'},
                          {'COMPUTE_NODE', 'HW_CPU_X86_AVX2', 'CUSTOM_NVME'},
                          {'COMPUTE_NODE', 'HW_CPU_X86_AVX2'}],
                         [h.traits for h in snap.hypervisors])
        self.assertEqual(
            'left out, no resource provider in Placement: new1; image '
            'properties unknown for 1 server (gone from Glance (404)), 1 '
            'server booted from a volume (Cinder\'s, not read): they move '
            'only to hypervisors as capable as theirs', snap.source['note'])
        self.assertEqual('cloud', snap.source['kind'])
        self.assertEqual(('QEMU', None), (hv00.hypervisor_type,
                                          hv00.hypervisor_version))

    def test_image_properties_from_glance_once_per_image(self):
        conn = cloud(3)
        snap = snapshot_io.parse(run(conn))
        image = snap.server('s0').image
        # What the rules read, not what they do not (os_distro).
        self.assertEqual(('img', 'ubuntu-24.04', 'qcow2', {
            'hw_architecture': 'x86_64', 'hw_disk_bus': 'virtio',
            'trait:CUSTOM_NVME': 'required'}), (
                image.id, image.name, image.disk_format,
                dict(image.properties)))
        self.assertIs(image, snap.server('s1').image)
        self.assertEqual(('gone', None, 'gone from Glance (404)'), (
            snap.server('rs').image.id, snap.server('rs').image.properties,
            snap.server('rs').image.why))
        self.assertIs(snapshot_io.BOOT_VOLUME, snap.server('s3').image)
        self.assertEqual(sorted([('GET', '/images/img'),
                                 ('GET', '/images/gone')]),
                         sorted(conn.image.calls))

    def test_servers_of_every_project_with_their_details(self):
        # Without all_projects Nova lists the token's project only; without
        # details a server has no hypervisor and is left out.
        snap = snapshot_io.parse(run(cloud(3)))
        self.assertEqual(['rs', 's0', 's1', 's2', 's3', 's4', 's5'],
                         sorted(s.id for s in snap.servers))
        self.assertEqual({'p1': 3, 'p2': 4}, collections.Counter(
            s.project_id for s in snap.servers))
        s1 = snap.server('s1')
        self.assertEqual(('hv01', 'ACTIVE'), (s1.hypervisor, s1.status))
        self.assertEqual('migrating', snap.server('s0').task_state)

    def test_a_page_of_servers_keeps_what_the_document_reads(self):
        # Nova 2.96's view of a server, every field the document reads
        # set to something other than its default.
        full = {
            'id': 's1', 'name': 'vm-1', 'tenant_id': 'p1', 'user_id': 'u1',
            'status': 'ACTIVE', 'OS-EXT-STS:task_state': 'migrating',
            'OS-EXT-STS:vm_state': 'active', 'OS-EXT-STS:power_state': 1,
            'OS-EXT-SRV-ATTR:host': 'c1',
            'OS-EXT-SRV-ATTR:hypervisor_hostname': 'hv1.example',
            'OS-EXT-SRV-ATTR:instance_name': 'instance-0001',
            'OS-EXT-SRV-ATTR:user_data': 'I2Nsb3VkLWNvbmZpZw==',
            'OS-EXT-AZ:availability_zone': 'az1', 'hostId': 'h' * 56,
            'locked': True, 'locked_reason': 'ops', 'metadata': {'k': 1},
            'tags': ['gold'], 'pinned_availability_zone': 'az1',
            'flavor': {'original_name': 'big', 'vcpus': 8, 'ram': 8192,
                       'disk': 80, 'ephemeral': 0, 'swap': 0,
                       'extra_specs': {'pci_passthrough:alias': 'gpu:1'}},
            'image': {'id': 'img-1', 'links': [{'rel': 'bookmark',
                                                'href': '/images/img-1'}]},
            'addresses': {'net': [{'addr': '10.0.0.5', 'version': 4}]},
            'security_groups': [{'name': 'default'}],
            'os-extended-volumes:volumes_attached': [{'id': 'v1'}],
            'links': [{'rel': 'self', 'href': '/servers/s1'}],
            'created': '2026-12-01T00:00:00Z', 'progress': 0}
        cut = document_mod.used_of_server(full)
        self.assertEqual(document_mod.server_doc(full, ['rp-c'], {
            'hv1.example': {'VCPU': 8}}), document_mod.server_doc(
                cut, ['rp-c'], {'hv1.example': {'VCPU': 8}}))
        self.assertEqual('img-1', glance.image_id(cut))
        self.assertEqual({'id': 'img-1'}, cut['image'])
        self.assertLessEqual(set(cut), set(document_mod.SERVER_FIELDS))
        for key in full:
            if key not in document_mod.SERVER_FIELDS:
                changed = dict(full, **{key: 'other'})
                self.assertEqual(document_mod.server_doc(full),
                                 document_mod.server_doc(changed), key)

    def test_servers_share_the_values_they_repeat(self):
        document = run(cloud(4))
        servers = document['servers']
        self.assertGreater(len(servers), 4)
        for key in ('hypervisor', 'host', 'project_id', 'status', 'flavor',
                    'image'):
            values = [s.get(key) for s in servers if s.get(key) is not None]
            self.assertTrue(values, key)
            # equal values are one object
            self.assertEqual(len({json.dumps(v, sort_keys=True)
                                  for v in values}),
                             len({id(v) for v in values}), key)
        # Flavors are shared only when equal in everything, extra specs
        # and their values too.
        shared = document_mod.Shared()
        plain = document_mod.flavor_of({'vcpus': 2, 'ram': 2048})
        gpu = document_mod.flavor_of({'vcpus': 2, 'ram': 2048, 'extra_specs':
                                      {'pci_passthrough:alias': 'gpu:1'}})
        gpu2 = document_mod.flavor_of({'vcpus': 2, 'ram': 2048, 'extra_specs':
                                       {'pci_passthrough:alias': 'gpu:2'}})
        found = [shared.flavor(f) for f in (plain, gpu, gpu2, dict(plain))]
        self.assertEqual([plain, gpu, gpu2, plain], found)
        self.assertIs(found[0], found[3])
        self.assertEqual(3, len({id(f) for f in found}))
        self.assertEqual([1, None], [shared.text(1), shared.text(None)])

    def test_nova_servers_are_let_go_as_the_document_takes_them(self):
        items = [{'id': 'a'}, {'id': 'b'}, {'id': 'c'}]
        handed = []
        for item in collect._let_go(items):
            handed.append(item)
            self.assertEqual(3, len(handed) + len(items))
        self.assertEqual(['a', 'b', 'c'], [i['id'] for i in handed])

    def test_server_groups_of_every_project(self):
        document = run(cloud(2, groups=3))
        self.assertEqual([('g0', 'p1'), ('g1', 'p2'), ('g2', 'p1')],
                         [(g['id'], g['project_id'])
                          for g in document['server_groups']])
        self.assertEqual({'anti-affinity'},
                         {g['policy'] for g in document['server_groups']})

    def test_allocations_of_servers_and_migrations(self):
        document = run(cloud(3))
        snap = snapshot_io.parse(document)
        # Usages: whatever Placement counts, migration consumers included.
        # hv00: s3 and the migration's hold of s0; hv01: s1, s4, s0 (its
        # destination) and the resize's hold of rs's old flavor; hv02: s2,
        # s5 and rs at its new size.
        self.assertEqual([(4, 8192), (8, 16384), (8, 16384)], [
            (h.usage(model.VCPU), h.usage(model.MEMORY_MB))
            for h in snap.hypervisors])
        resources = {s['id']: s.get('resources')
                     for s in document['servers']}
        # A server's own consumer: the destination's allocation for s0,
        # never the migration's (its uuid), nor the flavor's (with disk).
        self.assertEqual({'VCPU': 2, 'MEMORY_MB': 4096}, resources['s0'])
        # rs has 4 vCPUs now; the migration holds the old 2 on hv01.
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 8192}, resources['rs'])
        self.assertEqual({'VCPU': 2, 'MEMORY_MB': 4096}, resources['s1'])
        self.assertEqual(
            ('allocation on child resource provider hv00_pgpu0 (VGPU)',),
            snap.server('s3').blockers)
        self.assertEqual((), snap.server('s0').blockers)

    def test_recent_migrations_only(self):
        document = run(cloud(3))
        # Nova's integer ids; s1's move of three days ago is not asked for.
        self.assertEqual([41, 42], [m['id'] for m in document['migrations']])
        snap = snapshot_io.parse(document)
        self.assertEqual([True, True],
                         [m.in_progress for m in snap.migrations])
        self.assertEqual(('s0', 'cmp-hv00', 'cmp-hv01'), (
            snap.migrations[0].server_id, snap.migrations[0].source_compute,
            snap.migrations[0].dest_compute))

    def test_compute_calls_do_not_grow_with_hypervisors(self):
        counts = []
        for hosts in (3, 30):
            conn = cloud(hosts)
            document = run(conn)
            # Everything was read: equal counts mean the same calls, not
            # the same nothing.
            self.assertEqual((hosts, 2 * hosts + 1), (
                len(document['hypervisors']), len(document['servers'])))
            counts.append((collections.Counter(conn.compute.calls),
                           len(conn.placement.calls)))
        self.assertEqual(counts[0][0], counts[1][0])
        self.assertEqual(collections.Counter({
            ('GET', '/os-services'): 1, ('GET', '/os-hypervisors/detail'): 1,
            ('GET', '/os-aggregates'): 1, ('GET', '/servers/detail'): 1,
            # Server groups: a page, and the empty one that ends them.
            ('GET', '/os-server-groups'): 2, ('GET', '/os-migrations'): 1}),
            counts[0][0])
        # Placement: the provider list, then inventories and allocations
        # for each provider (3 or 30 hypervisors plus one child), and the
        # traits of each hypervisor's own provider.
        self.assertEqual((1 + 2 * 4 + 3, 1 + 2 * 31 + 30),
                         (counts[0][1], counts[1][1]))

    def test_hypervisors_page_by_next_link(self):
        conn = cloud(5)
        with mock.patch(__name__ + '.NOVA_MAX_LIMIT', 2):
            document = run(conn)
        self.assertEqual(['hv00', 'hv01', 'hv02', 'hv03', 'hv04'],
                         [h['name'] for h in document['hypervisors']])
        # Seven records (an ironic node and one not in Placement) in pages
        # of two: four pages, the last one short.
        self.assertEqual(4, conn.compute.calls.count(
            ('GET', '/os-hypervisors/detail')))

    def test_paging_that_loops_is_an_error(self):
        # A next link back to a page already read, and a Nova that ignores
        # the marker: each would page forever.
        conn = cloud(4)
        page = conn.compute.world.server_page

        def same_marker(path, query, at):
            body = page(path, dict(query, limit='2'), at)
            body['servers_links'][0]['href'] = '/servers/detail?marker=s0'
            return body

        def marker_ignored(path, query, at):
            return page(path, {'all_tenants': '1', 'limit': '2'}, at)
        for answer, why in ((same_marker, 'repeats marker s0'),
                            (marker_ignored, 'repeats servers already '
                                             'read')):
            with mock.patch.object(conn.compute.world, 'server_page',
                                   answer):
                with self.assertRaises(collect.CollectError) as ctx:
                    run(conn)
            self.assertIn('Nova GET /servers/detail: the answer has an '
                          'unexpected shape (ValueError: paging loops',
                          str(ctx.exception))
            self.assertIn(why, str(ctx.exception))

    def test_a_hypervisor_name_that_is_not_text_is_an_error(self):
        conn = cloud(2)
        world = conn.compute.world
        page = world.hypervisor_page

        def a_list_for_a_name(query, at):
            body = page(query, at)
            body['hypervisors'][0]['hypervisor_hostname'] = ['hv00']
            return body
        with mock.patch.object(world, 'hypervisor_page', a_list_for_a_name):
            with self.assertRaises(collect.CollectError) as ctx:
                run(conn)
        self.assertIn('Nova GET /os-hypervisors/detail: the answer has an '
                      'unexpected shape (TypeError: hypervisor_hostname is '
                      'list, not text)', str(ctx.exception))

    def test_hypervisor_version_and_type_as_nova_says(self):
        """What the live-migration check compares; a version that is no
        integer Nova would send is unknown, not an error."""
        conn = cloud(3)
        world = conn.compute.world
        page = world.hypervisor_page
        versions = {'hv00': 9000000, 'hv01': '8.2.0', 'hv02': 2 ** 60}

        def versioned(query, at):
            body = page(query, at)
            for record in body['hypervisors']:
                name = record['hypervisor_hostname']
                record['hypervisor_version'] = versions.get(name)
                if name == 'hv02':
                    record['hypervisor_type'] = ''
            return body
        with mock.patch.object(world, 'hypervisor_page', versioned):
            snap = snapshot_io.parse(run(conn))
        self.assertEqual(
            [('QEMU', 9000000), ('QEMU', None), ('', None)],
            [(h.hypervisor_type, h.hypervisor_version)
             for h in snap.hypervisors])

    def test_servers_page_by_next_link_marker(self):
        conn = cloud(5)
        with mock.patch(__name__ + '.NOVA_MAX_LIMIT', 3):
            document = run(conn)
        self.assertEqual(11, len(document['servers']))
        # 11 servers in pages of 3; each next link's marker is sent to our
        # own endpoint, not to the host the link names.
        markers = [r['query'].get('marker') for r in conn.compute.requests
                   if r['path'] == '/servers/detail']
        self.assertEqual([None, 's2', 's5', 's8'], markers)

    def test_requests_carry_their_microversions(self):
        conn = cloud(2)
        run(conn)
        versions = {r['path']: version(r['microversion'])
                    for r in conn.compute.requests if r['method'] == 'GET'}
        # cpu_info is gone above 2.87; uuids since 2.53; a server group's
        # "policy" since 2.64.
        self.assertTrue((2, 53) <= versions['/os-hypervisors/detail']
                        <= (2, 87), versions)
        self.assertGreaterEqual(versions['/os-server-groups'], (2, 64))

    def test_server_groups_page_by_offset(self):
        conn = cloud(2, groups=5)
        with mock.patch.object(collect, 'GROUP_PAGE', 2):
            document = run(conn)
        self.assertEqual(['g0', 'g1', 'g2', 'g3', 'g4'],
                         [g['id'] for g in document['server_groups']])
        # 2, 2, 1, then the empty page that ends them.
        self.assertEqual(4, conn.compute.calls.count(
            ('GET', '/os-server-groups')))

    def test_server_groups_beyond_novas_max_limit(self):
        # Nova gives at most max_limit a page, fewer than asked for: a
        # short page is no sign of the end.
        conn = cloud(2, groups=5)
        with mock.patch(__name__ + '.NOVA_MAX_LIMIT', 2):
            document = run(conn)
        self.assertEqual(['g0', 'g1', 'g2', 'g3', 'g4'],
                         [g['id'] for g in document['server_groups']])

    def test_old_nova_and_missing_admin_rights(self):
        conn = cloud(2)
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=False):
            with self.assertRaises(collect.CollectError) as ctx:
                collect.Collector(conn).collect(now=NOW)
        self.assertIn('microversion 2.64 or later', str(ctx.exception))

        def forbidden(*args, **kwargs):
            return response(403, {
                'forbidden': {'code': 403, 'message': 'Policy does not '
                              'allow os_compute_api:os-services:list'}})
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True), \
                mock.patch.object(conn.compute, 'get', forbidden):
            with self.assertRaises(collect.CollectError) as ctx:
                collect.Collector(conn).collect(now=NOW)
        self.assertIn('needs an admin role', str(ctx.exception))


class TestFakes(unittest.TestCase):
    """The fakes refuse what Nova would: the tests above rely on it."""

    def test_nova_answers_by_project_details_and_time(self):
        conn = cloud(2)

        def get(path, **params):
            return conn.compute.get(path, params=params).json()
        mine = get('/servers/detail')['servers']
        self.assertEqual({TOKEN_PROJECT}, {s['tenant_id'] for s in mine})
        bare = get('/servers', all_tenants=1)['servers']
        self.assertEqual(5, len(bare))
        self.assertEqual({None}, {s.get(document_mod.NODE) for s in bare})
        self.assertEqual(3, len(get('/os-migrations')['migrations']))
        self.assertEqual([41], [m['id'] for m in get('/os-migrations', **{
            'changes-since': '2026-11-20T11:30:00Z'})['migrations']])

    def test_nova_answers_by_microversion(self):
        conn = cloud(2)
        hyps = conn.compute.get('/os-hypervisors/detail',
                                microversion='2.88').json()['hypervisors']
        self.assertNotIn('cpu_info', hyps[0])
        groups = conn.compute.get('/os-server-groups', params={
            'all_projects': True}).json()['server_groups']
        self.assertEqual((3, None), (len(groups), groups[0].get('policy')))
        groups = conn.compute.get('/os-server-groups',
                                  microversion='2.64').json()['server_groups']
        self.assertEqual(['g0', 'g2'], [g['id'] for g in groups])


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


class TestResponseBodies(unittest.TestCase):
    """keystoneauth formats each response body for a debug line; without a
    handler for debug lines that is skipped (seconds at 50,000 servers)."""

    def setUp(self):
        from osc_leveller.cloud import connection
        self.skip = connection.skip_unlogged_bodies
        root = logging.getLogger()
        session = logging.getLogger('keystoneauth.session')
        saved = (list(root.handlers), session.level)
        self.addCleanup(lambda: (setattr(root, 'handlers', saved[0]),
                                 session.setLevel(saved[1])))
        session.setLevel(logging.NOTSET)
        self.session = session

    def with_handler(self, level):
        handler = logging.StreamHandler(io.StringIO())
        handler.setLevel(level)
        logging.getLogger().handlers = [handler]

    def test_skipped_when_nothing_writes_debug_lines(self):
        self.with_handler(logging.WARNING)
        self.skip()
        self.assertFalse(self.session.isEnabledFor(logging.DEBUG))

    def test_kept_for_debug(self):
        self.with_handler(logging.DEBUG)
        self.skip()
        self.assertEqual(logging.NOTSET, self.session.level)


def wait_for(condition, seconds=10):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


class FakeReader:
    def __init__(self, hosts=None, problems=None, servers=None, error=None,
                 unreachable=None):
        self.reading = measure.Reading(
            hosts=hosts or {}, problems=problems or {},
            servers=servers or {}, unreachable=unreachable)
        self.error = error
        self.asked = []
        self.started = threading.Event()  # read() was called
        self.ended = []  # what each read() ended with

    def read(self, refs, servers, guard=True):
        # As measure.Reader: the servers may come as a callable, called
        # after the queries (here: none).
        self.started.set()
        try:
            if self.error:
                raise self.error
            if callable(servers):
                servers = servers()
        except Exception as exc:
            self.ended.append(exc)
            raise
        self.asked.append((refs, servers))
        self.ended.append('done')
        return self.reading


class TestMetrics(unittest.TestCase):
    def collect_with(self, reader):
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True), quiet():
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
        self.assertIn('Prometheus: 1 of 2 hypervisors scored from Placement '
                      'allocations (hv01: no cpu series)', snap.source['note'])
        # Nova's host_ip and service host go to the matching.
        [(refs, servers)] = reader.asked
        self.assertEqual([hostmatch.HostRef('hv00', 'cmp-hv00', '192.0.2.1'),
                          hostmatch.HostRef('hv01', 'cmp-hv01', '192.0.2.2')],
                         refs)
        self.assertEqual('hv01', servers['s1'])

    def test_prometheus_is_asked_while_nova_lists_the_servers(self):
        reader = FakeReader(hosts={'hv00': {'cpu': 0.9, 'ram': 0.5}})
        conn = cloud(2)
        route = conn.compute.route
        waited = []

        def servers_wait_for_prometheus(path, query, at):
            if path == '/servers/detail':
                # Without the reading ahead this waits in vain.
                waited.append(reader.started.wait(10))
            return route(path, query, at)

        conn.compute.route = servers_wait_for_prometheus
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True), quiet():
            document = collect.Collector(conn, workers=2,
                                         metrics=reader).collect(now=NOW)
        self.assertEqual([True], waited)
        self.assertEqual(1, len(reader.asked))
        self.assertEqual({'cpu': 0.9, 'ram': 0.5},
                         document['hypervisors'][0]['metrics'])

    def test_read_again_for_the_hypervisors_placement_answered_for(self):
        reader = FakeReader(hosts={'hv00': {'cpu': 0.9, 'ram': 0.5}})
        conn = cloud(3)
        route = conn.placement.route

        def silent_for_hv01(path, query, at):
            if path.startswith('/resource_providers/rp-hv01/'):
                return 503, {'errors': [{'status': 503, 'title': 'busy'}]}
            return route(path, query, at)

        conn.placement.route = silent_for_hv01
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True), quiet():
            document = collect.Collector(conn, workers=2, metrics=reader,
                                         retries=0).collect(now=NOW)
        self.assertEqual(['hv00', 'hv02'],
                         [h['name'] for h in document['hypervisors']])
        # The reading ahead was for all three, and ends without servers;
        # the one used is for the two.
        wait_for(lambda: len(reader.ended) == 2)
        self.assertEqual(['CollectError', 'str'], sorted(
            type(end).__name__ for end in reader.ended))
        self.assertEqual(['hv00', 'hv02'],
                         [ref.name for ref in reader.asked[-1][0]])
        self.assertEqual(1, len(reader.asked))

    def test_an_error_reading_nova_ends_the_reading_ahead(self):
        reader = FakeReader()
        conn = cloud(2)
        route = conn.compute.route
        conn.compute.route = lambda path, query, at: (
            (500, {'computeFault': {'code': 500, 'message': 'boom'}})
            if path == '/servers/detail' else route(path, query, at))
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True), quiet():
            with self.assertRaises(collect.CollectError):
                collect.Collector(conn, workers=2, metrics=reader,
                                  retries=0).collect(now=NOW)
        wait_for(lambda: reader.ended)
        self.assertIsInstance(reader.ended[0], collect.CollectError)
        self.assertEqual([], reader.asked)

    def test_unreachable_prometheus_falls_back_and_says_so(self):
        reader = FakeReader(unreachable=(
            'cannot reach Prometheus at http://127.0.0.1:9: ConnectionError'))
        snap = snapshot_io.parse(self.collect_with(reader))
        self.assertIsNone(snap.hypervisor('hv00').metrics)
        self.assertIn('cannot reach Prometheus at http://127.0.0.1:9: '
                      'ConnectionError: load from Placement allocations',
                      snap.source['note'])
        # The guard sees every hypervisor's metrics lost at once.
        self.assertEqual('cannot reach Prometheus at http://127.0.0.1:9: '
                         'ConnectionError', snap.guard.unreachable)

    def test_a_rejected_query_is_an_error(self):
        reader = FakeReader(error=collect.prometheus.PrometheusError(
            "Prometheus rejected the query 'x': parse error"))
        with self.assertRaises(collect.CollectError) as ctx:
            self.collect_with(reader)
        self.assertIn('rejected the query', str(ctx.exception))

    def reader(self, section):
        settings = config.Settings([('test', config.flatten(
            {'prometheus': section}, 'test'))])
        return measure.reader_from_settings(settings.section('prometheus'))

    def test_no_url_no_reader(self):
        self.assertIsNone(self.reader({}))
        self.assertIsNone(self.reader({'url': ''}))  # --no-prometheus

    def test_reader_from_settings(self):
        reader = self.reader({
            'url': 'http://127.0.0.1:9090/', 'token': 't', 'window': '2m',
            'host_label': 'instance', 'timeout': '3', 'retries': 0,
            'queries': {'ram': 'my_ram'}, 'host_match': ['nodename'],
            'server_profile': 'kumina'})
        self.assertEqual('http://127.0.0.1:9090', reader.client.url)
        self.assertEqual('Bearer t',
                         reader.client.session.headers['Authorization'])
        # (connect, read): the connect timeout keeps its default.
        self.assertEqual(((5.0, 3.0), 0), (reader.client.timeout,
                                           reader.client.retries))
        self.assertEqual(('2m', 'instance', 'my_ram'), (
            reader.window, reader.host_label, reader.queries['ram']))
        self.assertEqual(measure.HOST_QUERIES['cpu_pressure'],
                         reader.queries['cpu_pressure'])
        self.assertEqual((('nodename',), 'kumina'), (
            reader.host_match, reader.server_profile))
        # Defaults: every matching method, the exporter found.
        reader = self.reader({'url': 'http://p'})
        self.assertEqual((config.HOST_MATCH, 'auto', 'hostname'), (
            reader.host_match, reader.server_profile, reader.host_label))

    def test_defaults_are_the_declared_ones(self):
        # Settings left out, from the settings or from a mapping made by
        # hand, are what core/settings/config.py declares.
        def default(key):
            return config.BY_NAME['prometheus.' + key].default
        for reader in (self.reader({'url': 'http://p', 'forecast_days': 7}),
                       measure.reader_from_settings({
                           'url': 'http://p', 'forecast_days': 7})):
            client = reader.client
            self.assertEqual(
                ((default('connect_timeout'), default('timeout')),
                 default('retries'), default('max_answer_mb')),
                (client.timeout, client.retries, client.max_answer_mb))
            self.assertEqual(tuple(default(k) for k in (
                'window', 'host_label', 'host_pattern', 'host_match',
                'server_profile', 'history_timeout')), (
                reader.window, reader.host_label, reader.host_pattern,
                reader.host_match, reader.server_profile,
                reader.history_timeout))
            self.assertEqual(set(measure.PROFILES[default('profile')]),
                             set(reader.queries))
            self.assertEqual((default('forecast_ahead'),
                              default('forecast_weight')),
                             (reader.forecast.ahead, reader.forecast.weight))
        self.assertIsNone(self.reader({'url': 'http://p'}).forecast)

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


class TestDocument(unittest.TestCase):
    """The whole document, byte for byte, so that reshaping the collector
    cannot change what it writes unnoticed."""

    STORED = pathlib.Path(__file__).with_name('collected-world.json')

    def test_the_world_is_written_as_stored(self):
        # Every join at once: a live migration and a resize in flight
        # (consumers on two hypervisors), a child provider's vGPU, a
        # hypervisor not in Placement, an Ironic node, a migration too old,
        # measured load and what it does not cover, traits Placement
        # answered for in no trait names.
        conn = cloud(3)
        conn.world.traits['rp-hv02'] = ['HW_CPU_X86_AVX2', 'avx512f']
        reader = FakeReader(
            hosts={'hv00': {'cpu': 0.9, 'ram': 0.5, 'cpu_pressure': 0.2}},
            problems={'hv01': 'no cpu series'},
            servers={'s1': {'cpu': 0.7, 'ram': 0.4}})
        with mock.patch.object(collect.sdk_utils, 'supports_microversion',
                               return_value=True), quiet():
            document = collect.Collector(conn, workers=2,
                                         metrics=reader).collect(now=NOW)
        # A change meant to change the document rewrites the file with:
        written = json.dumps(document, sort_keys=True, indent=1) + '\n'
        self.maxDiff = None
        self.assertEqual(self.STORED.read_text(encoding='utf-8'), written)


class TestAnswersNoCloudGives(unittest.TestCase):
    """Answers past JSON's and Python's limits name the request."""

    def collect(self, cloud, tmp):
        import argparse
        import os

        from openstack.config import loader

        from osc_leveller.cloud import connection
        path = cloud.write_clouds_yaml(os.path.join(tmp, 'clouds.yaml'))
        config = loader.OpenStackConfig(config_files=[path], vendor_files=[])
        with self.assertRaises(collect.CollectError) as ctx:
            conn = connection.open_connection(
                config, argparse.Namespace(cloud='standin'),
                {'retries': 0})
            collect.Collector(conn, retries=0).collect()
        return str(ctx.exception)

    def test_each_failure_names_its_request(self):
        import tempfile

        from tests.unit import builders as b
        from tests.unit import standin

        def flavor_vcpus(cloud):
            next(iter(cloud._server_list.values()))['flavor']['vcpus'] = \
                float('inf')

        def group_rule(cloud):
            cloud._groups_list[0]['max_server_per_host'] = float('-inf')

        hyps, servers = b.three_hosts()
        group = {'id': 'g1', 'policy': 'anti-affinity',
                 'members': [servers[0]['id']]}
        rp = standin.derived_uuid('hypervisor', 'hv2')
        for spoil, fault, named in (
                (None, ('keystone', '/v3/auth/tokens', 'status:500'),
                 'Keystone POST /v3/auth/tokens failed: Internal Server '
                 'Error'),
                (None, ('keystone', '/v3/auth/tokens', 'non-json'),
                 'Keystone POST /v3/auth/tokens failed'),
                (None, ('keystone', '/v3/auth/tokens', 'shape:string'),
                 'Keystone POST /v3/auth/tokens: the answer has an '
                 'unexpected shape'),
                (None, ('keystone', '/v3/auth/tokens', 'shape:items'),
                 'Keystone POST /v3/auth/tokens: the answer has an '
                 'unexpected shape'),
                (None, ('placement', '/resource_providers/%s/inventories'
                        % rp, 'shape:items'),
                 'Placement GET /resource_providers/%s/inventories: the '
                 'answer has an unexpected shape (TypeError: VCPU is str, '
                 'not an object)' % rp),
                (None, ('nova', '/v2.1/os-server-groups', 'shape:items'),
                 'Nova GET /os-server-groups: the answer has an unexpected '
                 'shape (TypeError: a server group is str, not an object)'),
                (flavor_vcpus, None, 'Nova GET /servers/detail'),
                (group_rule, None, 'Nova GET /os-server-groups')):
            with self.subTest(named), tempfile.TemporaryDirectory() as tmp, \
                    standin.StandIn(b.document(hyps, servers, [group])) \
                    as cloud:
                if spoil:
                    spoil(cloud)
                if fault:
                    cloud.fault(*fault)
                self.assertIn(named, self.collect(cloud, tmp))

    def test_server_groups_that_ignore_the_offset(self):
        # A proxy or a broken Nova that answers the first page whatever the
        # offset would be read forever.
        page = {'server_groups': [{'id': 'g1', 'policy': 'affinity',
                                   'members': []}]}
        compute = mock.Mock()
        compute.get.return_value = response(200, page)
        collector = collect.Collector(NS(compute=compute), retries=0)
        with self.assertRaises(collect.CollectError) as ctx:
            collector._server_groups()
        self.assertIn('Nova GET /os-server-groups: the answer has an '
                      'unexpected shape (ValueError: the page at offset 1 '
                      'repeats server groups already read)',
                      str(ctx.exception))
        self.assertEqual(2, compute.get.call_count)

    def test_an_answer_nested_too_deeply(self):
        with self.assertRaises(collect.CollectError) as ctx:
            with collect.reading('Nova GET /os-aggregates'):
                json.loads('[' * 100000 + ']' * 100000)
        self.assertEqual('Nova GET /os-aggregates: the answer is nested too '
                         'deeply to be Nova\'s or Placement\'s',
                         str(ctx.exception))
