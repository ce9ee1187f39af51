"""Read a live cloud from Nova and Placement into a snapshot document.

The result is the documented snapshot format (osc-leveller-snapshot/1), so a
live run and ``--snapshot FILE`` go through the same validation and the same
core model. Compute calls are a fixed handful plus one per page, whatever the
number of hypervisors; Placement has no bulk read, so it costs one call for
the providers plus two per provider, made in parallel. Lists are read as
JSON, not as openstacksdk resources: building a resource costs milliseconds,
minutes for the servers of a large cloud.
"""

import collections
import concurrent.futures
import contextlib
import datetime
import json
import threading
import time
import urllib.parse

import requests
from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc
from openstack import utils as sdk_utils

from osc_leveller.cloud import coverage
from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import prometheus
from osc_leveller.core import errors
from osc_leveller.core import snapshot

# 2.53: uuids for services and hypervisors; 2.59: migration uuids and
# changes-since; 2.64: server group policy and rules.
COMPUTE_MIN = '2.64'
# The last version whose hypervisor details carry cpu_info.
HYPERVISOR_VERSION = '2.87'
# The newest server fields read (2.96: pinned_availability_zone); older
# Novas answer at their own newest version.
SERVERS_VERSION = '2.96'
MIGRATIONS_VERSION = '2.80'  # uuid, paging by next link
SERVICE_VERSION = '2.53'  # service ids are uuids
PLACEMENT_MIN = '1.14'  # root and parent provider uuids
ALLOCATIONS_VERSION = '1.28'
GROUP_PAGE = 1000
WORKERS = 16  # parallel Placement reads; the connection pool is as large
RETRIES = 2  # reads that got no answer, sent again (setting cloud.retries)
MESSAGE = 300  # characters of a service's error text that messages quote


class CollectError(errors.LevellerError):
    """The cloud cannot be read; the message says what to do."""


@contextlib.contextmanager
def reading(what):
    """Failures while reading or joining one answer, named after it
    ('Nova GET /servers/detail'): an unreachable service, an error status,
    a body that is not JSON, or JSON of an unexpected shape."""
    try:
        yield
    except CollectError:
        raise
    except (sdk_exc.SDKException, ksa_exc.ClientException) as exc:
        raise CollectError('%s failed: %s' % (what, why(exc))) from exc
    except requests.exceptions.JSONDecodeError as exc:
        raise CollectError('%s: the answer is not JSON (%s)' % (
            what, exc)) from exc
    except RecursionError:
        raise CollectError('%s: the answer is nested too deeply to be '
                           'Nova\'s or Placement\'s' % what) from None
    # OverflowError: int() of an infinite number.
    except (KeyError, IndexError, TypeError, AttributeError,
            ValueError, OverflowError) as exc:
        raise CollectError('%s: the answer has an unexpected shape (%s: %s)'
                           % (what, type(exc).__name__, _short(exc))) \
            from exc


def why(exc):
    """The service's own words, without the URL and request noise."""
    return _short(getattr(exc, 'details', None) or exc)


def _short(text):
    text = str(text)
    return text if len(text) <= MESSAGE else text[:MESSAGE - 3] + '...'


def _get(proxy, url, key, kind, retries=RETRIES, **kwargs):
    """body[key] of a GET, checked to be a kind (list or dict)."""
    # A GET is safe to send again when a pooled keep-alive connection was
    # closed under it ("Remote end closed connection without response").
    return _body(proxy, url, key, kind, retries, **kwargs)[key]


def _body(proxy, url, key, kind, retries=RETRIES, **kwargs):
    """The body of a GET, checked to hold a kind (list or dict) at key."""
    response = proxy.get(url, connect_retries=retries, **kwargs)
    sdk_exc.raise_from_response(response)
    body = response.json()
    if not isinstance(body, dict) or not isinstance(body.get(key), kind):
        raise TypeError('expected an object with a %s "%s", got %s' % (
            kind.__name__, key, _short(json.dumps(body)[:80])))
    return body


def _pages(proxy, url, key, retries=RETRIES, params=None, on_page=None,
           **kwargs):
    """Every item of a list Nova pages with next links ('<key>_links').

    The next link's marker is sent to our own endpoint, not to the host the
    link names (a proxy may name one we cannot reach). A marker or a page
    seen before would page forever: that is an error.
    """
    items, markers, ids = [], set(), set()
    params = dict(params or {})
    while True:
        body = _body(proxy, url, key, list, retries, params=params, **kwargs)
        page = body[key]
        for item in page:
            _mapping('an item of "%s"' % key, item)
        new = {item.get('id') for item in page}
        if page and new <= ids:
            raise ValueError('paging loops: the page after marker %s repeats '
                             '%s already read' % (params.get('marker'), key))
        ids.update(new)
        items.extend(page)
        if on_page is not None:
            on_page(len(page))
        marker = _next_marker(body, key)
        if marker is None:
            return items
        if marker in markers:
            raise ValueError('paging loops: the next link of "%s" repeats '
                             'marker %s' % (key, _short(marker)))
        markers.add(marker)
        params['marker'] = marker


def _next_marker(body, key):
    """The marker of the body's next link, or None on the last page."""
    for link in body.get(key + '_links') or []:
        if isinstance(link, dict) and link.get('rel') == 'next':
            query = urllib.parse.urlsplit(str(link.get('href'))).query
            marker = urllib.parse.parse_qs(query).get('marker')
            if not marker:
                raise ValueError('the next link of "%s" has no marker: %s' % (
                    key, _short(link.get('href'))))
            return marker[0]
    return None


def check_access(conn):
    """Fail early, and clearly, on old APIs or missing admin rights."""
    with reading('Nova and Placement version discovery'):
        compute = sdk_utils.supports_microversion(conn.compute, COMPUTE_MIN)
        placement = sdk_utils.supports_microversion(conn.placement,
                                                    PLACEMENT_MIN)
    if not compute:
        raise CollectError(
            'Nova API microversion %s or later is needed (check '
            '--os-compute-api-version and the cloud\'s Nova release)'
            % COMPUTE_MIN)
    if not placement:
        raise CollectError('Placement API microversion %s or later is needed'
                           % PLACEMENT_MIN)
    try:
        with reading('Nova GET /os-services'):
            return services(conn.compute)
    except CollectError as exc:
        if isinstance(exc.__cause__, sdk_exc.ForbiddenException):
            raise CollectError(
                'listing compute services was refused: the leveller needs an '
                'admin role (Nova\'s default policy)') from exc
        raise


def services(compute, retries=RETRIES, **query):
    """The nova-compute services (of a host, with host=...)."""
    found = _get(compute, '/os-services', 'services', list, retries,
                 params=dict(query, binary='nova-compute'),
                 microversion=SERVICE_VERSION)
    for service in found:
        _mapping('a compute service', service)
    return found


def servers_version(compute):
    """The newest server microversion both we and Nova know."""
    return sdk_utils.maximum_supported_microversion(
        compute, SERVERS_VERSION) or COMPUTE_MIN


def servers(compute, version, retries=RETRIES, on_page=None, **query):
    """Servers of every project, with details (of a node, with node=...)."""
    return _pages(compute, '/servers/detail', 'servers', retries,
                  params=dict(query, all_tenants=1), microversion=version,
                  on_page=on_page)


def hypervisors(compute, retries=RETRIES, **query):
    """Hypervisor details at 2.87, the last version with cpu_info; no
    Ironic nodes."""
    found = _pages(compute, '/os-hypervisors/detail', 'hypervisors',
                   retries, params=query, microversion=HYPERVISOR_VERSION)
    return [h for h in found if h.get('hypervisor_type') != 'ironic']


def migrations(compute, since, retries=RETRIES, **query):
    """Migrations updated since then (changes-since)."""
    since = snapshot.format_datetime(since)
    return _pages(compute, '/os-migrations', 'migrations', retries,
                  params=dict(query, **{'changes-since': since}),
                  microversion=MIGRATIONS_VERSION)


def aggregates(compute, retries=RETRIES):
    found = _get(compute, '/os-aggregates', 'aggregates', list, retries,
                 microversion=COMPUTE_MIN)
    for aggregate in found:
        _mapping('an aggregate', aggregate)
    return found


class Quiet:
    """Progress that says nothing (see v1/progress.py for what speaks)."""

    def begin(self, what, total=None):
        pass

    def advance(self, count=1):
        pass

    def end(self, summary):
        pass


class Collector:
    def __init__(self, conn, history_hours=24.0, workers=WORKERS,
                 metrics=None, retries=RETRIES, progress=None):
        self.conn = conn
        self.history_hours = history_hours
        self.workers = workers
        self.metrics = metrics  # a measure.Reader, or None
        self.coverage = None    # what the metrics cover, after collect()
        self.retries = retries
        self.progress = progress or Quiet()
        # Learnt by collect(), for refresh.refresh: child resource
        # providers (id -> name) and Nova's host_ip of each hypervisor.
        self.children = {}
        self.host_ips = {}
        self.last_reading = None  # (monotonic time, measure.Reading)

    def read(self, refs, servers):
        """The metrics reader's Reading, remembered with its time."""
        reading = self.metrics.read(refs, servers)
        self.last_reading = (time.monotonic(), reading)
        return reading

    def collect(self, now=None):
        """The snapshot document; CollectError when the cloud cannot be read."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        compute_services, hyps = self._read_hypervisors()
        providers = self._read_providers()
        # Placement's two reads per provider go on in parallel while Nova's
        # pages are read one after another, and so does Prometheus.
        ahead = Measuring(self, _expected_refs(hyps, providers)) \
            if self.metrics is not None else None
        pool = concurrent.futures.ThreadPoolExecutor(self.workers)
        try:
            pending = [pool.submit(self._provider, rp) for rp in providers]
            found = self._read_servers()
            aggs, groups, migs = self._read_nova_lists(now)
            providers, allocations, unanswered = self._placement_answers(
                providers, pending)
            document = build_document(
                now=now, cloud=getattr(self.conn.config, 'name', None),
                region=getattr(self.conn.config, 'region_name', None),
                services=compute_services, hypervisors=hyps,
                aggregates=aggs, servers=found, groups=groups,
                migrations=migs, providers=providers,
                allocations=allocations, unanswered=unanswered)
            self.children = {rp['uuid']: rp['name'] for rp, _ in providers
                             if rp.get('parent_provider_uuid')}
            self.host_ips = {h['hypervisor_hostname']: h.get('host_ip')
                             for h in hyps}
            if ahead is not None:
                self._add_measured(document, ahead)
        finally:  # on an error, what is still queued is not sent
            pool.shutdown(wait=False, cancel_futures=True)
            if ahead is not None:
                ahead.abandon()
        return document

    def _read_hypervisors(self):
        """Nova's compute services (access checked) and hypervisors."""
        self.progress.begin('Nova compute services and hypervisors')
        compute_services = check_access(self.conn)
        with reading('Nova GET /os-hypervisors/detail'):
            found = hypervisors(self.conn.compute, self.retries)
        self.progress.end('%d hypervisors' % len(found))
        return compute_services, found

    def _read_providers(self):
        with reading('Placement GET /resource_providers'):
            providers = _get(self.conn.placement, '/resource_providers',
                             'resource_providers', list, self.retries,
                             microversion=PLACEMENT_MIN)
            for rp in providers:
                _mapping('a resource provider', rp)
                rp['uuid'] = str(rp['uuid'])
        return providers

    def _read_servers(self):
        say = self.progress
        say.begin('Nova servers')
        with reading('Nova GET /servers/detail'):
            found = servers(self.conn.compute,
                            servers_version(self.conn.compute),
                            self.retries, on_page=say.advance)
        say.end('%d servers' % len(found))
        return found

    def _read_nova_lists(self, now):
        """Aggregates, server groups and the migrations of the history."""
        say = self.progress
        say.begin('Nova aggregates, server groups and migrations')
        with reading('Nova GET /os-aggregates'):
            aggs = aggregates(self.conn.compute, self.retries)
        groups = self._server_groups()
        since = now - datetime.timedelta(hours=self.history_hours)
        with reading('Nova GET /os-migrations'):
            migs = migrations(self.conn.compute, since, self.retries)
        say.end('%d server groups, %d migrations' % (len(groups), len(migs)))
        return aggs, groups, migs

    def _placement_answers(self, providers, pending):
        """[(provider, inventories)], {uuid: allocations} and {uuid: why}
        of the providers Placement did not answer for, as _provider's reads
        end."""
        say = self.progress
        say.begin('Placement inventories and allocations',
                  total=len(providers))
        results = {}
        for rp, future in zip(providers, pending):
            results[rp['uuid']] = future.result()
            say.advance()
        say.end('%d resource providers' % len(providers))
        unanswered = {uuid: why for uuid, (_, _, why) in results.items()
                      if why}
        allocations = {uuid: result[1] for uuid, result in results.items()
                       if uuid not in unanswered}
        return ([(rp, results[rp['uuid']][0]) for rp in providers],
                allocations, unanswered)

    def _add_measured(self, document, ahead):
        """Prometheus's reading, begun ahead, joined to the document."""
        say = self.progress
        say.begin('Prometheus')
        measured = ahead.result(host_refs(document, self.host_ips), {
            s['id']: s['hypervisor'] for s in document['servers']})
        self.coverage = add_metrics(document, measured)
        say.end('load of %d hypervisors, %d servers' % (
            sum(1 for h in document['hypervisors'] if h['metrics']),
            sum(1 for s in document['servers'] if 'usage' in s)))

    def _server_groups(self):
        """All groups: the API pages by offset and gives no next link, and
        a page may be shorter than asked for (Nova's max_limit), so the
        end is the first empty page."""
        groups, offset, seen = [], 0, set()
        with reading('Nova GET /os-server-groups'):
            while True:
                page = _get(self.conn.compute, '/os-server-groups',
                            'server_groups', list, self.retries, params={
                                'all_projects': True, 'limit': GROUP_PAGE,
                                'offset': offset}, microversion=COMPUTE_MIN)
                if not page:
                    return groups
                # An answer that ignores the offset would page forever.
                for group in page:
                    _mapping('a server group', group)
                ids = {group.get('id') for group in page}
                if seen.issuperset(ids):
                    raise ValueError('the page at offset %d repeats server '
                                     'groups already read' % offset)
                seen.update(ids)
                groups.extend(page)
                offset += len(page)

    def _provider(self, rp):
        """(inventories, allocations, None), or (None, None, why) when
        Placement did not answer: that provider is left out, not the whole
        read (an answer of the wrong shape still ends it)."""
        try:
            url = '/resource_providers/%s/inventories' % rp['uuid']
            with reading('Placement GET %s' % url):
                inventories = _get(self.conn.placement, url, 'inventories',
                                   dict, self.retries)
            url = '/resource_providers/%s/allocations' % rp['uuid']
            with reading('Placement GET %s' % url):
                allocations = _get(self.conn.placement, url, 'allocations',
                                   dict, self.retries,
                                   microversion=ALLOCATIONS_VERSION)
        except CollectError as exc:
            reason = no_answer(exc.__cause__)
            if not reason:
                raise
            return None, None, reason
        return inventories, allocations, None


def no_answer(exc):
    """How a service under load failed to answer (timed out, no
    connection, a server-side error), or None for any other failure."""
    if isinstance(exc, ksa_exc.ConnectTimeout):
        return 'timed out'
    if isinstance(exc, ksa_exc.ConnectionError):
        return 'no connection'
    status = getattr(exc, 'status_code', None)
    if isinstance(status, int) and (status == 408 or status >= 500):
        return 'HTTP %d' % status
    return None


def _mapping(name, value):
    """True, or TypeError naming what is not an object (a text would
    pass "'total' in value")."""
    if not isinstance(value, dict):
        raise TypeError('%s is %s, not an object' % (
            name, type(value).__name__))
    return True


# Nova's names of the server fields read (servers/detail, admin).
NODE = 'OS-EXT-SRV-ATTR:hypervisor_hostname'
HOST = 'OS-EXT-SRV-ATTR:host'
TASK = 'OS-EXT-STS:task_state'
# What the document keeps of a Placement inventory.
INVENTORY = ('total', 'reserved', 'allocation_ratio', 'min_unit',
             'max_unit', 'step_size')


def build_document(now, cloud, region, services, hypervisors, aggregates,
                   servers, groups, migrations, providers, allocations,
                   unanswered=None):
    """Join what Nova and Placement said into a snapshot document.

    The joins, all of them:

    - hypervisor_hostname == root resource provider name == server's
      hypervisor_hostname (OS-EXT-SRV-ATTR:hypervisor_hostname);
    - hypervisor's service host == compute service host == aggregate host;
    - a consumer of a root provider's allocations is a server or a
      migration (its uuid): during a migration the source's allocation
      belongs to the migration and counts in usages. A server's own
      resources are its allocation on its own hypervisor (a
      rebuild-evacuation holds one on both);
    - an allocation on a child provider (a vGPU, a PCI device) is a
      blocker of its server.

    providers: [(provider, its inventories)]; allocations: {provider uuid:
    Placement's allocations}; unanswered: {provider uuid: why} of providers
    Placement did not answer for. A hypervisor whose provider, or one of
    its children, went unanswered is left out, and the note says so. A part
    of an answer that does not have the shape of Nova's or Placement's is a
    CollectError naming that part.
    """
    by_host = _services_by_host(services)
    host_aggregates = _aggregates_by_host(aggregates)
    roots, children, silent = _provider_tree(providers, unanswered or {})
    hyps = build_hypervisors(hypervisors, roots, silent, by_host,
                             host_aggregates, allocations)
    server_docs = build_servers(servers, hyps,
                                _child_allocations(children, allocations))
    if hyps.not_answered and not hyps.docs:
        raise CollectError('Placement answered for none of the %d '
                           'hypervisors: %s' % (len(hyps.not_answered), _short(
                               ', '.join(sorted(hyps.not_answered)))))
    return {
        'format': snapshot.FORMAT,
        'taken_at': snapshot.format_datetime(now),
        'source': build_source(cloud, region, hyps),
        'hypervisors': hyps.docs,
        'servers': server_docs,
        'server_groups': build_server_groups(groups),
        'migrations': build_migrations(migrations),
    }


def build_source(cloud, region, hyps):
    """Where the document comes from, noting the hypervisors left out."""
    source = {'kind': 'cloud', 'cloud': cloud, 'region': region}
    notes = []
    if hyps.left_out:
        notes.append('left out, no resource provider in Placement: %s'
                     % ', '.join(sorted(hyps.left_out)))
    if hyps.not_answered:
        notes.append('left out, Placement did not answer for them: %s'
                     % ', '.join(sorted(hyps.not_answered)))
    if notes:
        source['note'] = '; '.join(notes)
    return source


def _services_by_host(services):
    with reading('Nova GET /os-services'):
        return {s['host']: s for s in services}


def _aggregates_by_host(aggregates):
    """{compute host: its aggregates, as the document writes them}."""
    found = {}
    with reading('Nova GET /os-aggregates'):
        for agg in aggregates:
            for host in agg.get('hosts') or []:
                found.setdefault(host, []).append({
                    'name': agg['name'],
                    'metadata': {k: str(v) for k, v in
                                 (agg.get('metadata') or {}).items()}})
    return found


def _provider_tree(providers, unanswered):
    """roots {name: (provider, inventories)}, children {uuid: provider}
    and silent {root uuid: why}: the roots Placement did not answer for,
    or for one of whose children."""
    with reading('Placement GET /resource_providers'):
        roots = {rp['name']: (rp, inv) for rp, inv in providers
                 if not rp.get('parent_provider_uuid')}
        children = {rp['uuid']: rp for rp, _ in providers
                    if rp.get('parent_provider_uuid')}
        silent = dict(unanswered)
        for uuid, rp in children.items():
            if uuid in unanswered:
                silent.setdefault(rp.get('root_provider_uuid') or
                                  rp['parent_provider_uuid'],
                                  '%s: %s' % (rp['name'], unanswered[uuid]))
    return roots, children, silent


class Hypervisors(collections.namedtuple('Hypervisors', (
        'docs', 'consumers', 'left_out', 'not_answered'))):
    """The hypervisors section and what the rest of the document joins to
    it: consumers {consumer: {hypervisor: resources on its root provider}};
    the names of hypervisors left out, without a root provider, and those
    Placement did not answer for, with why."""


def build_hypervisors(hypervisors, roots, silent, by_host, host_aggregates,
                      allocations):
    """Hypervisors with their root provider's inventories and usages."""
    found = Hypervisors([], {}, [], [])
    for hyp in hypervisors:
        with reading('Nova GET /os-hypervisors/detail'):
            name = hyp['hypervisor_hostname']
            if not isinstance(name, str):
                raise TypeError('hypervisor_hostname is %s, not text'
                                % type(name).__name__)
            host = (hyp.get('service') or {}).get('host') or name
        root = roots.get(name)
        if root is None:  # not reported to Placement yet: nothing to plan with
            found.left_out.append(name)
            continue
        rp, inventory = root
        if rp['uuid'] in silent:
            found.not_answered.append('%s (%s)' % (name, silent[rp['uuid']]))
            continue
        usages, held = _usages(rp['uuid'], allocations)
        for consumer, resources in held.items():
            found.consumers.setdefault(consumer, {})[name] = resources
        inventories = _inventories(rp['uuid'], inventory)
        with reading('Nova GET /os-hypervisors/detail (%s)' % name):
            found.docs.append(_hypervisor_doc(
                hyp, host, rp['uuid'], by_host.get(host), host_aggregates,
                inventories, usages))
    return found


def _usages(uuid, allocations):
    """A provider's usages, and {consumer: resources} of its allocations."""
    usages, held = {}, {}
    with reading('Placement GET /resource_providers/%s/allocations' % uuid):
        for consumer, alloc in allocations.get(uuid, {}).items():
            resources = alloc.get('resources', {})
            for rc, amount in resources.items():
                usages[rc] = usages.get(rc, 0) + amount
            held[consumer] = dict(resources)
    return usages, held


def _inventories(uuid, inventories):
    with reading('Placement GET /resource_providers/%s/inventories' % uuid):
        return {rc: {k: inv[k] for k in INVENTORY if k in inv}
                for rc, inv in inventories.items() if _mapping(rc, inv)}


def _hypervisor_doc(hyp, host, uuid, service, host_aggregates, inventories,
                    usages):
    service = service or {}
    return {
        'name': hyp['hypervisor_hostname'],
        'host': host,
        'uuid': uuid,
        'availability_zone': service.get('zone'),
        'aggregates': host_aggregates.get(host, []),
        'service': {
            'status': service.get('status') or 'disabled',
            'state': service.get('state') or 'down',
            'forced_down': bool(service.get('forced_down', False)),
            'disabled_reason': service.get('disabled_reason'),
        },
        'inventories': inventories,
        'usages': usages,
        'cpu': _cpu_info(hyp),
        'traits': [],
        'metrics': None,
    }


def _cpu_info(hypervisor):
    info = hypervisor.get('cpu_info') or {}
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            info = {}
    return {'arch': info.get('arch'), 'model': info.get('model'),
            'features': sorted(info.get('features') or [])}


def _child_allocations(children, allocations):
    """{server id: its allocations on child providers, as blockers name
    them}."""
    found = {}
    for uuid, rp in children.items():
        with reading('Placement GET /resource_providers/%s/allocations'
                     % uuid):
            for consumer, alloc in allocations.get(uuid, {}).items():
                found.setdefault(consumer, set()).add(child_allocation(
                    rp['name'], alloc['resources']))
    return found


def child_allocation(provider, resources):
    """An allocation on a child provider, as a server's blocker names it:
    'hv1_pgpu0 (VGPU)'."""
    return '%s (%s)' % (provider, ', '.join(sorted(resources)))


def build_servers(servers, hyps, child_allocations):
    """The servers on the document's hypervisors: one unplaced (BUILD,
    ERROR) or on a hypervisor left out is not planned with."""
    known = {d['name'] for d in hyps.docs}
    docs = []
    for server in servers:
        with reading('Nova GET /servers/detail (server %s)' % (
                server.get('id', '?') if isinstance(server, dict) else '?')):
            _mapping('a server', server)
            if server.get(NODE) in known:
                docs.append(server_doc(
                    server, child_allocations.get(server['id'], ()),
                    hyps.consumers.get(server['id'])))
    return docs


def server_doc(server, child_allocations=(), held=None):
    """A server of Nova's servers/detail as the document writes it.

    child_allocations: its allocations on child providers (blockers);
    held: {hypervisor: resources} of its own allocations.
    """
    node = server[NODE]
    flavor = _flavor(server.get('flavor') or {})
    blockers = ['allocation on child resource provider %s' % c
                for c in sorted(child_allocations)]
    if flavor['extra_specs'].get('pci_passthrough:alias'):
        blockers.append('PCI passthrough device (%s)' %
                        flavor['extra_specs']['pci_passthrough:alias'])
    image = server.get('image')
    doc = {
        'id': server['id'],
        'name': server.get('name'),
        'project_id': server.get('tenant_id'),
        'hypervisor': node,
        'host': server.get(HOST),
        'status': server.get('status') or 'UNKNOWN',
        'task_state': server.get(TASK),
        'locked': bool(server.get('locked')),
        'flavor': flavor,
        # Nova says "" for the image of a server booted from a volume.
        'boot_from_volume': not (isinstance(image, dict) and
                                 image.get('id')),
        'metadata': {k: str(v) for k, v in
                     (server.get('metadata') or {}).items()},
        'tags': list(server.get('tags') or []),
        'pinned_availability_zone': server.get('pinned_availability_zone'),
        'blockers': blockers,
    }
    if held:
        doc['resources'] = held.get(node) or next(iter(held.values()))
    return doc


def _flavor(flavor):
    """The embedded flavor of a server (2.47+: original_name, extra_specs)."""
    get = flavor.get
    return {
        'name': get('original_name') or get('name'),
        'vcpus': int(get('vcpus') or 0),
        'ram': int(get('ram') or 0),
        'disk': int(get('disk') or 0),
        'ephemeral': int(get('ephemeral') or 0),
        'swap': int(get('swap') or 0),
        'extra_specs': {k: str(v) for k, v in
                        (get('extra_specs') or {}).items()},
    }


def build_server_groups(groups):
    with reading('Nova GET /os-server-groups'):
        return [{
            'id': group['id'], 'name': group.get('name'),
            'project_id': group.get('project_id'),
            'policy': group['policy'],
            'rules': {k: int(v) for k, v in
                      (group.get('rules') or {}).items()
                      if k == 'max_server_per_host'},
            'members': list(group.get('members') or []),
        } for group in groups]


def build_migrations(migrations):
    """Nova's migrations of servers (one without instance_uuid has no
    server to join to)."""
    with reading('Nova GET /os-migrations'):
        return [_migration_doc(m) for m in migrations
                if _mapping('a migration', m) and m.get('instance_uuid')]


def _migration_doc(migration):
    return {
        'id': migration['id'], 'server_id': migration['instance_uuid'],
        'status': migration['status'],
        'migration_type': migration.get('migration_type'),
        'source_compute': migration.get('source_compute'),
        'dest_compute': migration.get('dest_compute'),
        'created_at': _timestamp(migration.get('created_at')),
        'updated_at': _timestamp(migration.get('updated_at')),
    }


def _timestamp(value):
    """Nova's naive UTC times ('2026-11-20T09:00:00.000000') as ISO 8601.

    Text, not parsed: one that is no time fails the document's check,
    which names the field (migrations[0].created_at).
    """
    if not value:
        return None
    return value if value.endswith('Z') or '+' in value[10:] \
        else value.split('.')[0] + 'Z'


def host_refs(document, host_ips):
    """The document's hypervisors as Prometheus matches them.

    host_ips: {hypervisor: Nova's host_ip}, to match node_exporter targets
    whose instance label is IP:port.
    """
    return [hostmatch.HostRef(h['name'], h['host'], host_ips.get(h['name']))
            for h in document['hypervisors']]


def _expected_refs(hypervisors, providers):
    """host_refs of the document to come, if Placement answers for every
    provider: the hypervisors with a root provider. None when an answer's
    shape leaves that unsure (build_document then says what is wrong)."""
    roots = {rp.get('name') for rp in providers
             if not rp.get('parent_provider_uuid')}
    refs = []
    for hyp in hypervisors:
        name, service = hyp.get('hypervisor_hostname'), hyp.get('service')
        if not isinstance(name, str) or not isinstance(service or {}, dict):
            return None
        if name in roots:
            refs.append(hostmatch.HostRef(
                name, (service or {}).get('host') or name,
                hyp.get('host_ip')))
    return refs


class Measuring:
    """A Prometheus reading that starts before Nova's servers are read.

    Its queries go out at once; the servers it joins them to are handed
    over when Nova has listed them. If the hypervisors are not those it
    started with (Placement left some out), the reading is taken again.
    abandon() after an error lets the reading end without them.
    """

    def __init__(self, collector, refs):
        self.collector, self.refs = collector, refs
        self._servers = concurrent.futures.Future()
        self._done = concurrent.futures.Future()
        if refs is not None:
            # A daemon: an error elsewhere never waits for Prometheus.
            threading.Thread(target=self._run, name='prometheus',
                             daemon=True).start()

    def _run(self):
        try:
            self._done.set_result(self.collector.read(self.refs,
                                                      self._servers.result))
        except BaseException as exc:  # handed to result()
            self._done.set_exception(exc)

    def result(self, refs, servers):
        """The Reading for these hypervisors and {server id: hypervisor}."""
        try:
            if refs != self.refs:
                self.abandon()
                return self.collector.read(refs, servers)
            self._servers.set_result(servers)
            return self._done.result()
        except prometheus.PrometheusError as exc:
            raise CollectError(str(exc)) from exc

    def abandon(self):
        if not self._servers.done():
            self._servers.set_exception(CollectError('no servers to join'))


def add_metrics(document, reading):
    """Measured load into the document; its Coverage says what falls back."""
    for hyp in document['hypervisors']:
        hyp['metrics'] = reading.hosts.get(hyp['name'])
    for server in document['servers']:
        if server['id'] in reading.servers:
            server['usage'] = reading.servers[server['id']]
    found = coverage.build(document, reading)
    notes = [document['source']['note']] if 'note' in document['source'] \
        else []
    if reading.unreachable:
        notes.append('%s: load from Placement allocations' %
                     reading.unreachable)
    notes.extend(reading.notes)
    summary = found.summary()
    if summary:
        notes.append(summary)
    if notes:
        document['source']['note'] = '; '.join(notes)
    return found
