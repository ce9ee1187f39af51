"""Secrets never reach a log line, at any verbosity.

osc-lib and cliff log the command line ("START with options") and the whole
cloud configuration at debug level, the ``leveller:`` section included.
Their own masking covers ``password`` and ``token`` keys but not a password
inside a URL (``https://user:pass@prometheus``), the ``headers`` mapping
of Prometheus (a tenant, a key of its proxy) nor the value after
``--os-password`` on the command line. A log record factory, installed when
the plugin is loaded (before the shell logs anything), masks those shapes
and every secret setting value the leveller has read in every record's
message, whichever library logs it.
"""

import logging
import re

MASK = '******'
# The password part of a URL's user information.
URL_PASSWORD = re.compile(r'(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:\'"]*:)'
                          r'([^\s/\'"]+)(@)')  # to the authority's last @
# Command-line options whose value is a secret, as "--opt value" or
# "--opt=value" (and their dest names, as argparse Namespace dumps show).
SECRET_OPTION = re.compile(
    r'((?:--os-|\bos_)(?:password|token|passcode|client[-_]secret|'
    r'application[-_]credential[-_]secret|access[-_]secret|totp)'
    r'(?:[ =]|=\')?)'
    # Not the words of a help text: "set --os-password or OS_PASSWORD".
    r'(?!(?:or|and|to|is|env)\b)([^\s\',)]+)')
# The values of a headers mapping, as a dict's repr or JSON shows them.
HEADER_VALUES = re.compile(
    r'''(['"]headers['"]\s*:\s*\{)([^{}]*)(\})''')
HEADER_VALUE = re.compile(r'''(['"][^'"]*['"]\s*:\s*)(?:'[^']*'|"[^"]*"|[^,}]+)''')
_known = set()  # secret values read from settings
_installed = []


def remember(value):
    """Mask this secret wherever it appears from now on."""
    if value and len(value) >= 4:  # shorter would mask ordinary words
        _known.add(value)


def mask(text):
    text = URL_PASSWORD.sub(r'\1%s\3' % MASK, text)
    text = SECRET_OPTION.sub(r'\1%s' % MASK, text)
    text = HEADER_VALUES.sub(lambda m: m.group(1) + HEADER_VALUE.sub(
        r"\1'%s'" % MASK, m.group(2)) + m.group(3), text)
    for secret in _known:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def install():
    """Mask every log record made from now on; once per process."""
    if _installed:
        return
    make = logging.getLogRecordFactory()

    def masked_record(*args, **kwargs):
        record = make(*args, **kwargs)
        try:
            text = record.getMessage()
        except Exception:  # let the handler report a bad format as usual
            return record
        clean = mask(text)
        if clean != text:
            record.msg, record.args = clean, None
        return record

    logging.setLogRecordFactory(masked_record)
    _installed.append(masked_record)
