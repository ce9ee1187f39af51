"""Every expected failure is a clean error that names its cause.

A seeded corpus of bad inputs (tests/unit/badinput.py): damaged and
mutated snapshot, plan, settings and target placement files, bad values of
every setting in every layer, bad flags, the collector's Nova, Placement
and Keystone requests answered with every fault of the stand-in cloud, and
Prometheus answers of the wrong shape, each run through the real openstack
shell. Each must exit with its documented code, with a short message that
names the file and field, the setting and its layer, or the endpoint; no
traceback, no exception past the command but the shell's CommandError, no
secret. Another seed: python -m tests.unit.badinput --seed N.
"""

import time
import unittest

from tests.unit import badinput

SEED = 1


class TestBadInput(unittest.TestCase):
    def test_every_bad_input_is_a_clean_error(self):
        cases = badinput.generate(SEED)
        started = time.monotonic()
        results = badinput.run(cases)
        line = badinput.totals(results, time.monotonic() - started)
        print(line)  # stestr and pytest keep it with the test's output
        for result in results:
            if badinput.known(result) and result.problems:
                print('known defect: %s: %s' % (result.case,
                                                badinput.known(result)))
        failed, stale = badinput.failures(results)
        report = [r.report() for r in failed] + [
            'known defect now clean, remove it from badinput.KNOWN: %s'
            % r.case for r in stale]
        self.assertFalse(report, '%d of %d bad inputs are not clean errors '
                         '(seed %s):\n%s\n%s' % (
                             len(report), len(results), SEED,
                             '\n'.join(report), line))
