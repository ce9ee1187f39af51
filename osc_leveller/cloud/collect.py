"""Read a live cloud from Nova and Placement into a snapshot document.

The result is the documented snapshot format (osc-leveller-snapshot/1), so a
live run and ``--snapshot FILE`` go through the same validation and the same
core model. Compute calls are a fixed handful plus one per page, whatever the
number of hypervisors; Placement has no bulk read, so it costs one call for
the providers plus two per provider, made in parallel.
"""

import concurrent.futures
import datetime
import json

from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc
from openstack import utils as sdk_utils

from osc_leveller.cloud import prometheus

# 2.53: uuids for services and hypervisors; 2.59: migration uuids and
# changes-since; 2.64: server group policy and rules.
COMPUTE_MIN = '2.64'
# The last version whose hypervisor details carry cpu_info.
HYPERVISOR_VERSION = '2.87'
PLACEMENT_MIN = '1.14'  # root and parent provider uuids
ALLOCATIONS_VERSION = '1.28'
GROUP_PAGE = 1000
WORKERS = 16
READ_RETRIES = 2  # connection failures on a GET before giving up


class CollectError(Exception):
    """The cloud cannot be read; the message says what to do."""


def _iso(moment):
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def _get(proxy, url, **kwargs):
    # A GET is safe to send again when a pooled keep-alive connection was
    # closed under it ("Remote end closed connection without response").
    response = proxy.get(url, connect_retries=READ_RETRIES, **kwargs)
    sdk_exc.raise_from_response(response)
    return response.json()


def check_access(conn):
    """Fail early, and clearly, on old APIs or missing admin rights."""
    if not sdk_utils.supports_microversion(conn.compute, COMPUTE_MIN):
        raise CollectError(
            'Nova API microversion %s or later is needed (check '
            '--os-compute-api-version and the cloud\'s Nova release)'
            % COMPUTE_MIN)
    if not sdk_utils.supports_microversion(conn.placement, PLACEMENT_MIN):
        raise CollectError('Placement API microversion %s or later is needed'
                           % PLACEMENT_MIN)
    try:
        return list(conn.compute.services(binary='nova-compute'))
    except sdk_exc.ForbiddenException as exc:
        raise CollectError(
            'listing compute services was refused: the leveller needs an '
            'admin role (Nova\'s default policy)') from exc


class Collector:
    def __init__(self, conn, history_hours=24.0, workers=WORKERS,
                 metrics=None):
        self.conn = conn
        self.history_hours = history_hours
        self.workers = workers
        self.metrics = metrics  # a prometheus.Reader, or None

    def collect(self, now=None):
        """The snapshot document; CollectError when the cloud cannot be read."""
        try:
            return self._collect(now or datetime.datetime.now(
                datetime.timezone.utc))
        except (sdk_exc.SDKException, ksa_exc.ClientException) as exc:
            raise CollectError('reading the cloud failed: %s' % exc) from exc

    def _collect(self, now):
        services = check_access(self.conn)
        hypervisors = self._hypervisors()
        aggregates = list(self.conn.compute.aggregates())
        servers = list(self.conn.compute.servers(details=True,
                                                 all_projects=True))
        groups = self._server_groups()
        since = now - datetime.timedelta(hours=self.history_hours)
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
            add_metrics(document, self.metrics)
        return document

    def _hypervisors(self):
        """Hypervisor details at 2.87, the last version with cpu_info."""
        result, url = [], '/os-hypervisors/detail'
        while url:
            body = _get(self.conn.compute, url,
                        microversion=HYPERVISOR_VERSION)
            result.extend(body.get('hypervisors', []))
            url = next((link['href'] for link in
                        body.get('hypervisors_links', [])
                        if link.get('rel') == 'next'), None)
        return [h for h in result if h.get('hypervisor_type') != 'ironic']

    def _server_groups(self):
        """All groups: the API pages by offset and gives no next link."""
        groups, offset = [], 0
        while True:
            page = _get(self.conn.compute, '/os-server-groups', params={
                'all_projects': True, 'limit': GROUP_PAGE, 'offset': offset},
                microversion=COMPUTE_MIN)['server_groups']
            groups.extend(page)
            if len(page) < GROUP_PAGE:
                return groups
            offset += len(page)

    def _placement(self):
        providers = list(self.conn.placement.resource_providers())

        def read(rp):
            inventories = _get(self.conn.placement,
                               '/resource_providers/%s/inventories' % rp.id)
            allocations = _get(self.conn.placement,
                               '/resource_providers/%s/allocations' % rp.id,
                               microversion=ALLOCATIONS_VERSION)
            return rp.id, inventories['inventories'], \
                allocations['allocations']

        with concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            results = list(pool.map(read, providers))
        inventories = {rp_id: inv for rp_id, inv, _ in results}
        allocations = {rp_id: alloc for rp_id, _, alloc in results}
        return ([(rp, inventories[rp.id]) for rp in providers], allocations)


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
    compute_host.
    """
    by_host = {s.host: s for s in services}
    host_aggregates = {}
    for agg in aggregates:
        for host in agg.hosts or []:
            host_aggregates.setdefault(host, []).append({
                'name': agg.name,
                'metadata': {k: str(v) for k, v in
                             (agg.metadata or {}).items()}})
    roots = {rp.name: (rp, inv) for rp, inv in providers
             if not rp.parent_provider_id}
    children = {rp.id: rp for rp, _ in providers if rp.parent_provider_id}

    docs = []
    left_out = []
    # consumer -> {hypervisor: resources on its root provider}. During a
    # migration the source's allocation belongs to the migration (consumer:
    # its uuid) and counts in usages; a server's own allocation is the one
    # on its hypervisor (a rebuild-evacuation holds one on both).
    consumers = {}
    child_use = {}  # server id -> child providers it allocates from
    for hyp in hypervisors:
        name = hyp['hypervisor_hostname']
        host = (hyp.get('service') or {}).get('host') or name
        root = roots.get(name)
        if root is None:  # not reported to Placement yet: nothing to plan with
            left_out.append(name)
            continue
        rp, inventory = root
        service = by_host.get(host)
        usages = {}
        for consumer, alloc in allocations.get(rp.id, {}).items():
            resources = alloc.get('resources', {})
            for rc, amount in resources.items():
                usages[rc] = usages.get(rc, 0) + amount
            consumers.setdefault(consumer, {})[name] = dict(resources)
        docs.append({
            'name': name,
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
            'inventories': {
                rc: {k: inv[k] for k in ('total', 'reserved',
                                         'allocation_ratio', 'min_unit',
                                         'max_unit', 'step_size') if k in inv}
                for rc, inv in inventory.items()},
            'usages': usages,
            'cpu': _cpu_info(hyp),
            'traits': [],
            'metrics': None,
        })
    for rp_id, rp in children.items():
        for consumer, alloc in allocations.get(rp_id, {}).items():
            child_use.setdefault(consumer, set()).add(
                '%s (%s)' % (rp.name, ', '.join(sorted(alloc['resources']))))

    known = {d['name'] for d in docs}
    server_docs = []
    for server in servers:
        node = server.hypervisor_hostname
        if node not in known:
            continue  # unplaced (BUILD/ERROR) or on an unknown hypervisor
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
        held = consumers.get(server.id)
        if held:
            doc['resources'] = held.get(node) or next(iter(held.values()))
        server_docs.append(doc)

    source = {'kind': 'cloud', 'cloud': cloud, 'region': region}
    if left_out:
        source['note'] = ('left out, no resource provider in Placement: %s'
                          % ', '.join(sorted(left_out)))
    return {
        'format': 'osc-leveller-snapshot/1',
        'taken_at': _iso(now),
        'source': source,
        'hypervisors': docs,
        'servers': server_docs,
        'server_groups': [{
            'id': g['id'], 'name': g.get('name'),
            'project_id': g.get('project_id'),
            'policy': g['policy'],
            'rules': {k: int(v) for k, v in (g.get('rules') or {}).items()
                      if k == 'max_server_per_host'},
            'members': list(g.get('members') or []),
        } for g in groups],
        'migrations': [{
            'id': m.id, 'server_id': m.server_id, 'status': m.status,
            'migration_type': m.migration_type,
            'source_compute': m.source_compute, 'dest_compute': m.dest_compute,
            'created_at': _timestamp(m.created_at),
            'updated_at': _timestamp(m.updated_at),
        } for m in migrations if m.server_id],
    }


def _timestamp(value):
    """Nova's naive UTC times ('2026-11-20T09:00:00.000000') as ISO 8601."""
    if not value:
        return None
    return value if value.endswith('Z') or '+' in value[10:] \
        else value.split('.')[0] + 'Z'


def add_metrics(document, reader):
    """Measured load into the document; where there is none, say why."""
    notes = [document['source']['note']] if 'note' in document['source'] \
        else []
    try:
        names = [h['name'] for h in document['hypervisors']]
        hosts, problems = reader.host_metrics(names)
        servers = reader.server_metrics()
    except prometheus.Unreachable as exc:
        notes.append('%s: load from Placement allocations' % exc)
        document['source']['note'] = '; '.join(notes)
        return
    except prometheus.PrometheusError as exc:
        raise CollectError(str(exc)) from exc
    for hyp in document['hypervisors']:
        hyp['metrics'] = hosts.get(hyp['name'])
    for server in document['servers']:
        if server['id'] in servers:
            server['usage'] = servers[server['id']]
    if problems:
        notes.append('no metrics for %s: load from Placement allocations' %
                     ', '.join('%s (%s)' % kv for kv in sorted(
                         problems.items())))
    if notes:
        document['source']['note'] = '; '.join(notes)
