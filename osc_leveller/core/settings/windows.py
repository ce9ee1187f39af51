"""Maintenance windows: when a run that plans itself may move servers.

A window is one line of text, in a time zone (``windows.time_zone``, or a
``TZ=Area/City`` prefix on the line):

- a weekday/time range, ``Mon-Fri 08:00-18:00``: from the start time on each
  of those days to the end time by the wall clock, into the next day when
  the end is not later (``Fri 22:00-06:00`` ends Saturday 06:00); without
  days, every day; ``24:00`` ends at midnight;
- a cron expression of five fields, ``* 8-17 * * 1-5``: the minutes it
  matches, as crontab(5) reads them (a day matches its day of month or its
  weekday when both are restricted);
- a cron expression and a length, ``0 22 * * 5 for 56h``: each time it
  matches, a window that lasts that long (elapsed time, like Argo CD's
  sync windows). A start the clock skips when it goes forward begins when
  the clock reaches the hour after; a start the clock repeats when it goes
  back counts once;
- a one-off range of dates, ``2026-12-20..2027-01-04``: once, from 00:00
  of the first day to the end of the last (the next day's 00:00), so the
  end day is in it; a date alone is that one day. With times,
  ``2026-12-20T18:00..2027-01-04T08:00``, from the one wall-clock time to
  the other (a date at either end is its 00:00 or its 24:00). A time the
  clock skips is the moment it jumps past it, a time the clock shows twice
  the first of them, as the ranges above read the wall clock.

Blackout windows forbid moves; when allowed windows are set, moves happen
only inside one of them; a blackout wins over an allowed window (as in
ProxBalance). Everything here is pure: the caller passes the instant.
"""

import calendar
import dataclasses
import datetime
import re
import zoneinfo

from osc_leveller.core.model import errors

UTC = datetime.timezone.utc
MINUTE = datetime.timedelta(minutes=1)
# How far ahead "until when" looks for the weekly and cron windows; past it
# a refusal says so. One-off ranges are not held to it: the search also
# starts where each one-off blackout ends and each one-off allowed range
# starts, so a freeze of any length names its end.
HORIZON = datetime.timedelta(days=8)
# The longest "for": covered() looks back that far for starts. A one-off
# range, one comparison a minute, may last any time.
MAX_LENGTH = datetime.timedelta(days=7)
# Years a one-off range may name: a range to the end of 9999 would end in
# 10000, past the calendar of datetime, and no freeze lies before 2000.
YEARS = (2000, 9998)
DAYS = ('mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun')  # weekday() order
FULL_DAYS = ('monday', 'tuesday', 'wednesday', 'thursday', 'friday',
             'saturday', 'sunday')
MONTHS = ('jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep',
          'oct', 'nov', 'dec')
# crontab(5): name, lowest, highest, names of the values from the lowest.
CRON_FIELDS = (('minute', 0, 59, ()), ('hour', 0, 23, ()),
               ('day of month', 1, 31, ()), ('month', 1, 12, MONTHS),
               ('day of week', 0, 7, DAYS[6:] + DAYS[:6]))
_ZONE_NAME = re.compile(r'[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*')
_PREFIX = re.compile(r'(?:CRON_)?TZ=(\S*)\s+(.*)', re.S)
_RANGE = re.compile(
    r'(?:(\S+)\s+)?([0-9]{1,2}):([0-9]{2})\s*-\s*([0-9]{1,2}):([0-9]{2})')
# Short numbers only: int() refuses text of thousands of digits.
_NUMBER = re.compile(r'[0-9]{1,4}')
# A one-off range: text that starts like a date (a cron minute of four
# digits and a range, 0000-0005, does not), or has the "..".
_ONCE = re.compile(r'[0-9]{4}-[0-9]{1,2}-')
_DATE = re.compile(
    r'([0-9]{4})-([0-9]{2})-([0-9]{2})(?:T([0-9]{2}):([0-9]{2}))?')
ONCE_FORMS = ('"2026-12-20..2027-01-04" or '
              '"2026-12-20T18:00..2027-01-04T08:00"')
# Durations as Prometheus writes them, '1h30m': whole numbers with units,
# read in any order and summed. A window's length takes some of them.
# Prometheus keeps them in int64 milliseconds: a number of 20 digits is out
# of its range whatever its unit (and int() raises on thousands).
PROMETHEUS_DIGITS = 19
SECONDS = {'ms': 0.001, 's': 1, 'm': 60, 'h': 3600, 'd': 86400,
           'w': 7 * 86400, 'y': 365 * 86400}
_DURATION = re.compile(r'(?:[0-9]+(?:ms|[smhdwy]))+')
_PART = re.compile(r'([0-9]+)(ms|[smhdwy])')
LENGTH_UNITS = ('m', 'h', 'd', 'w')


class WindowError(errors.LevellerError, ValueError):
    """A window or time zone that cannot be read; the message says why."""


def zone(name):
    """The tzinfo of an IANA time zone name; WindowError if unknown."""
    if name == 'UTC':
        return UTC
    if not isinstance(name, str) or not _ZONE_NAME.fullmatch(name):
        raise WindowError('%s is not an IANA time zone name such as '
                          'Europe/Berlin' % errors.quote(name))
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise WindowError('unknown time zone %s (an IANA name such as '
                          'Europe/Berlin)' % errors.name(name)) from None


def zone_name(tz):
    return getattr(tz, 'key', None) or 'UTC'


@dataclasses.dataclass(frozen=True)
class Window:
    """One window as written, read in its time zone."""
    text: str
    tz: datetime.tzinfo
    # A range: start days (weekday() numbers) and minutes of the day.
    days: frozenset = frozenset()
    start: int = 0
    end: int = 0
    # A cron expression: the values of its five fields, and whether day of
    # month and day of week were restricted (not starting with *).
    cron: tuple = None
    restricted: tuple = (False, False)
    length: datetime.timedelta = None
    # A one-off range: its first and its end UTC instants (the end is not
    # in it).
    once: tuple = None

    def __str__(self):
        return '"%s" (%s)' % (self.text, zone_name(self.tz))

    def covered(self, first, count):
        """[bool] for each of count UTC minutes from first: inside?"""
        if self.once is not None:
            start, end = self.once
            return [start <= first + i * MINUTE < end for i in range(count)]
        if self.length is None:
            return [self._inside(w) for w in _walls(first, count, self.tz)]
        back = int(self.length / MINUTE) - 1
        starts = self._starts(first - back * MINUTE, back + count)
        covered, left = [], 0
        for i, start in enumerate(starts):
            left = back + 1 if start else max(left - 1, 0)
            if i >= back:
                covered.append(left > 0)
        return covered

    def _inside(self, wall):
        if self.cron is not None:
            return self._matches(wall)
        minute = wall.hour * 60 + wall.minute
        day = wall.weekday()
        if self.start < self.end:
            return day in self.days and self.start <= minute < self.end
        return (day in self.days and minute >= self.start
                or (day - 1) % 7 in self.days and minute < self.end)

    def _matches(self, wall):
        minutes, hours, monthdays, months, weekdays = self.cron
        if wall.minute not in minutes or wall.hour not in hours or \
                wall.month not in months:
            return False
        by_date = wall.day in monthdays
        by_weekday = wall.weekday() in weekdays
        if all(self.restricted):  # crontab(5): either one will do
            return by_date or by_weekday
        return by_date and by_weekday

    def _starts(self, first, count):
        """[bool] for each UTC minute from first: does a window start?"""
        walls = _walls(first - MINUTE, count + 1, self.tz)
        starts = []
        for before, wall in zip(walls, walls[1:]):
            naive = before.replace(tzinfo=None, fold=0)
            skipped = int((wall.replace(tzinfo=None, fold=0) - naive)
                          / MINUTE) - 1
            starts.append(
                wall.fold == 0 and self._matches(wall)
                or any(self._matches(naive + i * MINUTE)
                       for i in range(1, skipped + 1)))
        return starts


def _walls(first, count, tz):
    return [(first + i * MINUTE).astimezone(tz) for i in range(count)]


def parse(text, default_zone='UTC'):
    """The Window a line of text describes; WindowError if it is not one."""
    if not isinstance(text, str):
        raise WindowError('a window is text, not %s' % errors.quote(text))
    line = text.strip()
    tz_name = default_zone
    prefix = _PREFIX.fullmatch(line)
    if prefix:
        tz_name, line = prefix.groups()
    try:
        tz = zone(tz_name)
    except WindowError as exc:
        raise WindowError('%s: %s' % (errors.quote(text), exc)) from None
    if _ONCE.match(line) or '..' in line:
        return _once(text, line, tz)
    if ':' in line:
        return _range(text, line, tz)
    return _cron(text, line, tz)


def _range(text, line, tz):
    found = _RANGE.fullmatch(line)
    if not found:
        raise WindowError('%s: a time range is written like "Mon-Fri '
                          '08:00-18:00" or "22:00-06:00"' % errors.quote(text))
    days, *clock = found.groups()
    start_h, start_m, end_h, end_m = (int(n) for n in clock)
    if start_h > 23 or end_h > 24 or start_m > 59 or end_m > 59 or \
            end_h == 24 and end_m:
        raise WindowError('%s: times run from 00:00 to 23:59 (24:00 as an '
                          'end)' % errors.quote(text))
    start, end = start_h * 60 + start_m, end_h * 60 + end_m
    if start == end:
        raise WindowError('%s: starts and ends at the same time; a whole day '
                          'is 00:00-24:00' % errors.quote(text))
    return Window(text, tz, days=_days(text, days), start=start, end=end)


def _days(text, spec):
    if spec is None:
        return frozenset(range(7))
    days = set()
    for part in spec.split(','):
        first, dash, last = part.partition('-')
        a, b = _day(text, first), _day(text, last) if dash else None
        days.update([a] if b is None else
                    [(a + i) % 7 for i in range((b - a) % 7 + 1)])
    return frozenset(days)


def _day(text, name):
    key = name.strip().lower()
    for i, (short, full) in enumerate(zip(DAYS, FULL_DAYS)):
        if key in (short, full):
            return i
    raise WindowError('%s: %s is not a day (Mon, Tue, ... Sun)' % (
        errors.quote(text), errors.quote(name)))


def _once(text, line, tz):
    first, dots, last = (part.strip() for part in line.partition('..'))
    found = _DATE.fullmatch(first), _DATE.fullmatch(last if dots else first)
    if not all(found) or not dots and found[0].group(4):
        raise WindowError('%s: a one-off range is written like %s' % (
            errors.quote(text), ONCE_FORMS))
    start, end = _wall(text, found[0], False), _wall(text, found[1], True)
    if start >= end:
        raise WindowError('%s: ends %s it starts' % (
            errors.quote(text), 'when' if start == end else 'before'))
    once = _instant(start, tz), _instant(end, tz)
    if once[0] == once[1]:
        raise WindowError('%s: the clock skips all of it in %s' % (
            errors.quote(text), zone_name(tz)))
    return Window(text, tz, once=once)


def _wall(text, found, end):
    """The wall-clock time of one end of a one-off range: a date alone
    starts at its 00:00 and ends at its 24:00."""
    year, month, day, hour, minute = (
        None if n is None else int(n) for n in found.groups())
    why = None
    if not YEARS[0] <= year <= YEARS[1]:
        why = 'years run from %d to %d' % YEARS
    elif not 1 <= month <= 12:
        why = 'months run from 01 to 12'
    elif not 1 <= day <= calendar.monthrange(year, month)[1]:
        why = '%04d-%02d has %d days' % (
            year, month, calendar.monthrange(year, month)[1])
    if why:
        raise WindowError('%s: %s is not a date: %s' % (
            errors.quote(text), errors.quote(found.group(0)), why))
    date = datetime.datetime(year, month, day)
    if hour is None:
        return date + datetime.timedelta(days=1) if end else date
    if not (hour <= 23 and minute <= 59 or end and (hour, minute) == (24, 0)):
        raise WindowError('%s: times run from 00:00 to 23:59 (24:00 as an '
                          'end)' % errors.quote(text))
    return date + datetime.timedelta(hours=hour, minutes=minute)


def _instant(wall, tz):
    """The first UTC minute at which the clock in tz shows wall or later:
    the first of a time shown twice, the jump past a time skipped."""
    early, late = sorted(wall.replace(tzinfo=tz, fold=fold).astimezone(UTC)
                         for fold in (0, 1))
    if early.astimezone(tz).replace(tzinfo=None) == wall:
        return early
    # Skipped: the jump lies after early (shown before wall) and by late
    # (after it), where the wall clock only moves on.
    while late - early > MINUTE:
        middle = early + (late - early) // MINUTE // 2 * MINUTE
        if middle.astimezone(tz).replace(tzinfo=None) >= wall:
            late = middle
        else:
            early = middle
    return late


def _cron(text, line, tz):
    expression, length = line, None
    head, sep, tail = line.rpartition(' for ')
    if sep:
        expression, length = head.strip(), _length(text, tail.strip())
    fields = expression.split()
    if len(fields) != 5:
        raise WindowError(
            '%s: neither a time range ("Mon-Fri 08:00-18:00"), a cron '
            'expression of five fields ("0 2 * * *", "0 22 * * 5 for 56h") '
            'nor dates ("2026-12-20..2027-01-04")' % errors.quote(text))
    values = [_field(text, f, *spec) for f, spec in zip(fields, CRON_FIELDS)]
    # Cron counts weekdays from Sunday (0 or 7), datetime from Monday.
    values[4] = frozenset((d - 1) % 7 for d in values[4])
    return Window(text, tz, cron=tuple(values), length=length,
                  restricted=(not fields[2].startswith('*'),
                              not fields[4].startswith('*')))


def _field(text, field, name, low, high, names):
    values = set()
    for part in field.split(','):
        body, slash, step = part.partition('/')
        if slash and not (_NUMBER.fullmatch(step) and int(step) >= 1):
            raise WindowError('%s: %s step %s is not a whole number from 1'
                              % (errors.quote(text), name, errors.quote(step)))
        if body == '*':
            a, b = low, high
        else:
            first, dash, last = body.partition('-')
            a = _cron_value(text, first, name, low, high, names)
            b = _cron_value(text, last, name, low, high, names) if dash \
                else high if slash else a
            if a > b:
                raise WindowError('%s: %s range %s goes backwards' % (
                    errors.quote(text), name, errors.name(body)))
        values.update(range(a, b + 1, int(step) if slash else 1))
    return frozenset(values)


def _cron_value(text, value, name, low, high, names):
    if _NUMBER.fullmatch(value) and low <= int(value) <= high:
        return int(value)
    if value.lower() in names:
        return low + names.index(value.lower())
    raise WindowError('%s: %s %s is not %d..%d%s' % (
        errors.quote(text), name, errors.quote(value), low, high,
        ' or a name (%s ...)' % ', '.join(names[:3]) if names else ''))


def seconds(text, units=tuple(SECONDS), digits=PROMETHEUS_DIGITS,
            parts=None):
    """The seconds of a duration such as '1h30m' in those units, with at
    most digits to a number and parts numbers; None if it is not one."""
    found = _PART.findall(text) if _DURATION.fullmatch(text) else ()
    if not found or parts and len(found) > parts or any(
            unit not in units or len(n) > digits for n, unit in found):
        return None
    return sum(int(n) * SECONDS[unit] for n, unit in found)


def _length(text, value):
    found = seconds(value, LENGTH_UNITS, digits=6, parts=4)
    if found is None:
        raise WindowError('%s: the length after "for" is a duration such as '
                          '90m, 3h or 2d' % errors.quote(text))
    length = datetime.timedelta(seconds=found)
    if not MINUTE <= length <= MAX_LENGTH:
        raise WindowError('%s: a window lasts from 1m to 7d' %
                          errors.quote(text))
    return length


def schedule(blackout, allowed, default_zone='UTC'):
    """(blackout windows, allowed windows) from their lines of text."""
    return (tuple(parse(t, default_zone) for t in blackout),
            tuple(parse(t, default_zone) for t in allowed))


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why moves may not start now, and until when (None: not within
    HORIZON of now or of a one-off range's edge)."""
    window: Window  # the blackout in force; None: outside every allowed one
    allowed: tuple
    until: datetime.datetime
    opens: Window = None  # the allowed window that opens at until

    def __str__(self):
        if self.window is not None:
            why, tz = 'in the blackout window %s' % self.window, \
                self.window.tz
        else:
            why = 'outside every allowed window (%s)' % ', '.join(
                '"%s"' % w.text for w in self.allowed)
            tz = (self.opens or self.allowed[0]).tz
        if self.until is None:
            return '%s, with no end in the next %d days' % (why,
                                                            HORIZON.days)
        local, utc = _time(self.until, tz), _time(self.until, UTC)
        return '%s until %s%s' % (why, local,
                                  '' if local == utc else ' (%s)' % utc)


def _time(instant, tz):
    local = instant.astimezone(tz)
    return local.strftime('%Y-%m-%d %H:%M ') + (local.tzname() or 'UTC')


def refusal(blackout, allowed, now):
    """The Refusal in force at the instant now, or None when moves may
    start."""
    first = now.astimezone(UTC).replace(second=0, microsecond=0)
    hit = next((w for w in blackout if w.covered(first, 1)[0]), None)
    if hit is None and (not allowed or any(w.covered(first, 1)[0]
                                           for w in allowed)):
        return None
    searched = first  # the minutes before it are not free
    for start in _lookouts(first, blackout, allowed):
        begin = max(start, searched)
        count = int((start + HORIZON - begin) / MINUTE)
        if count > 0:
            found = _first_free(blackout, allowed, begin, count)
            if found:
                return Refusal(hit, tuple(allowed), *found)
            searched = start + HORIZON
    return Refusal(hit, tuple(allowed), None)


def _lookouts(first, blackout, allowed):
    """Where the search for the end starts, in order: now, where each
    one-off blackout ends and each one-off allowed range starts."""
    edges = {first}
    edges.update(w.once[1] for w in blackout if w.once)
    edges.update(w.once[0] for w in allowed if w.once)
    return sorted(t for t in edges if t >= first)


def _first_free(blackout, allowed, first, count):
    """(the first of count minutes from first that no blackout covers and
    an allowed window, if any, does; that allowed window), or None."""
    blocked = _any([w.covered(first, count) for w in blackout], count)
    inside = [w.covered(first, count) for w in allowed]
    open_ = _any(inside, count) if allowed else [True] * count
    for i in range(count):
        if open_[i] and not blocked[i]:
            opens = next((w for w, c in zip(allowed, inside) if c[i]), None)
            return first + i * MINUTE, opens
    return None


def _any(columns, count):
    return [any(c[i] for c in columns) for i in range(count)]
