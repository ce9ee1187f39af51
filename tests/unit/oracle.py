"""Independent judges of snapshot documents, plan documents and plans.

Written from the stated rules (the JSON Schemas, Nova's constraints, the
score's definition), on the raw JSON documents, importing nothing from
osc_leveller but its schema files: a test that compares the product with
these judges catches a mistake the product's own filters and scores would
repeat when checking themselves.

Scope: snapshot format 1 only (not Watcher cluster files). The imbalance
figures are recomputed for hosts scored from Placement allocations; a
domain with a host carrying measured metrics, a PCPU inventory or no CPU or
RAM capacity is left out of the comparison (see Replay.unchecked), its moves
are still checked move by move.
"""

import datetime
import json
import math
import pathlib

import jsonschema

import osc_leveller

DATA = pathlib.Path(osc_leveller.__file__).parent / 'data'
LIMIT = 2 ** 53
TOLERANCE = 1e-9


def _schema(name):
    text = (DATA / (name + '.schema.json')).read_text(encoding='utf-8')
    return jsonschema.Draft202012Validator(json.loads(text))


SNAPSHOT_SCHEMA = _schema('snapshot-v1')
PLAN_SCHEMA = _schema('plan-v1')


# --- documents ---------------------------------------------------------------

def json_problem(value, where='document'):
    """The stricter-than-JSON-Schema rules: finite numbers of magnitude at
    most 2**53, strings (keys too) that encode as UTF-8."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and (value != value or
                                         value in (math.inf, -math.inf)):
            return '%s: not a finite number' % where
        if abs(value) > LIMIT:
            return '%s: magnitude above 2**53' % where
        return None
    if isinstance(value, str):
        try:
            value.encode('utf-8')
        except UnicodeEncodeError:
            return '%s: not valid Unicode' % where
        return None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return '%s: not JSON (%s)' % (where, type(value).__name__)
    for key, item in items:
        inner = '%s/%s' % (where, key)
        if isinstance(key, str):
            problem = json_problem(key, inner + ' (key)')
            if problem:
                return problem
        problem = json_problem(item, inner)
        if problem:
            return problem
    return None


def schema_problem(validator, document):
    error = next(iter(validator.iter_errors(document)), None)
    if error is None:
        return None
    return 'schema: %s at %s' % (error.message[:80],
                                 '/'.join(map(str, error.absolute_path)))


def _time_problem(text, where):
    """ISO 8601, naive meaning UTC, and in UTC within years 1 to 9999 (so
    that it can be written back)."""
    if text.endswith('z'):  # RFC 3339 allows it; fromisoformat does not
        text = text[:-1] + 'Z'
    try:
        moment = datetime.datetime.fromisoformat(text)  # 3.11 reads 'Z'
    except ValueError:
        return '%s: %r is not an ISO 8601 time' % (where, text)
    try:
        moment.replace(tzinfo=moment.tzinfo or datetime.timezone.utc) \
            .astimezone(datetime.timezone.utc)
    except OverflowError:
        return '%s: %r is outside years 1 to 9999 in UTC' % (where, text)
    return None


def snapshot_problem(document):
    """None when the document is a valid snapshot (format 1), else why."""
    problem = schema_problem(SNAPSHOT_SCHEMA, document) or \
        json_problem(document)
    if problem:
        return problem
    names = [h['name'] for h in document['hypervisors']]
    if len(set(names)) != len(names):
        return 'duplicate hypervisor name'
    ids = [s['id'] for s in document['servers']]
    if len(set(ids)) != len(ids):
        return 'duplicate server id'
    for server in document['servers']:
        if server['hypervisor'] not in names:
            return 'server %s on an unknown hypervisor' % server['id']
    for hyp in document['hypervisors']:
        for rc, inv in hyp['inventories'].items():
            if inv.get('reserved', 0) > inv['total']:
                return '%s %s: reserved above total' % (hyp['name'], rc)
    times = [('taken_at', document['taken_at'])]
    for mig in document.get('migrations', ()):
        times += [(key, mig[key]) for key in ('created_at', 'updated_at')
                  if mig.get(key) is not None]
    for where, text in times:
        problem = _time_problem(text, where)
        if problem:
            return problem
    return None


def plan_problem(document):
    """None when the document is a valid plan file, else why."""
    problem = schema_problem(PLAN_SCHEMA, document) or json_problem(document)
    if problem:
        return problem
    for where, text in (('created_at', document['created_at']),
                        ('snapshot.taken_at',
                         document['snapshot']['taken_at'])):
        problem = _time_problem(text, where)
        if problem:
            return problem
    kind = document.get('kind', 'balance')
    if kind not in PLAN_KINDS:
        return 'kind %r' % kind
    return chain_problem(document['moves'], kind) or \
        exchange_problem(document['moves'], kind)


# What plan files may carry, as the user guide's plan format states it on
# 2026-12-07: whether a server may move again (parking on the way) and
# whether two may trade places.
PLAN_KINDS = {'balance': (False, True), 'placement': (True, False),
              'make-room': (False, False), 'free-hosts': (False, False),
              'spread': (False, False)}


def chain_problem(moves, kind):
    """A server moves on from where its previous move left it, in a later
    wave; a balancing plan moves it once, or again only within the same
    (labelled) exchange."""
    previous = {}
    for index, move in enumerate(moves):
        last = previous.get(move['server_id'])
        previous[move['server_id']] = move
        if last is None:
            continue
        label = move.get('exchange', '')
        if not PLAN_KINDS[kind][0] and not (
                label and label == last.get('exchange', '')):
            return 'moves[%d]: server moved twice' % index
        if last['destination'] != move['source']:
            return 'moves[%d]: does not start where the last move ended' % \
                index
        if move['wave'] <= last['wave']:
            return 'moves[%d]: wave not after the last move' % index
    return None


def exchange_problem(moves, kind):
    """Exchange labels (as core/planning/plan.py states them on 2026-11-23): only in
    balancing plans; one label, two servers that trade places between two
    hypervisors, in two or three moves."""
    labelled = {}
    for move in moves:
        if move.get('exchange'):
            if not PLAN_KINDS[kind][1]:
                return 'an exchange in a %s plan' % kind
            labelled.setdefault(move['exchange'], []).append(move)
    for label, group in labelled.items():
        start, end = {}, {}
        for move in group:
            start.setdefault(move['server_id'], move['source'])
            end[move['server_id']] = move['destination']
        if len(start) != 2 or len(group) > 3:
            return '%s: not two servers in two or three moves' % label
        a, b = start
        if start[a] == start[b] or end[a] != start[b] or end[b] != start[a]:
            return '%s: the two servers do not trade places' % label
    return None


# --- plans replayed on the document ------------------------------------------

class Unsupported(Exception):
    """Outside what this oracle models (see the module docstring)."""


def flavor_resources(server):
    """What Nova's scheduler allocates for the server's flavor (no PCI)."""
    flavor = server['flavor']
    specs = flavor.get('extra_specs') or {}
    cpu = 'PCPU' if specs.get('hw:cpu_policy') == 'dedicated' else 'VCPU'
    disk = 0 if server.get('boot_from_volume') else flavor.get('disk', 0)
    wanted = {cpu: flavor['vcpus'], 'MEMORY_MB': flavor['ram'],
              'DISK_GB': disk + flavor.get('ephemeral', 0)
              + math.ceil(flavor.get('swap', 0) / 1024)}
    for key, value in specs.items():
        if key.startswith('resources:') and value.isdigit():
            wanted[key.split(':', 1)[1]] = int(value)
        elif key.startswith('resources') and ':' in key:
            raise Unsupported('granular resource request %s' % key)
    return {rc: n for rc, n in wanted.items() if n > 0}


class Cloud:
    """The raw document with a mutable placement, moves applied one by one."""

    def __init__(self, document, cpu_compatibility, weights):
        self.cpu_compatibility = cpu_compatibility
        self.weights = weights
        self.hyps = {h['name']: h for h in document['hypervisors']}
        self.servers = {s['id']: s for s in document['servers']}
        self.where = {s['id']: s['hypervisor'] for s in document['servers']}
        self.resources = {}
        for sid, server in self.servers.items():
            given = server.get('resources')
            self.resources[sid] = dict(
                given if given is not None else flavor_resources(server))
        self.used = {}
        for name, hyp in self.hyps.items():
            if 'usages' in hyp:
                self.used[name] = dict(hyp['usages'])
                continue
            total = {}
            for sid, host in self.where.items():
                if host == name:
                    for rc, n in self.resources[sid].items():
                        total[rc] = total.get(rc, 0) + n
            self.used[name] = total
        self.initial_use = {name: dict(u) for name, u in self.used.items()}
        self.groups = {}  # group id -> (policy, limit, member ids)
        for group in document.get('server_groups', ()):
            limit = (group.get('rules') or {}).get('max_server_per_host')
            self.groups[group['id']] = (group['policy'], limit or 1,
                                        set(group['members']))
        for sid, server in self.servers.items():
            for gid in server.get('server_groups', ()):
                if gid in self.groups:
                    self.groups[gid][2].add(sid)

    # The hypervisor facts, with the format's defaults.
    def az(self, name):
        return self.hyps[name].get('availability_zone') or ''

    def cpu(self, name):
        cpu = self.hyps[name].get('cpu') or {}
        return (cpu.get('arch') or '', cpu.get('model') or '',
                set(cpu.get('features') or ()))

    def usable(self, name):
        """Its service takes servers and Placement's figures for it make
        sense: nothing is allocated of a class it has no capacity of (the
        product leaves such a host out of balancing)."""
        svc = self.hyps[name].get('service') or {}
        return (svc.get('status', 'enabled') == 'enabled'
                and svc.get('state', 'up') == 'up'
                and not svc.get('forced_down', False)
                and all(self.capacity(name, rc) > 0
                        for rc, n in self.initial_use[name].items() if n > 0))

    def capacity(self, name, rc):
        inv = self.hyps[name]['inventories'].get(rc)
        if inv is None:
            return 0
        return (inv['total'] - inv.get('reserved', 0)) * \
            inv.get('allocation_ratio', 1.0)

    def domain(self, name):
        arch, model, _ = self.cpu(name)
        cpu = (model if self.cpu_compatibility == 'model' else '') or arch \
            or 'any-cpu'
        return '%s/%s' % (self.az(name) or 'no-az', cpu)

    def score(self, name):
        """Allocation score; Unsupported for a host this oracle does not
        score."""
        hyp = self.hyps[name]
        metrics = hyp.get('metrics') or {}
        if any(v is not None for v in metrics.values()):
            raise Unsupported('%s is scored from metrics' % name)
        if 'PCPU' in hyp['inventories']:
            raise Unsupported('%s has PCPU' % name)
        cpu_cap = self.capacity(name, 'VCPU')
        ram_cap = self.capacity(name, 'MEMORY_MB')
        if not cpu_cap or not ram_cap:
            raise Unsupported('%s has no CPU or RAM capacity' % name)
        used = self.used[name]
        w_cpu, w_ram = self.weights
        return (w_cpu * used.get('VCPU', 0) / cpu_cap
                + w_ram * used.get('MEMORY_MB', 0) / ram_cap) / (w_cpu + w_ram)

    def refusal(self, sid, src, dst, include_locked=False):
        """Why Nova (or the leveller's rules) would refuse the move, or
        None."""
        server = self.servers.get(sid)
        if server is None:
            return 'no server %s' % sid
        if self.where[sid] != src:
            return 'server is on %s, not on the source %s' % (
                self.where[sid], src)
        if dst not in self.hyps or dst == src:
            return 'bad destination %s' % dst
        if server.get('status', 'ACTIVE') not in ('ACTIVE', 'PAUSED'):
            return 'status %s' % server.get('status')
        if server.get('task_state'):
            return 'task_state %s' % server['task_state']
        if server.get('locked') and not include_locked:
            return 'locked'
        if not self.usable(dst):
            return 'destination service not enabled and up, or Placement ' \
                'contradicts itself there'
        pinned = server.get('pinned_availability_zone')
        if self.az(dst) != self.az(src) or (pinned and self.az(dst) != pinned):
            return 'availability zone'
        (s_arch, s_model, s_feats), (d_arch, d_model, d_feats) = \
            self.cpu(src), self.cpu(dst)
        if s_arch and d_arch and s_arch != d_arch:
            return 'CPU architecture'
        if self.cpu_compatibility == 'model' and s_model != d_model:
            return 'CPU model %s -> %s' % (s_model, d_model)
        if self.cpu_compatibility != 'model' and not s_feats <= d_feats:
            return 'CPU features missing'
        for rc, amount in self.resources[sid].items():
            used = self.used[dst].get(rc, 0)
            if used + amount > self.capacity(dst, rc):
                return '%s over capacity on %s' % (rc, dst)
        for gid, (policy, limit, members) in self.groups.items():
            if sid not in members:
                continue
            others = [m for m in members if m != sid and m in self.where]
            there = sum(1 for m in others if self.where[m] == dst)
            if policy == 'anti-affinity' and there + 1 > limit:
                return 'anti-affinity group %s' % gid
            if policy == 'affinity' and others and not there:
                return 'affinity group %s' % gid
        return None

    def move(self, sid, dst):
        src = self.where[sid]
        for rc, amount in self.resources[sid].items():
            self.used[src][rc] = self.used[src].get(rc, 0) - amount
            self.used[dst][rc] = self.used[dst].get(rc, 0) + amount
        self.where[sid] = dst

    def domains(self):
        """{domain: [usable hosts]}: what the balancing evens out."""
        result = {}
        for name in self.hyps:
            if self.usable(name):
                result.setdefault(self.domain(name), []).append(name)
        return result

    def std(self, hosts):
        scores = [self.score(h) for h in hosts]
        mean = sum(scores) / len(scores)
        return math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))


class Replay:
    def __init__(self, placement, checked, unchecked):
        self.placement = placement  # server id -> hypervisor at the end
        self.checked = checked  # domains whose figures were compared
        self.unchecked = unchecked  # domain -> why its figures were not


def _close(a, b):
    return abs(a - b) <= TOLERANCE


def _close_std(a, b):
    """Standard deviations: the planner's come from running sums of squares,
    whose rounding (about 1e-17) a square root turns into some 1e-9 near
    zero, so there the variances are compared."""
    return _close(a, b) or abs(a * a - b * b) <= 1e-12


def replay(document, plan, cpu_compatibility='model', weights=(1.0, 1.0),
           include_locked=False):
    """Apply the plan's moves to the document one at a time; AssertionError
    on the first move Nova would refuse or figure that does not add up."""
    cloud = Cloud(document, cpu_compatibility, weights)
    domains = cloud.domains()
    unchecked = {}
    before = {}
    for name, hosts in domains.items():
        try:
            before[name] = cloud.std(hosts)
        except Unsupported as exc:
            unchecked[name] = str(exc)
    reported = {d['domain']: d for d in plan.domains}
    assert set(reported) == set(domains), (sorted(reported), sorted(domains))
    for index, move in enumerate(plan.moves):
        sid, src, dst = move.server_id, move.source, move.destination
        why = cloud.refusal(sid, src, dst, include_locked)
        assert why is None, 'moves[%d] %s %s -> %s: %s' % (
            index, sid, src, dst, why)
        assert move.domain == cloud.domain(src) == cloud.domain(dst), move
        hosts = domains[move.domain]
        figures = move.domain not in unchecked
        if figures:
            was = (cloud.std(hosts), cloud.score(src), cloud.score(dst))
        cloud.move(sid, dst)
        if figures:
            now = (cloud.std(hosts), cloud.score(src), cloud.score(dst))
            for name, said, (old, new), close in (
                    ('imbalance', move.imbalance, (was[0], now[0]),
                     _close_std),
                    ('source_score', move.source_score, (was[1], now[1]),
                     _close),
                    ('destination_score', move.destination_score,
                     (was[2], now[2]), _close)):
                assert close(said[0], old) and close(said[1], new), (
                    'moves[%d].%s: plan says %r, replay %r' % (
                        index, name, said, (old, new)))
    checked = []
    for name, hosts in sorted(domains.items()):
        figure = reported[name]
        assert figure['hosts'] == len(hosts), (name, figure, hosts)
        assert figure['moves'] == sum(
            1 for m in plan.moves if m.domain == name), figure
        if name in unchecked:
            continue
        after = cloud.std(hosts)
        assert _close_std(figure['before'], before[name]) and _close_std(
            figure['after'], after), (
            'domain %s: plan says %s -> %s, replay %r -> %r' % (
                name, figure['before'], figure['after'], before[name],
                after))
        checked.append(name)
    if not unchecked:
        # The cloud's figure: each host's deviation from its domain mean.
        for said, state in ((plan.imbalance_before, 'before'),
                            (plan.imbalance_after, 'after')):
            figure = _pooled(Cloud(document, cpu_compatibility, weights)
                             if state == 'before' else cloud, domains)
            assert _close_std(said, figure), (state, said, figure)
    return Replay(dict(cloud.where), checked, unchecked)


def _pooled(cloud, domains):
    squares, count = 0.0, 0
    for hosts in domains.values():
        scores = [cloud.score(h) for h in hosts]
        mean = sum(scores) / len(scores)
        squares += sum((s - mean) ** 2 for s in scores)
        count += len(scores)
    return math.sqrt(squares / count) if count else 0.0


def replay_with(document, plan, options):
    """replay() with a PlannerOptions' fields; scope options unsupported."""
    if options.projects or options.exclude_projects or \
            options.exclude_hosts or options.availability_zones:
        raise Unsupported('scope options')
    return replay(document, plan, options.cpu_compatibility,
                  (options.weights['cpu'], options.weights['ram']),
                  options.include_locked)
