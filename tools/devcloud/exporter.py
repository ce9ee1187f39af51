#!/usr/bin/env python3
"""Simulated node_exporter + libvirt-exporter for the devcloud.

Reads the servers and hypervisors of a (devcloud) OpenStack and serves, for
every hypervisor, the Prometheus series a real node_exporter and
libvirt-exporter on that host would show, computed from a load model.  The
model is driven by server metadata, so a test sets the load of a server with
``openstack server set --property devcloud:cpu=0.9 SERVER``, and after a live
migration the load follows the server to its new host (a closed loop).

Usage::

    exporter.py --os-cloud devcloud --listen 127.0.0.1:9180 \\
        --poll-interval 2 --targets-file PATH      # OS_CLIENT_CONFIG_FILE
    exporter.py --fake-cloud cloud.json ...        # no OpenStack, see below

HTTP: ``/hosts/<hypervisor_hostname>/metrics`` (text exposition format),
``/healthz`` (503 until the first successful poll), ``/`` (list of hosts).

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

    d        = sum(cpu_frac * vcpus) + 0.02 * T          CPU demand, cores
    busy     = min(T, d)                                 cores busy
    m        = sum(mem_frac * ram_mib) + 2048            memory demand, MiB
    used     = min(M, m)                                 MiB used
    p_cpu    = pressure(d / T, knee=0.7)                 PSI cpu "some"
    p_mem    = pressure(m / M, knee=0.9)                 PSI memory "some"
    pressure(x, k) = min(1, 0.1 * (max(0, x - k) / (1 - k))**2
                            + 2 * max(0, x - 1)**1.5)

``pressure`` is 0 below the knee, 0.1 at full load (x = 1), ~0.46 at 20 %
over, 1 from ~40 % over; it is continuous with a continuous slope.

Series (rates are seconds per second; counters integrate the rates over real
time, piecewise constant between polls, and are extrapolated to the scrape
time so every scrape sees a fresh, monotonic value):

* ``node_cpu_seconds_total{cpu="i",mode="idle|user|system"}``, i in 0..T-1,
  busy time spread evenly: per CPU user = 0.85 * busy/T,
  system = 0.15 * busy/T, idle = 1 - busy/T;
* ``node_memory_MemTotal_bytes`` = M, ``node_memory_MemAvailable_bytes`` =
  M - used (gauges);
* ``node_pressure_cpu_waiting_seconds_total`` (rate p_cpu) and
  ``node_pressure_memory_waiting_seconds_total`` (rate p_mem);
* per server placed on the host, labels ``domain`` (server name) and
  ``uuid`` (server id): ``libvirt_domain_info_cpu_time_seconds_total`` (rate
  cpu_frac * vcpus while running: the demand, not capped by the host's
  capacity), ``libvirt_domain_info_memory_usage_bytes`` (mem_frac * ram while
  running or paused), ``libvirt_domain_info_maximum_memory_bytes`` (ram) and
  ``libvirt_domain_info_virtual_cpus`` (gauges).

A server's counter is kept per server id, not per host: it continues across
a migration and is shown under the server's current host only.  A host's
counters start at 0 when the host first appears.

Prometheus finds the hosts through a file_sd targets file (one target per
hypervisor, ``instance="<hv>:9100"``, ``hypervisor="<hv>"``), rewritten
atomically whenever the list of hypervisors changes.

--fake-cloud FILE replaces OpenStack by a JSON file, re-read every poll::

    {"hosts": [{"name": "hv01", "vcpus": 8, "memory_mb": 16384}],
     "servers": [{"id": "...", "name": "vm1", "host": "hv01",
                  "status": "ACTIVE", "vcpus": 2, "ram": 4096,
                  "metadata": {"devcloud:cpu": "0.8"}}]}
"""

import argparse
import collections
import http.server
import ipaddress
import json
import logging
import math
import os
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib

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

Host = collections.namedtuple('Host', 'name threads mem_mib')
Server = collections.namedtuple('Server', 'id name host status vcpus ram_mib metadata')


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


ServerLoad = collections.namedtuple('ServerLoad', 'server cpu_rate mem_bytes')
HostLoad = collections.namedtuple(
    'HostLoad', 'host demand busy mem_demand_mib mem_used_mib p_cpu p_mem servers')


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
    return ServerLoad(server, cpu_rate, mem_bytes)


def host_load(host, servers, now):
    """The load of one host given the servers placed on it."""
    loads = [server_load(s, now) for s in servers]
    threads = max(1, host.threads)
    demand = sum(sl.cpu_rate for sl in loads) + CPU_OVERHEAD * threads
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
    ``render()`` at every scrape.  Counters are kept in one dict keyed by
    tuples: ('cpu', host, cpu, mode), ('psi_cpu', host), ('psi_mem', host)
    and ('server', server_id); each has the rate in force since the last
    update.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._counters = {}
        self._rates = {}
        self._loads = {}        # hypervisor name -> HostLoad
        self._t_update = None   # time of the last update
        self._t_high = None     # latest time seen by update() or render()

    def _clamp(self, now):
        # never go back in time (clock jump, or a render that ran between
        # the poll's time.time() and its update()): counters stay monotonic
        if self._t_high is not None and now < self._t_high:
            now = self._t_high
        self._t_high = now
        return now

    def update(self, hosts, servers, now):
        """Integrate the old rates up to now, then take the new state."""
        with self._lock:
            now = self._clamp(now)
            if self._t_update is not None:
                dt = now - self._t_update
                for key, rate in self._rates.items():
                    self._counters[key] = self._counters.get(key, 0.0) + rate * dt
            self._t_update = now

            by_host = collections.defaultdict(list)
            for server in servers:
                if server.host:
                    by_host[server.host].append(server)
            rates = {}
            loads = {}
            for host in hosts:
                load = host_load(host, by_host.get(host.name, ()), now)
                loads[host.name] = load
                per_cpu = load.busy / max(1, host.threads)
                for i in range(host.threads):
                    rates[('cpu', host.name, i, 'idle')] = 1.0 - per_cpu
                    rates[('cpu', host.name, i, 'user')] = USER_SHARE * per_cpu
                    rates[('cpu', host.name, i, 'system')] = (1.0 - USER_SHARE) * per_cpu
                rates[('psi_cpu', host.name)] = load.p_cpu
                rates[('psi_mem', host.name)] = load.p_mem
            for server in servers:
                # global per server (also unplaced ones), so nothing resets
                # when the server changes host
                rates[('server', server.id)] = 0.0
            for load in loads.values():
                for sl in load.servers:
                    rates[('server', sl.server.id)] = sl.cpu_rate
            # forget what is gone (deleted server, removed host or CPU)
            self._counters = {k: self._counters.get(k, 0.0) for k in rates}
            self._rates = rates
            self._loads = loads

    def hypervisors(self):
        with self._lock:
            return sorted(self._loads)

    def render(self, hypervisor, now):
        """Text exposition of one hypervisor's series, or None if unknown."""
        with self._lock:
            load = self._loads.get(hypervisor)
            if load is None:
                return None
            elapsed = max(0.0, self._clamp(now) - self._t_update)

            def counter(key):
                return self._counters[key] + self._rates[key] * elapsed

            host = load.host
            out = []
            family(out, 'node_cpu_seconds_total', 'counter',
                   'Seconds the CPUs spent in each mode.',
                   [({'cpu': str(i), 'mode': mode}, counter(('cpu', host.name, i, mode)))
                    for i in range(host.threads) for mode in ('idle', 'user', 'system')])
            family(out, 'node_memory_MemTotal_bytes', 'gauge',
                   'Memory information field MemTotal_bytes.',
                   [({}, host.mem_mib * MIB)])
            family(out, 'node_memory_MemAvailable_bytes', 'gauge',
                   'Memory information field MemAvailable_bytes.',
                   [({}, int((host.mem_mib - load.mem_used_mib) * MIB))])
            family(out, 'node_pressure_cpu_waiting_seconds_total', 'counter',
                   'Total time in seconds that processes have waited for CPU time',
                   [({}, counter(('psi_cpu', host.name)))])
            family(out, 'node_pressure_memory_waiting_seconds_total', 'counter',
                   'Total time in seconds that processes have waited for memory',
                   [({}, counter(('psi_mem', host.name)))])
            servers = sorted(load.servers, key=lambda sl: (sl.server.name, sl.server.id))

            def dom(sl):
                return {'domain': sl.server.name, 'uuid': sl.server.id}

            family(out, 'libvirt_domain_info_cpu_time_seconds_total', 'counter',
                   'Amount of CPU time used by the domain, in seconds.',
                   [(dom(sl), counter(('server', sl.server.id))) for sl in servers])
            family(out, 'libvirt_domain_info_memory_usage_bytes', 'gauge',
                   'Memory usage of the domain, in bytes.',
                   [(dom(sl), sl.mem_bytes) for sl in servers])
            family(out, 'libvirt_domain_info_maximum_memory_bytes', 'gauge',
                   'Maximum allowed memory of the domain, in bytes.',
                   [(dom(sl), sl.server.ram_mib * MIB) for sl in servers])
            family(out, 'libvirt_domain_info_virtual_cpus', 'gauge',
                   'Number of virtual CPUs for the domain.',
                   [(dom(sl), sl.server.vcpus) for sl in servers])
            return ''.join(out)


# ------------------------------------------------------------------ exposition

def _escape_label(value):
    return str(value).replace('\\', r'\\').replace('"', r'\"').replace('\n', r'\n')


def format_value(value):
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return 'NaN'
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    return repr(float(value))


def family(out, name, kind, help_text, samples):
    """Append one metric family (HELP, TYPE, samples) to the list out."""
    out.append('# HELP %s %s\n' % (name, help_text.replace('\\', r'\\').replace('\n', r'\n')))
    out.append('# TYPE %s %s\n' % (name, kind))
    for labels, value in samples:
        if labels:
            text = ','.join('%s="%s"' % (k, _escape_label(v)) for k, v in labels.items())
            out.append('%s{%s} %s\n' % (name, text, format_value(value)))
        else:
            out.append('%s %s\n' % (name, format_value(value)))


def targets_doc(hypervisors, listen):
    """Prometheus file_sd content: one target per hypervisor."""
    return [{'targets': [listen],
             'labels': {'__metrics_path__': '/hosts/%s/metrics' % urllib.parse.quote(hv, safe=''),
                        'instance': '%s:9100' % hv,
                        'hypervisor': hv}}
            for hv in sorted(hypervisors)]


def write_targets(path, hypervisors, listen):
    """Write the targets file atomically (Prometheus may read it any time)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.targets-', dir=directory)
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump(targets_doc(hypervisors, listen), f, indent=2)
            f.write('\n')
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ------------------------------------------------------------------ sources

def _field(obj, key):
    """A field of an SDK resource (attribute) or of a plain dict."""
    value = getattr(obj, key, None)
    if value is None and isinstance(obj, dict):
        value = obj.get(key)
    return value


class OpenStackSource(object):
    """Hosts and servers from Nova and Placement through openstacksdk."""

    def __init__(self, cloud):
        import openstack  # only needed here: the model and tests do without

        import devcloud_retry  # beside this script
        # Polls every 2 s: GETs retried on a dropped keep-alive connection.
        self.conn = devcloud_retry.retrying(openstack.connect(cloud=cloud))

    def servers(self):
        result = []
        for s in self.conn.compute.servers(details=True, all_projects=True):
            flavor = s.flavor or {}     # embedded (microversion >= 2.47)
            result.append(Server(
                # the node, as os-hypervisors and Placement name it (not
                # the service host, compute_host: they differ)
                id=s.id, name=s.name or s.id, host=s.hypervisor_hostname,
                status=(s.status or '').upper(),
                vcpus=int(_field(flavor, 'vcpus') or 0),
                ram_mib=int(_field(flavor, 'ram') or 0),
                metadata=dict(s.metadata or {})))
        return result

    def hosts(self):
        names = [h.name for h in self.conn.compute.hypervisors(details=True)]
        rps = {rp.name: rp for rp in self.conn.placement.resource_providers()}
        result = []
        for name in names:
            rp = rps.get(name)
            if rp is None:
                LOG.warning('hypervisor %s: no resource provider, skipped', name)
                continue
            inv = {i.resource_class: i.total
                   for i in self.conn.placement.resource_provider_inventories(rp)}
            if not inv.get('VCPU') or not inv.get('MEMORY_MB'):
                LOG.warning('hypervisor %s: no VCPU/MEMORY_MB inventory, skipped', name)
                continue
            result.append(Host(name, int(inv['VCPU']), int(inv['MEMORY_MB'])))
        return result


class FakeSource(object):
    """Hosts and servers from a JSON file (format: see module doc)."""

    def __init__(self, path):
        self.path = path

    def _load(self):
        with open(self.path) as f:
            return json.load(f)

    def hosts(self):
        return [Host(h['name'], int(h['vcpus']), int(h['memory_mb']))
                for h in self._load().get('hosts', [])]

    def servers(self):
        return [Server(id=s['id'], name=s.get('name', s['id']), host=s.get('host'),
                       status=s.get('status', 'ACTIVE').upper(),
                       vcpus=int(s.get('vcpus', 1)), ram_mib=int(s.get('ram', 1024)),
                       metadata=s.get('metadata', {}))
                for s in self._load().get('servers', [])]


class Poller(object):
    """Polls a source and feeds the model; keeps the last state on errors."""

    def __init__(self, source, model, targets_file, listen, host_interval):
        self.source = source
        self.model = model
        self.targets_file = targets_file
        self.listen = listen
        self.host_interval = host_interval
        self.hosts = None
        self.servers = None
        self.hosts_at = None
        self.written = None         # hypervisor names in the targets file
        self.last_ok = None         # time of the last successful update

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
        self.model.update(self.hosts, self.servers, now)
        if ok:
            self.last_ok = now
        names = sorted(h.name for h in self.hosts)
        if self.targets_file and names != self.written:
            try:
                write_targets(self.targets_file, names, self.listen)
                self.written = names
                LOG.info('targets file: %d hypervisors', len(names))
            except OSError as exc:
                LOG.error('writing %s failed: %s', self.targets_file, exc)


# ------------------------------------------------------------------ HTTP

class Handler(http.server.BaseHTTPRequestHandler):
    model = None
    poller = None

    def _send(self, code, body, ctype='text/plain; charset=utf-8'):
        data = body.encode()
        self.send_response(code)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(data)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        parts = path.strip('/').split('/')
        if path == '/healthz':
            if self.poller.last_ok is None:
                self._send(503, 'no successful poll yet\n')
            else:
                self._send(200, 'ok, last poll %.1fs ago, %d hypervisors\n' % (
                    time.time() - self.poller.last_ok, len(self.model.hypervisors())))
        elif len(parts) == 3 and parts[0] == 'hosts' and parts[2] == 'metrics':
            body = self.model.render(urllib.parse.unquote(parts[1]), time.time())
            if body is None:
                self._send(404, 'unknown hypervisor\n')
            else:
                self._send(200, body, 'text/plain; version=0.0.4; charset=utf-8')
        elif path == '/':
            self._send(200, ''.join('/hosts/%s/metrics\n' % urllib.parse.quote(hv, safe='')
                                    for hv in self.model.hypervisors()))
        else:
            self._send(404, 'not found\n')

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
    parser.add_argument('--listen', default='127.0.0.1:9180', type=parse_listen)
    parser.add_argument('--poll-interval', type=float, default=2.0)
    parser.add_argument('--host-interval', type=float, default=None,
                        help='seconds between hypervisor listings '
                             '(default 30, with --fake-cloud every poll)')
    parser.add_argument('--targets-file', help='Prometheus file_sd JSON file to write')
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
    listen = '%s:%d' % args.listen
    model = Model()
    poller = Poller(source, model, args.targets_file, listen, host_interval)

    Handler.model = model
    Handler.poller = poller
    httpd = http.server.ThreadingHTTPServer(args.listen, Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, name='http', daemon=True).start()
    LOG.info('serving on http://%s/ (%s)', listen,
             'fake cloud %s' % args.fake_cloud if args.fake_cloud else 'cloud %s' % args.os_cloud)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.is_set():
        started = time.time()
        poller.poll(started)
        stop.wait(max(0.1, args.poll_interval - (time.time() - started)))
    httpd.shutdown()
    httpd.server_close()
    LOG.info('stopped')
    return 0


if __name__ == '__main__':
    sys.exit(main())
