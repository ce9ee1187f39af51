"""openstack leveller apply"""

import uuid

from osc_lib import exceptions
from osc_lib.command import command

from osc_leveller.cloud import actions as actions_mod
from osc_leveller.cloud import measure
from osc_leveller.core import checks
from osc_leveller.core import executor
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import planner
from osc_leveller.v1 import common
from osc_leveller.v1 import runfiles

COLUMNS = ('#', 'Server', 'Source', 'Destination', 'Status', 'Duration (s)',
           'Reason')
# Exit codes for scripts (documented in the user guide).
EXIT_DONE = 0  # every move done, or nothing to do
EXIT_ERROR = 1  # error before any move (bad input, cloud unreadable)
EXIT_PROBLEMS = 3  # some moves failed, timed out or were aborted
EXIT_REFUSED = 4  # another run holds the lock, or migrations are running
EXIT_INTERRUPTED = 130


class Refused(Exception):
    """Not started on purpose; exit EXIT_REFUSED."""


class ApplyLeveller(command.Lister):
    """Run the live migrations of a plan file, or of a plan made now"""

    # Every move is checked again against the live cloud right before it
    # starts, and verified on its destination afterwards (core/executor.py).

    auth_required = False  # connects itself, like plan
    need_sort_by_cliff = False  # rows in execution order

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'plan_file', metavar='<plan-file>', nargs='?',
            help='Plan saved by "openstack leveller plan --output-file"; '
                 'without it, plan now with the options below (cron mode)')
        common.add_planner_options(parser, snapshot=False)
        parser.add_argument(
            '--placement-plan', action='store_true', default=False,
            help='The plan file is a path to a target placement (made by '
                 '"openstack leveller plan --target-placement"): run its '
                 'moves as the operator\'s, without the cooldown and '
                 'without asking that each evens out the load; every other '
                 'check still holds. Without this flag such a plan is '
                 'refused')
        parser.add_argument(
            '--batch', metavar='<count>', type=int,
            help='Start at most this many live migrations (cron: 1)')
        add_run_options(parser, 'Check every move against the live cloud '
                        'and show what would run; migrate nothing')
        errors = parser.add_mutually_exclusive_group()
        errors.add_argument(
            '--stop-on-error', dest='stop_on_error', action='store_true',
            default=None,
            help='Start no further migration after one failed (default)')
        errors.add_argument(
            '--continue-on-error', dest='stop_on_error',
            action='store_false',
            help='Go on with the other moves after a failure')
        return parser

    def run(self, parsed_args):
        self.exit_code = EXIT_DONE
        try:
            super().run(parsed_args)
        except Refused as exc:
            self.app.stderr.write('Refused: %s\n' % exc)
            return EXIT_REFUSED
        except KeyboardInterrupt:
            self.app.stderr.write(
                'Interrupted: live migrations already started go on in '
                'Nova; see "openstack server migration list"\n')
            return EXIT_INTERRUPTED
        return self.exit_code

    @common.boundary
    def take_action(self, parsed_args):
        effective = common.settings(parsed_args, self.app)
        plan = _read_plan(common.given(parsed_args, 'plan_file'),
                          parsed_args.placement_plan)
        return guarded(self.app, effective, lambda actions, journal:
                       self._apply(parsed_args, effective, plan, actions,
                                   journal))

    def _apply(self, parsed_args, effective, plan, actions, journal):
        say = common.StderrWriter(self.app)
        snapshot = actions.snapshot()
        if snapshot.source.get('note'):
            say('Note: %s' % snapshot.source['note'])
        options = common.planner_options(snapshot, effective, self.app)
        journal('start', plan_file=parsed_args.plan_file,
                dry_run=parsed_args.dry_run, batch=effective['apply.batch'],
                max_parallel=effective['apply.max_parallel'])
        refuse_if_running(snapshot, options, journal)
        if plan is None:
            plan = planner.make_plan(snapshot, options)
            if not plan.moves:
                say('Nothing to do: %s (imbalance %.3f)' % (
                    plan.note, plan.imbalance_before))
                journal('end', reason='nothing to do', exit_code=EXIT_DONE)
                return COLUMNS, []
        elif plan.fingerprint != plan_mod.fingerprint(snapshot):
            say('The cloud changed since the plan was made: each move is '
                'checked again before it runs')
        runner = executor.Executor(
            actions, options, apply_options(effective, parsed_args.dry_run),
            journal=journal, progress=say,
            # An operator's target placement is not balancing: no cooldown,
            # no "still evens out the load"; Nova's own limits still hold.
            stale=checks.placement if plan.kind == plan_mod.PLACEMENT
            else None)
        run = runner.run(plan.moves, snapshot=snapshot)
        results = run.results
        if run.problems or run.error:
            self.exit_code = EXIT_PROBLEMS
        if run.error:
            say('Stopped: %s' % run.error)
        say(_summary(results))
        journal('end', exit_code=self.exit_code, **_counts(results))
        return COLUMNS, [
            (i, r.move.server_name or r.move.server_id, r.move.source,
             r.move.destination, r.status,
             None if r.duration is None else round(r.duration, 1), r.reason)
            for i, r in enumerate(results, start=1)]


def _read_plan(path, placement):
    """The plan file's plan; a target placement only when the operator said
    so on the command line, since it runs without two of the checks."""
    if path is None:
        if placement:
            raise exceptions.CommandError(
                '--placement-plan needs the plan file to run')
        return None
    plan = plan_mod.read(path)
    if plan.kind == plan_mod.PLACEMENT and not placement:
        raise exceptions.CommandError(
            '%s is a path to a target placement (kind placement): its moves '
            'need not even out the load and are not held by the cooldown; '
            'run it with --placement-plan if that is what you want' % path)
    if placement and plan.kind != plan_mod.PLACEMENT:
        raise exceptions.CommandError(
            '--placement-plan: %s is a %s plan, not a path to a target '
            'placement' % (path, plan.kind))
    return plan


def add_run_options(parser, dry_run_help):
    """Options of every command that migrates (apply, evacuate)."""
    parser.add_argument(
        '--max-parallel', metavar='<count>', type=int,
        help='Migrations running at once (default %s)'
        % common.default_text('apply.max_parallel'))
    parser.add_argument(
        '--timeout', metavar='<seconds>', type=float,
        help='Abort a migration that has not finished after this long '
             '(default %s)' % common.default_text('apply.timeout'))
    parser.add_argument('--dry-run', action='store_true', default=False,
                        help=dry_run_help)
    parser.add_argument(
        '--journal', metavar='<file>',
        help='Append a JSON line per action to this file (default %s; '
             'empty: none)' % common.default_text('apply.journal'))
    parser.add_argument(
        '--lock-file', metavar='<file>',
        help='Lock that keeps two runs from overlapping (default %s)'
        % common.default_text('apply.lock_file'))


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


def guarded(app, effective, body, history_hours=24.0):
    """body(actions, journal) with the journal open and the lock held.

    The connection sends one new global request id on every call, and the
    journal records it, so Nova's logs and the journal can be matched. The
    migration history read covers history_hours and the cooldown.
    """
    run_id = 'req-%s' % uuid.uuid4()
    try:
        journal = runfiles.Journal(effective['apply.journal'], run_id)
    except OSError as exc:
        raise exceptions.CommandError('cannot open the journal %s: %s' % (
            effective['apply.journal'], exc)) from exc
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
            history_hours=max(history_hours, effective['cooldown'] + 1),
            retries=effective['cloud.retries'],
            progress=common.progress_of(app))
        return body(actions, journal)
    except KeyboardInterrupt:
        journal('interrupted')
        raise
    finally:
        lock.release()
        journal.close()


def _counts(results):
    counts = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {'counts': counts}


def _summary(results):
    counts = _counts(results)['counts']
    return 'Apply: %s' % ', '.join(
        '%d %s' % (n, status) for status, n in sorted(counts.items()))
