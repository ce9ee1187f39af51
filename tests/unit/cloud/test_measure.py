"""Host matching, libvirt exporter profiles and coverage, against the
series the real exporters and deployments emit (labels as in their
sources: node_exporter, inovex/Tinkoff/kumina/vexxhost libvirt exporters,
kolla-ansible and openstack-helm scrape configurations).

The client is a stand-in that answers each query from canned samples; the
PromQL itself is run by a real Prometheus in the functional tests.
"""

import re
import time
import unittest
from unittest import mock

from osc_leveller.cloud import collect
from osc_leveller.cloud import coverage
from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import libvirt
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from osc_leveller.core.load import guard
from osc_leveller.core.load import skill
from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.settings import config

REFS = [hostmatch.HostRef('hv01.example.net', 'hv01', '10.0.0.11'),
        hostmatch.HostRef('hv02.example.net', 'hv02', '10.0.0.12'),
        hostmatch.HostRef('hv03.example.net', 'hv03', '10.0.0.13')]
NAMES = [r.name for r in REFS]


def uname(instance, job='node', nodename=None, **labels):
    return dict(labels, instance=instance, job=job,
                nodename=nodename or 'localhost', sysname='Linux',
                machine='x86_64', release='6.1.0', version='#1 SMP',
                domainname='(none)')


class FakeClient:
    """Answers a query from the first key it contains; records requests."""

    def __init__(self, answers, names=(), fail=None):
        self.answers = answers  # [(substring, [(labels, value)])]
        self.names = list(names)
        self.fail = fail
        self.asked = []
        self.ranges = []  # (promql, start, end, step) of range queries
        self.times = []  # the time each instant query was asked at

    def query(self, promql, at=None):
        self.times.append(at)
        self.asked.append(promql)
        if self.fail:
            raise self.fail
        for key, samples in self.answers:
            if key in promql:
                return [(dict(labels), value) for labels, value in samples]
        return []

    def query_range(self, promql, start, end, step, timeout=None):
        """No history: every range query answers no series."""
        self.ranges.append((promql, start, end, step))
        return []

    def label_values(self, label, pattern):
        self.asked.append('label_values %s %s' % (label, pattern))
        return self.names


def node_answers(targets, cpu=None, ram=None, pressure=True):
    """node_exporter answers for targets: {instance labels: (cpu, ram)}."""
    keys = [(t['instance'], t['job']) for t in targets]

    def by_target(values):
        return [({'instance': i, 'job': j}, v)
                for (i, j), v in zip(keys, values)]
    cpu = cpu or [0.5] * len(targets)
    ram = ram or [0.25] * len(targets)
    answers = [('node_uname_info', [(t, 1) for t in targets]),
               ('node_cpu_seconds_total', by_target(cpu)),
               ('node_memory_MemAvailable_bytes', by_target(ram))]
    if pressure:
        answers += [('node_pressure_cpu', by_target([0.01] * len(keys))),
                    ('node_pressure_memory', by_target([0.0] * len(keys)))]
    return answers


def read(client, servers=None, **kwargs):
    return measure.Reader(client, window='1m', **kwargs).read(
        REFS, servers or {})


KOLLA_TARGETS = [uname('10.0.0.%d:9100' % (11 + i)) for i in range(3)]


class TestHostMatching(unittest.TestCase):
    def test_kolla_default_instance_is_the_api_address(self):
        targets = [uname('10.0.0.%d:9100' % (11 + i)) for i in range(3)]
        reading = read(FakeClient(node_answers(targets, cpu=[.9, .5, .1])))
        self.assertEqual({'hv01.example.net': 'host_ip 10.0.0.11',
                          'hv02.example.net': 'host_ip 10.0.0.12',
                          'hv03.example.net': 'host_ip 10.0.0.13'},
                         reading.matched)
        self.assertEqual([.9, .5, .1],
                         [reading.hosts[n]['cpu'] for n in NAMES])
        self.assertEqual({}, reading.problems)
        self.assertEqual('node_uname_info', reading.identity)

    def test_kolla_instance_label_set_to_the_host_name(self):
        # prometheus_instance_label: "{{ ansible_facts.hostname }}" (short)
        # or nodename (full); no port in either.
        targets = [uname('hv01'), uname('hv02.example.net'),
                   uname('HV03')]
        reading = read(FakeClient(node_answers(targets)))
        self.assertEqual({'hv01.example.net': 'instance hv01',
                          'hv02.example.net': 'instance hv02.example.net',
                          'hv03.example.net': 'instance HV03'},
                         reading.matched)

    def test_openstack_helm_hostname_label(self):
        # Pod IPs that are no hypervisor's host_ip: only the label tells.
        targets = [uname('192.0.2.%d:9100' % i, job='node-exporter',
                         hostname=name) for i, name in enumerate(NAMES)]
        reading = read(FakeClient(node_answers(targets)))
        self.assertEqual({n: 'hostname=%s' % n for n in NAMES},
                         reading.matched)

    def test_nodename_when_nothing_else_names_the_host(self):
        targets = [uname('192.0.2.%d:9100' % i, nodename=n.split('.')[0])
                   for i, n in enumerate(NAMES)]
        reading = read(FakeClient(node_answers(targets)))
        self.assertEqual({n: 'nodename %s' % n.split('.')[0] for n in NAMES},
                         reading.matched)
        self.assertEqual(3, len(reading.hosts))

    def test_the_order_can_be_changed(self):
        # hv01's instance names hv02 (a stale DNS name, say); nodename first
        # believes the node itself.
        targets = [uname('hv02:9100', nodename='hv01')]
        self.assertEqual({'hv02.example.net': 'instance hv02'}, read(
            FakeClient(node_answers(targets))).matched)
        self.assertEqual({'hv01.example.net': 'nodename hv01'}, read(
            FakeClient(node_answers(targets)),
            host_match=('nodename', 'instance')).matched)

    def test_an_ip_shared_by_two_hypervisors_is_never_a_guess(self):
        refs = [hostmatch.HostRef('hv01', 'hv01', '127.0.0.1'),
                hostmatch.HostRef('hv02', 'hv02', '127.0.0.1')]
        client = FakeClient(node_answers([uname('127.0.0.1:9100')]))
        reading = measure.Reader(client).read(refs, {})
        self.assertEqual({}, reading.matched)
        self.assertEqual({}, reading.hosts)
        self.assertIn('the node_exporter target instance=127.0.0.1:9100 '
                      'job=node cannot be told apart: host_ip 127.0.0.1 '
                      'names hv01 and hv02', reading.notes)
        self.assertIn("no node_exporter target matches it", reading.problems[
            'hv01'])
        # A later method that names one of them settles it.
        client = FakeClient(node_answers([
            uname('127.0.0.1:9100', nodename='hv02')]))
        self.assertEqual({'hv02': 'nodename hv02'},
                         measure.Reader(client).read(refs, {}).matched)

    def test_two_targets_claiming_one_hypervisor_are_not_used(self):
        targets = [uname('10.0.0.11:9100'), uname('10.0.0.11:9100',
                                                  job='node-federated'),
                   uname('10.0.0.12:9100')]
        reading = read(FakeClient(node_answers(targets)))
        self.assertEqual(['hv02.example.net'], list(reading.matched))
        self.assertIn('hv01.example.net matches 2 node_exporter targets '
                      '(instance=10.0.0.11:9100 job=node, instance=10.0.0.11:'
                      '9100 job=node-federated): its series are not used',
                      reading.notes)
        self.assertNotIn('hv01.example.net', reading.hosts)

    def test_short_names_that_repeat_match_nothing(self):
        refs = [hostmatch.HostRef('cmp1.a.example', 'cmp1'),
                hostmatch.HostRef('cmp1.b.example', 'cmp1')]
        matcher = hostmatch.Matcher(refs)
        self.assertEqual((None, 'instance cmp1 names cmp1.a.example and '
                                'cmp1.b.example'),
                         matcher.place({'instance': 'cmp1:9100'}))
        self.assertEqual(('cmp1.b.example', 'instance cmp1.b.example'),
                         matcher.place({'instance': 'cmp1.b.example:9100'}))

    def test_ipv6_instances(self):
        refs = [hostmatch.HostRef('hv01', 'hv01', '2001:db8::11')]
        matcher = hostmatch.Matcher(refs)
        self.assertEqual(('hv01', 'host_ip 2001:db8::11'), matcher.place(
            {'instance': '[2001:db8:0::11]:9100'}))

    def test_a_name_that_begins_another_names_only_itself(self):
        """hv1 and hv10, by each method (10.0.1.1 begins 10.0.1.10 too):
        every hypervisor gets its own target's figures. Once hv1 is gone
        from Nova, its target (still scraped) names no hypervisor."""
        refs = [hostmatch.HostRef('%s.example.net' % name, name,
                                  '10.0.1.%s' % name[2:])
                for name in ('hv1', 'hv10', 'hv11')]
        names = [ref.name for ref in refs]
        # (target of a hypervisor, how the reading says it matched)
        ways = {
            'instance': (lambda ref: uname('%s:9100' % ref.host),
                         'instance %s'),
            'host_ip': (lambda ref: uname('%s:9100' % ref.ip),
                        'host_ip 10.0.1.%s'),
            'label': (lambda ref: uname('192.0.2.%s:9100' % ref.host[2:],
                                        hostname=ref.host), 'hostname=%s'),
            'nodename': (lambda ref: uname('192.0.2.%s:9100' % ref.host[2:],
                                           nodename=ref.host),
                         'nodename %s')}
        for method, (target, how) in ways.items():
            with self.subTest(method=method):
                client = FakeClient(node_answers(
                    [target(ref) for ref in refs], cpu=[.1, .5, .9]))
                reading = measure.Reader(client).read(refs, {})
                self.assertEqual([.1, .5, .9],
                                 [reading.hosts[n]['cpu'] for n in names])
                self.assertEqual({ref.name: how % (
                    ref.host[2:] if method == 'host_ip' else ref.host)
                    for ref in refs}, reading.matched)
                self.assertEqual([], reading.notes)
                client = FakeClient(node_answers(
                    [target(ref) for ref in refs], cpu=[.1, .5, .9]))
                reading = measure.Reader(client).read(refs[1:], {})
                self.assertEqual({names[1]: .5, names[2]: .9}, {
                    n: figures['cpu']
                    for n, figures in reading.hosts.items()})
                self.assertEqual([], reading.notes)

    def test_hosts_without_series_and_strangers(self):
        # A controller's node_exporter names no hypervisor: not a note.
        targets = [uname('10.0.0.11:9100'), uname('10.0.0.99:9100',
                                                  nodename='ctl01')]
        reading = read(FakeClient(node_answers(targets)))
        self.assertEqual(['hv01.example.net'], list(reading.hosts))
        self.assertEqual([], reading.notes)
        self.assertEqual(
            'no node_exporter target matches it (tried label hostname, '
            'instance as a host name, instance as its host_ip, '
            'node_uname_info nodename)',
            reading.problems['hv02.example.net'])

    def test_no_node_exporter_at_all(self):
        reading = read(FakeClient([]))
        self.assertIsNone(reading.identity)
        self.assertEqual(
            {n: 'Prometheus has no node_exporter series (node_uname_info nor '
                'node_memory_MemTotal_bytes)' for n in NAMES},
            reading.problems)

    def test_without_node_uname_info_meminfo_places_the_targets(self):
        answers = node_answers([uname('10.0.0.11:9100')])[1:]
        answers.insert(0, ('node_memory_MemTotal_bytes', [
            ({'instance': '10.0.0.11:9100', 'job': 'node'}, 2 ** 36)]))
        reading = read(FakeClient(answers))
        self.assertEqual('node_memory_MemTotal_bytes', reading.identity)
        self.assertEqual({'hv01.example.net': 'host_ip 10.0.0.11'},
                         reading.matched)

    def test_nan_and_out_of_range_values_are_reasons(self):
        targets = [uname('10.0.0.%d:9100' % (11 + i)) for i in range(3)]
        reading = read(FakeClient(node_answers(
            targets, cpu=[float('nan'), 1.7, 1.0004])))
        self.assertEqual('cpu is nan, outside 0..1',
                         reading.problems['hv01.example.net'])
        self.assertEqual('cpu is 1.7, outside 0..1',
                         reading.problems['hv02.example.net'])
        # rate() overshoots a saturated counter a little: that is 1.
        self.assertEqual(1.0, reading.hosts['hv03.example.net']['cpu'])

    def test_without_psi_series_it_says_so(self):
        targets = [uname('10.0.0.11:9100')]
        reading = read(FakeClient(node_answers(targets, pressure=False)))
        self.assertEqual({'cpu': 0.5, 'ram': 0.25},
                         reading.hosts['hv01.example.net'])
        self.assertIn('no pressure (PSI) series for any hypervisor',
                      reading.notes[0])
        # Not asked for, not missed.
        reading = read(FakeClient(node_answers(targets, pressure=False)),
                       queries={'cpu': measure.HOST_QUERIES['cpu'],
                                'ram': measure.HOST_QUERIES['ram']})
        self.assertEqual([], reading.notes)

    def test_a_host_query_that_matches_nothing_is_one_reason(self):
        client = FakeClient(node_answers(KOLLA_TARGETS)[:1] + [
            ('node_memory_MemAvailable_bytes', [])])
        reading = read(client, queries={
            'cpu': 'no_such_metric', 'ram': measure.HOST_QUERIES['ram']})
        self.assertEqual({'the cpu query returned no series at all (check '
                          'leveller: prometheus: queries: cpu)'},
                         set(reading.problems.values()))
        self.assertEqual(set(NAMES), set(reading.problems))

    def test_host_queries_group_by_target(self):
        client = FakeClient(node_answers([uname('10.0.0.11:9100')]))
        read(client)
        self.assertIn('1 - avg by (instance, job, hostname) '
                      '(rate(node_cpu_seconds_total{mode="idle"}[1m]))',
                      client.asked)

    def test_custom_queries_by_a_label_of_ones_own(self):
        # No node_exporter at all: series aggregated by the configured
        # label are placed by it.
        client = FakeClient([
            ('my_cpu', [({'hypervisor': 'hv01'}, 0.4)]),
            ('my_ram', [({'hypervisor': 'hv01'}, 0.6)])])
        reading = read(client, queries={'cpu': 'my_cpu', 'ram': 'my_ram'},
                       host_label='hypervisor', server_profile='none')
        self.assertEqual({'hv01.example.net': {'cpu': 0.4, 'ram': 0.6}},
                         reading.hosts)
        self.assertEqual('hypervisor=hv01',
                         reading.matched['hv01.example.net'])

    def test_unreachable(self):
        reading = read(FakeClient([], fail=prometheus.Unreachable(
            'Prometheus at http://p answered HTTP 503')))
        self.assertEqual('Prometheus at http://p answered HTTP 503',
                         reading.unreachable)
        self.assertEqual({}, reading.hosts)


KOLLA = [uname('10.0.0.%d:9100' % (11 + i)) for i in range(3)]


def libvirt_sample(instance, job, domain, **labels):
    return dict(labels, instance=instance, job=job, domain=domain)


class TestServers(unittest.TestCase):
    def test_inovex_joins_the_server_id_from_openstack_info(self):
        lv = '10.0.0.11:9177'
        client = FakeClient(node_answers(KOLLA) + [
            ('libvirt_domain_info_cpu_time_seconds_total', [
                (libvirt_sample(lv, 'libvirt_exporter', 'instance-0000000a',
                                instance_id='s1'), 0.75)]),
            ('libvirt_domain_memory_stats_rss_bytes', [
                (libvirt_sample(lv, 'libvirt_exporter', 'instance-0000000a',
                                instance_id='s1'), 0.4)]),
        ], names=['libvirt_domain_openstack_info',
                  'libvirt_domain_info_cpu_time_seconds_total'])
        reading = read(client, {'s1': 'hv01.example.net'})
        self.assertEqual(['inovex'], [p.name for p in reading.profiles])
        self.assertEqual({'s1': {'cpu': 0.75, 'ram': 0.4}}, reading.servers)
        cpu = [q for q in client.asked if 'cpu_time' in q][0]
        self.assertIn('group_left (instance_id) '
                      'libvirt_domain_openstack_info', cpu)
        self.assertIn('on (instance, job, domain)', cpu)
        # One request to find the exporter: kumina's check is not needed.
        self.assertEqual(1, sum(q.startswith('label_values')
                                for q in client.asked))
        self.assertNotIn(libvirt.KUMINA_CHECK, client.asked)

    def test_steal_sums_the_vcpus_delay_per_vcpu(self):
        """inovex and Tinkoff export each vCPU's delay: its rate summed
        over the vCPUs, per vCPU, joined to the server id as the CPU is."""
        for profile, info, label in (
                ('inovex', 'libvirt_domain_openstack_info', 'instance_id'),
                ('tinkoff', 'libvirt_domain_info_meta', 'uuid')):
            client = FakeClient(node_answers(KOLLA) + [
                ('libvirt_domain_vcpu_delay_seconds_total', [
                    (libvirt_sample('10.0.0.11:9177', 'libvirt_exporter',
                                    'instance-1', **{label: 's1'}), 0.3)]),
                ('libvirt_domain_info_cpu_time_seconds_total', [
                    (libvirt_sample('10.0.0.11:9177', 'libvirt_exporter',
                                    'instance-1', **{label: 's1'}), 0.7)])],
                names=[info])
            reading = read(client, {'s1': 'hv01.example.net'})
            self.assertEqual([profile], [p.name for p in reading.profiles])
            self.assertEqual({'s1': {'cpu': 0.7, 'cpu_steal': 0.3}},
                             reading.servers)
            steal = [q for q in client.asked if 'delay' in q][0]
            self.assertIn('sum by (instance, job, domain) (rate('
                          'libvirt_domain_vcpu_delay_seconds_total[1m]))',
                          steal)
            self.assertIn('/ on (instance, job, domain) '
                          'libvirt_domain_info_virtual_cpus', steal)
            self.assertIn('group_left (%s) %s' % (label, info), steal)
            found = coverage.build(document(['s1']), reading)
            self.assertIsNone(found.steal_missing())

    def test_detection(self):
        def found(names, kumina=False):
            return [p.name for p in libvirt.detect(set(names),
                                                   lambda: kumina)]
        cpu = 'libvirt_domain_info_cpu_time_seconds_total'
        self.assertEqual(['tinkoff'], found([cpu, 'libvirt_domain_info_meta']))
        self.assertEqual(['kumina'], found([cpu], kumina=True))
        self.assertEqual([], found([cpu], kumina=False))
        self.assertEqual(['vexxhost'], found(['libvirtd_domain_cpu_time']))
        # A rolling upgrade from Tinkoff to inovex: both are read.
        self.assertEqual(['inovex', 'tinkoff'], found([
            cpu, 'libvirt_domain_info_meta', 'libvirt_domain_openstack_info']))

    def test_kumina_has_no_memory_and_the_coverage_says_so(self):
        client = FakeClient(node_answers(KOLLA) + [
            ('count(libvirt_domain_info_cpu_time_seconds_total{uuid!=""})',
             [({}, 2)]),
            ('libvirt_domain_info_cpu_time_seconds_total', [
                (libvirt_sample('10.0.0.11:9177', 'libvirt', 'instance-1',
                                uuid='s1', name='vm1'), 0.5)])],
            names=['libvirt_domain_info_cpu_time_seconds_total'])
        reading = read(client, {'s1': 'hv01.example.net'})
        self.assertEqual(['kumina'], [p.name for p in reading.profiles])
        self.assertEqual({'s1': {'cpu': 0.5}}, reading.servers)
        found = coverage.build(document(['s1']), reading)
        self.assertEqual('kumina libvirt_exporter: the exporter reports no '
                         'resident or in-guest memory', found.ram_missing())
        self.assertEqual('kumina libvirt_exporter: the exporter reports no '
                         'vCPU delay (steal time)', found.steal_missing())
        self.assertFalse([q for q in client.asked if 'delay' in q])

    def test_a_live_migration_shows_a_server_on_two_hosts(self):
        # Domain names repeat: the join is on (instance, job, domain), and of
        # the two series the one on Nova's hypervisor counts.
        client = FakeClient(node_answers(KOLLA) + [
            ('libvirt_domain_info_cpu_time_seconds_total', [
                (libvirt_sample('10.0.0.11:9177', 'libvirt_exporter',
                                'instance-1', instance_id='s1'), 0.9),
                (libvirt_sample('10.0.0.12:9177', 'libvirt_exporter',
                                'instance-1', instance_id='s1'), 0.2),
                (libvirt_sample('10.0.0.13:9177', 'libvirt_exporter',
                                'instance-2', instance_id='s2'), 0.3),
                (libvirt_sample('10.0.0.11:9177', 'libvirt_exporter',
                                'instance-2', instance_id='s2'), 0.4)])],
            names=['libvirt_domain_openstack_info'])
        reading = read(client, {'s1': 'hv02.example.net',
                                's2': 'hv02.example.net'})
        self.assertEqual({'s1': {'cpu': 0.2}}, reading.servers)
        self.assertIn('1 servers have series on several hypervisors, none or '
                      'more than one of them where Nova has the server: not '
                      'used (s2)', reading.notes)
        self.assertIn('1 servers have series on two hypervisors (a live '
                      'migration): the series on Nova\'s hypervisor is used',
                      reading.info)

    def test_a_live_migration_between_hv1_and_hv10(self):
        """Debian's layout: the exporters on a monitoring network
        (127.0.1.1 and 127.0.1.10, one beginning the other), node targets
        placed by nodename, libvirt series by the node target at their
        address. s1 has left hv10 for hv1, s2 is on hv1 only."""
        refs = [hostmatch.HostRef(name, name, ip) for name, ip in (
            ('hv1', '10.0.0.1'), ('hv10', '10.0.0.10'))]
        targets = [uname('127.0.1.1:9100', nodename='hv1'),
                   uname('127.0.1.10:9100', nodename='hv10')]
        client = FakeClient(node_answers(targets) + [
            ('libvirt_domain_info_cpu_time_seconds_total', [
                (libvirt_sample('127.0.1.10:9177', 'libvirt', 'instance-1',
                                instance_id='s1'), 0.2),
                (libvirt_sample('127.0.1.1:9177', 'libvirt', 'instance-1',
                                instance_id='s1'), 0.9),
                (libvirt_sample('127.0.1.1:9177', 'libvirt', 'instance-2',
                                instance_id='s2'), 0.4)])],
            names=['libvirt_domain_openstack_info'])
        reading = measure.Reader(client).read(refs, {'s1': 'hv1',
                                                     's2': 'hv1'})
        self.assertEqual({'hv1': 'nodename hv1', 'hv10': 'nodename hv10'},
                         reading.matched)
        self.assertEqual({'s1': {'cpu': 0.9}, 's2': {'cpu': 0.4}},
                         reading.servers)
        self.assertEqual([], reading.notes)

    def test_series_of_deleted_servers_are_ignored(self):
        client = FakeClient(node_answers(KOLLA) + [
            ('libvirtd_domain_cpu_time', [
                ({'instance': '10.0.0.11:9474', 'uuid': 'gone'}, 0.5),
                ({'instance': '10.0.0.11:9474', 'uuid': 's1'}, float('nan'))])],
            names=['libvirtd_domain_cpu_time'])
        reading = read(client, {'s1': 'hv01.example.net'})
        self.assertEqual({}, reading.servers)  # NaN is no load
        self.assertEqual({'gone'}, reading.strangers)
        self.assertIn('series of 1 servers Nova does not list (deleted, or '
                      'of another region or cell) are ignored', reading.info)

    def test_a_forced_profile_and_custom_queries_skip_detection(self):
        client = FakeClient(node_answers(KOLLA))
        read(client, server_profile='tinkoff')
        self.assertFalse([q for q in client.asked if 'label_values' in q])
        self.assertTrue([q for q in client.asked
                         if 'libvirt_domain_info_meta' in q])
        client = FakeClient(node_answers(KOLLA) + [
            ('my_server_cpu', [({'uuid': 's1'}, 0.3)])])
        reading = read(client, {'s1': 'hv01.example.net'},
                       server_queries={'cpu': 'my_server_cpu', 'ram': ''})
        self.assertEqual({'s1': {'cpu': 0.3}}, reading.servers)
        self.assertFalse([q for q in client.asked if 'label_values' in q])
        client = FakeClient(node_answers(KOLLA), names=['x'])
        self.assertEqual([], read(client, server_profile='none').profiles)


def document(server_ids, hypervisor='hv01.example.net'):
    return {'source': {'kind': 'cloud'},
            'hypervisors': [{'name': n, 'host': n.split('.')[0],
                             'metrics': None} for n in NAMES],
            'servers': [{'id': s, 'hypervisor': hypervisor,
                         'status': 'ACTIVE'} for s in server_ids]}


class TestCoverage(unittest.TestCase):
    def fill(self, client, doc):
        # As the collector reads: ahead of Nova's servers, in a thread.
        collector = collect.Collector(None, metrics=measure.Reader(
            client, window='1m'))
        refs = collect.host_refs(doc, {r.name: r.ip for r in REFS})
        reading = collect.Measuring(collector, refs).result(refs, {
            s['id']: s['hypervisor'] for s in doc['servers']})
        return collect.add_metrics(doc, reading)

    def test_everything_matched_says_nothing(self):
        client = FakeClient(node_answers(KOLLA) + [
            ('libvirt_domain_info_cpu_time_seconds_total', [
                (libvirt_sample('10.0.0.11:9177', 'libvirt_exporter',
                                'instance-1', instance_id='s1'), 0.5)]),
            ('libvirt_domain_memory_stats_rss_bytes', [
                (libvirt_sample('10.0.0.11:9177', 'libvirt_exporter',
                                'instance-1', instance_id='s1'), 0.5)])],
            names=['libvirt_domain_openstack_info'])
        doc = document(['s1'])
        found = self.fill(client, doc)
        self.assertIsNone(found.summary())
        self.assertNotIn('note', doc['source'])
        self.assertEqual([3, 1, 1, 1], [found.hosts_measured, found.servers,
                                        found.measured('cpu'),
                                        found.measured('ram')])
        row = found.rows[0]
        self.assertEqual(('host_ip 10.0.0.11', 'metrics', True),
                         (row.matched_by, row.load_from, row.pressure))

    def test_what_falls_back_is_one_line(self):
        client = FakeClient(node_answers(KOLLA[:2]) + [
            ('libvirt_domain_info_cpu_time_seconds_total', [
                (libvirt_sample('10.0.0.11:9177', 'libvirt_exporter',
                                'instance-1', instance_id='s1'), 0.5)])],
            names=['libvirt_domain_openstack_info'])
        doc = document(['s1', 's2', 's3'])
        doc['servers'][2]['status'] = 'SHUTOFF'  # not running: not missed
        found = self.fill(client, doc)
        self.assertEqual(
            "Prometheus: 1 of 3 hypervisors scored from Placement allocations "
            "(hv03.example.net: no node_exporter target matches it (tried "
            "label hostname, instance as a host name, instance as its "
            "host_ip, node_uname_info nodename)); CPU of 1 of 2 running "
            "servers from a share "
            "of their hypervisor's; RAM of 2 of 2 running servers from a "
            "share of their hypervisor's: 'openstack leveller metrics check' "
            "says why", found.summary())
        self.assertIn(found.summary(), doc['source']['note'])
        self.assertEqual({'cpu': 0.5}, doc['servers'][0]['usage'])
        self.assertIsNone(doc['hypervisors'][2]['metrics'])

    def test_unreachable_is_said_once(self):
        client = FakeClient([], fail=prometheus.Unreachable(
            'cannot reach Prometheus at http://p: ConnectTimeout'))
        doc = document(['s1'])
        found = self.fill(client, doc)
        self.assertIsNone(found.summary())
        self.assertEqual('cannot reach Prometheus at http://p: ConnectTimeout'
                         ': load from Placement allocations',
                         doc['source']['note'])
        self.assertEqual({'Prometheus not reachable'},
                         {r.why for r in found.rows})

    def test_a_hard_error_names_the_cause(self):
        client = FakeClient([], fail=prometheus.PrometheusError(
            "Prometheus at http://p rejected the query 'x': parse error"))
        with self.assertRaises(collect.CollectError) as ctx:
            self.fill(client, document([]))
        self.assertIn('rejected the query', str(ctx.exception))


class LastingClient(FakeClient):
    """Answers avg_over_time((Q)[3h:]) from lasting, any other query as
    FakeClient does."""

    def __init__(self, answers, lasting, names=()):
        super().__init__(answers, names)
        self.lasting = FakeClient(lasting)

    def query(self, promql, at=None):
        if promql.startswith('avg_over_time(('):
            self.asked.append(promql)
            inner, _, period = promql[len('avg_over_time(('):].rpartition(
                ')[')
            if period != '3h:1m])':
                raise AssertionError('not over 3h: %s' % promql)
            return self.lasting.query(inner)
        return super().query(promql, at)


class TestLasting(unittest.TestCase):
    """prometheus.lasting: every figure also averaged over the period."""

    def client(self):
        lv = '10.0.0.11:9177'
        servers = [('libvirt_domain_info_cpu_time_seconds_total', [
            (libvirt_sample(lv, 'libvirt_exporter', 'instance-1',
                            instance_id='s1'), 0.75),
            (libvirt_sample(lv, 'libvirt_exporter', 'instance-2',
                            instance_id='s2'), 0.5)])]
        lasting_servers = [('libvirt_domain_info_cpu_time_seconds_total', [
            (libvirt_sample(lv, 'libvirt_exporter', 'instance-1',
                            instance_id='s1'), 0.25),
            # s2 moved in: its series on the host it left counts not.
            (libvirt_sample(lv, 'libvirt_exporter', 'instance-2',
                            instance_id='s2'), 0.5),
            (libvirt_sample('10.0.0.12:9177', 'libvirt_exporter',
                            'instance-9', instance_id='s2'), 0.9)])]
        return LastingClient(
            node_answers(KOLLA, cpu=[.9, .5, .1]) + servers,
            node_answers(KOLLA, cpu=[.6, float('nan'), 1.5]) +
            lasting_servers, names=['libvirt_domain_openstack_info'])

    def test_hosts_and_servers_read_over_the_period(self):
        client = self.client()
        reading = read(client, {'s1': 'hv01.example.net',
                                's2': 'hv01.example.net'}, lasting='3h')
        self.assertEqual('3h', reading.lasting)
        # hv02's NaN and hv03's 1.5 are no figures.
        self.assertEqual({'hv01.example.net': {
            'cpu': .6, 'ram': .25, 'cpu_pressure': .01, 'ram_pressure': 0.0},
            'hv02.example.net': {'ram': .25, 'cpu_pressure': .01,
                                 'ram_pressure': 0.0},
            'hv03.example.net': {'ram': .25, 'cpu_pressure': .01,
                                 'ram_pressure': 0.0}},
            reading.lasting_hosts)
        self.assertEqual({'s1': {'cpu': .25}, 's2': {'cpu': .5}},
                         reading.lasting_servers)
        self.assertEqual({'s1': {'cpu': .75}, 's2': {'cpu': .5}},
                         reading.servers)
        # Each query (4 of hosts, 3 of servers) also over the period.
        lasting = [q for q in client.asked if q.startswith('avg_over_time')]
        self.assertEqual(7, len(lasting))

    def test_into_the_snapshot(self):
        reading = read(self.client(), {'s1': 'hv01.example.net',
                                       's2': 'hv01.example.net'},
                       lasting='3h')
        document = {'source': {}, 'hypervisors': [
            {'name': n} for n in NAMES], 'servers': [
            {'id': 's1'}, {'id': 's2'}, {'id': 's3'}]}
        collect.add_metrics(document, reading)
        self.assertEqual('3h', document['lasting'])
        self.assertEqual({'cpu': .9, 'ram': .25, 'cpu_pressure': .01,
                          'ram_pressure': 0.0, 'lasting': {
                              'cpu': .6, 'ram': .25, 'cpu_pressure': .01,
                              'ram_pressure': 0.0}},
                         document['hypervisors'][0]['metrics'])
        self.assertEqual({'cpu': .75, 'lasting': {'cpu': .25}},
                         document['servers'][0]['usage'])
        self.assertNotIn('usage', document['servers'][2])

    def test_not_asked_without_the_setting(self):
        client = self.client()
        reading = read(client, {'s1': 'hv01.example.net'})
        self.assertFalse([q for q in client.asked if 'avg_over_time' in q])
        self.assertEqual(('', {}, {}), (reading.lasting,
                                        reading.lasting_hosts,
                                        reading.lasting_servers))
        document = {'source': {}, 'hypervisors': [{'name': n} for n in NAMES],
                    'servers': [{'id': 's1'}]}
        collect.add_metrics(document, reading)
        self.assertNotIn('lasting', document)


class ForecastClient(FakeClient):
    """Answers each term avg_over_time((Q)[1h:] offset Ns) of a forecast
    from days[N], any other query as FakeClient does; a sum of terms over
    the days is added up here, as Prometheus would, per label set."""

    def __init__(self, answers, days, names=()):
        super().__init__(answers, names)
        self.days = {offset: FakeClient(a) for offset, a in days.items()}

    def query(self, promql, at=None):
        if 'offset' not in promql:
            return super().query(promql, at)
        self.asked.append(promql)
        terms = re.findall(
            r'avg_over_time\(\((.*?)\)\[1h:1m\] offset (\d+)s\)', promql)
        divisor = re.search(r'\) / (\d+)$', promql)
        totals = None
        for inner, offset in terms:
            day = self.days.get(int(offset))
            samples = {tuple(sorted(labels.items())): value for labels, value
                       in (day.query(inner) if day else [])}
            totals = samples if totals is None else {
                k: totals[k] + v for k, v in samples.items() if k in totals}
        n = int(divisor.group(1)) if divisor else 1
        return [(dict(k), v / n) for k, v in (totals or {}).items()]


class TestForecast(unittest.TestCase):
    """prometheus.forecast_days: every figure also over the hour ahead of
    this time of day, on each past day."""

    FORECAST = model.Forecast('1h', 2, 0.5)

    def client(self, days=(23 * 3600, 47 * 3600)):
        lv = '10.0.0.11:9177'

        def servers(cpu):
            return [('libvirt_domain_info_cpu_time_seconds_total', [
                (libvirt_sample(lv, 'libvirt_exporter', 'instance-1',
                                instance_id='s1'), cpu)])]
        answers = {days[0]: node_answers(KOLLA, cpu=[.8, .5, .1]) +
                   servers(0.9),
                   days[1]: node_answers(KOLLA, cpu=[.6, .5, .1]) +
                   servers(0.7)}
        return ForecastClient(node_answers(KOLLA) + servers(0.2), answers,
                              names=['libvirt_domain_openstack_info'])

    def test_the_hour_ahead_on_each_past_day(self):
        client = self.client()
        reading = read(client, {'s1': 'hv01.example.net'},
                       forecast=self.FORECAST)
        self.assertEqual({'s1': {'cpu': .2}}, reading.servers)
        self.assertEqual({'s1': {'cpu': .8}}, reading.forecast_servers)
        self.assertAlmostEqual(.7, reading.forecast_hosts[
            'hv01.example.net']['cpu'])
        asked = [q for q in client.asked if 'offset' in q]
        # Each host query and each server query, once.
        self.assertEqual(4 + 3, len(asked))
        self.assertTrue(all(q.endswith(') / 2') for q in asked), asked)
        self.assertTrue(all('[1h:1m] offset 82800s) + avg_over_time' in q
                            and '[1h:1m] offset 169200s)' in q
                            for q in asked), asked)
        document = {'source': {}, 'hypervisors': [
            {'name': n} for n in NAMES], 'servers': [{'id': 's1'}]}
        collect.add_metrics(document, reading)
        # No history read: no domain has skill, so no weight.
        self.assertEqual({'ahead': '1h', 'days': 2, 'weight': 0.5,
                          'skill': {'hypervisors': {}}}, document['forecast'])
        self.assertEqual({'cpu': .2, 'forecast': {'cpu': .8}},
                         document['servers'][0]['usage'])
        self.assertNotIn('note', document['source'])

    def test_no_history_is_said(self):
        client = self.client(days=(1, 2))  # nothing at the offsets asked
        reading = read(client, {'s1': 'hv01.example.net'},
                       forecast=self.FORECAST)
        document = {'source': {}, 'hypervisors': [
            {'name': n} for n in NAMES], 'servers': [{'id': 's1'}]}
        collect.add_metrics(document, reading)
        self.assertNotIn('forecast', document)
        self.assertIn('no forecast: Prometheus has no series over the 1h '
                      'ahead of this time on each of the last 2 days',
                      document['source']['note'])

    def test_one_day_is_one_term(self):
        client = self.client()
        read(client, {'s1': 'hv01.example.net'},
             forecast=model.Forecast('30m', 1, 0.5))
        asked = [q for q in client.asked if 'offset' in q]
        self.assertTrue(all(q.startswith('avg_over_time((') and
                            q.endswith(')[30m:1m] offset 84600s)')
                            for q in asked), asked)

    def test_not_asked_without_the_setting(self):
        client = self.client()
        reading = read(client, {'s1': 'hv01.example.net'})
        self.assertFalse([q for q in client.asked if 'offset' in q])
        self.assertIsNone(reading.forecast)


class HistoryClient(FakeClient):
    """Answers the history's range queries as Prometheus would: for each
    part label_replace(Q, "leveller_history", "PART", "", "") of a query
    and each target, a series with value(part, instance, time) at start,
    start + step, ... end (None: no point then); extra: more series, as
    they are, with the query of their part (others with each query);
    fail: raised instead. Anything else as FakeClient."""

    def __init__(self, answers, value, extra=(), fail=None):
        super().__init__(answers)
        self.value, self.extra, self.range_fail = value, extra, fail
        self.timeouts = []  # of each range query

    def query_range(self, promql, start, end, step, timeout=None):
        self.ranges.append((promql, start, end, step))
        self.timeouts.append(timeout)
        if self.range_fail:
            raise self.range_fail
        times = [start + k * step
                 for k in range(int((end - start) // step) + 1)]
        found = []
        parts = re.findall(r'"%s", "(\w+)"' % measure.HISTORY_LABEL, promql)
        for part in parts:
            for target in KOLLA:
                points = [(t, self.value(part, target['instance'], t))
                          for t in times]
                points = [(t, v) for t, v in points if v is not None]
                if points:  # Prometheus has no series without points
                    found.append(({'instance': target['instance'],
                                   'job': target['job'],
                                   measure.HISTORY_LABEL: part}, points))
        self.asked.append('range %s' % promql)
        # Extra series of a part asked come with it; others with both.
        known = {'%s_%s' % (figure, kind) for figure in ('cpu', 'ram')
                 for kind in ('now', 'lasting', 'actual')}
        return found + [(dict(labels), list(points))
                        for labels, points in self.extra
                        if labels.get(measure.HISTORY_LABEL) in parts or
                        labels.get(measure.HISTORY_LABEL) not in known]


class TestHistory(unittest.TestCase):
    """With forecast_days, the hosts' CPU and RAM on a grid of the period
    ahead, that the forecast's skill is measured on (core/load/skill.py)."""

    END = 1800000000  # the read's time, in whole seconds
    HOUR = 3600

    @staticmethod
    def value(part, instance, t):
        """Each point tells its part, target and time: 0.KPPTTT."""
        target = int(instance.split('.')[3].split(':')[0]) - 10
        kind = ('now', 'actual', 'lasting').index(part.split('_', 1)[1])
        return target / 10 + kind / 100 + \
            (TestHistory.END - t) / TestHistory.HOUR / 1e5 + \
            (0.005 if part.startswith('ram') else 0.0)

    def read(self, client, forecast=model.Forecast('1h', 2, 0.5), **kwargs):
        with mock.patch.object(measure.time, 'time',
                               return_value=self.END + 0.7):
            return read(client, forecast=forecast, **kwargs)

    def client(self, **kwargs):
        return HistoryClient(node_answers(KOLLA), self.value, **kwargs)

    def test_the_grid_and_the_two_queries(self):
        client = self.client()
        reading = self.read(client)
        # Two days scored: now at each hour of them; actual (the hour
        # before each time) from two days before their first hour + 1 on.
        [recent, past] = client.ranges
        hour = self.HOUR
        self.assertEqual((self.END - 48 * hour, self.END - hour, hour),
                         recent[1:])
        self.assertEqual((self.END - 95 * hour, self.END, hour), past[1:])
        cpu = '1 - avg by (instance, job, hostname) (rate(' \
              'node_cpu_seconds_total{mode="idle"}[1m]))'
        ram = '1 - node_memory_MemAvailable_bytes / ' \
              'node_memory_MemTotal_bytes'
        self.assertEqual(
            'label_replace(%s, "leveller_history", "cpu_now", "", "") or '
            'label_replace(%s, "leveller_history", "ram_now", "", "")' % (
                cpu, ram), recent[0])
        self.assertEqual(
            'label_replace(avg_over_time((%s)[1h:1m]), "leveller_history", '
            '"cpu_actual", "", "") or label_replace(avg_over_time((%s)'
            '[1h:1m]), "leveller_history", "ram_actual", "", "")' % (
                cpu, ram), past[0])
        history = reading.history
        self.assertEqual(3600.0, history.step)
        self.assertIsNone(history.lasting)
        self.assertEqual({'cpu', 'ram'}, set(history.now))
        self.assertEqual({'cpu', 'ram'}, set(history.actual))
        # Index i is the read's time + i hours.
        for figure in ('cpu', 'ram'):
            for k, name in enumerate(NAMES):
                instance = KOLLA[k]['instance']
                self.assertEqual(
                    {i: self.value(figure + '_now', instance,
                                   self.END + i * hour)
                     for i in range(-48, 0)},
                    history.now[figure][name])
                self.assertEqual(
                    {i: self.value(figure + '_actual', instance,
                                   self.END + i * hour)
                     for i in range(-95, 1)},
                    history.actual[figure][name])
        # Asked after the forecast's queries, before the guard's.
        order = [q.split(' ')[0] if q.startswith('range ') else
                 'guard' if measure.GUARD_LABEL in q else
                 'ahead' if 'offset' in q else '' for q in client.asked]
        self.assertEqual(['ahead'] * 4 + ['range'] * 2 + ['guard'],
                         [q for q in order if q])

    def test_the_days_scored_are_seven_at_most_and_lasting(self):
        client = self.client()
        reading = self.read(client, forecast=model.Forecast('1h', 10, 0.5),
                            lasting='3h')
        [recent, past] = client.ranges
        hour = self.HOUR
        self.assertEqual((self.END - 168 * hour, self.END - hour),
                         recent[1:3])
        self.assertEqual((self.END - (167 + 240) * hour, self.END),
                         past[1:3])
        self.assertIn('label_replace(avg_over_time((1 - avg by (instance, '
                      'job, hostname) (rate(node_cpu_seconds_total{mode='
                      '"idle"}[1m])))[3h:1m]), "leveller_history", '
                      '"cpu_lasting", "", "")', recent[0])
        self.assertEqual(4, recent[0].count('label_replace'))
        self.assertEqual(
            {i: self.value('ram_lasting', KOLLA[1]['instance'],
                           self.END + i * hour) for i in range(-168, 0)},
            reading.history.lasting['ram']['hv02.example.net'])

    def test_steps_that_do_not_divide_a_day(self):
        # 7 minutes: 205 steps in a day (205.7), a day back is 206 steps,
        # as core/load/skill.py rounds it.
        client = self.client()
        self.read(client, forecast=model.Forecast('7m', 1, 0.5))
        [recent, past] = client.ranges
        self.assertEqual((self.END - 205 * 420, self.END - 420, 420),
                         recent[1:])
        self.assertEqual((self.END - (204 + 206) * 420, self.END, 420),
                         past[1:])
        self.assertIn('[7m:1m]', past[0])

    def test_the_resolution_of_the_means(self):
        for window, period, resolution in (
                ('5m', '1h', '5m'), ('5m', '10m', '5m'), ('5m', '45m', '5m'),
                ('7m', '1h', '400s'), ('30s', '10s', '10s'),
                ('1m', '1500ms', '1500ms'), ('2m', '1h30m', '2m'),
                ('5m', '1h1s', '277s'),
                ('7m', '1h1s', '400111ms')):
            reader = measure.Reader(None, window=window)
            self.assertEqual('avg_over_time((up)[%s:%s])' % (
                period, resolution), reader._mean('up', period), window)

    def test_series_that_say_nothing_are_left_out(self):
        nan = float('nan')
        hv01, hv02 = (dict(KOLLA[k], **{measure.HISTORY_LABEL: 'cpu_now'})
                      for k in (0, 1))
        end, hour = self.END, self.HOUR
        client = self.client(extra=[
            # hv02 twice (a second series of its target): neither.
            (dict(hv02, cpu='1'), [(end - hour, .5)]),
            # Not a hypervisor's target, a part of no figure, no part.
            (dict(hv01, instance='10.9.9.9:9100'), [(end - hour, .5)]),
            (dict(hv01, **{measure.HISTORY_LABEL: 'cpu_bogus'}),
             [(end - hour, .5)]),
            ({'instance': '10.0.0.11:9100', 'job': 'node'},
             [(end - hour, .5)])])

        def value(part, instance, t):
            if instance == '10.0.0.11:9100' and part == 'cpu_now':
                # Off the grid, not a fraction: left out.
                return {end - hour: nan, end - 2 * hour: 1.5,
                        end - 3 * hour: -0.5}.get(t, .25)
            return .25
        client.value = value
        client.answers = node_answers(KOLLA, cpu=[.5, .5, nan])
        reading = self.read(client)
        history = reading.history
        self.assertEqual({i: .25 for i in range(-48, -3)},
                         history.now['cpu']['hv01.example.net'])
        # hv03 has no figures now (NaN): no history either.
        self.assertEqual({'hv01.example.net'}, set(history.now['cpu']))
        self.assertEqual({'hv01.example.net', 'hv02.example.net'},
                         set(history.actual['cpu']))
        self.assertEqual({'hv01.example.net', 'hv02.example.net'},
                         set(history.now['ram']))

    def test_points_off_the_grid_or_the_range_are_left_out(self):
        hv01 = dict(KOLLA[0], **{measure.HISTORY_LABEL: 'ram_actual'})
        end, hour = self.END, self.HOUR
        client = self.client()
        client.value = lambda part, instance, t: None if \
            part == 'ram_actual' and instance == hv01['instance'] else .5
        client.extra = [(hv01, [(end - 100 * hour, .5), (end + hour, .5),
                                (end - hour + 30, .5), (end - hour, .75),
                                (end - 95 * hour, .5)])]
        reading = self.read(client)
        self.assertEqual({-1: .75, -95: .5},
                         reading.history.actual['ram']['hv01.example.net'])

    def test_a_failure_is_a_note_and_no_weight(self):
        for error in (
                prometheus.PrometheusError(
                    "Prometheus at http://p rejected the range query 'x': "
                    "parse error"),
                prometheus.Unreachable(
                    "Prometheus at http://p answered the range query 'x' "
                    "with 600 MiB, more than the 512 MiB of the setting "
                    "prometheus.max_answer_mb")):
            client = self.client(fail=error)
            reading = self.read(client, servers={'s1': 'hv01.example.net'})
            self.assertIsNone(reading.history)
            self.assertIsNone(reading.unreachable)
            self.assertIn('forecast skill not measured: %s: the forecast '
                          'gets no weight' % error, reading.notes)
            # The rest of the reading is all there.
            self.assertEqual(3, len(reading.hosts))
            self.assertEqual(3, len(reading.forecast_hosts))
            self.assertIsNotNone(reading.guard)
            self.assertEqual(1, len(client.ranges))

    def test_a_re_check_asks_for_no_history(self):
        # apply's re-checks keep the first read's skill: no range query.
        client = self.client()
        with mock.patch.object(measure.time, 'time',
                               return_value=self.END + 0.7):
            reading = measure.Reader(
                client, window='1m', forecast=model.Forecast(
                    '1h', 2, 0.5)).read(REFS, {}, guard=False)
        self.assertIsNone(reading.history)
        self.assertEqual([], client.ranges)
        self.assertEqual(3, len(reading.forecast_hosts))

    def test_a_timeout_says_which_setting(self):
        error = prometheus.TimedOut(
            'cannot reach Prometheus at http://p: ReadTimeout')
        reading = self.read(self.client(fail=error))
        self.assertIn('forecast skill not measured: cannot reach Prometheus '
                      'at http://p: ReadTimeout (its history takes '
                      'Prometheus longer than prometheus.history_timeout): '
                      'the forecast gets no weight', reading.notes)

    def test_the_history_waits_as_long_as_it_is_let(self):
        client = self.client()
        self.read(client, history_timeout=90.0)
        self.assertEqual([90.0, 90.0], client.timeouts)
        # From the settings: 120 s unless set.
        settings = config.Settings([('test', config.flatten(
            {'prometheus': {'url': 'http://127.0.0.1:9',
                            'forecast_days': 7}}, 'test'))])
        self.assertEqual(120.0, measure.reader_from_settings(
            settings.section('prometheus')).history_timeout)

    def test_not_asked_without_forecast_or_cpu_and_ram(self):
        client = self.client()
        reading = read(client, lasting='3h')
        self.assertEqual([], client.ranges)
        self.assertIsNone(reading.history)
        client = self.client()
        reading = self.read(client, queries={
            'cpu_pressure': measure.HOST_QUERIES['cpu_pressure'],
            'cpu_steal': 'rate(node_cpu_steal[1m])'})
        self.assertEqual([], client.ranges)
        self.assertIsNone(reading.history)
        # Only RAM: only RAM's history.
        client = self.client()
        reading = self.read(client, queries={
            'ram': measure.HOST_QUERIES['ram']})
        self.assertEqual(['ram_now'], re.findall(r'"(\w+_now)"',
                                                 client.ranges[0][0]))
        self.assertEqual({'ram'}, set(reading.history.now))

    def test_the_skill_is_measured_on_it(self):
        # Load that repeats from day to day: the forecast from the same
        # hour of past days is exact where the hour now misses.
        def value(part, instance, t):
            busy = 8 <= int(t // 3600) % 24 < 18
            return .2 + (.6 if busy and instance.startswith('10.0.0.11')
                         else 0.0)
        client = self.client()
        client.value = value
        reading = self.read(client)
        found = skill.errors(reading.history, {n: 'az1' for n in NAMES}, 2)
        self.assertEqual(set(NAMES), set(found))
        errors = found['hv01.example.net']['cpu']
        self.assertEqual(48, errors.points)
        self.assertAlmostEqual(0.0, errors.ahead)
        self.assertGreater(errors.now, 0.1)


class GuardClient(FakeClient):
    """Answers the guard's query from guard: {part: [(labels, value)]},
    each sample marked with its part as Prometheus' label_replace marks
    it; any other query as FakeClient does."""

    def __init__(self, answers, guard, names=(), fail=None):
        super().__init__(answers, names)
        self.guard, self.guard_fail = guard, fail

    def query(self, promql, at=None):
        if measure.GUARD_LABEL not in promql:
            return super().query(promql, at)
        self.asked.append(promql)
        if self.guard_fail:
            raise self.guard_fail
        return [(dict(labels, **{measure.GUARD_LABEL: part}), value)
                for part, samples in self.guard.items()
                if '"%s"' % part in promql for labels, value in samples]


def by_target(values):
    return [({'instance': t['instance'], 'job': 'node'}, v)
            for t, v in zip(KOLLA, values) if v is not None]


class TestGuardQuery(unittest.TestCase):
    """What the guard checks the metrics with, in one query more."""

    LV = '10.0.0.11:9177'

    def client(self, **guard):
        server = libvirt_sample(self.LV, 'libvirt_exporter', 'instance-1',
                                instance_id='s1')
        parts = {'cpus': by_target([32, 48, 16]),
                 'memory': by_target([2 ** 37, 2 ** 38, 2 ** 36]),
                 'cpu_before': by_target([.8, .5, .1]),
                 'ram_before': by_target([.2, .2, .2]),
                 'servers_before': [({'instance': self.LV,
                                      'job': 'libvirt_exporter'}, 3)]}
        parts.update(guard)
        return GuardClient(node_answers(KOLLA) + [
            ('libvirt_domain_info_cpu_time_seconds_total', [(server, 2.5)])],
            parts, names=['libvirt_domain_openstack_info'])

    def read(self, client, seconds_ago=600, **kwargs):
        reference = guard.Reference(time.time() - seconds_ago, guard.SINCE)
        return read(client, {'s1': 'hv01.example.net'}, reference=reference,
                    **kwargs)

    def test_every_query_is_evaluated_at_the_read_time(self):
        # The figures a later run asks of "then" are what this read saw,
        # not samples scraped while it ran; the offset counts from it.
        client = self.client()
        reference = guard.Reference(time.time() - 600.25, guard.SINCE)
        reading = read(client, {'s1': 'hv01.example.net'},
                       reference=reference)
        self.assertEqual({reading.read_at}, set(client.times))
        [query] = [q for q in client.asked if measure.GUARD_LABEL in q]
        self.assertIn('offset %dms' % round(
            (reading.read_at - reference.time) * 1000), query)

    def test_sizes_figures_then_and_busiest_server(self):
        client = self.client()
        reading = self.read(client)
        [query] = [q for q in client.asked if measure.GUARD_LABEL in q]
        self.assertRegex(query, r'\[100ms:100ms\] offset 6000[0-9]{2}ms')
        self.assertIn('count by (instance, job, hostname) '
                      '(node_cpu_seconds_total{mode="idle"})', query)
        self.assertEqual(guard.SINCE, reading.guard['reference_from'])
        self.assertAlmostEqual(time.time(), reading.guard['read_at'], -1)
        self.assertEqual(60.0, reading.guard['window'])
        self.assertEqual({
            'hv01.example.net': {'cpus': 32, 'memory_mb': 131072.0,
                                 'before': {'cpu': .8, 'ram': .2},
                                 'servers_before': 3,
                                 'busiest_server': 's1', 'busiest_cpu': 2.5},
            'hv02.example.net': {'cpus': 48, 'memory_mb': 262144.0,
                                 'before': {'cpu': .5, 'ram': .2},
                                 'servers_before': 0},
            'hv03.example.net': {'cpus': 16, 'memory_mb': 65536.0,
                                 'before': {'cpu': .1, 'ram': .2},
                                 'servers_before': 0},
        }, reading.guard['hypervisors'])
        # The server read above its vCPUs has no figures of its own.
        self.assertEqual({}, reading.servers)
        # Into a snapshot as it is, and read back.
        document = {'hypervisors': [{'name': n, 'metrics': None}
                                    for n in NAMES], 'servers': [],
                    'source': {}}
        collect.add_metrics(document, reading)
        snap_doc = snapshot_io.guard_doc(snapshot_io._guard(
            document['guard'], set(NAMES)))
        self.assertEqual(document['guard']['hypervisors'],
                         snap_doc['hypervisors'])

    def test_one_request_more(self):
        client = self.client()
        self.read(client)
        without = self.client()
        read(without, {'s1': 'hv01.example.net'}, capacity=False)
        self.assertEqual(len(without.asked) + 1, len(client.asked))
        again = self.client()
        measure.Reader(again, window='1m').read(REFS, {}, guard=False)
        self.assertFalse(any(measure.GUARD_LABEL in q for q in again.asked))

    def test_without_a_reference_only_the_sizes(self):
        client = self.client()
        reading = read(client, {'s1': 'hv01.example.net'})
        [query] = [q for q in client.asked if measure.GUARD_LABEL in q]
        self.assertNotIn('offset', query)
        self.assertIsNone(reading.guard['reference'])
        self.assertEqual({'cpus', 'memory_mb'}, set(
            reading.guard['hypervisors']['hv02.example.net']))

    def test_no_cpu_series_is_no_cpus(self):
        reading = self.read(self.client(cpus=by_target([32, None, 16])))
        self.assertEqual(0, reading.guard['hypervisors'][
            'hv02.example.net']['cpus'])
        # Nobody's CPUs at all: the cpu collector is off, not zero CPUs.
        reading = self.read(self.client(cpus=[]))
        self.assertNotIn('cpus', reading.guard['hypervisors'][
            'hv02.example.net'])

    def test_untrusted_answers_say_nothing(self):
        nan, inf = float('nan'), float('inf')
        reading = self.read(self.client(
            cpus=by_target([32, 48, 16]) + by_target([64]),  # hv01 twice
            memory=by_target([nan, -1.0, inf]),
            cpu_before=by_target([1.7, nan, .3]),
            servers_before=[({'instance': 'elsewhere', 'job': 'x'}, 5)]))
        facts = reading.guard['hypervisors']
        self.assertEqual({'servers_before': 0, 'busiest_server': 's1',
                          'busiest_cpu': 2.5}, facts['hv01.example.net'])
        self.assertEqual({'cpus': 48, 'servers_before': 0},
                         facts['hv02.example.net'])
        self.assertEqual({'cpus': 16, 'before': {'cpu': .3, 'ram': .2},
                          'servers_before': 0}, facts['hv03.example.net'])

    def test_a_failing_guard_query_is_a_note(self):
        client = self.client()
        client.guard_fail = prometheus.PrometheusError('rejected: no')
        reading = self.read(client)
        self.assertEqual(3, len(reading.hosts))
        # What the server queries tell is still there.
        self.assertEqual({'hv01.example.net': {
            'busiest_server': 's1', 'busiest_cpu': 2.5}},
            reading.guard['hypervisors'])
        self.assertIn('the guard\'s query failed (rejected: no)',
                      ' '.join(reading.notes))
