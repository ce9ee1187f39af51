"""As root, no output replaces a device, a FIFO, a socket or a symbolic
link, and none is written before it is checked.

As root the rename of an atomic write would turn /dev/null into a regular
file; so the test runs itself under ``unshare --mount --propagation
private``, mounts a tmpfs over /dev there and makes the usual nodes with
mknod: the real /dev is never touched. In there it runs every output
option at every kind of node (badinput.OUTPUTS, through the openstack
shell in process, judged as the corpus of bad inputs judges), and the
issue's cases through the real ``openstack`` executable, then checks that
each node is still what it was.

Not root, or no unshare that may mount: the test skips, unless
OSC_LEVELLER_REQUIRE_NAMESPACE is set (CI, which runs as root), where that
fails it.

    python -m tests.unit.test_output_paths RESULT.json

is the part that runs in the namespace.
"""

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

REQUIRE = 'OSC_LEVELLER_REQUIRE_NAMESPACE'
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NAMESPACE = ['unshare', '--mount', '--propagation', 'private', '--']
# The nodes of the namespace's /dev: name -> (kind, how messages say it).
CHARACTER = 'is a character device, not a regular file'
NODES = {
    'null': ('c', 1, 3), 'zero': ('c', 1, 5), 'full': ('c', 1, 7),
    'random': ('c', 1, 8), 'urandom': ('c', 1, 9), 'tty': ('c', 5, 0),
    'loop0': ('b', 7, 0),
}
LINKS = {'fd': '/proc/self/fd', 'stdin': '/proc/self/fd/0',
         'stdout': '/proc/self/fd/1', 'stderr': '/proc/self/fd/2',
         'leveller-null': '/dev/null'}
# Each path an output is pointed at, and what the message says of it.
TARGETS = (
    ('/dev/null', [], CHARACTER),
    ('/dev/zero', [], CHARACTER),
    ('/dev/full', [], CHARACTER),
    ('/dev/loop0', [], 'is a block device, not a regular file'),
    ('/dev/stdout', [], 'is a symbolic link to /proc/self/fd/1; set '
                        'output.follow_symlinks'),
    ('/dev/leveller-null', ['--follow-symlinks'],
     'is a symbolic link to /dev/null, a character device, not a regular '
     'file'),
    ('/dev/leveller-fifo', [], 'is a FIFO (named pipe), not a regular file'),
    ('/dev/log', [], 'is a socket, not a regular file'),
    ('/dev/shm', [], 'is a directory, not a regular file'),
)
# The real executable: (argv after openstack, exit code, the message,
# whether standard output is the plan).
EXECUTABLE = (
    (['leveller', 'plan', '--snapshot', 'demo', '--output-file',
      '/dev/stdout'], 1, '--output-file /dev/stdout: is a symbolic link to '
     '/proc/self/fd/1', False),
    (['leveller', 'score', '--snapshot', 'demo', '--report', '/dev/zero'],
     1, '--report /dev/zero: ' + CHARACTER, False),
    (['leveller', 'apply', '--batch', '1', '--metrics-file', '/dev/null'],
     1, '--metrics-file /dev/null: ' + CHARACTER, False),
    (['leveller', 'plan', '--snapshot', 'demo', '--output-file', '-', '-f',
      'json'], 0, 'saved to standard output', True),
)


def _refusal():
    """Why the test cannot run here, or None."""
    if os.geteuid() != 0:
        return 'not root'
    if shutil.which('unshare') is None:
        return 'no unshare (util-linux)'
    probe = subprocess.run(NAMESPACE + ['mount', '-t', 'tmpfs', 'tmpfs',
                                        '/dev'],
                           capture_output=True, text=True)
    if probe.returncode:
        return 'unshare --mount cannot mount a tmpfs over /dev: %s' % (
            probe.stderr.strip() or 'exit %d' % probe.returncode)
    return None


def _node(path):
    """What a node is: (type and mode, device, inode, link target)."""
    info = os.lstat(path)
    return [info.st_mode, info.st_rdev, info.st_ino,
            os.readlink(path) if stat.S_ISLNK(info.st_mode) else None]


def _make_dev():
    """A tmpfs over /dev, in this mount namespace only, and its nodes."""
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'mode=0755,size=1m',
                    'tmpfs', '/dev'], check=True)
    for name, (kind, major, minor) in NODES.items():
        os.mknod('/dev/' + name, 0o666 | (
            stat.S_IFCHR if kind == 'c' else stat.S_IFBLK),
            os.makedev(major, minor))
        os.chmod('/dev/' + name, 0o666)
    for name, target in LINKS.items():
        os.symlink(target, '/dev/' + name)
    os.mkfifo('/dev/leveller-fifo')
    os.mkdir('/dev/shm')
    os.mkdir('/dev/pts')
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    log.bind('/dev/log')  # syslog's: a socket that stays a node when closed
    log.close()


def inside(result_path):
    """Run in the namespace: every case, and the nodes before and after."""
    _make_dev()
    paths = ['/dev/' + n for n in sorted(os.listdir('/dev'))]
    before = {p: _node(p) for p in paths}
    from tests.unit import badinput  # after /dev is made: it opens nodes

    cases = []
    for command, option in badinput.OUTPUTS:
        for path, more, what in TARGETS:
            cases.append(badinput.output_case(
                command + [option, path] + more,
                ('%s %s: %s' % (option, path, what),)))
    results = badinput.run(cases)
    runs = []
    executable = os.path.join(os.path.dirname(sys.executable), 'openstack')
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env['HOME'] = home
        for argv, code, message, plan in EXECUTABLE:
            done = subprocess.run([executable] + argv, capture_output=True,
                                  text=True, env=env, cwd=home)
            runs.append({'argv': argv, 'code': done.returncode,
                         'stdout': done.stdout, 'stderr': done.stderr,
                         'home': sorted(os.listdir(home))})
    after = {p: _node(p) for p in paths}
    with open(result_path, 'w') as f:
        json.dump({
            'cases': [{'case': str(r.case), 'problems': r.problems,
                       'code': r.code, 'message': r.message[-500:]}
                      for r in results],
            'runs': runs,
            'changed': sorted(p for p in paths if before[p] != after[p]),
            'nodes': len(paths)}, f)


class TestOutputPathsAsRoot(unittest.TestCase):
    def setUp(self):
        refusal = _refusal()
        if refusal and os.environ.get(REQUIRE):
            self.fail('%s is set, but %s' % (REQUIRE, refusal))
        if refusal:
            self.skipTest('%s: set %s to make this a failure' % (
                refusal, REQUIRE))

    def test_no_output_replaces_a_node(self):
        real_null = _node('/dev/null')
        with tempfile.TemporaryDirectory() as tmp:
            result = os.path.join(tmp, 'result.json')
            done = subprocess.run(
                NAMESPACE + [sys.executable, '-m', 'tests.unit.'
                             'test_output_paths', result],
                cwd=ROOT, capture_output=True, text=True, timeout=600)
            self.assertEqual(0, done.returncode, done.stderr[-3000:])
            with open(result) as f:
                found = json.load(f)
        self.assertEqual([], found['changed'])
        self.assertGreaterEqual(found['nodes'], 15)
        cases = found['cases']
        self.assertEqual(len(TARGETS) * 7, len(cases))
        self.assertEqual([], [c for c in cases if c['problems']])
        for run, (argv, code, message, plan) in zip(found['runs'],
                                                    EXECUTABLE):
            with self.subTest(argv=' '.join(argv)):
                self.assertEqual(code, run['code'], run['stderr'])
                self.assertIn(message, run['stderr'])
                self.assertNotIn('Traceback', run['stderr'])
                if plan:
                    self.assertEqual('osc-leveller-plan/1',
                                     json.loads(run['stdout'])['format'])
                else:
                    self.assertEqual('', run['stdout'])
                    # No journal, no lock.
                    self.assertNotIn('.local', run['home'])
        # The namespace's /dev was its own.
        self.assertEqual(real_null, _node('/dev/null'))
        self.assertTrue(stat.S_ISCHR(os.lstat('/dev/null').st_mode))


if __name__ == '__main__':
    inside(sys.argv[1])
