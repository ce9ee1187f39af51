"""Files are read checked and written whole or not at all."""

import errno
import os
import stat
import tempfile
import unittest
from unittest import mock

from osc_leveller.core.model import files
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import options as opts
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

    def test_json_is_written_sorted_and_read_back_equal(self):
        document = {'b': [1, 2.5, None], 'a': {'z': 'h\u00e9', 'y': True}}
        files.write_atomic(self.path, files.dump_json(
            document, 'snapshot file', self.path), 'snapshot file')
        with open(self.path, encoding='utf-8') as f:
            text = f.read()
        self.assertLess(text.index('"a"'), text.index('"b"'))
        self.assertTrue(text.endswith('}\n'))
        self.assertEqual((document, True),
                         files.read_json(self.path, 'snapshot file'))

    def test_json_that_cannot_be_written_keeps_the_old_file(self):
        with self.assertRaises(files.FileError) as ctx:
            files.dump_json({'total': 2 ** 70}, 'snapshot file', self.path)
        self.assertIn('cannot write snapshot file %s: ' % self.path,
                      str(ctx.exception))
        with open(self.path) as f:
            self.assertEqual('the old plan\n', f.read())
        self.assertEqual(['plan.json'], os.listdir(self.dir))

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


class TestReadJson(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, 's.json')

    def read(self, content, **kw):
        with open(self.path, 'wb') as f:
            f.write(content)
        return files.read_json(self.path, 'snapshot file', **kw)

    def test_strict_json(self):
        self.assertEqual(({'a': [1, 2.5, '\u00e9']}, True),
                         self.read(b'{"a": [1, 2.5, "\\u00e9"]}'))

    def test_what_only_python_reads(self):
        # Python's reader reads it, so that validation can name the field.
        for text, value in ((b'NaN', 'nan'), (b'-Infinity', '-inf'),
                            (b'1e400', 'inf'), (b'"\\ud800"', "'\\ud800'")):
            with self.subTest(text=text):
                document, strict = self.read(b'{"a": [%s]}' % text)
                self.assertFalse(strict)
                self.assertEqual(value, repr(document['a'][0]))

    def test_errors_are_python_readers(self):
        with self.assertRaises(files.FileError) as ctx:
            self.read(b'\xef\xbb\xbf{}')
        self.assertIn('s.json is not valid JSON: Unexpected UTF-8 BOM',
                      str(ctx.exception))
        with self.assertRaises(files.FileError) as ctx:
            self.read(b'{"a": "\xff"}')
        self.assertIn('is not UTF-8 text (byte 7 is not)', str(ctx.exception))
        with self.assertRaises(files.FileError) as ctx:
            self.read(b'[' * 100000 + b']' * 100000)
        self.assertIn('nested too deeply', str(ctx.exception))


class TestSizeLimit(unittest.TestCase):
    def test_a_file_above_the_limit_is_not_read(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'big.json')
            with open(path, 'wb') as f:
                f.truncate(3 * files.MiB)  # sparse: no disk used
            with mock.patch('builtins.open', wraps=open) as opened:
                with self.assertRaises(files.TooLarge) as ctx:
                    files.read_json(path, 'snapshot file', max_mb=2)
            self.assertEqual('snapshot file %s is 3 MiB, over the limit of 2 '
                             'MiB' % path, str(ctx.exception))
            self.assertEqual(1, opened.call_count)
            # At the limit it is read.
            with open(path, 'wb') as f:
                f.write(b' ' * (files.MiB - 3) + b'[1]')
            self.assertEqual(([1], True), files.read_json(
                path, 'snapshot file', max_mb=1))

    def test_a_stream_is_read_up_to_the_limit(self):
        # A device or a pipe has no size until read: /dev/zero never ends.
        with self.assertRaises(files.TooLarge) as ctx:
            files.read_text('/dev/zero', 'snapshot file', max_mb=1)
        self.assertEqual('snapshot file /dev/zero is over the limit of 1 MiB',
                         str(ctx.exception))


class TestWhatIsAtThePath(unittest.TestCase):
    """A write replaces a regular file or makes one, nothing else (the
    device nodes themselves: tests/unit/test_output_paths.py, as root in a
    mount namespace of its own)."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.real = self.at('real.json')
        with open(self.real, 'w') as f:
            f.write('the old plan\n')
        self.fifo = self.at('fifo')
        os.mkfifo(self.fifo)
        self.socket = self.at('socket')
        os.mknod(self.socket, stat.S_IFSOCK | 0o600)
        self.link = self.at('link')
        os.symlink('real.json', self.link)
        self.dangling = self.at('dangling')
        os.symlink('new.json', self.dangling)
        self.to_fifo = self.at('to-fifo')
        os.symlink(self.fifo, self.to_fifo)

    def at(self, name):
        return os.path.join(self.dir, name)

    def refused(self, path, follow=False):
        with self.assertRaises(files.FileError) as ctx:
            files.write_atomic(path, 'the new plan\n', 'plan file',
                               follow=follow)
        return str(ctx.exception)

    def test_a_regular_file_or_none_is_replaced(self):
        for path in (self.real, self.at('new.json')):
            files.write_atomic(path, 'the new plan\n', 'plan file')
            with open(path) as f:
                self.assertEqual('the new plan\n', f.read())

    def test_what_is_not_a_regular_file_is_refused_and_kept(self):
        for path, kind in ((self.fifo, 'a FIFO (named pipe)'),
                           (self.socket, 'a socket'),
                           (self.dir, 'a directory')):
            with self.subTest(kind=kind):
                before = os.lstat(path)
                self.assertEqual('plan file %s: is %s, not a regular file'
                                 % (path, kind), self.refused(path))
                after = os.lstat(path)
                self.assertEqual((before.st_ino, before.st_mode),
                                 (after.st_ino, after.st_mode))
        self.assertEqual(sorted(['real.json', 'fifo', 'socket', 'link',
                                 'dangling', 'to-fifo']),
                         sorted(os.listdir(self.dir)))  # no temporary left

    def test_a_link_is_refused_unless_followed(self):
        self.assertEqual(
            'plan file %s: is a symbolic link to real.json; set '
            'output.follow_symlinks (--follow-symlinks) to write through it'
            % self.link, self.refused(self.link))
        self.assertEqual('real.json', os.readlink(self.link))
        files.write_atomic(self.link, 'the new plan\n', 'plan file',
                           follow=True)
        self.assertEqual('real.json', os.readlink(self.link))
        with open(self.real) as f:
            self.assertEqual('the new plan\n', f.read())
        # A dangling link: the file it names is made.
        self.assertIn('is a symbolic link to new.json',
                      self.refused(self.dangling))
        files.write_atomic(self.dangling, 'the new plan\n', 'plan file',
                           follow=True)
        self.assertTrue(os.path.islink(self.dangling))
        with open(self.at('new.json')) as f:
            self.assertEqual('the new plan\n', f.read())
        # Followed to what is not a regular file: refused all the same.
        self.assertEqual(
            'plan file %s: is a symbolic link to %s, a FIFO (named pipe), '
            'not a regular file' % (self.to_fifo, self.fifo),
            self.refused(self.to_fifo, follow=True))
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.fifo).st_mode))

    def test_what_appears_while_it_is_written_is_not_replaced(self):
        # The path is looked at again right before the rename.
        sync = os.fsync

        def fifo_meanwhile(fd):
            os.unlink(self.real)
            os.mkfifo(self.real)
            return sync(fd)

        with mock.patch.object(files.os, 'fsync', fifo_meanwhile):
            message = self.refused(self.real)
        self.assertEqual('plan file %s: is a FIFO (named pipe), not a regular '
                         'file' % self.real, message)
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.real).st_mode))
        self.assertNotIn('.tmp', ' '.join(os.listdir(self.dir)))

    def test_the_same_file_by_inode_or_resolved_path(self):
        os.link(self.real, self.at('hard.json'))
        same = ((self.real, self.at('hard.json')),
                (self.real, self.link),
                (self.real, os.path.join(self.dir, '.', 'real.json')),
                (self.at('new.json'), self.dangling),  # neither exists
                (self.at('x.json'), os.path.join(self.dir, 'd', '..',
                                                 'x.json')))
        for one, two in same:
            with self.subTest(one=one, two=two):
                self.assertTrue(files.same_file(one, two))
        self.assertFalse(files.same_file(self.real, self.at('new.json')))
        self.assertFalse(files.same_file(self.real, self.fifo))
