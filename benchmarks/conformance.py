"""Does the planner agree with Nova? (server, destination) pairs asked of both.

On the devcloud (tools/devcloud, running; OS_CLIENT_CONFIG_FILE and
OS_CLOUD as `devcloud env` prints them), for each seed:

1. `devcloud rules SEED SERVERS` builds a cloud rich in Nova's rules
   (tools/devcloud/rules.py): traits, aggregates with metadata, projects
   isolated or confined to aggregates, flavors with traits, aggregate extra
   specs, dedicated CPUs and a custom resource class, server groups of the
   four policies, near-full, disabled and forced-down hypervisors, locked,
   paused and stopped servers, Nova's scheduler configured as operators
   run it (doc/source/contributor/devcloud.rst);
2. a sampler (seeded) draws (server, destination) pairs, each aimed at one
   rule (TARGETS): a server the rule is about, a destination every other
   check of the planner lets it go to, in turn one the rule refuses and
   one it lets pass;
3. the planner's verdict on the pair: what ``plan --explain SERVER`` says
   of that hypervisor (core/planning/planner.py Planner.explain), on the cloud as
   the leveller's collector reads it, with the options that leave Nova's
   rules alone to decide (CONFORMANCE below: no ceiling, cooldown or
   return window; locked servers included; CPU compatibility by features,
   the rule the devcloud's hypervisors enforce);
4. Nova's verdict: a live migration to that host, never forced (API 2.30:
   the scheduler checks the host; Nova answers synchronously), then the
   migration record and the server: accepted and landed on the host, or
   refused with Nova's fault (the HTTP error, the instance action's failed
   event, the scheduler's log line naming the filter). An accepted move
   stays: the next pair starts from the new placement, read again.

Each pair is attributed to a rule: the planner's refusing check when it
refuses, else the rule the sampler aimed at. Per rule: pairs tried, agreed,
dangerous (the planner accepts, Nova refuses), lost (the planner refuses,
Nova accepts) and, of the lost, those refused by a documented deliberate
choice of the leveller (core/rules/filters.py CHOICES: a rule of its own, or
what the API cannot show); every disagreement with its server,
destination, both reasons and the seed, to reproduce it.

    eval "$(tools/devcloud/devcloud env)"
    python -u benchmarks/conformance.py --seed 1 --seed 2 --seed 3 --seed 4 \\
        --seed 6 --seed 7 --pairs 175 --json benchmarks/results/conformance.json
    python benchmarks/conformance.py --render benchmarks/results/conformance.json
"""

import argparse
import collections
import dataclasses
import datetime
import json
import os
import platform
import random
import re
import subprocess
import sys
import time

import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'tools'))

import openstack  # noqa: E402

from devcloud import devcloud_retry  # noqa: E402
from osc_leveller.cloud import collect  # noqa: E402
from osc_leveller.core.model import extra_specs  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import planner as planner_mod  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.rules import images  # noqa: E402
from osc_leveller.core.rules import policy  # noqa: E402
from osc_leveller.core.settings import config  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402

DEVCLOUD = os.path.join(ROOT, 'tools', 'devcloud', 'devcloud')
# The leveller's own rules off, so that the verdict is its model of
# Nova's: what plan --explain says with these settings.
CONFORMANCE = {
    'ceiling': 1e9, 'cooldown': 0.0, 'cooldown_max': 0.0, 'return_window': 0.0,
    'include_locked': True, 'keep_n_plus_one': False,
    'cpu_compatibility': config.CPU_FEATURES,
}
LIVE_MIGRATE_VERSION = '2.30'  # host checked by the scheduler; synchronous
MIGRATION_ENDS = ('completed', 'error', 'failed', 'cancelled', 'done')
AGREED, DANGEROUS, LOST = 'agreed', 'dangerous', 'lost'


def options():
    return opts.from_settings(config.Settings([('conformance', CONFORMANCE)]),
                              exclude_hosts=frozenset())


def connection():
    return devcloud_retry.retrying(openstack.connect(
        cloud=os.environ.get('OS_CLOUD', 'devcloud')))


def devcloud(*args):
    result = subprocess.run([DEVCLOUD] + [str(a) for a in args],
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError('devcloud %s failed (%d):\n%s' % (
            ' '.join(map(str, args)), result.returncode,
            result.stderr[-3000:]))
    return result.stdout


def read(conn):
    """The cloud as the leveller's collector reads it (no Prometheus)."""
    document = collect.Collector(conn, history_hours=1.0).collect()
    return snapshot_io.parse(document, origin='the devcloud')


# --- the planner's verdict --------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Verdict:
    accepted: bool
    reason: str
    rule: str = ''  # the refusing check's name, when refused


class PlannerView:
    """The planner on one reading of the cloud, asked pair by pair."""

    def __init__(self, snapshot, options):
        self.snapshot = snapshot
        self.planner = planner_mod.Planner(snapshot, options)
        self._explained = {}

    def verdict(self, server, dest):
        """What plan --explain says of dest for server."""
        if server.id not in self._explained:
            self._explained[server.id] = self.planner.explain(server)
        refusal, rows = self._explained[server.id]
        if refusal:
            return Verdict(False, refusal, _failing(
                policy.BALANCE.checks, server, self.planner.rules))
        for name, _, _, verdict, reason in rows:
            if name == dest.name:
                if verdict == 'accepted':
                    return Verdict(True, reason)
                return Verdict(False, reason, _failing(
                    policy.BALANCE.destinations, server, dest,
                    self.planner.state, self.planner.rules))
        raise KeyError('%s: no row for %s' % (server.label, dest.name))


def _failing(checks, *args):
    """The code of the first rule that refuses (the one explain quotes)."""
    refusal = filters.first_reason(checks, *args)
    return refusal.code if refusal else '?'


# --- Nova's verdict ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Outcome:
    accepted: bool
    reason: str
    request_id: str = ''
    seconds: float = 0.0


def _migrations(conn, server_id):
    answer = conn.compute.get('/os-migrations', params={
        'instance_uuid': server_id}, microversion='2.80')
    openstack.exceptions.raise_from_response(answer)
    return answer.json()['migrations']


def _message(answer):
    try:
        body = answer.json()
        return next(iter(body.values()))['message']
    except (ValueError, StopIteration, TypeError, KeyError, AttributeError):
        return answer.text[:300]


def live_migrate(conn, server, host, timeout=180):
    """Nova's answer to a live migration of server to host, not forced."""
    started = time.monotonic()
    before = {m['id'] for m in _migrations(conn, server.id)}
    answer = conn.compute.post(
        '/servers/%s/action' % server.id, json={'os-migrateLive': {
            'host': host, 'block_migration': 'auto'}},
        microversion=LIVE_MIGRATE_VERSION)
    request_id = answer.headers.get('x-openstack-request-id', '')
    if answer.status_code != 202:
        return Outcome(False, 'HTTP %d %s' % (answer.status_code,
                                              _message(answer)), request_id,
                       time.monotonic() - started)
    deadline = started + timeout
    while True:
        new = [m for m in _migrations(conn, server.id) if m['id'] not in before]
        body = conn.compute.get('/servers/%s' % server.id,
                                microversion='2.60').json()['server']
        done = new and new[0]['status'] in MIGRATION_ENDS and \
            not body.get('OS-EXT-STS:task_state')
        if done:
            break
        if time.monotonic() > deadline:
            raise RuntimeError('%s to %s: no end after %d s (migration %s)' % (
                server.label, host, timeout, new[0]['status'] if new else
                'not recorded'))
        time.sleep(0.25)
    seconds = time.monotonic() - started
    landed = body.get('OS-EXT-SRV-ATTR:host')
    if new[0]['status'] in ('completed', 'done') and landed == host:
        return Outcome(True, 'landed on %s' % host, request_id, seconds)
    return Outcome(False, 'migration %s, server on %s: %s' % (
        new[0]['status'], landed, action_fault(conn, server.id, request_id)),
        request_id, seconds)


def action_fault(conn, server_id, request_id):
    """The failed event of the instance action of that request."""
    answer = conn.compute.get('/servers/%s/os-instance-actions/%s' % (
        server_id, request_id), microversion='2.84')
    if answer.status_code != 200:
        return 'no instance action (HTTP %d)' % answer.status_code
    for event in answer.json()['instanceAction'].get('events') or []:
        if event.get('result') == 'Error':
            return '%s: %s' % (event.get('event'), event.get('details') or
                               _last_line(event.get('traceback')))
    return 'no failed event'


def _last_line(text):
    lines = [line for line in (text or '').splitlines() if line.strip()]
    return lines[-1].strip() if lines else ''


LOG_LINES = re.compile(
    r'(Filter \w+ returned 0 hosts|Filtering removed all hosts.*|Got no '
    r'allocation candidates from the Placement API|Migration pre-check '
    r'error.*|Skipping host: .*)')


def log_reason(request_id):
    """What Nova's scheduler and conductor logged for the request (the
    filter that removed the host, Placement's empty answer), if the logs
    are at hand ($DEVCLOUD_HOME)."""
    home = os.environ.get('DEVCLOUD_HOME')
    if not home or not request_id:
        return ''
    found = []
    for name in ('nova-scheduler.log', 'nova-conductor.log'):
        try:
            with open(os.path.join(home, 'logs', name), errors='replace') as f:
                for line in f:
                    if request_id in line:
                        match = LOG_LINES.search(line)
                        if match and match.group(1) not in found:
                            found.append(match.group(1)[:300])
        except OSError:
            continue
    return '; '.join(found)


# --- the sampler ------------------------------------------------------------

def _specs(server):
    return server.flavor.extra_specs


def _tenant_keys(aggregate):
    return [k for k in aggregate.metadata if k.startswith(filters.TENANT_KEY)]


def _groups_of(snapshot, server):
    return [g for g in snapshot.server_groups if server.id in g.members or
            g.id in server.server_groups]


def _confined(snapshot, project):
    return any(project in (agg.metadata[k] for k in _tenant_keys(agg))
               for h in snapshot.hypervisors for agg in h.aggregates)


def _trait_specs(server, value):
    return value in {how for _, how in extra_specs.traits(_specs(server))}


def _image_asks(server, keys=(), prefix=None):
    """The server's image is known and sets one of keys, or a key with
    prefix."""
    image = server.image
    return image is not None and image.known and any(
        key in keys or (prefix and key.startswith(prefix))
        for key in image.properties)


# target: (the servers it is about, or None for all; the planner's checks
# it is about). A pair aimed at a rule passes every other check of the
# planner, so that the rule decides; half the pairs the rule refuses, half
# it lets pass (when the cloud has both). 'plain' pairs are any pair.
TARGETS = {
    'plain': (None, ()),
    'service': (None, ('service',)),
    'source_usable': (None, ('source_usable',)),
    'status': (None, ('status',)),
    'locked': (lambda s, snap: s.locked, ('locked',)),
    'availability_zone': (lambda s, snap: s.pinned_availability_zone,
                          ('availability_zone', 'same_zone')),
    'same_zone': (lambda s, snap: not s.pinned_availability_zone,
                  ('availability_zone', 'same_zone')),
    'cpu_compatible': (None, ('cpu_compatible',)),
    'hypervisor_version': (None, ('hypervisor_version',)),
    'aggregate_extra_specs': (lambda s, snap: any(
        ':' not in k or k.startswith(filters.AGGREGATE_SCOPE + ':')
        for k in _specs(s)), ('aggregate_extra_specs',)),
    'tenant_isolation': (None, ('tenant_isolation',)),
    'tenant_aggregate': (lambda s, snap: _confined(snap, s.project_id),
                         ('tenant_aggregate',)),
    'isolated_aggregate': (None, ('isolated_aggregate',)),
    'required_traits': (lambda s, snap: _trait_specs(s, 'required'),
                        ('required_traits',)),
    'forbidden_traits': (lambda s, snap: _trait_specs(s, 'forbidden'),
                         ('required_traits',)),
    **{'server_groups:' + policy: (
        lambda s, snap, policy=policy: policy in {
            g.policy for g in _groups_of(snap, s)},
        ('server_groups', 'soft_server_groups'))
       for policy in ('anti-affinity', 'affinity', 'soft-anti-affinity',
                      'soft-affinity')},
    'image_properties': (lambda s, snap: _image_asks(
        s, images.ARCHITECTURE[:2] + images.HV_TYPE[:2] + images.VM_MODE[:2]),
        ('image_properties',)),
    'image_traits': (lambda s, snap: _image_asks(s, prefix=images.TRAIT),
                     ('required_traits',)),
    'unknown_image': (lambda s, snap: s.image is not None and
                      not s.image.known, ('as_capable_image',)),
    'capacity': (None, ('capacity',)),
    'numa': (lambda s, snap: filters.numa(s, None) is not None, ('numa',)),
}


def candidates(view, target):
    """(refused, passing): the (server, destination) pairs the target aims
    at that its own checks refuse, and those they let pass; every other
    check of the planner lets them pass (Nova may still refuse one for
    another rule: that pair is a disagreement all the same)."""
    snapshot, planner = view.snapshot, view.planner
    about, own = TARGETS[target]
    checks = policy.BALANCE.checks
    dests = policy.BALANCE.destinations
    other = ([c for c in checks if c.code not in own],
             [c for c in dests if c.code not in own])
    mine = ([c for c in checks if c.code in own],
            [c for c in dests if c.code in own])
    refused, passing = [], []
    for server in snapshot.servers:
        if about is not None and not about(server, snapshot):
            continue
        if target != 'plain' and filters.first_reason(
                other[0], server, planner.rules):
            continue
        held = filters.first_reason(mine[0], server, planner.rules)
        for dest in snapshot.hypervisors:
            if dest.name == server.hypervisor:
                continue
            if target != 'plain' and filters.first_reason(
                    other[1], server, dest, planner.state, planner.rules):
                continue
            if held or filters.first_reason(
                    mine[1], server, dest, planner.state, planner.rules):
                refused.append((server, dest))
            else:
                passing.append((server, dest))
    return refused, passing


# A move to a newer CPU generation or hypervisor version cannot be undone:
# pairs aimed at other rules go between alike hypervisors this often, so
# that the cloud keeps its variety over a few hundred pairs.
LATERAL = 0.8
UPWARD = ('cpu_compatible', 'hypervisor_version', 'plain')


def _lateral(snapshot, server, dest):
    source = snapshot.hypervisor(server.hypervisor)
    return (source.cpu_features == dest.cpu_features and
            source.hypervisor_version == dest.hypervisor_version)


def _asked_key(server, dest):
    """A pair as it stands: asked again only once the server moved or the
    destination's usage changed (a refused pair changes nothing)."""
    return (server.id, server.hypervisor, dest.name,
            tuple(sorted(dest.usages.items())))


class Sampler:
    """Seeded pairs, the target drawn least so far first (ties in a seeded
    order), for each target a pair its rule refuses and one it lets pass
    in turn, never the same pair twice as it stands."""

    def __init__(self, rng):
        self.rng = rng
        self.order = sorted(TARGETS)
        rng.shuffle(self.order)
        self.drawn = collections.Counter()
        self.asked = set()

    def pair(self, view):
        for target in sorted(self.order, key=lambda t: (
                self.drawn[t], self.order.index(t))):
            sides = [[(s, d) for s, d in side
                      if _asked_key(s, d) not in self.asked]
                     for side in candidates(view, target)]
            # the side the rule refuses first, then in turn
            if self.drawn[target] % 2:
                sides.reverse()
            sides = [side for side in sides if side]
            if sides:
                side = sides[0]
                if target not in UPWARD:
                    lateral = [(s, d) for s, d in side
                               if _lateral(view.snapshot, s, d)]
                    if lateral and self.rng.random() < LATERAL:
                        side = lateral
                server, dest = self.rng.choice(side)
                self.asked.add(_asked_key(server, dest))
                self.drawn[target] += 1
                return target, server, dest
        return None


# --- one run ----------------------------------------------------------------

def label(rule, server, snapshot, reason):
    """The table's row for a pair: the rule, a server group's policy."""
    if rule in ('server_groups', 'soft_server_groups'):
        policies = sorted({g.policy for g in _groups_of(snapshot, server)})
        return '%s (%s)' % (rule, ', '.join(policies))
    if rule == 'required_traits' and 'forbidden' in reason:
        return 'forbidden_traits'  # one check for both (core/rules/filters.py)
    if rule == 'required_traits' and 'by image' in reason:
        return 'image_traits'
    return rule


def classify(planner_accepts, nova_accepts):
    if planner_accepts == nova_accepts:
        return AGREED
    return DANGEROUS if planner_accepts else LOST


def build(seed, servers, say=print):
    """devcloud rules SEED SERVERS, its lines said."""
    started = time.monotonic()
    built = devcloud('rules', seed, servers)
    for line in built.splitlines():
        if line.startswith('rules: '):
            say('seed %d: %s' % (seed, line[len('rules: '):]))
    say('seed %d: cloud built in %.0f s' % (seed, time.monotonic() - started))


def run_seed(conn, seed, pairs, servers, say=print, build_first=True):
    """The pairs of one seed, each a dict (see the module docstring)."""
    if build_first:
        build(seed, servers, say)
    rng = random.Random(seed)
    sampler = Sampler(rng)
    wanted = options()
    results = []
    view = None
    started = time.monotonic()
    while len(results) < pairs:
        if view is None:
            view = PlannerView(read(conn), wanted)
        snapshot = view.snapshot
        drawn = sampler.pair(view)
        if drawn is None:
            say('seed %d: no pair left to ask after %d' % (seed, len(results)))
            break
        target, server, dest = drawn
        verdict = view.verdict(server, dest)
        nova = live_migrate(conn, server, dest.host)
        kind = classify(verdict.accepted, nova.accepted)
        rule = verdict.rule if not verdict.accepted else target
        nova_reason = nova.reason
        if kind != AGREED and not nova.accepted:
            logged = log_reason(nova.request_id)
            if logged:
                nova_reason += ' [log: %s]' % logged
        results.append({
            'seed': seed, 'index': len(results) + 1, 'target': target,
            'rule': label(rule, server, snapshot, verdict.reason),
            'choice': rule in filters.CHOICES,
            'server': server.label, 'server_id': server.id,
            'project_id': server.project_id, 'flavor': server.flavor.name,
            'source': server.hypervisor, 'destination': dest.name,
            'destination_host': dest.host,
            'planner': 'accepts' if verdict.accepted else 'refuses',
            'planner_reason': verdict.reason,
            'nova': 'accepts' if nova.accepted else 'refuses',
            'nova_reason': nova_reason, 'request_id': nova.request_id,
            'nova_seconds': round(nova.seconds, 2), 'class': kind})
        if kind != AGREED:
            say('seed %d pair %d %s: %s -> %s (%s): planner %s (%s); Nova %s '
                '(%s)' % (seed, len(results), kind.upper(), server.label,
                          dest.host, results[-1]['rule'],
                          results[-1]['planner'], verdict.reason,
                          results[-1]['nova'], nova_reason))
        if nova.accepted:
            view = None  # the next pair starts from the new placement
    say('seed %d: %d pairs in %.0f s' % (
        seed, len(results), time.monotonic() - started))
    return results


# A pair the planner accepts counts for the target aimed at; one it refuses
# for the check that refused. Where the two name one rule, one row.
ROWS = {'unknown_image': 'as_capable_image',
        **{'server_groups:' + p: '%sserver_groups (%s)' % (
            'soft_' if p.startswith('soft-') else '', p)
           for p in ('anti-affinity', 'affinity', 'soft-anti-affinity',
                     'soft-affinity')}}


def row_of(pair):
    return ROWS.get(pair['rule'], pair['rule'])


def table(results):
    """{rule: {tried, agreed, dangerous, lost, choice}} plus a total."""
    rows = collections.OrderedDict()
    for r in sorted(results, key=row_of):
        row = rows.setdefault(row_of(r), dict.fromkeys(
            ('tried', AGREED, DANGEROUS, LOST, 'choice'), 0))
        row['tried'] += 1
        row[r['class']] += 1
        if r['class'] == LOST and r['choice']:
            row['choice'] += 1
    total = dict.fromkeys(('tried', AGREED, DANGEROUS, LOST, 'choice'), 0)
    for row in rows.values():
        for key in total:
            total[key] += row[key]
    rows['total'] = total
    return rows


def render(results, seeds):
    """The table and the disagreements as reStructuredText."""
    cells = [('**total**' if rule == 'total' else '``%s``' % rule,)
             + tuple('%d' % row[k] for k in ('tried', AGREED, DANGEROUS,
                                             LOST, 'choice'))
             for rule, row in table(results).items()]
    lines = [tabulate.tabulate(cells, ('Rule', 'Pairs', 'Agreed',
                                       'Dangerous', 'Lost',
                                       'of which a choice'),
                               tablefmt='rst', disable_numparse=True),
             '', 'Seeds: %s.' % ', '.join(map(str, seeds)), '']
    disagreements = [r for r in results if r['class'] != AGREED]
    if disagreements:
        lines += ['Disagreements (seed, pair: server, destination host, '
                  'rule, the planner, Nova):', '']
        for r in disagreements:
            lines.append('- seed %d pair %d: %s -> %s, ``%s``: %s (%s%s); '
                         'Nova %s (%s)' % (
                             r['seed'], r['index'], r['server'],
                             r['destination_host'], r['rule'], r['class'],
                             'the planner %s: ' % r['planner'],
                             r['planner_reason'], r['nova'],
                             r['nova_reason']))
        lines.append('')
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seed', type=int, action='append',
                        help='A scenario seed (repeat for more; default 1)')
    parser.add_argument('--pairs', type=int, default=100,
                        help='Pairs per seed (default 100)')
    parser.add_argument('--servers', type=int, default=40,
                        help='Servers of each scenario (default 40)')
    parser.add_argument('--no-build', action='store_true',
                        help='Ask on the cloud as it is (one seed: the '
                             'sampler\'s), the scenario already built')
    parser.add_argument('--json', metavar='FILE',
                        help='Write every pair and the table here')
    parser.add_argument('--render', metavar='FILE',
                        help='Print the table of a --json file and stop')
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        print(render(saved['pairs'], saved['seeds']))
        return 0
    seeds = args.seed or [1]
    conn = connection()
    started = time.monotonic()
    results, done = [], []
    for seed in seeds:
        results += run_seed(conn, seed, args.pairs, args.servers,
                            say=lambda text: print(text, flush=True),
                            build_first=not args.no_build)
        done.append(seed)
        if args.json:  # after each seed: a long run keeps what it asked
            write(args.json, results, done, args, time.monotonic() - started)
    print(render(results, seeds))
    worst = table(results)['total']
    return 1 if worst[DANGEROUS] else 0


def write(path, results, seeds, args, elapsed):
    with open(path, 'w') as f:
        json.dump({
            'date': datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec='seconds'),
            'python': platform.python_version(), 'cores': os.cpu_count(),
            'seeds': seeds, 'pairs_per_seed': args.pairs,
            'servers': args.servers, 'seconds': round(elapsed),
            'options': CONFORMANCE, 'table': table(results),
            'pairs': results}, f, indent=1)
        f.write('\n')


if __name__ == '__main__':
    sys.exit(main())
