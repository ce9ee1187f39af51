"""The run recipes of the installation guide (doc/source/install/recipes):
the systemd unit and timer pass systemd-analyze, and the command line of
every recipe is one that apply's parser takes, with the files it names."""

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

import yaml

from osc_leveller.core.settings import windows
from osc_leveller.v1 import apply as apply_cmd
from osc_leveller.v1 import migrating

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPES = os.path.join(HERE, '..', '..', 'doc', 'source', 'install',
                       'recipes')
SERVICE = os.path.join(RECIPES, 'osc-leveller-apply.service')
TIMER = os.path.join(RECIPES, 'osc-leveller-apply.timer')
REQUIRE_SYSTEMD = 'OSC_LEVELLER_REQUIRE_SYSTEMD'
# systemd-analyze security's scale: 0 (safe) to 10; below 2 is "OK".
MOST_EXPOSURE = 2.0


def apply_args(argv):
    """argv after 'openstack' parsed as 'openstack leveller apply' does:
    the namespace; a usage error fails (SystemExit)."""
    assert argv[:2] == ['leveller', 'apply'], argv
    app = mock.Mock()
    parser = apply_cmd.ApplyLeveller(app, None).get_parser(
        'openstack leveller apply')
    return parser.parse_args(argv[2:])


def unit_value(text, key):
    """The value of key in a unit file, its continuation lines joined."""
    joined = text.replace('\\\n', ' ')
    found = re.findall(r'^%s=(.*)$' % re.escape(key), joined, re.M)
    assert len(found) == 1, (key, found)
    return found[0]


class TestSystemdUnit(unittest.TestCase):

    def setUp(self):
        self.analyze = shutil.which('systemd-analyze')
        if not self.analyze:
            if os.environ.get(REQUIRE_SYSTEMD):
                self.fail('systemd-analyze is missing and %s is set'
                          % REQUIRE_SYSTEMD)
            self.skipTest('no systemd-analyze (Debian: systemd)')
        with open(SERVICE) as stream:
            self.service = stream.read()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        # verify checks that ExecStart's program exists: here, a stand-in
        # at the path the unit names is not possible, so the unit copy
        # points at an executable of this machine.
        self.copy = os.path.join(self.tmp.name, os.path.basename(SERVICE))
        with open(self.copy, 'w') as stream:
            stream.write(self.service.replace('/usr/bin/openstack',
                                              shutil.which('true')))
        shutil.copy(TIMER, self.tmp.name)

    def analyze_(self, *args):
        return subprocess.run([self.analyze] + list(args), cwd=self.tmp.name,
                              capture_output=True, text=True, timeout=60)

    def test_verify_finds_nothing_wrong(self):
        found = self.analyze_('verify', self.copy, os.path.join(
            self.tmp.name, os.path.basename(TIMER)))
        self.assertEqual(0, found.returncode, found.stderr)
        self.assertEqual('', found.stderr.strip())

    def test_verify_sees_a_broken_unit(self):
        # The check above can fail: verify warns of a misspelt key or a
        # bad value (and still exits 0).
        with open(self.copy, 'a') as stream:
            stream.write('ProtectSytem=strict\nPrivateTmp=sometimes\n')
        found = self.analyze_('verify', self.copy)
        self.assertIn("Unknown key 'ProtectSytem'", found.stderr)
        self.assertIn('sometimes', found.stderr)

    def test_the_unit_is_hardened(self):
        found = self.analyze_('security', '--offline=yes', self.copy)
        self.assertEqual(0, found.returncode, found.stderr)
        level = re.search(r'Overall exposure level for \S+: ([0-9.]+)',
                          found.stdout)
        self.assertIsNotNone(level, found.stdout[-500:])
        self.assertLessEqual(float(level.group(1)), MOST_EXPOSURE)
        for setting in ('NoNewPrivileges=yes', 'ProtectSystem=strict',
                        'ProtectHome=yes', 'CapabilityBoundingSet=\n'):
            self.assertIn(setting, self.service)


class TestCommandLines(unittest.TestCase):

    def test_the_unit_runs_apply_with_its_state_where_it_may_write(self):
        with open(SERVICE) as stream:
            text = stream.read()
        argv = shlex.split(unit_value(text, 'ExecStart'))
        self.assertEqual('/usr/bin/openstack', argv[0])
        args = apply_args(argv[1:])
        self.assertEqual(1, args.batch)
        # Every controller runs it: one acts per interval of the timer.
        with open(TIMER) as stream:
            self.assertEqual('*:0/10', unit_value(stream.read(),
                                                  'OnCalendar'))
        self.assertEqual('10m', args.cloud_lock)
        state = '/var/lib/' + unit_value(text, 'StateDirectory')
        writable = [p.lstrip('-') for p in unit_value(
            text, 'ReadWritePaths').split()] + [state]
        for path in (args.lock_file, args.journal, args.metrics_file):
            self.assertTrue(any(path.startswith(d + '/') for d in writable),
                            path)
        # The refusals by design (lock held, maintenance window) are not
        # failures of the unit.
        self.assertEqual({str(migrating.EXIT_REFUSED),
                          str(migrating.EXIT_WINDOW)}, set(unit_value(
                              text, 'SuccessExitStatus').split()))

    def test_the_kolla_job(self):
        with open(os.path.join(RECIPES, 'kolla', 'run.sh')) as stream:
            text = stream.read()
        found = subprocess.run(['sh', '-n', '-c', text], capture_output=True,
                               text=True)
        self.assertEqual(0, found.returncode, found.stderr)
        argv = shlex.split(text[text.index('exec docker run'):].replace(
            '\\\n', ' '), comments=True)
        image = argv.index('osc-leveller')
        args = apply_args(argv[image + 1:])
        mounts = [argv[i + 1].split(':')[1] for i, a in enumerate(argv)
                  if a == '-v']
        for path in (args.lock_file, args.journal):
            self.assertTrue(any(path.startswith(m + '/') for m in mounts),
                            path)
        with open(os.path.join(RECIPES, 'kolla', 'Containerfile')) as stream:
            self.assertIn('ENTRYPOINT ["openstack"]', stream.read())

    def test_the_helm_cronjob(self):
        with open(os.path.join(RECIPES, 'helm', 'cronjob.yaml')) as stream:
            documents = list(yaml.safe_load_all(stream))
        kinds = {d['kind']: d for d in documents}
        self.assertEqual({'CronJob', 'PersistentVolumeClaim'}, set(kinds))
        job = kinds['CronJob']
        self.assertEqual('batch/v1', job['apiVersion'])
        self.assertEqual('Forbid', job['spec']['concurrencyPolicy'])
        # A schedule the leveller's own cron grammar reads (crontab(5)).
        windows.parse(job['spec']['schedule'] + ' for 1m')
        pod = job['spec']['jobTemplate']['spec']['template']['spec']
        self.assertEqual('Never', pod['restartPolicy'])
        container, = pod['containers']
        self.assertEqual('openstack', container['command'][0])
        args = apply_args(container['command'][1:])
        mounted = [m['mountPath'] for m in container['volumeMounts']]
        for path in (args.lock_file, args.journal):
            self.assertTrue(any(path.startswith(m + '/') for m in mounted),
                            path)
        claims = {v['persistentVolumeClaim']['claimName']
                  for v in pod['volumes'] if 'persistentVolumeClaim' in v}
        self.assertEqual({kinds['PersistentVolumeClaim']['metadata']
                          ['name']}, claims)

    def test_a_wrong_option_is_caught(self):
        with self.assertRaises(SystemExit):
            apply_args(['leveller', 'apply', '--batches', '1'])
