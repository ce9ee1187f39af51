"""Can any K valid moves reach given CPU and RAM figures? (K = 1 or 2)

The quality target compares osc-leveller, limited to half of Watcher's
moves, with the per-domain CPU and RAM std Watcher's plan claims. Where the
planner misses it, this says whether any plan of that many moves could
meet it: it tries every sequence of K moves that osc-leveller's filters
accept in order, each server at most once as in the planner's plans
(cooldown off, as in run.py's check of the baselines), and reports how
many meet both figures and the closest one (the smallest max(CPU / target
CPU, RAM / target RAM)), scored exactly as run.py scores every plan.

    python benchmarks/reachable.py --hosts 20 --servers 300 --seed 1 \\
        --moves 2 --cpu 0.095 --ram 0.054
"""

import argparse
import collections
import dataclasses
import json
import math
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from benchmarks import run  # noqa: E402
from osc_leveller.core.load import state as state_mod  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.rules import policy  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402


class Figures:
    """run.imbalance, with host utilisation kept up to date move by move."""

    def __init__(self, cluster):
        self.hyps = {h['name']: h for h in cluster['hypervisors']}
        self.servers = {s['id']: s for s in cluster['servers']}
        members = collections.defaultdict(list)
        for h in cluster['hypervisors']:
            if h.get('status', 'enabled') == 'enabled' and \
                    h.get('state', 'up') == 'up':
                members[(h.get('az'), h.get('cpu_model'))].append(h['name'])
        self.domains = [m for m in members.values() if len(m) > 1]

    def share(self, server_id, host):
        s, h = self.servers[server_id], self.hyps[host]
        return (s.get('cpu_util', 0.0) * s['vcpus'] / h['vcpus'],
                s.get('mem_util', 0.0) * s['memory_mb'] / h['memory_mb'])

    def moved(self, util, server_id, source, destination):
        util = dict(util)
        out, into = (self.share(server_id, source),
                     self.share(server_id, destination))
        util[source] = tuple(u - o for u, o in zip(util[source], out))
        util[destination] = tuple(u + i for u, i in
                                  zip(util[destination], into))
        return util

    def std(self, util):
        result = []
        for i in (0, 1):
            total = 0.0
            for hosts in self.domains:
                values = [util[h][i] for h in hosts]
                mean = sum(values) / len(values)
                total += math.sqrt(max(0.0, sum(v * v for v in values)
                                       / len(values) - mean * mean))
            result.append(total / len(self.domains))
        return tuple(result)


def search(cluster, snap, moves, target):
    options = dataclasses.replace(opts.PlannerOptions(), cooldown_hours=0.0)
    rules = filters.Rules(snap, options)
    figures = Figures(cluster)
    placement = {s['id']: s['host'] for s in cluster['servers']}
    util = run.utilisation(cluster, placement)
    found = {'sequences': 0, 'meeting': 0, 'closest': None}

    def valid(state, done):
        for server in snap.servers:
            if server.id in done or policy.BALANCE.why_not(server, rules):
                continue
            for hyp in snap.hypervisors:
                if filters.why_not_destination(server, hyp, state,
                                               rules) is None:
                    yield server.id, hyp.name

    def walk(state, util, done, path):
        for server_id, destination in list(valid(state, done)):
            after = figures.moved(util, server_id, state.host_of(server_id),
                                  destination)
            step = path + [(server_id, destination)]
            if len(step) < moves:
                deeper = state.copy()
                deeper.apply(server_id, destination)
                walk(deeper, after, done | {server_id}, step)
                continue
            found['sequences'] += 1
            cpu, ram = figures.std(after)
            if cpu <= target[0] and ram <= target[1]:
                found['meeting'] += 1
            ratio = max(cpu / target[0], ram / target[1])
            if found['closest'] is None or ratio < found['closest']['ratio']:
                found['closest'] = {'ratio': ratio, 'cpu': cpu, 'ram': ram,
                                    'moves': step}

    walk(state_mod.new_state(snap, options.weights), util, frozenset(), [])
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, required=True)
    parser.add_argument('--servers', type=int, required=True)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--moves', type=int, choices=(1, 2), default=1)
    parser.add_argument('--cpu', type=float, required=True)
    parser.add_argument('--ram', type=float, required=True)
    args = parser.parse_args(argv)
    cluster = generate.generate(args.hosts, args.servers, args.seed)
    with tempfile.NamedTemporaryFile('w', suffix='.json',
                                     delete=False) as f:
        json.dump(cluster, f)
    try:
        snap = snapshot_io.load(f.name)
    finally:
        os.unlink(f.name)
    started = time.perf_counter()
    found = search(cluster, snap, args.moves, (args.cpu, args.ram))
    closest = found['closest']
    print('%d sequences of %d valid moves tried in %.0f s; %d meet CPU std '
          '<= %g and RAM std <= %g; closest: CPU %.4f, RAM %.4f (%.2f x the '
          'target)' % (found['sequences'], args.moves,
                       time.perf_counter() - started, found['meeting'],
                       args.cpu, args.ram, closest['cpu'], closest['ram'],
                       closest['ratio']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
