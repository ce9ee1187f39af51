"""Time loading a cluster and planning on it, in this process.

    python benchmarks/plan_time.py CLUSTER.json [--max-moves N] [--repeat R]
        [--keep-n-plus-one]

Prints the load time, then per repeat the time of planner.make_plan alone,
wall clock and CPU (on a shared machine the CPU figure is the steadier),
and the number of moves. Generate the cluster with benchmarks/generate.py.
"""

import argparse
import dataclasses
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import planner  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('cluster')
    parser.add_argument('--max-moves', type=int)
    parser.add_argument('--repeat', type=int, default=1)
    parser.add_argument('--keep-n-plus-one', action='store_true')
    args = parser.parse_args(argv)
    started = time.perf_counter()
    snap = snapshot_io.load(args.cluster)
    print('load %.3f s' % (time.perf_counter() - started))
    fields = {'now': snap.taken_at}
    if args.max_moves is not None:
        fields['max_moves'] = args.max_moves
    if args.keep_n_plus_one:
        fields['keep_n_plus_one'] = True
    options = dataclasses.replace(opts.PlannerOptions(), **fields)
    for _ in range(args.repeat):
        started, cpu = time.perf_counter(), time.process_time()
        plan = planner.make_plan(snap, options)
        print('plan %.3f s, cpu %.3f s, %d moves' % (
            time.perf_counter() - started, time.process_time() - cpu,
            len(plan.moves)))


if __name__ == '__main__':
    main()
