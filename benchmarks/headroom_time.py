"""Time the N+k headroom check (core/rules/headroom.py) on a cluster, in this
process.

    python benchmarks/headroom_time.py CLUSTER.json [--k 1 --k 2] [--repeat R]

Prints the load time, then per k the median wall and CPU time of
headroom.of_domains over the usable hypervisors (what score --summary and
evacuate run) and each domain's answer. Generate the cluster with
benchmarks/generate.py.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from osc_leveller.core.load import state as state_mod  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.rules import headroom  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('cluster')
    parser.add_argument('--k', type=int, action='append')
    parser.add_argument('--repeat', type=int, default=3)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    snap = snapshot_io.load(args.cluster)
    print('load %.3f s: %d hypervisors, %d servers' % (
        time.perf_counter() - started, len(snap.hypervisors),
        len(snap.servers)))
    state = state_mod.new_state(snap)
    rules = filters.Rules(snap, opts.PlannerOptions(now=snap.taken_at))
    for k in args.k or [1]:
        walls, cpus = [], []
        for _ in range(args.repeat):
            started, cpu = time.perf_counter(), time.process_time()
            found = headroom.of_domains(snap, state, rules, k)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        print('N+%d: %.3f s, cpu %.3f s (medians of %d)' % (
            k, statistics.median(walls), statistics.median(cpus),
            args.repeat))
        for h in found:
            print('  %-28s %4d hypervisors %4d sets  %s' % (
                h.domain, h.hypervisors, h.sets, h.reason()[:90]))


if __name__ == '__main__':
    main()
