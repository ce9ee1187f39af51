"""Unit tests of the devcloud exporter: load model, exposition, flavours (no cloud).

The exporter is a standalone script (tools/devcloud/exporter.py), loaded here
by path.  What each flavour must show comes from the upstream exporters and
deployments (their metric names, label sets and units), cited in
doc/source/contributor/devcloud.rst; where Debian's exporters are installed,
the synthetic kumina and node_exporter series are also compared with the
real binaries' own.
"""

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

import yaml

CODE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
_spec = importlib.util.spec_from_file_location('devcloud_exporter',
                                               os.path.join(CODE, 'exporter.py'))
exporter = importlib.util.module_from_spec(_spec)
sys.modules['devcloud_exporter'] = exporter
_spec.loader.exec_module(exporter)

T0 = 1700000000.0
GIB = 1024 ** 3
MIB = 1024 ** 2

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
            assert kind in ('counter', 'gauge', 'summary', 'untyped'), line
            types[name] = kind
        else:
            m = SAMPLE_RE.match(line)
            assert m, 'bad sample line: %r' % line
            name = m.group('name')
            assert name in types or re.sub('_(sum|count)$', '', name) in types, \
                'no TYPE before %r' % line
            labels = tuple(LABEL_RE.findall(m.group('labels') or ''))
            assert [k for k, _ in labels] == sorted(k for k, _ in labels), line
            samples[(m.group('name'), labels)] = float(m.group('value'))
    assert helps == set(types), (helps, set(types))
    return samples, types


def srv(sid, host, vcpus=4, ram=8192, status='ACTIVE', cpu=None, mem=None, name=None,
        **extra):
    meta = {}
    if cpu is not None:
        meta['devcloud:cpu'] = cpu
    if mem is not None:
        meta['devcloud:mem'] = mem
    return exporter.Server(sid, name or 'vm-' + sid, host, status, vcpus, ram, meta, **extra)


def get(samples, name, **labels):
    """Sum of the samples of a metric whose labels include the given ones."""
    return sum(v for (n, lbls), v in samples.items()
               if n == name and set(labels.items()) <= set(lbls))


def label_sets(samples, name):
    """The label names of each sample of a metric, as a set of tuples."""
    return {tuple(k for k, _ in lbls) for (n, lbls) in samples if n == name}


def series_of(samples, name, key='domain'):
    """{value of label key: sample value} of one metric."""
    return {dict(lbls)[key]: v for (n, lbls), v in samples.items() if n == name}


def scrape_all(model, hv, now, flavour='debian'):
    """A node and a libvirt scrape of one hypervisor, merged (kumina's series
    carry the server's uuid, which the model tests use)."""
    view = model.view(hv, now)
    assert view is not None
    node = parse(exporter.render_node(view, exporter.machine_uname()))[0]
    libvirt = parse(exporter.LIBVIRT_RENDERERS[exporter.FLAVOURS[flavour].libvirt](view))[0]
    node.update(libvirt)
    return node


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
        return scrape_all(self.model, hv, now)

    def cpu_busy(self, hv, t1, t2):
        """Average busy cores between two scrapes, as Prometheus' rate() would compute."""
        a, b = self.scrape(hv, t1), self.scrape(hv, t2)
        idle = (get(b, 'node_cpu_seconds_total', mode='idle')
                - get(a, 'node_cpu_seconds_total', mode='idle'))
        return 8 - idle / (t2 - t1)

    def rate(self, hv, name, t1, t2, **labels):
        a, b = self.scrape(hv, t1), self.scrape(hv, t2)
        return (get(b, name, **labels) - get(a, name, **labels)) / (t2 - t1)

    def resident(self, hv, now, uuid):
        """The model's resident bytes of a server (inovex's rss less QEMU's own)."""
        view = self.model.view(hv, now)
        return next(sl.mem_bytes for sl in view.load.servers if sl.server.id == uuid)

    def test_unknown_host(self):
        self.model.update(self.hosts, [], T0)
        self.assertIsNone(self.model.view('nope', T0))
        self.assertEqual(self.model.hypervisors(), ['hv01', 'hv02'])

    def test_idle_host(self):
        self.model.update(self.hosts, [], T0)
        self.model.update(self.hosts, [], T0 + 10)
        s = self.scrape('hv01', T0 + 10)
        self.assertEqual(len([k for k in s if k[0] == 'node_cpu_seconds_total']), 8 * 8)
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
        # the guests' part of it: 2 of 2.16 busy cores, within the user time
        self.assertAlmostEqual(get(s, 'node_cpu_guest_seconds_total', mode='user'),
                               0.85 * 2.16 * 4)
        self.assertEqual(s[('node_memory_MemAvailable_bytes', ())], (32 - 2 - 4) * GIB)
        self.assertEqual(self.resident('hv01', T0 + 4, 'a'), 4 * GIB)
        self.assertEqual(get(s, 'libvirt_domain_info_memory_usage_bytes', uuid='a'), 8 * GIB)
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
        s = self.scrape('hv01', T0 + 1, )
        cpu = {u: round(get(s, 'libvirt_domain_info_cpu_time_seconds_total', uuid=u), 9)
               for u in 'apm'}
        # a and m ask all 8 threads: the host keeps its 0.16, they share the rest
        self.assertEqual(cpu, {'a': 3.92, 'p': 0.0, 'm': 3.92})
        mem = {u: self.resident('hv01', T0 + 1, u) for u in 'apsm'}
        self.assertEqual(mem, {'a': 8 * GIB, 'p': 8 * GIB, 's': 0, 'm': 8 * GIB})
        self.assertEqual(s[('node_memory_MemAvailable_bytes', ())], (32 - 2 - 24) * GIB)
        states = series_of(s, 'libvirt_domain_state_code', 'uuid')
        self.assertEqual(states, {'a': 1, 'p': 3, 'm': 1})     # kumina: active ones only

    def test_a_restarted_domain_counts_cpu_from_0(self):
        self.model.update(self.hosts, [srv('a', 'hv01', vcpus=2, cpu='1')], T0)
        self.model.update(self.hosts, [srv('a', 'hv01', vcpus=2, cpu='1', status='SHUTOFF')],
                          T0 + 10)
        stopped = parse(exporter.render_inovex(self.model.view('hv01', T0 + 20)))[0]
        self.assertEqual(get(stopped, 'libvirt_domain_info_cpu_time_seconds_total'), 0)
        self.model.update(self.hosts, [srv('a', 'hv01', vcpus=2, cpu='1')], T0 + 30)
        s = self.scrape('hv01', T0 + 35)
        self.assertAlmostEqual(get(s, 'libvirt_domain_info_cpu_time_seconds_total'), 10.0)

    def test_fair_shares(self):
        # enough for everyone: what they ask
        self.assertEqual([1.0, 2.0], exporter.fair_shares([1.0, 2.0], 4))
        # short: small asks in full, the others level off; all is given out
        shares = exporter.fair_shares([4.0, 1.0, 3.0, 0.0], 6)
        self.assertEqual([2.5, 1.0, 2.5, 0.0], shares)
        self.assertEqual(6, sum(shares))

    def counter_rates(self, hv, t1, t2):
        """({server id: cores got}, {server id: cores queued}) between two views."""
        a, b = self.model.view(hv, t1), self.model.view(hv, t2)
        return tuple({u: round((getattr(b, f)[u] - getattr(a, f)[u]) / (t2 - t1), 9)
                      for u in getattr(b, f)} for f in ('server_cpu', 'server_delay'))

    def test_an_oversubscribed_host_shares_its_threads_fairly(self):
        servers = [srv('a', 'hv01', vcpus=4, cpu='1'), srv('b', 'hv01', vcpus=4, cpu='1'),
                   srv('c', 'hv01', vcpus=2, cpu='0.5'),
                   srv('p', 'hv01', vcpus=4, status='PAUSED', cpu='1')]
        self.model.update(self.hosts, servers, T0)       # asks 4 + 4 + 1 + 0.16 of 8
        got, delay = self.counter_rates('hv01', T0 + 10, T0 + 20)
        # the host's own 0.16 first; c asks less than a fair share and gets
        # it all; a and b get the same, what is left, and wait the rest
        self.assertEqual({'a': 3.42, 'b': 3.42, 'c': 1.0, 'p': 0.0}, got)
        self.assertEqual({'a': 0.58, 'b': 0.58, 'c': 0.0, 'p': 0.0}, delay)
        self.assertAlmostEqual(8 - 0.16, sum(got.values()))
        # the host is busy on all threads, its guests on what they got
        self.assertAlmostEqual(8.0, self.cpu_busy('hv01', T0 + 10, T0 + 20))
        s = self.scrape('hv01', T0 + 20)
        self.assertAlmostEqual(20 * 3.42, get(s, 'libvirt_domain_info_cpu_time_seconds_total',
                                              uuid='a'))
        # the share is per server, not per vCPU: c gets both its vCPUs in
        # full, a and b what is left, so less than that per vCPU
        servers[2] = srv('c', 'hv01', vcpus=2, cpu='1')
        self.model.update(self.hosts, servers, T0 + 20)
        got, delay = self.counter_rates('hv01', T0 + 30, T0 + 40)
        self.assertEqual({'a': 2.92, 'b': 2.92, 'c': 2.0, 'p': 0.0}, got)
        self.assertEqual({'a': 1.08, 'b': 1.08, 'c': 0.0, 'p': 0.0}, delay)

    def test_an_undersubscribed_host_has_no_delay(self):
        servers = [srv('a', 'hv01', vcpus=4, cpu='1'), srv('b', 'hv01', vcpus=4, cpu='0.9')]
        self.model.update(self.hosts, servers, T0)       # 7.6 + 0.16 of 8
        got, delay = self.counter_rates('hv01', T0 + 10, T0 + 20)
        self.assertEqual({'a': 4.0, 'b': 3.6}, got)
        self.assertEqual({'a': 0.0, 'b': 0.0}, delay)
        self.assertEqual({'a': 0.0, 'b': 0.0}, self.model.view('hv01', T0 + 20).server_delay)

    def test_a_restarted_domain_counts_delay_from_0(self):
        servers = [srv('a', 'hv01', vcpus=8, cpu='1')]
        self.model.update(self.hosts, servers, T0)       # waits 0.16 of its 8
        self.assertAlmostEqual(1.6, self.model.view('hv01', T0 + 10).server_delay['a'])
        self.model.update(self.hosts, [servers[0]._replace(status='SHUTOFF')], T0 + 10)
        self.model.update(self.hosts, servers, T0 + 20)
        self.assertAlmostEqual(0.8, self.model.view('hv01', T0 + 25).server_delay['a'])

    def test_sine_load_varies(self):
        servers = [srv('a', 'hv01', vcpus=8, cpu='0~1@100')]
        rates = []
        for t in range(0, 100, 2):
            self.model.update(self.hosts, servers, T0 + t)
            rates.append(self.rate('hv01', 'libvirt_domain_info_cpu_time_seconds_total',
                                   T0 + t, T0 + t + 1))
        self.assertLess(min(rates), 0.1)
        # at its peak it asks all 8 threads; it gets what the host leaves it
        self.assertAlmostEqual(max(rates), 8 - 0.16)

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
        # "full" is half of "some"
        self.assertAlmostEqual(s[('node_pressure_memory_stalled_seconds_total', ())],
                               s[('node_pressure_memory_waiting_seconds_total', ())] / 2)

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


class FaultsTest(unittest.TestCase):
    """Each fault of Faults, as a scrape shows it (POST /fault sets them)."""

    def setUp(self):
        self.hosts = [exporter.Host('hv01', 8, 32768, 'hv01'),
                      exporter.Host('hv02', 4, 16384, 'hv02')]
        self.servers = [srv('a', 'hv01', vcpus=4, cpu='0.5'),
                        srv('b', 'hv02', vcpus=2, cpu='0.5')]
        self.model = exporter.Model()
        self.faults = exporter.Faults()
        self.exporter = exporter.Exporter(self.model, exporter.FLAVOURS['kolla'],
                                          exporter.machine_uname(), self.faults)
        self.update(T0)

    def update(self, now):
        self.model.update(self.hosts, self.servers, now, self.faults)

    def scrape(self, role, hv, now):
        return parse(self.exporter.render(role, hv, now))[0]

    def cpu_time(self, now):
        """The CPU time of server a, hv01's only one."""
        samples = self.scrape('libvirt', 'hv01', now)
        return get(samples, 'libvirt_domain_info_cpu_time_seconds_total')

    def fault(self, mode, now, hv='hv01'):
        if mode == 'restart':
            self.model.restart(hv, now)
        self.faults.set(hv, mode, now)

    def test_zero_cpus_leaves_no_cpu_series(self):
        self.fault('zero-cpus', T0)
        samples = self.scrape('node', 'hv01', T0 + 2)
        self.assertFalse([n for n, _ in samples if n.startswith('node_cpu_')])
        self.assertEqual(0, get(samples, 'node_scrape_collector_success', collector='cpu'))
        self.assertEqual(32 * GIB, get(samples, 'node_memory_MemTotal_bytes'))
        self.fault('clear', T0 + 2)
        self.assertEqual(8, len({dict(lbls)['cpu'] for n, lbls in self.scrape(
            'node', 'hv01', T0 + 4) if n == 'node_cpu_seconds_total'}))

    def test_relabel_serves_the_next_hypervisors_series(self):
        self.fault('relabel', T0)
        samples = self.scrape('node', 'hv01', T0 + 2)
        self.assertEqual(16 * GIB, get(samples, 'node_memory_MemTotal_bytes'))
        uname, = [dict(lbls) for n, lbls in samples if n == 'node_uname_info']
        self.assertEqual('hv02', uname['nodename'])
        # Round: the last one's is the first's; libvirt's stay its own.
        self.fault('relabel', T0, hv='hv02')
        self.assertEqual(32 * GIB, get(self.scrape('node', 'hv02', T0 + 2),
                                       'node_memory_MemTotal_bytes'))
        self.assertGreater(self.cpu_time(T0 + 2), 0)

    def test_down_answers_no_scrape(self):
        self.fault('down', T0)
        for role in ('node', 'libvirt'):
            self.assertRaises(exporter.Unavailable, self.exporter.render, role, 'hv01',
                              T0 + 60)
        self.assertTrue(self.scrape('node', 'hv02', T0 + 60))
        self.assertEqual([('hv01', 'down')], self.faults.listing(T0 + 60))

    def test_restart_counts_from_zero_after_a_gap(self):
        self.update(T0 + 10)
        before = self.cpu_time(T0 + 10)
        idle_hv02 = get(self.scrape('node', 'hv02', T0 + 10), 'node_cpu_seconds_total',
                        mode='idle')
        self.fault('restart', T0 + 10)
        self.assertRaises(exporter.Unavailable, self.exporter.render, 'node', 'hv01',
                          T0 + 10 + exporter.RESTART_SECONDS - 1)
        later = T0 + 10 + exporter.RESTART_SECONDS
        self.assertAlmostEqual(2.0 * exporter.RESTART_SECONDS, self.cpu_time(later))
        self.assertLess(self.cpu_time(later), before)
        node = self.scrape('node', 'hv01', later)
        self.assertAlmostEqual(exporter.RESTART_SECONDS * 8 * (1 - (2 + 0.16) / 8),
                               get(node, 'node_cpu_seconds_total', mode='idle'))
        # The other hypervisor goes on counting.
        self.assertGreater(get(self.scrape('node', 'hv02', later), 'node_cpu_seconds_total',
                               mode='idle'), idle_hv02)
        self.assertEqual([], self.faults.listing(later))

    def test_impossible_runs_servers_faster_than_their_vcpus(self):
        self.fault('impossible', T0)
        self.update(T0)
        start = self.cpu_time(T0)  # scrapes in time order: the model never goes back
        rate = (self.cpu_time(T0 + 10) - start) / 10
        self.assertAlmostEqual(exporter.IMPOSSIBLE_FACTOR * 2.0, rate)
        self.assertGreater(rate, 4)  # its 4 vCPUs
        self.fault('clear', T0 + 10)
        self.update(T0 + 10)
        start = self.cpu_time(T0 + 10)
        self.assertAlmostEqual(2.0, (self.cpu_time(T0 + 20) - start) / 10)

    def test_saturate_reads_every_cpu_busy(self):
        self.fault('saturate', T0)
        self.update(T0)
        a, b = self.scrape('node', 'hv01', T0), self.scrape('node', 'hv01', T0 + 10)
        self.assertEqual(0, get(b, 'node_cpu_seconds_total', mode='idle')
                         - get(a, 'node_cpu_seconds_total', mode='idle'))

    def test_the_control_endpoint(self):
        poller = exporter.Poller(None, self.model, None, 30.0, self.faults)
        poller.hosts = self.hosts
        handler = type('Handler', (exporter.ControlHandler,), {'poller': poller})
        server = exporter.TargetServer(('127.0.0.1', 0), handler)
        server.target = None
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        self.addCleanup(exporter._stop_server, server)
        url = 'http://127.0.0.1:%d/fault' % server.server_address[1]

        def post(body):
            request = urllib.request.Request(url, data=body.encode(), method='POST')
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()
        self.assertEqual((200, 'fault down on hv01\n'), post('hv01 down'))
        self.assertEqual('down', self.faults.mode('hv01', time.time()))
        status, text = post('hv09 down')
        self.assertEqual(400, status)
        self.assertIn('hv01, hv02', text)
        self.assertEqual(400, post('hv02 melt')[0])
        self.assertEqual(200, post('hv01 clear')[0])
        self.assertIsNone(self.faults.mode('hv01', time.time()))


class FormatTest(unittest.TestCase):
    """The text format as Go's client_golang writes it."""

    def test_format_value_as_go(self):
        # strconv.FormatFloat(v, 'g', -1, 64), as client_golang writes values
        # (the real exporters' outputs in /tmp/feasibility.md show the same)
        for value, text in ((3, '3'), (0.5, '0.5'), (1e-07, '1e-07'), (0, '0'),
                            (4130.6, '4130.6'), (123456, '123456'), (1000000, '1e+06'),
                            (1234567, '1.234567e+06'), (8589934592, '8.589934592e+09'),
                            (2.4556761088e+10, '2.4556761088e+10'), (0.0001, '0.0001'),
                            (0.000386856, '0.000386856'), (1.293e-05, '1.293e-05'),
                            (49.377264000000004, '49.377264000000004'), (-2.5, '-2.5'),
                            (1795475836.944065, '1.795475836944065e+09'),
                            (float('inf'), '+Inf'), (float('-inf'), '-Inf'),
                            (float('nan'), 'NaN')):
            self.assertEqual(exporter.format_value(value), text, value)
        for v in ('1e-07', '3', '0.5', '+Inf', 'NaN', '8.589934592e+09'):
            self.assertTrue(SAMPLE_RE.match('x ' + v), v)

    def test_order_and_escaping(self):
        e = exporter.Exposition()
        e.add('b_total', 'counter', 'B with \\ and\nnewline',
              [({'cpu': '10', 'mode': 'x'}, 1), ({'cpu': '2', 'mode': 'a'}, 2),
               ({'mode': 'a', 'cpu': '10'}, 3)])
        e.add('a', 'gauge', 'A', [({'domain': 'we"ird\\name\nx'}, 1)])
        e.add('empty', 'gauge', 'left out', [])
        text = e.text()
        self.assertEqual(text, (
            '# HELP a A\n# TYPE a gauge\na{domain="we\\"ird\\\\name\\nx"} 1\n'
            '# HELP b_total B with \\\\ and\\nnewline\n# TYPE b_total counter\n'
            # by label values as strings, in the order of the sorted label names
            'b_total{cpu="10",mode="a"} 3\nb_total{cpu="10",mode="x"} 1\n'
            'b_total{cpu="2",mode="a"} 2\n'))
        parse(text)


HOSTS = [
    {'name': 'hv01.devcloud.test', 'service_host': 'hv01', 'host_ip': '127.0.0.11',
     'vcpus': 8, 'memory_mb': 16384},
    {'name': 'hv02.devcloud.test', 'service_host': 'hv02', 'host_ip': '127.0.0.12',
     'vcpus': 16, 'memory_mb': 32768}]


def _server(n, host, status='ACTIVE', vcpus=2, ram=4096, **extra):
    item = {'id': '%08x-0000-4000-8000-%012x' % (n, n), 'name': 'vm%d' % n,
            'host': host, 'status': status, 'vcpus': vcpus, 'ram': ram,
            'instance_name': 'instance-%08x' % n, 'flavor': 'm1.medium', 'flavor_id': '3',
            'disk': 40, 'user_id': 'a0' * 16, 'user_name': 'admin', 'project_id': 'b0' * 16,
            'project_name': 'demo', 'created': '2023-11-14T12:00:00Z',
            'image': '11111111-1111-4111-8111-111111111111',
            'metadata': {'devcloud:cpu': '0.5', 'devcloud:mem': '0.5'}}
    item.update(extra)
    return item


SERVERS = [_server(1, 'hv01.devcloud.test'),
           _server(2, 'hv01.devcloud.test', status='PAUSED', vcpus=1, ram=2048),
           _server(3, 'hv01.devcloud.test', status='SHUTOFF', vcpus=1, ram=2048),
           _server(4, 'hv01.devcloud.test', status='MIGRATING', vcpus=4, ram=8192,
                   flavor='m1.large', project_name='admin'),
           _server(5, 'hv02.devcloud.test'),
           _server(6, 'hv02.devcloud.test', status='ERROR')]
RUNNING = {'instance-00000001', 'instance-00000004'}
PAUSED = {'instance-00000002'}
STOPPED = {'instance-00000003'}


def fake_source(test, hosts=HOSTS, servers=SERVERS):
    """A FakeSource on a cloud.json in a temporary directory."""
    tmp = tempfile.mkdtemp()
    test.addCleanup(shutil.rmtree, tmp)
    path = os.path.join(tmp, 'cloud.json')
    with open(path, 'w') as f:
        json.dump({'hosts': hosts, 'servers': servers}, f)
    return exporter.FakeSource(path)


class FlavourTestCase(unittest.TestCase):
    """A model fed from the fake cloud, scraped 10 s apart."""

    def setUp(self):
        source = fake_source(self)
        self.hosts, self.servers = source.hosts(), source.servers()
        self.model = exporter.Model()
        self.model.update(self.hosts, self.servers, T0)

    def text(self, flavour, role, hypervisor='hv01.devcloud.test', now=T0 + 10):
        return exporter.Exporter(self.model, exporter.FLAVOURS[flavour],
                                 exporter.machine_uname()).render(role, hypervisor, now)

    def scrape(self, flavour, role, hypervisor='hv01.devcloud.test', now=T0 + 10):
        return parse(self.text(flavour, role, hypervisor, now))


class NodeExporterTest(FlavourTestCase):

    def test_node_series_as_node_exporter_names_them(self):
        for flavour in exporter.FLAVOURS:
            samples, types = self.scrape(flavour, 'node')
            self.assertEqual({
                'node_cpu_seconds_total': 'counter', 'node_cpu_guest_seconds_total': 'counter',
                'node_memory_MemTotal_bytes': 'gauge', 'node_memory_MemFree_bytes': 'gauge',
                'node_memory_MemAvailable_bytes': 'gauge', 'node_memory_Buffers_bytes': 'gauge',
                'node_memory_Cached_bytes': 'gauge',
                'node_pressure_cpu_waiting_seconds_total': 'counter',
                'node_pressure_io_waiting_seconds_total': 'counter',
                'node_pressure_io_stalled_seconds_total': 'counter',
                'node_pressure_memory_waiting_seconds_total': 'counter',
                'node_pressure_memory_stalled_seconds_total': 'counter',
                'node_scrape_collector_duration_seconds': 'gauge',
                'node_scrape_collector_success': 'gauge', 'node_uname_info': 'gauge'}, types)
            # no CPU "full": node_exporter has no node_pressure_cpu_stalled
            self.assertEqual({('cpu', 'mode')}, label_sets(samples, 'node_cpu_seconds_total'))
            modes = {dict(lbls)['mode'] for (n, lbls) in samples
                     if n == 'node_cpu_seconds_total'}
            self.assertEqual({'user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq',
                              'steal'}, modes)
            cpus = {dict(lbls)['cpu'] for (n, lbls) in samples if n == 'node_cpu_seconds_total'}
            self.assertEqual({str(i) for i in range(8)}, cpus)
            uname, = [dict(lbls) for (n, lbls) in samples if n == 'node_uname_info']
            self.assertEqual(['domainname', 'machine', 'nodename', 'release', 'sysname',
                              'version'], sorted(uname))
            self.assertEqual('hv01', uname['nodename'])       # the service host, short
            self.assertEqual(os.uname().release, uname['release'])
            self.assertEqual(16 * GIB, samples[('node_memory_MemTotal_bytes', ())])

    def test_units_are_seconds_and_bytes(self):
        a = self.scrape('kolla', 'node', now=T0 + 10)[0]
        b = self.scrape('kolla', 'node', now=T0 + 20)[0]
        # 8 CPUs: 80 CPU-seconds in 10 s, over all modes
        self.assertAlmostEqual(get(b, 'node_cpu_seconds_total') - get(a, 'node_cpu_seconds_total'),
                               80.0)
        # 2 + 4 running vCPUs at 50 %: 3 of the 3.16 busy cores are guests,
        # but the user time (0.85 of the busy time) includes them: 2.686
        guest = get(b, 'node_cpu_guest_seconds_total') - get(a, 'node_cpu_guest_seconds_total')
        user = get(b, 'node_cpu_seconds_total', mode='user') - get(
            a, 'node_cpu_seconds_total', mode='user')
        self.assertAlmostEqual(guest / 10, 0.85 * 3.16)
        self.assertAlmostEqual(guest, user)
        available = a[('node_memory_MemAvailable_bytes', ())]
        # 2 GiB for the host, half of 4 + 2 + 8 GiB for the servers
        self.assertEqual((16 - 2 - 7) * GIB, available)
        self.assertEqual(available, sum(a[('node_memory_%s_bytes' % k, ())]
                                        for k in ('MemFree', 'Cached', 'Buffers')))


class LibvirtExporterTest(FlavourTestCase):

    def test_inovex(self):
        samples, types = self.scrape('kolla', 'libvirt')
        info = [dict(lbls) for (n, lbls) in samples if n == 'libvirt_domain_openstack_info']
        self.assertEqual(RUNNING | PAUSED | STOPPED, {i['domain'] for i in info})
        self.assertEqual({('domain', 'flavor_name', 'instance_id', 'instance_name', 'project_id',
                           'project_name', 'user_id', 'user_name')},
                         label_sets(samples, 'libvirt_domain_openstack_info'))
        vm1 = next(i for i in info if i['domain'] == 'instance-00000001')
        self.assertEqual({'instance_id': '00000001-0000-4000-8000-000000000001',
                          'instance_name': 'vm1', 'flavor_name': 'm1.medium',
                          'user_name': 'admin', 'user_id': 'a0' * 16, 'project_name': 'demo',
                          'project_id': 'b0' * 16, 'domain': 'instance-00000001'}, vm1)
        self.assertEqual({('domain', 'state_desc')},
                         label_sets(samples, 'libvirt_domain_info_state'))
        self.assertEqual({'instance-00000001': 1, 'instance-00000002': 3,
                          'instance-00000003': 5, 'instance-00000004': 1},
                         series_of(samples, 'libvirt_domain_info_state'))
        for name in types:
            if name not in ('libvirt_up', 'libvirt_domains', 'libvirt_domain_openstack_info',
                            'libvirt_domain_info', 'libvirt_domain_info_state') \
                    and not name.startswith('libvirt_domain_vcpu_'):
                self.assertEqual({('domain',)}, label_sets(samples, name), name)
        self.assertEqual({('domain', 'vcpu')},
                         label_sets(samples, 'libvirt_domain_vcpu_time_seconds_total'))
        # info metrics for every domain; guest statistics for active ones
        self.assertEqual(RUNNING | PAUSED | STOPPED, set(series_of(
            samples, 'libvirt_domain_info_cpu_time_seconds_total')))
        self.assertEqual(RUNNING | PAUSED, set(series_of(
            samples, 'libvirt_domain_memory_stats_rss_bytes')))
        self.assertEqual(4, samples[('libvirt_domains', ())])
        # seconds of CPU: 2 vCPUs at 50 % for 10 s
        cpu = series_of(samples, 'libvirt_domain_info_cpu_time_seconds_total')
        self.assertAlmostEqual(10.0, cpu['instance-00000001'])
        self.assertEqual(0, cpu['instance-00000003'])
        self.assertEqual({'0': 5.0, '1': 5.0}, {
            dict(lbls)['vcpu']: v for (n, lbls), v in samples.items()
            if n == 'libvirt_domain_vcpu_time_seconds_total'
            and ('domain', 'instance-00000001') in lbls})
        # libvirt reports a delay for every vCPU of an active domain: 0 here,
        # the host has room
        delay = 'libvirt_domain_vcpu_delay_seconds_total'
        self.assertEqual('counter', types[delay])
        self.assertEqual({('domain', 'vcpu')}, label_sets(samples, delay))
        vcpus = {'instance-00000001': 2, 'instance-00000002': 1, 'instance-00000004': 4}
        self.assertEqual({(d, str(i)) for d, n in vcpus.items() for i in range(n)},
                         {(dict(lbls)['domain'], dict(lbls)['vcpu']) for (n, lbls) in samples
                          if n == delay})
        self.assertEqual({0.0}, {v for (n, _), v in samples.items() if n == delay})
        self.memory_in_bytes(samples, 'current_balloon_bytes')

    def memory_in_bytes(self, samples, balloon):
        """Bytes: assigned = maximum = RAM; rss = resident + QEMU, over max at 100 %."""
        memory = series_of(samples, 'libvirt_domain_info_memory_usage_bytes')
        self.assertEqual(4 * GIB, memory['instance-00000001'])
        self.assertEqual(4 * GIB, series_of(
            samples, 'libvirt_domain_info_maximum_memory_bytes')['instance-00000001'])
        m = 'libvirt_domain_memory_stats_'
        self.assertEqual(4 * GIB, series_of(samples, m + balloon)['instance-00000001'])
        self.assertEqual(2 * GIB + 160 * MIB,
                         series_of(samples, m + 'rss_bytes')['instance-00000001'])
        available = series_of(samples, m + 'available_bytes')['instance-00000001']
        usable = series_of(samples, m + 'usable_bytes')['instance-00000001']
        self.assertEqual(4 * GIB * 97 // 100 // 1024 * 1024, available)
        percent = series_of(samples, m + 'used_percent')['instance-00000001']
        self.assertEqual((available - usable) / (available / 100), percent)
        self.assertAlmostEqual(50.0, percent, places=3)
        unused = series_of(samples, m + 'unused_bytes')['instance-00000001']
        self.assertLess(unused, usable)
        for value in series_of(samples, m + 'available_bytes').values():
            self.assertEqual(0, value % 1024)       # KiB from libvirt, times 1024

    def test_rss_can_exceed_the_maximum(self):
        servers = [_server(1, 'hv01.devcloud.test', metadata={'devcloud:mem': '1'})]
        source = fake_source(self, servers=servers)
        self.model = exporter.Model()
        self.model.update(source.hosts(), source.servers(), T0)
        samples = self.scrape('kolla', 'libvirt')[0]
        rss = samples[('libvirt_domain_memory_stats_rss_bytes',
                       (('domain', 'instance-00000001'),))]
        self.assertEqual(4 * GIB + 160 * MIB, rss)
        self.assertEqual(100.0, samples[('libvirt_domain_memory_stats_used_percent',
                                         (('domain', 'instance-00000001'),))])

    def test_tinkoff(self):
        samples, types = self.scrape('kolla-legacy', 'libvirt')
        self.assertEqual({('domain', 'flavor', 'instance_name', 'project_name', 'project_uuid',
                           'root_type', 'root_uuid', 'user_name', 'user_uuid', 'uuid')},
                         label_sets(samples, 'libvirt_domain_info_meta'))
        meta = {dict(lbls)['domain']: dict(lbls) for (n, lbls) in samples
                if n == 'libvirt_domain_info_meta'}
        # running and shut-off domains; Tinkoff's filter leaves paused ones out
        self.assertEqual(RUNNING | STOPPED, set(meta))
        self.assertEqual(('00000001-0000-4000-8000-000000000001', 'vm1', 'image',
                          '11111111-1111-4111-8111-111111111111', 'b0' * 16),
                         tuple(meta['instance-00000001'][k] for k in (
                             'uuid', 'instance_name', 'root_type', 'root_uuid',
                             'project_uuid')))
        for name in types:
            if name not in ('libvirt_up', 'libvirt_domain_info_meta') \
                    and not name.startswith('libvirt_domain_vcpu_'):
                self.assertEqual({('domain',)}, label_sets(samples, name), name)
        self.assertIn('libvirt_domain_memory_stats_actual_balloon_bytes', types)
        self.assertIn('libvirt_domain_memory_stats_disk_cache_bytes', types)
        self.assertNotIn('libvirt_domain_memory_stats_current_balloon_bytes', types)
        # memory statistics always, 0 for a stopped domain
        rss = series_of(samples, 'libvirt_domain_memory_stats_rss_bytes')
        self.assertEqual(RUNNING | STOPPED, set(rss))
        self.assertEqual(0, rss['instance-00000003'])
        self.assertEqual(0, series_of(samples, 'libvirt_domain_memory_stats_used_percent')[
            'instance-00000003'])
        self.assertEqual(5, series_of(samples, 'libvirt_domain_info_vstate')['instance-00000003'])
        self.memory_in_bytes(samples, 'actual_balloon_bytes')
        self.assertAlmostEqual(10.0, series_of(
            samples, 'libvirt_domain_info_cpu_time_seconds_total')['instance-00000001'])
        # a delay per vCPU of the running domains, as their time; 0 here
        delay = 'libvirt_domain_vcpu_delay_seconds_total'
        self.assertEqual('counter', types[delay])
        self.assertEqual(label_sets(samples, 'libvirt_domain_vcpu_time_seconds_total'),
                         label_sets(samples, delay))
        self.assertEqual(RUNNING, set(series_of(samples, delay)))
        self.assertEqual(6, len([1 for (n, _) in samples if n == delay]))
        self.assertEqual({0.0}, {v for (n, _), v in samples.items() if n == delay})

    def test_vexxhost(self):
        a = self.scrape('helm', 'libvirt')[0]
        samples, types = self.scrape('helm', 'libvirt', now=T0 + 20)
        for name in types:
            want = {'libvirtd_domain_vcpu_state': ('uuid', 'vcpu'),
                    'libvirtd_domain_vcpu_time': ('uuid', 'vcpu'),
                    'libvirtd_domain_seconds': ('instance_type', 'project_id', 'user_id',
                                                'uuid')}.get(name, ('uuid',))
            self.assertEqual({want}, label_sets(samples, name), name)
        uuid1 = '00000001-0000-4000-8000-000000000001'
        uuid3 = '00000003-0000-4000-8000-000000000003'
        # nanoseconds: 1 core for 10 s
        cpu = series_of(samples, 'libvirtd_domain_cpu_time', 'uuid')
        before = series_of(a, 'libvirtd_domain_cpu_time', 'uuid')
        self.assertAlmostEqual(1e10, cpu[uuid1] - before[uuid1], delta=1)
        self.assertNotIn(uuid3, cpu)            # no CPU statistics for a stopped domain
        # KiB
        self.assertEqual(4 * 1024 * 1024,
                         series_of(samples, 'libvirtd_domain_balloon_maximum', 'uuid')[uuid1])
        self.assertEqual(2 * 1024 * 1024,
                         series_of(samples, 'libvirtd_domain_balloon_current', 'uuid')[uuid3])
        self.assertEqual(2 * 1024 * 1024 + 160 * 1024,
                         series_of(samples, 'libvirtd_domain_balloon_rss', 'uuid')[uuid1])
        self.assertNotIn(uuid3, series_of(samples, 'libvirtd_domain_balloon_rss', 'uuid'))
        self.assertEqual(5, series_of(samples, 'libvirtd_domain_domain_state', 'uuid')[uuid3])
        self.assertEqual(2, len([1 for (n, lbls) in samples if n == 'libvirtd_domain_vcpu_state'
                                 and ('uuid', uuid1) in lbls]))
        self.assertNotIn('libvirtd_domain_info_virtual_cpus', types)  # no vCPU count
        seconds = series_of(samples, 'libvirtd_domain_seconds', 'uuid')[uuid1]
        self.assertEqual(T0 + 20 - exporter._epoch('2023-11-14T12:00:00Z'), seconds)

    def test_kumina(self):
        samples, types = self.scrape('debian', 'libvirt')
        labels = {('domain', 'flavor', 'name', 'project_name', 'uuid')}
        for name in types:
            if name not in ('libvirt_up', 'libvirt_domains_number'):
                self.assertEqual(labels, label_sets(samples, name), name)
        # active domains only, paused ones too
        self.assertEqual(RUNNING | PAUSED, set(series_of(samples, 'libvirt_domain_state_code')))
        self.assertEqual(3, samples[('libvirt_domains_number', ())])
        self.assertNotIn('libvirt_domain_memory_stats_rss_bytes', types)
        self.assertAlmostEqual(10.0, series_of(
            samples, 'libvirt_domain_info_cpu_time_seconds_total')['instance-00000001'])
        vm4 = next(dict(lbls) for (n, lbls) in samples if n == 'libvirt_domain_state_code'
                   and ('domain', 'instance-00000004') in lbls)
        self.assertEqual({'name': 'vm4', 'flavor': 'm1.large', 'project_name': 'admin'},
                         {k: vm4[k] for k in ('name', 'flavor', 'project_name')})

    def test_delay_on_an_oversubscribed_host(self):
        # vm1 (2 vCPUs), vm4 and vm7 (4 each) ask all of them: 10 + 0.16 of
        # 8 threads. vm1 gets its 2, vm4 and vm7 (8 - 0.16 - 2) / 2 = 2.92
        # each and wait 1.08 per second, a quarter of it on each vCPU.
        busy = {'devcloud:cpu': '1', 'devcloud:mem': '0.5'}
        servers = [_server(1, 'hv01.devcloud.test', metadata=busy),
                   _server(4, 'hv01.devcloud.test', vcpus=4, metadata=busy),
                   _server(7, 'hv01.devcloud.test', vcpus=4, metadata=busy)]
        source = fake_source(self, servers=servers)
        self.model = exporter.Model()
        self.model.update(source.hosts(), source.servers(), T0)
        want = {('instance-00000001', '0'): 0.0, ('instance-00000001', '1'): 0.0}
        want.update({('instance-%08x' % n, str(i)): 2.7 for n in (4, 7) for i in range(4)})
        delay = 'libvirt_domain_vcpu_delay_seconds_total'
        for flavour, help_text in (
                ('kolla', 'Time the vCPU spent waiting in the queue instead of running. '
                          'Exposed to the VM as steal time.'),
                ('kolla-legacy', "Amount of CPU time used by the domain's VCPU, in seconds. "
                                 "Vcpu's delay metric. Time the vcpu thread was enqueued by "
                                 'the host scheduler, but was waiting in the queue instead of '
                                 'running. Exposed to the VM as a steal time.')):
            text = self.text(flavour, 'libvirt')
            self.assertIn('# HELP %s %s\n# TYPE %s counter\n' % (delay, help_text, delay),
                          text)
            samples = parse(text)[0]
            got = {(dict(lbls)['domain'], dict(lbls)['vcpu']): round(v, 9)
                   for (n, lbls), v in samples.items() if n == delay}
            self.assertEqual(want, got, flavour)
            # what they ran: vm4 2.92 of the 4 cores it asked for, in 10 s
            time = {(dict(lbls)['domain'], dict(lbls)['vcpu']): round(v, 9)
                    for (n, lbls), v in samples.items()
                    if n == 'libvirt_domain_vcpu_time_seconds_total'}
            self.assertEqual(7.3, time[('instance-00000004', '3')], flavour)
            self.assertAlmostEqual(29.2, series_of(
                samples, 'libvirt_domain_info_cpu_time_seconds_total')['instance-00000004'])
        # kumina and vexxhost export no delay
        for flavour in ('debian', 'helm'):
            types = self.scrape(flavour, 'libvirt')[1]
            self.assertEqual([], [name for name in types if 'delay' in name], flavour)

    def test_vcpu_wait_is_there_and_0(self):
        # libvirt reports vcpu.<n>.wait beside time and delay, 0 without
        # schedstats: inovex and Tinkoff show it, for the vCPUs they show
        wait = 'libvirt_domain_vcpu_wait_seconds_total'
        for flavour, help_text in (
                ('kolla', 'Time the vCPU wants to run, but the host scheduler has something '
                          'else running ahead of it.'),
                ('kolla-legacy', "Vcpu's wait_sum metric. CONFIG_SCHEDSTATS has to be "
                                 'enabled')):
            text = self.text(flavour, 'libvirt')
            self.assertIn('# HELP %s %s\n# TYPE %s counter\n' % (wait, help_text, wait), text)
            samples = parse(text)[0]
            keys = {lbls for (n, lbls) in samples if n == wait}
            # vm1, vm2 (paused) and vm4's 2 + 1 + 4 vCPUs; Tinkoff lists no paused ones
            self.assertEqual({'kolla': 7, 'kolla-legacy': 6}[flavour], len(keys))
            self.assertEqual({lbls for (n, lbls) in samples
                              if n == 'libvirt_domain_vcpu_delay_seconds_total'}, keys)
            self.assertEqual({0.0}, {v for (n, _), v in samples.items() if n == wait})
        for flavour in ('debian', 'helm'):
            types = self.scrape(flavour, 'libvirt')[1]
            self.assertEqual([], [name for name in types if 'wait' in name], flavour)

    def test_an_empty_hypervisor(self):
        for flavour in exporter.FLAVOURS:
            samples, _ = self.scrape(flavour, 'libvirt', 'hv02.devcloud.test')
            self.assertTrue(samples)
        samples, types = self.scrape('kolla', 'libvirt', 'hv02.devcloud.test')
        self.assertEqual(1, samples[('libvirt_domains', ())])     # the ERROR one has none


class TargetsTest(unittest.TestCase):

    def hosts(self):
        return [exporter.Host('hv02.devcloud.test', 16, 32768, 'hv02', '127.0.0.12'),
                exporter.Host('hv01.devcloud.test', 8, 16384, 'hv01', '127.0.0.11')]

    def docs(self, flavour, hosts=None):
        found, problems = exporter.endpoints(exporter.FLAVOURS[flavour], hosts or self.hosts())
        self.assertEqual([], problems)
        return {role: exporter.targets_doc(found, role) for role in exporter.ROLES}

    def test_kolla(self):
        self.assertEqual({'node': [{'targets': ['127.0.0.11:9100'], 'labels': {}},
                                   {'targets': ['127.0.0.12:9100'], 'labels': {}}],
                          'libvirt': [{'targets': ['127.0.0.11:9177'], 'labels': {}},
                                      {'targets': ['127.0.0.12:9177'], 'labels': {}}]},
                         self.docs('kolla'))

    def test_kolla_legacy(self):
        docs = self.docs('kolla-legacy')
        self.assertEqual({'targets': ['127.0.0.11:9100'], 'labels': {'instance': 'hv01'}},
                         docs['node'][0])
        self.assertEqual({'targets': ['127.0.0.12:9177'], 'labels': {'instance': 'hv02'}},
                         docs['libvirt'][1])

    def test_helm(self):
        docs = self.docs('helm')
        self.assertEqual({'targets': ['127.0.0.11:9100'],
                          'labels': {'hostname': 'hv01.devcloud.test'}}, docs['node'][0])
        libvirt = docs['libvirt'][0]
        self.assertEqual(['127.0.0.11:9474'], libvirt['targets'])
        pod = libvirt['labels'].pop('pod')
        self.assertRegex(pod, r'^libvirt-libvirt-default-[bcdfghjklmnpqrstvwxz2456789]{5}$')
        self.assertEqual(pod, exporter.helm_pod('hv01.devcloud.test'))
        self.assertNotEqual(pod, exporter.helm_pod('hv02.devcloud.test'))
        self.assertEqual({'namespace': 'openstack', 'container': 'libvirt-exporter',
                          'endpoint': 'metrics'}, libvirt['labels'])

    def test_debian_on_a_network_of_its_own(self):
        self.assertEqual({'node': [{'targets': ['127.0.1.11:9100'], 'labels': {}},
                                   {'targets': ['127.0.1.12:9100'], 'labels': {}}],
                          'libvirt': [{'targets': ['127.0.1.11:9177'], 'labels': {}},
                                      {'targets': ['127.0.1.12:9177'], 'labels': {}}]},
                         self.docs('debian'))

    def test_no_address_of_its_own(self):
        hosts = self.hosts() + [
            exporter.Host('hv03.devcloud.test', 8, 8192, 'hv03', '127.0.0.12'),
            exporter.Host('hv04.devcloud.test', 8, 8192, 'hv04', '192.0.2.4'),
            exporter.Host('hv05.devcloud.test', 8, 8192, 'hv05', None)]
        found, problems = exporter.endpoints(exporter.FLAVOURS['kolla'], hosts)
        self.assertEqual({'hv01.devcloud.test', 'hv02.devcloud.test'},
                         {e.hypervisor for e in found})
        self.assertEqual(3, len(problems))
        self.assertIn("hv03.devcloud.test: address 127.0.0.12 is hv02.devcloud.test's already",
                      problems)

    def test_prometheus_templates_name_the_flavours_jobs(self):
        for flavour in exporter.FLAVOURS.values():
            path = os.path.join(CODE, 'prometheus', '%s.yml.tmpl' % flavour.name)
            with open(path) as f:
                config = yaml.safe_load(f.read().replace('@TARGETS@', '/t'))
            self.assertEqual('2s', config['global']['scrape_interval'])
            jobs = {}
            for job in config['scrape_configs']:
                name = job['job_name']
                for relabel in job.get('relabel_configs', []):
                    if relabel.get('target_label') == 'job':
                        name = relabel['replacement']
                files, = [f for sd in job['file_sd_configs'] for f in sd['files']]
                jobs[name] = (files, job.get('honor_labels', False))
            self.assertEqual({flavour.node_job: ('/t/node.json', False),
                              flavour.libvirt_job: ('/t/libvirt.json',
                                                    flavour.name.startswith('kolla'))},
                             jobs, flavour.name)


class NodeXmlTest(unittest.TestCase):

    def test_domains_with_nova_metadata(self):
        source = fake_source(self)
        host = source.hosts()[0]
        text = exporter.node_xml(host, source.servers(), '34.0.0')
        root = ET.fromstring(text)
        nova = '{%s}' % exporter.NOVA_NS
        test = '{%s}' % exporter.TEST_NS
        domains = {d.findtext('name'): d for d in root.findall('domain')}
        self.assertEqual(RUNNING | PAUSED, set(domains))
        self.assertEqual('16777216', root.findtext('memory'))
        vm1 = domains['instance-00000001']
        self.assertEqual('00000001-0000-4000-8000-000000000001', vm1.findtext('uuid'))
        self.assertEqual('4194304', vm1.findtext('memory'))
        self.assertEqual('KiB', vm1.find('memory').get('unit'))
        self.assertEqual('2', vm1.findtext('vcpu'))
        self.assertIsNone(vm1.find(test + 'runstate'))
        self.assertEqual('3', domains['instance-00000002'].findtext(test + 'runstate'))
        meta = vm1.find('metadata/%sinstance' % nova)
        self.assertEqual(['package', 'name', 'creationTime', 'flavor', 'image', 'owner', 'root',
                          'ports'], [child.tag[len(nova):] for child in meta])
        self.assertEqual('34.0.0', meta.find(nova + 'package').get('version'))
        self.assertEqual('vm1', meta.findtext(nova + 'name'))
        self.assertEqual('2023-11-14 12:00:00', meta.findtext(nova + 'creationTime'))
        flavor = meta.find(nova + 'flavor')
        self.assertEqual(('m1.medium', '3', '4096', '2'),
                         (flavor.get('name'), flavor.get('id'), flavor.findtext(nova + 'memory'),
                          flavor.findtext(nova + 'vcpus')))
        user = meta.find('%sowner/%suser' % (nova, nova))
        project = meta.find('%sowner/%sproject' % (nova, nova))
        self.assertEqual(('admin', 'a0' * 16, 'demo', 'b0' * 16),
                         (user.text, user.get('uuid'), project.text, project.get('uuid')))


class RecordingListeners(object):
    def __init__(self):
        self.servers = {}
        self.wanted = []

    def reconcile(self, wanted):
        self.wanted.append(dict(wanted))

    def close(self):
        pass


class FakeReal(object):
    def __init__(self, tmp, works=True):
        self.tmp = tmp
        self.works = works
        self.key = None
        self.ensured = []
        self.stopped = 0

    def xml_path(self, host):
        return os.path.join(self.tmp, '%s.xml' % exporter.service_host_of(host))

    def ensure(self, host, ip):
        self.ensured.append((host.name, ip))
        self.key = (exporter.service_host_of(host), ip) if self.works else None
        return self.works

    def stop(self):
        self.stopped += 1
        self.key = None


class PublisherTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        source = fake_source(self)
        self.hosts, self.servers = source.hosts(), source.servers()

    def test_debian_real_exporters_for_the_first_hypervisor(self):
        listeners, real = RecordingListeners(), FakeReal(self.tmp)
        publisher = exporter.Publisher(exporter.FLAVOURS['debian'], self.tmp, listeners, real)
        self.assertTrue(publisher.publish(self.hosts, self.servers))
        self.assertEqual([('hv01.devcloud.test', '127.0.1.11')], real.ensured)
        self.assertEqual('hv01.devcloud.test', publisher.real_host)
        # the simulated exporters leave its two addresses alone
        self.assertEqual([{('127.0.1.12', 9100): ('node', 'hv02.devcloud.test'),
                           ('127.0.1.12', 9177): ('libvirt', 'hv02.devcloud.test')}],
                         listeners.wanted)
        with open(os.path.join(self.tmp, 'hv01.xml')) as f:
            self.assertEqual(exporter.node_xml(self.hosts[0], self.servers,
                                               publisher.package), f.read())
        with open(os.path.join(self.tmp, 'node.json')) as f:
            self.assertEqual(['127.0.1.11:9100', '127.0.1.12:9100'],
                             [t['targets'][0] for t in json.load(f)])
        self.assertEqual(['hv01.xml', 'libvirt.json', 'node.json'], sorted(os.listdir(self.tmp)))

    def test_simulated_when_the_real_ones_cannot_run(self):
        listeners, real = RecordingListeners(), FakeReal(self.tmp, works=False)
        publisher = exporter.Publisher(exporter.FLAVOURS['debian'], self.tmp, listeners, real)
        publisher.publish(self.hosts, self.servers)
        self.assertIsNone(publisher.real_host)
        self.assertEqual(4, len(listeners.wanted[-1]))

    def test_other_flavours_simulate_every_hypervisor(self):
        listeners = RecordingListeners()
        publisher = exporter.Publisher(exporter.FLAVOURS['helm'], self.tmp, listeners)
        publisher.publish(self.hosts, self.servers)
        self.assertEqual({('127.0.0.11', 9100), ('127.0.0.11', 9474), ('127.0.0.12', 9100),
                          ('127.0.0.12', 9474)}, set(listeners.wanted[-1]))

    def test_a_real_hypervisor_gets_targets_but_no_simulated_listeners(self):
        # hv01 on the libvirt driver (devcloud start --real): its own
        # exporters serve its targets; in flavour debian, Debian's real
        # exporters for a fake one go to the first simulated hypervisor
        hosts = [self.hosts[0]._replace(real=True)] + self.hosts[1:]
        for flavour, real_ones, simulated in (
                ('kolla', None, {'hv02.devcloud.test'}),
                ('debian', FakeReal(self.tmp), set())):
            listeners = RecordingListeners()
            publisher = exporter.Publisher(exporter.FLAVOURS[flavour], self.tmp, listeners,
                                           real_ones)
            publisher.publish(hosts, self.servers)
            self.assertEqual(simulated,
                             {hypervisor for _, hypervisor in listeners.wanted[-1].values()})
            with open(os.path.join(self.tmp, 'node.json')) as f:
                self.assertEqual(2, len(json.load(f)), flavour)
        self.assertEqual([('hv02.devcloud.test', '127.0.1.12')], real_ones.ensured)


class PollerTest(unittest.TestCase):

    def test_poller_writes_on_change_and_survives_errors(self):
        class Source(object):
            hosts_list = [exporter.Host('hv01', 4, 8192, 'hv01', '127.0.0.11')]
            fail = False

            def hosts(self):
                if self.fail:
                    raise RuntimeError('cloud down')
                return list(self.hosts_list)

            def servers(self):
                if self.fail:
                    raise RuntimeError('cloud down')
                return [srv('a', 'hv01', cpu='0.5')]

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'node.json')
            source = Source()
            model = exporter.Model()
            publisher = exporter.Publisher(exporter.FLAVOURS['kolla'], tmp, RecordingListeners())
            poller = exporter.Poller(source, model, publisher, 0)
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
            samples = scrape_all(model, 'hv01', T0 + 6)
            self.assertAlmostEqual(
                get(samples, 'libvirt_domain_info_cpu_time_seconds_total'), 12.0)
            source.fail = False
            source.hosts_list = source.hosts_list + [
                exporter.Host('hv02', 4, 8192, 'hv02', '127.0.0.12')]
            poller.poll(T0 + 6)
            with open(path) as f:
                self.assertEqual(['127.0.0.11:9100', '127.0.0.12:9100'],
                                 [t['targets'][0] for t in json.load(f)])

    def test_relists_hypervisors_while_one_has_no_address(self):
        class Source(object):
            listed = 0

            def hosts(self):
                self.listed += 1
                return [exporter.Host('hv01', 4, 8192, 'hv01', '127.0.0.1'),
                        exporter.Host('hv02', 4, 8192, 'hv02', '127.0.0.1')]

            def servers(self):
                return []

        source = Source()
        publisher = exporter.Publisher(exporter.FLAVOURS['kolla'], None, RecordingListeners())
        poller = exporter.Poller(source, exporter.Model(), publisher, 30)
        with self.assertLogs('devcloud-exporter', 'WARNING'):
            poller.poll(T0)
        poller.poll(T0 + 2)
        self.assertEqual(2, source.listed)


def _free_port(ip):
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def _scrape_url(url, timeout=5):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@unittest.skipUnless(exporter.RealExporters.available(), "Debian's exporters not installed")
class RealExportersTest(unittest.TestCase):
    """The simulated kumina and node_exporter series have the families and
    label sets of Debian's real binaries (on 127.0.0.1, random ports)."""

    def run_binary(self, *command):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)

    def shape(self, samples):
        return {(name, tuple(k for k, _ in lbls)) for (name, lbls) in samples}

    def test_kumina_as_the_real_one(self):
        source = fake_source(self)
        host, servers = source.hosts()[0], source.servers()
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        path = os.path.join(tmp, 'hv01.xml')
        exporter.write_atomic(path, exporter.node_xml(host, servers, '34.0.0'))
        port = _free_port('127.0.0.1')
        self.run_binary(exporter.RealExporters.LIBVIRT, '--web.listen-address=127.0.0.1:%d' % port,
                        '--libvirt.uri=test://' + path, '--libvirt.export-nova-metadata')
        real = parse(_scrape_url('http://127.0.0.1:%d/metrics' % port))[0]
        model = exporter.Model()
        model.update([host], servers, T0)
        simulated = parse(exporter.render_kumina(model.view(host.name, T0 + 10)))[0]
        # the real one adds block statistics (the test driver makes them up
        # from the clock) and the Go runtime's series, which are not simulated
        real_shape = {s for s in self.shape(real)
                      if not s[0].startswith(('go_', 'process_', 'promhttp_',
                                              'libvirt_domain_block_stats_'))}
        self.assertEqual(real_shape, self.shape(simulated))
        for name in ('libvirt_domain_state_code', 'libvirt_domain_info_virtual_cpus',
                     'libvirt_domain_info_maximum_memory_bytes',
                     'libvirt_domain_info_memory_usage_bytes'):
            self.assertEqual({k: v for k, v in real.items() if k[0] == name},
                             {k: v for k, v in simulated.items() if k[0] == name}, name)

    def test_node_exporter_as_the_real_one(self):
        port = _free_port('127.0.0.1')
        self.run_binary(exporter.RealExporters.NODE, '--web.listen-address=127.0.0.1:%d' % port,
                        '--collector.disable-defaults', '--collector.cpu',
                        '--collector.meminfo', '--collector.pressure', '--collector.uname',
                        '--web.disable-exporter-metrics')
        real = parse(_scrape_url('http://127.0.0.1:%d/metrics' % port))[0]
        model = exporter.Model()
        host = exporter.Host('hv01', os.cpu_count(), 16384, 'hv01', '127.0.0.11')
        model.update([host], [], T0)
        simulated = parse(exporter.render_node(model.view('hv01', T0 + 10),
                                               exporter.machine_uname()))[0]
        # every simulated family and label set is the real one's
        real_shape = self.shape(real)
        if not os.path.exists('/proc/pressure/cpu'):
            real_shape |= {s for s in self.shape(simulated) if s[0].startswith('node_pressure')}
        self.assertLessEqual(self.shape(simulated), real_shape)
        uname = lambda samples: {k: v for k, v in next(  # noqa: E731
            dict(lbls) for (n, lbls) in samples if n == 'node_uname_info').items()
            if k != 'nodename'}
        self.assertEqual(uname(real), uname(simulated))


if __name__ == '__main__':
    unittest.main()
