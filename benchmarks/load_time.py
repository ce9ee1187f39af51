"""Time loading a snapshot file, phase by phase, and plan end to end.

    python benchmarks/load_time.py CLUSTER.json [--repeat 5] [--end-to-end]
        [--previous DIR] [--no-phases]

Prints the median over --repeat runs in this process of each phase of
``snapshot_io.load`` (reading and parsing the file; validating it against its
format; for a Watcher cluster file, converting it to a snapshot document;
building the model) and of the
whole load, then this process's peak RSS. With --end-to-end also the
median wall time and the peak RSS of ``openstack leveller plan --snapshot
CLUSTER.json -f value -c '#'``, each run a fresh process. With --previous
DIR too, the plan command of that checkout (PYTHONPATH) and this one run in
turn, --repeat pairs after a warm-up pair, with the medians of each and of
the ratios taken pair by pair (wall and CPU: user + system of the process,
as the kernel accounts it). Speed targets live here and in
doc/source/reference/benchmarks.rst, never in unit tests. Generate
clusters with benchmarks/generate.py.
"""

import argparse
import gc
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from osc_leveller.core.model import files  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.model import validation  # noqa: E402
from osc_leveller.core.model import watcher_cluster  # noqa: E402

PLAN = ['openstack', 'leveller', 'plan', '-f', 'value', '-c', '#']


def phases(path):
    """{phase: seconds} of one load of path, the garbage collector off as
    in snapshot_io.load."""
    times = {}
    clock = time.process_time
    gc.disable()
    try:
        started = clock()
        document, strict = files.read_json(path, 'snapshot file')
        times['read and parse'] = clock() - started
        if 'format' not in document:
            started = clock()
            validation.validate(document, 'watcher-cluster', strict)
            times['validate (Watcher)'] = clock() - started
            started = clock()
            document = watcher_cluster.convert(document, path)
            times['convert'] = clock() - started
        else:
            started = clock()
            validation.validate(document, 'snapshot-v1', strict)
            times['validate'] = clock() - started
        started = clock()
        snap = snapshot_io._build(document)
        times['build'] = clock() - started
    finally:
        gc.enable()
    del document, snap
    started = clock()
    snap = snapshot_io.load(path)  # with freeing what it read
    times['load (all of it)'] = clock() - started
    del snap
    return times


def end_to_end(path, pythonpath=None):
    """(wall seconds, CPU seconds, peak RSS in MiB) of one plan command,
    of the checkout at pythonpath if given."""
    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else None
    started = time.perf_counter()
    process = subprocess.Popen(PLAN + ['--snapshot', path],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if status:
        sys.exit('%s failed (wait status %d)' % (' '.join(PLAN), status))
    return (seconds, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024.0)


def paired(path, previous, repeat):
    """The plan command of previous and of this checkout in turn."""
    end_to_end(path, previous), end_to_end(path, ROOT)  # warm-up
    pairs = [(end_to_end(path, previous), end_to_end(path, ROOT))
             for _ in range(repeat)]
    median = statistics.median
    for label, i in (('wall', 0), ('CPU', 1)):
        print('plan, end to end, %-4s %7.3f s against %.3f s (previous), '
              'ratio %.3f (%.3f to %.3f)' % (
                  label, median(this[i] for _, this in pairs),
                  median(before[i] for before, _ in pairs),
                  median(this[i] / before[i] for before, this in pairs),
                  min(this[i] / before[i] for before, this in pairs),
                  max(this[i] / before[i] for before, this in pairs)))
    print('plan, end to end, peak %.0f MiB against %.0f MiB (previous)' % (
        max(this[2] for _, this in pairs),
        max(before[2] for before, _ in pairs)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('cluster')
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--end-to-end', action='store_true')
    parser.add_argument('--previous', metavar='DIR',
                        help='with --end-to-end: another checkout, in turn')
    parser.add_argument('--no-phases', action='store_true',
                        help='only the end-to-end runs')
    args = parser.parse_args(argv)
    if not args.no_phases:
        runs = [phases(args.cluster) for _ in range(args.repeat)]
        for name in runs[0]:
            print('%-20s %7.3f s' % (name, statistics.median(
                run[name] for run in runs)))
        print('%-20s %7.0f MiB' % ('peak RSS', resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024.0))
    if args.end_to_end and args.previous:
        paired(args.cluster, os.path.abspath(args.previous), args.repeat)
    elif args.end_to_end:
        plans = [end_to_end(args.cluster) for _ in range(args.repeat)]
        print('%-20s %7.3f s, peak %.0f MiB' % (
            'plan, end to end', statistics.median(p[0] for p in plans),
            max(p[2] for p in plans)))


if __name__ == '__main__':
    main()
