"""plan --free-hosts and apply of its plans, through the commands, over a
simulated Nova (tests.unit.core.test_executor.FakeNova)."""

import json
import os
import re
import unittest

from osc_lib import exceptions

from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.v1 import apply as apply_cmd
from osc_leveller.v1 import plan
from tests.unit import badinput
from tests.unit import builders as b
from tests.unit import test_doc_examples
from tests.unit.core import test_executor
from tests.unit.core import test_freeing
from tests.unit.v1 import test_commands

REASON = 'repurposed for the GPU pool'


class TestPlanFreeHosts(test_commands.CommandTest):
    def test_on_the_demo_snapshot(self):
        path = os.path.join(self.tmp.name, 'plan.json')
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--free-hosts', '1', '--output-file', path])
        saved = plan_mod.read(path)
        self.assertEqual(kinds.FREE_HOSTS.name, saved.kind)
        freed = {f['hypervisor']: f for d in saved.domains
                 for f in d.get('freed', ())}
        # One hypervisor in each of the demo's six domains.
        self.assertEqual(6, len(freed))
        self.assertEqual(len(rows), len(saved.moves))
        self.assertEqual(set(freed), {m.source for m in saved.moves})
        for move in saved.moves:
            self.assertNotIn(move.destination, freed)
            self.assertTrue(move.reason.startswith('frees %s: ' %
                                                   move.source))
        err = self.app.stderr.getvalue()
        self.assertIn('Free hosts: %d live migrations' % len(rows), err)
        self.assertIn('Freed: cmp-a11.cloud.example.net '
                      '(az1/Cascadelake-Server): 22 servers, 312 GiB', err)
        # A PCI server keeps its hypervisor, and the plan says so.
        self.assertIn('Not freed: cmp-a07.cloud.example.net '
                      '(az1/Cascadelake-Server): vm-0115 cannot move: cannot '
                      'live-migrate: PCI passthrough device allocated', err)

    def test_n_larger_than_possible(self):
        self.assert_command_error(plan.PlanLeveller, [
            '--snapshot', 'demo', '--free-hosts', '5'],
            '--free-hosts 5: 5 hypervisors cannot be freed in every '
            'balancing domain: at most 1 in az1/Cascadelake-Server, 3 in '
            'az1/Icelake-Server')

    def test_keep_n_plus_one(self):
        hyps, servers = test_freeing.cloud()
        snap = self.write('s.json', b.document(hyps, servers))
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', snap, '--free-hosts'])
        self.assertEqual(5, len(rows))  # hv1, hv2, hv3 onto hv4
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', snap, '--free-hosts', '--keep-n-plus-one'])
        # hv1, then hv2 (16 GiB): the loss of hv3 (40) or of hv4 (76)
        # fits on the other; hv3 too would leave hv4 alone.
        self.assertEqual({'hv1', 'hv2'}, {r[2] for r in rows})
        self.assertIn('Not freed: hv3 (az1/Gen1): freeing it would leave '
                      'az1/Gen1 without N+1 headroom',
                      self.app.stderr.getvalue())


class TestApplyFreeHosts(test_commands.SimulatedNovaTest):
    def setUp(self):
        super().setUp()
        hyps, servers = test_freeing.cloud()
        self.nova = test_executor.FakeNova(hyps, servers, polls=1)
        self.path = os.path.join(self.tmp.name, 'plan.json')
        snap = self.write('s.json', b.document(hyps, servers))
        self.run_cmd(plan.PlanLeveller, ['--snapshot', snap, '--free-hosts',
                                         '1', '--output-file', self.path])

    def test_dry_run_then_apply_and_disable_then_restore(self):
        code, out, err = self.apply([self.path, '--dry-run',
                                     '--disable-freed', REASON, '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual([('a1', 'hv4', 'would run')],
                         [(r['Server'], r['Destination'], r['Status'])
                          for r in json.loads(out)])
        self.assertIn('Would disable the compute service of cmp-hv1: %s'
                      % REASON, err)
        self.assertEqual([], [c for c in self.nova.calls
                              if c[0] in ('live_migrate', 'set_service')])
        code, out, err = self.apply([self.path, '--disable-freed', REASON,
                                     '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual(['done'], [r['Status'] for r in json.loads(out)])
        self.assertEqual([('set_service', 'cmp-hv1', False, REASON)],
                         [c for c in self.nova.calls
                          if c[0] == 'set_service'])
        events = [e['event'] for e in self.journal()]
        self.assertLess(events.index('done'), events.index('disable-service'))
        record = next(e for e in self.journal()
                      if e['event'] == 'disable-service')
        self.assertEqual(('cmp-hv1', REASON), (record['host'],
                                               record['reason']))
        hv1 = snapshot_io.parse(b.document(
            self.nova.hyps, [])).hypervisor('hv1')
        self.assertEqual(('disabled', REASON), (hv1.service.status,
                                                hv1.service.disabled_reason))
        # evacuate --restore undoes it (a reason is only sent to disable).
        code, rows, err = self.evacuate(['hv1', '--restore'])
        self.assertEqual(0, code, err)
        self.assertEqual(('set_service', 'cmp-hv1', True),
                         self.nova.calls[-1][:3])
        self.assertEqual('enabled', self.nova.hyps[0]['service']['status'])

    def test_freed_over_several_runs_each_disabled_once_empty(self):
        hyps, servers = test_freeing.cloud()
        snap = self.write('s.json', b.document(hyps, servers))
        self.run_cmd(plan.PlanLeveller, ['--snapshot', snap, '--free-hosts',
                                         '2', '--availability-zone', 'az1',
                                         '--output-file', self.path])
        # hv1's a1, then hv2's b1 and b2, onto hv4.
        args = [self.path, '--batch', '1', '--disable-freed', REASON, '-f',
                'json']
        code, out, err = self.apply(args)
        self.assertEqual(['done', 'not started', 'not started'],
                         [r['Status'] for r in json.loads(out)])
        self.assertIn('Left enabled: the compute service of cmp-hv2 (2 '
                      'servers still on hv2)', err)
        disabled = [c[1] for c in self.nova.calls if c[0] == 'set_service']
        self.assertEqual(['cmp-hv1'], disabled)
        self.app.stderr.truncate(0)
        code, out, err = self.apply(args[:1] + args[3:])
        self.assertEqual(['skipped', 'done', 'done'],
                         [r['Status'] for r in json.loads(out)])
        disabled = [c[1] for c in self.nova.calls if c[0] == 'set_service']
        self.assertEqual(['cmp-hv1', 'cmp-hv2'], disabled)
        self.assertEqual(2, sum(1 for e in self.journal()
                                if e['event'] == 'disable-service'))

    def test_a_host_no_longer_freed_is_neither_emptied_nor_disabled(self):
        # A server arrived on hv1 since the plan was made.
        self.nova.servers['id-new'] = b.server('new', 'hv1', ram_gb=2)
        code, out, err = self.apply([self.path, '--disable-freed', REASON,
                                     '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_ALL_SKIPPED, code, err)
        (row,) = json.loads(out)
        self.assertEqual('skipped', row['Status'])
        self.assertIn('hv1 would not be freed: new is on it and not in the '
                      'plan', row['Reason'])
        self.assertIn('Left enabled: the compute service of cmp-hv1 (2 '
                      'servers still on hv1)', err)
        self.assertEqual([], [c for c in self.nova.calls
                              if c[0] in ('live_migrate', 'set_service')])


class TestApplyColdMigratesStopped(test_commands.SimulatedNovaTest):
    """plan --free-hosts --cold-migrate-stopped, and apply, which must be
    told so too."""

    def setUp(self):
        super().setUp()
        hyps, servers = test_freeing.cloud([b.server(
            'off', 'hv1', ram_gb=4, status='SHUTOFF')])
        self.nova = test_executor.FakeNova(hyps, servers, polls=1)
        self.path = os.path.join(self.tmp.name, 'plan.json')
        self.snap = self.write('s.json', b.document(hyps, servers))

    def test_planned_then_applied_cold(self):
        self.run_cmd(plan.PlanLeveller, [
            '--snapshot', self.snap, '--free-hosts', '1',
            '--availability-zone', 'az1', '--cold-migrate-stopped',
            '--output-file', self.path])
        saved = plan_mod.read(self.path)
        self.assertIs(True, saved.options['cold_migrate_stopped'])
        self.assertEqual({'a1', 'off'}, {m.server_name for m in saved.moves})
        # Not without the operator's word on the command line.
        error = self.assertRaises(exceptions.CommandError, self.apply,
                                  [self.path, '-f', 'json'])
        self.assertIn('was planned with --cold-migrate-stopped: its stopped '
                      'servers migrate cold; run it with '
                      '--cold-migrate-stopped', str(error))
        self.assertEqual([], self.nova.calls)
        code, out, err = self.apply([self.path, '--cold-migrate-stopped',
                                     '--disable-freed', REASON, '-f',
                                     'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual({'done'}, {r['Status'] for r in json.loads(out)})
        types = {m['server_id']: m['migration_type']
                 for m in self.nova.migrations}
        self.assertEqual({'id-off': 'migration', 'id-a1': 'live-migration'},
                         types)
        self.assertIn(('confirm', 'id-off'), self.nova.calls)
        self.assertEqual('SHUTOFF', self.nova.servers['id-off']['status'])
        self.assertEqual({'hv4'}, {self.nova.servers[s]['hypervisor']
                                   for s in ('id-off', 'id-a1')})
        self.assertIn(('set_service', 'cmp-hv1', False, REASON),
                      self.nova.calls)

    def test_a_stopped_server_keeps_its_host_without_the_flag(self):
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', self.snap, '--free-hosts', '1',
            '--availability-zone', 'az1', '--output-file', self.path])
        self.assertEqual({'hv2'}, {r[2] for r in rows})
        self.assertIn('Not freed: hv1 (az1/Gen1): off cannot move: status '
                      'SHUTOFF: stopped servers stay (use '
                      '--cold-migrate-stopped to move them)',
                      self.app.stderr.getvalue())
        code, out, err = self.apply([self.path, '--cold-migrate-stopped',
                                     '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)  # live ones only
        self.assertEqual({'live-migration'}, {
            m['migration_type'] for m in self.nova.migrations})


class TestThroughTheShell(unittest.TestCase):
    """openstack leveller plan --free-hosts, then apply --dry-run of its
    plan file, through the real openstack shell against the stand-in cloud
    (tests/unit/standin.py: HTTP on 127.0.0.1)."""

    def run_cases(self, *cases):
        results = badinput.run(list(cases))
        for result in results:
            self.assertEqual([], result.problems, result.report())
        return results

    def test_plan_then_apply_dry_run(self):
        dirs = badinput.DIR
        (planned,) = self.run_cases(badinput.Case(
            'free-hosts', 'plan', ['leveller', 'plan', '--free-hosts',
                                   '--output-file', '-'],
            expect=('Free hosts: ', 'Freed: hv2 (az1/Gen1): 1 server, 16 GiB',
                    'Not freed: hv3 (az1/Gen1): no hypervisor of its domain '
                    'accepts cool3-0 (16 GiB): anti-affinity group web (1 '
                    'hypervisor)'),
            code=0, cloud=badinput.Cloud()))
        text = planned.stdout  # the plan file alone
        rows = json.loads(text)['moves']
        self.assertEqual({'hv2'}, {r['source'] for r in rows})
        self.assertEqual('free-hosts', json.loads(text)['kind'])
        (applied,) = self.run_cases(badinput.Case(
            'free-hosts', 'apply', ['leveller', 'apply', dirs + '/p.json',
                                    '--dry-run', '--disable-freed', 'spare',
                                    '-f', 'json'],
            expect=('Would disable the compute service of cmp-hv2: spare',),
            code=0, files={'p.json': text}, cloud=badinput.Cloud()))
        self.assertEqual(['would run'] * len(rows), [
            r['Status'] for r in json.loads(applied.stdout)])


class TestUserGuideExample(test_commands.CommandTest):
    def test_the_worked_example_is_real_output(self):
        """The user guide's examples of plan --free-hosts on the demo: the
        lines it shows are what the command says (but the time)."""
        page = test_doc_examples.USER_GUIDE.read_text()
        section = page.split('\nFreeing hypervisors: ``--free-hosts``\n')[1]
        blocks = section.split('.. code-block:: console\n\n')[1:3]
        for block in blocks:
            lines = [line[3:] for line in block.split('\n\n')[0].splitlines()]
            argv = lines[0].split()[4:]  # after "$ openstack leveller plan"
            self.app.stderr.truncate(0)
            self.app.stderr.seek(0)
            if '--output-file' in argv:
                argv[argv.index('--output-file') + 1] = os.path.join(
                    self.tmp.name, 'free.json')
            cmd = plan.PlanLeveller(self.app, None)
            parsed = self.check_parser(cmd, argv, [])
            cmd.take_action(parsed)
            said = self.app.stderr.getvalue().splitlines()
            shown = [line for line in lines[1:] if not line.startswith(
                ('+', '|', '...'))]
            self.assertTrue(shown)
            timed = re.compile(r'planned in [0-9.]+ s')
            for line in shown:
                self.assertIn(timed.sub('planned in - s', line).replace(
                    'saved to free.json', 'saved to ' + os.path.join(
                        self.tmp.name, 'free.json')),
                    [timed.sub('planned in - s', s) for s in said])
