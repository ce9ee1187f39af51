import copy
import re
import unittest

from osc_leveller.core.load import lasting
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b


def measured(server, cpu, then, ram=0.5):
    """server with usage cpu now and then over the lasting period."""
    server['usage'] = {'cpu': cpu, 'ram': ram,
                       'lasting': {'cpu': then, 'ram': ram}}
    return server


def burst_world():
    """hv1 (8 threads) runs a burst (8 vCPUs at 100 % now, 10 % over the
    last 3 h) and a steady server (4 vCPUs at 75 %); hv2 and hv3 are
    quiet."""
    hyps = [b.hypervisor('hv1', vcpus=8, cpu=1.0, ram=0.2),
            b.hypervisor('hv2', vcpus=8, cpu=0.1, ram=0.2),
            b.hypervisor('hv3', vcpus=8, cpu=0.1, ram=0.2)]
    for hyp in hyps:
        hyp['metrics']['lasting'] = dict(hyp['metrics'])
    servers = [measured(b.server('burst', 'hv1', vcpus=8, ram_gb=8), 1.0,
                        0.1),
               measured(b.server('steady', 'hv1', vcpus=4, ram_gb=8), 0.75,
                        0.75)]
    doc = b.document(hyps, servers)
    doc['lasting'] = '3h'
    return doc


class TestView(unittest.TestCase):
    def test_a_servers_load_is_what_lasted(self):
        snap = lasting.view(snapshot_io.parse(burst_world()))
        self.assertEqual(0.1, snap.find_server('burst').usage.cpu)
        self.assertEqual(0.75, snap.find_server('steady').usage.cpu)
        self.assertIsNone(snap.find_server('burst').usage.lasting)

    def test_a_hypervisors_load_loses_what_its_servers_did_not_keep(self):
        snap = lasting.view(snapshot_io.parse(burst_world()))
        # 8 vCPUs x (1.0 - 0.1) of 8 threads did not last.
        self.assertAlmostEqual(0.1, snap.hypervisor('hv1').metrics.cpu)
        self.assertAlmostEqual(0.2, snap.hypervisor('hv1').metrics.ram)
        # Its own average would be of the servers it had then: not used.
        doc = burst_world()
        doc['hypervisors'][0]['metrics']['lasting']['cpu'] = 0.0
        snap = lasting.view(snapshot_io.parse(doc))
        self.assertAlmostEqual(0.1, snap.hypervisor('hv1').metrics.cpu)

    def test_a_hypervisor_without_measured_servers_takes_the_lower(self):
        doc = burst_world()
        doc['hypervisors'][1]['metrics']['lasting']['cpu'] = 0.05
        doc['hypervisors'][2]['metrics']['lasting']['cpu'] = 0.3
        snap = lasting.view(snapshot_io.parse(doc))
        self.assertEqual(0.05, snap.hypervisor('hv2').metrics.cpu)
        self.assertEqual(0.1, snap.hypervisor('hv3').metrics.cpu)

    def test_a_snapshot_without_lasting_figures_is_itself(self):
        snap = snapshot_io.parse(b.document(*b.three_hosts()))
        self.assertIs(snap, lasting.view(snap))


class TestPlanning(unittest.TestCase):
    def world(self):
        """hv1 (16 threads): the burst (8 threads now, 0.8 over the last
        3 h) and the steady server (3 threads); hv2 and hv3 quiet."""
        hyps = [b.hypervisor('hv1', vcpus=16, cpu=11 / 16, ram=0.3),
                b.hypervisor('hv2', vcpus=16, cpu=0.05, ram=0.1),
                b.hypervisor('hv3', vcpus=16, cpu=0.05, ram=0.1)]
        for hyp in hyps:
            hyp['metrics']['lasting'] = dict(hyp['metrics'])
        servers = [
            measured(b.server('burst', 'hv1', vcpus=8, ram_gb=8), 1.0, 0.1),
            measured(b.server('steady', 'hv1', vcpus=4, ram_gb=8), 0.75,
                     0.75)]
        doc = b.document(hyps, servers)
        doc['lasting'] = '3h'
        return doc

    def plan(self, doc):
        result = planner.make_plan(snapshot_io.parse(doc),
                                   opts.PlannerOptions())
        return [(m.server_name, m.destination, round(m.imbalance[1], 6))
                for m in result.moves], result

    def test_planned_on_the_load_that_lasted(self):
        doc = self.world()
        # The same cloud measured as if the load that lasted were now.
        steady = copy.deepcopy(doc)
        del steady['lasting']
        steady['servers'][0]['usage']['cpu'] = 0.1
        steady['hypervisors'][0]['metrics']['cpu'] = (0.8 + 3) / 16
        moment = copy.deepcopy(doc)
        del moment['lasting']
        moves, _ = self.plan(doc)
        self.assertEqual(self.plan(steady)[0], moves)
        self.assertEqual(['burst'], [m[0] for m in moves])
        # On the load of the moment, the steady server would move.
        self.assertEqual(['steady'], [m[0] for m in self.plan(moment)[0]])

    def test_an_imbalance_of_the_moment_is_held_and_said(self):
        doc = self.world()
        # Without the steady server, only the burst made hv1 hot.
        doc['servers'] = doc['servers'][:1]
        doc['hypervisors'][0]['metrics']['cpu'] = 0.5
        moves, result = self.plan(doc)
        self.assertEqual([], moves)
        [domain] = result.domains
        found = re.match(
            r'^imbalance (0\.\d{3}) now but (0\.\d{3}) on the load that '
            r'lasted the last 3h \(the lower of now and its average\): not '
            r'acted on until it lasts$', domain['held'])
        self.assertIsNotNone(found, domain['held'])
        now, then = float(found.group(1)), float(found.group(2))
        self.assertGreaterEqual(now, 0.05)
        self.assertLess(then, 0.05)
        self.assertAlmostEqual(then, domain['before'], places=3)


class TestDocument(unittest.TestCase):
    def test_lasting_figures_are_read_and_written_back(self):
        doc = burst_world()
        snap = snapshot_io.parse(doc)
        again = snapshot_io.to_document(snap)
        self.assertEqual('3h', again['lasting'])
        self.assertEqual({'cpu': 0.1, 'ram': 0.5},
                         again['servers'][0]['usage']['lasting'])
        self.assertEqual(doc['hypervisors'][0]['metrics'],
                         again['hypervisors'][0]['metrics'])
        self.assertEqual(again, snapshot_io.to_document(
            snapshot_io.parse(again)))
        # Without them, the document has none.
        plain = snapshot_io.to_document(snapshot_io.parse(
            b.document(*b.three_hosts())))
        self.assertNotIn('lasting', plain)

    def test_lasting_figures_are_checked_like_the_others(self):
        for path, value in ((('servers', 0, 'usage', 'lasting', 'cpu'), 1.5),
                            (('hypervisors', 0, 'metrics', 'lasting',
                              'ram'), -0.1),
                            (('servers', 0, 'usage', 'lasting', 'disk'),
                             0.1),
                            (('lasting',), ''),
                            (('lasting',), 3)):
            doc = burst_world()
            where = doc
            for step in path[:-1]:
                where = where[step]
            where[path[-1]] = value
            with self.assertRaises(snapshot_io.SnapshotError, msg=path):
                snapshot_io.parse(doc)
