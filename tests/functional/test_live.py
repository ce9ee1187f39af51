"""The leveller's commands on the live devcloud (no --snapshot)."""

import json
import os
import tempfile

import yaml

from osc_leveller.core import snapshot as snapshot_io
from tests.functional import base
from tests.functional import test_devcloud


class TestLiveMixed(base.DevcloudTestCase):
    SCENARIO = 'mixed'

    def test_snapshot_matches_nova_and_placement(self):
        spec = test_devcloud.scenario('mixed')
        with tempfile.NamedTemporaryFile(suffix='.json') as f:
            summary = base.openstack('leveller', 'snapshot', '--output-file',
                                     f.name)
            with open(f.name) as saved:
                document = json.load(saved)
        snap = snapshot_io.parse(document)
        self.assertEqual(len(spec['hypervisors']), summary['Hypervisors'])
        for h in spec['hypervisors']:
            hyp = snap.hypervisor(h['name'])
            self.assertEqual(h['az'], hyp.availability_zone)
            self.assertEqual(h['cpu_model'], hyp.cpu_model)
            self.assertEqual(h['cpu_ratio'],
                             hyp.inventories['VCPU'].allocation_ratio)
            self.assertEqual(h.get('ram_ratio', 1.0),
                             hyp.inventories['MEMORY_MB'].allocation_ratio)
            self.assertEqual(h['reserved_mb'],
                             hyp.inventories['MEMORY_MB'].reserved)
            self.assertTrue(hyp.service.usable)
        nova = {s['Name']: s for s in base.openstack(
            'server', 'list', '--all-projects', '--long')}
        self.assertEqual(set(nova), {s.name for s in snap.servers})
        for server in snap.servers:
            self.assertEqual(nova[server.name]['Host'], server.hypervisor)
            self.assertEqual(nova[server.name]['Status'], server.status)
        self.assertTrue(snap.find_server('locked-1').locked)
        groups = {g.name: g for g in snap.server_groups}
        self.assertEqual({'web', 'db', 'cache'}, set(groups))
        self.assertEqual({snap.find_server('web-1').id,
                          snap.find_server('web-2').id},
                         set(groups['web'].members))
        usage = snap.hypervisor('hv01').usage('MEMORY_MB')
        self.assertEqual(sum(s.flavor.ram for s in snap.servers_on('hv01')),
                         usage)

    def test_score_from_prometheus(self):
        base.wait_for(lambda: len(base.promql(test_devcloud.CPU)) == 6, 60,
                      message='CPU rates for the 6 hypervisors')
        result = base.openstack('leveller', 'score', parse=False)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertNotIn('allocations', result.stderr)
        rows = {r['Hypervisor']: r for r in base.openstack(
            'leveller', 'score', '--long')}
        self.assertEqual({'metrics'}, {r['Load Source'] for r in rows.values()})
        measured = base.promql(test_devcloud.CPU)
        # Prometheus' 5-minute rate against the 10-second one of the test:
        # both see hv01 clearly busier than idle hv02.
        self.assertGreater(rows['hv01']['CPU %'], rows['hv02']['CPU %'] + 20)
        self.assertGreater(measured['hv01'], measured['hv02'])

    def test_score_falls_back_when_prometheus_is_unreachable(self):
        with open(os.environ['OS_CLIENT_CONFIG_FILE']) as f:
            config = yaml.safe_load(f)
        config['clouds']['devcloud']['leveller']['prometheus']['url'] = \
            'http://127.0.0.1:9'
        with tempfile.NamedTemporaryFile('w', suffix='.yaml') as f:
            yaml.safe_dump(config, f)
            f.flush()
            env = dict(os.environ, OS_CLIENT_CONFIG_FILE=f.name)
            result = base.openstack('leveller', 'score', parse=False,
                                    env=env)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('cannot reach Prometheus at http://127.0.0.1:9',
                      result.stderr)
        self.assertIn('Load from Placement allocations for 6 of 6',
                      result.stderr)
        self.assertNotIn('admin', result.stderr)

    def test_plan_respects_groups_and_states(self):
        moves = base.openstack('leveller', 'plan', '--max-moves', '50')
        self.assertTrue(moves)
        moved = {m['Server'] for m in moves}
        # Never shutoff, locked or affinity-bound servers, never across AZs.
        self.assertFalse(moved & {'shutoff-1', 'locked-1', 'cache-1',
                                  'cache-2'})
        azs = {'hv01': 1, 'hv02': 1, 'hv03': 1, 'hv04': 2, 'hv05': 2,
               'hv06': 2}
        for move in moves:
            self.assertEqual(azs[move['Source']], azs[move['Destination']])
            self.assertNotIn('hv04', (move['Source'], move['Destination']))
            if move['Server'] == 'web-1':
                self.assertNotEqual('hv02', move['Destination'])
