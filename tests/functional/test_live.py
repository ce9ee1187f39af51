"""The leveller's commands on the live devcloud (no --snapshot)."""

import contextlib
import dataclasses
import json
import os
import re
import tempfile
from unittest import mock

import yaml

from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import libvirt
from osc_leveller.cloud import measure
from osc_leveller.core.load import skill
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from tests.functional import base
from tests.unit.v1 import test_report


# The devcloud exporter's resident memory of a QEMU process beside the guest's
# (tools/devcloud/exporter.py QEMU_OVERHEAD_MIB).
QEMU_MIB = 160


def clouds_yaml():
    with open(os.environ['OS_CLIENT_CONFIG_FILE']) as f:
        return yaml.safe_load(f)


@contextlib.contextmanager
def prometheus_settings(**settings):
    """An environment whose clouds.yaml changes devcloud's Prometheus."""
    config = clouds_yaml()
    config['clouds']['devcloud']['leveller']['prometheus'].update(settings)
    with tempfile.NamedTemporaryFile('w', suffix='.yaml') as f:
        yaml.safe_dump(config, f)
        f.flush()
        yield dict(os.environ, OS_CLIENT_CONFIG_FILE=f.name)


def scenario_servers(spec):
    """{server name: its scenario entry}, counts expanded."""
    return {entry['name'].format(i=i): entry
            for entry in spec['servers']
            for i in range(1, int(entry.get('count', 1)) + 1)}


def assert_between(test, value, reads, tolerance, what):
    """value within tolerance of the span of the direct reads around it."""
    low, high = min(reads), max(reads)
    test.assertTrue(low - tolerance <= value <= high + tolerance,
                    '%s: %r from the leveller, %r from Prometheus' % (
                        what, value, reads))


class TestLiveMixed(base.DevcloudTestCase):
    SCENARIO = 'mixed'

    def test_snapshot_matches_nova_and_placement(self):
        spec = base.scenario('mixed')
        with tempfile.NamedTemporaryFile(suffix='.json') as f:
            summary = base.openstack('leveller', 'snapshot', '--output-file',
                                     f.name)
            with open(f.name) as saved:
                document = json.load(saved)
        snap = snapshot_io.parse(document)
        self.assertEqual(len(spec['hypervisors']), summary['Hypervisors'])
        for h in spec['hypervisors']:
            hyp = snap.hypervisor(self.node[h['name']])
            self.assertEqual(h['name'], hyp.host)
            self.assertEqual(h['az'], hyp.availability_zone)
            self.assertEqual(h['cpu_model'], hyp.cpu_model)
            self.assertEqual(h['cpu_ratio'],
                             hyp.inventories['VCPU'].allocation_ratio)
            self.assertEqual(h.get('ram_ratio', 1.0),
                             hyp.inventories['MEMORY_MB'].allocation_ratio)
            self.assertEqual(h['reserved_mb'],
                             hyp.inventories['MEMORY_MB'].reserved)
            self.assertTrue(hyp.service.usable)
        nova = {s['Name']: s for s in base.openstack(
            'server', 'list', '--all-projects', '--long')}
        self.assertEqual(set(nova), {s.name for s in snap.servers})
        for server in snap.servers:
            # server list --long: Host is the hypervisor (node) name
            self.assertEqual(nova[server.name]['Host'], server.hypervisor)
            self.assertEqual(nova[server.name]['Status'], server.status)
        self.assertTrue(snap.find_server('locked-1').locked)
        groups = {g.name: g for g in snap.server_groups}
        self.assertEqual({'web', 'db', 'cache'}, set(groups))
        self.assertEqual({snap.find_server('web-1').id,
                          snap.find_server('web-2').id},
                         set(groups['web'].members))
        hv01 = self.node['hv01']
        usage = snap.hypervisor(hv01).usage('MEMORY_MB')
        self.assertEqual(sum(s.flavor.ram for s in snap.servers_on(hv01)),
                         usage)

    def test_score_from_prometheus(self):
        base.wait_for(lambda: len(base.by_hypervisor(base.CPU)) == 6, 60,
                      message='CPU rates for the 6 hypervisors')
        result = base.openstack('leveller', 'score', parse=False)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertNotIn('allocations', result.stderr)
        rows = {r['Hypervisor']: r for r in base.openstack(
            'leveller', 'score', '--long')}
        self.assertEqual({'metrics'}, {r['Load Source'] for r in rows.values()})
        measured = base.by_hypervisor(base.CPU)
        # Prometheus' 5-minute rate against the 10-second one of the test:
        # both see hv01 clearly busier than idle hv02 (hypervisor names).
        hv01, hv02 = self.node['hv01'], self.node['hv02']
        self.assertEqual(set(self.node.values()), set(rows))
        self.assertGreater(rows[hv01]['CPU %'], rows[hv02]['CPU %'] + 20)
        self.assertGreater(measured[hv01], measured[hv02])

    def test_score_falls_back_when_prometheus_is_unreachable(self):
        with prometheus_settings(url='http://127.0.0.1:9') as env:
            result = base.openstack('leveller', 'score', parse=False,
                                    env=env)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('cannot reach Prometheus at http://127.0.0.1:9',
                      result.stderr)
        self.assertIn('Load from Placement allocations for 6 of 6',
                      result.stderr)
        self.assertNotIn('admin', result.stderr)

    def test_a_url_that_is_not_prometheus_is_an_error(self):
        keystone = clouds_yaml()['clouds']['devcloud']['auth']['auth_url']
        for url in (keystone.rsplit('/v3', 1)[0],
                    'http://127.0.0.1:%s' % os.environ.get('NOVA_PORT',
                                                           '8774')):
            with self.subTest(url=url), prometheus_settings(url=url) as env:
                result = base.openstack('leveller', 'score', parse=False,
                                        check=False, env=env)
                self.assertEqual(1, result.returncode, result.stderr)
                self.assertRegex(result.stderr, re.escape(url) + (
                    r' does not answer like Prometheus \(HTTP \d+ on '
                    r'/api/v1/query\): check leveller: prometheus: url'))
                self.assertNotIn('Traceback', result.stderr)
                self.assertNotIn('allocations', result.stderr)

    def test_a_host_query_without_series_falls_back_with_one_note(self):
        with prometheus_settings(queries={'cpu': 'no_such_metric'}) as env:
            result = base.openstack('leveller', 'score', '--long', '-f',
                                    'json', parse=False, env=env)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('Note: Prometheus: 6 of 6 hypervisors scored from '
                      'Placement allocations (', result.stderr)
        self.assertEqual(1, result.stderr.count(
            'the cpu query returned no series at all (check leveller: '
            'prometheus: queries: cpu)'), result.stderr)
        self.assertNotIn('no cpu series', result.stderr)
        self.assertIn('Load from Placement allocations for 6 of 6',
                      result.stderr)
        rows = json.loads(result.stdout)
        self.assertEqual(6, len(rows))
        self.assertEqual({'allocations'}, {r['Load Source'] for r in rows})

    def test_metrics_land_on_the_right_hypervisors_and_servers(self):
        # The default flavour: kolla-ansible's labels, the inovex libvirt
        # exporter. Direct reads with the same PromQL, keyed independently:
        # hosts by node_uname_info's nodename, servers by instance_id.
        spec = base.scenario('mixed')
        window = clouds_yaml()['clouds']['devcloud']['leveller'][
            'prometheus']['window']
        hypervisors = {self.node[h['name']] for h in spec['hypervisors']}
        names = {s['ID']: s['Name'] for s in base.openstack(
            'server', 'list', '--all-projects')}
        uuids = set(names)
        # RAM is steady in this scenario, CPU only moves with hv05's
        # sine-wave batch servers and the 30 s rate window's edges.
        tolerance = {'cpu': 0.01, 'ram': 0.001}
        entries = scenario_servers(spec)
        ram_mib = {f['name']: f['ram'] for f in spec['flavors']}
        expected = {uuid: self._expected_usage(entries[name], ram_mib)
                    for uuid, name in names.items()}
        inovex = libvirt.PROFILES['inovex'].queries

        def read_hosts():
            return {m: base.by_hypervisor(measure.HOST_QUERIES[m].format(
                window=window, label='instance, job')) for m in ('cpu', 'ram')}

        def read_servers():
            return {m: base.by_label(q.format(window=window), 'instance_id')
                    for m, q in inovex.items()}

        def settled():
            cpu = read_servers()['cpu']
            return set(cpu) == uuids and all(
                abs(cpu[uuid] - usage['cpu']) <= tolerance['cpu']
                for uuid, usage in expected.items()
                if usage['cpu'] is not None)

        # Servers paused or stopped at the end of the load still show CPU
        # until the rate window has passed.
        base.wait_for(settled, 120, message='server CPU rates as in mixed')
        # Direct reads before and after the leveller's, as it sees them:
        # its value must lie within what Prometheus said around it.
        hosts_before, servers_before = read_hosts(), read_servers()
        with tempfile.NamedTemporaryFile(suffix='.json') as f:
            base.openstack('leveller', 'snapshot', '--output-file', f.name)
            with open(f.name) as saved:
                document = json.load(saved)
        hosts_after, servers_after = read_hosts(), read_servers()

        metrics = {h['name']: h['metrics'] for h in document['hypervisors']}
        self.assertEqual(hypervisors, set(metrics))
        for name in sorted(hypervisors):
            self.assertIsNotNone(metrics[name], name)
            for m in ('cpu', 'ram'):
                assert_between(self, metrics[name][m],
                               (hosts_before[m][name], hosts_after[m][name]),
                               tolerance[m], '%s %s' % (name, m))
        # Distinct values, so a hypervisor swap could not pass unseen.
        ram = sorted(hosts_after['ram'].values())
        self.assertGreater(min(b - a for a, b in zip(ram, ram[1:])),
                           4 * tolerance['ram'])
        node = self.node
        self.assertGreater(metrics[node['hv01']]['cpu'],
                           metrics[node['hv02']]['cpu'])
        self.assertGreater(metrics[node['hv05']]['cpu'],
                           metrics[node['hv06']]['cpu'])

        servers = {s['id']: s for s in document['servers']}
        self.assertEqual(uuids, set(servers))
        for uuid, server in sorted(servers.items()):
            usage = server.get('usage') or {}
            for m in ('cpu', 'ram'):
                what = '%s %s' % (server['name'], m)
                if expected[uuid][m] == 'absent':  # no series: no value
                    self.assertNotIn(m, usage, what)
                    self.assertNotIn(uuid, servers_after[m], what)
                    continue
                assert_between(self, usage.get(m, -1.0),
                               (servers_before[m][uuid],
                                servers_after[m][uuid]), tolerance[m], what)
                # And the scenario's own number for the server of that name.
                if expected[uuid][m] is not None:
                    self.assertAlmostEqual(expected[uuid][m], usage[m],
                                           delta=tolerance[m], msg=what)

    def test_lasting_figures_read_over_the_period(self):
        # prometheus.lasting: every figure also averaged over the period by
        # a real Prometheus subquery; the leveller's must lie within the
        # same subquery read directly before and after it.
        window = clouds_yaml()['clouds']['devcloud']['leveller'][
            'prometheus']['window']
        inovex = libvirt.PROFILES['inovex'].queries
        over = 'avg_over_time((%s)[1m:30s])'  # the window's resolution

        def read():
            hosts = {m: base.by_hypervisor(over % measure.HOST_QUERIES[
                m].format(window=window, label='instance, job'))
                for m in ('cpu', 'ram')}
            servers = {m: base.by_label(over % q.format(window=window),
                                        'instance_id')
                       for m, q in inovex.items()}
            return hosts, servers

        names = {s['ID'] for s in base.openstack(
            'server', 'list', '--all-projects', '--status', 'ACTIVE')}
        base.wait_for(lambda: names <= set(read()[1]['cpu']), 90,
                      message='a minute of every running server\'s CPU')
        before = read()
        with prometheus_settings(lasting='1m') as env, \
                tempfile.NamedTemporaryFile(suffix='.json') as f:
            base.openstack('leveller', 'snapshot', '--output-file', f.name,
                           env=env)
            with open(f.name) as saved:
                document = json.load(saved)
            plan = base.openstack('leveller', 'plan', '--snapshot', f.name,
                                  parse=False, env=env)
        after = read()
        self.assertNotIn('Traceback', plan.stderr)
        self.assertEqual('1m', document['lasting'])
        for hyp in document['hypervisors']:
            lasting = hyp['metrics']['lasting']
            for m in ('cpu', 'ram'):
                assert_between(self, lasting[m], (
                    before[0][m][hyp['name']], after[0][m][hyp['name']]),
                    0.02, '%s lasting %s' % (hyp['name'], m))
        for server in document['servers']:
            if server['id'] not in names:
                continue
            lasting = server['usage']['lasting']
            for m in ('cpu', 'ram'):
                assert_between(self, lasting[m], (
                    before[1][m][server['id']], after[1][m][server['id']]),
                    0.02, '%s lasting %s' % (server['name'], m))

    def test_z_forecast_queries_in_a_real_prometheus(self):
        # z: last of its class (tests run by name), so the two minutes of
        # series it waits for build up while the others run.
        # The forecast's query, as the leveller writes it, on a day of one
        # minute: the mean of each past "day"'s subquery, joined per series
        # by Prometheus itself, server queries' info join included.
        window = clouds_yaml()['clouds']['devcloud']['leveller'][
            'prometheus']['window']
        cpu = libvirt.PROFILES['inovex'].queries['cpu'].format(window=window)
        with mock.patch.object(measure, 'DAY', 60):
            asked = measure.Reader(None, forecast=model.Forecast(
                '30s', 2, 0.5))._ahead(cpu)
        self.assertIn('[30s:30s] offset 90s', asked)
        day = 'avg_over_time((%s)[30s:30s] offset %ds)'
        names = {s['ID'] for s in base.openstack(
            'server', 'list', '--all-projects', '--status', 'ACTIVE')}
        base.wait_for(lambda: names <= set(base.by_label(
            day % (cpu, 90), 'instance_id')), 150,
            message='two minutes of every running server\'s CPU')
        before = [base.by_label(day % (cpu, s), 'instance_id')
                  for s in (30, 90)]
        found = base.by_label(asked, 'instance_id')
        after = [base.by_label(day % (cpu, s), 'instance_id')
                 for s in (30, 90)]
        self.assertLessEqual(names, set(found))
        for uuid in names:
            assert_between(self, found[uuid], (
                (before[0][uuid] + before[1][uuid]) / 2,
                (after[0][uuid] + after[1][uuid]) / 2), 0.02, uuid)

        # Set for a whole day: this devcloud has no day-old series, and
        # says so.
        with prometheus_settings(forecast_days=1) as env, \
                tempfile.NamedTemporaryFile(suffix='.json') as f:
            result = base.openstack('leveller', 'snapshot', '--output-file',
                                    f.name, env=env, parse=False)
            with open(f.name) as saved:
                document = json.load(saved)
            plan = base.openstack('leveller', 'plan', '--snapshot', f.name,
                                  parse=False, env=env)
        self.assertNotIn('forecast', document)
        self.assertIn('no forecast: Prometheus has no series over the 1h '
                      'ahead of this time on the day before',
                      document['source']['note'])
        self.assertNotIn('Traceback', result.stderr + plan.stderr)

    def test_history_of_the_forecast_skill_in_a_real_prometheus(self):
        # The history the forecast's skill is measured on, on a day of a
        # minute and a period ahead of 10 s: each value is what the same
        # expression asked at its grid time answers (index i: the read's
        # time + i steps), and the skill can be measured on it.
        settings = dict(clouds_yaml()['clouds']['devcloud']['leveller'][
            'prometheus'], forecast_days=1, forecast_ahead='10s',
            lasting='20s')
        refs = [hostmatch.HostRef(h.name, h.service_details['host'],
                                  h.host_ip)
                for h in base.connection().compute.hypervisors(details=True)]
        with mock.patch.object(measure, 'DAY', 60):
            reader = measure.reader_from_settings(settings)
            # The oldest point asked: 11 steps back, a rate() window before.
            base.wait_for(lambda: len(base.by_hypervisor(
                'count by (instance, job) (node_cpu_seconds_total{mode='
                '"idle"} offset 150s)')) == len(refs), 150,
                message='150 s of every hypervisor\'s CPU')
            # A full read (a re-check's, guard=False, keeps the first
            # read's skill and asks for no history).
            reading = reader.read(refs, {})
        history = reading.history
        self.assertIsNotNone(history, reading.notes)
        self.assertEqual(10.0, history.step)
        end = int(reading.read_at)
        self.assertEqual(set(self.node.values()), set(history.now['cpu']))

        def at(query, index):
            return base.by_hypervisor_at(query, end + index * 10, self.node)
        shifted = 0
        for figure in ('cpu', 'ram'):
            promql = reader._render(reader.queries[figure])
            for kind, query, indexes in (
                    ('now', promql, range(-6, 0)),
                    ('lasting', reader._over(promql), range(-6, 0)),
                    ('actual', reader._mean(promql, '10s'), range(-11, 1))):
                found = getattr(history, kind)[figure]
                for index in indexes:
                    direct = at(query, index)
                    for name in self.node.values():
                        self.assertAlmostEqual(
                            direct[name], found[name][index], places=9,
                            msg='%s %s %s at %d' % (name, figure, kind,
                                                    index))
                    if kind == 'now' and figure == 'cpu' and index > -6:
                        before = at(query, index - 1)
                        shifted += sum(abs(before[n] - found[n][index]) >
                                       1e-6 for n in self.node.values())
        # A grid shifted by a step would not agree: the test can tell.
        self.assertGreater(shifted, 0)
        # skill.py counts a day as 86,400 s: each step stands for 1,440
        # times as long on this day of a minute.
        found = skill.errors(dataclasses.replace(
            history, step=history.step * 1440), {
            name: 'all' for name in self.node.values()}, 1)
        self.assertEqual(set(self.node.values()), set(found))
        for name, figures in found.items():
            self.assertEqual(6, figures['cpu'].points, name)
            self.assertIsNotNone(figures['cpu'].lasting)

    @staticmethod
    def _expected_usage(entry, ram_mib):
        """{cpu, ram} the exporter shows for a scenario server: None when it
        moves, 'absent' when the exporter has no series for it.

        Its load model: only ACTIVE servers use CPU, PAUSED ones keep their
        memory; defaults cpu 0.1, mem 0.3; "LO~HI@PERIOD" is a sine wave.
        Resident memory is that share of the flavor's RAM plus QEMU's own
        (clamped to 1); a server shut off has a domain but no memory
        statistics.
        """
        load = entry.get('load') or {}
        state = entry.get('state', 'active')
        cpu = load.get('cpu', 0.1) if state in ('active', 'locked') else 0.0
        mem = load.get('mem', 0.3)
        if state == 'shutoff':
            ram = 'absent'
        elif isinstance(mem, str):
            ram = None
        else:
            ram = min(1.0, float(mem) + QEMU_MIB / ram_mib[entry['flavor']])
        return {'cpu': None if isinstance(cpu, str) else float(cpu),
                'ram': ram}

    def test_plan_respects_groups_and_states(self):
        moves = base.openstack('leveller', 'plan', '--max-moves', '50')
        self.assertTrue(moves)
        moved = {m['Server'] for m in moves}
        # Never shutoff, locked or affinity-bound servers, never across AZs.
        self.assertFalse(moved & {'shutoff-1', 'locked-1', 'cache-1',
                                  'cache-2'})
        azs = {'hv01': 1, 'hv02': 1, 'hv03': 1, 'hv04': 2, 'hv05': 2,
               'hv06': 2}
        for move in moves:  # Source and Destination: hypervisor names
            source, dest = self.host[move['Source']], \
                self.host[move['Destination']]
            self.assertEqual(azs[source], azs[dest])
            self.assertNotIn('hv04', (source, dest))
            if move['Server'] == 'web-1':
                self.assertNotEqual('hv02', dest)

    def test_plan_report_of_the_live_cloud(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'plan.html')
            moves = base.openstack('leveller', 'plan', '--max-moves', '50',
                                   '--report', path)
            with open(path, encoding='utf-8') as f:
                page = test_report.Page(f.read())
        self.assertTrue(moves)
        # The moves of the -f json output, with their reasons, grouped by
        # domain in the report.
        self.assertEqual(sorted(m['Reason'] for m in moves),
                         sorted(reason for _, reason in page.reasons))
        bars = {a['data-hypervisor'] for a in page.find('rect', 'bar')
                if 'after' in a['class'].split()}
        # Every hypervisor by its Nova name, hv04 too, alone in its domain.
        self.assertEqual(set(self.node.values()), bars)
        self.assertEqual(
            ['az1/Cascadelake-Server', 'az2/Icelake-Server',
             'az2/Skylake-Server'],
            sorted(a['data-domain'] for a in page.find('section', 'domain')))


class TestNotAdmin(base.DevcloudTestCase):
    """devcloud-member: user demo with only the member role."""

    def test_score_says_an_admin_role_is_needed(self):
        # The later --os-cloud wins over base.openstack's own.
        result = base.openstack('--os-cloud', 'devcloud-member', 'leveller',
                                'score', parse=False, check=False)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn('the leveller needs an admin role', result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertEqual('', result.stdout)
