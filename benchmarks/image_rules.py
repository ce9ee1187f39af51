"""What the image rules cost the planner (core/rules/images.py).

A generated cluster (benchmarks/generate.py) is read from scalecloud, its
servers booted from --images Glance images (tools/scalecloud/images.py),
as the collector reads it; the planner then plans on that snapshot and on
the same snapshot without its images (which applies no image rule), in
turn, --repeat times after a warm-up, the garbage collector off while it
plans. CPU seconds of make_plan (default options), medians and the ratios
taken pair by pair::

    python benchmarks/image_rules.py --hosts 1000 --json FILE
"""

import argparse
import copy
import gc
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from osc_leveller.cloud import collect  # noqa: E402
from osc_leveller.core.model import snapshot  # noqa: E402
from osc_leveller.core.planning import planner  # noqa: E402
from osc_leveller.core.settings import options  # noqa: E402
from tools.scalecloud import cloud as scale  # noqa: E402


def documents(hosts, images, seed):
    """(the snapshot document as read, the same without its images)."""
    cluster = generate.generate(hosts, hosts * 50, seed)
    with scale.ScaleCloud(cluster, latency=0, concurrency=None,
                          images=images) as cloud:
        read = collect.Collector(cloud.connection()).collect()
    bare = copy.deepcopy(read)
    del bare['images']
    for server in bare['servers']:
        server.pop('image', None)
    return json.dumps(read), json.dumps(bare)


def plan_cpu(text):
    """(CPU seconds of make_plan, its moves) on a document's snapshot."""
    snap = snapshot.parse(json.loads(text))
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        made = planner.make_plan(snap, options.PlannerOptions())
        return time.process_time() - started, len(made.moves)
    finally:
        gc.enable()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--images', type=int, default=100)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--json', metavar='FILE')
    args = parser.parse_args(argv)
    texts = dict(zip(('with', 'without'), documents(
        args.hosts, args.images, args.seed)))
    seen = {'with': [], 'without': []}
    moves = {}
    for i in range(args.repeat + 1):
        # Each goes first in every other pair.
        for name in ('with', 'without') if i % 2 else ('without', 'with'):
            cpu, moves[name] = plan_cpu(texts[name])
            print('  %s images %d: %.3f s CPU, %d moves' % (
                name, i, cpu, moves[name]), flush=True)
            if i:  # the first pair warms up
                seen[name].append(cpu)
    ratios = [w / o for w, o in zip(seen['with'], seen['without'])]
    result = {
        'hypervisors': args.hosts, 'servers': args.hosts * 50,
        'images': args.images, 'pairs': args.repeat,
        'with_images_cpu_median_s': round(statistics.median(seen['with']), 3),
        'without_images_cpu_median_s': round(
            statistics.median(seen['without']), 3),
        'ratio_median': round(statistics.median(ratios), 3),
        'ratio_min_max': [round(min(ratios), 3), round(max(ratios), 3)],
        'moves': moves}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, 'w') as stream:
            json.dump(result, stream, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
