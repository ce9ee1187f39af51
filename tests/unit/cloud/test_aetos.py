"""Metrics through Aetos, found in the catalog, with the cloud's token.

A real openstacksdk connection to the stand-in cloud, whose catalog then
has metric-storage: its Prometheus behind a Keystone token check, serving
what Aetos serves (GET instant queries and label values; no range
queries), and to a token without the admin or service role only its own
project's series, which hypervisors have none of.
"""

import unittest

from osc_leveller.cloud import aetos
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from tests.unit import standin

UP = [({'instance': '10.0.0.11:9100', 'job': 'node'}, 1.0)]


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

    def test_no_range_query_is_asked_of_aetos(self):
        cloud, conn = self.cloud()
        client = measure.reader_from_settings({}, conn=conn).client
        with self.assertRaises(prometheus.PrometheusError) as caught:
            client.query_range('up', 0, 60, 15)
        self.assertIn('serves no range queries (/api/v1/query_range)',
                      str(caught.exception))
        self.assertEqual([], [r for r in cloud.requests
                              if r.service == 'prometheus'])
