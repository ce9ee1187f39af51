"""Devclouds side by side (devcloud run --clouds N), without a cloud.

Each test process takes a devcloud of its own (functional/base.py), and the
plugin's functional tests are split between the processes by
tests/functional/workers.yaml, every module in exactly one of them.
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

import yaml

CODE = pathlib.Path(__file__).resolve().parents[2]
ROOT = CODE.parents[1]

# A test process: takes a devcloud, says which, and waits until told to end.
TAKER = textwrap.dedent('''
    import os, sys
    sys.path.insert(0, %r)
    from devcloud.tests.functional import base
    print(os.environ['DEVCLOUD_HOME'], os.environ['KEYSTONE_PORT'],
          base.PROMETHEUS, os.environ['HOME'], flush=True)
    sys.stdin.read()
''' % str(CODE.parent))


class TakingADevcloud(unittest.TestCase):

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.slots = pathlib.Path(tmp.name)
        for k, (keystone, prometheus) in enumerate(
                [(5000, 9090), (5200, 9290)], start=1):
            (self.slots / ('%d.env' % k)).write_text(
                'DEVCLOUD_HOME=/dc%d\nKEYSTONE_PORT=%d\nPROMETHEUS_PORT=%d\n'
                'HOME=/dc%d/home\n' % (k, keystone, prometheus, k))

    def start(self):
        process = subprocess.Popen(
            [sys.executable, '-c', TAKER], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, DEVCLOUD_SLOTS=str(self.slots)))
        self.addCleanup(process.wait)
        self.addCleanup(process.stdin.close)
        return process

    def test_each_process_its_own_and_no_more_than_there_are(self):
        first, second = self.start(), self.start()
        one = first.stdout.readline().split()
        two = second.stdout.readline().split()
        self.assertEqual([
            ['/dc1', '5000', 'http://127.0.0.1:9090', '/dc1/home'],
            ['/dc2', '5200', 'http://127.0.0.1:9290', '/dc2/home']],
            sorted([one, two]))
        third = self.start()
        third.stdin.close()
        self.assertNotEqual(0, third.wait())
        self.assertIn('every devcloud of %s is taken' % self.slots,
                      third.stderr.read())
        # One ends: its devcloud is free for the next.
        first.stdin.close()
        first.wait()
        self.assertEqual(one, self.start().stdout.readline().split())

    def test_without_slots_the_environment_is_kept(self):
        out = subprocess.run(
            [sys.executable, '-c', TAKER], input='', capture_output=True,
            text=True, check=True, env=dict(
                {k: v for k, v in os.environ.items() if k != 'DEVCLOUD_SLOTS'},
                DEVCLOUD_HOME='/mine', KEYSTONE_PORT='5000',
                PROMETHEUS_PORT='9999', HOME='/root')).stdout
        self.assertEqual(['/mine', '5000', 'http://127.0.0.1:9999', '/root'],
                         out.split())


class FunctionalWorkers(unittest.TestCase):

    def test_every_module_in_exactly_one_worker(self):
        with open(ROOT / 'tests' / 'functional' / 'workers.yaml') as f:
            workers = [[re.compile(r) for r in w['worker']]
                       for w in yaml.safe_load(f)]
        self.assertEqual(3, len(workers))
        modules = sorted(p.stem for p in
                         (ROOT / 'tests' / 'functional').glob('test_*.py'))
        self.assertGreater(len(modules), 10)
        for module in modules:
            test_id = 'tests.functional.%s.TestSomething.test_it' % module
            hits = [i for i, regexes in enumerate(workers)
                    if any(r.search(test_id) for r in regexes)]
            self.assertEqual(1, len(hits), '%s in workers %s' % (module, hits))
        # Both have work.
        for regexes in workers:
            self.assertTrue(any(
                r.search('tests.functional.%s.T.t' % m)
                for m in modules for r in regexes))
