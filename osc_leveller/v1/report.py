"""The visual report: one self-contained HTML file with inline SVG charts,
and ``openstack leveller report``, which draws a saved plan.

core/planning/report.py gathers the figures; this module lays the charts out and
renders them through the Jinja2 template osc_leveller/data/report.html.j2,
which escapes every value (names and reasons come from the cloud). Jinja2
is imported only when a report is asked for: it adds about 45 ms to a
command's start.
"""

import datetime

from osc_lib import exceptions
from osc_lib.command import command

from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import report as report_data
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import outputs

TEMPLATE = 'report.html.j2'
WHAT = 'report file'
# Chart geometry, in pixels: a row per hypervisor, its bar before above its
# bar after.
LABEL = 92  # the hypervisor's name, left of the plot
PLOT = 250
RIGHT = 16
TOP = 20  # the axis labels
ROW = 26
BAR = 9
GAUGE = 300  # the imbalance gauge of a domain
GAP = 14  # where a folded domain's chart leaves hypervisors out


def add_option(parser, what):
    parser.add_argument(
        '--report', metavar='<file.html>',
        help='Also write %s as one self-contained HTML file: per '
             'balancing domain, each hypervisor\'s CPU, RAM and score as '
             'bars; "-" for standard output, which then holds the report '
             'alone' % what)


COLUMNS = ('Report', 'Plan File', 'Kind', 'Moves', 'Balancing Domains',
           'Hypervisors', 'Folded', 'Drawn On', 'Bytes')


class ReportLeveller(outputs.StdoutCommand, command.ShowOne):
    """Draw a saved plan as an HTML report, on its snapshot or the cloud"""

    auth_required = False  # a snapshot needs no cloud; live runs connect

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'plan_file', metavar='<plan-file>',
            help='Plan saved by "openstack leveller plan --output-file"')
        common.add_source_options(parser)
        parser.add_argument(
            '--output-file', metavar='<file.html>', required=True,
            help='Write the report to this file: per balancing domain, each '
                 'hypervisor\'s CPU, RAM and score before and after the '
                 'plan, its moves and their reasons; "-" for standard '
                 'output, which then holds the report alone')
        flags.add(parser, outputs.FOLLOW)
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        path = common.given(parsed_args, 'plan_file')
        output = common.given(parsed_args, 'output_file')
        effective = common.settings(parsed_args, self.app)
        follow = effective[outputs.FOLLOW]
        outputs.check([('--output-file', output)],
                      read=outputs.read_files(parsed_args), follow=follow)
        plan = plan_mod.read(path)
        # The plan file holds the moves and the figures the plan predicted,
        # not each hypervisor's load: those come from the state drawn on.
        snapshot = common.load_snapshot(parsed_args, self.app, effective)
        try:
            plan_mod.check_cloud(plan, snapshot)
            data = report_data.of_file(snapshot, plan)
        except plan_mod.OtherCloud as exc:
            raise exceptions.CommandError('%s: %s' % (path, exc)) from None
        except report_data.ReportError as exc:
            raise exceptions.CommandError(
                '%s: %s: draw it on the snapshot it was made on (--snapshot '
                'FILE, saved by "openstack leveller snapshot")' % (
                    path, exc)) from None
        except core_options.OptionsError as exc:
            raise exceptions.CommandError('%s: %s' % (path, exc)) from None
        page = render(data)
        outputs.write(self.app, output, page, WHAT, follow)
        say = common.StderrWriter(self.app)
        if data.drawn_at is not None:
            say('Note: drawn on the state of %s, not on the snapshot the plan '
                'was made on (%s)%s' % (
                    _time(data.drawn_at), _time(plan.snapshot_taken_at),
                    ', which has changed since: placement, capacity or rules '
                    'differ' if data.changed else ''))
        say('Report written to %s' % outputs.name(output))
        folded = sum(len(report_data.fold(d).folded) for d in data.domains)
        return COLUMNS, (
            outputs.name(output), path, plan.kind, len(plan.moves),
            len(data.domains), sum(len(d.hosts) for d in data.domains),
            folded, "the plan's snapshot" if data.drawn_at is None else
            'the state of %s%s' % (_time(data.drawn_at), ', changed'
                                   if data.changed else ''),
            len(page.encode('utf-8')))


def render(report):
    """The HTML page of report (core.report.Report)."""
    import jinja2  # only here: its import is the report's start-up cost

    env = jinja2.Environment(
        loader=jinja2.PackageLoader('osc_leveller', 'data'),
        autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)
    return env.get_template(TEMPLATE).render(
        report=report, ends=report_data.ENDS,
        domains=[_domain(report, d) for d in report.domains],
        taken_at=_time(report.snapshot_taken_at),
        drawn_at=None if report.drawn_at is None else _time(report.drawn_at),
        source=', '.join('%s: %s' % (k, v) for k, v in sorted(
            report.snapshot_source.items()) if v))


def _time(seconds):
    return datetime.datetime.fromtimestamp(
        seconds, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')


def _domain(report, domain):
    """The charts of one domain: CPU, RAM and score, one row per
    hypervisor, its bars coloured by how its score stands against the
    domain mean and the threshold."""
    after = domain.imbalance_after is not None
    fold = report_data.fold(domain)
    classes = [(_class(h.before.score, domain.mean_before, report.threshold),
                _class(h.after.score, domain.mean_after, report.threshold)
                if after else None) for h in fold.shown]
    mean = domain.mean_after if after else domain.mean_before
    breaks = _breaks(fold, domain.hosts)
    charts = [
        _chart('cpu', 'CPU', fold.shown, classes, lambda load: load.cpu,
               [_line('full', 1.0, '100 %')], breaks=breaks),
        _chart('ram', 'RAM', fold.shown, classes, lambda load: load.ram,
               [_line('full', 1.0, '100 %')], breaks=breaks),
        _chart('score', 'Score', fold.shown, classes,
               lambda load: load.score,
               [_line('ceiling', report.ceiling,
                      'ceiling %g' % report.ceiling),
                _line('mean', mean, 'mean %.2f' % mean)],
               band=(max(0.0, mean - report.threshold),
                     mean + report.threshold), breaks=breaks),
    ]
    return {'domain': domain, 'charts': charts,
            'gauge': _gauge(report, domain), 'shown': fold.shown,
            'folded': _folded(fold.folded, after),
            'labels': {h.hypervisor: h.label for h in domain.hosts}}


def _folded(hosts, after):
    """The hypervisors a large domain folds: their range of score, and a
    row each (CPU, RAM, score before and after) rather than three bars."""
    if not hosts:
        return None
    scores = [h.before.score for h in hosts]
    ranges = [('now' if not after else 'before', min(scores), max(scores))]
    if after:
        scores = [h.after.score for h in hosts]
        ranges.append(('after', min(scores), max(scores)))
    return {'hosts': hosts, 'ranges': ranges}


def _class(score, mean, threshold):
    """hot, cool or even: outside the band mean +- threshold or in it. A
    domain with every hypervisor in the band is below the threshold."""
    if score > mean + threshold:
        return 'hot'
    if score < mean - threshold:
        return 'cool'
    return 'even'


def _line(kind, value, label):
    return {'kind': kind, 'value': value, 'label': label}


def _breaks(fold, hosts):
    """{row: hypervisors folded just above it} of a folded domain's
    charts, so a chart shows where the hypervisors left out were."""
    place = {h.hypervisor: i for i, h in enumerate(hosts)}
    found = {}
    for row in range(1, len(fold.shown)):
        skipped = place[fold.shown[row].hypervisor] - place[
            fold.shown[row - 1].hypervisor] - 1
        if skipped:
            found[row] = skipped
    return found


def _chart(name, title, hosts, classes, figure, lines, band=None,
           breaks=None):
    """breaks: {row: hypervisors folded above it}, each a gap with its
    count in the chart."""
    breaks = breaks or {}
    values = [figure(load) for h in hosts for load in (h.before, h.after)
              if load is not None and figure(load) is not None]
    top = max(values + [line['value'] for line in lines] + [1.0])
    top = -(-top * 4 // 1) / 4  # up to the next quarter
    scale = PLOT / top

    def x(value):
        return LABEL + round(value * scale, 1)

    rows, gaps, shift = [], [], 0
    for index, (host, (cls_before, cls_after)) in enumerate(
            zip(hosts, classes)):
        if index in breaks:
            gaps.append({'y': TOP + index * ROW + shift + GAP - 3,
                         'text': '⋯ %d folded' % breaks[index]})
            shift += GAP
        y = TOP + index * ROW + shift
        bars = []
        for when, load, cls in (('before', host.before, cls_before),
                                ('after', host.after, cls_after)):
            if load is None:
                continue
            value = figure(load)
            bars.append({
                'when': when, 'cls': cls, 'x': LABEL,
                'y': y + 3 + (BAR + 2 if when == 'after' else 0),
                'width': round((value or 0.0) * scale, 1), 'height': BAR,
                'text': '—' if value is None else '%.0f %%' % (100 * value)
                if name != 'score' else '%.2f' % value})
        if len(bars) == 1:  # the current state alone: one thicker bar
            bars[0].update(when='now', y=y + 4, height=2 * BAR)
        rows.append({'host': host, 'y': y, 'label_y': y + ROW / 2 + 4,
                     'bars': bars})
    height = TOP + len(hosts) * ROW + shift + 6
    ticks = [{'x': x(t / 4), 'label': ('%.0f %%' % (25 * t))
              if name != 'score' else '%g' % (t / 4)}
             for t in range(0, int(top * 4) + 1)
             if top <= 1.5 or t % 2 == 0]
    return {
        'name': name, 'title': title,
        'width': LABEL + PLOT + RIGHT, 'height': height,
        'plot_left': LABEL, 'plot_bottom': height - 4, 'ticks': ticks,
        'rows': rows, 'gaps': gaps,
        'lines': [dict(line, x=x(line['value'])) for line in lines],
        'band': None if band is None else {
            'x': x(band[0]), 'width': round((band[1] - band[0]) * scale, 1)},
    }


def _gauge(report, domain):
    """The domain's imbalance before (and after) against the threshold."""
    figures = [domain.imbalance_before]
    labels = ('now',)
    if domain.imbalance_after is not None:
        figures.append(domain.imbalance_after)
        labels = ('before', 'after')
    top = max(figures + [report.threshold]) * 1.15 or 1.0
    scale = (GAUGE - 10) / top
    bars = [{'when': when, 'y': 4 + 12 * i,
             'width': round(value * scale, 1),
             'text': '%.3f' % value,
             'above': value >= report.threshold}
            for i, (when, value) in enumerate(zip(labels, figures))]
    threshold = round(report.threshold * scale, 1)
    target = round(report.target * scale, 1)
    for bar in bars:  # its figure right of the bar and of both lines
        bar['text_x'] = max(bar['width'], threshold, target) + 5
    return {'width': GAUGE, 'height': 8 + 12 * len(bars), 'bars': bars,
            'threshold': threshold, 'target': target}
