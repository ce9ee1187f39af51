"""Where the commands read metrics from, through the real ``openstack``
shell against the stand-in cloud: prometheus.url, else Aetos in the
catalog, else none; and what a member is told about Aetos."""

import os
import subprocess
import tempfile
import unittest

from tests.unit import builders as b
from tests.unit import standin
from tests.unit.test_secrets import openstack


class MetricsSourceTest(unittest.TestCase):
    def shell(self, *args, roles=('admin', 'member', 'reader'), aetos=True,
              prometheus=None):
        if not openstack():
            self.skipTest('no openstack command')
        hyps, servers = b.three_hosts()
        cloud = standin.StandIn(b.document(hyps, servers), roles=roles)
        cloud.aetos = aetos
        cloud.start()
        self.addCleanup(cloud.stop)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        leveller = {'prometheus': prometheus} if prometheus else {}
        clouds_yaml = cloud.write_clouds_yaml(
            os.path.join(tmp.name, 'clouds.yaml'),
            extra={'leveller': leveller})
        return cloud, subprocess.run(
            [openstack(), '--os-cloud', 'standin', 'leveller'] + list(args),
            env=cloud.shell_env(clouds_yaml), capture_output=True, text=True,
            timeout=120)

    def test_metrics_check_reads_aetos_from_the_catalog(self):
        cloud, result = self.shell('metrics', 'check')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('Metrics from Aetos at %s (catalog metric-storage), '
                      'Keystone token of user admin, project admin, roles '
                      'admin, member, reader' % cloud.prometheus_url,
                      result.stderr)

    def test_prometheus_url_wins_over_the_catalog(self):
        # The catalog has Aetos; the URL (nothing listens there) is read.
        cloud, result = self.shell('metrics', 'check',
                                   prometheus={'url': 'http://127.0.0.1:9'})
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('Metrics from Prometheus at http://127.0.0.1:9 '
                      '(prometheus.url), no credentials', result.stderr)
        self.assertIn('cannot reach Prometheus at http://127.0.0.1:9',
                      result.stderr)
        self.assertEqual([], [r for r in cloud.requests
                              if r.service == 'prometheus'])

    def test_without_either_metrics_check_says_what_to_set(self):
        _, result = self.shell('metrics', 'check', aetos=False)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn('no Prometheus to check: set leveller: prometheus: url '
                      'in clouds.yaml or give --prometheus-url, or register '
                      'Aetos in the catalog (service type metric-storage)',
                      result.stderr)
        self.assertNotIn('Traceback', result.stderr)

    def test_no_prometheus_reads_not_even_aetos(self):
        cloud, result = self.shell('score', '--no-prometheus')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([], [r for r in cloud.requests
                              if r.service == 'prometheus'])

    def test_a_member_is_refused_before_anything_is_asked(self):
        cloud, result = self.shell('score', roles=('member', 'reader'))
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn('user admin in project admin has the roles member, '
                      'reader, so it would see only project admin\'s series',
                      result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertEqual([], [r for r in cloud.requests
                              if r.service == 'prometheus'])
