import json
import unittest

from osc_leveller.core.load import forecast
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import options as opts
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


def hot_only_now(doc):
    """office_world's doc with hv1 hot now; in the hour ahead its office
    server is at 30 %, and hv1 as loaded as the others (1.0 - 8 x 0.6 / 8
    = 0.4)."""
    doc['hypervisors'][0]['metrics']['cpu'] = 1.0
    doc['hypervisors'][1]['metrics']['forecast']['cpu'] = 0.4
    doc['servers'][0]['usage'].update(
        cpu=0.9, forecast={'cpu': 0.3, 'ram': 0.5})
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
        plan = planner.make_plan(snapshot_io.parse(hot_only_now(
            office_world(weight=1.0))), opts.PlannerOptions())
        self.assertEqual((), plan.moves)
        [domain] = plan.domains
        self.assertRegex(domain['held'], r'^imbalance 0\.\d+ now but 0\.\d+ on the load '
                         r'to come \(now blended 100 % with the 1h ahead on '
                         r'the last 7 days\): left alone$')


def measured(doc, cpu, ram=None, points=24, hosts=('hv1', 'hv2', 'hv3')):
    """doc with the forecast's skill: each hypervisor's sums (now, ahead,
    cross) for CPU, and for RAM (default: the same)."""
    def sums(figures):
        now, ahead, cross = figures
        return {'points': points, 'now': now, 'ahead': ahead,
                'cross': cross}
    doc['forecast']['skill'] = {'hypervisors': {
        h: {'cpu': sums(cpu), 'ram': sums(ram or cpu)} for h in hosts}}
    return doc


class TestEarnedWeight(unittest.TestCase):
    def test_a_forecast_with_skill_gets_its_weight(self):
        # Errors of now 1.0, of the forecast 0.1, uncorrelated: the least
        # error is at w = 1 / 1.1, bounded by forecast_weight 0.5.
        snap = snapshot_io.parse(measured(office_world(), (1.0, 0.1, 0.0)))
        found = forecast.skills(snap)['az1/Gen1']['cpu']
        self.assertAlmostEqual(0.9091, found.earned)
        self.assertEqual(0.5, found.weight)
        viewed = forecast.view(snap)
        self.assertAlmostEqual(0.55, viewed.find_server('office').usage.cpu)
        self.assertAlmostEqual(0.8, viewed.hypervisor('hv1').metrics.cpu)

    def test_a_forecast_without_skill_gets_none(self):
        doc = measured(office_world(weight=1.0), (0.1, 1.0, 0.2))
        viewed = forecast.view(snapshot_io.parse(doc))
        self.assertAlmostEqual(0.2, viewed.find_server('office').usage.cpu)
        self.assertAlmostEqual(0.45, viewed.hypervisor('hv1').metrics.cpu)
        self.assertIsNone(viewed.find_server('office').usage.forecast)
        # ... and so no plan: the office hours to come are not believed.
        self.assertEqual((), planner.make_plan(
            snapshot_io.parse(doc), opts.PlannerOptions()).moves)

    def test_cpu_and_ram_each_earn_their_own(self):
        doc = measured(office_world(weight=1.0), (1.0, 0.1, 0.0),
                       ram=(0.1, 1.0, 0.2))
        doc['servers'][0]['usage']['forecast']['ram'] = 0.9
        viewed = forecast.view(snapshot_io.parse(doc))
        usage = viewed.find_server('office').usage
        self.assertAlmostEqual(0.2 + 0.7 / 1.1, usage.cpu, places=3)
        self.assertAlmostEqual(0.5, usage.ram)

    def test_each_domain_its_own(self):
        # hv3 alone in az2: no history of its domain, no weight there.
        doc = measured(office_world(weight=1.0), (1.0, 0.1, 0.0),
                       hosts=('hv1', 'hv2'))
        doc['hypervisors'][2]['availability_zone'] = 'az2'
        doc['hypervisors'][2]['metrics']['forecast'] = {'cpu': 0.9,
                                                        'ram': 0.2}
        snap = snapshot_io.parse(doc)
        skills = forecast.skills(snap)
        self.assertEqual({'az1/Gen1', 'az2/Gen1'}, set(skills))
        self.assertEqual('no history to measure the forecast on',
                         skills['az2/Gen1']['cpu'].why)
        viewed = forecast.view(snap)
        self.assertAlmostEqual(0.4, viewed.hypervisor('hv3').metrics.cpu)
        # Its own: 0.4 now, 0.1 ahead, at 1 / 1.1.
        self.assertAlmostEqual(0.14 / 1.1,
                               viewed.hypervisor('hv2').metrics.cpu, 4)

    def test_the_plan_says_what_it_was(self):
        doc = measured(office_world(), (1.0, 0.1, 0.0))
        snap = snapshot_io.parse(doc)
        plan = planner.make_plan(snap, opts.PlannerOptions())
        [domain] = plan.domains
        self.assertEqual(0.5, domain['forecast']['cpu']['weight'])
        self.assertEqual(72, domain['forecast']['cpu']['points'])
        self.assertEqual(24, domain['forecast']['cpu']['steps'])
        again = plan_mod.from_document(
            json.loads(plan_mod.dumps(plan)), strict=True)
        self.assertEqual(plan.domains, again.domains)
        [(name, line)] = forecast.lines(snap)
        self.assertEqual('az1/Gen1', name)
        self.assertEqual(
            'Forecast: az1/Gen1: CPU error 0.065 against 0.204 for now, '
            '0.107 blended; weight 0.50 (earned 0.91, bounded by '
            'forecast_weight); RAM error 0.065 against 0.204 for now, 0.107 '
            'blended; weight 0.50 (earned 0.91, bounded by forecast_weight)',
            line)

    def test_held_says_the_weights_earned(self):
        doc = measured(office_world(weight=1.0), (1.0, 0.1, 0.0))
        plan = planner.make_plan(snapshot_io.parse(hot_only_now(doc)),
                                 opts.PlannerOptions())
        [domain] = plan.domains
        self.assertIn('(now blended with the 1h ahead on the last 7 days, '
                      'weights earned on its history: CPU 90.91 %, RAM '
                      '90.91 %)', domain['held'])

    def test_round_trip(self):
        doc = measured(office_world(), (1.0, 0.1, -0.2))
        doc['forecast']['skill']['hypervisors']['hv1']['cpu'][
            'lasting'] = 0.5
        snap = snapshot_io.parse(doc)
        again = snapshot_io.to_document(snap)
        self.assertEqual(doc['forecast'], again['forecast'])
        self.assertEqual(snap, snapshot_io.parse(again))

    def test_sums_that_cannot_be(self):
        for sums, why in (
                ((1.0, 0.1, 0.5), 'sums of squared errors that no 24 '
                 'steps can give'),
                ((97.0, 0.1, 0.0), 'sums of squared errors that no 24 '
                 'steps can give')):
            doc = measured(office_world(), sums)
            with self.assertRaises(snapshot_io.SnapshotError) as caught:
                snapshot_io.parse(doc)
            self.assertIn(why, str(caught.exception))
        doc = measured(office_world(), (1.0, 0.1, 0.0))
        doc['forecast']['skill']['hypervisors']['hv9'] = {}
        with self.assertRaises(snapshot_io.SnapshotError) as caught:
            snapshot_io.parse(doc)
        self.assertIn('forecast.skill.hypervisors.hv9', str(caught.exception))
        for bad in ({'points': 0, 'now': 0, 'ahead': 0, 'cross': 0},
                    {'points': 3, 'now': -1, 'ahead': 0, 'cross': 0},
                    {'points': 3, 'now': 1, 'ahead': 1},
                    {'points': 3, 'now': 1, 'ahead': 1, 'cross': 0,
                     'spare': 1}):
            doc = measured(office_world(), (1.0, 0.1, 0.0))
            doc['forecast']['skill']['hypervisors']['hv1']['cpu'] = bad
            with self.assertRaises(snapshot_io.SnapshotError):
                snapshot_io.parse(doc)


def uneven_world(weight=0.5):
    """hv1 runs eight alike servers (16 threads at 0.8) where hv2..hv4 idle
    near 0.3, the same in the hour ahead: a domain that levels in 3 moves
    to the default target (0.045), in 5 to a target of 0."""
    hyps = [b.hypervisor('hv1', vcpus=16, cpu=0.8, ram=0.3),
            b.hypervisor('hv2', vcpus=16, cpu=0.3, ram=0.3),
            b.hypervisor('hv3', vcpus=16, cpu=0.3, ram=0.3),
            b.hypervisor('hv4', vcpus=16, cpu=0.35, ram=0.3)]
    for hyp in hyps:
        hyp['metrics']['forecast'] = {'cpu': hyp['metrics']['cpu'],
                                      'ram': 0.3}
    servers = [b.server('s%d' % i, 'hv1', vcpus=2, ram_gb=4, cpu=0.5,
                        ram=0.5) for i in range(8)]
    for server in servers:
        server['usage']['forecast'] = {'cpu': 0.5, 'ram': 0.5}
    doc = b.document(hyps, servers)
    doc['forecast'] = {'ahead': '1h', 'days': 7, 'weight': weight}
    return doc


class TestForecastTarget(unittest.TestCase):
    HOSTS = ('hv1', 'hv2', 'hv3', 'hv4')

    def plan(self, doc, **options):
        return planner.make_plan(snapshot_io.parse(doc),
                                 opts.PlannerOptions(**options))

    def test_deeper_where_the_forecast_weighs_its_most(self):
        doc = measured(uneven_world(), (1.0, 0.1, 0.0), hosts=self.HOSTS)
        self.assertEqual(3, len(self.plan(doc).moves))
        plan = self.plan(doc, forecast_target=0.0)
        self.assertEqual(5, len(plan.moves))
        [domain] = plan.domains
        self.assertEqual(0.0, domain['target'])
        self.assertLess(domain['after'], 0.045)
        again = plan_mod.from_document(
            json.loads(plan_mod.dumps(plan)), strict=True)
        self.assertEqual(plan.domains, again.domains)
        self.assertEqual(0.0, again.options['forecast_target'])

    def test_the_target_where_it_weighs_nothing(self):
        # The forecast predicts worse than now: weight 0, the target.
        doc = measured(uneven_world(), (0.1, 1.0, 0.2), hosts=self.HOSTS)
        plan = self.plan(doc, forecast_target=0.0)
        self.assertEqual(3, len(plan.moves))
        self.assertAlmostEqual(0.045, plan.domains[0]['target'])

    def test_each_domain_as_its_forecast_weighs(self):
        # hv4 alone in az2 with no history: no weight, the target there.
        doc = measured(uneven_world(), (1.0, 0.1, 0.0),
                       hosts=self.HOSTS[:3])
        doc['hypervisors'][3]['availability_zone'] = 'az2'
        snap = snapshot_io.parse(doc)
        self.assertEqual({'az1/Gen1'}, forecast.weighing(snap))
        targets = planner.Planner(snap, opts.PlannerOptions(
            forecast_target=0.03)).targets()
        self.assertEqual(0.03, targets['az1/Gen1'])
        self.assertAlmostEqual(0.045, targets['az2/Gen1'])
        # A snapshot of before the skill weighs forecast_weight: everywhere.
        del doc['forecast']['skill']
        self.assertEqual({'az1/Gen1', 'az2/Gen1'},
                         forecast.weighing(snapshot_io.parse(doc)))
        doc['forecast']['weight'] = 0.0
        self.assertEqual(set(), forecast.weighing(snapshot_io.parse(doc)))
        # Without a forecast, the target everywhere; recorded only if set.
        del doc['forecast']
        doc['hypervisors'][3]['availability_zone'] = 'az1'
        plan = self.plan(doc, forecast_target=0.0)
        self.assertEqual(3, len(plan.moves))
        self.assertAlmostEqual(0.045, plan.domains[0]['target'])
        self.assertNotIn('target', self.plan(doc).domains[0])
        self.assertNotIn('forecast_target',
                         opts.to_document(opts.PlannerOptions()))

    def test_above_the_threshold_makes_no_sense(self):
        with self.assertRaises(opts.OptionsError) as caught:
            opts.PlannerOptions(forecast_target=0.06).validate()
        self.assertEqual(
            'forecast_target 0.06 is above the threshold 0.05: planning '
            'starts when a domain is above the threshold and stops below '
            'the target', str(caught.exception))
