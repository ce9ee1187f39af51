"""ScaleCloud: the unit tests' stand-in cloud, sized and timed for scale.

tests/unit/standin.py does the emulation (Keystone, Nova, Placement,
Glance, Prometheus; microversions, paging, field names, faults, migrations,
latency, a concurrency limit, counts). This adds what scale work needs
around it: a cluster file of any size as the cloud (benchmarks/generate.py's
Watcher cluster, or a snapshot document), Prometheus series that follow the
servers (exporters.py), the traits and CPU architecture a libvirt host
reports for its CPU model where a Watcher cluster has none (traits.py), the images its servers boot
from (images.py), an admin listener that returns
the counts, and the client configuration (clouds.yaml, OS_* variables).
"""

import json
import time

from tests.unit import standin
from tools.scalecloud import exporters
from tools.scalecloud import images as images_mod
from tools.scalecloud import traits

LATENCY = 0.02  # seconds before each answer
CONCURRENCY = 64  # requests one service serves at once
BANDWIDTH = 1250.0  # MiB/s a live migration copies: 10 Gbit/s
CLOUD = 'scalecloud'  # the clouds.yaml entry


def read(path):
    """The decoded JSON of a cluster or snapshot file."""
    with open(path, encoding='utf-8') as f:
        return json.load(f)


class ScaleCloud(standin.StandIn):
    """A simulated cloud on 127.0.0.1 serving a cluster of any size.

    cluster: a decoded Watcher cluster (benchmarks/generate.py) or snapshot
    document, or the path of one. port: the first of six consecutive
    ports (Keystone, Nova, Placement, Glance, Prometheus, admin), else
    free ones. images: how many Glance images a Watcher cluster's servers
    boot from (images.py; a snapshot's are its own).
    Other arguments are StandIn's (latency, concurrency, bandwidth,
    migration_overhead, live_migrations_per_host, failure_rate, seed,
    max_limit, ...); requests are counted, not kept. As a context manager::

        with ScaleCloud('/tmp/c1000.json', latency=0.02) as cloud:
            subprocess.run([...], env=cloud.shell_env(
                cloud.write_clouds_yaml(path)))
            print(cloud.report())
    """

    LISTENERS = standin.SERVICES + ('admin',)

    def __init__(self, cluster, latency=LATENCY, concurrency=CONCURRENCY,
                 bandwidth=BANDWIDTH, port=0, images=images_mod.IMAGES,
                 **kwargs):
        started = time.monotonic()
        if isinstance(cluster, str):
            cluster = read(cluster)
        kwargs.setdefault('keep_requests', False)
        super().__init__(cluster, latency=latency, concurrency=concurrency,
                         bandwidth=bandwidth, **kwargs)
        if 'format' not in cluster:  # a Watcher cluster: no traits
            for hyp in self._hyps:
                hyp['traits'] = traits.of_model(hyp['cpu']['model'])
                # nor CPU architecture, which libvirt always reports
                hyp['cpu']['arch'] = hyp['cpu']['arch'] or traits.ARCH
            if images:  # nor images
                self.boot_from(*images_mod.assign(list(self._server_list),
                                                  images))
        self.prometheus = self.exporters = exporters.Exporters(
            self._hyps, self._server_seq)
        self.prometheus_names = list(exporters.NAMES)
        self.port = port
        self.load_seconds = time.monotonic() - started

    def _port(self, name):
        return self.port + self.LISTENERS.index(name) if self.port else 0

    @property
    def admin_url(self):
        return self.url('admin')

    # -- client configuration ------------------------------------------

    def write_clouds_yaml(self, path, cloud=CLOUD, extra=None):
        """A clouds.yaml whose entry also points the leveller at this
        Prometheus. Returns path."""
        entry = {'leveller': {'prometheus': {'url': self.prometheus_url}}}
        entry.update(extra or {})
        return super().write_clouds_yaml(path, cloud, entry)

    def os_environ(self):
        """OS_* variables for the openstack shell without a clouds.yaml
        (the leveller then has no Prometheus URL)."""
        return {'OS_AUTH_URL': self.auth_url,
                'OS_USERNAME': self.username, 'OS_PASSWORD': self.password,
                'OS_PROJECT_NAME': self.project_name,
                'OS_USER_DOMAIN_NAME': 'Default',
                'OS_PROJECT_DOMAIN_NAME': 'Default',
                'OS_REGION_NAME': self.region,
                'OS_IDENTITY_API_VERSION': '3', 'OS_INTERFACE': 'public'}

    # -- what it saw -----------------------------------------------------

    def summary(self):
        """Counts, peaks in flight and migrations, as JSON-ready data."""
        with self._lock:
            self._advance()
            migrations = {}
            for m in self._migration_list:
                migrations[m['status']] = migrations.get(m['status'], 0) + 1
            unknown = dict(self.exporters.unknown)
        cpu = self.cpu
        return {
            'counts': [{'service': service, 'method': method, 'path': path,
                        'requests': n, 'cpu_seconds': round(
                            cpu[service, method, path], 3)}
                       for (service, method, path), n in
                       sorted(self.counts.items())],
            'requests': sum(self.counts.values()),
            'stats': self.stats(),
            'migrations': migrations,
            'unknown_queries': unknown,
            'settings': {'latency': self.latency,
                         'concurrency': self._gates['nova'].limit,
                         'bandwidth': self.bandwidth,
                         'max_limit': self.max_limit,
                         'hypervisors': len(self._hyps),
                         'servers': len(self._server_seq)},
        }

    def report(self):
        """The summary as text: requests by endpoint, most in flight."""
        return format_report(self.summary())

    # -- the admin listener ----------------------------------------------

    def _handle(self, handler):
        if handler.server.name != 'admin':
            return super()._handle(handler)
        # GET /: the summary; GET /report: as text; POST /reset: counts
        # and peaks start again. Not counted, no latency.
        path = handler.path.split('?')[0].rstrip('/') or '/'
        if (handler.command, path) == ('GET', '/'):
            return handler.answer(200, self.summary(), {})
        if (handler.command, path) == ('GET', '/report'):
            return handler.answer(200, self.report().encode(), {
                'Content-Type': 'text/plain; charset=utf-8'})
        if (handler.command, path) == ('POST', '/reset'):
            self.reset_counts()
            return handler.answer(204, None, {})
        return handler.answer(404, {'error': 'GET /, GET /report or '
                                             'POST /reset'}, {})


def format_report(summary):
    """Text of a ScaleCloud.summary() (also as the admin listener's JSON)."""
    settings = summary['settings']
    lines = ['scalecloud: %d hypervisors, %d servers; latency %s s, '
             'concurrency %s per service, page size %d' % (
                 settings['hypervisors'], settings['servers'],
                 settings['latency'], settings['concurrency'] or 'unlimited',
                 settings['max_limit']),
             '%8s %8s  %-10s %-6s %s' % ('requests', 'CPU s', 'service',
                                         'method', 'path')]
    for row in sorted(summary['counts'], key=lambda r: -r['requests']):
        lines.append('%8d %8.2f  %-10s %-6s %s' % (
            row['requests'], row['cpu_seconds'], row['service'],
            row['method'], row['path']))
    stats = summary['stats']
    peaks = ', '.join(
        '%s %d, %d waiting' % (name, s['max_in_flight'], s['max_waiting'])
        for name, s in sorted(stats['services'].items()) if s['max_in_flight'])
    lines.append('%8d %8.2f  in all (CPU s: scalecloud\'s own, answering)' % (
        summary['requests'], sum(r['cpu_seconds'] for r in summary['counts'])))
    lines.append('most requests in flight at once: %d (%s)' % (
        stats['max_in_flight'], peaks or 'none'))
    if summary['migrations']:
        lines.append('migrations: %s' % ', '.join(
            '%d %s' % (n, status)
            for status, n in sorted(summary['migrations'].items())))
    if summary['unknown_queries']:
        lines.append('Prometheus queries not recognised (empty answers): %s'
                     % json.dumps(summary['unknown_queries']))
    return '\n'.join(lines)
