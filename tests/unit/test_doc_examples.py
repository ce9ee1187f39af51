"""The example files shown in the format reference must stay valid."""

import pathlib
import unittest

from osc_leveller.core import options as opts
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import planner
from osc_leveller.core import snapshot as snapshot_io

EXAMPLES = (pathlib.Path(__file__).parents[2] / 'doc' / 'source' /
            'reference' / 'examples')


class TestDocExamples(unittest.TestCase):
    def test_example_plan_is_the_plan_of_the_example_snapshot(self):
        snap = snapshot_io.load(str(EXAMPLES / 'snapshot.json'))
        documented = plan_mod.read(str(EXAMPLES / 'plan.json'))
        fresh = planner.make_plan(snap, opts.PlannerOptions())
        self.assertEqual(plan_mod.fingerprint(snap), documented.fingerprint)
        self.assertEqual(fresh.moves, documented.moves)
