#!/usr/bin/env python3
"""Simulated node_exporter and libvirt exporters for the devcloud.

Reads the servers and hypervisors of a (devcloud) OpenStack and serves, for
every hypervisor, what a real node_exporter and a real libvirt exporter on
that host would show, computed from a load model, on the addresses and with
the Prometheus target labels of a real deployment: the *flavour*.  The
model is driven by server metadata, so a test sets the load of a server with
``openstack server set --property devcloud:cpu=0.9 SERVER``, and after a live
migration the load follows the server to its new host (a closed loop).

Usage::

    exporter.py --os-cloud devcloud --flavour kolla --listen 127.0.0.1:9180 \\
        --targets-dir DIR --libvirt-dir DIR          # OS_CLIENT_CONFIG_FILE
    exporter.py --fake-cloud cloud.json ...          # no OpenStack, see below

Every hypervisor gets its own listeners, each serving ``/metrics``: a
node_exporter on ``ADDR:9100`` and a libvirt exporter on ``ADDR:PORT``.
The control address (``--listen``) serves ``/healthz`` (503 until the first
successful poll, and while a hypervisor has no address of its own), ``/``
(the endpoints and the faults), ``POST /flavour`` (the flavour's name as the
body: another flavour's endpoints at once, the model's state kept) and
``POST /fault`` (``HYPERVISOR MODE`` as the body: a fault of that
hypervisor's exporters, see Faults).  Prometheus finds the endpoints
through file_sd files in ``--targets-dir``: ``node.json`` and
``libvirt.json``, one target per hypervisor with exactly the target labels
the deployment gives it, rewritten atomically when they change.

Flavours (what is rendered and where; the load model is the same):

``kolla``
    kolla-ansible 2024.1 and later: node_exporter and inovex
    prometheus-libvirt-exporter 2.x (port 9177) on the hypervisor's API
    address, Nova's ``host_ip``; jobs ``node`` and ``libvirt_exporter``
    (honor_labels), ``instance="<host_ip>:<port>"``.  Domain series carry
    ``domain`` (the libvirt name, ``instance-%08x``) only; Nova's data is on
    ``libvirt_domain_openstack_info``.
``kolla-legacy``
    kolla-ansible up to 2023.2 with ``prometheus_instance_label:
    "{{ ansible_facts.hostname }}"``: the same jobs and addresses, but
    ``instance="<short host name>"``; Tinkoff libvirt-exporter 2.3.3
    (``libvirt_domain_info_meta``; paused domains are not listed).
``helm``
    openstack-helm: job ``node-exporter`` with ``hostname="<node name>"``,
    and vexxhost libvirtd_exporter (port 9474, ``--libvirt.nova``) scraped
    by a prometheus-operator PodMonitor: job ``openstack/libvirt-exporter``,
    labels ``namespace``, ``container``, ``pod``, ``endpoint``; series keyed
    by ``uuid``, CPU time in nanoseconds, memory in KiB.
``debian``
    Debian's packages on a separate monitoring network: jobs ``node`` and
    ``libvirt``, exporters on 127.0.1.N for the hypervisor at 127.0.0.N, so
    ``instance`` is not Nova's host_ip; kumina libvirt_exporter 0.2.0 with
    ``--libvirt.export-nova-metadata`` (labels ``domain``, ``uuid``,
    ``name``, ``flavor``, ``project_name``; active domains only).  The first
    hypervisor (by service host) runs the real Debian binaries instead:
    ``prometheus-node-exporter`` in its own UTS namespace (hostname = the
    service host) and ``prometheus-libvirt-exporter`` on libvirt's test
    driver, reading ``--libvirt-dir/<host>.xml`` that this exporter writes
    from the servers on that hypervisor at every poll.

Load model
----------
Server metadata (values are strings, as in Nova):

* ``devcloud:cpu``: fraction of the server's vCPUs busy (default 0.1);
* ``devcloud:mem``: fraction of its RAM resident (default 0.3).

A value is a number ``0.8`` or a profile ``LO~HI@PERIOD``, e.g. ``0.2~0.9@600``:
``LO + (HI - LO) * (1 + sin(2*pi*(t/PERIOD + phase))) / 2`` with ``t`` the Unix
time and ``phase`` in [0, 1) derived from the server id (crc32), so servers
with the same profile differ.  Fractions are clamped to [0, 1]; an invalid
value counts as the default.

Only running servers load their host: ACTIVE and MIGRATING (a live migration
keeps the guest running) use CPU and memory; PAUSED uses memory only; any
other status (SHUTOFF, SUSPENDED, ERROR, ...) uses nothing.

For a hypervisor with ``T`` threads (Placement VCPU total) and ``M`` MiB
(Placement MEMORY_MB total)::

    ask      = cpu_frac * vcpus                          a server's CPU demand, cores
    d        = sum(ask) + 0.02 * T                       CPU demand, cores
    busy     = min(T, d)                                 cores busy
    got      = min(ask, L)                               cores a server gets
    delay    = ask - got                                 cores it waits, queued
    m        = sum(mem_frac * ram_mib) + 2048            memory demand, MiB
    used     = min(M, m)                                 MiB used
    p_cpu    = pressure(d / T, knee=0.7)                 PSI cpu "some"
    p_mem    = pressure(m / M, knee=0.9)                 PSI memory "some"
    pressure(x, k) = min(1, 0.1 * (max(0, x - k) / (1 - k))**2
                            + 2 * max(0, x - 1)**1.5)

``pressure`` is 0 below the knee, 0.1 at full load (x = 1), ~0.46 at 20 %
over, 1 from ~40 % over; it is continuous with a continuous slope.

CPU is shared as Linux CFS shares it between cgroups of equal weight: the
host's own 0.02 * T first, then max-min fairly per server (each domain is a
cgroup of its own; Nova sets no weight), evenly over a server's vCPUs.  If
``d <= T`` every server gets what it asks (``L`` is unbounded, the delay
0); otherwise ``L`` is the level at which ``sum(got) = 0.98 * T``: servers
asking less than ``L`` get what they ask, the others ``L`` each, and the
rest of their demand is delay, libvirt's ``vcpu.<n>.delay`` (the time a
runnable vCPU thread waited in the run queue, from its schedstat), which
the guest sees as steal time.

Counters integrate their rates over real time, piecewise constant between
polls, and are extrapolated to the scrape time so every scrape sees a
fresh, monotonic value.  What the series show:

* ``node_cpu_seconds_total{cpu, mode}``, cpu 0..T-1, busy time spread
  evenly: per CPU user = 0.85 * busy/T, system = 0.15 * busy/T,
  idle = 1 - busy/T; nice, iowait, irq, softirq and steal stay 0 (the
  host's, not its guests'); ``node_cpu_guest_seconds_total{mode="user"}``:
  sum(got) spread evenly (at most the user time, which includes it);
* ``node_memory_MemTotal_bytes`` = M, ``MemAvailable_bytes`` = M - used, of
  which MemFree 70 %, Cached 27 %, Buffers 3 %;
* ``node_pressure_cpu_waiting_seconds_total`` (rate p_cpu),
  ``node_pressure_memory_waiting_seconds_total`` (rate p_mem),
  ``node_pressure_memory_stalled_seconds_total`` (rate p_mem / 2), io 0;
* per domain: CPU time at got while running and, where the exporter shows
  it, delay at ask - got (libvirt reports it, 0 or not, for every vCPU of
  an active domain), both spread evenly over its vCPUs, and a vCPU wait
  of 0 (libvirt's without schedstats); assigned
  memory (balloon) = maximum = the flavor's RAM; resident (rss) = mem_frac
  * RAM + 160 MiB of QEMU's own, so it can exceed the maximum; in the
  guest, 97 % of the RAM is visible (``available``) and mem_frac of that is
  used (``usable`` the rest, a quarter of it page cache, three quarters
  ``unused``), so ``used_percent`` = 100 * mem_frac.

Domains: ACTIVE and MIGRATING servers are running domains, PAUSED ones
paused, SHUTOFF and SUSPENDED ones shut off (defined, not active); other
servers have none.  A server's CPU and delay counters are kept per server
id, not per host: they continue across a migration and are shown under the
server's current host only.  A host's counters start at 0 when the host
first appears.

--fake-cloud FILE replaces OpenStack by a JSON file, re-read every poll::

    {"hosts": [{"name": "hv01.devcloud.test", "service_host": "hv01",
                "host_ip": "127.0.0.11", "vcpus": 8, "memory_mb": 16384}],
     "servers": [{"id": "...", "name": "vm1", "host": "hv01.devcloud.test",
                  "status": "ACTIVE", "vcpus": 2, "ram": 4096,
                  "metadata": {"devcloud:cpu": "0.8"},
                  "instance_name": "instance-0000002a", "flavor": "m1.medium",
                  "user_id": "...", "user_name": "admin",
                  "project_id": "...", "project_name": "admin"}]}

A host with ``"real": true`` (from OpenStack: a hypervisor whose type is not
the fake driver's, one of ``devcloud start --real``) gets its targets in the
targets files like the others, but no simulated listeners: its own
exporters (Debian's libvirt exporter and realhv_node.py) serve it there.
"""

import argparse
import collections
import datetime
import http.server
import ipaddress
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib
from xml.sax import saxutils

LOG = logging.getLogger('devcloud-exporter')

DEFAULT_CPU = 0.1
DEFAULT_MEM = 0.3
CPU_OVERHEAD = 0.02             # fraction of the host's threads, always busy
MEM_OVERHEAD_MIB = 2048         # host's own resident memory
USER_SHARE = 0.85               # of busy CPU time; the rest is "system"
CPU_KNEE = 0.7
MEM_KNEE = 0.9
RUNNING = frozenset(('ACTIVE', 'MIGRATING'))
MIB = 1024 * 1024

# Rendering only (the load model above does not use these).
MEM_FULL_SHARE = 0.5            # PSI memory "full" (stalled) of "some"
HOST_FREE_SHARE, HOST_CACHED_SHARE = 0.70, 0.27   # of MemAvailable; Buffers the rest
QEMU_OVERHEAD_MIB = 160         # a QEMU process's own resident memory
GUEST_VISIBLE_PERCENT = 97      # of its RAM a guest kernel shows as MemTotal
GUEST_CACHE_PERCENT = 25        # of a guest's usable memory that is page cache
BALLOON_PERIOD = 10             # Nova's [libvirt] mem_stats_period_seconds
# libvirt reports vcpu.<n>.wait for every vCPU of an active domain: the
# wait_sum of /proc/<pid>/task/<tid>/sched, 0 when the line is missing, as
# it is while kernel.sched_schedstats is off (the default).
VCPU_WAIT = 0

DOMAIN_RUNNING, DOMAIN_PAUSED, DOMAIN_SHUTOFF = 1, 3, 5

# real: a hypervisor on the libvirt driver (devcloud start --real), whose
# own exporters serve it; it gets targets but no simulated listeners.
Host = collections.namedtuple('Host', 'name threads mem_mib service_host ip real',
                              defaults=(None, None, False))
Server = collections.namedtuple(
    'Server', 'id name host status vcpus ram_mib metadata instance_name flavor_name '
    'flavor_id disk_gb user_id user_name project_id project_name created image_id',
    defaults=(None,) * 11)


def service_host_of(host):
    """The compute service host of a hypervisor (short name if unknown)."""
    return host.service_host or host.name.split('.')[0]


# ------------------------------------------------------------------ faults

RESTART_SECONDS = 5.0   # a restarted exporter answers no scrape this long
IMPOSSIBLE_FACTOR = 3.0  # servers' CPU time this many times what they can run


class Unavailable(Exception):
    """The endpoint answers no scrape (HTTP 503)."""


class Faults(object):
    """Faults of a hypervisor's exporters (``POST /fault``), what a broken
    deployment shows Prometheus; thread safe:

    ``restart``
        its exporters restart having lost their state: its counters (node
        CPU, guest and pressure time, its domains' CPU time and delay)
        start again from 0, and no scrape succeeds for RESTART_SECONDS;
    ``down``
        its endpoints answer HTTP 503: every scrape of it fails;
    ``zero-cpus``
        its node_exporter shows no CPU: no ``node_cpu_*`` series, the cpu
        collector failing;
    ``relabel``
        its node_exporter serves the next hypervisor's series (by name,
        round): a relabelling that put one host's series on another;
    ``impossible``
        its servers' CPU time runs IMPOSSIBLE_FACTOR times as fast as they
        run: busier than their vCPUs, and than the host;
    ``saturate``
        its node_exporter reads every CPU busy;
    ``clear``
        none of these.
    """

    MODES = ('restart', 'down', 'zero-cpus', 'relabel', 'impossible', 'saturate',
             'clear')

    def __init__(self):
        self._lock = threading.Lock()
        self._modes = {}        # hypervisor -> (mode, until or None)

    def set(self, hypervisor, mode, now):
        with self._lock:
            if mode == 'clear':
                self._modes.pop(hypervisor, None)
            else:
                until = now + RESTART_SECONDS if mode == 'restart' else None
                self._modes[hypervisor] = (mode, until)

    def mode(self, hypervisor, now):
        """The hypervisor's fault now, or None."""
        with self._lock:
            mode, until = self._modes.get(hypervisor, (None, None))
            if until is not None and now >= until:
                del self._modes[hypervisor]
                return None
            return mode

    def listing(self, now):
        with self._lock:
            names = sorted(self._modes)
        return [(name, self.mode(name, now)) for name in names
                if self.mode(name, now)]


NO_FAULTS = Faults()


# ------------------------------------------------------------------ model

_NUM = r'([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)'
_PROFILE_RE = re.compile(r'^\s*%s\s*(?:~\s*%s\s*@\s*%s\s*)?$' % (_NUM, _NUM, _NUM))


def parse_profile(text, default):
    """``'0.8'`` -> (0.8, 0.8, 0); ``'0.2~0.9@600'`` -> (0.2, 0.9, 600.0).

    None or an invalid value gives the constant default.
    """
    match = _PROFILE_RE.match(str(text)) if text is not None else None
    if not match:
        if text is not None:
            LOG.warning('invalid load profile %r, using %s', text, default)
        return (default, default, 0.0)
    lo = float(match.group(1))
    if match.group(2) is None:
        return (lo, lo, 0.0)
    period = float(match.group(3))
    if period <= 0:
        LOG.warning('invalid load profile %r (period), using %s', text, default)
        return (default, default, 0.0)
    return (lo, float(match.group(2)), period)


def phase_of(server_id):
    """A stable phase in [0, 1) from the server id."""
    return zlib.crc32(str(server_id).encode()) / 2.0 ** 32


def profile_value(profile, now, phase):
    lo, hi, period = profile
    if period:
        value = lo + (hi - lo) * 0.5 * (1 + math.sin(2 * math.pi * (now / period + phase)))
    else:
        value = lo
    return min(1.0, max(0.0, value))


def pressure(x, knee):
    """PSI "some" fraction for a demand/capacity ratio x (see module doc)."""
    below = max(0.0, x - knee) / (1.0 - knee)
    over = max(0.0, x - 1.0)
    return min(1.0, 0.1 * below ** 2 + 2.0 * over ** 1.5)


class ServerLoad(collections.namedtuple('ServerLoad', 'server cpu_rate mem_bytes cpu_got')):
    """A server's load: cpu_rate the cores it asks for, cpu_got the cores its
    host gives it (less when the host is oversubscribed), mem_bytes resident."""

    __slots__ = ()

    @property
    def cpu_delay(self):
        """Cores runnable but queued: libvirt's vcpu.<n>.delay, the guest's steal."""
        return self.cpu_rate - self.cpu_got


HostLoad = collections.namedtuple(
    'HostLoad', 'host demand busy mem_demand_mib mem_used_mib p_cpu p_mem servers')
# What one scrape of one hypervisor sees: its load and its counters' values.
HostView = collections.namedtuple(
    'HostView', 'load cpu guest psi_cpu psi_mem server_cpu server_delay now')


def server_load(server, now):
    """(cores used, bytes resident) of one server at time now."""
    phase = phase_of(server.id)
    meta = server.metadata or {}
    if server.status in RUNNING:
        cpu = profile_value(parse_profile(meta.get('devcloud:cpu'), DEFAULT_CPU), now, phase)
        cpu_rate = cpu * server.vcpus
    else:
        cpu_rate = 0.0
    if server.status in RUNNING or server.status == 'PAUSED':
        # a different phase for memory, so CPU and memory waves are not in step
        mem = profile_value(parse_profile(meta.get('devcloud:mem'), DEFAULT_MEM), now,
                            (phase + 0.25) % 1.0)
        mem_bytes = int(mem * server.ram_mib * MIB)
    else:
        mem_bytes = 0
    # what it gets is its host's to decide (host_load)
    return ServerLoad(server, cpu_rate, mem_bytes, cpu_rate)


def fair_shares(asks, capacity):
    """Max-min fair shares of capacity: each ask gets min(ask, level), the
    level such that the shares sum to capacity; every ask in full if they fit."""
    asks = list(asks)
    left, count = float(capacity), len(asks)
    if sum(asks) <= left:
        return asks
    for ask in sorted(asks):
        if ask * count >= left:
            level = left / count
            break
        left -= ask
        count -= 1
    else:           # rounding: they fit after all
        return asks
    return [min(ask, level) for ask in asks]


def host_load(host, servers, now):
    """The load of one host given the servers placed on it."""
    loads = [server_load(s, now) for s in servers]
    threads = max(1, host.threads)
    overhead = CPU_OVERHEAD * threads
    demand = sum(sl.cpu_rate for sl in loads) + overhead
    # Linux CFS shares the threads by cgroup weight.  Each domain is a cgroup
    # of its own under machine.slice, all of the same weight since Nova 26
    # no longer sets <cputune><shares> (1024 per vCPU before): so a max-min
    # fair share per server, within it evenly per vCPU (a vCPU is one
    # thread: never more than 1).  The host's own load (system.slice, kernel
    # threads) asks far less than machine.slice's half at the top level, so
    # it is served first, in full.
    got = fair_shares([sl.cpu_rate for sl in loads], threads - overhead)
    loads = [sl._replace(cpu_got=g) for sl, g in zip(loads, got)]
    mem_demand = sum(sl.mem_bytes for sl in loads) / MIB + MEM_OVERHEAD_MIB
    return HostLoad(
        host=host, demand=demand, busy=min(threads, demand),
        mem_demand_mib=mem_demand, mem_used_mib=min(host.mem_mib, mem_demand),
        p_cpu=pressure(demand / threads, CPU_KNEE),
        p_mem=pressure(mem_demand / max(1, host.mem_mib), MEM_KNEE),
        servers=loads)


class Model(object):
    """Hosts' and servers' counters, integrated over time; thread safe.

    ``update()`` is called at every poll with the current hosts and servers;
    ``view()`` at every scrape.  Counters are kept in one dict keyed by
    tuples: ('cpu', host, cpu, mode), ('guest', host, cpu), ('psi_cpu',
    host), ('psi_mem', host), ('server', server_id) (CPU time it got) and
    ('delay', server_id) (time it was queued); each has the rate in force
    since the last update.  A domain's CPU time and delay are its server's
    counters since the domain last started (libvirt's restart at 0 when a
    stopped guest starts again).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._counters = {}
        self._rates = {}
        self._loads = {}        # hypervisor name -> HostLoad
        self._started = {}      # server id -> {counter: value} when its domain started
        self._t_update = None   # time of the last update
        self._t_high = None     # latest time seen by update() or view()

    def _clamp(self, now):
        # never go back in time (clock jump, or a scrape that ran between
        # the poll's time.time() and its update()): counters stay monotonic
        if self._t_high is not None and now < self._t_high:
            now = self._t_high
        self._t_high = now
        return now

    def _integrate(self, now):
        """The counters brought up to now at their rates (lock held)."""
        now = self._clamp(now)
        if self._t_update is not None:
            dt = now - self._t_update
            for key, rate in self._rates.items():
                self._counters[key] = self._counters.get(key, 0.0) + rate * dt
        self._t_update = now
        return now

    def restart(self, hypervisor, now):
        """The hypervisor's counters start again from 0, as exporters that
        lost their state show them: its node's CPU, guest and pressure
        time, its domains' CPU time and delay."""
        with self._lock:
            self._integrate(now)
            for key in self._counters:
                if key[0] in ('cpu', 'guest', 'psi_cpu', 'psi_mem') and \
                        key[1] == hypervisor:
                    self._counters[key] = 0.0
            load = self._loads.get(hypervisor)
            for sl in load.servers if load else ():
                self._started[sl.server.id] = {
                    kind: self._counters[(kind, sl.server.id)]
                    for kind in ('server', 'delay')}

    def update(self, hosts, servers, now, faults=NO_FAULTS):
        """Integrate the old rates up to now, then take the new state."""
        with self._lock:
            now = self._integrate(now)

            by_host = collections.defaultdict(list)
            for server in servers:
                if server.host:
                    by_host[server.host].append(server)
            rates = {}
            loads = {}
            for host in hosts:
                load = host_load(host, by_host.get(host.name, ()), now)
                loads[host.name] = load
                per_cpu = 1.0 if faults.mode(host.name, now) == 'saturate' \
                    else load.busy / max(1, host.threads)
                # Linux counts a guest's time as user time too: the time the
                # servers got, at most all of the user time
                guest = min(USER_SHARE, sum(sl.cpu_got for sl in load.servers) / load.busy)
                for i in range(host.threads):
                    rates[('cpu', host.name, i, 'idle')] = 1.0 - per_cpu
                    rates[('cpu', host.name, i, 'user')] = USER_SHARE * per_cpu
                    rates[('cpu', host.name, i, 'system')] = (1.0 - USER_SHARE) * per_cpu
                    rates[('guest', host.name, i)] = guest * per_cpu
                rates[('psi_cpu', host.name)] = load.p_cpu
                rates[('psi_mem', host.name)] = load.p_mem
            for server in servers:
                # global per server (also unplaced ones), so nothing resets
                # when the server changes host
                rates[('server', server.id)] = rates[('delay', server.id)] = 0.0
            for name, load in loads.items():
                factor = IMPOSSIBLE_FACTOR \
                    if faults.mode(name, now) == 'impossible' else 1.0
                for sl in load.servers:
                    rates[('server', sl.server.id)] = sl.cpu_got * factor
                    rates[('delay', sl.server.id)] = sl.cpu_delay
            # forget what is gone (deleted server, removed host or CPU)
            self._counters = {k: self._counters.get(k, 0.0) for k in rates}
            started = {}
            for server in servers:
                if domain_state(server.status) in (DOMAIN_RUNNING, DOMAIN_PAUSED):
                    started[server.id] = self._started.get(server.id) or {
                        kind: self._counters[(kind, server.id)] for kind in ('server', 'delay')}
            self._started = started
            self._rates = rates
            self._loads = loads

    def hypervisors(self):
        with self._lock:
            return sorted(self._loads)

    def view(self, hypervisor, now):
        """The HostView of one hypervisor at time now, or None if unknown."""
        with self._lock:
            load = self._loads.get(hypervisor)
            if load is None:
                return None
            now = self._clamp(now)
            elapsed = max(0.0, now - self._t_update)

            def counter(key):
                return self._counters[key] + self._rates[key] * elapsed

            def since_start(kind, server_id):
                return counter((kind, server_id)) - self._started.get(server_id, {}).get(kind, 0.0)

            name = load.host.name
            threads = range(load.host.threads)
            ids = [sl.server.id for sl in load.servers]
            return HostView(
                load=load,
                cpu={(i, mode): counter(('cpu', name, i, mode))
                     for i in threads for mode in ('idle', 'user', 'system')},
                guest={i: counter(('guest', name, i)) for i in threads},
                psi_cpu=counter(('psi_cpu', name)), psi_mem=counter(('psi_mem', name)),
                server_cpu={i: since_start('server', i) for i in ids},
                server_delay={i: since_start('delay', i) for i in ids},
                now=now)


# ------------------------------------------------------------------ domains

Domain = collections.namedtuple('Domain', 'name uuid state load cpu_seconds delay_seconds')


def domain_state(status):
    """libvirt's state of a server's domain, or None: no domain."""
    if status in RUNNING:
        return DOMAIN_RUNNING
    if status == 'PAUSED':
        return DOMAIN_PAUSED
    if status in ('SHUTOFF', 'SUSPENDED'):     # suspend is libvirt's managed save
        return DOMAIN_SHUTOFF
    return None


def domain_name(server):
    """Nova's libvirt name: instance_name_template, instance-%08x."""
    if server.instance_name:
        return server.instance_name
    return 'instance-%08x' % (zlib.crc32(str(server.id).encode()) & 0xffffff)


def domains(view):
    """The libvirt domains on a hypervisor, by name."""
    result = []
    for sl in view.load.servers:
        state = domain_state(sl.server.status)
        if state is not None:
            # a stopped domain's CPU time is 0, as libvirt's is
            stopped = state == DOMAIN_SHUTOFF
            cpu = 0.0 if stopped else view.server_cpu.get(sl.server.id, 0.0)
            delay = 0.0 if stopped else view.server_delay.get(sl.server.id, 0.0)
            result.append(Domain(domain_name(sl.server), sl.server.id, state, sl, cpu, delay))
    return sorted(result, key=lambda d: (d.name, d.uuid))


def balloon(domain, now):
    """A running guest's balloon statistics in KiB, as libvirt reports them.

    The keys are libvirt's ``balloon.*`` field names.
    """
    ram = domain.load.server.ram_mib * 1024
    available = ram * GUEST_VISIBLE_PERCENT // 100
    fraction = domain.load.mem_bytes / 1024.0 / ram if ram else 0.0
    usable = available - int(round(fraction * available))
    caches = usable * GUEST_CACHE_PERCENT // 100
    return collections.OrderedDict([
        ('current', ram), ('maximum', ram), ('swap_in', 0), ('swap_out', 0),
        ('major_fault', 0), ('minor_fault', 0), ('unused', usable - caches),
        ('available', available), ('usable', usable),
        ('last-update', int(now // BALLOON_PERIOD * BALLOON_PERIOD)),
        ('disk_caches', caches),
        ('rss', domain.load.mem_bytes // 1024 + QEMU_OVERHEAD_MIB * 1024)])


def used_percent(stats):
    """inovex's and Tinkoff's formula: (available - usable) / (available / 100)."""
    if not stats['available']:
        return 0.0      # Tinkoff's guard; a running guest here always has it
    return (stats['available'] - stats['usable']) / (stats['available'] / 100.0)


def vcpu_seconds(domain, seconds=None):
    """Per-vCPU time: the domain's CPU time (or other seconds, its delay),
    spread evenly over its vCPUs."""
    vcpus = max(1, domain.load.server.vcpus)
    total = domain.cpu_seconds if seconds is None else seconds
    return [(str(i), total / vcpus) for i in range(vcpus)]


# ------------------------------------------------------------------ exposition

def _escape_label(value):
    return str(value).replace('\\', r'\\').replace('"', r'\"').replace('\n', r'\n')


def format_value(value):
    """A sample value as Go's client_golang writes it (strconv 'g', shortest).

    1.5 -> '1.5', 16 -> '16', 8589934592 -> '8.589934592e+09', 1e-07 ->
    '1e-07': the exponent form from 10**6 up and below 10**-4.
    """
    v = float(value)
    if math.isnan(v):
        return 'NaN'
    if math.isinf(v):
        return '+Inf' if v > 0 else '-Inf'
    if v == 0:
        return '0'
    sign = '-' if v < 0 else ''
    mantissa, _, exponent = repr(abs(v)).partition('e')
    whole, _, fraction = mantissa.partition('.')
    if fraction == '0':
        fraction = ''
    raw = whole + fraction
    significant = raw.lstrip('0')
    point = len(whole) - (len(raw) - len(significant)) + int(exponent or 0)
    digits = significant.rstrip('0')
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        text = digits[0] + ('.' + digits[1:] if len(digits) > 1 else '')
        return '%s%se%s%02d' % (sign, text, '-' if exp10 < 0 else '+', abs(exp10))
    if point <= 0:
        return '%s0.%s%s' % (sign, '0' * -point, digits)
    if point >= len(digits):
        return sign + digits + '0' * (point - len(digits))
    return '%s%s.%s' % (sign, digits[:point], digits[point:])


class Exposition(object):
    """Metric families in the text format, ordered as client_golang orders them.

    Families by name; samples by their label values, taken in the order of
    the sorted label names; labels sorted by name.
    """

    def __init__(self):
        self._families = {}

    def add(self, name, kind, help_text, samples):
        """samples: [(labels dict, value)]; an empty family is left out."""
        samples = list(samples)
        if samples:
            self._families[name] = (kind, help_text, samples)

    def text(self):
        out = []
        for name in sorted(self._families):
            kind, help_text, samples = self._families[name]
            out.append('# HELP %s %s\n' % (
                name, help_text.replace('\\', r'\\').replace('\n', r'\n')))
            out.append('# TYPE %s %s\n' % (name, kind))
            rows = []
            for labels, value in samples:
                pairs = sorted((k, str(v)) for k, v in labels.items())
                rows.append((tuple(v for _, v in pairs), pairs, value))
            for _, pairs, value in sorted(rows, key=lambda row: row[0]):
                if pairs:
                    text = ','.join('%s="%s"' % (k, _escape_label(v)) for k, v in pairs)
                    out.append('%s{%s} %s\n' % (name, text, format_value(value)))
                else:
                    out.append('%s %s\n' % (name, format_value(value)))
        return ''.join(out)


# ------------------------------------------------------------------ node_exporter

NODE_CPU_MODES = ('idle', 'iowait', 'irq', 'nice', 'softirq', 'steal', 'system', 'user')
# The collectors simulated, with the durations a real node_exporter 1.5 took
# for them on the devcloud's machine (seconds).
NODE_COLLECTORS = (('cpu', 0.000387), ('meminfo', 0.000175), ('pressure', 0.000104),
                   ('uname', 1.3e-05))


def machine_uname():
    """node_uname_info's labels but nodename, from this machine's uname(2)."""
    u = os.uname()
    return {'sysname': u.sysname, 'release': u.release, 'version': u.version,
            'machine': u.machine, 'domainname': '(none)'}


def render_node(view, uname, cpus=True):
    """node_exporter's cpu, meminfo, pressure and uname collectors; cpus:
    false as when its cpu collector fails (no CPU series)."""
    load = view.load
    host = load.host
    failing = () if cpus else ('cpu',)
    cpus = range(host.threads if cpus else 0)
    e = Exposition()
    e.add('node_cpu_guest_seconds_total', 'counter',
          'Seconds the CPUs spent in guests (VMs) for each mode.',
          [({'cpu': str(i), 'mode': mode}, view.guest[i] if mode == 'user' else 0)
           for i in cpus for mode in ('nice', 'user')])
    e.add('node_cpu_seconds_total', 'counter', 'Seconds the CPUs spent in each mode.',
          [({'cpu': str(i), 'mode': mode}, view.cpu.get((i, mode), 0))
           for i in cpus for mode in NODE_CPU_MODES])
    available = int((host.mem_mib - load.mem_used_mib) * 1024)     # KiB, as /proc/meminfo
    free, cached = int(available * HOST_FREE_SHARE), int(available * HOST_CACHED_SHARE)
    meminfo = {'MemTotal': host.mem_mib * 1024, 'MemAvailable': available, 'MemFree': free,
               'Cached': cached, 'Buffers': available - free - cached}
    for key, kib in meminfo.items():
        e.add('node_memory_%s_bytes' % key, 'gauge',
              'Memory information field %s_bytes.' % key, [({}, kib * 1024)])
    for name, help_text, value in (
            ('cpu_waiting', 'that processes have waited for CPU time', view.psi_cpu),
            ('io_waiting', 'that processes have waited due to IO congestion', 0),
            ('io_stalled', 'no process could make progress due to IO congestion', 0),
            ('memory_waiting', 'that processes have waited for memory', view.psi_mem),
            ('memory_stalled', 'no process could make progress due to memory congestion',
             view.psi_mem * MEM_FULL_SHARE)):
        e.add('node_pressure_%s_seconds_total' % name, 'counter',
              'Total time in seconds %s' % help_text, [({}, value)])
    e.add('node_scrape_collector_duration_seconds', 'gauge',
          'node_exporter: Duration of a collector scrape.',
          [({'collector': c}, seconds) for c, seconds in NODE_COLLECTORS])
    e.add('node_scrape_collector_success', 'gauge',
          'node_exporter: Whether a collector succeeded.',
          [({'collector': c}, 0 if c in failing else 1) for c, _ in NODE_COLLECTORS])
    labels = dict(uname, nodename=service_host_of(host))
    e.add('node_uname_info', 'gauge',
          'Labeled system information as provided by the uname system call.', [(labels, 1)])
    return e.text()


# ------------------------------------------------------------------ libvirt exporters

STATE_DESC = {0: 'no state', 1: 'the domain is running',
              2: 'the domain is blocked on resource', 3: 'the domain is paused by user',
              4: 'the domain is being shut down', 5: 'the domain is shut off',
              6: 'the domain is crashed',
              7: 'the domain is suspended by guest power management'}
MACHINE_TYPE = 'pc-q35-8.2'     # Nova's default q35, as libvirt expands it
FAULT_HELP = ('Page faults occur when a process makes a valid access to virtual memory '
              'that is not available. When servicing the page %sfault, if disk IO is '
              'required, it is considered a %s fault.')


def _bytes(kib):
    return kib * 1024


def pcpu(domain, vcpu, threads):
    """The host CPU a vCPU last ran on (any stable number will do)."""
    return (zlib.crc32(domain.uuid.encode()) + vcpu) % max(1, threads)


def add_domain_info(e, series):
    """virDomainGetInfo's four families, named and described alike by the
    inovex, Tinkoff and kumina exporters."""
    e.add('libvirt_domain_info_maximum_memory_bytes', 'gauge',
          'Maximum allowed memory of the domain, in bytes.', series['maxmem'])
    e.add('libvirt_domain_info_memory_usage_bytes', 'gauge',
          'Memory usage of the domain, in bytes.', series['memory'])
    e.add('libvirt_domain_info_virtual_cpus', 'gauge', 'Number of virtual CPUs for the domain.',
          series['vcpus'])
    e.add('libvirt_domain_info_cpu_time_seconds_total', 'counter',
          'Amount of CPU time used by the domain, in seconds.', series['cpu_time'])


def render_inovex(view):
    """inovex prometheus-libvirt-exporter 2.x (kolla-ansible 2024.1 and later)."""
    doms = domains(view)
    series = collections.defaultdict(list)
    for d in doms:
        s = d.load.server
        dom = {'domain': d.name}
        series['info'].append(({'domain': d.name, 'os_type': 'hvm', 'os_type_arch': 'x86_64',
                                'os_type_machine': MACHINE_TYPE}, 1))
        series['openstack_info'].append((
            {'domain': d.name, 'instance_name': s.name, 'instance_id': s.id,
             'flavor_name': s.flavor_name or '', 'user_name': s.user_name or '',
             'user_id': s.user_id or '', 'project_name': s.project_name or '',
             'project_id': s.project_id or ''}, 1))
        series['state'].append(({'domain': d.name, 'state_desc': STATE_DESC[d.state]}, d.state))
        series['maxmem'].append((dom, s.ram_mib * MIB))
        series['memory'].append((dom, s.ram_mib * MIB))     # assigned: Nova does not balloon
        series['vcpus'].append((dom, s.vcpus))
        series['cpu_time'].append((dom, d.cpu_seconds))
        series['timed_out'].append((dom, 0))
        if d.state == DOMAIN_SHUTOFF:
            continue        # the exporter stops here for an inactive domain
        stats = balloon(d, view.now)
        for field, value in stats.items():
            series['balloon.' + field].append((dom, value))
        series['used_percent'].append((dom, used_percent(stats)))
        series['vcpu_current'].append((dom, s.vcpus))
        series['vcpu_maximum'].append((dom, s.vcpus))
        for (vcpu, seconds), (_, delay) in zip(vcpu_seconds(d),
                                               vcpu_seconds(d, d.delay_seconds)):
            labels = {'domain': d.name, 'vcpu': vcpu}
            series['vcpu_state'].append((labels, 1))
            series['vcpu_time'].append((labels, seconds))
            series['vcpu_delay'].append((labels, delay))
            series['vcpu_wait'].append((labels, VCPU_WAIT))

    def kib(field):
        return [(labels, _bytes(value)) for labels, value in series['balloon.' + field]]

    e = Exposition()
    e.add('libvirt_up', 'gauge', "Whether scraping libvirt's metrics was successful.", [({}, 1)])
    e.add('libvirt_domains', 'gauge', 'Number of domains', [({}, len(doms))])
    e.add('libvirt_domain_timed_out', 'gauge',
          "Whether scraping libvirt's domain metrics has timed out.", series['timed_out'])
    e.add('libvirt_domain_info', 'gauge', 'Metadata labels for the domain.', series['info'])
    e.add('libvirt_domain_openstack_info', 'gauge', 'OpenStack Metadata labels for the domain.',
          series['openstack_info'])
    e.add('libvirt_domain_info_state', 'gauge', 'Code of the domain state', series['state'])
    add_domain_info(e, series)
    m = 'libvirt_domain_memory_stats_'
    e.add(m + 'current_balloon_bytes', 'gauge', 'Current balloon value (in bytes).',
          kib('current'))
    e.add(m + 'maximum_bytes', 'gauge', 'Maximum memory used by the domain (the maximum '
          'amount of memory that can be used by the domain)', kib('maximum'))
    e.add(m + 'swap_in_bytes', 'gauge', 'Memory swapped in for this domain(the total amount '
          'of data read from swap space)', kib('swap_in'))
    e.add(m + 'swap_out_bytes', 'gauge', 'Memory swapped out for this domain (the total '
          'amount of memory written out to swap space)', kib('swap_out'))
    e.add(m + 'major_fault_total', 'counter', FAULT_HELP % ('', 'major'),
          series['balloon.major_fault'])
    e.add(m + 'minor_fault_total', 'counter', FAULT_HELP % ('not ', 'minor'),
          series['balloon.minor_fault'])
    e.add(m + 'unused_bytes', 'gauge', 'Memory unused by the domain', kib('unused'))
    e.add(m + 'available_bytes', 'gauge', 'Memory available to the domain', kib('available'))
    e.add(m + 'usable_bytes', 'gauge', "Memory usable by the domain (corresponds to "
          "'Available' in /proc/meminfo)", kib('usable'))
    e.add(m + 'last_update_timestamp_seconds', 'gauge', 'Last time the memory stats were '
          'updated for this domain, in seconds since epoch.', series['balloon.last-update'])
    e.add(m + 'disk_caches_bytes', 'gauge', 'Memory used by disk caches for this domain',
          kib('disk_caches'))
    e.add(m + 'rss_bytes', 'gauge', 'Resident Set Size of the process running the domain',
          kib('rss'))
    e.add(m + 'used_percent', 'gauge', 'The amount of memory in percent, that used by domain.',
          series['used_percent'])
    e.add('libvirt_domain_vcpu_current', 'gauge', 'Number of current online vCPUs.',
          series['vcpu_current'])
    e.add('libvirt_domain_vcpu_maximum', 'gauge', 'Number of maximum online vCPUs.',
          series['vcpu_maximum'])
    e.add('libvirt_domain_vcpu_state', 'gauge', 'State of the vCPU.', series['vcpu_state'])
    e.add('libvirt_domain_vcpu_time_seconds_total', 'counter', 'Time spent by the virtual CPU.',
          series['vcpu_time'])
    e.add('libvirt_domain_vcpu_delay_seconds_total', 'counter',
          'Time the vCPU spent waiting in the queue instead of running. Exposed to the VM as '
          'steal time.', series['vcpu_delay'])
    e.add('libvirt_domain_vcpu_wait_seconds_total', 'counter',
          'Time the vCPU wants to run, but the host scheduler has something else running '
          'ahead of it.', series['vcpu_wait'])
    return e.text()


def render_tinkoff(view):
    """Tinkoff libvirt-exporter 2.3.3 (kolla-ansible up to 2023.2)."""
    series = collections.defaultdict(list)
    threads = view.load.host.threads
    # it asks libvirt for running and shut-off domains only: no paused ones
    for d in (d for d in domains(view) if d.state != DOMAIN_PAUSED):
        s = d.load.server
        dom = {'domain': d.name}
        series['meta'].append((
            {'domain': d.name, 'uuid': s.id, 'instance_name': s.name,
             'flavor': s.flavor_name or '', 'user_name': s.user_name or '',
             'user_uuid': s.user_id or '', 'project_name': s.project_name or '',
             'project_uuid': s.project_id or '', 'root_type': 'image',
             'root_uuid': s.image_id or ''}, 1))
        series['maxmem'].append((dom, s.ram_mib * MIB))
        series['memory'].append((dom, s.ram_mib * MIB))
        series['vcpus'].append((dom, s.vcpus))
        series['cpu_time'].append((dom, d.cpu_seconds))
        series['vstate'].append((dom, d.state))
        if d.state == DOMAIN_RUNNING:
            stats = balloon(d, view.now)
            for (vcpu, seconds), (_, delay) in zip(vcpu_seconds(d),
                                                   vcpu_seconds(d, d.delay_seconds)):
                labels = {'domain': d.name, 'vcpu': vcpu}
                series['vcpu_state'].append((labels, 1))
                series['vcpu_time'].append((labels, seconds))
                series['vcpu_cpu'].append((labels, pcpu(d, int(vcpu), threads)))
                # DelaySet: libvirt 7.2 and later report it for every vCPU
                series['vcpu_delay'].append((labels, delay))
                series['vcpu_wait'].append((labels, VCPU_WAIT))     # WaitSet
        else:
            # the memory stats call fails on a stopped domain: all 0
            stats = dict.fromkeys(balloon(d, view.now), 0)
        for field, value in stats.items():
            series['balloon.' + field].append((dom, value))
        series['used_percent'].append((dom, used_percent(stats)))

    def kib(field):
        return [(labels, _bytes(value)) for labels, value in series['balloon.' + field]]

    e = Exposition()
    e.add('libvirt_up', 'gauge', "Whether scraping libvirt's metrics was successful.", [({}, 1)])
    e.add('libvirt_domain_info_meta', 'gauge', 'Domain metadata', series['meta'])
    add_domain_info(e, series)
    e.add('libvirt_domain_info_vstate', 'gauge',
          'Virtual domain state. 0: no state, 1: the domain is running, 2: the domain is '
          'blocked on resource, 3: the domain is paused by user, 4: the domain is being shut '
          'down, 5: the domain is shut off,6: the domain is crashed, 7: the domain is '
          'suspended by guest power management', series['vstate'])
    e.add('libvirt_domain_vcpu_state', 'gauge', 'VCPU state. 0: offline, 1: running, 2: blocked',
          series['vcpu_state'])
    e.add('libvirt_domain_vcpu_time_seconds_total', 'counter',
          "Amount of CPU time used by the domain's VCPU, in seconds.", series['vcpu_time'])
    e.add('libvirt_domain_vcpu_delay_seconds_total', 'counter',
          "Amount of CPU time used by the domain's VCPU, in seconds. Vcpu's delay metric. "
          'Time the vcpu thread was enqueued by the host scheduler, but was waiting in the '
          'queue instead of running. Exposed to the VM as a steal time.', series['vcpu_delay'])
    e.add('libvirt_domain_vcpu_wait_seconds_total', 'counter',
          "Vcpu's wait_sum metric. CONFIG_SCHEDSTATS has to be enabled", series['vcpu_wait'])
    e.add('libvirt_domain_vcpu_cpu', 'gauge',
          'Real CPU number, or one of the values from virVcpuHostCpuState', series['vcpu_cpu'])
    m = 'libvirt_domain_memory_stats_'
    e.add(m + 'major_fault_total', 'counter', FAULT_HELP % ('', 'major'),
          series['balloon.major_fault'])
    e.add(m + 'minor_fault_total', 'counter', FAULT_HELP % ('not ', 'minor'),
          series['balloon.minor_fault'])
    e.add(m + 'unused_bytes', 'gauge',
          'The amount of memory left completely unused by the system. Memory that is '
          'available but used for reclaimable caches should NOT be reported as free. This '
          'value is expressed in bytes.', kib('unused'))
    e.add(m + 'available_bytes', 'gauge',
          'The total amount of usable memory as seen by the domain. This value may be less '
          'than the amount of memory assigned to the domain if a balloon driver is in use or '
          'if the guest OS does not initialize all assigned pages. This value is expressed '
          'in bytes.', kib('available'))
    e.add(m + 'actual_balloon_bytes', 'gauge', 'Current balloon value (in bytes).',
          kib('current'))
    e.add(m + 'rss_bytes', 'gauge',
          'Resident Set Size of the process running the domain. This value is in bytes',
          kib('rss'))
    e.add(m + 'usable_bytes', 'gauge',
          'How much the balloon can be inflated without pushing the guest system to swap, '
          "corresponds to 'Available' in /proc/meminfo", kib('usable'))
    e.add(m + 'disk_cache_bytes', 'gauge',
          'The amount of memory, that can be quickly reclaimed without additional I/O (in '
          'bytes).Typically these pages are used for caching files from disk.',
          kib('disk_caches'))
    e.add(m + 'used_percent', 'gauge', 'The amount of memory in percent, that used by domain.',
          series['used_percent'])
    return e.text()


def render_vexxhost(view):
    """vexxhost libvirtd_exporter with --libvirt.nova (openstack-helm)."""
    series = collections.defaultdict(list)
    for d in domains(view):
        s = d.load.server
        key = {'uuid': s.id}
        series['state'].append((key, d.state))
        series['reason'].append((key, 1))          # booted, paused by user, shut down
        series['balloon.current'].append((key, s.ram_mib * 1024))
        series['balloon.maximum'].append((key, s.ram_mib * 1024))
        if d.state == DOMAIN_SHUTOFF:
            continue        # libvirt has no CPU, vCPU or guest statistics for it
        nanoseconds = d.cpu_seconds * 1e9
        series['cpu_time'].append((key, nanoseconds))
        series['cpu_user'].append((key, nanoseconds * USER_SHARE))
        series['cpu_system'].append((key, nanoseconds * (1 - USER_SHARE)))
        stats = balloon(d, view.now)
        for field in ('swap_in', 'swap_out', 'major_fault', 'minor_fault', 'unused',
                      'available', 'rss', 'usable', 'disk_caches'):
            series['balloon.' + field].append((key, stats[field]))
        # of libvirt's vcpu.<n>.* it reads state and time only: no delay
        for vcpu, seconds in vcpu_seconds(d):
            series['vcpu_state'].append(({'uuid': s.id, 'vcpu': vcpu}, 1))
            series['vcpu_time'].append(({'uuid': s.id, 'vcpu': vcpu}, seconds * 1e9))
        if s.created is not None:
            series['seconds'].append((
                {'uuid': s.id, 'instance_type': s.flavor_name or '',
                 'user_id': s.user_id or '', 'project_id': s.project_id or ''},
                max(0.0, view.now - s.created)))

    e = Exposition()
    d = 'libvirtd_domain_'
    e.add(d + 'seconds', 'counter', 'seconds since creation time', series['seconds'])
    e.add(d + 'domain_state', 'gauge', 'state of the VM (virDomainState enum)', series['state'])
    e.add(d + 'domain_state_reason', 'gauge',
          'reason for entering given state (virDomain*Reason enum)', series['reason'])
    e.add(d + 'cpu_time', 'counter', 'total cpu time spent for this domain in nanoseconds',
          series['cpu_time'])
    e.add(d + 'cpu_user', 'counter', 'user cpu time spent in nanoseconds', series['cpu_user'])
    e.add(d + 'cpu_system', 'counter', 'system cpu time spent in nanoseconds',
          series['cpu_system'])
    for field, kind, help_text in (
            ('current', 'gauge', 'the memory in kiB currently used'),
            ('maximum', 'gauge', 'the maximum memory in kiB allowed'),
            ('swap_in', 'counter', 'kiB of memory swapped in'),
            ('swap_out', 'counter', 'kiB of memory swapped out'),
            ('major_fault', 'counter', 'number of page faults where disk I/O was required'),
            ('minor_fault', 'counter', 'number of page faults where disk I/O was not required'),
            ('unused', 'gauge', 'KiB of memory left unused by the system'),
            ('available', 'gauge', 'KiB of memory usable by the domain'),
            ('rss', 'gauge', 'resident set size of domain in KiB'),
            ('usable', 'gauge', 'KiB of memory that can be reclaimed without swapping'),
            ('disk_caches', 'gauge', 'KiB of memory used by disk caches')):
        e.add(d + 'balloon_' + field, kind, help_text, series['balloon.' + field])
    e.add(d + 'vcpu_state', 'gauge', 'state of the virtual CPU (virVcpuState enum)',
          series['vcpu_state'])
    e.add(d + 'vcpu_time', 'counter', 'virtual cpu time spent', series['vcpu_time'])
    return e.text()


def render_kumina(view):
    """kumina libvirt_exporter 0.2.0 (Debian's) with --libvirt.export-nova-metadata.

    It reads no vCPU statistics: no delay, here as from the real one that
    RealExporters runs on libvirt's test driver.
    """
    active = [d for d in domains(view) if d.state != DOMAIN_SHUTOFF]
    series = collections.defaultdict(list)
    for d in active:
        s = d.load.server
        labels = {'domain': d.name, 'uuid': s.id, 'name': s.name,
                  'flavor': s.flavor_name or '', 'project_name': s.project_name or ''}
        series['state'].append((labels, d.state))
        series['maxmem'].append((labels, s.ram_mib * MIB))
        series['memory'].append((labels, s.ram_mib * MIB))
        series['vcpus'].append((labels, s.vcpus))
        series['cpu_time'].append((labels, d.cpu_seconds))
    e = Exposition()
    e.add('libvirt_up', 'gauge', "Whether scraping libvirt's metrics was successful.", [({}, 1)])
    e.add('libvirt_domains_number', 'gauge', 'Number of domains.', [({}, len(active))])
    e.add('libvirt_domain_state_code', 'gauge', 'State of the domain.', series['state'])
    add_domain_info(e, series)
    return e.text()


LIBVIRT_RENDERERS = {'inovex': render_inovex, 'tinkoff': render_tinkoff,
                     'vexxhost': render_vexxhost, 'kumina': render_kumina}


# ------------------------------------------------------------------ flavours

Flavour = collections.namedtuple(
    'Flavour', 'name libvirt libvirt_port monitoring_network node_job libvirt_job')

# node_job and libvirt_job: the `job` labels (the Prometheus templates in
# tools/devcloud/prometheus/ declare them; a unit test keeps both in step).
FLAVOURS = collections.OrderedDict((f.name, f) for f in (
    Flavour('kolla', 'inovex', 9177, False, 'node', 'libvirt_exporter'),
    Flavour('kolla-legacy', 'tinkoff', 9177, False, 'node', 'libvirt_exporter'),
    Flavour('helm', 'vexxhost', 9474, False, 'node-exporter', 'openstack/libvirt-exporter'),
    Flavour('debian', 'kumina', 9177, True, 'node', 'libvirt'),
))
DEFAULT_FLAVOUR = 'kolla'
NODE_PORT = 9100
ROLES = ('node', 'libvirt')
# Kubernetes' alphabet for generated name suffixes (no vowels, no 0, 1, 3).
K8S_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789'


def helm_pod(hypervisor):
    """The name of the libvirt DaemonSet's pod on a node: a stable suffix."""
    n = zlib.crc32(hypervisor.encode())
    suffix = ''
    for _ in range(5):
        n, i = divmod(n, len(K8S_ALPHABET))
        suffix += K8S_ALPHABET[i]
    return 'libvirt-libvirt-default-' + suffix


def target_labels(flavour, role, host):
    """The labels a deployment puts on a hypervisor's target, besides job."""
    if flavour.name == 'kolla-legacy':
        # prometheus_instance_label: "{{ ansible_facts.hostname }}"
        return {'instance': service_host_of(host)}
    if flavour.name == 'helm':
        if role == 'node':      # relabelled from __meta_kubernetes_pod_node_name
            return {'hostname': host.name}
        # what prometheus-operator sets for a PodMonitor's target
        return {'namespace': 'openstack', 'container': 'libvirt-exporter',
                'pod': helm_pod(host.name), 'endpoint': 'metrics'}
    return {}


def exporter_ip(flavour, host):
    """The address a hypervisor's exporters listen on, or None if unusable.

    Nova's host_ip (the API network), or for a separate monitoring network
    127.0.1.N for host_ip 127.0.0.N.
    """
    try:
        ip = ipaddress.IPv4Address(host.ip or '')
    except ValueError:
        return None
    if not ip.is_loopback:
        return None
    if flavour.monitoring_network:
        return '127.0.1.%d' % ip.packed[3]
    return str(ip)


Endpoint = collections.namedtuple('Endpoint', 'role hypervisor ip port labels')


def endpoints(flavour, hosts):
    """([Endpoint], problems): each hypervisor's two exporters.

    A hypervisor without a usable address, or with one another has (Nova
    has not yet taken a compute's new my_ip), gets none; problems says why.
    """
    result, problems, taken = [], [], {}
    for host in sorted(hosts, key=lambda h: (service_host_of(h), h.name)):
        ip = exporter_ip(flavour, host)
        if ip is None:
            problems.append('%s: no loopback host_ip (%r)' % (host.name, host.ip))
            continue
        if ip in taken:
            problems.append('%s: address %s is %s\'s already' % (host.name, ip, taken[ip]))
            continue
        taken[ip] = host.name
        for role, port in (('node', NODE_PORT), ('libvirt', flavour.libvirt_port)):
            result.append(Endpoint(role, host.name, ip, port,
                                   target_labels(flavour, role, host)))
    return result, problems


def targets_doc(endpoints_, role):
    """Prometheus file_sd content for one role: one target per hypervisor."""
    return [{'targets': ['%s:%d' % (e.ip, e.port)], 'labels': e.labels}
            for e in endpoints_ if e.role == role]


def write_atomic(path, text, mode=0o644):
    """Replace a file at once: Prometheus or libvirt may read it any time."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.%s-' % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ------------------------------------------------------------------ libvirt test driver

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
TEST_NS = 'http://libvirt.org/schemas/domain/test/1.0'


def nova_version():
    try:
        from importlib import metadata
        return metadata.version('nova')
    except Exception:       # not in the devcloud's venv: any version will do
        return ''


def _text(value):
    return saxutils.escape(str(value if value is not None else ''))


def _attr(value):
    return saxutils.quoteattr(str(value if value is not None else ''))


def domain_xml(server, package):
    """One <domain> of libvirt's test driver, with Nova's metadata as Nova
    writes it (nova/virt/libvirt/config.py, LibvirtConfigGuestMetaNova*)."""
    created = ''
    if server.created is not None:
        created = time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(server.created))
    kib = server.ram_mib * 1024
    runstate = ''
    if domain_state(server.status) == DOMAIN_PAUSED:
        runstate = '    <test:runstate>%d</test:runstate>\n' % DOMAIN_PAUSED
    return (
        '  <domain type="test" xmlns:test=%(test_ns)s>\n'
        '    <name>%(name)s</name>\n'
        '    <uuid>%(uuid)s</uuid>\n'
        '    <metadata>\n'
        '      <nova:instance xmlns:nova=%(nova_ns)s>\n'
        '        <nova:package version=%(package)s/>\n'
        '        <nova:name>%(display)s</nova:name>\n'
        '        <nova:creationTime>%(created)s</nova:creationTime>\n'
        '        <nova:flavor name=%(flavor)s id=%(flavor_id)s>\n'
        '          <nova:memory>%(ram)d</nova:memory>\n'
        '          <nova:disk>%(disk)s</nova:disk>\n'
        '          <nova:swap>0</nova:swap>\n'
        '          <nova:ephemeral>0</nova:ephemeral>\n'
        '          <nova:vcpus>%(vcpus)d</nova:vcpus>\n'
        '          <nova:extraSpecs/>\n'
        '        </nova:flavor>\n'
        '        <nova:image uuid=%(image)s>\n'
        '          <nova:properties/>\n'
        '        </nova:image>\n'
        '        <nova:owner>\n'
        '          <nova:user uuid=%(user_id)s>%(user)s</nova:user>\n'
        '          <nova:project uuid=%(project_id)s>%(project)s</nova:project>\n'
        '        </nova:owner>\n'
        '        <nova:root type="image" uuid=%(image)s/>\n'
        '        <nova:ports/>\n'
        '      </nova:instance>\n'
        '    </metadata>\n'
        '    <memory unit="KiB">%(kib)d</memory>\n'
        '    <currentMemory unit="KiB">%(kib)d</currentMemory>\n'
        '    <vcpu placement="static">%(vcpus)d</vcpu>\n'
        '%(runstate)s'
        '    <os>\n'
        '      <type arch="x86_64">hvm</type>\n'
        '    </os>\n'
        '    <devices>\n'
        '      <disk type="file" device="disk">\n'
        '        <source file=%(disk_file)s/>\n'
        '        <target dev="vda" bus="virtio"/>\n'
        '      </disk>\n'
        '    </devices>\n'
        '  </domain>\n') % {
            'test_ns': _attr(TEST_NS), 'nova_ns': _attr(NOVA_NS), 'package': _attr(package),
            'name': _text(domain_name(server)), 'uuid': _text(server.id),
            'display': _text(server.name), 'created': _text(created),
            'flavor': _attr(server.flavor_name), 'flavor_id': _attr(server.flavor_id),
            'ram': server.ram_mib, 'disk': _text(server.disk_gb or 0), 'vcpus': server.vcpus,
            'image': _attr(server.image_id), 'user_id': _attr(server.user_id),
            'user': _text(server.user_name), 'project_id': _attr(server.project_id),
            'project': _text(server.project_name), 'kib': kib, 'runstate': runstate,
            'disk_file': _attr('/var/lib/nova/instances/%s/disk' % server.id)}


def node_xml(host, servers, package):
    """A node file for libvirt's test driver (test:///PATH): the hypervisor
    and the domains of its running and paused servers.  A stopped server's
    domain is left out: the exporter it feeds lists active domains only."""
    cores = max(1, host.threads // 2)
    parts = ['<node>\n',
             '  <cpu>\n    <mhz>2400</mhz>\n    <model>x86_64</model>\n    <nodes>1</nodes>\n'
             '    <sockets>1</sockets>\n    <cores>%d</cores>\n    <threads>%d</threads>\n'
             '    <active>%d</active>\n  </cpu>\n' % (cores, host.threads // cores, host.threads),
             '  <memory>%d</memory>\n' % (host.mem_mib * 1024)]
    for server in sorted(servers, key=lambda s: (domain_name(s), s.id)):
        if server.host == host.name and \
                domain_state(server.status) in (DOMAIN_RUNNING, DOMAIN_PAUSED):
            parts.append(domain_xml(server, package))
    parts.append('</node>\n')
    return ''.join(parts)


# ------------------------------------------------------------------ sources

def _field(obj, key):
    """A field of an SDK resource (attribute) or of a plain dict."""
    value = getattr(obj, key, None)
    if value is None and isinstance(obj, dict):
        value = obj.get(key)
    return value


def _epoch(text):
    """Nova's ISO 8601 time -> Unix time, or None."""
    try:
        when = datetime.datetime.fromisoformat(str(text).replace('Z', '+00:00'))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


class OpenStackSource(object):
    """Hosts and servers from Nova, Placement and Keystone through openstacksdk."""

    NAMES_INTERVAL = 30.0       # at most this often, a re-read for an unknown id

    def __init__(self, cloud):
        import openstack  # only needed here: the model and tests do without

        import devcloud_retry  # beside this script
        # Polls every 2 s: GETs retried on a dropped keep-alive connection.
        self.conn = devcloud_retry.retrying(openstack.connect(cloud=cloud))
        self.raise_from_response = openstack.exceptions.raise_from_response
        self.users, self.projects, self.flavor_ids = {}, {}, {}
        self.names_at = None

    def _names(self, servers):
        """User and project names and flavor ids, for the libvirt metadata."""
        unknown = any(s.user_id not in self.users or s.project_id not in self.projects
                      for s in servers)
        now = time.monotonic()
        if self.names_at is not None and \
                (not unknown or now - self.names_at < self.NAMES_INTERVAL):
            return
        self.names_at = now
        try:
            self.users = {u.id: u.name for u in self.conn.identity.users()}
            self.projects = {p.id: p.name for p in self.conn.identity.projects()}
            self.flavor_ids = {f.name: f.id for f in self.conn.compute.flavors()}
        except Exception as exc:
            LOG.warning('listing users, projects or flavors failed: %s: %s',
                        type(exc).__name__, exc)

    def servers(self):
        result = []
        for s in self.conn.compute.servers(details=True, all_projects=True):
            flavor = s.flavor or {}     # embedded (microversion >= 2.47)
            flavor_name = _field(flavor, 'original_name') or _field(flavor, 'name')
            result.append(Server(
                # the node, as os-hypervisors and Placement name it (not
                # the service host, compute_host: they differ)
                id=s.id, name=s.name or s.id, host=s.hypervisor_hostname,
                status=(s.status or '').upper(),
                vcpus=int(_field(flavor, 'vcpus') or 0),
                ram_mib=int(_field(flavor, 'ram') or 0),
                metadata=dict(s.metadata or {}),
                instance_name=s.instance_name, flavor_name=flavor_name,
                disk_gb=_field(flavor, 'disk'), user_id=s.user_id, project_id=s.project_id,
                created=_epoch(s.created_at) if s.created_at else None,
                image_id=_field(s.image or {}, 'id')))
        self._names(result)
        return [s._replace(user_name=self.users.get(s.user_id),
                           project_name=self.projects.get(s.project_id),
                           flavor_id=self.flavor_ids.get(s.flavor_name))
                for s in result]

    def hosts(self):
        # 2.87: from 2.88 on, Nova asks every compute for its uptime by RPC
        # for each listing (60 s when one is not consuming yet)
        response = self.conn.compute.get('/os-hypervisors/detail', microversion='2.87')
        self.raise_from_response(response)
        hypervisors = response.json()['hypervisors']
        rps = {rp.name: rp for rp in self.conn.placement.resource_providers()}
        result = []
        for h in hypervisors:
            name = h['hypervisor_hostname']
            rp = rps.get(name)
            if rp is None:
                LOG.warning('hypervisor %s: no resource provider, skipped', name)
                continue
            inv = {i.resource_class: i.total
                   for i in self.conn.placement.resource_provider_inventories(rp)}
            if not inv.get('VCPU') or not inv.get('MEMORY_MB'):
                LOG.warning('hypervisor %s: no VCPU/MEMORY_MB inventory, skipped', name)
                continue
            result.append(Host(name, int(inv['VCPU']), int(inv['MEMORY_MB']),
                               (h.get('service') or {}).get('host'), h.get('host_ip'),
                               h.get('hypervisor_type') not in (None, 'fake')))
        return result


class FakeSource(object):
    """Hosts and servers from a JSON file (format: see module doc)."""

    def __init__(self, path):
        self.path = path

    def _load(self):
        with open(self.path) as f:
            return json.load(f)

    def hosts(self):
        return [Host(h['name'], int(h['vcpus']), int(h['memory_mb']), h.get('service_host'),
                     h.get('host_ip'), bool(h.get('real')))
                for h in self._load().get('hosts', [])]

    def servers(self):
        return [Server(id=s['id'], name=s.get('name', s['id']), host=s.get('host'),
                       status=s.get('status', 'ACTIVE').upper(),
                       vcpus=int(s.get('vcpus', 1)), ram_mib=int(s.get('ram', 1024)),
                       metadata=s.get('metadata', {}), instance_name=s.get('instance_name'),
                       flavor_name=s.get('flavor'), flavor_id=s.get('flavor_id'),
                       disk_gb=s.get('disk'), user_id=s.get('user_id'),
                       user_name=s.get('user_name'), project_id=s.get('project_id'),
                       project_name=s.get('project_name'),
                       created=_epoch(s['created']) if s.get('created') else None,
                       image_id=s.get('image'))
                for s in self._load().get('servers', [])]


# ------------------------------------------------------------------ endpoints

class RealExporters(object):
    """Debian's own node_exporter and libvirt exporter for one hypervisor.

    node_exporter runs in its own UTS namespace, so its node_uname_info
    names the service host; the libvirt exporter reads the test driver's
    node file (libvirt_dir/<host>.xml) afresh at every scrape.  Both stop
    with this process (SIGTERM from the devcloud script reaches the tree).
    """

    NODE = 'prometheus-node-exporter'
    LIBVIRT = 'prometheus-libvirt-exporter'

    def __init__(self, libvirt_dir):
        self.libvirt_dir = libvirt_dir
        self.key = None
        self.procs = []
        self.failed = None

    @classmethod
    def available(cls):
        return all(shutil.which(b) for b in (cls.NODE, cls.LIBVIRT))

    def xml_path(self, host):
        return os.path.join(self.libvirt_dir, '%s.xml' % service_host_of(host))

    def ensure(self, host, ip):
        """Run them for host on ip (restarting them for another); True if up."""
        key = (service_host_of(host), ip)
        if key == self.key and all(p.poll() is None for p in self.procs):
            return True
        self.stop()
        if not self.available():
            if self.failed != key:
                LOG.error('%s or %s not found (devcloud install): simulating %s instead',
                          self.NODE, self.LIBVIRT, host.name)
            self.failed = key
            return False
        name = service_host_of(host)
        if not re.match(r'^[a-z0-9-]+$', name):
            LOG.error('service host %r is no host name: simulating it', name)
            return False
        unshare = ['unshare', '--uts'] if os.geteuid() == 0 else ['unshare', '-r', '--uts']
        node = unshare + [
            'sh', '-c', 'hostname "$0" && exec "$@"', name, self.NODE,
            '--web.listen-address=%s:%d' % (ip, NODE_PORT), '--collector.disable-defaults',
            '--collector.cpu', '--collector.meminfo', '--collector.pressure',
            '--collector.uname', '--web.disable-exporter-metrics']
        libvirt = [self.LIBVIRT,
                   '--web.listen-address=%s:%d' % (ip, FLAVOURS['debian'].libvirt_port),
                   '--libvirt.uri=test://%s' % os.path.abspath(self.xml_path(host)),
                   '--libvirt.export-nova-metadata']
        try:
            self.procs = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
                          for cmd in (node, libvirt)]
        except OSError as exc:
            LOG.error('starting the real exporters failed: %s', exc)
            self.stop()
            return False
        self.key = key
        LOG.info('real node_exporter and libvirt exporter for %s on %s (pids %s)',
                 host.name, ip, ' '.join(str(p.pid) for p in self.procs))
        return True

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
        self.key = None


class TargetServer(http.server.ThreadingHTTPServer):
    """One exporter endpoint: ``target`` is (role, hypervisor name)."""
    daemon_threads = True


class TargetHandler(http.server.BaseHTTPRequestHandler):
    exporter = None     # the Exporter whose series are served

    def do_GET(self):
        role, hypervisor = self.server.target
        path = urllib.parse.urlsplit(self.path).path
        if path == '/metrics':
            try:
                body = self.exporter.render(role, hypervisor, time.time())
            except Unavailable as exc:
                _send(self, 503, '%s\n' % exc)
                return
            if body is None:
                _send(self, 404, 'unknown hypervisor\n')
            else:
                _send(self, 200, body, 'text/plain; version=0.0.4; charset=utf-8')
        elif path == '/':
            _send(self, 200, '<html><head><title>%s</title></head><body><a href="/metrics">'
                  'Metrics</a></body></html>\n' % role, 'text/html; charset=utf-8')
        else:
            _send(self, 404, 'not found\n')

    do_HEAD = do_GET

    def log_message(self, fmt, *args):
        LOG.debug('%s %s', self.address_string(), fmt % args)


def _send(handler, code, body, ctype='text/plain; charset=utf-8'):
    data = body.encode()
    handler.send_response(code)
    handler.send_header('Content-Type', ctype)
    handler.send_header('Content-Length', str(len(data)))
    handler.end_headers()
    if handler.command != 'HEAD':
        handler.wfile.write(data)


# How often a listener looks for its shutdown: a flavour switch or a removed
# hypervisor waits for that long.
SERVE_POLL = 0.1


def _stop_server(server):
    server.shutdown()
    server.server_close()


class Listeners(object):
    """The simulated endpoints: one HTTP server per address, made and closed
    as hypervisors come and go."""

    def __init__(self, handler):
        self.handler = handler
        self.servers = {}       # (ip, port) -> TargetServer
        self.failed = set()     # addresses whose bind failed (logged once)

    def reconcile(self, wanted):
        """wanted: {(ip, port): (role, hypervisor)}."""
        self._close(*[a for a in self.servers if a not in wanted])
        for address, target in wanted.items():
            server = self.servers.get(address)
            if server is not None:
                server.target = target
                continue
            try:
                server = TargetServer(address, self.handler)
            except OSError as exc:
                if address not in self.failed:
                    LOG.error('cannot listen on %s:%d for %s: %s', address[0], address[1],
                              target[1], exc)
                self.failed.add(address)
                continue
            self.failed.discard(address)
            server.target = target
            threading.Thread(target=server.serve_forever, args=(SERVE_POLL,),
                             name='%s:%d' % address, daemon=True).start()
            self.servers[address] = server

    def _close(self, *addresses):
        # shutdown() waits for a turn of serve_forever's loop: all at once
        closing = [threading.Thread(target=_stop_server, args=(self.servers.pop(a),))
                   for a in addresses]
        for thread in closing:
            thread.start()
        for thread in closing:
            thread.join()

    def close(self):
        self._close(*self.servers)


class Publisher(object):
    """Puts a flavour's endpoints in place: listeners, the real exporters,
    the test driver's node file and Prometheus' targets files."""

    def __init__(self, flavour, targets_dir, listeners, real=None):
        self.flavour = flavour
        self.targets_dir = targets_dir
        self.listeners = listeners
        self.real = real
        self.real_host = None       # the hypervisor the real exporters serve
        self.written = {}           # role -> the targets document last written
        self.problems = None
        self.package = nova_version()

    def publish(self, hosts, servers):
        """Returns False while some hypervisor has no address of its own."""
        found, problems = endpoints(self.flavour, hosts)
        if problems != self.problems:
            for problem in problems:
                LOG.warning('no exporters for %s', problem)
            self.problems = problems
        first = self._first(hosts, found) if self.real is not None else None
        if first is None and self.real is not None:
            self.real.stop()
        elif first is not None and self.real.key and self.real.key[0] != service_host_of(first):
            self.real.stop()    # its addresses are about to be simulated
        # a real hypervisor's own exporters listen there: targets only
        real = {h.name for h in hosts if h.real}
        wanted = {(e.ip, e.port): (e.role, e.hypervisor) for e in found
                  if e.hypervisor not in real}
        self.listeners.reconcile({address: target for address, target in wanted.items()
                                  if first is None or target[1] != first.name})
        self.real_host = None
        if first is not None:
            if self._real(first, servers, found):
                self.real_host = first.name
            else:
                self.listeners.reconcile(wanted)
        if self.targets_dir:
            for role in ROLES:
                doc = targets_doc(found, role)
                if doc != self.written.get(role):
                    try:
                        write_atomic(os.path.join(self.targets_dir, '%s.json' % role),
                                     json.dumps(doc, indent=2) + '\n')
                        self.written[role] = doc
                        LOG.info('targets %s: %d hypervisors', role, len(doc))
                    except OSError as exc:
                        LOG.error('writing the %s targets failed: %s', role, exc)
        return not problems

    @staticmethod
    def _first(hosts, found):
        """The hypervisor for the real exporters: the first by service host."""
        placed = {e.hypervisor for e in found}
        return next((h for h in sorted(hosts, key=lambda h: (service_host_of(h), h.name))
                     if h.name in placed and not h.real), None)

    def _real(self, host, servers, found):
        """Its node file written and the real exporters running: True if so."""
        try:
            write_atomic(self.real.xml_path(host), node_xml(host, servers, self.package))
        except OSError as exc:
            LOG.error('writing the libvirt node file failed: %s', exc)
        ip = next(e.ip for e in found if e.hypervisor == host.name)
        return self.real.ensure(host, ip)

    def close(self):
        self.listeners.close()
        if self.real is not None:
            self.real.stop()


class Poller(object):
    """Polls a source, feeds the model and publishes; keeps the last state
    on errors."""

    def __init__(self, source, model, publisher, host_interval, faults=NO_FAULTS):
        self.source = source
        self.model = model
        self.faults = faults
        self.publisher = publisher
        self.host_interval = host_interval
        self.hosts = None
        self.servers = None
        self.hosts_at = None
        self.last_ok = None         # time of the last successful update
        self.lock = threading.Lock()    # one publisher at a time: poll or switch

    def switch(self, publisher):
        """Another flavour's endpoints, at once, from the last poll's state."""
        with self.lock:
            self.publisher.close()
            self.publisher = publisher
            if self.hosts is not None and self.servers is not None:
                publisher.publish(self.hosts, self.servers)

    def poll(self, now):
        if self.hosts_at is None or now - self.hosts_at >= self.host_interval:
            try:
                self.hosts = self.source.hosts()
                self.hosts_at = now
            except Exception as exc:
                # str(exc) of SDK/keystoneauth errors holds no credentials
                LOG.error('listing hypervisors failed: %s: %s', type(exc).__name__, exc)
        try:
            self.servers = self.source.servers()
            ok = True
        except Exception as exc:
            LOG.error('listing servers failed: %s: %s', type(exc).__name__, exc)
            ok = False
        if self.hosts is None or self.servers is None:
            return
        # also after an error: the last known state goes on loading the hosts
        self.model.update(self.hosts, self.servers, now, self.faults)
        with self.lock:
            complete = self.publisher.publish(self.hosts, self.servers)
        if ok:
            # after publishing: from the first /healthz 200 on, the targets
            # files are there
            self.last_ok = now
        known = {h.name for h in self.hosts}
        if not complete or any(s.host and s.host not in known for s in self.servers):
            # a new hypervisor, or one whose host_ip Nova has not updated yet:
            # list them again at the next poll, not in host_interval
            self.hosts_at = None


class Exporter(object):
    """What every endpoint serves: the model's series in a flavour."""

    def __init__(self, model, flavour, uname=None, faults=NO_FAULTS):
        self.model = model
        self.flavour = flavour
        self.uname = uname or machine_uname()
        self.faults = faults

    def render(self, role, hypervisor, now):
        """The endpoint's text, None for an unknown hypervisor; Unavailable
        while a fault keeps it from answering."""
        mode = self.faults.mode(hypervisor, now)
        if mode in ('down', 'restart'):
            raise Unavailable('%s: %s' % (hypervisor, mode))
        if role == 'node' and mode == 'relabel':
            names = self.model.hypervisors()
            if hypervisor in names:
                hypervisor = names[(names.index(hypervisor) + 1) % len(names)]
        view = self.model.view(hypervisor, now)
        if view is None:
            return None
        if role == 'node':
            return render_node(view, self.uname, cpus=mode != 'zero-cpus')
        return LIBVIRT_RENDERERS[self.flavour.libvirt](view)


class ControlHandler(http.server.BaseHTTPRequestHandler):
    poller = None
    switch = None       # switch(flavour name): the endpoints of another flavour

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        if path not in ('/flavour', '/fault'):
            _send(self, 404, 'not found\n')
            return
        length = int(self.headers.get('Content-Length') or 0)
        name = self.rfile.read(min(length, 200)).decode(errors='replace').strip()
        if path == '/fault':
            self.fault(name)
            return
        if name not in FLAVOURS:
            _send(self, 400, 'unknown flavour %r: one of %s\n' % (name, ', '.join(FLAVOURS)))
            return
        self.switch(name)
        _send(self, 200, 'flavour %s\n' % name)

    def fault(self, body):
        """``HYPERVISOR MODE``: the hypervisor by its name or its service
        host; the mode one of Faults.MODES."""
        ref, _, mode = body.partition(' ')
        mode = mode.strip()
        hosts = self.poller.hosts or ()
        found = [h.name for h in hosts if ref in (h.name, service_host_of(h))]
        if len(found) != 1 or mode not in Faults.MODES:
            _send(self, 400, 'expected HYPERVISOR MODE, a hypervisor of %s and a mode '
                  'of %s; got %r\n' % (', '.join(sorted(h.name for h in hosts)),
                                       ', '.join(Faults.MODES), body))
            return
        now = time.time()
        if mode == 'restart':
            self.poller.model.restart(found[0], now)
        self.poller.faults.set(found[0], mode, now)
        LOG.info('fault %s on %s', mode, found[0])
        _send(self, 200, 'fault %s on %s\n' % (mode, found[0]))

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        publisher = self.poller.publisher
        if path == '/healthz':
            if self.poller.last_ok is None:
                _send(self, 503, 'no successful poll yet\n')
            elif publisher.problems:
                _send(self, 503, 'no exporters for %s\n' % '; '.join(publisher.problems))
            else:
                _send(self, 200, 'ok, last poll %.1fs ago, %d hypervisors, flavour %s\n' % (
                    time.time() - self.poller.last_ok, len(self.poller.model.hypervisors()),
                    publisher.flavour.name))
        elif path == '/':
            lines = ['flavour %s\n' % publisher.flavour.name]
            servers = dict(publisher.listeners.servers)     # the poller may change it
            for (ip, port), server in sorted(servers.items(), key=lambda i: i[1].target):
                role, hypervisor = server.target
                lines.append('%s %s http://%s:%d/metrics\n' % (hypervisor, role, ip, port))
            if publisher.real_host:
                lines.append('%s real exporters\n' % publisher.real_host)
            for hypervisor, mode in self.poller.faults.listing(time.time()):
                lines.append('%s fault %s\n' % (hypervisor, mode))
            _send(self, 200, ''.join(lines))
        else:
            _send(self, 404, 'not found\n')

    do_HEAD = do_GET

    def log_message(self, fmt, *args):
        LOG.debug('%s %s', self.address_string(), fmt % args)


def parse_listen(text):
    host, sep, port = text.rpartition(':')
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError('expected HOST:PORT, got %r' % text)
    if host == 'localhost':
        host = '127.0.0.1'
    try:
        loopback = ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise argparse.ArgumentTypeError('refusing to listen on %r: IPv4 loopback only' % host)
    return host, int(port)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--os-cloud', default=os.environ.get('OS_CLOUD', 'devcloud'))
    parser.add_argument('--fake-cloud', metavar='FILE',
                        help='read hosts and servers from this JSON file instead')
    parser.add_argument('--flavour', choices=list(FLAVOURS), default=DEFAULT_FLAVOUR)
    parser.add_argument('--listen', default='127.0.0.1:9180', type=parse_listen,
                        help='control address: /healthz and the list of endpoints')
    parser.add_argument('--poll-interval', type=float, default=2.0)
    parser.add_argument('--host-interval', type=float, default=None,
                        help='seconds between hypervisor listings '
                             '(default 30, with --fake-cloud every poll)')
    parser.add_argument('--targets-dir', help='where to write the Prometheus file_sd files')
    parser.add_argument('--libvirt-dir', help="where to write the test driver's node files "
                        '(debian: default the targets dir)')
    parser.add_argument('--debug', action='store_true')
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, stream=sys.stderr,
                        format='%(asctime)s exporter %(levelname)s %(message)s')
    # the SDK's and keystoneauth's debug logs could show request headers
    for name in ('openstack', 'keystoneauth', 'urllib3'):
        logging.getLogger(name).setLevel(logging.WARNING)

    if args.fake_cloud:
        source = FakeSource(args.fake_cloud)
        host_interval = args.host_interval if args.host_interval is not None else 0.0
    else:
        source = OpenStackSource(args.os_cloud)
        host_interval = args.host_interval if args.host_interval is not None else 30.0
    flavour = FLAVOURS[args.flavour]
    model = Model()
    faults = Faults()
    exporter = Exporter(model, flavour, faults=faults)
    TargetHandler.exporter = exporter
    libvirt_dir = args.libvirt_dir or args.targets_dir or '.'
    for directory in (args.targets_dir, libvirt_dir):
        if directory:
            os.makedirs(directory, exist_ok=True)

    def publisher_for(flavour):
        real = RealExporters(libvirt_dir) if flavour.name == 'debian' else None
        return Publisher(flavour, args.targets_dir, Listeners(TargetHandler), real)

    poller = Poller(source, model, publisher_for(flavour), host_interval, faults)

    def switch(name):
        LOG.info('flavour %s', name)
        exporter.flavour = FLAVOURS[name]
        poller.switch(publisher_for(FLAVOURS[name]))

    ControlHandler.poller = poller
    ControlHandler.switch = staticmethod(switch)
    httpd = http.server.ThreadingHTTPServer(args.listen, ControlHandler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(SERVE_POLL,), name='http',
                     daemon=True).start()
    LOG.info('flavour %s, control on http://%s:%d/ (%s)', flavour.name, args.listen[0],
             args.listen[1], 'fake cloud %s' % args.fake_cloud if args.fake_cloud
             else 'cloud %s' % args.os_cloud)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.is_set():
            started = time.time()
            poller.poll(started)
            stop.wait(max(0.1, args.poll_interval - (time.time() - started)))
    finally:
        with poller.lock:
            poller.publisher.close()
        httpd.shutdown()
        httpd.server_close()
    LOG.info('stopped')
    return 0


if __name__ == '__main__':
    sys.exit(main())
