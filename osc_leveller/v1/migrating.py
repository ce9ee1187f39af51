"""What the commands that migrate share (apply, evacuate): their run
options, the lock and journal around a run, the refusals when Nova already
migrates or a maintenance window forbids moves, how a run ends (also on
SIGTERM or when the journal cannot be written), and their exit codes for
scripts."""

import contextlib
import datetime
import os
import signal
import socket
import threading
import time
import uuid

from osc_lib import exceptions
from osc_lib.command import command

from osc_leveller.cloud import actions as actions_mod
from osc_leveller.cloud import cloudlock
from osc_leveller.core.model import errors
from osc_leveller.core.model import files
from osc_leveller.core.run import executor
from osc_leveller.core.run import runmetrics
from osc_leveller.core.settings import windows
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import outputs
from osc_leveller.v1 import runfiles

COLUMNS = ('#', 'Server', 'Source', 'Destination', 'Status', 'Duration (s)',
           'Reason')
EXIT_ERROR = 1  # the shell's code of a CommandError
EXIT_PROBLEMS = 3  # moves failed, or the run stopped after moves started
EXIT_REFUSED = 4  # another run holds the lock, or migrations are running
EXIT_WINDOW = 5  # a blackout window, or outside every allowed window
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C)
EXIT_TERMINATED = 143  # SIGTERM (systemd, Kubernetes): 128 + 15, as shells say
# The files of a run: the metrics file it replaces, then those it appends
# to and locks.
RUN_FILES = ('apply.metrics_file', 'apply.journal', 'apply.lock_file')


class Refused(Exception):
    """Not started on purpose; exit EXIT_REFUSED."""


class InWindow(Refused):
    """Not started: the maintenance windows forbid moves now; exit
    EXIT_WINDOW."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived during a run. A KeyboardInterrupt, so that it ends
    the run as Ctrl-C does: the executor's results kept, the interrupted
    and end records, the lock released, the metrics file written; exit
    EXIT_TERMINATED."""


@contextlib.contextmanager
def _terminable():
    """While a run lasts, SIGTERM raises Terminated, once; then, or once the
    run's wrap-up starts (hold(), what this yields), it is ignored, so the
    metrics file is written whole. The handler before is put back after.
    Only the main thread receives signals: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return

    def hold():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def terminate(signum, frame):
        hold()
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield hold
    finally:
        # None: a handler not set from Python, which cannot be put back.
        signal.signal(signal.SIGTERM,
                      signal.SIG_DFL if previous is None else previous)


class MigratingCommand(command.Lister):
    """A command that runs migrations: its take_action sets exit_code.

    It fills self.record (core/run/runmetrics.py) as it goes: what the metrics
    file tells Prometheus once the run has ended, however it ended.
    """

    auth_required = False  # connects itself, like plan
    need_sort_by_cliff = False  # rows in execution order
    exit_code = 0
    verb = None  # apply or evacuate: the command label of its metrics
    effective = None  # the settings, once read
    metrics_file = None  # once the run's files are checked (check_files)
    record = None  # the run's runmetrics.Record, from run() on
    # The instant the maintenance windows are checked at.
    now = staticmethod(lambda: datetime.datetime.now(datetime.timezone.utc))

    def run(self, parsed_args):
        self.exit_code = 0
        self.effective = self.metrics_file = None
        self.record = runmetrics.Record(self.verb, time.time())
        code = EXIT_ERROR  # what the shell makes of an exception
        with _terminable() as hold:
            try:
                super().run(parsed_args)
                code = self.exit_code
            except InWindow as exc:
                common.StderrWriter(self.app)('Refused: %s' % exc)
                code = EXIT_WINDOW
            except Refused as exc:
                common.StderrWriter(self.app)('Refused: %s' % exc)
                code = EXIT_REFUSED
            except KeyboardInterrupt as exc:
                code = exit_code_of(exc)
                done = counts(self.record.results)['counts']
                common.StderrWriter(self.app)(
                    '%s: %slive migrations already started go on in Nova; '
                    'see "openstack server migration list"' % (
                        'Terminated (SIGTERM)' if code == EXIT_TERMINATED
                        else 'Interrupted', '%s; ' % summary(done)
                        if done else ''))
            finally:
                hold()
                self._write_metrics(parsed_args, code)
        return code

    def check_files(self, parsed_args, effective):
        """Refuse, before the journal, the lock or the cloud, a metrics
        file that cannot be written and a file named twice (v1/outputs.py).

        Without the settings (they could not be read), the flags alone.
        """
        named = [outputs.setting(effective, n) if effective else
                 outputs.flag(parsed_args, n) for n in RUN_FILES]
        outputs.check(
            named[:1], written=named[1:],
            read=outputs.read_files(parsed_args),
            follow=bool(effective and effective[outputs.FOLLOW]),
            no_stdout='the metrics file is replaced once the run has ended '
                      'and read again by the next run',
            makes_directory=True)
        self.metrics_file = named[0][1]

    def previous_plausible(self):
        """When a run last found the metrics plausible, as the metrics
        file says (None: no file, or it does not say): the guard's
        reference, kept in this run's file unless it finds them so."""
        path = self.metrics_file
        found = runmetrics.last_plausible(
            runfiles.previous(path), self.verb, time.time()) if path else None
        if self.record is not None:
            self.record.previous_plausible = found
        return found

    def examine(self, snapshot, options):
        """The guard's findings on the run's read of the cloud, recorded
        for the metrics file."""
        findings = common.examine(snapshot, self.effective, options,
                                  self.app)
        guard = snapshot.guard
        self.record.examined(findings, guard.read_at if guard and
                             guard.read_at else snapshot.taken_at)
        return findings

    def _write_metrics(self, parsed_args, code):
        """The metrics file of this run, if one is set and its check passed;
        a dry run's never.

        When the settings could not be read, the --metrics-file flag still
        names it, so an alert sees the run that failed on its settings.
        """
        if parsed_args.dry_run:
            return
        try:
            if self.effective is None:
                self.check_files(parsed_args, None)
            if self.metrics_file:
                runfiles.write_metrics(
                    self.metrics_file, self.record, code, time.time(),
                    follow=bool(self.effective and
                                self.effective[outputs.FOLLOW]))
        except (files.FileError, exceptions.CommandError) as exc:
            # The run is over: its exit code says how it went; the file's
            # own failure must not hide it.
            message = str(exc)
            common.StderrWriter(self.app)(message[:1].upper() + message[1:])


def exit_code_of(interruption):
    """The exit code of a run ended by this KeyboardInterrupt."""
    return EXIT_TERMINATED if isinstance(interruption, Terminated) \
        else EXIT_INTERRUPTED


def counts(results):
    """The journal's counts of the executor's results: {'counts': {status:
    moves}}."""
    found = {}
    for r in results:
        found[r.status] = found.get(r.status, 0) + 1
    return {'counts': found}


def summary(found):
    """'2 done, 1 skipped' of counts(...)['counts']."""
    return ', '.join('%d %s' % (n, status)
                     for status, n in sorted(found.items()))


def rows(results):
    """The table rows of the executor's results, numbered from 1. A server
    is named as the cloud read before its move names it (by its id when
    the cloud does not know it); the reason says when the plan names it
    otherwise."""
    return [(i, r.server or r.move.server_id, r.move.source,
             r.move.destination, r.status,
             None if r.duration is None else round(r.duration, 1),
             '; '.join(filter(None, (r.reason, r.plan_name and (
                 'the plan names it %s' % r.plan_name)))))
            for i, r in enumerate(results, start=1)]


def add_run_options(parser, dry_run_help):
    """Options of every command that migrates (apply, evacuate)."""
    flags.add(parser, 'apply.max_parallel', 'apply.timeout')
    parser.add_argument('--dry-run', action='store_true', default=False,
                        help=dry_run_help)
    flags.add(parser, 'apply.journal', 'apply.lock_file',
              'apply.metrics_file', outputs.FOLLOW)


def apply_options(effective, dry_run, **fields):
    """The executor's limits from the apply.* settings."""
    values = dict(batch=effective['apply.batch'],
                  max_parallel=effective['apply.max_parallel'],
                  timeout=effective['apply.timeout'],
                  poll_interval=effective['apply.poll_interval'],
                  stop_on_error=effective['apply.stop_on_error'],
                  dry_run=dry_run)
    values.update(fields)
    return executor.ApplyOptions(**values)


def refuse_if_running(snapshot, options, journal, own=()):
    """Refused when Nova already runs migrations on hypervisors in scope.

    own: source hosts whose outgoing migrations are this run's business.
    """
    running = [m for m in executor.in_flight(snapshot, options)
               if m.source_compute not in own]
    if running:
        why = '%s already running: %s' % (
            common.plural(len(running), 'migration'), ', '.join(
                '%s %s -> %s (%s)' % (m.server_id, m.source_compute,
                                      m.dest_compute, m.status)
                for m in running[:5]))
        journal('refused', reason=why)
        raise Refused(why)


def refuse_in_window(command, effective, dry_run, going_ahead=None):
    """InWindow when the windows forbid moves now, decided before the lock
    and any request to the cloud; the journal records the refusal.

    A dry run only says so; going_ahead names why the windows do not hold
    this run (a plan file, --ignore-windows), which is said too.
    """
    blackout, allowed = windows.schedule(
        effective['windows.blackout'], effective['windows.allowed'],
        effective['windows.time_zone'])
    refusal = windows.refusal(blackout, allowed, command.now())
    if refusal is None:
        return
    say = common.StderrWriter(command.app)
    if going_ahead:
        say('Note: %s; going ahead: %s' % (refusal, going_ahead))
    elif dry_run:
        say('Note: a run now would be refused (exit %d): %s' % (
            EXIT_WINDOW, refusal))
    else:
        journal = _open_journal(command, effective, 'req-%s' % uuid.uuid4())
        try:
            journal('refused', reason=str(refusal), exit_code=EXIT_WINDOW,
                    until=refusal.until and refusal.until.isoformat()
                    .replace('+00:00', 'Z'))
        finally:
            journal.close()
        raise InWindow(refusal)


def _open_journal(command, effective, run_id):
    """The run's journal; executor.JournalError (exit 1) when the path
    cannot be one, before anything is asked of the cloud."""
    return runfiles.Journal(effective['apply.journal'], run_id,
                            note=lambda text: common.StderrWriter(
                                command.app)('Note: ' + text))


def guarded(command, effective, body, history_hours=24.0,
            last_plausible=None, cloud_lock=None):
    """body(actions, journal) with the journal open and the lock held.

    The connection sends one new global request id on every call, and the
    journal records it, so Nova's logs and the journal can be matched. The
    migration history read covers history_hours and what the balancing
    rules look at (common.history_hours); Prometheus is asked what the
    guard needs, compared with last_plausible (common.metrics_reader). A
    run the body does not end (an error, an interruption) gets its end
    record here; a refused one ends with its refused record. With
    cloud_lock (seconds), the cloud lock is taken too, after the local
    one (cloud/cloudlock.py); another controller's refuses the run.
    """
    run_id = 'req-%s' % uuid.uuid4()
    journal = _open_journal(command, effective, run_id)
    lock = runfiles.Lock(effective['apply.lock_file'])
    try:
        try:
            lock.acquire()
        except runfiles.LockHeld as exc:
            journal('refused', reason=str(exc))
            raise Refused(str(exc)) from exc
        except OSError as exc:
            raise exceptions.CommandError('cannot take the lock %s: %s' % (
                lock.path, exc)) from exc
        conn = common.open_connection(command.app, effective, run_id)
        in_cloud = _cloud_lock(conn, cloud_lock, run_id, journal)
        actions = actions_mod.Actions(
            conn, cloud_lock=in_cloud,
            metrics=common.metrics_reader(effective, last_plausible,
                                          conn=conn),
            history_hours=max(history_hours, common.history_hours(effective)),
            retries=effective['cloud.retries'],
            progress=common.progress_of(command.app),
            max_images=effective['cloud.max_images'])
        return body(actions, journal)
    except Refused:
        raise
    except KeyboardInterrupt as exc:
        journal.last('interrupted', signal='SIGTERM' if isinstance(
            exc, Terminated) else 'SIGINT')
        journal.last('end', exit_code=exit_code_of(exc),
                     **counts(command.record.results))
        raise
    except Exception as exc:
        # A message made for the operator, or only what kind of failure:
        # an unexpected one may quote anything.
        journal.last('end', exit_code=EXIT_ERROR, reason=common.printable(
            str(exc)) if isinstance(exc, (errors.LevellerError,
                                          exceptions.CommandError))
            else type(exc).__name__)
        raise
    finally:
        lock.release()
        journal.close()


def _cloud_lock(conn, seconds, run_id, journal):
    """The cloud lock taken for seconds (None: none): Refused (exit 4)
    when another controller's run holds it."""
    if not seconds:
        return None
    lock = cloudlock.CloudLock(conn.compute, seconds, '%s pid %d %s' % (
        socket.gethostname(), os.getpid(), run_id))
    try:
        lock.acquire()
    except cloudlock.Held as exc:
        journal('refused', reason=str(exc))
        raise Refused(str(exc)) from exc
    except cloudlock.LockError as exc:
        raise exceptions.CommandError(str(exc)) from exc
    journal('cloud-lock', aggregate=cloudlock.NAME,
            until=cloudlock.text(lock.until))
    return lock


def execute(command, runner, moves, snapshot=None):
    """runner.run(moves, snapshot): its Run, whose results the run's record
    keeps; interrupted, what it left is kept there (and in the journal's
    end record) all the same."""
    try:
        run = runner.run(moves, snapshot=snapshot)
    except KeyboardInterrupt:
        if runner.interrupted is not None:
            command.record.results = runner.interrupted.results
        raise
    command.record.results = run.results
    return run


def end(command, journal, **fields):
    """The end record of a run the body ended, with its exit code.

    When the journal lost records of the run (now or before), the run is
    not a success: exit EXIT_PROBLEMS once Nova was asked for migrations,
    else it is the run's error (exit 1), as when the journal fails before
    any move. The reason goes to stderr unless the run said it already.
    """
    said = journal.error is not None
    if journal.unwritten:
        fields['unwritten'] = journal.unwritten
    journal.last('end', exit_code=command.exit_code, **fields)
    if journal.error is None:
        return
    if not executor.Run(command.record.results).requested:
        raise executor.JournalError(journal.error)
    if not said:
        common.StderrWriter(command.app)(
            journal.error[:1].upper() + journal.error[1:])
    command.exit_code = EXIT_PROBLEMS
