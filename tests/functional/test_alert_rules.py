"""The user guide's sample alert rules, checked by Prometheus' promtool
(Debian's prometheus package, which the devcloud installs)."""

import pathlib
import subprocess
import tempfile
import unittest

import yaml

RULES = pathlib.Path(__file__).resolve().parents[2] / 'doc' / 'source' / \
    'user' / 'leveller-alerts.yaml'
SUCCESS = 'openstack_leveller_last_success_timestamp_seconds'
RUN = 'openstack_leveller_last_run_timestamp_seconds'
EXIT = 'openstack_leveller_last_run_exit_code'
CTL = '{command="apply",instance="ctl1"}'
CTL3 = '{command="apply",instance="ctl3"}'
LABELS = {'command': 'apply', 'instance': 'ctl1'}


def alert(severity, summary):
    return {'exp_labels': dict(LABELS, severity=severity),
            'exp_annotations': {'summary': summary}}


class TestSampleAlertRules(unittest.TestCase):
    def promtool(self, *args):
        result = subprocess.run(['/usr/bin/promtool'] + list(args),
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        return result.stdout

    def test_they_load(self):
        self.assertIn('SUCCESS: 4 rules found',
                      self.promtool('check', 'rules', str(RULES)))

    def test_they_fire_when_cron_stops_succeeding(self):
        # Scraped every minute; the last success at 0, then every run fails
        # with moves that failed; a second instance never succeeded.
        tests = {'rule_files': [str(RULES)], 'evaluation_interval': '1m',
                 'tests': [{'interval': '1m', 'input_series': [
                     {'series': SUCCESS + CTL, 'values': '0x300'},
                     {'series': RUN + CTL, 'values': '0+60x300'},
                     {'series': EXIT + CTL, 'values': '0 3x300'},
                     {'series': RUN + '{command="apply",instance="ctl2"}',
                      'values': '0+60x300'},
                     # ctl3 succeeded at 0, then a blackout held it back.
                     {'series': SUCCESS + CTL3, 'values': '0x300'},
                     {'series': RUN + CTL3, 'values': '0+60x300'},
                     {'series': EXIT + CTL3, 'values': '0 5x300'}],
                     'alert_rule_test': [
                         {'eval_time': '2h', 'alertname':
                          'LevellerNoSuccessfulRun', 'exp_alerts': []},
                         {'eval_time': '4h', 'alertname':
                          'LevellerNoSuccessfulRun', 'exp_alerts': [alert(
                              'warning', 'openstack leveller apply has not '
                              'succeeded on ctl1 for 4h 0m 0s')]},
                         {'eval_time': '2h', 'alertname':
                          'LevellerNeverSucceeded', 'exp_alerts': []},
                         {'eval_time': '4h', 'alertname':
                          'LevellerNeverSucceeded', 'exp_alerts': [dict(
                              alert('warning', 'openstack leveller apply on '
                                    'ctl2 has not succeeded since its '
                                    'metrics file was written'),
                              exp_labels=dict(LABELS, instance='ctl2',
                                              severity='warning'))]},
                         {'eval_time': '30m', 'alertname':
                          'LevellerMigrationsFailing', 'exp_alerts': [alert(
                              'info', 'the last openstack leveller apply on '
                              'ctl1 had failed moves: see its journal')]},
                     ]}]}
        with tempfile.NamedTemporaryFile('w', suffix='.yaml') as f:
            yaml.safe_dump(tests, f)
            f.flush()
            self.assertIn('SUCCESS', self.promtool('test', 'rules', f.name))

    def test_a_domain_held_for_implausible_metrics(self):
        # ctl1 held for load jumps for an hour; ctl2 for one run only.
        held = 'openstack_leveller_last_run_implausible_metrics{command=' \
            '"apply",domain="az1/Gen1",instance="%s",reason="load_jump"}'
        tests = {'rule_files': [str(RULES)], 'evaluation_interval': '1m',
                 'tests': [{'interval': '1m', 'input_series': [
                     {'series': held % 'ctl1', 'values': '1x60'},
                     {'series': held % 'ctl2', 'values': '1x10'}],
                     'alert_rule_test': [
                         {'eval_time': '20m', 'alertname':
                          'LevellerMetricsImplausible', 'exp_alerts': []},
                         {'eval_time': '45m', 'alertname':
                          'LevellerMetricsImplausible', 'exp_alerts': [{
                              'exp_labels': dict(
                                  LABELS, domain='az1/Gen1',
                                  reason='load_jump', severity='warning'),
                              'exp_annotations': {'summary': (
                                  'openstack leveller apply on ctl1 holds '
                                  'az1/Gen1: its metrics cannot be true '
                                  '(load_jump); see the run\'s Held line')}}]},
                     ]}]}
        with tempfile.NamedTemporaryFile('w', suffix='.yaml') as f:
            yaml.safe_dump(tests, f)
            f.flush()
            self.assertIn('SUCCESS', self.promtool('test', 'rules', f.name))
