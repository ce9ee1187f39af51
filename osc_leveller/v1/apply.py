"""openstack leveller apply"""

import dataclasses

from osc_lib import exceptions

from osc_leveller.core.load import guard
from osc_leveller.core.planning import freeing
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.run import executor
from osc_leveller.core.settings import config
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import migrating

COLUMNS = migrating.COLUMNS
# Exit codes for scripts (documented in the user guide).
EXIT_DONE = 0  # every move done, or nothing to do
EXIT_ERROR = 1  # error before any move (bad input, cloud unreadable)
# Some moves failed, timed out or were aborted, or the run stopped after
# moves had started (the cloud or the journal failed).
EXIT_PROBLEMS = migrating.EXIT_PROBLEMS
EXIT_REFUSED = migrating.EXIT_REFUSED
EXIT_WINDOW = migrating.EXIT_WINDOW
EXIT_ALL_SKIPPED = 6  # the plan had moves, and every one was skipped
EXIT_INTERRUPTED = migrating.EXIT_INTERRUPTED
EXIT_TERMINATED = migrating.EXIT_TERMINATED


class ApplyLeveller(migrating.MigratingCommand):
    """Run the live migrations of a plan file, or of a plan made now"""

    verb = 'apply'

    # Every move is checked again against the live cloud right before it
    # starts, and verified on its destination afterwards (core/run/executor.py).

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'plan_file', metavar='<plan-file>', nargs='?',
            help='Plan saved by "openstack leveller plan --output-file"; '
                 'without it, plan now with the options below (cron mode)')
        common.add_planner_options(parser, snapshot=False)
        for kind in kinds.asking():  # --placement-plan
            flag, _, text = kind.asks
            parser.add_argument(flag, action='append_const', dest='told',
                                const=kind, help=text)
        parser.add_argument(
            '--cold-migrate-stopped', action='store_true', default=False,
            help='With a plan made by "openstack leveller plan --free-hosts '
                 '--cold-migrate-stopped": migrate the servers that are '
                 'stopped as each move starts cold (and confirm it), the '
                 'others live. Such a plan is refused without it')
        parser.add_argument(
            '--disable-freed', metavar='<reason>',
            help='With a plan made by "openstack leveller plan --free-hosts":'
                 ' once the run leaves a hypervisor it frees empty, '
                 'disable that hypervisor\'s compute service with this '
                 'reason, so Nova schedules nothing new there ("openstack '
                 'leveller evacuate --restore" enables it again)')
        flags.add(parser, 'apply.batch')
        flags.add(parser, 'apply.cloud_lock')
        migrating.add_run_options(
            parser, 'Check every move against the live cloud and show what '
                    'would run; migrate nothing')
        flags.add(parser, 'apply.stop_on_error')
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        effective = self.effective = common.settings(parsed_args, self.app)
        self.check_files(parsed_args, effective)
        plan = _read_plan(common.given(parsed_args, 'plan_file'),
                          getattr(parsed_args, 'told', None) or [])
        self.kind = _kind(parsed_args, plan)
        _check_disable_freed(parsed_args, plan)
        # The windows hold the runs that plan for themselves (cron); an
        # operator applying a reviewed plan file is told, not stopped.
        migrating.refuse_in_window(
            self, effective, parsed_args.dry_run,
            going_ahead=None if plan is None else
            'the windows hold apply without a plan file only')
        return migrating.guarded(
            self, effective, lambda actions, journal: self._apply(
                parsed_args, effective, plan, actions, journal),
            last_plausible=self.previous_plausible(),
            cloud_lock=None if parsed_args.dry_run else config.seconds(
                effective['apply.cloud_lock']))

    def _apply(self, parsed_args, effective, plan, actions, journal):
        say = common.StderrWriter(self.app)
        snapshot = actions.snapshot()
        if snapshot.source.get('note'):
            say('Note: %s' % snapshot.source['note'])
        if plan is not None:
            _check_cloud(parsed_args.plan_file, plan, snapshot, say)
        options = common.planner_options(snapshot, effective, self.app)
        common.say_forecast(say, snapshot, options)
        self.record.read(snapshot, options)
        journal('start', plan_file=parsed_args.plan_file,
                dry_run=parsed_args.dry_run, batch=effective['apply.batch'],
                max_parallel=effective['apply.max_parallel'])
        migrating.refuse_if_running(snapshot, options, journal)
        if plan is None:
            findings = self.examine(snapshot, options)
            plan = planner.make_plan(snapshot, options, guard.held(findings))
            if not plan.moves:
                say('Nothing to do: %s (imbalance %.3f)' % (
                    plan.note, plan.imbalance_before))
                common.say_held(say, plan)
                migrating.end(self, journal, reason='nothing to do')
                return COLUMNS, []
            # Where other domains have moves, those held still say why.
            common.say_held(say, plan, only={f.domain for f in findings})
        elif not plan.moves:
            say('Nothing to do: the plan file %s has no moves%s' % (
                parsed_args.plan_file, ' (%s)' % plan.note if plan.note
                else ''))
            migrating.end(self, journal, reason='nothing to do')
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
            kind=self.kind or kinds.of(plan.kind))
        run = migrating.execute(self, runner, plan.moves, snapshot)
        if run.problems or run.error:
            self.exit_code = EXIT_PROBLEMS
        elif all(r.status == executor.SKIPPED for r in run.results):
            # Not a success: the cloud no longer matches the plan (another
            # cloud's, or one already applied), or a check now holds it.
            self.exit_code = EXIT_ALL_SKIPPED
        if run.error:
            say('Stopped: %s' % run.error)
        if parsed_args.disable_freed is not None and \
                not _disable_freed(parsed_args, plan, snapshot, run, actions,
                                   journal, say):
            self.exit_code = EXIT_PROBLEMS
        found = migrating.counts(run.results)
        say('Apply: %s%s' % (migrating.summary(found['counts']), (
            ': no move of the plan holds on the cloud now (exit code %d)'
            % EXIT_ALL_SKIPPED) if self.exit_code == EXIT_ALL_SKIPPED
            else ''))
        migrating.end(self, journal, **found)
        return COLUMNS, migrating.rows(run.results)


def _read_plan(path, told):
    """The plan file's plan. A kind that runs without a check of balancing
    (a target placement's path: two of them) runs only when the operator
    said so on the command line, by its flag; told: the kinds whose flag
    was given."""
    if path is None:
        if told:
            raise exceptions.CommandError(
                '%s needs the plan file to run' % told[0].asks[0])
        return None
    plan = plan_mod.read(path)
    kind = kinds.of(plan.kind)
    for other in told:
        if other is not kind:
            raise exceptions.CommandError('%s: %s is a %s plan, not %s' % (
                other.asks[0], path, kind.name, other.title))
    if kind.asks and kind not in told:
        flag, why, _ = kind.asks
        raise exceptions.CommandError(
            '%s is %s (kind %s): %s; run it with %s if that is what you '
            'want' % (path, kind.title, kind.name, why, flag))
    return plan


def _kind(parsed_args, plan):
    """The kind a plan file runs as: its own, or with --cold-migrate-stopped
    its kind that migrates stopped servers cold, which only the operator
    chooses (a plan file asks for it, never decides it); None without a
    plan file."""
    cold = parsed_args.cold_migrate_stopped
    if plan is None:
        if cold:
            raise exceptions.CommandError(
                '--cold-migrate-stopped needs a plan file made by '
                '"openstack leveller plan --free-hosts --cold-migrate-stopped"')
        return None
    kind = kinds.of(plan.kind)
    if cold and kind.cold is None:
        raise exceptions.CommandError(
            '--cold-migrate-stopped: %s is %s (kind %s), which moves no '
            'stopped server' % (parsed_args.plan_file, kind.title, kind.name))
    if plan.options.get('cold_migrate_stopped') is True and not cold:
        raise exceptions.CommandError(
            '%s was planned with --cold-migrate-stopped: its stopped servers '
            'migrate cold; run it with --cold-migrate-stopped if that is '
            'what you want' % parsed_args.plan_file)
    return kind.cold if cold else kind


def _check_disable_freed(parsed_args, plan):
    reason = parsed_args.disable_freed
    if reason is None:
        return
    if not reason.strip():
        raise exceptions.CommandError(
            '--disable-freed: needs a reason, got an empty one')
    if plan is None or plan.kind != kinds.FREE_HOSTS.name:
        raise exceptions.CommandError(
            '--disable-freed: %s frees no hypervisor; only a plan made by '
            '"openstack leveller plan --free-hosts" does' % (
                'planning now' if plan is None else
                '%s is a %s plan, which' % (parsed_args.plan_file,
                                            plan.kind)))


def _disable_freed(parsed_args, plan, snapshot, run, actions, journal, say):
    """Disable the compute service of each hypervisor the plan frees that
    is empty once the run ends (read again: a run with --batch, or one
    resumed, frees them over several runs); False when one could not be.
    Hypervisors with no move off them (empty already) are left as they
    are."""
    reason = parsed_args.disable_freed
    off = {}
    for move in plan.moves:
        off.setdefault(move.source, []).append(move)
    names = [n for n in freeing.freed_hosts(plan) if n in off
             and snapshot.hypervisor(n) is not None]
    if parsed_args.dry_run:
        ran = {r.move.source for r in run.results
               if r.status != executor.DRY_RUN}
        for name in names:
            if name not in ran:
                say('Would disable the compute service of %s: %s' % (
                    snapshot.hypervisor(name).host, reason))
        return True
    if not names:
        return True
    try:
        now = actions.snapshot([m for n in names for m in off[n]])
    except executor.ActionError as exc:
        say('Left enabled: the compute services of %s: %s' % (
            ', '.join(names), exc))
        return False
    ok = True
    for name in names:
        hyp = now.hypervisor(name) or snapshot.hypervisor(name)
        left = now.servers_on(name)
        if left:
            say('Left enabled: the compute service of %s (%s still on %s)' % (
                hyp.host, common.plural(len(left), 'server'), name))
            continue
        if hyp.service.status == 'disabled':
            continue  # by an earlier run of the plan, say
        # Journalled first, like a migration (evacuate's set_service).
        try:
            journal('disable-service', host=hyp.host, reason=reason)
        except executor.JournalError as exc:
            say('Left enabled: the compute service of %s: the journal '
                'cannot record it: %s' % (hyp.host, exc))
            return False
        try:
            actions.set_service(hyp.host, False, reason)
        except executor.ActionError as exc:
            say('Problem: %s' % exc)
            ok = False
            continue
        say('Disabled the compute service of %s (freed): %s'
            % (hyp.host, reason))
    return ok


def _check_cloud(path, plan, snapshot, say):
    """Refused (exit 1, before any move; the journal's end record says
    why) when the plan file was made on another cloud; a note when that
    cannot be told."""
    try:
        note = plan_mod.check_cloud(plan, snapshot)
    except plan_mod.OtherCloud as exc:
        raise exceptions.CommandError('%s: %s' % (path, exc)) from None
    if note:
        say('Note: %s: %s' % (path, note))
