"""The frozen cloud model: hypervisors, servers, server groups, migrations.

Everything the planner knows about a cloud lives here, in plain dataclasses built
once per run (from a snapshot file or, later, from a live cloud) and never
mutated. Planned moves are applied to an overlay (core.state), not to these.
"""

import dataclasses
import functools
import types

VCPU = 'VCPU'
PCPU = 'PCPU'
MEMORY_MB = 'MEMORY_MB'
DISK_GB = 'DISK_GB'

# Server states Nova can live-migrate (nova/compute/api.py live_migrate).
LIVE_MIGRATABLE_STATUSES = ('ACTIVE', 'PAUSED')
# Server states Nova migrates cold (evacuate --cold-migrate-stopped).
STOPPED_STATUSES = ('SHUTOFF',)

# Nova's migration statuses (free text, set by its conductor, compute
# manager and resource tracker) by how the migration ended for the server.
# Any other status is in flight, as in Nova's own in-progress queries
# (nova/db/main/api.py): accepted, queued, preparing, running, 'running
# (post-copy)' (live); pre-migrating, migrating, post-migrating, confirming,
# reverting (cold and resize), and finished: a cold migration or resize on
# its destination in VERIFY_RESIZE, until it is confirmed or reverted.
MOVED = 'moved'  # the server is on the destination
STAYED = 'stayed'  # it is where it was, or in ERROR
MIGRATION_ENDS = {
    'completed': MOVED,  # live migration; an evacuation, once its source
                         # compute is back
    'confirmed': MOVED,  # cold migration or resize, confirmed
    'done': MOVED,  # evacuation: rebuilt on the destination
    'reverted': STAYED,  # cold migration or resize, back on the source
    'failed': STAYED,  # live migration rolled back; evacuation failed
    'error': STAYED,  # failed part-way: the server may be in ERROR
    'cancelled': STAYED,  # live migration aborted
}
FINAL_MIGRATION_STATUSES = frozenset(MIGRATION_ENDS)
# What starts a server's cooldown, and what apply counts as landed.
MOVED_STATUSES = frozenset(s for s, end in MIGRATION_ENDS.items()
                           if end == MOVED)
FAILED_STATUSES = ('error', 'failed')
CANCELLED_STATUSES = ('cancelled',)
# What DELETE /servers/{id}/migrations/{id} aborts (queued and preparing
# from microversion 2.65).
ABORTABLE_STATUSES = ('queued', 'preparing', 'running')

EMPTY = types.MappingProxyType({})


def _empty():
    return dataclasses.field(default_factory=lambda: EMPTY)


def frozen_mapping(data):
    return types.MappingProxyType(dict(data)) if data else EMPTY


def make(cls, fields):
    """An instance of a frozen dataclass from a dict of all its fields.

    What the generated __init__ makes, five times faster: frozen=True has
    it set each field through object.__setattr__, which was most of the
    time of building 500,000 servers. The dict becomes the instance's own.
    """
    instance = object.__new__(cls)
    object.__setattr__(instance, '__dict__', fields)
    return instance


@dataclasses.dataclass(frozen=True)
class Inventory:
    """One Placement inventory record of a resource provider."""

    total: int
    reserved: int = 0
    allocation_ratio: float = 1.0
    min_unit: int = 1
    max_unit: int = None  # None: no limit beyond the capacity
    step_size: int = 1

    @property
    def capacity(self):
        """What Placement lets consumers allocate: (total - reserved) * ratio."""
        return (self.total - self.reserved) * self.allocation_ratio


@dataclasses.dataclass(frozen=True)
class Service:
    """The nova-compute service behind a hypervisor."""

    status: str = 'enabled'
    state: str = 'up'
    forced_down: bool = False
    disabled_reason: str = ''

    @property
    def usable(self):
        return (self.status == 'enabled' and self.state == 'up'
                and not self.forced_down)


@dataclasses.dataclass(frozen=True)
class Aggregate:
    name: str
    metadata: types.MappingProxyType = _empty()


@dataclasses.dataclass(frozen=True)
class HostMetrics:
    """Measured host load, fractions 0..1; None where not measured."""

    cpu: float = None
    ram: float = None
    cpu_pressure: float = None
    ram_pressure: float = None
    # The same averaged over the snapshot's lasting period, or None.
    lasting: 'HostMetrics' = None
    # The same over the period ahead, on past days (Forecast), or None.
    forecast: 'HostMetrics' = None


@dataclasses.dataclass(frozen=True)
class Hypervisor:
    name: str  # hypervisor_hostname, also the Placement resource provider name
    host: str  # nova-compute service host, what os-migrateLive takes
    uuid: str = ''  # compute node uuid == resource provider uuid
    availability_zone: str = ''
    aggregates: tuple = ()
    service: Service = Service()
    inventories: types.MappingProxyType = _empty()  # resource class -> Inventory
    usages: types.MappingProxyType = _empty()  # resource class -> int
    cpu_arch: str = ''
    cpu_model: str = ''
    cpu_features: frozenset = frozenset()
    # Placement's traits of its resource provider; None: unknown (not read,
    # or Placement's answer could not be used).
    traits: frozenset = None
    metrics: HostMetrics = None
    # Nova's hypervisor_type and hypervisor_version (libvirt's: 8002000 is
    # 8.2.0); '' and None when unknown.
    hypervisor_type: str = ''
    hypervisor_version: int = None

    def capacity(self, resource_class):
        inv = self.inventories.get(resource_class)
        return inv.capacity if inv else 0.0

    @functools.cached_property  # asked for each of its servers
    def inconsistency(self):
        """Why Placement's figures for it make no sense, or None.

        Allocations on a resource class it has no capacity of (VCPU total 0
        with servers on it, or every unit reserved): its load would read as
        many times full, so it is left out of balancing instead.
        """
        for rc, used in sorted(self.usages.items()):
            if used > 0 and self.capacity(rc) <= 0:
                inv = self.inventories.get(rc)
                return '%s %d allocated, but %s' % (
                    rc, used, 'no %s inventory' % rc if inv is None else
                    'capacity 0 (total %d, reserved %d)' % (inv.total,
                                                            inv.reserved))
        return None

    @property
    def usable(self):
        """Servers may go there and its score means something."""
        return self.service.usable and self.inconsistency is None

    def usage(self, resource_class):
        return self.usages.get(resource_class, 0)

    @property
    def threads(self):
        """Physical CPU threads: the VCPU (plus PCPU) inventory total."""
        return sum(inv.total for rc, inv in self.inventories.items()
                   if rc in (VCPU, PCPU))

    @property
    def memory_mb(self):
        inv = self.inventories.get(MEMORY_MB)
        return inv.total if inv else 0


@dataclasses.dataclass(frozen=True)
class Flavor:
    name: str = ''
    vcpus: int = 0
    ram: int = 0  # MiB
    disk: int = 0  # GiB
    ephemeral: int = 0  # GiB
    swap: int = 0  # MiB
    extra_specs: types.MappingProxyType = _empty()


@dataclasses.dataclass(frozen=True, eq=False)  # one per image: by identity
class Image:
    """What Nova's scheduler reads of the image a server was booted from
    (core/rules/images.py), one object shared by the servers of that image.

    properties: the image properties the rules read, as Glance gives them
    (text), or None when they are unknown: the image is gone from Glance,
    Glance did not answer, or the server was booted from a volume (whose
    image properties Nova takes from Cinder). why says which.
    """

    id: str = ''
    name: str = ''
    disk_format: str = ''
    properties: types.MappingProxyType = None
    why: str = ''

    @property
    def known(self):
        return self.properties is not None

    @property
    def label(self):
        return self.name or self.id or 'its boot volume'


@dataclasses.dataclass(frozen=True)
class ServerUsage:
    """Measured server load as fractions of its own flavor; None if unknown.

    cpu_steal is the share of its vCPUs' time they were ready to run but
    queued behind others on the host (libvirt's vCPU delay, the guest's
    steal time): what it asked for beyond what it got.
    """

    cpu: float = None
    ram: float = None
    cpu_steal: float = None
    # The same averaged over the snapshot's lasting period, or None.
    lasting: 'ServerUsage' = None
    # The same over the period ahead, on past days (Forecast), or None.
    forecast: 'ServerUsage' = None


@dataclasses.dataclass(frozen=True)
class Server:
    id: str
    name: str
    hypervisor: str  # hypervisor_hostname the server runs on
    project_id: str = ''
    status: str = 'ACTIVE'
    task_state: str = None
    locked: bool = False
    flavor: Flavor = Flavor()
    boot_from_volume: bool = False
    server_groups: tuple = ()
    metadata: types.MappingProxyType = _empty()
    tags: tuple = ()
    pinned_availability_zone: str = ''
    # Placement allocation on the hypervisor's root provider: rc -> amount.
    resources: types.MappingProxyType = _empty()
    # Why Nova cannot live-migrate it (PCI, vGPU, child-provider allocations ...).
    blockers: tuple = ()
    usage: ServerUsage = ServerUsage()
    # What the scheduler reads of its image; None: not recorded (a
    # snapshot of before image properties were read).
    image: Image = None

    @property
    def label(self):
        return self.name or self.id

    @property
    def ram_gb(self):
        return self.resources.get(MEMORY_MB, self.flavor.ram) / 1024.0


@dataclasses.dataclass(frozen=True)
class ServerGroup:
    id: str
    name: str
    policy: str  # affinity, anti-affinity, soft-affinity, soft-anti-affinity
    members: tuple = ()
    max_server_per_host: int = None
    project_id: str = ''


@dataclasses.dataclass(frozen=True)
class Migration:
    server_id: str
    status: str
    migration_type: str = 'live-migration'
    source_compute: str = ''
    dest_compute: str = ''
    created_at: float = None  # seconds since the epoch
    updated_at: float = None
    id: str = ''

    @property
    def in_progress(self):
        return self.status.lower() not in FINAL_MIGRATION_STATUSES

    @property
    def moved(self):
        """It ended with the server on its destination."""
        return self.status.lower() in MOVED_STATUSES


@dataclasses.dataclass(frozen=True)
class Forecast:
    """What the forecast figures of a snapshot are: each figure's average
    over the period that followed this time of day (ahead: '1h'), on each
    of the days before; weight: its share of the load a plan is made on,
    or with skill, the most it may have.

    skill: {hypervisor: {figure: ForecastErrors}}, how well the forecast
    did on the cloud's history (core/load/skill.py); None: not measured (a
    snapshot of before it was), the weight is the share.
    """

    ahead: str
    days: int
    weight: float
    skill: types.MappingProxyType = None


@dataclasses.dataclass(frozen=True)
class HostFacts:
    """What a hypervisor's exporters say beyond its load, for the guard
    against implausible metrics (core/load/guard.py); None where not known."""

    cpus: int = None  # CPUs its node_exporter shows (0: none at all)
    memory_mb: float = None  # its node_exporter's MemTotal
    # Its CPU and RAM at the guard's reference time; None: none then.
    before: HostMetrics = None
    servers_before: int = None  # servers with their own CPU series then
    # The server whose CPU read furthest above its vCPUs, and that CPU as
    # a fraction of them (above 1), if any did.
    busiest_server: str = None
    busiest_cpu: float = None


@dataclasses.dataclass(frozen=True)
class GuardFacts:
    """The guard's view of a snapshot's metrics: each hypervisor's facts,
    and the time ``before`` figures are from (None: nothing to compare)."""

    reference: float = None  # seconds since the epoch
    reference_from: str = ''  # 'metrics_file' or 'since'
    read_at: float = None  # when Prometheus was asked: a later reference
    window: float = 0.0  # seconds of rate()'s window in the queries
    hypervisors: types.MappingProxyType = _empty()  # name -> HostFacts
    unreachable: str = ''  # why Prometheus gave no answer, if it did not


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The whole cloud as the planner sees it at one moment."""

    hypervisors: tuple
    servers: tuple
    server_groups: tuple = ()
    migrations: tuple = ()
    taken_at: float = 0.0  # seconds since the epoch
    source: types.MappingProxyType = _empty()
    # The period the metrics' lasting figures cover ('3h'), or ''.
    lasting: str = ''
    forecast: Forecast = None
    guard: GuardFacts = None  # what the guard checks the metrics with

    def __post_init__(self):
        by_name = {h.name: h for h in self.hypervisors}
        object.__setattr__(self, '_hypervisors', by_name)
        object.__setattr__(
            self, '_groups', {g.id: g for g in self.server_groups})

    # The server indexes are made when first asked for, or given by
    # whoever makes the snapshot from an earlier one's (core/snapshot.py).
    @functools.cached_property
    def _servers(self):
        return {s.id: s for s in self.servers}

    @functools.cached_property
    def _servers_on(self):
        by_host = {h.name: [] for h in self.hypervisors}
        for server in self.servers:
            by_host.setdefault(server.hypervisor, []).append(server)
        return {k: tuple(v) for k, v in by_host.items()}

    def well_formed(self):
        """Every server's id its own and its hypervisor one of ours, as
        the indexes show: a duplicate id is one key for two servers, an
        unknown hypervisor a key of its own."""
        return len(self._servers) == len(self.servers) and \
            len(self._servers_on) == len(self._hypervisors)

    def hypervisor(self, name):
        return self._hypervisors.get(name)

    def server(self, server_id):
        return self._servers.get(server_id)

    def server_group(self, group_id):
        return self._groups.get(group_id)

    def servers_on(self, hypervisor_name):
        return self._servers_on.get(hypervisor_name, ())

    def find_server(self, ref):
        """A server by id or unique name, or None."""
        if ref in self._servers:
            return self._servers[ref]
        named = [s for s in self.servers if s.name == ref]
        return named[0] if len(named) == 1 else None

    def find_hypervisor(self, ref):
        """A hypervisor by hypervisor_hostname or unique service host."""
        if ref in self._hypervisors:
            return self._hypervisors[ref]
        hosts = [h for h in self.hypervisors if h.host == ref]
        return hosts[0] if len(hosts) == 1 else None


@dataclasses.dataclass(frozen=True)
class ForecastErrors:
    """One hypervisor's sums of squared errors of the forecast's
    predictors over `points` steps (core/load/skill.py)."""

    points: int = 0
    now: float = 0.0
    ahead: float = 0.0
    cross: float = 0.0  # sum of now's error times ahead's
    lasting: float = None

    def __add__(self, other):
        lasting = None if self.lasting is None and other.lasting is None \
            else (self.lasting or 0.0) + (other.lasting or 0.0)
        return ForecastErrors(
            self.points + other.points, self.now + other.now,
            self.ahead + other.ahead, self.cross + other.cross, lasting)
