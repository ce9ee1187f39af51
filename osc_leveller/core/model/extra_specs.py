"""Flavor extra spec values as Nova's scheduler compares them.

A requirement is either a plain string (equal to the host value) or an
operator followed by operands: ``= 4`` (numeric at least), ``== 4``, ``!= 4``,
``>= 4``, ``<= 4``; ``s== x``, ``s!= x``, ``s< x``, ``s<= x``, ``s> x``,
``s>= x`` (string comparisons); ``<in> x`` (substring), ``<all-in> x y``
(every operand is a substring) and ``<or> a <or> b`` (any of the values).

Trait specs (``trait:NAME=required``) are read as Nova reads them to ask
Placement for candidates: see traits().
"""

import operator
import re

REQUIRED, FORBIDDEN = 'required', 'forbidden'
# Nova's key of a trait request (nova/scheduler/utils.py, ResourceRequest
# XS_KEYPAT): trait:NAME for the unsuffixed request group, trait<suffix>:NAME
# for a granular one.
_TRAIT_KEY = re.compile(r'trait([a-zA-Z0-9_-]{1,64})?:(.*)')


def _numeric(compare):
    def check(value, operand):
        try:
            return compare(float(value), float(operand))
        except ValueError:
            return False
    return check


_BINARY = {
    '=': _numeric(operator.ge),
    '==': _numeric(operator.eq),
    '!=': _numeric(operator.ne),
    '>=': _numeric(operator.ge),
    '<=': _numeric(operator.le),
    's==': operator.eq,
    's!=': operator.ne,
    's<': operator.lt,
    's<=': operator.le,
    's>': operator.gt,
    's>=': operator.ge,
    '<in>': lambda value, operand: operand in value,
}


def matches(value, requirement):
    """Whether a host-side value satisfies a flavor-side requirement."""
    words = requirement.split()
    if not words or (words[0] not in _BINARY and
                     words[0] not in ('<or>', '<all-in>')):
        return value == requirement
    op, operands = words[0], words[1:]
    if value is None or not operands:
        return False
    if op == '<or>':
        return value in operands[::2]
    if op == '<all-in>':
        return all(operand in value for operand in operands)
    return _BINARY[op](value, operands[0])


def traits(extra_specs):
    """[(trait, REQUIRED or FORBIDDEN)] a flavor asks Placement for, in key
    order. Nova ignores other values (it logs a warning), and so do we."""
    found = []
    for key, value in sorted(extra_specs.items()):
        match = _TRAIT_KEY.fullmatch(key)
        if match and value in (REQUIRED, FORBIDDEN):
            found.append((match.group(2), value))
    return found
