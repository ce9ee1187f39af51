"""The commands' outputs: refused before any work when they cannot be
written as asked, never one file twice, and ``-`` for standard output."""

import io
import json
import os
import stat
from unittest import mock

from osc_lib import exceptions

from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.v1 import config as config_cmd
from osc_leveller.v1 import plan
from osc_leveller.v1 import score
from osc_leveller.v1 import snapshot
from tests.unit import builders as b
from tests.unit.v1 import test_commands


class TestOutputs(test_commands.CommandTest):
    def setUp(self):
        super().setUp()
        self.snapshot = self.at('snapshot.json')
        hyps, servers = b.three_hosts()
        self.document = b.document(hyps, servers)
        self.write('snapshot.json', self.document)

    def at(self, name):
        return os.path.join(self.tmp.name, name)

    def run_display(self, cls, args):
        """Run as the shell does, formatting included: (stdout text)."""
        cmd = cls(self.app, None)
        parsed = self.check_parser(cmd, args, [])
        self.app.stdout = io.StringIO()
        cmd.run(parsed)
        return self.app.stdout.getvalue()

    def commands(self, path):
        """Each output option given path, with what makes it run."""
        return {
            'plan --output-file': (plan.PlanLeveller, [
                '--snapshot', self.snapshot, '--output-file', path]),
            'plan --report': (plan.PlanLeveller, [
                '--snapshot', self.snapshot, '--report', path]),
            'score --report': (score.ScoreLeveller, [
                '--snapshot', self.snapshot, '--report', path]),
            'snapshot --output-file': (snapshot.SnapshotLeveller, [
                '--output-file', path]),
        }

    def test_refused_before_any_work_and_left_as_it_was(self):
        fifo, sock, link = self.at('fifo'), self.at('sock'), self.at('link')
        os.mkfifo(fifo)
        os.mknod(sock, stat.S_IFSOCK | 0o600)
        os.symlink('real', link)
        for path, what in ((fifo, 'is a FIFO (named pipe), not a regular '
                                  'file'),
                           (sock, 'is a socket, not a regular file'),
                           (self.tmp.name, 'is a directory, not a regular '
                                           'file'),
                           (link, 'is a symbolic link to real; set '
                                  'output.follow_symlinks')):
            before = os.lstat(path)
            for label, (cls, args) in self.commands(path).items():
                with self.subTest(path=path, command=label):
                    read = mock.Mock(side_effect=AssertionError('read'))
                    with mock.patch.object(snapshot.common, 'read_cloud',
                                           read), \
                            mock.patch.object(plan.planner, 'make_plan',
                                              side_effect=AssertionError):
                        error = self.assertRaises(
                            exceptions.CommandError, self.run_cmd, cls, args)
                    option = label.split()[1]
                    self.assertEqual('%s %s: %s' % (option, path, what),
                                     str(error)[:len(option + path + what)
                                                + 3])
                    read.assert_not_called()
                    after = os.lstat(path)
                    self.assertEqual((before.st_ino, before.st_mode),
                                     (after.st_ino, after.st_mode))
        self.assertFalse(os.path.exists(self.at('real')))

    def test_a_link_is_written_through_when_so_set(self):
        os.symlink('plan.json', self.at('link'))
        self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--output-file', self.at('link'),
            '--follow-symlinks'])
        self.assertEqual('plan.json', os.readlink(self.at('link')))
        self.assertTrue(plan_mod.read(self.at('plan.json')).moves)
        os.symlink('report.html', self.at('report-link'))
        self.clouds_yaml = {'output': {'follow_symlinks': True}}
        self.run_cmd(score.ScoreLeveller, [
            '--snapshot', 'demo', '--report', self.at('report-link')])
        with open(self.at('report.html')) as f:
            self.assertIn('<svg', f.read())

    def test_one_file_twice_is_refused_before_any_work(self):
        os.link(self.snapshot, self.at('hard.json'))
        config = self.write('settings.yaml', 'threshold: 0.05\n')
        targets = self.write('targets.yaml', 'web0: hv2\n')
        plan_args = ['--snapshot', self.snapshot]
        cases = (
            (plan_args + ['--output-file', self.snapshot],
             '--output-file %s and --snapshot %s' % (self.snapshot,
                                                     self.snapshot)),
            (plan_args + ['--report', self.at('hard.json')],
             '--report %s and --snapshot %s' % (self.at('hard.json'),
                                                self.snapshot)),
            (plan_args + ['--output-file', self.at('p.json'), '--report',
                          os.path.join(self.tmp.name, '.', 'p.json')],
             '--output-file %s and --report %s/./p.json' % (
                 self.at('p.json'), self.tmp.name)),
            (plan_args + ['--config', config, '--output-file', config],
             '--output-file %s and --config %s' % (config, config)),
            (plan_args + ['--target-placement', targets, '--report',
                          targets],
             '--report %s and --target-placement %s' % (targets, targets)),
        )
        for args, names in cases:
            with self.subTest(args=args):
                with mock.patch.object(plan.planner, 'make_plan',
                                       side_effect=AssertionError):
                    self.assert_command_error(
                        plan.PlanLeveller, args,
                        names + ' are the same file: give each its own')
        self.assert_command_error(
            score.ScoreLeveller, ['--snapshot', self.snapshot, '--report',
                                  self.snapshot],
            '--report %s and --snapshot %s are the same file' % (
                self.snapshot, self.snapshot))
        with open(self.snapshot) as f:
            self.assertEqual(self.document, json.load(f))
        self.assertFalse(os.path.exists(self.at('p.json')))

    def test_dash_is_standard_output_and_all_of_it(self):
        out = self.run_display(plan.PlanLeveller, [
            '--snapshot', 'demo', '--output-file', '-', '-f', 'json'])
        self.assertEqual(plan_mod.FORMAT, json.loads(out)['format'])
        self.assertIn('saved to standard output', self.app.stderr.getvalue())
        self.assertFalse(os.path.exists('-'))
        out = self.run_display(score.ScoreLeveller, [
            '--snapshot', 'demo', '--report', '-'])
        self.assertTrue(out.startswith('<!DOCTYPE html>'), out[:80])
        self.assertTrue(out.rstrip().endswith('</html>'), out[-80:])
        with self.live(self.document):
            out = self.run_display(snapshot.SnapshotLeveller, [
                '--output-file', '-'])
        self.assertEqual(self.document['hypervisors'],
                         json.loads(out)['hypervisors'])
        self.assertIn('Snapshot of 3 hypervisors and 8 servers taken at %s '
                      'written to standard output' % b.TAKEN_AT,
                      self.app.stderr.getvalue())
        # Without -, the table as always.
        out = self.run_display(plan.PlanLeveller, [
            '--snapshot', 'demo', '--output-file', self.at('p.json'), '-f',
            'json'])
        self.assertEqual(14, len(json.loads(out)))

    def test_dash_twice_or_where_not_allowed_is_refused(self):
        self.assert_command_error(
            plan.PlanLeveller, ['--snapshot', 'demo', '--output-file', '-',
                                '--report', '-'],
            '--output-file -, --report -: only one output can be standard '
            'output')
        for option in ('--output-file', '--report'):
            self.assert_command_error(
                plan.PlanLeveller, ['--snapshot', 'demo', '--explain', 'x',
                                    option, '-'],
                '--explain and %s do not go together' % option)

    def test_empty_file_settings_show_as_none(self):
        config = self.write('settings.yaml', 'apply:\n  journal: ""\n')
        names, rows = self.run_cmd(config_cmd.ShowConfig,
                                   ['--config', config])
        shown = {name: value for name, value, source in rows}
        for name in ('apply.journal', 'apply.metrics_file'):
            self.assertEqual('(none)', shown[name].human_readable())
            self.assertIsNone(shown[name].machine_readable())
        self.assertEqual('false', shown['output.follow_symlinks']
                         .human_readable())
        for value in ('', '  '):
            self.assert_command_error(
                config_cmd.ShowConfig, ['--config', self.write(
                    'lock.yaml', 'apply:\n  lock_file: "%s"\n' % value)],
                'apply.lock_file: must be a file name, not empty')
