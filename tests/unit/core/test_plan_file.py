import copy
import json
import os
import tempfile
import unittest

from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b


def make():
    hyps, servers = b.three_hosts()
    snap = b.snapshot(hyps, servers)
    return snap, planner.make_plan(snap, opts.PlannerOptions())


def written(the_plan):
    """(the JSON document, the plan read back) of the plan's file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'plan.json')
        plan_mod.write(the_plan, path)
        with open(path) as f:
            document = json.load(f)
        return document, plan_mod.read(path)


class TestPlanFile(unittest.TestCase):
    def test_round_trip(self):
        snap, the_plan = make()
        document, again = written(the_plan)
        self.assertEqual('osc-leveller-plan/1', document['format'])
        self.assertEqual(the_plan.moves, again.moves)
        self.assertEqual(the_plan.fingerprint, again.fingerprint)
        self.assertAlmostEqual(the_plan.imbalance_after, again.imbalance_after)
        self.assertEqual(0.05, document['options']['threshold'])
        self.assertEqual(the_plan.moves[0].destination_host,
                         document['moves'][0]['destination_host'])

    def test_a_refused_destination_is_kept(self):
        # The demo plan's move of vm-0079 names cmp-b19, which the finance
        # aggregate keeps for other projects.
        the_plan = planner.make_plan(snapshot_io.load('demo'),
                                     opts.PlannerOptions())
        refused = [m for m in the_plan.moves if m.refused]
        self.assertEqual(['vm-0079'], [m.server_name for m in refused])
        hypervisor, why = refused[0].refused
        self.assertTrue(hypervisor.startswith('cmp-b19'))
        self.assertIn('aggregate finance', why)
        self.assertIn('(cmp-b19 refused: %s)' % why,
                      refused[0].reason)
        document, again = written(the_plan)
        self.assertEqual(the_plan.moves, again.moves)
        documented = [m for m in document['moves'] if 'refused' in m]
        self.assertEqual({'hypervisor': hypervisor, 'reason': why},
                         documented[0]['refused'])
        self.assertEqual(1, len(documented))

    def test_fingerprint_follows_placement_not_metrics(self):
        hyps, servers = b.three_hosts()
        base = plan_mod.fingerprint(b.snapshot(hyps, servers))
        self.assertEqual(base, plan_mod.fingerprint(b.snapshot(hyps, servers)))
        measured = copy.deepcopy(hyps)
        measured[0]['metrics'] = {'cpu': 0.5, 'ram': 0.5}
        self.assertEqual(base, plan_mod.fingerprint(
            b.snapshot(measured, servers)))
        moved = copy.deepcopy(servers)
        moved[0]['hypervisor'] = 'hv2'
        self.assertNotEqual(base, plan_mod.fingerprint(
            b.snapshot(hyps, moved)))
        disabled = copy.deepcopy(hyps)
        disabled[2]['service']['status'] = 'disabled'
        self.assertNotEqual(base, plan_mod.fingerprint(
            b.snapshot(disabled, servers)))

    def test_the_fingerprint_encodes_as_json_dumps(self):
        # The digest is of json.dumps(..., sort_keys=True) of each item,
        # whatever encoder makes it faster.
        encode = plan_mod._encoder()
        for values in [
                ('hv1', 'h\u00f6st-\u00e9\u4e2d', None, True, False, 0, -1,
                 2 ** 63, 0.1, 1.5, 16.0, 1e16, 1e-07, float('nan')),
                ('vm', [['MEMORY_MB', 2048], ['VCPU', 2]], [], [[]],
                 [('k', {'b': 1, 'a': [None, 'x"\\\n\t\x00']})]),
                ()]:
            self.assertEqual(json.dumps(values, sort_keys=True),
                             encode(values))

    def test_bad_plan_files(self):
        _, the_plan = make()
        good = plan_mod.to_document(the_plan)
        with tempfile.TemporaryDirectory() as tmp:
            def read(content):
                path = os.path.join(tmp, 'p.json')
                with open(path, 'w') as f:
                    f.write(content if isinstance(content, str)
                            else json.dumps(content))
                with self.assertRaises(plan_mod.PlanError) as ctx:
                    plan_mod.read(path)
                return str(ctx.exception)

            self.assertIn('does not exist', self._missing(tmp))
            self.assertIn('not valid JSON', read('{'))
            self.assertIn('is not an osc-leveller plan', read({'moves': []}))
            bad = copy.deepcopy(good)
            bad['moves'][0]['wave'] = 0
            self.assertIn('moves[0].wave: must be >= 1', read(bad))
            bad = copy.deepcopy(good)
            del bad['moves'][0]['destination_host']
            self.assertIn('moves[0].destination_host: is required', read(bad))
            bad = copy.deepcopy(good)
            bad['moves'].append(copy.deepcopy(bad['moves'][0]))
            self.assertIn('is moved twice', read(bad))
            bad = copy.deepcopy(good)
            bad['snapshot']['fingerprint'] = 'md5:1'
            self.assertIn('snapshot.fingerprint: must match', read(bad))

    def test_exchange_moves_a_server_twice_only_within_it(self):
        hyps, servers = b.exchange_hosts()
        snap = b.snapshot(hyps, servers)
        the_plan = planner.make_plan(snap, opts.PlannerOptions(ceiling=1.5))
        document = plan_mod.to_document(the_plan)
        again = plan_mod.from_document(copy.deepcopy(document))
        self.assertEqual(the_plan.moves, again.moves)
        twice = [i for i, m in enumerate(document['moves'])
                 if [n['server_id'] for n in document['moves']].count(
                     m['server_id']) == 2]
        self.assertTrue(twice)  # a parked server moves on
        bad = copy.deepcopy(document)
        bad['moves'][twice[-1]]['exchange'] = 'exchange 99'
        with self.assertRaises(plan_mod.PlanError) as ctx:
            plan_mod.from_document(bad)
        self.assertIn('moves[%d].server_id: server %s is moved twice' % (
            twice[-1], bad['moves'][twice[-1]]['server_id']),
            str(ctx.exception))
        # Plans written before exchanges existed still load.
        old = copy.deepcopy(plan_mod.to_document(make()[1]))
        for move in old['moves']:
            del move['exchange']
        self.assertEqual(make()[1].moves, plan_mod.from_document(old).moves)

    def test_an_exchange_label_cannot_stretch_a_batch(self):
        # apply counts an exchange as one move: a label put on other moves
        # would run them all under --batch 1.
        document = plan_mod.to_document(make()[1])
        self.assertGreaterEqual(len(document['moves']), 3)

        def refused(moves):
            bad = copy.deepcopy(document)
            for index in moves:
                bad['moves'][index]['exchange'] = 'exchange 1'
            with self.assertRaises(plan_mod.PlanError) as ctx:
                plan_mod.from_document(bad)
            return str(ctx.exception)
        self.assertIn('exchange 1: an exchange is two servers in two or three '
                      'moves (got 3 servers in 3 moves)', refused([0, 1, 2]))
        self.assertIn('exchange 1: its two servers do not trade places',
                      refused([0, 1]))
        placement = copy.deepcopy(document)
        placement['kind'] = kinds.PLACEMENT.name
        placement['moves'][0]['exchange'] = 'exchange 1'
        with self.assertRaises(plan_mod.PlanError) as ctx:
            plan_mod.from_document(placement)
        self.assertIn('moves[0].exchange: a placement plan has no exchanges',
                      str(ctx.exception))

    def test_the_planners_exchanges_load(self):
        hyps, servers = b.exchange_hosts()
        the_plan = planner.make_plan(b.snapshot(hyps, servers),
                                     opts.PlannerOptions(ceiling=1.5))
        labels = {m.exchange for m in the_plan.moves}
        self.assertEqual({'exchange 1', 'exchange 2'}, labels)
        again = plan_mod.from_document(plan_mod.to_document(the_plan))
        self.assertEqual(the_plan.moves, again.moves)

    def _missing(self, tmp):
        with self.assertRaises(plan_mod.PlanError) as ctx:
            plan_mod.read(os.path.join(tmp, 'none.json'))
        return str(ctx.exception)
