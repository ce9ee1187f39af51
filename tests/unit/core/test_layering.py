"""core/ is pure: it imports itself, the standard library and the few
computation libraries allowed, never cloud/, v1/, the CLI or the network.
Its wings (subpackages by stage) import only their own and those below."""

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
# core/'s wings, each stage after those it builds on.
WINGS = ('model', 'settings', 'load', 'rules', 'planning', 'run')


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


def package_of(path):
    """The dotted package of a core module's file."""
    return '.'.join(('osc_leveller',) +
                    path.relative_to(CORE.parent).parts[:-1])


def backward(path, wing, package=None):
    """The imports of the module at path, in wing, of a wing above it;
    package: its package (default: where the file is)."""
    rank = WINGS.index(wing)
    found = []
    for name in imported(path, package or package_of(path)):
        parts = name.split('.')
        if parts[:2] == ['osc_leveller', 'core'] and len(parts) > 2 and \
                parts[2] in WINGS and WINGS.index(parts[2]) > rank:
            found.append(name)
    return found


class TestCoreIsPure(unittest.TestCase):
    def modules(self):
        """(wing, path) of every core module."""
        for path in sorted(CORE.rglob('*.py')):
            parts = path.relative_to(CORE).parts
            yield (parts[0] if len(parts) > 1 else None), path

    def test_core_imports_only_stdlib_itself_and_allowed(self):
        modules = list(self.modules())
        self.assertGreater(len(modules), 5)
        for _, path in modules:
            self.assertEqual([], violations(path, package_of(path)),
                             path.name)

    def test_every_module_is_in_a_wing(self):
        self.assertEqual(sorted(WINGS), sorted(
            p.name for p in CORE.iterdir() if p.is_dir() and
            p.name != '__pycache__'))
        self.assertEqual([CORE / '__init__.py'], [
            path for wing, path in self.modules() if wing is None])

    def test_wings_import_only_their_own_and_those_below(self):
        for wing, path in self.modules():
            if wing is not None:
                self.assertEqual([], backward(path, wing),
                                 '%s/%s' % (wing, path.name))

    def test_checker_catches_a_planted_backward_import(self):
        planted = {
            'from osc_leveller.core.planning import planner\n':
                ['osc_leveller.core.planning.planner'],
            'from ..run import executor\n': ['osc_leveller.core.run.executor'],
            'from osc_leveller.core import rules\n':
                ['osc_leveller.core.rules'],
            'import osc_leveller.core.planning.kinds\n':
                ['osc_leveller.core.planning.kinds'],
            # Allowed: its own wing, relative or not, and those below.
            'from . import state\nfrom ..model import model\n'
            'from osc_leveller.core.settings import config\n': [],
        }
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / 'load' / 'planted.py'
            path.parent.mkdir()
            for source, expected in planted.items():
                path.write_text(source)
                self.assertEqual(expected, backward(
                    path, 'load', PACKAGE + '.load'), source)

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
