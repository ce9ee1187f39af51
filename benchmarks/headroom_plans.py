"""Does plan --keep-n-plus-one keep N+1, and what does it cost the plan?

    python benchmarks/headroom_plans.py [--hosts 40] [--servers 1600]
        [--seeds 1-8]

Per generated cluster (benchmarks/generate.py), plans with and without
keep_n_plus_one, then replays each plan move by move. After each move it
counts the hypervisors whose loss the N+1 check (core/rules/headroom.py, as
score --summary runs it) absorbed at the start and no longer absorbs:
"broken". Prints per cluster and option: moves, broken, the imbalance
before and after, and the planning time.
"""

import argparse
import dataclasses
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from osc_leveller.core.load import state as state_mod  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import planner  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.rules import headroom  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402


def absorbed(snapshot, state, rules):
    """{hypervisor: whether its servers could be placed on the others}."""
    members = headroom.domains(snapshot, rules)
    residents = headroom.residents(snapshot, state, members)
    found = {}
    for hyps in members.values():
        roomiest = sorted(hyps, key=lambda h: (-headroom.free_ram(h, state),
                                               h.name))
        for hyp in hyps:
            found[hyp.name] = not headroom.pack((hyp,), roomiest, residents,
                                                state, rules)
    return found


def seeds(text):
    first, _, last = text.partition('-')
    return range(int(first), int(last or first) + 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=40)
    parser.add_argument('--servers', type=int, default=1600)
    parser.add_argument('--seeds', type=seeds, default=seeds('1-8'))
    args = parser.parse_args(argv)
    totals = {}
    for seed in args.seeds:
        snapshot = snapshot_io.parse(generate.generate(
            args.hosts, args.servers, seed=seed))
        base = opts.PlannerOptions(now=snapshot.taken_at)
        rules = filters.Rules(snapshot, base)
        start = absorbed(snapshot, state_mod.new_state(snapshot), rules)
        for keep in (False, True):
            options = dataclasses.replace(base, keep_n_plus_one=keep)
            cpu = time.process_time()
            plan = planner.make_plan(snapshot, options)
            cpu = time.process_time() - cpu
            state = state_mod.new_state(snapshot)
            broken = 0
            for move in plan.moves:
                state.apply(move.server_id, move.destination)
                now = absorbed(snapshot, state, rules)
                broken += sum(start[h] and not now[h] for h in start)
            name = 'keep_n_plus_one' if keep else 'without'
            total = totals.setdefault(name, [0, 0, 0.0])
            total[0] += len(plan.moves)
            total[1] += broken
            total[2] += cpu
            print('seed %d  %-15s  %2d moves  broken %3d  imbalance %.3f -> '
                  '%.3f  plan cpu %.2f s  (%d of %d absorbed at the start)' % (
                      seed, name, len(plan.moves), broken,
                      plan.imbalance_before, plan.imbalance_after, cpu,
                      sum(start.values()), len(start)))
    for name, (moves, broken, cpu) in totals.items():
        print('all      %-15s %3d moves  broken %3d  plan cpu %.2f s' % (
            name, moves, broken, cpu))


if __name__ == '__main__':
    main()
