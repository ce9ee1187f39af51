"""openstack leveller plan"""

import re
import time

from osc_lib import exceptions
from osc_lib.command import command

from osc_leveller.core.load import guard
from osc_leveller.core.load import scoring
from osc_leveller.core.planning import freeing
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import paths
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.planning import report as report_data
from osc_leveller.core.planning import room
from osc_leveller.core.planning import spread
from osc_leveller.cloud import flavors
from osc_leveller.v1 import columns
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import outputs
from osc_leveller.v1 import report

MOVE_COLUMNS = ('#', 'Server', 'Source', 'Destination', 'Wave', 'Gain',
                'Reason')
LONG_COLUMNS = ('Server ID', 'Destination Host', 'Domain', 'RAM (GiB)',
                'Source Score', 'Destination Score', 'Imbalance',
                'Estimate')
EXPLAIN_COLUMNS = ('Hypervisor', 'Domain', 'Score', 'Verdict', 'Reason')
EXIT_NO_ROOM = 4  # --make-room: no sequence of moves makes the room
SPREAD_BY = ('count',)  # what --spread evens out


class PlanLeveller(outputs.StdoutCommand, command.Lister):
    """Plan live migrations that even out hypervisor load, each explained"""

    auth_required = False  # a snapshot needs no cloud; live runs connect
    need_sort_by_cliff = False  # rows are in execution order

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_planner_options(parser)
        common.add_long_option(parser)
        parser.add_argument(
            '--output-file', metavar='<file>',
            help='Save the plan to this file (format osc-leveller-plan/1); '
                 '"-" for standard output, which then holds the plan alone')
        parser.add_argument(
            '--target-placement', metavar='<file>',
            help='Instead of balancing, plan the live migrations that take '
                 'servers to the hypervisors this YAML or JSON file names '
                 '("server: hypervisor" per line, names or IDs), parking '
                 'servers on the way where hypervisors are too full to swap '
                 'directly; every step passes every filter')
        parser.add_argument(
            '--make-room', metavar='<flavor>[:<count>]',
            help='Instead of balancing, plan the fewest live migrations '
                 '(then the fewest GiB) after which <count> (default 1) new '
                 'servers of this flavor (name or ID) fit, in the '
                 '--availability-zone or --aggregate given; exit code %d '
                 'when no sequence of moves makes the room' % EXIT_NO_ROOM)
        parser.add_argument(
            '--aggregate', metavar='<aggregate>',
            help='With --make-room: the room must be on a hypervisor of '
                 'this host aggregate')
        parser.add_argument(
            '--spread', metavar='count', choices=SPREAD_BY,
            help='Instead of balancing the load, even out the number of '
                 'servers per hypervisor in each domain to within one, with '
                 'the fewest live migrations (the smallest servers that fit '
                 'move); every rule of balancing holds')
        parser.add_argument(
            '--explain', metavar='<server>',
            help='Instead of planning, show for one server (name or ID) why '
                 'each hypervisor would accept or reject it')
        # plan --free-hosts (core/planning/freeing.py)
        parser.add_argument(
            '--free-hosts', metavar='<N>', nargs='?', const='',
            help='Instead of balancing, plan the live migrations that empty '
                 'hypervisors: as many as possible in each balancing domain, '
                 'or N in each (already empty ones count), moving the fewest '
                 'GiB; every rule holds, the ceiling and saturation too, and '
                 'N+K with --keep-n-plus-one and --headroom')
        parser.add_argument(
            '--cold-migrate-stopped', action='store_true', default=False,
            help='With --free-hosts: stopped servers (SHUTOFF, SUSPENDED, '
                 'SHELVED) move too, by cold migration, instead of keeping '
                 'their hypervisor busy; apply must be given the flag as '
                 'well')
        flags.add(parser, 'headroom')
        report.add_option(parser, 'the plan, before and after, its moves '
                          'and their reasons, and what refused them,')
        flags.add(parser, outputs.FOLLOW)
        return parser

    def run(self, parsed_args):
        self.exit_code = 0
        return super().run(parsed_args) or self.exit_code

    @common.boundary
    def take_action(self, parsed_args):
        explain = common.given(parsed_args, 'explain')
        target = common.given(parsed_args, 'target_placement')
        output = common.given(parsed_args, 'output_file')
        report_file = common.given(parsed_args, 'report')
        make_room = _room_asked(parsed_args)
        free = _free_hosts(parsed_args.free_hosts)
        spread_by = common.given(parsed_args, 'spread')
        goals = [flag for flag, value in (
            ('--free-hosts', free), ('--explain', explain),
            ('--target-placement', target), ('--make-room', make_room),
            ('--spread', spread_by))
            if value is not None]
        if len(goals) > 1:
            raise exceptions.CommandError(
                '%s and %s do not go together' % tuple(goals[:2]))
        if parsed_args.cold_migrate_stopped and free is None:
            raise exceptions.CommandError(
                '--cold-migrate-stopped goes with --free-hosts')
        for option, value in (('--report', report_file),
                              ('--output-file', output)):
            if explain is not None and value is not None:
                raise exceptions.CommandError(
                    '--explain and %s do not go together' % option)
        effective = common.settings(parsed_args, self.app)
        follow = effective[outputs.FOLLOW]
        outputs.check([('--output-file', output), ('--report', report_file)],
                      read=outputs.read_files(parsed_args), follow=follow)
        snapshot = common.load_snapshot(parsed_args, self.app, effective)
        options = common.planner_options(snapshot, effective, self.app)
        if explain is not None:
            return self._explain(snapshot, options, explain)
        say = common.StderrWriter(self.app)
        findings = common.examine(snapshot, effective, options, self.app)
        started = time.monotonic()
        if spread_by is not None:
            # Counts need no metrics; where they cannot be true, the
            # ceiling and saturation are judged on allocations.
            common.say_fallback(say, findings)
            plan = spread.make_plan(guard.without_metrics(
                snapshot, {f.domain for f in findings},
                common.by_model(options)), options)
        elif target is not None:
            # An operator's placement goes on; where the metrics cannot be
            # true, the ceiling is judged on allocations.
            common.say_fallback(say, findings)
            snapshot = guard.without_metrics(
                snapshot, {f.domain for f in findings},
                common.by_model(options))
            plan = paths.make_plan(snapshot, paths.targets_from(
                common.read_yaml(target, '--target-placement'), snapshot,
                '--target-placement %s' % target), options)
        elif make_room is not None:
            try:
                plan = room.make_plan(snapshot, self._ask(
                    parsed_args, snapshot, options, effective, *make_room), options)
            except room.NoRoom as exc:
                say('No room: %s; nothing was planned%s' % (
                    common.printable(str(exc)),
                    ', no plan file written' if output is not None else ''))
                self.exit_code = EXIT_NO_ROOM
                return MOVE_COLUMNS, []
        elif free is not None:
            plan = _free(snapshot, options, free or None,
                         effective['headroom'], findings, say,
                         parsed_args.cold_migrate_stopped)
        else:
            plan = planner.make_plan(snapshot, options, guard.held(findings))
        elapsed = time.monotonic() - started
        if output is not None:
            outputs.write(self.app, output, plan_mod.dumps(plan),
                          plan_mod.WHAT, follow)
        say(_summary(plan, elapsed, output))
        _say_freed(say, plan)
        common.say_forecast(say, snapshot, options)
        common.say_held(say, plan)
        if report_file is not None:
            outputs.write(self.app, report_file, report.render(
                report_data.of_plan(snapshot, plan, options)), report.WHAT,
                follow)
            say('Report written to %s' % outputs.name(report_file))
        names = MOVE_COLUMNS + (LONG_COLUMNS if parsed_args.long else ())
        return names, [_row(i, m, parsed_args.long)
                       for i, m in enumerate(plan.moves, start=1)]

    def _ask(self, parsed_args, snapshot, options, effective, name, count,
             aggregate):
        """The room.Ask of --make-room: its flavor read from Nova when
        planning live, else a flavor a server of the snapshot has."""
        zones = sorted(options.availability_zones)
        if len(zones) > 1:
            raise exceptions.CommandError(
                '--make-room takes one --availability-zone, not %d' %
                len(zones))
        if aggregate is not None and not any(
                a.name == aggregate for h in snapshot.hypervisors
                for a in h.aggregates):
            raise exceptions.CommandError(
                '--aggregate %s: no hypervisor of the cloud is in an '
                'aggregate of that name' % aggregate)
        if common.given(parsed_args, 'snapshot') is not None:
            flavor = room.flavor_in(snapshot, name)
            if flavor is None:
                raise exceptions.CommandError(
                    '--make-room %s: no server in the snapshot has flavor %s '
                    '(a snapshot holds only the flavors of its servers): '
                    'plan live, which reads the flavor from Nova, or name a '
                    'flavor a server of the snapshot has' % (name, name))
        else:
            try:
                flavor = flavors.read(
                    common.open_connection(self.app, effective).compute,
                    name, effective['cloud.retries'])
            except flavors.UnknownFlavor as exc:
                raise exceptions.CommandError('--make-room %s: %s' % (
                    name, exc)) from None
        return room.Ask(flavor, count, zones[0] if zones else '',
                        aggregate or '')

    def _explain(self, snapshot, options, ref):
        server = snapshot.find_server(ref)
        if server is None:
            raise exceptions.CommandError(
                '--explain %s: no such server in the snapshot (or the name '
                'is not unique: use the ID)' % ref)
        refusal, rows = planner.Planner(snapshot, options).explain(server)
        say = common.StderrWriter(self.app)
        say('%s (%s) on %s: %s' % (
            server.label, server.id, server.hypervisor,
            'cannot move: ' + refusal if refusal else 'may move'))
        common.say_forecast(say, snapshot, options, {scoring.domain_of(
            snapshot.hypervisor(server.hypervisor), options.by_model)})
        return EXPLAIN_COLUMNS, [
            (name, domain, columns.ScoreColumn(score), verdict, reason)
            for name, domain, score, verdict, reason in rows]


def _room_asked(parsed_args):
    """(flavor, count, aggregate) of --make-room, or None without it."""
    text = common.given(parsed_args, 'make_room')
    aggregate = common.given(parsed_args, 'aggregate')
    if text is None:
        if aggregate is not None:
            raise exceptions.CommandError('--aggregate goes with --make-room')
        return None
    try:
        return room.parse(text) + (aggregate,)
    except ValueError as exc:
        raise exceptions.CommandError(str(exc)) from None


def _free_hosts(value):
    """--free-hosts: None (not given), 0 (as many as possible) or N."""
    if value is None:
        return None
    if value == '':
        return 0
    text = value.strip()
    # ASCII digits, few enough to read: a longer N would be refused as
    # more than the domains can free, but int() refuses 4,300 digits.
    if not re.fullmatch('[0-9]{1,9}', text) or int(text) < 1:
        raise exceptions.CommandError(
            '--free-hosts %s: N must be a positive whole number of '
            'hypervisors to free in each balancing domain (or leave it out '
            'to free as many as possible)' % (
                value if len(value) <= 20 else value[:20] + '...'))
    return int(text)


def _free(snapshot, options, count, k, findings, say, cold):
    """A free-hosts plan; where the metrics cannot be true, the ceiling
    and saturation are judged on allocations, as for a target."""
    common.say_fallback(say, findings)
    snapshot = guard.without_metrics(
        snapshot, {f.domain for f in findings}, common.by_model(options))
    try:
        return freeing.make_plan(snapshot, options, count, k, cold)
    except freeing.TooMany as exc:
        raise exceptions.CommandError('--free-hosts %d: %s' % (count, exc)) \
            from None


def _say_freed(say, plan):
    """plan --free-hosts: the hypervisors freed, and those not, with why."""
    for domain in plan.domains:
        for freed in domain.get('freed', ()):
            say('Freed: %s (%s): %s' % (
                freed['hypervisor'], domain['domain'],
                '%s, %.0f GiB' % (common.plural(len(freed['servers']),
                                                'server'), freed['ram_gb'])
                if freed['servers'] else 'empty already'))
        for busy in domain.get('not_freed', ()):
            say('Not freed: %s (%s): %s' % (busy['hypervisor'],
                                            domain['domain'], busy['reason']))


def _row(index, move, long):
    row = (index, move.server_name or move.server_id, move.source,
           move.destination, move.wave, round(move.gain, 5), move.reason)
    if long:
        row += (move.server_id, move.destination_host, move.domain,
                round(move.ram_gb, 1),
                columns.BeforeAfterColumn(move.source_score),
                columns.BeforeAfterColumn(move.destination_score),
                columns.BeforeAfterColumn(move.imbalance),
                columns.DurationColumn(move.estimate[0] if move.estimate
                                       else None))
    return row


def _summary(plan, elapsed, output_file):
    saved = '; saved to %s' % outputs.name(output_file) if output_file \
        else ''
    if not plan.moves:
        return 'Nothing to do: %s (imbalance %.3f)%s' % (
            plan.note, plan.imbalance_before, saved)
    waves = max(m.wave for m in plan.moves)
    kind = kinds.of(plan.kind)
    parked = ' (%d parking)' % (len(plan.moves) - len(
        {m.server_id for m in plan.moves})) if kind.repeats else ''
    return ('%s: %s%s in %s, %.0f GiB of RAM; '
            'imbalance %.3f -> %.3f; planned in %.2f s%s' % (
                kind.heading, common.plural(len(plan.moves), 'live migration'),
                parked, common.plural(waves, 'wave'), plan.migrated_gb,
                plan.imbalance_before, plan.imbalance_after, elapsed, saved))
