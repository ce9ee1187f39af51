import unittest

from osc_leveller.core import forecast
from osc_leveller.core import options as opts
from osc_leveller.core import planner
from osc_leveller.core import snapshot as snapshot_io
from tests.unit import builders as b


def office_world(weight=0.5):
    """hv1 (8 threads) runs an office server (8 vCPUs at 20 % now, at 90 %
    in the hour ahead on past days) and a steady one (4 vCPUs at 50 %);
    hv2 and hv3 are quiet, with no forecast of their own servers."""
    hyps = [b.hypervisor('hv1', vcpus=8, cpu=0.45, ram=0.2),
            b.hypervisor('hv2', vcpus=8, cpu=0.4, ram=0.2),
            b.hypervisor('hv3', vcpus=8, cpu=0.4, ram=0.2)]
    hyps[1]['metrics']['forecast'] = {'cpu': 0.1, 'ram': 0.2}
    office = b.server('office', 'hv1', vcpus=8, ram_gb=8, cpu=0.2, ram=0.5)
    office['usage']['forecast'] = {'cpu': 0.9, 'ram': 0.5}
    steady = b.server('steady', 'hv1', vcpus=4, ram_gb=8, cpu=0.5, ram=0.5)
    steady['usage']['forecast'] = {'cpu': 0.5, 'ram': 0.5}
    doc = b.document(hyps, [office, steady])
    doc['forecast'] = {'ahead': '1h', 'days': 7, 'weight': weight}
    return doc


class TestView(unittest.TestCase):
    def test_a_server_is_blended_with_its_forecast(self):
        snap = forecast.view(snapshot_io.parse(office_world()))
        self.assertAlmostEqual(0.55, snap.find_server('office').usage.cpu)
        self.assertAlmostEqual(0.5, snap.find_server('steady').usage.cpu)
        self.assertIsNone(snap.find_server('office').usage.forecast)

    def test_a_hypervisor_changes_by_its_servers_blend(self):
        snap = forecast.view(snapshot_io.parse(office_world()))
        # 8 vCPUs x (0.55 - 0.2) more of 8 threads.
        self.assertAlmostEqual(0.8, snap.hypervisor('hv1').metrics.cpu)
        self.assertAlmostEqual(0.2, snap.hypervisor('hv1').metrics.ram)
        # Without servers of its own with a forecast: its own blend.
        self.assertAlmostEqual(0.25, snap.hypervisor('hv2').metrics.cpu)
        self.assertAlmostEqual(0.4, snap.hypervisor('hv3').metrics.cpu)

    def test_the_weight(self):
        snap = forecast.view(snapshot_io.parse(office_world(weight=0.0)))
        self.assertAlmostEqual(0.45, snap.hypervisor('hv1').metrics.cpu)
        snap = forecast.view(snapshot_io.parse(office_world(weight=1.0)))
        self.assertAlmostEqual(0.9, snap.find_server('office').usage.cpu)

    def test_no_forecast_no_change(self):
        doc = office_world()
        del doc['forecast']
        snap = snapshot_io.parse(doc)
        self.assertIs(snap, forecast.view(snap))

    def test_then_the_load_that_lasted(self):
        """A server counts the lower of its blend and what lasted."""
        doc = office_world()
        doc['lasting'] = '3h'
        doc['servers'][0]['usage']['lasting'] = {'cpu': 0.3, 'ram': 0.5}
        snap = forecast.planned(snapshot_io.parse(doc))
        self.assertAlmostEqual(0.3, snap.find_server('office').usage.cpu)

    def test_round_trip(self):
        snap = snapshot_io.parse(office_world())
        again = snapshot_io.to_document(snap)
        self.assertEqual({'ahead': '1h', 'days': 7, 'weight': 0.5},
                         again['forecast'])
        self.assertEqual({'cpu': 0.9, 'ram': 0.5},
                         again['servers'][0]['usage']['forecast'])
        self.assertEqual(snap, snapshot_io.parse(again))


class TestPlanning(unittest.TestCase):
    def test_a_plan_on_the_load_to_come(self):
        """Now hv1 looks level with the others; in the hour ahead its
        office server is busy: the plan moves it before it is."""
        doc = office_world()
        options = opts.PlannerOptions()
        plan = planner.make_plan(snapshot_io.parse(doc), options)
        self.assertTrue(plan.moves)
        self.assertEqual('hv1', plan.moves[0].source)
        del doc['forecast']
        self.assertEqual((), planner.make_plan(snapshot_io.parse(doc),
                                               options).moves)

    def test_a_domain_hot_only_now_is_left_alone_and_said(self):
        doc = office_world(weight=1.0)
        # Now hv1 is hot; in the hour ahead its office server is at 30 %,
        # and hv1 as loaded as the others (1.0 - 8 x 0.6 / 8 = 0.4).
        doc['hypervisors'][0]['metrics']['cpu'] = 1.0
        doc['hypervisors'][1]['metrics']['forecast']['cpu'] = 0.4
        doc['servers'][0]['usage'].update(
            cpu=0.9, forecast={'cpu': 0.3, 'ram': 0.5})
        plan = planner.make_plan(snapshot_io.parse(doc),
                                 opts.PlannerOptions())
        self.assertEqual((), plan.moves)
        [domain] = plan.domains
        self.assertRegex(domain['held'], r'^imbalance 0\.\d+ now but 0\.\d+ on the load '
                         r'to come \(now blended 100 % with the 1h ahead on '
                         r'the last 7 days\): left alone$')
