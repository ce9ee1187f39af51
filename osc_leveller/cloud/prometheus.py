"""Prometheus' HTTP API: instant and range queries, and label values.

Credentials go into request headers only and never into messages: a token,
basic auth, or a Keystone token an auth object gives each request (Aetos,
cloud/aetos.py). What the answers mean for the leveller is
cloud/measure.py's business.

Retries are urllib3's (Retry on the sessions' adapters): a request that got
no answer, HTTP 5xx, or 429 with a Retry-After, is asked again up to
`retries` times. The first retry goes at once (a keep-alive connection the
server dropped), the next after BACKOFF * 2, * 4, ... seconds, at most
BACKOFF_MOST: 0, 0.5, 1, 2, 2, ... s. A Retry-After is waited for instead,
up to RETRY_AFTER_MOST seconds: a proxy that asks for an hour does not hold
a cron run, which goes on with load from allocations after the retries.
An answer broken off while read is not asked again.
"""

import json
import logging
import math
import re
import ssl
import urllib.parse

import requests
import requests.adapters
import urllib3

from osc_leveller.core.model import errors
from osc_leveller.core.settings import config

MIB = 2 ** 20
CHUNK = MIB  # bytes read at a time
# Prometheus refuses a range query of more points a series (its
# /api/v1/query_range limit): longer ranges are asked in parts.
MOST_POINTS = 11000
BACKOFF = 0.25  # seconds; urllib3 waits BACKOFF * 2 ** (retry - 1)
BACKOFF_MOST = 2.0
RETRY_AFTER_MOST = 10  # seconds, as long as prometheus.timeout's default


def _default(key):
    """The prometheus setting's declared default (core/settings/config.py)."""
    return config.BY_NAME['prometheus.' + key].default


class PrometheusError(errors.LevellerError):
    """Prometheus cannot be asked; the message says why, without secrets."""


class Unreachable(PrometheusError):
    """No answer at all: the caller may fall back to allocations."""


class TimedOut(Unreachable):
    """No answer within prometheus.timeout: a heavy query may need more."""


class TooManySamples(Unreachable):
    """The query would hold more samples than Prometheus allows
    (--query.max-samples): a shorter range may pass."""


class Client:
    """Instant and range queries against Prometheus' HTTP API.

    No answer, or HTTP 5xx or 429 after the retries, is Unreachable: the
    caller may fall back to allocations. Any other answer that is not a successful
    instant vector is a PrometheusError, a hard error: refused credentials, a
    query Prometheus rejects, or a URL that answers but not like Prometheus
    (the URL of Keystone, say). An operator who configured that URL wants to
    hear it is wrong rather than get scores from allocations unawares.
    """

    def __init__(self, url, token=None, username=None, password=None,
                 ca_bundle=None, timeout=_default('timeout'),
                 retries=_default('retries'),
                 connect_timeout=_default('connect_timeout'),
                 max_answer_mb=_default('max_answer_mb'), headers=None,
                 cert_file=None, key_file=None, auth=None, via=None,
                 ranges=True):
        """headers: extra request headers (prometheus.headers, secret
        values). auth: an object whose headers() gives each request's
        credentials (cloud/aetos.py's Keystone token). via: how messages
        and metrics check name this endpoint and its credentials. ranges:
        False where the API serves no range queries (Aetos)."""
        self.url = url.rstrip('/')
        self.auth = auth
        self.ranges = ranges
        if via is None:
            via = 'no credentials'
            if token:
                via = 'a bearer token (prometheus.token)'
            elif username:
                via = 'basic auth as %s' % username
            via = 'Prometheus at %s (prometheus.url), %s' % (self.url, via)
        self.via = via
        self.timeout = (connect_timeout, timeout)
        self.retries = retries
        self.max_answer_mb = max_answer_mb
        retry = _Retry(
            total=retries, allowed_methods={'GET'},
            status_forcelist=range(500, 600), raise_on_status=False,
            backoff_factor=BACKOFF, backoff_max=BACKOFF_MOST)
        access = _Access(token, username, password, ca_bundle, headers,
                         cert_file, key_file)
        # Given with each request: requests lets REQUESTS_CA_BUNDLE in the
        # environment win over a session's own.
        self.verify = access.verify
        self.session = access.session(retry)
        # A call with a timeout of its own (the forecast's history, the
        # heaviest queries) is not asked again after a read timeout: it
        # would take as long again.
        self.heavy_session = access.session(retry.new(read=False))

    def close(self):
        """Closes the connections kept open."""
        self.session.close()
        self.heavy_session.close()

    def query(self, promql, at=None):
        """[(labels, value)] of an instant vector query, evaluated at the
        time at (the epoch, in seconds) or Prometheus' now."""
        what = 'the query %r' % promql
        params = {'query': promql}
        if at is not None:
            params['time'] = _time(at)
        return self._samples(self._get('/api/v1/query', params, what), what)

    def query_range(self, promql, start, end, step, timeout=None):
        """[(labels, [(time, value)])] of a query at start, start + step,
        ... up to end (the epoch, in seconds): Prometheus' range query,
        asked in parts of at most MOST_POINTS points a series and joined.
        A part that would hold more samples than Prometheus allows is
        asked again in halves (a large cloud's history). timeout: seconds
        to wait for each part's answer instead of the client's, and a part
        that takes longer is not asked again (it would take as long).

        Points whose time or value is no finite number are left out; the
        answers together are held to max_answer_mb. Where the API serves
        no range queries (ranges False: Aetos), each part is an instant
        query of a subquery that gives the same points (_as_subquery).
        """
        what = 'the range query %r' % promql
        count = int((end - start) // step) + 1 if end >= start else 0
        series = {}  # sorted labels: [(time, value)]
        spent = 0  # bytes of the parts before
        parts = [(first, min(count, first + MOST_POINTS) - 1)
                 for first in range(0, count, MOST_POINTS)]
        while parts:
            first, last = parts.pop(0)
            low, high = start + first * step, start + last * step
            try:
                if self.ranges:
                    answer = self._get('/api/v1/query_range', {
                        'query': promql, 'start': _time(low),
                        'end': _time(high), 'step': _time(step)}, what,
                        spent, timeout)
                    found = self._matrix(answer, what)
                else:
                    query, at, shift = _as_subquery(promql, low, high, step)
                    answer = self._get('/api/v1/query', {
                        'query': query, 'time': _time(at)}, what, spent,
                        timeout)
                    found = [(labels, [(t - shift, v) for t, v in points
                                       if low - 0.0005 <= t - shift <=
                                       high + 0.0005])
                             for labels, points in self._matrix(answer, what)]
                    # As query_range: no series without a point in range
                    # (a subquery's window reaches past its end).
                    found = [(labels, points) for labels, points in found
                             if points]
            except TooManySamples:
                if first == last:
                    raise
                middle = (first + last) // 2
                parts[:0] = [(first, middle), (middle + 1, last)]
                continue
            spent += len(answer[1])
            for labels, points in found:
                series.setdefault(tuple(sorted(labels.items())), []).extend(
                    points)
        return [(dict(key), sorted(points))
                for key, points in sorted(series.items())]

    def label_values(self, label, name_pattern):
        """Values of a label on series whose name matches the pattern.

        Prometheus before 2.24 ignores match[] and lists every value; the
        pattern is applied here too, so the answer is the same.
        """
        what = 'the label values of %s' % label
        response = self._get('/api/v1/label/%s/values' % label, {
            'match[]': '{__name__=~"%s"}' % name_pattern}, what)
        data = self._body(response, what).get('data')
        if not isinstance(data, list):
            raise PrometheusError('%s answered %s with %s, not a list' % (
                self.url, what, type(data).__name__))
        pattern = re.compile(name_pattern)
        return [value for value in data if isinstance(value, str) and
                (label != '__name__' or pattern.fullmatch(value))]

    def _get(self, path, params, what, spent=0, timeout=None):
        """(response, its body as bytes): at most max_answer_mb MiB with
        the spent bytes of the answer's parts before. timeout: as
        query_range's. An answer broken off while read is not asked again
        (urllib3 retries until the answer begins)."""
        session = self.session if timeout is None else self.heavy_session
        waits = self.timeout if timeout is None else (self.timeout[0],
                                                      timeout)
        headers = self.auth.headers() if self.auth is not None else None
        try:
            response = session.get(self.url + path, params=params,
                                   headers=headers, timeout=waits,
                                   stream=True, verify=self.verify)
        except requests.exceptions.SSLError as exc:
            raise PrometheusError(
                'TLS with Prometheus at %s failed (%s): check leveller: '
                'prometheus: ca_bundle, cert_file and key_file' % (
                    self.url, _tls_reason(exc))) from exc
        except requests.RequestException as exc:
            raise _unreached(self.url, exc) from exc
        except OSError as exc:  # requests' check of the TLS files' paths
            raise PrometheusError(
                'cannot use the TLS files of leveller: prometheus: %s' %
                exc) from exc
        with response:
            if response.status_code >= 500 or response.status_code == 429:
                raise Unreachable('Prometheus at %s answered HTTP %d' % (
                    self.url, response.status_code))
            try:
                return response, self._read(response, what, spent)
            except requests.RequestException as exc:
                raise Unreachable(
                    'Prometheus at %s broke off its answer: %s' % (
                        self.url, type(exc).__name__)) from exc

    def _read(self, response, what, spent=0):
        """The body, read until the cap: an answer over it is refused
        before it fills the memory (a rogue or misconfigured server, or a
        query that matches far more series than it should)."""
        limit = self.max_answer_mb * MIB - spent
        declared = response.headers.get('Content-Length', '')
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(what, '%d MiB' % math.ceil(
                (spent + int(declared)) / MIB))
        body = bytearray()
        for chunk in response.iter_content(CHUNK):
            body += chunk
            if len(body) > limit:
                raise self._too_large(what, 'over %d MiB' % self.max_answer_mb)
        return bytes(body)

    def _too_large(self, what, size):
        return Unreachable(
            'Prometheus at %s answered %s with %s, more than the %d MiB of '
            'the setting prometheus.max_answer_mb' % (
                self.url, what, size, self.max_answer_mb))

    def _body(self, answer, what):
        """The JSON body of a successful answer; errors say what failed."""
        response, content = answer
        try:
            body = json.loads(content.decode('utf-8'))
        except (ValueError, RecursionError):  # not JSON, or nested silly
            body = None
        if not isinstance(body, dict):
            body = {}
        if response.status_code in (401, 403):
            raise PrometheusError(
                'Prometheus at %s refused the credentials (HTTP %d): check '
                '%s' % (self.url, response.status_code,
                        'the role of the cloud\'s user (Aetos takes its '
                        'Keystone token)' if self.auth is not None else
                        'leveller: prometheus: token, or username and '
                        'password'))
        # Prometheus' API always answers {"status": "success" | "error"};
        # anything else comes from another server at that URL.
        if body.get('status') == 'error':
            # bad_data: the query itself is wrong, and stays wrong. Other
            # errors (execution, timeout) can pass with the data, so the
            # caller falls back to allocations for this run.
            error = 'Prometheus at %s rejected %s: %s' % (
                self.url, what, body.get('error') or
                body.get('errorType') or 'HTTP %d' % response.status_code)
            if body.get('errorType') == 'bad_data':
                raise PrometheusError(error)
            if 'too many samples' in str(body.get('error')):
                raise TooManySamples(error)
            raise Unreachable(error)
        fault = body.get('error_message') if self.auth is not None else None
        if isinstance(fault, dict) and isinstance(fault.get('faultstring'),
                                                  str):
            # Aetos: Prometheus' own error, or Aetos', in its wrapping (at
            # another URL, such an answer is no Prometheus': said below)
            raise PrometheusError('%s rejected %s (HTTP %d): %s' % (
                self.url, what, response.status_code,
                fault['faultstring'][:500]))
        if body.get('status') != 'success':
            raise PrometheusError(
                '%s does not answer like Prometheus (HTTP %d on %s): check '
                'leveller: prometheus: url' % (
                    self.url, response.status_code,
                    urllib.parse.urlsplit(response.url or '').path or
                    'the API'))
        return body

    def _samples(self, answer, what):
        body = self._body(answer, what)
        data = body.get('data')
        if not isinstance(data, dict) or \
                data.get('resultType') != 'vector':
            raise PrometheusError(
                '%s answered %s with %s, not an instant vector' % (
                    self.url, what, data.get('resultType')
                    if isinstance(data, dict) else 'no data'))
        result = data.get('result')
        if not isinstance(result, list) or not all(
                isinstance(item, dict) and isinstance(item.get('metric'), dict)
                for item in result):
            raise PrometheusError(
                '%s answered %s with a result that is not a list of samples '
                'with labels (check leveller: prometheus: url)' % (
                    self.url, what))
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

    def _matrix(self, answer, what):
        """[(labels, [(time, value)])] of a range query's answer."""
        body = self._body(answer, what)
        data = body.get('data')
        if not isinstance(data, dict) or \
                data.get('resultType') != 'matrix':
            raise PrometheusError(
                '%s answered %s with %s, not a range of samples (matrix)' % (
                    self.url, what, data.get('resultType')
                    if isinstance(data, dict) else 'no data'))
        result = data.get('result')
        if not isinstance(result, list) or not all(
                isinstance(item, dict) and isinstance(item.get('metric'), dict)
                and isinstance(item.get('values', []), list)
                for item in result):
            raise PrometheusError(
                '%s answered %s with a result that is not a list of series '
                'with labels (check leveller: prometheus: url)' % (
                    self.url, what))
        found = []
        seen = set()
        for item in result:
            labels = {k: v for k, v in item['metric'].items()
                      if isinstance(v, str)}
            key = tuple(sorted(labels.items()))
            if key in seen:  # Prometheus never answers so
                raise PrometheusError(
                    '%s answered %s with two series of the same labels '
                    '(%s)' % (self.url, what, ', '.join(
                        '%s=%s' % pair for pair in key)[:200]))
            seen.add(key)
            found.append((labels, _points(item.get('values', []))))
        return found


class _Retry(urllib3.util.Retry):
    """urllib3's Retry, waiting at most RETRY_AFTER_MOST seconds for a
    Retry-After, and for none it cannot read (the backoff instead)."""

    def parse_retry_after(self, retry_after):
        try:
            seconds = super().parse_retry_after(retry_after)
        except urllib3.exceptions.InvalidHeader:
            return 0
        return min(seconds, RETRY_AFTER_MOST)


class _RetriesAtDebug(logging.Filter):
    """urllib3 warns of each retry, the whole query in the line; ours go
    to debug: the error after the last retry says why, and a cron run's
    stderr stays quiet while a retry helps."""

    def filter(self, record):
        if not (record.args and isinstance(record.args[0], _Retry)):
            return True
        record.levelno, record.levelname = logging.DEBUG, 'DEBUG'
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


logging.getLogger('urllib3.connectionpool').addFilter(_RetriesAtDebug())


class _Access:
    """How every request authenticates: credentials, extra headers (a
    tenant), and TLS files."""

    def __init__(self, token, username, password, ca_bundle, headers,
                 cert_file, key_file):
        names = {name.lower() for name in headers or ()}
        if 'authorization' in names and (token or username):
            raise PrometheusError(
                'leveller: prometheus: headers sets Authorization, and so '
                'does token or username: keep one of them')
        if key_file and not cert_file:
            raise PrometheusError(
                'leveller: prometheus: key_file is set without cert_file: '
                'name the client certificate too')
        self.headers = dict(headers or {})
        if token:
            self.headers['Authorization'] = 'Bearer %s' % token
        # A token wins over basic auth, as it always has.
        self.auth = (username, password or '') if username and not token \
            else None
        self.verify = ca_bundle or None  # None: requests' default
        self.cert = (cert_file, key_file) if key_file else cert_file

    def session(self, retry):
        """A session retrying as retry says, with the credentials."""
        session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(max_retries=retry)
        session.mount('http://', adapter)
        session.mount('https://', adapter)
        session.headers.update(self.headers)
        session.auth = self.auth
        session.cert = self.cert
        return session


def _unreached(url, exc):
    """Unreachable, or TimedOut, for what requests raised: its class names
    the cause. After the retries urllib3's MaxRetryError holds the last
    error, and requests calls a read timeout in it a ConnectionError."""
    reason = getattr(exc.args[0] if exc.args else None, 'reason', None)
    if isinstance(exc, requests.ReadTimeout) or isinstance(
            reason, urllib3.exceptions.ReadTimeoutError):
        return TimedOut('cannot reach Prometheus at %s: ReadTimeout' % url)
    return Unreachable('cannot reach Prometheus at %s: %s' % (
        url, type(exc).__name__))


def _tls_reason(exc):
    """The TLS library's reason (CERTIFICATE_VERIFY_FAILED, ...), found in
    the chain of errors urllib3 and requests wrap it in."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ssl.SSLError):
            return exc.reason or type(exc).__name__
        inner = getattr(exc, 'reason', None)
        exc = inner if isinstance(inner, BaseException) else \
            exc.args[0] if exc.args and isinstance(
                exc.args[0], BaseException) else exc.__context__
    return 'SSLError'


def _points(pairs):
    """[(time, value)] of [time, "value"] pairs, leaving out a pair of
    another shape, or whose time or value is no finite number. (One loop:
    a week's history by the minute is millions of points.)"""
    found = []
    for pair in pairs:
        try:
            time, value = pair
            if type(time) not in (int, float):  # a bool, text, ...
                continue
            time, value = float(time), float(value)
        except (TypeError, ValueError, OverflowError):
            continue
        if math.isfinite(time) and math.isfinite(value):
            found.append((time, value))
    return found


def _as_subquery(promql, start, end, step):
    """(query, time, shift): an instant query at time whose points, each
    shift seconds early, are promql at start, start + step, ... end.

    A subquery's points fall on multiples of its step, so promql is asked
    at the first multiple at or after end, each point shift (< step) back
    by the inner last_over_time(...[1ms:1ms] offset), as the guard asks a
    past time; the range takes every step back to start (one more
    point where Prometheus 2 closes the range at its start: left out).
    """
    ms = max(1, int(round(step * 1000)))
    last = int(math.ceil(round(end * 1000) / ms)) * ms
    shift = last - int(round(end * 1000))
    span = (int(round((end - start) * 1000)) // ms + 1) * ms
    # Prometheus 2 refuses "offset 0ms"
    offset = ' offset %dms' % shift if shift else ''
    query = '(last_over_time((%s)[1ms:1ms]%s))[%dms:%dms]' % (
        promql, offset, span, ms)
    return query, last / 1000.0, shift / 1000.0


def _time(seconds):
    """A time or step for the API: whole seconds as such, else to the
    millisecond (Prometheus' precision)."""
    return '%d' % seconds if seconds == int(seconds) else '%.3f' % seconds
