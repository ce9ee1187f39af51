"""Metrics through Aetos, found in the catalog, with the cloud's token.

A real openstacksdk connection to the stand-in cloud, whose catalog then
has metric-storage: its Prometheus behind a Keystone token check, serving
what Aetos serves (GET instant queries and label values; no range
queries: asked as subqueries), and to a token without the admin or service role only its own
project's series, which hypervisors have none of.
"""

import http.server
import json
import threading
import unittest

from osc_leveller.cloud import aetos
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from tests.unit import standin

UP = [({'instance': '10.0.0.11:9100', 'job': 'node'}, 1.0)]


class AetosFault(http.server.BaseHTTPRequestHandler):
    """Aetos' answer to a query Prometheus rejects (its ClientSideError)."""

    status = 400
    answer = {'error_message': {
        'faultcode': 'Client', 'debuginfo': None, 'faultstring':
        'invalid parameter "query": 1:111: parse error: duration must '
        'be greater than 0'}}

    def do_GET(self):
        body = json.dumps(self.answer).encode()
        self.send_response(self.status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def answers(promql):
    return UP if promql == 'up' else []


class AetosTest(unittest.TestCase):
    def cloud(self, roles=('admin', 'member', 'reader'), with_aetos=True):
        cloud = standin.StandIn(prometheus=answers, roles=roles,
                                prometheus_names=['libvirt_domain_info'])
        cloud.aetos = with_aetos
        cloud.start()
        self.addCleanup(cloud.stop)
        conn = cloud.connection()
        self.addCleanup(conn.close)
        return cloud, conn

    def test_found_in_the_catalog_and_read_with_the_token(self):
        cloud, conn = self.cloud()
        self.assertEqual(cloud.prometheus_url, aetos.endpoint(conn).rstrip('/'))
        reader = measure.reader_from_settings({}, conn=conn)
        client = reader.client
        self.assertEqual(UP, client.query('up'))
        self.assertEqual(['libvirt_domain_info'],
                         client.label_values('__name__', 'libvirt_.*'))
        token = conn.session.get_token()
        seen = [r for r in cloud.requests if r.service == 'prometheus']
        self.assertEqual(2, len(seen))
        self.assertTrue(all(r.headers.get('X-Auth-Token') == token
                            for r in seen))
        self.assertEqual(
            'Aetos at %s (catalog metric-storage), Keystone token of user '
            'admin, project admin, roles admin, member, reader' %
            aetos.endpoint(conn), client.via)
        self.assertNotIn(token, client.via)

    def test_without_a_token_aetos_refuses(self):
        cloud, conn = self.cloud()
        bare = prometheus.Client(aetos.endpoint(conn))
        with self.assertRaises(prometheus.PrometheusError) as caught:
            bare.query('up')
        self.assertIn('refused the credentials (HTTP 401)',
                      str(caught.exception))

    def test_a_refused_token_names_the_users_role_never_the_token(self):
        cloud, conn = self.cloud()
        client = measure.reader_from_settings({}, conn=conn).client
        token = conn.session.get_token()
        cloud.revoke_tokens()
        with self.assertRaises(prometheus.PrometheusError) as caught:
            client.query('up')
        message = str(caught.exception)
        self.assertIn('HTTP 401', message)
        self.assertIn('the role of the cloud\'s user', message)
        self.assertNotIn(token, message)

    def test_prometheus_url_wins(self):
        cloud, conn = self.cloud(with_aetos=False)
        direct = cloud.prometheus_url
        cloud.aetos = True  # the catalog has Aetos now
        conn = cloud.connection()
        self.addCleanup(conn.close)
        cloud.aetos = False  # and the Prometheus answers without a token
        client = measure.reader_from_settings({'url': direct},
                                              conn=conn).client
        self.assertEqual(direct, client.url)
        self.assertIsNone(client.auth)
        self.assertEqual(UP, client.query('up'))
        self.assertEqual('Prometheus at %s (prometheus.url), no credentials'
                         % direct, client.via)

    def test_no_prometheus_reads_neither(self):
        _, conn = self.cloud()
        self.assertIsNone(measure.reader_from_settings({'url': ''},
                                                       conn=conn))

    def test_no_aetos_in_the_catalog_no_reader(self):
        _, conn = self.cloud(with_aetos=False)
        self.assertIsNone(aetos.endpoint(conn))
        self.assertIsNone(measure.reader_from_settings({}, conn=conn))

    def test_a_member_is_refused_naming_the_role_it_lacks(self):
        cloud, conn = self.cloud(roles=('member', 'reader'))
        # What it would get: an answer with nothing in it.
        bare = prometheus.Client(aetos.endpoint(conn),
                                 auth=aetos.KeystoneToken(conn.session))
        self.assertEqual([], bare.query('up'))
        with self.assertRaises(prometheus.PrometheusError) as caught:
            measure.reader_from_settings({}, conn=conn)
        message = str(caught.exception)
        self.assertIn('only to the admin role', message)
        self.assertIn('or the service role', message)
        self.assertIn('user admin in project admin has the roles member, '
                      'reader', message)
        self.assertIn('give it the admin (or service) role', message)

    def test_the_service_role_reads_every_project(self):
        _, conn = self.cloud(roles=('service',))
        client = measure.reader_from_settings({}, conn=conn).client
        self.assertEqual(UP, client.query('up'))

    def test_a_range_query_is_asked_as_a_subquery(self):
        cloud, conn = self.cloud()
        client = measure.reader_from_settings({}, conn=conn).client
        # The stand-in runs no PromQL: it answers an instant vector, which
        # is no range; the real Aetos' answers are compared with
        # Prometheus' range queries in tests/functional/test_aetos.py.
        with self.assertRaisesRegex(prometheus.PrometheusError,
                                    'not a range of samples'):
            client.query_range('up', 100, 130, 10)
        seen = [r for r in cloud.requests if r.service == 'prometheus']
        self.assertEqual(['/api/v1/query'], [r.path for r in seen])
        self.assertEqual(
            '(last_over_time((up)[1ms:1ms]))[40000ms:10000ms]',
            seen[0].query['query'][0])
        self.assertEqual(['130'], seen[0].query['time'])


class AetosErrorTest(unittest.TestCase):
    def test_an_error_in_aetos_wrapping_is_quoted(self):
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), AetosFault)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = 'http://127.0.0.1:%d' % server.server_port
        token = type('Token', (), {'headers': lambda self: {
            'X-Auth-Token': 'a-token'}})()
        with self.assertRaises(prometheus.PrometheusError) as caught:
            prometheus.Client(url, auth=token).query('up offset 0ms')
        self.assertEqual(
            '%s rejected the query \'up offset 0ms\' (HTTP 400): invalid '
            'parameter "query": 1:111: parse error: duration must be greater '
            'than 0' % url, str(caught.exception))
        # Not through Aetos: a URL that answers so is not Prometheus.
        with self.assertRaises(prometheus.PrometheusError) as caught:
            prometheus.Client(url).query('up')
        self.assertIn('does not answer like Prometheus (HTTP 400',
                      str(caught.exception))


class SubqueryTest(unittest.TestCase):
    def test_the_points_fall_on_the_range_querys(self):
        # step 7 s, end 1000: asked at 1001 (7 * 143), each point 1 s back
        query, at, shift = prometheus._as_subquery('q', 972, 1000, 7)
        self.assertEqual(
            '(last_over_time((q)[1ms:1ms] offset 1000ms))[35000ms:7000ms]',
            query)
        self.assertEqual((1001, 1), (at, shift))
        # the subquery's points: multiples of 7 s in (at - 35, at]
        points = [at - 7 * k - shift for k in range(5)]
        self.assertEqual([1000, 993, 986, 979, 972], points)

    def test_a_series_without_a_point_in_range_is_left_out(self):
        # As query_range answers: the subquery's window reaches past the
        # range's end, where a series may begin (a new hypervisor's).
        class Matrix(AetosFault):
            status = 200
            answer = {'status': 'success', 'data': {
                'resultType': 'matrix', 'result': [
                    {'metric': {'i': 'a'}, 'values': [[994, '1'],
                                                      [1001, '2']]},
                    {'metric': {'i': 'b'}, 'values': [[1008, '3']]}]}}
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Matrix)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        client = prometheus.Client('http://127.0.0.1:%d' % server.server_port,
                                   ranges=False)
        self.assertEqual([({'i': 'a'}, [(993.0, 1.0), (1000.0, 2.0)])],
                         client.query_range('q', 972, 1000, 7))

    def test_fractions_of_a_second(self):
        query, at, shift = prometheus._as_subquery('q', 10.5, 13.0, 2.5)
        self.assertEqual((12.5 + 2.5, 2.0), (at, shift))
        self.assertIn('[5000ms:2500ms]', query)
