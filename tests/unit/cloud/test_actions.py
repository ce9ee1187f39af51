"""The Nova calls of cloud.actions, request by request.

A fake compute proxy records method, URL, body, microversion and query, and
answers with requests.Response objects as a keystoneauth adapter returns
them (raise_exc=False), so actions.py's own raise_from_response turns error
statuses into SDK exceptions exactly as against a real Nova.
"""

import datetime
import unittest

from keystoneauth1 import exceptions as ksa_exc
from openstack.compute.v2 import server as sdk_server
from openstack.compute.v2 import service as sdk_service
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import actions
from osc_leveller.cloud import cloudlock
from osc_leveller.core.run import executor
from tests.unit.cloud.test_collect import quiet
from tests.unit.cloud.test_collect import response


def sdk(resource, body):
    """The SDK's record of a JSON body, as its calls build them."""
    with quiet():
        return resource.existing(**body)


SERVER = '5b3c1d2e-0f4a-4b6c-9d8e-7f6a5b4c3d2e'
NOW = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=datetime.timezone.utc)

# Nova's error bodies (nova/api/openstack/wsgi.py Fault): one key naming
# the fault, its "message" the words an operator needs.
NOVA_ERRORS = {
    400: ('badRequest', 'Invalid input for field/attribute host. Value: '
          'cmp-zz. None is not of type string'),
    403: ('forbidden', "Policy doesn't allow os_compute_api:"
          "os-migrate-server:migrate_live to be performed."),
    409: ('conflictingRequest', "Cannot 'os-migrateLive' instance %s while "
          "it is in task_state migrating" % SERVER),
    500: ('computeFault', 'Unexpected API Error. Please report this at '
          'http://bugs.launchpad.net/nova/ and attach the Nova API log if '
          'possible.'),
}


def nova_error(status):
    key, message = NOVA_ERRORS[status]
    return response(status, {key: {'code': status, 'message': message}})


class FakeCompute:
    """conn.compute: raw calls and the two resource calls actions.py makes.

    answers: {(method, path): Response, or a callable (query) -> Response};
    unknown paths get Nova's 404.
    """

    def __init__(self, answers=None, servers=None, services=None):
        self.answers = answers or {}
        self.servers = servers or {}
        self.services_ = services or []
        self.requests = []

    def _call(self, method, url, json=None, microversion=None, params=None,
              **kwargs):
        self.requests.append({'method': method, 'url': url, 'json': json,
                              'microversion': microversion,
                              'params': params, 'kwargs': kwargs})
        answer = self.answers.get((method, url))
        if answer is None:
            return response(404, {'itemNotFound': {
                'code': 404, 'message': 'no route %s %s' % (method, url)}})
        return answer(params or {}) if callable(answer) else answer

    def get(self, url, **kwargs):
        return self._call('GET', url, **kwargs)

    def post(self, url, **kwargs):
        return self._call('POST', url, **kwargs)

    def put(self, url, **kwargs):
        return self._call('PUT', url, **kwargs)

    def delete(self, url, **kwargs):
        return self._call('DELETE', url, **kwargs)

    def get_server(self, server_id):
        self.requests.append({'method': 'get_server', 'url': server_id})
        answer = self.servers.get(server_id)
        if isinstance(answer, Exception):
            raise answer
        if answer is None:  # what the SDK's _get raises on Nova's 404
            sdk_exc.raise_from_response(response(404, {'itemNotFound': {
                'code': 404, 'message': 'Instance %s could not be found.'
                % server_id}}))
        return sdk(sdk_server.Server, answer)

    def services(self, **query):
        sdk_service.Service._query_mapping._validate(query)
        self.requests.append({'method': 'services', 'params': query})
        return iter([sdk(sdk_service.Service, s) for s in self.services_
                     if all(s.get(k) == v for k, v in query.items())])


def acts(compute):
    class Conn:
        pass
    conn = Conn()
    conn.compute = compute
    return actions.Actions(conn)


ACTION = '/servers/%s/action' % SERVER


class TestMigrations(unittest.TestCase):
    def test_live_migrate_names_the_host_and_never_forces(self):
        compute = FakeCompute({('POST', ACTION): response(202)})
        acts(compute).live_migrate(SERVER, 'cmp-hv2')
        [call] = compute.requests
        self.assertEqual(('POST', ACTION, '2.34'), (
            call['method'], call['url'], call['microversion']))
        self.assertEqual({'os-migrateLive': {'host': 'cmp-hv2',
                                             'block_migration': 'auto'}},
                         call['json'])
        self.assertNotIn('force', call['json']['os-migrateLive'])

    def test_cold_migrate_and_confirm(self):
        compute = FakeCompute({('POST', ACTION): response(202)})
        acts(compute).cold_migrate(SERVER, 'cmp-hv2')
        acts(compute).confirm(SERVER)
        cold, confirm = compute.requests
        self.assertEqual(({'migrate': {'host': 'cmp-hv2'}}, '2.56'),
                         (cold['json'], cold['microversion']))
        self.assertEqual(('POST', ACTION, {'confirmResize': None}), (
            confirm['method'], confirm['url'], confirm['json']))

    def test_abort(self):
        url = '/servers/%s/migrations/41' % SERVER
        compute = FakeCompute({('DELETE', url): response(202)})
        acts(compute).abort(SERVER, '41')
        [call] = compute.requests
        self.assertEqual(('DELETE', url, '2.65'), (
            call['method'], call['url'], call['microversion']))


def _record(mid, kind, created, status='running', server=SERVER):
    return {'id': mid, 'uuid': 'uuid-%d' % mid, 'instance_uuid': server,
            'migration_type': kind, 'status': status,
            'created_at': created, 'updated_at': created}


class TestMigrationRecord(unittest.TestCase):
    RECORDS = [
        _record(7, 'live-migration', '2026-11-20T10:00:00.000000',
                'completed'),
        _record(9, 'live-migration', '2026-11-20T11:00:00.000000'),
        _record(8, 'live-migration', '2026-11-20T10:30:00.000000', 'failed'),
        _record(12, 'migration', '2026-11-20T11:30:00.000000', 'finished'),
        _record(13, 'live-migration', '2026-11-20T11:45:00.000000',
                server='other'),
        _record(3, 'live-migration', '2026-11-19T08:00:00.000000',
                'completed'),
    ]

    def nova(self, query):
        """GET /os-migrations at 2.80: filters by server, type and time."""
        since = query.get('changes-since')
        return response(200, {'migrations': [
            m for m in self.RECORDS
            if m['instance_uuid'] == query.get('instance_uuid')
            and m['migration_type'] == query.get('migration_type')
            and (since is None or m['updated_at'] >= since.rstrip('Z'))]})

    def test_newest_live_migration_of_the_server(self):
        compute = FakeCompute({('GET', '/os-migrations'): self.nova})
        found = acts(compute).migration(SERVER, NOW.timestamp())
        [call] = compute.requests
        self.assertEqual('2.80', call['microversion'])
        # Five seconds of slack for clocks that differ.
        self.assertEqual({'instance_uuid': SERVER,
                          'migration_type': 'live-migration',
                          'changes-since': '2026-11-20T11:59:55Z'},
                         call['params'])
        # The integer id, what the abort call takes; not the uuid.
        self.assertEqual(executor.MigrationView(id='9', status='running'),
                         acts(compute).migration(
                             SERVER, NOW.timestamp() - 3 * 3600))
        self.assertIsNone(found)  # nothing since noon

    def test_cold_migration_record(self):
        compute = FakeCompute({('GET', '/os-migrations'): self.nova})
        found = acts(compute).migration(SERVER, NOW.timestamp() - 3600,
                                        cold=True)
        self.assertEqual('migration',
                         compute.requests[0]['params']['migration_type'])
        self.assertEqual(executor.MigrationView(id='12', status='finished'),
                         found)

    def test_newest_by_creation_then_id(self):
        records = [_record(21, 'live-migration', '2026-11-20T11:00:00Z',
                           'error'),
                   _record(22, 'live-migration', '2026-11-20T11:00:00Z')]
        compute = FakeCompute({('GET', '/os-migrations'): response(
            200, {'migrations': records[::-1]})})
        self.assertEqual('22', acts(compute).migration(SERVER, 0).id)

    def progress(self, record, shown):
        """(the view, the requests) of a migration whose server-migration
        show answers `shown` (a Response)."""
        compute = FakeCompute({
            ('GET', '/os-migrations'): response(200, {'migrations': [record]}),
            ('GET', '/servers/%s/migrations/%s' % (SERVER, record['id'])): shown})
        return acts(compute).migration(SERVER, 0), compute.requests

    def test_memory_progress_of_a_running_live_migration(self):
        # os-migrations leaves the figures out; the server's migrations
        # API shows them (libvirt's job info) while the move runs.
        record = _record(31, 'live-migration', '2026-11-20T11:00:00Z')
        found, calls = self.progress(record, response(200, {'migration': dict(
            record, server_uuid=SERVER, memory_total_bytes=134742016,
            memory_processed_bytes=100663296, memory_remaining_bytes=32505856,
            disk_total_bytes=0)}))
        self.assertEqual((134742016, 100663296, 32505856), found.memory)
        self.assertEqual(('GET', '/servers/%s/migrations/31' % SERVER, '2.80'),
                         (calls[1]['method'], calls[1]['url'],
                          calls[1]['microversion']))

    def test_no_progress_read_once_it_ended(self):
        # Nova shows only migrations in progress (404 after): not asked.
        for status in ('completed', 'failed', 'cancelled', 'error'):
            record = _record(34, 'live-migration', '2026-11-20T11:00:00Z',
                             status)
            found, calls = self.progress(record, response(404))
            self.assertEqual(1, len(calls), calls)
            self.assertIsNone(found.memory)

    def test_memory_figures_nova_does_not_give_are_unknown(self):
        # null (a queued migration), and what no Nova sends: each figure
        # on its own is unknown, never an error and never a number made up.
        record = _record(32, 'live-migration', '2026-11-20T11:00:00Z')
        for odd in (None, -1, 1.5, float('nan'), '100', True, 2 ** 64, [1]):
            found, _ = self.progress(record, response(200, {'migration': dict(
                record, memory_total_bytes=odd,
                memory_processed_bytes=1048576)}))
            self.assertEqual((None, 1048576, None), found.memory, odd)
        # A read that fails only leaves the figures out: the migration's
        # status, what the run decides on, is still read.
        for answer in (response(404), response(500), response(200, ['x']),
                       response(200, {'migration': 'x'})):
            found, _ = self.progress(record, answer)
            self.assertEqual(('32', 'running', None),
                             (found.id, found.status, found.memory))


NODE_VIEW = {
    'id': SERVER, 'name': 'web1', 'status': 'ACTIVE',
    'OS-EXT-STS:task_state': 'migrating', 'tenant_id': 'p1',
    'OS-EXT-SRV-ATTR:host': 'cmp-hv2',
    'OS-EXT-SRV-ATTR:hypervisor_hostname': 'hv2.cloud.example'}


class TestServer(unittest.TestCase):
    def test_server_view_separates_host_and_hypervisor(self):
        compute = FakeCompute(servers={SERVER: NODE_VIEW})
        with quiet():
            view = acts(compute).server(SERVER)
        self.assertEqual(executor.ServerView(
            status='ACTIVE', task_state='migrating', host='cmp-hv2',
            hypervisor='hv2.cloud.example'), view)

    def test_a_deleted_server_is_none(self):
        self.assertIsNone(acts(FakeCompute()).server(SERVER))


SERVICES = [
    # Another service of the same host first: only nova-compute counts.
    {'id': 'svc-cond', 'binary': 'nova-conductor', 'host': 'cmp-hv2',
     'status': 'enabled', 'state': 'up'},
    {'id': 'svc-cmp-hv2', 'binary': 'nova-compute', 'host': 'cmp-hv2',
     'status': 'enabled', 'state': 'up'},
    {'id': 'svc-cmp-hv3', 'binary': 'nova-compute', 'host': 'cmp-hv3',
     'status': 'enabled', 'state': 'up'},
]
SERVICE_URL = '/os-services/svc-cmp-hv2'


class TestService(unittest.TestCase):
    def test_disable_and_enable_the_compute_service_of_a_host(self):
        compute = FakeCompute({('PUT', SERVICE_URL): response(200, {})},
                              services=SERVICES)
        acts(compute).set_service('cmp-hv2', False, 'drain for repair')
        acts(compute).set_service('cmp-hv2', True, 'ignored')
        find, disable, _, enable = compute.requests
        self.assertEqual({'host': 'cmp-hv2', 'binary': 'nova-compute'},
                         find['params'])
        self.assertEqual(
            ('PUT', SERVICE_URL, '2.53',
             {'status': 'disabled', 'disabled_reason': 'drain for repair'}),
            (disable['method'], disable['url'], disable['microversion'],
             disable['json']))
        self.assertEqual((SERVICE_URL, {'status': 'enabled'}),
                         (enable['url'], enable['json']))

    def test_no_compute_service_on_the_host(self):
        with self.assertRaises(executor.ActionError) as ctx:
            acts(FakeCompute(services=SERVICES)).set_service('hv2', False)
        self.assertEqual('no nova-compute service on host hv2',
                         str(ctx.exception))


class TestErrors(unittest.TestCase):
    """Every refusal becomes an ActionError carrying Nova's own words."""

    def calls(self, status):
        """(what, answers, call) for every Nova call answered by status."""
        failing = nova_error(status)
        migrations = '/os-migrations'
        abort = '/servers/%s/migrations/41' % SERVER
        yield ('live', {('POST', ACTION): failing},
               lambda a: a.live_migrate(SERVER, 'cmp-hv2'))
        yield ('cold', {('POST', ACTION): failing},
               lambda a: a.cold_migrate(SERVER, 'cmp-hv2'))
        yield ('confirm', {('POST', ACTION): failing},
               lambda a: a.confirm(SERVER))
        yield ('abort', {('DELETE', abort): failing},
               lambda a: a.abort(SERVER, '41'))
        yield ('migration', {('GET', migrations): failing},
               lambda a: a.migration(SERVER, 0))
        yield ('service', {('PUT', SERVICE_URL): failing},
               lambda a: a.set_service('cmp-hv2', False, 'x'))

    def test_error_statuses(self):
        for status in sorted(NOVA_ERRORS):
            words = NOVA_ERRORS[status][1]
            for what, answers, call in self.calls(status):
                with self.subTest(status=status, call=what):
                    compute = FakeCompute(answers, services=SERVICES)
                    with self.assertRaises(executor.ActionError) as ctx:
                        call(acts(compute))
                    self.assertIn(words, str(ctx.exception))
                    # Nova's words, not the SDK's URL and status noise.
                    self.assertNotIn('Error for url', str(ctx.exception))

    def test_refusals_say_what_was_refused(self):
        compute = FakeCompute({('POST', ACTION): nova_error(409)})
        with self.assertRaises(executor.ActionError) as ctx:
            acts(compute).live_migrate(SERVER, 'cmp-hv2')
        self.assertEqual('Nova refused the live migration: ' +
                         NOVA_ERRORS[409][1], str(ctx.exception))
        compute = FakeCompute({('PUT', SERVICE_URL): nova_error(403)},
                              services=SERVICES)
        with self.assertRaises(executor.ActionError) as ctx:
            acts(compute).set_service('cmp-hv2', False)
        self.assertEqual('cannot disable the compute service of cmp-hv2: ' +
                         NOVA_ERRORS[403][1], str(ctx.exception))

    def test_server_read_errors(self):
        for status in (400, 403, 409, 500):
            with self.subTest(status=status):
                error = self.raised(nova_error(status))
                compute = FakeCompute(servers={SERVER: error})
                with self.assertRaises(executor.ActionError) as ctx:
                    acts(compute).server(SERVER)
                self.assertIn(NOVA_ERRORS[status][1], str(ctx.exception))
                self.assertNotIn('Error for url', str(ctx.exception))

    def raised(self, resp):
        try:
            sdk_exc.raise_from_response(resp)
        except sdk_exc.HttpException as exc:
            return exc
        raise AssertionError('no error raised for %d' % resp.status_code)

    def test_fault_string_and_plain_text_bodies(self):
        # A WSME-style root fault, and a proxy's plain text in front of Nova.
        fault = response(500, {'faultstring': 'Placement is unavailable',
                               'faultcode': 'Server'})
        plain = response(503)
        plain.headers['content-type'] = 'text/plain'
        plain._content = b'upstream connect error'
        for resp, words in ((fault, 'Placement is unavailable'),
                            (plain, 'Service Unavailable')):
            with self.subTest(words=words):
                compute = FakeCompute({('POST', ACTION): resp})
                with self.assertRaises(executor.ActionError) as ctx:
                    acts(compute).live_migrate(SERVER, 'cmp-hv2')
                self.assertIn(words, str(ctx.exception))

    def test_connection_failures(self):
        class Down(FakeCompute):
            def post(self, url, **kwargs):
                raise ksa_exc.ConnectFailure('Unable to establish connection '
                                             'to https://nova.example')

        with self.assertRaises(executor.ActionError) as ctx:
            acts(Down()).live_migrate(SERVER, 'cmp-hv2')
        self.assertIn('Unable to establish connection', str(ctx.exception))


class TestCloudLockKept(unittest.TestCase):
    """With the cloud lock, each migration is started only once the lock
    is kept (cloudlock.CloudLock.keep)."""

    def test_a_lost_lock_starts_no_migration(self):
        class Lost:
            def keep(self):
                raise cloudlock.Lost('this run no longer holds the cloud '
                                     'lock')
        compute = FakeCompute({('POST', ACTION): response(202, {})})
        act = acts(compute)
        act.cloud_lock = Lost()
        for start in (lambda: act.live_migrate(SERVER, 'cmp-hv2'),
                      lambda: act.cold_migrate(SERVER, 'cmp-hv2')):
            with self.assertRaises(executor.ActionError) as ctx:
                start()
            self.assertIn('no longer holds the cloud lock', str(ctx.exception))
        self.assertEqual([], compute.requests)

    def test_kept_then_started(self):
        kept = []
        compute = FakeCompute({('POST', ACTION): response(202, {})})
        act = acts(compute)
        act.cloud_lock = type('Kept', (), {'keep': lambda s: kept.append(1)})()
        act.live_migrate(SERVER, 'cmp-hv2')
        self.assertEqual([1], kept)
        self.assertEqual(['POST'], [r['method'] for r in compute.requests])
