"""Names from the cloud reach a terminal as text, never as control.

A server, hypervisor or zone name may hold escape sequences (to clear the
screen, recolour, retitle the window, hide text) and C0 or C1 controls. The
table and every line on standard error show them without; -f json and
yaml keep them, escaped; -f value and csv print them as they are, for
scripts (doc/source/user/index.rst).
"""

import io
import json
import os
import re
import tempfile
import unittest

import yaml
from cliff import columns as cliff_columns

from osc_leveller.v1 import common
from tests.unit import builders as b
from tests.unit import test_entry_point

# What a terminal acts on: C0 but line ends, DEL, C1.
CONTROL = re.compile('[\x00-\x09\x0b-\x1f\x7f-\x9f]')
SERVER = 'web\x1b[1;31mRED\x1b[0m\x07'
OTHER = 'db\x85\x8dtwo\x7f'
HOT = 'hv1\x1b[2J\x1b[H'
ZONE = 'az\x1b]0;pwned\x07one'


def document():
    hyps, servers = b.three_hosts()
    names = {'hv1': HOT, 'hv3': 'hv3\x9b2J'}
    for hyp in hyps:
        hyp['name'] = names.get(hyp['name'], hyp['name'])
        hyp['availability_zone'] = ZONE
    for server in servers:
        server['hypervisor'] = names.get(server['hypervisor'],
                                         server['hypervisor'])
    servers[0]['name'], servers[1]['name'] = SERVER, OTHER
    return b.document(hyps, servers)


class TestPrintable(unittest.TestCase):
    def test_sequences_and_controls_go(self):
        for text, shown in (
                ('web\x1b[1;31mRED\x1b[0m', 'webRED'),  # CSI, SGR
                ('a\x1b]0;title\x07b', 'ab'),  # OSC ended by BEL
                ('a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b', 'alinkb'),
                ('x\x9b2Jy', 'xy'), ('x\x9d0;t\x9cy', 'xy'),  # C1 forms
                ('a\x1bPq#0;2;0;0;0\x1b\\b', 'ab'),  # DCS (sixel)
                ('esc\x1b(Bz', 'escz'), ('lone\x1b', 'lone'),
                ('c1\x85\x8d', 'c1'), ('del\x7f', 'del'), ('bell\x07', 'bell'),
                ('two\nlines\tand\rtab', 'two lines and tab'),
                ('surrogate\ud800', 'surrogate\\ud800'),
                ('ünïcode ✓ 日本', 'ünïcode ✓ 日本')):
            self.assertEqual(shown, common.printable(text), repr(text))

    def test_a_text_cell(self):
        cell = common.TerminalText(SERVER)
        self.assertEqual(SERVER, cell)  # rows read as they were
        self.assertIsInstance(cell, cliff_columns.FormattableColumn)
        self.assertEqual('webRED', cell.human_readable())
        self.assertEqual(SERVER, cell.machine_readable())

    def test_stderr_lines(self):
        app = type('App', (), {'stderr': io.StringIO()})()
        common.StderrWriter(app)('Held: %s: %s' % (ZONE, HOT))
        self.assertEqual('Held: azone: hv1\n', app.stderr.getvalue())


class TestTheShell(unittest.TestCase):
    """The real openstack command, offline, on a snapshot of such names."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, 'snapshot.json')
        with open(cls.path, 'w') as f:
            json.dump(document(), f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_plan(self, *flags):
        result = test_entry_point.openstack(
            'leveller', 'plan', '--snapshot', self.path, *flags)
        self.assertEqual(0, result.returncode, result.stderr)
        return result

    def test_table_and_stderr_carry_no_control(self):
        result = self.run_plan('--max-moves', '2')
        self.assertIsNone(CONTROL.search(result.stdout + result.stderr))
        self.assertIn('| webRED |', result.stdout)
        self.assertIn('| dbtwo  |', result.stdout)
        self.assertIn('hottest in azone/Gen1', result.stdout)
        score = test_entry_point.openstack(
            'leveller', 'score', '--snapshot', self.path, '--summary')
        self.assertIsNone(CONTROL.search(score.stdout + score.stderr))
        self.assertIn('azone/Gen1', score.stdout + score.stderr)

    def test_json_and_yaml_keep_them_escaped(self):
        result = self.run_plan('-f', 'json')
        self.assertIsNone(CONTROL.search(result.stdout))
        rows = json.loads(result.stdout)
        self.assertEqual([SERVER, OTHER], [r['Server'] for r in rows[:2]])
        self.assertEqual(HOT, rows[0]['Source'])
        result = self.run_plan('-f', 'yaml')
        self.assertIsNone(CONTROL.search(result.stdout))
        self.assertEqual(SERVER, yaml.safe_load(result.stdout)[0]['Server'])

    def test_value_is_as_the_cloud_names_it(self):
        # For scripts that match names exactly: documented.
        result = self.run_plan('-f', 'value', '-c', 'Server')
        self.assertEqual(SERVER, result.stdout.splitlines()[0])
        self.assertIsNone(CONTROL.search(result.stderr))


if __name__ == '__main__':
    unittest.main()
