import copy
import unittest

import hypothesis
from hypothesis import strategies as st
import jsonschema

from osc_leveller.core import validation
from tests.unit import builders as b

SCHEMAS = ('snapshot-v1', 'plan-v1', 'watcher-cluster')

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) |
    st.floats(-2, 2, allow_nan=False) | st.sampled_from(
        ['', 'x', 'ACTIVE', 'enabled', 'up', 'anti-affinity', 'VCPU',
         '2026-11-20T12:00:00Z', 'osc-leveller-snapshot/1']),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(['name', 'total', 'cpu', 'x', 'VCPU']), inner,
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
    elif action == 'delete' and isinstance(parent, dict):
        del parent[path[-1]]
    elif action == 'add' and isinstance(parent[path[-1]], dict):
        parent[path[-1]]['unexpected'] = value
    return doc


def agrees(document, schema):
    ours = True
    try:
        validation.validate(document, schema)
    except validation.ValidationError:
        ours = False
    theirs = jsonschema.Draft202012Validator(schema).is_valid(document)
    return ours, theirs


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
        action = data.draw(st.sampled_from(['replace', 'delete', 'add']))
        value = data.draw(json_values)
        mutated = mutate(doc, path, action, value)
        ours, theirs = agrees(mutated, schema)
        self.assertEqual(theirs, ours, (path, action, value))
