"""Sphinx extension of our docs: a line ``.. leveller-settings::`` becomes
the table of every setting (core.config.KEYS) with its type, default and
meaning, so the configuration reference lists what the code declares.

The line is replaced in the page's text before it is parsed, which needs
no docutils code; without the extension Sphinx stops at the unknown
directive instead of leaving the table out.
"""

from osc_leveller.core.settings import config

MARKER = '.. leveller-settings::'


def kind_text(key):
    if key.kind == config.CHOICE:
        return ' | '.join(key.choices)
    return key.kind + (', secret' if key.secret else '')


def default_text(key):
    """The default as it would be written in YAML, or why there is none."""
    value = key.default
    if key.kind == config.QUERY:
        return 'see below'  # the page shows the default queries
    if value is None:
        return '(none)'
    if value == ():
        return '(empty)'
    if isinstance(value, tuple):
        value = '[%s]' % ', '.join(value)
    elif isinstance(value, bool):
        value = str(value).lower()
    elif isinstance(value, (int, float)):
        value = '%g' % value
    return '``%s``' % value


def table():
    """The settings' list-table, as lines of reStructuredText."""
    lines = ['.. list-table::', '   :header-rows: 1',
             '   :widths: 28 14 14 44', '', '   * - Setting', '     - Type',
             '     - Default', '     - Meaning']
    for key in config.KEYS:
        lines += ['   * - ``%s``' % key.name, '     - ' + kind_text(key),
                  '     - ' + default_text(key), '     - ' + key.help]
    return lines


def expand(text):
    """The page's text with the marker line replaced by the table."""
    return '\n'.join('\n'.join(table()) if line == MARKER else line
                     for line in text.split('\n'))


def _source_read(app, docname, source):
    source[0] = expand(source[0])


def setup(app):
    app.connect('source-read', _source_read)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
