"""The cloud state a plan's moves are made on (core/load/state.py)."""

import unittest

from osc_leveller.core.load import state as state_mod
from tests.unit import builders as b


class TestTrial(unittest.TestCase):
    def test_a_trial_scores_as_a_copy_and_changes_nothing(self):
        hyps, servers = b.three_hosts()
        snap = b.snapshot(hyps, servers)
        state = state_mod.new_state(snap)
        state.apply('id-hot0', 'hv2')  # a move made before the trial
        before = {h.name: state.score(h.name) for h in snap.hypervisors}
        copy, trial = state.copy(), state.trial({'hv1', 'hv2', 'hv3'})
        for each in (copy, trial):
            each.apply('id-hot1', 'hv3')
            each.apply('id-hot0', 'hv3')  # moves on from where it went
        self.assertEqual({n: copy.score(n) for n in before},
                         {n: trial.score(n) for n in before})
        self.assertEqual('hv3', trial.host_of('id-hot0'))
        self.assertEqual({n: state.score(n) for n in before}, before)
        self.assertEqual('hv2', state.host_of('id-hot0'))
        self.assertEqual([('id-hot1', 'hv1', 'hv3'),
                          ('id-hot0', 'hv2', 'hv3')], trial.history)
        self.assertEqual(
            copy.usage('hv3', 'VCPU'), trial.usage('hv3', 'VCPU'))
