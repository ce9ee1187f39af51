"""scalecloud answers the plugin's calls as the devcloud does.

The devcloud is collected into a snapshot, scalecloud serves that snapshot,
and every call of tools/scalecloud/calls.py (the plugin's own, which a unit
test holds it to) goes to both, with the same ids and microversions. The
answers must have the same structure: status, microversion header, keys,
value types, the next links of a paged listing (asked again with limit=1).
Values differ (times, request ids, the devcloud's URLs); where a key names
data (metadata, resource classes, consumers) only the values' structure
counts. Calls that would change something go in their harmless variant
(calls.Call.probe): a move to a host that does not exist, enabling an
enabled service.
"""

import datetime
import json
import time
import unittest
import urllib.parse

import openstack
import requests

from osc_leveller.cloud import collect
from osc_leveller.cloud import measure
from tests.functional import base
from tools.scalecloud import calls
from tools.scalecloud import cloud as scale

# Objects whose keys are data, not field names: their values are compared
# as one.
MAPS = {'allocations', 'inventories', 'usages', 'resources', 'metadata',
        'extra_specs', 'properties', 'scheduler_hints', 'addresses'}
# The devcloud's extra catalog entries and versions differ by design.
LISTS_OF_DATA = {'catalog'}


def shape(value, path='', found=None):
    """{path: {type names}} of a JSON value; list items and the values of
    MAPS share one path ('[]', '{}')."""
    found = {} if found is None else found
    kind = {dict: 'object', list: 'array', str: 'string', bool: 'boolean',
            int: 'integer', float: 'number', type(None): 'null'}[type(value)]
    found.setdefault(path, set()).add(kind)
    name = path.rsplit('.', 1)[-1]
    if isinstance(value, dict):
        if name in MAPS and not value:
            # whether a map has entries is data: null stands for any type
            found.setdefault(path + '.{}', set()).add('null')
        for key, item in value.items():
            shape(item, path + ('.{}' if name in MAPS else '.' + key), found)
    elif isinstance(value, list) and name not in LISTS_OF_DATA:
        for item in value:
            shape(item, path + '[]', found)
    return found


def differences(real, simulated):
    """What in the structure of two JSON answers differs, as text."""
    real, simulated = shape(real), shape(simulated)
    problems = []
    for path in sorted(set(real) | set(simulated)):
        mine, theirs = simulated.get(path), real.get(path)
        if theirs is None:
            problems.append('%s: only scalecloud has it' % path)
        elif mine is None:
            problems.append('%s: scalecloud lacks it' % path)
        elif mine - {'null'} and theirs - {'null'} and \
                mine - {'null'} != theirs - {'null'}:
            # null stands for any type: whether a field is set is data
            problems.append('%s: %s, the devcloud\'s %s' % (
                path, '/'.join(sorted(mine)), '/'.join(sorted(theirs))))
    return problems


class Side:
    """One cloud: where each service is, a token, the microversions, and
    the ids that are its own (the compute service's)."""

    def __init__(self, conn, prometheus_url, auth):
        self.conn = conn
        self.session = requests.Session()
        self.token = conn.session.get_token()
        self.root = {
            'keystone': _root(auth['auth_url']),
            'nova': _root(conn.compute.get_endpoint()),
            'placement': conn.placement.get_endpoint().rstrip('/'),
            'glance': _root(conn.image.get_endpoint()),
            'prometheus': prometheus_url.rstrip('/')}
        self.nova_max = '.'.join(
            map(str, conn.compute.get_endpoint_data().max_microversion))
        self.auth = auth

    def own(self, host):
        """The values of this cloud's own: credentials, the uuid of host's
        nova-compute service."""
        self.values = {
            'username': self.auth['username'],
            'password': self.auth['password'],
            'project': self.auth['project_name'],
            'service': self.conn.compute.get('/os-services', params={
                'host': host, 'binary': 'nova-compute'},
                microversion='2.53').json()['services'][0]['id']}

    def send(self, call, values, limit=None):
        values = dict(values, **self.values)
        params = calls.fill(call.params, values)
        if limit:
            params = dict(params, limit=limit)
        headers = dict(calls.header(call, self.nova_max))
        if call.service != 'prometheus':
            headers['X-Auth-Token'] = self.token
        return self.session.request(
            call.method, self.root[call.service] + calls.fill(
                call.path, values), params=params, headers=headers,
            json=calls.fill(call.body, values) if call.method in (
                'POST', 'PUT') else None, timeout=60)


def _root(url):
    """Nova's endpoint without /v2.1, Keystone's without /v3, Glance's
    without /v2: the calls' paths carry them."""
    split = urllib.parse.urlsplit(url.rstrip('/'))
    path = split.path.rsplit('/', 1)[0] if split.path.endswith(
        ('/v2.1', '/v3', '/v2')) else split.path
    return '%s://%s%s' % (split.scheme, split.netloc, path)


def _body(response):
    try:
        return response.json()
    except ValueError:
        return None


class TestAnswersLikeTheDevcloud(base.DevcloudTestCase):
    """Whatever the devcloud holds (the tests before leave servers, groups
    and migrations); no scenario is loaded."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        conn = openstack.connect(cloud='devcloud')
        # A year back, so the snapshot has the migrations that calls list;
        # measured, so scalecloud has series to serve.
        document = collect.Collector(
            conn, history_hours=24 * 365, metrics=measure.reader_from_settings(
                {'url': base._devcloud.PROMETHEUS, 'window': '30s'})
        ).collect()
        cls.cloud = scale.ScaleCloud(document, latency=0, bandwidth=None)
        cls.cloud.start()
        cls.real = Side(conn, base._devcloud.PROMETHEUS,
                        conn.config.config['auth'])
        cls.simulated = Side(cls.cloud.connection(), cls.cloud.prometheus_url,
                             cls.cloud.auth_args())
        cls.values = cls.pick(document)
        for side in (cls.real, cls.simulated):
            side.own(cls.values['host'])

    @classmethod
    def tearDownClass(cls):
        cls.cloud.stop()
        super().tearDownClass()

    @classmethod
    def pick(cls, document):
        """Ids that both clouds know: a running server in a group, its
        hypervisor, host, provider and compute service (an enabled one:
        the probe enables it)."""
        grouped = {m: g['id'] for g in document['server_groups']
                   for m in g['members']}
        enabled = {h['name'] for h in document['hypervisors']
                   if h['service']['status'] == 'enabled'}
        servers = sorted(document['servers'], key=lambda s: (
            s['hypervisor'] not in enabled, s['id'] not in grouped,
            s['status'] != 'ACTIVE', s['name']))
        if not servers:
            raise unittest.SkipTest('the devcloud has no servers')
        server = servers[0]
        hyp = next(h for h in document['hypervisors']
                   if h['name'] == server['hypervisor'])
        since = datetime.datetime.now(datetime.timezone.utc) - \
            datetime.timedelta(days=365)
        return {'server': server['id'], 'image': server.get('image') or '',
                'hypervisor': hyp['name'],
                'host': hyp['host'], 'provider': hyp['uuid'],
                'group': grouped.get(server['id'], ''),
                'since': since.strftime('%Y-%m-%dT%H:%M:%SZ'),
                'migration': '0', 'status': 'enabled',
                'time': '%.3f' % time.time()}

    def test_the_same_microversions_are_negotiated(self):
        for call in calls.CALLS:
            self.assertEqual(
                calls.version(call, self.real.nova_max),
                calls.version(call, self.simulated.nova_max), call)

    def test_every_call_has_the_same_structure(self):
        flavour = base._devcloud.flavour()
        problems = []
        for call in calls.CALLS:
            if call.service == 'prometheus' and flavour != 'kolla':
                continue  # scalecloud speaks kolla's exporters only
            if call.path.endswith('{group}') and not self.values['group']:
                continue
            values = dict(self.values, **(call.probe or {}))
            problems += self.compare(call, values)
            if call.pages:
                problems += self.compare(call, values, limit=1)
        self.assertEqual([], problems, '\n' + '\n'.join(problems))

    def compare(self, call, values, limit=None):
        name = '%s %s %s%s' % (call.service, call.method, calls.fill(
            call.path, dict(values, **self.simulated.values)),
            ' limit=1' if limit else '')
        real = self.real.send(call, values, limit)
        simulated = self.simulated.send(call, values, limit)
        problems = []
        if real.status_code != simulated.status_code:
            problems.append('status %d, the devcloud\'s %d: %s' % (
                simulated.status_code, real.status_code, real.text[:300]))
        for header in ('OpenStack-API-Version',):
            if real.headers.get(header) != simulated.headers.get(header):
                problems.append('%s: %s, the devcloud\'s %s' % (
                    header, simulated.headers.get(header),
                    real.headers.get(header)))
        real_body, body = _body(real), _body(simulated)
        problems += differences(real_body, body)
        if call.pages and limit:
            problems += self.links(call, real_body, body)
        return ['%s: %s' % (name, p) for p in problems]

    def links(self, call, real, simulated):
        """Next links of a page: the same path and query names."""
        def parts(body):
            hrefs = [link['href'] for link in (body or {}).get(call.pages, ())
                     if link.get('rel') == 'next']
            return [(urllib.parse.urlsplit(h).path.rsplit('/v2.1', 1)[-1],
                     sorted(urllib.parse.parse_qs(
                         urllib.parse.urlsplit(h).query))) for h in hrefs]
        real, simulated = parts(real), parts(simulated)
        if real != simulated:
            return ['%s: %s, the devcloud\'s %s' % (
                call.pages, json.dumps(simulated), json.dumps(real))]
        return []
