"""Bad inputs of every kind, generated from a seed, run through the shell.

Every expected failure must end in one clean error that names its cause:
the file and the field (in the validator's notation,
``hypervisors[1].inventories.VCPU.allocation_ratio``), the setting and its
layer (``--config PATH``, ``clouds.yaml cloud NAME: leveller``, the flag),
or the endpoint (``Nova GET /servers/detail``, ``/v3/auth/tokens``,
Prometheus' URL), with the documented exit code (doc/source/user/index.rst):
1 for errors, 2 for argument parser usage errors, 0 where the documented
behaviour is to carry on with a note (a hypervisor whose metric is NaN or
outside 0..1, or a Prometheus that does not answer, is scored from
allocations, with the reason).

``generate(seed)`` makes the cases (random.Random(seed)): valid documents
mutated at random paths with certainly-invalid values, whole files damaged,
every setting with bad values of its kind in every layer, the collector's
endpoints with every fault of the stand-in cloud (tests/unit/standin.py),
and Prometheus answers of the wrong shape. ``run(cases)`` runs each through
``openstackclient.shell.OpenStackShell().run(argv)`` in this process (a
fresh shell per case, its own directory as HOME) and judges it.

    python -m tests.unit.badinput --seed 3 [--count 400]

prints the totals line for that seed, and every failing case.
"""

import argparse
import contextlib
import copy
import dataclasses
import http.server
import io
import json
import logging
import os
import random
import re
import resource
import shutil
import signal
import stat
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import warnings
from unittest import mock

import yaml

from osc_leveller.cloud import measure
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.model import validation
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as core_options
from tests.unit import builders as b
from tests.unit import standin

# Defects known and not fixed yet: (kind, description) -> where and why.
# Such a case still runs; it counts as known while it fails, and as stale
# (an error) once it passes, so the entry is removed.
KNOWN = {}
KINDS = ('snapshot-file', 'plan-file', 'config-file', 'clouds-yaml', 'flag',
         'cloud-answer', 'prometheus-answer', 'target-placement-file',
         'output-path')
# Cases per kind for the default run, about 800 (under a minute on two
# idle cores, a minute and a half on busy ones); --count scales them. A
# kind with fewer distinct cases (flags, endpoints x faults) gives all.
QUOTA = {'snapshot-file': 150, 'plan-file': 95, 'config-file': 120,
         'clouds-yaml': 80, 'flag': 110, 'cloud-answer': 180,
         'prometheus-answer': 105, 'target-placement-file': 40,
         'output-path': 70}
DIR = '{dir}'  # the case's own directory, in argv, files and expectations
CLOUD = 'standin'
MESSAGE_LIMIT = 2000
# What a terminal acts on rather than shows: C0 but tab and line ends,
# DEL, C1. No output of any case may hold one (-f json escapes them).
CONTROLS = re.compile('[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]')
BOMB_MEMORY_MB = 200
CASE_SECONDS = 30  # a case still running then has hung: it fails
# Secrets planted in some cases; none may appear in any output.
KEYSTONE_PASSWORD = 'Bad-Input-Keystone-Secret-1'
PROM_PASSWORD = 'Bad-Input-Prometheus-Password-2'
PROM_TOKEN = 'Bad-Input-Prometheus-Token-3'
URL_PASSWORD = 'Bad-Input-Url-Password-4'
SECRETS = (KEYSTONE_PASSWORD, PROM_PASSWORD, PROM_TOKEN, URL_PASSWORD)
# No retries; against a stall, tiny timeouts, so a stalled service fails
# in a fraction of a second (cloud.* and prometheus.* settings in the
# clouds.yaml entry). Other cases keep seconds: a busy machine is slow.
STALL_TIMEOUT = 0.3
TIMEOUT = 10.0
PROM_SETTINGS = {'retries': 0, 'profile': 'utilisation'}
DIRECTORY = object()  # a file entry that is a directory
FIFO = object()  # a file entry that is a FIFO
SOCKET = object()  # a file entry that is a unix socket (nothing listens)
# How deep a document nests to be "too deep" for any JSON or YAML reader.
TOO_DEEP = 100000
# YAML's reader, pure Python, takes seconds to fail on that; this much is
# past its recursion limit too.
YAML_TOO_DEEP = 10000


@dataclasses.dataclass
class Sparse:
    """A file entry of this many bytes that takes no disk space."""
    size: int


@dataclasses.dataclass
class Link:
    """A file entry that is a symbolic link to target."""
    target: str


@dataclasses.dataclass
class Cloud:
    """The stand-in cloud a live case runs against.

    faults: [(service, path prefix, kind)] (StandIn.fault). corrupt: a
    function(StandIn) that spoils what it serves. prometheus: None (no
    Prometheus configured), a function promql -> [(labels, value)] for the
    stand-in's Prometheus, or (status, content type, body bytes) answered
    as is by a raw server. leveller: more settings for the clouds.yaml
    entry's leveller section. prometheus_range: the stand-in's range
    queries (StandIn.prometheus_range).
    """
    faults: tuple = ()
    corrupt: object = None
    prometheus: object = None
    leveller: dict = dataclasses.field(default_factory=dict)
    prometheus_range: object = None


@dataclasses.dataclass
class Case:
    """One bad input: argv after ``openstack --os-cloud standin``, files
    to write first (name -> text, bytes, DIRECTORY, Sparse, or None for
    none), the exit code the user guide documents, and what the message
    must name.
    DIR in argv, files and expect is the case's own directory."""
    kind: str
    description: str
    argv: list
    expect: tuple  # substrings the message must contain
    code: int = 1
    files: dict = dataclasses.field(default_factory=dict)
    cloud: Cloud = None
    # The clouds.yaml entry's leveller section: a mapping, or YAML text.
    leveller: object = None
    entry: dict = dataclasses.field(default_factory=dict)  # more entry keys
    secrets: tuple = ()
    memory_mb: int = None  # most the process may grow by
    absent: tuple = ()  # paths that must not exist afterwards

    def __str__(self):
        return '%s: %s' % (self.kind, self.description)


# -- documents -----------------------------------------------------------

HYPERVISORS = ('hv1', 'hv2', 'hv3')


def rp_uuid(name):
    return standin.derived_uuid('hypervisor', name)


def snapshot_doc():
    """A small valid snapshot using most of the format."""
    hyps = []
    for i, name in enumerate(HYPERVISORS):
        hyp = b.hypervisor(
            name, uuid=rp_uuid(name), cpu=0.1 + 0.8 * (i == 0),
            ram=0.2 + 0.6 * (i == 0),
            aggregates=[{'name': 'agg-%s' % name,
                         'metadata': {'ssd': 'true'}}],
            traits=['HW_CPU_X86_AVX2'], hypervisor_type='QEMU',
            hypervisor_version=8002000,
            cpu_info={'arch': 'x86_64', 'model': 'Gen1',
                      'features': ['avx2', 'sse4.2']})
        hyp['service'].update(forced_down=False, disabled_reason=None)
        hyps.append(hyp)
    servers = [b.server('hot%d' % i, 'hv1', vcpus=4, ram_gb=16, cpu=0.5,
                        ram=0.5, metadata={'role': 'web'}, tags=['t1'],
                        locked=False, task_state=None)
               for i in range(5)]
    servers += [b.server('cool%d' % h, 'hv%d' % h, vcpus=4, ram_gb=16,
                         server_groups=['g1'], boot_from_volume=False)
                for h in (2, 3)]
    for hyp in hyps:  # what the flavors allocate (4 vCPU, 16 GiB, 10 GB)
        count = sum(1 for s in servers if s['hypervisor'] == hyp['name'])
        hyp['usages'] = {'VCPU': 4 * count, 'MEMORY_MB': 16384 * count,
                         'DISK_GB': 10 * count}
    groups = [{'id': 'g1', 'name': 'web', 'project_id': 'p1',
               'policy': 'anti-affinity', 'members': ['id-cool2', 'id-cool3'],
               'rules': {'max_server_per_host': 1}}]
    migrations = [{'id': 'm1', 'server_id': 'id-hot0', 'status': 'completed',
                   'migration_type': 'live-migration',
                   'source_compute': 'cmp-hv2', 'dest_compute': 'cmp-hv1',
                   'created_at': '2026-11-19T09:00:00Z',
                   'updated_at': '2026-11-19T09:05:00Z'}]
    doc = b.document(hyps, servers, groups, migrations)
    snapshot_io.parse(copy.deepcopy(doc))  # valid, or the corpus is wrong
    return doc


def cloud_doc():
    """What the stand-in serves: three hosts, known provider uuids."""
    hyps, servers = b.three_hosts(hot_servers=3)
    for hyp in hyps:
        hyp['uuid'] = rp_uuid(hyp['name'])
    servers[0]['metadata'] = {'role': 'web'}
    groups = [{'id': standin.derived_uuid('group', 'g1'), 'name': 'web',
               'policy': 'anti-affinity',
               'members': [servers[1]['id'], servers[-1]['id']],
               'rules': {'max_server_per_host': 1}}]
    migrations = [{'id': standin.derived_uuid('migration', 'm1'),
                   'server_id': servers[0]['id'], 'status': 'completed',
                   'migration_type': 'live-migration',
                   'source_compute': 'cmp-hv2', 'dest_compute': 'cmp-hv1',
                   'created_at': '2026-11-20T09:00:00Z',
                   'updated_at': '2026-11-20T09:05:00Z'}]
    return b.document(hyps, servers, groups, migrations)


def watcher_doc():
    """A Watcher baseline cluster file."""
    hyps = [{'name': 'w%d' % i, 'uuid': standin.derived_uuid('w', str(i)),
             'vcpus': 32, 'memory_mb': 131072, 'disk_gb': 1000,
             'cpu_ratio': 4.0, 'ram_ratio': 1.0, 'disk_ratio': 1.0,
             'reserved_memory_mb': 0, 'reserved_vcpus': 0, 'az': 'az1',
             'cpu_model': 'Gen1', 'state': 'up', 'status': 'enabled',
             'disabled_reason': None} for i in (1, 2, 3)]
    servers = [{'id': 's%d' % i, 'name': 'vm%d' % i,
                'host': 'w1' if i < 4 else 'w2', 'vcpus': 4,
                'memory_mb': 8192, 'disk_gb': 20, 'cpu_util': 0.5,
                'mem_util': 0.4, 'status': 'ACTIVE', 'project_id': 'p1',
                'metadata': {'role': 'db'}} for i in range(1, 6)]
    groups = [{'id': 'g1', 'name': 'db', 'policy': 'anti-affinity',
               'members': ['s4', 's5']}]
    return {'hypervisors': hyps, 'servers': servers, 'server_groups': groups}


def plan_doc():
    """A plan of the small snapshot, as plan --output-file writes it."""
    snap = snapshot_io.parse(copy.deepcopy(snapshot_doc()))
    plan = planner.make_plan(snap, core_options.PlannerOptions())
    doc = plan_mod.to_document(plan)
    doc['created_at'] = '2026-11-20T12:05:00Z'
    assert len(doc['moves']) >= 2, 'the corpus needs a plan with moves'
    assert all('estimate' in m for m in doc['moves']), \
        'the corpus needs moves with estimates'
    plan_mod.from_document(copy.deepcopy(doc))
    return doc


# -- writing documents with values json.dumps will not write -------------

class Raw:
    """JSON text put into a document as is (1e400, deep nesting)."""

    def __init__(self, text, label):
        self.text, self.label = text, label

    def __repr__(self):
        return self.label


def to_json(document, indent=1):
    """JSON text; Raw values verbatim; NaN, Infinity and lone surrogates
    (escaped) the way Python writes them."""
    raws = []

    def place(value):
        if isinstance(value, Raw):
            raws.append(value.text)
            return '@@raw%d@@' % (len(raws) - 1)
        if isinstance(value, dict):
            return {k: place(v) for k, v in value.items()}
        if isinstance(value, list):
            return [place(v) for v in value]
        return value

    text = json.dumps(place(document), indent=indent)
    for index, raw in enumerate(raws):
        text = text.replace('"@@raw%d@@"' % index, raw)
    return text


def deep(depth):
    return Raw('[' * depth + ']' * depth, 'a list nested %d deep' % depth)


def bomb(levels=9, width=9):
    """YAML flow text of a few hundred bytes that expands to width**levels
    strings (the 'billion laughs')."""
    parts = ['&a0 [%s]' % ', '.join(['lol'] * width)]
    for level in range(1, levels):
        parts.append('&a%d [%s]' % (level, ', '.join(
            ['*a%d' % (level - 1)] * width)))
    return '[%s]' % ', '.join(parts)


# -- schema-guided mutation -------------------------------------------------

def _merged(schema, root):
    """The schema with its $ref ('#/$defs/name') followed."""
    if '$ref' not in schema:
        return schema
    target = root
    for part in schema['$ref'].lstrip('#/').split('/'):
        target = target[part]
    return dict(_merged(target, root),
                **{k: v for k, v in schema.items() if k != '$ref'})


def _child_schema(schema, key, root):
    if isinstance(key, int):
        return _merged(schema.get('items', {}), root)
    properties = schema.get('properties', {})
    if key in properties:
        return _merged(properties[key], root)
    extra = schema.get('additionalProperties', True)
    return _merged(extra, root) if isinstance(extra, dict) else {}


def nodes(document, root):
    """[(path, value, schema, parent schema)] of every node below the top."""
    found = []

    def walk(value, schema, path):
        children = value.items() if isinstance(value, dict) else \
            enumerate(value) if isinstance(value, list) else ()
        for key, item in children:
            sub = _child_schema(schema, key, root)
            found.append((path + (key,), item, sub, schema))
            walk(item, sub, path + (key,))

    walk(document, _merged(root, root), ())
    return found


def spell(path):
    """A path in the validator's notation: servers[0].flavor.ram."""
    text = ''
    for key in path:
        if isinstance(key, int):
            text += '[%d]' % key
        else:
            text += '.%s' % key if text else key
    return text


def _get(document, path):
    for key in path:
        document = document[key]
    return document


def _set(document, path, value):
    _get(document, path[:-1])[path[-1]] = value


_TYPE_OF = {
    'object': lambda v: isinstance(v, dict),
    'array': lambda v: isinstance(v, list),
    'string': lambda v: isinstance(v, str),
    'integer': lambda v: isinstance(v, int) and not isinstance(v, bool),
    'number': lambda v: isinstance(v, (int, float))
    and not isinstance(v, bool),
    'boolean': lambda v: isinstance(v, bool),
    'null': lambda v: v is None,
}
_SAMPLES = ({'x': 1}, ['x'], 'x', 7, 0.5, True, None)


def _types(schema):
    types = schema.get('type', ())
    return [types] if isinstance(types, str) else list(types)


def wrong_type(schema):
    """A value of a JSON type the schema does not allow, or None."""
    types = schema.get('type')
    if types is None:
        if 'enum' in schema or 'const' in schema:
            return 'bogus-value'
        return None
    types = [types] if isinstance(types, str) else types
    bad = [v for v in _SAMPLES if not any(_TYPE_OF[t](v) for t in types)]
    return bad or None


def out_of_range(schema):
    """A value of the right type the schema refuses, or None."""
    if 'minimum' in schema:
        return schema['minimum'] - 1
    if 'exclusiveMinimum' in schema:
        return schema['exclusiveMinimum']
    if 'maximum' in schema:
        return schema['maximum'] + 1
    if schema.get('minLength'):
        return ''
    if 'pattern' in schema:
        return 'not matching at all!'
    if 'enum' in schema:
        return 'bogus-value'
    return None


# The values that are wrong wherever they appear, as (label, value).
EVERYWHERE = (
    ('NaN', float('nan')), ('Infinity', float('inf')),
    ('-Infinity', float('-inf')), ('1e400', Raw('1e400', '1e400')),
    ('-1e400', Raw('-1e400', '-1e400')), ('10**400', 10 ** 400),
    ('-(2**53+1)', -(2 ** 53 + 1)),
)
SURROGATES = ('\ud800', '\udfff', 'x\udc80y')


class Mutator:
    """One mutation of a valid document at a random path per call.

    Returns (document, label, path the error names, or None when only the
    file is named) or None when the mutation found no place to apply.
    keep(path): whether a path may be mutated (Watcher files: not what
    tells the format apart).
    """

    KINDS = ('everywhere', 'everywhere', 'surrogate', 'surrogate-key',
             'wrong-type', 'wrong-type', 'range', 'delete', 'unknown-field',
             'deep', 'deep-shallow')

    def __init__(self, document, schema_name, keep=lambda path: True):
        self.document = document
        self.root = validation.load_schema(schema_name)
        self.nodes = [n for n in nodes(document, self.root) if keep(n[0])]

    def __call__(self, rng, kind=None):
        kind = kind or rng.choice(self.KINDS)
        doc = copy.deepcopy(self.document)
        method = getattr(self, '_' + kind.replace('-', '_'))
        result = method(rng, doc)
        if result is None:
            return None
        label, path = result
        if path is not None:
            label = '%s at %s' % (label, spell(path) or '(top)')
        return doc, label, path

    def _pick(self, rng, test):
        choices = [n for n in self.nodes if test(n)]
        return rng.choice(choices) if choices else None

    def _everywhere(self, rng, doc):
        path = self._pick(rng, lambda n: True)[0]
        label, value = rng.choice(EVERYWHERE)
        _set(doc, path, value)
        return label, path

    def _surrogate(self, rng, doc):
        node = self._pick(rng, lambda n: isinstance(n[1], str))
        if node is None:
            return None
        text = rng.choice(SURROGATES)
        _set(doc, node[0], rng.choice((text, node[1] + text)))
        return 'lone surrogate', node[0]

    def _surrogate_key(self, rng, doc):
        node = self._pick(rng, lambda n: isinstance(n[0][-1], str) and
                          n[0][-1] not in n[3].get('required', ()))
        if node is None:
            return None
        path = node[0]
        parent = _get(doc, path[:-1])
        key = path[-1] + rng.choice(SURROGATES)
        parent[key] = parent.pop(path[-1])
        # The key itself is printed escaped: the message names the parent.
        return 'lone surrogate in key', path[:-1]

    def _wrong_type(self, rng, doc):
        node = self._pick(rng, lambda n: wrong_type(n[2]) is not None)
        if node is None:
            return None
        values = wrong_type(node[2])
        value = rng.choice(values) if isinstance(values, list) else values
        _set(doc, node[0], copy.deepcopy(value))
        return 'wrong type %s' % json.dumps(value), node[0]

    def _range(self, rng, doc):
        node = self._pick(rng, lambda n: out_of_range(n[2]) is not None
                          and not isinstance(n[1], (dict, list)))
        if node is None:
            return None
        value = out_of_range(node[2])
        _set(doc, node[0], value)
        return 'out of range %s' % json.dumps(value), node[0]

    def _delete(self, rng, doc):
        node = self._pick(rng, lambda n: isinstance(n[0][-1], str) and
                          n[0][-1] in n[3].get('required', ()))
        if node is None:
            return None
        del _get(doc, node[0][:-1])[node[0][-1]]
        return 'required field deleted', node[0]

    def _unknown_field(self, rng, doc):
        node = self._pick(rng, lambda n: isinstance(n[1], dict) and
                          n[2].get('additionalProperties') is False)
        if node is None:
            return None
        _get(doc, node[0])['bogus_field'] = 1
        return 'unknown field', node[0] + ('bogus_field',)

    def _deep(self, rng, doc):
        path = self._pick(rng, lambda n: True)[0]
        _set(doc, path, deep(TOO_DEEP))
        # No JSON reader gets to the field: the message names the file.
        return 'nested %d deep at %s' % (TOO_DEEP, spell(path)), None

    def _deep_shallow(self, rng, doc):
        # Deep enough to be silly, shallow enough for any JSON reader: the
        # type check of the first level fails.
        node = self._pick(rng, lambda n: _types(n[2]) and
                          'array' not in _types(n[2]))
        if node is None:
            return None
        _set(doc, node[0], deep(50))
        return 'nested 50 deep', node[0]


# -- whole files ------------------------------------------------------------

def damaged_files(rng, text, empty_ok=False, depth=TOO_DEEP):
    """[(label, file content, phrase the message names)] of whole-file
    damage to a document's text (JSON, which YAML reads as flow style, so
    a truncation is invalid YAML too). empty_ok: an empty document is
    valid (a settings file that sets nothing)."""
    cut = rng.randrange(1, max(2, text.rfind('}')))
    noise = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 200)))
    return [
        ('truncated at byte %d' % cut, text[:cut], None),
        ('binary bytes', b'\x00\xff\xfe' + noise, 'UTF-8'),
        ('not UTF-8 (Latin-1 text)', text.replace('"', '"\xe9', 1).encode(
            'latin-1', 'replace'), 'UTF-8'),
        ('a directory', DIRECTORY, None),
        ('missing', None, 'does not exist'),
        ('top-level array', '[%s]' % text, None),
        ('top-level number', '42\n', None),
        ('top-level string', '"just a string"\n', None),
        ('top-level NaN', 'NaN\n', None),
        ('NUL bytes in text', text[:cut] + '\x00' + text[cut:], None),
        ('nested %d deep' % depth, '[' * depth + ']' * depth, None),
        ('trailing garbage', text + '\n}}} garbage', None),
    ] + ([] if empty_ok else [
        ('empty file', '', None),
        ('only whitespace', ' \n\t\n', None),
    ])


def damaged_json(rng, text):
    """damaged_files() and what only JSON refuses: a byte order mark."""
    return damaged_files(rng, text) + [
        ('UTF-8 byte order mark', '\ufeff' + text, None)]


# -- the generators, one per kind ------------------------------------------

def _snapshot_commands(path):
    return [
        ['leveller', 'score', '--snapshot', path],
        ['leveller', 'plan', '--snapshot', path],
        ['leveller', 'plan', '--snapshot', path, '--explain', 'hot0'],
        ['leveller', 'plan', '--snapshot', path, '--output-file',
         DIR + '/plan.json'],
    ]


def _semantic_snapshot(doc):
    """(label, document, path) of documents schema-valid but inconsistent."""
    cases = []

    def add(label, path, change):
        d = copy.deepcopy(doc)
        change(d)
        cases.append((label, d, path))

    add('duplicate hypervisor', 'hypervisors[1].name',
        lambda d: d['hypervisors'][1].update(name='hv1'))
    add('server on an unknown hypervisor', 'servers[2].hypervisor',
        lambda d: d['servers'][2].update(hypervisor='hv9'))
    add('duplicate server', 'servers[1].id',
        lambda d: d['servers'][1].update(id=d['servers'][0]['id']))
    add('reserved above total',
        'hypervisors[2].inventories.MEMORY_MB.reserved',
        lambda d: d['hypervisors'][2]['inventories']['MEMORY_MB'].update(
            reserved=10 ** 9))
    for moment in ('2026-11-20T25:00:00Z', '2026-02-30T10:00:00Z',
                   '2026-11-20T10:00:00+25:00', '0001-01-01T00:00:00+14:00',
                   '9999-12-31T23:59:59-14:00', '0000-01-01T00:00:00Z'):
        add('impossible time %s' % moment, 'taken_at',
            lambda d, m=moment: d.update(taken_at=m))
        add('impossible migration time %s' % moment,
            'migrations[0].created_at',
            lambda d, m=moment: d['migrations'][0].update(created_at=m))
    add('a server name with a lone surrogate', 'servers[1].name',
        lambda d: d['servers'][1].update(name='web\ud800'))
    add('NaN in an allocation ratio',
        'hypervisors[0].inventories.VCPU.allocation_ratio',
        lambda d: d['hypervisors'][0]['inventories']['VCPU'].update(
            allocation_ratio=float('nan')))
    add('format of another version', 'format',
        lambda d: d.update(format='osc-leveller-snapshot/2'))
    add('no format field', 'format', lambda d: d.pop('format'))
    return cases


def _hypervisor_versions(doc):
    """(label, document, path) of hypervisor versions and types no Nova
    says: the live-migration check compares them."""
    cases = []
    for label, value in (('a dotted version', '8.2.0'),
                         ('a fractional version', 8002000.5),
                         ('a negative version', -1),
                         ('a version past 2**53', 2 ** 60),
                         ('a version that is true', True)):
        d = copy.deepcopy(doc)
        d['hypervisors'][1]['hypervisor_version'] = value
        cases.append(('hypervisor_version: %s' % label, d,
                      'hypervisors[1].hypervisor_version'))
    d = copy.deepcopy(doc)
    d['hypervisors'][2]['hypervisor_type'] = ['QEMU']
    cases.append(('hypervisor_type: a list', d,
                  'hypervisors[2].hypervisor_type'))
    return cases


def gen_snapshot_files(rng, count):
    cases = []
    path = DIR + '/snapshot.json'
    doc = snapshot_doc()

    def add(description, content, expect, argv=None):
        cases.append(Case(
            'snapshot-file', description,
            argv or rng.choice(_snapshot_commands(path)),
            expect=(path,) + tuple(e for e in expect if e),
            files={'snapshot.json': content}))

    text = to_json(doc)
    for label, content, phrase in damaged_json(rng, text):
        add(label, content, (phrase,))
    for label, document, where in _semantic_snapshot(doc):
        add(label, to_json(document), (where,), argv=_snapshot_commands(
            path)[3])  # the plan is written: its times must print
    # Refused unread, before the plan file is written.
    cases.append(Case(
        'snapshot-file', 'a 2 GiB file', _snapshot_commands(path)[3],
        expect=(path, '2048 MiB, over the limit of 1024 MiB',
                'max_snapshot_mb'),
        files={'snapshot.json': Sparse(2 ** 31)}, memory_mb=BOMB_MEMORY_MB))
    cases.append(Case(
        'snapshot-file', 'over the size limit set', _snapshot_commands(path)[3],
        expect=(path, 'over the limit of 1 MiB', 'max_snapshot_mb'),
        files={'snapshot.json': text + ' ' * 2 ** 20},
        leveller='max_snapshot_mb: 1\n'))
    for label, document, argv, code, expect in _guard_snapshots(path):
        cases.append(Case('snapshot-file', label, argv, code=code,
                          expect=(expect[0] if code == 0 else path,) + expect,
                          files={'snapshot.json': to_json(document)}))
    for label, document, where in _trait_snapshots(doc):
        add(label, to_json(document), (where,))
    for label, document, where in _hypervisor_versions(doc):
        add(label, to_json(document), (where,))
    for label, document, where in _image_snapshots(doc):
        add(label, to_json(document), (where,))
    mutate = Mutator(doc, 'snapshot-v1')
    watcher = Mutator(watcher_doc(), 'watcher-cluster', keep=lambda p: (
        len(p) > 2 or p[0] not in ('hypervisors', 'servers')) and
        p[-1] not in ('vcpus',))
    attempts = 0
    while len(cases) < count and attempts < count * 20:
        attempts += 1
        source, tag = (watcher, 'Watcher file: ') if rng.random() < 0.2 \
            else (mutate, '')
        result = source(rng)
        if result is None:
            continue
        document, label, where = result
        add(tag + label, to_json(document), (
            spell(where) if where is not None else 'nested too deeply',))
    return cases[:count]


def gen_plan_files(rng, count):
    cases = []
    path = DIR + '/plan.json'
    doc = plan_doc()
    argv = ['leveller', 'apply', path, '--dry-run']
    # report PLAN_FILE reads a plan file as apply does; the report it
    # would write is never left behind.
    report = ['leveller', 'report', path, '--snapshot', DIR + '/snap.json',
              '--output-file', DIR + '/r.html']
    snapshot = to_json(snapshot_doc())

    def add(description, content, expect, extra=(), drawn=False):
        cases.append(Case(
            'plan-file', description,
            report if drawn else argv + list(extra),
            expect=(path,) + tuple(e for e in expect if e),
            files={'plan.json': content, 'snap.json': snapshot},
            absent=(DIR + '/r.html',) if drawn else ()))

    text = to_json(doc)
    for label, content, phrase in damaged_json(rng, text):
        add(label, content, (phrase,))
        add('report: ' + label, content, (phrase,), drawn=True)
    lost = copy.deepcopy(doc)
    lost['moves'][0]['server_id'] = 'no-such-server'
    add('report: a move of a server the snapshot lacks', to_json(lost),
        ('moves[0]', 'no-such-server', 'not in the snapshot', '--snapshot'),
        drawn=True)
    elsewhere = copy.deepcopy(doc)
    elsewhere['moves'][0]['source'] = elsewhere['moves'][0]['destination']
    add('report: a move from where its server is not', to_json(elsewhere),
        ('moves[0]', "not on the move's source"), drawn=True)
    for option, value in (('threshold', 'high'), ('weights', 3),
                          ('exclude_hosts', [1]), ('ceiling', None)):
        bad = copy.deepcopy(doc)
        bad['options'][option] = value
        add('report: options.%s %r' % (option, value), to_json(bad),
            ('options.%s' % option,), drawn=True)
    twice = copy.deepcopy(doc)
    twice['moves'].append(dict(twice['moves'][0], wave=9))
    add('a server moved twice', to_json(twice), ('moves[%d]' % (
        len(twice['moves']) - 1),))
    single = copy.deepcopy(doc)
    single['moves'][0]['exchange'] = 'x1'
    add('an exchange of one move', to_json(single), ('moves[0].exchange',))
    placement = copy.deepcopy(doc)
    placement['kind'] = 'placement'
    add('a placement plan without --placement-plan', to_json(placement),
        ('placement',))
    add('a balance plan with --placement-plan', text, ('--placement-plan',),
        extra=['--placement-plan'])
    add('format of another version', to_json(dict(
        doc, format='osc-leveller-plan/2')), ('osc-leveller-plan/1',))
    add('bad creation time', to_json(dict(
        doc, created_at='2026-11-20T10:61:00Z')), ('created_at',))
    cases += plan_cloud_cases()
    mutate = Mutator(doc, 'plan-v1')
    attempts = 0
    while len(cases) < count and attempts < count * 20:
        attempts += 1
        result = mutate(rng)
        if result is None:
            continue
        document, label, where = result
        if where == ('format',):
            continue  # the format check names the format, not the field
        add(label, to_json(document), (
            spell(where) if where is not None else 'nested too deeply',),
            drawn=attempts % 4 == 0)
    return cases[:count]


def plan_cloud_cases():
    """Plans of the stand-in's cloud, applied to it (--dry-run): one made
    on another cloud (refused), one that records no cloud (goes ahead,
    with a note), and one whose first move carries another server's id
    under its own name (the row names the server the cloud names)."""
    snap = snapshot_io.parse(cloud_doc())
    plan = plan_mod.to_document(planner.make_plan(
        snap, core_options.PlannerOptions(now=snap.taken_at)))
    assert plan['moves'], 'the corpus needs a plan of the cloud'
    here = {'kind': 'cloud', 'cloud': CLOUD, 'nova_region': 'RegionOne',
            'nova_service': standin.derived_uuid('service-entry', 'nova')}
    path = DIR + '/plan.json'
    cases = []

    def add(description, source, expect, code, moves=None):
        doc = copy.deepcopy(plan)
        doc['snapshot']['source'] = source
        doc['moves'] = moves or doc['moves']
        cases.append(Case('plan-file', description,
                          ['leveller', 'apply', path, '--dry-run'],
                          expect=expect, code=code,
                          files={'plan.json': to_json(doc)}, cloud=Cloud(),
                          secrets=(KEYSTONE_PASSWORD,)))

    add('a plan of another cloud', dict(here, nova_service='c0ffee'),
        (path, 'made on another cloud', 'Nova service c0ffee'), 1)
    add('a plan of another region', dict(here, nova_region='RegionTwo'),
        (path, 'made on another cloud', 'region RegionTwo'), 1)
    add('a plan that records no cloud', {'kind': 'file'},
        (path, 'the plan records no cloud'), 0)
    first = plan['moves'][0]
    moved = {m['server_id'] for m in plan['moves']}
    other = next(s for s in snap.servers if s.id not in moved and
                 s.hypervisor == first['source'])
    add("a move with another server's id under its own name", here,
        ('the plan names it %s' % first['server_name'], other.name), 0,
        [dict(first, server_id=other.id)] + plan['moves'][1:])
    return cases


def _number_values(key):
    """(label, YAML text) of values no number setting takes, and those
    outside this key's range."""
    values = [('nan text', 'nan'), ('.nan', '.nan'), ('.NaN', '.NaN'),
              ('.inf', '.inf'), ('-.inf', '-.inf'), ('1e999 text', '1e999'),
              ('1.0e+999', '1.0e+999'), ('-1e999 text', '-1e999'),
              ('10**400', '1' + '0' * 400), ('2**53+1', str(2 ** 53 + 1)),
              ('a word', 'ten'), ('a list', '[1, 2]'),
              ('a mapping', '{a: 1}'), ('true', 'true'),
              ('a lone surrogate', '"\\ud800"'), ('an alias bomb', bomb())]
    if key.minimum is not None:
        low = key.minimum if key.above else key.minimum - (
            1 if key.kind == config.INT or key.minimum >= 1 else 0.05)
        values.append(('below the minimum', repr(low)))
    if key.maximum is not None:
        values.append(('above the maximum', repr(key.maximum + 1)))
    if key.kind == config.INT:
        values.append(('not whole', '1.5'))
    return values


LONG_ZONE = 'a zone of 5,000 characters'  # echoed whole once
_KIND_VALUES = {
    config.BOOL: [('a word', '"maybe"'), ('one', '1'), ('a list', '[]'),
                  ('nan', '.nan'), ('an alias bomb', bomb())],
    config.TEXT: [('a number', '123'), ('a list', '[a]'),
                  ('a mapping', '{a: b}'), ('a lone surrogate', '"\\ud800"'),
                  ('.nan', '.nan'), ('an alias bomb', bomb())],
    config.LIST: [('a number', '123'), ('a mapping', '{a: b}'),
                  ('numbers', '[1, 2]'), ('a lone surrogate',
                                          '["ok", "\\udfff"]'),
                  ('nested lists', '[[a]]'), ('an alias bomb', bomb())],
    config.CHOICE: [('an unknown choice', 'bogus'), ('a number', '1'),
                    ('a list', '[model]'), ('an alias bomb', bomb())],
    config.URL: [('an unclosed IPv6 host', '"http://[::1"'),
                 ('an unclosed IPv6 host with a password',
                  '"http://u:%s@[::1"' % URL_PASSWORD),
                 ('a bad port with a password',
                  '"http://u:%s@prom:99999/"' % URL_PASSWORD),
                 ('ftp', '"ftp://prom.example.net"'),
                 ('no host', '"http://"'),
                 ('a port that is a word', '"http://prom:port/"'),
                 ('no scheme', 'prometheus.example.net'),
                 ('a number', '9090'), ('a lone surrogate',
                                        '"http://\\ud800/"'),
                 ('an alias bomb', bomb())],
    config.PATTERN: [('an unclosed group', '"("'),
                     ('an unclosed class', '"["'),
                     ('nothing to repeat', '"*"'),
                     ('an unclosed named group', '"(?P<x"'),
                     ('a lone surrogate', '"\\ud800"'),
                     ('an alias bomb', bomb())],
    config.QUERY: [('an unknown placeholder', '"rate(x[{win}])"'),
                   ('PromQL braces not doubled', '"up{job=\\"node\\"}"'),
                   ('a lone brace', '"rate(x[5m]) {"'),
                   ('a lone closing brace', '"rate(x[5m]) }"'),
                   ('a positional placeholder', '"rate(x[{0}])"'),
                   ('a placeholder attribute', '"rate(x[{window.real}])"'),
                   ('a placeholder index', '"rate(x[{window[0]}])"'),
                   ('a placeholder conversion', '"rate(x[{window!z}])"'),
                   ('a placeholder format', '"avg by ({label:d}) (up)"'),
                   ('a number', '5'), ('an alias bomb', bomb())],
    config.DURATION: [('words', '"3 hours"'), ('no unit', '3'),
                      ('an upper-case unit', '"3H"'),
                      ('a negative', '"-3h"'), ('a fraction', '"1.5h"'),
                      ('a lone surrogate', '"\\ud800"'),
                      ('an alias bomb', bomb())],
    config.TIME_ZONE: [('an unknown zone', 'Mars/Olympus'),
                       ('a zone directory', 'Europe'),
                       ('a path out of the zone data', '"../../etc/passwd"'),
                       ('empty', '""'), ('a list', '[UTC]'),
                       ('a lone surrogate', '"\\ud800"'),
                       ('an alias bomb', bomb()),
                       (LONG_ZONE, '"Europe/%s"' % ('A' * 5000))],
    config.WINDOWS: [('an hour out of range', '["0 25 * * *"]'),
                     ('four cron fields', '"0 2 * *"'),
                     ('a cron step of zero', '["*/0 * * * *"]'),
                     ('a length too long', '["0 2 * * * for 8d"]'),
                     ('a length that is no duration',
                      '["0 2 * * * for 1.5h"]'),
                     ('an empty range', '["Mon 08:00-08:00"]'),
                     ('an unknown day', '["Mnd 08:00-18:00"]'),
                     ('an unknown time zone',
                      '["TZ=Mars/Olympus 22:00-06:00"]'),
                     ('a digit of another script', '["0 \\u00b2 * * *"]'),
                     ('a mapping', '[{cron: "0 2 * * *"}]'),
                     ('a number', '5'), ('nested lists', '[[a]]'),
                     ('a lone surrogate', '["\\ud800"]'),
                     ('an alias bomb', bomb()),
                     ('an impossible date', '["2026-02-30..2026-03-02"]'),
                     ('a bare impossible date', '[2026-02-30]'),
                     ('a range that ends before it starts',
                      '["2027-01-04..2026-12-20"]'),
                     ('a date without its range', '["2026-12-20T18:00"]')],
    config.HEADERS: [('text', 'X-Scope-OrgID'), ('a list', '[a]'),
                     ('a name with a blank', '{"X Scope": a}'),
                     ('a name with a colon', '{"X-A:": a}'),
                     ('a line break in a value', '{X-A: "a\\r\\nX-B: b"}'),
                     ('a list as a value', '{X-A: [a]}'),
                     ('no value', '{X-A: null}'),
                     ('true as a value', '{X-A: true}'),
                     ('a lone surrogate', '{X-A: "\\ud800"}'),
                     ('an alias bomb', bomb())],
}
# A file name is text, and not only blanks.
_KIND_VALUES[config.FILE] = _KIND_VALUES[config.TEXT] + [('blanks', '"  "')]
# A duration past Prometheus' int64 milliseconds; of 5,000 digits, int()
# raised on it.
LONG_DURATION = 'a number of 5,000 digits'
_KIND_VALUES[config.DURATION] += [
    ('a number of 20 digits', '"1%sms"' % ('0' * 19)),
    (LONG_DURATION, '"%sh"' % ('9' * 5000))]
_KIND_VALUES[config.WINDOWS] += [
    ('a length of five numbers', '["0 2 * * * for 1m1m1m1m1m"]'),
    ('a length in seconds', '["0 2 * * * for 30s"]')]


# Settings an earlier audit found unhandled: in every corpus, each layer.
MUST = (('max_moves', 'nan text'), ('max_moves', '.inf'),
        ('max_moves', '1e999 text'), ('prometheus.retries', '.nan'),
        ('prometheus.retries', '.inf'), ('prometheus.timeout',
                                         'below the minimum'),
        ('prometheus.host_pattern', 'an unclosed group'),
        ('prometheus.queries.cpu', 'an unknown placeholder'),
        ('prometheus.url', 'an unclosed IPv6 host with a password'),
        ('weights.cpu', '10**400'), ('windows.time_zone', LONG_ZONE))
MUST += (('prometheus.forecast_ahead', LONG_DURATION),
         ('guard.since', LONG_DURATION))


def bad_settings():
    """[(dotted key, label, YAML text of the value)] for every setting."""
    found = []
    for key in config.KEYS:
        if key.kind in (config.FLOAT, config.INT):
            values = _number_values(key)
        else:
            values = list(_KIND_VALUES[key.kind])
        if key.required:
            values.append(('empty', '""'))
        found += [(key.name, label, text) for label, text in values]
    return found


# What the shell (osc-lib, openstacksdk) does with a clouds.yaml entry
# before any plugin code runs: a key that is not text fails openstacksdk's
# key normalization (AttributeError), and osc-lib logs str() of the whole
# entry at debug level, expanding an alias bomb into gigabytes. Not the
# plugin's to handle; left out of the clouds-yaml cases (the --config
# file gets them all).
UPSTREAM = ('a numeric key', 'a null key', 'a bomb under an unknown key',
            'a bomb as a group')


def _clouds_yaml_can_tell(key, label, text):
    """Whether a bad value is still bad once openstacksdk has read it:
    it turns every number in a cloud entry into text ('5'), a valid value
    for a text, list, query or pattern setting; bombs: see UPSTREAM."""
    if 'bomb' in label:
        return False
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return True
    except ValueError:  # a bare 2026-02-30: openstacksdk skips the file
        return False
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return not (number and key.kind in (config.TEXT, config.LIST,
                                        config.QUERY, config.PATTERN,
                                        config.FILE))


def _nested(dotted, text):
    """YAML of one setting, nested by its dots."""
    parts = dotted.split('.')
    lines = ['%s%s:' % ('  ' * i, p) for i, p in enumerate(parts[:-1])]
    lines.append('%s%s: %s' % ('  ' * (len(parts) - 1), parts[-1], text))
    return '\n'.join(lines) + '\n'


def _structure_settings():
    """(label, YAML text, what the message names) of badly shaped sections."""
    return [
        ('unknown setting', 'thresold: 0.1\n', 'thresold'),
        ('unknown nested setting', 'prometheus:\n  urll: http://x\n',
         'prometheus.urll'),
        ('a group that is a number', 'prometheus: 5\n', 'prometheus'),
        ('a group that is a list', 'weights: [1, 2]\n', 'weights'),
        ('a group that is NaN', 'apply: .nan\n', 'apply'),
        ('a numeric key', '1: 2\n', '1'),
        ('a null key', 'null: 2\n', 'None'),
        ('a key with a lone surrogate', '"thr\\ud800": 1\n', 'unknown'),
        ('a bomb under an unknown key', 'lol: %s\n' % bomb(), 'lol'),
        ('a bomb as a group', 'prometheus: %s\n' % bomb(), 'prometheus'),
    ]


def gen_settings(rng, count, layer):
    """config-file (--config FILE) or clouds-yaml (the leveller section)."""
    path = DIR + '/site.yaml'
    where = '--config ' + path if layer == 'config-file' else \
        'clouds.yaml cloud %s: leveller' % CLOUD
    snapshot = DIR + '/snapshot.json'
    commands = [['leveller', 'config', 'show'],
                ['leveller', 'score', '--snapshot', snapshot],
                ['leveller', 'plan', '--snapshot', snapshot]]
    files = {'snapshot.json': to_json(snapshot_doc())}
    cases = []

    def add(description, text, expect, code=1, memory=None):
        argv = list(rng.choice(commands))
        case_files = dict(files)
        leveller = None
        secrets = ()
        if rng.random() < 0.3 and 'prometheus' not in text:
            # A secret that must not show.
            text += 'prometheus:\n  password: %s\n' % PROM_PASSWORD
            secrets = (PROM_PASSWORD,)
        if layer == 'config-file':
            argv += ['--config', path]
            if rng.random() < 0.2:  # a whole clouds.yaml-like document
                text = 'leveller:\n' + textwrap.indent(text, '  ')
            case_files['site.yaml'] = text
        else:
            leveller = text
        cases.append(Case(layer, description, argv, expect=expect, code=code,
                          files=case_files, leveller=leveller,
                          secrets=secrets, memory_mb=memory))

    every = [(k, label, text) for k, label, text in bad_settings()
             if layer == 'config-file' or _clouds_yaml_can_tell(
                 config.BY_NAME[k], label, text)]
    rng.shuffle(every)
    # Every setting once, and the audit's findings, before the rest.
    first = {}
    for item in every:
        first.setdefault(item[0], item)
    first = list(first.values()) + [i for i in every if i[:2] in MUST]
    every = first + [i for i in every if i not in first]
    for label, text, names in _structure_settings():
        if layer == 'clouds-yaml' and label in UPSTREAM:
            continue
        add(label, text, (where, names),
            memory=BOMB_MEMORY_MB if 'bomb' in label else None)
    if layer == 'config-file':
        for label, content, phrase in damaged_files(
                rng, json.dumps({'threshold': 0.1, 'max_moves': 3}),
                empty_ok=True, depth=YAML_TOO_DEEP):
            argv = list(rng.choice(commands)) + ['--config', path]
            cases.append(Case(layer, label, argv, expect=(path,) + (
                (phrase,) if phrase else ()), files=dict(
                files, **{'site.yaml': content})))
    # Checked against the snapshot, once every layer is read: the
    # message names the layer as "config show" does.
    source = '--config ' + path if layer == 'config-file' else \
        'clouds.yaml (%s)' % CLOUD
    for name in ('exclude_hosts', 'availability_zones'):
        cases.append(Case(
            layer, '%s names nothing in the snapshot' % name,
            commands[2] + (['--config', path] if layer == 'config-file'
                           else []),
            expect=(source, name, 'nosuch'), files=dict(files, **(
                {'site.yaml': '%s: [nosuch]\n' % name}
                if layer == 'config-file' else {})),
            leveller=None if layer == 'config-file' else
            '%s: [nosuch]\n' % name))
    for key, label, text in every:
        if len(cases) >= count:
            break
        secret = config.BY_NAME[key].secret
        add('%s: %s' % (key, label), _nested(key, text), (where, key),
            memory=BOMB_MEMORY_MB if 'bomb' in label else None)
        if secret and 'bomb' not in label:
            # The bad value of a secret is itself a secret.
            cases[-1].secrets += (text.strip('"'),) if len(
                text.strip('"')) >= 4 else ()
    return cases[:count]


def gen_clouds_yaml(rng, count):
    cases = gen_settings(rng, count - 4, 'clouds-yaml')
    # The cloud entry's own api_timeout is the default read timeout.
    for label, text in (('NaN', 'nan'), ('.inf', float('inf')),
                        ('zero', 0), ('a word', 'soon')):
        cases.append(Case(
            'clouds-yaml', 'api_timeout: %s' % label,
            ['leveller', 'score'], expect=('api_timeout',),
            entry={'api_timeout': text}, cloud=Cloud(leveller={
                'cloud': {'read_timeout': None}})))
    return cases


def gen_flags(rng, count):
    snap = DIR + '/snapshot.json'
    files = {'snapshot.json': to_json(snapshot_doc()),
             'targets.yaml': 'hot0: hv2\n'}
    plan = ['leveller', 'plan', '--snapshot', snap]
    score = ['leveller', 'score', '--snapshot', snap]
    apply = ['leveller', 'apply', '--dry-run']
    table = []

    def add(argv, code, *expect):
        table.append((argv, code, expect))

    for flag in ('--threshold', '--min-gain', '--ceiling', '--move-cost',
                 '--cooldown', '--target', '--forecast-target'):
        for value in ('nan', 'inf', '-inf', '1e999', '-1', 'NaN', '-1e999'):
            # argparse takes '-inf' for an option: a usage error.
            add(plan + [flag, value], 1 if re.fullmatch(
                r'[^-].*|-\d+|-\d*\.\d+', value) else 2, flag)
        add(plan + [flag, 'ten'], 2, flag)
    for value in ('-1', '99999999999999999999', str(2 ** 53 + 1)):
        add(plan + ['--max-moves', value], 1, '--max-moves')
    for value in ('x', '1e3', 'nan', '1.5', ''):
        add(plan + ['--max-moves', value], 2, '--max-moves')
    add(plan + ['--ceiling', '0'], 1, '--ceiling')
    for flag in ('--target', '--forecast-target'):  # above the threshold
        add(plan + [flag, '0.06'], 1, flag[2:].replace('-', '_'),
            'above the threshold 0.05')
    for value in ('cpu=nan', 'cpu=inf', 'cpu=-1', 'cpu=1e999', 'cpu',
                  'bogus=1', '=', 'cpu=', 'cpu=x', 'ram=10**400',
                  'cpu=\udcff'):
        add(score + ['--weight', value], 1, '--weight')
    for value in ('http://[::1', 'ftp://prom', 'http://', 'prom:9090',
                  'http://prom:port/', 'http://u:%s@[::1' % URL_PASSWORD,
                  'http://u:%s@prom:99999/' % URL_PASSWORD):
        add(plan + ['--prometheus-url', value], 1, '--prometheus-url')
    add(plan + ['--cpu-compatibility', 'bogus'], 2, '--cpu-compatibility')
    add(plan + ['--bogus-flag'], 2, '--bogus-flag')
    add(plan + ['--prometheus-url', 'http://p', '--no-prometheus'], 2,
        '--no-prometheus')
    for option in ('--explain', '--snapshot', '--config', '--output-file',
                   '--target-placement', '--report'):
        add(['leveller', 'plan', '--snapshot', snap] + [option, ''], 1,
            option)
        add(['leveller', 'plan', '--snapshot', snap] + [option, '   '], 1,
            option)
    add(score + ['--snapshot', ''], 1, '--snapshot')
    add(score + ['--config', ''], 1, '--config')
    add(['leveller', 'config', 'show', '--config', ''], 1, '--config')
    add(plan + ['--explain', 'nosuch'], 1, '--explain', 'nosuch')
    add(plan + ['--explain', '\udcff'], 1, '--explain')
    add(plan + ['--explain', 'hot0', '--target-placement',
                DIR + '/targets.yaml'], 1, '--explain', '--target-placement')
    add(plan + ['--exclude-host', 'nosuch'], 1, 'exclude_hosts',
        '--exclude-host', 'nosuch')
    add(plan + ['--exclude-host', '\udcff'], 1, '--exclude-host')
    add(plan + ['--availability-zone', 'nosuch'], 1, 'availability_zones',
        '--availability-zone', 'nosuch')
    add(plan + ['--project', '\udcff'], 1, '--project')
    add(['leveller', 'score', '--snapshot', DIR + '/no\udcffsuch.json'], 1,
        'does not exist')
    add(['leveller', 'score', '--snapshot', DIR + '/snapshot.json',
         '--config', DIR + '/no\udcffsuch.yaml'], 1, 'does not exist')
    add(plan + ['--output-file', DIR + '/missing-dir/plan.json'], 1,
        DIR + '/missing-dir/plan.json')
    add(plan + ['--output-file', DIR], 1, DIR)
    for command in (plan, score):
        add(command + ['--report', DIR + '/missing-dir/report.html'], 1,
            '--report', DIR + '/missing-dir')
        add(command + ['--report', DIR], 1, '--report', 'is a directory')
    add(score + ['--report', ''], 1, '--report')
    add(plan + ['--report', DIR + '/no\udcffsuch/report.html'], 1,
        '--report', 'does not exist')
    add(plan + ['--explain', 'hot0', '--report', DIR + '/report.html'], 1,
        '--explain', '--report')
    for flag, value in (('--batch', '-1'), ('--max-parallel', '0'),
                        ('--timeout', '0'), ('--timeout', 'nan'),
                        ('--timeout', 'inf'), ('--lock-file', ''),
                        ('--max-parallel', '-5')):
        add(apply + [flag, value], 1, flag)
    add(apply + ['--batch', 'one'], 2, '--batch')
    add(apply + ['--placement-plan'], 1, '--placement-plan')
    add(apply + [''], 1, 'plan')
    add(apply + [DIR + '/no-plan.json'], 1, DIR + '/no-plan.json')
    add(['leveller', 'snapshot', '--output-file', ''], 1, '--output-file')
    add(['leveller', 'snapshot'], 2, '--output-file')
    add(['leveller', 'evacuate'], 2, 'hypervisor')
    add(['leveller', 'score', '--summary', '--snapshot', snap, '--weight',
         'cpu_pressure=nan'], 1, '--weight')
    rng.shuffle(table)
    cases = []
    for argv, code, expect in table[:count]:
        cases.append(Case('flag', ' '.join(argv[1:]).replace(DIR, '.'),
                          argv, expect=expect, code=code,
                          files=dict(files)))
    return cases + journal_paths() + make_room_flags() + free_hosts_flags() \
        + spread_flags()


def make_room_flags():
    """plan --make-room FLAVOR[:COUNT]: a malformed or impossible ask,
    a flavor no server of the snapshot has, one Nova does not know, and
    the options it does not go with."""
    plan = ['leveller', 'plan', '--snapshot', DIR + '/snapshot.json']
    files = {'snapshot.json': to_json(snapshot_doc()),
             'targets.yaml': 'hot0: hv2\n'}
    table = [(['--make-room', value], '--make-room', 'COUNT')
             for value in ('f4x16:0', 'f4x16:-1', 'f4x16:x', 'f4x16:',
                           'f4x16:1.5', 'f4x16:99999')]
    table += [
        (['--make-room', ':2'], '--make-room :2', 'no flavor named'),
        (['--make-room', ''], '--make-room', 'empty'),
        (['--make-room', 'nosuch'], 'no server in the snapshot has flavor '
         'nosuch', 'plan live'),
        (['--aggregate', 'agg-hv1'], '--aggregate goes with --make-room'),
        (['--make-room', 'f4x16', '--aggregate', 'nosuch'],
         '--aggregate nosuch'),
        (['--make-room', 'f4x16', '--explain', 'hot0'], '--explain',
         '--make-room'),
        (['--make-room', 'f4x16', '--target-placement',
          DIR + '/targets.yaml'], '--target-placement', '--make-room')]
    cases = [Case('flag', ' '.join(plan[1:] + argv).replace(DIR, '.'),
                  plan + argv, expect=expect, files=dict(files))
             for argv, *expect in table]
    cases.append(Case('flag', 'plan --make-room of a flavor Nova lacks',
                      ['leveller', 'plan', '--make-room', 'lv.nosuch'],
                      expect=('--make-room lv.nosuch', 'Nova has no flavor '
                              'named lv.nosuch'), cloud=Cloud()))
    return cases


def free_hosts_flags():
    """plan --free-hosts N and apply --disable-freed: every case, always."""
    snap = DIR + '/snapshot.json'
    files = {'snapshot.json': to_json(snapshot_doc()),
             'plan.json': to_json(plan_doc()), 'targets.yaml': 'hot0: hv2\n'}
    plan = ['leveller', 'plan', '--snapshot', snap, '--free-hosts']
    apply = ['leveller', 'apply', '--dry-run']
    table = [(plan + [value], 1, ('--free-hosts %s' % value[:20],
                                  'N must be a positive whole number'))
             for value in ('0', '-1', '1.5', 'two', 'nan', '1e3', ' ',
                           '\u0663', '9' * 5000)]
    table += [
        (plan + ['99'], 1, ('--free-hosts 99: 99 hypervisors cannot be '
                            'freed in every balancing domain: at most',)),
        (plan + ['1', '--target-placement', DIR + '/targets.yaml'], 1,
         ('--free-hosts and --target-placement do not go together',)),
        (plan + ['--explain', 'hot0'], 1,
         ('--free-hosts and --explain do not go together',)),
        (apply + [DIR + '/plan.json', '--disable-freed', 'repurposing'], 1,
         ('--disable-freed: %s/plan.json is a balance plan' % DIR,)),
        (apply + ['--disable-freed', 'repurposing'], 1,
         ('--disable-freed: planning now frees no hypervisor',)),
        (apply + [DIR + '/plan.json', '--disable-freed', ''], 1,
         ('--disable-freed: needs a reason',)),
        (apply + ['--disable-freed'], 2, ('--disable-freed',)),
        (plan[:4] + ['--cold-migrate-stopped'], 1,
         ('--cold-migrate-stopped goes with --free-hosts',)),
        (apply + [DIR + '/plan.json', '--cold-migrate-stopped'], 1,
         ('--cold-migrate-stopped: %s/plan.json is a balancing plan (kind '
          'balance), which moves no stopped server' % DIR,)),
        (apply + ['--cold-migrate-stopped'], 1,
         ('--cold-migrate-stopped needs a plan file',))]
    return [Case('flag', ' '.join(argv[1:]).replace(DIR, '.'), argv,
                 expect=expect, code=code, files=dict(files))
            for argv, code, expect in table]


def journal_paths():
    """--journal at what cannot be a journal: refused before anything is
    asked of the cloud (a FIFO without blocking; a device unopened, so
    /dev/full and /dev/zero are never written); a torn last line is said in
    a note and the run goes on; /dev/null is no journal."""
    files = {'fifo': FIFO, 'dir': DIRECTORY, 'file': 'not a directory\n',
             'torn.jsonl': '{"event": "start"}\n{"event": "mig'}
    cases = []

    def add(command, journal, code, *expect, cloud=None):
        argv = ['leveller'] + command + ['--journal', journal]
        cases.append(Case('flag', ' '.join(argv[1:]).replace(DIR, '.'),
                          argv, expect=expect, code=code, files=dict(files),
                          cloud=cloud))

    refused = ('cannot write the journal', 'not a regular file')
    for command in (['apply', '--dry-run'], ['apply', '--batch', '1'],
                    ['evacuate', 'hv1', '--dry-run']):
        for path, kind in ((DIR + '/fifo', 'it is a FIFO (named pipe)'),
                           (DIR + '/dir', 'it is a directory'),
                           ('/dev/full', 'it is a character device'),
                           ('/dev/zero', 'it is a character device')):
            add(command, path, 1, path, kind, *refused)
    add(['apply', '--dry-run'], DIR + '/file/journal.jsonl', 1,
        'cannot write the journal %s/file/journal.jsonl: Not a directory'
        % DIR)
    add(['apply', '--dry-run'], DIR + '/torn.jsonl', 0,
        'Note: the journal %s/torn.jsonl ends in a torn record (14 bytes'
        % DIR, cloud=Cloud())
    add(['apply', '--dry-run'], '/dev/null', 0, cloud=Cloud())
    return cases


def spread_flags():
    """plan --spread: only 'count' is evened out (a usage error names
    the choice), and it is a goal of its own, not one of --explain's or
    --target-placement's."""
    files = {'snapshot.json': to_json(snapshot_doc()),
             'targets.yaml': 'hot0: hv2\n'}
    plan = ['leveller', 'plan', '--snapshot', DIR + '/snapshot.json']
    table = [(['--spread', value], 2, ('--spread', 'invalid choice'))
             for value in ('cpu', 'ram', 'COUNT', '', 'count ', '\udcff')]
    table += [
        (['--spread'], 2, ('--spread', 'expected one argument')),
        (['--spread', 'count', '--explain', 'hot0'], 1,
         ('--explain and --spread do not go together',)),
        (['--spread', 'count', '--target-placement', DIR + '/targets.yaml'],
         1, ('--target-placement and --spread do not go together',)),
        (['--spread', 'count', '--make-room', 'f4x16'], 1,
         ('--make-room and --spread do not go together',)),
        (['--spread', 'count', '--free-hosts'], 1,
         ('--free-hosts and --spread do not go together',))]
    return [Case('flag', ' '.join(plan[1:] + argv).replace(DIR, '.'),
                 plan + argv, expect=expect, code=code, files=dict(files))
            for argv, code, expect in table]


# The collector's requests: (service, path prefix, how messages name it).
ENDPOINTS = (
    ('keystone', '/v3/auth/tokens', '/v3/auth/tokens'),
    ('nova', '/v2.1/os-services', 'Nova GET /os-services'),
    ('nova', '/v2.1/os-hypervisors/detail',
     'Nova GET /os-hypervisors/detail'),
    ('nova', '/v2.1/os-aggregates', 'Nova GET /os-aggregates'),
    ('nova', '/v2.1/servers/detail', 'Nova GET /servers/detail'),
    ('nova', '/v2.1/os-server-groups', 'Nova GET /os-server-groups'),
    ('nova', '/v2.1/os-migrations', 'Nova GET /os-migrations'),
    ('placement', '/resource_providers', 'Placement GET /resource_providers'),
    ('placement', '/resource_providers/%s/inventories' % rp_uuid('hv2'),
     'Placement GET /resource_providers/%s/inventories' % rp_uuid('hv2')),
    ('placement', '/resource_providers/%s/allocations' % rp_uuid('hv1'),
     'Placement GET /resource_providers/%s/allocations' % rp_uuid('hv1')),
)
# Per-provider reads (prefix -> its hypervisor) and the faults that are no
# answer: those hypervisors are left out, the rest is read.
PROVIDERS = {prefix: name for name, prefix in (
    ('hv2', '/resource_providers/%s/inventories' % rp_uuid('hv2')),
    ('hv1', '/resource_providers/%s/allocations' % rp_uuid('hv1')))}
NO_ANSWER = ('status:500', 'status:503', 'reset', 'stall')
FAULT_KINDS = ('non-json', 'shape', 'shape:list', 'shape:string',
               'shape:items', 'status:400', 'status:401', 'status:403',
               'status:404', 'status:409', 'status:500', 'status:503',
               'reset', 'stall')
LIVE_COMMANDS = (['leveller', 'score'], ['leveller', 'plan'],
                 ['leveller', 'snapshot', '--output-file',
                  DIR + '/out.json'],
                 ['leveller', 'apply', '--dry-run'],
                 ['leveller', 'evacuate', '--dry-run', 'hv1'])


def answer_raw(service, template, body):
    """A spoiler: the stand-in answers GET template with body (bytes) as
    is, JSON no json.dumps writes (1e400, nesting past any reader)."""
    def spoil(cloud):
        routes = cloud._routes[service]
        for index, (method, pattern, path, _, auth) in enumerate(routes):
            if (method, path) == ('GET', template):
                routes[index] = (method, pattern, path,
                                 lambda req, *ids: body, auth)
    return spoil


def _raw_answers():
    """(label, spoiler, what the message names) of answers made by hand."""
    nested = b'[' * TOO_DEEP + b']' * TOO_DEEP
    inventory = (b'{"inventories": {"VCPU": {"total": %s, "reserved": 0, '
                 b'"allocation_ratio": 1.0, "min_unit": 1, "max_unit": 8, '
                 b'"step_size": 1}}, "resource_provider_generation": 1}')
    migration = ('{"migrations": [{"id": 1, "uuid": "%s", "instance_uuid": '
                 '"id-hot0", "status": "completed", "migration_type": '
                 '"live-migration", "source_compute": "cmp-hv2", '
                 '"dest_compute": "cmp-hv1", "created_at": %s, '
                 '"updated_at": null}]}')
    found = [
        ('%s nested %d deep' % (name, TOO_DEEP), answer_raw(
            service, template, body), label)
        for name, service, template, body, label in (
            ('aggregates', 'nova', '/v2.1/os-aggregates',
             b'{"aggregates": ' + nested + b'}', 'Nova GET /os-aggregates'),
            ('server groups', 'nova', '/v2.1/os-server-groups',
             b'{"server_groups": ' + nested + b'}',
             'Nova GET /os-server-groups'),
            ('providers', 'placement', '/resource_providers',
             b'{"resource_providers": ' + nested + b'}',
             'Placement GET /resource_providers'),
            ('inventories', 'placement',
             '/resource_providers/{id}/inventories', nested,
             'Placement GET /resource_providers/'))]
    for text in (b'1e400', b'-1e400', b'NaN', b'1' + b'0' * 400):
        found.append(('inventory total %s' % text[:12].decode(),
                      answer_raw('placement',
                                 '/resource_providers/{id}/inventories',
                                 inventory % text),
                      'inventories.VCPU.total'))
    # Text that is no time fails the document's check; what is not text
    # fails the collector's reading of Nova's answer.
    for label, value, named in (
            ('a word', '"tomorrow"', 'migrations[0].created_at'),
            ('month 13', '"2026-13-01T00:00:00.000000"',
             'migrations[0].created_at'),
            ('a number', '12', 'Nova GET /os-migrations'),
            ('a list', '["x"]', 'Nova GET /os-migrations')):
        found.append(('migration created_at: %s' % label, answer_raw(
            'nova', '/v2.1/os-migrations', (migration % (
                standin.derived_uuid('migration', 'raw'), value)).encode()),
            named))
    # requests reads bytes that are not UTF-8 as U+FFFD: here, no JSON.
    found.append(('server list not UTF-8', answer_raw(
        'nova', '/v2.1/servers/detail', b'{"servers": [\xff\xfe]}'),
        'Nova GET /servers/detail'))
    return found


def _corruptions():
    """(label, function(StandIn), what the message names) of answers that
    are JSON of the right shape with values no cloud sends."""
    def server(field, value, index=0):
        def spoil(cloud):
            list(cloud._server_list.values())[index][field] = value
        return spoil

    def flavor(field, value):
        def spoil(cloud):
            list(cloud._server_list.values())[0]['flavor'][field] = value
        return spoil

    def inventory(field, value, rc='VCPU'):
        def spoil(cloud):
            cloud._hyps[1]['inventories'][rc][field] = value
        return spoil

    def allocation(value):
        def spoil(cloud):
            held = cloud._allocations[rp_uuid('hv1')]
            held[next(iter(held))]['VCPU'] = value
        return spoil

    def group(value):
        def spoil(cloud):
            cloud._groups_list[0]['max_server_per_host'] = value
        return spoil

    def hypervisor_name(value):
        def spoil(cloud):
            cloud._hyps[0]['name'] = value
        return spoil

    def metadata(value):
        def spoil(cloud):
            list(cloud._server_list.values())[0]['metadata'] = {'k': value}
        return spoil

    # The collector joins what it read into a snapshot document and
    # validates it: a bad value is named by its field there.
    found = []
    for label, value in (('a lone surrogate', 'web\ud800'),
                         ('only a surrogate', '\udfff')):
        found.append(('server name: %s' % label, server('name', value),
                      'the cloud: servers[0].name'))
        found.append(('server status: %s' % label, server('status', value),
                      'the cloud: servers[0].status'))
        found.append(('hypervisor name: %s' % label, hypervisor_name(value),
                      'the cloud: hypervisors[0].name'))
        found.append(('metadata value: %s' % label, metadata(value),
                      'the cloud: servers[0].metadata.k'))
    for label, value in (('NaN', float('nan')), ('Infinity', float('inf')),
                         ('-Infinity', float('-inf')),
                         ('10**400', 10 ** 400), ('-1', -1)):
        # int() of a float that is not a number fails in the collector; an
        # int passes, to the document's check.
        whole = isinstance(value, int)
        found.append(('flavor vcpus: %s' % label, flavor('vcpus', value),
                      'servers[0]' if whole else 'Nova GET /servers/detail'))
        found.append(('flavor ram: %s' % label, flavor('ram', value),
                      'servers[0]' if whole else 'Nova GET /servers/detail'))
        found.append(('inventory total: %s' % label, inventory(
            'total', value), 'the cloud: hypervisors[1].inventories.VCPU'))
        found.append(('allocation ratio: %s' % label, inventory(
            'allocation_ratio', value),
            'the cloud: hypervisors[1].inventories.VCPU'))
        found.append(('allocation amount: %s' % label, allocation(value),
                      '.VCPU'))
        found.append(('max_server_per_host: %s' % label, group(value),
                      'server_groups[0]' if whole else
                      'Nova GET /os-server-groups'))
    for label, value in (('null', None), ('a number', 5), ('empty', '')):
        found.append(('hypervisor name: %s' % label, hypervisor_name(value),
                      'hypervisors'))
    return found + _raw_answers()


def gen_cloud_answers(rng, count):
    combos = [(e, k) for e in ENDPOINTS for k in FAULT_KINDS]
    rng.shuffle(combos)
    corruptions = _corruptions()
    cases = []
    # Every endpoint and every fault kind at least once, then at random.
    chosen = []
    for index in range(max(len(ENDPOINTS), len(FAULT_KINDS))):
        chosen.append((ENDPOINTS[index % len(ENDPOINTS)],
                       FAULT_KINDS[index % len(FAULT_KINDS)]))
    chosen += [c for c in combos if c not in chosen]
    rng.shuffle(corruptions)
    # Every endpoint x fault when the count allows; a fifth at least of
    # answers of the right shape with values no cloud sends.
    budget = count - min(len(corruptions), max(count // 5,
                                               count - len(combos)))
    for (service, prefix, names), kind in chosen[:budget]:
        argv = list(rng.choice(LIVE_COMMANDS))
        expect, code = (names,), 1
        if (service, kind) == ('nova', 'status:403') and \
                prefix == '/v2.1/os-services':
            expect = ('admin role',)
        unanswered = PROVIDERS.get(prefix)
        if unanswered and kind in NO_ANSWER:
            # The user guide: that hypervisor is left out, and named.
            expect, code = ('Placement did not answer for them: %s'
                            % unanswered,), 0
            if argv[1] == 'evacuate':
                if unanswered == argv[-1]:
                    expect, code = ('%s: no such hypervisor' % unanswered,
                                    ) + expect, 1
                else:  # where its servers can go is not known: a refusal
                    argv = list(LIVE_COMMANDS[0])
        cases.append(Case(
            'cloud-answer', '%s %s: %s' % (service, prefix, kind), argv,
            expect=expect, code=code,
            cloud=Cloud(faults=((service, prefix, kind),)),
            secrets=(KEYSTONE_PASSWORD,)))
    for label, spoil, names in corruptions[:count - len(cases)]:
        cases.append(Case(
            'cloud-answer', label, list(rng.choice(LIVE_COMMANDS)),
            expect=(names,), cloud=Cloud(corrupt=spoil),
            secrets=(KEYSTONE_PASSWORD,)))
    return (terminal_names() + cases)[:count] + trait_answers() + \
        image_answers()


# -- traits: a snapshot's, and Placement's answers for hv2 -------------------

TRAITS_PATH = '/resource_providers/%s/traits' % rp_uuid('hv2')
TRAITS_NOTE = 'traits not read, flavors with trait extra specs do not ' \
    'move to them: hv2 ('


def _trait_snapshots(doc):
    """(label, document, path) of snapshots whose traits Placement would
    never give: not a list of at most 1000 trait names."""
    cases = []
    for label, value, where in (
            ('a trait in lower case', ['hw_cpu_x86_avx2'], '.traits[0]'),
            ('an empty trait', [''], '.traits[0]'),
            ('a trait of 256 characters', ['A' * 256], '.traits[0]'),
            ('a trait that is a number', [7], '.traits[0]'),
            ('a trait with an escape sequence', ['CUSTOM_\x1b[31mRED'],
             '.traits[0]'),
            ('traits as one text', 'CUSTOM_NVME', '.traits'),
            ('traits as an object', {'CUSTOM_NVME': True}, '.traits'),
            ('1001 traits', ['CUSTOM_%d' % i for i in range(1001)],
             '.traits')):
        d = copy.deepcopy(doc)
        d['hypervisors'][1]['traits'] = value
        cases.append(('hypervisor traits: ' + label, d,
                      'hypervisors[1]' + where))
    return cases


def trait_answers():
    """Placement's traits of hv2 not answered, or no list of trait names:
    hv2 stays with its traits unknown, named in the note (exit 0), and a
    flavor with trait specs is refused there, saying why."""
    def traits(value):
        def spoil(cloud):
            cloud._provider_index[rp_uuid('hv2')]['traits'] = value
        return spoil

    def forbidding(cloud):
        server = next(iter(cloud._server_list.values()))
        server['flavor']['extra_specs'] = {'trait:CUSTOM_SLOW': 'forbidden'}

    def case(label, argv, expect, faults=(), corrupt=None):
        return Case('cloud-answer', 'hv2 traits: ' + label, argv,
                    expect=expect, code=0, cloud=Cloud(
                        faults=faults, corrupt=corrupt),
                    secrets=(KEYSTONE_PASSWORD,))

    found = [case(kind, LIVE_COMMANDS[i % len(LIVE_COMMANDS)],
                  (TRAITS_NOTE,), faults=(('placement', TRAITS_PATH, kind),))
             for i, kind in enumerate(FAULT_KINDS)]
    for i, (label, value, why) in enumerate((
            ('lower case', ['hw_cpu_x86_avx2'], 'is not a trait name'),
            ('a number', [7], '7 is not a trait name'),
            ('null', [None], 'null is not a trait name'),
            ('an escape sequence', ['CUSTOM_\x1b[2J'],
             '"CUSTOM_\\u001b[2J" is not a trait name'),
            ('256 characters', ['A' * 256], 'is not a trait name'),
            ('1001 traits', ['CUSTOM_%d' % n for n in range(1001)],
             '1001 traits, more than the 1000'))):
        found.append(case(label, LIVE_COMMANDS[i % len(LIVE_COMMANDS)],
                          (TRAITS_NOTE, why), corrupt=traits(value)))
    found.append(case(
        'nested %d deep' % TOO_DEEP, ['leveller', 'score'],
        ('traits not read', 'nested too deeply'), corrupt=answer_raw(
            'placement', '/resource_providers/{id}/traits',
            b'{"traits": ' + b'[' * TOO_DEEP + b']' * TOO_DEEP + b'}')))
    found.append(case(
        'unknown, a flavor forbidding a trait', [
            'leveller', 'plan', '-f', 'json', '--explain', 'hot0'],
        (TRAITS_NOTE, 'traits of resource provider hv2 are unknown (not '
         'read from Placement): cannot check trait CUSTOM_SLOW forbidden'),
        faults=(('placement', TRAITS_PATH, 'status:503'),),
        corrupt=forbidding))
    return found


# -- images: a snapshot's, and Glance's answers ----------------------------

IMAGE = standin.derived_uuid('image', 'f4x16')  # cloud_doc()'s servers'
IMAGE_NOTE = 'image properties unknown for 5 servers ('


def _image_snapshots(doc):
    """(label, document, path) of snapshots whose images Glance would
    never give, or that name an image they do not record."""
    def with_image(change):
        d = copy.deepcopy(doc)
        d['images'] = {'img1': {'name': 'ubuntu', 'disk_format': 'raw',
                                'properties': {'hw_architecture': 'x86_64'}}}
        d['servers'][0]['image'] = 'img1'
        change(d)
        return d

    props = 'images.img1.properties'
    return [('images: ' + label, with_image(change), where)
            for label, change, where in (
                ('a property that is a number',
                 lambda d: d['images']['img1']['properties'].update(
                     hw_architecture=64), props + '.hw_architecture'),
                ('a property of 256 characters',
                 lambda d: d['images']['img1']['properties'].update(
                     {'trait:CUSTOM_X': 'r' * 256}), props + '.trait:CUSTOM_X'),
                ('properties as one text',
                 lambda d: d['images']['img1'].update(
                     properties='hw_architecture=x86_64'), props),
                ('1001 properties',
                 lambda d: d['images']['img1'].update(properties={
                     'trait:CUSTOM_%d' % i: 'required' for i in range(1001)}),
                 props + ': must have at most 1000 keys (got 1001)'),
                ('an unknown field', lambda d: d['images']['img1'].update(
                    colour='blue'), 'images.img1.colour'),
                ('images as a list', lambda d: d.update(images=[]),
                 'images: must be object'),
                ('an empty image id', lambda d: d['images'].update(
                    {'': None}), 'images.: must not be empty'),
                ('a server naming an image not recorded',
                 lambda d: d['servers'][1].update(image='img2'),
                 "servers[1].image: image 'img2' is not in the snapshot's "
                 'images'),
                ('a server naming an image, no images section',
                 lambda d: d.pop('images'), 'servers[0].image: names an '
                 'image, but the snapshot has no images section'),
                ('a server image that is a number',
                 lambda d: d['servers'][0].update(image=7),
                 'servers[0].image'))]


def image_answers():
    """Glance's answers for the servers' image not given, or not an
    image's: the run goes on (exit 0) with its properties unknown, named
    in the note, and its servers held to hypervisors as capable as
    theirs."""
    path = '/v2/images/' + IMAGE

    def body(**change):
        def spoil(cloud):
            answer = {'id': IMAGE, 'name': 'f4x16', 'disk_format': 'qcow2',
                      'status': 'active'}
            answer.update(change)
            cloud.set_image(IMAGE, answer)
        return spoil

    def case(label, argv, expect, faults=(), corrupt=None):
        return Case('cloud-answer', 'glance image: ' + label, argv,
                    expect=(IMAGE_NOTE,) + expect, code=0, cloud=Cloud(
                        faults=faults, corrupt=corrupt),
                    secrets=(KEYSTONE_PASSWORD,))

    # (A misshapen list or item is no fault of Glance's flat answer.)
    found = [case(kind, LIVE_COMMANDS[i % len(LIVE_COMMANDS)], (),
                  faults=(('glance', path, kind),))
             for i, kind in enumerate(FAULT_KINDS)
             if kind not in ('shape:string', 'shape:items')]
    for i, (label, spoil, why) in enumerate((
            ('a property that is a number', body(hw_architecture=64),
             'property hw_architecture is int, not text'),
            ('a property of 256 characters',
             body(**{'trait:CUSTOM_X': 'r' * 256}),
             'property trait:CUSTOM_X is longer than Nova keeps'),
            ('another image\'s answer', body(id='other'),
             'the answer is about image "other"'),
            ('a name that is a list', body(name=['a']),
             'name is not text'),
            ('an id with an escape sequence', body(id='\x1b[2J'),
             'the answer is about image "\\u001b[2J"'),
            ('nested %d deep' % TOO_DEEP, answer_raw(
                'glance', '/v2/images/{id}',
                b'{"id": ' + b'[' * TOO_DEEP + b']' * TOO_DEEP + b'}'),
             'nested too deeply'))):
        found.append(case(label, LIVE_COMMANDS[i % len(LIVE_COMMANDS)],
                          (why,), corrupt=spoil))
    found.append(case(
        'gone, a server held to hypervisors as capable as its own',
        ['leveller', 'plan', '-f', 'json', '--explain', 'hot0'],
        ('gone from Glance (404)', 'the properties of image %s are '
         'unknown (gone from Glance (404)): it moves only to a hypervisor '
         'as capable as hv1 (every trait, the same hypervisor type and CPU '
         'architecture), and hv2 lacks its trait CUSTOM_X' % IMAGE),
        corrupt=lambda cloud: (cloud.set_image(IMAGE, None), cloud._by_name[
            'hv1'].update(traits=['CUSTOM_X']))))
    found.append(case(
        'no image service in the catalog', ['leveller', 'score'],
        ('no image service in the catalog',),
        corrupt=lambda cloud: cloud.not_in_catalog.add('image')))
    return found


# Escape sequences and controls a name may carry, and what a terminal is
# shown of them (judge: no control character reaches the output).
ESCAPES = (('CSI', '\x1b[2J\x1b[31mRED\x1b[0m', 'RED'),
           ('OSC', '\x1b]0;pwned\x07TITLE', 'TITLE'),
           ('C1', '\x9b2J\x85\x8dC1\x7f', 'C1'))


def terminal_names():
    """Names from the cloud with escape sequences and C0/C1 controls:
    every server's, a zone's (Held and domain lines), a hypervisor's (left
    out of Placement: a note)."""
    def servers(tail):
        def spoil(cloud):
            for server in cloud._server_list.values():
                server['name'] += tail
        return spoil

    def zone(tail):
        def spoil(cloud):
            for hyp in cloud._hyps:
                hyp['zone'] = 'az1' + tail
        return spoil

    def hypervisor(tail):
        def spoil(cloud):
            cloud._hyps[0]['name'] += tail
        return spoil

    found = []
    for kind, tail, shown in ESCAPES:
        for what, spoil, argv, expect in (
                ('server names', servers, ['leveller', 'plan'], 'hot0'),
                ('a zone name', zone, ['leveller', 'score', '--summary'],
                 'az1' + shown),
                ('a hypervisor name', hypervisor, ['leveller', 'score'],
                 'hv1' + shown),
                ('server names', servers, ['leveller', 'apply', '--dry-run'],
                 'hot0' + shown)):
            found.append(Case(
                'cloud-answer', '%s with %s sequences: %s' % (
                    what, kind, ' '.join(argv[1:])), argv, expect=(expect,),
                code=0, cloud=Cloud(corrupt=spoil(tail)),
                secrets=(KEYSTONE_PASSWORD,)))
    return found


class PromAnswer:
    """A Prometheus query function: every hypervisor gets value unless
    values names it; labels: the label set of each series."""

    def __init__(self, values=None, default=0.3, label='hostname',
                 series=True, error=None):
        self.values, self.default = values or {}, default
        self.label, self.series, self.error = label, series, error

    def __call__(self, promql):
        if self.error:
            raise standin.PromQLError(*self.error)
        if not self.series or 'libvirt' in promql:
            return []
        metric = 'ram' if 'Mem' in promql else 'cpu'
        return [(self._labels(name), self.values.get(
            (name, metric), self.default)) for name in HYPERVISORS]

    def _labels(self, name):
        """openstack-helm's node-exporter job names the node in hostname;
        other labels name no hypervisor."""
        if self.label == 'hostname':
            return {'instance': '198.51.100.%s:9100' % name[2:],
                    'job': 'node-exporter', 'hostname': name}
        return {self.label: name}


def _vector(result, status='success', result_type='vector'):
    return json.dumps({'status': status, 'data': {
        'resultType': result_type, 'result': result}}).encode()


def _prom_raw():
    """(label, status, body, code, what the message names)."""
    sample = {'metric': {'instance': 'hv1:9100', 'job': 'node'},
              'value': [1.0, '0.5']}
    ok = 'application/json'
    return [
        ('"result": null', 200, ok, _vector(None), 1, 'result'),
        ('"result" a mapping', 200, ok, _vector({'a': 1}), 1, 'result'),
        ('"result" of numbers', 200, ok, _vector([1, 2]), 1, 'result'),
        ('"metric": null', 200, ok, _vector([{'metric': None}]), 1,
         'result'),
        ('"data": null', 200, ok, json.dumps({
            'status': 'success', 'data': None}).encode(), 1, 'vector'),
        ('"data" a list', 200, ok, json.dumps({
            'status': 'success', 'data': []}).encode(), 1, 'vector'),
        ('a matrix', 200, ok, _vector([], result_type='matrix'), 1,
         'vector'),
        ('a JSON list', 200, ok, b'[1, 2, 3]', 1, 'Prometheus'),
        ('a JSON string', 200, ok, b'"success"', 1, 'Prometheus'),
        ('no status', 200, ok, b'{"data": {}}', 1, 'Prometheus'),
        ('an HTML page', 200, 'text/html', b'<html>login</html>', 1,
         'Prometheus'),
        ('an empty body', 200, ok, b'', 1, 'Prometheus'),
        ('not UTF-8', 200, ok, b'{"status": "\xff\xfe"}', 1, 'Prometheus'),
        ('nested %d deep' % TOO_DEEP, 200, ok,
         b'[' * TOO_DEEP + b']' * TOO_DEEP, 1, 'Prometheus'),
        ('a value of 10**400', 200, ok, _vector([dict(
            sample, value=[1.0, 10 ** 400])]), 0, 'hv1'),
        ('a value of 1e400', 200, ok, _vector([dict(
            sample, value=[1.0, 'X'])]).replace(b'"X"', b'1e400'), 0, 'hv1'),
        ('a value of NaN', 200, ok, _vector([dict(
            sample, value=[1.0, float('nan')])]), 0, 'hv1'),
        ('a value that is a mapping', 200, ok, _vector([dict(
            sample, value=[1.0, {'a': 1}])]), 0, 'hv1'),
        ('a value that is a string', 200, ok, _vector([dict(
            sample, value=[1.0, 'lots'])]), 0, 'hv1'),
        ('no value', 200, ok, _vector([{'metric': sample['metric']}]), 0,
         'hv1'),
        ('a label with a lone surrogate', 200, ok, _vector([dict(
            sample, metric={'instance': 'hv1\ud800:9100', 'job': 'node'})]),
         0, 'no node_exporter target matches'),
        ('labels that are numbers', 200, ok, _vector([dict(
            sample, metric={'instance': 5, 'job': 'node'})]), 0,
         'no node_exporter target matches'),
        ('HTTP 200, status error', 200, ok, json.dumps({
            'status': 'error', 'errorType': 'bad_data',
            'error': 'parse error'}).encode(), 1, 'parse error'),
    ]


# Answers that count as none after the retries (cloud/prometheus.py): a
# proxy's rate limit, 503 asking for an hour or for no time at all, an
# answer broken off half-way.
PROM_NO_ANSWER = ('status:429', 'retry-after:3600', 'retry-after:soon',
                  'cut')


def gen_prometheus_answers(rng, count):
    cases = []

    def add(description, prometheus, code, expect, faults=()):
        settings = dict(PROM_SETTINGS)
        if len(cases) % 2:  # credentials that must not show
            settings.update(token=PROM_TOKEN)
        else:
            settings.update(username='lev', password=PROM_PASSWORD)
        cases.append(Case(
            'prometheus-answer', description,
            list(rng.choice(LIVE_COMMANDS[:2])), expect=expect, code=code,
            cloud=Cloud(prometheus=prometheus, faults=faults,
                        leveller={'prometheus': settings}),
            secrets=SECRETS))

    for label, value in (('NaN', float('nan')), ('+Inf', float('inf')),
                         ('-Inf', float('-inf')), ('5', 5.0), ('-3', -3.0),
                         ('1.5', 1.5), ('a word', 'lots'), ('1e400',
                                                            '1e400'),
                         ('an empty string', '')):
        for metric in ('cpu', 'ram'):
            add('%s of hv2 is %s' % (metric, label), PromAnswer(
                {('hv2', metric): value}), 0, ('hv2', 'outside 0..1'))
    add('no series at all', PromAnswer(series=False), 0,
        ('no node_exporter series',))
    add('series that name no hypervisor', PromAnswer(label='node'), 0,
        ('no node_exporter target matches',))
    add('the query is rejected (bad_data)', PromAnswer(
        error=('parse error at char 3', 'bad_data', 400)), 1, (
        'PROMETHEUS', 'rejected the query'))
    add('the query fails to execute', PromAnswer(
        error=('query timed out', 'execution', 422)), 0, ('PROMETHEUS',))
    for kind, code, names in (
            ('non-json', 1, 'PROMETHEUS'), ('shape', 1, 'PROMETHEUS'),
            ('shape:list', 1, 'PROMETHEUS'),
            ('shape:string', 1, 'PROMETHEUS'),
            ('shape:items', 1, 'PROMETHEUS'),
            ('status:401', 1, 'credentials'),
            ('status:403', 1, 'credentials'),
            ('status:400', 1, 'PROMETHEUS'),
            ('status:500', 0, 'PROMETHEUS'), ('status:502', 0, 'PROMETHEUS'),
            ('status:503', 0, 'PROMETHEUS'), ('reset', 0, 'PROMETHEUS'),
            ('stall', 0, 'PROMETHEUS')):
        add('Prometheus %s' % kind, PromAnswer(), code, (names,), faults=(
            ('prometheus', '/api/v1/query', kind),))
    for label, status, ctype, body, code, names in _prom_raw():
        add('answer: %s' % label, (status, ctype, body), code, (
            'PROMETHEUS', names) if code else (names,))
    for label, answer, argv, expect in _guard_answers():
        cases.append(Case(
            'prometheus-answer', label, argv, expect=expect, code=0,
            cloud=Cloud(prometheus=answer, leveller={
                'prometheus': dict(PROM_SETTINGS, token=PROM_TOKEN)}),
            secrets=SECRETS))
    for label, answer, expect in _history_answers():
        cases.append(Case(
            'prometheus-answer', label, list(LIVE_COMMANDS[1]),
            expect=expect, code=0, cloud=Cloud(
                prometheus=GuardAnswer(), prometheus_range=answer,
                leveller={'prometheus': dict(
                    PROM_SETTINGS, token=PROM_TOKEN, forecast_days=1)}),
            secrets=SECRETS))
    for kind in PROM_NO_ANSWER:
        add('Prometheus %s' % kind, PromAnswer(), 0, ('PROMETHEUS',),
            faults=(('prometheus', '/api/v1/query', kind),))
    rng.shuffle(cases)
    return (huge_answers() + cases)[:count]


def huge_answers():
    """Answers far past prometheus.max_answer_mb: refused unread (a
    declared length) or cut off (streamed), the run going on with load
    from allocations; the process never holds them."""
    found = []
    for description, flood, settings, said in (
            ('an answer of 4 GiB', Flood(4096), {}, 'with 4096 MiB'),
            ('an answer of 4 GiB, streamed', Flood(4096, declared=False),
             {'max_answer_mb': 8}, 'with over 8 MiB')):
        found.append(Case(
            'prometheus-answer', description, ['leveller', 'score'],
            expect=('PROMETHEUS', said, 'prometheus.max_answer_mb'), code=0,
            cloud=Cloud(prometheus=(200, 'application/json', flood),
                        leveller={'prometheus': dict(PROM_SETTINGS,
                                                     **settings)}),
            memory_mb=100))
    return found


# -- the guard against implausible metrics (core/load/guard.py) ---------------

GUARD_HELD = 'Held: az1/Gen1 (imbalance '


def _guard_section(doc):
    """A guard section that finds the snapshot_doc plausible: sizes as
    Placement's, the figures of an hour before as now's."""
    return {'reference': '2026-11-20T11:00:00Z', 'reference_from': 'since',
            'read_at': 1795000000.5, 'window': 300.0, 'hypervisors': {
                h['name']: {'cpus': 32, 'memory_mb': 131072.0,
                            'before': {'cpu': h['metrics']['cpu'],
                                       'ram': h['metrics']['ram']}}
                for h in doc['hypervisors']}}


def _guard_snapshots(path):
    """(label, document, argv, exit code, expect) of snapshot files whose
    guard section holds the domain (plan says so) or is not valid."""
    plan = ['leveller', 'plan', '--snapshot', path]
    cases = []

    def add(label, change, expect, code=0, argv=plan):
        doc = snapshot_doc()
        doc['guard'] = _guard_section(doc)
        change(doc)
        cases.append(('guard: ' + label, doc, argv, code, expect))

    def facts(name, **values):
        return lambda d: d['guard']['hypervisors'][name].update(values)

    def now(name, cpu):
        return lambda d: d['hypervisors'][int(name[2:]) - 1][
            'metrics'].update(cpu=cpu)

    def both(*changes):
        return lambda d: [change(d) for change in changes]

    add('plausible', lambda d: None, ('Plan: ',))
    add('no CPUs', facts('hv2', cpus=0), (
        GUARD_HELD, 'capacity: node_exporter of hv2 shows no CPUs '
        '(Placement: 32)'))
    add('another machine\'s memory', facts('hv3', memory_mb=65536.0), (
        GUARD_HELD, 'hv3 shows 64 GiB of memory, Placement 128 GiB'))
    add('two of three idle since', both(
        facts('hv2', before={'cpu': 0.9, 'ram': 0.2}),
        facts('hv3', before={'cpu': 0.9, 'ram': 0.2})), (
        GUARD_HELD, 'load_jump: 2 of 3 hypervisors\' CPU fell by more '
        'than 0.4'))
    add('two of three lost their metrics', lambda d: [
        h.update(metrics=None) for h in d['hypervisors'][1:]], (
        GUARD_HELD, 'coverage_drop: 1 of 3 hypervisors have metrics, 3 had',
        'lost: hv2, hv3'))
    add('a server busier than its vCPUs', facts(
        'hv1', busiest_server='id-hot0', busiest_cpu=2.5), (
        GUARD_HELD, 'impossible_load: server hot0 on hv1 reads 2.50 times '
        'its vCPUs busy'))
    add('servers busier than their hypervisor', both(
        now('hv1', 0.05), facts('hv1', before={'cpu': 0.05, 'ram': 0.8})), (
        GUARD_HELD, 'impossible_load: the servers on hv1 read 10.0 cores '
        'busy, its node_exporter 1.6 of its 32'))
    add('Prometheus gave no answer', lambda d: d['guard'].update(
        unreachable='cannot reach Prometheus at http://p: ConnectTimeout'), (
        GUARD_HELD, 'coverage_drop: no hypervisor has metrics: cannot reach '
        'Prometheus'))
    for label, change, where in (
            ('an unknown hypervisor', lambda d: d['guard']['hypervisors']
             .update(hv9={'cpus': 4}), 'guard.hypervisors.hv9'),
            ('CPUs below 0', facts('hv2', cpus=-1),
             'guard.hypervisors.hv2.cpus'),
            ('CPUs not whole', facts('hv2', cpus=1.5),
             'guard.hypervisors.hv2.cpus'),
            ('memory NaN', facts('hv2', memory_mb=float('nan')),
             'guard.hypervisors.hv2.memory_mb'),
            ('memory infinite', facts('hv2', memory_mb=float('inf')),
             'guard.hypervisors.hv2.memory_mb'),
            ('CPU of then above 1', facts('hv2', before={'cpu': 1.5}),
             'guard.hypervisors.hv2.before.cpu'),
            ('an unknown figure of then', facts('hv2', before={'disk': 1}),
             'guard.hypervisors.hv2.before'),
            ('a busiest CPU as text', facts('hv1', busiest_cpu='2.5'),
             'guard.hypervisors.hv1.busiest_cpu'),
            ('servers then below 0', facts('hv1', servers_before=-3),
             'guard.hypervisors.hv1.servers_before'),
            ('an impossible reference', lambda d: d['guard'].update(
                reference='2026-13-01T00:00:00Z'), 'guard.reference'),
            ('a reference from nowhere', lambda d: d['guard'].update(
                reference_from='yesterday'), 'guard.reference_from'),
            ('a read time before the epoch', lambda d: d['guard'].update(
                read_at=-5), 'guard.read_at'),
            ('a list for a section', lambda d: d.update(guard=[1, 2]),
             'guard'),
            ('an unknown key', lambda d: d['guard'].update(extra=1),
             'guard'),
            ('facts that are a number', lambda d: d['guard'][
                'hypervisors'].update(hv1=7), 'guard.hypervisors.hv1')):
        add(label, change, (where,), code=1, argv=_snapshot_commands(
            path)[0])
    return cases


class GuardAnswer(PromAnswer):
    """PromAnswer with hv1 hot (a plan moves servers off it), and the
    guard's query answered per part, each sample marked as Prometheus'
    label_replace marks it: parts {part: {hypervisor: value, or None for
    no series}} over sizes as Nova's and figures of then as now's; extra:
    more samples, as they are."""

    HOT = {('hv1', 'cpu'): 0.9, ('hv1', 'ram'): 0.9}

    def __init__(self, parts=None, extra=(), error=None, values=None,
                 **kwargs):
        super().__init__(values={**self.HOT, **(values or {})}, **kwargs)
        self.parts, self.extra, self.guard_error = parts or {}, extra, error

    def __call__(self, promql):
        if measure.GUARD_LABEL not in promql:
            return super().__call__(promql)
        if self.guard_error:
            raise standin.PromQLError(*self.guard_error)
        samples = []
        for part in ('cpus', 'memory', 'cpu_before', 'ram_before'):
            if '"%s"' % part not in promql:
                continue
            for name in HYPERVISORS:
                default = {'cpus': 32, 'memory': 128 * 2 ** 30}.get(part) or \
                    self.HOT.get((name, part[:3]), self.default)
                value = self.parts.get(part, {}).get(name, default)
                if value is not None:
                    samples.append((dict(self._labels(name), **{
                        measure.GUARD_LABEL: part}), value))
        return samples + [(dict(self._labels(name), **labels), value)
                          for name, labels, value in self.extra]


def _guard_answers():
    """(label, answer, argv, expect) of the stand-in Prometheus' answers
    to the guard's query: held, or ignored with the plan going on."""
    plan = list(LIVE_COMMANDS[1])
    cases = [
        ('guard: hv2 without CPU series', GuardAnswer({'cpus': {
            'hv2': None}}), (GUARD_HELD, 'capacity: node_exporter of hv2 '
                             'shows no CPUs (Placement: 32)')),
        ('guard: no memory', GuardAnswer({'memory': {'hv2': 0}}), (
            GUARD_HELD, 'hv2 shows no memory')),
        ('guard: another machine\'s CPUs', GuardAnswer({'cpus': {
            'hv3': 128}}), (GUARD_HELD, 'hv3 shows 128 CPUs, Placement 32')),
        ('guard: two idle that were busy', GuardAnswer({'cpu_before': {
            h: 0.95 for h in HYPERVISORS}}), (
            GUARD_HELD, 'load_jump: 2 of 3 hypervisors\' CPU fell by more '
            'than 0.4', 'hv2 0.95 -> 0.30, hv3 0.95 -> 0.30')),
        ('guard: two lose their CPU', GuardAnswer(values={
            ('hv2', 'cpu'): float('nan'), ('hv3', 'cpu'): 7.0}), (
            GUARD_HELD, 'coverage_drop: 1 of 3 hypervisors have metrics, '
            '3 had', 'lost: hv2, hv3')),
        ('guard: its query rejected', GuardAnswer(error=(
            'parse error: unknown function last_over_time', 'bad_data',
            400)), ('the guard\'s query failed', 'Plan: ')),
        ('guard: its query times out', GuardAnswer(error=(
            'query timed out', 'timeout', 503)), (
            'the guard\'s query failed', 'Plan: ')),
    ]
    for label, part, value in (
            ('NaN CPUs', 'cpus', float('nan')),
            ('infinite CPUs', 'cpus', float('inf')),
            ('CPUs below 0', 'cpus', -1.0),
            ('CPUs as a word', 'cpus', 'lots'),
            ('CPUs of 1e400', 'cpus', '1e400'),
            ('memory NaN', 'memory', float('nan')),
            ('memory below 0', 'memory', -2.0 ** 30),
            ('a CPU of then at 5', 'cpu_before', 5.0),
            ('a RAM of then NaN', 'ram_before', float('nan'))):
        cases.append(('guard: %s is no fact' % label, GuardAnswer(
            {part: {'hv2': value}}), ('Plan: ',)))
    cases += [
        ('guard: two CPU counts for one hypervisor', GuardAnswer(extra=[
            ('hv2', {measure.GUARD_LABEL: 'cpus'}, 4)]), ('Plan: ',)),
        ('guard: a part of its own', GuardAnswer(extra=[
            ('hv2', {measure.GUARD_LABEL: 'nonsense'}, 0)]), ('Plan: ',)),
        ('guard: a sample unmarked', GuardAnswer(extra=[
            ('hv2', {}, 0)]), ('Plan: ',)),
    ]
    return [(label, answer, plan, expect) for label, answer, expect in cases]


# -- the history the forecast's skill is measured on ---------------------

class HistoryAnswer(PromAnswer):
    """The history's range queries answered as Prometheus would, each part
    (label_replace(..., "leveller_history", "PART", ...)) a series of each
    hypervisor at every time of the range, but hv2's CPU points:
    spoil(time) -> the point sent instead of [time, "0.3"]."""

    def __init__(self, spoil):
        super().__init__()
        self.spoil = spoil

    def __call__(self, promql, start, end, step):
        times = [start + k * step
                 for k in range(int((end - start) // step) + 1)]
        parts = re.findall(r'"%s", "(\w+)"' % measure.HISTORY_LABEL, promql)
        return 200, _vector([{
            'metric': dict(self._labels(name),
                           **{measure.HISTORY_LABEL: part}),
            'values': [self.spoil(t) if name == 'hv2' and 'cpu' in part
                       else [t, '0.3'] for t in times]}
            for part in parts for name in HYPERVISORS], result_type='matrix')


def _raising(error):
    def answer(*args):
        raise error
    return answer


def _history_answers():
    """(label, range answer, expect) of the stand-in Prometheus' answers
    to the history's range queries (prometheus.forecast_days): the
    forecast's skill not measured, said, and the plan going on; points of
    no number left out quietly."""
    skipped = 'forecast skill not measured'

    def raw(status, body):
        return lambda *args: (status, body)
    series = {'metric': {'instance': 'hv1:9100'}, 'values': [[1, '0.5']]}
    cases = [
        ('history: a vector', raw(200, _vector([])),
         (skipped, 'not a range of samples (matrix)')),
        ('history: "result": null', raw(200, _vector(
            None, result_type='matrix')), (skipped, 'not a list of series')),
        ('history: "values" a mapping', raw(200, _vector([dict(
            series, values={'a': 1})], result_type='matrix')),
         (skipped, 'not a list of series')),
        ('history: one series twice', raw(200, _vector(
            [series, series], result_type='matrix')),
         (skipped, 'two series of the same labels')),
        ('history: an HTML page', raw(200, b'<html>login</html>'),
         (skipped, 'does not answer like Prometheus')),
        ('history: HTTP 503', raw(503, b''), (skipped, 'HTTP 503')),
        ('history: rejected (bad_data)', _raising(standin.PromQLError(
            'parse error: unknown function with name "avg_over_time"')),
         (skipped, 'rejected the range query', 'unknown function')),
        ('history: too many samples', _raising(standin.PromQLError(
            'query processing would load too many samples into memory in '
            'query execution', 'execution', 422)),
         (skipped, 'too many samples')),
    ]
    for label, spoil in (
            ('NaN', lambda t: [t, 'NaN']), ('+Inf', lambda t: [t, '+Inf']),
            ('1e400', lambda t: [t, 10 ** 400]), ('5', lambda t: [t, '5']),
            ('a word', lambda t: [t, 'lots']),
            ('a mapping', lambda t: [t, {'a': 1}]),
            ('a time that is text', lambda t: [str(t), '0.3']),
            ('a time off the grid', lambda t: [t + 17.5, '0.3']),
            ('one number', lambda t: [t]), ('null', lambda t: None)):
        cases.append(('history: hv2\'s CPU points %s' % label,
                      HistoryAnswer(spoil), ('Plan: ', 'Forecast: ')))
    return cases


def gen_target_files(rng, count):
    snap = DIR + '/snapshot.json'
    path = DIR + '/targets.yaml'
    argv = ['leveller', 'plan', '--snapshot', snap, '--target-placement',
            path]
    files = {'snapshot.json': to_json(snapshot_doc())}
    where = '--target-placement ' + path
    cases = []

    def add(description, content, expect, memory=None):
        cases.append(Case('target-placement-file', description, list(argv),
                          expect=(path,) + tuple(e for e in expect if e),
                          files=dict(files, **{'targets.yaml': content}),
                          memory_mb=memory))

    for label, content, phrase in damaged_files(
            rng, json.dumps({'hot0': 'hv2', 'hot1': 'hv3'}),
            depth=YAML_TOO_DEEP):
        add(label, content, (phrase,))
    table = [
        ('an empty mapping', '{}\n', (where,)),
        ('a list', '- hot0\n- hv2\n', (where,)),
        ('an unknown server', 'nosuch: hv2\n', (where, 'nosuch')),
        ('an unknown hypervisor', 'hot0: hv9\n', (where, 'hv9')),
        ('a hypervisor that is a number', 'hot0: 7\n', (where, 'hot0')),
        ('a hypervisor that is NaN', 'hot0: .nan\n', (where, 'hot0')),
        ('a hypervisor that is a list', 'hot0: [hv2]\n', (where, 'hot0')),
        ('a hypervisor that is a mapping', 'hot0: {a: b}\n',
         (where, 'hot0')),
        ('a hypervisor that is null', 'hot0:\n', (where, 'hot0')),
        ('a hypervisor with a lone surrogate', 'hot0: "hv2\\ud800"\n',
         (where, 'hot0')),
        ('a server with a lone surrogate', '"hot0\\ud800": hv2\n',
         (where,)),
        ('a server that is a number', '12: hv2\n', (where, '12')),
        ('a server that is NaN', '.nan: hv2\n', (where, 'nan')),
        ('two targets for one server', 'hot0: hv2\nid-hot0: hv3\n',
         (where, 'id-hot0')),
        # Six levels: half a million strings, so a message that quotes it
        # whole is caught by its length, not by a stuck machine.
        ('an alias bomb as a hypervisor', 'hot0: %s\n' % bomb(levels=6),
         (where, 'hot0')),
        ('an alias bomb as a key', '? %s\n: hv2\n' % bomb(), (path,)),
        ('a target in another zone', 'hot0: hv2\n', ()),
        ('YAML nested %d deep' % YAML_TOO_DEEP, 'a: ' + '[' * YAML_TOO_DEEP,
         (path,)),
    ]
    for label, content, expect in table:
        if label == 'a target in another zone':
            doc = snapshot_doc()
            doc['hypervisors'][1]['availability_zone'] = 'az9'
            cases.append(Case(
                'target-placement-file', label, list(argv),
                expect=('hot0', 'az9'), files={
                    'snapshot.json': to_json(doc),
                    'targets.yaml': content}))
            continue
        add(label, content, expect,
            memory=BOMB_MEMORY_MB if 'bomb' in label else None)
    rng.shuffle(cases)
    return cases[:count]


# Every output option: (argv before it, the option). No cloud answers
# (Case.cloud None): a command that read it first would fail otherwise.
OUTPUTS = (
    (['leveller', 'plan', '--snapshot', DIR + '/snapshot.json'],
     '--output-file'),
    (['leveller', 'plan', '--snapshot', DIR + '/snapshot.json'], '--report'),
    (['leveller', 'score', '--snapshot', DIR + '/snapshot.json'], '--report'),
    (['leveller', 'snapshot'], '--output-file'),
    (['leveller', 'apply'], '--metrics-file'),
    (['leveller', 'apply', '--dry-run', DIR + '/plan.json'],
     '--metrics-file'),
    (['leveller', 'evacuate', 'hv1'], '--metrics-file'),
)
# Never made by a refused output: the default journal's and lock's
# directory (HOME is the case's), the files the cases would write, those
# named by blanks (the case's directory is the current one).
OUTPUTS_ABSENT = (DIR + '/.local', DIR + '/nowhere.json', DIR + '/p.json',
                  DIR + '/m.prom', DIR + '/ ', DIR + '/  ')


def output_case(argv, expect, files=None):
    return Case('output-path', ' '.join(argv[1:]).replace(DIR, '.'), argv,
                expect=expect, files=files or output_files(),
                absent=OUTPUTS_ABSENT)


def output_files():
    return {'snapshot.json': to_json(snapshot_doc()),
            'plan.json': to_json(plan_doc()), 'real.json': '{}\n',
            'fifo': FIFO, 'socket': SOCKET, 'dir': DIRECTORY,
            'link': Link('real.json'),
            'dangling': Link(DIR + '/nowhere.json'),
            'to-fifo': Link(DIR + '/fifo')}


def gen_output_paths(rng, count):
    """What is at an output's path: refused before any work (the cloud,
    the plan, the journal and the lock), and left as it was; one file
    named twice; standard output where it is not; empty names. Device
    nodes: tests/unit/test_output_paths.py, in a mount namespace."""
    snap = DIR + '/snapshot.json'
    files = output_files()
    kinds = (
        ('fifo', [], 'is a FIFO (named pipe), not a regular file'),
        ('socket', [], 'is a socket, not a regular file'),
        ('dir', [], 'is a directory, not a regular file'),
        ('link', [], 'is a symbolic link to real.json; set '
                     'output.follow_symlinks'),
        ('dangling', [], 'is a symbolic link to %s/nowhere.json' % DIR),
        ('to-fifo', ['--follow-symlinks'], 'is a symbolic link to '
         '%s/fifo, a FIFO (named pipe), not a regular file' % DIR),
    )
    table = []
    for command, option in OUTPUTS:
        for name, more, what in kinds:
            path = DIR + '/' + name
            table.append((command + [option, path] + more,
                          ('%s %s: %s' % (option, path, what),)))
        table.append((command + [option, DIR + '/real.json', '--config',
                                 DIR + '/./real.json'],
                      ('%s %s/real.json and --config %s/./real.json are '
                       'the same file' % (option, DIR, DIR),)))
    plan = ['leveller', 'plan', '--snapshot', snap]
    same = (
        (plan + ['--output-file', snap], '--output-file', '--snapshot'),
        (plan + ['--report', snap], '--report', '--snapshot'),
        (plan + ['--output-file', DIR + '/p.json', '--report',
                 DIR + '/p.json'], '--output-file', '--report'),
        (plan + ['--report', DIR + '/link', '--output-file',
                 DIR + '/real.json', '--follow-symlinks'], '--report',
         '--output-file'),
        (['leveller', 'score', '--snapshot', snap, '--report', snap],
         '--report', '--snapshot'),
        (['leveller', 'apply', DIR + '/plan.json', '--metrics-file',
          DIR + '/plan.json'], '--metrics-file', 'plan file'),
        (['leveller', 'apply', '--metrics-file', DIR + '/m.prom',
          '--journal', DIR + '/m.prom'], '--metrics-file', '--journal'),
        (['leveller', 'apply', '--journal', DIR + '/plan.json',
          DIR + '/plan.json'], '--journal', 'plan file'),
        (['leveller', 'evacuate', 'hv1', '--journal', DIR + '/j',
          '--lock-file', DIR + '/j'], '--journal', '--lock-file'),
        (['leveller', 'evacuate', 'hv1', '--lock-file', DIR + '/l',
          '--metrics-file', DIR + '/l'], '--metrics-file', '--lock-file'),
    )
    for argv, one, two in same:
        table.append((argv, (one, two, 'are the same file')))
    for argv, expect in (
            (plan + ['--output-file', '-', '--report', '-'],
             '--output-file -, --report -: only one output can be standard '
             'output'),
            (['leveller', 'apply', '--metrics-file', '-'],
             '--metrics-file -: cannot be standard output'),
            (['leveller', 'evacuate', 'hv1', '--dry-run', '--metrics-file',
              '-'], '--metrics-file -: cannot be standard output'),
            (plan + ['--explain', 'hot0', '--output-file', '-'],
             '--explain and --output-file do not go together'),
            (['leveller', 'apply', '--metrics-file', ' '],
             '--metrics-file: must be a file name, or empty text for none'),
            (['leveller', 'apply', '--journal', '  '],
             '--journal: must be a file name, or empty text for none'),
            (['leveller', 'evacuate', 'hv1', '--lock-file', ' '],
             '--lock-file: must be a file name, not empty'),
            (plan + ['--report', DIR + '/real.json/r.html'],
             'cannot write --report %s/real.json/r.html: Not a directory'
             % DIR)):
        table.append((argv, (expect,)))
    rng.shuffle(table)
    return [output_case(argv, expect, dict(files))
            for argv, expect in table[:count]]


GENERATORS = {
    'snapshot-file': gen_snapshot_files,
    'plan-file': gen_plan_files,
    'config-file': lambda rng, n: gen_settings(rng, n, 'config-file'),
    'clouds-yaml': gen_clouds_yaml,
    'flag': gen_flags,
    'cloud-answer': gen_cloud_answers,
    'prometheus-answer': gen_prometheus_answers,
    'target-placement-file': gen_target_files,
    'output-path': gen_output_paths,
}


def generate(seed, count=None):
    """The corpus of one seed; count: about how many cases in all."""
    total = sum(QUOTA.values())
    cases = []
    for kind in KINDS:
        quota = QUOTA[kind] if count is None else max(
            1, round(QUOTA[kind] * count / total))
        rng = random.Random('%s/%s' % (seed, kind))
        cases += GENERATORS[kind](rng, quota)
    return cases


# -- the runner -------------------------------------------------------------

@dataclasses.dataclass
class Flood:
    """An answer of this many MiB, sent without ever being held: an empty
    vector padded with spaces, its length declared or not (chunked)."""
    mib: int
    declared: bool = True

    def send(self, handler):
        head = _vector([])
        size = self.mib * 2 ** 20
        if self.declared:
            handler.send_header('Content-Length', str(size))
        else:
            handler.send_header('Transfer-Encoding', 'chunked')
        handler.end_headers()
        sent, pad = 0, b' ' * 2 ** 20
        try:
            while sent < size:
                piece = (head if not sent else pad)[:size - sent]
                handler.wfile.write(piece if self.declared else
                                    b'%x\r\n%s\r\n' % (len(piece), piece))
                sent += len(piece)
            if not self.declared:
                handler.wfile.write(b'0\r\n\r\n')
        except OSError:
            pass  # the client hung up, as it should


class RawPrometheus:
    """An HTTP server on 127.0.0.1 answering every query with one fixed
    (status, content type, body): answers no Prometheus would give. Which
    libvirt exporter's metric names it has: none."""

    def __init__(self):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                status, ctype, body = owner.answer
                if '/api/v1/label/' in self.path:
                    status, ctype, body = 200, 'application/json', \
                        b'{"status": "success", "data": []}'
                self.send_response(status)
                self.send_header('Content-Type', ctype)
                if isinstance(body, Flood):
                    body.send(self)
                    return
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.answer = (200, 'application/json', b'{}')
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      Handler)
        self.server.daemon_threads = True
        self.url = 'http://127.0.0.1:%d' % self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@dataclasses.dataclass
class Result:
    case: Case
    argv: list
    code: int
    stdout: str
    stderr: str
    error: BaseException  # what reached cliff
    seconds: float
    grown_mb: float
    problems: list

    @property
    def message(self):
        """What the operator reads: the argument parser's last line for a
        usage error, else standard error."""
        if self.code == 2:
            lines = [line for line in self.stderr.splitlines() if line]
            return lines[-1] if lines else ''
        return self.stderr

    def report(self):
        return '%s\n  argv: %s\n  exit %s, problems: %s\n  output tail: %r' % (
            self.case, ' '.join(self.argv), self.code,
            '; '.join(self.problems), (self.stdout + self.stderr)[-600:])


def _fill(value, directory):
    return value.replace(DIR, directory) if isinstance(value, str) else value


def _write_files(case, directory):
    for name, content in case.files.items():
        path = os.path.join(directory, name)
        if content is None:
            continue
        if content is DIRECTORY:
            os.mkdir(path)
        elif content is FIFO:
            os.mkfifo(path)
        elif content is SOCKET:
            os.mknod(path, stat.S_IFSOCK | 0o600)
        elif isinstance(content, Link):
            os.symlink(_fill(content.target, directory), path)
        elif isinstance(content, Sparse):
            with open(path, 'wb') as f:
                f.truncate(content.size)
        elif isinstance(content, bytes):
            with open(path, 'wb') as f:
                f.write(content)
        else:
            with open(path, 'w', encoding='utf-8',
                      errors='surrogatepass') as f:
                f.write(_fill(content, directory))


def _clouds_yaml(case, directory, cloud, raw):
    """The clouds.yaml of one case: the stand-in's, or one whose Keystone
    never answers (offline cases never call it)."""
    if cloud is not None:
        auth = dict(cloud.auth_args())
    else:
        auth = {'auth_url': 'http://127.0.0.1:9/v3', 'username': 'admin',
                'password': KEYSTONE_PASSWORD, 'project_name': 'admin',
                'user_domain_name': 'Default',
                'project_domain_name': 'Default'}
    entry = {'auth': auth, 'region_name': 'RegionOne',
             'identity_api_version': 3, 'interface': 'public'}
    entry.update(case.entry)
    leveller = case.leveller
    if case.cloud is not None:
        stall = any(f[2] == 'stall' for f in case.cloud.faults)
        timeout = STALL_TIMEOUT if stall else TIMEOUT
        section = {'cloud': {'connect_timeout': timeout,
                             'read_timeout': timeout, 'retries': 0},
                   'prometheus': {'connect_timeout': timeout,
                                  'timeout': timeout}}
        for group, values in case.cloud.leveller.items():
            section.setdefault(group, {}).update(values)
        if case.cloud.prometheus is not None:
            section['prometheus']['url'] = \
                raw.url if isinstance(case.cloud.prometheus, tuple) else \
                cloud.prometheus_url
        else:
            del section['prometheus']
        entry['leveller'] = section
    text = yaml.safe_dump({'clouds': {CLOUD: entry}},
                          default_flow_style=False)
    if isinstance(leveller, str):
        text += '    leveller:\n' + textwrap.indent(
            _fill(leveller, directory), '      ')
    path = os.path.join(directory, 'clouds.yaml')
    with open(path, 'w', encoding='utf-8', errors='surrogatepass') as f:
        f.write(text)
    return path


def _shell():
    from openstackclient import shell
    return shell.OpenStackShell()


def run_case(case, directory, raw):
    """Run one case in its own directory; a Result with its problems."""
    os.makedirs(directory)
    _write_files(case, directory)
    cloud = None
    if case.cloud is not None:
        prom = case.cloud.prometheus
        cloud = standin.StandIn(
            cloud_doc(), password=KEYSTONE_PASSWORD,
            prometheus=prom if callable(prom) else None)
        cloud.prometheus_range = case.cloud.prometheus_range
        if case.cloud.corrupt is not None:
            case.cloud.corrupt(cloud)
        cloud.start()
        for fault in case.cloud.faults:
            cloud.fault(*fault)
        if isinstance(prom, tuple):
            raw.answer = prom
    try:
        clouds_yaml = _clouds_yaml(case, directory, cloud, raw)
        argv = ['--os-cloud', CLOUD] + [_fill(a, directory)
                                        for a in case.argv]
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env.update(HOME=directory, OS_CLIENT_CONFIG_FILE=clouds_yaml)
        here = os.getcwd()
        os.chdir(directory)  # what a case writes by a relative path stays
        try:
            result = _run_shell(case, argv, env)
        finally:
            os.chdir(here)
    finally:
        if cloud is not None:
            cloud.stop()
    expect = [_fill(e, directory) for e in case.expect]
    if case.cloud is not None:
        url = raw.url if isinstance(case.cloud.prometheus, tuple) else \
            cloud.prometheus_url
        expect = [url if e == 'PROMETHEUS' else e for e in expect]
    judge(result, expect)
    result.problems += left_as_it_was(case, directory)
    return result


def left_as_it_was(case, directory):
    """Problems: a special file of the case that is no longer what it was
    (a FIFO, socket, directory or link replaced by a regular file), or a
    path of case.absent that exists."""
    kinds = ((FIFO, stat.S_ISFIFO), (SOCKET, stat.S_ISSOCK),
             (DIRECTORY, stat.S_ISDIR))
    problems = []
    for name, content in case.files.items():
        test = stat.S_ISLNK if isinstance(content, Link) else next(
            (test for entry, test in kinds if content is entry), None)
        path = os.path.join(directory, name)
        if test is not None and not (os.path.lexists(path) and test(
                os.lstat(path).st_mode)):
            problems.append('%s was replaced' % name)
    problems += ['%s exists' % _fill(p, directory) for p in case.absent
                 if os.path.lexists(_fill(p, directory))]
    return problems


def _run_shell(case, argv, env):
    from osc_leveller.v1 import masking
    shell = _shell()
    out, err = io.StringIO(), io.StringIO()
    shell.stdout, shell.stderr = out, err
    seen = []
    clean_up = shell.clean_up
    initialize = shell.initialize_app

    def record(cmd, result, error):
        seen.append(error)
        return clean_up(cmd, result, error)

    def initialize_app(argv):
        try:
            return initialize(argv)
        except Exception as exc:
            seen.append(exc)
            raise

    shell.clean_up = record
    shell.initialize_app = initialize_app
    # What the shell sets for the process: handlers, levels, warnings.
    root = logging.getLogger()
    handlers = list(root.handlers)
    levels = {name: logger.level for name, logger in
              logging.Logger.manager.loggerDict.items()
              if isinstance(logger, logging.Logger)}
    levels[None] = root.level
    masking._known.clear()  # as in a new process
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    try:
        with mock.patch.dict(os.environ, env, clear=True), \
                contextlib.redirect_stderr(err), \
                contextlib.redirect_stdout(out), \
                warnings.catch_warnings(), _limits(case.memory_mb):
            try:
                code = shell.run(argv)
            except SystemExit as exc:
                code = exc.code
            except (Exception, Hung) as exc:  # judged below, not hidden
                seen.append(exc)
                err.write(''.join(traceback.format_exception(exc)))
                code = None
    finally:
        root.handlers[:] = handlers
        for name, level in levels.items():
            logger = logging.getLogger(name)
            if logger.level != level:  # setLevel() clears every cache
                logger.setLevel(level)
    seconds = time.monotonic() - started
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) \
        / 1024.0
    error = next((e for e in seen if e is not None), None)
    return Result(case, argv, code, out.getvalue(), err.getvalue(), error,
                  seconds, grown, [])


class Hung(BaseException):
    """A case ran past CASE_SECONDS (not an Exception: nothing catches it)."""


def _virtual_bytes():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[0]) * resource.getpagesize()


@contextlib.contextmanager
def _limits(memory_mb):
    """At most CASE_SECONDS; with memory_mb, an address space that may grow
    by at most that much more than a gigabyte (thread stacks and arenas
    count), so a blow-up is a MemoryError, not a stuck machine."""
    def hung(signum, frame):
        raise Hung('still running after %d s' % CASE_SECONDS)

    main = threading.current_thread() is threading.main_thread()
    if main:  # only there can a signal interrupt the case
        previous = signal.signal(signal.SIGALRM, hung)
        signal.alarm(CASE_SECONDS)
    limit = resource.getrlimit(resource.RLIMIT_AS)
    if memory_mb is not None:
        resource.setrlimit(resource.RLIMIT_AS, (
            _virtual_bytes() + (1024 + memory_mb) * 2 ** 20, limit[1]))
    try:
        yield
    finally:
        if main:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, limit)


def judge(result, expect):
    """Fill result.problems: what makes this case not a clean error."""
    from osc_lib import exceptions
    case, problems = result.case, result.problems
    output = result.stdout + result.stderr
    if result.error is not None and not isinstance(
            result.error, exceptions.CommandError):
        problems.append('unhandled %s: %s' % (
            type(result.error).__name__, str(result.error)[:200]))
    if result.code != case.code:
        problems.append('exit code %s, expected %s' % (result.code,
                                                       case.code))
    if 'Traceback' in output:
        problems.append('a traceback in the output')
    message = result.message
    if CONTROLS.search(output):
        problems.append('a control character reached the output: %r' %
                        CONTROLS.search(output).group())
    for text in expect:
        if text not in message and text not in output:
            problems.append('the message does not name %r' % text)
    if len(message) >= MESSAGE_LIMIT:
        problems.append('the message is %d characters long' % len(message))
    for secret in SECRETS + case.secrets:
        if secret and secret in output:
            problems.append('a secret in the output: %r' % secret[:20])
    if case.memory_mb is not None and result.grown_mb > case.memory_mb:
        problems.append('the process grew by %d MB' % result.grown_mb)


def is_unhandled(result):
    return any(p.startswith('unhandled') for p in result.problems)


def known(result):
    """Why this case is a known defect elsewhere, or None."""
    return KNOWN.get((result.case.kind, result.case.description))


def failures(results):
    """The failing cases not known, and the known ones that now pass."""
    failed = [r for r in results if r.problems and not known(r)]
    stale = [r for r in results if known(r) and not r.problems]
    return failed, stale


def run(cases, progress=None):
    """Run every case, each in a directory of its own; [Result]."""
    root = tempfile.mkdtemp(prefix='badinput-')
    raw = RawPrometheus()
    results = []
    try:
        for index, case in enumerate(cases):
            result = run_case(case, os.path.join(root, 'case-%04d' % index),
                              raw)
            results.append(result)
            if progress is not None:
                progress(index, result)
    finally:
        raw.close()
        shutil.rmtree(root, ignore_errors=True)
    return results


def totals(results, seconds=None):
    """The summary line: tried, clean, unhandled, and the counts by kind."""
    clean = sum(1 for r in results if not r.problems)
    unhandled = sum(1 for r in results if is_unhandled(r))
    other = sum(1 for r in results if r.problems and known(r))
    by_kind = {}
    for r in results:
        by_kind[r.case.kind] = by_kind.get(r.case.kind, 0) + 1
    line = 'bad inputs: %d tried, %d clean errors, %d unhandled, ' % (
        len(results), clean, unhandled)
    if other:
        line += '%d known defects elsewhere, ' % other
    line += 'by kind: %s' % ', '.join(
        '%s %d' % (k, by_kind[k]) for k in KINDS if k in by_kind)
    if seconds is not None:
        line += ' (%.1f s)' % seconds
    return line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seed', default='1')
    parser.add_argument('--count', type=int)
    parser.add_argument('--kind', action='append', choices=KINDS)
    parser.add_argument('--verbose', '-v', action='store_true')
    args = parser.parse_args(argv)
    cases = [c for c in generate(args.seed, args.count)
             if not args.kind or c.kind in args.kind]
    started = time.monotonic()

    def progress(index, result):
        if args.verbose:
            print('%4d %5.2fs %s%s' % (index, result.seconds, result.case,
                                       ' FAIL' if result.problems else ''),
                  file=sys.__stderr__)

    results = run(cases, progress)
    failed, stale = failures(results)
    for r in failed:
        print(r.report())
    for r in results:
        if known(r) and r.problems:
            print('known: %s\n  %s' % (r.case, known(r)))
    for r in stale:
        print('known but now clean (remove it from KNOWN): %s' % r.case)
    print(totals(results, time.monotonic() - started))
    return 1 if failed or stale else 0


if __name__ == '__main__':
    sys.exit(main())
