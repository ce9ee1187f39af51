"""The example files shown in the format reference must stay valid."""

import pathlib
import unittest

from osc_leveller.cloud import libvirt
from osc_leveller.cloud import measure
from osc_leveller.core import config
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


def _reference_rows():
    """The rows the configuration reference must hold, one per setting."""
    for key in config.KEYS:
        value = key.default
        if '.queries.' in key.name or '.server_queries.' in key.name:
            default = 'see below'
        elif value is None:
            default = '(none)'
        elif value == ():
            default = '(empty)'
        elif isinstance(value, tuple):
            default = '``[%s]``' % ', '.join(value)
        elif isinstance(value, bool):
            default = '``%s``' % str(value).lower()
        elif isinstance(value, float):
            default = '``%g``' % value
        else:
            default = '``%s``' % value
        kind = (' | '.join(key.choices) if key.kind == config.CHOICE else
                key.kind + (', secret' if key.secret else ''))
        yield '\n'.join(('   * - ``%s``' % key.name, '     - ' + kind,
                         '     - ' + default, '     - ' + key.help))


class TestConfigurationReference(unittest.TestCase):
    def test_every_setting_with_its_default(self):
        page = (EXAMPLES.parent / 'configuration.rst').read_text()
        for row in _reference_rows():
            self.assertIn(row, page)
        for metric, query in measure.HOST_QUERIES.items():
            self.assertIn("%s: '%s'" % (metric, query), page)
        for profile in libvirt.PROFILES.values():
            for metric, query in profile.queries.items():
                self.assertIn(query, page.replace('\n     ', ' '))
