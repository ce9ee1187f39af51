"""Golden plans: prove that a restructuring or a speed-up keeps behaviour.

Writes, or compares byte for byte, what the planning code decides on the
demo snapshot and on generated clusters (benchmarks/generate.py):

- the plan documents (format osc-leveller-plan/1, without their creation
  time) of the planner with several option sets: the defaults (one cron
  run), levelling fully, fully by effect alone, CPU compatibility by
  features, and one set with RAM weighted over CPU;
- the drain of the two hypervisors with the most servers (evacuate), with
  and without cold-migrating stopped servers: moves, who stays and why;
- a target placement (plan --target): the fully levelled placement, and
  the two largest movable servers of those hypervisors swapped, with the
  path found or the reason none is;
- apply's re-checks of each of these in a dry run (every move checked
  against the state after the moves before it), move by move, with the
  options they were made with and with stricter ones that refuse some.

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
from osc_leveller.core.load import scoring  # noqa: E402
from osc_leveller.core.load import state as state_mod  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import drain  # noqa: E402
from osc_leveller.core.planning import paths  # noqa: E402
from osc_leveller.core.planning import plan as plan_mod  # noqa: E402
from osc_leveller.core.planning import planner  # noqa: E402
from osc_leveller.core.rules import checks  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.rules import policy  # noqa: E402
from osc_leveller.core.settings import config  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402

DEMO = os.path.join(os.path.dirname(HERE), 'osc_leveller', 'data',
                    'demo-snapshot.json')

CLUSTERS = [(20, 300, 1), (20, 300, 2), (100, 2000, 1), (100, 2000, 3),
            (500, 10000, 2)]
LARGE = [(1000, 50000, 1)]
OPTIONS = {
    'default': {},
    'full': {'max_moves': 100000},
    'fewest': {'max_moves': 100000, 'move_cost_gb': 1000000.0},
    'features': {'cpu_compatibility': 'features', 'max_moves': 60},
    'ram': {'weights': dict(config.DEFAULT_WEIGHTS, ram=3.0),
            'max_moves': 60},
}


def plans(clusters, demo=True):
    """(name, text) of every golden file, source by source."""
    with tempfile.TemporaryDirectory() as tmp:
        sources = [('demo', DEMO)] if demo else []
        for hosts, servers, seed in clusters:
            path = os.path.join(tmp, 'c-%d-%d-%d.json' % (hosts, servers,
                                                          seed))
            with open(path, 'w') as stream:
                json.dump(generate.generate(hosts, servers, seed), stream)
            sources.append(('%d-%d-s%d' % (hosts, servers, seed), path))
        for label, path in sources:
            snap = snapshot_io.load(path)
            for name, document in decisions(snap):
                # A plan names the file it was made from.
                text = json.dumps(document, indent=1, sort_keys=True)
                yield ('%s-%s.json' % (label, name),
                       text.replace(tmp, '{tmp}') + '\n')


def decisions(snap):
    """(name, document) of what the planning code decides on snap."""
    base = opts.PlannerOptions(now=snap.taken_at)
    full = None
    for label, fields in OPTIONS.items():
        options = dataclasses.replace(base, **fields)
        plan = planner.make_plan(snap, options)
        if label == 'full':
            full = plan
        yield label, dict(_plan_doc(plan), checks=dry_run(
            snap, options, plan.moves, checks.BalancePlan(plan.moves)),
            strict=dry_run(snap, strict(snap, options, plan.moves),
                           plan.moves, checks.BalancePlan(plan.moves)))
    # The busiest hypervisor and the busiest other one of its domain.
    crowded = sorted(snap.hypervisors, key=lambda h: (
        -len(snap.servers_on(h.name)), h.name))
    first = crowded[0]
    second = next((h for h in crowded[1:] if scoring.domain_of(h, True) ==
                   scoring.domain_of(first, True)), crowded[1])
    names = [first.name, second.name]
    for cold in (False, True):
        found = drain.plan_drain(snap, names, base, cold)
        yield 'drain-%s' % ('cold' if cold else 'live'), {
            'moves': [plan_mod._move_doc(m) for m in found.moves],
            'kinds': found.methods,
            'stay': [[s.id, why] for s, why in found.stay],
            'unplaced': [[s.id, why] for s, why in found.unplaced],
            'no_headroom': [list(d) for d in found.no_headroom],
            'checks': dry_run(snap, base, found.moves, checks.drain(cold)),
            'strict': dry_run(snap, strict(snap, base, found.moves),
                              found.moves, checks.drain(cold))}
    levelled = {s.id: s.hypervisor for s in snap.servers}
    for move in full.moves:
        levelled[move.server_id] = move.destination
    swapped = {s.id: s.hypervisor for s in snap.servers}
    rules = filters.Rules(snap, base)
    largest = []
    for name in names:
        movable = [s for s in snap.servers_on(name)
                   if policy.PLACEMENT.why_not(s, rules) is None]
        if movable:
            largest.append(max(movable, key=lambda s: (s.ram_gb, s.id)))
    if len(largest) == 2:
        a, b = largest
        swapped[a.id], swapped[b.id] = b.hypervisor, a.hypervisor
    for label, targets in (('target-levelled', levelled),
                           ('target-swap', swapped)):
        try:
            plan = paths.make_plan(snap, targets, base)
        except paths.PathError as exc:
            yield label, {'error': str(exc)}
            continue
        yield label, dict(_plan_doc(plan), checks=dry_run(
            snap, base, plan.moves, checks.placement), strict=dry_run(
            snap, strict(snap, base, plan.moves), plan.moves, checks.placement))


def _plan_doc(plan):
    document = plan_mod.to_document(plan)
    document.pop('created_at', None)
    return document


def strict(snap, options, moves):
    """Options under which some of the moves no longer hold: a low
    ceiling, the first move's source and the last move's destination
    excluded, the project of a middle move's server excluded when it has
    one."""
    if not moves:
        return options
    project = snap.server(moves[len(moves) // 2].server_id).project_id
    return dataclasses.replace(
        options, ceiling=0.5,
        exclude_projects=frozenset([project] if project else []),
        exclude_hosts=frozenset([moves[0].source, moves[-1].destination]))


def dry_run(snap, options, moves, check):
    """Each move's re-check verdict, the moves before it made."""
    rules = filters.Rules(snap, options)
    state = state_mod.new_state(snap, options.weights)
    verdicts = []
    for move in moves:
        reason = check(move, snap, state, rules)
        verdicts.append(reason)
        if reason is None:
            state.apply(move.server_id, move.destination)
    return verdicts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('action', choices=('write', 'check'))
    parser.add_argument('directory')
    parser.add_argument('--large', action='store_true')
    parser.add_argument('--no-demo', dest='demo', action='store_false')
    args = parser.parse_args(argv)
    clusters = CLUSTERS + (LARGE if args.large else [])
    os.makedirs(args.directory, exist_ok=True)
    differ = 0
    for name, text in plans(clusters, args.demo):
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
