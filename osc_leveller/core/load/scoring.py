"""Host load, the synthetic score, balancing domains and imbalance.

A host's utilisation per dimension comes from measured metrics when the host
has them, else from its Placement allocations (used / capacity, capacity =
(total - reserved) * allocation_ratio). Measured CPU is demand: the threads
busy plus the time its servers' vCPUs were queued for a thread (steal), so a
host whose servers ask for more than it has reads above 100 %. Its score is
the weighted mean of the dimensions it has. Pressure is taken as proportional to the utilisation it
belongs to on each host, so every score is linear in the host's CPU and RAM
load: moving a server changes exactly two scores by amounts known in advance.
That is what lets the planner evaluate thousands of candidate moves cheaply.
"""

import collections
import dataclasses
import math

from osc_leveller.core.model import model
from osc_leveller.core.settings import config

METRICS = 'metrics'
ALLOCATIONS = 'allocations'


def domain_of(hypervisor, by_cpu_model=True):
    """Balancing domain: servers cannot leave their AZ or CPU class.

    The CPU class is the CPU model, or only the architecture when moves
    between models are allowed (to hypervisors offering every feature).
    """
    cpu = (hypervisor.cpu_model if by_cpu_model else '') or \
        hypervisor.cpu_arch or 'any-cpu'
    return '%s/%s' % (hypervisor.availability_zone or 'no-az', cpu)


def cpu_allocated(resources):
    """VCPU plus PCPU of a usage or allocation."""
    return resources.get(model.VCPU, 0) + resources.get(model.PCPU, 0)


def _cpu_capacity(hyp):
    return hyp.capacity(model.VCPU) + hyp.capacity(model.PCPU)


@dataclasses.dataclass(frozen=True)
class HostModel:
    """How one host's score follows its CPU and RAM load."""

    mode: str  # METRICS or ALLOCATIONS
    cpu_size: float  # threads (metrics) or allocatable vCPUs (allocations)
    ram_size: float  # MiB, physical (metrics) or allocatable (allocations)
    cpu_load: float  # busy threads or allocated vCPUs, at snapshot time
    ram_load: float  # used or allocated MiB
    cpu_pressure_per_util: float = 0.0
    ram_pressure_per_util: float = 0.0
    cpu_coef: float = 0.0  # score per unit of cpu_load
    ram_coef: float = 0.0
    # Score per server on the host (weights.count; 0 unless weighted),
    # and the count that is 100 %: twice the mean per hypervisor.
    count_coef: float = 0.0
    count_size: float = 1.0


@dataclasses.dataclass(frozen=True)
class ServerLoad:
    cores: float  # threads asked for (used + steal), measured or estimated
    ram_mb: float  # resident MiB, measured or estimated from its host
    vcpus: int  # allocated VCPU + PCPU
    alloc_ram_mb: int


class _ServerLoads(dict):
    """{server id: ServerLoad}, filled a hypervisor at a time on first use:
    a plan reads the servers of a few hypervisors, not of all."""

    def __init__(self, load_model, snapshot):
        super().__init__()
        self._load_model = load_model
        self._snapshot = snapshot

    def __missing__(self, server_id):
        server = self._snapshot.server(server_id)
        if server is None or server.hypervisor not in self._load_model.hosts:
            raise KeyError(server_id)
        self.update(self._load_model._loads_on(self._snapshot,
                                               server.hypervisor))
        return self[server_id]


class LoadModel:
    """Scores for a snapshot under given weights; never changes it."""

    def __init__(self, snapshot, weights=None):
        self.weights = dict(config.DEFAULT_WEIGHTS, **(weights or {}))
        usable = [h for h in snapshot.hypervisors if h.usable]
        self.count_size = max(1.0, 2.0 * sum(
            len(snapshot.servers_on(h.name)) for h in usable) /
            max(1, len(usable)))
        queued = _queued(snapshot)
        self.hosts = {h.name: self._host(h, queued.get(h.name, 0.0))
                      for h in snapshot.hypervisors}
        self.servers = _ServerLoads(self, snapshot)

    def _host(self, hyp, queued):
        """queued: threads its servers waited for (steal), beyond busy."""
        metrics = hyp.metrics
        w = self.weights
        if metrics is not None and metrics.cpu is not None and \
                metrics.ram is not None and hyp.threads and hyp.memory_mb:
            cpu_size, ram_size = float(hyp.threads), float(hyp.memory_mb)
            cpu = metrics.cpu + queued / cpu_size
            k_cpu = (metrics.cpu_pressure or 0.0) / cpu if cpu > 0 else 0.0
            k_ram = (metrics.ram_pressure or 0.0) / metrics.ram \
                if metrics.ram > 0 else 0.0
            total = w['cpu'] + w['ram']
            total += w['cpu_pressure'] if metrics.cpu_pressure is not None \
                else 0.0
            total += w['ram_pressure'] if metrics.ram_pressure is not None \
                else 0.0
            total += w['count']
            return HostModel(
                METRICS, cpu_size, ram_size,
                cpu * cpu_size, metrics.ram * ram_size, k_cpu, k_ram,
                cpu_coef=(w['cpu'] + w['cpu_pressure'] * k_cpu)
                / (total * cpu_size),
                ram_coef=(w['ram'] + w['ram_pressure'] * k_ram)
                / (total * ram_size),
                count_coef=w['count'] / (total * self.count_size),
                count_size=self.count_size)
        cpu_size = _cpu_capacity(hyp) or 1.0
        ram_size = hyp.capacity(model.MEMORY_MB) or 1.0
        total = w['cpu'] + w['ram'] + w['count']
        return HostModel(
            ALLOCATIONS, cpu_size, ram_size,
            float(cpu_allocated(hyp.usages)),
            float(hyp.usage(model.MEMORY_MB)),
            cpu_coef=w['cpu'] / (total * cpu_size),
            ram_coef=w['ram'] / (total * ram_size),
            count_coef=w['count'] / (total * self.count_size),
            count_size=self.count_size)

    def _loads_on(self, snapshot, hyp_name):
        """{server id: ServerLoad} of one hypervisor's servers; unmeasured
        servers get their host's average."""
        loads = {}
        host = self.hosts[hyp_name]
        on_host = snapshot.servers_on(hyp_name)
        cpu_per_vcpu = ram_per_mb = 0.0
        if host.mode == METRICS:
            vcpus = sum(cpu_allocated(s.resources) for s in on_host)
            ram = sum(s.resources.get(model.MEMORY_MB, 0) for s in on_host)
            cpu_per_vcpu = min(1.0, host.cpu_load / vcpus) if vcpus else 0
            ram_per_mb = min(1.0, host.ram_load / ram) if ram else 0
        for s in on_host:
            vcpus = cpu_allocated(s.resources)
            ram = s.resources.get(model.MEMORY_MB, 0)
            cpu = s.usage.cpu if s.usage.cpu is not None else cpu_per_vcpu
            # A vCPU runs or waits: used plus steal is at most all of it.
            cpu = min(1.0, cpu + (s.usage.cpu_steal or 0.0))
            mem = s.usage.ram if s.usage.ram is not None else ram_per_mb
            loads[s.id] = ServerLoad(cpu * vcpus, mem * ram, vcpus, ram)
        return loads

    def amounts(self, server_id, host_name):
        """(cpu, ram) load the server puts on the host, in its units."""
        load = self.servers[server_id]
        if self.hosts[host_name].mode == METRICS:
            return load.cores, load.ram_mb
        return load.vcpus, load.alloc_ram_mb

    def delta(self, server_id, host_name):
        """How much the server adds to the host's score."""
        host = self.hosts[host_name]
        cpu, ram = self.amounts(server_id, host_name)
        return host.cpu_coef * cpu + host.ram_coef * ram + host.count_coef

    # The count's part is in the CPU part: the objective (core/planning/
    # objective.py) evens out two parts, and 0 unless weighted adds nothing.
    def parts(self, host_name, cpu_load, ram_load, count=1):
        """(CPU part, RAM part) of the host's score: they add up to it."""
        host = self.hosts[host_name]
        return (host.cpu_coef * cpu_load + host.count_coef * count,
                host.ram_coef * ram_load)

    def server_parts(self, server_id, host_name):
        """(CPU part, RAM part) of what the server adds to the host's score."""
        return self.parts(host_name, *self.amounts(server_id, host_name))

    def score(self, host_name, cpu_load, ram_load, count):
        host = self.hosts[host_name]
        return host.cpu_coef * cpu_load + host.ram_coef * ram_load + \
            host.count_coef * count

    def dimensions(self, host_name, cpu_load, ram_load, count):
        """Per-dimension utilisation {cpu, ram, cpu_pressure, ram_pressure,
        count}."""
        host = self.hosts[host_name]
        cpu = cpu_load / host.cpu_size
        ram = ram_load / host.ram_size
        result = {'cpu': cpu, 'ram': ram, 'cpu_pressure': None,
                  'ram_pressure': None, 'count': count / host.count_size}
        if host.mode == METRICS:
            result['cpu_pressure'] = host.cpu_pressure_per_util * cpu
            result['ram_pressure'] = host.ram_pressure_per_util * ram
        return result


def _queued(snapshot):
    """{hypervisor: threads its servers' vCPUs waited for}, from their
    measured steal."""
    queued = collections.Counter()
    for server in snapshot.servers:
        usage = server.usage
        if usage.cpu_steal:
            steal = min(usage.cpu_steal, 1.0 - (usage.cpu or 0.0))
            queued[server.hypervisor] += steal * cpu_allocated(
                server.resources)
    return queued


@dataclasses.dataclass(frozen=True)
class DomainStats:
    domain: str
    hosts: int
    mean: float
    imbalance: float  # population standard deviation of host scores
    gap: float  # highest minus lowest score
    hottest: str
    coolest: str


def domain_stats(scores, domains):
    """Per-domain statistics from {host: score} and {host: domain}."""
    members = collections.defaultdict(list)
    for host, score in scores.items():
        members[domains[host]].append((score, host))
    result = []
    for domain in sorted(members):
        entries = sorted(members[domain])
        values = [s for s, _ in entries]
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / len(values)
        result.append(DomainStats(
            domain, len(values), mean, math.sqrt(var),
            values[-1] - values[0], entries[-1][1], entries[0][1]))
    return result


def pooled_imbalance(stats):
    """One figure for the cloud: the std of each host from its domain mean."""
    hosts = sum(s.hosts for s in stats)
    if not hosts:
        return 0.0
    return math.sqrt(sum(s.hosts * s.imbalance ** 2 for s in stats) / hosts)
