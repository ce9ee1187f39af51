"""Small snapshot documents for tests, built in a few readable lines."""

import copy

from osc_leveller.core.model import snapshot as snapshot_io

TAKEN_AT = '2026-11-20T12:00:00Z'


def hypervisor(name, az='az1', model='Gen1', vcpus=32, ram_gb=128,
               cpu=None, ram=None, cpu_ratio=4.0, ram_ratio=1.0,
               reserved_mb=0, status='enabled', state='up', cpu_info=None,
               host=None, **extra):
    """A hypervisor named name (hypervisor_hostname, the Placement
    resource provider) whose nova-compute service host is another name, as
    on real clouds (a short host name against an FQDN node name): code that
    sends or compares the wrong one fails."""
    doc = {
        'name': name,
        'host': host or compute_host(name),
        'availability_zone': az,
        'service': {'status': status, 'state': state},
        'inventories': {
            'VCPU': {'total': vcpus, 'allocation_ratio': cpu_ratio},
            'MEMORY_MB': {'total': ram_gb * 1024, 'reserved': reserved_mb,
                          'allocation_ratio': ram_ratio},
            'DISK_GB': {'total': 2000},
        },
        'cpu': cpu_info or {'arch': 'x86_64', 'model': model,
                            'features': []},
        'traits': [],
    }
    if cpu is not None:
        doc['metrics'] = {'cpu': cpu, 'ram': ram if ram is not None else cpu}
    doc.update(extra)
    return doc


def compute_host(hypervisor_name):
    return 'cmp-' + hypervisor_name


def server(name, host, vcpus=2, ram_gb=4, cpu=None, ram=None, **extra):
    doc = {
        'id': 'id-' + name,
        'name': name,
        'project_id': extra.pop('project_id', 'p1'),
        'hypervisor': host,
        'status': 'ACTIVE',
        'flavor': {'name': 'f%dx%d' % (vcpus, ram_gb), 'vcpus': vcpus,
                   'ram': ram_gb * 1024, 'disk': 10},
    }
    if cpu is not None:
        doc['usage'] = {'cpu': cpu, 'ram': ram if ram is not None else cpu}
    doc.update(extra)
    return doc


def document(hypervisors, servers, groups=(), migrations=()):
    return {
        'format': snapshot_io.FORMAT,
        'taken_at': TAKEN_AT,
        'source': {'kind': 'test'},
        'hypervisors': list(hypervisors),
        'servers': list(servers),
        'server_groups': list(groups),
        'migrations': list(migrations),
    }


def snapshot(hypervisors, servers, groups=(), migrations=()):
    return snapshot_io.parse(copy.deepcopy(
        document(hypervisors, servers, groups, migrations)))


def three_hosts(hot_servers=6, cool_servers=1):
    """hv1 busy, hv2 and hv3 nearly idle; all in one domain."""
    hyps = [hypervisor('hv%d' % i) for i in (1, 2, 3)]
    servers = [server('hot%d' % i, 'hv1', vcpus=4, ram_gb=16)
               for i in range(hot_servers)]
    servers += [server('cool%d-%d' % (h, i), 'hv%d' % h, vcpus=4, ram_gb=16)
                for h in (2, 3) for i in range(cool_servers)]
    return hyps, servers


def exchange_hosts():
    """hv1 and hv2 full of RAM, hv1 CPU-heavy, hv2 CPU-light; hv3 hot but
    with room for one more server. No single move lowers the imbalance:
    only exchanges do, parking on hv3 when neither full host has room."""
    hyps = [hypervisor('hv%d' % i) for i in (1, 2, 3)]
    servers = [server('big%d' % i, 'hv1', vcpus=16, ram_gb=32)
               for i in range(4)]
    servers += [server('small%d' % i, 'hv2', vcpus=2, ram_gb=32)
                for i in range(4)]
    servers += [server('park%d' % i, 'hv3', vcpus=24, ram_gb=32)
                for i in range(3)]
    return hyps, servers
