"""Property tests: random clouds, random damage."""

import copy
import math
import unittest

import hypothesis
from hypothesis import strategies as st

from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b
from tests.unit import oracle
from tests.unit.core import test_validation

FLAVORS = [(1, 2), (2, 4), (4, 8), (4, 16), (8, 32), (16, 64)]
# B offers everything A does and more: with --cpu-compatibility features a
# server may go A -> B, never B -> A.
FEATURES = {'A': ['avx2'], 'B': ['avx2', 'avx512f']}


@st.composite
def clouds(draw):
    n_hosts = draw(st.integers(2, 7))
    # Clouds scored from allocations alone are the ones whose imbalance
    # figures the oracle recomputes.
    some_measured = draw(st.booleans())
    hyps = []
    for i in range(n_hosts):
        measured = some_measured and draw(st.booleans())
        model = draw(st.sampled_from(['A', 'B']))
        hyps.append(b.hypervisor(
            'hv%d' % i,
            az=draw(st.sampled_from(['az1', 'az2'])),
            cpu_info={'arch': 'x86_64', 'model': model,
                      'features': FEATURES[model]},
            vcpus=draw(st.sampled_from([8, 16, 32])),
            ram_gb=draw(st.sampled_from([32, 64, 128])),
            cpu_ratio=draw(st.sampled_from([1.0, 2.0, 4.0])),
            reserved_mb=draw(st.sampled_from([0, 4096])),
            cpu=draw(st.floats(0, 1)) if measured else None,
            ram=draw(st.floats(0, 1)) if measured else None,
            status=draw(st.sampled_from(['enabled'] * 5 + ['disabled']))))
    servers = []
    for i in range(draw(st.integers(0, 30))):
        vcpus, ram = draw(st.sampled_from(FLAVORS))
        extra = {}
        if draw(st.integers(0, 9)) == 0:
            extra['status'] = draw(st.sampled_from(['SHUTOFF', 'PAUSED']))
        if draw(st.integers(0, 9)) == 0:
            extra['locked'] = True
        if draw(st.booleans()):
            extra['usage'] = {'cpu': draw(st.floats(0, 1)),
                              'ram': draw(st.floats(0, 1))}
        servers.append(b.server(
            's%d' % i, 'hv%d' % draw(st.integers(0, n_hosts - 1)),
            vcpus=vcpus, ram_gb=ram, **extra))
    groups = []
    ids = [s['id'] for s in servers]
    for g in range(draw(st.integers(0, 3))):
        if len(ids) < 2:
            break
        members = draw(st.lists(st.sampled_from(ids), min_size=2,
                                max_size=4, unique=True))
        policy = draw(st.sampled_from(['affinity', 'anti-affinity',
                                       'soft-anti-affinity']))
        group = {'id': 'g%d' % g, 'policy': policy, 'members': members}
        if policy == 'anti-affinity' and draw(st.booleans()):
            group['rules'] = {'max_server_per_host': 2}
        groups.append(group)
    return b.document(hyps, servers, groups)


class TestPlannedMovesAreValid(unittest.TestCase):
    @hypothesis.settings(max_examples=150, deadline=None)
    @hypothesis.given(document=clouds(),
                      threshold=st.sampled_from([0.0, 0.02]),
                      ceiling=st.sampled_from([0.85, 1.0, 2.0]),
                      compatibility=st.sampled_from([config.CPU_MODEL,
                                                     config.CPU_FEATURES]),
                      cpu_weight=st.sampled_from([1.0, 2.0]),
                      ram_weight=st.sampled_from([1.0, 0.5]))
    def test_every_move_passes_every_filter_when_applied(
            self, document, threshold, ceiling, compatibility, cpu_weight,
            ram_weight):
        snap = snapshot_io.parse(copy.deepcopy(document))
        weights = dict(opts.PlannerOptions().weights, cpu=cpu_weight,
                       ram=ram_weight)
        options = opts.PlannerOptions(threshold=threshold, ceiling=ceiling,
                                      min_gain=0.0, weights=weights,
                                      cpu_compatibility=compatibility)
        result = planner.make_plan(snap, options)
        # Judged on the document by the oracle, not by the planner's filters.
        oracle.replay_with(document, result, options)
        self.assertLessEqual(result.imbalance_after,
                             result.imbalance_before + 1e-9)
        # A server moves once, or twice within one exchange (parked).
        labels = {}
        for move in result.moves:
            labels.setdefault(move.server_id, []).append(move.exchange)
        for server_id, seen in labels.items():
            self.assertTrue(len(seen) == 1 or (
                len(seen) == 2 and seen[0] and seen[0] == seen[1]), seen)


def damage(document, data):
    paths = list(test_validation.paths(document))
    if data.draw(st.integers(0, 3)) == 0:
        # Whole records (a hypervisor, a server, a move) now and then: few
        # among the paths, they are what duplicates and cross references
        # are made of.
        paths = [p for p in paths if len(p) == 2 and isinstance(p[1], int)]
    path = data.draw(st.sampled_from(paths))
    action = data.draw(st.sampled_from(['replace', 'delete', 'add',
                                        'copy']))
    value = data.draw(test_validation.json_values)
    return test_validation.mutate(document, path, action, value), (
        path, action, value)


class TestMalformedInput(unittest.TestCase):
    """Refused exactly when an independent oracle says the input is bad."""

    def assert_snapshot_verdict(self, document, how):
        problem = oracle.snapshot_problem(document)
        try:
            snap = snapshot_io.parse(copy.deepcopy(document))
        except snapshot_io.SnapshotError as exc:
            self.assertIsNotNone(problem, (how, 'refused a valid snapshot',
                                           str(exc)))
            return None
        self.assertIsInstance(snap, model.Snapshot)
        self.assertIsNone(problem, (how, 'accepted a bad snapshot'))
        return snap

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(document=clouds(), data=st.data())
    def test_damaged_snapshots(self, document, data):
        damaged, how = damage(document, data)
        snap = self.assert_snapshot_verdict(damaged, how)
        if snap is not None:
            options = opts.PlannerOptions()
            oracle.replay_with(damaged, planner.make_plan(snap, options),
                               options)

    @hypothesis.settings(max_examples=200, deadline=None)
    @hypothesis.given(data=st.data())
    def test_damaged_plans(self, data):
        hyps, servers = b.exchange_hosts()  # exchanges: parked servers
        snap = b.snapshot(hyps, servers)
        good = plan_mod.to_document(planner.make_plan(
            snap, opts.PlannerOptions(ceiling=1.5)))
        if data.draw(st.booleans()):  # a placement plan: no labels
            good['kind'] = kinds.PLACEMENT.name
            for move in good['moves']:
                move['exchange'] = ''
        self.assertIsNone(oracle.plan_problem(good))
        damaged, how = damage(good, data)
        problem = oracle.plan_problem(damaged)
        try:
            plan_mod.from_document(copy.deepcopy(damaged))
        except plan_mod.PlanError as exc:
            self.assertIsNotNone(problem, (how, 'refused a valid plan',
                                           str(exc)))
        else:
            self.assertIsNone(problem, (how, 'accepted a bad plan'))

    @hypothesis.settings(max_examples=100, deadline=None)
    @hypothesis.given(document=test_validation.json_values)
    def test_arbitrary_json(self, document):
        self.assert_snapshot_verdict(document, 'arbitrary')


class TestOracleVerdicts(unittest.TestCase):
    """The oracle's rules on hand-made cases, so that a permissive oracle
    cannot make the properties above pass."""

    def snapshot_doc(self):
        hyps, servers = b.three_hosts()
        return b.document(hyps, servers, migrations=[
            {'server_id': 'id-hot0', 'status': 'completed',
             'created_at': '2026-11-20T10:00:00Z'}])

    def test_snapshot_rules(self):
        self.assertIsNone(oracle.snapshot_problem(self.snapshot_doc()))
        damage = {
            'duplicate server id': lambda d: d['servers'][1].update(
                id=d['servers'][0]['id']),
            'duplicate hypervisor': lambda d: d['hypervisors'].append(
                dict(d['hypervisors'][0])),
            'unknown hypervisor': lambda d: d['servers'][0].update(
                hypervisor='hv9'),
            'reserved above total': lambda d: d['hypervisors'][0][
                'inventories']['VCPU'].update(reserved=33),
            'not a finite number': lambda d: d['hypervisors'][0][
                'inventories']['VCPU'].update(allocation_ratio=math.nan),
            'not valid Unicode': lambda d: d['source'].update(kind='\ud800'),
            'not an ISO 8601 time': lambda d: d['migrations'][0].update(
                created_at='2026-02-30T10:00'),
            'outside years': lambda d: d.update(
                taken_at='0001-01-01T00:00:00+00:01'),
            'schema': lambda d: d['servers'][0].update(status=''),
        }
        for words, change in damage.items():
            with self.subTest(words=words):
                doc = self.snapshot_doc()
                change(doc)
                self.assertIn(words, oracle.snapshot_problem(doc) or '')
                with self.assertRaises(snapshot_io.SnapshotError):
                    snapshot_io.parse(doc)

    def test_plan_rules(self):
        hyps, servers = b.exchange_hosts()
        good = plan_mod.to_document(planner.make_plan(
            b.snapshot(hyps, servers), opts.PlannerOptions(ceiling=1.5)))
        self.assertIsNone(oracle.plan_problem(good))
        # Two exchanges: two moves, then three (big0 parked on hv3).
        self.assertEqual(['exchange 1'] * 2 + ['exchange 2'] * 3,
                         [m['exchange'] for m in good['moves']])
        damage = {
            'moved twice': lambda d: d['moves'][4].update(exchange=''),
            'does not start where': lambda d: d['moves'][4].update(
                source='hv9'),
            'wave not after': lambda d: [m.update(wave=1)
                                         for m in d['moves']],
            'exchange in a placement plan': lambda d: d.update(
                kind='placement'),
            'not two servers': lambda d: d['moves'].append(dict(
                d['moves'][0], server_id='id-x', wave=9)),
            'do not trade places': lambda d: d['moves'][1].update(
                destination='hv1'),
            'not an ISO 8601 time': lambda d: d.update(
                created_at='2026-13-01T00:00'),
        }
        for words, change in damage.items():
            with self.subTest(words=words):
                doc = copy.deepcopy(good)
                change(doc)
                self.assertIn(words, oracle.plan_problem(doc) or '')
                with self.assertRaises(plan_mod.PlanError):
                    plan_mod.from_document(doc)
