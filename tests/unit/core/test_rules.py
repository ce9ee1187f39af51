"""Each rule declared once (filters.RULES): the catalogues derived from the
declarations, the Refusal that carries a rule's code, and a new rule that
every stage picks up from its declaration alone."""

import copy
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import model
from osc_leveller.core.planning import drain
from osc_leveller.core.planning import freeing
from osc_leveller.core.planning import paths
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.planning import room
from osc_leveller.core.planning import spread
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import headroom
from osc_leveller.core.rules import n_plus_one
from osc_leveller.core.rules import policy
from osc_leveller.core.run import executor
from osc_leveller.core.run import runmetrics
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

PACKAGE = pathlib.Path(filters.__file__).parents[2]
ROOT = PACKAGE.parent


def codes(rules):
    return [rule.code for rule in rules]


class TestCatalogues(unittest.TestCase):
    """The lists each stage uses, as they were written by hand before they
    were derived: a new order or a lost rule fails here."""

    def test_destination_filters(self):
        self.assertEqual([
            'not_source', 'excluded_host', 'service', 'inventory',
            'availability_zone', 'same_zone', 'cpu_compatible',
            'hypervisor_version', 'aggregate_extra_specs', 'tenant_isolation',
            'tenant_aggregate', 'isolated_aggregate', 'required_traits',
            'image_properties', 'as_capable_image', 'server_groups',
            'lingering_members', 'unrecorded_attempts', 'soft_server_groups',
            'migration_time', 'capacity', 'saturation', 'ceiling'],
            codes(filters.DESTINATION_FILTERS))
        self.assertEqual(codes(filters.DESTINATION_FILTERS) + [
            'returning', 'headroom'], codes(policy.BALANCE.destinations))
        self.assertEqual(codes(filters.DESTINATION_FILTERS),
                         codes(policy.DRAIN.destinations))

    def test_target_placement(self):
        self.assertEqual(
            [c for c in codes(filters.DESTINATION_FILTERS)
             if c != 'saturation'], codes(filters.TARGET_FILTERS))
        self.assertEqual(codes(filters.TARGET_FILTERS),
                         codes(policy.PLACEMENT.destinations))

    def test_static_filters(self):
        self.assertEqual([
            'excluded_host', 'service', 'inventory', 'availability_zone',
            'same_zone', 'cpu_compatible', 'hypervisor_version',
            'aggregate_extra_specs', 'tenant_isolation', 'tenant_aggregate',
            'isolated_aggregate', 'required_traits', 'image_properties',
            'as_capable_image'], codes(paths.STATIC_FILTERS))

    def test_n_plus_one_packing(self):
        rebuild = ['service', 'inventory', 'availability_zone',
                   'cpu_compatible', 'aggregate_extra_specs',
                   'tenant_isolation', 'tenant_aggregate',
                   'isolated_aggregate', 'required_traits',
                   'image_properties', 'as_capable_image']
        self.assertEqual(rebuild + ['capacity'], codes(headroom.FILTERS))
        # The way back of a move the packing may undo: all but capacity.
        self.assertEqual(rebuild, codes(n_plus_one._WAY_BACK))

    def test_choices(self):
        self.assertEqual({
            'same_zone', 'soft_server_groups', 'numa', 'capabilities',
            'locked', 'source_usable', 'as_capable_image',
            'lingering_members', 'unrecorded_attempts', 'migration_time'},
            filters.CHOICES)

    def test_policies(self):
        nova = ['status', 'task_state', 'locked', 'migration_in_flight',
                'blockers', 'numa', 'capabilities', 'opted_out', 'project']
        self.assertEqual(nova + ['cooldown', 'source_in_scope',
                                 'source_usable'],
                         codes(policy.BALANCE.checks))
        self.assertEqual(nova + ['source_in_scope', 'source_usable'],
                         codes(policy.BALANCE_AGAIN.checks))
        self.assertEqual(nova + ['source_in_scope'],
                         codes(policy.PLACEMENT.checks))
        drained = ['migratable', 'live_blockers', 'task_state', 'locked',
                   'migration_in_flight', 'opted_out']
        self.assertEqual(['stopped_stay'] + drained,
                         codes(policy.DRAIN.checks))
        self.assertEqual(drained, codes(policy.DRAIN_COLD.checks))

    def test_each_code_once_in_snake_case(self):
        every = codes(filters.RULES) + [n_plus_one.RULE.code]
        self.assertEqual(len(every), len(set(every)))
        for code in every:
            self.assertRegex(code, r'^[a-z][a-z0-9]*(_[a-z0-9]+)*$')
        # Apart from the re-checks' own codes, which are label values.
        self.assertFalse(set(every) & set(runmetrics.REASONS['skipped']) -
                         {'cooldown'})

    def test_new_servers(self):
        self.assertEqual(
            ['excluded_host', 'service', 'inventory', 'availability_zone',
             'aggregate_extra_specs', 'tenant_isolation', 'tenant_aggregate',
             'isolated_aggregate', 'required_traits'],
            codes(filters.BOOT_FILTERS))
        self.assertIs(filters.BOOT_FILTERS, room.NEW_SERVER_RULES)

    def test_only_destination_rules_have_their_properties(self):
        for rule in filters.RULES:
            if not rule.destination:
                self.assertFalse(rule.static or rule.rebuild or
                                 rule.balancing or rule.boot, rule.code)
                self.assertTrue(rule.target, rule.code)


class TestRefusal(unittest.TestCase):
    def refusal(self):
        hyps = [b.hypervisor('hv1'), b.hypervisor('hv2', ram_gb=16)]
        snap = b.snapshot(hyps, [b.server('s1', 'hv1', ram_gb=8),
                                 b.server('s2', 'hv2', ram_gb=12)])
        rules = filters.Rules(snap, opts.PlannerOptions())
        return filters.why_not_destination(
            snap.server('id-s1'), snap.hypervisor('hv2'),
            state_mod.new_state(snap), rules)

    def test_reads_as_its_sentence_and_carries_its_code(self):
        reason = self.refusal()
        text = 'MEMORY_MB full: 12288 used + 8192 needed > 16384 ' \
            'capacity ((16384 total - 0 reserved) x 1)'
        self.assertEqual(text, reason)
        self.assertEqual(text, '%s' % reason)
        self.assertEqual(json.dumps(text), json.dumps(reason))
        self.assertEqual(('capacity', 'MEMORY_MB'),
                         (reason.code, reason.resource))
        self.assertIs(filters.rules_named('capacity')[0], reason.rule)

    def test_reworded_keeps_the_code_and_a_copy_keeps_it_all(self):
        reason = self.refusal()
        said = reason.reworded('hv2: %s' % reason)
        self.assertEqual('hv2: ' + reason, said)
        self.assertEqual((reason.code, reason.rule, reason.resource),
                         (said.code, said.rule, said.resource))
        for made in (reason, said):
            again = copy.deepcopy(made)
            self.assertEqual(made, again)
            self.assertEqual(('capacity', 'MEMORY_MB', 'capacity'), (
                again.code, again.resource, again.rule.code))

    def test_a_rule_within_a_rule_keeps_its_own_code(self):
        # A drain's live_blockers asks blockers, numa and capabilities.
        snap = b.snapshot([b.hypervisor('hv1')], [b.server(
            's1', 'hv1', blockers=['PCI device'])])
        rules = filters.Rules(snap, opts.PlannerOptions())
        reason = policy.DRAIN.why_not(snap.server('id-s1'), rules)
        self.assertEqual('cannot live-migrate: PCI device', reason)
        self.assertEqual('blockers', reason.code)


# --- a rule added by its declaration alone -----------------------------------

# What a newcomer writes in core/rules/filters.py: the check, and its
# declaration.
CHECK = '''

def draining_trait(server, dest, state, rules):
    """Nothing goes to a hypervisor its operator marked CUSTOM_DRAINING."""
    if dest.traits and 'CUSTOM_DRAINING' in dest.traits:
        return 'hypervisor %s is marked CUSTOM_DRAINING' % dest.name
'''
DECLARATION = '''    _to('draining_trait', draining_trait, own=True, static=True,
        rebuild=True, boot=True),
'''
CHECKS_END = '\n\n# --- every rule, declared once'
DECLARED_BEFORE = "    _to('server_groups', server_groups),\n"


def cloud(hosts):
    """hv1 hot with six servers; the other hosts empty, hv2 marked
    CUSTOM_DRAINING (a trait the leveller's own rules do not read)."""
    hyps = [b.hypervisor(name, traits=['CUSTOM_DRAINING'] if name == 'hv2'
                         else []) for name in hosts]
    servers = [b.server('s%d' % i, 'hv1', vcpus=4, ram_gb=16)
               for i in range(6)]
    return b.snapshot(hyps, servers)


def observe():
    """What each stage says of hv2, as JSON on stdout: run in a process
    that imports the package under test."""
    import osc_leveller
    options = opts.PlannerOptions()
    three, two = cloud(['hv1', 'hv2', 'hv3']), cloud(['hv1', 'hv2'])
    found = {
        'package': osc_leveller.__file__,
        'choice': 'draining_trait' in filters.CHOICES,
        'explained': [row[3:] for row in planner.Planner(three, options)
                      .explain(three.server('id-s0'))[1]
                      if row[0] == 'hv2'][0],
        'destinations': sorted({m.destination for m in planner.make_plan(
            three, options).moves}),
        'held': planner.make_plan(two, options).domains[0].get('held'),
        'drain': [why for _, why in drain.plan_drain(
            two, ['hv1'], options).unplaced][:1],
    }
    try:
        paths.find_path(three, {'id-s0': 'hv2'}, options)
        found['target'] = 'reached'
    except paths.PathError as exc:
        found['target'] = str(exc)
    # The goals beyond levelling: hv2 keeps the room for a new server,
    # takes the servers of a hypervisor freed, or evens out the counts.
    try:
        found['room'] = room.make_plan(two, room.Ask(model.Flavor(
            'big', 4, 64 * 1024, 10)), options).note
    except room.NoRoom as exc:
        found['room'] = str(exc)
    spare = b.snapshot(
        [b.hypervisor(name, traits=['CUSTOM_DRAINING'] if name == 'hv2'
                      else []) for name in ('hv1', 'hv2', 'hv3')],
        [b.server('f1', 'hv1', ram_gb=4), b.server('f2', 'hv2', ram_gb=40),
         b.server('f3', 'hv3', ram_gb=20)])
    found['free'] = sorted({m.destination for m in freeing.make_plan(
        spare, options, 1).moves})
    found['spread'] = sorted({m.destination for m in spread.make_plan(
        three, options).moves})
    state = state_mod.new_state(two)
    rules = filters.Rules(two, options)
    found['headroom'] = headroom.of_domains(two, state, rules)[0].reason()
    move = plan_mod.Move('id-s0', 's0', 'hv1', 'hv2', 'cmp-hv2', 1,
                         'az1/Gen1', 16, 0.1, (0.9, 0.8), (0.1, 0.2),
                         (0.2, 0.1), 'why')
    skipped = checks.placement(move, two, state, rules)
    found['apply'] = skipped and [skipped, skipped.code, runmetrics.labels_of(
        executor.Result(move, executor.SKIPPED, skipped))[1]]
    print(json.dumps(found))


def _insert(text, anchor, added, before=False):
    if text.count(anchor) != 1:
        raise AssertionError('core/rules/filters.py has changed: %r is not '
                             'there once; update this test' % anchor)
    return text.replace(anchor, added + anchor if before else anchor + added)


class TestAddingARule(unittest.TestCase):
    """A destination filter on hypervisor traits, added to a copy of the
    package by its check and its declaration in filters.RULES, nothing
    else: the planner, plan --explain, held, evacuate, the target
    placement's path finder, N+1 packing, plan --make-room, --free-hosts
    and --spread, apply's re-check, the metrics label and the conformance
    benchmark's choices all apply it."""

    def observed(self, package):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(package.parent), str(ROOT)]))
        done = subprocess.run(
            [sys.executable, '-c', 'from tests.unit.core import test_rules; '
             'test_rules.observe()'], env=env, cwd=str(package.parent),
            capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr)
        found = json.loads(done.stdout)
        self.assertTrue(found['package'].startswith(str(package)),
                        found['package'])
        return found

    def test_every_stage_applies_the_new_rule(self):
        with tempfile.TemporaryDirectory() as tmp:
            package = pathlib.Path(tmp) / 'osc_leveller'
            shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns(
                '__pycache__'))
            before = self.observed(package)
            source = package / 'core' / 'rules' / 'filters.py'
            text = _insert(source.read_text(), CHECKS_END, CHECK,
                           before=True)
            source.write_text(_insert(text, DECLARED_BEFORE, DECLARATION,
                                      before=True))
            after = self.observed(package)
        # Without the rule, hv2 is the coolest destination of all.
        self.assertFalse(before['choice'])
        self.assertIn('hv2', before['destinations'])
        self.assertEqual('accepted', before['explained'][0])
        self.assertIsNone(before['held'])
        self.assertEqual([], before['drain'])
        self.assertEqual('reached', before['target'])
        self.assertEqual('yes', before['headroom'])
        self.assertIsNone(before['apply'])
        self.assertEqual('there is room already for 1 server of flavor big',
                         before['room'])
        self.assertEqual(['hv2'], before['free'])
        self.assertEqual(['hv2', 'hv3'], before['spread'])

        why = 'hypervisor hv2 is marked CUSTOM_DRAINING'
        self.assertTrue(after['choice'])
        self.assertEqual(['hv3'], after['destinations'])
        self.assertEqual(['rejected', why], after['explained'])
        self.assertEqual(
            'draining trait refuses 6 of the 6 moves from its hottest '
            'hypervisors (hv1): for example hv2: ' + why, after['held'])
        self.assertEqual(['no hypervisor accepts it: %s (1 hypervisor)'
                          % why], after['drain'])
        self.assertEqual('the target placement cannot be reached: s0 '
                         'cannot go to hv2: ' + why, after['target'])
        self.assertTrue(re.fullmatch(
            r'no: losing hv1, 6 servers fit nowhere: .* \(on hv2, s\d: %s\)'
            % why, after['headroom']), after['headroom'])
        self.assertEqual(['hv2: ' + why, 'draining_trait',
                          'destination_refused'], after['apply'])
        self.assertIn('no room for 1 server of flavor big', after['room'])
        self.assertIn(why, after['room'])
        self.assertEqual(['hv3'], after['free'])
        self.assertEqual(['hv3'], after['spread'])
