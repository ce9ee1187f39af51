"""The Prometheus client against a small fake Prometheus on 127.0.0.1."""

import http.server
import json
import logging
import re
import threading
import time
import unittest
import urllib.parse
from unittest import mock

from osc_leveller.cloud import prometheus
from tests.unit import builders as b
from tests.unit import standin


class FakePrometheus(http.server.BaseHTTPRequestHandler):
    answers = {}  # query substring -> (HTTP status, body)
    seen = []
    times = []  # the time parameter of each request, or None

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query).get('query', [''])[0] or \
            url.path
        self.seen.append((query, self.headers.get('Authorization')))
        self.times.append(urllib.parse.parse_qs(url.query).get(
            'time', [None])[0])
        status, body = 404, {}
        for key, answer in self.answers.items():
            if key in query:
                status, body = answer
                break
        # A str body is another server's page (HTML), not JSON.
        data = body.encode() if isinstance(body, str) else \
            json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'text/html' if isinstance(
            body, str) else 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def vector(*samples):
    return 200, {'status': 'success', 'data': {
        'resultType': 'vector',
        'result': [{'metric': labels, 'value': [0, str(value)]}
                   for labels, value in samples]}}


def serve(test, handler):
    """The URL of a server on 127.0.0.1 answering with the handler until
    the test ends."""
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    test.addCleanup(server.server_close)
    test.addCleanup(server.shutdown)
    return 'http://127.0.0.1:%d' % server.server_address[1]


class PrometheusTest(unittest.TestCase):
    def setUp(self):
        FakePrometheus.answers = {}
        FakePrometheus.seen = []
        FakePrometheus.times = []
        self.url = serve(self, FakePrometheus)

    def test_a_query_at_a_time(self):
        FakePrometheus.answers = {'up': vector(({'job': 'a'}, 1))}
        client = prometheus.Client(self.url, retries=0)
        client.query('up')
        client.query('up', at=1700000000.25)
        client.query('up', at=1700000000)
        self.assertEqual([None, '1700000000.250', '1700000000'],
                         FakePrometheus.times)

    def test_bearer_token_is_sent_and_never_shown(self):
        FakePrometheus.answers = {'x': (403, {'status': 'error'})}
        client = prometheus.Client(self.url, token='s3cret', retries=0)
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            client.query('x')
        self.assertIn('refused the credentials (HTTP 403)',
                      str(ctx.exception))
        self.assertNotIn('s3cret', str(ctx.exception))
        self.assertEqual(('x', 'Bearer s3cret'), FakePrometheus.seen[0])

    def test_errors_are_clear(self):
        FakePrometheus.answers = {
            'bad(': (400, {'status': 'error', 'errorType': 'bad_data',
                           'error': 'parse error at char 5'}),
            'down': (503, {}),
            'matrix': (200, {'status': 'success', 'data': {
                'resultType': 'matrix', 'result': []}}),
        }
        client = prometheus.Client(self.url, retries=1)
        for query, message in (
                ('bad(', "rejected the query 'bad(': parse error at char 5"),
                ('down', 'answered HTTP 503'),
                ('matrix[5m]', "answered the query 'matrix[5m]' with "
                               "matrix, not an instant vector")):
            with self.assertRaises(prometheus.PrometheusError) as ctx:
                client.query(query)
            self.assertIn(message, str(ctx.exception))
            self.assertIn(self.url, str(ctx.exception))
        self.assertEqual(2, sum(1 for q, _ in FakePrometheus.seen
                                if q == 'down'))
        # A bad query stays bad; an execution error may pass with the data.
        FakePrometheus.answers['ratio'] = (422, {
            'status': 'error', 'errorType': 'execution',
            'error': 'multiple matches for labels: many-to-one matching '
                     'must be explicit (group_left/group_right)'})
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            client.query('bad(')
        self.assertNotIsInstance(ctx.exception, prometheus.Unreachable)
        with self.assertRaises(prometheus.Unreachable) as ctx:
            client.query('ratio')
        self.assertIn('many-to-one matching', str(ctx.exception))
        closed = prometheus.Client('http://127.0.0.1:9', retries=0,
                                   timeout=1)
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            closed.query('up')
        self.assertIn('cannot reach Prometheus at http://127.0.0.1:9',
                      str(ctx.exception))

    def test_answers_past_json_and_floats(self):
        # A sample too large for a float is no fraction; a body nested too
        # deeply for the JSON reader is not Prometheus'.
        FakePrometheus.answers = {'big': (200, {
            'status': 'success', 'data': {'resultType': 'vector', 'result': [
                {'metric': {'hypervisor': 'hv01'}, 'value': [0, 10 ** 400]}]}}),
            'deep': (200, '[' * 100000 + ']' * 100000)}
        client = prometheus.Client(self.url, retries=0)
        [(_, value)] = client.query('big')
        self.assertNotEqual(value, value)  # NaN: the caller says why
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            client.query('deep')
        self.assertIn('%s does not answer like Prometheus' % self.url,
                      str(ctx.exception))

    def test_a_url_that_is_not_prometheus_is_an_error(self):
        # Keystone's 404 page, Nova's version document (300, no Location),
        # and a web server that answers anything with 200.
        for status, body in ((404, '<title>404 Not Found</title>'),
                             (300, {'choices': [{'id': 'v2.1'}]}),
                             (200, ['not', 'prometheus'])):
            FakePrometheus.answers = {'up': (status, body)}
            FakePrometheus.seen = []
            with self.assertRaises(prometheus.PrometheusError) as ctx:
                prometheus.Client(self.url, retries=2).query('up')
            self.assertNotIsInstance(ctx.exception, prometheus.Unreachable)
            self.assertEqual(
                '%s does not answer like Prometheus (HTTP %d on '
                '/api/v1/query): check leveller: prometheus: url' % (
                    self.url, status), str(ctx.exception))
            self.assertEqual(1, len(FakePrometheus.seen))  # no retries

    def test_label_values(self):
        # Prometheus before 2.24 ignores match[]: the pattern still holds.
        FakePrometheus.answers = {'/api/v1/label/__name__/values': (200, {
            'status': 'success', 'data': [
                'libvirt_domain_openstack_info', 'node_uname_info', 7,
                'libvirtd_domain_cpu_time']})}
        client = prometheus.Client(self.url, retries=0)
        self.assertEqual(
            ['libvirt_domain_openstack_info', 'libvirtd_domain_cpu_time'],
            client.label_values('__name__', r'libvirtd?_domain_.*'))
        FakePrometheus.answers = {'/api/v1/label/__name__/values': (200, {
            'status': 'success', 'data': {'not': 'a list'}})}
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            client.label_values('__name__', 'x')
        self.assertIn('answered the label values of __name__ with dict, not '
                      'a list', str(ctx.exception))


class FakeRange(http.server.BaseHTTPRequestHandler):
    """/api/v1/query_range as Prometheus answers it: the points of each
    series in `series` ({labels: function of time}) from start to end by
    step; more than MOST_POINTS points is refused, as Prometheus does.
    `answer`, when set, is the body of every answer instead."""
    series = {}
    answer = None
    status = 200
    most_samples = None  # Prometheus' --query.max-samples
    delay = 0.0  # seconds before the answer
    asked = []

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        params = {k: v[0] for k, v in urllib.parse.parse_qs(
            url.query).items()}
        self.asked.append((url.path, params))
        params['authorization'] = self.headers.get('Authorization')
        time.sleep(self.delay)
        start, end, step = (float(params[k]) for k in ('start', 'end',
                                                       'step'))
        points = int((end - start) // step) + 1
        if (end - start) / step > prometheus.MOST_POINTS:
            status, body = 400, {
                'status': 'error', 'errorType': 'bad_data',
                'error': 'exceeded maximum resolution of 11,000 points '
                         'per timeseries'}
        elif self.most_samples and \
                points * len(self.series) > self.most_samples:
            status, body = 422, {
                'status': 'error', 'errorType': 'execution',
                'error': 'query processing would load too many samples '
                         'into memory in query execution'}
        else:
            times = [start + k * step
                     for k in range(int((end - start) // step) + 1)]
            status, body = self.status, self.answer or {
                'status': 'success', 'data': {
                    'resultType': 'matrix', 'result': [
                        {'metric': dict(labels),
                         'values': [[t, str(f(t))] for t in times]}
                        for labels, f in self.series.items()]}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:
            pass  # the client stopped waiting: what a test may ask

    def log_message(self, *args):
        pass


def matrix(*series):
    return {'status': 'success', 'data': {
        'resultType': 'matrix',
        'result': [{'metric': labels, 'values': values}
                   for labels, values in series]}}


class TestQueryRange(unittest.TestCase):
    HV1 = (('instance', 'hv1:9100'), ('job', 'node'))
    HV2 = (('instance', 'hv2:9100'), ('job', 'node'))

    def setUp(self):
        FakeRange.series = {self.HV1: lambda t: t / 1e6,
                            self.HV2: lambda t: 0.5}
        FakeRange.answer, FakeRange.asked = None, []
        FakeRange.status, FakeRange.most_samples = 200, None
        FakeRange.delay = 0.0
        self.client = prometheus.Client(serve(self, FakeRange), retries=0)

    def test_points_from_start_to_end_by_step(self):
        found = self.client.query_range('up', 1000, 1300, 100)
        self.assertEqual([
            ({'instance': 'hv1:9100', 'job': 'node'},
             [(1000.0, .001), (1100.0, .0011), (1200.0, .0012),
              (1300.0, .0013)]),
            ({'instance': 'hv2:9100', 'job': 'node'},
             [(t, .5) for t in (1000.0, 1100.0, 1200.0, 1300.0)])], found)
        self.assertEqual([('/api/v1/query_range', {
            'query': 'up', 'start': '1000', 'end': '1300', 'step': '100',
            'authorization': None})], FakeRange.asked)

    def test_credentials_are_sent_and_never_shown(self):
        FakeRange.status, FakeRange.answer = 401, {'status': 'error'}
        for client in (prometheus.Client(self.client.url, token='s3cret',
                                         retries=0),
                       prometheus.Client(self.client.url, username='lev',
                                         password='s3cret', retries=0)):
            with self.assertRaises(prometheus.PrometheusError) as ctx:
                client.query_range('up', 0, 10, 1)
            self.assertIn('refused the credentials (HTTP 401)',
                          str(ctx.exception))
            self.assertNotIn('s3cret', str(ctx.exception))
        self.assertEqual(['Bearer s3cret', 'Basic bGV2OnMzY3JldA=='],
                         [p['authorization'] for _, p in FakeRange.asked])

    def test_a_long_range_is_asked_in_parts_and_joined(self):
        # 25 points at 10 a part: 3 requests, each within the limit, the
        # series joined in time order, no point twice.
        with mock.patch.object(prometheus, 'MOST_POINTS', 10):
            found = self.client.query_range('up', 0, 2400, 100)
        self.assertEqual([('0', '900'), ('1000', '1900'), ('2000', '2400')],
                         [(p['start'], p['end']) for _, p in FakeRange.asked])
        self.assertEqual([float(t) for t in range(0, 2401, 100)],
                         [t for t, _ in found[0][1]])
        self.assertEqual(2, len(found))
        # Prometheus' own limit, 11,000 points: a week by the minute in one.
        FakeRange.asked = []
        found = self.client.query_range('up', 0, 7 * 86400 - 60, 60)
        self.assertEqual(1, len(FakeRange.asked))
        self.assertEqual(7 * 1440, len(found[0][1]))
        FakeRange.asked = []
        found = self.client.query_range('up', 0, 14 * 86400, 60)
        self.assertEqual(2, len(FakeRange.asked))
        self.assertEqual(14 * 1440 + 1, len(found[1][1]))
        self.assertEqual(sorted(set(found[1][1])), found[1][1])

    def test_a_range_over_the_samples_prometheus_allows_is_halved(self):
        # 2 series, at most 20 samples a query: 25 points fail, then 13,
        # 7 pass; no point lost or twice.
        FakeRange.most_samples = 20
        found = self.client.query_range('up', 0, 24, 1)
        self.assertEqual(
            [('0', '24'), ('0', '12'), ('0', '6'), ('7', '12'),
             ('13', '24'), ('13', '18'), ('19', '24')],
            [(p['start'], p['end']) for _, p in FakeRange.asked])
        self.assertEqual([[float(t) for t in range(25)]] * 2,
                         [[t for t, _ in points] for _, points in found])
        # Not even one point passes: Prometheus' error, once halved down
        # to one point (4, 2, 1).
        FakeRange.most_samples, FakeRange.asked = 1, []
        with self.assertRaises(prometheus.Unreachable) as ctx:
            self.client.query_range('up', 0, 3, 1)
        self.assertIn('rejected the range query \'up\': query processing '
                      'would load too many samples', str(ctx.exception))
        self.assertEqual([('0', '3'), ('0', '1'), ('0', '0')],
                         [(p['start'], p['end'])
                          for _, p in FakeRange.asked])

    def test_no_answer_in_time_is_said_so(self):
        # What the caller tells apart: a query that takes longer than
        # prometheus.timeout, from a Prometheus that is not there.
        FakeRange.delay = 1.0
        client = prometheus.Client(self.client.url, retries=1, timeout=0.2)
        with self.assertRaises(prometheus.TimedOut) as ctx:
            client.query_range('up', 0, 10, 1)
        self.assertEqual('cannot reach Prometheus at %s: ReadTimeout' %
                         self.client.url, str(ctx.exception))
        self.assertEqual(2, len(FakeRange.asked))
        # A timeout of its own: the wait it sets, and no try again.
        FakeRange.asked = []
        with self.assertRaises(prometheus.TimedOut):
            client.query_range('up', 0, 10, 1, timeout=0.3)
        self.assertEqual(1, len(FakeRange.asked))
        FakeRange.delay = 0.5
        self.assertEqual(2, len(client.query_range('up', 0, 10, 1,
                                                   timeout=3)))
        closed = prometheus.Client('http://127.0.0.1:9', retries=0)
        with self.assertRaises(prometheus.Unreachable) as ctx:
            closed.query_range('up', 0, 10, 1)
        self.assertNotIsInstance(ctx.exception, prometheus.TimedOut)

    def test_a_step_of_milliseconds(self):
        self.client.query_range('up', 10, 11.5, 0.5)
        self.assertEqual(('10', '11.500', '0.500'), tuple(
            FakeRange.asked[0][1][k] for k in ('start', 'end', 'step')))
        self.assertEqual([], self.client.query_range('up', 10, 9, 1))

    def test_points_that_are_no_numbers_are_left_out(self):
        FakeRange.answer = matrix(({'instance': 'hv1'}, [
            [1, '0.5'], [2, 'NaN'], [3, '+Inf'], [4, '-Inf'], [5, 'lots'],
            [6, None], [7, {'a': 1}], ['8', '0.5'], [True, '0.5'],
            [9, 10 ** 400], [10], [11, '0.5', 3], 'ab', None,
            [12, 0.25]]), ({'instance': 'hv2', 'n': 5}, []))
        self.assertEqual([({'instance': 'hv1'}, [(1.0, .5), (12.0, .25)]),
                          ({'instance': 'hv2'}, [])],
                         self.client.query_range('up', 0, 12, 1))

    def test_answers_that_are_no_matrix_are_errors(self):
        for body, said in (
                ({'status': 'success', 'data': {
                    'resultType': 'vector', 'result': []}},
                 'with vector, not a range of samples (matrix)'),
                ({'status': 'success', 'data': None},
                 'with no data, not a range of samples'),
                (matrix(({'a': 'b'}, {'not': 'a list'})),
                 'with a result that is not a list of series with labels'),
                ({'status': 'success', 'data': {
                    'resultType': 'matrix', 'result': [5]}},
                 'with a result that is not a list of series with labels'),
                (matrix(({'a': 'b'}, []), ({'a': 'b', 'n': 1}, [])),
                 'with two series of the same labels (a=b)'),
                (['not', 'prometheus'], 'does not answer like Prometheus')):
            FakeRange.answer = body
            with self.assertRaises(prometheus.PrometheusError) as ctx:
                self.client.query_range('up', 0, 10, 1)
            self.assertIn(said, str(ctx.exception))
            self.assertNotIsInstance(ctx.exception, prometheus.Unreachable)

    def test_the_cap_holds_for_the_parts_together(self):
        # Each part about 0.4 MiB: the third is over a cap of 1 MiB.
        FakeRange.series = {(('instance', 'hv%d' % i),): lambda t: 0.5
                            for i in range(100)}
        client = prometheus.Client(self.client.url, retries=0,
                                   max_answer_mb=1)
        with mock.patch.object(prometheus, 'MOST_POINTS', 300):
            client.query_range('up', 0, 599, 1)
            with self.assertRaises(prometheus.Unreachable) as ctx:
                client.query_range('up', 0, 899, 1)
        self.assertRegex(str(ctx.exception), r"answered the range query 'up' "
                         r"with 2 MiB, more than the 1 MiB of the setting "
                         r"prometheus.max_answer_mb$")


class Flood(http.server.BaseHTTPRequestHandler):
    """An answer of `size` bytes (a valid vector padded with spaces),
    declared or chunked; `sent` counts the bytes that left, before the
    client hung up."""
    size = 0
    declared = True
    sent = []
    requests = []
    done = threading.Event()

    def do_GET(self):
        self.requests.append(self.path)
        head = json.dumps({'status': 'success', 'data': {
            'resultType': 'vector', 'result': []}}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        if self.declared:
            self.send_header('Content-Length', str(self.size))
        else:
            self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()
        sent = 0
        pad = b' ' * 65536
        try:
            while sent < self.size:
                piece = (head if not sent else pad)[:self.size - sent]
                if self.declared:
                    self.wfile.write(piece)
                else:
                    self.wfile.write(b'%x\r\n%s\r\n' % (len(piece), piece))
                sent += len(piece)
            if not self.declared:
                self.wfile.write(b'0\r\n\r\n')
        except OSError:  # the client hung up
            pass
        self.sent.append(sent)
        self.done.set()

    def log_message(self, *args):
        pass


class TestAnswerCap(unittest.TestCase):
    def setUp(self):
        Flood.sent, Flood.requests = [], []
        Flood.done.clear()
        self.url = serve(self, Flood)

    def query(self, size, declared, cap_mb=1):
        Flood.size, Flood.declared = size, declared
        return prometheus.Client(self.url, retries=2,
                                 max_answer_mb=cap_mb).query('up')

    def test_an_answer_within_the_cap_is_read(self):
        for declared in (True, False):
            self.assertEqual([], self.query(2 ** 20, declared))

    def test_a_declared_size_over_the_cap_is_refused_unread(self):
        with self.assertRaises(prometheus.Unreachable) as ctx:
            self.query(50 * 2 ** 20, True)
        self.assertEqual(
            "Prometheus at %s answered the query 'up' with 50 MiB, more "
            "than the 1 MiB of the setting prometheus.max_answer_mb"
            % self.url, str(ctx.exception))
        self.assertEqual(1, len(Flood.requests))  # the same answer again
        # would be as large: no retries

    def test_a_streamed_answer_is_cut_off_at_the_cap(self):
        with self.assertRaises(prometheus.Unreachable) as ctx:
            self.query(200 * 2 ** 20, False)
        self.assertIn("answered the query 'up' with over 1 MiB, more than "
                      "the 1 MiB of the setting prometheus.max_answer_mb",
                      str(ctx.exception))
        self.assertTrue(Flood.done.wait(10))
        # The client hung up: what left is the cap and the socket buffers,
        # not the 200 MiB.
        self.assertLess(Flood.sent[0], 50 * 2 ** 20)
        self.assertEqual(1, len(Flood.requests))


class TestRetries(unittest.TestCase):
    """urllib3's retries against the stand-in's Prometheus: no answer and
    HTTP 5xx asked again after a growing wait, a Retry-After waited for up
    to RETRY_AFTER_MOST."""

    def setUp(self):
        self.cloud = standin.StandIn(b.document(*b.three_hosts()),
                                     prometheus=lambda q: [
                                         ({'hypervisor': 'hv1'}, 0.5)])
        self.cloud.start()
        self.addCleanup(self.cloud.stop)
        self.url = self.cloud.prometheus_url

    def fault(self, kind, times=None):
        """Prometheus' answers spoiled by the fault alone, counted anew."""
        self.cloud.clear_faults(service='prometheus')
        self.cloud.reset_counts()
        return self.cloud.fault('prometheus', '/api/v1/query', kind,
                                times=times)

    def gaps(self):
        """Seconds between the requests' arrivals."""
        times = [r.at for r in self.cloud.requests]
        return [b - a for a, b in zip(times, times[1:])]

    def test_5xx_is_asked_again_after_a_growing_wait(self):
        # 3 retries: at once, then 0.5 s and 1 s later; then Unreachable.
        self.fault('status:503')
        client = prometheus.Client(self.url, retries=3)
        with self.assertRaises(prometheus.Unreachable) as ctx:
            client.query('up')
        self.assertEqual('Prometheus at %s answered HTTP 503' % self.url,
                         str(ctx.exception))
        gaps = self.gaps()
        self.assertEqual(3, len(gaps))
        self.assertLess(gaps[0], 0.5)
        self.assertGreaterEqual(gaps[1], 0.5)
        self.assertGreaterEqual(gaps[2], 1.0)
        # Answered on the third try: the answer, as if at once.
        self.fault('status:502', times=2)
        self.assertEqual([({'hypervisor': 'hv1'}, 0.5)], client.query('up'))
        self.assertEqual(3, len(self.cloud.requests))

    def test_no_answer_is_asked_again_after_a_wait(self):
        closed = prometheus.Client('http://127.0.0.1:9', retries=2)
        started = time.monotonic()
        with self.assertRaises(prometheus.Unreachable) as ctx:
            closed.query('up')
        self.assertGreaterEqual(time.monotonic() - started, 0.5)
        self.assertEqual('cannot reach Prometheus at http://127.0.0.1:9: '
                         'ConnectionError', str(ctx.exception))
        # A connection reset before the answer, retried: the answer.
        self.fault('reset', times=1)
        self.assertEqual(1, len(prometheus.Client(
            self.url, retries=1).query('up')))
        self.assertEqual(2, len(self.cloud.requests))

    def test_retry_after_is_honoured_up_to_the_cap(self):
        client = prometheus.Client(self.url, retries=1)
        self.fault('retry-after:1', times=1)
        self.assertEqual(1, len(client.query('up')))
        [gap] = self.gaps()
        self.assertGreaterEqual(gap, 1.0)  # not the first retry's none
        # An hour asked: the cap's wait (0.3 s here, 10 s by default).
        self.fault('retry-after:3600', times=1)
        with mock.patch.object(prometheus, 'RETRY_AFTER_MOST', 0.3):
            self.assertEqual(1, len(client.query('up')))
        [gap] = self.gaps()
        self.assertGreaterEqual(gap, 0.3)
        self.assertLess(gap, 5)
        # One that is no time: no wait for it, and no error either.
        self.fault('retry-after:soon', times=1)
        self.assertEqual(1, len(client.query('up')))
        self.assertEqual(2, len(self.cloud.requests))
        # Retried as often as the setting says, then Unreachable.
        self.fault('retry-after:0')
        with self.assertRaises(prometheus.Unreachable) as ctx:
            client.query('up')
        self.assertIn('answered HTTP 503', str(ctx.exception))
        self.assertEqual(2, len(self.cloud.requests))

    def test_429_is_retried_only_when_told_when(self):
        client = prometheus.Client(self.url, retries=2)
        self.fault('status:429')
        with self.assertRaises(prometheus.Unreachable) as ctx:
            client.query('up')
        self.assertEqual('Prometheus at %s answered HTTP 429' % self.url,
                         str(ctx.exception))
        self.assertEqual(1, len(self.cloud.requests))

    def test_an_answer_broken_off_is_not_asked_again(self):
        # urllib3 retries until an answer begins; the run goes on with
        # load from allocations, and the next query finds Prometheus again.
        client = prometheus.Client(self.url, retries=2)
        self.fault('cut', times=1)
        with self.assertRaises(prometheus.Unreachable) as ctx:
            client.query('up')
        self.assertRegex(str(ctx.exception), '^Prometheus at %s broke off '
                         'its answer: [A-Za-z]+$' % re.escape(self.url))
        self.assertEqual(1, len(self.cloud.requests))
        self.assertEqual(1, len(client.query('up')))

    def test_retries_are_logged_at_debug_only(self):
        # urllib3 warns of a retry after no answer: a cron run's stderr (a
        # handler at WARNING) stays quiet; --debug shows each retry.
        logger = logging.getLogger('urllib3.connectionpool')
        self.fault('reset')
        client = prometheus.Client(self.url, retries=1)
        for level, shown in ((logging.WARNING, []),
                             (logging.DEBUG, ['DEBUG'])):
            seen = []
            handler = logging.Handler(level)
            handler.emit = lambda record: seen.append(record)
            saved = logger.level
            logger.setLevel(level)
            logger.addHandler(handler)
            try:
                with self.assertRaises(prometheus.Unreachable):
                    client.query('up')
            finally:
                logger.removeHandler(handler)
                logger.setLevel(saved)
            self.assertEqual(shown, sorted({r.levelname for r in seen
                                            if 'Retrying' in r.msg}))
