"""How large are the answers the collector gets from Prometheus?

For each size (hypervisors, servers; benchmarks/generate.py, seed 1) a
scalecloud serves the cluster with kolla-ansible's exporters
(tools/scalecloud/exporters.py: node_exporter, the inovex libvirt
exporter), and the plugin's own Prometheus reader (cloud/measure.py, the
default settings) reads it as a live command does. Every answer's body is
measured as the client reads it: the largest one is what the setting
prometheus.max_answer_mb must let through::

    python benchmarks/prometheus_answers.py --hosts 10000 --servers 500000 \\
        --json benchmarks/results/prometheus_answers.json

Prints one line per request (what was asked, its series, bytes) and the
largest answer, with the bytes per series. scalecloud writes JSON with
spaces after separators, as Python's json does; Prometheus writes none, so
its answers are a little smaller for the same series.

With --flood MB it times instead ``openstack leveller score`` against a
small stand-in cloud whose Prometheus answers every query with MB MiB: a
vector of series that name no hypervisor, or text that is not JSON. Each
version runs in its own process (--previous DIR: another checkout, by
PYTHONPATH), this one with the default cap and with --cap MiB::

    python benchmarks/prometheus_answers.py --flood 100 --cap 64 \
        --previous ../base
"""

import argparse
import datetime
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from benchmarks import stamp  # noqa: E402
from osc_leveller.cloud import hostmatch  # noqa: E402
from osc_leveller.cloud import measure  # noqa: E402
from osc_leveller.cloud import prometheus  # noqa: E402
from tests.unit import builders  # noqa: E402
from tests.unit import standin  # noqa: E402
from tools.scalecloud import cloud as scale  # noqa: E402


class Measured(prometheus.Client):
    """The plugin's client, noting the size of every answer it reads."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.answers = []  # (what, bytes)

    def _read(self, response, what, *args):
        body = super()._read(response, what, *args)
        self.answers.append((what, len(body)))
        return body


def measure_size(hosts, servers, seed):
    started = time.monotonic()
    cluster = generate.generate(hosts, servers, seed)
    with scale.ScaleCloud(cluster, latency=0, concurrency=None,
                          bandwidth=None) as cloud:
        loaded = time.monotonic() - started
        refs = [hostmatch.HostRef(h['name'], h['host'],
                                  standin.host_ip(h['index']))
                for h in cloud._hyps]
        on = {s['id']: s['hypervisor'] for s in cloud._server_seq}
        client = Measured(cloud.prometheus_url, retries=0, timeout=600)
        reading = measure.Reader(client).read(refs, on)
    if reading.unreachable:
        raise RuntimeError(reading.unreachable)
    rows = []
    for what, size in client.answers:
        rows.append({'asked': what, 'bytes': size})
    largest = max(rows, key=lambda r: r['bytes'])
    return {'hypervisors': hosts, 'servers': servers,
            'servers_measured': len(reading.servers),
            'cloud_load_s': round(loaded, 1), 'answers': rows,
            'largest_bytes': largest['bytes'], 'largest': largest['asked'],
            'bytes_per_server': round(largest['bytes'] / max(
                1, len(reading.servers)), 1)}


def flood_body(mb, kind):
    """About mb MiB: a vector whose series name no hypervisor, or text."""
    if kind == 'text':
        return b'x' * (mb * 2 ** 20)
    sample = ('{"metric": {"instance": "203.0.113.%d:9100", "job": "node", '
              '"padding": "%s"}, "value": [1764000000.0, "0.5"]}')
    one = len(sample % (0, ''))
    count = mb * 2 ** 20 // 200
    return ('{"status": "success", "data": {"resultType": "vector", '
            '"result": [%s]}}' % ', '.join(
                sample % (i % 250, 'p' * (200 - one)) for i in range(count))
            ).encode()


class Flood(http.server.BaseHTTPRequestHandler):
    body = b''

    def do_GET(self):
        body = self.body if '/query' in self.path else \
            b'{"status": "success", "data": []}'
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass  # the client hung up

    def log_message(self, *args):
        pass


def flood(args):
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Flood)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hyps, servers = builders.three_hosts()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            standin.StandIn(builders.document(hyps, servers)) as cloud:
        settings = {'url': 'http://127.0.0.1:%d' % server.server_port,
                    'retries': 0, 'timeout': 300}
        runs = [('previous', args.previous, None)] if args.previous else []
        runs += [('this, default cap', None, None),
                 ('this, cap %d MiB' % args.cap, None, args.cap)]
        for kind in ('vector', 'text'):
            Flood.body = flood_body(args.flood, kind)
            for label, pythonpath, cap in runs:
                clouds = cloud.write_clouds_yaml(
                    os.path.join(tmp, 'clouds.yaml'), extra={'leveller': {
                        'prometheus': dict(settings, **(
                            {'max_answer_mb': cap} if cap else {}))}})
                env = cloud.shell_env(clouds)
                if pythonpath:
                    env['PYTHONPATH'] = os.path.abspath(pythonpath)
                with tempfile.NamedTemporaryFile('r') as stats:
                    started = time.monotonic()
                    done = subprocess.run(
                        ['/usr/bin/time', '-f', '%M', '-o', stats.name,
                         'openstack', '--os-cloud', 'standin', 'leveller',
                         'score', '-f', 'value', '-c', 'Hypervisor'],
                        env=env, capture_output=True)
                    wall = time.monotonic() - started
                    peak = int(stats.read().split()[-1]) / 1024
                lines = done.stderr.decode(errors='replace').splitlines()
                said = next((line for line in lines if 'rometheus' in line),
                            lines[-1] if lines else '')
                row = {'answer': kind, 'mb': args.flood, 'version': label,
                       'wall_s': round(wall, 1), 'peak_mb': round(peak),
                       'exit': done.returncode,
                       'said': said[:300]}
                rows.append(row)
                print('%-6s %4d MiB  %-22s %6.1f s %6.0f MB  exit %d  %s' % (
                    kind, args.flood, label, wall, peak, done.returncode,
                    row['said'][:160]), flush=True)
    server.shutdown()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, action='append')
    parser.add_argument('--servers', type=int, action='append')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--json')
    parser.add_argument('--flood', type=int, metavar='MB')
    parser.add_argument('--cap', type=int, default=64)
    parser.add_argument('--previous', metavar='DIR')
    args = parser.parse_args(argv)
    if args.flood:
        rows = flood(args)
        if args.json:
            with open(args.json, 'w') as stream:
                json.dump({'date': datetime.date.today().isoformat(),
                           'cores': os.cpu_count(), 'flood': rows}, stream,
                          indent=2)
        return
    hosts = args.hosts or [10000]
    servers = args.servers or [h * 50 for h in hosts]
    results = []
    for h, s in zip(hosts, servers):
        row = measure_size(h, s, args.seed)
        results.append(row)
        print('%d hypervisors, %d servers (%d measured; cloud loaded in '
              '%.0f s):' % (h, s, row['servers_measured'],
                            row['cloud_load_s']))
        for answer in row['answers']:
            print('  %12d bytes  %s' % (answer['bytes'],
                                        answer['asked'][:100]))
        print('  largest: %.1f MiB (%.0f bytes a measured server)' % (
            row['largest_bytes'] / 2 ** 20, row['bytes_per_server']))
    if args.json:
        stamp.write(args.json, stamp.stamped(results=results), indent=2)


if __name__ == '__main__':
    main()
