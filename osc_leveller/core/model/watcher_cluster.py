"""Import the cluster JSON of the Watcher baseline harness as a snapshot.

The harness (shared/bench/watcher_baseline) runs Watcher's strategies on a small
cluster file; reading the same file lets both planners be compared side by
side. Host load is computed the way the harness computes it:
``cpu = sum(cpu_util * vcpus) / host vcpus`` and
``ram = sum(mem_util * memory_mb) / host memory_mb``.
"""

import uuid

from osc_leveller.core.model import validation

_NAMESPACE = uuid.NAMESPACE_DNS


def looks_like(document):
    hypervisors = document.get('hypervisors')
    return (isinstance(hypervisors, list) and isinstance(
        document.get('servers'), list) and bool(hypervisors) and all(
        isinstance(h, dict) and 'vcpus' in h for h in hypervisors))


def to_snapshot_document(cluster, origin, strict=False):
    """A snapshot document without its "format"; ValidationError if bad.

    strict: read by a strict JSON reader (see validation.validate).
    """
    validation.validate(cluster, 'watcher-cluster', strict)
    return convert(cluster, origin)


def convert(cluster, origin):
    """The snapshot document of a valid cluster, valid itself once given
    its "format"; ValidationError for a server on no hypervisor."""
    load = {h['name']: [0.0, 0.0] for h in cluster['hypervisors']}
    groups = cluster.get('server_groups', [])
    member_of = {}
    for group in groups:
        for member in group['members']:
            member_of.setdefault(member, []).append(group['id'])
    servers = []
    for index, s in enumerate(cluster['servers']):
        host = s['host']
        total = load.get(host)
        if total is None:
            raise validation.ValidationError(
                'servers[%d].host' % index, 'unknown hypervisor %r' % host)
        cpu, ram = s.get('cpu_util', 0.0), s.get('mem_util', 0.0)
        total[0] += cpu * s['vcpus']
        total[1] += ram * s['memory_mb']
        # Only what differs from a snapshot's defaults.
        server = {
            'id': s['id'],
            'name': s.get('name') or s['id'],
            'hypervisor': host,
            'flavor': {'vcpus': s['vcpus'], 'ram': s['memory_mb'],
                       'disk': s.get('disk_gb', 0)},
            'usage': {'cpu': cpu, 'ram': ram},
        }
        if 'project_id' in s:
            server['project_id'] = s['project_id']
        if 'status' in s:
            server['status'] = s['status']
        if 'metadata' in s:
            server['metadata'] = s['metadata']
        if s['id'] in member_of:
            server['server_groups'] = member_of[s['id']]
        servers.append(server)
    return {
        'taken_at': '1970-01-01T00:00:00Z',
        'source': {'kind': 'watcher-cluster', 'description': origin},
        'hypervisors': [_hypervisor(h, load[h['name']])
                        for h in cluster['hypervisors']],
        'servers': servers,
        'server_groups': [{'id': g['id'], 'name': g.get('name') or '',
                           'policy': g['policy'], 'members': g['members']}
                          for g in groups],
    }


def _hypervisor(h, load):
    inventories = {
        'VCPU': {'total': h['vcpus'],
                 'reserved': h.get('reserved_vcpus', 0),
                 'allocation_ratio': h.get('cpu_ratio', 1.0)},
        'MEMORY_MB': {'total': h['memory_mb'],
                      'reserved': h.get('reserved_memory_mb', 0),
                      'allocation_ratio': h.get('ram_ratio', 1.0)},
    }
    if h.get('disk_gb'):
        inventories['DISK_GB'] = {
            'total': h['disk_gb'],
            'allocation_ratio': h.get('disk_ratio', 1.0)}
    model = h.get('cpu_model') or ''
    return {
        'name': h['name'],
        'host': h['name'],
        'uuid': h.get('uuid') or str(uuid.uuid5(_NAMESPACE, h['name'])),
        'availability_zone': h.get('az') or '',
        'service': {'status': h.get('status', 'enabled'),
                    'state': h.get('state', 'up'),
                    'disabled_reason': h.get('disabled_reason')},
        'inventories': inventories,
        'cpu': {'model': model},
        # Demand past the hardware is clamped: a host cannot be busier than 100 %.
        'metrics': {'cpu': min(1.0, load[0] / h['vcpus']),
                    'ram': min(1.0, load[1] / h['memory_mb'])},
    }
