import ast
import pathlib
import sys
import tempfile
import unittest

import osc_leveller

CORE = pathlib.Path(osc_leveller.__file__).parent / 'core'
FORBIDDEN = {'cliff', 'osc_lib', 'openstack', 'openstackclient', 'requests',
             'keystoneauth1'}


def imported_roots(path):
    tree = ast.parse(path.read_text(encoding='utf-8'))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split('.')[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split('.')[0]


class TestCoreIsPure(unittest.TestCase):
    def test_core_imports_only_stdlib_and_itself(self):
        modules = sorted(CORE.glob('*.py'))
        self.assertGreater(len(modules), 5)
        for path in modules:
            for root in imported_roots(path):
                self.assertNotIn(root, FORBIDDEN, '%s imports %s' % (
                    path.name, root))
                self.assertTrue(
                    root == 'osc_leveller' or root in sys.stdlib_module_names,
                    '%s imports %s, which is not in the standard library'
                    % (path.name, root))

    def test_checker_catches_a_forbidden_import(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = pathlib.Path(tmp) / 'bad.py'
            bad.write_text('from cliff import command\nimport requests\n')
            self.assertEqual(['cliff', 'requests'],
                             list(imported_roots(bad)))
