"""Measured load from Prometheus, matched to Nova's hypervisors and servers.

One reading asks Prometheus, in this order:

1. ``node_uname_info`` (else ``node_memory_MemTotal_bytes``): one series a
   node_exporter target, to place each target on a hypervisor
   (hostmatch.Matcher);
2. the host queries, aggregated by target (and, with prometheus.lasting or
   forecast_days set, the same over the lasting period or the period ahead
   on past days; with forecast_days, the history the forecast's skill is
   measured on: two range queries, Reader._history);
3. which libvirt exporter is there (metric names, one or two requests);
4. the guard's one query (core/load/guard.py): what node_exporter shows of each
   hypervisor's size, and, at the guard's reference time, its CPU and RAM
   and its servers with series of their own;
5. the server queries.

Whatever cannot be matched is said, never guessed: a hypervisor without
series is scored from Placement allocations, a server without series gets a
per-vCPU share of its hypervisor's measured load, and both are counted in
the coverage that ``openstack leveller metrics check`` shows.
"""

import collections
import dataclasses
import math
import time
import urllib.parse

from osc_leveller.cloud import aetos
from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import libvirt
from osc_leveller.cloud import prometheus
from osc_leveller.core.load import skill
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.settings import config

# {window}: the rate() window; {label}: the labels that tell targets apart.
HOST_QUERIES = {
    'cpu': '1 - avg by ({label}) '
           '(rate(node_cpu_seconds_total{{mode="idle"}}[{window}]))',
    'ram': '1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes',
    'cpu_pressure': 'rate(node_pressure_cpu_waiting_seconds_total[{window}])',
    'ram_pressure':
        'rate(node_pressure_memory_waiting_seconds_total[{window}])',
}
HOST_METRICS = ('cpu', 'ram')  # without these a host has no usable metrics
PRESSURE = ('cpu_pressure', 'ram_pressure')
IDENTITY = ('node_uname_info', 'node_memory_MemTotal_bytes')
RATE_SLACK = 0.02  # how far outside 0..1 a rate may read and still count
DAY = 86400
# The guard's query: its parts, told apart by this label's value.
GUARD_LABEL = 'leveller_guard'
# The history's queries: their parts (figure_kind) told apart the same way.
HISTORY_LABEL = 'leveller_history'
CPUS = 'count by ({label}) (node_cpu_seconds_total{{mode="idle"}})'
MEMORY = 'node_memory_MemTotal_bytes'
MIB = 2 ** 20
UNIT_MS = {'h': 3600000, 'm': 60000, 's': 1000, 'ms': 1}
MOST = 2 ** 53  # a figure beyond this is written as this
# Each prometheus setting's declared default (core/settings/config.py).
DEFAULTS = config.Settings().section('prometheus')


@dataclasses.dataclass
class Reading:
    """What Prometheus says, keyed the way Nova names things."""
    hosts: dict = dataclasses.field(default_factory=dict)     # name: metrics
    problems: dict = dataclasses.field(default_factory=dict)  # name: why not
    matched: dict = dataclasses.field(default_factory=dict)   # name: how
    servers: dict = dataclasses.field(default_factory=dict)  # id: metrics
    strangers: set = dataclasses.field(default_factory=set)  # ids not Nova's
    info: list = dataclasses.field(default_factory=list)  # for the report
    profiles: list = dataclasses.field(default_factory=list)
    identity: str = None      # the series that placed the targets
    notes: list = dataclasses.field(default_factory=list)
    unreachable: str = None   # set when Prometheus gave no answer at all
    # The same figures averaged over the lasting period, when asked.
    lasting: str = ''
    lasting_hosts: dict = dataclasses.field(default_factory=dict)
    lasting_servers: dict = dataclasses.field(default_factory=dict)
    # The same over the period ahead on past days (a model.Forecast).
    forecast: object = None
    forecast_hosts: dict = dataclasses.field(default_factory=dict)
    forecast_servers: dict = dataclasses.field(default_factory=dict)
    # The hosts' history the forecast's skill is measured on (a
    # skill.History), when the forecast is set and Prometheus answered.
    history: object = None
    # What the guard checks the metrics with: a snapshot's guard section.
    guard: dict = None
    read_at: float = None  # when the first query went out (the epoch)

    def host(self, name):
        """A host's figures as a snapshot writes them (lasting and
        forecast ones nested), or None."""
        return _nested(self.hosts.get(name), self.lasting_hosts.get(name),
                       self.forecast_hosts.get(name))

    def server(self, server_id):
        """A server's figures as a snapshot writes them, or None."""
        return _nested(self.servers.get(server_id),
                       self.lasting_servers.get(server_id),
                       self.forecast_servers.get(server_id))


def _nested(figures, lasting, forecast):
    if not figures:
        return figures
    nested = {k: v for k, v in (('lasting', lasting),
                                ('forecast', forecast)) if v}
    return dict(figures, **nested) if nested else figures


class Reader:
    """Reads host and server load for the given hypervisors."""

    def __init__(self, client, queries=None, server_queries=None,
                 window=DEFAULTS['window'], host_label=DEFAULTS['host_label'],
                 host_pattern=DEFAULTS['host_pattern'],
                 host_match=DEFAULTS['host_match'],
                 server_profile=DEFAULTS['server_profile'], lasting='',
                 forecast=None, capacity=True, reference=None,
                 history_timeout=None):
        self.client = client
        self.queries = dict(HOST_QUERIES if queries is None else queries)
        self.server_queries = {m: q for m, q in
                               (server_queries or {}).items() if q}
        self.window = window
        self.host_label = host_label
        self.host_pattern = host_pattern
        self.host_match = tuple(host_match)
        self.server_profile = server_profile
        self.lasting = lasting
        self.forecast = forecast  # a model.Forecast, or None
        # Seconds to wait for each part of the forecast's history: the
        # heaviest queries asked (None: the client's timeout).
        self.history_timeout = history_timeout
        # For the guard: ask what node_exporter shows of each hypervisor's
        # size; the core.guard.Reference to compare with, or None.
        self.capacity = capacity
        self.reference = reference
        self._at = None  # the time the read's queries are evaluated at

    def _render(self, template):
        label = ', '.join(['instance', 'job'] + (
            [self.host_label] if self.host_label else []))
        return template.format(window=self.window, label=label)

    def read(self, hypervisors, servers, guard=True):
        """A Reading for hypervisors ([hostmatch.HostRef]) and servers
        ({server id: the hypervisor Nova has it on}, or a callable giving
        it: it is called once, after the last query, so the queries can go
        out while Nova's servers are still being listed).

        Prometheus not answering gives a Reading that says so; an answer
        that shows a wrong URL or query is a PrometheusError. guard: ask
        the guard's query too (a re-check's read does not need it).
        """
        reading = Reading(read_at=time.time())
        # Every instant query of the read is evaluated at that time: a
        # later run's guard, asking for the figures of then, sees exactly
        # what this read saw (not the samples scraped while it ran).
        self._at = reading.read_at
        try:
            matcher = self._match(hypervisors, reading)
            self._hosts(matcher, hypervisors, reading)
            if self.lasting:
                reading.lasting = self.lasting
                reading.lasting_hosts = self._other_hosts(
                    matcher, reading, self._over)
            if self.forecast:
                reading.forecast = self.forecast
                reading.forecast_hosts = self._other_hosts(
                    matcher, reading, self._ahead)
                if guard:  # a re-check keeps the first read's skill
                    reading.history = self._history(matcher, reading)
            reading.profiles = self._profiles()
            if guard:
                self._guard(matcher, hypervisors, reading)
            self._servers(matcher, servers, reading)
        except prometheus.Unreachable as exc:
            return Reading(unreachable=str(exc))
        return reading

    def _query(self, promql):
        return self.client.query(promql, at=self._at)

    def _over(self, promql):
        """The query averaged over the lasting period."""
        return self._mean(promql, self.lasting)

    def _ahead(self, promql):
        """The query over the period ahead of this time of day, averaged
        over the past days: a series missing on any day has none."""
        ahead = self.forecast.ahead
        back = config.seconds(ahead)
        days = self.forecast.days
        terms = [self._mean(promql, ahead, ' offset %ds' % (
            day * DAY - back)) for day in range(1, days + 1)]
        return terms[0] if days == 1 else '(%s) / %d' % (
            ' + '.join(terms), days)

    def _mean(self, promql, period, offset=''):
        """The query averaged over the period before (offset: before
        that, ' offset 3600s') by a subquery. Its resolution is the longest
        that divides the period into steps no longer than the rate()
        window, so each stretch of the period is seen once; Prometheus'
        default, its evaluation interval, costs several times more on the
        history (benchmarks/skill_cost.py), and the forecast is the
        predictor whose skill the history measures."""
        period_ms = int(round(config.seconds(period) * 1000))
        window_ms = max(1, int(round(config.seconds(self.window) * 1000)))
        step_ms = max(1, period_ms // max(1, -(-period_ms // window_ms)))
        unit = next(u for u in ('h', 'm', 's', 'ms')
                    if step_ms % UNIT_MS[u] == 0)
        return 'avg_over_time((%s)[%s:%d%s]%s)' % (
            promql, period, step_ms // UNIT_MS[unit], unit, offset)

    # ------------------------------------------------------------ hosts
    def _match(self, hypervisors, reading):
        matcher = hostmatch.Matcher(hypervisors, self.host_match,
                                    self.host_label, self.host_pattern)
        for name in IDENTITY:
            samples = self._query(name)
            if samples:
                reading.identity = name
                matcher.learn(samples)
                break
        reading.notes.extend(matcher.notes)
        return matcher

    def _host_of(self, matcher, labels):
        key = hostmatch.target_key(labels)
        if key in matcher.targets:
            return matcher.targets[key]
        if matcher.targets or key[0]:
            return None  # a target that is no hypervisor's
        # A custom query aggregated by a label of its own, no targets.
        name, how = matcher.place(labels)
        if name is not None:
            matcher.how.setdefault(name, how)
        return name

    def _hosts(self, matcher, hypervisors, reading):
        names = [ref.name for ref in hypervisors]
        values = {name: {} for name in names}
        problems = {}
        pressure_seen = False
        for metric, template in self.queries.items():
            seen = collections.defaultdict(list)
            samples = self._query(self._render(template))
            if not samples and metric in HOST_METRICS and reading.identity:
                # A query that matches nothing: one reason, not N.
                for name in names:
                    problems.setdefault(name, (
                        'the %s query returned no series at all (check '
                        'leveller: prometheus: queries: %s)' % (
                            metric, metric)))
            for labels, value in samples:
                name = self._host_of(matcher, labels)
                if name is not None:
                    seen[name].append(value)
            for name, found in seen.items():
                if len(found) > 1:
                    problems.setdefault(name, '%d %s series' % (
                        len(found), metric))
                    continue
                fraction = _fraction(found[0])
                if fraction is None:
                    problems.setdefault(name, '%s is %s, outside 0..1' % (
                        metric, found[0]))
                values[name][metric] = fraction
            pressure_seen |= metric in PRESSURE and bool(seen)
            if metric in HOST_METRICS:
                for name in names:
                    if name not in seen:
                        problems.setdefault(name, self._unseen(
                            name, metric, matcher, reading))
        if any(m in PRESSURE for m in self.queries) and values and \
                not pressure_seen and any(n not in problems for n in names):
            reading.notes.append(
                'no pressure (PSI) series for any hypervisor: scored on '
                'utilisation only (a kernel without PSI, such as RHEL '
                'without psi=1, or node_exporter\'s pressure collector off)')
        reading.matched = dict(matcher.how)
        reading.hosts = {n: v for n, v in values.items() if n not in problems}
        reading.problems = problems

    def _other_hosts(self, matcher, reading, transform):
        """The lasting or forecast figures (transform: _over, _ahead) of
        the hosts read: one series each, in 0..1, or none for that
        figure."""
        found = collections.defaultdict(dict)
        for metric, template in self.queries.items():
            seen = collections.defaultdict(list)
            for labels, value in self._query(
                    transform(self._render(template))):
                name = self._host_of(matcher, labels)
                if name in reading.hosts:
                    seen[name].append(_fraction(value))
            for name, values in seen.items():
                if len(values) == 1 and values[0] is not None:
                    found[name][metric] = values[0]
        return dict(found)

    def _history(self, matcher, reading):
        """The CPU and RAM of the hosts read, on a grid of the period
        ahead up to the read (skill.History), or None with a note when
        Prometheus fails it: the forecast then gets no weight.

        Two range queries, each figure and kind told apart by
        HISTORY_LABEL: the figures now, and their lasting view, at each
        step of the days scored; and the mean of each step before, over
        those days and forecast_days more (the truth and the past days).
        """
        figures = [f for f in skill.FIGURES if f in self.queries]
        if not figures:
            return None
        step = config.seconds(self.forecast.ahead)
        end = int(reading.read_at)
        scored = int(min(self.forecast.days, skill.MOST_DAYS) * DAY // step)
        back = scored - 1 + int(round(self.forecast.days * DAY / step))
        recent, past = [], []
        for figure in figures:
            promql = self._render(self.queries[figure])
            recent.append(('%s_now' % figure, promql))
            if self.lasting:
                recent.append(('%s_lasting' % figure, self._over(promql)))
            past.append(('%s_actual' % figure, self._mean(
                promql, self.forecast.ahead)))
        spans = {'now': (-scored, -1), 'lasting': (-scored, -1),
                 'actual': (-back, 0)}
        try:
            found = self.client.query_range(
                _tagged(recent, HISTORY_LABEL), end - scored * step,
                end - step, step, self.history_timeout) + \
                self.client.query_range(
                    _tagged(past, HISTORY_LABEL), end - back * step, end,
                    step, self.history_timeout)
        except prometheus.PrometheusError as exc:
            slow = ' (its history takes Prometheus longer than '\
                'prometheus.history_timeout)' \
                if isinstance(exc, prometheus.TimedOut) else ''
            reading.notes.append('forecast skill not measured: %s%s: the '
                                 'forecast gets no weight' % (exc, slow))
            return None
        seen = collections.defaultdict(list)  # (kind, figure, name): series
        for labels, points in found:
            figure, _, kind = labels.pop(HISTORY_LABEL, '').rpartition('_')
            name = self._host_of(matcher, labels)
            if figure in figures and kind in spans and name in reading.hosts:
                seen[kind, figure, name].append(points)
        history = {kind: {figure: {} for figure in figures}
                   for kind in spans}
        for (kind, figure, name), series in seen.items():
            if len(series) > 1:
                continue  # two series of one host: neither is its own
            first, last = spans[kind]
            values = history[kind][figure][name] = {}
            for time_, value in series[0]:
                index = int(round((time_ - end) / step))
                fraction = _fraction(value)
                if first <= index <= last and fraction is not None and \
                        abs(time_ - end - index * step) < 0.01:
                    values[index] = fraction
        return skill.History(float(step), history['now'], history['actual'],
                             history['lasting'] if self.lasting else None)

    def _unseen(self, name, metric, matcher, reading):
        if name not in matcher.series:
            if reading.identity is None:
                return 'Prometheus has no node_exporter series (%s)' % (
                    ' nor '.join(IDENTITY))
            return 'no node_exporter target matches it (tried %s)' % (
                ', '.join(self._tried(name, matcher)))
        return 'no %s series for %s' % (metric, hostmatch.show(
            matcher.series[name]))

    def _tried(self, name, matcher):
        ref = matcher.hypervisors[name]
        said = {'label': 'label %s' % self.host_label,
                'instance': 'instance as a host name',
                'host_ip': 'instance as its host_ip' if ref.ip else
                           'no host_ip in Nova',
                'nodename': 'node_uname_info nodename'}
        return [said[m] for m in self.host_match
                if m != 'label' or self.host_label]

    # ---------------------------------------------------------- servers
    def _profiles(self):
        if self.server_queries:
            return [dataclasses.replace(libvirt.CUSTOM,
                                        queries=self.server_queries)]
        if self.server_profile == 'none':
            return []
        if self.server_profile != 'auto':
            return [libvirt.PROFILES[self.server_profile]]
        names = set(self.client.label_values('__name__', libvirt.NAMES))
        return libvirt.detect(names, lambda: any(
            value for _, value in self._query(libvirt.KUMINA_CHECK)))

    def _servers(self, matcher, servers, reading):
        found = collections.defaultdict(list)  # (id, metric): [(where, x)]
        above = {}  # id: a CPU above its vCPUs, for the guard
        lasted = collections.defaultdict(list)
        ahead = collections.defaultdict(list)
        for profile in reading.profiles:
            for metric, template in profile.queries.items():
                promql = template.format(window=self.window)
                asked = [(found, promql)]
                if self.lasting:
                    asked.append((lasted, self._over(promql)))
                if self.forecast:
                    asked.append((ahead, self._ahead(promql)))
                for into, query in asked:
                    for labels, value in self._query(query):
                        uuid = libvirt.server_id(labels, profile)
                        fraction = _fraction(value)
                        if uuid and fraction is not None:
                            into[uuid, metric].append(
                                (matcher.locate(labels), fraction))
                        elif uuid and into is found and metric == 'cpu' \
                                and value > 1.0 and math.isfinite(value):
                            above[uuid] = max(above.get(uuid, 0.0), value)
        if callable(servers):
            servers = servers()
        self._busiest(above, servers, reading)
        # A server's series on the hypervisor Nova has it on: since it
        # arrived there, what it has kept up. On past days, the one
        # series it had wherever it was.
        for into, other in ((reading.lasting_servers, lasted),
                            (reading.forecast_servers, ahead)):
            for (uuid, metric), series in sorted(other.items()):
                value = _one(series, servers.get(uuid))
                if value is not None and uuid in servers:
                    into.setdefault(uuid, {})[metric] = value
        moving, unsure = set(), set()
        for (uuid, metric), series in sorted(found.items()):
            if uuid not in servers:
                reading.strangers.add(uuid)
                continue
            value = _one(series, servers[uuid])
            if value is None:
                unsure.add(uuid)
                continue
            if len(series) > 1:
                moving.add(uuid)
            reading.servers.setdefault(uuid, {})[metric] = value
        if unsure:
            reading.notes.append(
                '%d servers have series on several hypervisors, none or more '
                'than one of them where Nova has the server: not used (%s)' %
                (len(unsure), _some(unsure)))
        if moving:
            reading.info.append(
                '%d servers have series on two hypervisors (a live '
                'migration): the series on Nova\'s hypervisor is used' %
                len(moving))
        if reading.strangers:
            reading.info.append(
                'series of %d servers Nova does not list (deleted, or of '
                'another region or cell) are ignored' % len(
                    reading.strangers))

    # ------------------------------------------------------------ guard
    def _guard(self, matcher, hypervisors, reading):
        """The guard's facts of each hypervisor (reading.guard), from one
        query whose parts a label tells apart. Prometheus failing it is a
        note: the read goes on without them."""
        names = {ref.name for ref in hypervisors}
        reference = self.reference
        # In milliseconds: the figures of then are the ones a run saw then.
        offset = int(round((reading.read_at - reference.time) * 1000)) \
            if reference else 0
        reading.guard = {
            'reference': snapshot_io.format_time(reference.time)
            if offset > 0 else None,
            'reference_from': reference.source if offset > 0 else None,
            'read_at': reading.read_at,
            'window': float(config.seconds(self.window)),
            'hypervisors': {}}
        parts = self._guard_parts(reading.profiles, offset)
        if not parts:
            return
        query = self.guard_query(reading.profiles, offset)
        try:
            samples = self._query(query)
        except prometheus.PrometheusError as exc:
            reading.notes.append('the guard\'s query failed (%s): sizes and '
                                 'changes since the last run not checked' %
                                 exc)
            return
        seen = collections.defaultdict(list)  # (part, name): [value]
        for labels, value in samples:
            part = labels.get(GUARD_LABEL)
            # Figures of then may be of a target gone since: placed by
            # their own labels, as a libvirt exporter's are.
            name = self._host_of(matcher, labels) if part in (
                'cpus', 'memory') else matcher.locate(labels)
            if name in names:
                # A value that cannot be one is kept as such: known
                # there, and saying nothing.
                seen[part, name].append(
                    value if math.isfinite(value) and value >= 0 else None)
        reading.guard['hypervisors'] = _facts(
            seen, names, dict(parts), offset > 0 and any(
                p == 'servers_before' for p, _ in parts))

    def guard_query(self, profiles, offset):
        """The guard's one query, its parts told apart by GUARD_LABEL:
        for these libvirt profiles, the figures of offset milliseconds ago
        (0: none); None when there is nothing to ask."""
        return _tagged(self._guard_parts(profiles, offset), GUARD_LABEL) \
            or None

    def _guard_parts(self, profiles, offset):
        """[(part, PromQL)] of the guard's query."""
        parts = []
        if self.capacity:
            parts += [('cpus', self._render(CPUS)), ('memory', MEMORY)]
        if offset > 0:
            def then(promql):
                return 'last_over_time((%s)[100ms:100ms] offset %dms)' % (
                    promql, offset)
            for metric in HOST_METRICS:
                if metric in self.queries:
                    parts.append(('%s_before' % metric, then(self._render(
                        self.queries[metric]))))
            for profile in profiles:
                if profile.queries.get('cpu'):
                    parts.append(('servers_before', 'count by (instance, '
                                  'job) (%s)' % then(profile.queries[
                                      'cpu'].format(window=self.window))))
        return parts

    def _busiest(self, above, servers, reading):
        """The server read furthest above its vCPUs, per hypervisor."""
        if reading.guard is None:
            return
        facts = reading.guard['hypervisors']
        for uuid, value in sorted(above.items()):
            name = servers.get(uuid)
            if name is None:
                continue
            entry = facts.setdefault(name, {})
            if value > entry.get('busiest_cpu', 0.0):
                entry.update(busiest_server=uuid,
                             busiest_cpu=min(value, MOST))


def _tagged(parts, label):
    """One query of the parts [(part, PromQL)], each series with its part
    as the value of label."""
    return ' or '.join('label_replace(%s, "%s", "%s", "", "")' % (
        expression, label, part) for part, expression in parts)


def _facts(seen, names, asked, before):
    """{hypervisor: its facts} in a snapshot's form, from the guard's
    answer {(part, name): [values]}; a part with two series for one
    hypervisor says nothing of it. before: the servers' count was asked."""
    def one(part, name):
        values = seen.get((part, name), ())
        return values[0] if len(values) == 1 else None

    some_cpus = any(part == 'cpus' for part, _ in seen)
    facts = {}
    for name in sorted(names):
        entry = {}
        cpus, memory = one('cpus', name), one('memory', name)
        if cpus is not None:
            entry['cpus'] = int(min(round(cpus), MOST))
        elif memory is not None and some_cpus and 'cpus' in asked and \
                ('cpus', name) not in seen:
            entry['cpus'] = 0  # its node_exporter is there, its CPUs not
        if memory is not None:
            entry['memory_mb'] = min(memory / MIB, MOST)
        cpu, ram = (_fraction(value) if value is not None else None
                    for value in (one('cpu_before', name),
                                  one('ram_before', name)))
        if cpu is not None and ram is not None:
            entry['before'] = {'cpu': cpu, 'ram': ram}
        if before:
            entry['servers_before'] = int(min(round(
                one('servers_before', name) or 0.0), MOST))
        if entry:
            facts[name] = entry
    return facts


def _one(series, hypervisor):
    """The value of the one series on the server's hypervisor, or None.

    A single series counts wherever it is (the exporter of the hypervisor
    the server just left or reached, or one that cannot be located); of
    several, only the one on Nova's hypervisor.
    """
    if len(series) == 1:
        return series[0][1]
    here = [value for where, value in series if where == hypervisor]
    return here[0] if len(here) == 1 else None


def _some(ids, most=3):
    ids = sorted(ids)
    return ', '.join(ids[:most]) + (', ...' if len(ids) > most else '')


def _fraction(value):
    """The value as a fraction 0..1, or None if it is not one.

    rate() extrapolates to the edges of its window, so a saturated counter
    (a CPU always busy, a task always stalled) reads a little above 1:
    that is 1, not a broken exporter.
    """
    if math.isnan(value) or not -RATE_SLACK <= value <= 1.0 + RATE_SLACK:
        return None
    return min(1.0, max(0.0, value))


PROFILES = {
    'pressure': tuple(HOST_QUERIES),
    'utilisation': HOST_METRICS,  # kernels or exporters without PSI
}


def reader_from_settings(settings, capacity=True, reference=None,
                         conn=None):
    """A Reader from the effective ``prometheus`` settings, or None.

    settings: core.config.Settings.section('prometheus'); keys left out
    (a mapping made by hand) take their declared defaults. capacity and
    reference: what the guard asks (Reader). Credentials in the URL
    (https://user:pass@host) move into basic auth, so the URL that
    messages show carries none. conn: the cloud's connection; without
    prometheus.url, Aetos in its catalog is read with its token
    (cloud/aetos.py). prometheus.url set to '' (--no-prometheus) reads
    neither.
    """
    settings = dict(DEFAULTS, **settings)
    timeouts = dict(timeout=settings['timeout'],
                    connect_timeout=settings['connect_timeout'],
                    retries=settings['retries'],
                    max_answer_mb=settings['max_answer_mb'])
    if settings.get('url'):
        url = urllib.parse.urlsplit(settings['url'])
        username = url.username or settings.get('username')
        password = url.password or settings.get('password')
        clean = url._replace(netloc=url.netloc.rpartition('@')[2]).geturl()
        client = prometheus.Client(
            clean, token=settings.get('token'), username=username,
            password=password, ca_bundle=settings.get('ca_bundle'),
            headers=settings.get('headers'),
            cert_file=settings.get('cert_file') or None,
            key_file=settings.get('key_file') or None, **timeouts)
    else:
        found = aetos.endpoint(conn) if conn is not None and \
            settings.get('url') is None else None
        if not found:
            return None
        client = aetos.client(conn, found, **timeouts)
    profile = PROFILES[settings['profile']]
    queries = {m: q for m, q in HOST_QUERIES.items() if m in profile}
    queries.update(settings.get('queries') or {})
    return Reader(client,
                  queries={m: q for m, q in queries.items() if q},
                  server_queries=settings.get('server_queries'),
                  window=settings['window'],
                  host_label=settings['host_label'],
                  host_pattern=settings['host_pattern'],
                  host_match=settings['host_match'],
                  server_profile=settings['server_profile'],
                  lasting=settings.get('lasting') or '',
                  capacity=capacity, reference=reference,
                  history_timeout=settings['history_timeout'],
                  forecast=model.Forecast(
                      settings['forecast_ahead'], settings['forecast_days'],
                      settings['forecast_weight'])
                  if settings['forecast_days'] else None)
