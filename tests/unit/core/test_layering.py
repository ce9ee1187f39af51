import ast
import pathlib
import sys
import tempfile
import unittest

import osc_leveller

CORE = pathlib.Path(osc_leveller.__file__).parent / 'core'
REQUIREMENTS = CORE.parent.parent / 'requirements.txt'
FORBIDDEN = {'cliff', 'osc_lib', 'openstack', 'openstackclient', 'requests',
             'keystoneauth1'}
# Pure computation libraries core/ may use (module: PyPI name), each in
# requirements.txt and doc/source/contributor/index.rst.
ALLOWED = {'jsonschema_rs': 'jsonschema-rs', 'orjson': 'orjson'}


def imported_roots(path):
    tree = ast.parse(path.read_text(encoding='utf-8'))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split('.')[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split('.')[0]


def violations(path):
    """The modules path imports that core/ may not."""
    return [root for root in imported_roots(path)
            if root in FORBIDDEN or not (
                root == 'osc_leveller' or root in sys.stdlib_module_names
                or root in ALLOWED)]


class TestCoreIsPure(unittest.TestCase):
    def test_core_imports_only_stdlib_itself_and_allowed(self):
        modules = sorted(CORE.glob('*.py'))
        self.assertGreater(len(modules), 5)
        for path in modules:
            self.assertEqual([], violations(path), path.name)

    def test_checker_catches_a_forbidden_import(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = pathlib.Path(tmp) / 'bad.py'
            bad.write_text('from cliff import command\nimport requests\n'
                           'import json\nimport orjson\nimport numpy\n')
            self.assertEqual(['cliff', 'requests', 'numpy'], violations(bad))

    def test_allowed_libraries_are_requirements(self):
        names = {line.split('>')[0].split('=')[0].strip().lower()
                 for line in REQUIREMENTS.read_text().splitlines()}
        for module, name in ALLOWED.items():
            self.assertIn(name, names, module)
