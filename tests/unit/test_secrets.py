"""No secret in any output, at any verbosity.

The real ``openstack`` shell runs the leveller's commands against the
stand-in cloud with secrets planted everywhere an operator puts them (the
cloud's password in clouds.yaml and on the command line, the Prometheus
token and password, credentials inside the Prometheus URL in clouds.yaml,
a --config file and a flag), with --debug and -vv; neither standard output
nor standard error may contain any of them. Read through Aetos, the cloud's
Keystone token is in neither, nor in the files the commands write.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

import yaml

from osc_leveller.v1 import masking
from tests.unit import builders as b
from tests.unit import standin

PASSWORD = 'Planted-Keystone-Secret-1'
PROM_PASSWORD = 'Planted-Prometheus-Password-2'
PROM_TOKEN = 'Planted-Prometheus-Token-3'
URL_PASSWORD = 'Planted-Url-Password-4'
CONFIG_PASSWORD = 'Planted-Config-Url-Password-5'
FLAG_PASSWORD = 'Planted-Flag-Url-Password-6'
PROM_HEADER = 'Planted-Tenant-Header-7'
CONFIG_HEADER = 'Planted-Config-Header-8'
SECRETS = (PASSWORD, PROM_PASSWORD, PROM_TOKEN, URL_PASSWORD, CONFIG_PASSWORD,
           FLAG_PASSWORD, PROM_HEADER, CONFIG_HEADER)


def openstack():
    return shutil.which('openstack', path=os.path.dirname(sys.executable)) \
        or shutil.which('openstack')


def with_password(url, password):
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc='leveller:%s@%s' % (
        password, parts.netloc)).geturl()


class TestMask(unittest.TestCase):
    def test_shapes(self):
        self.assertEqual(
            'START with options: --os-password ****** leveller plan '
            '--prometheus-url https://u:******@prom:9090/x@y --os-token=******',
            masking.mask('START with options: --os-password pw1 leveller '
                         'plan --prometheus-url https://u:p@ss@prom:9090/x@y '
                         '--os-token=tok'))
        self.assertEqual("Namespace(os_password='******', x='http://h')",
                         masking.mask("Namespace(os_password='pw1', "
                                      "x='http://h')"))
        # The headers mapping in the cloud configuration osc-lib logs,
        # however short its values.
        self.assertEqual(
            "cfg {'prometheus': {'headers': {'X-Scope-OrgID': '******', "
            "'X-N': '******'}, 'url': 'http://p'}}",
            masking.mask("cfg {'prometheus': {'headers': {'X-Scope-OrgID': "
                         "'t1', 'X-N': 12}, 'url': 'http://p'}}"))
        masking.remember('remembered-secret')
        self.assertEqual('token ****** here',
                         masking.mask('token remembered-secret here'))


class TestDebugOutput(unittest.TestCase):
    def setUp(self):
        if not openstack():
            self.skipTest('no openstack command')
        hyps, servers = b.three_hosts()
        self.cloud = standin.StandIn(b.document(hyps, servers),
                                     password=PASSWORD)
        self.cloud.start()
        self.addCleanup(self.cloud.stop)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.clouds_yaml = self.cloud.write_clouds_yaml(
            os.path.join(self.tmp, 'clouds.yaml'), extra={'leveller': {
                'prometheus': {
                    'url': with_password(self.cloud.prometheus_url,
                                         URL_PASSWORD),
                    'password': PROM_PASSWORD, 'token': PROM_TOKEN,
                    'headers': {'X-Scope-OrgID': PROM_HEADER}},
                'apply': {
                    'lock_file': os.path.join(self.tmp, 'apply.lock'),
                    'journal': os.path.join(self.tmp, 'journal.jsonl')}}})
        self.config = os.path.join(self.tmp, 'site.yaml')
        with open(self.config, 'w') as f:
            yaml.safe_dump({'prometheus': {'url': with_password(
                self.cloud.prometheus_url, CONFIG_PASSWORD), 'headers': {
                    'X-Scope-OrgID': CONFIG_HEADER}}}, f)

    def run_shell(self, *args):
        result = subprocess.run(
            [openstack(), '--os-cloud', 'standin'] + list(args),
            env=self.cloud.shell_env(self.clouds_yaml), capture_output=True,
            text=True, timeout=120)
        return result

    def test_no_secret_in_any_output(self):
        flag_url = with_password(self.cloud.prometheus_url, FLAG_PASSWORD)
        runs = [
            ('--debug', 'leveller', 'score'),
            ('-vv', 'leveller', 'plan', '--config', self.config),
            ('--debug', '--os-password', PASSWORD, 'leveller', 'plan',
             '--prometheus-url', flag_url),
            ('--debug', 'leveller', 'config', 'show', '--config',
             self.config, '-f', 'json'),
            ('--debug', 'leveller', 'apply', '--dry-run', '--prometheus-url',
             flag_url),
            ('--debug', 'leveller', 'snapshot', '--output-file',
             os.path.join(self.tmp, 'snapshot.json')),
            # An error path: a bad URL in a flag is quoted, masked.
            ('--debug', 'leveller', 'plan', '--prometheus-url',
             'http://leveller:%s@[::1' % FLAG_PASSWORD),
        ]
        for args in runs:
            result = self.run_shell(*args)
            output = result.stdout + result.stderr
            self.assertGreater(len(result.stderr), 1000, args)  # debug on
            for secret in SECRETS:
                self.assertNotIn(secret, output, (args, result.returncode))
        # The runs did read the cloud and Prometheus, with the credentials.
        self.assertGreater(self.cloud.counts[
            ('nova', 'GET', '/v2.1/servers/detail')], 0)
        tenants = {seen.headers.get('X-Scope-OrgID') for seen in
                   self.cloud.requests if seen.service == 'prometheus'}
        self.assertEqual({PROM_HEADER, CONFIG_HEADER}, tenants)
        self.assertEqual(0, self.run_shell('leveller', 'score').returncode)

    def test_no_netrc_credentials_to_openstack(self):
        # requests would send a .netrc's login for the API's host to Nova
        # and Placement, which take tokens.
        netrc = os.path.join(self.tmp, 'netrc')
        with open(netrc, 'w') as f:
            f.write('machine 127.0.0.1 login ops password %s\n' % PASSWORD)
        os.chmod(netrc, 0o600)
        env = dict(self.cloud.shell_env(self.clouds_yaml), NETRC=netrc)
        result = subprocess.run(
            [openstack(), '--os-cloud', 'standin', 'leveller', 'score'],
            env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(0, result.returncode, result.stderr)
        asked = [seen for seen in self.cloud.requests
                 if seen.service in ('nova', 'placement')]
        self.assertGreater(len(asked), 5)
        self.assertEqual([], [(seen.service, seen.path) for seen in asked
                              if 'Authorization' in seen.headers])

    def test_no_keystone_token_through_aetos(self):
        # Metrics through Aetos in the catalog, with the cloud's own
        # token: no prometheus.url, so no Prometheus secret either.
        self.cloud.aetos = True
        clouds_yaml = self.cloud.write_clouds_yaml(
            os.path.join(self.tmp, 'aetos.yaml'), extra={'leveller': {
                'apply': {
                    'lock_file': os.path.join(self.tmp, 'apply.lock'),
                    'journal': os.path.join(self.tmp, 'journal.jsonl')}}})
        written = [os.path.join(self.tmp, name) for name in (
            'snapshot.json', 'plan.json', 'leveller.prom')]
        runs = [
            ('--debug', 'leveller', 'metrics', 'check'),
            ('--debug', 'leveller', 'score'),
            ('-vv', 'leveller', 'plan', '--output-file', written[1]),
            ('--debug', 'leveller', 'apply', '--dry-run'),
            ('--debug', 'leveller', 'apply', '--batch', '0', '--metrics-file',
             written[2]),
            ('--debug', 'leveller', 'snapshot', '--output-file', written[0]),
        ]
        outputs = []
        for args in runs:
            result = subprocess.run(
                [openstack(), '--os-cloud', 'standin'] + list(args),
                env=self.cloud.shell_env(clouds_yaml), capture_output=True,
                text=True, timeout=120)
            self.assertEqual(0, result.returncode, (args, result.stderr))
            self.assertGreater(len(result.stderr), 1000, args)  # debug on
            outputs.append((args, result.stdout + result.stderr))
        self.assertIn('Metrics from Aetos at %s' % self.cloud.prometheus_url,
                      outputs[0][1])
        for path in written + [os.path.join(self.tmp, 'journal.jsonl')]:
            with open(path, encoding='utf-8') as f:
                outputs.append((path, f.read()))
        # Every token Keystone issued in these runs, and the password.
        asked = [r for r in self.cloud.requests if r.service == 'prometheus']
        tokens = {r.headers.get('X-Auth-Token') for r in asked}
        self.assertGreater(len(asked), len(runs))
        self.assertNotIn(None, tokens)
        tokens |= set(self.cloud._tokens)
        for where, output in outputs:
            for secret in tokens | {PASSWORD}:
                # not assertNotIn: its message would show the output
                self.assertFalse(secret in output, '%s shows a secret' % (
                    where,))
