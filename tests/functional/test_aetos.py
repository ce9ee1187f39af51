"""Metrics through the devcloud's real Aetos, found in its catalog.

The clouds devcloud-aetos (admin) and devcloud-aetos-member (demo, only
the member role) have no Prometheus URL: the leveller finds Aetos as
metric-storage in Keystone's catalog and reads through it with the cloud's
own token. Full coverage with score, plan, apply --dry-run and metrics
check; the member refused with the role it lacks; and each Prometheus API
call the collector makes, asked of Aetos itself: the instant queries and
label values it serves, and the range queries it does not, which the
client asks as subqueries with the same points (the forecast's skill).
"""

import json
import time
from unittest import mock

import openstack
import requests

from osc_leveller.cloud import aetos
from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from tests.functional import base

AETOS = base._devcloud.AETOS
ADMIN = 'devcloud-aetos'
MEMBER = 'devcloud-aetos-member'


def token(cloud):
    return base.openstack('token', 'issue', cloud=cloud)['id']


class TestAetos(base.DevcloudTestCase):
    SCENARIO = 'mixed'

    def check(self, *args):
        """metrics check through Aetos once every series is there:
        (rows, stderr)."""
        def covered():
            result = base.openstack(
                'leveller', 'metrics', 'check', '--min-hosts', '100',
                '--min-servers', '100', '-f', 'json', *args, parse=False,
                check=False, cloud=ADMIN)
            self.assertIn(result.returncode, (0, 3), result.stderr)
            return result if result.returncode == 0 else None
        result = base.wait_for(covered, 90, interval=3,
                               message='full coverage through Aetos')
        self.assertNotIn('Traceback', result.stderr)
        return json.loads(result.stdout), result.stderr

    def test_full_coverage_through_aetos(self):
        rows, stderr = self.check()
        self.assertIn('Metrics from Aetos at %s (catalog metric-storage), '
                      'Keystone token of user admin, project admin, roles '
                      'admin' % AETOS, stderr)
        self.assertIn('Hypervisors: 6 of 6 scored from their own '
                      'node_exporter series', stderr)
        running = {s['ID'] for s in base.openstack(
            'server', 'list', '--all-projects', '--status', 'ACTIVE')}
        self.assertIn('Servers: inovex prometheus-libvirt-exporter; %d of %d '
                      'running servers' % (len(running), len(running)),
                      stderr)
        self.assertEqual(set(self.host), {r['Hypervisor'] for r in rows})
        for row in rows:
            self.assertEqual(('metrics', None), (row['Load From'],
                                                 row['Why']), row)
            self.assertEqual(row['Servers'], row['Matched Servers'], row)
        # The same rows as Prometheus read directly (prometheus.url).
        direct = base.openstack('leveller', 'metrics', 'check')
        self.assertEqual(
            sorted((r['Hypervisor'], r['Matched By'], r['Servers'],
                    r['Matched Servers']) for r in direct),
            sorted((r['Hypervisor'], r['Matched By'], r['Servers'],
                    r['Matched Servers']) for r in rows))

    def test_score_plan_and_apply_through_aetos(self):
        self.check()  # every series there
        score = base.openstack('leveller', 'score', '--long', '-f', 'json',
                               parse=False, cloud=ADMIN)
        self.assertEqual({'metrics'}, {
            r['Load Source'] for r in json.loads(score.stdout)})
        plan = base.openstack('leveller', 'plan', '-f', 'json', parse=False,
                              cloud=ADMIN)
        applied = base.openstack('leveller', 'apply', '--dry-run',
                                 parse=False, cloud=ADMIN)
        for result in (score, plan, applied):
            self.assertNotIn('Traceback', result.stderr)
            self.assertNotIn('scored from', result.stderr)
            self.assertNotIn('implausible metrics', result.stderr)
            self.assertEqual([], [line for line in result.stderr.splitlines()
                                  if line.startswith('Note: Prometheus: ')],
                             result.stderr)
        self.assertIsInstance(json.loads(plan.stdout), list)

    def test_a_member_is_refused_naming_the_role_it_lacks(self):
        for command in (('score',), ('plan',), ('apply', '--dry-run'),
                        ('metrics', 'check')):
            result = base.openstack('leveller', *command, parse=False,
                                    check=False, cloud=MEMBER)
            self.assertEqual(1, result.returncode, (command, result.stderr))
            self.assertNotIn('Traceback', result.stderr)
            self.assertIn(
                'Aetos at %s (catalog metric-storage) shows every project\'s '
                'metrics only to the admin role of the token\'s project or '
                'the service role; user demo in project demo has the roles '
                'member, reader' % AETOS, result.stderr)
            self.assertIn('give it the admin (or service) role',
                          result.stderr)

    def test_the_calls_the_collector_makes(self):
        """What the real Aetos answers to each call, with each token."""
        admin = {'X-Auth-Token': token(ADMIN)}
        member = {'X-Auth-Token': token(MEMBER)}
        self.check()
        now = time.time()
        query = ('avg_over_time((1 - node_memory_MemAvailable_bytes / '
                 'node_memory_MemTotal_bytes)[30s:10s])')

        def get(path, params, headers):
            answer = requests.get(AETOS + path, params=params,
                                  headers=headers, timeout=30)
            return answer.status_code, answer.json()

        # Instant queries, at a time, subqueries: served.
        status, body = get('/api/v1/query', {'query': query, 'time': now},
                           admin)
        self.assertEqual((200, 'success'), (status, body['status']))
        self.assertEqual(6, len(body['data']['result']))
        # ... and to the member, silently nothing (its project's series).
        status, body = get('/api/v1/query', {'query': query}, member)
        self.assertEqual((200, []), (status, body['data']['result']))
        # Label values, as libvirt exporter detection asks them: served.
        status, body = get('/api/v1/label/__name__/values', {
            'match[]': '{__name__=~"libvirt_domain_.*"}'}, admin)
        self.assertEqual(200, status)
        self.assertIn('libvirt_domain_info_virtual_cpus', body['data'])
        # Range queries: not served.
        status, _ = get('/api/v1/query_range', {
            'query': 'up', 'start': now - 60, 'end': now, 'step': 15}, admin)
        self.assertEqual(404, status)
        # No token: refused.
        status, _ = get('/api/v1/query', {'query': 'up'}, {})
        self.assertEqual(401, status)

    def test_range_queries_asked_as_subqueries_give_the_same_points(self):
        """Aetos serves no range query: the client asks an instant query
        of a subquery instead, which must give Prometheus' points."""
        self.check()
        conn = openstack.connect(cloud=ADMIN)
        self.addCleanup(conn.close)
        through = aetos.client(conn, aetos.endpoint(conn), timeout=120)
        direct = prometheus.Client(base._devcloud.PROMETHEUS, timeout=120)
        promql = ('1 - avg by (instance, job) (rate(node_cpu_seconds_total'
                  '{mode="idle"}[30s]))')
        now = time.time()
        # ends on and off the step, a step of a fraction of a second
        for end, step, count in ((int(now) - 30, 10, 12), (int(now) - 7, 7, 5),
                                 (now - 1.2345, 2.5, 9)):
            start = end - (count - 1) * step
            with self.subTest(end=end, step=step):
                expected = direct.query_range(promql, start, end, step)
                found = through.query_range(promql, start, end, step)
                # Series whose points begin in the range count too: a
                # hypervisor whose exporter the scenario started since.
                self.assertTrue(expected)
                self.assertEqual([labels for labels, _ in expected],
                                 [labels for labels, _ in found])
                for (_, want), (_, got) in zip(expected, found):
                    self.assertEqual(len(want), len(got))
                    for (t1, v1), (t2, v2) in zip(want, got):
                        self.assertAlmostEqual(t1, t2, delta=0.002)
                        self.assertAlmostEqual(v1, v2, places=12)

    def test_the_forecast_skill_through_aetos(self):
        """The read's history (forecast_days, on a day of a minute) comes
        through Aetos, with no note of a forecast without weight."""
        self.check()
        conn = openstack.connect(cloud=ADMIN)
        self.addCleanup(conn.close)
        refs = [hostmatch.HostRef(h.name, h.service_details['host'],
                                  h.host_ip)
                for h in conn.compute.hypervisors(details=True)]
        with mock.patch.object(measure, 'DAY', 60):
            reader = measure.reader_from_settings(
                {'window': '30s', 'forecast_days': 1, 'forecast_ahead': '10s',
                 'history_timeout': 120, 'timeout': 60}, conn=conn)
            self.assertIn('Aetos at %s' % AETOS, reader.client.via)
            reading = reader.read(refs, {})
        self.assertIsNotNone(reading.history, reading.notes)
        self.assertEqual([], [n for n in reading.notes
                              if 'forecast skill not measured' in n])
        self.assertEqual(set(self.node.values()),
                         set(reading.history.now['cpu']))
