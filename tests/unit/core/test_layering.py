"""core/ is pure: it imports itself, the standard library and the few
computation libraries allowed, never cloud/, v1/, the CLI or the network."""

import ast
import pathlib
import sys
import tempfile
import unittest

import osc_leveller

CORE = pathlib.Path(osc_leveller.__file__).parent / 'core'
PACKAGE = 'osc_leveller.core'
REQUIREMENTS = CORE.parent.parent / 'requirements.txt'
# The CLI, the cloud's SDKs, and what talks to the network or to processes.
FORBIDDEN = ('cliff', 'osc_lib', 'openstack', 'openstackclient',
             'keystoneauth1', 'requests', 'urllib3', 'argparse', 'socket',
             'socketserver', 'ssl', 'http', 'urllib.request', 'ftplib',
             'smtplib', 'xmlrpc', 'asyncio', 'subprocess',
             'importlib.import_module')
# Pure computation libraries core/ may use (module: PyPI name), each in
# requirements.txt and doc/source/contributor/index.rst.
ALLOWED = {'jsonschema_rs': 'jsonschema-rs', 'orjson': 'orjson',
           'prometheus_client': 'prometheus-client'}


def imported(path, package=PACKAGE):
    """The dotted names the module at path imports, relative imports
    resolved against package; a dynamic import is named as such."""
    tree = ast.parse(path.read_text(encoding='utf-8'))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                parent = parts[:len(parts) - node.level + 1]
                base = '.'.join(parent + ([base] if base else []))
            for alias in node.names:  # a name may be a submodule
                yield '%s.%s' % (base, alias.name)
        elif isinstance(node, ast.Call):
            func = node.func
            name = getattr(func, 'attr', None) or getattr(func, 'id', None)
            if name in ('import_module', '__import__'):
                yield 'importlib.import_module'


def _under(name, prefix):
    return name == prefix or name.startswith(prefix + '.')


def violations(path, package=PACKAGE):
    """What the module at path imports that core/ may not."""
    bad = []
    for name in imported(path, package):
        root = name.split('.')[0]
        if root == 'osc_leveller':
            ok = _under(name, PACKAGE) or name == 'osc_leveller.core'
        else:
            ok = not any(_under(name, f) for f in FORBIDDEN) and (
                root in sys.stdlib_module_names or root in ALLOWED)
        if not ok:
            bad.append(name)
    return bad


class TestCoreIsPure(unittest.TestCase):
    def test_core_imports_only_stdlib_itself_and_allowed(self):
        modules = sorted(CORE.glob('*.py'))
        self.assertGreater(len(modules), 5)
        for path in modules:
            self.assertEqual([], violations(path), path.name)

    def test_planning_does_not_reach_for_the_executor(self):
        # What may move and the re-checks live in policy and checks; the
        # executor runs moves and is nobody's library.
        for name in ('planner', 'paths', 'drain', 'policy', 'checks',
                     'filters', 'scoring', 'state', 'plan'):
            found = [n for n in imported(CORE / ('%s.py' % name))
                     if _under(n, PACKAGE + '.executor')]
            self.assertEqual([], found, name)

    def test_checker_catches_a_planted_bad_import(self):
        planted = {
            'from ..cloud import collect\n': ['osc_leveller.cloud.collect'],
            'from osc_leveller import cloud\n': ['osc_leveller.cloud'],
            'import osc_leveller.v1.common\n': ['osc_leveller.v1.common'],
            'from osc_leveller.v1 import common as c\n':
                ['osc_leveller.v1.common'],
            'from .. import v1\n': ['osc_leveller.v1'],
            'from cliff import command\n': ['cliff.command'],
            'import requests\n': ['requests'],
            'from http import client\n': ['http.client'],
            'import urllib.request\n': ['urllib.request'],
            'import socket\n': ['socket'],
            'import argparse\n': ['argparse'],
            'import numpy\n': ['numpy'],
            'import importlib\nimportlib.import_module("x")\n':
                ['importlib.import_module'],
            # Allowed: core itself, relative or not; the standard library;
            # the computation libraries.
            'from . import model\nfrom .scoring import host_score\n'
            'from osc_leveller.core import errors\nimport json\n'
            'import urllib.parse\nimport orjson\n': [],
        }
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / 'planted.py'
            for source, expected in planted.items():
                path.write_text(source)
                self.assertEqual(expected, violations(path), source)

    def test_allowed_libraries_are_requirements(self):
        names = {line.split('>')[0].split('=')[0].strip().lower()
                 for line in REQUIREMENTS.read_text().splitlines()}
        for module, name in ALLOWED.items():
            self.assertIn(name, names, module)
