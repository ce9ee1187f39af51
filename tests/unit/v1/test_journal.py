"""The journal and the end of a run: whole lines, a torn line noticed, paths
that cannot be a journal, a journal that fills up, SIGTERM, and the exit
codes of a plan with nothing to run.

The end-to-end cases run the real ``openstack`` command in a subprocess
against the stand-in cloud (tests/unit/standin.py). A full file system is a
real one: an 8 KiB tmpfs mounted in a private mount namespace, which needs
root; without root those tests skip, unless OSC_LEVELLER_REQUIRE_NAMESPACE
is set (CI, as for tests/unit/test_output_paths.py), where they fail
instead.
"""

import fcntl
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

from osc_lib import exceptions

from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import apply as apply_cmd
from osc_leveller.v1 import migrating
from osc_leveller.v1 import runfiles
from tests.unit import builders as b
from tests.unit import standin
from tests.unit.core import test_executor
from tests.unit.core import test_runmetrics
from tests.unit.v1 import test_commands

REQUIRE = 'OSC_LEVELLER_REQUIRE_NAMESPACE'
MIGRATE = ('nova', 'POST', '/v2.1/servers/{id}/action')
SERVICE = ('nova', 'PUT', '/v2.1/os-services/{id}')
EXIT_CODE = 'openstack_leveller_last_run_exit_code'
MOVES = 'openstack_leveller_last_run_moves'


def need_root():
    """Root and unshare(1), or a skip; a failure when REQUIRE is set."""
    if os.geteuid() == 0 and shutil.which('unshare'):
        return
    if os.environ.get(REQUIRE):
        raise AssertionError('%s is set, but these tests need root and '
                             'unshare(1)' % REQUIRE)
    raise unittest.SkipTest('needs root (a private mount namespace): set %s '
                            'to make this a failure' % REQUIRE)


def openstack():
    found = shutil.which('openstack', path=os.path.dirname(
        sys.executable)) or shutil.which('openstack')
    if not found:
        raise unittest.SkipTest('no openstack command')
    return found


def metrics(path):
    with open(path) as f:
        return test_runmetrics.samples(f.read())


def sample(found, name, **labels):
    return found[name, frozenset(dict(labels, command='apply').items())]


def record(event='end', **fields):
    """A whole journal line as the journal writes it."""
    return json.dumps(dict({'time': '2026-11-26T00:00:00.000Z',
                            'request_id': 'req-old', 'event': event},
                           **fields)) + '\n'


class TestJournalFile(unittest.TestCase):
    """runfiles.Journal and read_journal on real files."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.path = os.path.join(self.tmp, 'state', 'journal.jsonl')
        self.notes = []

    def journal(self, path=None, run_id='req-1'):
        journal = runfiles.Journal(path or self.path, run_id,
                                   note=self.notes.append)
        self.addCleanup(journal.close)
        return journal

    def test_records_are_whole_lines_from_two_runs_at_once(self):
        first, second = self.journal(), self.journal(run_id='req-2')
        for i in range(50):
            first('migrate', server='s%d' % i, reason='x' * (i * 40))
            second('refused', reason='y' * (i * 30))
        records, notes = runfiles.read_journal(self.path)
        self.assertEqual([], notes)
        self.assertEqual(100, len(records))
        self.assertEqual(['req-1', 'req-2'] * 50,
                         [r['request_id'] for r in records])
        with open(self.path, 'rb') as f:
            self.assertTrue(f.read().endswith(b'\n'))
        self.assertEqual([], self.notes)

    def test_a_torn_last_line_is_said_once_and_kept(self):
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, 'w') as f:
            f.write(record('start') + '{"time": "2026-11-26T00:00:01')
        records, notes = runfiles.read_journal(self.path)
        self.assertEqual(['start'], [r['event'] for r in records])
        self.assertEqual(['%s line 2: a torn last line (no end of line), '
                          'skipped' % self.path], notes)
        journal = self.journal()
        self.assertEqual(1, len(self.notes))
        self.assertIn('the journal %s ends in a torn record (29 bytes '
                      'without an end of line' % self.path, self.notes[0])
        journal('start')
        journal('end', exit_code=0)
        self.journal()  # ends in a whole line now: nothing to say
        self.assertEqual(1, len(self.notes))
        records, notes = runfiles.read_journal(self.path)
        self.assertEqual(['start', 'start', 'end'],
                         [r['event'] for r in records])
        self.assertEqual(['%s line 2: not a whole record, skipped'
                          % self.path], notes)

    def test_a_write_cut_short_is_taken_back(self):
        # A file size limit makes the kernel write part of a record, as a
        # full disk does; in a child process, so the limit stays there.
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, 'w') as f:
            f.write(record('start'))
        size = os.path.getsize(self.path)
        code = textwrap.dedent('''
            import resource, sys
            from osc_leveller.core.run import executor
            from osc_leveller.v1 import runfiles
            journal = runfiles.Journal(sys.argv[1], 'req-2')
            resource.setrlimit(resource.RLIMIT_FSIZE, (%d, %d))
            journal('done')
            try:
                journal('done', reason='x' * 200)
            except executor.JournalError as exc:
                print(exc)
            try:
                journal('end')
            except executor.JournalError as exc:
                print('again:', exc)
            print(journal.last('end'), journal.unwritten)
            ''' % (size + 150, resource.RLIM_INFINITY))
        done = subprocess.run([sys.executable, '-c', code, self.path],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertEqual([
            'cannot write the journal %s: File too large' % self.path,
            'again: cannot write the journal %s: File too large' % self.path,
            'False 3'], done.stdout.splitlines())
        records, notes = runfiles.read_journal(self.path)
        self.assertEqual([], notes)
        self.assertEqual(['start', 'done'], [r['event'] for r in records])
        self.assertLess(os.path.getsize(self.path), size + 150)

    def refused(self, path, kind):
        with self.assertRaises(executor.JournalError) as caught:
            self.journal(path)
        error = caught.exception
        self.assertEqual('cannot write the journal %s: it is %s, not a '
                         'regular file (/dev/null, or an empty '
                         'apply.journal, for none)' % (path, kind),
                         str(error))

    def test_what_cannot_be_a_journal_is_refused(self):
        self.refused(self.tmp, 'a directory')
        fifo = os.path.join(self.tmp, 'fifo')
        os.mkfifo(fifo)
        # Opened, a FIFO without a reader would block: refused at once.
        opened = threading.Thread(target=self.refused, args=(fifo, 'a FIFO (named pipe)'),
                                  daemon=True)
        opened.start()
        opened.join(10)
        self.assertFalse(opened.is_alive(), 'the FIFO blocked the journal')
        sock = socket.socket(socket.AF_UNIX)
        self.addCleanup(sock.close)
        sock.bind(os.path.join(self.tmp, 'socket'))
        self.refused(os.path.join(self.tmp, 'socket'), 'a socket')
        link = os.path.join(self.tmp, 'to-fifo')
        os.symlink(fifo, link)
        self.refused(link, 'a FIFO (named pipe)')

    def test_devices_but_dev_null(self):
        if os.geteuid() != 0:
            need_root()
        # Nodes of their own, so no test writes to the real /dev.
        for name, minor, kind in (('full', 7, 'a character device'),
                                  ('zero', 5, 'a character device')):
            node = os.path.join(self.tmp, name)
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            self.refused(node, kind)
        disk = os.path.join(self.tmp, 'disk')
        os.mknod(disk, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
        self.refused(disk, 'a block device')
        journal = self.journal(os.devnull)
        journal('start')
        self.assertTrue(journal.last('end'))

    def test_a_symlink_is_followed_and_kept(self):
        target = os.path.join(self.tmp, 'real.jsonl')
        link = os.path.join(self.tmp, 'link.jsonl')
        os.symlink(target, link)
        self.journal(link)('start')
        self.assertTrue(os.path.islink(link))
        self.assertEqual(['start'], [r['event'] for r in
                                     runfiles.read_journal(target)[0]])

    def test_a_directory_that_cannot_be_made(self):
        blocker = os.path.join(self.tmp, 'file')
        open(blocker, 'w').close()
        path = os.path.join(blocker, 'journal.jsonl')
        with self.assertRaises(executor.JournalError) as caught:
            self.journal(path)
        error = caught.exception
        self.assertEqual('cannot write the journal %s: Not a directory'
                         % path, str(error))


class TestEndOfARun(test_commands.SimulatedNovaTest):
    """The command's side, in this process over FakeNova."""

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.tmp.name, 'journal.jsonl')
        self.prom = os.path.join(self.tmp.name, 'leveller.prom')

    def plan_file(self, **options):
        path = os.path.join(self.tmp.name, 'plan.json')
        plan_mod.write(planner.make_plan(
            self.nova.snapshot(), core_options.PlannerOptions(**options)),
            path)
        return path

    def test_a_path_that_cannot_be_a_journal_stops_the_run_first(self):
        error = self.assertRaises(exceptions.CommandError, self.apply, [
            '--journal', self.tmp.name, '--metrics-file', self.prom])
        self.assertIn('cannot write the journal %s: it is a directory'
                      % self.tmp.name, str(error))
        self.assertEqual([], self.nova.calls)
        self.assertEqual(0, self.nova.snapshots)  # nor read the cloud
        self.assertEqual(1, sample(metrics(self.prom), EXIT_CODE))

    def test_a_torn_line_is_said_and_the_run_goes_on(self):
        with open(self.path, 'w') as f:
            f.write(record('start') + '{"event": "mig')
        code, out, err = self.apply(['--batch', '1'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual(1, err.count('Note: the journal %s ends in a torn '
                                      'record (14 bytes' % self.path))
        records, notes = runfiles.read_journal(self.path)
        self.assertEqual(['%s line 2: not a whole record, skipped'
                          % self.path], notes)
        self.assertEqual(['start', 'start', 'migrate', 'done'],
                         [r['event'] for r in records][:4])
        self.assertEqual('end', records[-1]['event'])

    def test_every_move_skipped_is_not_a_success(self):
        path = self.plan_file()
        code, out, err = self.apply(['--batch', '1', '--metrics-file',
                                     self.prom])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        success = sample(metrics(self.prom),
                         'openstack_leveller_last_success_timestamp_seconds')
        # The plan, made before that run, now has every server elsewhere.
        for move in plan_mod.read(path).moves:
            self.nova.servers[move.server_id]['hypervisor'] = \
                move.destination
        for dry_run in ([], ['--dry-run']):
            code, out, err = self.apply([path, '-f', 'json', '--metrics-file',
                                         self.prom] + dry_run)
            self.assertEqual(apply_cmd.EXIT_ALL_SKIPPED, code, err)
            self.assertEqual({'skipped'},
                             {r['Status'] for r in json.loads(out)})
            self.assertIn(': no move of the plan holds on the cloud now '
                          '(exit code 6)', err)
        found = metrics(self.prom)  # the run's, not the dry run's
        self.assertEqual(6, sample(found, EXIT_CODE))
        self.assertEqual(len(plan_mod.read(path).moves), sample(
            found, MOVES, status='skipped', reason='server_moved'))
        self.assertEqual(success, sample(
            found, 'openstack_leveller_last_success_timestamp_seconds'))
        self.assertEqual(6, runfiles.read_journal(self.path)[0][-1][
            'exit_code'])

    def test_an_empty_plan_says_so(self):
        path = self.plan_file(threshold=1.0)
        self.assertFalse(plan_mod.read(path).moves)
        code, out, err = self.apply([path, '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual([], json.loads(out))
        self.assertIn('Nothing to do: the plan file %s has no moves '
                      '(imbalance is below the threshold' % path, err)
        self.assertNotIn('Apply:', err)
        self.assertEqual({'event': 'end', 'reason': 'nothing to do',
                          'exit_code': 0}, {
            k: v for k, v in runfiles.read_journal(self.path)[0][-1].items()
            if k not in ('time', 'request_id')})
        self.assertEqual([], self.nova.calls)

    def test_sigterm_ends_the_run_like_ctrl_c(self):
        if threading.current_thread() is not threading.main_thread():
            self.skipTest('signals reach the main thread only')

        class Unhandled(Exception):
            pass

        def not_ours(signum, frame):
            raise Unhandled('SIGTERM reached the handler before the run')

        before = signal.signal(signal.SIGTERM, not_ours)
        self.addCleanup(signal.signal, signal.SIGTERM, before)
        real = self.nova.live_migrate
        handlers = []

        def migrate_then_sigterm(server_id, host, **kw):
            real(server_id, host, **kw)
            handlers.append(signal.getsignal(signal.SIGTERM))
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # interrupted by the handler at once
        self.nova.live_migrate = migrate_then_sigterm
        started = time.monotonic()
        code, out, err = self.apply(['--metrics-file', self.prom])
        self.assertLess(time.monotonic() - started, 4)
        self.assertEqual(migrating.EXIT_TERMINATED, code, err)
        self.assertNotEqual(not_ours, handlers[0])
        self.assertIs(not_ours, signal.getsignal(signal.SIGTERM))
        self.assertIn('Terminated (SIGTERM): ', err)
        records = runfiles.read_journal(self.path)[0]
        self.assertEqual(['interrupted', 'end'],
                         [r['event'] for r in records[-2:]])
        self.assertEqual('SIGTERM', records[-2]['signal'])
        self.assertEqual(143, records[-1]['exit_code'])
        self.assertEqual(1, records[-1]['counts']['started'])
        self.assertEqual(143, sample(metrics(self.prom), EXIT_CODE))
        held = runfiles.Lock(os.path.join(self.tmp.name, 'apply.lock'))
        held.acquire()  # free: not LockHeld
        held.release()


class LiveCloud:
    """The stand-in cloud (hot_cloud: eight servers on hv1 of four
    hypervisors) and the settings to run the real command against it."""

    def __init__(self, test, **standin_args):
        hyps, servers = test_executor.hot_cloud()
        self.cloud = standin.StandIn(b.document(hyps, servers),
                                     **standin_args)
        self.cloud.start()
        test.addCleanup(self.cloud.stop)
        self.dir = tempfile.mkdtemp()
        test.addCleanup(shutil.rmtree, self.dir)
        self.clouds_yaml = self.cloud.write_clouds_yaml(
            self.path('clouds.yaml'), extra={'leveller': {
                'prometheus': {'url': ''},
                'apply': {'poll_interval': 0.2,
                          'lock_file': self.path('apply.lock')}}})
        self.env = self.cloud.shell_env(self.clouds_yaml)
        self.env['HOME'] = self.dir

    def path(self, name):
        return os.path.join(self.dir, name)

    def argv(self, *args):
        return [openstack(), '--os-cloud', 'standin', 'leveller'] + list(args)

    def lock_is_free(self):
        with open(self.path('apply.lock')) as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # else an error
        return True


class TestSignals(unittest.TestCase):
    """SIGTERM and SIGINT to a real apply while a migration is in flight."""

    def interrupt(self, signum):
        live = LiveCloud(self, migration_outcome='running')  # never ends
        journal, prom = live.path('journal.jsonl'), live.path('apply.prom')
        err_path = live.path('stderr')
        with open(err_path, 'w') as err:
            process = subprocess.Popen(
                live.argv('apply', '--journal', journal, '--metrics-file',
                          prom, '-f', 'json'),
                env=live.env, stdout=subprocess.PIPE, stderr=err, text=True,
                # A runner started in the background ignores SIGINT, and
                # so would the child: Python then never raises
                # KeyboardInterrupt. Ctrl-C's default, as in a terminal.
                preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                 signal.SIG_DFL))
        self.addCleanup(lambda: process.poll() is None and process.kill())
        deadline = time.monotonic() + 60
        while 'web0 hv1 -> hv2: migrating' not in open(err_path).read():
            self.assertIsNone(process.poll(), open(err_path).read())
            self.assertLess(time.monotonic(), deadline, 'no migration')
            time.sleep(0.1)
        process.send_signal(signum)
        out, _ = process.communicate(timeout=60)
        return live, process.returncode, out, open(err_path).read(), \
            runfiles.read_journal(journal), metrics(prom)

    def test_sigterm(self):
        live, code, out, err, (records, notes), found = self.interrupt(
            signal.SIGTERM)
        self.assertEqual(143, code, err)
        self.assertEqual('', out)
        self.assertIn('Terminated (SIGTERM): 4 not started, 1 started; live '
                      'migrations already started go on in Nova', err)
        self.assertNotIn('Traceback', err)
        self.assertEqual([], notes)
        self.assertEqual(['start', 'migrate', 'started'] + [
            'not-started'] * 4 + ['interrupted', 'end'],
            [r['event'] for r in records])
        self.assertEqual('SIGTERM', records[-2]['signal'])
        self.assertEqual({'exit_code': 143, 'counts': {
            'started': 1, 'not started': 4}}, {
            k: records[-1][k] for k in ('exit_code', 'counts')})
        self.assertEqual(143, sample(found, EXIT_CODE))
        self.assertEqual(1, sample(found, MOVES, status='started',
                                   reason='not_waited'))
        self.assertEqual(4, sample(found, MOVES, status='not_started',
                                   reason='interrupted'))
        self.assertTrue(live.lock_is_free())
        self.assertEqual(1, live.cloud.counts[MIGRATE])  # left to Nova

    def test_sigint(self):
        live, code, out, err, (records, notes), found = self.interrupt(
            signal.SIGINT)
        self.assertEqual(130, code, err)
        self.assertIn('Interrupted: 4 not started, 1 started;', err)
        self.assertEqual(['interrupted', 'end'],
                         [r['event'] for r in records[-2:]])
        self.assertEqual('SIGINT', records[-2]['signal'])
        self.assertEqual(130, records[-1]['exit_code'])
        self.assertEqual(130, sample(found, EXIT_CODE))
        self.assertTrue(live.lock_is_free())


class TestFullFileSystem(unittest.TestCase):
    """The journal on an 8 KiB tmpfs, in a private mount namespace."""

    def setUp(self):
        need_root()
        self.live = LiveCloud(self)
        self.tiny = self.live.path('tiny')  # a mount point in there only
        os.mkdir(self.tiny)
        self.journal = os.path.join(self.tiny, 'journal.jsonl')
        self.prom = self.live.path('apply.prom')

    def in_namespace(self, setup, *args, prefill=None):
        """(exit code, stdout, stderr, journal bytes after) of one command
        run after the shell lines of setup, in a private mount namespace;
        prefill: the journal's bytes before the run."""
        for name in ('prefill', 'after'):
            if os.path.exists(self.live.path(name)):
                os.unlink(self.live.path(name))
        if prefill is not None:
            with open(self.live.path('prefill'), 'wb') as f:
                f.write(prefill)
        argv = ' '.join("'%s'" % a for a in self.live.argv(*args))
        script = textwrap.dedent('''\
            set -e
            {setup}
            [ -f "$DIR/prefill" ] && cp "$DIR/prefill" "$TINY/journal.jsonl"
            set +e
            {argv} >"$DIR/out" 2>"$DIR/err"
            code=$?
            [ -f "$TINY/journal.jsonl" ] && cp "$TINY/journal.jsonl" "$DIR/after"
            exit $code
            ''').format(setup=setup, argv=argv)
        done = subprocess.run(
            ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
             script], env=dict(self.live.env, DIR=self.live.dir,
                               TINY=self.tiny),
            capture_output=True, text=True, timeout=300)
        after = b''
        if os.path.exists(self.live.path('after')):
            with open(self.live.path('after'), 'rb') as f:
                after = f.read()
        with open(self.live.path('out')) as out, \
                open(self.live.path('err')) as err:
            return done.returncode, out.read(), err.read() + done.stderr, \
                after

    TMPFS = 'mount -t tmpfs -o size=8k leveller-journal "$TINY"'

    def old_records(self, size):
        """Whole lines of an earlier run, size bytes in all."""
        line = record(pad='x' * 150).encode()
        lines = line * (size // len(line) - 1)
        last = size - len(lines) - len(record(pad=''))
        return lines + record(pad='x' * last).encode()

    def test_full_before_the_first_move(self):
        before = self.old_records(8192)  # to the last byte
        code, out, err, after = self.in_namespace(
            self.TMPFS, 'apply', '--batch', '1', '--journal', self.journal,
            '--metrics-file', self.prom, '-f', 'json', prefill=before)
        self.assertEqual(1, code, err)
        self.assertEqual('cannot write the journal %s: No space left on '
                         'device\n' % self.journal, err)
        self.assertEqual('', out)
        self.assertEqual(before, after)  # untouched
        self.assertEqual(0, self.live.cloud.counts[MIGRATE])
        self.assertEqual(1, sample(metrics(self.prom), EXIT_CODE))
        self.assertTrue(self.live.lock_is_free())

    def test_full_after_two_migrations(self):
        # About 1,200 bytes free: start, then migrate and done twice fit;
        # the third migrate record is cut by the full disk.
        before = self.old_records(8192 - 1200)
        code, out, err, after = self.in_namespace(
            self.TMPFS, 'apply', '--max-parallel', '1', '--journal',
            self.journal, '--metrics-file', self.prom, '-f', 'json',
            prefill=before)
        self.assertEqual(3, code, err)
        rows = json.loads(out)
        why = 'cannot write the journal %s: No space left on device' % \
            self.journal
        self.assertEqual(['done', 'done', 'not started', 'not started',
                          'not started'], [r['Status'] for r in rows])
        self.assertEqual({why}, {r['Reason'] for r in rows[2:]})
        self.assertIn('Stopped: %s\nApply: 2 done, 3 not started\n' % why,
                      err)
        self.assertNotIn('Traceback', err)
        # Nova was asked for exactly the migrations the journal shows.
        self.assertEqual(2, self.live.cloud.counts[MIGRATE])
        self.assertTrue(after.startswith(before))
        self.assertTrue(after.endswith(b'\n'), after[-300:])
        with open(self.live.path('journal.jsonl'), 'wb') as f:
            f.write(after)
        records, notes = runfiles.read_journal(f.name)
        self.assertEqual([], notes)
        self.assertEqual(['start', 'migrate', 'done', 'migrate', 'done'],
                         [r['event'] for r in records
                          if r['request_id'] != 'req-old'])
        found = metrics(self.prom)
        self.assertEqual(3, sample(found, EXIT_CODE))
        self.assertEqual(2, sample(found, MOVES, status='done',
                                   reason='migrated'))
        self.assertEqual(3, sample(found, MOVES, status='not_started',
                                   reason='journal_unwritable'))
        self.assertTrue(self.live.lock_is_free())

    def test_a_drain_changes_nothing_it_cannot_journal(self):
        # Room for the start record, not for disable-service after it.
        code, out, err, after = self.in_namespace(
            self.TMPFS, 'evacuate', 'hv1', '--dry-run', '--journal',
            self.journal)
        self.assertEqual(0, code, err)
        start = next(line for line in after.splitlines(keepends=True)
                     if b'"start"' in line)
        before = self.old_records(8192 - len(start) - 40)
        code, out, err, after = self.in_namespace(
            self.TMPFS, 'evacuate', 'hv1', '--journal', self.journal,
            '--metrics-file', self.prom, prefill=before)
        self.assertEqual(1, code, err)
        self.assertIn('cannot write the journal %s: No space left on device'
                      % self.journal, err)
        self.assertEqual(0, self.live.cloud.counts[SERVICE])
        self.assertEqual(0, self.live.cloud.counts[MIGRATE])
        self.assertTrue(after.endswith(b'"dry_run": false, "moves": 8, '
                                       b'"stay": 0, "unplaced": 0}\n'),
                        after[-300:])
        self.assertEqual(1, metrics(self.prom)[EXIT_CODE, frozenset(
            {'command': 'evacuate'}.items())])

    def test_dev_full_and_dev_null(self):
        # /dev of the namespace only: a tmpfs with the nodes it needs.
        dev = textwrap.dedent('''\
            mount -t tmpfs -o size=64k,mode=755 leveller-dev /dev
            for node in null:3 zero:5 full:7 random:8 urandom:9; do
                mknod -m 666 "/dev/${node%:*}" c 1 "${node#*:}"
            done''')
        code, out, err, _ = self.in_namespace(
            dev + '\n[ -c /dev/full ]', 'apply', '--batch', '1',
            '--journal', '/dev/full', '--metrics-file', self.prom)
        self.assertEqual(1, code, err)
        self.assertEqual('cannot write the journal /dev/full: it is a '
                         'character device, not a regular file (/dev/null, '
                         'or an empty apply.journal, for none)\n', err)
        self.assertEqual(0, self.live.cloud.counts[MIGRATE])
        code, out, err, _ = self.in_namespace(
            dev, 'apply', '--batch', '1', '--journal', '/dev/null',
            '-f', 'value', '-c', 'Status')
        self.assertEqual(0, code, err)
        self.assertEqual('done', out.split()[0])
        self.assertEqual(1, self.live.cloud.counts[MIGRATE])
