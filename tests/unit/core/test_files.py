"""Files are read checked and written whole or not at all."""

import errno
import os
import stat
import tempfile
import unittest
from unittest import mock

from osc_leveller.core import files
from osc_leveller.core import options as opts
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import planner
from tests.unit import builders as b


class TestWriteAtomic(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.path = os.path.join(self.dir, 'plan.json')
        with open(self.path, 'w') as f:
            f.write('the old plan\n')
        os.chmod(self.path, 0o640)

    def test_a_failed_write_leaves_the_old_file(self):
        full = OSError(errno.ENOSPC, 'No space left on device')
        with mock.patch.object(files.os, 'fsync', side_effect=full):
            with self.assertRaises(files.FileError) as ctx:
                files.write_atomic(self.path, 'the new plan\n', 'plan file')
        self.assertEqual('cannot write plan file %s: No space left on device'
                         % self.path, str(ctx.exception))
        with open(self.path) as f:
            self.assertEqual('the old plan\n', f.read())
        self.assertEqual(['plan.json'], os.listdir(self.dir))  # no leftover

    def test_an_interrupted_write_leaves_the_old_file(self):
        with mock.patch.object(files.os, 'replace',
                               side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                files.write_atomic(self.path, 'the new plan\n', 'plan file')
        with open(self.path) as f:
            self.assertEqual('the old plan\n', f.read())
        self.assertEqual(['plan.json'], os.listdir(self.dir))

    def test_replaces_keeping_the_mode(self):
        files.write_atomic(self.path, 'the new plan\n', 'plan file')
        with open(self.path) as f:
            self.assertEqual('the new plan\n', f.read())
        self.assertEqual(0o640, stat.S_IMODE(os.stat(self.path).st_mode))

    def test_a_plan_that_cannot_be_written_keeps_the_old_one(self):
        hyps, servers = b.three_hosts()
        plan = planner.make_plan(b.snapshot(hyps, servers),
                                 opts.PlannerOptions())
        directory = os.path.join(self.dir, 'not-here', 'plan.json')
        with self.assertRaises(files.FileError) as ctx:
            plan_mod.write(plan, directory)
        self.assertIn('cannot write plan file %s: No such file or directory'
                      % directory, str(ctx.exception))
        # A plan whose figures cannot be written as JSON fails before the
        # file is touched.
        with mock.patch.object(plan_mod, 'to_document',
                               side_effect=ValueError('bad figure')):
            with self.assertRaises(ValueError):
                plan_mod.write(plan, self.path)
        with open(self.path) as f:
            self.assertEqual('the old plan\n', f.read())


class TestRead(unittest.TestCase):
    def test_errors_name_the_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            binary = os.path.join(tmp, 'x.json')
            with open(binary, 'wb') as f:
                f.write(b'{"a": "\xff\xfe"}')
            with self.assertRaises(files.FileError) as ctx:
                files.read_text(binary, 'plan file')
            self.assertEqual('plan file %s is not UTF-8 text (byte 7 is '
                             'not): a binary file?' % binary,
                             str(ctx.exception))
            with self.assertRaises(files.FileError) as ctx:
                files.read_text(tmp, 'plan file')
            self.assertIn('cannot read plan file %s: Is a directory' % tmp,
                          str(ctx.exception))
        with self.assertRaises(files.FileError) as ctx:
            files.parse_json('[' * 100000, 'deep.json')
        self.assertEqual('deep.json is nested too deeply to be a leveller '
                         'file', str(ctx.exception))
        with self.assertRaises(files.FileError) as ctx:
            files.parse_json('1' * 5000, 'long.json')
        self.assertIn('long.json is not valid JSON: Exceeds the limit',
                      str(ctx.exception))
