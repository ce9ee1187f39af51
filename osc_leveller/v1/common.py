"""Options and helpers shared by the leveller commands."""

import dataclasses
import functools
import re
import time

import yaml
from cliff import columns as cliff_columns
from cliff import show
from osc_lib import exceptions

from osc_leveller.cloud import collect
from osc_leveller.cloud import connection
from osc_leveller.cloud import measure
from osc_leveller.core.load import forecast
from osc_leveller.core.load import guard
from osc_leveller.core.model import errors
from osc_leveller.core.model import files
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.rules import filters
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import flags
from osc_leveller.v1 import masking
from osc_leveller.v1 import progress


def boundary(take_action):
    """The one place between a command and the shell.

    An expected failure (core.errors.LevellerError: a file, field,
    setting or cloud answer that is wrong) becomes the OpenStackClient
    error the shell prints, exit code 1. Messages may quote what came from
    outside, so they are made printable first. The text cells of the rows
    become TerminalText: a table shows them printable, the structured
    formats as they are.
    """
    @functools.wraps(take_action)
    def run(self, parsed_args):
        try:
            columns, data = take_action(self, parsed_args)
        except (errors.LevellerError, exceptions.CommandError) as exc:
            text = printable(str(exc))
            if isinstance(exc, exceptions.CommandError) and \
                    text == str(exc):
                raise
            raise exceptions.CommandError(text) from exc
        if isinstance(self, show.ShowOne):
            return columns, tuple(_cell(value) for value in data)
        return columns, [tuple(_cell(value) for value in row)
                         for row in data]
    return run


# What a terminal acts on instead of showing: an escape sequence (CSI
# with its parameters, a string such as OSC up to its terminator, or ESC
# and its final byte; from ESC or its one-character C1 form), then any
# other C0 control, DEL or C1 control.
_CONTROLS = re.compile(
    r'(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?'
    r'|(?:\x1b[]PX^_]|[\x90\x98\x9d\x9e\x9f])'
    r'[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?'
    r'|\x1b[ -/]*[0-~]?'
    r'|[\x00-\x1f\x7f-\x9f]')


def printable(text):
    """Text a terminal shows as text on one line: a lone surrogate becomes
    its escape, and control characters, with the escape sequences they
    start, are removed, so a name from the cloud cannot move the cursor,
    recolour or retitle the terminal, or hide what is around it."""
    text = text.encode('utf-8', 'backslashreplace').decode('utf-8')
    return _CONTROLS.sub(_removed, text)


def _removed(control):
    """A line break or tab becomes a space (a YAML error's lines stay
    words apart); the rest goes."""
    return ' ' if control.group() in '\t\n\v\f\r' else ''


class TerminalText(str, cliff_columns.FormattableColumn):
    """A text cell: itself to the code that reads rows, printable in a
    table, as it is to -f json and yaml (which escape control characters)
    and to -f value, csv and shell (for scripts that match names exactly:
    do not print those to a terminal)."""

    def human_readable(self):
        return printable(self._value)

    def machine_readable(self):
        return self._value


def _cell(value):
    return TerminalText(value) if type(value) is str else value


def given(parsed_args, name):
    """An optional file or server argument: None when not given, and an
    error when given empty (an empty shell variable, say)."""
    value = getattr(parsed_args, name, None)
    if value is not None and not value.strip():
        raise exceptions.CommandError('--%s: needs a value, got an empty '
                                      'one' % name.replace('_', '-'))
    return value


def add_source_options(parser, snapshot=True):
    """Where the cloud's state and the settings come from."""
    if snapshot:
        parser.add_argument(
            '--snapshot',
            metavar='<demo|file>',
            help='Read the cloud from a snapshot instead of the live cloud: '
                 '"demo" for the bundled demo cloud, or the path of a '
                 'snapshot file (format osc-leveller-snapshot/1, or a '
                 'Watcher baseline cluster file)')
    parser.add_argument(
        '--config', metavar='<file>',
        help='YAML file of leveller settings; they override the leveller: '
             'section of the cloud\'s clouds.yaml entry, and flags override '
             'both (see "openstack leveller config show")')
    metrics = parser.add_mutually_exclusive_group()
    flags.add(metrics, 'prometheus.url')
    metrics.add_argument(
        '--no-prometheus', action='store_true', default=False,
        help='Score from Placement allocations even when a Prometheus is '
             'configured')


def add_weight_option(parser):
    """--weight NAME=VALUE sets the setting weights.NAME."""
    names = [k.name[len('weights.'):] for k in config.KEYS
             if k.name.startswith('weights.')]
    parser.add_argument(
        '--weight',
        metavar='<name=value>',
        action='append',
        help='Weight of one load dimension in the host score (repeat for '
             'several): %s. Defaults: %s' % (', '.join(names), ', '.join(
                 '%s=%s' % (n, flags.default_text('weights.' + n))
                 for n in names)))


def settings(parsed_args, app):
    """Defaults < clouds.yaml leveller: < --config FILE < flags."""
    layers = []
    name, section = connection.leveller_section(app.cloud_config,
                                                app.options)
    if section:
        layers.append(('clouds.yaml (%s)' % name, config.flatten(
            section, 'clouds.yaml cloud %s: leveller' % name)))
    path = given(parsed_args, 'config')
    if path is not None:
        where = '--config %s' % path
        document = read_yaml(path, '--config')
        if isinstance(document, dict) and list(document) == ['leveller']:
            document = document['leveller']
        layers.append((where, config.flatten(document or {}, where)))
    layers += flags.layers(parsed_args)
    if getattr(parsed_args, 'weight', None):
        layers.append(('--weight', config.weight_flags(parsed_args.weight)))
    if getattr(parsed_args, 'no_prometheus', False):
        layers.append(('--no-prometheus', {'prometheus.url': ''}))
    effective = config.Settings(layers)
    for value in effective.secrets():
        masking.remember(value)
    return effective


class _Loader(yaml.SafeLoader):
    """Safe YAML that keeps dates as text: nothing the leveller reads is a
    date, and an impossible one (2026-02-30) is then the error of the
    setting that holds it, not a failure of the loader."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers
            if tag != 'tag:yaml.org,2002:timestamp']
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def read_yaml(path, option):
    """The document of a YAML (or JSON) file an option names."""
    text = files.read_text(path, '%s file' % option)
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise exceptions.CommandError('%s %s: not valid YAML: %s' % (
            option, path, exc)) from None
    except RecursionError:
        raise exceptions.CommandError('%s %s: nested too deeply' % (
            option, path)) from None


def plural(count, noun):
    return '%d %s%s' % (count, noun, '' if count == 1 else 's')


def add_long_option(parser):
    parser.add_argument(
        '--long', action='store_true', default=False,
        help='List additional fields in output')


def open_connection(app, effective, request_id=None):
    cloud = effective.section('cloud')
    if effective.sources['cloud.read_timeout'] == config.DEFAULT:
        del cloud['read_timeout']  # the cloud's own api_timeout, if set
    return connection.open_connection(app.cloud_config, app.options, cloud,
                                      request_id)


def load_snapshot(parsed_args, app, effective):
    """The --snapshot file, or the live cloud the shell was pointed at."""
    path = given(parsed_args, 'snapshot')
    if path is not None:
        snap = snapshot_io.load(path, effective['max_snapshot_mb'])
    else:
        snap = snapshot_io.parse(read_cloud(app, effective),
                                 origin='the cloud')
    if snap.source.get('note'):
        StderrWriter(app)('Note: %s' % snap.source['note'])
    return snap


def collector(app, effective):
    """A Collector of the live cloud, with Prometheus (or Aetos) if one is
    set (or in the catalog)."""
    conn = open_connection(app, effective)
    return collect.Collector(
        conn, metrics=metrics_reader(effective, conn=conn),
        history_hours=history_hours(effective),
        retries=effective['cloud.retries'], progress=progress_of(app),
        max_images=effective['cloud.max_images'])


def metrics_reader(effective, last_plausible=None, conn=None):
    """The Prometheus reader of the settings, or of Aetos in conn's
    catalog (None without either), asking what the guard needs:
    node_exporter's sizes, and Prometheus' figures at the guard's
    reference time, the last plausible run's (from the metrics file) or
    guard.since ago."""
    limits = guard.limits_of(effective)
    since = effective['guard.since']
    reference = guard.reference(
        last_plausible, time.time(), config.seconds(since) if since else 0) \
        if limits.checks & set(guard.COMPARING) else None
    return measure.reader_from_settings(
        effective.section('prometheus'),
        capacity='capacity' in limits.checks, reference=reference, conn=conn)


def examine(snapshot, effective, options, app):
    """The guard's findings (core/load/guard.py) on the domains of the
    hypervisors in scope; what keeps it from comparing is said."""
    limits = guard.limits_of(effective)
    # The hypervisors left out for having no metrics count: losing them
    # is what coverage_drop looks at.
    scope = dataclasses.replace(
        options, exclude_hosts=frozenset(effective['exclude_hosts']))
    hosts = [h.name for h in snapshot.hypervisors
             if h.usable and filters.in_scope(h, scope)]
    say = StderrWriter(app)
    for note in guard.notes(snapshot, limits):
        say('Note: %s' % note)
    return guard.examine(snapshot, hosts, limits, by_model(options))


def by_model(options):
    """Balancing domains are split by CPU model (else by architecture)."""
    return options.cpu_compatibility == config.CPU_MODEL


def say_fallback(say, findings):
    """A line per domain whose moves, asked for by the operator, are
    placed on Placement allocations for the guard's findings."""
    for domain, why in sorted(guard.reasons(findings).items()):
        say('Implausible metrics: %s: %s; destinations there are chosen '
            'from Placement allocations' % (domain, why))


def history_hours(effective):
    """Hours of Nova's migration history the balancing rules look at:
    the cooldown, its growth with recent moves, the return window."""
    return max(filters.RECENT_HOURS, effective['cooldown'],
               effective['cooldown_max'], effective['return_window']) + 1


def progress_of(app):
    """Progress of long reads on the command's stderr."""
    return progress.Progress(app.stderr)


def read_cloud(app, effective):
    """The live cloud as a snapshot document."""
    return collector(app, effective).collect()


def weights(effective):
    return core_options.weights_of(effective)


def check_hosts(snapshot, names, where):
    for name in names:
        if snapshot.find_hypervisor(name) is None:
            raise exceptions.CommandError(
                'exclude_hosts (%s): %s: no such hypervisor or compute host '
                'in the snapshot' % (where, errors.name(name)))


def check_zones(snapshot, zones, where):
    known = {h.availability_zone for h in snapshot.hypervisors}
    for zone in zones:
        if zone not in known:
            raise exceptions.CommandError(
                'availability_zones (%s): %s: no such availability zone '
                '(known: %s)' % (where, errors.name(zone), ', '.join(
                    sorted(z for z in known if z)) or 'none'))


def unmeasured(snapshot, effective):
    """Hypervisors to leave out because they have no metrics, if so set:
    metrics were asked of prometheus.url, or of Aetos from the catalog
    (the snapshot then has the guard's view of them)."""
    read = effective['prometheus.url'] or (
        effective['prometheus.url'] is None and snapshot.guard is not None)
    if effective['prometheus.no_metrics'] != 'exclude' or not read:
        return frozenset()
    return frozenset(h.name for h in snapshot.hypervisors if not h.metrics)


def planner_options(snapshot, effective, app):
    check_hosts(snapshot, effective['exclude_hosts'],
                effective.sources['exclude_hosts'])
    check_zones(snapshot, effective['availability_zones'],
                effective.sources['availability_zones'])
    left_out = unmeasured(snapshot, effective)
    say = StderrWriter(app)
    if left_out:
        say('Left out of balancing, no metrics (prometheus.no_metrics: '
            'exclude): %s' % ', '.join(sorted(left_out)))
    broken = [h for h in snapshot.hypervisors if h.inconsistency]
    if broken:
        say('Left out of balancing, inventory contradicts allocations: %s'
            % '; '.join('%s (%s)' % (h.name, h.inconsistency)
                        for h in broken))
    return core_options.from_settings(
        effective, exclude_hosts=frozenset(effective['exclude_hosts'])
        | left_out)


def add_planner_options(parser, snapshot=True):
    """The options every planning command (plan, apply) takes."""
    add_source_options(parser, snapshot=snapshot)
    add_weight_option(parser)
    flags.add(parser, 'max_moves', 'threshold', 'target', 'forecast_target',
              'min_drop', 'min_drop_per_gb', 'min_gain', 'ceiling',
              'move_cost', 'cpu_compatibility', 'cooldown', 'cooldown_max',
              'return_window', 'include_locked', 'keep_n_plus_one',
              'exclude_hosts', 'availability_zones', 'projects',
              'exclude_projects')
    return parser


class StderrWriter:
    """Human-facing notes go to stderr so -f json on stdout stays clean."""

    def __init__(self, app):
        self.stream = getattr(app, 'stderr', None)

    def __call__(self, text):
        """One line: names in it from the cloud are made printable."""
        if self.stream is not None:
            self.stream.write(printable(text.rstrip('\n')) + '\n')


def say_forecast(say, snapshot, options, domains=None):
    """A line per domain (of domains, or all) on how the forecast did on
    its history and the weight it has."""
    for domain, line in forecast.lines(snapshot, options.by_model):
        if domains is None or domain in domains:
            say(line)


def say_held(say, plan, only=None):
    """A line per domain the plan leaves above the threshold, and why;
    and per domain with no N+1 to keep (keep_n_plus_one). only: these
    domains' Held lines alone."""
    for domain in plan.domains:
        if domain.get('held') and (only is None or domain['domain'] in only):
            say('Held: %s (imbalance %.3f): %s' % (
                domain['domain'], domain['after'], domain['held']))
        if domain.get('n_plus_one') and only is None:
            say('N+1: %s had none when planning started (%s): its moves '
                'keep the other hypervisors\' losses absorbed' % (
                    domain['domain'], domain['n_plus_one']))
