"""Nova's constraints as small pure predicates.

Each filter returns None when it passes, or a reason an operator can read
("anti-affinity group web: hv03 already hosts web-2"). Server filters decide
whether a server may move at all, in the policies of core/rules/policy.py;
destination filters whether it may move to one hypervisor in a given State.
``Rules`` holds what the filters look up (options, group membership,
migration history), built once per snapshot.

Every filter is declared once, in RULES at the end of this module: its
short stable code and its properties (see Rule). The lists the planner,
the path finder, N+1 packing and the policies use are derived from it, and
a filter's reason reaches them as a Refusal that carries its code.

Two rules keep balancing from moving a server to and fro, from Nova's
migration history: the cooldown grows with the server's recent moves and
their duration, and a server does not go back to a hypervisor it left
recently.
"""

import collections
import dataclasses

from osc_leveller.core.load import duration
from osc_leveller.core.load import scoring
from osc_leveller.core.model import extra_specs
from osc_leveller.core.model import model
from osc_leveller.core.rules import images
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as opts

AGGREGATE_SCOPE = 'aggregate_instance_extra_specs'
TENANT_KEY = 'filter_tenant_id'
ZONE_KEY = 'availability_zone'
HOUR = 3600.0
# The cooldown doubles with each move of the server in this many hours,
RECENT_HOURS = 24.0
# and is at least this many times its last migration's duration: a move
# that took long costs much, and was likely slow to converge.
DURATION_FACTOR = 12


class Refusal(str):
    """A reason to refuse, with its short stable code beside it.

    It reads as the sentence an operator sees (plan files, the journal);
    code says which rule (or which re-check) refused, for the metrics
    file, held and drain to count without parsing the sentence. rule: the
    Rule that refused, None for a re-check's own reasons; resource: the
    Placement resource class that is full, for capacity. Text built on a
    Refusal ('%s: %s' % ...) is a plain str: reworded() keeps the code.
    """
    code = rule = resource = None

    def __new__(cls, text, code=None, rule=None, resource=None):
        self = str.__new__(cls, text)
        self.code, self.rule, self.resource = code, rule, resource
        return self

    def reworded(self, text):
        """The same refusal in other words."""
        return Refusal(text, self.code, self.rule, self.resource)


@dataclasses.dataclass(frozen=True)
class Rule:
    """A filter, declared once in RULES with its properties.

    code: short, stable, snake case; the metrics file, held and drain read
    it (held shows it with spaces: 'server groups').
    check: (server, rules) -> reason or None when it says whether a
    server may move at all; (server, dest, state, rules) when it is a
    destination rule.
    own: the leveller's own rule, or what the API cannot show: it refuses
    what Nova would accept, on purpose (CHOICES).
    The destination rules only:
    static: its answer depends on the server and the hypervisor (and the
    hypervisor the server comes from), not on what else the plan moves:
    the path finder judges a target by these before it searches
    (paths.STATIC_FILTERS), N+1 packing a way back (core/rules/n_plus_one.py).
    target: it bounds an operator's target placement (TARGET_FILTERS).
    rebuild: Nova's scheduler applies it to a rebuild elsewhere, so N+1
    packing checks it (headroom.FILTERS).
    balancing: only balancing applies it (policy.BALANCE), after the
    others.
    boot: it bounds where a new server can go too (Nova's scheduler, or
    the leveller's own scope, on a boot), so plan --make-room checks it of
    the new server (BOOT_FILTERS; capacity is counted there).
    """
    code: str
    check: object
    destination: bool = False
    own: bool = False
    static: bool = False
    target: bool = True
    rebuild: bool = False
    balancing: bool = False
    boot: bool = False
    # The rule's refusals are of its own Refusal class, which holds its
    # code and itself: one costs what its str does, where attributes of
    # its own would cost five times more (a drain makes one per
    # hypervisor refused: 100,000 draining 4 of 500 hypervisors).
    _refusal: type = dataclasses.field(init=False, repr=False,
                                       compare=False)

    def __post_init__(self):
        object.__setattr__(self, '_refusal', type('Refusal', (Refusal,), {
            'code': self.code, 'rule': self, '__new__': str.__new__}))

    def __call__(self, *args):
        return first_reason((self,), *args)

    def refusal(self, reason):
        """The check's reason as this rule's Refusal; one that already
        names its rule (a rule checked within another) stays its own."""
        if reason.__class__ is str:
            return self._refusal(reason)
        if reason.rule is not None:
            return reason
        made = self._refusal(reason)
        made.resource = reason.resource
        return made


class Moved(collections.namedtuple('Moved', 'ended seconds source')):
    """A migration that moved a server: when it ended, how long it took
    (0 when unknown), the compute host it left."""


def _lingering(snapshot, now, interval):
    """Where Nova's scheduler may still count a server that is not there:
    ({server id: hypervisor names}, server ids it may count anywhere).

    The scheduler keeps each host's servers in memory, and a host's compute
    puts that list right only every scheduler_instance_sync_interval
    seconds. Meanwhile it holds a server on the host a live migration left
    (the source compute reports the server as its own when the migration
    ends: compute manager _post_live_migration), and on every host the
    scheduler picked for it, even for a move the conductor then refused
    (scheduler manager _consume_selected_host). ServerGroupAntiAffinityFilter
    counts those. A failed move whose destination Nova does not record
    (os-migrations dest_compute null) may have left it on any host."""
    lingering = collections.defaultdict(set)
    anywhere = set()
    nodes = collections.defaultdict(list)
    for hyp in snapshot.hypervisors:
        nodes[hyp.host].append(hyp.name)
    for mig in snapshot.migrations:
        when = mig.updated_at or mig.created_at
        if when is None or now - when > interval:
            continue
        if mig.moved:
            if mig.migration_type == 'live-migration':
                lingering[mig.server_id].update(nodes[mig.source_compute])
        elif mig.dest_compute:
            lingering[mig.server_id].update(nodes[mig.dest_compute])
        elif not mig.in_progress:
            anywhere.add(mig.server_id)
    return lingering, anywhere


class Rules:
    """Options plus the indexes the filters need, for one snapshot (what
    every Rule's check looks up, not a list of them)."""

    def __init__(self, snapshot, options):
        self.snapshot = snapshot
        self.options = options
        self.now = options.now if options.now is not None \
            else snapshot.taken_at
        members = {g.id: list(g.members) for g in snapshot.server_groups}
        for server in snapshot.servers:
            for group_id in server.server_groups:
                ids = members.get(group_id)
                if ids is not None and server.id not in ids:
                    ids.append(server.id)
        # Only servers in the snapshot count: Nova lists deleted members too.
        self.group_members = {
            gid: tuple(m for m in ids if snapshot.server(m) is not None)
            for gid, ids in members.items()}
        self.groups_of = collections.defaultdict(list)
        for group in snapshot.server_groups:
            for member in self.group_members[group.id]:
                self.groups_of[member].append(group)
        self.in_flight = {}
        self.moves_of = collections.defaultdict(list)  # id -> [Moved]
        for mig in snapshot.migrations:
            if mig.in_progress:
                self.in_flight[mig.server_id] = mig
            elif mig.moved:
                when = mig.updated_at or mig.created_at
                if when is not None:
                    took = when - mig.created_at \
                        if mig.created_at is not None else 0.0
                    self.moves_of[mig.server_id].append(
                        Moved(when, max(0.0, took), mig.source_compute))
        self.last_moved = {sid: max(m.ended for m in moves)
                           for sid, moves in self.moves_of.items()}
        self.lingering, self.anywhere = _lingering(
            snapshot, self.now, options.instance_sync_interval)
        # {project: names of the aggregates a filter_tenant_id* key names
        # it alone in}: Nova's limit_tenants_to_placement_aggregate finds
        # those by exact value (a comma list confines nobody).
        self.tenant_aggregates = collections.defaultdict(set)
        # The zones aggregates define (not the default zone).
        self.zones = set()
        for hyp in snapshot.hypervisors:
            for agg in hyp.aggregates:
                for key, value in agg.metadata.items():
                    if key.startswith(TENANT_KEY):
                        self.tenant_aggregates[value].add(agg.name)
                    elif key == ZONE_KEY:
                        self.zones.add(value)
        # With keep_n_plus_one: the state whose moves keep N+1 (the
        # planner's, apply's) and its core.n_plus_one.Guard, built on first
        # use. Other states are trials of the path finder.
        self.kept_state = None
        self.guard = None
        self._durations = None

    @property
    def durations(self):
        """The history's estimates of live migrations, made on first use."""
        if self._durations is None:
            self._durations = duration.Durations(self.snapshot)
        return self._durations

    def cooldown(self, server_id):
        """(hours, why) of the server's cooldown: the cooldown setting,
        or DURATION_FACTOR times its last migration's duration if longer,
        times 2 ** (n - 1) for its n moves in the last RECENT_HOURS, up
        to cooldown_max but never below the setting. why is '' when the
        setting alone applies."""
        setting = self.options.cooldown_hours
        moves = self.moves_of.get(server_id)
        if not moves:
            return setting, ''
        last = max(moves)
        hours = max(setting, DURATION_FACTOR * last.seconds / HOUR)
        why = ['%g h' % setting if hours == setting else
               '%d x its last migration\'s %s' % (DURATION_FACTOR,
                                                  _duration(last.seconds))]
        recent = sum(self.now - m.ended < RECENT_HOURS * HOUR for m in moves)
        if recent > 1:
            hours *= 2 ** (recent - 1)
            why.append('x %d for its %d moves in the last %g h' % (
                2 ** (recent - 1), recent, RECENT_HOURS))
        if hours > self.options.cooldown_max_hours:
            hours = self.options.cooldown_max_hours
            why.append('capped at cooldown_max')
        if hours <= setting:
            return setting, ''
        return hours, ', '.join(why)

    def left(self, server_id, host):
        """When the server last left compute host host, or None."""
        ended = [m.ended for m in self.moves_of.get(server_id, ())
                 if m.source == host]
        return max(ended) if ended else None


def _duration(seconds):
    if seconds < 90:
        return '%d s' % round(seconds)
    if seconds < 90 * 60:
        return '%d min' % round(seconds / 60)
    return '%.1f h' % (seconds / HOUR)


# --- may this server move at all? -------------------------------------------

def status(server, rules):
    if server.status not in model.LIVE_MIGRATABLE_STATUSES:
        return 'status %s: only ACTIVE or PAUSED servers can be live-migrated' \
            % server.status


def task_state(server, rules):
    if server.task_state:
        return 'task_state %s: Nova refuses to migrate a busy server' % \
            server.task_state


def locked(server, rules):
    if server.locked and not rules.options.include_locked:
        return 'locked (use --include-locked to move locked servers)'


def migration_in_flight(server, rules):
    mig = rules.in_flight.get(server.id)
    if mig is not None:
        return 'a %s is already in progress (status %s)' % (
            mig.migration_type, mig.status)


def blockers(server, rules):
    if server.blockers:
        return 'cannot live-migrate: %s' % '; '.join(server.blockers)


# Flavor extra specs that give a server a NUMA topology (nova/virt/
# hardware.py numa_get_constraints): pinned CPUs, NUMA nodes, page sizes.
NUMA_SPECS = ('hw:numa_nodes', 'hw:mem_page_size', 'hw:cpu_realtime',
              'hw:cpu_dedicated_mask', 'hw:emulator_threads_policy')


def _numa_reason(server):
    specs = server.flavor.extra_specs
    if specs.get('hw:cpu_policy') in ('dedicated', 'mixed'):
        return 'hw:cpu_policy=%s' % specs['hw:cpu_policy']
    for key in sorted(specs):
        if key in NUMA_SPECS or key.startswith(('hw:numa_cpus.',
                                                'hw:numa_mem.')):
            return '%s=%s' % (key, specs[key])
    if model.PCPU in server.resources or 'resources:PCPU' in specs:
        return 'dedicated CPUs (PCPU)'
    return images.numa_property(server.image)


def numa(server, rules):
    """What the API cannot show: which CPUs and memory of a hypervisor's
    NUMA cells are free. Nova's NUMATopologyFilter fits such a server to
    them; the leveller cannot, so it does not move it."""
    why = _numa_reason(server)
    if why:
        return 'has a NUMA topology (%s): the API does not show which ' \
            'CPUs and memory of a hypervisor\'s NUMA cells are free, so ' \
            'the leveller cannot check that a destination fits it ' \
            '(NUMATopologyFilter)' % why


def capabilities(server, rules):
    """What the API cannot show: the host state Nova's
    ComputeCapabilitiesFilter compares a flavor's capabilities:* extra
    specs (and hw:maxphysaddr_bits) with."""
    for key in sorted(server.flavor.extra_specs):
        if key.startswith('capabilities:') or key == 'hw:maxphysaddr_bits':
            return 'flavor extra spec %s: the API does not show the host ' \
                'capabilities ComputeCapabilitiesFilter compares, so the ' \
                'leveller cannot check a destination has them' % key
    why = images.maxphysaddr_property(server.image)
    if why:
        return '%s: the API does not show a hypervisor\'s physical ' \
            'address bits, which ImagePropertiesFilter compares, so the ' \
            'leveller cannot check a destination has them' % why


def opted_out(server, rules):
    if server.metadata.get(opts.OPT_OUT_KEY, '').lower() in (
            'true', 'yes', '1') or opts.OPT_OUT_KEY in server.tags:
        return 'opted out by %s' % opts.OPT_OUT_KEY


def project(server, rules):
    options = rules.options
    if server.project_id in options.exclude_projects:
        return 'project %s is excluded' % server.project_id
    if options.projects and server.project_id not in options.projects:
        return 'project %s is not among the selected projects' % \
            server.project_id


def cooldown(server, rules):
    when = rules.last_moved.get(server.id)
    if when is None:
        return None
    hours, why = rules.cooldown(server.id)
    if rules.now - when < hours * HOUR:
        ago = max(0.0, rules.now - when) / HOUR
        if not why:
            return 'migrated %.1f h ago, inside the %g h cooldown' % (
                ago, hours)
        return 'migrated %.1f h ago, inside its %g h cooldown (%s)' % (
            ago, hours, why)


def in_scope(hyp, options):
    """The hypervisor is among those the options select for balancing."""
    return (hyp.name not in options.exclude_hosts
            and hyp.host not in options.exclude_hosts
            and (not options.availability_zones
                 or hyp.availability_zone in options.availability_zones))


def source_in_scope(server, rules):
    hyp = rules.snapshot.hypervisor(server.hypervisor)
    if hyp.name in rules.options.exclude_hosts or \
            hyp.host in rules.options.exclude_hosts:
        return 'its hypervisor %s is excluded' % hyp.name
    zones = rules.options.availability_zones
    if zones and hyp.availability_zone not in zones:
        return 'its hypervisor %s is outside the selected availability ' \
            'zones' % hyp.name


def source_usable(server, rules):
    hyp = rules.snapshot.hypervisor(server.hypervisor)
    if not hyp.service.usable:
        return 'its hypervisor %s is %s: plan only balances usable ' \
            'hypervisors' % (hyp.name, _service_word(hyp.service))
    if hyp.inconsistency:
        return 'its hypervisor %s is left out: %s' % (hyp.name,
                                                      hyp.inconsistency)


def stopped_stay(server, rules):
    if server.status in model.STOPPED_STATUSES:
        return 'status %s: stopped servers stay (use --cold-migrate-stopped ' \
            'to move them)' % server.status


def migratable(server, rules):
    if server.status not in model.LIVE_MIGRATABLE_STATUSES + \
            model.STOPPED_STATUSES:
        return 'status %s: Nova migrates only ACTIVE or PAUSED servers ' \
            'live, and stopped ones cold' % server.status


def live_blockers(server, rules):
    """What stops a live migration; a cold one takes the devices along,
    and Nova's scheduler picks a NUMA fit for it."""
    if server.status not in model.STOPPED_STATUSES:
        return first_reason(LIVE_ONLY, server, rules)


def first_reason(checks, *args):
    """The Refusal of the first Rule of checks that fails, or None."""
    for rule in checks:
        reason = rule.check(*args)  # not rule(): this is the hot loop
        if reason:
            return rule.refusal(reason)
    return None


# --- may it move to this hypervisor, in this state? -------------------------

def not_source(server, dest, state, rules):
    if state.host_of(server.id) == dest.name:
        return 'it is the server\'s current hypervisor'


def excluded_host(server, dest, state, rules):
    if dest.name in rules.options.exclude_hosts or \
            dest.host in rules.options.exclude_hosts:
        return 'excluded by --exclude-host'


def _service_word(service):
    if service.forced_down:
        return 'forced down'
    if service.state != 'up':
        return 'down'
    reason = ' (%s)' % service.disabled_reason if service.disabled_reason \
        else ''
    return 'disabled' + reason


def service(server, dest, state, rules):
    if not dest.service.usable:
        return 'compute service is %s' % _service_word(dest.service)


def inventory(server, dest, state, rules):
    if dest.inconsistency:
        return 'its inventory contradicts its allocations: %s' % \
            dest.inconsistency


def availability_zone(server, dest, state, rules):
    """Nova's availability zone prefilter: a server pinned to a zone goes
    only to members of the aggregates that define that zone. None define
    the default zone: a server pinned to it may go anywhere. A snapshot
    without the aggregates' zones is judged on the hypervisors' zones."""
    pinned = server.pinned_availability_zone
    if not pinned:
        return None
    if rules.zones:
        if pinned not in rules.zones or any(
                agg.metadata.get(ZONE_KEY) == pinned
                for agg in dest.aggregates):
            return None
    elif dest.availability_zone == pinned:
        return None
    return 'server is pinned to availability zone %s, hypervisor is in ' \
        '%s' % (pinned, dest.availability_zone or 'none')


def same_zone(server, dest, state, rules):
    """The leveller's own rule: a server stays in the zone it is in, even
    when Nova would move it (it is not pinned to one): its users chose
    the zone, or placed their other servers for it."""
    source = rules.snapshot.hypervisor(state.host_of(server.id))
    if dest.availability_zone != source.availability_zone:
        return 'availability zone %s differs from the server\'s %s (the ' \
            'leveller keeps a server in its zone; Nova would move this ' \
            'one, not pinned to a zone)' % (
                dest.availability_zone or 'none',
                source.availability_zone or 'none')


def cpu_compatible(server, dest, state, rules):
    source = rules.snapshot.hypervisor(state.host_of(server.id))
    if source.cpu_arch and dest.cpu_arch and source.cpu_arch != dest.cpu_arch:
        return 'CPU architecture %s differs from %s' % (dest.cpu_arch,
                                                        source.cpu_arch)
    if rules.options.cpu_compatibility == config.CPU_FEATURES:
        missing = source.cpu_features - dest.cpu_features
        if missing:
            shown = sorted(missing)
            more = ' and %d more' % (len(shown) - 5) if len(shown) > 5 else ''
            return 'lacks CPU features of %s: %s%s' % (
                source.name, ', '.join(shown[:5]), more)
    elif dest.cpu_model != source.cpu_model:
        return 'CPU model %s differs from the server\'s %s' % (
            dest.cpu_model or 'unknown', source.cpu_model or 'unknown')


def hypervisor_version(server, dest, state, rules):
    """As Nova's conductor (_check_compatible_with_source_hypervisor):
    the same hypervisor type, and a version no older than the source's."""
    source = rules.snapshot.hypervisor(state.host_of(server.id))
    if source.hypervisor_type and dest.hypervisor_type and \
            source.hypervisor_type != dest.hypervisor_type:
        return 'hypervisor type %s differs from %s\'s %s' % (
            dest.hypervisor_type, source.name, source.hypervisor_type)
    if source.hypervisor_version is not None and \
            dest.hypervisor_version is not None and \
            dest.hypervisor_version < source.hypervisor_version:
        return 'hypervisor version %s is older than %s\'s %s' % (
            images.version_text(dest.hypervisor_version), source.name,
            images.version_text(source.hypervisor_version))


def metadata_values(dest, key):
    """Every value of key in dest's aggregates, as Nova's scheduler reads
    them (aggregate_metadata_get_by_host): each split at commas."""
    return {value.strip() for agg in dest.aggregates if key in agg.metadata
            for value in agg.metadata[key].split(',')}


def _aggregate_specs(extra_specs):
    """Flavor extra specs AggregateInstanceExtraSpecsFilter matches."""
    for key, value in extra_specs.items():
        scope, sep, name = key.partition(':')
        if not sep:
            yield key, value
        elif scope == AGGREGATE_SCOPE:
            yield name, value


def aggregate_extra_specs(server, dest, state, rules):
    for key, wanted in _aggregate_specs(server.flavor.extra_specs):
        offered = sorted(metadata_values(dest, key))
        if not any(extra_specs.matches(value, wanted) for value in offered):
            return 'flavor wants aggregate metadata %s=%s, hypervisor ' \
                'offers %s' % (key, wanted, ', '.join(offered) or 'none')


def tenant_isolation(server, dest, state, rules):
    """AggregateMultiTenancyIsolation: the projects every filter_tenant_id*
    key of every aggregate of the host names, together."""
    allowed, names = set(), []
    for agg in dest.aggregates:
        keys = [k for k in agg.metadata if k.startswith(TENANT_KEY)]
        if keys:
            names.append(agg.name)
            allowed.update(v.strip() for k in keys
                           for v in agg.metadata[k].split(','))
    if allowed and server.project_id not in allowed:
        return 'aggregate%s %s %s reserved for other projects' % (
            's' if len(names) > 1 else '', ', '.join(sorted(names)),
            'are' if len(names) > 1 else 'is')


def tenant_aggregate(server, dest, state, rules):
    """Nova's limit_tenants_to_placement_aggregate: a project that an
    aggregate's filter_tenant_id* key names (alone) lands only in such
    aggregates. The leveller assumes it is on, as operators isolating
    projects turn it on."""
    confined = rules.tenant_aggregates.get(server.project_id)
    if confined and not confined & {agg.name for agg in dest.aggregates}:
        return 'project %s is confined to aggregate%s %s ' \
            '(limit_tenants_to_placement_aggregate)' % (
                server.project_id, 's' if len(confined) > 1 else '',
                ', '.join(sorted(confined)))


def isolated_aggregate(server, dest, state, rules):
    """Nova's enable_isolated_aggregate_filtering: a host in an aggregate
    with trait:NAME=required metadata takes only servers whose flavor
    requires NAME. The leveller assumes it is on."""
    required = {trait for trait, how in extra_specs.traits(
        server.flavor.extra_specs) if how == extra_specs.REQUIRED}
    for agg in sorted(dest.aggregates, key=lambda a: a.name):
        for key, value in sorted(agg.metadata.items()):
            if key.startswith('trait:') and value == 'required' and \
                    key[len('trait:'):] not in required:
                return 'aggregate %s takes only servers whose flavor ' \
                    'requires %s (enable_isolated_aggregate_filtering)' % (
                        agg.name, key[len('trait:'):])


def required_traits(server, dest, state, rules):
    """Flavor trait specs against the traits of the hypervisor's root
    resource provider.

    Placement matches a request group's traits over the providers that
    serve its resources (placement/objects/allocation_candidate.py,
    _check_traits_for_alloc_request): together they must have every
    required trait, and none of them a forbidden one; a child serving none
    of them does not count. A server that may move holds nothing on a
    child provider (that is a blocker) and the planner places its
    resources on the root, so the root's traits decide. (Placement might
    serve a group from a child with the trait: a move the planner does not
    make, never one Nova refuses.) Unknown traits (not read) refuse a
    flavor with trait specs; they never pass as none. The traits the
    server's image requires join the flavor's (core/rules/images.py).
    """
    wanted = extra_specs.traits(server.flavor.extra_specs)
    by_image = images.image_traits(server.image, server.boot_from_volume,
                                   rules.options)
    if not wanted and not by_image:
        return None
    flavor = server.flavor.name or ''
    if dest.traits is None:
        trait, how = wanted[0] if wanted else (by_image[0][0], 'required')
        return 'traits of resource provider %s are unknown (not read from ' \
            'Placement): cannot check trait %s %s by %s' % (
                dest.name, trait, how, 'flavor %s' % flavor if wanted
                else by_image[0][1])
    for trait, how in wanted:
        if how == extra_specs.REQUIRED and trait not in dest.traits:
            return 'resource provider %s lacks trait %s required by ' \
                'flavor %s' % (dest.name, trait, flavor)
        if how == extra_specs.FORBIDDEN and trait in dest.traits:
            return 'resource provider %s has trait %s forbidden by ' \
                'flavor %s' % (dest.name, trait, flavor)
    for trait, why in by_image:
        if trait not in dest.traits:
            return 'resource provider %s lacks trait %s required by %s' % (
                dest.name, trait, why)
    return None


SOFT = 'soft-'


def _group_refusal(server, dest, state, rules, group):
    others = [m for m in rules.group_members[group.id] if m != server.id]
    here = [m for m in others if state.host_of(m) == dest.name]
    label = group.name or group.id
    if group.policy.endswith('anti-affinity'):
        # Nova defines max_server_per_host for hard anti-affinity only.
        limit = (group.max_server_per_host or 1) \
            if group.policy == 'anti-affinity' else 1
        if len(here) >= limit:
            names = ', '.join(sorted(
                rules.snapshot.server(m).label for m in here))
            return '%s group %s: %s already hosts %s' % (
                group.policy, label, dest.name, names)
    elif not others and not group.policy.startswith(SOFT):
        # Nova's group hosts are those of every member, this one too
        # (ServerGroupAffinityFilter, scheduler utils _get_group_details).
        return 'affinity group %s: Nova keeps its only member on the ' \
            'host it is on' % label
    elif others and not here:
        return '%s group %s: moving it alone would split it from %s' % (
            group.policy, label, rules.snapshot.server(others[0]).label)


def server_groups(server, dest, state, rules):
    """ServerGroupAntiAffinityFilter and ServerGroupAffinityFilter."""
    for group in rules.groups_of.get(server.id, ()):
        if not group.policy.startswith(SOFT):
            reason = _group_refusal(server, dest, state, rules, group)
            if reason:
                return reason


def lingering_members(server, dest, state, rules):
    """The leveller's own rule, for what the API cannot show: Nova's
    scheduler counts a member of a strict anti-affinity group on a host it
    left or was tried on until that host's compute syncs (_lingering),
    which may be at once or a whole interval later. The API does not show
    when it syncs, so the leveller waits the whole interval."""
    for group in rules.groups_of.get(server.id, ()):
        if group.policy != 'anti-affinity':
            continue  # only the strict filter reads the scheduler's list
        others = [m for m in rules.group_members[group.id] if m != server.id]
        # Those a plan moves off dest are not counted: apply re-checks
        # each move, with its group's migrations read again.
        ghosts = [m for m in others if state.host_of(m) != dest.name and
                  dest.name in rules.lingering.get(m, ())]
        if not ghosts:
            continue
        here = sum(state.host_of(m) == dest.name for m in others)
        if here + len(ghosts) >= (group.max_server_per_host or 1):
            return 'anti-affinity group %s: Nova\'s scheduler may still ' \
                'count %s on %s (moved or tried there less than %d s ago: ' \
                'it forgets once the compute syncs, ' \
                'scheduler_instance_sync_interval, and the API does not ' \
                'show when that is): the leveller waits that long' % (
                    group.name or group.id,
                    ', '.join(sorted(rules.snapshot.server(m).label
                                     for m in ghosts)),
                    dest.name, rules.options.instance_sync_interval)


def unrecorded_attempts(server, dest, state, rules):
    """The leveller's own rule, for what the API cannot show: a member of
    the server's strict anti-affinity group whose move failed a moment ago
    may be counted by Nova's scheduler on whichever host it picked, which
    Nova does not record. The leveller waits until the scheduler forgets."""
    for group in rules.groups_of.get(server.id, ()):
        if group.policy == 'anti-affinity':
            tried = sorted(rules.snapshot.server(m).label
                           for m in rules.group_members[group.id]
                           if m != server.id and m in rules.anywhere)
            if tried:
                return 'anti-affinity group %s: a move of %s failed less ' \
                    'than %d s ago, and Nova does not say which host its ' \
                    'scheduler picked, where it counts %s until the compute ' \
                    'syncs (scheduler_instance_sync_interval): the leveller ' \
                    'waits that long' % (
                        group.name or group.id, ', '.join(tried),
                        rules.options.instance_sync_interval,
                        'it' if len(tried) == 1 else 'them')


def soft_server_groups(server, dest, state, rules):
    """The leveller's own rule: it keeps the soft policies as if they
    were hard, though Nova only weighs them."""
    for group in rules.groups_of.get(server.id, ()):
        if group.policy.startswith(SOFT):
            reason = _group_refusal(server, dest, state, rules, group)
            if reason:
                return '%s (a soft policy: Nova would allow it, the ' \
                    'leveller keeps it)' % reason


def capacity(server, dest, state, rules):
    for rc, amount in sorted(server.resources.items()):
        inv = dest.inventories.get(rc)
        if inv is None:
            return 'has no %s inventory' % rc
        if inv.max_unit is not None and amount > inv.max_unit:
            return 'needs %d %s, above max_unit %d' % (amount, rc, inv.max_unit)
        if amount < inv.min_unit:
            return 'needs %d %s, below min_unit %d' % (amount, rc, inv.min_unit)
        if inv.step_size > 1 and amount % inv.step_size:
            return 'needs %d %s, not a multiple of step_size %d' % (
                amount, rc, inv.step_size)
        used = state.usage(dest.name, rc)
        if used + amount > inv.capacity:
            return Refusal('%s full: %d used + %d needed > %g capacity '
                           '((%d total - %d reserved) x %g)' % (
                               rc, used, amount, inv.capacity, inv.total,
                               inv.reserved, inv.allocation_ratio),
                           resource=rc)


def saturation(server, dest, state, rules):
    """No move makes a measured hypervisor's servers ask for more CPU
    than it has threads: they would queue for it (steal)."""
    added = state.load_model.amounts(server.id, dest.name)[0]
    demand = saturated(state, dest.name, added)
    if demand is not None:
        return 'CPU would be saturated: its servers would ask for %.1f ' \
            'of its %d threads (%.1f before this server)' % (
                demand, state.load_model.hosts[dest.name].cpu_size,
                state.cpu_load(dest.name))


def saturated(state, name, added=0.0):
    """The threads the hypervisor's servers would ask for with added ones,
    if more than it has, else None. Only measured load tells."""
    host = state.load_model.hosts[name]
    if host.mode != scoring.METRICS:
        return None
    demand = state.cpu_load(name) + added
    return demand if demand > host.cpu_size * (1 + 1e-9) else None


def migration_time(server, dest, state, rules):
    """The leveller's own rule: no live migration that Nova's history
    predicts to outlast apply.timeout, after which apply would abort it
    (core/load/duration.py)."""
    estimate = rules.durations.to(server, dest.host)
    limit = rules.options.move_timeout
    if estimate is not None and estimate.seconds >= limit:
        return 'a live migration would take %s, more than apply.timeout ' \
            '(%g s): %s' % (estimate.text(), limit, estimate.basis)


def ceiling(server, dest, state, rules):
    after = state.score(dest.name) + state.load_model.delta(server.id,
                                                            dest.name)
    if after > rules.options.ceiling:
        return 'score would rise to %.2f, above the ceiling %.2f' % (
            after, rules.options.ceiling)


def why_not_destination(server, dest, state, rules):
    return first_reason(DESTINATION_FILTERS, server, dest, state, rules)


# --- balancing only ----------------------------------------------------------

def returning(server, dest, state, rules):
    """No going back to a hypervisor the server left within the return
    window: that undoes a move that was worth making. Unless no other
    hypervisor fits it now (as the other filters say)."""
    hours = rules.options.return_window_hours
    when = rules.left(server.id, dest.host) if hours else None
    if when is None or rules.now - when >= hours * HOUR:
        return None
    if not any(why_not_destination(server, other, state, rules) is None
               for other in rules.snapshot.hypervisors
               if other.name != dest.name):
        return None
    return 'it left %s %.1f h ago, inside the %g h return window (other ' \
        'hypervisors fit it)' % (dest.host, max(0.0, rules.now - when) /
                                 HOUR, hours)


# --- every rule, declared once ---------------------------------------------

def _server(code, check, own=False):
    return Rule(code, check, own=own)


def _to(code, check, **properties):
    return Rule(code, check, destination=True, **properties)


# Every rule; the destination rules in the order they are checked, the
# first that refuses giving the reason. Adding a rule: write its check
# above, and declare it here (doc/source/contributor/index.rst, "Adding a
# rule").
RULES = (
    # May this server move at all? The policies (core/rules/policy.py) pick
    # these, each in its own order.
    _server('status', status),
    _server('task_state', task_state),
    _server('locked', locked, own=True),
    _server('migration_in_flight', migration_in_flight),
    _server('blockers', blockers),
    _server('numa', numa, own=True),
    _server('capabilities', capabilities, own=True),
    _server('opted_out', opted_out),
    _server('project', project),
    _server('cooldown', cooldown),
    _server('source_in_scope', source_in_scope),
    _server('source_usable', source_usable, own=True),
    _server('stopped_stay', stopped_stay),
    _server('migratable', migratable),
    _server('live_blockers', live_blockers),
    # May it move to this hypervisor, in this state?
    _to('not_source', not_source),
    _to('excluded_host', excluded_host, static=True, boot=True),
    _to('service', service, static=True, rebuild=True, boot=True),
    _to('inventory', inventory, static=True, rebuild=True, boot=True),
    _to('availability_zone', availability_zone, static=True, rebuild=True,
        boot=True),
    _to('same_zone', same_zone, own=True, static=True),
    _to('cpu_compatible', cpu_compatible, static=True, rebuild=True),
    # The conductor's check of a live migration; a rebuild does not ask.
    _to('hypervisor_version', hypervisor_version, static=True),
    _to('aggregate_extra_specs', aggregate_extra_specs, static=True,
        rebuild=True, boot=True),
    _to('tenant_isolation', tenant_isolation, static=True, rebuild=True,
        boot=True),
    _to('tenant_aggregate', tenant_aggregate, static=True, rebuild=True,
        boot=True),
    _to('isolated_aggregate', isolated_aggregate, static=True,
        rebuild=True, boot=True),
    _to('required_traits', required_traits, static=True, rebuild=True,
        boot=True),
    _to('image_properties', images.image_properties, static=True,
        rebuild=True),
    _to('as_capable_image', images.as_capable_image, own=True, static=True,
        rebuild=True),
    # N+1 packing checks the server groups as a rebuild sees them
    # (core/rules/headroom.py).
    _to('server_groups', server_groups),
    _to('lingering_members', lingering_members, own=True),
    _to('unrecorded_attempts', unrecorded_attempts, own=True),
    _to('soft_server_groups', soft_server_groups, own=True),
    _to('migration_time', migration_time, own=True),
    _to('capacity', capacity, rebuild=True),
    # An operator's target placement is theirs to make: only the ceiling,
    # which they can raise, bounds the load it brings.
    _to('saturation', saturation, target=False),
    _to('ceiling', ceiling),
    _to('returning', returning, balancing=True),
)
_BY_CODE = {rule.code: rule for rule in RULES}


def rules_named(*codes):
    """The declared Rules of these codes, in this order."""
    return tuple(_BY_CODE[code] for code in codes)


# What stops a live migration of a running server, or what the leveller
# cannot check for one.
LIVE_ONLY = rules_named('blockers', 'numa', 'capabilities')
# Every destination rule but balancing's own, in order.
DESTINATION_FILTERS = tuple(r for r in RULES
                            if r.destination and not r.balancing)
# Balancing's own destination rules, checked after those (and N+1's,
# core/rules/n_plus_one.py).
BALANCING = tuple(r for r in RULES if r.destination and r.balancing)
TARGET_FILTERS = tuple(r for r in DESTINATION_FILTERS if r.target)
BOOT_FILTERS = tuple(r for r in DESTINATION_FILTERS if r.boot)
# Rules that refuse what Nova would accept, on purpose: rules of the
# leveller's own, and what the API cannot show (the leveller never guesses
# yes). Each one's reason says so. The conformance benchmark
# (benchmarks/conformance.py) counts the moves they cost apart.
CHOICES = frozenset(r.code for r in RULES if r.own)
