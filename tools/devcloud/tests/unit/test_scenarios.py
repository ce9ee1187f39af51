"""The scenarios as files: what they promise, without a cloud.

Loading them is the devcloud's generic machinery (the functional
self-checks load mixed and hot-host); what each promises of its
hypervisors follows from its YAML alone, as Placement would count it.
"""

import importlib.util
import pathlib
import sys
import unittest

import yaml

CODE = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    'devcloud_setup_for_tests', CODE / 'devcloud_setup.py')


def scenario(name):
    with open(CODE / 'scenarios' / ('%s.yaml' % name)) as f:
        return yaml.safe_load(f)


def servers_on(spec):
    """{host: [flavor of each server]}, counts expanded."""
    flavors = {f['name']: f for f in spec.get('flavors', [])}
    found = {}
    for entry in spec.get('servers', []):
        found.setdefault(entry['host'], []).extend(
            [flavors[entry['flavor']]] * int(entry.get('count', 1)))
    return found


class TestNearFull(unittest.TestCase):
    """near-full: every hypervisor over 60 % of its RAM allocated, hv01 and
    hv02 over 90 % ((memory - reserved) x ratio, as Placement counts)."""

    def test_memory_nearly_allocated(self):
        spec = scenario('near-full')
        placed = servers_on(spec)
        for hyp in spec['hypervisors']:
            capacity = (hyp['memory_mb'] - hyp.get('reserved_mb', 0)) * \
                hyp.get('ram_ratio', 1.0)
            used = sum(f['ram'] for f in placed.get(hyp['name'], [])) / \
                capacity
            self.assertGreater(used, 0.6, hyp['name'])
            if hyp['name'] in ('hv01', 'hv02'):
                self.assertGreater(used, 0.9, hyp['name'])


class TestRules(unittest.TestCase):
    """rules: the SPECs the devcloud script reads, its optional fields
    only where a hypervisor has them, so other scenarios' SPECs (the
    state a hypervisor was made with) do not change."""

    def setUp(self):
        sys.path.insert(0, str(CODE))  # its devcloud_retry, beside it
        self.addCleanup(sys.path.remove, str(CODE))
        try:  # devcloud_setup imports openstacksdk, not always at hand
            self.setup = importlib.util.module_from_spec(_spec)
            _spec.loader.exec_module(self.setup)
        except ImportError as exc:
            self.skipTest('devcloud_setup needs %s' % exc.name)

    def test_specs(self):
        specs = {h['name']: self.setup.spec_of(h)
                 for h in scenario('rules')['hypervisors']}
        self.assertEqual(
            'hv03:24:65536:800:Icelake-Server:sse4_2+avx+avx2+avx512f+'
            'avx512vnni+sha_ni:az1:4.0:1.0:0:8:9000000:CUSTOM_FPGA=2',
            specs['hv03'])
        self.assertEqual(
            'hv08:16:49152:500:Cascadelake-Server:sse4_2+avx+avx2+avx512f+'
            'avx512vnni::4.0:1.0:2048:0:7000000:', specs['hv08'])
        mixed = scenario('mixed')['hypervisors'][0]
        self.assertEqual(10, len(self.setup.spec_of(mixed).split(':')))
