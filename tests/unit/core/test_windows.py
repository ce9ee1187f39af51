import datetime
import unittest

from osc_leveller.core.settings import windows

UTC = datetime.timezone.utc
BERLIN = 'Europe/Berlin'


def utc(*args):
    return datetime.datetime(*args, tzinfo=UTC)


def berlin(*args, fold=0):
    """A Berlin wall time as a UTC instant."""
    return datetime.datetime(*args, tzinfo=windows.zone(BERLIN),
                             fold=fold).astimezone(UTC)


def inside(text, instant, zone=BERLIN):
    return windows.parse(text, zone).covered(instant, 1)[0]


def blackout(texts, now, zone=BERLIN, allowed=()):
    blackouts, allowed = windows.schedule(texts, allowed, zone)
    return windows.refusal(blackouts, allowed, now)


class TestRanges(unittest.TestCase):
    def test_weekday_range_in_its_time_zone(self):
        text = 'Mon-Fri 08:00-18:00'
        # Tuesday 2026-11-24; Berlin is UTC+1 in winter.
        self.assertTrue(inside(text, berlin(2026, 11, 24, 8, 0)))
        self.assertTrue(inside(text, berlin(2026, 11, 24, 17, 59)))
        self.assertFalse(inside(text, berlin(2026, 11, 24, 18, 0)))
        self.assertFalse(inside(text, berlin(2026, 11, 24, 7, 59)))
        self.assertFalse(inside(text, berlin(2026, 11, 28, 12, 0)))  # Sat
        # The same wall times in UTC are another hour.
        self.assertFalse(inside(text, utc(2026, 11, 24, 17, 30)))
        self.assertTrue(inside(text, utc(2026, 11, 24, 17, 30), 'UTC'))

    def test_crossing_midnight_ends_the_next_day(self):
        text = 'Fri 22:00-06:00'
        self.assertFalse(inside(text, berlin(2026, 11, 27, 21, 59)))
        self.assertTrue(inside(text, berlin(2026, 11, 27, 22, 0)))
        self.assertTrue(inside(text, berlin(2026, 11, 28, 5, 59)))  # Sat
        self.assertFalse(inside(text, berlin(2026, 11, 28, 6, 0)))
        self.assertFalse(inside(text, berlin(2026, 11, 28, 23, 0)))
        # Only Friday starts it: Thursday night is free.
        self.assertFalse(inside(text, berlin(2026, 11, 27, 3, 0)))

    def test_the_week_wraps(self):
        # Sunday night into Monday morning.
        self.assertTrue(inside('Sun 22:00-02:00', berlin(2026, 11, 30, 1, 0)))
        # A day range across the week's end: Sat, Sun, Mon.
        for day in (28, 29, 30):
            self.assertTrue(inside('Sat-Mon 10:00-11:00',
                                   berlin(2026, 11, day, 10, 30)))
        self.assertFalse(inside('Sat-Mon 10:00-11:00',
                                berlin(2026, 12, 1, 10, 30)))
        self.assertTrue(inside('sunday,Wed 00:00-24:00',
                               berlin(2026, 11, 29, 23, 59)))
        self.assertFalse(inside('sunday,Wed 00:00-24:00',
                                berlin(2026, 11, 30, 0, 0)))

    def test_without_days_every_day(self):
        for day in range(23, 30):
            self.assertTrue(inside('22:00-06:00', berlin(2026, 11, day, 23)))
            self.assertFalse(inside('22:00-06:00', berlin(2026, 11, day, 12)))

    def test_clocks_going_forward(self):
        # 2026-03-29 02:00 CET the clock jumps to 03:00 CEST (01:00 UTC).
        text = 'Sun 01:00-04:00'
        self.assertTrue(inside(text, utc(2026, 3, 29, 0, 59)))  # 01:59 CET
        self.assertTrue(inside(text, utc(2026, 3, 29, 1, 0)))  # 03:00 CEST
        found = blackout([text], utc(2026, 3, 29, 0, 30))
        # Wall-clock 04:00 CEST: two hours later, not three.
        self.assertEqual(utc(2026, 3, 29, 2, 0), found.until)
        # An end the clock skips ends when the clock jumps past it.
        found = blackout(['Sun 00:00-02:30'], utc(2026, 3, 29, 0, 50))
        self.assertEqual(utc(2026, 3, 29, 1, 0), found.until)

    def test_clocks_going_back(self):
        # 2026-10-25 03:00 CEST the clock goes back to 02:00 CET (01:00 UTC).
        found = blackout(['Sun 01:00-03:00'], berlin(2026, 10, 25, 1, 0))
        # 01:00 CEST to 03:00 CET is three hours.
        self.assertEqual(utc(2026, 10, 25, 2, 0), found.until)
        self.assertEqual(datetime.timedelta(hours=3),
                         found.until - berlin(2026, 10, 25, 1, 0))


class TestCron(unittest.TestCase):
    def test_the_minutes_it_matches(self):
        text = '* 8-17 * * 1-5'
        self.assertTrue(inside(text, berlin(2026, 11, 24, 17, 59)))
        self.assertFalse(inside(text, berlin(2026, 11, 24, 18, 0)))
        self.assertFalse(inside(text, berlin(2026, 11, 29, 12, 0)))  # Sun
        found = blackout([text], berlin(2026, 11, 24, 9, 15, 30))
        self.assertEqual(berlin(2026, 11, 24, 18, 0), found.until)

    def test_fields(self):
        self.assertTrue(inside('*/15 * * * *', berlin(2026, 11, 24, 9, 45)))
        self.assertFalse(inside('*/15 * * * *', berlin(2026, 11, 24, 9, 46)))
        self.assertTrue(inside('5-20/5,59 * * * *',
                               berlin(2026, 11, 24, 9, 59)))
        self.assertTrue(inside('10/20 * * * *', berlin(2026, 11, 24, 9, 50)))
        self.assertFalse(inside('10/20 * * * *', berlin(2026, 11, 24, 9, 0)))
        self.assertTrue(inside('* * * nov sun', berlin(2026, 11, 29, 3, 3)))
        # 0 and 7 are both Sunday.
        self.assertTrue(inside('* * * * 7', berlin(2026, 11, 29, 3, 3)))
        self.assertTrue(inside('* * * * 0', berlin(2026, 11, 29, 3, 3)))
        self.assertFalse(inside('* * * * 0', berlin(2026, 11, 30, 3, 3)))

    def test_day_of_month_or_day_of_week(self):
        # crontab(5): both restricted, either one matches.
        text = '0 12 13 * 5'
        self.assertTrue(inside(text, berlin(2026, 11, 13, 12, 0)))  # Fri 13
        self.assertTrue(inside(text, berlin(2026, 11, 20, 12, 0)))  # a Fri
        self.assertTrue(inside(text, berlin(2026, 12, 13, 12, 0)))  # a Sun
        self.assertFalse(inside(text, berlin(2026, 11, 21, 12, 0)))
        # One restricted: only that one counts.
        self.assertFalse(inside('0 12 * * 5', berlin(2026, 12, 13, 12, 0)))
        self.assertFalse(inside('0 12 13 * *', berlin(2026, 11, 20, 12, 0)))
        # */2 counts as unrestricted, as in cron: odd days that are Fridays.
        self.assertTrue(inside('0 12 */2 * 5', berlin(2026, 11, 13, 12, 0)))
        self.assertFalse(inside('0 12 */2 * 5', berlin(2026, 11, 20, 12, 0)))
        self.assertFalse(inside('0 12 */2 * 5', berlin(2026, 11, 15, 12, 0)))

    def test_with_a_length(self):
        text = '0 22 * * 5 for 56h'  # Friday 22:00 to Monday 06:00
        self.assertFalse(inside(text, berlin(2026, 11, 27, 21, 59)))
        self.assertTrue(inside(text, berlin(2026, 11, 27, 22, 0)))
        self.assertTrue(inside(text, berlin(2026, 11, 30, 5, 59)))
        self.assertFalse(inside(text, berlin(2026, 11, 30, 6, 0)))
        found = blackout([text], berlin(2026, 11, 28, 12, 0))
        self.assertEqual(berlin(2026, 11, 30, 6, 0), found.until)

    def test_overlapping_starts_extend_the_window(self):
        found = blackout(['0 * * * * for 90m'], berlin(2026, 11, 24, 9, 0))
        self.assertEqual('with no end in the next 8 days', str(found)[-30:])
        found = blackout(['0 8,9 * * * for 90m'],
                         berlin(2026, 11, 24, 8, 10))
        self.assertEqual(berlin(2026, 11, 24, 10, 30), found.until)

    def test_a_start_the_clock_skips(self):
        # 02:30 does not exist on 2026-03-29: the window starts at 03:00
        # CEST (01:00 UTC), when the clock has jumped past it.
        text = '30 2 * * * for 1h'
        self.assertFalse(inside(text, utc(2026, 3, 29, 0, 59)))
        self.assertTrue(inside(text, utc(2026, 3, 29, 1, 0)))
        self.assertTrue(inside(text, utc(2026, 3, 29, 1, 59)))
        self.assertFalse(inside(text, utc(2026, 3, 29, 2, 0)))
        # Other days: 02:30 CET.
        self.assertTrue(inside(text, berlin(2026, 3, 28, 2, 30)))
        self.assertFalse(inside(text, berlin(2026, 3, 28, 2, 29)))
        # The minutes of a pattern without length are not there that day.
        self.assertFalse(any(windows.parse('* 2 * * *', BERLIN).covered(
            utc(2026, 3, 29, 0, 0), 180)))

    def test_a_start_the_clock_repeats_counts_once(self):
        text = '30 2 * * * for 10m'
        self.assertTrue(inside(text, berlin(2026, 10, 25, 2, 35)))  # CEST
        self.assertFalse(inside(text, berlin(2026, 10, 25, 2, 35, fold=1)))
        # A pattern without length: both 02:xx hours are its minutes.
        self.assertTrue(inside('* 2 * * *', berlin(2026, 10, 25, 2, 35,
                                                   fold=1)))
        found = blackout(['* 2 * * *'], berlin(2026, 10, 25, 2, 0))
        self.assertEqual(utc(2026, 10, 25, 2, 0), found.until)

    # Debian's cron (and cronsim, which follows it) keeps its rules for a
    # change of the clocks only for fields that do not start with *: ours
    # hold whatever the spelling.
    def test_a_repeated_hourly_start_counts_once(self):
        # 02:00 CET repeats 02:00 CEST: no start, so 02:00 CEST for 90m
        # ends at 01:30 UTC, until 03:00 CET starts.
        text = '0 * * * * for 90m'
        self.assertTrue(inside(text, utc(2026, 10, 25, 1, 29)))
        self.assertFalse(inside(text, utc(2026, 10, 25, 1, 30)))
        self.assertTrue(inside(text, utc(2026, 10, 25, 2, 0)))

    def test_a_skipped_start_of_a_step_begins_at_the_hour_after(self):
        text = '30 */2 * * * for 10m'
        self.assertTrue(inside(text, utc(2026, 3, 29, 1, 0)))  # 03:00 CEST
        self.assertTrue(inside(text, utc(2026, 3, 29, 1, 9)))
        self.assertFalse(inside(text, utc(2026, 3, 29, 1, 10)))

    def test_without_a_length_0_59_is_every_minute(self):
        # Both 02:xx hours when the clock repeats them, none when skipped.
        for text in ('* 2 * * *', '0-59 2 * * *'):
            with self.subTest(text=text):
                self.assertTrue(inside(text, berlin(2026, 10, 25, 2, 35,
                                                    fold=1)))
                self.assertFalse(any(windows.parse(text, BERLIN).covered(
                    utc(2026, 3, 29, 0, 0), 180)))

    def test_a_change_of_half_an_hour(self):
        # Lord Howe Island: 2026-04-05 02:00 +11 goes back to 01:30
        # +10:30, so 02:00-02:59 +10:30 come once (15:30-16:29 UTC).
        covered = windows.parse('* 2 * * *', 'Australia/Lord_Howe').covered(
            utc(2026, 4, 4, 15, 0), 120)
        self.assertEqual(list(range(30, 90)),
                         [i for i, c in enumerate(covered) if c])

    def test_a_length_covers_the_minutes_after_each_start(self):
        # Against the definition: inside when a start lies in the last
        # length minutes, over a week with a change of the clocks.
        first = utc(2026, 10, 22, 0, 0)
        for text in ('*/50 1-3 * * * for 70m', '0 2 * * 0,3 for 1d',
                     '30 2 * * * for 1m', '15 */7 25 10 * for 9h'):
            with self.subTest(text=text):
                window = windows.parse(text, BERLIN)
                length = int(window.length / windows.MINUTE)
                count = 7 * 1440
                starts = window._starts(first - length * windows.MINUTE,
                                        length + count)
                expected = [any(starts[i + 1:i + length + 1])
                            for i in range(count)]
                got = window.covered(first, count)
                # The minutes that differ: a short message, not a diff.
                self.assertEqual([], [i for i in range(count)
                                      if got[i] != expected[i]])
                self.assertEqual(count, len(got))
                self.assertTrue(any(expected))

    def test_the_lengths_it_reads(self):
        # Up to four whole numbers of up to six digits, of m, h, d or w.
        for text, minutes in (('90m', 90), ('1d12h', 2160), ('1w', 10080),
                              ('1m1m1m1m', 4), ('000001m', 1),
                              ('6d23h59m1m', 10080)):
            with self.subTest(text=text):
                window = windows.parse('0 2 * * * for ' + text)
                self.assertEqual(datetime.timedelta(minutes=minutes),
                                 window.length)
        for text, message in (('1m1m1m1m1m', 'a duration such as'),
                              ('1000000m', 'a duration such as'),
                              ('5ms', 'a duration such as'),
                              ('30s', 'a duration such as'),
                              ('1y', 'a duration such as'),
                              ('1H', 'a duration such as'),
                              ('10081m', 'from 1m to 7d'),
                              ('999999m', 'from 1m to 7d')):
            with self.subTest(text=text):
                with self.assertRaisesRegex(windows.WindowError, message):
                    windows.parse('0 2 * * * for ' + text)

    def test_length_reaches_across_the_first_minute_read(self):
        # Started six days ago, still on: the look back covers it.
        text = '0 0 18 11 * for 7d'
        self.assertTrue(inside(text, utc(2026, 11, 24, 23, 59), 'UTC'))
        self.assertFalse(inside(text, utc(2026, 11, 25, 0, 0), 'UTC'))


def minutes(window, first, last):
    """The UTC minutes from first up to last that the window covers."""
    count = int((last - first) / windows.MINUTE)
    return [first + i * windows.MINUTE
            for i, c in enumerate(window.covered(first, count)) if c]


class TestOneOff(unittest.TestCase):
    def test_whole_days_include_the_end_day_across_the_new_year(self):
        text = '2026-12-20..2027-01-04'
        self.assertFalse(inside(text, berlin(2026, 12, 19, 23, 59)))
        self.assertTrue(inside(text, berlin(2026, 12, 20, 0, 0)))
        self.assertTrue(inside(text, berlin(2026, 12, 31, 23, 59)))
        self.assertTrue(inside(text, berlin(2027, 1, 1, 0, 0)))
        self.assertTrue(inside(text, berlin(2027, 1, 4, 23, 59)))
        self.assertFalse(inside(text, berlin(2027, 1, 5, 0, 0)))
        # Midnight in Berlin is 23:00 UTC the day before in winter.
        self.assertTrue(inside(text, utc(2026, 12, 19, 23, 0)))
        self.assertFalse(inside(text, utc(2027, 1, 4, 23, 0)))
        self.assertTrue(inside(text, utc(2027, 1, 4, 23, 0), 'UTC'))
        self.assertEqual(datetime.timedelta(days=16), _length(text, BERLIN))

    def test_a_date_alone_is_that_day(self):
        self.assertEqual(windows.parse('2026-12-24..2026-12-24').once,
                         windows.parse('2026-12-24').once)
        self.assertEqual((utc(2026, 12, 24), utc(2026, 12, 25)),
                         windows.parse('2026-12-24').once)
        # 24:00 ends a day as a date alone does.
        self.assertEqual(windows.parse('2026-12-20..2027-01-04').once,
                         windows.parse('2026-12-20..2027-01-04T24:00').once)

    def test_days_follow_the_wall_clock_when_the_clocks_change(self):
        # Against the definition: a minute is covered when its date on the
        # wall clock is one of the range's days, for each zone and change.
        for zone_, text, first, last in (
                (BERLIN, '2026-10-24..2026-10-25', utc(2026, 10, 20),
                 utc(2026, 10, 28)),
                (BERLIN, '2027-03-27..2027-03-28', utc(2027, 3, 24),
                 utc(2027, 3, 31)),
                ('America/New_York', '2026-10-31..2026-11-01',
                 utc(2026, 10, 29), utc(2026, 11, 4)),
                ('America/New_York', '2027-03-14', utc(2027, 3, 12),
                 utc(2027, 3, 17)),
                (BERLIN, '2026-12-31..2027-01-01', utc(2026, 12, 29),
                 utc(2027, 1, 3))):
            with self.subTest(zone=zone_, text=text):
                window = windows.parse(text, zone_)
                days = text.split('..')
                expected = [
                    first + i * windows.MINUTE
                    for i in range(int((last - first) / windows.MINUTE))
                    if days[0] <= (first + i * windows.MINUTE).astimezone(
                        windows.zone(zone_)).date().isoformat() <= days[-1]]
                self.assertEqual(expected, minutes(window, first, last))

    def test_a_day_lasts_as_long_as_the_wall_clock_says(self):
        # 2026-10-25 in Berlin has 25 hours, 2027-03-28 has 23; New York
        # changes on 2026-11-01 and 2027-03-14.
        for text, zone_, hours in (
                ('2026-10-25', BERLIN, 25), ('2027-03-28', BERLIN, 23),
                ('2026-10-24..2026-10-25', BERLIN, 49),
                ('2026-11-01', 'America/New_York', 25),
                ('2027-03-14', 'America/New_York', 23),
                ('2026-10-25', 'UTC', 24)):
            with self.subTest(text=text, zone=zone_):
                self.assertEqual(datetime.timedelta(hours=hours),
                                 _length(text, zone_))

    def test_times_by_the_wall_clock(self):
        text = '2026-12-20T18:00..2027-01-04T08:00'
        self.assertFalse(inside(text, berlin(2026, 12, 20, 17, 59)))
        self.assertTrue(inside(text, berlin(2026, 12, 20, 18, 0)))
        self.assertTrue(inside(text, berlin(2027, 1, 4, 7, 59)))
        self.assertFalse(inside(text, berlin(2027, 1, 4, 8, 0)))
        # A date at the end is that day's 24:00, at the start its 00:00.
        self.assertTrue(inside('2026-12-20T18:00..2027-01-04',
                               berlin(2027, 1, 4, 23, 59)))
        self.assertTrue(inside('2026-12-20..2027-01-04T08:00',
                               berlin(2026, 12, 20, 0, 0)))
        self.assertEqual(datetime.timedelta(hours=1), _length(
            'TZ=America/New_York 2026-12-31T23:30..2027-01-01T00:30'))

    def test_a_time_the_clock_skips_is_when_it_jumps(self):
        # Berlin 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00 UTC.
        window = windows.parse('2026-03-29T02:30..2026-03-29T04:00', BERLIN)
        self.assertEqual((utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 2, 0)),
                         window.once)
        window = windows.parse('2026-03-29T00:00..2026-03-29T02:15', BERLIN)
        self.assertEqual(utc(2026, 3, 29, 1, 0), window.once[1])
        # New York 2027-03-14: 02:00 EST becomes 03:00 EDT at 07:00 UTC.
        window = windows.parse('TZ=America/New_York 2027-03-14T02:30..'
                               '2027-03-14T03:30')
        self.assertEqual((utc(2027, 3, 14, 7, 0), utc(2027, 3, 14, 7, 30)),
                         window.once)
        # Havana changes at midnight: that day starts at 01:00 CDT.
        window = windows.parse('TZ=America/Havana 2026-03-08')
        self.assertEqual((utc(2026, 3, 8, 5, 0), utc(2026, 3, 9, 4, 0)),
                         window.once)

    def test_a_time_the_clock_shows_twice_is_the_first(self):
        # Berlin 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00 UTC, so
        # 02:30 comes at 00:30 UTC and again at 01:30 UTC.
        window = windows.parse('2026-10-25T02:30..2026-10-25T03:00', BERLIN)
        self.assertEqual((utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2, 0)),
                         window.once)
        window = windows.parse('2026-10-24T12:00..2026-10-25T02:30', BERLIN)
        self.assertEqual(utc(2026, 10, 25, 0, 30), window.once[1])
        self.assertTrue(inside('2026-10-25T02:30..2026-10-25T03:00',
                               berlin(2026, 10, 25, 2, 10, fold=1)))

    def test_a_range_as_written_and_in_its_zone(self):
        window = windows.parse('TZ=America/New_York 2026-12-20..2027-01-04',
                               BERLIN)
        self.assertEqual(
            '"TZ=America/New_York 2026-12-20..2027-01-04" (America/New_York)',
            str(window))
        self.assertEqual((utc(2026, 12, 20, 5), utc(2027, 1, 5, 5)),
                         window.once)
        self.assertEqual(window.once, windows.parse(
            'CRON_TZ=America/New_York 2026-12-20 .. 2027-01-04').once)


def _length(text, zone='UTC'):
    start, end = windows.parse(text, zone).once
    return end - start


class TestRefusal(unittest.TestCase):
    def test_the_line_names_the_window_and_the_end_in_both_zones(self):
        found = blackout(['Mon-Fri 08:00-18:00'],
                         berlin(2026, 11, 24, 17, 59, 30))
        self.assertEqual(
            'in the blackout window "Mon-Fri 08:00-18:00" (Europe/Berlin) '
            'until 2026-11-24 18:00 CET (2026-11-24 17:00 UTC)', str(found))

    def test_free_outside_the_blackouts(self):
        self.assertIsNone(blackout(['Mon-Fri 08:00-18:00'],
                                   berlin(2026, 11, 24, 18, 0)))
        self.assertIsNone(blackout([], berlin(2026, 11, 24, 12, 0)))

    def test_back_to_back_blackouts_chain(self):
        found = blackout(['Tue 08:00-12:00', '0 12 * * 2 for 6h'],
                         berlin(2026, 11, 24, 9, 0))
        self.assertEqual('Tue 08:00-12:00', found.window.text)
        self.assertEqual(berlin(2026, 11, 24, 18, 0), found.until)

    def test_allowed_windows(self):
        allowed = ('22:00-06:00', 'Sat,Sun 00:00-24:00')
        found = blackout([], berlin(2026, 11, 24, 12, 0), allowed=allowed)
        self.assertIsNone(found.window)
        self.assertEqual(berlin(2026, 11, 24, 22, 0), found.until)
        self.assertEqual('22:00-06:00', found.opens.text)
        self.assertEqual(
            'outside every allowed window ("22:00-06:00", "Sat,Sun '
            '00:00-24:00") until 2026-11-24 22:00 CET (2026-11-24 21:00 '
            'UTC)', str(found))
        self.assertIsNone(blackout([], berlin(2026, 11, 24, 23, 0),
                                   allowed=allowed))
        self.assertIsNone(blackout([], berlin(2026, 11, 28, 12, 0),
                                   allowed=allowed))

    def test_a_blackout_wins_over_an_allowed_window(self):
        found = blackout(['Tue 22:00-23:30'], berlin(2026, 11, 24, 22, 10),
                         allowed=('22:00-06:00',))
        self.assertEqual('Tue 22:00-23:30', found.window.text)
        self.assertEqual(berlin(2026, 11, 24, 23, 30), found.until)
        # Until the blackout ends and an allowed window is open.
        found = blackout(['Tue 20:00-23:30'], berlin(2026, 11, 24, 21, 0),
                         allowed=('23:00-06:00',))
        self.assertEqual(berlin(2026, 11, 24, 23, 30), found.until)

    def test_each_window_in_its_own_zone(self):
        blackouts, _ = windows.schedule(
            ['TZ=America/New_York Mon-Fri 09:00-17:00'], (), BERLIN)
        found = windows.refusal(blackouts, (), utc(2026, 11, 24, 15, 0))
        self.assertEqual(
            'in the blackout window "TZ=America/New_York Mon-Fri '
            '09:00-17:00" (America/New_York) until 2026-11-24 17:00 EST '
            '(2026-11-24 22:00 UTC)', str(found))


class TestOneOffRefusal(unittest.TestCase):
    FREEZE = '2026-12-20..2027-01-04'

    def test_a_freeze_of_two_weeks_names_its_end(self):
        for now in (berlin(2026, 12, 20, 0, 0), berlin(2026, 12, 24, 12, 0),
                    berlin(2027, 1, 4, 23, 59, 59)):
            with self.subTest(now=now):
                found = blackout([self.FREEZE], now)
                self.assertEqual(
                    'in the blackout window "2026-12-20..2027-01-04" '
                    '(Europe/Berlin) until 2027-01-05 00:00 CET (2027-01-04 '
                    '23:00 UTC)', str(found))
                self.assertEqual(utc(2027, 1, 4, 23, 0), found.until)
        self.assertIsNone(blackout([self.FREEZE],
                                   berlin(2026, 12, 19, 23, 59)))
        self.assertIsNone(blackout([self.FREEZE], berlin(2027, 1, 5, 0, 0)))

    def test_a_long_freeze_names_its_end(self):
        found = blackout(['2026-01-01..2030-12-31'], berlin(2026, 6, 1))
        self.assertEqual(berlin(2031, 1, 1), found.until)
        self.assertEqual('until 2031-01-01 00:00 CET (2030-12-31 23:00 UTC)',
                         str(found)[-49:])

    def test_after_a_freeze_the_other_windows_hold(self):
        # 2027-01-05 is a Tuesday: the next weekend opens on the 9th, 19
        # days after now, past HORIZON.
        found = blackout([self.FREEZE], berlin(2026, 12, 21, 12, 0),
                         allowed=('Sat,Sun 00:00-24:00',))
        self.assertEqual(self.FREEZE, found.window.text)
        self.assertEqual(berlin(2027, 1, 9, 0, 0), found.until)
        self.assertEqual('Sat,Sun 00:00-24:00', found.opens.text)
        # A weekly blackout right after the freeze goes on from it.
        found = blackout([self.FREEZE, 'Tue 00:00-06:00'],
                         berlin(2026, 12, 21, 12, 0))
        self.assertEqual(berlin(2027, 1, 5, 6, 0), found.until)
        # Ranges that overlap chain.
        found = blackout(['2026-12-20..2026-12-31', '2026-12-28..2027-01-10'],
                         berlin(2026, 12, 21, 12, 0))
        self.assertEqual(berlin(2027, 1, 11, 0, 0), found.until)

    def test_a_weekly_blackout_in_force_ends_into_a_freeze(self):
        # Friday 18 December, business hours; the freeze starts at midnight.
        found = blackout(['Mon-Fri 08:00-18:00', self.FREEZE],
                         berlin(2026, 12, 18, 17, 0))
        self.assertEqual('Mon-Fri 08:00-18:00', found.window.text)
        self.assertEqual(berlin(2026, 12, 18, 18, 0), found.until)
        # On Saturday the 19th at noon it starts in twelve hours, and free.
        self.assertIsNone(blackout(['Mon-Fri 08:00-18:00', self.FREEZE],
                                   berlin(2026, 12, 19, 12, 0)))

    def test_an_allowed_range_ahead(self):
        allowed = ('TZ=Europe/Berlin 2027-06-01T20:00..2027-06-02T04:00',)
        found = blackout([], utc(2026, 12, 22), allowed=allowed)
        self.assertIsNone(found.window)
        self.assertEqual(allowed[0], found.opens.text)
        self.assertEqual(
            'outside every allowed window ("TZ=Europe/Berlin '
            '2027-06-01T20:00..2027-06-02T04:00") until 2027-06-01 20:00 '
            'CEST (2027-06-01 18:00 UTC)', str(found))
        self.assertIsNone(blackout([], berlin(2027, 6, 2, 3, 59),
                                   allowed=allowed))
        # A blackout inside it: it opens when that ends.
        found = blackout(['Tue 18:00-22:00'], berlin(2027, 6, 1, 12),
                         allowed=allowed)
        self.assertEqual(berlin(2027, 6, 1, 22, 0), found.until)

    def test_an_allowed_range_that_has_passed_never_opens(self):
        found = blackout([], berlin(2027, 1, 5, 0, 0), allowed=(self.FREEZE,))
        self.assertIsNone(found.until)
        self.assertEqual(
            'outside every allowed window ("2026-12-20..2027-01-04"), with '
            'no end in the next 8 days', str(found))


class TestBadInput(unittest.TestCase):
    def test_bad_windows_say_what_is_wrong(self):
        for text, message in (
                ('0 25 * * *', "hour '25' is not 0..23"),
                ('0 2 * *', 'five fields'),
                ('0 2 * * * *', 'five fields'),
                ('', 'five fields'),
                ('L * * * *', "minute 'L' is not 0..59"),
                ('0 0 ? * *', 'day of month'),
                ('0 0 * 13 *', 'month'),
                ('0 0 * * 8', 'day of week'),
                ('0 0 * * mon#2', 'day of week'),
                ('*/0 * * * *', 'step'),
                ('5-1 * * * *', 'goes backwards'),
                ('0 ² * * *', "hour '²'"),
                ('0 ' + '9' * 5000 + ' * * *', 'hour'),
                ('0 2 * * * for 8d', 'from 1m to 7d'),
                ('0 2 * * * for 0m', 'from 1m to 7d'),
                ('0 2 * * * for 3 hours', 'a duration such as'),
                ('0 2 * * * for 1.5h', 'a duration such as'),
                ('Mon 08:00-08:00', 'a whole day is 00:00-24:00'),
                ('Mnd 08:00-18:00', "'Mnd' is not a day"),
                ('Mon-Fry 08:00-18:00', "'Fry' is not a day"),
                ('25:00-26:00', 'times run from 00:00 to 23:59'),
                ('08:60-09:00', 'times run from'),
                ('00:00-24:30', 'times run from'),
                ('Mon 8-18', 'five fields'),
                ('Mon 08:00 to 18:00', 'a time range is written like'),
                ('TZ=Mars/Olympus 0 2 * * *', 'unknown time zone'),
                ('TZ=../etc/passwd 0 2 * * *', 'not an IANA time zone'),
                ('TZ=Europe 0 2 * * *', 'unknown time zone Europe'),
                ('2026-02-30', "'2026-02-30' is not a date: 2026-02 has 28 "
                 "days"),
                ('2028-02-30..2028-03-01', "'2028-02-30' is not a date: "
                 "2028-02 has 29 days"),
                ('2026-12-20..2026-04-31', '2026-04 has 30 days'),
                ('2026-13-01', 'months run from 01 to 12'),
                ('2026-00-10', 'months run from 01 to 12'),
                ('2026-12-00', '2026-12 has 31 days'),
                ('1999-12-20..2000-01-04', 'years run from 2000 to 9998'),
                ('2026-12-20..9999-01-04', "'9999-01-04' is not a date"),
                ('2027-01-04..2026-12-20', 'ends before it starts'),
                ('2026-12-20T18:00..2026-12-20T08:00',
                 'ends before it starts'),
                ('2026-12-20T18:00..2026-12-20T18:00', 'ends when it starts'),
                ('2026-12-20T18:00', 'a one-off range is written like '
                 '"2026-12-20..2027-01-04" or '
                 '"2026-12-20T18:00..2027-01-04T08:00"'),
                ('2026-12-20..', 'a one-off range is written like'),
                ('..2027-01-04', 'a one-off range is written like'),
                ('2026-12-20...2027-01-04', 'a one-off range is written'),
                ('2026-12-20..2027-01-04..2027-02-01', 'a one-off range'),
                ('2026-12-20 18:00..2027-01-04', 'a one-off range'),
                ('2026-1-4', 'a one-off range'),
                ('20-12-2026..04-01-2027', 'a one-off range'),
                ('2026-12-20..' + '9' * 5000, 'a one-off range'),
                ('2026-12-20T25:00..2027-01-04', 'times run from 00:00'),
                ('2026-12-20T08:60..2027-01-04', 'times run from 00:00'),
                ('2026-12-20T24:00..2027-01-04', '(24:00 as an end)'),
                ('TZ=Mars/Olympus 2026-12-20..2027-01-04',
                 'unknown time zone Mars/Olympus'),
                ('TZ=Europe/Berlin 2026-03-29T02:10..2026-03-29T02:40',
                 'the clock skips all of it in Europe/Berlin'),
                ('TZ=Pacific/Apia 2011-12-30', 'the clock skips all of it')):
            with self.subTest(text=text):
                error = self.assertRaises(windows.WindowError,
                                          windows.parse, text)
                self.assertIn(message, str(error))
                self.assertLess(len(str(error)), 300)

    def assertRaises(self, kind, func, *args):
        with super().assertRaises(kind) as caught:
            func(*args)
        return caught.exception

    def test_time_zones(self):
        self.assertIs(windows.UTC, windows.zone('UTC'))
        self.assertEqual('Europe/Berlin', windows.zone_name(
            windows.zone('Europe/Berlin')))
        for name in ('Mars/Olympus', 'Europe', '../etc', '/etc/localtime',
                     '', 'Europe/Berlin\x00', 'a' * 5000, 5, None):
            with self.subTest(name=name):
                self.assertRaises(windows.WindowError, windows.zone, name)
        self.assertRaises(windows.WindowError, windows.parse, 5)
