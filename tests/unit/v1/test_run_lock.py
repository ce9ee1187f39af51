"""The run lock of apply and evacuate holds from before the first read of
the cloud to after the last move, against another process (a second cron
run), not only against this one."""

import os
import subprocess
import sys
import tempfile
import unittest

from osc_leveller.v1 import runfiles

# A second run taking the lock: exit 0 if it got it, 4 if refused.
_SECOND_RUN = '''
import sys
from osc_leveller.v1 import runfiles
try:
    runfiles.Lock(sys.argv[1]).acquire()
except runfiles.LockHeld as exc:
    print(exc)
    sys.exit(4)
'''


def second_run(path):
    """(took the lock, what it said): another process trying the lock."""
    result = subprocess.run([sys.executable, '-c', _SECOND_RUN, path],
                            capture_output=True, text=True, timeout=60)
    if result.returncode not in (0, 4):
        raise AssertionError(result.stderr)
    return result.returncode == 0, result.stdout.strip()


class TestLock(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, 'run', 'apply.lock')

    def test_held_from_acquire_to_release(self):
        self.assertEqual((True, ''), second_run(self.path))
        lock = runfiles.Lock(self.path).acquire()
        self.addCleanup(lock.release)
        self.assertEqual(
            (False, 'another leveller run holds the lock %s (process %d)' % (
                self.path, os.getpid())), second_run(self.path))
        with open(self.path) as f:
            self.assertEqual('%d\n' % os.getpid(), f.read())
        lock.release()
        self.assertEqual((True, ''), second_run(self.path))
