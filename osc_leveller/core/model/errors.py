"""The one base of every failure the leveller expects, and how its messages
quote what came from outside.

Bad files, fields, settings and cloud answers raise a subclass whose
message names the cause (the file, field, setting or endpoint) and says what
to do. The commands turn these, and only these, into OpenStackClient errors
(v1/common.py ``boundary``): anything else reaching the user is a bug.
"""

import reprlib

# A message quotes a bad value briefly: a YAML alias bomb of a few hundred
# bytes expands to millions of items.
_QUOTE = reprlib.Repr()
_QUOTE.maxstring = _QUOTE.maxother = 80
_QUOTE.maxlist = _QUOTE.maxtuple = _QUOTE.maxdict = _QUOTE.maxset = 5
_QUOTE.maxlevel = 3


class LevellerError(Exception):
    """An expected failure; str() is the message for the operator."""


def quote(value):
    """repr() of a value from outside, at most a line long."""
    return _QUOTE.repr(value)


def name(value):
    """A name from outside as a message shows it: bare when it is short
    text, else quoted briefly."""
    if isinstance(value, str) and len(value) <= 80:
        return value
    return quote(value)
