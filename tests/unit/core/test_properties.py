"""Property tests: random clouds, random damage."""

import copy
import unittest

import hypothesis
from hypothesis import strategies as st

from osc_leveller.core import options as opts
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import planner
from osc_leveller.core import snapshot as snapshot_io
from tests.unit import builders as b
from tests.unit.core import test_planner
from tests.unit.core import test_validation

FLAVORS = [(1, 2), (2, 4), (4, 8), (4, 16), (8, 32), (16, 64)]


@st.composite
def clouds(draw):
    n_hosts = draw(st.integers(2, 7))
    hyps = []
    for i in range(n_hosts):
        measured = draw(st.booleans())
        hyps.append(b.hypervisor(
            'hv%d' % i,
            az=draw(st.sampled_from(['az1', 'az2'])),
            model=draw(st.sampled_from(['A', 'B'])),
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
                      compatibility=st.sampled_from([opts.CPU_MODEL,
                                                     opts.CPU_FEATURES]))
    def test_every_move_passes_every_filter_when_applied(
            self, document, threshold, ceiling, compatibility):
        snap = snapshot_io.parse(copy.deepcopy(document))
        options = opts.PlannerOptions(threshold=threshold, ceiling=ceiling,
                                      min_gain=0.0,
                                      cpu_compatibility=compatibility)
        result = planner.make_plan(snap, options)
        test_planner.replay(snap, result, options)
        self.assertLessEqual(result.imbalance_after,
                             result.imbalance_before + 1e-9)
        # A server moves once, or twice within one exchange (parked).
        labels = {}
        for move in result.moves:
            labels.setdefault(move.server_id, []).append(move.exchange)
        for server_id, seen in labels.items():
            self.assertTrue(len(seen) == 1 or (
                len(seen) == 2 and seen[0] and seen[0] == seen[1]), seen)


class TestMalformedInputNeverCrashes(unittest.TestCase):
    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(document=clouds(), data=st.data())
    def test_damaged_snapshots_raise_snapshot_error(self, document, data):
        path = data.draw(st.sampled_from(
            list(test_validation.paths(document))))
        action = data.draw(st.sampled_from(['replace', 'delete', 'add']))
        value = data.draw(test_validation.json_values)
        damaged = test_validation.mutate(document, path, action, value)
        try:
            snap = snapshot_io.parse(damaged)
        except snapshot_io.SnapshotError:
            return
        planner.make_plan(snap, opts.PlannerOptions())

    @hypothesis.settings(max_examples=200, deadline=None)
    @hypothesis.given(data=st.data())
    def test_damaged_plans_raise_plan_error(self, data):
        hyps, servers = b.three_hosts()
        snap = b.snapshot(hyps, servers)
        good = plan_mod.to_document(
            planner.make_plan(snap, opts.PlannerOptions()))
        path = data.draw(st.sampled_from(list(test_validation.paths(good))))
        action = data.draw(st.sampled_from(['replace', 'delete', 'add']))
        value = data.draw(test_validation.json_values)
        damaged = test_validation.mutate(good, path, action, value)
        try:
            plan_mod.from_document(damaged)
        except plan_mod.PlanError:
            pass

    @hypothesis.settings(max_examples=100, deadline=None)
    @hypothesis.given(document=test_validation.json_values)
    def test_arbitrary_json(self, document):
        try:
            snapshot_io.parse(document)
        except snapshot_io.SnapshotError:
            pass
