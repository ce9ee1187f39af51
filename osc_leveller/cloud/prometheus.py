"""Measured load from Prometheus: host and server utilisation per metric.

Each metric is one PromQL instant query, configurable, with defaults for
node_exporter and libvirt-exporter series. A host whose value is missing, not
a number or outside 0..1 gets no metrics, with the reason, rather than a
wrong score; the caller then falls back to Placement allocations for it.
Credentials go into request headers only and never into messages.
"""

import math
import re
import urllib.parse

import requests

from osc_leveller.core import errors

# {window} is the smoothing window of rate(); {label} the hypervisor label.
DEFAULT_QUERIES = {
    'cpu': '1 - avg by ({label}) '
           '(rate(node_cpu_seconds_total{{mode="idle"}}[{window}]))',
    'ram': '1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes',
    'cpu_pressure': 'rate(node_pressure_cpu_waiting_seconds_total[{window}])',
    'ram_pressure':
        'rate(node_pressure_memory_waiting_seconds_total[{window}])',
}
# max by (uuid): right after a live migration a server has series on both
# hypervisors for one rate window, and a plain division would match twice.
SERVER_QUERIES = {
    'cpu': 'max by (uuid) '
           '(rate(libvirt_domain_info_cpu_time_seconds_total[{window}])) '
           '/ on (uuid) max by (uuid) (libvirt_domain_info_virtual_cpus)',
    'ram': 'max by (uuid) (libvirt_domain_info_memory_usage_bytes) '
           '/ on (uuid) max by (uuid) '
           '(libvirt_domain_info_maximum_memory_bytes)',
}
HOST_METRICS = ('cpu', 'ram')  # without these a host has no usable metrics
RATE_SLACK = 0.02  # how far outside 0..1 a rate may read and still count


class PrometheusError(errors.LevellerError):
    """Prometheus cannot be asked; the message says why, without secrets."""


class Unreachable(PrometheusError):
    """No answer at all: the caller may fall back to allocations."""


class NoSeries(Unreachable):
    """A host query found nothing for any hypervisor.

    Prometheus answered, so it is not unreachable, but the caller does the
    same: it falls back to allocations for every hypervisor, with this one
    reason instead of one per hypervisor.
    """


class Client:
    """Instant queries against Prometheus' HTTP API.

    No answer, or HTTP 5xx after the retries, is Unreachable: the caller may
    fall back to allocations. Any other answer that is not a successful
    instant vector is a PrometheusError, a hard error: refused credentials, a
    query Prometheus rejects, or a URL that answers but not like Prometheus
    (the URL of Keystone, say). An operator who configured that URL wants to
    hear it is wrong rather than get scores from allocations unawares.
    """

    def __init__(self, url, token=None, username=None, password=None,
                 ca_bundle=None, timeout=10.0, retries=2, session=None,
                 connect_timeout=5.0):
        self.url = url.rstrip('/')
        self.timeout = (connect_timeout, timeout)
        self.retries = retries
        self.session = session or requests.Session()
        if token:
            self.session.headers['Authorization'] = 'Bearer %s' % token
        elif username:
            self.session.auth = (username, password or '')
        if ca_bundle:
            self.session.verify = ca_bundle

    def query(self, promql):
        """[(labels, value)] of an instant vector query."""
        last = None
        for _ in range(self.retries + 1):
            try:
                response = self.session.get(
                    self.url + '/api/v1/query', params={'query': promql},
                    timeout=self.timeout)
            except requests.RequestException as exc:
                last = 'cannot reach Prometheus at %s: %s' % (
                    self.url, type(exc).__name__)
                continue
            if response.status_code >= 500:
                last = 'Prometheus at %s answered HTTP %d' % (
                    self.url, response.status_code)
                continue
            return self._samples(response, promql)
        raise Unreachable(last)

    def _samples(self, response, promql):
        try:
            body = response.json()
        except (ValueError, RecursionError):  # not JSON, or nested silly
            body = None
        if not isinstance(body, dict):
            body = {}
        if response.status_code in (401, 403):
            raise PrometheusError(
                'Prometheus at %s refused the credentials (HTTP %d): check '
                'leveller: prometheus: token, or username and password' % (
                    self.url, response.status_code))
        # Prometheus' API always answers {"status": "success" | "error"};
        # anything else comes from another server at that URL.
        if body.get('status') == 'error':
            # bad_data: the query itself is wrong, and stays wrong. Other
            # errors (execution, timeout) can pass with the data, so the
            # caller falls back to allocations for this run.
            error = 'Prometheus at %s rejected the query %r: %s' % (
                self.url, promql, body.get('error') or
                body.get('errorType') or 'HTTP %d' % response.status_code)
            if body.get('errorType') == 'bad_data':
                raise PrometheusError(error)
            raise Unreachable(error)
        if body.get('status') != 'success':
            raise PrometheusError(
                '%s does not answer like Prometheus (HTTP %d on '
                '/api/v1/query): check leveller: prometheus: url' % (
                    self.url, response.status_code))
        data = body.get('data')
        if not isinstance(data, dict) or \
                data.get('resultType') != 'vector':
            raise PrometheusError(
                '%s answered the query %r with %s, not an instant vector' % (
                    self.url, promql, data.get('resultType')
                    if isinstance(data, dict) else 'no data'))
        result = data.get('result')
        if not isinstance(result, list) or not all(
                isinstance(item, dict) and isinstance(item.get('metric'), dict)
                for item in result):
            raise PrometheusError(
                '%s answered the query %r with a result that is not a list '
                'of samples with labels (check leveller: prometheus: url)' % (
                    self.url, promql))
        samples = []
        for item in result:
            try:
                value = float(item['value'][1])
            except (KeyError, IndexError, TypeError, ValueError,
                    OverflowError):  # an int too large for a float
                value = math.nan
            labels = {k: v for k, v in item['metric'].items()
                      if isinstance(v, str)}
            samples.append((labels, value))
        return samples


class Reader:
    """Host and server metrics keyed the way Nova names them."""

    def __init__(self, client, queries=None, server_queries=None,
                 window='5m', host_label='hypervisor',
                 host_pattern=r'^([^:]+)'):
        self.client = client
        self.queries = dict(DEFAULT_QUERIES if queries is None else queries)
        self.server_queries = dict(SERVER_QUERIES, **(server_queries or {}))
        self.window = window
        self.host_label = host_label
        self.host_pattern = re.compile(host_pattern)

    def _render(self, template):
        return template.format(window=self.window, label=self.host_label)

    def host_name(self, label_value, hypervisors):
        """The hypervisor a label value names: exact, then short names."""
        if not label_value:  # a series without the label names no host
            return None
        match = self.host_pattern.search(label_value)
        value = (match.group(1) if match and match.groups() else
                 match.group(0) if match else label_value)
        if value in hypervisors:
            return value
        short = value.split('.')[0]
        found = [h for h in hypervisors if h.split('.')[0] == short]
        return found[0] if len(found) == 1 else None

    def host_metrics(self, hypervisors):
        """({hypervisor: {metric: value}}, {hypervisor: why it has none}).

        NoSeries when a query of HOST_METRICS finds nothing for any
        hypervisor: a query or label that matches nothing is a configuration
        problem to name once, not a reason to repeat for every hypervisor.
        When only some hypervisors lack series, each gets its own reason.
        """
        values = {h: {} for h in hypervisors}
        problems = {}
        for metric, template in self.queries.items():
            samples = self.client.query(self._render(template))
            found = [(self.host_name(labels.get(self.host_label),
                                     hypervisors), value)
                     for labels, value in samples]
            if metric in HOST_METRICS and hypervisors and \
                    not any(host for host, _ in found):
                raise NoSeries(self._nothing_found(metric, len(samples)))
            seen = set()
            for host, value in found:
                if host is None or host in seen:
                    continue
                seen.add(host)
                fraction = _fraction(value)
                if fraction is None:
                    problems.setdefault(host, '%s is %s, outside 0..1' % (
                        metric, value))
                values[host][metric] = fraction
            for host in hypervisors:
                if host not in seen and metric in HOST_METRICS:
                    problems.setdefault(host, 'no %s series' % metric)
        result = {h: v for h, v in values.items() if h not in problems}
        return result, problems

    def _nothing_found(self, metric, series):
        if not series:
            return ('the %s query returned no series at all (check leveller: '
                    'prometheus: queries: %s)' % (metric, metric))
        return ('the %s query returned %d series, none naming a hypervisor '
                'in its %s label (check leveller: prometheus: host_label and '
                'host_pattern)' % (metric, series, self.host_label))

    def server_metrics(self):
        """{server uuid: {cpu, ram}} from the libvirt exporter series."""
        result = {}
        for metric, template in self.server_queries.items():
            for labels, value in self.client.query(self._render(template)):
                uuid = labels.get('uuid')
                fraction = _fraction(value)
                if uuid and fraction is not None:
                    result.setdefault(uuid, {})[metric] = fraction
        return result


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
    'pressure': tuple(DEFAULT_QUERIES),
    'utilisation': ('cpu', 'ram'),  # kernels or exporters without PSI
}


def reader_from_settings(settings):
    """A Reader from the effective ``prometheus`` settings, or None.

    settings: core.config.Settings.section('prometheus'). Credentials in the
    URL (https://user:pass@host) move into basic auth, so the URL that
    messages show carries none.
    """
    if not settings.get('url'):
        return None
    url = urllib.parse.urlsplit(settings['url'])
    username = url.username or settings.get('username')
    password = url.password or settings.get('password')
    clean = url._replace(netloc=url.netloc.rpartition('@')[2]).geturl()
    client = Client(clean, token=settings.get('token'), username=username,
                    password=password, ca_bundle=settings.get('ca_bundle'),
                    timeout=settings.get('timeout', 10.0),
                    connect_timeout=settings.get('connect_timeout', 5.0),
                    retries=settings.get('retries', 2))
    profile = PROFILES[settings.get('profile', 'pressure')]
    queries = {m: q for m, q in DEFAULT_QUERIES.items() if m in profile}
    queries.update(settings.get('queries') or {})
    return Reader(client,
                  queries={m: q for m, q in queries.items() if q},
                  server_queries=settings.get('server_queries'),
                  window=settings.get('window', '5m'),
                  host_label=settings.get('host_label', 'hypervisor'),
                  host_pattern=settings.get('host_pattern', r'^([^:]+)'))
