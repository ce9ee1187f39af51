"""Validate JSON documents against the JSON Schemas shipped in the package.

core/ stays on the standard library, so this checks the subset of JSON Schema
(draft 2020-12) that our schemas use, and names the bad field in every error:
``hypervisors[3].inventories.VCPU.allocation_ratio: must be > 0 (got -1)``.
The unit tests check that the real ``jsonschema`` agrees with it.

It is stricter than JSON Schema where Python's JSON reader is lax: every
number, wherever it is, must be finite and at most 2**53 in magnitude
(``NaN >= 0`` is false, so a NaN would pass any bound), and every string
valid Unicode (a lone surrogate escape cannot be printed).
"""

import json
import math
import re
from importlib import resources

from osc_leveller.core import errors

_TYPES = {
    'object': lambda v: isinstance(v, dict),
    'array': lambda v: isinstance(v, list),
    'string': lambda v: isinstance(v, str),
    # JSON Schema counts 2.0 as an integer too.
    'integer': lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (
        isinstance(v, float) and v.is_integer()),
    'number': lambda v: (isinstance(v, (int, float))
                         and not isinstance(v, bool)),
    'boolean': lambda v: isinstance(v, bool),
    'null': lambda v: v is None,
}
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


def validate(document, schema):
    """Raise ValidationError for the first mismatch, depth first."""
    _check(document, schema, schema, None)


# Paths are built lazily as (parent, key) pairs: a 50,000-server snapshot has
# millions of nodes and only a failing one needs its path spelled out.
def _spell(path):
    keys = []
    while path is not None:
        path, key = path
        keys.append(key)
    text = ''
    for key in reversed(keys):
        if isinstance(key, int):
            text += '[%d]' % key
        else:
            text += '.%s' % key if text else key
    return text


def _fail(path, message):
    raise ValidationError(_spell(path), message)


def _short(value):
    try:
        text = json.dumps(value)
    except ValueError:  # an int with more digits than Python prints
        text = 'a number of over 4,300 digits'
    return text if len(text) <= 40 else text[:37] + '...'


def _resolve(root, ref):
    target = root
    for part in ref.lstrip('#/').split('/'):
        target = target[part]
    return target


def _check(value, schema, root, path):
    if not schema:
        _check_free(value, path)
        return
    if '$ref' in schema:
        _check(value, _resolve(root, schema['$ref']), root, path)
    if 'type' in schema:
        types = schema['type']
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            _fail(path, 'must be %s (got %s)' % (' or '.join(types),
                                                 _short(value)))
    if 'const' in schema and value != schema['const']:
        _fail(path, 'must be %s (got %s)' % (_short(schema['const']),
                                             _short(value)))
    if 'enum' in schema and value not in schema['enum']:
        _fail(path, 'must be one of %s (got %s)' % (
            ', '.join(_short(v) for v in schema['enum']), _short(value)))
    if isinstance(value, str):
        _check_text(value, path)
        if len(value) < schema.get('minLength', 0):
            _fail(path, 'must not be empty')
        if 'pattern' in schema and not re.search(schema['pattern'], value):
            _fail(path, 'must match %s (got %s)' % (schema['pattern'],
                                                    _short(value)))
    elif isinstance(value, dict):
        _check_object(value, schema, root, path)
    elif isinstance(value, list):
        items = schema.get('items', {})
        for index, item in enumerate(value):
            _check(item, items, root, (path, index))
    elif _TYPES['number'](value):
        _check_number(value, schema, path)


def _check_free(value, path):
    """Numbers and strings where the schema allows anything."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, (path, key))
            _check_free(item, (path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_free(item, (path, index))
    elif isinstance(value, str):
        _check_text(value, path)
    elif _TYPES['number'](value):
        _check_number(value, {}, path)


def _check_text(value, path):
    if not value.isascii():
        try:
            value.encode('utf-8')
        except UnicodeEncodeError:
            _fail(path, 'is not valid Unicode text (a lone surrogate '
                  'escape?)')


def _check_number(value, schema, path):
    if isinstance(value, float) and not math.isfinite(value):
        _fail(path, 'must be a finite number (got %s)' % value)
    if abs(value) > MAX_MAGNITUDE:
        _fail(path, 'is out of range (magnitude above 2**53: %s)' %
              _short(value))
    if 'minimum' in schema and value < schema['minimum']:
        _fail(path, 'must be >= %s (got %s)' % (schema['minimum'], value))
    if 'exclusiveMinimum' in schema and value <= schema['exclusiveMinimum']:
        _fail(path, 'must be > %s (got %s)' % (schema['exclusiveMinimum'],
                                               value))
    if 'maximum' in schema and value > schema['maximum']:
        _fail(path, 'must be <= %s (got %s)' % (schema['maximum'], value))


def _check_object(value, schema, root, path):
    for name in schema.get('required', ()):
        if name not in value:
            _fail((path, name), 'is required')
    properties = schema.get('properties', {})
    extra = schema.get('additionalProperties', True)
    names = schema.get('propertyNames')
    free = not properties and extra is True and names is None
    for key, item in value.items():
        item_path = (path, key)
        _check_text(key, item_path)
        if free:
            _check_free(item, item_path)
            continue
        if names is not None:
            _check(key, names, root, item_path)
        if key in properties:
            _check(item, properties[key], root, item_path)
        elif extra is False:
            _fail(item_path, 'is not a known field')
        elif isinstance(extra, dict):
            _check(item, extra, root, item_path)
        else:
            _check_free(item, item_path)
