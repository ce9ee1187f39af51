"""Golden plans: prove that a restructuring or a speed-up keeps behaviour.

Writes, or compares byte for byte, the plan documents (format
osc-leveller-plan/1, without their creation time) that the planner makes
on generated clusters (benchmarks/generate.py) with several option sets:
the defaults (one cron run), levelling fully, fully by effect alone, CPU
compatibility by features, and one set with RAM weighted over CPU.

    python benchmarks/golden.py write DIR [--large]
    python benchmarks/golden.py check DIR [--large]

--large adds 1,000 hypervisors / 50,000 servers (slow: minutes).
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from osc_leveller.core import options as opts  # noqa: E402
from osc_leveller.core import plan as plan_mod  # noqa: E402
from osc_leveller.core import planner  # noqa: E402
from osc_leveller.core import scoring  # noqa: E402
from osc_leveller.core import snapshot as snapshot_io  # noqa: E402

CLUSTERS = [(20, 300, 1), (20, 300, 2), (100, 2000, 1), (100, 2000, 3),
            (500, 10000, 2)]
LARGE = [(1000, 50000, 1)]
OPTIONS = {
    'default': {},
    'full': {'max_moves': 100000},
    'fewest': {'max_moves': 100000, 'move_cost_gb': 1000000.0},
    'features': {'cpu_compatibility': 'features', 'max_moves': 60},
    'ram': {'weights': dict(scoring.DEFAULT_WEIGHTS, ram=3.0),
            'max_moves': 60},
}


def plans(clusters):
    """(name, text) of every golden plan, cluster by cluster."""
    with tempfile.TemporaryDirectory() as tmp:
        for hosts, servers, seed in clusters:
            path = os.path.join(tmp, 'c.json')
            with open(path, 'w') as stream:
                json.dump(generate.generate(hosts, servers, seed), stream)
            snap = snapshot_io.load(path)
            for label, fields in OPTIONS.items():
                options = dataclasses.replace(
                    opts.PlannerOptions(), now=snap.taken_at, **fields)
                document = plan_mod.to_document(
                    planner.make_plan(snap, options))
                document.pop('created_at', None)
                # The plan names the file it was made from.
                text = json.dumps(document, indent=1, sort_keys=True)
                yield ('%d-%d-s%d-%s.json' % (hosts, servers, seed, label),
                       text.replace(tmp, '{tmp}') + '\n')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('action', choices=('write', 'check'))
    parser.add_argument('directory')
    parser.add_argument('--large', action='store_true')
    args = parser.parse_args(argv)
    clusters = CLUSTERS + (LARGE if args.large else [])
    os.makedirs(args.directory, exist_ok=True)
    differ = 0
    for name, text in plans(clusters):
        path = os.path.join(args.directory, name)
        if args.action == 'write':
            with open(path, 'w') as stream:
                stream.write(text)
            print('wrote', path)
            continue
        with open(path) as stream:
            same = stream.read() == text
        differ += not same
        print('same   ' if same else 'DIFFERS', name)
    return 1 if differ else 0


if __name__ == '__main__':
    sys.exit(main())
