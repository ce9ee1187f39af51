#!/usr/bin/env python3
"""node_exporter's host series for a real devcloud hypervisor, derived.

The devcloud's real hypervisors are libvirt daemons on one machine: they
share its CPUs and memory with each other, the control plane and whatever
else runs there, so a real node_exporter on either would show the same
machine-wide figures for both. A hypervisor's load is its guests' load, so
this serves node_exporter's series computed from the CPU time and memory of
the domains of one libvirt daemon, in node_exporter's format:

* ``node_cpu_seconds_total{cpu, mode}`` for the host's CPUs (libvirt's
  count): mode ``user`` the guests' CPU time spread evenly over them, mode
  ``idle`` the rest of the wall time since this exporter started;
  ``node_cpu_guest_seconds_total{cpu, mode="user"}`` the same guest time;
* ``node_memory_MemTotal_bytes`` (libvirt's host memory) and
  ``node_memory_MemAvailable_bytes`` (that less the guests' memory);
* ``node_uname_info{nodename}`` naming the hypervisor's service host.

A domain's CPU time counts from when this exporter first sees it on this
daemon: a guest that arrives by live migration brings none of the time it
used on its source, and one that leaves takes nothing away (the counters
only grow, as Prometheus' rate() needs). QEMU's own threads (TCG, I/O) are
part of a domain's CPU time, as on a real host.

Usage::

    realhv_node.py --uri qemu+tcp://127.0.0.41/system \\
        --listen 127.0.1.41:9100 --nodename rhv01
"""
import argparse
import http.server
import logging
import platform
import sys
import threading
import time

LOG = logging.getLogger('realhv_node')


class Counters(object):
    """The guests' CPU time, integrated across domains that come and go."""

    def __init__(self, now):
        self.started = now
        self.busy = 0.0     # guest CPU seconds, all CPUs
        self.last = {}      # domain uuid -> its CPU time (s) at the last sample

    def sample(self, cpu_times):
        """cpu_times: {uuid: seconds} of the domains running now."""
        for uuid, seconds in cpu_times.items():
            before = self.last.get(uuid)
            if before is not None and seconds > before:
                self.busy += seconds - before
        self.last = dict(cpu_times)

    def per_cpu(self, cpus, now):
        """(user, idle) seconds of each of CPUS host CPUs."""
        wall = max(0.0, now - self.started)
        user = min(self.busy / cpus, wall)
        return user, wall - user


class Source(object):
    """One libvirt daemon, reconnected after an error."""

    def __init__(self, uri):
        import libvirt  # libvirt-python, in the devcloud's venv
        self.libvirt = libvirt
        self.uri = uri
        self.conn = None

    def read(self):
        """({uuid: cpu seconds}, memory of the domains in bytes, host CPUs,
        host memory in bytes)."""
        lv = self.libvirt
        try:
            if self.conn is None:
                self.conn = lv.open(self.uri)
            info = self.conn.getInfo()  # model, MiB, cpus, ...
            stats = self.conn.getAllDomainStats(
                lv.VIR_DOMAIN_STATS_CPU_TOTAL | lv.VIR_DOMAIN_STATS_BALLOON,
                lv.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE)
        except lv.libvirtError:
            self.conn = None
            raise
        cpu, memory = {}, 0
        for domain, values in stats:
            cpu[domain.UUIDString()] = values.get('cpu.time', 0) / 1e9
            memory += values.get('balloon.current', values.get('balloon.maximum', 0)) * 1024
        return cpu, memory, int(info[2]), int(info[1]) * 1024 * 1024


def render(counters, cpus, total, used, nodename, now):
    user, idle = counters.per_cpu(cpus, now)
    uname = platform.uname()
    lines = [
        '# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode '
        '(derived: the guests\' CPU time).',
        '# TYPE node_cpu_seconds_total counter']
    for cpu in range(cpus):
        for mode, value in (('idle', idle), ('user', user)):
            lines.append('node_cpu_seconds_total{cpu="%d",mode="%s"} %.6f' % (cpu, mode, value))
    lines += [
        '# HELP node_cpu_guest_seconds_total Seconds the CPUs spent in guests.',
        '# TYPE node_cpu_guest_seconds_total counter']
    for cpu in range(cpus):
        lines.append('node_cpu_guest_seconds_total{cpu="%d",mode="user"} %.6f' % (cpu, user))
    lines += [
        '# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.',
        '# TYPE node_memory_MemTotal_bytes gauge',
        'node_memory_MemTotal_bytes %d' % total,
        '# HELP node_memory_MemAvailable_bytes Memory information field '
        'MemAvailable_bytes (derived: total less the guests\' memory).',
        '# TYPE node_memory_MemAvailable_bytes gauge',
        'node_memory_MemAvailable_bytes %d' % max(0, total - used),
        '# HELP node_uname_info Labeled system information as provided by the uname '
        'system call.',
        '# TYPE node_uname_info gauge',
        'node_uname_info{domainname="(none)",machine="%s",nodename="%s",release="%s",'
        'sysname="Linux",version="%s"} 1' % (uname.machine, nodename, uname.release,
                                             uname.version.replace('"', "'")),
    ]
    return '\n'.join(lines) + '\n'


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.split('?')[0] != '/metrics':
            return self.reply(404, 'see /metrics\n')
        node = self.server.node
        with node['lock']:
            try:
                cpu, used, cpus, total = node['source'].read()
            except Exception as exc:  # libvirt down: a failed scrape, not a lie
                LOG.warning('reading %s failed: %s', node['source'].uri, exc)
                return self.reply(503, 'libvirt: %s\n' % exc)
            now = time.time()
            node['counters'].sample(cpu)
            body = render(node['counters'], cpus, total, used, node['nodename'], now)
        self.reply(200, body)

    def reply(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--uri', required=True)
    parser.add_argument('--listen', required=True, help='ADDR:PORT')
    parser.add_argument('--nodename', required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format='%(asctime)s %(levelname)s %(message)s')
    host, _, port = args.listen.rpartition(':')
    server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    server.node = {'lock': threading.Lock(), 'source': Source(args.uri),
                   'counters': Counters(time.time()), 'nodename': args.nodename}
    LOG.info('%s: node series of %s on %s', args.nodename, args.uri, args.listen)
    server.serve_forever()


if __name__ == '__main__':
    sys.exit(main())
