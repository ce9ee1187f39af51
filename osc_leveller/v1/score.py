"""openstack leveller score"""

from osc_lib.command import command

from osc_leveller.core.load import scoring
from osc_leveller.core.model import model
from osc_leveller.core.planning import context
from osc_leveller.core.planning import report as report_data
from osc_leveller.core.rules import headroom
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import columns
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import outputs
from osc_leveller.v1 import report

HOST_COLUMNS = ('Hypervisor', 'Availability Zone', 'Domain', 'vCPU',
                'RAM (GiB)', 'CPU %', 'RAM %', 'Pressure %', 'Score')
LONG_COLUMNS = ('Host', 'Status', 'State', 'Servers', 'Load Source',
                'CPU Pressure %', 'RAM Pressure %')
DOMAIN_COLUMNS = ('Domain', 'Hypervisors', 'Mean Score', 'Imbalance', 'Gap',
                  'Hottest', 'Coolest')  # and N+k


class ScoreLeveller(outputs.StdoutCommand, command.Lister):
    """Show the load score of every hypervisor and the imbalance per domain"""

    auth_required = False  # a snapshot needs no cloud; live runs connect

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_source_options(parser)
        common.add_weight_option(parser)
        flags.add(parser, 'cpu_compatibility', 'headroom')
        common.add_long_option(parser)
        parser.add_argument(
            '--summary', action='store_true', default=False,
            help='List one row per balancing domain (AZ x CPU model) with '
                 'its imbalance and N+k headroom (could the servers of any '
                 'k hypervisors be placed on the others; --headroom), '
                 'instead of one per hypervisor')
        report.add_option(parser, 'the current load')
        flags.add(parser, outputs.FOLLOW)
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        report_file = common.given(parsed_args, 'report')
        effective = common.settings(parsed_args, self.app)
        outputs.check([('--report', report_file)],
                      read=outputs.read_files(parsed_args),
                      follow=effective[outputs.FOLLOW])
        snapshot = common.load_snapshot(parsed_args, self.app, effective)
        # The load as measured: what each hypervisor carries now.
        now = context.Context(snapshot, core_options.from_settings(effective),
                              context.NOW)
        state, rules = now.new_state(), now.rules
        by_model = now.options.by_model
        if report_file is not None:
            outputs.write(self.app, report_file, report.render(
                report_data.of_state(snapshot, now.options)), report.WHAT,
                effective[outputs.FOLLOW])
            common.StderrWriter(self.app)('Report written to %s'
                                          % outputs.name(report_file))
        usable = [h for h in snapshot.hypervisors if h.usable]
        domains = {h.name: scoring.domain_of(h, by_model) for h in usable}
        stats = scoring.domain_stats(
            {h.name: state.score(h.name) for h in usable}, domains)
        # N+k: each domain's hypervisors' servers packed onto the others.
        k = effective['headroom']
        spare = {h.domain: h for h in headroom.of_domains(
            snapshot, state, rules, k, names={h.name for h in usable})}
        if parsed_args.summary:
            return DOMAIN_COLUMNS + ('N+%d' % k,), self._domain_rows(
                stats, spare)
        say = common.StderrWriter(self.app)
        for line in _summary_lines(snapshot, state, stats, spare, k):
            say(line)
        names = HOST_COLUMNS + (LONG_COLUMNS if parsed_args.long else ())
        # A hypervisor whose figures make no sense has no score: last.
        hottest_first = sorted(snapshot.hypervisors, key=lambda h: (
            h.inconsistency is not None,
            -state.score(h.name) if h.inconsistency is None else 0, h.name))
        return names, [self._host_row(h, state, by_model, parsed_args.long)
                       for h in hottest_first]

    def _host_row(self, hyp, state, by_model, long):
        dims = state.dimensions(hyp.name)
        score = state.score(hyp.name)
        if hyp.inconsistency:
            dims = dict.fromkeys(dims)
            score = None
        cpu_used = state.usage(hyp.name, model.VCPU) + state.usage(
            hyp.name, model.PCPU)
        cpu_cap = hyp.capacity(model.VCPU) + hyp.capacity(model.PCPU)
        pressures = [p for p in (dims['cpu_pressure'], dims['ram_pressure'])
                     if p is not None]
        row = (
            hyp.name, hyp.availability_zone,
            scoring.domain_of(hyp, by_model),
            columns.UsageColumn((cpu_used, cpu_cap)),
            columns.UsageColumn((
                round(state.usage(hyp.name, model.MEMORY_MB) / 1024.0, 1),
                round(hyp.capacity(model.MEMORY_MB) / 1024.0, 1))),
            columns.PercentColumn(dims['cpu']),
            columns.PercentColumn(dims['ram']),
            columns.PercentColumn(max(pressures) if pressures else None),
            columns.ScoreColumn(score),
        )
        if long:
            row += (
                hyp.host, hyp.service.status, hyp.service.state,
                len(state.snapshot.servers_on(hyp.name)),
                state.load_model.hosts[hyp.name].mode,
                columns.PercentColumn(dims['cpu_pressure']),
                columns.PercentColumn(dims['ram_pressure']),
            )
        return row

    def _domain_rows(self, stats, spare):
        return [(s.domain, s.hosts, columns.ScoreColumn(s.mean),
                 round(s.imbalance, 4), round(s.gap, 4), s.hottest, s.coolest,
                 columns.HeadroomColumn(spare[s.domain]))
                for s in stats]


def _summary_lines(snapshot, state, stats, spare, k):
    missing = sum(1 for h in snapshot.hypervisors
                  if state.load_model.hosts[h.name].mode ==
                  scoring.ALLOCATIONS)
    if missing:
        yield ('Load from Placement allocations for %d of %d hypervisors '
               '(no metrics for them)' % (missing, len(snapshot.hypervisors)))
    broken = [h for h in snapshot.hypervisors if h.inconsistency]
    if broken:
        yield ('Left out, no score: inventory contradicts allocations: %s'
               % '; '.join('%s (%s)' % (h.name, h.inconsistency)
                           for h in broken))
    saturated = sorted(
        (-state.dimensions(h.name)['cpu'], h.name)
        for h in snapshot.hypervisors if h.inconsistency is None and
        state.load_model.hosts[h.name].mode == scoring.METRICS and
        state.dimensions(h.name)['cpu'] > 1.0)
    if saturated:
        yield ('CPU saturated (its servers ask for more than its threads, '
               'busy plus steal): %s' % ', '.join(
                   '%s %.0f %%' % (name, -100 * cpu)
                   for cpu, name in saturated[:5]) +
               (', and %d more' % (len(saturated) - 5)
                if len(saturated) > 5 else ''))
    yield 'Imbalance %.3f over %s:' % (
        scoring.pooled_imbalance(stats),
        common.plural(len(stats), 'balancing domain'))
    for s in stats:
        yield '  %-32s %15s  imbalance %.3f  gap %.2f  N+%d %s' % (
            s.domain, common.plural(s.hosts, 'hypervisor'), s.imbalance,
            s.gap, k, spare[s.domain].reason())
