"""apply and evacuate leave node_exporter textfile metrics of their run."""

import dataclasses
import os
import stat
import time

from osc_lib import exceptions

from osc_leveller.core.model import files
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.run import runmetrics
from osc_leveller.v1 import apply as apply_cmd
from osc_leveller.v1 import runfiles
from tests.unit import builders as b
from tests.unit.core import test_runmetrics
from tests.unit.v1 import test_commands

P = runmetrics.PREFIX


class MetricsFileTest(test_commands.SimulatedNovaTest):
    def setUp(self):
        super().setUp()
        self.textfiles = os.path.join(self.tmp.name, 'textfile')
        self.path = os.path.join(self.textfiles, 'leveller.prom')

    def metrics(self):
        with open(self.path) as f:
            return test_runmetrics.samples(f.read())

    def value(self, name, command='apply', **labels):
        labels['command'] = command
        return self.metrics()[P + name, frozenset(labels.items())]


class TestMetricsFile(MetricsFileTest):
    def test_a_cron_run_reports_its_moves_and_imbalance(self):
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual(0, self.value('last_run_exit_code'))
        self.assertEqual(1, self.value('last_run_moves', status='done',
                                       reason='migrated'))
        self.assertGreater(self.value('last_run_moves', status='not_started',
                                      reason='batch_limit'), 0)
        self.assertEqual(12 * 2 ** 30, self.value('last_run_migrated_bytes'))
        before = self.value('last_run_imbalance_before', domain='az1/Gen1')
        after = self.value('last_run_imbalance_after', domain='az1/Gen1')
        self.assertLess(after, before)
        self.assertEqual(self.value('last_run_timestamp_seconds'),
                         self.value('last_success_timestamp_seconds'))
        # node_exporter runs as another user; no temporary file is left.
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(['leveller.prom'], os.listdir(self.textfiles))
        with open(self.path) as f:
            self.assertNotIn('pr0m-secret', f.read())

    def test_a_failed_run_keeps_the_last_success(self):
        self.clouds_yaml['apply']['metrics_file'] = self.path  # the setting
        code, out, err = self.apply(['--batch', '1'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        success = self.value('last_success_timestamp_seconds')
        self.nova.behaviour.update(hv2='fail', hv3='fail', hv4='fail')
        code, out, err = self.apply(['--batch', '1'])
        self.assertEqual(apply_cmd.EXIT_PROBLEMS, code, err)
        self.assertEqual(3, self.value('last_run_exit_code'))
        self.assertEqual(1, self.value('last_run_moves', status='failed',
                                       reason='migration_failed'))
        self.assertEqual(0, self.value('last_run_migrated_bytes'))
        self.assertEqual(success, self.value('last_success_timestamp_seconds'))
        self.assertGreater(self.value('last_run_timestamp_seconds'), success)

    def test_refused_and_broken_runs_are_reported_too(self):
        held = runfiles.Lock(os.path.join(self.tmp.name, 'apply.lock'))
        held.acquire()
        code, out, err = self.apply(['--metrics-file', self.path])
        held.release()
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertEqual(4, self.value('last_run_exit_code'))
        self.assertNotIn(P + 'last_success_timestamp_seconds',
                         {name for name, _ in self.metrics()})
        # Settings that cannot be read: the flag still names the file.
        self.assertRaises(exceptions.CommandError, self.apply, [
            '--metrics-file', self.path, '--threshold', 'nan'])
        self.assertEqual(1, self.value('last_run_exit_code'))
        self.assertEqual([], self.nova.calls)

    def test_a_blackout_says_5_and_keeps_the_last_success(self):
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        success = self.value('last_success_timestamp_seconds')
        self.clouds_yaml['windows'] = {'blackout': ['* * * * *']}
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_WINDOW, code, err)
        self.assertEqual(5, self.value('last_run_exit_code'))
        self.assertEqual(success, self.value('last_success_timestamp_seconds'))
        self.assertNotIn(P + 'last_run_imbalance_before',
                         {name for name, _ in self.metrics()})

    def test_a_dry_run_writes_nothing(self):
        code, out, err = self.apply(['--dry-run', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertFalse(os.path.exists(self.textfiles))

    def test_a_file_that_cannot_be_written_does_not_hide_the_run(self):
        # Checked before the run; a directory put there during the run is
        # refused when the file is written, and the run's code stands.
        migrate = self.nova.live_migrate

        def live_migrate(*args, **kw):
            os.makedirs(self.path, exist_ok=True)
            return migrate(*args, **kw)

        self.nova.live_migrate = live_migrate
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_DONE, code)
        self.assertIn('The metrics file %s: is a directory, not a regular '
                      'file' % self.path, err)
        self.assertTrue(os.path.isdir(self.path))
        self.assertEqual(['leveller.prom'], os.listdir(self.textfiles))

    def test_a_directory_in_its_place_leaves_no_file_open(self):
        os.makedirs(self.path)
        before = len(os.listdir('/proc/self/fd'))
        for _ in range(5):
            self.assertEqual('', runfiles._previous(self.path))
        self.assertEqual(before, len(os.listdir('/proc/self/fd')))

    def test_what_is_not_a_regular_file_is_refused_before_the_run(self):
        os.makedirs(self.textfiles)
        journal = self.clouds_yaml['apply']['journal']
        lock = self.clouds_yaml['apply']['lock_file']
        make = {'a FIFO (named pipe)': os.mkfifo,
                'a directory': os.mkdir,
                'a socket': lambda p: os.mknod(p, stat.S_IFSOCK | 0o600)}
        commands = {
            'apply': lambda: self.apply(['--batch', '1', '--metrics-file',
                                         self.path]),
            'evacuate': lambda: test_commands.TestEvacuate.evacuate(
                self, ['hv1', '--metrics-file', self.path])}
        for kind, how in make.items():
            for name, command in commands.items():
                with self.subTest(kind=kind, command=name):
                    how(self.path)
                    error = self.assertRaises(exceptions.CommandError,
                                              command)
                    self.assertEqual('--metrics-file %s: is %s, not a '
                                     'regular file' % (self.path, kind),
                                     str(error))
                    # Nothing else was written: not even a second line
                    # about the metrics file.
                    self.assertNotIn('metrics file', self.app.stderr
                                     .getvalue())
                    mode = os.lstat(self.path).st_mode
                    self.assertEqual(kind, files.kind(mode))
                    if stat.S_ISDIR(mode):
                        os.rmdir(self.path)
                    else:
                        os.unlink(self.path)
        # Before the cloud, the journal and the lock.
        self.assertEqual(0, self.nova.snapshots)
        self.assertEqual([], self.nova.calls)
        self.assertFalse(os.path.exists(journal))
        self.assertFalse(os.path.exists(lock))

    def test_a_link_is_written_through_only_when_so_set(self):
        os.makedirs(self.textfiles)
        real = os.path.join(self.tmp.name, 'real.prom')
        os.symlink(real, self.path)
        error = self.assertRaises(exceptions.CommandError, self.apply, [
            '--batch', '1', '--metrics-file', self.path])
        self.assertEqual(
            '--metrics-file %s: is a symbolic link to %s; set '
            'output.follow_symlinks (--follow-symlinks) to write through it'
            % (self.path, real), str(error))
        self.assertFalse(os.path.exists(real))
        self.clouds_yaml['output'] = {'follow_symlinks': True}
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual(real, os.readlink(self.path))
        self.assertEqual(0, self.value('last_run_exit_code'))  # via the link

    def test_the_same_file_as_the_journal_is_refused(self):
        journal = self.clouds_yaml['apply']['journal']
        error = self.assertRaises(exceptions.CommandError, self.apply, [
            '--metrics-file', journal])
        self.assertEqual(
            '--metrics-file %s and apply.journal (clouds.yaml (devcloud)) %s '
            'are the same file: give each its own' % (journal, journal),
            str(error))
        self.assertFalse(os.path.exists(journal))

    def test_empty_is_none_and_overrides_the_setting(self):
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp.name)  # where a file named by blanks would go
        self.clouds_yaml['apply']['metrics_file'] = self.path
        code, out, err = self.apply(['--batch', '1', '--metrics-file', ''])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertFalse(os.path.exists(self.textfiles))
        error = self.assertRaises(exceptions.CommandError, self.apply, [
            '--metrics-file', '  '])
        self.assertEqual("--metrics-file: must be a file name, or empty text "
                         "for none (got '  ')", str(error))
        self.assertNotIn('  ', os.listdir('.'))
        error = self.assertRaises(exceptions.CommandError, self.apply, [
            '--metrics-file', '-'])
        self.assertIn('--metrics-file -: cannot be standard output', str(error))

    def test_evacuate_reports_as_evacuate(self):
        evacuate = test_commands.TestEvacuate.evacuate
        code, rows, err = evacuate(self, ['hv1', '--metrics-file', self.path,
                                          '-f', 'json'])
        self.assertEqual(0, code, err)
        self.assertEqual(0, self.value('last_run_exit_code', 'evacuate'))
        self.assertEqual(8, self.value('last_run_moves', 'evacuate',
                                       status='done', reason='migrated'))
        self.assertEqual(96 * 2 ** 30, self.value('last_run_migrated_bytes',
                                                  'evacuate'))
        # Over the hypervisors that stay in service: empty ones before.
        self.assertEqual(0, self.value('last_run_imbalance_before',
                                       'evacuate', domain='az1/Gen1'))
        self.assertGreater(self.value('last_run_imbalance_after', 'evacuate',
                                      domain='az1/Gen1'), 0)


class TestGuardInTheMetricsFile(MetricsFileTest):
    """What the guard finds goes into the file, and the last run that
    found the metrics plausible stays there while it holds."""

    def guarded(self, facts, cpu=None):
        """The cloud FakeNova shows, with the guard's facts of each
        hypervisor and, if given, each one's measured CPU now."""
        for hyp in self.nova.hyps:
            if cpu:
                hyp['metrics'] = {'cpu': cpu[hyp['name']], 'ram': 0.4}
        real = self.nova.snapshot

        def snapshot(moves=None):
            return dataclasses.replace(real(moves), guard=model.GuardFacts(
                reference=time.time() - 600, reference_from='metrics_file',
                window=60.0, hypervisors=model.frozen_mapping(facts)))
        self.nova.snapshot = snapshot

    def test_held_runs_say_why_and_keep_the_reference(self):
        self.guarded({'hv2': model.HostFacts(cpus=0)})
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertIn('Held: az1/Gen1 (imbalance ', err)
        self.assertIn('implausible metrics, nothing planned: capacity: '
                      'node_exporter of hv2 shows no CPUs (Placement: 32)',
                      err)
        self.assertEqual([], self.nova.calls)
        self.assertEqual(1, self.value('last_run_implausible_metrics',
                                       domain='az1/Gen1', reason='capacity'))
        # A wrong size compares nothing: this read is the next reference.
        first = self.value('last_plausible_timestamp_seconds')
        self.assertEqual(snapshot_io.parse_time(b.TAKEN_AT), first)
        # Then three of the four read saturated at once.
        before = model.HostMetrics(cpu=0.1, ram=0.4)
        self.guarded({h: model.HostFacts(cpus=32, before=before)
                      for h in ('hv1', 'hv2', 'hv3', 'hv4')},
                     cpu={'hv1': 0.1, 'hv2': 1.0, 'hv3': 1.0, 'hv4': 1.0})
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.path])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertIn('load_jump: 3 of 4 hypervisors\' CPU rose', err)
        self.assertEqual([], self.nova.calls)
        self.assertEqual(1, self.value('last_run_implausible_metrics',
                                       domain='az1/Gen1', reason='load_jump'))
        self.assertNotIn((P + 'last_run_implausible_metrics', frozenset({
            'command': 'apply', 'domain': 'az1/Gen1',
            'reason': 'capacity'}.items())), self.metrics())
        self.assertEqual(first, self.value('last_plausible_timestamp_seconds'))

    def test_evacuate_goes_on_from_allocations(self):
        self.guarded({'hv2': model.HostFacts(cpus=0)})
        evacuate = test_commands.TestEvacuate.evacuate
        code, rows, err = evacuate(self, ['hv1', '--metrics-file', self.path,
                                          '-f', 'json'])
        self.assertEqual(0, code, err)
        self.assertIn('Implausible metrics: az1/Gen1: capacity: node_exporter '
                      'of hv2 shows no CPUs (Placement: 32); destinations '
                      'there are chosen from Placement allocations', err)
        self.assertEqual(8, self.value('last_run_moves', 'evacuate',
                                       status='done', reason='migrated'))
        self.assertEqual(1, self.value('last_run_implausible_metrics',
                                       'evacuate', domain='az1/Gen1',
                                       reason='capacity'))
