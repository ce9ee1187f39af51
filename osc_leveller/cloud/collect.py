"""Read a live cloud from Nova and Placement into a snapshot document.

The result is the documented snapshot format (osc-leveller-snapshot/1), so a
live run and ``--snapshot FILE`` go through the same validation and the same
core model. Compute calls are a fixed handful plus one per page, whatever the
number of hypervisors; Placement has no bulk read, so it costs one call for
the providers plus two per provider, made in parallel.
"""

import concurrent.futures
import contextlib
import datetime
import json

import requests
from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc
from openstack import utils as sdk_utils

from osc_leveller.cloud import coverage
from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import prometheus
from osc_leveller.core import errors

# 2.53: uuids for services and hypervisors; 2.59: migration uuids and
# changes-since; 2.64: server group policy and rules.
COMPUTE_MIN = '2.64'
# The last version whose hypervisor details carry cpu_info.
HYPERVISOR_VERSION = '2.87'
PLACEMENT_MIN = '1.14'  # root and parent provider uuids
ALLOCATIONS_VERSION = '1.28'
GROUP_PAGE = 1000
WORKERS = 16  # parallel Placement reads; the connection pool is as large
RETRIES = 2  # reads that got no answer, sent again (setting cloud.retries)
MESSAGE = 300  # characters of a service's error text that messages quote


class CollectError(errors.LevellerError):
    """The cloud cannot be read; the message says what to do."""


def _iso(moment):
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


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
    response = proxy.get(url, connect_retries=retries, **kwargs)
    sdk_exc.raise_from_response(response)
    body = response.json()
    if not isinstance(body, dict) or not isinstance(body.get(key), kind):
        raise TypeError('expected an object with a %s "%s", got %s' % (
            kind.__name__, key, _short(json.dumps(body)[:80])))
    return body[key]


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
            return list(conn.compute.services(binary='nova-compute'))
    except CollectError as exc:
        if isinstance(exc.__cause__, sdk_exc.ForbiddenException):
            raise CollectError(
                'listing compute services was refused: the leveller needs an '
                'admin role (Nova\'s default policy)') from exc
        raise


class Collector:
    def __init__(self, conn, history_hours=24.0, workers=WORKERS,
                 metrics=None, retries=RETRIES):
        self.conn = conn
        self.history_hours = history_hours
        self.workers = workers
        self.metrics = metrics  # a measure.Reader, or None
        self.coverage = None    # what the metrics cover, after collect()
        self.retries = retries

    def collect(self, now=None):
        """The snapshot document; CollectError when the cloud cannot be read."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        services = check_access(self.conn)
        hypervisors = self._hypervisors()
        with reading('Nova GET /os-aggregates'):
            aggregates = list(self.conn.compute.aggregates())
        with reading('Nova GET /servers/detail'):
            servers = list(self.conn.compute.servers(details=True,
                                                     all_projects=True))
        groups = self._server_groups()
        since = now - datetime.timedelta(hours=self.history_hours)
        with reading('Nova GET /os-migrations'):
            migrations = list(self.conn.compute.migrations(
                changes_since=_iso(since)))
        providers, allocations = self._placement()
        document = build_document(
            now=now, cloud=getattr(self.conn.config, 'name', None),
            region=getattr(self.conn.config, 'region_name', None),
            services=services, hypervisors=hypervisors,
            aggregates=aggregates, servers=servers, groups=groups,
            migrations=migrations, providers=providers,
            allocations=allocations)
        if self.metrics is not None:
            self.coverage = add_metrics(document, self.metrics, {
                h['hypervisor_hostname']: h.get('host_ip')
                for h in hypervisors})
        return document

    def _hypervisors(self):
        """Hypervisor details at 2.87, the last version with cpu_info."""
        result, url = [], '/os-hypervisors/detail'
        with reading('Nova GET /os-hypervisors/detail'):
            while url:
                response = self.conn.compute.get(
                    url, connect_retries=self.retries,
                    microversion=HYPERVISOR_VERSION)
                sdk_exc.raise_from_response(response)
                body = response.json()
                page = body['hypervisors']
                if not isinstance(page, list):
                    raise TypeError('"hypervisors" is not a list')
                result.extend(page)
                url = next((link['href'] for link in
                            body.get('hypervisors_links') or []
                            if link.get('rel') == 'next'), None)
            return [h for h in result if h.get('hypervisor_type') != 'ironic']

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

    def _placement(self):
        with reading('Placement GET /resource_providers'):
            providers = list(self.conn.placement.resource_providers())

        def read(rp):
            url = '/resource_providers/%s/inventories' % rp.id
            with reading('Placement GET %s' % url):
                inventories = _get(self.conn.placement, url, 'inventories',
                                   dict, self.retries)
            url = '/resource_providers/%s/allocations' % rp.id
            with reading('Placement GET %s' % url):
                allocations = _get(self.conn.placement, url, 'allocations',
                                   dict, self.retries,
                                   microversion=ALLOCATIONS_VERSION)
            return rp.id, inventories, allocations

        with concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            results = list(pool.map(read, providers))
        inventories = {rp_id: inv for rp_id, inv, _ in results}
        allocations = {rp_id: alloc for rp_id, _, alloc in results}
        return ([(rp, inventories[rp.id]) for rp in providers], allocations)


def _mapping(name, value):
    """True, or TypeError naming what is not an object (a text would
    pass "'total' in value")."""
    if not isinstance(value, dict):
        raise TypeError('%s is %s, not an object' % (
            name, type(value).__name__))
    return True


def _cpu_info(hypervisor):
    info = hypervisor.get('cpu_info') or {}
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            info = {}
    return {'arch': info.get('arch'), 'model': info.get('model'),
            'features': sorted(info.get('features') or [])}


def _flavor(flavor):
    get = flavor.get if isinstance(flavor, dict) else \
        (lambda key, default=None: getattr(flavor, key, default))
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


def build_document(now, cloud, region, services, hypervisors, aggregates,
                   servers, groups, migrations, providers, allocations):
    """Join what Nova and Placement said into a snapshot document.

    Join keys: hypervisor_hostname == provider name == server's
    hypervisor_hostname; service host == aggregate host == server's
    compute_host. A part of an answer that does not have the shape of
    Nova's or Placement's is a CollectError naming that part.
    """
    with reading('Nova GET /os-services'):
        by_host = {s.host: s for s in services}
    host_aggregates = {}
    with reading('Nova GET /os-aggregates'):
        for agg in aggregates:
            for host in agg.hosts or []:
                host_aggregates.setdefault(host, []).append({
                    'name': agg.name,
                    'metadata': {k: str(v) for k, v in
                                 (agg.metadata or {}).items()}})
    with reading('Placement GET /resource_providers'):
        roots = {rp.name: (rp, inv) for rp, inv in providers
                 if not rp.parent_provider_id}
        children = {rp.id: rp for rp, _ in providers
                    if rp.parent_provider_id}

    docs = []
    left_out = []
    # consumer -> {hypervisor: resources on its root provider}. During a
    # migration the source's allocation belongs to the migration (consumer:
    # its uuid) and counts in usages; a server's own allocation is the one
    # on its hypervisor (a rebuild-evacuation holds one on both).
    consumers = {}
    for hyp in hypervisors:
        with reading('Nova GET /os-hypervisors/detail'):
            name = hyp['hypervisor_hostname']
            host = (hyp.get('service') or {}).get('host') or name
        root = roots.get(name)
        if root is None:  # not reported to Placement yet: nothing to plan with
            left_out.append(name)
            continue
        rp, inventory = root
        with reading('Placement GET /resource_providers/%s/allocations'
                     % rp.id):
            usages = {}
            for consumer, alloc in allocations.get(rp.id, {}).items():
                resources = alloc.get('resources', {})
                for rc, amount in resources.items():
                    usages[rc] = usages.get(rc, 0) + amount
                consumers.setdefault(consumer, {})[name] = dict(resources)
        with reading('Placement GET /resource_providers/%s/inventories'
                     % rp.id):
            inventories = {
                rc: {k: inv[k] for k in ('total', 'reserved',
                                         'allocation_ratio', 'min_unit',
                                         'max_unit', 'step_size') if k in inv}
                for rc, inv in inventory.items() if _mapping(rc, inv)}
        with reading('Nova GET /os-hypervisors/detail (%s)' % name):
            docs.append(_hypervisor_doc(hyp, host, rp, by_host.get(host),
                                        host_aggregates, inventories, usages))
    child_use = {}  # server id -> child providers it allocates from
    for rp_id, rp in children.items():
        with reading('Placement GET /resource_providers/%s/allocations'
                     % rp_id):
            for consumer, alloc in allocations.get(rp_id, {}).items():
                child_use.setdefault(consumer, set()).add('%s (%s)' % (
                    rp.name, ', '.join(sorted(alloc['resources']))))

    known = {d['name'] for d in docs}
    server_docs = []
    for server in servers:
        with reading('Nova GET /servers/detail (server %s)'
                     % getattr(server, 'id', '?')):
            if server.hypervisor_hostname in known:
                server_docs.append(_server_doc(server, child_use,
                                               consumers.get(server.id)))
            # else unplaced (BUILD/ERROR) or on an unknown hypervisor

    source = {'kind': 'cloud', 'cloud': cloud, 'region': region}
    if left_out:
        source['note'] = ('left out, no resource provider in Placement: %s'
                          % ', '.join(sorted(left_out)))
    with reading('Nova GET /os-server-groups'):
        group_docs = [_group_doc(g) for g in groups]
    with reading('Nova GET /os-migrations'):
        migration_docs = [_migration_doc(m) for m in migrations
                          if m.server_id]
    return {
        'format': 'osc-leveller-snapshot/1',
        'taken_at': _iso(now),
        'source': source,
        'hypervisors': docs,
        'servers': server_docs,
        'server_groups': group_docs,
        'migrations': migration_docs,
    }


def _hypervisor_doc(hyp, host, rp, service, host_aggregates, inventories,
                    usages):
    return {
        'name': hyp['hypervisor_hostname'],
        'host': host,
        'uuid': rp.id,
        'availability_zone': getattr(service, 'availability_zone', None),
        'aggregates': host_aggregates.get(host, []),
        'service': {
            'status': getattr(service, 'status', None) or 'disabled',
            'state': getattr(service, 'state', None) or 'down',
            'forced_down': bool(getattr(service, 'is_forced_down', False)),
            'disabled_reason': getattr(service, 'disabled_reason', None),
        },
        'inventories': inventories,
        'usages': usages,
        'cpu': _cpu_info(hyp),
        'traits': [],
        'metrics': None,
    }


def _server_doc(server, child_use, held):
    """held: {hypervisor: resources} of the server's own allocations."""
    node = server.hypervisor_hostname
    flavor = _flavor(server.flavor or {})
    blockers = ['allocation on child resource provider %s' % c
                for c in sorted(child_use.get(server.id, ()))]
    if flavor['extra_specs'].get('pci_passthrough:alias'):
        blockers.append('PCI passthrough device (%s)' %
                        flavor['extra_specs']['pci_passthrough:alias'])
    doc = {
        'id': server.id,
        'name': server.name,
        'project_id': server.project_id,
        'hypervisor': node,
        'host': server.compute_host,
        'status': server.status or 'UNKNOWN',
        'task_state': server.task_state,
        'locked': bool(server.is_locked),
        'flavor': flavor,
        'boot_from_volume': not (server.image and server.image.id),
        'metadata': {k: str(v) for k, v in
                     (server.metadata or {}).items()},
        'tags': list(server.tags or []),
        'pinned_availability_zone': server.pinned_availability_zone,
        'blockers': blockers,
    }
    if held:
        doc['resources'] = held.get(node) or next(iter(held.values()))
    return doc


def _group_doc(group):
    return {
        'id': group['id'], 'name': group.get('name'),
        'project_id': group.get('project_id'),
        'policy': group['policy'],
        'rules': {k: int(v) for k, v in (group.get('rules') or {}).items()
                  if k == 'max_server_per_host'},
        'members': list(group.get('members') or []),
    }


def _migration_doc(migration):
    return {
        'id': migration.id, 'server_id': migration.server_id,
        'status': migration.status,
        'migration_type': migration.migration_type,
        'source_compute': migration.source_compute,
        'dest_compute': migration.dest_compute,
        'created_at': _timestamp(migration.created_at),
        'updated_at': _timestamp(migration.updated_at),
    }


def _timestamp(value):
    """Nova's naive UTC times ('2026-11-20T09:00:00.000000') as ISO 8601."""
    if not value:
        return None
    return value if value.endswith('Z') or '+' in value[10:] \
        else value.split('.')[0] + 'Z'


def add_metrics(document, reader, host_ips=None):
    """Measured load into the document; its Coverage says what falls back.

    host_ips: {hypervisor: Nova's host_ip}, to match node_exporter targets
    whose instance label is IP:port.
    """
    host_ips = host_ips or {}
    refs = [hostmatch.HostRef(h['name'], h['host'], host_ips.get(h['name']))
            for h in document['hypervisors']]
    try:
        reading = reader.read(refs, {s['id']: s['hypervisor']
                                     for s in document['servers']})
    except prometheus.PrometheusError as exc:
        raise CollectError(str(exc)) from exc
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
