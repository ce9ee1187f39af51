"""A stand-in OpenStack cloud for tests: Keystone, Nova, Placement, Glance,
Prometheus.

Real clients (keystoneauth, openstacksdk, requests, the ``openstack`` shell)
talk HTTP to it on 127.0.0.1, one ephemeral port per service. What it serves
comes from an osc-leveller snapshot document (format osc-leveller-snapshot/1),
so a test states the cloud in the planner's own terms and checks what the
collector reads back. Field names, microversions, paging and error bodies
follow Nova's, Placement's and Keystone's own API code; faults (non-JSON
bodies, wrong shapes, HTTP errors, resets, stalls, delays) can be switched
on per service and path prefix while it runs, and every request is counted::

    with standin.StandIn(builders.document(hyps, servers)) as cloud:
        conn = cloud.connection()
        cloud.fault('placement', '/resource_providers', 'status:503')
        ...
        cloud.counts[('nova', 'GET', '/v2.1/os-hypervisors/detail')]

Paths (for faults, counts and the request log) are request paths as sent,
without the query: Nova's carry its /v2.1 prefix, Keystone's its /v3; ids
are '{id}' in counts. Services: 'keystone', 'nova', 'placement', 'glance',
'prometheus'.

Simplifications: one region, one user; servers keep the snapshot's ids
(Nova's are always uuids); actions complete at once unless
``migration_outcome`` or ``bandwidth`` says otherwise; the scheduler's only
checks are capacity and a disabled destination service.

For scale work (tools/scalecloud) it also answers after a per-request
latency, serves at most ``concurrency`` requests of a service at once (the
rest wait, as for a service's workers), records the most requests in flight,
and times migrations (RAM / bandwidth, queued per source host as Nova's
max_concurrent_live_migrations does, a share failing). Listings are indexed,
so a page costs its length, not the cloud's size.
"""

import collections
import copy
import dataclasses
import datetime
import email.utils
import functools
import hashlib
import heapq
import http
import http.server
import json
import math
import os
import random
import re
import select
import socket
import socketserver
import struct
import sys
import threading
import time
import traceback
import urllib.parse
import uuid

import yaml

from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.rules import images as core_images

SERVICES = ('keystone', 'nova', 'placement', 'glance', 'prometheus')
# The real Nova goes on to 2.104; 2.100 is the most openstacksdk asks for.
NOVA_MIN, NOVA_MAX = (2, 1), (2, 100)
PLACEMENT_MIN, PLACEMENT_MAX = (1, 0), (1, 39)
FAULTS = ('non-json', 'shape', 'shape:null', 'shape:list', 'shape:string',
          'shape:items', 'status:NNN', 'reset', 'stall', 'slow:SECONDS',
          'retry-after:VALUE', 'cut')
SHAPES = ('null', 'list', 'string', 'items')
IN_PROGRESS = ('queued', 'preparing', 'running', 'post-migrating',
               'accepted', 'pre-migrating', 'migrating')
_NS = uuid.UUID('6f0e4d8a-7d1b-4c55-9a43-1d2f3a4b5c6d')
_HTML = (b'<!DOCTYPE html>\n<html><head><title>Sign in</title></head>'
         b'<body><h1>Single sign-on</h1><p>Please log in.</p></body></html>\n')
_UNEXPECTED = 'unexpected'
# Status -> vm_state and power_state, as Nova's common.py maps them back.
_VM_STATES = {'ACTIVE': ('active', 1), 'SHUTOFF': ('stopped', 4),
              'PAUSED': ('paused', 3), 'SUSPENDED': ('suspended', 7),
              'ERROR': ('error', 0), 'BUILD': ('building', 0),
              'VERIFY_RESIZE': ('resized', 1), 'MIGRATING': ('active', 1),
              'RESIZE': ('active', 1), 'SHELVED': ('shelved', 4),
              'SHELVED_OFFLOADED': ('shelved_offloaded', 4),
              'RESCUE': ('rescued', 1), 'REBOOT': ('active', 1),
              'HARD_REBOOT': ('active', 1), 'REBUILD': ('active', 1)}
_PROGRESS_STATUSES = ('ACTIVE', 'BUILD', 'REBUILD', 'RESIZE', 'VERIFY_RESIZE',
                      'MIGRATING')
_NOVA_FAULTS = {400: 'badRequest', 401: 'unauthorized', 403: 'forbidden',
                404: 'itemNotFound', 405: 'badMethod',
                409: 'conflictingRequest', 413: 'overLimit',
                415: 'badMediaType', 429: 'overLimit',
                501: 'notImplemented', 503: 'serviceUnavailable'}
_PROM_ERRORS = {400: 'bad_data', 422: 'execution', 503: 'unavailable',
                504: 'timeout'}
_TRUE = ('1', 't', 'true', 'on', 'y', 'yes')
_FALSE = ('0', 'f', 'false', 'off', 'n', 'no')


@functools.lru_cache(maxsize=65536)  # one per project, flavor, ... in views
def derived_uuid(kind, name):
    """The stable uuid the stand-in gives a thing the snapshot names only."""
    return str(uuid.uuid5(_NS, '%s:%s' % (kind, name)))


def host_ip(index):
    """Nova's host_ip of the index-th hypervisor (from 1): 192.0.2.N, then
    the benchmarking network 198.18.0.0/15, so each is unique."""
    if index < 250:
        return '192.0.2.%d' % (index + 1)
    return '198.%d.%d.%d' % (18 + (index >> 16), (index >> 8) & 255,
                             index & 255)


class PromQLError(Exception):
    """Raise from a Prometheus query function to answer an API error."""

    def __init__(self, message, error_type='bad_data', status=400):
        super().__init__(message)
        self.error_type, self.status = error_type, status


class Fault:
    """One switched-on fault; see StandIn.fault()."""

    def __init__(self, service, prefix, kind, method, times):
        self.service, self.prefix, self.kind = service, prefix, kind
        self.method, self.times = method, times
        self.hits = 0
        self.active = True  # still matches new requests
        self.released = False  # cleared: stalled requests go on

    def matches(self, service, method, path):
        return (self.active and service == self.service
                and path.startswith(self.prefix)
                and self.method in (None, method))

    def __repr__(self):
        return 'Fault(%r, %r, %r, hits=%d)' % (
            self.service, self.prefix, self.kind, self.hits)


# One request as it arrived: query {name: [values]}, headers the
# case-insensitive http.client.HTTPMessage, body bytes, at its
# time.monotonic().
Seen = collections.namedtuple(
    'Seen', 'service method path template query headers body at')


class _Fail(Exception):
    """An API error answer, in the service's own error format."""

    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status, self.message = status, message
        self.headers = headers or {}


class _Request:
    def __init__(self, service, method, path, query, headers, body, args):
        self.service, self.method, self.path = service, method, path
        self.query, self.headers, self.body = query, headers, body
        self.args = args  # the ids in the path
        self.version = None
        self.token = None  # the token's record, once authenticated

    def param(self, name, default=None):
        values = self.query.get(name)
        return values[-1] if values else default

    def json(self):
        try:
            return json.loads(self.body or b'null')
        except ValueError:
            raise _Fail(400, 'Malformed request body') from None

    @property
    def admin(self):
        return 'admin' in self.token['roles']


def _version_text(version):
    return '%d.%d' % version


def _parse_version(text, service, minimum, maximum):
    if text == 'latest':
        return maximum
    match = re.fullmatch(r'(\d+)\.(\d+)', text.strip())
    if not match:
        if service == 'compute':
            raise _Fail(400, 'API Version String %s is of invalid format. '
                        'Must be of format MajorNum.MinorNum.' % text)
        raise _Fail(400, 'invalid version string: %s' % text)
    version = (int(match.group(1)), int(match.group(2)))
    if not minimum <= version <= maximum:
        if service == 'compute':
            raise _Fail(406, 'Version %s is not supported by the API. '
                        'Minimum is %s and maximum is %s.' % (
                            text, _version_text(minimum),
                            _version_text(maximum)))
        raise _Fail(406, 'Unacceptable version header: %s' % text)
    return version


def _requested_version(headers, service, legacy=None):
    for part in (headers.get('OpenStack-API-Version') or '').split(','):
        name, _, value = part.strip().partition(' ')
        if name.lower() == service and value.strip():
            return value.strip()
    return headers.get(legacy) if legacy else None


def _bool_param(value):
    if value == '':
        return True  # Nova: an empty all_tenants enables it
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise _Fail(400, "Unrecognized value '%s', acceptable values are: %s"
                % (value, ', '.join("'%s'" % v for v in _TRUE + _FALSE)))


def _int_param(req, name):
    value = req.param(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise _Fail(400, '%s should be an integer.' % name) from None
    if number < 0:
        raise _Fail(400, '%s must be >= 0' % name)
    return number


def _strict(req, allowed):
    """Nova's query schemas that forbid unknown parameters."""
    unknown = sorted(set(req.query) - set(allowed))
    if unknown:
        raise _Fail(400, 'Invalid input for query parameters %s. Value: %s. '
                    'Additional properties are not allowed (%s was '
                    'unexpected)' % (unknown[0], req.param(unknown[0]),
                                     ', '.join(repr(u) for u in unknown)))


def _nova_time(moment):
    return moment.strftime('%Y-%m-%dT%H:%M:%S.%f') if moment else None


def _iso_z(moment):
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def _parse_iso(text):
    try:
        return datetime.datetime.fromtimestamp(
            snapshot_io.parse_time(text), datetime.timezone.utc)
    except ValueError:
        raise _Fail(400, "Invalid input for query parameters changes-since. "
                    "Value: %s. '%s' is not a 'date-time'" % (
                        text, text)) from None


def _from_epoch(seconds):
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def _prom_value(value):
    if isinstance(value, str):
        return value  # lets a test send a malformed sample
    value = float(value)
    if math.isnan(value):
        return 'NaN'
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    return str(int(value)) if value.is_integer() else repr(value)


def _template(pattern):
    return re.compile(re.escape(pattern).replace(r'\{id\}', '([^/]+)'))


_UUID = r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
_ID_SEGMENT = re.compile(r'^(%s|\d+)$' % _UUID)


def _generic_template(path):
    """Ids in a path no route knows, for counting."""
    return '/'.join('{id}' if _ID_SEGMENT.match(part) else part
                    for part in path.split('/'))


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = True  # server_close() joins the handler threads
    # A client opening its whole connection pool at once must not lose
    # SYNs to the listen backlog (5 by default): that costs a second each.
    request_queue_size = 1024

    def __init__(self, standin, name, port=0):
        self.standin, self.name = standin, name
        super().__init__(('127.0.0.1', port), _Handler)

    def process_request(self, request, client_address):
        # Tracked before its thread starts, so stop() can always unblock it.
        self.standin._track(request, True)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        self.standin._track(request, False)
        super().shutdown_request(request)

    def server_bind(self):
        # HTTPServer.server_bind() would look the address up (getfqdn).
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        # Clients that hang up (timeouts, resets) are part of the tests.
        if not isinstance(sys.exc_info()[1], OSError):
            self.standin.errors.append(traceback.format_exc())


class _Gate:
    """One service's workers: at most limit requests served at once (None:
    no limit), the others wait their turn; the most seen at once."""

    def __init__(self, limit):
        self.limit = limit
        self.cond = threading.Condition()
        self.serving = self.waiting = 0
        self.peak_in_flight = self.peak_serving = self.peak_waiting = 0
        self.closed = False

    def _free(self):
        return self.closed or self.limit is None or self.serving < self.limit

    def enter(self):
        with self.cond:
            self.peak_in_flight = max(self.peak_in_flight,
                                      self.waiting + self.serving + 1)
            if not self._free():
                self.waiting += 1
                self.peak_waiting = max(self.peak_waiting, self.waiting)
                self.cond.wait_for(self._free)
                self.waiting -= 1
            self.serving += 1
            self.peak_serving = max(self.peak_serving, self.serving)

    def leave(self):
        with self.cond:
            self.serving -= 1
            self.cond.notify()

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def stats(self):
        with self.cond:
            return {'in_flight': self.serving + self.waiting,
                    'max_in_flight': self.peak_in_flight,
                    'max_serving': self.peak_serving,
                    'max_waiting': self.peak_waiting}

    def reset(self):
        with self.cond:
            self.peak_in_flight = self.serving + self.waiting
            self.peak_serving, self.peak_waiting = self.serving, self.waiting


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'  # keep-alive, like the real services
    # Headers and body go out in two writes: without this, Nagle and
    # delayed ACKs add 40 ms to every keep-alive request.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        self.server.standin._handle(self)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def answer(self, status, body, headers, cut=False):
        if isinstance(body, bytes):
            data = body
        elif body is None and status in (202, 204):
            data = b''
        else:
            data = json.dumps(body).encode()
            headers.setdefault('Content-Type', 'application/json')
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        if self.command != 'HEAD' and status not in (204, 304):
            self.wfile.write(data[:len(data) // 2] if cut else data)
        if cut:
            self.close_connection = True

    def reset(self):
        # SO_LINGER 0: the close sends a TCP RST rather than a FIN.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                   struct.pack('ii', 1, 0))
        self.close_connection = True
        self.connection.close()  # closes once rfile and wfile are closed


class StandIn:
    """Keystone, Nova, Placement, Glance and Prometheus serving one snapshot.

    document: an osc-leveller-snapshot/1 document (validated with the
    project's parser; not modified). project_id: the project of the token;
    a snapshot project id makes that project's servers visible without
    all_projects. roles: without 'admin', Nova's admin APIs answer 403.
    max_limit: Nova's [api] max_limit, the page size of its listings.
    prometheus: a function promql -> [(labels, value)], or None for no
    series; prometheus_range: a function (promql, start, end, step) ->
    [(labels, [(time, value)])] for range queries, or (status, body bytes)
    answered as is; None: the instant answer at every time of the range.
    prometheus_names: the metric names its label values API
    lists. child_providers: {hypervisor name: [{'name', 'inventories',
    'allocations': {consumer: {rc: amount}}, 'traits'}]}, nested Placement
    providers. Glance serves the snapshot's images (one it records as
    unknown answers 404); a snapshot without images boots each server from
    a plain image of its flavor's name. A provider's traits can be set as in Placement (PUT
    /resource_providers/{uuid}/traits at its generation); a hypervisor
    whose traits the snapshot does not know has none. migration_outcome:
    'completed', 'running' (until complete_migrations()) or 'error'; the
    same for cold migrations, which complete as 'finished' (VERIFY_RESIZE)
    until confirmed.

    For scale work: latency, seconds before each answer (a number, or
    {service: seconds}); concurrency, requests one service serves at once
    (None: no limit), the rest wait; stats() says the most in flight.
    bandwidth (MiB/s): a migration accepted with outcome 'completed' takes
    migration_overhead + RAM / bandwidth seconds; live ones wait while
    their source compute already runs live_migrations_per_host (Nova's
    max_concurrent_live_migrations); failure_rate of them fail (drawn with
    seed) and roll back, a live one to ACTIVE on its source as 'failed'.
    keep_requests: keep every request in .requests (the counts are kept
    either way).
    """

    LISTENERS = SERVICES  # one port each

    def __init__(self, document=None, username='admin', password='secret',
                 project_name='admin', project_id=None,
                 roles=('admin', 'member', 'reader'), region='RegionOne',
                 max_limit=1000, prometheus=None, child_providers=None,
                 migration_outcome='completed', prometheus_names=(),
                 latency=0.0, concurrency=None, bandwidth=None,
                 migration_overhead=0.0, live_migrations_per_host=1,
                 failure_rate=0.0, seed=0, keep_requests=True):
        if document is None:
            document = {'format': snapshot_io.FORMAT,
                        'taken_at': '2026-11-20T12:00:00Z',
                        'hypervisors': [], 'servers': []}
        self.username, self.password = username, password
        self.project_name = project_name
        self.project_id = project_id or derived_uuid('project', project_name)
        self.user_id = derived_uuid('user', username)
        self.roles = tuple(roles)
        self.region = region
        # Keystone's catalog ids differ from one deployment to the next:
        # set another to stand in for another cloud.
        self.deployment = ''
        # Catalog service types left out (a cloud without Glance: 'image').
        self.not_in_catalog = set()
        # Aetos in front of its Prometheus: catalog type metric-storage,
        # a Keystone token on every query, no range queries, and a token
        # without admin or service sees its own project's series: none.
        self.aetos = False
        self.max_limit = max_limit
        self.prometheus = prometheus
        self.prometheus_range = None
        self.prometheus_names = list(prometheus_names)
        self.migration_outcome = migration_outcome
        self.latency = latency
        self.bandwidth = bandwidth
        self.migration_overhead = migration_overhead
        self.live_migrations_per_host = live_migrations_per_host
        self.failure_rate = failure_rate
        self.clock = time.time  # of timed migrations; a test may set its own
        self.keep_requests = keep_requests
        self.errors = []  # tracebacks of the stand-in's own failures
        self.requests = []  # Seen records, in arrival order
        self._counts = collections.Counter()
        self._cpu = collections.Counter()
        self._faults = []
        self._tokens = {}
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._stopping = False
        self._stopped = threading.Event()  # ends latency waits at once
        self._gates = {name: _Gate(concurrency) for name in SERVICES}
        self._flight_lock = threading.Lock()
        self._in_flight = self._peak_in_flight = 0
        self._random = random.Random(seed)
        self._due = []  # heap of (when, sequence, running timed migration)
        self._queued = collections.defaultdict(collections.deque)
        self._moving = collections.Counter()  # live migrations per source
        self._connections = set()
        self._conn_lock = threading.Lock()
        self._servers = {}
        self._thread = None
        self._wake = None
        self._routes = self._route_table()
        self._load(document, child_providers or {})

    # -- lifecycle -------------------------------------------------------

    def start(self):
        for name in self.LISTENERS:
            self._servers[name] = _Server(self, name, self._port(name))
        self._wake = socket.socketpair()
        self._thread = threading.Thread(target=self._accept_loop,
                                        name='standin-accept', daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop serving; stalled and idle keep-alive requests end too."""
        if self._thread is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._stopped.set()
        for gate in self._gates.values():
            gate.close()
        self._wake[1].send(b'x')
        self._thread.join()
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:  # unblocks handlers waiting for a request
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for server in self._servers.values():
            server.server_close()
        for sock in self._wake:
            sock.close()
        self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _accept_loop(self):
        # One selector for every listener plus a wake-up socket: stop()
        # needs no poll interval.
        sockets = {s.socket: s for s in self._servers.values()}
        while not self._stopping:
            ready, _, _ = select.select(list(sockets) + [self._wake[0]],
                                        [], [])
            for sock in ready:
                if sock is self._wake[0] or self._stopping:
                    continue
                server = sockets[sock]
                try:
                    request, address = server.get_request()
                except OSError:
                    continue
                server.process_request(request, address)

    def _port(self, name):
        """The port a listener binds; 0: any free one."""
        return 0

    def _track(self, conn, add):
        with self._conn_lock:
            (self._connections.add if add else self._connections.discard)(
                conn)

    # -- addresses and client configuration --------------------------------

    def url(self, service):
        """The service's root URL (no version), e.g. http://127.0.0.1:N."""
        return 'http://127.0.0.1:%d' % self._servers[service].server_port

    @property
    def auth_url(self):
        return self.url('keystone') + '/v3'

    @property
    def nova_url(self):
        return self.url('nova') + '/v2.1'  # the catalog's compute endpoint

    @property
    def placement_url(self):
        return self.url('placement')

    @property
    def prometheus_url(self):
        return self.url('prometheus')

    def auth_args(self):
        return {'auth_url': self.auth_url, 'username': self.username,
                'password': self.password, 'project_name': self.project_name,
                'user_domain_name': 'Default',
                'project_domain_name': 'Default'}

    def connection(self, **kwargs):
        """A real openstacksdk Connection (no clouds.yaml, no OS_* vars)."""
        from openstack import connection
        args = dict(self.auth_args(), region_name=self.region,
                    identity_api_version='3')
        args.update(kwargs)
        return connection.Connection(**args)

    def token(self):
        """A valid token, for plain requests calls (X-Auth-Token)."""
        token = uuid.uuid4().hex
        with self._lock:
            self._tokens[token] = {'project_id': self.project_id,
                                   'roles': self.roles}
        return token

    def revoke_tokens(self):
        """Every token becomes invalid: clients must authenticate again."""
        with self._lock:
            self._tokens.clear()

    def write_clouds_yaml(self, path, cloud='standin', extra=None):
        """A clouds.yaml with one cloud; extra: more keys of its entry.

        For ``openstack --os-cloud standin ...`` with OS_CLIENT_CONFIG_FILE
        set to path (see shell_env()). Returns path.
        """
        entry = {'auth': self.auth_args(), 'region_name': self.region,
                 'identity_api_version': 3, 'interface': 'public'}
        entry.update(copy.deepcopy(extra or {}))
        with open(path, 'w', encoding='utf-8') as f:
            yaml.safe_dump({'clouds': {cloud: entry}}, f,
                           default_flow_style=False)
        return path

    @staticmethod
    def shell_env(clouds_yaml, base=None):
        """An environment for a subprocess: only that clouds.yaml, no OS_*."""
        env = {k: v for k, v in (os.environ if base is None else base).items()
               if not k.startswith('OS_')}
        env['OS_CLIENT_CONFIG_FILE'] = clouds_yaml
        return env

    # -- faults and counts ---------------------------------------------------

    def fault(self, service, prefix, kind, method=None, times=None):
        """Answer requests to service whose path starts with prefix badly.

        kind: 'non-json' (200, an HTML page); 'shape' or 'shape:null',
        'shape:list' (the answer inside a list), 'shape:string' (its main
        key holds a string), 'shape:items' (its items are not objects):
        200 with JSON of the wrong shape; 'status:NNN' (that status with
        the service's own error body); 'reset' (the request is read, then
        the connection is reset, no answer); 'stall' (the request is read
        and not answered until the fault is cleared, then normally, or the
        stand-in stops); 'slow:SECONDS' (answered normally that much
        later); 'retry-after:VALUE' (503 with that Retry-After header);
        'cut' (the answer broken off halfway, the connection closed).
        method: only that HTTP method. times: only the next that many
        requests. The newest matching fault wins. Returns the Fault;
        clear it with clear_faults(fault).
        """
        if service not in SERVICES:
            raise ValueError('unknown service %r' % service)
        self._check_kind(kind)
        fault = Fault(service, prefix, kind, method, times)
        with self._lock:
            self._faults.append(fault)
        return fault

    @staticmethod
    def _check_kind(kind):
        name, _, arg = kind.partition(':')
        try:
            if name == 'status' and 100 <= int(arg) <= 599:
                return
            if name == 'slow' and float(arg) >= 0:
                return
            if name == 'retry-after' and arg:
                return
        except ValueError:
            pass
        if kind in ('non-json', 'reset', 'stall', 'shape', 'cut') or (
                name == 'shape' and arg in SHAPES):
            return
        raise ValueError('unknown fault %r (one of %s)' % (
            kind, ', '.join(FAULTS)))

    def clear_faults(self, *faults, service=None):
        """Clear those faults, or all (of one service); stalls go on."""
        with self._cond:
            for fault in list(self._faults):
                if (fault in faults if faults else
                        service in (None, fault.service)):
                    fault.active, fault.released = False, True
                    self._faults.remove(fault)
            self._cond.notify_all()

    @property
    def counts(self):
        """Counter of (service, method, path template) -> requests."""
        with self._flight_lock:
            return collections.Counter(self._counts)

    @property
    def cpu(self):
        """Counter of (service, method, path template) -> CPU seconds the
        stand-in spent answering them (its own cost, not the latency)."""
        with self._flight_lock:
            return collections.Counter(self._cpu)

    def stats(self):
        """Requests in flight (arrived, not yet answered: served or
        waiting for a slot) now and at most, overall and per service."""
        with self._flight_lock:
            stats = {'in_flight': self._in_flight,
                     'max_in_flight': self._peak_in_flight}
        stats['services'] = {name: gate.stats()
                             for name, gate in self._gates.items()}
        return stats

    def reset_counts(self):
        """Forget the counts, the requests and the peaks in flight."""
        with self._flight_lock:
            self._counts.clear()
            self._cpu.clear()
            del self.requests[:]
            self._peak_in_flight = self._in_flight
        for gate in self._gates.values():
            gate.reset()

    def _take_fault(self, service, method, path):
        if not self._faults:
            return None
        with self._lock:
            for fault in reversed(self._faults):
                if fault.matches(service, method, path):
                    fault.hits += 1
                    if fault.times is not None and fault.hits >= fault.times:
                        fault.active = False
                        self._faults.remove(fault)
                    return fault
        return None

    # -- request handling ------------------------------------------------

    def _handle(self, handler):
        service = handler.server.name
        length = int(handler.headers.get('Content-Length') or 0)
        body = handler.rfile.read(length) if length else b''
        gate = self._gates[service]
        with self._flight_lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight,
                                       self._in_flight)
        gate.enter()
        try:
            latency = self.latency.get(service, 0.0) if isinstance(
                self.latency, dict) else self.latency
            if latency:
                self._stopped.wait(latency)
            return self._serve(handler, service, body)
        finally:
            gate.leave()
            with self._flight_lock:
                self._in_flight -= 1

    def _serve(self, handler, service, body):
        split = urllib.parse.urlsplit(handler.path)
        path = urllib.parse.unquote(split.path)
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        method = handler.command
        route = self._route(service, method, path)
        template = route[0] if route else _generic_template(path)
        with self._flight_lock:
            self._counts[(service, method, template)] += 1
            if self.keep_requests:
                self.requests.append(Seen(service, method, path, template,
                                          query, handler.headers, body,
                                          time.monotonic()))
        fault = self._take_fault(service, method, path)
        kind = fault.kind if fault else ''
        if kind == 'reset':
            return handler.reset()
        if kind == 'stall':
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stopping or fault.released)
        elif kind.startswith('slow:'):
            with self._cond:
                self._cond.wait_for(lambda: self._stopping,
                                    float(kind.split(':', 1)[1]))
        if self._stopping:
            handler.close_connection = True
            return None
        req = _Request(service, method, path, query, handler.headers, body,
                       route[2] if route else ())
        started = time.thread_time()
        status, payload, headers = self._answer(req, route)
        if kind:
            status, payload, headers = self._spoil(service, kind, status,
                                                   payload, headers)
        try:
            handler.answer(status, payload, headers, cut=kind == 'cut')
        except OSError:
            handler.close_connection = True
        with self._flight_lock:
            self._cpu[(service, method, template)] += \
                time.thread_time() - started
        return None

    def _answer(self, req, route):
        service = req.service
        headers = {}
        try:
            try:
                if route is None:
                    self._no_route(req)
                if service in ('nova', 'placement', 'glance') and route[3]:
                    self._authenticate(req)
                if service == 'prometheus' and self.aetos:
                    self._authenticate(req)
                    if route[0] != '/api/v1/query' and \
                            not route[0].startswith('/api/v1/label/') or \
                            req.method != 'GET':
                        raise _Fail(404, 'The resource could not be found.')
                if service == 'nova':
                    req.version = _parse_version(
                        _requested_version(req.headers, 'compute',
                                           'X-OpenStack-Nova-API-Version')
                        or '2.1', 'compute', NOVA_MIN, NOVA_MAX)
                elif service == 'placement':
                    req.version = _parse_version(
                        _requested_version(req.headers, 'placement')
                        or '1.0', 'placement', PLACEMENT_MIN, PLACEMENT_MAX)
                with self._lock:
                    self._advance()
                    result = route[1](req, *req.args)
                status, payload = result if isinstance(result, tuple) \
                    else (200, result)
            except _Fail as exc:
                status, payload = exc.status, self._error_body(
                    service, exc.status, exc.message)
                headers.update(exc.headers)
        except Exception:
            self.errors.append(traceback.format_exc())
            status, payload = 500, self._error_body(
                service, 500, 'Unexpected API Error. Please report this.')
        headers.update(self._service_headers(req))
        if isinstance(payload, _WithHeaders):
            headers.update(payload.headers)
            payload = payload.body
        return status, payload, headers

    def _service_headers(self, req):
        request_id = 'req-%s' % uuid.uuid4()
        headers = {'x-openstack-request-id': request_id}
        if req.service == 'nova':
            headers['x-compute-request-id'] = request_id
            version = _version_text(req.version or NOVA_MIN)
            headers['OpenStack-API-Version'] = 'compute ' + version
            headers['X-OpenStack-Nova-API-Version'] = version
            headers['Vary'] = ('OpenStack-API-Version, '
                               'X-OpenStack-Nova-API-Version')
        elif req.service == 'placement':
            headers['openstack-request-id'] = request_id
            headers['OpenStack-API-Version'] = 'placement ' + _version_text(
                req.version or PLACEMENT_MIN)
            headers['Vary'] = 'openstack-api-version'
        elif req.service == 'prometheus':
            del headers['x-openstack-request-id']
        return headers

    def _error_body(self, service, status, message):
        title = http.HTTPStatus(status).phrase if status in \
            http.HTTPStatus._value2member_map_ else 'Error'
        if service == 'keystone' or status == 401:
            # keystonemiddleware answers 401s for Nova and Placement too
            return {'error': {'code': status, 'title': title,
                              'message': message}}
        if service == 'nova':
            return {_NOVA_FAULTS.get(status, 'computeFault'): {
                'code': status, 'message': message}}
        if service == 'glance':  # webob's JSON error page
            return {'message': message, 'code': '%d %s' % (status, title),
                    'title': title}
        if service == 'placement':
            return {'errors': [{'status': status, 'title': title,
                                'detail': message,
                                'request_id': 'req-%s' % uuid.uuid4(),
                                'code': 'placement.undefined_code'}]}
        return {'status': 'error', 'errorType': _PROM_ERRORS.get(
            status, 'internal'), 'error': message}

    def _spoil(self, service, kind, status, payload, headers):
        headers = {k: v for k, v in headers.items()
                   if k.lower() != 'content-type'}
        if kind == 'non-json':
            headers['Content-Type'] = 'text/html; charset=UTF-8'
            return 200, _HTML, headers
        if kind.startswith('status:'):
            code = int(kind.split(':', 1)[1])
            if code == 401:
                headers['WWW-Authenticate'] = 'Keystone uri="%s"' % \
                    self.url('keystone')
            return code, self._error_body(service, code, '%s (injected)' % (
                http.HTTPStatus(code).phrase if code in
                http.HTTPStatus._value2member_map_ else 'Error')), headers
        if kind.startswith('retry-after:'):
            headers['Retry-After'] = kind.split(':', 1)[1]
            return 503, self._error_body(
                service, 503, 'Service Unavailable (injected)'), headers
        if kind.startswith('shape'):
            shape = kind.partition(':')[2] or 'null'
            return 200, _misshape(payload, shape), headers
        return status, payload, headers

    def _no_route(self, req):
        for method, pattern, _, _, _ in self._routes[req.service]:
            if pattern.fullmatch(req.path):
                raise _Fail(405, 'The method %s is not allowed for this '
                            'resource.' % req.method)
        raise _Fail(404, 'The resource could not be found.')

    def _authenticate(self, req):
        token = self._tokens.get(req.headers.get('X-Auth-Token'))
        if token is None:
            raise _Fail(401, 'The request you have made requires '
                        'authentication.', {
                            'WWW-Authenticate': 'Keystone uri="%s"'
                            % self.url('keystone')})
        req.token = token

    def _route(self, service, method, path):
        """(template, function, needs auth, ids) or None."""
        for m, pattern, template, function, auth in self._routes[service]:
            match = pattern.fullmatch(path)
            if match and m == method:
                return template, function, match.groups(), auth
        return None

    def _route_table(self):
        table = {
            'keystone': [
                ('GET', '/', self._ks_versions, False),
                ('GET', '/v3', self._ks_version, False),
                ('GET', '/v3/', self._ks_version, False),
                ('POST', '/v3/auth/tokens', self._ks_issue, False),
                ('GET', '/v3/auth/tokens', self._ks_validate, False),
                ('HEAD', '/v3/auth/tokens', self._ks_validate, False),
                ('DELETE', '/v3/auth/tokens', self._ks_revoke, False),
            ],
            'nova': [
                ('GET', '/', self._nova_versions, False),
                ('GET', '/v2.1', self._nova_version, False),
                ('GET', '/v2.1/', self._nova_version, False),
                ('GET', '/v2.1/servers', self._servers_brief, True),
                ('GET', '/v2.1/servers/detail', self._servers_detail,
                 True),
                ('GET', '/v2.1/servers/{id}', self._server_show, True),
                ('POST', '/v2.1/servers/{id}/action', self._action, True),
                ('GET', '/v2.1/servers/{id}/migrations',
                 self._server_migrations, True),
                ('GET', '/v2.1/servers/{id}/migrations/{id}',
                 self._server_migration, True),
                ('DELETE', '/v2.1/servers/{id}/migrations/{id}',
                 self._abort, True),
                ('GET', '/v2.1/os-hypervisors', self._hypervisors_brief,
                 True),
                ('GET', '/v2.1/os-hypervisors/detail',
                 self._hypervisors_detail, True),
                ('GET', '/v2.1/os-hypervisors/{id}', self._hypervisor,
                 True),
                ('GET', '/v2.1/os-services', self._services, True),
                ('PUT', '/v2.1/os-services/{id}', self._service_update,
                 True),
                ('GET', '/v2.1/os-aggregates', self._aggregates, True),
                ('GET', '/v2.1/os-aggregates/{id}', self._aggregate,
                 True),
                ('GET', '/v2.1/os-server-groups', self._groups, True),
                ('GET', '/v2.1/os-server-groups/{id}', self._group, True),
                ('GET', '/v2.1/os-migrations', self._migrations, True),
                ('GET', '/v2.1/flavors/detail', self._flavors, True),
            ],
            'placement': [
                ('GET', '/', self._placement_versions, False),
                ('GET', '/resource_providers', self._providers, True),
                ('GET', '/resource_providers/{id}', self._provider, True),
                ('GET', '/resource_providers/{id}/inventories',
                 self._inventories, True),
                ('GET', '/resource_providers/{id}/usages', self._usages,
                 True),
                ('GET', '/resource_providers/{id}/allocations',
                 self._rp_allocations, True),
                ('GET', '/resource_providers/{id}/traits', self._traits,
                 True),
                ('PUT', '/resource_providers/{id}/traits', self._set_traits,
                 True),
                ('GET', '/allocations/{id}', self._consumer, True),
            ],
            'glance': [
                ('GET', '/', self._glance_versions, False),
                ('GET', '/v2/images/{id}', self._image, True),
            ],
            'prometheus': [
                ('GET', '/api/v1/query', self._prom_query, False),
                ('POST', '/api/v1/query', self._prom_query, False),
                ('GET', '/api/v1/query_range', self._prom_query_range,
                 False),
                ('GET', '/api/v1/label/{id}/values', self._prom_values,
                 False),
            ],
        }
        return {service: [(m, _template(t), t, f, auth)
                          for m, t, f, auth in routes]
                for service, routes in table.items()}

    # -- state -----------------------------------------------------------

    def _load(self, document, child_providers):
        # A copy, as the caller's document stays as it was; through JSON,
        # which copies a 250,000-server document ten times faster.
        snap = snapshot_io.parse(json.loads(json.dumps(document)),
                                 origin='the stand-in document')
        self.taken_at = _from_epoch(snap.taken_at)
        self._hyps = []
        self._by_name = {}
        self._by_host = {}
        zones = {}
        aggregates = collections.OrderedDict()
        for index, h in enumerate(snap.hypervisors):
            hyp = {
                'name': h.name, 'host': h.host, 'index': index + 1,
                'uuid': h.uuid or derived_uuid('hypervisor', h.name),
                'service_uuid': derived_uuid('service', h.host),
                'zone': h.availability_zone or 'nova',
                'status': h.service.status, 'state': h.service.state,
                'forced_down': h.service.forced_down,
                'disabled_reason': h.service.disabled_reason or None,
                'inventories': {rc: {
                    'total': i.total, 'reserved': i.reserved,
                    'min_unit': i.min_unit, 'max_unit': i.max_unit,
                    'step_size': i.step_size,
                    'allocation_ratio': i.allocation_ratio}
                    for rc, i in h.inventories.items()},
                # A real provider always has a list: unknown is none here.
                'traits': sorted(h.traits or ()),
                'cpu': {'arch': h.cpu_arch, 'model': h.cpu_model,
                        'features': sorted(h.cpu_features)},
                # Nova always says; a snapshot without them: libvirt 8.2
                'hypervisor_type': h.hypervisor_type or 'QEMU',
                'hypervisor_version': 8002000 if h.hypervisor_version is None
                else h.hypervisor_version,
                'usages': dict(h.usages),
                'metrics': {k: v for k, v in dataclasses.asdict(
                    h.metrics).items() if v is not None} if h.metrics else {},
                'generation': 1,
            }
            self._hyps.append(hyp)
            self._by_name[h.name] = hyp
            self._by_host.setdefault(h.host, hyp)
            for agg in h.aggregates:
                entry = aggregates.setdefault(agg.name, {
                    'name': agg.name, 'metadata': dict(agg.metadata),
                    'hosts': []})
                entry['hosts'].append(h.host)
            if hyp['zone'] != 'nova':
                zones.setdefault(hyp['zone'], []).append(h.host)
        # Nova's AZs are aggregates with availability_zone metadata; the
        # default zone 'nova' has none.
        for zone, hosts in zones.items():
            named = [a for a in aggregates.values()
                     if a['metadata'].get('availability_zone') == zone]
            if not named:
                aggregates[zone] = {
                    'name': zone, 'metadata': {'availability_zone': zone},
                    'hosts': list(hosts)}
        self._aggregates = []
        for index, agg in enumerate(aggregates.values()):
            agg.update(id=index + 1, uuid=derived_uuid('aggregate',
                                                       agg['name']))
            self._aggregates.append(agg)
        self._control = [
            {'binary': binary, 'host': 'controller', 'zone': 'internal',
             'uuid': derived_uuid('service', binary), 'status': 'enabled',
             'state': 'up', 'forced_down': False, 'disabled_reason': None,
             'index': len(self._hyps) + n + 1}
            for n, binary in enumerate(('nova-scheduler', 'nova-conductor'))]

        self._server_list = collections.OrderedDict()
        self._images_recorded = any(s.image is not None
                                    for s in snap.servers)
        self._images = {}  # Glance's: id -> its answer, None: gone
        self._boot_properties = {}
        for index, s in enumerate(snap.servers):
            flavor = s.flavor
            self._server_list[s.id] = {
                'id': s.id, 'name': s.name, 'index': index + 1,
                'project_id': s.project_id or self.project_id,
                'user_id': derived_uuid('user', s.project_id),
                'hypervisor': s.hypervisor, 'status': s.status,
                'task_state': s.task_state, 'locked': s.locked,
                'flavor': {'original_name': flavor.name,
                           'vcpus': flavor.vcpus, 'ram': flavor.ram,
                           'disk': flavor.disk, 'ephemeral': flavor.ephemeral,
                           'swap': flavor.swap,
                           'extra_specs': dict(flavor.extra_specs)},
                'boot_from_volume': s.boot_from_volume,
                'image': self._load_image(s),
                'metadata': dict(s.metadata), 'tags': list(s.tags),
                'pinned_availability_zone': s.pinned_availability_zone or None,
                'resources': dict(s.resources),
                'usage': {k: v for k, v in (('cpu', s.usage.cpu),
                                            ('ram', s.usage.ram))
                          if v is not None},
            }
        # Pages and markers by position, hypervisors by their servers.
        self._server_seq = list(self._server_list.values())
        self._server_pos = {s['id']: i for i, s in enumerate(self._server_seq)}
        self._residents = collections.Counter(
            s['hypervisor'] for s in self._server_seq)
        self._groups_list = []
        self._member_of = {}  # server id: its groups' ids
        for g in snap.server_groups:
            members = [m for m in g.members if m in self._server_list]
            for member in members:
                self._member_of.setdefault(member, []).append(g.id)
            owner = g.project_id or (
                self._server_list[members[0]]['project_id'] if members
                else self.project_id)
            self._groups_list.append({
                'id': g.id, 'name': g.name, 'policy': g.policy,
                'members': list(g.members),
                'max_server_per_host': g.max_server_per_host,
                'project_id': owner, 'user_id': derived_uuid('user', owner)})
        self._migration_list = []
        for m in snap.migrations:
            self._add_migration(
                m.server_id, m.migration_type, m.status, m.source_compute,
                m.dest_compute, _from_epoch(m.created_at),
                _from_epoch(m.updated_at), mid=m.id)

        # Placement: one consumer per server on its hypervisor; usages the
        # snapshot records beyond its servers' belong to an in-progress
        # migration from that host, or to an unnamed consumer.
        self._allocations = {h['uuid']: {} for h in self._hyps}
        for s in self._server_list.values():
            self._allocations[self._by_name[s['hypervisor']]['uuid']][
                s['id']] = dict(s['resources'])
        for hyp in self._hyps:
            held = self._allocations[hyp['uuid']]
            rest = {rc: amount - sum(r.get(rc, 0) for r in held.values())
                    for rc, amount in hyp.pop('usages').items()}
            rest = {rc: amount for rc, amount in rest.items() if amount > 0}
            if rest:
                consumer = next(
                    (m['uuid'] for m in self._migration_list
                     if m['status'] in IN_PROGRESS and
                     m['source_compute'] == hyp['host']),
                    derived_uuid('consumer', hyp['name']))
                held[consumer] = rest
        self._children = []
        for name, children in child_providers.items():
            parent = self._by_name[name]
            for child in children:
                rp_uuid = child.get('uuid') or derived_uuid('child',
                                                            child['name'])
                inventories = {rc: dict({'reserved': 0, 'min_unit': 1,
                                         'max_unit': inv['total'],
                                         'step_size': 1,
                                         'allocation_ratio': 1.0}, **inv)
                               for rc, inv in child['inventories'].items()}
                self._children.append({
                    'uuid': rp_uuid, 'name': child['name'],
                    'parent': parent['uuid'], 'inventories': inventories,
                    'traits': list(child.get('traits', ())),
                    'generation': 1})
                self._allocations[rp_uuid] = {
                    consumer: dict(resources) for consumer, resources in
                    child.get('allocations', {}).items()}
        self._provider_index = {h['uuid']: h for h in self._hyps}
        self._provider_index.update((c['uuid'], c) for c in self._children)

    def _load_image(self, server):
        """The id of the image Nova says the server was booted from ('':
        a volume), its image added to Glance's."""
        image = server.image
        if server.boot_from_volume or (image is not None and not image.id):
            return ''
        if image is None:  # a plain image per flavor, as before images
            name = server.flavor.name
            image = model.Image(
                id=derived_uuid('image', name), name=name,
                disk_format='qcow2', properties={})
        self._register_image(image)
        return image.id

    def _register_image(self, image):
        """Glance's answer for a model.Image, unless it has one."""
        if image.id in self._images:
            return
        # Nova keeps the properties of boot time, trait:* ones aside
        # from what 2.98 shows (only ImageMetaProps' own names).
        self._boot_properties[image.id] = {
            k: value for k, value in (image.properties or {}).items()
            if not k.startswith('trait:')}
        self._images[image.id] = None if not image.known else dict(
            image.properties, id=image.id, name=image.name or None,
            disk_format=image.disk_format or None,
            container_format='bare', status='active',
            visibility='public', protected=False, os_hidden=False,
            min_ram=0, min_disk=0, size=1073741824, virtual_size=1073741824,
            tags=[], checksum=None, os_hash_algo='sha512',
            os_hash_value=None, owner=derived_uuid('project', 'admin'),
            created_at=_iso_z(self.taken_at),
            updated_at=_iso_z(self.taken_at),
            self='/v2/images/%s' % image.id,
            file='/v2/images/%s/file' % image.id,
            schema='/v2/schemas/image')

    def boot_from(self, image_of, images):
        """Servers boot from these images: {server id: image id} and the
        model.Images (a Watcher cluster names none)."""
        with self._lock:
            for image in images:
                self._register_image(image)
            for server_id, image_id in image_of.items():
                server = self._server_list[server_id]
                if not server['boot_from_volume']:
                    server['image'] = image_id
            self._images_recorded = True

    def set_image(self, image_id, body):
        """Glance's answer for an image from now on (None: gone)."""
        with self._lock:
            self._images[image_id] = copy.deepcopy(body)

    def _add_migration(self, server_id, migration_type, status, source,
                       dest, created, updated, mid=None):
        node = {host: self._by_host[host]['name'] for host in (source, dest)
                if host in self._by_host}
        server = self._server_list.get(server_id, {})
        project = server.get('project_id', self.project_id)
        migration = {
            'id': len(self._migration_list) + 1,
            'uuid': mid if mid and re.fullmatch(_UUID, mid)
            else derived_uuid('migration', mid or uuid.uuid4().hex),
            'instance_uuid': server_id, 'status': status,
            'migration_type': migration_type,
            'source_compute': source or None, 'dest_compute': dest or None,
            'source_node': node.get(source), 'dest_node': node.get(dest),
            'dest_host': host_ip(self._by_host[dest]['index'])
            if dest in self._by_host else None,
            'created_at': created or self.taken_at, 'updated_at': updated,
            'project_id': project, 'user_id': derived_uuid('user', project),
        }
        self._migration_list.append(migration)
        return migration

    def _rp(self, rp_uuid):
        found = self._provider_index.get(rp_uuid)
        if found is None:
            raise _Fail(404, 'No resource provider with uuid %s found'
                        % rp_uuid)
        if 'parent' in found:  # a child provider
            return dict(found, root=found['parent'])
        return {'uuid': found['uuid'], 'name': found['name'],
                'parent': None, 'root': found['uuid'],
                'inventories': found['inventories'],
                'traits': found['traits'],
                'generation': found['generation']}

    def _providers_all(self):
        return [self._rp(rp_uuid) for rp_uuid in self._provider_index]

    def _usage(self, rp_uuid):
        used = {}
        for resources in self._allocations.get(rp_uuid, {}).values():
            for rc, amount in resources.items():
                used[rc] = used.get(rc, 0) + amount
        return used

    def _server_host(self, server):
        return self._by_name[server['hypervisor']]['host']

    def document(self):
        """The cloud now as a snapshot document (after actions, say)."""
        with self._lock:
            self._advance()
            member_of = collections.defaultdict(list)
            for a in self._aggregates:
                for host in a['hosts']:
                    member_of[host].append(a)
            hyps = []
            for h in self._hyps:
                aggs = [{'name': a['name'], 'metadata': dict(a['metadata'])}
                        for a in member_of[h['host']]]
                hyps.append({
                    'name': h['name'], 'host': h['host'], 'uuid': h['uuid'],
                    'availability_zone': h['zone'], 'aggregates': aggs,
                    'service': {'status': h['status'], 'state': h['state'],
                                'forced_down': h['forced_down'],
                                'disabled_reason': h['disabled_reason']},
                    'inventories': copy.deepcopy(h['inventories']),
                    'usages': self._usage(h['uuid']),
                    'cpu': dict(h['cpu']), 'traits': list(h['traits']),
                    'hypervisor_type': h['hypervisor_type'],
                    'hypervisor_version': h['hypervisor_version']})
                if h['metrics']:
                    hyps[-1]['metrics'] = dict(h['metrics'])
            servers = []
            for s in self._server_list.values():
                rp = self._by_name[s['hypervisor']]['uuid']
                flavor = dict(s['flavor'], name=s['flavor']['original_name'])
                del flavor['original_name']
                servers.append({
                    'id': s['id'], 'name': s['name'],
                    'project_id': s['project_id'],
                    'hypervisor': s['hypervisor'], 'status': s['status'],
                    'task_state': s['task_state'], 'locked': s['locked'],
                    'flavor': flavor,
                    'boot_from_volume': s['boot_from_volume'],
                    'metadata': dict(s['metadata']), 'tags': list(s['tags']),
                    'pinned_availability_zone':
                        s['pinned_availability_zone'],
                    'resources': dict(self._allocations[rp].get(
                        s['id'], s['resources']))})
                if s['usage']:
                    servers[-1]['usage'] = dict(s['usage'])
                if self._images_recorded and s['image']:
                    servers[-1]['image'] = s['image']
            images = {}
            if self._images_recorded:
                for image_id in sorted({s['image'] for s in servers
                                        if s.get('image')}):
                    body = self._images.get(image_id)
                    images[image_id] = None if body is None else {
                        'name': body['name'],
                        'disk_format': body['disk_format'],
                        'properties': {k: v for k, v in body.items()
                                       if core_images.kept(k)}}
            document = {
                'format': snapshot_io.FORMAT, 'taken_at': _iso_z(
                    datetime.datetime.now(datetime.timezone.utc)),
                'source': {'kind': 'test', 'cloud': 'standin'},
                'hypervisors': hyps, 'servers': servers,
                'server_groups': [{
                    'id': g['id'], 'name': g['name'], 'policy': g['policy'],
                    'project_id': g['project_id'], 'members': g['members'],
                    'rules': {} if g['max_server_per_host'] is None else {
                        'max_server_per_host': g['max_server_per_host']}}
                    for g in self._groups_list],
                'migrations': [{
                    'id': m['uuid'], 'server_id': m['instance_uuid'],
                    'status': m['status'],
                    'migration_type': m['migration_type'],
                    'source_compute': m['source_compute'],
                    'dest_compute': m['dest_compute'],
                    'created_at': _iso_z(m['created_at']),
                    'updated_at': m['updated_at'] and _iso_z(
                        m['updated_at'])}
                    for m in self._migration_list],
            }
            if self._images_recorded:
                document['images'] = images
            return document

    # -- Keystone ----------------------------------------------------------

    def _ks_version_doc(self):
        return {'id': 'v3.14', 'status': 'stable',
                'updated': '2020-04-07T00:00:00Z',
                'links': [{'rel': 'self',
                           'href': self.url('keystone') + '/v3/'}],
                'media-types': [{
                    'base': 'application/json',
                    'type': 'application/vnd.openstack.identity-v3+json'}]}

    def _ks_versions(self, req):
        return 300, {'versions': {'values': [self._ks_version_doc()]}}

    def _ks_version(self, req):
        return {'version': self._ks_version_doc()}

    def _ks_issue(self, req):
        body = req.json()
        try:
            identity = body['auth']['identity']
            methods = identity['methods']
        except (KeyError, TypeError):
            raise _Fail(400, 'Expecting to find identity in auth. The server '
                        'could not comply with the request since it is '
                        'either malformed or otherwise incorrect.') from None
        denied = _Fail(401, 'The request you have made requires '
                       'authentication.')
        if 'password' in methods:
            user = (identity.get('password') or {}).get('user') or {}
            domain = user.get('domain') or {}
            if (user.get('name') != self.username and
                    user.get('id') != self.user_id) or \
                    user.get('password') != self.password:
                raise denied
            if 'id' not in user and domain.get('name') != 'Default' and \
                    domain.get('id') != 'default':
                raise denied
        elif 'token' in methods:
            if (identity.get('token') or {}).get('id') not in self._tokens:
                raise denied
        else:
            raise denied
        scope = (body['auth'].get('scope') or {})
        project = scope.get('project')
        if scope and not project:
            raise denied  # system or domain scope: not this user's
        if project:
            domain = project.get('domain') or {}
            if project.get('id') != self.project_id and (
                    project.get('name') != self.project_name or
                    (domain.get('name') != 'Default' and
                     domain.get('id') != 'default')):
                raise denied
        token = uuid.uuid4().hex
        self._tokens[token] = {'project_id': self.project_id if project
                               else None, 'roles': self.roles}
        return 201, _WithHeaders(self._token_body(token), {
            'X-Subject-Token': token})

    def _token_body(self, token):
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp = '%Y-%m-%dT%H:%M:%S.000000Z'
        domain = {'id': 'default', 'name': 'Default'}
        body = {
            'methods': ['password'],
            'user': {'id': self.user_id, 'name': self.username,
                     'domain': domain, 'password_expires_at': None},
            'audit_ids': [hashlib.sha1(token.encode()).hexdigest()[:22]],
            'issued_at': now.strftime(stamp),
            'expires_at': (now + datetime.timedelta(hours=1)).strftime(stamp),
        }
        if self._tokens[token]['project_id']:
            body.update(
                project={'id': self.project_id, 'name': self.project_name,
                         'domain': domain},
                is_domain=False,
                roles=[{'id': derived_uuid('role', r), 'name': r}
                       for r in self.roles],
                catalog=self._catalog())
        return {'token': body}

    def _catalog(self):
        entries = []
        for service_type, name, url in (
                ('identity', 'keystone', self.url('keystone')),
                ('compute', 'nova', self.nova_url),
                ('placement', 'placement', self.placement_url),
                ('image', 'glance', self.url('glance')),
                ('metric-storage', 'aetos', self.prometheus_url)):
            if service_type in self.not_in_catalog or \
                    service_type == 'metric-storage' and not self.aetos:
                continue
            entries.append({
                'id': derived_uuid('service-entry', self.deployment + name),
                'type': service_type, 'name': name,
                'endpoints': [{
                    'id': derived_uuid('endpoint', name + interface),
                    'interface': interface, 'region': self.region,
                    'region_id': self.region, 'url': url}
                    for interface in ('public', 'internal', 'admin')]})
        return entries

    def _ks_validate(self, req):
        self._authenticate(req)
        token = req.headers.get('X-Subject-Token')
        if token not in self._tokens:
            raise _Fail(404, 'Could not find token: %s.' % token)
        return _WithHeaders(self._token_body(token),
                            {'X-Subject-Token': token})

    def _ks_revoke(self, req):
        self._authenticate(req)
        self._tokens.pop(req.headers.get('X-Subject-Token'), None)
        return 204, None

    # -- Nova: versions, servers --------------------------------------------

    def _nova_version_doc(self):
        return {'id': 'v2.1', 'status': 'CURRENT',
                'version': _version_text(NOVA_MAX),
                'min_version': _version_text(NOVA_MIN),
                'updated': '2013-07-23T11:33:21Z',
                'links': [{'rel': 'self', 'href': self.nova_url + '/'},
                          {'rel': 'describedby', 'type': 'text/html',
                           'href': 'http://docs.openstack.org/'}],
                'media-types': [{
                    'base': 'application/json',
                    'type': 'application/vnd.openstack.compute+json;'
                            'version=2.1'}]}

    def _nova_versions(self, req):
        return {'versions': [self._nova_version_doc()]}

    def _nova_version(self, req):
        return {'version': self._nova_version_doc()}

    def _policy(self, req, rule):
        if not req.admin:
            raise _Fail(403, "Policy doesn't allow %s to be performed."
                        % rule)

    def _paged(self, req, name, collection, items, view, key, keep=None,
               index=None):
        """{name: a page, name_links: the next} as Nova pages listings.

        key(item) is an item's marker; collection the listing's path;
        keep(item) whether the filters keep it; index {marker: position in
        items}, else built here. As in Nova, the marker may name an item
        the filters leave out.

        The next link comes when a page is exactly as long as the limit,
        so a listing that ends on a page boundary ends with an empty page.
        """
        limit = _int_param(req, 'limit')
        limit = self.max_limit if limit is None else min(limit,
                                                         self.max_limit)
        marker = req.param('marker')
        start = 0
        if marker is not None:
            if index is None:
                index = {str(key(item)): i for i, item in enumerate(items)}
            if marker not in index:
                raise _Fail(400, 'marker [%s] not found' % marker)
            start = index[marker] + 1
        page = []
        for position in range(start, len(items)):
            if len(page) == limit:
                break
            if keep is None or keep(items[position]):
                page.append(items[position])
        body = {name: [view(item) for item in page]}
        if page and len(page) == limit:
            params = {k: v[-1] for k, v in sorted(req.query.items())}
            params['marker'] = str(key(page[-1]))
            body[name + '_links'] = [{'rel': 'next', 'href': '%s/%s?%s' % (
                self.nova_url, collection, urllib.parse.urlencode(params))}]
        return body

    def _server_filter(self, req):
        """Whether a server is listed (a predicate), or None for all."""
        all_tenants = 'all_tenants' in req.query and _bool_param(
            req.param('all_tenants'))
        if all_tenants:
            self._policy(req, 'os_compute_api:servers:detail:'
                              'get_all_tenants')
        project = req.param('project_id') or req.param('tenant_id') \
            if all_tenants else req.token['project_id']
        # Nova drops the admin-only host filter for others.
        host = req.param('host') if req.admin else None
        node = req.param('node') if req.admin else None
        status, name = req.param('status'), req.param('name')
        if not (project or host or node or status or name):
            return None

        def keep(server):
            return not (
                project and server['project_id'] != project or
                host and self._server_host(server) != host or
                # Nova's node filter is a regular expression (not among
                # the exact filters of its instance query): hv1 finds hv10.
                node and not re.search(node, server['hypervisor']) or
                status and server['status'] != status.upper() or
                name and not re.search(name, server['name']))
        return keep

    def _servers_brief(self, req):
        return self._paged(
            req, 'servers', 'servers', self._server_seq,
            lambda s: {'id': s['id'], 'name': s['name'],
                       'links': self._server_links(s['id'])},
            lambda s: s['id'], self._server_filter(req), self._server_pos)

    def _servers_detail(self, req):
        return self._paged(
            req, 'servers', 'servers/detail', self._server_seq,
            lambda s: self._server_view(req, s, detail=True),
            lambda s: s['id'], self._server_filter(req), self._server_pos)

    def _server(self, req, server_id):
        server = self._server_list.get(server_id)
        if server is None or (not req.admin and
                              server['project_id'] != req.token['project_id']):
            raise _Fail(404, 'Instance %s could not be found.' % server_id)
        return server

    def _server_show(self, req, server_id):
        return {'server': self._server_view(req, self._server(req,
                                                              server_id))}

    def _server_links(self, server_id):
        return [{'rel': 'self', 'href': '%s/servers/%s' % (self.nova_url,
                                                           server_id)},
                {'rel': 'bookmark', 'href': '%s/servers/%s' % (
                    self.url('nova'), server_id)}]

    def _server_view(self, req, s, detail=False):
        v = req.version
        hyp = self._by_name[s['hypervisor']]
        vm_state, power_state = _VM_STATES.get(s['status'], ('active', 1))
        stamp = _iso_z(self.taken_at)
        if not s['image']:
            image = ''  # Nova's answer for a server booted from a volume
        else:
            image_id = s['image']
            image = {'id': image_id, 'links': [{
                'rel': 'bookmark',
                'href': '%s/images/%s' % (self.url('nova'), image_id)}]}
            if v >= (2, 98):  # the boot-time properties Nova shows
                image['properties'] = dict(self._boot_properties.get(
                    image_id, {}))
        if v >= (2, 47):
            flavor = dict(s['flavor'])
            if req.admin:
                flavor['extra_specs'] = dict(flavor['extra_specs'])
            else:
                del flavor['extra_specs']
        else:
            flavor_id = derived_uuid('flavor', s['flavor']['original_name'])
            flavor = {'id': flavor_id, 'links': [{
                'rel': 'bookmark',
                'href': '%s/flavors/%s' % (self.url('nova'), flavor_id)}]}
        view = {
            'id': s['id'], 'name': s['name'], 'status': s['status'],
            'tenant_id': s['project_id'], 'user_id': s['user_id'],
            'metadata': dict(s['metadata']),
            'hostId': hashlib.sha224(
                (s['project_id'] + hyp['host']).encode()).hexdigest(),
            'image': image, 'flavor': flavor, 'created': stamp,
            'updated': stamp, 'addresses': {}, 'accessIPv4': '',
            'accessIPv6': '', 'links': self._server_links(s['id']),
            'OS-DCF:diskConfig': 'MANUAL',
            'OS-EXT-AZ:availability_zone': hyp['zone'],
            'config_drive': '', 'key_name': None,
            'OS-SRV-USG:launched_at': stamp.replace('Z', '.000000'),
            'OS-SRV-USG:terminated_at': None,
            'OS-EXT-STS:task_state': s['task_state'],
            'OS-EXT-STS:vm_state': vm_state,
            'OS-EXT-STS:power_state': power_state,
            'os-extended-volumes:volumes_attached': [
                {'id': derived_uuid('volume', s['id']),
                 'delete_on_termination': False}]
            if s['boot_from_volume'] else [],
        }
        if s['status'] in _PROGRESS_STATUSES:
            view['progress'] = 0
        if req.admin:  # extended server attributes are admin-only
            view.update({
                'OS-EXT-SRV-ATTR:host': hyp['host'],
                'OS-EXT-SRV-ATTR:hypervisor_hostname': hyp['name'],
                'OS-EXT-SRV-ATTR:instance_name': 'instance-%08x' % s['index'],
            })
            if v >= (2, 3):
                view.update({
                    'OS-EXT-SRV-ATTR:hostname': re.sub(
                        r'[^a-z0-9-]', '-', s['name'].lower()),
                    'OS-EXT-SRV-ATTR:kernel_id': '',
                    'OS-EXT-SRV-ATTR:launch_index': 0,
                    'OS-EXT-SRV-ATTR:ramdisk_id': '',
                    'OS-EXT-SRV-ATTR:reservation_id': 'r-%08x' % s['index'],
                    'OS-EXT-SRV-ATTR:root_device_name': '/dev/vda',
                    'OS-EXT-SRV-ATTR:user_data': None})
        if v >= (2, 9):
            view['locked'] = s['locked']
        if v >= (2, 16):
            view['host_status'] = 'UP' if hyp['state'] == 'up' else 'DOWN'
        if v >= (2, 19):
            view['description'] = None
        if v >= (2, 26):
            view['tags'] = list(s['tags'])
        if v >= (2, 63):
            view['trusted_image_certificates'] = None
        if v >= (2, 71) and not detail:
            view['server_groups'] = list(self._member_of.get(s['id'], ()))
        if v >= (2, 73):
            view['locked_reason'] = None
        if v >= (2, 90) and not req.admin:
            view['OS-EXT-SRV-ATTR:hostname'] = re.sub(
                r'[^a-z0-9-]', '-', s['name'].lower())
        if v >= (2, 96):
            view['pinned_availability_zone'] = s['pinned_availability_zone']
        if v >= (2, 100):  # a group's members were booted with its hint
            view['scheduler_hints'] = {'group': [
                self._member_of[s['id']][0]]} if s['id'] in self._member_of \
                else {}
        return view

    # -- Nova: actions and migrations -----------------------------------------

    def _action(self, req, server_id):
        server = self._server(req, server_id)
        body = req.json()
        if not isinstance(body, dict) or len(body) != 1:
            raise _Fail(400, 'Malformed request body')
        name, args = next(iter(body.items()))
        if name == 'os-migrateLive':
            self._policy(req, 'os_compute_api:os-migrate-server:'
                              'migrate_live')
            if not isinstance(args, dict) or 'block_migration' not in args:
                raise _Fail(400, "Invalid input for field/attribute "
                            "os-migrateLive. Value: %s. 'block_migration' "
                            "is a required property" % args)
            self._check_state(server, 'os-migrateLive', ('ACTIVE', 'PAUSED'))
            self._migrate(server, self._destination(server, args.get('host')),
                          'live-migration')
            return 202, None
        if name == 'migrate':
            self._policy(req, 'os_compute_api:os-migrate-server:migrate')
            self._check_state(server, 'migrate', ('ACTIVE', 'SHUTOFF'))
            host = (args or {}).get('host') if req.version >= (2, 56) \
                else None
            self._migrate(server, self._destination(server, host),
                          'migration')
            return 202, None
        if name == 'confirmResize':
            self._check_state(server, 'confirmResize', ('VERIFY_RESIZE',))
            migration = next(
                (m for m in reversed(self._migration_list)
                 if m['instance_uuid'] == server_id and
                 m['status'] == 'finished'), None)
            if migration is None:
                raise _Fail(400, 'Instance has not been resized.')
            source = self._by_name[migration['source_node']]
            self._allocations[source['uuid']].pop(migration['uuid'], None)
            self._finish(migration, 'confirmed')
            server.update(status=server.pop('prior_status', 'ACTIVE'),
                          task_state=None)
            return 204, None
        raise _Fail(400, 'There is no such action: %s' % name)

    @staticmethod
    def _check_state(server, action, statuses):
        """Nova's check_instance_state: one of these statuses (vm_states),
        and no task under way."""
        if server['status'] not in statuses:
            raise _Fail(409, "Cannot '%s' instance %s while it is in "
                        "vm_state %s" % (action, server['id'], _VM_STATES.get(
                            server['status'], ('?',))[0]))
        if server['task_state'] is not None:
            raise _Fail(409, "Cannot '%s' instance %s while it is in "
                        "task_state %s" % (action, server['id'],
                                           server['task_state']))

    def _destination(self, server, host):
        current = self._by_name[server['hypervisor']]
        if host is None:  # the scheduler's pick: the emptiest other host
            others = [h for h in self._hyps if h is not current and
                      h['status'] == 'enabled']
            if not others:
                raise _Fail(400, 'No valid host was found.')
            return min(others, key=lambda h: sum(
                self._usage(h['uuid']).values()))
        found = self._by_host.get(host)
        if found is None:
            raise _Fail(400, 'Compute host %s could not be found.' % host)
        if found is current:
            raise _Fail(400, 'Unable to migrate instance (%s) to current '
                        'host (%s).' % (server['id'], host))
        return found

    def _fits(self, hyp, resources):
        used = self._usage(hyp['uuid'])
        for rc, amount in resources.items():
            inv = hyp['inventories'].get(rc)
            if inv is None:
                return False
            capacity = (inv['total'] - inv['reserved']) * \
                inv['allocation_ratio']
            if used.get(rc, 0) + amount > capacity:
                return False
        return True

    def _migrate(self, server, dest, migration_type):
        """Nova's conductor and computes: done at once, left running, or
        timed (bandwidth)."""
        now = self.clock()
        source = self._by_name[server['hypervisor']]
        migration = self._add_migration(
            server['id'], migration_type, 'accepted', source['host'],
            dest['host'], _from_epoch(now), _from_epoch(now))
        resources = self._allocations[source['uuid']].get(
            server['id'], dict(server['resources']))
        outcome = self.migration_outcome
        if outcome == 'error' or dest['status'] != 'enabled' or \
                not self._fits(dest, resources):
            migration['status'] = 'error'  # the scheduler said no
            return
        # While it moves, the source allocation belongs to the migration.
        self._allocations[source['uuid']].pop(server['id'], None)
        self._allocations[source['uuid']][migration['uuid']] = resources
        self._allocations[dest['uuid']][server['id']] = dict(resources)
        if migration_type == 'live-migration':
            migration['status'] = 'running'
            server.update(status='MIGRATING', task_state='migrating')
        else:
            migration['status'] = 'migrating'
            server.update(prior_status=server['status'], status='RESIZE',
                          task_state='resize_migrating')
        if outcome != 'completed':
            return
        if self.bandwidth is None:
            self._complete(migration)
            return
        migration['seconds'] = self.migration_overhead + \
            server['flavor']['ram'] / self.bandwidth
        migration['fails'] = self._random.random() < self.failure_rate
        if migration_type == 'live-migration':
            migration['status'] = 'queued'
            self._queued[source['host']].append(migration)
            self._start_queued(source['host'], now)
        else:
            self._run(migration, now)

    def _run(self, migration, at):
        """A timed migration starts moving at epoch second at."""
        live = migration['migration_type'] == 'live-migration'
        self._finish(migration, 'running' if live else 'migrating', at)
        heapq.heappush(self._due, (at + migration['seconds'],
                                   migration['id'], migration))
        if live:
            self._moving[migration['source_compute']] += 1

    def _start_queued(self, host, at):
        queue = self._queued[host]
        while queue and self._moving[host] < self.live_migrations_per_host:
            self._run(queue.popleft(), at)

    def _advance(self, now=None):
        """Timed migrations due by now end, in the order they end, and
        queued ones start as their source compute frees up."""
        now = self.clock() if now is None else now
        while self._due and self._due[0][0] <= now:
            when, _, migration = heapq.heappop(self._due)
            if migration['status'] not in ('running', 'migrating'):
                continue  # aborted meanwhile
            self._end(migration, when, migration['fails'])

    def _end(self, migration, at=None, fail=False):
        live = migration['migration_type'] == 'live-migration'
        if fail:  # the compute rolls it back
            self._roll_back(migration, 'failed' if live else 'error', at)
        else:
            self._complete(migration, at)
        if live and 'seconds' in migration:
            self._moving[migration['source_compute']] -= 1
            self._start_queued(migration['source_compute'],
                               at or self.clock())

    def _complete(self, migration, at=None):
        server = self._server_list[migration['instance_uuid']]
        source = self._by_name[migration['source_node']]
        self._residents[server['hypervisor']] -= 1
        self._residents[migration['dest_node']] += 1
        server['hypervisor'] = migration['dest_node']
        if migration['migration_type'] == 'live-migration':
            self._allocations[source['uuid']].pop(migration['uuid'], None)
            server.update(status='ACTIVE', task_state=None)
            self._finish(migration, 'completed', at)
        else:  # the source allocation stays until the resize is confirmed
            server.update(status='VERIFY_RESIZE', task_state=None)
            self._finish(migration, 'finished', at)

    def _roll_back(self, migration, status, at=None):
        """Back on the source as it was, the allocations too."""
        server = self._server_list[migration['instance_uuid']]
        source = self._by_name[migration['source_node']]
        dest = self._by_name[migration['dest_node']]
        self._allocations[dest['uuid']].pop(server['id'], None)
        self._allocations[source['uuid']][server['id']] = \
            self._allocations[source['uuid']].pop(migration['uuid'],
                                                  server['resources'])
        server.update(status=server.pop('prior_status', 'ACTIVE'),
                      task_state=None)
        self._finish(migration, status, at)

    def _finish(self, migration, status, at=None):
        migration.update(status=status, updated_at=_from_epoch(
            self.clock() if at is None else at))

    def complete_migrations(self):
        """Finish every running migration (migration_outcome='running')."""
        with self._lock:
            for migration in self._migration_list:
                if migration['status'] in ('running', 'migrating'):
                    self._end(migration)

    def _abort(self, req, server_id, migration_id):
        if req.version < (2, 24):
            raise _Fail(404, 'The resource could not be found.')
        self._policy(req, 'os_compute_api:servers:migrations:delete')
        if self._server(req, server_id)['task_state'] != 'migrating':
            raise _Fail(409, "Instance %s is in an invalid state for 'abort "
                        "live migration'" % server_id)
        migration = next((m for m in self._migration_list
                          if str(m['id']) == migration_id and
                          m['instance_uuid'] == server_id), None)
        if migration is None:
            raise _Fail(404, 'Migration %s not found for instance %s.' % (
                migration_id, server_id))
        abortable = ('running', 'queued', 'preparing') \
            if req.version >= (2, 65) else ('running',)
        if migration['migration_type'] != 'live-migration' or \
                migration['status'] not in abortable:
            raise _Fail(400, 'Migration %s state of instance %s is %s. '
                        'Cannot abort live migration in this state.' % (
                            migration_id, server_id, migration['status']))
        host = migration['source_compute']
        was_running = migration['status'] == 'running'
        self._roll_back(migration, 'cancelled')
        if migration in self._queued[host]:
            self._queued[host].remove(migration)
        elif was_running and 'seconds' in migration:
            self._moving[host] -= 1
            self._start_queued(host, self.clock())
        return 202, None

    def _migration_view(self, req, m):
        v = req.version
        view = {'id': m['id'], 'instance_uuid': m['instance_uuid'],
                'status': m['status'],
                'source_compute': m['source_compute'],
                'dest_compute': m['dest_compute'],
                'source_node': m['source_node'], 'dest_node': m['dest_node'],
                'dest_host': m['dest_host'],
                'old_instance_type_id': 1, 'new_instance_type_id': 1,
                'created_at': _nova_time(m['created_at']),
                'updated_at': _nova_time(m['updated_at'])}
        if v >= (2, 23):
            view['migration_type'] = m['migration_type']
            if m['migration_type'] == 'live-migration' and \
                    m['status'] in ('queued', 'preparing', 'running',
                                    'post-migrating'):
                path = 'servers/%s/migrations/%s' % (m['instance_uuid'],
                                                     m['id'])
                view['links'] = [
                    {'rel': 'self', 'href': '%s/%s' % (self.nova_url, path)},
                    {'rel': 'bookmark', 'href': '%s/%s' % (self.url('nova'),
                                                           path)}]
        if v >= (2, 59):
            view['uuid'] = m['uuid']
        if v >= (2, 80):
            view.update(project_id=m['project_id'], user_id=m['user_id'])
        return view

    def _migrations(self, req):
        self._policy(req, 'os_compute_api:os-migrations:index')
        v = req.version
        allowed = ['hidden', 'host', 'instance_uuid', 'source_compute',
                   'status', 'migration_type']
        if v >= (2, 59):
            allowed += ['limit', 'marker', 'changes-since']
            allowed += ['changes-before'] if v >= (2, 66) else []
            allowed += ['user_id', 'project_id'] if v >= (2, 80) else []
            _strict(req, allowed)
        since = req.param('changes-since') if v >= (2, 59) else None
        before = req.param('changes-before') if v >= (2, 66) else None
        since = since and _parse_iso(since)
        before = before and _parse_iso(before)
        found = []
        for m in self._migration_list:
            # changes-since compares updated_at, so a migration never
            # updated (updated_at null) is not "changed since" anything.
            if since and (m['updated_at'] is None or m['updated_at'] < since):
                continue
            if before and (m['updated_at'] is None or
                           m['updated_at'] > before):
                continue
            host = req.param('host')
            if host and host not in (m['source_compute'], m['dest_compute']):
                continue
            if not host and req.param('source_compute') and \
                    m['source_compute'] != req.param('source_compute'):
                continue
            if any(req.param(key) and m[field] != req.param(key) for
                   key, field in (('status', 'status'),
                                  ('migration_type', 'migration_type'),
                                  ('instance_uuid', 'instance_uuid'),
                                  ('user_id', 'user_id'),
                                  ('project_id', 'project_id'))):
                continue
            found.append(m)
        if v < (2, 59):
            return {'migrations': [self._migration_view(req, m)
                                   for m in found]}
        found.sort(key=lambda m: (m['created_at'], m['id']), reverse=True)
        return self._paged(req, 'migrations', 'os-migrations', found,
                           lambda m: self._migration_view(req, m),
                           lambda m: m['uuid'])

    def _server_migration(self, req, server_id, migration_id):
        """Nova's show of one live migration in progress, else 404."""
        if req.version < (2, 23):
            raise _Fail(404, 'The resource could not be found.')
        self._policy(req, 'os_compute_api:servers:migrations:show')
        found = [m for m in self._server_migrations(req, server_id)[
            'migrations'] if str(m['id']) == migration_id]
        if not found:
            raise _Fail(404, 'In-progress live migration %s is not found '
                        'for server %s.' % (migration_id, server_id))
        return {'migration': found[0]}

    def _server_migrations(self, req, server_id):
        if req.version < (2, 23):
            raise _Fail(404, 'The resource could not be found.')
        self._policy(req, 'os_compute_api:servers:migrations:index')
        self._server(req, server_id)
        items = []
        for m in self._migration_list:
            if m['instance_uuid'] != server_id or \
                    m['migration_type'] != 'live-migration' or \
                    m['status'] not in ('queued', 'preparing', 'running',
                                        'post-migrating'):
                continue
            view = self._migration_view(req, m)
            view['server_uuid'] = view.pop('instance_uuid')
            for key in ('migration_type', 'links', 'old_instance_type_id',
                        'new_instance_type_id'):
                view.pop(key, None)
            view.update(memory_total_bytes=None, memory_processed_bytes=None,
                        memory_remaining_bytes=None, disk_total_bytes=None,
                        disk_processed_bytes=None,
                        disk_remaining_bytes=None)
            items.append(view)
        return {'migrations': items}

    # -- Nova: hypervisors, services, aggregates, server groups ----------

    def _hypervisor_view(self, req, h, detail):
        v = req.version
        view = {'id': h['uuid'] if v >= (2, 53) else h['index'],
                'hypervisor_hostname': h['name'],
                'state': h['state'], 'status': h['status']}
        if not detail:
            return view
        view.update({
            'hypervisor_type': h['hypervisor_type'],
            'hypervisor_version': h['hypervisor_version'],
            'host_ip': host_ip(h['index']),
            'service': {'id': h['service_uuid'] if v >= (2, 53)
                        else h['index'], 'host': h['host'],
                        'disabled_reason': h['disabled_reason']}})
        if v >= (2, 88):
            view['uptime'] = None
            return view
        inv, used = h['inventories'], self._usage(h['uuid'])

        def total(rc):
            return inv.get(rc, {}).get('total', 0)
        ram_used = used.get('MEMORY_MB', 0) + inv.get(
            'MEMORY_MB', {}).get('reserved', 0)
        cpu = {}
        if h['cpu']['arch'] or h['cpu']['model'] or h['cpu']['features']:
            cpu = {'arch': h['cpu']['arch'], 'model': h['cpu']['model'],
                   'vendor': 'Intel', 'topology': {
                       'sockets': 1, 'threads': 2,
                       'cores': max(1, total('VCPU') // 2)},
                   'features': list(h['cpu']['features'])}
        view.update({
            'vcpus': total('VCPU'), 'memory_mb': total('MEMORY_MB'),
            'local_gb': total('DISK_GB'),
            'vcpus_used': used.get('VCPU', 0), 'memory_mb_used': ram_used,
            'local_gb_used': used.get('DISK_GB', 0),
            'free_ram_mb': total('MEMORY_MB') - ram_used,
            'free_disk_gb': total('DISK_GB') - used.get('DISK_GB', 0),
            'current_workload': 0,
            'running_vms': self._residents[h['name']],
            'disk_available_least': total('DISK_GB') - used.get('DISK_GB',
                                                                0),
            # 2.28 turned cpu_info from a JSON string into an object.
            'cpu_info': cpu if v >= (2, 28) else json.dumps(cpu)})
        return view

    def _hypervisor_list(self, req, detail):
        self._policy(req, 'os_compute_api:os-hypervisors:list%s' % (
            '-detail' if detail else ''))
        v = req.version
        if v >= (2, 53):
            _strict(req, ('limit', 'marker', 'hypervisor_hostname_pattern',
                          'with_servers'))
        hyps = self._hyps
        pattern = req.param('hypervisor_hostname_pattern') \
            if v >= (2, 53) else None
        if pattern is not None:
            if 'limit' in req.query or 'marker' in req.query:
                raise _Fail(400, 'Paging over hypervisors with the '
                            'hypervisor_hostname_pattern query parameter is '
                            'not supported.')
            hyps = [h for h in hyps if pattern in h['name']]
            if not hyps:
                raise _Fail(404, "No hypervisor matching '%s' could be "
                            "found." % pattern)
        if pattern is not None or v < (2, 33):  # no paging
            return {'hypervisors': [self._hypervisor_view(req, h, detail)
                                    for h in hyps]}
        return self._paged(
            req, 'hypervisors',
            'os-hypervisors/detail' if detail else 'os-hypervisors',
            hyps, lambda h: self._hypervisor_view(req, h, detail),
            lambda h: h['uuid'] if v >= (2, 53) else h['index'])

    def _hypervisors_brief(self, req):
        return self._hypervisor_list(req, False)

    def _hypervisors_detail(self, req):
        return self._hypervisor_list(req, True)

    def _hypervisor(self, req, hypervisor_id):
        self._policy(req, 'os_compute_api:os-hypervisors:show')
        for h in self._hyps:
            if hypervisor_id == (h['uuid'] if req.version >= (2, 53)
                                 else str(h['index'])):
                return {'hypervisor': self._hypervisor_view(req, h, True)}
        raise _Fail(404, "Hypervisor with ID '%s' could not be found."
                    % hypervisor_id)

    def _service_view(self, req, s, forced_down=True):
        view = {'id': s['service_uuid' if 'service_uuid' in s else 'uuid']
                if req.version >= (2, 53) else s['index'],
                'binary': s.get('binary', 'nova-compute'), 'host': s['host'],
                'zone': s['zone'], 'status': s['status'],
                'state': s['state'],
                'updated_at': _nova_time(self.taken_at),
                'disabled_reason': s['disabled_reason']}
        if req.version >= (2, 11) and forced_down:
            view['forced_down'] = s['forced_down']
        return view

    def _services(self, req):
        self._policy(req, 'os_compute_api:os-services:list')
        if req.version >= (2, 75):
            _strict(req, ('host', 'binary'))
        result = []
        for s in self._hyps + self._control:
            if req.param('binary') and \
                    s.get('binary', 'nova-compute') != req.param('binary'):
                continue
            if req.param('host') and s['host'] != req.param('host'):
                continue
            result.append(self._service_view(req, s))
        return {'services': result}

    def _service_update(self, req, service_id):
        self._policy(req, 'os_compute_api:os-services:update')
        if req.version < (2, 53):
            raise _Fail(404, 'Unknown action')  # the pre-2.53 actions
        body = req.json()
        if not isinstance(body, dict) or set(body) - {
                'status', 'disabled_reason', 'forced_down'}:
            raise _Fail(400, 'Invalid input for the service update: %s'
                        % body)
        if not body:
            raise _Fail(400, "No updates were requested. Fields 'status' or "
                        "'forced_down' should be specified.")
        service = next((h for h in self._hyps
                        if h['service_uuid'] == service_id), None)
        if service is None:
            if any(c['uuid'] == service_id for c in self._control):
                raise _Fail(400, 'Updating a nova-scheduler service is not '
                            'supported. Only nova-compute services can be '
                            'updated.')
            raise _Fail(404, 'Service %s not found.' % service_id)
        if body.get('status') not in (None, 'enabled', 'disabled'):
            raise _Fail(400, "Invalid input for field/attribute status.")
        if body.get('disabled_reason') and body.get('status') != 'disabled':
            raise _Fail(400, "Specifying 'disabled_reason' with status "
                        "'enabled' is invalid.")
        if 'status' in body:
            service['status'] = body['status']
            service['disabled_reason'] = body.get('disabled_reason') \
                if body['status'] == 'disabled' else None
        if 'forced_down' in body:
            service['forced_down'] = bool(body['forced_down'])
            service['state'] = 'down' if service['forced_down'] else 'up'
        return {'service': self._service_view(req, service)}

    def _aggregate_view(self, req, a):
        view = {'id': a['id'], 'name': a['name'],
                'availability_zone': a['metadata'].get('availability_zone'),
                'hosts': list(a['hosts']), 'metadata': dict(a['metadata']),
                'created_at': _nova_time(self.taken_at), 'updated_at': None,
                'deleted_at': None, 'deleted': False}
        if req.version >= (2, 41):
            view['uuid'] = a['uuid']
        return view

    def _flavors(self, req):
        """Nova's flavor list at 2.61: the flavors of the servers, then
        those of more_flavors (dicts as Nova shows them)."""
        found = {}
        for s in self._server_list.values():
            f = s['flavor']
            found.setdefault(f['original_name'], {
                'id': derived_uuid('flavor', f['original_name']),
                'name': f['original_name'], 'vcpus': f['vcpus'],
                'ram': f['ram'], 'disk': f['disk'],
                'OS-FLV-EXT-DATA:ephemeral': f['ephemeral'],
                'swap': f['swap'] or '',
                'extra_specs': dict(f['extra_specs'])})
        for f in getattr(self, 'more_flavors', ()):
            found.setdefault(f['name'], f)
        return {'flavors': list(found.values())}

    def _aggregates(self, req):
        self._policy(req, 'os_compute_api:os-aggregates:index')
        return {'aggregates': [self._aggregate_view(req, a)
                               for a in self._aggregates]}

    def _aggregate(self, req, aggregate_id):
        self._policy(req, 'os_compute_api:os-aggregates:show')
        for a in self._aggregates:
            if str(a['id']) == aggregate_id:
                return {'aggregate': self._aggregate_view(req, a)}
        raise _Fail(404, 'Aggregate %s could not be found.' % aggregate_id)

    def _group_view(self, req, g):
        # Nova lists only members that still exist.
        members = [m for m in g['members'] if m in self._server_list]
        view = {'id': g['id'], 'name': g['name'], 'members': members}
        if req.version >= (2, 64):
            view.update(policy=g['policy'], rules={} if g[
                'max_server_per_host'] is None else {
                    'max_server_per_host': g['max_server_per_host']})
        else:
            view.update(policies=[g['policy']], metadata={})
        if req.version >= (2, 13):
            view.update(project_id=g['project_id'], user_id=g['user_id'])
        return view

    def _groups(self, req):
        if req.version >= (2, 75):
            _strict(req, ('all_projects', 'limit', 'offset'))
        if 'all_projects' in req.query and req.admin:
            groups = self._groups_list
        else:
            groups = [g for g in self._groups_list
                      if g['project_id'] == req.token['project_id']]
        offset = _int_param(req, 'offset') or 0
        limit = min(_int_param(req, 'limit') or self.max_limit,
                    self.max_limit)
        return {'server_groups': [self._group_view(req, g) for g in
                                  groups[offset:offset + limit]]}

    def _group(self, req, group_id):
        for g in self._groups_list:
            if g['id'] == group_id and (
                    req.admin or g['project_id'] == req.token['project_id']):
                return {'server_group': self._group_view(req, g)}
        raise _Fail(404, 'Instance group %s could not be found.' % group_id)

    # -- Placement -------------------------------------------------------

    # -- Glance --------------------------------------------------------------

    def _glance_versions(self, req):
        link = self.url('glance') + '/v2/'
        return 300, {'versions': [
            {'id': 'v2.%d' % minor, 'status': 'CURRENT' if minor == 16
             else 'SUPPORTED', 'links': [{'rel': 'self', 'href': link}]}
            for minor in (16, 15, 9)]}

    def _image(self, req, image_id):
        body = self._images.get(image_id)
        if body is None:
            raise _Fail(404, 'No image found with ID %s' % image_id)
        return copy.deepcopy(body)

    def _placement_versions(self, req):
        return {'versions': [{
            'id': 'v1.0', 'max_version': _version_text(PLACEMENT_MAX),
            'min_version': _version_text(PLACEMENT_MIN), 'status': 'CURRENT',
            'links': [{'rel': 'self', 'href': ''}]}]}

    def _provider_view(self, req, rp):
        base = '/resource_providers/%s' % rp['uuid']
        view = {'uuid': rp['uuid'], 'name': rp['name'],
                'generation': rp['generation'],
                'links': [{'rel': 'self', 'href': base},
                          {'rel': 'inventories',
                           'href': base + '/inventories'},
                          {'rel': 'usages', 'href': base + '/usages'}]}
        if req.version >= (1, 1):
            view['links'].append({'rel': 'aggregates',
                                  'href': base + '/aggregates'})
        if req.version >= (1, 6):
            view['links'].append({'rel': 'traits', 'href': base + '/traits'})
        if req.version >= (1, 11):
            view['links'].append({'rel': 'allocations',
                                  'href': base + '/allocations'})
        if req.version >= (1, 14):
            view.update(parent_provider_uuid=rp['parent'],
                        root_provider_uuid=rp['root'])
        return view

    def _providers(self, req):
        providers = self._providers_all()
        if req.param('name') is not None:
            providers = [p for p in providers if p['name'] == req.param(
                'name')]
        if req.param('uuid') is not None:
            providers = [p for p in providers if p['uuid'] == req.param(
                'uuid')]
        if req.param('in_tree') is not None and req.version >= (1, 14):
            root = self._rp(req.param('in_tree'))['root']
            providers = [p for p in providers if p['root'] == root]
        return {'resource_providers': [self._provider_view(req, p)
                                       for p in providers]}

    def _provider(self, req, rp_uuid):
        return self._provider_view(req, self._rp(rp_uuid))

    def _inventories(self, req, rp_uuid):
        rp = self._rp(rp_uuid)
        return {'inventories': copy.deepcopy(rp['inventories']),
                'resource_provider_generation': rp['generation']}

    def _usages(self, req, rp_uuid):
        rp = self._rp(rp_uuid)
        return {'usages': self._usage(rp_uuid),
                'resource_provider_generation': rp['generation']}

    def _rp_allocations(self, req, rp_uuid):
        rp = self._rp(rp_uuid)
        allocations = {consumer: {'resources': dict(resources)}
                       for consumer, resources in
                       self._allocations[rp_uuid].items()}
        if req.version >= (1, 28):
            for allocation in allocations.values():
                allocation['consumer_generation'] = 1
        return {'allocations': allocations,
                'resource_provider_generation': rp['generation']}

    def _traits(self, req, rp_uuid):
        if req.version < (1, 6):
            raise _Fail(404, 'The resource could not be found.')
        rp = self._rp(rp_uuid)
        return self._traits_body(req, rp['traits'], rp['generation'])

    def _traits_body(self, req, traits, generation):
        body = {'traits': list(traits),
                'resource_provider_generation': generation}
        if req.version < (1, 15):
            return body
        return _WithHeaders(body, {
            'Last-Modified': email.utils.format_datetime(
                self.taken_at, usegmt=True), 'Cache-Control': 'no-cache'})

    def _set_traits(self, req, rp_uuid):
        """Placement's PUT of a provider's traits: the whole list, at the
        provider's generation, which goes up. Simplification: a name of
        Placement's form needs no PUT /traits/{name} first."""
        if req.version < (1, 6):
            raise _Fail(404, 'The resource could not be found.')
        body = req.json()
        if not isinstance(body, dict) or set(body) != {
                'traits', 'resource_provider_generation'} or \
                not isinstance(body['traits'], list) or \
                not all(isinstance(t, str) and 1 <= len(t) <= 255
                        for t in body['traits']) or \
                type(body['resource_provider_generation']) is not int:
            raise _Fail(400, 'JSON does not validate: %s' % json.dumps(body))
        found = self._provider_index.get(rp_uuid)
        if found is None:
            raise _Fail(404, 'No resource provider with uuid %s found'
                        % rp_uuid)
        if found['generation'] != body['resource_provider_generation']:
            raise _Fail(409, "Resource provider's generation already "
                        "changed. Please update the generation and try "
                        "again.")
        unknown = sorted(t for t in set(body['traits'])
                         if not re.fullmatch('[A-Z0-9_]+', t))
        if unknown:
            raise _Fail(400, 'No such trait %s' % ', '.join(unknown))
        found['traits'] = sorted(set(body['traits']))
        found['generation'] += 1
        return self._traits_body(req, found['traits'], found['generation'])

    def _consumer(self, req, consumer):
        allocations = {
            rp_uuid: {'generation': self._rp(rp_uuid)['generation'],
                      'resources': dict(held[consumer])}
            for rp_uuid, held in self._allocations.items()
            if consumer in held}
        body = {'allocations': allocations}
        server = self._server_list.get(consumer)
        if allocations and req.version >= (1, 12):
            project = server['project_id'] if server else self.project_id
            body.update(project_id=project,
                        user_id=derived_uuid('user', project))
        if allocations and req.version >= (1, 28):
            body['consumer_generation'] = 1
        return body

    # -- Prometheus ------------------------------------------------------

    def _prom_query(self, req):
        query = req.param('query')
        if req.method == 'POST' and query is None:
            form = urllib.parse.parse_qs(req.body.decode('utf-8', 'replace'))
            query = (form.get('query') or [None])[-1]
        if not query:
            raise _Fail(400, 'invalid parameter "query": 1:1: parse error: '
                        'no expression found in input')
        function = self.prometheus
        if self.aetos and not {'admin', 'service'} & set(req.token['roles']):
            function = None  # Aetos adds project="<its id>" to the query
        try:
            samples = function(query) if function else []
        except PromQLError as exc:
            return exc.status, {'status': 'error',
                                'errorType': exc.error_type,
                                'error': str(exc)}
        now = round(time.time(), 3)
        return {'status': 'success', 'data': {
            'resultType': 'vector',
            'result': [{'metric': dict(labels),
                        'value': [now, _prom_value(value)]}
                       for labels, value in samples]}}

    def _prom_query_range(self, req):
        query = req.param('query')
        try:
            start, end, step = (float(req.param(k)) for k in (
                'start', 'end', 'step'))
        except (TypeError, ValueError):
            raise _Fail(400, 'invalid parameter "start", "end" or "step"') \
                from None
        if not query or step <= 0 or end < start:
            raise _Fail(400, 'invalid parameter "query", or a range that '
                        'is none')
        if (end - start) / step > 11000:  # Prometheus' own limit
            return 400, {'status': 'error', 'errorType': 'bad_data',
                         'error': 'exceeded maximum resolution of 11,000 '
                                  'points per timeseries. Try decreasing '
                                  'the query resolution (?step=XX)'}
        times = [round(start + k * step, 3)
                 for k in range(int((end - start) // step) + 1)]
        function = self.prometheus_range
        try:
            if function is None:
                series = [(labels, [(t, value) for t in times])
                          for labels, value in (self.prometheus(query)
                                                if self.prometheus else [])]
            else:
                series = function(query, start, end, step)
        except PromQLError as exc:
            return exc.status, {'status': 'error',
                                'errorType': exc.error_type,
                                'error': str(exc)}
        if isinstance(series, tuple):  # an answer no Prometheus gives
            return series
        return {'status': 'success', 'data': {
            'resultType': 'matrix',
            'result': [{'metric': dict(labels),
                        'values': [[t, _prom_value(value)]
                                   for t, value in points]}
                       for labels, points in series]}}

    def _prom_values(self, req, label):
        # Only metric names are asked for, and matched by name only.
        names = self.prometheus_names if label == '__name__' else []
        if self.aetos and not {'admin', 'service'} & set(req.token['roles']):
            names = []  # scoped to the token's project, as queries are
        for selector in req.query.get('match[]', ()):
            match = re.fullmatch(r'\{__name__=~"(.*)"\}', selector)
            if match:
                names = [n for n in names if re.fullmatch(match.group(1), n)]
        return {'status': 'success', 'data': list(names)}


class _WithHeaders:
    """A body that brings its own response headers."""

    def __init__(self, body, headers):
        self.body, self.headers = body, headers


def _misshape(payload, shape):
    """The answer, in JSON of the wrong shape."""
    if shape == 'null':
        return None
    if shape == 'list':
        return [payload]
    key = next((k for k, v in payload.items() if isinstance(v, (dict, list))),
               None) if isinstance(payload, dict) else None
    if key is None:
        return _UNEXPECTED if shape == 'string' else [_UNEXPECTED]
    value = payload[key]
    if shape == 'string':
        spoiled = _UNEXPECTED
    elif isinstance(value, list):
        spoiled = [_UNEXPECTED] * max(1, len(value))
    else:
        spoiled = {k: _UNEXPECTED for k in value} or {_UNEXPECTED:
                                                      _UNEXPECTED}
    return dict(payload, **{key: spoiled})


class StalledPort:
    """A 127.0.0.1 port on which TCP connect itself hangs.

    A listener with a backlog of 0 whose accept queue is already full
    (Linux drops further SYNs), so a client's connect times out rather than
    being refused. Use as a context manager, or close().
    """

    def __init__(self):
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(('127.0.0.1', 0))
        self._listener.listen(0)
        self.port = self._listener.getsockname()[1]
        self.url = 'http://127.0.0.1:%d' % self.port
        self._fillers = []
        try:
            self._fill()
        except Exception:
            self.close()
            raise

    def _queue_full(self):
        # Linux tcp_info of a listener: tcpi_unacked is the accept queue
        # length and tcpi_sacked its limit; full is "more than the limit".
        try:
            info = self._listener.getsockopt(socket.IPPROTO_TCP,
                                             socket.TCP_INFO, 104)
        except (AttributeError, OSError):
            return None
        unacked, sacked = struct.unpack_from('II', info, 24)
        return unacked > sacked

    def _fill(self):
        for _ in range(64):
            full = self._queue_full()
            if full:
                return
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            self._fillers.append(sock)
            sock.connect_ex(('127.0.0.1', self.port))
            # Loopback handshakes finish at once; one that does not means
            # the queue was already full (the fallback without tcp_info).
            _, writable, _ = select.select([], [sock], [], 0.2)
            if not writable and full is None:
                return
        raise RuntimeError('cannot fill the accept queue of port %d'
                           % self.port)

    def close(self):
        for sock in self._fillers:
            sock.close()
        self._listener.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
