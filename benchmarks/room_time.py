"""plan --make-room on the generated clusters: moves, GiB and planning time.

    python benchmarks/room_time.py [--large] [--repeat 3]

Per cluster (benchmarks/generate.py, seed 1) and flavor (the generator's
largest, 24 vCPU / 256 GiB, and 16 vCPU / 128 GiB): "fit" is how many new
servers of it fit with no move, then the plans for fit + 1, fit + 10 and
fit + 50 servers: moves, GiB moved, the hypervisors cleared, or the limit
NoRoom names when no sequence of moves makes the room. Times are the
medians of --repeat plans in this process, the snapshot parsed once.
"""

import argparse
import os
import re
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import tabulate  # noqa: E402

from benchmarks import generate  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import context  # noqa: E402
from osc_leveller.core.planning import kinds  # noqa: E402
from osc_leveller.core.planning import room  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402

CLUSTERS = ((100, 2000), (300, 15000))
LARGE = ((1000, 50000),)
MORE = (1, 10, 50)


def largest(snap, vcpus, ram_gb):
    """A flavor of the snapshot's servers of that size."""
    for server in snap.servers:
        if (server.flavor.vcpus, round(server.ram_gb)) == (vcpus, ram_gb):
            return server.flavor
    raise SystemExit('no %d vCPU / %d GiB flavor in the cluster' % (
        vcpus, ram_gb))


def plan(snap, flavor, count, options):
    """The plan, or the NoRoom message."""
    try:
        return room.make_plan(snap, room.Ask(flavor, count), options)
    except room.NoRoom as exc:
        return str(exc)


def fit(snap, flavor, options):
    """How many servers of flavor fit with no move: on each hypervisor a
    new one may land on, the whole servers its free room holds (what the
    plan keeps before it clears any)."""
    planning = context.Context(snap, options, kinds.MAKE_ROOM.load)
    search = room._Room(planning, room.Ask(flavor, 1))
    return sum(max(0, int(min(free // search.need[rc] for rc, free in
                              search.free(h.name).items())))
               for h in search.hosts)  # an overcommitted one holds none


def timed(snap, flavor, count, options, limit):
    """(plan or NoRoom message or None past limit seconds, seconds)."""
    def stop(*_):
        raise TimeoutError
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(limit)
    started = time.perf_counter()
    try:
        made = plan(snap, flavor, count, options)
    except TimeoutError:
        made = None
    finally:
        signal.alarm(0)
    return made, time.perf_counter() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--large', action='store_true')
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--limit', type=int, default=300,
                        help='seconds a plan may take before it is cut')
    args = parser.parse_args(argv)
    rows = []
    for hosts, servers in CLUSTERS + (LARGE if args.large else ()):
        snap = snapshot_io.parse(generate.generate(hosts, servers, 1))
        options = opts.PlannerOptions(now=snap.taken_at)
        for size in ((24, 256), (16, 128)):
            flavor = largest(snap, *size)
            fits = fit(snap, flavor, options)
            for more in MORE:
                times, made = [], None
                for _ in range(args.repeat):
                    made, seconds = timed(snap, flavor, fits + more,
                                          options, args.limit)
                    times.append(seconds)
                    if made is None:
                        break
                if made is None:
                    what = ['-', '-', '-', 'cut after %d s' % args.limit]
                elif isinstance(made, str):
                    limit = re.search(r'(\w+) limits', made)
                    what = ['-', '-', '-', 'no room: %s limits' % (
                        limit.group(1) if limit else made[:60])]
                else:
                    what = [len(made.moves),
                            round(sum(m.ram_gb for m in made.moves)),
                            len({m.source for m in made.moves}), '']
                rows.append(['%d / %d' % (hosts, servers),
                             '%d vCPU / %d GiB' % size, fits,
                             fits + more] + what +
                            ['%.2f' % statistics.median(times)])
    print(tabulate.tabulate(rows, headers=[
        'cluster', 'flavor', 'fit now', 'count asked', 'moves', 'GiB moved',
        'hypervisors cleared', 'limit', 'median s'], tablefmt='github',
        disable_numparse=True))


if __name__ == '__main__':
    main()
