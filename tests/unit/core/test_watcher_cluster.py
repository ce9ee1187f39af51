import json
import os
import tempfile
import unittest

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.model import validation
from osc_leveller.core.model import watcher_cluster
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy
from osc_leveller.core.settings import options as opts

CLUSTER = {
    'hypervisors': [
        {'name': 'cn1', 'vcpus': 32, 'memory_mb': 131072, 'disk_gb': 1000,
         'cpu_ratio': 4.0, 'ram_ratio': 1.0, 'reserved_memory_mb': 8192,
         'az': 'az1', 'cpu_model': 'Xeon Gold 6248R'},
        {'name': 'cn2', 'vcpus': 64, 'memory_mb': 262144, 'az': 'az1',
         'cpu_model': 'Xeon Gold 6248R', 'status': 'disabled'},
    ],
    'servers': [
        {'id': 'u1', 'name': 'vm1', 'host': 'cn1', 'vcpus': 8,
         'memory_mb': 16384, 'disk_gb': 80, 'cpu_util': 0.5,
         'mem_util': 0.75, 'status': 'ACTIVE'},
        {'id': 'u2', 'host': 'cn1', 'vcpus': 4, 'memory_mb': 8192,
         'cpu_util': 1.0, 'mem_util': 0.5, 'status': 'SHUTOFF'},
    ],
}


class TestWatcherCluster(unittest.TestCase):
    def test_import(self):
        snap = snapshot_io.parse(json.loads(json.dumps(CLUSTER)))
        cn1 = snap.hypervisor('cn1')
        self.assertEqual('az1', cn1.availability_zone)
        self.assertEqual('Xeon Gold 6248R', cn1.cpu_model)
        self.assertEqual(8192, cn1.inventories[model.MEMORY_MB].reserved)
        self.assertEqual(4.0, cn1.inventories[model.VCPU].allocation_ratio)
        # The harness's host load: sum(util * size) / host size.
        self.assertAlmostEqual((0.5 * 8 + 1.0 * 4) / 32, cn1.metrics.cpu)
        self.assertAlmostEqual((0.75 * 16384 + 0.5 * 8192) / 131072,
                               cn1.metrics.ram)
        self.assertEqual(12, cn1.usage(model.VCPU))
        self.assertEqual(80, cn1.usage(model.DISK_GB))
        self.assertEqual('disabled', snap.hypervisor('cn2').service.status)
        self.assertNotIn(model.DISK_GB, snap.hypervisor('cn2').inventories)
        self.assertTrue(snap.hypervisor('cn2').uuid)
        vm1 = snap.server('u1')
        self.assertEqual(0.5, vm1.usage.cpu)
        self.assertEqual('vm1', vm1.name)
        self.assertEqual('u2', snap.server('u2').name)
        self.assertEqual('watcher-cluster', snap.source['kind'])

    def test_server_groups_reach_the_filters(self):
        cluster = json.loads(json.dumps(CLUSTER))
        cluster['hypervisors'][1]['status'] = 'enabled'
        cluster['servers'].append({'id': 'u3', 'host': 'cn2', 'vcpus': 1,
                                   'memory_mb': 1024})
        cluster['server_groups'] = [{'id': 'g1', 'name': 'web',
                                     'policy': 'anti-affinity',
                                     'members': ['u1', 'u3']}]
        snap = snapshot_io.parse(cluster)
        self.assertEqual(('g1',), tuple(snap.server('u1').server_groups))
        rules = filters.Rules(snap, opts.PlannerOptions())
        state = state_mod.new_state(snap)
        self.assertIn('anti-affinity', policy.BALANCE.why_not_to(
            snap.server('u1'), snap.hypervisor('cn2'), state, rules))
        cluster['server_groups'][0]['policy'] = 'sideways'
        with self.assertRaises(snapshot_io.SnapshotError):
            snapshot_io.parse(cluster)

    def test_scores_follow_the_cluster_utilisation(self):
        snap = snapshot_io.parse(json.loads(json.dumps(CLUSTER)))
        state = state_mod.new_state(snap)
        self.assertAlmostEqual(0.25, state.dimensions('cn1')['cpu'])

    def test_detected_from_a_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'c.json')
            with open(path, 'w') as f:
                json.dump(CLUSTER, f)
            self.assertEqual(2, len(snapshot_io.load(path).servers))

    def test_the_snapshot_document_is_valid(self):
        # parse() does not validate what the conversion makes: this does.
        cluster = json.loads(json.dumps(CLUSTER))
        cluster['hypervisors'][0].update(
            uuid='u-cn1', reserved_vcpus=2, disk_ratio=1.5, state='down',
            disabled_reason=None, az=None, cpu_model=None, extra=[1])
        cluster['servers'][0].update(project_id=None, metadata={'a': 'b'},
                                     extra={'x': None})
        cluster['servers'][1].update(name=None, project_id='p1')
        cluster['server_groups'] = [{'id': 'g1', 'name': None,
                                     'policy': 'affinity',
                                     'members': ['u1', 'u9']}]
        for doc in (CLUSTER, cluster):
            document = watcher_cluster.to_snapshot_document(
                json.loads(json.dumps(doc)), 'c.json')
            validation.validate(dict(document, format=snapshot_io.FORMAT),
                                'snapshot-v1')

    def test_errors_name_the_cluster_field(self):
        bad = json.loads(json.dumps(CLUSTER))
        bad['servers'][1]['host'] = 'cn9'
        with self.assertRaises(snapshot_io.SnapshotError) as ctx:
            snapshot_io.parse(bad, origin='c.json')
        self.assertEqual("c.json (Watcher cluster file): servers[1].host: "
                         "unknown hypervisor 'cn9'", str(ctx.exception))
        bad = json.loads(json.dumps(CLUSTER))
        bad['servers'][0]['cpu_util'] = 3
        with self.assertRaises(snapshot_io.SnapshotError) as ctx:
            snapshot_io.parse(bad, origin='c.json')
        self.assertIn('servers[0].cpu_util: must be <= 1', str(ctx.exception))
