"""Table cells that read well to people and stay plain data in JSON."""

from cliff import columns

from osc_leveller.core.load import duration
from osc_leveller.v1 import common

BAR_WIDTH = 10


class ScoreColumn(columns.FormattableColumn):
    """A score 0..1: '0.57 █████▋    ' in a table, 0.57 in JSON."""

    def human_readable(self):
        value = self._value
        if value is None:
            return ''
        eighths = round(max(0.0, min(1.0, value)) * BAR_WIDTH * 8)
        full, part = divmod(eighths, 8)
        bar = '█' * full + (' ▏▎▍▌▋▊▉'[part] if part else '')
        return '%.2f %s' % (value, bar.ljust(BAR_WIDTH))

    def machine_readable(self):
        return None if self._value is None else round(self._value, 4)


class UsageColumn(columns.FormattableColumn):
    """(used, capacity): '120 / 256' in a table, an object in JSON."""

    def human_readable(self):
        used, capacity = self._value
        return '%s / %s' % (_number(used), _number(capacity))

    def machine_readable(self):
        used, capacity = self._value
        return {'used': used, 'capacity': capacity}


class BeforeAfterColumn(columns.FormattableColumn):
    """(before, after): '0.57 -> 0.46' in a table, an object in JSON."""

    def human_readable(self):
        before, after = self._value
        return '%.3f -> %.3f' % (before, after)

    def machine_readable(self):
        before, after = self._value
        return {'before': round(before, 4), 'after': round(after, 4)}


class PercentColumn(columns.FormattableColumn):
    """A fraction as a percentage; empty in a table when not measured."""

    def human_readable(self):
        return '' if self._value is None else '%.1f' % (self._value * 100)

    def machine_readable(self):
        return None if self._value is None else round(self._value * 100, 1)


class DurationColumn(columns.FormattableColumn):
    """Seconds a live migration should take: 'about 12 s' in a table,
    the number in JSON; empty or null when not estimated."""

    def human_readable(self):
        return '' if self._value is None else duration.describe(self._value)

    def machine_readable(self):
        return self._value


class HeadroomColumn(columns.FormattableColumn):
    """A domain's N+k headroom (core.rules.headroom.Headroom): 'yes' or
    'no: ' and why in a table; in JSON the answer's parts, so a script
    reads which hypervisors were lost and which servers fit nowhere
    without parsing the sentence."""

    def human_readable(self):
        return common.printable(self._value.reason())  # names from the cloud

    def machine_readable(self):
        found = self._value
        return {
            'ok': found.ok, 'k': found.k, 'hypervisors': found.hypervisors,
            'lost': list(found.lost),
            'unplaced': [{'server_id': server.id, 'server': server.label,
                          'reason': why} for server, why in found.unplaced],
            'sets': found.sets, 'every_set': found.every_set,
            'reason': found.reason()}


def _number(value):
    return ('%d' % value) if float(value).is_integer() else ('%.1f' % value)


class SettingColumn(columns.FormattableColumn):
    """A setting as YAML would spell it in a table; typed in JSON."""

    def human_readable(self):
        if isinstance(self._value, bool):
            return 'true' if self._value else 'false'
        if isinstance(self._value, list):
            return ', '.join(self._value)
        return '' if self._value is None else str(self._value)

    def machine_readable(self):
        return self._value


class NoFileColumn(SettingColumn):
    """A file setting that names no file (none or empty text): the table
    says so; JSON has null."""

    def human_readable(self):
        return '(none)'
