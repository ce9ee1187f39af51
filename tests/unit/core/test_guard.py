"""The guard against implausible metrics (core/load/guard.py), on snapshots
whose guard section says what each failure looks like."""

import copy
import unittest

from osc_leveller.core.load import guard
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import options as core_options
from tests.unit import builders as b

AZ1 = 'az1/Gen1'
AZ2 = 'az2/Gen1'
REFERENCE = '2026-11-20T11:00:00Z'


def cloud(cpu=(0.8, 0.2, 0.2, 0.2), ram=0.4):
    """hv1-hv4 in az1 (hv1 hot), hv5-hv6 in az2 (hv5 hot); every
    hypervisor's exporters agree with Placement and with an hour ago."""
    hyps = [b.hypervisor('hv%d' % i, cpu=c, ram=ram)
            for i, c in enumerate(cpu, start=1)]
    hyps += [b.hypervisor('hv5', az='az2', cpu=0.8, ram=ram),
             b.hypervisor('hv6', az='az2', cpu=0.2, ram=ram)]
    servers = []
    for hyp in hyps:
        busy = hyp['metrics']['cpu'] > 0.5
        for i in range(4 if busy else 1):
            servers.append(b.server('%s-s%d' % (hyp['name'], i), hyp['name'],
                                    vcpus=4, ram_gb=8,
                                    cpu=0.8 if busy else 0.1, ram=0.5))
    doc = b.document(hyps, servers)
    doc['guard'] = {
        'reference': REFERENCE, 'reference_from': guard.SINCE,
        'window': 300.0,
        'hypervisors': {h['name']: {
            'cpus': 32, 'memory_mb': 131072.0,
            'before': {'cpu': h['metrics']['cpu'], 'ram': ram},
            'servers_before': sum(1 for s in servers
                                  if s['hypervisor'] == h['name'])}
            for h in hyps}}
    return doc


def facts(doc, name):
    return doc['guard']['hypervisors'][name]


def examine(doc, **limits):
    snap = snapshot_io.parse(copy.deepcopy(doc))
    return guard.examine(snap, [h.name for h in snap.hypervisors],
                         guard.Limits(**limits))


class TestPlausible(unittest.TestCase):
    def test_agreeing_figures_hold_nothing(self):
        self.assertEqual([], examine(cloud()))

    def test_a_snapshot_without_a_guard_section(self):
        doc = cloud()
        del doc['guard']
        self.assertEqual([], examine(doc))


class TestCapacity(unittest.TestCase):
    def test_no_cpus_holds_its_domain_only(self):
        doc = cloud()
        facts(doc, 'hv2')['cpus'] = 0
        [found] = examine(doc)
        self.assertEqual((AZ1, 'capacity'), (found.domain, found.check))
        self.assertEqual('node_exporter of hv2 shows no CPUs (Placement: '
                         '32)', found.why)

    def test_no_memory(self):
        doc = cloud()
        facts(doc, 'hv5')['memory_mb'] = 0.0
        [found] = examine(doc)
        self.assertEqual(AZ2, found.domain)
        self.assertIn('hv5 shows no memory (Placement: 128 GiB)', found.why)

    def test_far_from_placement_within_the_tolerance(self):
        doc = cloud()
        facts(doc, 'hv3')['cpus'] = 24  # 0.75 of 32: at the tolerance
        self.assertEqual([], examine(doc))
        facts(doc, 'hv3')['cpus'] = 23
        [found] = examine(doc)
        self.assertIn('hv3 shows 23 CPUs, Placement 32', found.why)
        self.assertEqual([], examine(doc, capacity_tolerance=0.3))
        facts(doc, 'hv3')['cpus'] = 64  # another machine's series
        self.assertEqual(1, len(examine(doc)))

    def test_memory_of_another_machine(self):
        doc = cloud()
        facts(doc, 'hv4')['memory_mb'] = 65536.0
        [found] = examine(doc)
        self.assertIn('hv4 shows 64 GiB of memory, Placement 128 GiB',
                      found.why)

    def test_off_when_not_among_the_checks(self):
        doc = cloud()
        facts(doc, 'hv2')['cpus'] = 0
        self.assertEqual([], examine(doc, checks=frozenset(
            guard.CHECKS) - {'capacity'}))

    def test_a_hypervisor_out_of_scope_holds_nothing(self):
        doc = cloud()
        facts(doc, 'hv2')['cpus'] = 0
        snap = snapshot_io.parse(doc)
        self.assertEqual([], guard.examine(snap, ['hv1', 'hv3', 'hv4'],
                                           guard.Limits()))


class TestCoverageDrop(unittest.TestCase):
    def test_half_the_domain_lost_its_metrics(self):
        doc = cloud()
        for hyp in doc['hypervisors'][:2]:
            hyp['metrics'] = None
        [found] = examine(doc)
        self.assertEqual((AZ1, 'coverage_drop'), (found.domain, found.check))
        self.assertIn('2 of 4 hypervisors have metrics, 4 had at %s (lost: '
                      'hv1, hv2)' % REFERENCE, found.why)

    def test_one_of_four_is_a_quarter(self):
        doc = cloud()
        doc['hypervisors'][3]['metrics'] = None
        self.assertEqual(['coverage_drop'], [f.check for f in examine(doc)])
        self.assertEqual([], examine(doc, coverage_drop=0.3))

    def test_servers_losing_their_series(self):
        doc = cloud()
        for server in doc['servers']:
            if server['hypervisor'] == 'hv1':
                del server['usage']
        [found] = examine(doc)
        self.assertIn('3 servers have CPU series of their own, 7 had at',
                      found.why)

    def test_prometheus_not_answering_holds_every_domain(self):
        doc = cloud()
        for hyp in doc['hypervisors']:
            hyp['metrics'] = None
        doc['guard'] = {'unreachable': 'Prometheus at http://p answered '
                        'HTTP 503', 'hypervisors': {}}
        found = examine(doc)
        self.assertEqual([(AZ1, 'coverage_drop'), (AZ2, 'coverage_drop')],
                         [(f.domain, f.check) for f in found])
        self.assertEqual('no hypervisor has metrics: Prometheus at http://p '
                         'answered HTTP 503', found[0].why)
        self.assertFalse(guard.plausible(found))

    def test_nothing_to_compare_with(self):
        doc = cloud()
        doc['guard']['reference'] = None
        for hyp in doc['hypervisors']:
            hyp['metrics'] = None
        self.assertEqual([], examine(doc))

    def test_no_figures_at_the_reference_time(self):
        doc = cloud()
        for name in doc['guard']['hypervisors']:
            facts(doc, name)['before'] = None
        doc['hypervisors'][0]['metrics'] = None
        self.assertEqual([], examine(doc))
        snap = snapshot_io.parse(doc)
        [note] = guard.notes(snap, guard.Limits())
        self.assertIn('no figures of %s' % REFERENCE, note)
        self.assertEqual([], guard.notes(snap, guard.Limits(
            checks=frozenset({'capacity'}))))

    def test_metrics_coming_back_hold_nothing(self):
        doc = cloud()
        facts(doc, 'hv1')['before'] = None
        facts(doc, 'hv2')['before'] = None
        self.assertEqual([], examine(doc))


class TestLoadJump(unittest.TestCase):
    def test_most_of_a_domain_saturated_at_once(self):
        doc = cloud()
        for hyp in doc['hypervisors'][1:4]:
            hyp['metrics']['cpu'] = 1.0
        found = examine(doc)
        self.assertEqual([(AZ1, 'load_jump')],
                         [(f.domain, f.check) for f in found])
        self.assertIn('3 of 4 hypervisors\' CPU rose by more than 0.4 since '
                      '%s (hv2 0.20 -> 1.00, hv3 0.20 -> 1.00, hv4 0.20 -> '
                      '1.00)' % REFERENCE, found[0].why)

    def test_half_is_not_a_majority(self):
        doc = cloud()
        for hyp in doc['hypervisors'][1:3]:
            hyp['metrics']['cpu'] = 1.0
        self.assertEqual([], examine(doc))

    def test_jumps_the_other_way_do_not_add_up(self):
        doc = cloud()
        doc['hypervisors'][0]['metrics']['cpu'] = 0.0  # 0.8 -> 0.0
        doc['hypervisors'][1]['metrics']['cpu'] = 1.0
        doc['hypervisors'][2]['metrics']['cpu'] = 1.0
        self.assertEqual([], examine(doc, checks=frozenset({'load_jump'})))

    def test_ram_read_as_free_everywhere(self):
        doc = cloud(ram=0.9)
        for hyp in doc['hypervisors']:
            hyp['metrics']['ram'] = 0.05
        found = examine(doc)
        self.assertEqual({AZ1, AZ2}, {f.domain for f in found})
        self.assertIn('RAM fell', found[0].why)
        self.assertEqual([], examine(doc, load_jump=0.9))

    def test_a_small_move_of_all(self):
        doc = cloud()
        for hyp in doc['hypervisors']:
            hyp['metrics']['cpu'] += 0.15
        self.assertEqual([], examine(doc))


class TestImpossibleLoad(unittest.TestCase):
    def test_a_server_busier_than_its_vcpus(self):
        doc = cloud()
        facts(doc, 'hv2').update(busiest_server='id-hv2-s0',
                                 busiest_cpu=2.7)
        [found] = examine(doc)
        self.assertEqual((AZ1, 'impossible_load'),
                         (found.domain, found.check))
        self.assertEqual('server hv2-s0 on hv2 reads 2.70 times its vCPUs '
                         'busy', found.why)
        facts(doc, 'hv2')['busiest_cpu'] = 1.08  # rate() at the edges
        self.assertEqual([], examine(doc))

    def test_servers_busier_than_their_hypervisor(self):
        doc = cloud()
        doc['hypervisors'][0]['metrics']['cpu'] = 0.05  # another's series
        facts(doc, 'hv1')['before']['cpu'] = 0.05
        [found] = examine(doc)
        self.assertEqual('the servers on hv1 read 12.8 cores busy, its '
                         'node_exporter 1.6 of its 32', found.why)

    def test_not_right_after_a_migration(self):
        doc = cloud()
        doc['hypervisors'][0]['metrics']['cpu'] = 0.05
        facts(doc, 'hv1')['before']['cpu'] = 0.05
        doc['migrations'] = [{
            'server_id': 'id-hv1-s0', 'status': 'completed',
            'source_compute': 'cmp-hv2', 'dest_compute': 'cmp-hv1',
            'created_at': '2026-11-20T11:55:00Z',
            'updated_at': '2026-11-20T11:56:00Z'}]
        self.assertEqual([], examine(doc))  # 4 min ago, window 5 min
        doc['guard']['window'] = 60.0
        self.assertEqual(1, len(examine(doc)))

    def test_needs_the_cpus_node_exporter_shows(self):
        doc = cloud()
        doc['hypervisors'][0]['metrics']['cpu'] = 0.05
        facts(doc, 'hv1')['before']['cpu'] = 0.05
        del facts(doc, 'hv1')['cpus']
        self.assertEqual([], examine(doc))


class TestHolding(unittest.TestCase):
    def options(self):
        return core_options.PlannerOptions(threshold=0.01)

    def test_the_planner_plans_nothing_in_a_held_domain(self):
        doc = cloud()
        facts(doc, 'hv2')['cpus'] = 0
        snap = snapshot_io.parse(doc)
        findings = guard.examine(snap, [h.name for h in snap.hypervisors],
                                 guard.Limits())
        free = planner.make_plan(snap, self.options())
        self.assertIn(AZ1, {m.domain for m in free.moves})
        plan = planner.make_plan(snap, self.options(), guard.held(findings))
        self.assertNotIn(AZ1, {m.domain for m in plan.moves})
        held = {d['domain']: d.get('held') for d in plan.domains}
        self.assertEqual('implausible metrics, nothing planned: capacity: '
                         'node_exporter of hv2 shows no CPUs (Placement: 32)',
                         held[AZ1])
        self.assertEqual(held[AZ2], {d['domain']: d.get('held')
                                     for d in free.domains}[AZ2])

    def test_every_domain_held(self):
        doc = cloud()
        facts(doc, 'hv2')['cpus'] = 0
        facts(doc, 'hv6')['cpus'] = 0
        snap = snapshot_io.parse(doc)
        findings = guard.examine(snap, [h.name for h in snap.hypervisors],
                                 guard.Limits())
        plan = planner.make_plan(snap, self.options(), guard.held(findings))
        self.assertEqual((), plan.moves)
        self.assertIn('implausible metrics hold every domain', plan.note)

    def test_without_metrics_of_the_domains_found(self):
        snap = snapshot_io.parse(cloud())
        left = guard.without_metrics(snap, {AZ1})
        self.assertEqual(['hv5', 'hv6'], [h.name for h in left.hypervisors
                                          if h.metrics is not None])
        self.assertIs(snap, guard.without_metrics(snap, set()))


class TestReference(unittest.TestCase):
    def test_the_metrics_file_first(self):
        self.assertEqual(guard.Reference(900.0, guard.METRICS_FILE),
                         guard.reference(900.0, 1000.0, 3600))
        self.assertEqual(guard.Reference(-2600.0, guard.SINCE),
                         guard.reference(None, 1000.0, 3600))
        # A time from the future is no run's.
        self.assertEqual(guard.SINCE,
                         guard.reference(2000.0, 1000.0, 3600).source)
        self.assertIsNone(guard.reference(None, 1000.0, 0))

    def test_what_keeps_the_reference(self):
        capacity = guard.Finding(AZ1, 'capacity', 'x')
        jump = guard.Finding(AZ1, 'load_jump', 'x')
        self.assertTrue(guard.plausible([capacity]))
        self.assertFalse(guard.plausible([capacity, jump]))


class TestSnapshotSection(unittest.TestCase):
    def test_written_as_read(self):
        doc = cloud()
        facts(doc, 'hv2').update(cpus=0, busiest_server='id-hv2-s0',
                                 busiest_cpu=2.5)
        snap = snapshot_io.parse(copy.deepcopy(doc))
        again = snapshot_io.parse(snapshot_io.to_document(snap))
        self.assertEqual(snap.guard, again.guard)

    def test_an_unknown_hypervisor(self):
        doc = cloud()
        doc['guard']['hypervisors']['hv9'] = {'cpus': 4}
        with self.assertRaises(snapshot_io.SnapshotError) as caught:
            snapshot_io.parse(doc)
        self.assertIn('guard.hypervisors.hv9: unknown hypervisor',
                      str(caught.exception))
