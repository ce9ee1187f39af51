"""Validate JSON documents against the JSON Schemas shipped in the package.

jsonschema-rs checks a document (draft 2020-12), 50,000 servers in tens of
milliseconds; only when it fails do we look for the first error and name
its field: ``hypervisors[3].inventories.VCPU.allocation_ratio: must be > 0
(got -1)``.

It is stricter than JSON Schema where Python's JSON reader is lax: every
number must be finite (``NaN >= 0`` is false, so a NaN would pass any bound)
and every string valid Unicode (a lone surrogate escape cannot be printed).
A strict JSON reader (files.read_json) refuses both; a document from
anywhere else is walked for them, and for what JSON cannot hold (a set, a
key that is not text). Either way its nesting is bounded (orjson stops at
1,024 levels, the walk at Python's recursion limit) before jsonschema-rs,
which crashes the process on some 20,000, sees it. Numbers must also be at
most 2**53 in magnitude, where a float still holds every integer: the
schemas bound every number they allow, free-form ones included
(``$defs/json``).
"""

import functools
import json
import math
from importlib import resources

import jsonschema_rs

from osc_leveller.core.model import errors

# The largest integer a float holds exactly: beyond it, amounts lose units.
MAX_MAGNITUDE = 2 ** 53


class ValidationError(errors.LevellerError, ValueError):
    """A document does not match its schema; str() names the field."""

    def __init__(self, path, message):
        self.path = path
        self.message = message
        super().__init__('%s: %s' % (path or '(top level)', message))


def load_schema(name):
    """A schema shipped in osc_leveller/data, e.g. 'snapshot-v1'."""
    text = resources.files('osc_leveller.data').joinpath(
        name + '.schema.json').read_text(encoding='utf-8')
    return json.loads(text)


@functools.lru_cache(maxsize=None)
def _validator(name):
    schema = load_schema(name)
    return schema, jsonschema_rs.validator_for(schema)


def validate(document, name, strict=False):
    """Raise ValidationError for the first problem of the document against
    schema name ('snapshot-v1'). strict: the document came from a strict
    JSON reader, so it holds no NaN, infinity or lone surrogate to look for.
    RecursionError when it is nested deeper than Python recurses."""
    if not strict:
        _check_json(document)
    schema, validator = _validator(name)
    if not validator.is_valid(document):
        raise _explain(document, schema, next(validator.iter_errors(
            document)))


def _check_json(document):
    try:
        _walk([document])
    except _Bad as bad:  # its last key is the index into [document]
        raise ValidationError(_spell(reversed(bad.keys[:-1])),
                              bad.message) from None


class _Bad(Exception):
    def __init__(self, message):
        self.message = message
        self.keys = []  # innermost first, filled in on the way out


def _walk(value):
    """NaN, infinities, lone surrogates, and what JSON cannot hold."""
    is_dict = type(value) is dict
    for key, item in value.items() if is_dict else enumerate(value):
        if is_dict and type(key) is not str:
            raise _Bad('has a key that is not text (%s)' % errors.quote(key))
        try:
            if is_dict and not key.isascii():
                _check_text(key)
            kind = type(item)
            if kind is dict or kind is list:
                _walk(item)
            elif kind is float:
                if not math.isfinite(item):
                    raise _Bad('must be a finite number (got %s)' % item)
            elif kind is str:
                if not item.isascii():
                    _check_text(item)
            elif not (kind is int or kind is bool or item is None):
                raise _Bad('is not a JSON value (got a %s)' % kind.__name__)
        except _Bad as bad:
            bad.keys.append(key)
            raise


def _check_text(text):
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        raise _Bad('is not valid Unicode text (a lone surrogate escape?)') \
            from None


def _spell(keys):
    text = ''
    for key in keys:
        if isinstance(key, int):
            text += '[%d]' % key
        else:
            text += '.%s' % key if text else key
    return text


def not_one_of(where, value, allowed):
    """The ValidationError of a value that is none of those allowed."""
    return ValidationError(where, _one_of(allowed, value))


def _one_of(allowed, value):
    return 'must be one of %s (got %s)' % (
        ', '.join(_short(v) for v in allowed), _short(value))


def _short(value):
    try:
        text = json.dumps(value)
    except ValueError:  # an int with more digits than Python prints
        text = 'a number of over 4,300 digits'
    return text if len(text) <= 40 else text[:37] + '...'


def _explain(document, schema, error):
    """Our ValidationError for one of jsonschema-rs's errors."""
    keys = list(error.instance_path)
    value = document
    for key in keys:
        value = value[key]
    kind = error.kind.name
    details = error.kind.as_dict()
    if kind == 'required':
        return ValidationError(_spell(keys + [details['property']]),
                               'is required')
    if kind == 'additionalProperties':
        return ValidationError(_spell(keys + details['unexpected'][:1]),
                               'is not a known field')
    if kind == 'propertyNames':
        # The inner error is about the key itself, as a string.
        error = details['error']
        keys.append(error.instance)
        value = error.instance
        kind = error.kind.name
    # The keyword as written in our schema: jsonschema-rs reorders types.
    limit = schema
    for part in error.schema_path:
        limit = limit[part]
    if kind == 'type':
        types = [limit] if isinstance(limit, str) else limit
        message = 'must be %s (got %s)' % (' or '.join(types), _short(value))
    elif kind == 'const':
        message = 'must be %s (got %s)' % (_short(limit), _short(value))
    elif kind == 'enum':
        message = _one_of(limit, value)
    elif kind == 'minLength':
        message = 'must not be empty'
    elif kind == 'maxLength':  # not quoted whole: it is long
        message = 'must be at most %d characters (got %d: %s)' % (
            limit, len(value), _short(value))
    elif kind == 'maxItems':
        message = 'must have at most %d items (got %d)' % (limit, len(value))
    elif kind == 'maxProperties':
        message = 'must have at most %d keys (got %d)' % (limit, len(value))
    elif kind == 'pattern':
        message = 'must match %s (got %s)' % (limit, _short(value))
    elif kind in ('minimum', 'maximum') and abs(limit) == MAX_MAGNITUDE:
        message = 'is out of range (magnitude above 2**53: %s)' % _short(
            value)
    elif kind in _BOUNDS:
        message = 'must be %s %s (got %s)' % (_BOUNDS[kind], limit, value)
    else:  # a keyword our schemas do not use yet
        message = error.message
    return ValidationError(_spell(keys), message)


_BOUNDS = {'minimum': '>=', 'exclusiveMinimum': '>', 'maximum': '<='}
