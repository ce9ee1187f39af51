"""The Prometheus client against a small fake Prometheus on 127.0.0.1."""

import http.server
import json
import threading
import unittest
import urllib.parse

from osc_leveller.cloud import prometheus


class FakePrometheus(http.server.BaseHTTPRequestHandler):
    answers = {}  # query substring -> (HTTP status, body)
    seen = []

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query).get('query', [''])[0] or \
            url.path
        self.seen.append((query, self.headers.get('Authorization')))
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
        self.url = serve(self, FakePrometheus)

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
