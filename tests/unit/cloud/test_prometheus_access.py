"""Extra headers and TLS client certificates, against a real TLS server.

The certificates are made here with openssl: a CA, a server certificate
for 127.0.0.1 and two client certificates, one signed by that CA and one
by another. The server on 127.0.0.1 requires a client certificate of its
CA, so a query answers only when the client really presents it.
"""

import http.server
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import unittest
from unittest import mock

from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from osc_leveller.core.settings import config

ANSWER = {'status': 'success', 'data': {'resultType': 'vector', 'result': [
    {'metric': {'job': 'node'}, 'value': [0, '1']}]}}


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every query with ANSWER; records the headers and the
    client certificate's common name of each request."""
    seen = []

    def do_GET(self):
        peer = getattr(self.connection, 'getpeercert', lambda: None)()
        subject = dict(pair[0] for pair in peer['subject']) if peer else {}
        Recorder.seen.append((dict(self.headers), subject.get('commonName')))
        data = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def serve(test, tls=None):
    """The URL of a server on 127.0.0.1 until the test ends; tls: an
    ssl.SSLContext for the server side."""
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Recorder)
    if tls:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    test.addCleanup(server.server_close)
    test.addCleanup(server.shutdown)
    scheme = 'https' if tls else 'http'
    return '%s://127.0.0.1:%d' % (scheme, server.server_address[1])


class TestHeaders(unittest.TestCase):
    def setUp(self):
        Recorder.seen = []
        self.url = serve(self)

    def test_every_request_carries_the_headers(self):
        client = prometheus.Client(self.url, retries=0, token='tok-1',
                                   headers={'X-Scope-OrgID': 'team-a'})
        client.query('up')
        client.query('up', at=60)
        self.assertEqual(2, len(Recorder.seen))
        for headers, _ in Recorder.seen:
            self.assertEqual('team-a', headers['X-Scope-OrgID'])
            self.assertEqual('Bearer tok-1', headers['Authorization'])

    def test_from_the_settings(self):
        effective = config.Settings([('clouds.yaml', config.flatten({
            'prometheus': {'url': self.url, 'headers': {
                'X-Scope-OrgID': 'team-b', 'X-Other': 7}}}, 'clouds.yaml'))])
        reader = measure.reader_from_settings(effective.section('prometheus'))
        reader.client.query('up')
        [(headers, _)] = Recorder.seen
        self.assertEqual(('team-b', '7'), (headers['X-Scope-OrgID'],
                                           headers['X-Other']))

    def test_a_token_wins_over_basic_auth(self):
        prometheus.Client(self.url, retries=0, token='tok-2', username='ops',
                          password='pw').query('up')
        [(headers, _)] = Recorder.seen
        self.assertEqual('Bearer tok-2', headers['Authorization'])

    def test_two_authorizations_are_refused(self):
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            prometheus.Client(self.url, username='ops', headers={
                'authorization': 'Basic s3cret'})
        self.assertEqual(
            'leveller: prometheus: headers sets Authorization, and so does '
            'token or username: keep one of them', str(ctx.exception))


def openssl(*args, cwd):
    subprocess.run(('openssl',) + args, cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def make_certificates(where):
    """ca.pem, other-ca.pem; server.pem/-key.pem for IP 127.0.0.1;
    client.pem/-key.pem of ca, stranger.pem/-key.pem of other-ca."""
    for ca in ('ca', 'other-ca'):
        openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days',
                '2', '-subj', '/CN=%s' % ca, '-keyout', ca + '-key.pem',
                '-out', ca + '.pem', cwd=where)
    with open(os.path.join(where, 'server.ext'), 'w') as f:
        f.write('subjectAltName = IP:127.0.0.1\n')
    for name, ca, ext in (('server', 'ca', 'server.ext'),
                          ('client', 'ca', None),
                          ('stranger', 'other-ca', None)):
        openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj',
                '/CN=leveller-%s' % name, '-keyout', name + '-key.pem',
                '-out', name + '.csr', cwd=where)
        openssl('x509', '-req', '-in', name + '.csr', '-CA', ca + '.pem',
                '-CAkey', ca + '-key.pem', '-CAcreateserial', '-days', '2',
                '-out', name + '.pem', *(('-extfile', ext) if ext else ()),
                cwd=where)


@unittest.skipUnless(shutil.which('openssl'), 'no openssl command')
class TestClientCertificate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        make_certificates(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def setUp(self):
        Recorder.seen = []
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.path('server.pem'),
                            self.path('server-key.pem'))
        tls.load_verify_locations(self.path('ca.pem'))
        tls.verify_mode = ssl.CERT_REQUIRED
        self.url = serve(self, tls)
        # requests lets this win over a session's CA bundle: ca_bundle
        # must still be the one used.
        environment = mock.patch.dict(os.environ, {
            'REQUESTS_CA_BUNDLE': self.path('other-ca.pem')})
        environment.start()
        self.addCleanup(environment.stop)

    def client(self, **kwargs):
        kwargs.setdefault('ca_bundle', self.path('ca.pem'))
        return prometheus.Client(self.url, retries=0, timeout=5, **kwargs)

    def refused(self, **kwargs):
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            self.client(**kwargs).query('up')
        self.assertNotIsInstance(ctx.exception, prometheus.Unreachable)
        self.assertEqual([], Recorder.seen)
        return str(ctx.exception)

    def test_the_certificate_is_presented(self):
        [(_, value)] = self.client(
            cert_file=self.path('client.pem'),
            key_file=self.path('client-key.pem'),
            headers={'X-Scope-OrgID': 'team-a'}).query('up')
        self.assertEqual(1.0, value)
        [(headers, name)] = Recorder.seen
        self.assertEqual('leveller-client', name)
        self.assertEqual('team-a', headers['X-Scope-OrgID'])

    def test_certificate_and_key_in_one_file(self):
        both = self.path('both.pem')
        with open(both, 'w') as f:
            for part in ('client.pem', 'client-key.pem'):
                with open(self.path(part)) as g:
                    f.write(g.read())
        self.client(cert_file=both).query('up')
        self.assertEqual([(None, 'leveller-client')],
                         [(None, name) for _, name in Recorder.seen])

    def test_from_the_settings(self):
        effective = config.Settings([('f.yaml', config.flatten({
            'prometheus': {'url': self.url, 'ca_bundle': self.path('ca.pem'),
                           'cert_file': self.path('client.pem'),
                           'key_file': self.path('client-key.pem')}},
            'f.yaml'))])
        reader = measure.reader_from_settings(effective.section('prometheus'))
        reader.client.query('up')
        self.assertEqual('leveller-client', Recorder.seen[0][1])

    def test_no_certificate_or_a_strangers_is_refused(self):
        for kwargs in ({}, {'cert_file': self.path('stranger.pem'),
                            'key_file': self.path('stranger-key.pem')}):
            with self.subTest(kwargs):
                message = self.refused(**kwargs)
                self.assertIn('TLS with Prometheus at %s failed (' % self.url,
                              message)
                self.assertIn('check leveller: prometheus: ca_bundle, '
                              'cert_file and key_file', message)

    def test_a_server_of_another_ca_is_not_trusted(self):
        message = self.refused(ca_bundle=self.path('other-ca.pem'),
                               cert_file=self.path('client.pem'),
                               key_file=self.path('client-key.pem'))
        self.assertIn('(CERTIFICATE_VERIFY_FAILED)', message)

    def test_files_that_cannot_be_used(self):
        missing = self.path('missing.pem')
        self.assertIn('cannot use the TLS files of leveller: prometheus: ',
                      self.refused(cert_file=missing))
        self.assertIn(missing, self.refused(cert_file=missing))
        # The key of another certificate.
        self.assertIn('TLS with Prometheus at',
                      self.refused(cert_file=self.path('client.pem'),
                                   key_file=self.path('stranger-key.pem')))
        with self.assertRaises(prometheus.PrometheusError) as ctx:
            self.client(key_file=self.path('client-key.pem'))
        self.assertIn('key_file is set without cert_file',
                      str(ctx.exception))
