"""Cron running ``openstack leveller apply --batch B`` every interval,
replayed over the load series of benchmarks/series.py (--mix: their
shapes, classic by default; daily, bursty, or mixed by domain).

At each run the replay builds the snapshot the live commands would see, as
a snapshot document (``osc-leveller-snapshot/1``) read by core/model/snapshot.py
``parse()``, schema check included:

- placement: the generated cluster's, after every move of earlier runs;
- load as Prometheus reports it at that time: host CPU as node_exporter
  shows it, capped at 100 % (demand over the host's threads is not seen);
  RAM used / total; per-server CPU as the libvirt exporter shows it, what
  the server got: on a host asked for more than its threads, every vCPU
  gets at most a fair share (CFS), so the busiest servers read lower than
  they ask; the time their vCPUs waited for a thread as CPU steal, the
  vCPU delay the inovex and Tinkoff exporters show (with --no-steal none,
  as kumina's and vexxhost's; a checkout that reads no steal gets none);
  no pressure (PSI) series;
- the migration history: every move of earlier runs, status
  ``completed``, at the time of its run, so the cooldown is read from the
  snapshot as a live run reads it.

It plans with the default options (PlannerOptions(), with --cooldown) and
does the first B moves of the plan, as apply --batch B runs them (plan
order, an exchange's moves one unit; see core/run/executor.py), each as
planned and at once. The moves then live in the next interval's load: the
imbalance (the std of host scores per balancing domain, core/load/scoring.py,
averaged over the domains of two or more hypervisors) is measured there,
with the leveller and with no action (the cluster as generated), along
with the hosts asked for more CPU than they have (saturated) and by how
many threads (unserved). The imbalance is measured on the load as
node_exporter shows it, without steal, so that every version is measured
alike; saturation is measured on what the servers ask.

Per run (a row per batch and interval): moves and GiB moved (server RAM);
moves of a server that moved in the 24 h before, and those at the first
run its cooldown allowed; flip-flops, moves back to a hypervisor the
server left in the 24 h before; moves whose own plan figures leave the
domain's imbalance the same to 3 decimals; runs whose moves left the next
interval's imbalance lower, the same or higher (to 3 decimals) than not
moving would have; the imbalance with no action and with the leveller,
and the runs where the leveller's is lower, equal or higher to 3
decimals. A second summary covers the runs from
--settled-hours on, once the cluster's first levelling is done. --json
writes every figure, per run too.

    python benchmarks/cron_replay.py --hosts 80 --servers 3200 --hours 72 \\
        --batch 1 --batch 5 --batch all --json benchmarks/results/cron_replay.json
"""

import argparse
import collections
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from benchmarks import series as series_mod  # noqa: E402
from benchmarks import stamp  # noqa: E402

# --previous runs this script again with the osc_leveller of another
# checkout: the benchmarks above are this one's, the planner is that one's.
CODE = os.environ.get('LEVELLER_REPLAY_CODE')
if CODE:
    sys.path.insert(0, CODE)

from osc_leveller.core.load import scoring  # noqa: E402
from osc_leveller.core.model import model  # noqa: E402
from osc_leveller.core.planning import planner  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402
try:  # a checkout before the forecast's skill was measured has none
    from osc_leveller.core.load import skill  # noqa: E402
except ImportError:
    skill = None
from osc_leveller.core.load import state as state_mod  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.model import watcher_cluster  # noqa: E402

HOUR = 3600.0
# How long a live migration takes: set-up plus copying the RAM at about
# 5 Gbit/s, so a 16 GiB server moves in about 45 s.
MIGRATION_S = (20.0, 1.6)  # seconds, seconds per GiB
WINDOW_HOURS = 24.0  # "moved again" and flip-flops look this far back
TAGS = ('again', 'inside_cooldown', 'cooldown_end', 'flip_flop')
ALL = 'all'
# Whether the planner under test reads CPU steal (a snapshot field).
READS_STEAL = 'cpu_steal' in {
    f.name for f in dataclasses.fields(model.ServerUsage)}


@dataclasses.dataclass(frozen=True)
class Moved:
    at: float  # seconds since the epoch
    server: str
    source: str
    destination: str
    gib: float

    @property
    def seconds(self):
        return MIGRATION_S[0] + MIGRATION_S[1] * self.gib


@dataclasses.dataclass(frozen=True)
class Replay:
    runs: list  # a dict of figures per run
    history: list  # every move made, a Moved each, in time order
    tags: dict  # churn(history): {tag: [index in history]}


@dataclasses.dataclass(frozen=True)
class Measure:
    imbalance: float  # mean over domains of the std of host scores
    saturated: int  # hypervisors asked for more CPU than they have
    unserved: float  # threads asked for beyond the hypervisors' threads
    top_demand: float  # the highest CPU demand / threads


class World:
    """The cluster and its series: snapshots and measures at a step."""

    def __init__(self, cluster, series, steal=True):
        self.cluster = cluster
        self.series = series
        self.steal = steal and READS_STEAL
        self.start = series_mod.epoch(series['start'])
        self.step_s = series['step_minutes'] * 60.0
        self.threads = {h['name']: h['vcpus'] for h in cluster['hypervisors']}

    def time(self, step):
        return self.start + step * self.step_s

    def demand(self, step, placement):
        """{hypervisor: busy threads asked for}."""
        asked = dict.fromkeys(self.threads, 0.0)
        for s in self.cluster['servers']:
            asked[placement[s['id']]] += \
                self.series['servers'][s['id']]['cpu'][step] * s['vcpus']
        return asked

    def measured(self, step, placement):
        """{server id: CPU as the libvirt exporter shows it}: what each
        got, a vCPU never more than the fair share of its host; its steal
        is what it asked beyond."""
        on = collections.defaultdict(list)
        for s in self.cluster['servers']:
            cpu = self.series['servers'][s['id']]['cpu'][step]
            on[placement[s['id']]].append((cpu, s['vcpus'], s['id']))
        got = {}
        for host, servers in on.items():
            share = fair_share(servers, self.threads[host])
            got.update((sid, min(cpu, share)) for cpu, _, sid in servers)
        return got

    def document(self, step, placement, history=(), steal=True):
        """The snapshot document of the cloud at step; steal: with the
        servers' CPU steal, if the world has it."""
        cpu = self.measured(step, placement)
        servers = []
        for s in self.cluster['servers']:
            servers.append(dict(
                s, host=placement[s['id']], cpu_util=cpu[s['id']],
                mem_util=self.series['servers'][s['id']]['ram'][step]))
        # The Watcher cluster mapping (core/model/watcher_cluster.py) gives
        # hypervisors and servers; host CPU and RAM capped at 1 as
        # node_exporter reads them.
        document = watcher_cluster.convert(
            dict(self.cluster, servers=servers), 'cron replay')
        document.update({
            'format': snapshot_io.FORMAT,
            'taken_at': snapshot_io.format_time(self.time(step)),
            'source': {'kind': 'file', 'description':
                       'benchmarks/cron_replay.py step %d' % step},
            'migrations': [migration(n, m) for n, m in enumerate(history)]})
        if steal and self.steal:
            for server in document['servers']:
                asked = self.series['servers'][server['id']]['cpu'][step]
                if server.get('usage'):
                    server['usage']['cpu_steal'] = round(
                        max(0.0, asked - cpu[server['id']]), 6)
        return document

    def snapshot(self, step, placement, history=(), steal=True):
        """The snapshot a run at step reads."""
        return self.read(self.document(step, placement, history, steal),
                         step)

    def read(self, document, step):
        return snapshot_io.parse(document,
                                 origin='cron replay step %d' % step)

    def measure(self, step, placement):
        asked = self.demand(step, placement)
        ratios = [asked[h] / self.threads[h] for h in asked]
        return Measure(imbalance(self.snapshot(step, placement,
                                               steal=False)),
                       sum(r > 1.0 for r in ratios),
                       sum(max(0.0, asked[h] - self.threads[h])
                           for h in asked), max(ratios))


def with_lasting(document, hours, earlier):
    """The document with the lasting figures Prometheus' avg_over_time
    gives over the last hours: each figure's mean over the earlier
    documents and this one, each with the placement of its own time. The
    documents are left as they are."""
    docs = earlier + [document]

    def mean(items, field):
        values = [i[field] for i in items if i and i.get(field) is not None]
        return round(statistics.mean(values), 6) if values else None

    result = dict(document, lasting='%gh' % hours)
    for path, key in (('hypervisors', 'metrics'), ('servers', 'usage')):
        by_id = [{x.get('id') or x['name']: x.get(key) for x in d[path]}
                 for d in docs]
        items = []
        for item in document[path]:
            figures = item.get(key)
            if figures:
                past = [b.get(item.get('id') or item['name']) for b in by_id]
                item = dict(item, **{key: dict(figures, lasting={
                    f: mean(past, f) for f in figures})})
            items.append(item)
        result[path] = items
    return result


def with_forecast(document, days, ahead, weight):
    """The document with the forecast figures Prometheus gives for
    forecast_days: each figure's mean over each past day's documents (days:
    a list of them per day), then over the days; a figure missing on a day
    has none. The document is left as it is."""
    result = dict(document, forecast={'ahead': ahead, 'days': len(days),
                                      'weight': weight})
    for path, key in (('hypervisors', 'metrics'), ('servers', 'usage')):
        by_id = [[{x.get('id') or x['name']: x.get(key) for x in d[path]}
                  for d in docs] for docs in days]
        items = []
        for item in document[path]:
            figures = item.get(key)
            name = item.get('id') or item['name']
            ahead_figures = {}
            for field in (figures or {}):
                if field in ('lasting', 'forecast'):
                    continue
                means = []
                for docs in by_id:
                    values = [(d.get(name) or {}).get(field) for d in docs]
                    if any(v is None for v in values):
                        break
                    means.append(statistics.mean(values))
                else:
                    ahead_figures[field] = round(statistics.mean(means), 6)
            if ahead_figures:
                item = dict(item, **{key: dict(figures,
                                               forecast=ahead_figures)})
            items.append(item)
        result[path] = items
    return result


def with_skill(document, hosts, step, interval_steps, days, domains):
    """The document whose forecast carries the skill Prometheus' history
    gives (osc_leveller/core/load/skill.py), as prometheus.forecast_days reads
    it: the hypervisors' figures on a grid of one interval, index 0 this
    run; hosts: {world step: {hypervisor: {figure: value}}} as read at
    each step, with the placement of its time. Each step's figure is the
    load of the period up to the next step, so a grid index's now is its
    first step's and its actual the mean over the interval before it.
    The document is left as it is."""
    if skill is None or 'forecast' not in document:
        return document
    window = min(days, skill.MOST_DAYS) * 24 * HOUR
    per_step = interval_steps * HOUR
    first = -int(round((window + days * 24 * HOUR) / per_step))
    now, actual = ({f: collections.defaultdict(dict) for f in skill.FIGURES}
                   for _ in range(2))
    for index in range(first, 1):
        ends = step + index * interval_steps
        steps = range(ends - interval_steps + 1, ends + 1)
        if steps[0] < 0 or any(j not in hosts for j in steps):
            continue
        for figure in skill.FIGURES:
            for name in hosts[ends]:
                values = [hosts[j][name].get(figure) for j in steps]
                if all(v is not None for v in values):
                    actual[figure][name][index] = sum(values) / len(values)
                if index < 0 and index * per_step >= -window:
                    value = hosts[ends][name].get(figure)
                    if value is not None:
                        now[figure][name][index] = value
    found = skill.errors(skill.History(per_step, now, actual), domains, days)
    forecast = dict(document['forecast'], skill={'hypervisors': {
        name: {figure: {k: v for k, v in dataclasses.asdict(e).items()
                        if v is not None} for figure, e in figures.items()}
        for name, figures in found.items()}})
    return dict(document, forecast=forecast)


def host_figures(document):
    """{hypervisor: {figure: value}} of a snapshot document."""
    return {h['name']: {f: (h.get('metrics') or {}).get(f)
                        for f in ('cpu', 'ram')}
            for h in document['hypervisors']}


def fair_share(servers, threads):
    """The most a vCPU gets on a host: [(cpu asked per vCPU, vCPUs, id)].

    Every vCPU gets what it asks up to a level that shares the threads out
    (max-min fairness, as CFS gives equal-weight threads); no limit (1.0)
    when the host has enough.
    """
    left, vcpus = float(threads), sum(v for _, v, _ in servers)
    for cpu, count, _ in sorted(servers):
        if cpu * vcpus > left:
            return left / vcpus
        left -= cpu * count
        vcpus -= count
    return 1.0


def migration(number, moved):
    """Nova's record of a move: created when asked, updated when it
    completed."""
    return {'id': number + 1, 'server_id': moved.server,
            'status': 'completed', 'migration_type': 'live-migration',
            'source_compute': moved.source, 'dest_compute': moved.destination,
            'created_at': snapshot_io.format_time(moved.at),
            'updated_at': snapshot_io.format_time(moved.at + moved.seconds)}


def imbalance(snapshot):
    """The mean over balancing domains (two or more usable hypervisors) of
    the std of host scores, as core/load/scoring.py computes them."""
    state = state_mod.new_state(snapshot)
    usable = [h for h in snapshot.hypervisors if h.usable]
    stats = scoring.domain_stats({h.name: state.score(h.name)
                                  for h in usable},
                                 {h.name: scoring.domain_of(h)
                                  for h in usable})
    stats = [s for s in stats if s.hosts > 1]
    return statistics.mean(s.imbalance for s in stats) if stats else 0.0


def first_units(moves, batch):
    """The moves apply --batch runs: the first batch units in plan order,
    an exchange's moves counting as one (core/run/executor.py); None: all."""
    if batch is None:
        return list(moves)
    units, chosen = set(), []
    for move in moves:
        unit = move.exchange or id(move)
        if unit not in units and len(units) >= batch:
            continue
        units.add(unit)
        chosen.append(move)
    return chosen


def churn(history, cooldown_hours, interval_hours, window_hours=WINDOW_HOURS):
    """{tag: [index of each move in history so tagged]}, history in time
    order. Tags: 'again' (the server moved in the window before),
    'inside_cooldown' (less than the cooldown after its previous move),
    'cooldown_end' (at the first run its cooldown allowed), 'flip_flop'
    (back to a hypervisor it left in the window)."""
    tags = collections.defaultdict(list)
    earlier = collections.defaultdict(list)
    window = window_hours * HOUR
    for index, move in enumerate(history):
        before = earlier[move.server]
        if before:
            gap = move.at - before[-1].at
            if gap <= window:
                tags['again'].append(index)
            # Nova's record of the previous move ends when it completed.
            cooled = gap - before[-1].seconds
            if cooled < cooldown_hours * HOUR:
                tags['inside_cooldown'].append(index)
            elif cooled < (cooldown_hours + interval_hours) * HOUR:
                tags['cooldown_end'].append(index)
            if any(m.source == move.destination and move.at - m.at <= window
                   for m in before):
                tags['flip_flop'].append(index)
        before.append(move)
    return tags


def levelled(world, cooldown_hours=6.0):
    """The cluster with the placement a full plan on the first step's
    load gives (every move done): a cloud cron has kept level so far."""
    snap = world.snapshot(0, {s['id']: s['host']
                              for s in world.cluster['servers']})
    plan = planner.make_plan(snap, opts.PlannerOptions(
        cooldown_hours=cooldown_hours, max_moves=10 ** 6))
    where = {m.server_id: m.destination for m in plan.moves}
    return dict(world.cluster, servers=[
        dict(s, host=where.get(s['id'], s['host']))
        for s in world.cluster['servers']])


def replay(world, batch, interval_steps=1, cooldown_hours=6.0, none=None,
           progress=None, options=None, lasting_hours=0, forecast=None):
    """The Replay of cron running apply --batch batch every interval.

    batch: moves (units) a run does, None for all; none: {step: Measure}
    with no action, shared between replays of one world; options:
    PlannerOptions fields beyond the defaults and the cooldown;
    lasting_hours: give the snapshots lasting figures over this period;
    forecast: (days, weight) or (days, weight, measured), give them
    forecast figures: each figure over the next interval at this time on
    each of the past days; measured: with the skill the history gives.
    """
    options = opts.PlannerOptions(cooldown_hours=cooldown_hours,
                                  **(options or {}))
    none = {} if none is None else none
    placement = {s['id']: s['host'] for s in world.cluster['servers']}
    initial = dict(placement)
    history, runs = [], []
    seen = {}  # step -> the document a run read then
    hosts = {}  # step -> its hypervisors' figures as read then
    domains = None
    window = int(round(lasting_hours * HOUR / world.step_s))
    per_day = int(round(24 * HOUR / world.step_s))
    kept = max(window, (forecast[0] * per_day if forecast else 0)) + 1
    for step in range(0, world.series['steps'] - interval_steps,
                      interval_steps):
        now = world.time(step)
        started = time.perf_counter()
        document = raw = world.document(step, placement, history)
        for old in [j for j in seen if j < step - kept]:
            del seen[old]
        if window:
            # What Prometheus kept: each step's figures with the placement
            # of that step (the steps between runs with the one after it).
            earlier = range(max(0, step - window + 1), step)
            for j in earlier:
                if j not in seen:
                    seen[j] = world.document(j, placement)
            seen[step] = document
            document = with_lasting(document, lasting_hours,
                                    [seen[j] for j in earlier])
        seen[step] = raw
        hosts[step] = host_figures(raw)
        if forecast:
            days, weight = forecast[:2]
            # Prometheus' [ahead:] offset (day - ahead): on each past day,
            # the interval after this time of day.
            past = [[j - day * per_day for j in range(
                step + 1, step + interval_steps + 1)]
                for day in range(1, days + 1)]
            if all(j >= 0 for steps in past for j in steps):
                document = with_forecast(document, [
                    [seen[j] if j in seen else world.document(j, placement)
                     for j in steps] for steps in past],
                    '%gm' % (interval_steps * world.step_s / 60), weight)
                if forecast[2:] == (True,):
                    if domains is None:
                        domains = {h.name: scoring.domain_of(h)
                                   for h in world.read(raw, step).hypervisors}
                    for j in range(step - interval_steps + 1, step):
                        if j >= 0 and j not in hosts:
                            hosts[j] = host_figures(
                                seen[j] if j in seen
                                else world.document(j, placement))
                    document = with_skill(document, hosts, step,
                                          interval_steps, days, domains)
        snap = world.read(document, step)
        built = time.perf_counter()
        plan = planner.make_plan(snap, options)
        planned = time.perf_counter()
        done = first_units(plan.moves, batch)
        unmoved = dict(placement)
        # The plan's own figures, on the load it saw: the domain's
        # imbalance the same to 3 decimals before and after the move.
        same = [m for m in done if round(m.imbalance[0], 3)
                == round(m.imbalance[1], 3)]
        for move in done:
            placement[move.server_id] = move.destination
            history.append(Moved(now, move.server_id, move.source,
                                 move.destination, move.ram_gb))
        later = range(step + 1, step + interval_steps + 1)
        for j in later:
            if j not in none:
                none[j] = world.measure(j, initial)
        after = [world.measure(j, placement) for j in later]
        before = [none[j] for j in later]
        # The next interval had this run done nothing: what its moves gave.
        stayed = [imbalance(world.snapshot(j, unmoved, steal=False))
                  for j in later] \
            if done else [m.imbalance for m in after]
        runs.append({
            'step': step, 'at': snapshot_io.format_time(now),
            'planned': len(plan.moves), 'moves': len(done),
            'gib': round(sum(m.ram_gb for m in done), 1),
            'same_to_3dp': len(same),
            'gib_same_to_3dp': round(sum(m.ram_gb for m in same), 1),
            'imbalance_now': round(imbalance(snap), 5),
            'imbalance_none': round(statistics.mean(
                m.imbalance for m in before), 5),
            'imbalance_leveller': round(statistics.mean(
                m.imbalance for m in after), 5),
            'imbalance_unmoved': round(statistics.mean(stayed), 5),
            'saturated_none': sum(m.saturated for m in before),
            'saturated_leveller': sum(m.saturated for m in after),
            'unserved_none': round(sum(m.unserved for m in before), 1),
            'unserved_leveller': round(sum(m.unserved for m in after), 1),
            'top_demand_none': round(max(m.top_demand for m in before), 3),
            'top_demand_leveller': round(max(m.top_demand for m in after), 3),
            'snapshot_s': round(built - started, 3),
            'plan_s': round(planned - built, 3)})
        if progress:
            progress(runs[-1])
    interval_hours = interval_steps * world.step_s / HOUR
    tags = churn(history, cooldown_hours, interval_hours)
    at = {world.time(r['step']): r for r in runs}
    for r in runs:
        r.update(dict.fromkeys(TAGS, 0))
    for tag, moves in tags.items():
        for i in moves:
            at[history[i].at][tag] += 1
    return Replay(runs, history, tags)


def summary(result, world, since_step=0):
    """Totals, medians and means of a Replay, over its runs from
    since_step on."""
    runs = [r for r in result.runs if r['step'] >= since_step]
    since = world.time(since_step)
    history = result.history
    step_hours = world.step_s / HOUR
    better = equal = worse = 0
    gained = collections.Counter()  # runs moving, by what the moves gave
    for r in runs:
        lev = round(r['imbalance_leveller'], 3)
        none = round(r['imbalance_none'], 3)
        better += lev < none
        equal += lev == none
        worse += lev > none
        if r['moves']:
            unmoved = round(r['imbalance_unmoved'], 3)
            kind = 'better' if lev < unmoved else 'same' if \
                lev == unmoved else 'worse'
            gained[kind] += 1
            gained[kind + '_gib'] += r['gib']

    def moved(tag=None):
        indexes = range(len(history)) if tag is None else \
            result.tags.get(tag, ())
        return [history[i] for i in indexes if history[i].at >= since]

    def total(key):
        return sum(r[key] for r in runs)

    def mean(key):
        return round(statistics.mean(r[key] for r in runs), 4)

    def median(key):
        return round(statistics.median(r[key] for r in runs), 4)

    return {
        'from': snapshot_io.format_time(since),
        'runs': len(runs),
        'runs_moving': sum(r['moves'] > 0 for r in runs),
        'moves': total('moves'),
        'gib': round(total('gib'), 1),
        'moves_per_run_median': median('moves'),
        'moves_per_run_mean': mean('moves'),
        'moves_per_run_max': max(r['moves'] for r in runs),
        'gib_per_run_median': median('gib'),
        'servers_moved': len({m.server for m in moved()}),
        'moved_again_24h': total('again'),
        'servers_moved_again_24h': len({m.server for m in moved('again')}),
        'inside_cooldown': total('inside_cooldown'),
        'at_cooldown_end': total('cooldown_end'),
        'at_cooldown_end_per_run_max': max(r['cooldown_end'] for r in runs),
        'flip_flops': total('flip_flop'),
        'servers_flip_flopping': len({m.server
                                      for m in moved('flip_flop')}),
        'same_to_3dp': total('same_to_3dp'),
        'gib_same_to_3dp': round(total('gib_same_to_3dp'), 1),
        # Runs moving whose moves left the next interval's imbalance lower,
        # the same or higher (to 3 decimals) than not moving would have.
        'runs_next_better': gained['better'],
        'runs_next_same': gained['same'],
        'gib_next_same': round(gained['same_gib'], 1),
        'runs_next_worse': gained['worse'],
        'gib_next_worse': round(gained['worse_gib'], 1),
        'imbalance_now_mean': mean('imbalance_now'),
        'imbalance_none_mean': mean('imbalance_none'),
        'imbalance_leveller_mean': mean('imbalance_leveller'),
        'imbalance_none_median': median('imbalance_none'),
        'imbalance_leveller_median': median('imbalance_leveller'),
        'better': better, 'equal': equal, 'worse': worse,
        'saturated_host_hours_none': round(
            total('saturated_none') * step_hours, 1),
        'saturated_host_hours_leveller': round(
            total('saturated_leveller') * step_hours, 1),
        'unserved_core_hours_none': round(
            total('unserved_none') * step_hours),
        'unserved_core_hours_leveller': round(
            total('unserved_leveller') * step_hours),
        'top_demand_none': max(r['top_demand_none'] for r in runs),
        'top_demand_leveller': max(r['top_demand_leveller'] for r in runs),
        'snapshot_s_median': median('snapshot_s'),
        'plan_s_median': median('plan_s'),
    }


def batch_arg(text):
    if text == ALL:
        return None
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError('a batch is 1 or more, or all')
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=80)
    parser.add_argument('--servers', type=int, default=3200)
    parser.add_argument('--seed', type=int, default=1,
                        help='of the cluster and of its series')
    parser.add_argument('--cluster', metavar='FILE',
                        help='a cluster file of generate.py instead')
    parser.add_argument('--hours', type=float, default=48)
    parser.add_argument('--step-minutes', type=float, default=60,
                        help='of the series')
    parser.add_argument('--mix', choices=series_mod.MIX_NAMES,
                        default=series_mod.CLASSIC,
                        help='the load shapes of the series (series.py)')
    parser.add_argument('--interval-minutes', type=float, action='append',
                        help='between cron runs, a multiple of the step; '
                        'repeat for rows (default: the step)')
    parser.add_argument('--batch', type=batch_arg, action='append',
                        help='apply --batch: a number or all; repeat for '
                        'rows (default: 1 and all)')
    parser.add_argument('--cooldown', type=float, default=6.0,
                        help='hours')
    parser.add_argument('--settled-hours', type=float, default=24,
                        help='a second summary of the runs from this hour '
                        'on, once the first levelling is done')
    parser.add_argument('--levelled', action='store_true',
                        help='start from the placement a full plan on the '
                        'first hour\'s load gives, as cron would have kept '
                        'the cloud')
    parser.add_argument('--option', action='append', default=[],
                        metavar='FIELD=VALUE', type=option_arg,
                        help='a PlannerOptions field beyond the defaults '
                        '(this checkout only); repeat for several')
    parser.add_argument('--lasting-hours', type=float, default=0,
                        help='snapshots carry each figure\'s average over '
                        'this many hours too, as prometheus.lasting reads '
                        'them (this checkout only)')
    parser.add_argument('--forecast-days', type=int, default=0,
                        help='snapshots carry each figure over the next '
                        'interval at this time on each of this many past '
                        'days, as prometheus.forecast_days reads them (this '
                        'checkout only)')
    parser.add_argument('--forecast-weight', type=float, default=0.5,
                        help='prometheus.forecast_weight for them')
    parser.add_argument('--forecast-skill', action='store_true',
                        help='the snapshots carry the skill the history '
                        'gives the forecast, as a live read measures it: '
                        'the weight is earned per domain, forecast_weight '
                        'at most (this checkout only)')
    parser.add_argument('--no-steal', action='store_true',
                        help='no CPU steal in the snapshots, as with the '
                        'kumina or vexxhost libvirt exporter')
    parser.add_argument('--previous', metavar='DIR',
                        help='also replay with the osc_leveller of this '
                        'checkout, on the same cluster and series, as rows '
                        'before this one\'s')
    parser.add_argument('--json', metavar='FILE')
    args = parser.parse_args(argv)
    batches = args.batch or [1, None]
    intervals = args.interval_minutes or [args.step_minutes]
    started = time.perf_counter()
    if args.cluster:
        with open(args.cluster) as stream:
            cluster = json.load(stream)
    else:
        cluster = generate.generate(args.hosts, args.servers, args.seed)
    series = series_mod.series(cluster, args.hours, args.step_minutes,
                               args.seed, mix=args.mix)
    world = World(cluster, series, not args.no_steal)
    if args.levelled:
        # Its moves stay in their domains, so --previous, which draws the
        # series again from this placement, draws the same mixed ones.
        cluster = levelled(world, args.cooldown)
        world = World(cluster, series, not args.no_steal)
    previous = _previous(args, cluster) if args.previous else []
    settled = int(round(args.settled_hours * 60 / args.step_minutes))
    none, rows = {}, []
    for interval in intervals:
        steps = interval / args.step_minutes
        if steps != int(steps) or steps < 1:
            parser.error('--interval-minutes %g is not a multiple of the '
                         'step, %g' % (interval, args.step_minutes))
        for batch in batches:
            began = time.perf_counter()
            result = replay(world, batch, int(steps), args.cooldown, none,
                            progress=_progress(batch, interval),
                            options=dict(args.option),
                            lasting_hours=args.lasting_hours,
                            forecast=(args.forecast_days,
                                      args.forecast_weight,
                                      args.forecast_skill)
                            if args.forecast_days else None)
            rows.append({
                'version': 'this',
                'batch': ALL if batch is None else batch,
                'interval_minutes': interval,
                'wall_s': round(time.perf_counter() - began, 1),
                'summary': summary(result, world),
                'settled': summary(result, world, settled),
                'runs': result.runs})
    shapes = collections.Counter(s['shape']
                                 for s in series['servers'].values())
    result = stamp.stamped(**{
        'cluster': args.cluster or {
            'hosts': args.hosts, 'servers': args.servers, 'seed': args.seed},
        'levelled': args.levelled,
        'previous': args.previous and os.path.abspath(args.previous),
        'servers': len(cluster['servers']),
        'hypervisors': len(cluster['hypervisors']),
        'series': {'start': series['start'], 'hours': args.hours,
                   'step_minutes': args.step_minutes, 'seed': args.seed,
                   'mix': args.mix, 'shapes': dict(sorted(shapes.items()))},
        'cooldown_hours': args.cooldown,
        'settled_hours': args.settled_hours,
        'options': 'PlannerOptions() defaults, cooldown as above',
        'options_this': dict(args.option),
        'lasting_hours_this': args.lasting_hours,
        'forecast_this': {'days': args.forecast_days,
                          'weight': args.forecast_weight,
                          'skill': args.forecast_skill}
        if args.forecast_days else None,
        'steal': world.steal,
        'wall_s': round(time.perf_counter() - started, 1),
        'rows': previous + rows})
    if 'domains' in series:  # mixed: which mix each domain drew from
        result['series']['domains'] = series['domains']
    print(table(result['rows'], 'summary'))
    print('\nFrom hour %g on:\n' % args.settled_hours)
    print(table(result['rows'], 'settled'))
    if args.json:
        stamp.write(args.json, result)
    return 0


def option_arg(text):
    name, sep, value = text.partition('=')
    if not sep:
        raise argparse.ArgumentTypeError('use FIELD=VALUE')
    try:
        value = json.loads(value)
    except ValueError:
        pass  # text
    return name, value


def _previous(args, cluster):
    """The rows of the same replay with the checkout args.previous's
    osc_leveller, its default options, in a process of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        cluster_file = os.path.join(tmp, 'cluster.json')
        out = os.path.join(tmp, 'previous.json')
        with open(cluster_file, 'w') as stream:
            json.dump(cluster, stream)
        argv = [sys.executable, os.path.abspath(__file__),
                '--cluster', cluster_file, '--seed', str(args.seed),
                '--hours', str(args.hours),
                '--step-minutes', str(args.step_minutes),
                '--cooldown', str(args.cooldown),
                '--settled-hours', str(args.settled_hours), '--json', out]
        for interval in args.interval_minutes or ():
            argv += ['--interval-minutes', str(interval)]
        if args.no_steal:
            argv.append('--no-steal')
        if args.mix != series_mod.CLASSIC:
            argv += ['--mix', args.mix]
        for batch in args.batch or (1, None):
            argv += ['--batch', ALL if batch is None else str(batch)]
        env = dict(os.environ,
                   LEVELLER_REPLAY_CODE=os.path.abspath(args.previous))
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        with open(out) as stream:
            rows = json.load(stream)['rows']
    for row in rows:
        row['version'] = 'previous'
    return rows


def _progress(batch, interval):
    def say(run):
        print('batch %s every %g min, %s: %d moves, imbalance %.3f '
              '(no action %.3f)' % (
                  ALL if batch is None else batch, interval, run['at'],
                  run['moves'], run['imbalance_leveller'],
                  run['imbalance_none']), file=sys.stderr, flush=True)
    return say


COLUMNS = ('version', 'batch', 'every', 'runs moving', 'moves', 'GiB',
           'servers moved again < 24 h', 'at cooldown end',
           'flip-flops (servers)', 'moves same to 3 dp in the plan (GiB)',
           'runs moving: next interval better / same / worse than not '
           'moving', 'imbalance: no action / leveller, mean',
           'better / equal / worse than no action',
           'saturated host-h: no action / leveller',
           'unserved core-h: no action / leveller')


def table(rows, key):
    """The markdown table of rows' summaries (key: 'summary', 'settled')."""
    def whole(value):
        return format(value, ',.0f')
    cells = []
    for row in rows:
        s = row[key]
        cells.append((
            row.get('version', 'this'), '%s' % row['batch'],
            '%g min' % row['interval_minutes'],
            '%d of %d' % (s['runs_moving'], s['runs']), '%d' % s['moves'],
            whole(s['gib']), '%d' % s['servers_moved_again_24h'],
            '%d' % s['at_cooldown_end'],
            '%d (%d)' % (s['flip_flops'], s['servers_flip_flopping']),
            '%d (%s)' % (s['same_to_3dp'], whole(s['gib_same_to_3dp'])),
            '%d / %d / %d' % (s['runs_next_better'], s['runs_next_same'],
                              s['runs_next_worse']),
            '%.3f / %.3f' % (s['imbalance_none_mean'],
                             s['imbalance_leveller_mean']),
            '%d / %d / %d' % (s['better'], s['equal'], s['worse']),
            '%s / %s' % (whole(s['saturated_host_hours_none']),
                         whole(s['saturated_host_hours_leveller'])),
            '%s / %s' % (whole(s['unserved_core_hours_none']),
                         whole(s['unserved_core_hours_leveller']))))
    return tabulate.tabulate(cells, COLUMNS, tablefmt='github',
                             disable_numparse=True)


if __name__ == '__main__':
    sys.exit(main())
