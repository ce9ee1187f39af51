"""plan --spread count through the real ``openstack`` shell, then apply.

The stand-in cloud (tests/unit/standin.py, real HTTP on 127.0.0.1) serves
a builders' cloud and the demo snapshot; the plan file made by ``plan
--spread count`` is re-checked move by move by ``apply --dry-run`` (the
spread kind's re-check), and applied for real to the builders' cloud,
whose server counts then are within one of each other.
"""

import collections
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from osc_leveller.core.model import snapshot as snapshot_io
from tests.unit import builders as b
from tests.unit import standin
from tests.unit.test_secrets import openstack


def crowded():
    """hv1 holds 7 servers (the smallest locked), hv2 2, hv3 and hv4 none;
    hv4 is in another AZ and evens out on its own (nothing to do)."""
    hyps = [b.hypervisor('hv%d' % i) for i in (1, 2, 3)]
    hyps.append(b.hypervisor('hv4', az='az2'))
    servers = [b.server('s%d' % i, 'hv1', ram_gb=2 + i) for i in range(7)]
    servers[0]['locked'] = True
    servers += [b.server('t%d' % i, 'hv2') for i in range(2)]
    return hyps, servers


class ShellTest(unittest.TestCase):
    def start(self, document):
        if not openstack():
            self.skipTest('no openstack command')
        self.cloud = standin.StandIn(document)
        self.cloud.start()
        self.addCleanup(self.cloud.stop)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        clouds_yaml = self.cloud.write_clouds_yaml(
            self.path('clouds.yaml'), extra={'leveller': {
                'prometheus': {'url': ''},
                'apply': {'poll_interval': 0.2,
                          'lock_file': self.path('apply.lock')}}})
        self.env = self.cloud.shell_env(clouds_yaml)
        self.env['HOME'] = self.dir

    def path(self, name):
        return os.path.join(self.dir, name)

    def run_shell(self, *args):
        result = subprocess.run(
            [openstack(), '--os-cloud', 'standin', 'leveller'] + list(args),
            env=self.env, capture_output=True, text=True, timeout=120)
        return result.returncode, result.stdout, result.stderr

    def plan_and_dry_run(self, *source):
        code, out, err = self.run_shell(
            'plan', '--spread', 'count', '--output-file',
            self.path('plan.json'), '-f', 'json', *source)
        self.assertEqual(0, code, err)
        rows = json.loads(out)
        with open(self.path('plan.json')) as f:
            self.assertEqual('spread', json.load(f)['kind'])
        self.assertIn('Spread by server count: %d live migration' % len(rows),
                      err)
        code, out, err = self.run_shell(
            'apply', self.path('plan.json'), '--dry-run', '-f', 'json')
        self.assertEqual(0, code, err)
        checked = json.loads(out)
        self.assertEqual([r['Server'] for r in rows],
                         [r['Server'] for r in checked])
        self.assertEqual({'would run'}, {r['Status'] for r in checked}, err)
        return rows


class TestBuildersCloud(ShellTest):
    def test_plan_dry_run_then_apply_evens_the_counts(self):
        self.start(b.document(*crowded()))
        rows = self.plan_and_dry_run()
        # 9 servers on hv1..hv3: 3 each, from hv1 (s0 locked stays).
        self.assertEqual(4, len(rows))
        self.assertEqual(['s1', 's2', 's3', 's4'],
                         sorted(r['Server'] for r in rows))
        self.assertEqual({'hv1'}, {r['Source'] for r in rows})
        code, out, err = self.run_shell('apply', self.path('plan.json'),
                                        '-f', 'json')
        self.assertEqual(0, code, err)
        now = snapshot_io.parse(self.cloud.document())
        counts = collections.Counter(s.hypervisor for s in now.servers)
        self.assertEqual({'hv1': 3, 'hv2': 3, 'hv3': 3}, dict(counts))
        # Planned again, the counts are even: nothing to do.
        code, out, err = self.run_shell('plan', '--spread', 'count')
        self.assertEqual(0, code, err)
        self.assertIn('Nothing to do: the server counts are already even '
                      '(within one) in every domain (widest gap: 0)', err)

    def test_the_recheck_refuses_a_move_the_counts_no_longer_need(self):
        hyps, servers = crowded()
        self.start(b.document(hyps, servers))
        self.plan_and_dry_run()
        plan = self.path('plan.json')
        # Since planning, hv3 has filled up: the moves into it no longer
        # narrow any gap, and apply says so; the others still run.
        servers += [b.server('late%d' % i, 'hv3') for i in range(6)]
        self.start(b.document(hyps, servers))
        code, out, err = self.run_shell('apply', plan, '--dry-run', '-f',
                                        'json')
        rows = json.loads(out)
        refused = [r for r in rows if r['Destination'] == 'hv3']
        self.assertEqual(3, len(refused))
        self.assertEqual('would run', rows[-1]['Status'])
        for row in refused:
            self.assertEqual('skipped', row['Status'], rows)
            self.assertIn('no longer evens out the server counts: hv1 holds',
                          row['Reason'])


class TestDemo(ShellTest):
    def test_plan_the_demo_then_dry_run_it_on_a_cloud_serving_it(self):
        with open(os.path.join(os.path.dirname(snapshot_io.__file__), '..',
                               '..', 'data', 'demo-snapshot.json')) as f:
            self.start(json.load(f))
        rows = self.plan_and_dry_run('--snapshot', 'demo')
        self.assertEqual(25, len(rows))  # max_moves: every domain is uneven
