"""openstack leveller evacuate"""

import time

from osc_lib import exceptions

from osc_leveller.core.load import guard
from osc_leveller.core.planning import drain
from osc_leveller.core.planning import kinds
from osc_leveller.core.run import executor
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import migrating

COLUMNS = ('#', 'Server', 'From', 'To', 'Status', 'Duration (s)', 'Reason')
STAYS = 'stays'
EXIT_EMPTY = 0  # every named hypervisor is empty (or restored)
EXIT_LEFT = migrating.EXIT_PROBLEMS  # servers are left, or moves failed
EXIT_WINDOW = migrating.EXIT_WINDOW
DEFAULT_REASON = 'maintenance (openstack leveller evacuate)'
MOVE_BACK_HOURS = 72.0  # how far back --move-back looks in Nova's history


class EvacuateLeveller(migrating.MigratingCommand):
    """Drain healthy hypervisors by live migration (not Nova's evacuate)"""

    verb = 'evacuate'

    # Not Nova's "evacuate", which rebuilds the servers of a DEAD host
    # elsewhere ("openstack server evacuate"); this empties live ones.

    # The clock waits are measured and slept with, the executor's too.
    clock = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'hosts', metavar='<hypervisor>', nargs='+',
            help='Hypervisor (or compute host) to drain or restore')
        common.add_source_options(parser, snapshot=False)
        service = parser.add_mutually_exclusive_group()
        service.add_argument(
            '--disable-service', dest='disable_service', action='store_true',
            default=True,
            help='Disable the compute service first, so Nova schedules '
                 'nothing new there (default)')
        service.add_argument(
            '--no-disable-service', dest='disable_service',
            action='store_false', help='Leave the compute service enabled')
        parser.add_argument(
            '--reason', metavar='<text>', default=DEFAULT_REASON,
            help='Disabled reason recorded on the compute service')
        stopped = parser.add_mutually_exclusive_group()
        stopped.add_argument(
            '--cold-migrate-stopped', dest='cold_migrate_stopped',
            action='store_true', default=False,
            help='Cold-migrate stopped (SHUTOFF) servers and confirm them')
        stopped.add_argument(
            '--skip-stopped', dest='cold_migrate_stopped',
            action='store_false',
            help='Leave stopped servers where they are (default)')
        parser.add_argument(
            '--allow-partial', action='store_true', default=False,
            help='Drain what fits even when some servers fit nowhere')
        parser.add_argument(
            '--ignore-windows', action='store_true', default=False,
            help='Move servers even in a blackout window or outside every '
                 'allowed window of the settings (windows.*)')
        flags.add(parser, 'keep_n_plus_one', 'headroom')
        flags.add(parser, 'include_locked', negative=False)
        migrating.add_run_options(
            parser, 'Show where every server would go, and what stays; '
                    'change nothing')
        wait = parser.add_mutually_exclusive_group()
        wait.add_argument(
            '--wait', dest='wait', action='store_true', default=True,
            help='Wait until every migration has ended (default)')
        wait.add_argument(
            '--no-wait', dest='wait', action='store_false',
            help='Disable the service, start the first migrations (at most '
                 '--max-parallel) and return; run the command again without '
                 'it to continue and wait')
        parser.add_argument(
            '--restore', action='store_true', default=False,
            help='Enable the compute services again instead of draining')
        parser.add_argument(
            '--move-back', action='store_true', default=False,
            help='With --restore: migrate back the servers the last drain '
                 'moved away (from Nova\'s migration history), where they '
                 'still fit')
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        if not parsed_args.wait and parsed_args.cold_migrate_stopped:
            raise exceptions.CommandError(
                '--no-wait cannot be used with --cold-migrate-stopped: a '
                'cold migration is only over once it is confirmed')
        if parsed_args.move_back and not parsed_args.restore:
            raise exceptions.CommandError(
                '--move-back works with --restore only: it migrates back '
                'the servers that the last drain of these hypervisors moved '
                'away')
        effective = self.effective = common.settings(parsed_args, self.app)
        self.check_files(parsed_args, effective)
        if parsed_args.move_back or not parsed_args.restore:
            # A restore without --move-back only enables services.
            migrating.refuse_in_window(
                self, effective, parsed_args.dry_run,
                going_ahead='--ignore-windows' if parsed_args.ignore_windows
                else None)
        return migrating.guarded(
            self, effective, lambda actions, journal: _Run(
                self, parsed_args, effective, actions, journal).go(),
            history_hours=MOVE_BACK_HOURS,
            last_plausible=self.previous_plausible())


class _Run:
    """One drain or restore, from the first read to the last check."""

    def __init__(self, command, parsed_args, effective, actions, journal):
        self.command = command
        self.args = parsed_args
        self.effective = effective
        self.actions = actions
        self.journal = journal
        self.say = common.StderrWriter(command.app)

    def read(self):
        return self.actions.snapshot()

    def go(self):
        snapshot = self.read()
        if snapshot.source.get('note'):
            self.say('Note: %s' % snapshot.source['note'])
        hosts = []
        for ref in self.args.hosts:
            hyp = snapshot.find_hypervisor(ref)
            if hyp is None:
                # The note says why a hypervisor was left out, if it was.
                note = snapshot.source.get('note')
                raise exceptions.CommandError(
                    '%s: no such hypervisor or compute host%s' % (
                        ref, ' (%s)' % note if note else ''))
            hosts.append(hyp)
        if self.args.restore:
            return self.restore(snapshot, hosts)
        return self.drain(snapshot, hosts)

    def options(self, snapshot):
        return common.planner_options(snapshot, self.effective,
                                      self.command.app)

    def executor(self, options, kind):
        # A drain empties one host: many moves out of it at once, in any
        # order (each only adds to its destination), and one failure does
        # not stop the others.
        return executor.Executor(
            self.actions, options, migrating.apply_options(
                self.effective, self.args.dry_run, batch=None,
                per_source=self.effective['apply.max_parallel'],
                stop_on_error=False, wait=self.args.wait, waves=False),
            journal=self.journal, progress=self.say,
            clock=self.command.clock, sleep=self.command.sleep,
            kind=kind)

    def drain(self, snapshot, hosts):
        for hyp in hosts:
            if hyp.service.state != 'up' or hyp.service.forced_down:
                why = ('the compute service of %s is down: its servers '
                       'cannot live-migrate. To rebuild them elsewhere use '
                       '"openstack server evacuate"' % hyp.name)
                self.journal('refused', reason=why)
                raise migrating.Refused(why)
        names = [h.name for h in hosts]
        options = self.options(snapshot)
        # How the drain spreads the load over the hypervisors that stay.
        self.command.record.read(snapshot, options, [
            h.name for h in snapshot.hypervisors
            if h.usable and h.name not in names])
        own = {h.host for h in hosts} | set(names)
        snapshot = self.wait_for_earlier(snapshot, options, own)
        migrating.refuse_if_running(snapshot, options, self.journal, own)
        cold = self.args.cold_migrate_stopped
        k = self.effective['headroom']
        # A drain goes on; where the metrics cannot be true, its
        # destinations are chosen on allocations.
        findings = self.command.examine(snapshot, options)
        common.say_fallback(self.say, findings)
        plan = drain.plan_drain(guard.without_metrics(
            snapshot, {f.domain for f in findings}, common.by_model(options)),
            names, options, cold, k)
        self.journal('start', drain=names, dry_run=self.args.dry_run,
                     moves=len(plan.moves), stay=len(plan.stay),
                     unplaced=len(plan.unplaced))
        stay_rows = [(s, why) for s, why in plan.stay + plan.unplaced]
        if plan.unplaced and not self.args.allow_partial:
            why = '%s fit nowhere: %s (nothing was moved; use ' \
                '--allow-partial to drain the rest)' % (
                    common.plural(len(plan.unplaced), 'server'),
                    '; '.join('%s: %s' % (s.label, r)
                              for s, r in plan.unplaced[:5]))
            self.journal('refused', reason=why)
            raise migrating.Refused(why)
        for domain, why in plan.no_headroom:
            text = 'after this drain %s has no N+%d headroom: %s' % (
                domain, k, why)
            if self.effective['keep_n_plus_one']:
                self.journal('refused', reason=text)
                raise migrating.Refused(text + ' (nothing was moved)')
            self.say('Warning: ' + text)
        if self.args.disable_service and not self.args.dry_run:
            for hyp in hosts:
                self.set_service(hyp, enabled=False)
        runner = self.executor(options, kinds.drain(cold))
        try:
            run = migrating.execute(self.command, runner, plan.moves,
                                    snapshot)
        except executor.JournalError as exc:
            if not self.args.disable_service or self.args.dry_run:
                raise
            raise executor.JournalError(
                '%s (nothing was moved; the compute service of %s stays '
                'disabled)' % (exc, ', '.join(h.host for h in hosts))) \
                from None
        if run.error:
            self.say('Stopped: %s' % run.error)
        left = self.left_on(names)
        started = [r for r in run.results if r.status == executor.STARTED]
        if started:
            self.say('Started %s out of %s; run "openstack leveller '
                     'evacuate %s" to continue and wait' % (
                         common.plural(len(started), 'migration'),
                         ', '.join(names), ' '.join(self.args.hosts)))
        elif left and not self.args.dry_run:
            self.say('Not empty: %s' % ', '.join(
                '%s (%d servers)' % kv for kv in sorted(left.items())))
        elif not self.args.dry_run:
            self.say('Empty: %s' % ', '.join(names))
        self.command.exit_code = (
            EXIT_LEFT if (left and not self.args.dry_run and not started)
            or run.problems or run.error else EXIT_EMPTY)
        migrating.end(self.command, self.journal, left=sum(left.values()))
        return COLUMNS, _rows(run.results, stay_rows)

    def wait_for_earlier(self, snapshot, options, own):
        """The state once migrations already running out of the hosts end.

        They are an earlier drain's (--no-wait, or interrupted): a drain
        waits for them instead of refusing, as apply would. A server still
        MIGRATING counts too: Nova may close the migration record a moment
        before it clears the server's task.
        """
        deadline = self.command.clock() + self.effective['apply.timeout']
        said = False
        while not self.args.dry_run:
            running = [m for m in executor.in_flight(snapshot, options)
                       if m.source_compute in own]
            moving = [s for s in snapshot.servers if s.hypervisor in own
                      and 'migrating' in (s.status.lower(), s.task_state)]
            if not running and not moving:
                break
            what = '%s out of %s' % (
                '%s already running' % common.plural(len(running),
                                                     'migration')
                if running else
                '%s still migrating' % common.plural(len(moving), 'server'),
                ', '.join(sorted({_hypervisor(snapshot, m.source_compute)
                                  for m in running}
                                 or {s.hypervisor for s in moving})))
            if self.command.clock() > deadline:
                why = '%s after %.0f s' % (what,
                                           self.effective['apply.timeout'])
                self.journal('refused', reason=why)
                raise migrating.Refused(why)
            if not said:
                self.say('Waiting for %s' % what)
                said = True
            self.command.sleep(self.effective['apply.poll_interval'])
            snapshot = self.read()
        return snapshot

    def left_on(self, names):
        if self.args.dry_run:
            return {}
        snapshot = self.read()
        counts = {}
        for server in snapshot.servers:
            if server.hypervisor in names:
                counts[server.hypervisor] = counts.get(server.hypervisor,
                                                       0) + 1
        return counts

    def set_service(self, hyp, enabled):
        # Journalled first, like a migration: a journal that cannot say
        # so stops the run before the change.
        self.journal('enable-service' if enabled else 'disable-service',
                     host=hyp.host, reason=None if enabled else
                     self.args.reason)
        self.actions.set_service(hyp.host, enabled, self.args.reason)
        self.say('%s the compute service of %s' % (
            'Enabled' if enabled else 'Disabled', hyp.host))

    def restore(self, snapshot, hosts):
        names = [h.name for h in hosts]
        # The history comes from the first read; the executor reads the
        # cloud again (services now enabled) before it moves anything.
        moves = drain.move_back(snapshot, hosts) if self.args.move_back \
            else ()
        self.journal('start', restore=names, move_back=self.args.move_back,
                     dry_run=self.args.dry_run, moves=len(moves))
        if not self.args.dry_run:
            for hyp in hosts:
                self.set_service(hyp, enabled=True)
        results, failed = [], False
        if moves:
            options = self.options(snapshot)
            # The restored hypervisors count again, with what came back.
            self.command.record.read(snapshot, options, [
                h.name for h in snapshot.hypervisors
                if h.usable or h.name in names])
            run = migrating.execute(self.command, self.executor(
                options, kinds.drain(self.args.cold_migrate_stopped)), moves)
            if run.error:
                self.say('Stopped: %s' % run.error)
            results, failed = run.results, bool(run.problems or run.error)
        self.command.exit_code = EXIT_LEFT if failed else EXIT_EMPTY
        migrating.end(self.command, self.journal)
        return COLUMNS, _rows(results, [])


def _hypervisor(snapshot, host):
    """The hypervisor of a compute host that Nova's migration records name."""
    hyp = snapshot.find_hypervisor(host)
    return hyp.name if hyp is not None else host


def _rows(results, stay_rows):
    rows = migrating.rows(results)
    start = len(rows) + 1
    rows += [(start + i, server.label, server.hypervisor, None, STAYS, None,
              why) for i, (server, why) in enumerate(stay_rows)]
    return rows
