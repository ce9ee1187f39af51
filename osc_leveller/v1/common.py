"""Options and helpers shared by the leveller commands."""

from osc_lib import exceptions

from osc_leveller.cloud import collect
from osc_leveller.cloud import connection
from osc_leveller.cloud import prometheus
from osc_leveller.core import options as core_options
from osc_leveller.core import scoring
from osc_leveller.core import snapshot as snapshot_io


def add_snapshot_option(parser):
    parser.add_argument(
        '--snapshot',
        metavar='<demo|file>',
        help='Read the cloud from a snapshot instead of the live cloud: '
             '"demo" for the bundled demo cloud, or the path of a snapshot '
             'file (format osc-leveller-snapshot/1, or a Watcher baseline '
             'cluster file)')


def add_weight_option(parser):
    parser.add_argument(
        '--weight',
        metavar='<name=value>',
        action='append',
        default=[],
        help='Weight of one load dimension in the host score (repeat for '
             'several): cpu, ram, cpu_pressure, ram_pressure. Defaults: %s'
             % ', '.join('%s=%g' % kv for kv in
                         scoring.DEFAULT_WEIGHTS.items()))


def add_cpu_compatibility_option(parser):
    parser.add_argument(
        '--cpu-compatibility', metavar='<model|features>',
        choices=(core_options.CPU_MODEL, core_options.CPU_FEATURES),
        default=core_options.CPU_MODEL,
        help='"model": servers move only between hypervisors with the same '
             'CPU model, and each model is its own balancing domain; '
             '"features": also to hypervisors offering every CPU feature of '
             'the current one, one domain per availability zone and CPU '
             'architecture (default %s)' % core_options.CPU_MODEL)


def plural(count, noun):
    return '%d %s%s' % (count, noun, '' if count == 1 else 's')


def add_long_option(parser):
    parser.add_argument(
        '--long', action='store_true', default=False,
        help='List additional fields in output')


def load_snapshot(parsed_args, app):
    """The --snapshot file, or the live cloud the shell was pointed at."""
    try:
        if parsed_args.snapshot:
            snap = snapshot_io.load(parsed_args.snapshot)
        else:
            snap = snapshot_io.parse(read_cloud(app), origin='the cloud')
    except snapshot_io.SnapshotError as exc:
        raise exceptions.CommandError(str(exc)) from exc
    if snap.source.get('note'):
        StderrWriter(app)('Note: %s' % snap.source['note'])
    return snap


def read_cloud(app):
    """The live cloud as a snapshot document, or CommandError."""
    try:
        conn = connection.open_connection(app.cloud_config, app.options)
        metrics = prometheus.reader_from_config(
            conn.config.config.get('leveller'))
        return collect.Collector(conn, metrics=metrics).collect()
    except collect.CollectError as exc:
        raise exceptions.CommandError(str(exc)) from exc


def weights(parsed_args):
    try:
        return scoring.parse_weights(parsed_args.weight)
    except ValueError as exc:
        raise exceptions.CommandError(str(exc)) from exc


def check_hosts(snapshot, names, option):
    for name in names:
        if snapshot.find_hypervisor(name) is None:
            raise exceptions.CommandError(
                '%s %s: no such hypervisor or compute host in the snapshot'
                % (option, name))


def check_zones(snapshot, zones):
    known = {h.availability_zone for h in snapshot.hypervisors}
    for zone in zones:
        if zone not in known:
            raise exceptions.CommandError(
                '--availability-zone %s: no such availability zone (known: %s)'
                % (zone, ', '.join(sorted(z for z in known if z)) or 'none'))


def planner_options(parsed_args, snapshot):
    check_hosts(snapshot, parsed_args.exclude_host, '--exclude-host')
    check_zones(snapshot, parsed_args.availability_zone)
    try:
        return core_options.PlannerOptions(
            weights=weights(parsed_args),
            threshold=parsed_args.threshold,
            min_gain=parsed_args.min_gain,
            max_moves=parsed_args.max_moves,
            ceiling=parsed_args.ceiling,
            move_cost_gb=parsed_args.move_cost,
            cpu_compatibility=parsed_args.cpu_compatibility,
            include_locked=parsed_args.include_locked,
            cooldown_hours=parsed_args.cooldown,
            projects=frozenset(parsed_args.project),
            exclude_projects=frozenset(parsed_args.exclude_project),
            exclude_hosts=frozenset(parsed_args.exclude_host),
            availability_zones=frozenset(parsed_args.availability_zone),
        ).validate()
    except ValueError as exc:
        raise exceptions.CommandError(str(exc)) from exc


def add_planner_options(parser):
    """The options every planning command (plan, later apply) takes."""
    defaults = core_options.PlannerOptions()
    add_snapshot_option(parser)
    add_weight_option(parser)
    parser.add_argument(
        '--max-moves', metavar='<count>', type=int,
        default=defaults.max_moves,
        help='Plan at most this many live migrations (default %d)'
        % defaults.max_moves)
    parser.add_argument(
        '--threshold', metavar='<imbalance>', type=float,
        default=defaults.threshold,
        help='Leave alone the balancing domains whose imbalance (standard '
             'deviation of host scores) is below this (default %g)'
        % defaults.threshold)
    parser.add_argument(
        '--min-gain', metavar='<gain>', type=float,
        default=defaults.min_gain,
        help='Stop when no move lowers the sum of squared deviations of the '
             'host scores from their domain mean by at least this '
             '(default %g)' % defaults.min_gain)
    parser.add_argument(
        '--ceiling', metavar='<score>', type=float, default=defaults.ceiling,
        help='Never raise a destination\'s score above this, so no new hot '
             'spot is made (default %g)' % defaults.ceiling)
    parser.add_argument(
        '--move-cost', metavar='<GiB>', type=float,
        default=defaults.move_cost_gb,
        help='Fixed cost of one migration, in GiB of RAM copied; higher '
             'values favour fewer, larger moves (default %g)'
        % defaults.move_cost_gb)
    add_cpu_compatibility_option(parser)
    parser.add_argument(
        '--cooldown', metavar='<hours>', type=float,
        default=defaults.cooldown_hours,
        help='Do not move a server migrated less than this many hours ago, '
             'per Nova\'s migration history (default %g)'
        % defaults.cooldown_hours)
    locked = parser.add_mutually_exclusive_group()
    locked.add_argument(
        '--include-locked', action='store_true', default=False,
        help='Also move locked servers')
    locked.add_argument(
        '--no-include-locked', dest='include_locked', action='store_false',
        help='Leave locked servers where they are (default)')
    parser.add_argument(
        '--exclude-host', metavar='<hypervisor>', action='append', default=[],
        help='Neither move servers off nor onto this hypervisor (repeat for '
             'several)')
    parser.add_argument(
        '--availability-zone', metavar='<zone>', action='append', default=[],
        help='Only balance hypervisors in this availability zone (repeat for '
             'several)')
    parser.add_argument(
        '--project', metavar='<project-id>', action='append', default=[],
        help='Only move servers of this project (repeat for several)')
    parser.add_argument(
        '--exclude-project', metavar='<project-id>', action='append',
        default=[],
        help='Never move servers of this project (repeat for several)')
    return parser


class StderrWriter:
    """Human-facing notes go to stderr so -f json on stdout stays clean."""

    def __init__(self, app):
        self.stream = getattr(app, 'stderr', None)

    def __call__(self, text):
        if self.stream is not None:
            self.stream.write(text.rstrip('\n') + '\n')
