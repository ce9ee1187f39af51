"""openstack leveller metrics check"""

from osc_lib.command import command
from osc_lib import exceptions

from osc_leveller.cloud import libvirt
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import common

COLUMNS = ('Hypervisor', 'Matched By', 'Load From', 'Why', 'Pressure',
           'Servers', 'Matched Servers', 'CPU Series', 'RAM Series',
           'Steal Series')
EXIT_OK = 0
EXIT_BELOW = 3  # coverage below --min-hosts or --min-servers


def _percent(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 100:
        raise exceptions.CommandError(
            'a percentage from 0 to 100 is needed (got %s)' % text)
    return value


class MetricsCheck(command.Lister):
    """Show what Prometheus covers: how each hypervisor's series matched,
    which of its servers have series of their own, and what falls back"""

    auth_required = False  # connects itself, like score and plan

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_source_options(parser, snapshot=False)
        parser.add_argument(
            '--min-hosts', metavar='<percent>', default='0',
            help='Exit with code %d when fewer hypervisors than this '
                 'percentage are scored from their own series (default 0)'
            % EXIT_BELOW)
        parser.add_argument(
            '--min-servers', metavar='<percent>', default='0',
            help='Exit with code %d when fewer running servers than this '
                 'percentage have series of their own (default 0)'
            % EXIT_BELOW)
        return parser

    def run(self, parsed_args):
        self.exit_code = EXIT_OK
        result = super().run(parsed_args)
        return result or self.exit_code

    @common.boundary
    def take_action(self, parsed_args):
        minimum = {'hypervisors': _percent(parsed_args.min_hosts),
                   'running servers': _percent(parsed_args.min_servers)}
        effective = common.settings(parsed_args, self.app)
        collector = common.collector(self.app, effective)
        if collector.metrics is None:
            raise exceptions.CommandError(
                'no Prometheus to check: set leveller: prometheus: url in '
                'clouds.yaml or give --prometheus-url, or register Aetos in '
                'the catalog (service type metric-storage)')
        document = collector.collect()
        found = collector.coverage
        say = common.StderrWriter(self.app)
        say('Metrics from %s' % collector.metrics.client.via)
        for line in _lines(found):
            say(line)
        if 'forecast' in document:
            common.say_forecast(say, snapshot_io.parse(document),
                                core_options.from_settings(effective))
        shares = {'hypervisors': (found.hosts_measured, len(found.rows)),
                  'running servers': (found.matched, found.servers)}
        for what, (part, whole) in shares.items():
            share = 100.0 * part / whole if whole else 100.0
            if share < minimum[what]:
                say('Coverage below what was asked: %d of %d %s (%.0f %%, '
                    'at least %g %% asked)' % (
                        part, whole, what, share, minimum[what]))
                self.exit_code = EXIT_BELOW
        return COLUMNS, [(
            r.hypervisor, r.matched_by, r.load_from, r.why, r.pressure,
            r.servers, r.matched, r.cpu_series, r.ram_series, r.steal_series)
            for r in sorted(found.rows, key=lambda r: r.hypervisor)]


def _lines(found):
    """The report's summary, for people; the rows are for scripts too."""
    if found.unreachable:
        return ['%s: every hypervisor is scored from Placement allocations'
                % found.unreachable]
    lines = ['Hypervisors: %d of %d scored from their own node_exporter '
             'series%s' % (found.hosts_measured, len(found.rows),
                           ' (targets placed by %s)' % found.identity
                           if found.identity else '')]
    if found.profiles:
        lines.append('Servers: %s; %d of %d running servers with series of '
                     'their own (CPU %d, RAM %d, CPU steal %d)' % (
                         ', '.join(p.exporter for p in found.profiles),
                         found.matched, found.servers,
                         found.measured('cpu'), found.measured('ram'),
                         found.measured('cpu_steal')))
    else:
        looked_for = '%s or %s' % (', '.join(libvirt.ORDER[:-1]),
                                   libvirt.ORDER[-1])
        lines.append('Servers: no libvirt exporter series (none of %s): '
                     'every server gets a per-vCPU share of its '
                     'hypervisor\'s load' % looked_for)
    missing = found.ram_missing()
    if missing:
        lines.append('Server RAM: %s: a share of the hypervisor\'s' % missing)
    missing = found.steal_missing()
    if missing:
        lines.append('Server CPU steal: %s: a hypervisor whose servers ask '
                     'for more CPU than it has threads shows at 100 %%' %
                     missing)
    lines.extend(found.notes + found.info)
    return lines
