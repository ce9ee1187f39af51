"""plan --make-room through the real openstack shell: on a snapshot (the
flavor of one of its servers), live against the stand-in cloud (the flavor
read from Nova), and when no moves make the room (exit code 4, no plan
file)."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from tests.unit import builders as b
from tests.unit import standin
from tests.unit.core import test_room
from tests.unit.v1 import test_journal

HUGE = {'id': 'f-huge', 'name': 'lv.huge', 'vcpus': 8, 'ram': 65536,
        'disk': 10, 'OS-FLV-EXT-DATA:ephemeral': 0, 'swap': '',
        'extra_specs': {}}


class TestMakeRoomShell(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        hyps, servers = test_room.fragmented()
        self.document = b.document(hyps, servers)
        self.snapshot = self.path('snapshot.json')
        with open(self.snapshot, 'w') as stream:
            json.dump(self.document, stream)
        self.env = dict(os.environ, HOME=self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def run_plan(self, *args, cloud=()):
        return subprocess.run(
            [test_journal.openstack()] + list(cloud) + [
                'leveller', 'plan', '-f', 'json'] + list(args),
            capture_output=True, text=True, env=self.env, timeout=120)

    def test_on_a_snapshot(self):
        plan = self.path('plan.json')
        result = self.run_plan('--snapshot', self.snapshot, '--make-room',
                               'f8x64', '--availability-zone', 'az1',
                               '--output-file', plan, '--report',
                               self.path('report.html'))
        self.assertEqual(0, result.returncode, result.stderr)
        with open(self.path('report.html')) as stream:
            self.assertIn('make room on hv2', stream.read())
        rows = json.loads(result.stdout)
        self.assertEqual(1, len(rows))
        self.assertIn('make room on', rows[0]['Reason'])
        self.assertIn('Room for the flavor: 1 live migration', result.stderr)
        with open(plan) as stream:
            saved = json.load(stream)
        self.assertEqual('make-room', saved['kind'])
        self.assertEqual({'flavor': 'f8x64', 'count': 1,
                          'availability_zone': 'az1', 'aggregate': None},
                         saved['options']['make_room'])

    def test_no_room_exits_4_and_writes_no_plan(self):
        plan = self.path('plan.json')
        result = self.run_plan('--snapshot', self.snapshot, '--make-room',
                               'f8x64:3', '--availability-zone', 'az1',
                               '--output-file', plan)
        self.assertEqual(4, result.returncode, result.stderr)
        self.assertIn('No room: no room for 3 servers of flavor f8x64 in '
                      'availability zone az1 (room for 2 found): MEMORY_MB '
                      'limits', result.stderr)
        self.assertIn('no plan file written', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertFalse(os.path.exists(plan))

    def test_a_flavor_the_snapshot_does_not_hold(self):
        result = self.run_plan('--snapshot', self.snapshot, '--make-room',
                               'lv.huge')
        self.assertEqual(1, result.returncode)
        self.assertIn('no server in the snapshot has flavor lv.huge',
                      result.stderr)
        self.assertIn('plan live', result.stderr)

    def test_live_the_flavor_is_read_from_nova(self):
        cloud = standin.StandIn(self.document)
        cloud.more_flavors = [HUGE]
        cloud.start()
        self.addCleanup(cloud.stop)
        self.env = cloud.shell_env(cloud.write_clouds_yaml(
            self.path('clouds.yaml'),
            extra={'leveller': {'prometheus': {'url': ''}}}),
            base=self.env)
        args = ('--os-cloud', 'standin')
        result = self.run_plan('--make-room', 'lv.huge',
                               '--availability-zone', 'az1', cloud=args)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual(1, len(json.loads(result.stdout)))
        result = self.run_plan('--make-room', 'lv.nosuch', cloud=args)
        self.assertEqual(1, result.returncode)
        self.assertIn('--make-room lv.nosuch: Nova has no flavor named '
                      'lv.nosuch, nor of that ID', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
