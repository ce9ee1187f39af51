"""Prometheus' HTTP API: instant queries and label values.

Credentials go into request headers only and never into messages. What the
answers mean for the leveller is cloud/measure.py's business.
"""

import json
import math
import re
import urllib.parse

import requests

from osc_leveller.core import config
from osc_leveller.core import errors

MIB = 2 ** 20
CHUNK = MIB  # bytes read at a time


class PrometheusError(errors.LevellerError):
    """Prometheus cannot be asked; the message says why, without secrets."""


class Unreachable(PrometheusError):
    """No answer at all: the caller may fall back to allocations."""


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
                 connect_timeout=5.0, max_answer_mb=config.BY_NAME[
                     'prometheus.max_answer_mb'].default):
        self.url = url.rstrip('/')
        self.timeout = (connect_timeout, timeout)
        self.retries = retries
        self.max_answer_mb = max_answer_mb
        self.session = session or requests.Session()
        if token:
            self.session.headers['Authorization'] = 'Bearer %s' % token
        elif username:
            self.session.auth = (username, password or '')
        if ca_bundle:
            self.session.verify = ca_bundle

    def query(self, promql):
        """[(labels, value)] of an instant vector query."""
        what = 'the query %r' % promql
        return self._samples(self._get('/api/v1/query', {'query': promql},
                                       what), what)

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

    def _get(self, path, params, what):
        """(response, its body as bytes, at most max_answer_mb MiB)."""
        last = None
        for _ in range(self.retries + 1):
            try:
                response = self.session.get(self.url + path, params=params,
                                            timeout=self.timeout, stream=True)
            except requests.RequestException as exc:
                last = 'cannot reach Prometheus at %s: %s' % (
                    self.url, type(exc).__name__)
                continue
            with response:
                if response.status_code >= 500:
                    last = 'Prometheus at %s answered HTTP %d' % (
                        self.url, response.status_code)
                    continue
                try:
                    return response, self._read(response, what)
                except requests.RequestException as exc:
                    last = 'Prometheus at %s broke off its answer: %s' % (
                        self.url, type(exc).__name__)
        raise Unreachable(last)

    def _read(self, response, what):
        """The body, read until the cap: an answer over it is refused
        before it fills the memory (a rogue or misconfigured server, or a
        query that matches far more series than it should)."""
        limit = self.max_answer_mb * MIB
        declared = response.headers.get('Content-Length', '')
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(what, '%.0f MiB' % (int(declared) / MIB))
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
                'leveller: prometheus: token, or username and password' % (
                    self.url, response.status_code))
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
            raise Unreachable(error)
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
