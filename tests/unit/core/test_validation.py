import copy
import json
import math
import os
import tempfile
import unittest

from hypothesis import strategies as st
import jsonschema

from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.model import validation
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

SCHEMAS = ('snapshot-v1', 'plan-v1', 'watcher-cluster')
LONE = '\ud800'  # a lone surrogate: json.loads('"\\ud800"') makes one

# Documents for the property tests (test_properties.py).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) |
    st.floats(-2, 2, allow_nan=False) | st.sampled_from(
        ['', 'x', 'ACTIVE', 'enabled', 'up', 'anti-affinity', 'VCPU',
         '2026-11-20T12:00:00Z', 'osc-leveller-snapshot/1',
         2 ** 53, -(2 ** 53),
         # Timestamps: lower-case z (RFC 3339), no such month, UTC year 0.
         '2026-11-20T12:00:00z', '2026-13-01T00:00',
         '0001-01-01T00:30:00+01:00',
         # Names and ids of the documents under test, and unknown ones.
         'hv0', 'hv1', 'hv2', 'hv9', 'id-s0', 'id-hot0', 'id-small0']) |
    st.sampled_from([math.nan, math.inf, -math.inf, 10 ** 400, 1e300,
                     2 ** 53 + 1, -(2 ** 53) - 1, LONE, 'ok' + '\udfff']),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(['name', 'total', 'cpu', 'x', 'VCPU', LONE]), inner,
        max_size=3),
    max_leaves=6)


def paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from paths(value, prefix + (index,))


def mutate(doc, path, action, value):
    doc = copy.deepcopy(doc)
    if not path:
        return value if action == 'replace' else doc
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if action == 'replace':
        parent[path[-1]] = value
    elif action == 'delete':  # a field, or a record of a list
        del parent[path[-1]]
    elif action == 'add' and isinstance(parent[path[-1]], dict):
        parent[path[-1]]['unexpected'] = value
    elif action == 'copy' and isinstance(parent, list):
        # A second hypervisor, server or move of the same name or id.
        parent.append(copy.deepcopy(parent[path[-1]]))
    return doc


def good_plan_document():
    hyps, servers = b.three_hosts()
    return plan_mod.to_document(planner.make_plan(
        b.snapshot(hyps, servers), opts.PlannerOptions()))


def snapshot_doc():
    hyps, servers = b.three_hosts()
    return b.document(hyps, servers)


def changed(doc, keys, value):
    doc = copy.deepcopy(doc)
    target = doc
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return doc


class TestSchemas(unittest.TestCase):
    def test_schemas_are_valid_json_schema(self):
        for name in SCHEMAS:
            jsonschema.Draft202012Validator.check_schema(
                validation.load_schema(name))

    def test_every_number_is_bounded(self):
        # A number the schema allows unbounded could lose units in a float:
        # every place a number may go bounds it to 2**53, free-form fields
        # included.
        for name in SCHEMAS:
            root = validation.load_schema(name)
            for where, node in nodes(root):
                with self.subTest(schema=name, where=where):
                    types = node.get('type', ())
                    types = [types] if isinstance(types, str) else types
                    numeric = {'number', 'integer'} & set(types) or (
                        'type' not in node and '$ref' not in node
                        and 'enum' not in node and 'const' not in node)
                    if numeric:
                        low = node.get('minimum', node.get(
                            'exclusiveMinimum'))
                        self.assertIsNotNone(low)
                        self.assertGreaterEqual(low, -2 ** 53)
                        self.assertLessEqual(node.get('maximum', math.inf),
                                             2 ** 53)
                    if 'object' in types or not types and 'properties' in \
                            node:
                        self.assertIn('additionalProperties', node)
                    if 'array' in types:
                        self.assertIn('items', node)

    def test_good_documents_are_valid(self):
        validation.validate(snapshot_doc(), 'snapshot-v1')
        validation.validate(good_plan_document(), 'plan-v1')

    def test_error_names_the_path(self):
        doc = changed(snapshot_doc(), ('servers', 3, 'flavor', 'ram'), -1)
        with self.assertRaises(validation.ValidationError) as ctx:
            validation.validate(doc, 'snapshot-v1')
        self.assertEqual('servers[3].flavor.ram', ctx.exception.path)
        self.assertEqual('must be >= 0 (got -1)', ctx.exception.message)

    def test_messages(self):
        cases = [
            (('servers', 0, 'flavor', 'vcpus'), 'four',
             'servers[0].flavor.vcpus: must be integer (got "four")'),
            (('servers', 0, 'usage'), {'cpu': 'x'},
             'servers[0].usage.cpu: must be number or null (got "x")'),
            (('format',), 'x',
             'format: must be "osc-leveller-snapshot/1" (got "x")'),
            (('hypervisors', 0, 'service', 'status'), 'maybe',
             'hypervisors[0].service.status: must be one of "enabled", '
             '"disabled" (got "maybe")'),
            (('servers', 1, 'status'), '', 'servers[1].status: must not be '
             'empty'),
            (('taken_at',), 'noon', 'taken_at: must match ^[0-9]{4}-'),
            (('hypervisors', 1, 'inventories', 'VCPU', 'allocation_ratio'),
             0, 'hypervisors[1].inventories.VCPU.allocation_ratio: must be > '
             '0 (got 0)'),
            (('hypervisors', 0, 'metrics'), {'cpu': 1.5},
             'hypervisors[0].metrics.cpu: must be <= 1 (got 1.5)'),
            (('hypervisors', 0, 'inventories', 'vcpu'), {'total': 1},
             'hypervisors[0].inventories.vcpu: must match ^[A-Z0-9_]+$ (got '
             '"vcpu")'),
            (('servers', 2, 'colour'), 'blue',
             'servers[2].colour: is not a known field'),
            (('servers', 2), {'id': 'x', 'flavor': {'vcpus': 1, 'ram': 1}},
             'servers[2].hypervisor: is required'),
            (('hypervisors',), {}, 'hypervisors: must be array (got {})'),
        ]
        for keys, value, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(validation.ValidationError) as ctx:
                    validation.validate(changed(snapshot_doc(), keys, value),
                                        'snapshot-v1')
                self.assertTrue(str(ctx.exception).startswith(message),
                                str(ctx.exception))

    def test_the_top_level(self):
        with self.assertRaises(validation.ValidationError) as ctx:
            validation.validate([], 'snapshot-v1')
        self.assertEqual('(top level): must be object (got [])',
                         str(ctx.exception))


class TestStricterThanJsonSchema(unittest.TestCase):
    """What JSON Schema accepts and the validator refuses, each error naming
    its field, in typed and in free-form fields alike."""

    def test_json_schema_alone_accepts_them(self):
        schema = jsonschema.Draft202012Validator(validation.load_schema(
            'snapshot-v1'))
        for value in (math.nan, LONE):
            self.assertTrue(schema.is_valid(changed(
                snapshot_doc(), ('servers', 0, 'usage'), {'cpu': value})
                if value != LONE else changed(
                    snapshot_doc(), ('servers', 0, 'name'), value)))

    def refused(self, document, schema_name, path, words):
        with self.assertRaises(validation.ValidationError) as ctx:
            validation.validate(document, schema_name)
        self.assertEqual(path, ctx.exception.path)
        self.assertIn(words, ctx.exception.message)

    def test_numbers_in_typed_fields(self):
        ratio = ('hypervisors', 0, 'inventories', 'VCPU', 'allocation_ratio')
        usage = ('servers', 0, 'usage')
        for value in (math.nan, math.inf, -math.inf):
            with self.subTest(value=value):
                self.refused(changed(snapshot_doc(), ratio, value),
                             'snapshot-v1', ratio_path(ratio), 'finite')
                # null is allowed there, NaN is not.
                self.refused(changed(snapshot_doc(), usage, {'cpu': value}),
                             'snapshot-v1', 'servers[0].usage.cpu', 'finite')

    def test_text(self):
        doc = changed(snapshot_doc(), ('servers', 1, 'name'), 'web' + LONE)
        self.refused(doc, 'snapshot-v1', 'servers[1].name', 'Unicode')
        doc = changed(snapshot_doc(), ('servers', 0, 'metadata'), {LONE: 'x'})
        self.refused(doc, 'snapshot-v1', 'servers[0].metadata.' + LONE,
                     'Unicode')
        doc = changed(snapshot_doc(), ('source', 'description'), LONE)
        self.refused(doc, 'snapshot-v1', 'source.description', 'Unicode')

    def test_free_form_plan_options(self):
        for value, words in ((math.nan, 'finite'), (-math.inf, 'finite'),
                             (LONE, 'Unicode')):
            with self.subTest(value=value):
                doc = good_plan_document()
                doc['options']['weights']['cpu'] = value
                self.refused(doc, 'plan-v1', 'options.weights.cpu', words)
                doc = good_plan_document()
                doc['options']['extra'] = [1, {'deep': value}]
                self.refused(doc, 'plan-v1', 'options.extra[1].deep', words)
        doc = good_plan_document()
        doc['options'][LONE] = 1
        self.refused(doc, 'plan-v1', 'options.' + LONE, 'Unicode')

    def test_plan_figures_and_source(self):
        doc = good_plan_document()
        doc['moves'][0]['gain'] = math.nan
        self.refused(doc, 'plan-v1', 'moves[0].gain', 'finite')
        doc = good_plan_document()
        doc['imbalance']['domains'][0]['after'] = math.nan
        self.refused(doc, 'plan-v1', 'imbalance.domains[0].after', 'finite')
        doc = good_plan_document()
        doc['snapshot']['source']['kind'] = LONE
        self.refused(doc, 'plan-v1', 'snapshot.source.kind', 'Unicode')

    def test_what_json_cannot_hold(self):
        # An in-memory document: refused with its field, not a traceback.
        for value, message in (
                ({1: 'x'}, 'servers[0].metadata: has a key that is not text '
                 '(1)'),
                ({'x': {'y'}}, 'servers[0].metadata.x: is not a JSON value '
                 '(got a set)')):
            with self.subTest(value=value):
                with self.assertRaises(validation.ValidationError) as ctx:
                    validation.validate(changed(snapshot_doc(), (
                        'servers', 0, 'metadata'), value), 'snapshot-v1')
                self.assertEqual(message, str(ctx.exception))

    def test_as_read_from_json_text(self):
        # 1e400 and Infinity read as inf, NaN as nan, "\ud800" as a lone
        # surrogate: json.loads accepts all of them.
        text = json.dumps(snapshot_doc())
        for old, new, path in (
                ('"allocation_ratio": 4.0', '"allocation_ratio": 1e400',
                 'hypervisors[0].inventories.VCPU.allocation_ratio'),
                ('"allocation_ratio": 4.0', '"allocation_ratio": NaN',
                 'hypervisors[0].inventories.VCPU.allocation_ratio'),
                ('"name": "hot1"', '"name": "\\ud800"', 'servers[1].name'),
                ('"kind": "test"', '"kind": "\\udfff"', 'source.kind')):
            with self.subTest(new=new):
                bad = text.replace(old, new, 1)
                with self.assertRaises(snapshot_io.SnapshotError) as ctx:
                    snapshot_io.parse(json.loads(bad))
                self.assertIn('snapshot: %s: ' % path, str(ctx.exception))
                # Read from a file: orjson refuses the text, and Python's
                # reader reads it for the validator to name the field.
                with tempfile.TemporaryDirectory() as tmp:
                    path_ = os.path.join(tmp, 's.json')
                    with open(path_, 'w') as f:
                        f.write(bad)
                    with self.assertRaises(snapshot_io.SnapshotError) as ctx:
                        snapshot_io.load(path_)
                self.assertIn('s.json: %s: ' % path, str(ctx.exception))
        plan_text = json.dumps(good_plan_document())
        document = json.loads(plan_text.replace(
            '"ceiling": 0.85', '"ceiling": Infinity'))
        with self.assertRaises(plan_mod.PlanError) as ctx:
            plan_mod.from_document(document)
        self.assertIn('plan: options.ceiling: must be a finite number',
                      str(ctx.exception))


class TestMagnitude(unittest.TestCase):
    """Beyond 2**53 a float no longer holds every integer: the schemas
    bound every number, typed or free-form."""

    def assert_out_of_range(self, document, schema_name, path):
        with self.assertRaises(validation.ValidationError) as ctx:
            validation.validate(document, schema_name)
        self.assertEqual(path, ctx.exception.path)
        self.assertIn('out of range (magnitude above 2**53', str(
            ctx.exception))

    def test_typed_fields(self):
        ratio = ('hypervisors', 0, 'inventories', 'VCPU', 'allocation_ratio')
        ram = ('servers', 2, 'flavor', 'ram')
        for keys, value in ((ratio, 10 ** 400), (ratio, 1e300),
                            (ram, 10 ** 400), (ram, 1e300),
                            (ram, 2 ** 53 + 1)):
            with self.subTest(keys=keys, value=value):
                self.assert_out_of_range(changed(snapshot_doc(), keys, value),
                                         'snapshot-v1', ratio_path(keys))

    def test_free_form_fields(self):
        for value in (10 ** 400, 2 ** 53 + 1, -(2 ** 53) - 1, -1e300):
            with self.subTest(value=value):
                doc = good_plan_document()
                doc['options']['extra'] = [1, {'deep': value}]
                self.assert_out_of_range(doc, 'plan-v1',
                                         'options.extra[1].deep')
                cluster = {'hypervisors': [{'name': 'h', 'vcpus': 1,
                                            'memory_mb': 1, 'x': [value]}],
                           'servers': []}
                self.assert_out_of_range(cluster, 'watcher-cluster',
                                         'hypervisors[0].x[0]')

    def test_limits_are_inclusive(self):
        doc = good_plan_document()
        doc['options']['big'] = [2 ** 53, -(2 ** 53), float(2 ** 53)]
        validation.validate(doc, 'plan-v1')


def ratio_path(keys):
    return '%s[%d].%s' % (keys[0], keys[1], '.'.join(keys[2:]))


def nodes(schema, where='#'):
    """(where, subschema) of every schema in a schema."""
    yield where, schema
    for key, value in schema.items():
        if key in ('properties', '$defs'):
            for name, sub in value.items():
                yield from nodes(sub, '%s/%s/%s' % (where, key, name))
        elif key in ('items', 'additionalProperties', 'propertyNames') and \
                isinstance(value, dict):
            yield from nodes(value, '%s/%s' % (where, key))
