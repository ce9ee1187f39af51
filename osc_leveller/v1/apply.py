"""openstack leveller apply"""

import dataclasses

from osc_lib import exceptions

from osc_leveller.core import checks
from osc_leveller.core import executor
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import planner
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import migrating

COLUMNS = migrating.COLUMNS
# Exit codes for scripts (documented in the user guide).
EXIT_DONE = 0  # every move done, or nothing to do
EXIT_ERROR = 1  # error before any move (bad input, cloud unreadable)
EXIT_PROBLEMS = 3  # some moves failed, timed out or were aborted
EXIT_REFUSED = migrating.EXIT_REFUSED
EXIT_WINDOW = migrating.EXIT_WINDOW
EXIT_INTERRUPTED = migrating.EXIT_INTERRUPTED


class ApplyLeveller(migrating.MigratingCommand):
    """Run the live migrations of a plan file, or of a plan made now"""

    verb = 'apply'

    # Every move is checked again against the live cloud right before it
    # starts, and verified on its destination afterwards (core/executor.py).

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
        flags.add(parser, 'apply.batch')
        migrating.add_run_options(
            parser, 'Check every move against the live cloud and show what '
                    'would run; migrate nothing')
        flags.add(parser, 'apply.stop_on_error')
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        effective = self.effective = common.settings(parsed_args, self.app)
        plan = _read_plan(common.given(parsed_args, 'plan_file'),
                          parsed_args.placement_plan)
        # The windows hold the runs that plan for themselves (cron); an
        # operator applying a reviewed plan file is told, not stopped.
        migrating.refuse_in_window(
            self, effective, parsed_args.dry_run,
            going_ahead=None if plan is None else
            'the windows hold apply without a plan file only')
        return migrating.guarded(
            self.app, effective, lambda actions, journal: self._apply(
                parsed_args, effective, plan, actions, journal))

    def _apply(self, parsed_args, effective, plan, actions, journal):
        say = common.StderrWriter(self.app)
        snapshot = actions.snapshot()
        if snapshot.source.get('note'):
            say('Note: %s' % snapshot.source['note'])
        if plan is not None:
            _check_cloud(parsed_args.plan_file, plan, snapshot, say, journal)
        options = common.planner_options(snapshot, effective, self.app)
        self.record.read(snapshot, options)
        journal('start', plan_file=parsed_args.plan_file,
                dry_run=parsed_args.dry_run, batch=effective['apply.batch'],
                max_parallel=effective['apply.max_parallel'])
        migrating.refuse_if_running(snapshot, options, journal)
        if plan is None:
            plan = planner.make_plan(snapshot, options)
            if not plan.moves:
                say('Nothing to do: %s (imbalance %.3f)' % (
                    plan.note, plan.imbalance_before))
                common.say_held(say, plan)
                journal('end', reason='nothing to do', exit_code=EXIT_DONE)
                return COLUMNS, []
        elif plan.fingerprint != plan_mod.fingerprint(snapshot):
            say('The cloud changed since the plan was made: each move is '
                'checked again before it runs')
        if plan.options.get('keep_n_plus_one') is True and \
                not options.keep_n_plus_one:
            # Only ever stricter: a plan file never loosens a check.
            options = dataclasses.replace(options, keep_n_plus_one=True)
            say('The plan was made with keep_n_plus_one: each move is '
                'checked to keep N+1')
        runner = executor.Executor(
            actions, options, migrating.apply_options(
                effective, parsed_args.dry_run),
            journal=journal, progress=say,
            # An operator's target placement is not balancing: no cooldown,
            # no "still evens out the load"; Nova's own limits still hold.
            stale=checks.placement if plan.kind == plan_mod.PLACEMENT
            else None)
        run = runner.run(plan.moves, snapshot=snapshot)
        self.record.results = run.results
        if run.problems or run.error:
            self.exit_code = EXIT_PROBLEMS
        if run.error:
            say('Stopped: %s' % run.error)
        say(_summary(run.results))
        journal('end', exit_code=self.exit_code, **_counts(run.results))
        return COLUMNS, migrating.rows(run.results)


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


def _check_cloud(path, plan, snapshot, say, journal):
    """Refused (exit 1, before any move) when the plan file was made on
    another cloud; a note when that cannot be told."""
    try:
        note = plan_mod.check_cloud(plan, snapshot)
    except plan_mod.OtherCloud as exc:
        why = '%s: %s' % (path, exc)
        journal('refused', reason=why, exit_code=EXIT_ERROR)
        raise exceptions.CommandError(why) from None
    if note:
        say('Note: %s: %s' % (path, note))


def _counts(results):
    counts = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {'counts': counts}


def _summary(results):
    counts = _counts(results)['counts']
    return 'Apply: %s' % ', '.join(
        '%d %s' % (n, status) for status, n in sorted(counts.items()))
