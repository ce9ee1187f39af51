"""The libvirt profiles' RAM queries, run by a real Prometheus (Debian's,
which the devcloud installs) on series served here, read by the leveller.

Resident memory includes QEMU's own, so a small, busy server's exceeds its
size; the query clamps it to the size. Unclamped, the figure would be out
of 0..1 and the leveller would drop the server's RAM figure. The
Prometheus is this test's own, on a port of its own: no devcloud needed.
"""

import http.server
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import requests

from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus

PROMETHEUS = '/usr/bin/prometheus'
GIB = 2 ** 30

# Servers (uuid, libvirt domain): RAM GiB, resident GiB (None: no resident
# figure, as before the guest's balloon driver reports), in-guest
# available and usable GiB; and the RAM the leveller must read.
SERVERS = {
    ('id-over', 'instance-00000001'): (0.5, 0.65, 0.48, 0.1, 1.0),
    ('id-half', 'instance-00000002'): (4.0, 2.0, 3.9, 2.0, 0.5),
    ('id-guest', 'instance-00000003'): (4.0, None, 4.0, 1.0, 0.75),
}


def exposition():
    """What the inovex, Tinkoff and vexxhost exporters would show of the
    servers (names and labels as in their sources)."""
    lines = []

    def add(name, labels, value):
        lines.append('%s{%s} %r' % (name, ','.join(
            '%s="%s"' % kv for kv in sorted(labels.items())), float(value)))
    for (uuid, domain), (ram, rss, available, usable, _) in SERVERS.items():
        dom = {'domain': domain}
        add('libvirt_domain_openstack_info', dict(dom, instance_id=uuid), 1)
        add('libvirt_domain_info_meta', dict(dom, uuid=uuid), 1)
        add('libvirt_domain_info_maximum_memory_bytes', dom, ram * GIB)
        add('libvirt_domain_memory_stats_available_bytes', dom,
            available * GIB)
        add('libvirt_domain_memory_stats_usable_bytes', dom, usable * GIB)
        kib = {'uuid': uuid}  # vexxhost: balloon figures in KiB
        add('libvirtd_domain_balloon_maximum', kib, ram * GIB / 1024)
        add('libvirtd_domain_balloon_available', kib, available * GIB / 1024)
        add('libvirtd_domain_balloon_usable', kib, usable * GIB / 1024)
        if rss is not None:
            add('libvirt_domain_memory_stats_rss_bytes', dom, rss * GIB)
            add('libvirtd_domain_balloon_rss', kib, rss * GIB / 1024)
    return ('\n'.join(lines) + '\n').encode()


class _Exporter(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = exposition()
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain; version=0.0.4')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class TestServerRam(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(PROMETHEUS, os.X_OK):
            raise AssertionError('%s is missing: the devcloud installs it '
                                 '(apt-get install prometheus)' % PROMETHEUS)
        cls.tmp = tempfile.mkdtemp()
        cls.exporter = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                       _Exporter)
        threading.Thread(target=cls.exporter.serve_forever,
                         daemon=True).start()
        config = os.path.join(cls.tmp, 'prometheus.yml')
        with open(config, 'w') as f:
            f.write('global: {scrape_interval: 1s, scrape_timeout: 1s}\n'
                    'scrape_configs:\n'
                    '  - job_name: libvirt\n'
                    '    static_configs: [{targets: ["127.0.0.1:%d"]}]\n'
                    % cls.exporter.server_address[1])
        port = free_port()
        cls.url = 'http://127.0.0.1:%d' % port
        cls.log = open(os.path.join(cls.tmp, 'prometheus.log'), 'w')
        cls.prometheus = subprocess.Popen(
            [PROMETHEUS, '--config.file=' + config,
             '--storage.tsdb.path=' + os.path.join(cls.tmp, 'data'),
             '--web.listen-address=127.0.0.1:%d' % port],
            stdout=cls.log, stderr=subprocess.STDOUT)
        try:
            cls.wait_for_series()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def wait_for_series(cls):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if cls.prometheus.poll() is not None:
                break
            try:
                found = requests.get(cls.url + '/api/v1/query', params={
                    'query': 'count(libvirt_domain_openstack_info)'},
                    timeout=2).json()['data']['result']
                if found and found[0]['value'][1] == str(len(SERVERS)):
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        with open(cls.log.name) as f:
            raise AssertionError('Prometheus has not scraped the series:\n'
                                 + f.read()[-3000:])

    @classmethod
    def tearDownClass(cls):
        cls.prometheus.terminate()
        try:
            cls.prometheus.wait(timeout=20)
        except subprocess.TimeoutExpired:
            cls.prometheus.kill()
            cls.prometheus.wait()
        cls.log.close()
        cls.exporter.shutdown()
        cls.exporter.server_close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_resident_memory_is_clamped_to_the_server_size(self):
        """id-over's resident memory is 130 % of its size: it reads 1;
        id-half's 50 %; id-guest, with no resident figure, its in-guest
        use (3 of 4 GiB)."""
        client = prometheus.Client(self.url, retries=0)
        servers = {uuid: 'hv1' for uuid, _ in SERVERS}
        expected = {uuid: figures[-1]
                    for (uuid, _), figures in SERVERS.items()}
        for profile in ('inovex', 'tinkoff', 'vexxhost'):
            with self.subTest(profile=profile):
                reading = measure.Reader(
                    client, window='1m', server_profile=profile).read(
                        [], servers)
                # None: no RAM figure for the server.
                self.assertEqual(expected, {
                    uuid: reading.servers.get(uuid, {}).get('ram')
                    for uuid in servers})
