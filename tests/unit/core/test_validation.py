import copy
import json
import math
import unittest

import hypothesis
from hypothesis import strategies as st
import jsonschema

from osc_leveller.core import options as opts
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import planner
from osc_leveller.core import snapshot as snapshot_io
from osc_leveller.core import validation
from tests.unit import builders as b
from tests.unit import oracle

SCHEMAS = ('snapshot-v1', 'plan-v1', 'watcher-cluster')
LONE = '\ud800'  # a lone surrogate: json.loads('"\\ud800"') makes one
# What JSON Schema accepts and the validator must not: NaN passes every
# bound, 1e400 reads as infinity, 2**53 + 1 is no longer exact as a float.
UNREASONABLE = [math.nan, math.inf, -math.inf, 10 ** 400, 1e300,
                2 ** 53 + 1, -(2 ** 53) - 1, LONE, 'ok' + '\udfff']

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
    st.sampled_from(UNREASONABLE),
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


def agrees(document, schema):
    """(ours, theirs): theirs is jsonschema plus the stricter rules (finite
    numbers at most 2**53 in magnitude, valid Unicode), from the oracle."""
    ours = True
    try:
        validation.validate(document, schema)
    except validation.ValidationError:
        ours = False
    theirs = jsonschema.Draft202012Validator(schema).is_valid(document) \
        and oracle.json_problem(document) is None
    return ours, theirs


def good_plan_document():
    hyps, servers = b.three_hosts()
    return plan_mod.to_document(planner.make_plan(
        b.snapshot(hyps, servers), opts.PlannerOptions()))


class TestSchemas(unittest.TestCase):
    def test_schemas_are_valid_json_schema(self):
        for name in SCHEMAS:
            jsonschema.Draft202012Validator.check_schema(
                validation.load_schema(name))

    def test_good_snapshot_is_valid_for_both(self):
        hyps, servers = b.three_hosts()
        doc = b.document(hyps, servers)
        self.assertEqual((True, True), agrees(
            doc, validation.load_schema('snapshot-v1')))

    def test_error_names_the_path(self):
        schema = validation.load_schema('snapshot-v1')
        hyps, servers = b.three_hosts()
        doc = b.document(hyps, servers)
        doc['servers'][3]['flavor']['ram'] = -1
        with self.assertRaises(validation.ValidationError) as ctx:
            validation.validate(doc, schema)
        self.assertEqual('servers[3].flavor.ram', ctx.exception.path)
        self.assertEqual('must be >= 0 (got -1)', ctx.exception.message)

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(data=st.data())
    def test_agrees_with_jsonschema_on_mutations(self, data):
        schema = validation.load_schema('snapshot-v1')
        hyps, servers = b.three_hosts(hot_servers=2)
        servers[0]['usage'] = {'cpu': 0.5}
        hyps[0]['metrics'] = {'cpu': 0.5, 'ram': 0.5}
        doc = b.document(hyps, servers, groups=[
            {'id': 'g', 'policy': 'affinity', 'members': ['id-hot0'],
             'rules': {'max_server_per_host': 2}}],
            migrations=[{'server_id': 'id-hot0', 'status': 'done',
                         'created_at': None}])
        all_paths = list(paths(doc))
        path = data.draw(st.sampled_from(all_paths))
        action = data.draw(st.sampled_from(['replace', 'delete', 'add',
                                            'copy']))
        value = data.draw(json_values)
        mutated = mutate(doc, path, action, value)
        ours, theirs = agrees(mutated, schema)
        self.assertEqual(theirs, ours, (path, action, value))

    @hypothesis.settings(max_examples=200, deadline=None)
    @hypothesis.given(data=st.data())
    def test_agrees_with_jsonschema_on_plan_mutations(self, data):
        schema = validation.load_schema('plan-v1')
        doc = good_plan_document()
        path = data.draw(st.sampled_from(list(paths(doc))))
        action = data.draw(st.sampled_from(['replace', 'delete', 'add',
                                            'copy']))
        value = data.draw(json_values)
        ours, theirs = agrees(mutate(doc, path, action, value), schema)
        self.assertEqual(theirs, ours, (path, action, value))


class TestStricterThanJsonSchema(unittest.TestCase):
    """Values JSON Schema accepts and the validator refuses, each error
    naming its field, in typed and in free-form fields alike."""

    def refused(self, document, schema_name, path, words):
        schema = validation.load_schema(schema_name)
        self.assertEqual((False, False), agrees(document, schema))
        self.assertTrue(jsonschema.Draft202012Validator(schema).is_valid(
            document), 'JSON Schema alone should accept it')
        with self.assertRaises(validation.ValidationError) as ctx:
            validation.validate(document, schema)
        self.assertEqual(path, ctx.exception.path)
        self.assertIn(words, ctx.exception.message)

    def snapshot_doc(self):
        hyps, servers = b.three_hosts()
        return b.document(hyps, servers)

    def test_numbers_in_typed_fields(self):
        ratio = ('hypervisors', 0, 'inventories', 'VCPU', 'allocation_ratio')
        ram = ('servers', 2, 'flavor', 'ram')
        # NaN and infinity are no integers for JSON Schema either: the
        # integer field gets the huge ones only.
        cases = [(ratio, v, w) for v, w in (
            (math.nan, 'finite'), (math.inf, 'finite'),
            (10 ** 400, 'out of range'), (1e300, 'out of range'))]
        cases += [(ram, 10 ** 400, 'out of range'),
                  (ram, 1e300, 'out of range'),
                  (ram, 2 ** 53 + 1, 'out of range')]
        for keys, value, words in cases:
            path = '%s[%d].%s' % (keys[0], keys[1], '.'.join(keys[2:]))
            with self.subTest(path=path, value=value):
                doc = self.snapshot_doc()
                target = doc
                for key in keys[:-1]:
                    target = target[key]
                target[keys[-1]] = value
                self.refused(doc, 'snapshot-v1', path, words)

    def test_text_in_typed_fields(self):
        doc = self.snapshot_doc()
        doc['servers'][1]['name'] = 'web' + LONE
        self.refused(doc, 'snapshot-v1', 'servers[1].name', 'Unicode')
        doc = self.snapshot_doc()
        doc['servers'][0]['metadata'] = {LONE: 'x'}
        self.refused(doc, 'snapshot-v1', 'servers[0].metadata.' + LONE,
                     'Unicode')

    def test_snapshot_source(self):
        doc = self.snapshot_doc()
        doc['source']['description'] = LONE
        self.refused(doc, 'snapshot-v1', 'source.description', 'Unicode')
        doc = self.snapshot_doc()
        doc['source'][LONE] = 'x'
        self.refused(doc, 'snapshot-v1', 'source.' + LONE, 'Unicode')

    def test_free_form_plan_options(self):
        for value, words in ((math.nan, 'finite'), (-math.inf, 'finite'),
                             (10 ** 400, 'out of range'),
                             (2 ** 53 + 1, 'out of range'),
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

    def test_limits_are_inclusive(self):
        doc = good_plan_document()
        doc['options']['big'] = [2 ** 53, -(2 ** 53), float(2 ** 53)]
        validation.validate(doc, validation.load_schema('plan-v1'))

    def test_as_read_from_json_text(self):
        # 1e400 and Infinity read as inf, NaN as nan, "\ud800" as a lone
        # surrogate: json.loads accepts all of them.
        text = json.dumps(self.snapshot_doc())
        for old, new, path in (
                ('"allocation_ratio": 4.0', '"allocation_ratio": 1e400',
                 'hypervisors[0].inventories.VCPU.allocation_ratio'),
                ('"allocation_ratio": 4.0', '"allocation_ratio": NaN',
                 'hypervisors[0].inventories.VCPU.allocation_ratio'),
                ('"name": "hot1"', '"name": "\\ud800"', 'servers[1].name'),
                ('"kind": "test"', '"kind": "\\udfff"', 'source.kind')):
            with self.subTest(new=new):
                document = json.loads(text.replace(old, new, 1))
                with self.assertRaises(snapshot_io.SnapshotError) as ctx:
                    snapshot_io.parse(document)
                self.assertIn('snapshot: %s: ' % path, str(ctx.exception))
        plan_text = json.dumps(good_plan_document())
        document = json.loads(plan_text.replace(
            '"ceiling": 0.85', '"ceiling": Infinity'))
        with self.assertRaises(plan_mod.PlanError) as ctx:
            plan_mod.from_document(document)
        self.assertIn('plan: options.ceiling: must be a finite number',
                      str(ctx.exception))
