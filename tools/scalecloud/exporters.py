"""Prometheus answers for scalecloud: kolla-ansible's exporters, by query.

The series are those the devcloud's exporters render in their default
flavour, kolla (tools/devcloud/exporter.py: node_exporter at Nova's host_ip
port 9100, job ``node``; the inovex libvirt exporter at port 9177, job
``libvirt_exporter``), with the labels Prometheus leaves on the results of
the plugin's queries. There is no PromQL engine: a query is recognised by
the metric names it reads (measure.HOST_QUERIES and the libvirt profiles),
and any other query answers an empty vector and is counted in
``unknown``.

Load follows the servers, as in the devcloud: a hypervisor's CPU is
``sum(cpu * vcpus) / VCPU total`` and its RAM ``sum(ram * MiB) / MEMORY_MB
total`` over the running servers it holds now (their usage from the
cluster's cpu_util and mem_util, or a collected snapshot's usage),
pressure the devcloud exporter's function of the demand. A server without
usage has no series and loads nothing. A document whose servers carry no
usage at all (one collected without Prometheus, say) has its hypervisors'
own metrics, fixed, and no server series.
"""

import collections

from osc_leveller.cloud import measure
from tests.unit import standin
from tools.devcloud import exporter

FLAVOUR = exporter.FLAVOURS['kolla']
MIB = 1024 * 1024
# What the label values API lists (the plugin picks the libvirt profile
# from these): node_exporter's series the queries read, and inovex's.
NAMES = sorted((
    'node_uname_info', 'node_memory_MemTotal_bytes',
    'node_memory_MemAvailable_bytes', 'node_cpu_seconds_total',
    'node_pressure_cpu_waiting_seconds_total',
    'node_pressure_memory_waiting_seconds_total',
    'libvirt_domain_openstack_info', 'libvirt_domain_info_virtual_cpus',
    'libvirt_domain_info_cpu_time_seconds_total',
    'libvirt_domain_info_maximum_memory_bytes',
    'libvirt_domain_memory_stats_rss_bytes',
    'libvirt_domain_memory_stats_available_bytes',
    'libvirt_domain_memory_stats_usable_bytes',
    'libvirt_domain_vcpu_delay_seconds_total'))


class Exporters:
    """A query function for StandIn(prometheus=...) over its own state.

    hypervisors and servers: the stand-in's records (read, never changed;
    the stand-in calls the function holding its lock).
    """

    def __init__(self, hypervisors, servers):
        self.hypervisors = hypervisors
        self.servers = servers
        self.dynamic = any(s['usage'] for s in servers)
        self.uname = exporter.machine_uname()
        self.unknown = collections.Counter()  # queries not recognised

    def target(self, hyp, port):
        return {'instance': '%s:%d' % (standin.host_ip(hyp['index']), port)}

    def node(self, hyp, **labels):
        return dict(self.target(hyp, exporter.NODE_PORT),
                    job=FLAVOUR.node_job, **labels)

    def __call__(self, promql):
        if measure.GUARD_LABEL in promql:
            return self.guard(promql)
        if promql == 'node_uname_info':
            return [(self.node(h, __name__=promql, nodename=h['host'],
                               **self.uname), 1)
                    for h in self.hypervisors]
        if promql == 'node_memory_MemTotal_bytes':
            return [(self.node(h, __name__=promql), h['inventories'].get(
                'MEMORY_MB', {}).get('total', 0) * MIB)
                for h in self.hypervisors]
        for name, metric in (
                ('node_cpu_seconds_total', 'cpu'),
                ('node_memory_MemAvailable_bytes', 'ram'),
                ('node_pressure_cpu_waiting', 'cpu_pressure'),
                ('node_pressure_memory_waiting', 'ram_pressure')):
            if name in promql:
                return [(self.node(h), load[metric])
                        for h, load in self.hosts() if metric in load]
        if 'libvirt_domain_openstack_info' in promql:
            if 'libvirt_domain_info_cpu_time_seconds_total' in promql:
                return self.domains('cpu')
            if 'libvirt_domain_memory_stats' in promql:
                return self.domains('ram')
            if 'libvirt_domain_vcpu_delay_seconds_total' in promql:
                return self.domains('cpu_steal')
        self.unknown[promql] += 1
        return []

    def hosts(self):
        """(hypervisor, {metric: fraction}) of every hypervisor."""
        if not self.dynamic:
            return [(h, h['metrics']) for h in self.hypervisors]
        demand = {h['name']: [0.0, 0.0] for h in self.hypervisors}
        for s in self.servers:
            state = exporter.domain_state(s['status'])
            if state is None or state == exporter.DOMAIN_SHUTOFF:
                continue
            load = demand[s['hypervisor']]
            if state == exporter.DOMAIN_RUNNING:
                load[0] += s['usage'].get('cpu', 0.0) * s['flavor']['vcpus']
            load[1] += s['usage'].get('ram', 0.0) * s['flavor']['ram']
        result = []
        for h in self.hypervisors:
            cpu, ram = demand[h['name']]
            threads = max(1, h['inventories'].get('VCPU', {}).get('total', 1))
            mib = max(1, h['inventories'].get('MEMORY_MB', {}).get(
                'total', 1))
            result.append((h, {
                'cpu': min(1.0, cpu / threads), 'ram': min(1.0, ram / mib),
                'cpu_pressure': exporter.pressure(cpu / threads,
                                                  exporter.CPU_KNEE),
                'ram_pressure': exporter.pressure(ram / mib,
                                                  exporter.MEM_KNEE)}))
        return result

    def guard(self, promql):
        """The guard's query (cloud/measure.py): each part it names,
        marked as label_replace marks it. Sizes are Placement's and the
        figures of then are now's: nothing here is implausible."""
        parts = collections.defaultdict(list)
        for h, load in self.hosts():
            inventories = h['inventories']
            parts['cpus'].append((h, inventories.get('VCPU', {}).get(
                'total', 0)))
            parts['memory'].append((h, inventories.get('MEMORY_MB', {}).get(
                'total', 0) * MIB))  # a series of its own: with its name
            for metric in ('cpu', 'ram'):
                if metric in load:
                    parts[metric + '_before'].append((h, load[metric]))
        named = {'memory': {'__name__': 'node_memory_MemTotal_bytes'}}
        samples = [(dict(self.node(h, **named.get(part, {})), **{
            measure.GUARD_LABEL: part}), value)
            for part, found in parts.items()
            if '"%s"' % part in promql for h, value in found]
        if '"servers_before"' in promql:
            on = collections.Counter(labels['instance']
                                     for labels, _ in self.domains('cpu'))
            samples += [({'instance': instance, 'job': FLAVOUR.libvirt_job,
                          measure.GUARD_LABEL: 'servers_before'}, count)
                        for instance, count in sorted(on.items())]
        return samples

    def domains(self, metric):
        """The inovex series of a server metric, as the profile's join
        leaves their labels: the domain's, and the server id."""
        if not self.dynamic:
            return []
        by_name = {h['name']: h for h in self.hypervisors}
        samples = []
        for s in self.servers:
            state = exporter.domain_state(s['status'])
            usage = s['usage']
            if 'cpu' in usage:
                # libvirt reports a vCPU's delay, 0 when it never waited.
                usage = dict(usage, cpu_steal=usage.get('cpu_steal', 0.0))
            if state is None or metric not in usage or (
                    metric != 'cpu' and state == exporter.DOMAIN_SHUTOFF):
                continue
            value = usage[metric] if state == exporter.DOMAIN_RUNNING \
                or metric == 'ram' else 0.0
            labels = self.target(by_name[s['hypervisor']],
                                 FLAVOUR.libvirt_port)
            labels.update(job=FLAVOUR.libvirt_job, instance_id=s['id'],
                          domain='instance-%08x' % s['index'])
            samples.append((labels, value))
        return samples
