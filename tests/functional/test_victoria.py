"""The measured-load path against VictoriaMetrics, beside Prometheus.

The devcloud runs Debian's victoria-metrics with Prometheus' own scrape
configuration (tools/devcloud/devcloud, start_monitoring): the same
exporters and targets, each scraped every 2 s by both stores. Given only
VictoriaMetrics' URL, metrics check must reach full coverage, matched as
with Prometheus, and score and plan run on measured load with no fallback.

Then every request the collector makes (metrics check, score and plan,
with the lasting and forecast queries too) is recorded on its way to
Prometheus and asked again of both stores at the same evaluation time:
VictoriaMetrics must answer each with the same kind of result, the same
series, and values within a scrape's difference once the load has been
steady for the longest window asked (its rate() neither extrapolates nor
ends at the window's first sample, so while load changes the two differ).
What it answers differently is written in the user guide (Thanos, Mimir,
VictoriaMetrics and TLS client certificates), with what
VICTORIA_DIFFERENCES=FILE writes of the requests and differences.
"""

import http.server
import json
import os
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import yaml

from tests.functional import base

VICTORIA = 'http://127.0.0.1:%s' % os.environ.get('VICTORIA_PORT', '8428')
PROMETHEUS = base._devcloud.PROMETHEUS
# How far values of the two stores may be apart, of 1 or of the value if
# larger: rate() over the devcloud's 30 s window differs by up to 0.063 of
# a vCPU for a busy server whose load is noisy (measured in steady load).
TOLERANCE = 0.1
# After a scenario's load: the rate() window, the lasting period (1m) and
# a scrape, so that every window asked sees steady load.
SETTLE = 120
# VictoriaMetrics' -search.latencyOffset: how long before now its answers
# end, by default.
LATENCY = 30


def get(url, attempts=3):
    """(HTTP status, JSON body or None) of a GET."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.load(exc)
            except ValueError:
                return exc.code, None
        except (urllib.error.URLError, ConnectionError):
            if attempt == attempts - 1:
                raise


class Recorder(http.server.BaseHTTPRequestHandler):
    """Passes each GET on to Prometheus and records its path and query."""
    seen = []

    def do_GET(self):
        Recorder.seen.append(self.path)
        try:
            with urllib.request.urlopen(PROMETHEUS + self.path,
                                        timeout=120) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def series(data, since=0):
    """{sorted labels: {time: value}} of a vector or matrix, the points
    before since left out, or the sorted list a label-values request
    answers."""
    if isinstance(data, list):
        return sorted(data)
    found = {}
    for item in data['result']:
        key = tuple(sorted(item['metric'].items()))
        points = item.get('values') or [item['value']]
        found[key] = {float(t): float(v) for t, v in points if t >= since}
    return found


def differences(path, since=0):
    """What VictoriaMetrics answers otherwise than Prometheus to the
    request, the points of a range before since left out: [] when the
    same."""
    prom_status, prom = get(PROMETHEUS + path)
    vm_status, vm = get(VICTORIA + path)
    if (prom_status, (prom or {}).get('status')) != (
            vm_status, (vm or {}).get('status')):
        return ['HTTP %s %s, Prometheus HTTP %s %s' % (
            vm_status, vm, prom_status, prom)]
    if prom['status'] != 'success':
        return []
    prom, vm = prom['data'], vm['data']
    if isinstance(prom, dict) and prom['resultType'] != vm['resultType']:
        return ['%s, Prometheus %s' % (vm['resultType'], prom['resultType'])]
    prom, vm = series(prom, since), series(vm, since)
    if isinstance(prom, list):
        return [] if prom == vm else ['values %s, Prometheus %s' % (vm, prom)]
    found = []
    recent = time.time() - LATENCY - 5
    # A series whose points are all of the last LATENCY: VictoriaMetrics
    # leaves them out, so it has none of it (a store up for minutes only).
    missing = [key for key in set(prom) - set(vm)
               if not all(t > recent for t in prom[key])]
    if set(vm) - set(prom) or missing:
        found.append('series only in VictoriaMetrics %s, only in Prometheus '
                     '%s' % (sorted(set(vm) - set(prom))[:3],
                             sorted(missing)[:3]))
    for key in set(prom) & set(vm):
        a, b = prom[key], vm[key]
        # VictoriaMetrics leaves out a range's points of the last LATENCY.
        if set(a) != set(b) and not (set(b) < set(a) and all(
                t > recent for t in set(a) - set(b))):
            found.append('%s: points at %s, Prometheus at %s' % (
                dict(key), sorted(b)[:3], sorted(a)[:3]))
        far = [(a[t], b[t]) for t in sorted(set(a) & set(b))
               if abs(a[t] - b[t]) > TOLERANCE * max(1.0, abs(a[t]))]
        if far:
            found.append('%s: %s, Prometheus %s' % (
                dict(key), [y for _, y in far][:3], [x for x, _ in far][:3]))
    return found


def up_targets(url, at):
    """How many targets the store has up at the time at."""
    status, body = get(url + '/api/v1/query?' + urllib.parse.urlencode({
        'query': 'count(up == 1)', 'time': at}))
    result = body['data']['result'] if status == 200 and body else []
    return int(float(result[0]['value'][1])) if result else 0


def last_sample_age(url, at):
    """Seconds between the time asked and the newest node_exporter sample
    the store answers with (the most over the targets)."""
    status, body = get(url + '/api/v1/query?' + urllib.parse.urlencode({
        'query': 'timestamp(node_memory_MemTotal_bytes)', 'time': at}))
    assert status == 200, body
    # The targets up in Prometheus now: a hypervisor the scenario removed
    # keeps its last sample in VictoriaMetrics for its lookback, under its
    # own address, or under the one a new hypervisor took since: of an
    # address, its newest series.
    _, up = get(PROMETHEUS + '/api/v1/query?' + urllib.parse.urlencode({
        'query': 'up == 1'}))
    live = {item['metric'].get('instance') for item in up['data']['result']}
    newest = {}
    for item in body['data']['result']:
        instance = item['metric'].get('instance')
        if instance in live:
            newest[instance] = max(newest.get(instance, 0.0),
                                   float(item['value'][1]))
    return max(at - when for when in newest.values())


@unittest.skipUnless(os.path.exists('/usr/bin/victoria-metrics'),
                     'no victoria-metrics (devcloud install puts it there)')
class TestVictoriaMetrics(base.DevcloudTestCase):
    SCENARIO = 'mixed'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        status, _ = get(VICTORIA + '/api/v1/query?query=up')
        assert status == 200, 'VictoriaMetrics does not answer at %s' % (
            VICTORIA)
        # The devcloud does not wait for it (its answers end LATENCY back):
        # every target up in it that long ago, as in Prometheus now.
        base.wait_for(lambda: up_targets(VICTORIA, time.time() - LATENCY - 5)
                      == up_targets(PROMETHEUS, time.time()) > 0, 180,
                      interval=3, message='VictoriaMetrics to have scraped '
                      'every target for %d s' % (LATENCY + 5))
        cls.tmp = tempfile.TemporaryDirectory()
        cls.loaded = time.time()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        super().tearDownClass()

    def config(self, url, **settings):
        path = os.path.join(self.tmp.name, 'store.yaml')
        with open(path, 'w') as f:
            yaml.safe_dump({'prometheus': dict(settings, url=url)}, f)
        return path

    def check(self, url):
        """metrics check's rows and stderr once coverage is full."""
        config = self.config(url)

        def covered():
            result = base.openstack(
                'leveller', 'metrics', 'check', '--min-hosts', '100',
                '--min-servers', '100', '--config', config, '-f', 'json',
                parse=False, check=False)
            self.assertIn(result.returncode, (0, 3), result.stderr)
            return result if result.returncode == 0 else None
        result = base.wait_for(covered, 90, interval=3,
                               message='full coverage from %s' % url)
        return json.loads(result.stdout), result.stderr

    def test_score_plan_and_metrics_check(self):
        rows, stderr = self.check(VICTORIA)
        prom_rows, prom_stderr = self.check(PROMETHEUS)
        self.assertEqual(sorted(prom_rows, key=lambda r: r['Hypervisor']),
                         sorted(rows, key=lambda r: r['Hypervisor']))
        running = {s['ID'] for s in base.openstack(
            'server', 'list', '--all-projects', '--status', 'ACTIVE')}
        self.assertEqual(set(self.host), {r['Hypervisor'] for r in rows})
        self.assertEqual(len(running), sum(r['Matched Servers']
                                           for r in rows))
        self.assertIn('Hypervisors: 6 of 6 scored from their own '
                      'node_exporter series', stderr)
        self.assertIn('%d of %d running servers' % (
            len(running), len(running)), stderr)

        config = self.config(VICTORIA)
        score = base.openstack('leveller', 'score', '--long', '--config',
                               config, '-f', 'json', parse=False)
        by_store = {
            'victoria': json.loads(score.stdout),
            'prometheus': base.openstack(
                'leveller', 'score', '--config', self.config(PROMETHEUS),
                '--long')}
        self.assertEqual({'metrics'}, {r['Load Source']
                                       for r in by_store['victoria']})
        prom = {r['Hypervisor']: r for r in by_store['prometheus']}
        for row in by_store['victoria']:
            for column in ('CPU %', 'RAM %'):
                self.assertLess(abs(row[column] - prom[row['Hypervisor']][
                    column]), 100 * TOLERANCE, (column, row))
        plan = base.openstack('leveller', 'plan', '--config', config,
                              parse=False)
        for result in (score, plan):
            self.assertEqual([], [
                line for line in result.stderr.splitlines()
                if line.startswith('Note: Prometheus: ') or
                'implausible metrics' in line], result.stderr)

    def test_answers_end_latency_offset_before_now(self):
        # Prometheus answers with its last scrape (every 2 s here);
        # VictoriaMetrics, for a time less than LATENCY ago, with the
        # samples up to LATENCY before now.
        now = time.time()
        self.assertLess(last_sample_age(PROMETHEUS, now), 5)
        self.assertGreater(last_sample_age(VICTORIA, now), LATENCY - 5)
        self.assertLess(last_sample_age(VICTORIA, now - LATENCY - 5), 5)

    def test_every_request_answers_as_prometheus(self):
        time.sleep(max(0, self.loaded + SETTLE - time.time()))
        since = time.time() - 5
        Recorder.seen = []
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Recorder)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        config = self.config('http://127.0.0.1:%d' % server.server_address[1],
                             lasting='1m', forecast_days=1,
                             forecast_ahead='5m')
        for command in (('metrics', 'check'), ('score',), ('plan',)):
            base.openstack('leveller', *command, '--config', config,
                           parse=False, check=False)
        kinds = {urllib.parse.urlsplit(path).path for path in Recorder.seen}
        self.assertLessEqual({'/api/v1/query', '/api/v1/query_range'},
                             kinds)
        found = {}
        for path in dict.fromkeys(Recorder.seen):
            different = differences(path, since)
            if different:
                found[urllib.parse.unquote(path)] = different
        if os.environ.get('VICTORIA_DIFFERENCES'):  # to measure, for docs
            with open(os.environ['VICTORIA_DIFFERENCES'], 'w') as f:
                json.dump({'requests': Recorder.seen, 'differences': found},
                          f, indent=1)
        self.assertEqual({}, found)
