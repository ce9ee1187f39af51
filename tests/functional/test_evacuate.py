"""openstack leveller evacuate on the devcloud's mixed scenario."""

import json

from tests.functional import base
from tests.functional import test_apply


class Evacuating:
    """evacuate, and where the servers are, for a devcloud test case with
    a settings file in self.config."""

    def hosts(self):
        """{server name: its compute service host}.

        server list --long shows the hypervisor (node) name as Host.
        """
        return {s['Name']: self.host[s['Host']] for s in base.openstack(
            'server', 'list', '--all-projects', '--long')}

    def evacuate(self, *args):
        result = base.openstack('leveller', 'evacuate', '--config',
                                self.config, '-f', 'json', *args,
                                parse=False, check=False, timeout=900)
        rows = json.loads(result.stdout) if result.stdout.strip() else []
        return result.returncode, rows, result.stderr

    def assert_refused(self, err, before, host):
        """A refused drain: it says so, no server moved, and host's
        compute service is still enabled."""
        self.assertIn('nothing was moved', err)
        self.assertEqual(before, self.hosts())
        service = base.openstack('compute', 'service', 'list', '--host',
                                 host, '--service', 'nova-compute')[0]
        self.assertEqual('enabled', service['Status'])


class TestEvacuate(Evacuating, test_apply.ApplyTestCase):
    SCENARIO = 'mixed'

    def test_1_dry_run_and_a_drain_that_cannot_fit(self):
        before = self.hosts()
        code, rows, err = self.evacuate('hv01', '--dry-run')
        self.assertEqual(0, code, err)
        statuses = {r['Server']: r['Status'] for r in rows}
        self.assertEqual('stays', statuses['locked-1'])
        self.assertEqual('would run', statuses['app-1'])
        # All of az1 at once: nothing in its CPU class is left to take them.
        code, rows, err = self.evacuate('hv01', 'hv02', 'hv03')
        self.assertEqual(4, code, err)
        self.assertIn('fit nowhere', err)
        self.assert_refused(err, before, 'hv01')
        # hv05's Icelake twin hv06 would be alone (and db-1 cannot join
        # db-2 there): N+1 is lost. Warned, or refused on request.
        # (A hypervisor name does as well as its service host.)
        code, rows, err = self.evacuate(self.node['hv05'], '--allow-partial',
                                        '--dry-run')
        self.assertEqual(0, code, err)
        self.assertIn('no N+1 headroom', err)
        self.assertIn('anti-affinity', {r['Server']: r['Reason']
                                        for r in rows}['db-1'])
        code, rows, err = self.evacuate('hv05', '--allow-partial',
                                        '--keep-n-plus-one')
        self.assertEqual(4, code, err)
        self.assertIn('no N+1 headroom', err)
        self.assertEqual(before, self.hosts())

    def test_2_drain_then_restore(self):
        self.addCleanup(base.openstack, 'compute', 'service', 'set',
                        '--enable', 'hv01', 'nova-compute', parse=False,
                        check=False)
        # Started without waiting, then finished by a second run.
        code, rows, err = self.evacuate('hv01', '--no-wait',
                                        '--reason', 'disk swap')
        self.assertEqual(0, code, err)
        started = {r['Server'] for r in rows if r['Status'] == 'started'}
        self.assertEqual(2, len(started), rows)
        self.assertIn('to continue and wait', err)
        code, rows, err = self.evacuate('hv01', '--cold-migrate-stopped',
                                        '--reason', 'disk swap')
        statuses = {r['Server']: r['Status'] for r in rows}
        after = self.hosts()
        on_hv01 = sorted(n for n, h in after.items() if h == 'hv01')
        self.assertEqual(['locked-1'], on_hv01, rows)
        self.assertEqual(3, code, err)  # locked-1 stays: not empty
        self.assertEqual('stays', statuses['locked-1'])
        self.assertFalse(started & set(statuses), rows)
        for name in {'app-1', 'app-2', 'app-3', 'app-4', 'web-1', 'paused-1',
                     'shutoff-1'} - started:
            self.assertEqual('done', statuses[name], rows)
        self.assertNotEqual('hv02', after['web-1'])  # anti-affinity kept
        self.assertEqual('PAUSED', base.openstack(
            'server', 'show', 'paused-1')['status'])
        self.assertEqual('SHUTOFF', base.openstack(
            'server', 'show', 'shutoff-1')['status'])
        # Balanced over az1's Cascadelake hosts, not piled on one.
        self.assertEqual({'hv02', 'hv03'}, {after['app-%d' % i]
                                            for i in range(1, 5)})
        service = base.openstack('compute', 'service', 'list', '--host',
                                 'hv01', '--service', 'nova-compute',
                                 '--long')[0]
        self.assertEqual('disabled', service['Status'])
        self.assertEqual('disk swap', service['Disabled Reason'])
        self.assertIn('Not empty: %s (1 servers)' % self.node['hv01'], err)

        code, rows, err = self.evacuate('hv01', '--restore', '--move-back',
                                        '--cold-migrate-stopped')
        self.assertEqual(0, code, err)
        back = {r['Server'] for r in rows if r['Status'] == 'done'}
        self.assertTrue({'app-1', 'app-2', 'app-3', 'app-4', 'web-1',
                         'paused-1', 'shutoff-1'} <= back, rows)
        self.assertEqual('SHUTOFF', base.openstack(
            'server', 'show', 'shutoff-1')['status'])
        restored = self.hosts()
        for name in back:
            self.assertEqual('hv01', restored[name])
        service = base.openstack('compute', 'service', 'list', '--host',
                                 'hv01', '--service', 'nova-compute')[0]
        self.assertEqual('enabled', service['Status'])
