"""The reference pages match the code: the example files stay valid, and
the configuration reference lists exactly the declared settings."""

import pathlib
import re
import textwrap
import unittest

import yaml

from osc_leveller import sphinxext
from osc_leveller.cloud import libvirt
from osc_leveller.cloud import measure
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.planning import report
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as opts

REFERENCE = pathlib.Path(__file__).parents[2] / 'doc' / 'source' / 'reference'
USER_GUIDE = REFERENCE.parent / 'user' / 'index.rst'
EXAMPLES = REFERENCE / 'examples'


class TestDocExamples(unittest.TestCase):
    def test_example_plan_is_the_plan_of_the_example_snapshot(self):
        snap = snapshot_io.load(str(EXAMPLES / 'snapshot.json'))
        documented = plan_mod.read(str(EXAMPLES / 'plan.json'))
        fresh = planner.make_plan(snap, opts.PlannerOptions())
        self.assertEqual(plan_mod.fingerprint(snap), documented.fingerprint)
        self.assertEqual(fresh.moves, documented.moves)

    def test_example_plan_draws_on_its_snapshot(self):
        # report examples/plan.json --snapshot examples/snapshot.json
        snap = snapshot_io.load(str(EXAMPLES / 'snapshot.json'))
        documented = plan_mod.read(str(EXAMPLES / 'plan.json'))
        drawn = report.of_file(snap, documented)
        self.assertEqual((None, False), (drawn.drawn_at, drawn.changed))
        # Every move in its domain's section.
        self.assertEqual(sorted(m.server_id for m in documented.moves),
                         sorted(m.server_id for d in drawn.domains
                                for m in d.moves))


class TestUserGuide(unittest.TestCase):
    def test_the_windows_example_is_valid_settings(self):
        page = USER_GUIDE.read_text()
        section = page.split('\nMaintenance windows\n---')[1]
        block = section.split('.. code-block:: yaml\n\n')[1].split('\n\n')[0]
        document = yaml.safe_load(textwrap.dedent(block).replace(
            'auth: ...', 'auth: {}'))
        flat = config.flatten(document['clouds']['mycloud']['leveller'],
                              'user guide')
        self.assertEqual('Europe/Berlin', flat['windows.time_zone'])
        self.assertEqual(4, len(flat['windows.blackout']))
        self.assertEqual(2, len(flat['windows.allowed']))


# A row of a list-table of four columns.
ROW = re.compile(r'^   \* - (.*)\n     - (.*)\n     - (.*)\n     - (.*)$', re.M)
WORDS = {'(none)': None, '(empty)': []}


def _settings_rows(page):
    """(setting, type, default, meaning) of each row of the table of
    settings, as the docs build makes it (osc_leveller.sphinxext)."""
    section = sphinxext.expand(page).split('\nSettings\n========\n')[1]
    section = section.split('\nPrometheus queries\n')[0]
    return [match.groups() for match in ROW.finditer(section)][1:]


def _shown(text):
    """A default as the table shows it, read back as YAML."""
    if text in WORDS:
        return WORDS[text]
    return yaml.safe_load(text.strip('`'))


class TestConfigurationReference(unittest.TestCase):
    def setUp(self):
        self.page = (REFERENCE / 'configuration.rst').read_text()

    def test_the_docs_build_makes_the_table(self):
        conf = {}
        exec((REFERENCE.parent / 'conf.py').read_text(), conf)
        self.assertIn('osc_leveller.sphinxext', conf['extensions'])
        self.assertEqual(1, self.page.split('\n').count(sphinxext.MARKER))

    def test_exactly_the_declared_settings(self):
        rows = _settings_rows(self.page)
        self.assertEqual(['``%s``' % k.name for k in config.KEYS],
                         [row[0] for row in rows])
        for key, (_, kind, default, meaning) in zip(config.KEYS, rows):
            with self.subTest(key.name):
                self.assertEqual(key.help, meaning)
                self.assertEqual(
                    ' | '.join(key.choices) if key.kind == config.CHOICE
                    else key.kind + (', secret' if key.secret else ''), kind)
                if key.kind == config.QUERY:
                    self.assertEqual('see below', default)
                else:
                    self.assertEqual(list(key.default) if isinstance(
                        key.default, tuple) else key.default, _shown(default))

    def test_plan_format_names_the_options_a_plan_records(self):
        page = (REFERENCE / 'plan-format.rst').read_text()
        cell = page.split('   * - ``options``')[1].split('   * - ')[0]
        self.assertCountEqual(opts.DEFAULTS, re.findall(r'``(\w+)``', cell))

    def test_every_default_query_is_shown(self):
        for metric, query in measure.HOST_QUERIES.items():
            self.assertIn("%s: '%s'" % (metric, query), self.page)
        for profile in libvirt.PROFILES.values():
            for metric, query in profile.queries.items():
                self.assertIn(query, self.page.replace('\n     ', ' '))
