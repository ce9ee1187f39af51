"""The real `openstack` command, in a subprocess, with no cloud at all."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest


def openstack(*args):
    exe = shutil.which('openstack', path=os.path.dirname(sys.executable)) \
        or shutil.which('openstack')
    assert exe, 'the openstack command (python-openstackclient) is missing'
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    return subprocess.run([exe] + list(args), capture_output=True, text=True,
                          env=env, timeout=120)


class TestOpenStackShell(unittest.TestCase):
    def test_plan_demo_json(self):
        result = openstack('leveller', 'plan', '--snapshot', 'demo',
                           '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        moves = json.loads(result.stdout)
        self.assertEqual(14, len(moves))
        self.assertEqual(['#', 'Server', 'Source', 'Destination', 'Wave',
                          'Gain', 'Reason'], list(moves[0]))
        self.assertTrue(all(m['Reason'] for m in moves))
        self.assertIn('imbalance 0.092 -> ', result.stderr)

    def test_score_value_columns(self):
        result = openstack('leveller', 'score', '--snapshot', 'demo',
                           '-f', 'value', '-c', 'Hypervisor', '-c', 'Score')
        self.assertEqual(0, result.returncode, result.stderr)
        first = result.stdout.splitlines()[0].split()
        self.assertEqual('cmp-b12.cloud.example.net', first[0])
        self.assertGreater(float(first[1]), 0.5)

    def test_bad_input_is_a_clean_error(self):
        with tempfile.NamedTemporaryFile('w', suffix='.json') as f:
            f.write('{"format": "osc-leveller-snapshot/1"}')
            f.flush()
            result = openstack('leveller', 'plan', '--snapshot', f.name)
        self.assertEqual(1, result.returncode)
        self.assertIn('taken_at: is required', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        result = openstack('leveller', 'plan', '--snapshot', 'demo',
                           '--max-moves', 'lots')
        self.assertEqual(2, result.returncode)
        self.assertNotIn('Traceback', result.stderr)
