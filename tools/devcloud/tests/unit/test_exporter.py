"""Unit tests of the devcloud exporter's load model and exposition (no cloud).

The exporter is a standalone script (tools/devcloud/exporter.py), loaded here
by path.
"""

import importlib.util
import json
import os
import re
import sys
import tempfile
import unittest

EXPORTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                        'exporter.py')
_spec = importlib.util.spec_from_file_location('devcloud_exporter', EXPORTER)
exporter = importlib.util.module_from_spec(_spec)
sys.modules['devcloud_exporter'] = exporter
_spec.loader.exec_module(exporter)

T0 = 1700000000.0
GIB = 1024 ** 3

_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE_RE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?P<labels>\{%s(?:,%s)*\})?' % (_LABEL, _LABEL)
    + r' (?P<value>[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|NaN|Inf))$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """Exposition text -> ({(name, labels): value}, {name: type}); checks the format."""
    samples, types, helps = {}, {}, set()
    for line in text.splitlines():
        if line.startswith('# HELP '):
            helps.add(line.split()[2])
        elif line.startswith('# TYPE '):
            _, _, name, kind = line.split()
            assert kind in ('counter', 'gauge'), line
            types[name] = kind
        else:
            m = SAMPLE_RE.match(line)
            assert m, 'bad sample line: %r' % line
            assert m.group('name') in types, 'no TYPE before %r' % line
            labels = tuple(LABEL_RE.findall(m.group('labels') or ''))
            samples[(m.group('name'), labels)] = float(m.group('value'))
    assert helps == set(types), (helps, set(types))
    return samples, types


def srv(sid, host, vcpus=4, ram=8192, status='ACTIVE', cpu=None, mem=None, name=None):
    meta = {}
    if cpu is not None:
        meta['devcloud:cpu'] = cpu
    if mem is not None:
        meta['devcloud:mem'] = mem
    return exporter.Server(sid, name or 'vm-' + sid, host, status, vcpus, ram, meta)


def get(samples, name, **labels):
    """Sum of the samples of a metric whose labels include the given ones."""
    return sum(v for (n, lbls), v in samples.items()
               if n == name and set(labels.items()) <= set(lbls))


class ProfileTest(unittest.TestCase):

    def test_constant(self):
        prof = exporter.parse_profile('0.8', 0.1)
        self.assertEqual(prof, (0.8, 0.8, 0.0))
        for t in (0, 123.4, T0):
            self.assertEqual(exporter.profile_value(prof, t, 0.3), 0.8)

    def test_default_and_invalid(self):
        self.assertEqual(exporter.parse_profile(None, 0.1), (0.1, 0.1, 0.0))
        with self.assertLogs('devcloud-exporter', 'WARNING'):
            self.assertEqual(exporter.parse_profile('lots', 0.3), (0.3, 0.3, 0.0))
        with self.assertLogs('devcloud-exporter', 'WARNING'):
            self.assertEqual(exporter.parse_profile('0.1~0.5@0', 0.3), (0.3, 0.3, 0.0))

    def test_clamped(self):
        self.assertEqual(exporter.profile_value(exporter.parse_profile('1.5', 0), 0, 0), 1.0)

    def test_sine(self):
        prof = exporter.parse_profile(' 0.2 ~ 0.9 @ 600 ', 0.1)
        self.assertEqual(prof, (0.2, 0.9, 600.0))
        values = [exporter.profile_value(prof, t, 0.0) for t in range(0, 600, 5)]
        self.assertAlmostEqual(min(values), 0.2, places=2)
        self.assertAlmostEqual(max(values), 0.9, places=2)
        self.assertAlmostEqual(exporter.profile_value(prof, 0, 0.0), 0.55)
        self.assertAlmostEqual(exporter.profile_value(prof, 150, 0.0), 0.9)
        # periodic
        self.assertAlmostEqual(exporter.profile_value(prof, 1234.5, 0.1),
                               exporter.profile_value(prof, 1234.5 + 600, 0.1))

    def test_phase_differs_per_server(self):
        phases = {exporter.phase_of('server-%d' % i) for i in range(20)}
        self.assertEqual(len(phases), 20)
        self.assertTrue(all(0 <= p < 1 for p in phases))
        # crc32(b'abc') = 0x352441c2, over 2**32
        self.assertEqual(exporter.phase_of('abc'), 0x352441c2 / 2.0 ** 32)
        self.assertAlmostEqual(exporter.phase_of('abc'), 0.20758449, places=8)


class PressureTest(unittest.TestCase):

    def test_shape(self):
        p = exporter.pressure
        self.assertEqual(p(0.0, 0.7), 0.0)
        self.assertEqual(p(0.7, 0.7), 0.0)
        self.assertLess(p(0.8, 0.7), 0.02)
        self.assertAlmostEqual(p(1.0, 0.7), 0.1)
        self.assertGreater(p(1.2, 0.7), 0.4)
        self.assertEqual(p(2.0, 0.7), 1.0)
        xs = [i / 100 for i in range(0, 300)]
        ys = [p(x, 0.7) for x in xs]
        self.assertEqual(ys, sorted(ys))                    # non-decreasing
        steps = [b - a for a, b in zip(ys, ys[1:])]
        self.assertLess(max(steps), 0.05)                   # no jumps


class ModelTest(unittest.TestCase):

    def setUp(self):
        self.hosts = [exporter.Host('hv01', 8, 32768), exporter.Host('hv02', 8, 32768)]
        self.model = exporter.Model()

    def scrape(self, hv, now):
        text = self.model.render(hv, now)
        self.assertIsNotNone(text)
        return parse(text)[0]

    def cpu_busy(self, hv, t1, t2):
        """Average busy cores between two scrapes, as Prometheus' rate() would compute."""
        a, b = self.scrape(hv, t1), self.scrape(hv, t2)
        idle = (get(b, 'node_cpu_seconds_total', mode='idle')
                - get(a, 'node_cpu_seconds_total', mode='idle'))
        return 8 - idle / (t2 - t1)

    def rate(self, hv, name, t1, t2, **labels):
        a, b = self.scrape(hv, t1), self.scrape(hv, t2)
        return (get(b, name, **labels) - get(a, name, **labels)) / (t2 - t1)

    def test_unknown_host(self):
        self.model.update(self.hosts, [], T0)
        self.assertIsNone(self.model.render('nope', T0))
        self.assertEqual(self.model.hypervisors(), ['hv01', 'hv02'])

    def test_idle_host(self):
        self.model.update(self.hosts, [], T0)
        self.model.update(self.hosts, [], T0 + 10)
        s = self.scrape('hv01', T0 + 10)
        self.assertEqual(len([k for k in s if k[0] == 'node_cpu_seconds_total']), 8 * 3)
        self.assertAlmostEqual(self.cpu_busy('hv01', T0 + 10, T0 + 20), 0.02 * 8)
        self.assertAlmostEqual(s[('node_pressure_cpu_waiting_seconds_total', ())], 0.0)
        self.assertAlmostEqual(s[('node_pressure_memory_waiting_seconds_total', ())], 0.0)
        self.assertEqual(s[('node_memory_MemTotal_bytes', ())], 32 * GIB)
        self.assertEqual(s[('node_memory_MemAvailable_bytes', ())], 30 * GIB)
        # every CPU accounts one second per second
        per_cpu = sum(v for (n, lbls), v in s.items()
                      if n == 'node_cpu_seconds_total' and ('cpu', '3') in lbls)
        self.assertAlmostEqual(per_cpu, 10.0)

    def test_counters_integrate_and_are_monotonic(self):
        servers = [srv('a', 'hv01', vcpus=4, cpu='0.5', mem='0.5')]
        self.model.update(self.hosts, servers, T0)
        busy = self.cpu_busy('hv01', T0, T0 + 4)
        self.assertAlmostEqual(busy, 2.0 + 0.16)
        s = self.scrape('hv01', T0 + 4)
        self.assertAlmostEqual(get(s, 'libvirt_domain_info_cpu_time_seconds_total', uuid='a'),
                               8.0)
        self.assertAlmostEqual(get(s, 'node_cpu_seconds_total', mode='user'),
                               0.85 * 2.16 * 4)
        self.assertAlmostEqual(get(s, 'node_cpu_seconds_total', mode='system'),
                               0.15 * 2.16 * 4)
        self.assertEqual(s[('node_memory_MemAvailable_bytes', ())], (32 - 2 - 4) * GIB)
        self.assertEqual(get(s, 'libvirt_domain_info_memory_usage_bytes', uuid='a'), 4 * GIB)
        self.assertEqual(get(s, 'libvirt_domain_info_virtual_cpus', uuid='a'), 4)
        # load changes: the counter keeps the old rate up to the update
        servers = [srv('a', 'hv01', vcpus=4, cpu='1')]
        self.model.update(self.hosts, servers, T0 + 5)
        s = self.scrape('hv01', T0 + 5)
        self.assertAlmostEqual(get(s, 'libvirt_domain_info_cpu_time_seconds_total'), 10.0)
        s = self.scrape('hv01', T0 + 7)
        self.assertAlmostEqual(get(s, 'libvirt_domain_info_cpu_time_seconds_total'), 18.0)

        # monotonic whatever the order of scrapes and updates, also with a
        # scrape "from the future" (thread race) and a clock going back
        last = {}
        events = [('u', 8), ('r', 8.5), ('r', 9.9), ('u', 9.5), ('r', 9.6), ('u', 12),
                  ('r', 11), ('u', 10), ('r', 13), ('u', 20), ('r', 20)]
        for i, (kind, t) in enumerate(events):
            load = '0.9' if i % 2 else '0.05'
            if kind == 'u':
                self.model.update(self.hosts, [srv('a', 'hv01', vcpus=4, cpu=load)], T0 + t)
                continue
            s = self.scrape('hv01', T0 + t)
            for key, value in s.items():
                if key[0].endswith('_total'):
                    self.assertGreaterEqual(value, last.get(key, 0.0), (key, t))
                    last[key] = value

    def test_statuses(self):
        servers = [srv('a', 'hv01', cpu='1', mem='1'),
                   srv('p', 'hv01', status='PAUSED', cpu='1', mem='1'),
                   srv('s', 'hv01', status='SHUTOFF', cpu='1', mem='1'),
                   srv('m', 'hv01', status='MIGRATING', cpu='1', mem='1')]
        self.model.update(self.hosts, servers, T0)
        s = self.scrape('hv01', T0 + 1)
        cpu = {u: get(s, 'libvirt_domain_info_cpu_time_seconds_total', uuid=u) for u in 'apsm'}
        mem = {u: get(s, 'libvirt_domain_info_memory_usage_bytes', uuid=u) for u in 'apsm'}
        self.assertEqual(cpu, {'a': 4.0, 'p': 0.0, 's': 0.0, 'm': 4.0})
        self.assertEqual(mem, {'a': 8 * GIB, 'p': 8 * GIB, 's': 0, 'm': 8 * GIB})
        self.assertEqual(s[('node_memory_MemAvailable_bytes', ())], (32 - 2 - 24) * GIB)

    def test_sine_load_varies(self):
        servers = [srv('a', 'hv01', vcpus=8, cpu='0~1@100')]
        rates = []
        for t in range(0, 100, 2):
            self.model.update(self.hosts, servers, T0 + t)
            rates.append(self.rate('hv01', 'libvirt_domain_info_cpu_time_seconds_total',
                                   T0 + t, T0 + t + 1))
        self.assertLess(min(rates), 0.1)
        self.assertGreater(max(rates), 7.9)

    def test_pressure_past_capacity(self):
        now = [T0]

        def p_at(name, servers):
            # scrapes follow the update, in time order (the model never goes back)
            self.model.update(self.hosts, servers, now[0])
            now[0] += 10
            return self.rate('hv01', name, now[0] - 10, now[0])

        def p_cpu(cpu):
            servers = [srv(str(i), 'hv01', vcpus=4, cpu=cpu) for i in range(4)]  # 16 vCPUs
            return p_at('node_pressure_cpu_waiting_seconds_total', servers)

        self.assertEqual(p_cpu('0.1'), 0.0)         # 1.6 + 0.16 cores of 8
        self.assertEqual(p_cpu('0.3'), 0.0)         # 62 %
        self.assertLess(p_cpu('0.4'), 0.02)         # 82 %
        self.assertGreater(p_cpu('0.6'), 0.4)       # 122 %
        self.assertEqual(p_cpu('1'), 1.0)           # 202 %
        self.model.update(self.hosts, [srv(str(i), 'hv01', cpu='1') for i in range(4)], now[0])
        self.assertAlmostEqual(self.cpu_busy('hv01', now[0], now[0] + 10), 8.0)   # capped

        def p_mem(mem):
            servers = [srv(str(i), 'hv01', ram=8192, mem=mem) for i in range(4)]  # 32 GiB
            return p_at('node_pressure_memory_waiting_seconds_total', servers)

        self.assertEqual(p_mem('0.3'), 0.0)
        self.assertLess(p_mem('0.85'), 0.05)        # 27.2 + 2 of 32 GiB: 91 %
        self.assertGreater(p_mem('1'), 0.25)        # 34 of 32 GiB: 106 %
        s = self.scrape('hv01', now[0])
        self.assertEqual(s[('node_memory_MemAvailable_bytes', ())], 0)

    def test_server_moves(self):
        busy = srv('b', 'hv01', vcpus=4, cpu='0.9')
        other = srv('o', 'hv02', vcpus=2, cpu='0.5')
        self.model.update(self.hosts, [busy, other], T0)
        self.assertAlmostEqual(self.cpu_busy('hv01', T0, T0 + 15), 3.6 + 0.16)
        self.assertAlmostEqual(self.cpu_busy('hv02', T0 + 15, T0 + 30), 1.0 + 0.16)
        counter_before = get(self.scrape('hv01', T0 + 30),
                             'libvirt_domain_info_cpu_time_seconds_total', uuid='b')
        self.assertAlmostEqual(counter_before, 3.6 * 30)

        moved = busy._replace(host='hv02')
        self.model.update(self.hosts, [moved, other], T0 + 30)
        self.assertAlmostEqual(self.cpu_busy('hv01', T0 + 30, T0 + 45), 0.16)
        self.assertAlmostEqual(self.cpu_busy('hv02', T0 + 45, T0 + 60), 3.6 + 1.0 + 0.16)
        # the server's series left hv01 and continue on hv02 without a reset
        self.assertEqual(get(self.scrape('hv01', T0 + 60),
                             'libvirt_domain_info_cpu_time_seconds_total', uuid='b'), 0)
        counter_after = get(self.scrape('hv02', T0 + 60),
                            'libvirt_domain_info_cpu_time_seconds_total', uuid='b')
        self.assertAlmostEqual(counter_after, 3.6 * 60)

    def test_deleted_and_unplaced(self):
        self.model.update(self.hosts, [srv('a', 'hv01', cpu='1'), srv('x', None)], T0)
        self.model.update(self.hosts, [srv('a', 'hv01', cpu='1')], T0 + 1)
        self.model.update(self.hosts, [], T0 + 2)
        s = self.scrape('hv01', T0 + 3)
        self.assertEqual(get(s, 'libvirt_domain_info_cpu_time_seconds_total'), 0)
        # hosts that go away are forgotten; a host that grows gets new CPUs
        self.model.update([exporter.Host('hv01', 16, 32768)], [], T0 + 4)
        self.assertEqual(self.model.hypervisors(), ['hv01'])
        s = self.scrape('hv01', T0 + 5)
        self.assertAlmostEqual(get(s, 'node_cpu_seconds_total', cpu='15', mode='idle'), 0.98)


class ExpositionTest(unittest.TestCase):

    def test_format(self):
        model = exporter.Model()
        hosts = [exporter.Host('hv01', 4, 8192)]
        servers = [srv('id-1', 'hv01', name='we"ird\\name\nx', cpu='0.2~0.9@600'),
                   srv('id-2', 'hv01', vcpus=1, ram=512)]
        model.update(hosts, servers, T0)
        text = model.render('hv01', T0 + 1.5)
        self.assertTrue(text.endswith('\n'))
        samples, types = parse(text)
        self.assertEqual(types, {
            'node_cpu_seconds_total': 'counter',
            'node_memory_MemTotal_bytes': 'gauge',
            'node_memory_MemAvailable_bytes': 'gauge',
            'node_pressure_cpu_waiting_seconds_total': 'counter',
            'node_pressure_memory_waiting_seconds_total': 'counter',
            'libvirt_domain_info_cpu_time_seconds_total': 'counter',
            'libvirt_domain_info_memory_usage_bytes': 'gauge',
            'libvirt_domain_info_maximum_memory_bytes': 'gauge',
            'libvirt_domain_info_virtual_cpus': 'gauge',
        })
        self.assertIn('{domain="we\\"ird\\\\name\\nx",uuid="id-1"}', text)
        self.assertIn(('libvirt_domain_info_virtual_cpus',
                       (('domain', 'vm-id-2'), ('uuid', 'id-2'))), samples)
        self.assertIn('node_cpu_seconds_total{cpu="3",mode="system"} ', text)
        self.assertIn('node_memory_MemTotal_bytes 8589934592\n', text)

    def test_format_value(self):
        self.assertEqual(exporter.format_value(3), '3')
        self.assertEqual(exporter.format_value(0.5), '0.5')
        self.assertEqual(exporter.format_value(1e-7), '1e-07')
        self.assertEqual(exporter.format_value(float('inf')), '+Inf')
        for v in ('1e-07', '3', '0.5', '+Inf', 'NaN'):
            self.assertTrue(SAMPLE_RE.match('x ' + v), v)


class TargetsTest(unittest.TestCase):

    def test_targets_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'targets.json')
            # hypervisor (node) names, as the devcloud's: not service hosts
            exporter.write_targets(path, ['hv02.devcloud.test', 'hv01.devcloud.test'],
                                   '127.0.0.1:9180')
            with open(path) as f:
                doc = json.load(f)
            self.assertEqual(os.listdir(tmp), ['targets.json'])    # no temp file left
        self.assertEqual(doc, [
            {'targets': ['127.0.0.1:9180'],
             'labels': {'__metrics_path__': '/hosts/hv01.devcloud.test/metrics',
                        'instance': 'hv01.devcloud.test:9100',
                        'hypervisor': 'hv01.devcloud.test'}},
            {'targets': ['127.0.0.1:9180'],
             'labels': {'__metrics_path__': '/hosts/hv02.devcloud.test/metrics',
                        'instance': 'hv02.devcloud.test:9100',
                        'hypervisor': 'hv02.devcloud.test'}}])

    def test_poller_writes_on_change_and_survives_errors(self):
        class Source(object):
            hosts_list = [exporter.Host('hv01', 4, 8192)]
            fail = False

            def hosts(self):
                if self.fail:
                    raise RuntimeError('cloud down')
                return list(self.hosts_list)

            def servers(self):
                if self.fail:
                    raise RuntimeError('cloud down')
                return [srv('a', 'hv01', cpu='1')]

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'targets.json')
            source = Source()
            model = exporter.Model()
            poller = exporter.Poller(source, model, path, '127.0.0.1:9180', 0)
            poller.poll(T0)
            first = os.stat(path).st_mtime_ns
            os.utime(path, ns=(0, 0))
            poller.poll(T0 + 2)
            self.assertEqual(os.stat(path).st_mtime_ns, 0)          # unchanged: not rewritten
            self.assertNotEqual(first, 0)
            source.fail = True
            with self.assertLogs('devcloud-exporter', 'ERROR'):
                poller.poll(T0 + 4)                                 # keeps the last state
            self.assertEqual(poller.last_ok, T0 + 2)
            samples = parse(model.render('hv01', T0 + 6))[0]
            self.assertAlmostEqual(
                get(samples, 'libvirt_domain_info_cpu_time_seconds_total'), 24.0)
            source.fail = False
            source.hosts_list = source.hosts_list + [exporter.Host('hv02', 4, 8192)]
            poller.poll(T0 + 6)
            with open(path) as f:
                self.assertEqual([t['labels']['hypervisor'] for t in json.load(f)],
                                 ['hv01', 'hv02'])


if __name__ == '__main__':
    unittest.main()
