"""The kinds of plan: each declared once, and a new one needs nothing else."""

import dataclasses
import json
import os
import tempfile
import unittest

from osc_leveller.core.model import validation
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import policy
from osc_leveller.core.run import executor
from tests.unit import oracle
from tests.unit.core import test_executor as te
from tests.unit.core import test_planned_load as loads


def _refuse_hv3(moves):
    def check(move, snapshot, state, rules):
        return checks.recheck(move, snapshot, state, rules,
                              policy.PLACEMENT) or (
            'hv3 is being freed' if move.destination == 'hv3' else None)
    return check


# A goal the planner does not have: moves a server twice (it may park),
# takes no exchanges, re-checks on the load of the moment, refuses hv3.
SHUFFLE = kinds.Kind('shuffle', policy.PLACEMENT, _refuse_hv3,
                     load=context.NOW, repeats=True, heading='Shuffle')


class Declared(unittest.TestCase):
    """SHUFFLE declared for the test's length only."""

    def setUp(self):
        kinds.declare(SHUFFLE)
        self.addCleanup(kinds.BY_NAME.pop, SHUFFLE.name)


class TestRegistry(unittest.TestCase):
    def test_the_kinds(self):
        # The goals of issue 33 declare theirs after these.
        self.assertEqual(['balance', 'placement', 'drain-cold', 'drain'],
                         list(kinds.BY_NAME)[:4])
        self.assertEqual(['balance', 'placement'], kinds.saved()[:2])
        self.assertIn('free-hosts', kinds.saved())
        self.assertIn('make-room', kinds.saved())
        self.assertIs(kinds.SPREAD, kinds.of('spread'))
        self.assertIs(kinds.DRAIN_COLD, kinds.drain(True))
        self.assertIs(kinds.DRAIN, kinds.drain(False))

    def test_cold_variants(self):
        # --cold-migrate-stopped: the kinds that have one, never saved.
        self.assertEqual({'drain': 'drain-cold',
                          'free-hosts': 'free-hosts-cold'},
                         {k.name: k.cold.name for k in kinds.BY_NAME.values()
                          if k.cold})
        for kind in kinds.BY_NAME.values():
            self.assertEqual(kind.migrates_stopped,
                             kind.name.endswith('-cold'), kind.name)
            if kind.migrates_stopped:
                self.assertFalse(kind.saved, kind.name)
        with self.assertRaises(kinds.UnknownKind):
            kinds.of('free-hosts-cold')

    def test_every_kind_is_planned_and_checked_on_the_planned_load(self):
        for kind in kinds.BY_NAME.values():
            self.assertEqual(context.PLANNED, kind.load, kind.name)

    def test_a_drain_is_not_read_from_a_plan_file(self):
        for name in ('drain', 'drain-cold', 'free-hosts-cold', 'shuffle',
                     'BALANCE'):
            with self.assertRaises(kinds.UnknownKind):
                kinds.of(name)

    def test_the_tamper_tests_oracle_states_every_saved_kind(self):
        # The oracle states plan files' rules on its own (it must not read
        # them from the code it judges): a new kind is stated there too.
        self.assertEqual({name: (kinds.of(name).repeats,
                                 kinds.of(name).exchanges)
                          for name in kinds.saved()}, oracle.PLAN_KINDS)

    def test_a_kind_is_declared_once(self):
        with self.assertRaisesRegex(ValueError, 'declared twice'):
            kinds.declare(dataclasses.replace(kinds.BALANCE))

    def test_an_unknown_kind_in_a_plan_file(self):
        document = plan_mod.to_document(_plan(kinds.BALANCE))
        document['kind'] = 'drain'
        with self.assertRaisesRegex(
                plan_mod.PlanError, r'^p\.json: kind: must be one of '
                r'"balance", "placement"(, "[a-z-]+")* \(got "drain"\)$'):
            plan_mod.from_document(document, 'p.json')


def _plan(kind, moves=()):
    return plan_mod.Plan(
        moves=tuple(moves), imbalance_before=0.1, imbalance_after=0.1,
        domains=(), fingerprint='sha256:' + '0' * 64, snapshot_taken_at=0.0,
        snapshot_source={}, options={}, created_at=0.0, kind=kind.name)


def _move(server, source, destination, wave):
    return plan_mod.Move(
        server_id='id-' + server, server_name=server, source=source,
        destination=destination, destination_host='host-' + destination,
        wave=wave, domain='az1/Gen1', ram_gb=4.0, gain=0.0,
        source_score=(0.0, 0.0), destination_score=(0.0, 0.0),
        imbalance=(0.0, 0.0), reason='test')


class TestANewKind(Declared):
    """Declared, a kind is read from plan files, validated, re-checked and
    run as it says, with no other change."""

    def test_its_plan_files(self):
        twice = [_move('a', 'hv1', 'hv2', 1), _move('a', 'hv2', 'hv3', 2)]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'p.json')
            plan_mod.write(_plan(SHUFFLE, twice), path)
            with open(path) as stream:
                self.assertEqual('shuffle', json.load(stream)['kind'])
            again = plan_mod.read(path)
        self.assertEqual('shuffle', again.kind)
        self.assertEqual(twice, list(again.moves))
        self.assertIn('shuffle', kinds.saved())

    def test_its_moves_are_validated_as_it_declares(self):
        twice = [_move('a', 'hv1', 'hv2', 1), _move('a', 'hv2', 'hv3', 2)]
        once = dataclasses.replace(SHUFFLE, name='once', repeats=False)
        kinds.declare(once)
        self.addCleanup(kinds.BY_NAME.pop, 'once')
        document = plan_mod.to_document(_plan(once, twice))
        with self.assertRaisesRegex(plan_mod.PlanError,
                                    'server id-a is moved twice'):
            plan_mod.from_document(document, 'p.json')
        exchanged = [dataclasses.replace(m, exchange='exchange 1')
                     for m in twice]
        document = plan_mod.to_document(_plan(SHUFFLE, exchanged))
        with self.assertRaisesRegex(plan_mod.PlanError,
                                    'a shuffle plan has no exchanges'):
            plan_mod.from_document(document, 'p.json')

    def test_apply_runs_it_with_its_recheck(self):
        hyps = [te.b.hypervisor('hv%d' % i, vcpus=16) for i in (1, 2, 3)]
        servers = [te.b.server('a', 'hv1'), te.b.server('b', 'hv1')]
        nova = te.FakeNova(hyps, servers)
        clock = te.Clock()
        moves = [_move('a', 'hv1', 'hv2', 1), _move('b', 'hv1', 'hv3', 1)]
        run = executor.Executor(
            nova, loads.opts.PlannerOptions(now=te.NOW),
            executor.ApplyOptions(poll_interval=1.0), clock=clock,
            sleep=clock.sleep, wall=lambda: te.NOW + clock.now,
            kind=SHUFFLE).run(moves)
        self.assertEqual([(executor.DONE, 'verified on hv2'),
                          (executor.SKIPPED, 'hv3 is being freed')],
                         [(r.status, r.reason) for r in run.results])
        self.assertEqual('hv2', nova.servers['id-a']['hypervisor'])

    def test_apply_rechecks_it_on_the_load_it_declares(self):
        # On the load to come, the mover would take hv2 above the ceiling;
        # now, it would not. SHUFFLE is re-checked on the load now.
        snap = loads.busy_ahead()
        move = _move('mover', 'hv1', 'hv2', 1)
        options = loads.options(snap)
        for kind, verdict in ((kinds.PLACEMENT, 'above the ceiling'),
                              (SHUFFLE, None)):
            _, state, rules = executor._View(snap, kind.load).read(
                None, None, [], options)
            reason = kind.recheck([move])(move, snap, state, rules)
            if verdict is None:
                self.assertIsNone(reason)
            else:
                self.assertIn(verdict, reason)


class TestSchema(unittest.TestCase):
    def test_the_schema_leaves_the_kinds_to_the_registry(self):
        kind = validation.load_schema('plan-v1')['properties']['kind']
        self.assertEqual({'description', 'type'}, set(kind))
