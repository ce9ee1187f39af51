"""cronsim against the cron matcher of core/settings/windows.py (issue 32).

    pip install cronsim      # for this script only
    python benchmarks/cron_matcher.py [--repeat 21] [--json FILE]

The candidate hands each cron expression of a window to cronsim (Debian
cron's reading, by the author of Healthchecks) and keeps the rest of
windows.py: the time zone prefix, the ranges, the "for" length and the
refusal. Three measures:

1. the window tests (tests/unit/core/test_windows.py) and the corpus's bad
   windows (tests/unit/badinput.py) run against the candidate;
2. the minutes each of a set of windows covers over a year, ours against
   the candidate's, in zones whose clocks change;
3. what apply pays at each run: windows.schedule (reading the settings'
   windows) then windows.refusal (now, and until when over the 8-day
   horizon), ours and the candidate's in turn, medians.
"""

import argparse
import dataclasses
import datetime
import os
import statistics
import sys
import time
import unittest
from unittest import mock

import cronsim
import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import stamp  # noqa: E402
from osc_leveller.core.model import errors  # noqa: E402
from osc_leveller.core.settings import windows  # noqa: E402

UTC = datetime.timezone.utc
MINUTE = windows.MINUTE
OURS = windows.parse


@dataclasses.dataclass(frozen=True)
class CronsimWindow:
    """A cron window whose matches cronsim finds."""
    text: str
    tz: datetime.tzinfo
    expression: str
    length: datetime.timedelta = None

    __str__ = windows.Window.__str__

    def _times(self, first, end):
        """The UTC instants of the matches in [first, end)."""
        start = (first - datetime.timedelta(seconds=1)).astimezone(self.tz)
        for match in cronsim.CronSim(self.expression, start):
            instant = match.astimezone(UTC)
            if instant >= end:
                return
            # Wall-clock iteration around a change of the clocks may
            # answer a time before the start.
            if instant >= first:
                yield instant

    def _starts(self, first, count):
        starts = [False] * count
        for instant in self._times(first, first + count * MINUTE):
            starts[int((instant - first) / MINUTE)] = True
        return starts

    def covered(self, first, count):
        if self.length is None:
            return self._starts(first, count)
        back = int(self.length / MINUTE) - 1
        covered = [False] * count
        for instant in self._times(first - back * MINUTE,
                                   first + count * MINUTE):
            i = int((instant - first) / MINUTE)
            lo, hi = max(i, 0), min(i + back + 1, count)
            covered[lo:hi] = [True] * max(hi - lo, 0)
        return covered


def parse(text, default_zone='UTC'):
    """windows.parse with cron expressions read by cronsim."""
    if not isinstance(text, str) or ':' in text:
        return OURS(text, default_zone)
    line, tz_name = text.strip(), default_zone
    prefix = windows._PREFIX.fullmatch(line)
    if prefix:
        tz_name, line = prefix.groups()
    try:
        tz = windows.zone(tz_name)
    except windows.WindowError as exc:
        raise windows.WindowError('%s: %s' % (errors.quote(text), exc)) \
            from None
    expression, length = line, None
    head, sep, tail = line.rpartition(' for ')
    if sep:
        expression, length = head.strip(), windows._length(text, tail.strip())
    # cronsim takes a sixth field (seconds, first): five only here.
    if len(expression.split()) != 5:
        raise windows.WindowError(
            '%s: neither a time range ("Mon-Fri 08:00-18:00") nor a cron '
            'expression of five fields ("0 2 * * *", "0 22 * * 5 for 56h")'
            % errors.quote(text))
    try:
        cronsim.CronSim(expression, datetime.datetime(2026, 1, 1, tzinfo=tz))
    except cronsim.CronSimError as exc:
        # "Bad day-of-week": the field, not the value, nor why.
        field = str(exc).replace('Bad ', '').replace('-', ' ')
        raise windows.WindowError('%s: its %s field is not valid (crontab(5))'
                                  % (errors.quote(text), field)) from None
    except ValueError:  # int() of thousands of digits
        raise windows.WindowError('%s: not a cron expression'
                                  % errors.quote(text)) from None
    return CronsimWindow(text, tz, expression, length)


def run_tests():
    """[(test, why)] of the window tests that fail with the candidate."""
    from tests.unit.core import test_windows
    suite = unittest.defaultTestLoader.loadTestsFromModule(test_windows)
    result = unittest.TestResult()
    with mock.patch.object(windows, 'parse', parse):
        suite.run(result)
    failed = [(_short(test.id().split('.', 4)[-1]), _short(_error(why), 120))
              for test, why in result.failures + result.errors]
    return result.testsRun, failed


def _error(trace):
    """The line of a traceback that names the exception."""
    lines = trace.strip().splitlines()
    return next((line for line in lines if line.startswith((
        'AssertionError', 'WindowError'))), lines[-1])


def _short(text, most=80):
    return text if len(text) <= most else text[:most - 5] + '...' + text[-2:]


def run_corpus():
    """[(label, what the candidate did)] of the corpus's bad windows."""
    import yaml
    from osc_leveller.core.settings import config
    from tests.unit import badinput
    key = config.BY_NAME['windows.blackout']
    found = []
    for label, text in badinput._KIND_VALUES[config.WINDOWS]:
        with mock.patch.object(windows, 'parse', parse):
            try:
                config.check(key, yaml.safe_load(text), 'corpus')
                what = 'accepted'
            except config.ConfigError as exc:
                what = str(exc)
            except Exception as exc:  # a crash is what this looks for
                what = 'crashed: %s' % type(exc).__name__
        if 'bomb' not in label:
            found.append((label, what[:140]))
    return found


# Windows to compare, minute by minute; the zones change their clocks.
COMPARED = ('* 8-17 * * 1-5', '*/15 * * * *', '0 12 13 * 5',
            '0 22 * * 5 for 56h', '30 2 * * * for 1h', '0 2 * * 0,3 for 1d',
            '30 */2 * * * for 10m', '*/30 2 * * * for 10m',
            '0 * * * * for 90m', '* 2 * * *', '0-59 2 * * *',
            '15 */7 25 10 * for 9h')
ZONES = ('Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe')


def compare(year=2026):
    first = datetime.datetime(year, 1, 1, tzinfo=UTC)
    count = 365 * 1440
    rows = []
    for zone in ZONES:
        for text in COMPARED:
            ours = OURS(text, zone).covered(first, count)
            theirs = parse(text, zone).covered(first, count)
            differ = [i for i in range(count) if ours[i] != theirs[i]]
            days = sorted({(first + i * MINUTE).astimezone(
                windows.zone(zone)).strftime('%m-%d') for i in differ})
            rows.append({'zone': zone, 'window': text,
                         'covered (ours)': sum(ours),
                         'minutes that differ': len(differ),
                         'on': ', '.join(days)})
    return rows


# What apply reads at each run: (blackout, allowed, now, what it shows).
CASES = (
    ('a range, free now', ['Mon-Fri 08:00-18:00'], [],
     (2026, 11, 24, 20, 0)),
    ('cron, free now', ['* 8-17 * * 1-5'], [], (2026, 11, 24, 20, 0)),
    ('cron, in it: until when', ['* 8-17 * * 1-5'], [],
     (2026, 11, 24, 9, 15)),
    ('cron for 56h, free now', ['0 22 * * 5 for 56h'], [],
     (2026, 11, 24, 12, 0)),
    ('cron for 56h, in it', ['0 22 * * 5 for 56h'], [],
     (2026, 11, 28, 12, 0)),
    ('allowed cron for 3h, outside', [], ['0 2 * * * for 3h'],
     (2026, 11, 24, 12, 0)),
    ('every 15 min, in it', ['*/15 * * * *'], [], (2026, 11, 24, 9, 15)),
    ('no end in 8 days', ['0 * * * * for 90m'], [], (2026, 11, 24, 9, 0)),
    ('three blackouts and an allowed', ['0 22 * * 5 for 56h',
                                        '* 8-17 * * 1-5', '0 12 13 * 5'],
     ['0 1 * * * for 4h'], (2026, 11, 24, 9, 15)),
)
ZONE = 'Europe/Berlin'


def once(read, blackout, allowed, now):
    started = time.perf_counter()
    with mock.patch.object(windows, 'parse', read):
        found = windows.refusal(*windows.schedule(blackout, allowed, ZONE),
                                now)
    return time.perf_counter() - started, str(found)


def timing(repeat):
    rows = []
    for label, blackout, allowed, wall in CASES:
        now = datetime.datetime(*wall, tzinfo=windows.zone(ZONE))
        times = {'ours': [], 'cronsim': []}
        answers = set()
        for _ in range(repeat):
            for name, read in (('ours', OURS), ('cronsim', parse)):
                took, answer = once(read, blackout, allowed, now)
                times[name].append(took)
                answers.add((name, answer))
        ours, theirs = (statistics.median(times[n]) * 1000
                        for n in ('ours', 'cronsim'))
        rows.append({'case': label, 'ours ms': round(ours, 3),
                     'cronsim ms': round(theirs, 3),
                     'cronsim / ours': round(theirs / ours, 2),
                     'same answer': len({a for _, a in answers}) == 1})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeat', type=int, default=21)
    parser.add_argument('--json', metavar='FILE')
    args = parser.parse_args(argv)
    ran, failed = run_tests()
    print('## The window tests with cronsim: %d of %d fail\n'
          % (len(failed), ran))
    print(tabulate.tabulate(failed, ('test', 'why'), tablefmt='github'))
    corpus = run_corpus()
    print('\n## The corpus\'s bad windows with cronsim\n')
    print(tabulate.tabulate(corpus, ('case', 'answer'), tablefmt='github'))
    compared = compare()
    print('\n## Minutes covered over 2026, ours against cronsim\'s\n')
    print(tabulate.tabulate(compared, 'keys', tablefmt='github'))
    timed = timing(args.repeat)
    print('\n## schedule + refusal as apply calls them, medians of %d\n'
          % args.repeat)
    print(tabulate.tabulate(timed, 'keys', tablefmt='github'))
    if args.json:
        stamp.write(args.json, stamp.stamped(**{
            'cronsim': cronsim_version(), 'repeat': args.repeat,
            'tests run': ran, 'tests failed': failed, 'corpus': corpus,
            'compared': compared, 'timing': timed}))


def cronsim_version():
    from importlib import metadata
    return metadata.version('cronsim')


if __name__ == '__main__':
    main()
