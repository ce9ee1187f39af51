"""N+1 headroom and plan --make-room on the devcloud's fragmented scenario:
free RAM that adds up to a hypervisor's servers, in pieces too small for
the largest one."""

import os
import tempfile

import yaml

from tests.functional import base
from tests.functional import test_evacuate
from tests.functional import test_goals

DOMAIN = 'az1/Cascadelake-Server'
IMAGE = '11111111-1111-4111-8111-111111111111'  # the devcloud's fake Glance


class TestFragmentedHeadroom(test_evacuate.Evacuating,
                             base.DevcloudTestCase):
    SCENARIO = 'fragmented'

    def setUp(self):
        super().setUp()
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.config = os.path.join(tmp.name, 'leveller.yaml')
        with open(self.config, 'w') as f:
            yaml.safe_dump({'apply': {
                'journal': os.path.join(tmp.name, 'journal.jsonl'),
                'lock_file': os.path.join(tmp.name, 'apply.lock')}}, f)

    def placement_memory(self):
        """({service host: free MEMORY_MB}, {service host: used}) from
        Placement itself: (total - reserved) x allocation ratio - used."""
        conn = base.connection()
        free, used = {}, {}
        for rp in conn.placement.resource_providers():
            memory = {i.resource_class: i for i in
                      conn.placement.resource_provider_inventories(rp)}[
                          'MEMORY_MB']
            host = self.host[rp.name]
            used[host] = conn.placement.get(
                '/resource_providers/%s/usages' % rp.id).json()[
                    'usages'].get('MEMORY_MB', 0)
            free[host] = (memory.total - memory.reserved) * \
                memory.allocation_ratio - used[host]
        return free, used

    def test_1_free_ram_adds_up_but_packing_says_no(self):
        # What adding up says: hv01's servers need no more RAM than hv02
        # and hv03 have free together; its one server needs more than
        # either has.
        free, used = self.placement_memory()
        big = base.openstack('server', 'show', 'big-1')
        self.assertEqual(self.node['hv01'],
                         big['OS-EXT-SRV-ATTR:hypervisor_hostname'])
        allocations = base.connection().placement.get(
            '/allocations/%s' % big['id']).json()['allocations']
        needs = sum(a['resources']['MEMORY_MB']
                    for a in allocations.values())
        self.assertEqual(used['hv01'], needs)  # big-1 is all hv01 holds
        self.assertGreaterEqual(free['hv02'] + free['hv03'], used['hv01'])
        self.assertLess(max(free['hv02'], free['hv03']), needs)

        found = {r['Domain']: r['N+1'] for r in base.openstack(
            'leveller', 'score', '--summary')}
        rows = {d: n['reason'] for d, n in found.items()}
        self.assertTrue(rows[DOMAIN].startswith(
            'no: losing %s, 1 server fit nowhere: big-1 (on %s, big-1: '
            'MEMORY_MB full: ' % (self.node['hv01'], self.node['hv02'])),
            rows[DOMAIN])
        # The same answer in fields: what was lost, which server is left.
        self.assertEqual((False, [self.node['hv01']], [big['id']]), (
            found[DOMAIN]['ok'], found[DOMAIN]['lost'],
            [u['server_id'] for u in found[DOMAIN]['unplaced']]))
        # az2's hypervisors run nothing.
        self.assertEqual({'yes'}, {n for d, n in rows.items() if d != DOMAIN})
        # plan --keep-n-plus-one: a loss not absorbed to start with holds
        # no move back, and plan says so.
        result = base.openstack('leveller', 'plan', '--keep-n-plus-one',
                                '-f', 'json', parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('N+1: %s had none when planning started (losing %s, '
                      '1 server fit nowhere: big-1' % (
                          DOMAIN, self.node['hv01']), result.stderr)

    def test_2_keep_n_plus_one_refuses_a_drain_that_fits(self):
        before = self.hosts()
        # hv03's servers fit on hv01 and hv02, but then losing hv01 leaves
        # big-1 nowhere: a warning only, until asked to keep N+1.
        code, rows, err = self.evacuate('hv03', '--dry-run')
        self.assertEqual(0, code, err)
        self.assertEqual({'fill-b%d' % i: 'would run' for i in range(1, 5)},
                         {r['Server']: r['Status'] for r in rows})
        self.assertIn('Warning: after this drain %s has no N+1 headroom: '
                      'losing %s' % (DOMAIN, self.node['hv01']), err)
        self.assertIn('big-1', err)
        code, rows, err = self.evacuate('hv03', '--keep-n-plus-one')
        self.assertEqual(4, code, err)
        self.assertIn('no N+1 headroom: losing %s' % self.node['hv01'], err)
        self.assertIn('big-1', err)
        self.assert_refused(err, before, 'hv03')
        # hv01 itself cannot be drained: big-1 fits nowhere.
        code, rows, err = self.evacuate('hv01', '--keep-n-plus-one')
        self.assertEqual(4, code, err)
        self.assertIn('1 server fit nowhere: big-1', err)
        self.assertIn('nothing was moved', err)
        self.assertEqual(before, self.hosts())

    def test_3_make_room_turns_no_valid_host_into_a_server(self):
        # lv.huge fits on no hypervisor of az1 (az2's are empty): Nova says
        # No valid host, until plan --make-room's one move is applied.
        def create():
            return base.openstack(
                'server', 'create', '--flavor', 'lv.huge', '--image',
                IMAGE, '--nic', 'none', '--availability-zone', 'az1',
                '--wait', 'room-huge', parse=False, check=False, timeout=300)
        self.addCleanup(base.openstack, 'server', 'delete', '--wait',
                        'room-huge', parse=False, check=False)
        result = create()
        self.assertNotEqual(0, result.returncode)
        fault = base.openstack('server', 'show', 'room-huge')['fault']
        self.assertIn('No valid host was found', str(fault))
        base.openstack('server', 'delete', '--wait', 'room-huge',
                       parse=False)
        plan = os.path.join(os.path.dirname(self.config), 'room.json')
        report = os.path.join(os.path.dirname(self.config), 'room.html')
        result = base.openstack(
            'leveller', 'plan', '--make-room', 'lv.huge',
            '--availability-zone', 'az1', '--output-file', plan,
            '--report', report, parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('Room for the flavor: 1 live migration', result.stderr)
        page = test_goals.Page(report)
        self.assertEqual('Room for the flavor: room for 1 new server of '
                         'flavor lv.huge in availability zone az1', page.goal)
        result = base.openstack('leveller', 'apply', '--config', self.config,
                                plan, parse=False, check=False, timeout=900)
        self.assertEqual(0, result.returncode, result.stderr)
        result = create()
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual('ACTIVE', base.openstack(
            'server', 'show', 'room-huge')['status'])
