"""The goals beyond levelling on the devcloud's hot-host scenario, each
planned, reported and applied against the real Nova and Placement:
plan --free-hosts then apply --disable-freed (and evacuate --restore), and
plan --spread count. What each made is read back from Nova and Placement,
never from the plan."""

import collections
import html.parser
import json

from tests.functional import base
from tests.functional import test_apply
from tests.functional import test_evacuate


class Page(html.parser.HTMLParser):
    """Of a report: its goal line, the hypervisors freed, and the server
    counts (hypervisor -> (before, after))."""

    def __init__(self, path):
        super().__init__()
        self.goal, self.freed, self.counts = '', [], {}
        self._in, self._row = None, None
        with open(path, encoding='utf-8') as f:
            self.feed(f.read())

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        cls = attrs.get('class', '')
        if tag == 'p' and cls == 'goal':
            self._in = 'goal'
        elif tag == 'li' and cls == 'freed':
            self.freed.append(attrs['data-hypervisor'])
        elif tag == 'tr' and cls == 'count':
            self._row = (attrs['data-hypervisor'], [])
        elif tag == 'td' and self._row is not None and cls == 'num':
            self._in = 'count'

    def handle_endtag(self, tag):
        if tag == 'tr' and self._row is not None:
            name, cells = self._row
            self.counts[name] = tuple(cells)
            self._row = None
        if tag in ('p', 'td'):
            self._in = None

    def handle_data(self, data):
        if self._in == 'goal':
            self.goal += data
        elif self._in == 'count':
            self._row[1].append(int(data))


class TestGoals(test_evacuate.Evacuating, test_apply.ApplyTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The load as it lasts: hv01's servers ask for about 24 of its 16
        # threads once the rates cover their steal too. Right after the
        # load they may ask for 16, and a plan that takes hv01 as a
        # destination then meets the saturation check at apply.
        hot = cls.node['hv01']
        base.wait_for(lambda: {r['Hypervisor']: r['CPU %'] for r in
                               base.openstack('leveller', 'score')}[hot]
                      > 140, 120, interval=5,
                      message='hv01 asked for 1.4 times its threads')

    def where(self):
        """{server name: its hypervisor (node) name}, from Nova."""
        return {s.name: s.hypervisor_hostname for s in
                base.connection().compute.servers(details=True,
                                                  all_projects=True)}

    def counts(self):
        """{hypervisor (node) name: servers}, from Nova's server list."""
        found = collections.Counter(self.where().values())
        return {node: found[node] for node in self.node.values()}

    def placement_used(self, node):
        """MEMORY_MB Placement has allocated on the node's provider."""
        conn = base.connection()
        rp = next(conn.placement.resource_providers(name=node))
        return conn.placement.get('/resource_providers/%s/usages' % rp.id) \
            .json()['usages'].get('MEMORY_MB', 0)

    def service(self, host):
        """(status, disabled reason) of host's nova-compute, from Nova."""
        service, = base.connection().compute.services(
            host=host, binary='nova-compute')
        return service.status, service.disabled_reason

    def test_1_free_hosts_disable_freed_then_restore(self):
        # hv03's one server is stopped: it keeps hv03 busy, unless stopped
        # servers migrate cold.
        base.openstack('server', 'stop', 'idle-b1', parse=False)
        self.addCleanup(base.openstack, 'server', 'start', 'idle-b1',
                        parse=False, check=False)
        base.wait_for(lambda: base.connection().compute.find_server(
            'idle-b1').status == 'SHUTOFF', 120, message='idle-b1 stopped')
        result = base.openstack('leveller', 'plan', '--free-hosts',
                                parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('Not freed: %s (az1/Cascadelake-Server): idle-b1 '
                      'cannot move: status SHUTOFF: stopped servers stay'
                      % self.node['hv03'], result.stderr)
        path = self.path('free.json')
        report = self.path('free.html')
        result = base.openstack('leveller', 'plan', '--free-hosts',
                                '--cold-migrate-stopped',
                                '--output-file', path, '--report', report,
                                parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        with open(path) as f:
            plan = json.load(f)
        self.assertEqual('free-hosts', plan['kind'])
        freed = [f['hypervisor'] for d in plan['imbalance']['domains']
                 for f in d.get('freed', ())]
        # The most that can be freed, with the fewest GiB: hv02 and hv03's
        # three small servers (6 GiB). hv01's 56 GiB fit on no one other
        # hypervisor, and hv04 and hv01 cannot both go.
        self.assertEqual(sorted(self.node[h] for h in ('hv02', 'hv03')),
                         sorted(freed), result.stderr)
        for node in freed:
            self.assertIn('Freed: %s (' % node, result.stderr)
        # Every other hypervisor takes servers, or the plan says why not.
        destinations = {m['destination'] for m in plan['moves']}
        for host in ('hv01', 'hv04'):
            if self.node[host] not in destinations:
                self.assertIn('Not freed: %s' % self.node[host],
                              result.stderr)
        page = Page(report)
        self.assertTrue(page.goal.startswith('Free hosts: as many '
                                             'hypervisors as possible'))
        self.assertEqual(sorted(freed), sorted(page.freed))

        for node in freed:
            self.addCleanup(base.openstack, 'compute', 'service', 'set',
                            '--enable', self.host[node], 'nova-compute',
                            parse=False, check=False)
        # Planned cold, run cold only when apply is told so too.
        code, rows, err = self.apply(path)
        self.assertEqual(1, code, err)
        self.assertIn('was planned with --cold-migrate-stopped', err)
        code, rows, err = self.apply(path, '--cold-migrate-stopped',
                                     '--disable-freed',
                                     'leveller functional test')
        self.assertEqual(0, code, err)
        self.assertEqual({'done'}, {r['Status'] for r in rows})
        # idle-b1 moved cold, as Nova records it, and is still stopped.
        conn = base.connection()
        stopped = conn.compute.find_server('idle-b1')
        last = max(conn.compute.migrations(instance_uuid=stopped.id),
                   key=lambda m: m.created_at)
        self.assertEqual(('migration', 'confirmed', 'SHUTOFF'), (
            last.migration_type, last.status, stopped.status))
        counts = self.counts()
        for node in freed:
            # Empty as Nova and Placement see it, and disabled.
            self.assertEqual(0, counts[node])
            self.assertEqual(0, self.placement_used(node))
            self.assertEqual(('disabled', 'leveller functional test'),
                             self.service(self.host[node]))
            self.assertIn('Disabled the compute service of %s (freed)'
                          % self.host[node], err)
        disabled = [e for e in self.journal()
                    if e['event'] == 'disable-service']
        self.assertEqual(sorted(self.host[n] for n in freed),
                         sorted(e['host'] for e in disabled))
        # Every hypervisor that still hosts servers stays enabled.
        for node, count in counts.items():
            if count:
                self.assertEqual('enabled',
                                 self.service(self.host[node])[0])

        # evacuate --restore enables them again and moves nothing.
        before = self.where()
        code, rows, err = self.evacuate(*[self.host[n] for n in freed],
                                        '--restore')
        self.assertEqual(0, code, err)
        for node in freed:
            self.assertEqual('enabled', self.service(self.host[node])[0])
        self.assertEqual(before, self.where())

    def test_2_spread_evens_out_the_counts(self):
        before = self.counts()
        self.assertGreater(max(before.values()) - min(before.values()), 1)
        path = self.path('spread.json')
        report = self.path('spread.html')
        result = base.openstack('leveller', 'plan', '--spread', 'count',
                                '--output-file', path, '--report', report,
                                parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        with open(path) as f:
            plan = json.load(f)
        self.assertEqual('spread', plan['kind'])
        # The fewest moves: those above the even counts (one domain).
        total, n = sum(before.values()), len(before)
        q, r = divmod(total, n)
        above = sorted(before.values(), reverse=True)
        fewest = sum(max(0, c - (q + 1 if i < r else q))
                     for i, c in enumerate(above))
        self.assertEqual(fewest, len(plan['moves']), result.stderr)
        page = Page(report)
        self.assertTrue(page.goal.startswith('Spread by server count'))
        self.assertEqual(before, {h: c[0] for h, c in page.counts.items()})

        code, rows, err = self.apply(path)
        self.assertEqual(0, code, err)
        self.assertEqual({'done'}, {r['Status'] for r in rows})
        after = self.counts()
        self.assertLessEqual(max(after.values()) - min(after.values()), 1)
        self.assertEqual(total, sum(after.values()))
        # What the report said after is what Nova now shows.
        self.assertEqual(after, {h: c[1] for h, c in page.counts.items()})
        result = base.openstack('leveller', 'plan', '--spread', 'count',
                                '-f', 'json', parse=False, check=False)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([], json.loads(result.stdout))
        self.assertIn('Nothing to do: the server counts are already even',
                      result.stderr)
