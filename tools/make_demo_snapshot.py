#!/usr/bin/env python3
"""Generate the bundled demo snapshot (osc_leveller/data/demo-snapshot.json).

Deterministic: the same seed gives the same file. A private cloud of 40
hypervisors in two AZs with three CPU generations, about 800 servers with a
realistic flavor mix, server groups, servers that cannot move, two hot
hypervisors and one disabled for maintenance.

    python tools/make_demo_snapshot.py [--seed N] [-o FILE]
"""

import argparse
import json
import os
import random
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402

GENERATIONS = {
    # model: (threads, RAM GiB, features added by this generation)
    'Skylake-Server': (64, 384, ['avx', 'avx2', 'avx512f', 'avx512bw',
                                 'avx512cd', 'avx512dq', 'avx512vl', 'fma',
                                 'pcid', 'sse4_2']),
    'Cascadelake-Server': (96, 768, ['avx512vnni', 'md-clear', 'pku']),
    'Icelake-Server': (128, 1024, ['avx512vbmi', 'avx512vbmi2', 'gfni',
                                   'sha-ni', 'vaes', 'vpclmulqdq']),
}
LAYOUT = ['Skylake-Server'] * 6 + ['Cascadelake-Server'] * 8 + \
    ['Icelake-Server'] * 6
HOT = {'cmp-a03', 'cmp-b12'}
DISABLED = 'cmp-b07'
SSD_HOSTS = {'cmp-a17', 'cmp-a18', 'cmp-a19', 'cmp-b17', 'cmp-b18'}
FINANCE_HOSTS = {'cmp-b19', 'cmp-b20'}

# name: (vcpus, ram MiB, disk GiB, weight, extra_specs)
FLAVORS = {
    'm1.small': (1, 2048, 20, 16, {}),
    'm1.medium': (2, 4096, 40, 22, {}),
    'm1.large': (4, 8192, 80, 20, {}),
    'm1.xlarge': (8, 16384, 160, 9, {}),
    'c1.large': (8, 8192, 40, 6, {}),
    'c1.xlarge': (16, 16384, 40, 3, {}),
    'r1.large': (4, 32768, 80, 6, {}),
    'r1.xlarge': (8, 65536, 160, 4, {}),
    'r1.2xlarge': (16, 131072, 160, 1.5, {}),
    'db.xlarge': (8, 65536, 200, 2,
                  {'aggregate_instance_extra_specs:ssd': 'true'}),
}


def cpu_features(model):
    features = []
    for name, (_, _, added) in GENERATIONS.items():
        features += added
        if name == model:
            return sorted(features)
    raise KeyError(model)


class Demo:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.hypervisors = []
        self.servers = []
        self.groups = []
        self.migrations = []
        self.used = {}
        self.projects = [str(uuid.UUID(int=self.rng.getrandbits(128)))
                         for _ in range(12)]
        self.finance = self.projects[0]

    def uid(self):
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def build_hypervisors(self):
        for az, letter in (('az1', 'a'), ('az2', 'b')):
            for index, model in enumerate(LAYOUT, start=1):
                host = 'cmp-%s%02d' % (letter, index)
                threads, ram_gb, _ = GENERATIONS[model]
                aggregates = [{'name': az, 'metadata':
                               {'availability_zone': az}},
                              {'name': 'gen-' + model.split('-')[0].lower(),
                               'metadata': {'cpu_generation': model}}]
                traits = ['COMPUTE_STATUS_DISABLED'] if host == DISABLED \
                    else []
                if host in SSD_HOSTS:
                    aggregates.append({'name': 'ssd-%s' % az,
                                       'metadata': {'ssd': 'true'}})
                    traits.append('CUSTOM_LOCAL_NVME')
                if host in FINANCE_HOSTS:
                    aggregates.append({'name': 'finance', 'metadata': {
                        'filter_tenant_id': self.finance}})
                self.hypervisors.append({
                    'name': host + '.cloud.example.net',
                    'host': host,
                    'uuid': self.uid(),
                    'availability_zone': az,
                    'aggregates': aggregates,
                    'service': {
                        'status': 'disabled' if host == DISABLED
                        else 'enabled',
                        'state': 'up', 'forced_down': False,
                        'disabled_reason': 'disk replacement, ticket OPS-4711'
                        if host == DISABLED else None},
                    'inventories': {
                        'VCPU': {'total': threads, 'reserved': 0,
                                 'allocation_ratio': 4.0, 'max_unit': threads},
                        'MEMORY_MB': {'total': ram_gb * 1024,
                                      'reserved': 16384,
                                      'allocation_ratio': 1.0,
                                      'max_unit': ram_gb * 1024},
                        'DISK_GB': {'total': 7000, 'reserved': 100,
                                    'allocation_ratio': 1.0,
                                    'max_unit': 7000},
                    },
                    'cpu': {'arch': 'x86_64', 'model': model,
                            'features': cpu_features(model)},
                    'traits': sorted(traits + ['HW_CPU_X86_AVX2',
                                               'COMPUTE_NET_ATTACH_INTERFACE']),
                })
                self.used[self.hypervisors[-1]['name']] = [0, 0, 0]

    def fits(self, hyp, vcpus, ram, disk):
        inv = hyp['inventories']
        used = self.used[hyp['name']]
        cap = lambda rc: (inv[rc]['total'] - inv[rc]['reserved']) * \
            inv[rc]['allocation_ratio']  # noqa: E731
        return (used[0] + vcpus <= cap('VCPU')
                and used[1] + ram <= cap('MEMORY_MB') * 0.93
                and used[2] + disk <= cap('DISK_GB'))

    def pick_host(self, flavor, az=None, avoid=(), only=None):
        vcpus, ram, disk, _, specs = FLAVORS[flavor]
        choices = []
        for hyp in self.hypervisors:
            host = hyp['host']
            if az and hyp['availability_zone'] != az:
                continue
            if hyp['name'] in avoid or (only and hyp['name'] not in only):
                continue
            if specs and host not in SSD_HOSTS:
                continue
            if not specs and host in SSD_HOSTS and self.rng.random() < 0.5:
                continue
            if host in FINANCE_HOSTS:
                continue
            if not self.fits(hyp, vcpus, ram, disk):
                continue
            free = hyp['inventories']['MEMORY_MB']['total'] - \
                self.used[hyp['name']][1]
            pull = 3.5 if host in HOT else 1.0
            pull *= 0.4 if host == DISABLED else 1.0
            choices.append((hyp, free * pull))
        if not choices:
            return None
        total = sum(w for _, w in choices)
        point = self.rng.random() * total
        for hyp, weight in choices:
            point -= weight
            if point <= 0:
                return hyp
        return choices[-1][0]

    def add_server(self, flavor, hyp, name, **extra):
        vcpus, ram, disk, _, specs = FLAVORS[flavor]
        bfv = self.rng.random() < 0.3 and not specs
        used = self.used[hyp['name']]
        used[0] += vcpus
        used[1] += ram
        used[2] += 0 if bfv else disk
        hot = hyp['host'] in HOT
        mix = self.rng.random()
        if mix < (0.15 if hot else 0.45):
            cpu = self.rng.betavariate(1.2, 10)
        elif mix < (0.55 if hot else 0.9):
            cpu = self.rng.betavariate(3, 3.5)
        else:
            cpu = self.rng.betavariate(6, 1.2)
        server = {
            'id': self.uid(),
            'name': name,
            'project_id': extra.pop('project_id', None) or self.rng.choice(
                self.projects[1:]),
            'hypervisor': hyp['name'],
            'host': hyp['host'],
            'status': 'ACTIVE',
            'task_state': None,
            'locked': False,
            'flavor': {'name': flavor, 'vcpus': vcpus, 'ram': ram,
                       'disk': disk, 'ephemeral': 0, 'swap': 0,
                       'extra_specs': dict(specs)},
            'boot_from_volume': bfv,
            'server_groups': [],
            'metadata': {},
            'tags': [],
            'blockers': [],
            'usage': {'cpu': round(cpu, 3),
                      'ram': round(self.rng.betavariate(5, 2), 3)},
        }
        server.update(extra)
        self.servers.append(server)
        return server

    def random_flavor(self):
        names = list(FLAVORS)
        return self.rng.choices(names, [FLAVORS[n][3] for n in names])[0]

    def build_groups(self):
        for index in range(10):
            az = 'az1' if index % 2 == 0 else 'az2'
            group = {'id': self.uid(), 'name': 'web-%d' % index,
                     'policy': 'anti-affinity', 'rules': {}, 'members': []}
            if index == 9:
                group['rules']['max_server_per_host'] = 2
            used = []
            for member in range(3):
                hyp = self.pick_host('m1.large', az=az, avoid=used)
                server = self.add_server(
                    'm1.large', hyp, 'web%d-%d' % (index, member),
                    server_groups=[group['id']])
                used.append(hyp['name'])
                group['members'].append(server['id'])
            self.groups.append(group)
        for index in range(2):
            group = {'id': self.uid(), 'name': 'cache-%d' % index,
                     'policy': 'affinity', 'rules': {}, 'members': []}
            hyp = self.pick_host('r1.large', az='az%d' % (index + 1))
            for member in range(2):
                server = self.add_server(
                    'r1.large', hyp, 'cache%d-%d' % (index, member),
                    server_groups=[group['id']])
                group['members'].append(server['id'])
            self.groups.append(group)
        group = {'id': self.uid(), 'name': 'batch-workers',
                 'policy': 'soft-anti-affinity', 'rules': {}, 'members': []}
        for member in range(6):
            hyp = self.pick_host('c1.large', az='az2')
            server = self.add_server('c1.large', hyp, 'batch-%d' % member,
                                     server_groups=[group['id']])
            group['members'].append(server['id'])
        self.groups.append(group)

    def build_servers(self, count):
        finance = [h['name'] for h in self.hypervisors
                   if h['host'] in FINANCE_HOSTS]
        for index in range(24):
            hyp = next(h for h in self.hypervisors
                       if h['name'] == finance[index % 2])
            self.add_server('m1.large', hyp, 'fin-%02d' % index,
                            project_id=self.finance)
        while len(self.servers) < count:
            flavor = self.random_flavor()
            hyp = self.pick_host(flavor)
            if hyp is None:
                continue
            self.add_server(flavor, hyp, 'vm-%04d' % len(self.servers))

    def mark_special(self):
        rng = self.rng
        plain = [s for s in self.servers if not s['server_groups']
                 and not s['name'].startswith('fin')]
        rng.shuffle(plain)
        cursor = iter(plain)
        for _ in range(24):
            server = next(cursor)
            server['status'] = 'SHUTOFF'
            server['usage'] = {'cpu': 0.0, 'ram': 0.0}
        for _ in range(6):
            next(cursor)['status'] = 'PAUSED'
        for state in ('resize_migrating', 'image_snapshot'):
            next(cursor)['task_state'] = state
        for _ in range(3):
            next(cursor)['locked'] = True
        for _ in range(4):
            next(cursor)['blockers'] = [
                'PCI passthrough device allocated (pci_passthrough:alias '
                'nic-sriov:1)']
        for _ in range(2):
            next(cursor)['blockers'] = [
                'allocation on child resource provider (VGPU)']
        for _ in range(3):
            next(cursor)['metadata'] = {'leveller:exclude': 'true'}
        error = next(cursor)
        error['status'] = 'ERROR'
        taken = snapshot_io.parse_time('2026-11-20T09:00:00Z')
        for hours in (1.5, 3.0, 5.5, 30.0):
            server = next(cursor)
            self.migrations.append(self.migration(
                server, taken - hours * 3600, 'completed'))
        running = next(cursor)
        running['task_state'] = 'migrating'
        running['status'] = 'MIGRATING'
        self.migrations.append(self.migration(running, taken - 60,
                                              'running'))

    def migration(self, server, when, status):
        source = next(h for h in self.hypervisors
                      if h['name'] != server['hypervisor']
                      and h['availability_zone'] == self.az_of(server))
        stamp = snapshot_io.format_time(when)
        return {'id': self.uid(), 'server_id': server['id'],
                'status': status, 'migration_type': 'live-migration',
                'source_compute': source['host'],
                'dest_compute': server['host'],
                'created_at': stamp, 'updated_at': stamp}

    def az_of(self, server):
        return next(h['availability_zone'] for h in self.hypervisors
                    if h['name'] == server['hypervisor'])

    def host_metrics(self):
        by_host = {h['name']: [0.0, 0.0] for h in self.hypervisors}
        for s in self.servers:
            load = by_host[s['hypervisor']]
            load[0] += s['usage']['cpu'] * s['flavor']['vcpus']
            load[1] += s['usage']['ram'] * s['flavor']['ram']
        for hyp in self.hypervisors:
            threads = hyp['inventories']['VCPU']['total']
            memory = hyp['inventories']['MEMORY_MB']['total']
            cores, ram = by_host[hyp['name']]
            # Host overhead: hypervisor processes and the reserved memory.
            cpu = min(1.0, 0.03 + cores / threads)
            mem = min(1.0, (ram + 0.5 * 16384) / memory)
            hyp['metrics'] = {
                'cpu': round(cpu, 4), 'ram': round(mem, 4),
                'cpu_pressure': round(min(1.0, max(0.0, cpu - 0.6) ** 2 * 3),
                                      4),
                'ram_pressure': round(min(1.0, max(0.0, mem - 0.8) ** 2 * 4),
                                      4)}

    def document(self):
        return {
            'format': snapshot_io.FORMAT,
            'taken_at': '2026-11-20T09:00:00Z',
            'source': {'kind': 'demo', 'cloud': 'demo',
                       'description': 'osc-leveller demo: 40 hypervisors, '
                       '2 AZs, 3 CPU generations'},
            'hypervisors': self.hypervisors,
            'servers': self.servers,
            'server_groups': self.groups,
            'migrations': self.migrations,
        }


def build(seed=2026, servers=800):
    demo = Demo(seed)
    demo.build_hypervisors()
    demo.build_groups()
    demo.build_servers(servers)
    demo.mark_special()
    demo.host_metrics()
    return demo.document()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seed', type=int, default=2026)
    parser.add_argument('--servers', type=int, default=800)
    parser.add_argument('-o', '--output', default=os.path.join(
        os.path.dirname(__file__), '..', 'osc_leveller', 'data',
        'demo-snapshot.json'))
    args = parser.parse_args()
    document = build(args.seed, args.servers)
    snapshot_io.parse(document)  # never ship a demo that does not load
    with open(args.output, 'w', encoding='utf-8') as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
