"""The visual report: one self-contained HTML file with inline SVG charts.

core/planning/report.py gathers the figures; this module lays the charts out and
renders them through the Jinja2 template osc_leveller/data/report.html.j2,
which escapes every value (names and reasons come from the cloud). Jinja2
is imported only when a report is asked for: it adds about 45 ms to a
command's start.
"""

import datetime

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


def add_option(parser, what):
    parser.add_argument(
        '--report', metavar='<file.html>',
        help='Also write %s as one self-contained HTML file: per '
             'balancing domain, each hypervisor\'s CPU, RAM and score as '
             'bars; "-" for standard output, which then holds the report '
             'alone' % what)


def render(report):
    """The HTML page of report (core.report.Report)."""
    import jinja2  # only here: its import is the report's start-up cost

    env = jinja2.Environment(
        loader=jinja2.PackageLoader('osc_leveller', 'data'),
        autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)
    return env.get_template(TEMPLATE).render(
        report=report, domains=[_domain(report, d) for d in report.domains],
        taken_at=_time(report.snapshot_taken_at),
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
    classes = [(_class(h.before.score, domain.mean_before, report.threshold),
                _class(h.after.score, domain.mean_after, report.threshold)
                if after else None) for h in domain.hosts]
    mean = domain.mean_after if after else domain.mean_before
    charts = [
        _chart('cpu', 'CPU', domain.hosts, classes, lambda load: load.cpu,
               [_line('full', 1.0, '100 %')]),
        _chart('ram', 'RAM', domain.hosts, classes, lambda load: load.ram,
               [_line('full', 1.0, '100 %')]),
        _chart('score', 'Score', domain.hosts, classes,
               lambda load: load.score,
               [_line('ceiling', report.ceiling,
                      'ceiling %g' % report.ceiling),
                _line('mean', mean, 'mean %.2f' % mean)],
               band=(max(0.0, mean - report.threshold),
                     mean + report.threshold)),
    ]
    return {'domain': domain, 'charts': charts,
            'gauge': _gauge(report, domain),
            'labels': {h.hypervisor: h.label for h in domain.hosts}}


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


def _chart(name, title, hosts, classes, figure, lines, band=None):
    values = [figure(load) for h in hosts for load in (h.before, h.after)
              if load is not None and figure(load) is not None]
    top = max(values + [line['value'] for line in lines] + [1.0])
    top = -(-top * 4 // 1) / 4  # up to the next quarter
    scale = PLOT / top

    def x(value):
        return LABEL + round(value * scale, 1)

    rows = []
    for index, (host, (cls_before, cls_after)) in enumerate(
            zip(hosts, classes)):
        y = TOP + index * ROW
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
    height = TOP + len(hosts) * ROW + 6
    ticks = [{'x': x(t / 4), 'label': ('%.0f %%' % (25 * t))
              if name != 'score' else '%g' % (t / 4)}
             for t in range(0, int(top * 4) + 1)
             if top <= 1.5 or t % 2 == 0]
    return {
        'name': name, 'title': title,
        'width': LABEL + PLOT + RIGHT, 'height': height,
        'plot_left': LABEL, 'plot_bottom': height - 4, 'ticks': ticks,
        'rows': rows,
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
