"""What the commands that migrate share (apply, evacuate): their run
options, the lock and journal around a run, the refusals when Nova already
migrates or a maintenance window forbids moves, and their exit codes for
scripts."""

import datetime
import time
import uuid

from osc_lib import exceptions
from osc_lib.command import command

from osc_leveller.cloud import actions as actions_mod
from osc_leveller.cloud import measure
from osc_leveller.core import executor
from osc_leveller.core import files
from osc_leveller.core import runmetrics
from osc_leveller.core import windows
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import runfiles

COLUMNS = ('#', 'Server', 'Source', 'Destination', 'Status', 'Duration (s)',
           'Reason')
EXIT_ERROR = 1  # the shell's code of a CommandError
EXIT_REFUSED = 4  # another run holds the lock, or migrations are running
EXIT_WINDOW = 5  # a blackout window, or outside every allowed window
EXIT_INTERRUPTED = 130


class Refused(Exception):
    """Not started on purpose; exit EXIT_REFUSED."""


class InWindow(Refused):
    """Not started: the maintenance windows forbid moves now; exit
    EXIT_WINDOW."""


class MigratingCommand(command.Lister):
    """A command that runs migrations: its take_action sets exit_code.

    It fills self.record (core/runmetrics.py) as it goes: what the metrics
    file tells Prometheus once the run has ended, however it ended.
    """

    auth_required = False  # connects itself, like plan
    need_sort_by_cliff = False  # rows in execution order
    exit_code = 0
    verb = None  # apply or evacuate: the command label of its metrics
    effective = None  # the settings, once read
    # The instant the maintenance windows are checked at.
    now = staticmethod(lambda: datetime.datetime.now(datetime.timezone.utc))

    def run(self, parsed_args):
        self.exit_code = 0
        self.effective = None
        self.record = runmetrics.Record(self.verb, time.time())
        code = EXIT_ERROR  # what the shell makes of an exception
        try:
            super().run(parsed_args)
            code = self.exit_code
        except InWindow as exc:
            common.StderrWriter(self.app)('Refused: %s' % exc)
            code = EXIT_WINDOW
        except Refused as exc:
            common.StderrWriter(self.app)('Refused: %s' % exc)
            code = EXIT_REFUSED
        except KeyboardInterrupt:
            common.StderrWriter(self.app)(
                'Interrupted: live migrations already started go on in '
                'Nova; see "openstack server migration list"')
            code = EXIT_INTERRUPTED
        finally:
            self._write_metrics(parsed_args, code)
        return code

    def _write_metrics(self, parsed_args, code):
        """The metrics file of this run, if one is set; a dry run's never.

        When the settings could not be read, the --metrics-file flag still
        names it, so an alert sees the run that failed on its settings.
        """
        if parsed_args.dry_run:
            return
        path = self.effective['apply.metrics_file'] if self.effective \
            else common.given(parsed_args, 'metrics_file')
        if not path:
            return
        try:
            runfiles.write_metrics(path, self.record, code, time.time())
        except files.FileError as exc:
            # The run is over: its exit code says how it went; the file's
            # own failure must not hide it.
            message = str(exc)
            common.StderrWriter(self.app)(message[:1].upper() + message[1:])


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
              'apply.metrics_file')


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
        journal = _open_journal(effective, 'req-%s' % uuid.uuid4())
        journal('refused', reason=str(refusal), exit_code=EXIT_WINDOW,
                until=refusal.until and refusal.until.isoformat().replace(
                    '+00:00', 'Z'))
        journal.close()
        raise InWindow(refusal)


def _open_journal(effective, run_id):
    try:
        return runfiles.Journal(effective['apply.journal'], run_id)
    except OSError as exc:
        raise exceptions.CommandError('cannot open the journal %s: %s' % (
            effective['apply.journal'], exc)) from exc


def guarded(app, effective, body, history_hours=24.0):
    """body(actions, journal) with the journal open and the lock held.

    The connection sends one new global request id on every call, and the
    journal records it, so Nova's logs and the journal can be matched. The
    migration history read covers history_hours and what the balancing
    rules look at (common.history_hours).
    """
    run_id = 'req-%s' % uuid.uuid4()
    journal = _open_journal(effective, run_id)
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
        actions = actions_mod.Actions(
            common.open_connection(app, effective, run_id),
            metrics=measure.reader_from_settings(
                effective.section('prometheus')),
            history_hours=max(history_hours, common.history_hours(effective)),
            retries=effective['cloud.retries'],
            progress=common.progress_of(app))
        return body(actions, journal)
    except KeyboardInterrupt:
        journal('interrupted')
        raise
    finally:
        lock.release()
        journal.close()
