"""plan --spread count on the generated clusters: moves against the fewest
possible, GiB copied, domains the rules stop short, and planning time.

    python benchmarks/spread_time.py [--large] [--repeat 3]

Per cluster (benchmarks/generate.py, seed 1): the plan with the defaults
(25 moves, one cron run) and run to the end (--max-moves 100000). "fewest"
is spread.minimum_moves summed over the domains as planning starts; a plan
whose every domain ends within one makes exactly that many. Times are the
medians of --repeat runs in this process, the snapshot parsed once.
"""

import argparse
import collections
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from osc_leveller.core.load import scoring  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import spread  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402

CLUSTERS = ((100, 2000), (300, 15000))
LARGE = ((1000, 50000),)


def fewest(snap, options):
    domains = collections.defaultdict(list)
    for hyp in snap.hypervisors:
        if hyp.usable and filters.in_scope(hyp, options):
            domains[scoring.domain_of(hyp, options.by_model)].append(
                len(snap.servers_on(hyp.name)))
    return sum(spread.minimum_moves(c) for c in domains.values()
               if len(c) > 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--large', action='store_true')
    parser.add_argument('--repeat', type=int, default=3)
    args = parser.parse_args(argv)
    print('| cluster | max moves | fewest | moves | GiB | domains held | '
          'median s |')
    print('|---|---|---|---|---|---|---|')
    for hosts, servers in CLUSTERS + (LARGE if args.large else ()):
        snap = snapshot_io.parse(generate.generate(hosts, servers, 1))
        for limit in (25, 100000):
            options = opts.PlannerOptions(now=snap.taken_at,
                                          max_moves=limit)
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                plan = spread.make_plan(snap, options)
                times.append(time.perf_counter() - started)
            held = sum(1 for d in plan.domains if 'held' in d)
            print('| %d / %d | %d | %d | %d | %.0f | %d of %d | %.2f |' % (
                hosts, servers, limit, fewest(snap, options),
                len(plan.moves), plan.migrated_gb, held, len(plan.domains),
                statistics.median(times)))


if __name__ == '__main__':
    main()
