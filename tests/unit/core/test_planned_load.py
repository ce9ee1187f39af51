"""Every kind of plan is made on the load apply re-checks it on.

With prometheus.forecast_days or prometheus.lasting, the load planned on is
the forecast blend and the load that lasted (core/load/forecast.py planned()).
apply re-checks each move on that load (core/run/executor.py). A drain or a
path to a target placement planned on the load of the moment would pass
the ceiling where apply refuses it, or refuse what apply would run.
"""

import dataclasses
import unittest

from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import drain
from osc_leveller.core.planning import paths
from osc_leveller.core.rules import checks
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

# Below what hv2 reaches with the mover on the load to come (0.42), above
# what hv3 reaches (0.37): see the worlds.
CEILING = 0.4


def _world(hv2, extra=()):
    hyps = [b.hypervisor('hv1', vcpus=8, cpu=0.3, ram=0.2),
            hv2,
            b.hypervisor('hv3', vcpus=8, cpu=0.4, ram=0.2)]
    mover = b.server('mover', 'hv1', vcpus=2, ram_gb=4, cpu=0.5, ram=0.5)
    return b.document(hyps, [mover] + list(extra))


def busy_ahead():
    """hv2 is the quietest now (10 % CPU) and busy in the hour ahead on
    past days (90 %): blended half and half, hv2 with the mover would score
    0.42 on the load to come (0.22 now), hv3 0.37."""
    hv2 = b.hypervisor('hv2', vcpus=8, cpu=0.1, ram=0.2)
    hv2['metrics']['forecast'] = {'cpu': 0.9, 'ram': 0.2}
    doc = _world(hv2)
    doc['forecast'] = {'ahead': '1h', 'days': 7, 'weight': 0.5}
    return snapshot_io.parse(doc)


def burst_now():
    """hv2 runs a burst of the moment (8 vCPUs at 100 % now, 10 % over the
    last 3 h): above the ceiling now, the quietest on the load that
    lasted."""
    hv2 = b.hypervisor('hv2', vcpus=8, cpu=1.0, ram=0.2)
    hv2['metrics']['lasting'] = {'cpu': 1.0, 'ram': 0.2}
    burst = b.server('burst', 'hv2', vcpus=8, ram_gb=4, cpu=1.0, ram=0.5)
    burst['usage']['lasting'] = {'cpu': 0.1, 'ram': 0.5}
    hyps_doc = _world(hv2, [burst])
    for hyp in hyps_doc['hypervisors']:
        hyp['metrics'].setdefault('lasting', dict(hyp['metrics']))
    hyps_doc['servers'][0]['usage']['lasting'] = {'cpu': 0.5, 'ram': 0.5}
    hyps_doc['lasting'] = '3h'
    return snapshot_io.parse(hyps_doc)


def options(snap, **fields):
    return dataclasses.replace(opts.PlannerOptions(now=snap.taken_at),
                               ceiling=CEILING, **fields)


def rechecked(snap, moves, check, planner_options):
    """Each move's verdict as apply gives it, through the executor's view
    of the cloud, the moves before it made."""
    _, state, rules = executor._View(snap).read(None, None, [],
                                                planner_options)
    verdicts = []
    for move in moves:
        verdicts.append(check(move, snap, state, rules))
        state.apply(move.server_id, move.destination)
    return verdicts


class TestDrain(unittest.TestCase):
    def test_on_the_load_to_come(self):
        snap = busy_ahead()
        found = drain.plan_drain(snap, ['hv1'], options(snap))
        self.assertEqual(['hv3'], [m.destination for m in found.moves])
        self.assertEqual([None], rechecked(snap, found.moves,
                                           checks.drain(False),
                                           options(snap)))

    def test_on_the_load_that_lasted(self):
        snap = burst_now()
        found = drain.plan_drain(snap, ['hv1'], options(snap))
        self.assertTrue(found.complete, found.unplaced)
        self.assertEqual(['hv2'], [m.destination for m in found.moves])
        self.assertEqual([None], rechecked(snap, found.moves,
                                           checks.drain(False),
                                           options(snap)))


class TestTargetPlacement(unittest.TestCase):
    def test_on_the_load_to_come(self):
        snap = busy_ahead()
        with self.assertRaisesRegex(paths.PathError, 'ceiling 0.40'):
            paths.make_plan(snap, {'id-mover': 'hv2'}, options(snap))

    def test_on_the_load_that_lasted(self):
        snap = burst_now()
        plan = paths.make_plan(snap, {'id-mover': 'hv2'}, options(snap))
        self.assertEqual(['hv2'], [m.destination for m in plan.moves])
        self.assertEqual([None], rechecked(snap, plan.moves,
                                           checks.placement, options(snap)))
