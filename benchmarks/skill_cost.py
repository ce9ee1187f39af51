"""What measuring the forecast's skill costs Prometheus.

With ``prometheus.forecast_days`` set, every read also asks for the
history the forecast's skill is measured on (cloud/measure.py
Reader._history): two range queries over the last min(days, 7) days and
``days`` more. This runs them, with the plugin's own reader, against a
Prometheus of its own (this machine's binary, on 127.0.0.1:PORT, its data
under DIR) that holds --history-days days of node_exporter series,
backfilled with ``promtool tsdb create-blocks-from openmetrics``: for each
hypervisor ``node_cpu_seconds_total{mode="idle"}`` of its CPUs and
``node_memory_MemAvailable_bytes`` and ``node_memory_MemTotal_bytes``,
every 60 s (Prometheus' default scrape and evaluation interval): the
series the default host queries (HOST_QUERIES cpu and ram) read. And
``instance:node_cpu_utilisation:rate5m``, the host's CPU as node-mixin's
recording rule keeps it, for the variant that reads it. A real
node_exporter has about a thousand series more a host; the queries' label
matchers select through the index, so those weigh little on them.

    python benchmarks/skill_cost.py \
        --sizes 100x4 1000x4 1000x4@5000000 100x32 \
        --dir /work/dc-skill/skill-cost \
        --json benchmarks/results/skill_cost.json

(--sizes HYPERVISORSxCPUS[@MAX_SAMPLES].) 1000x4@5000000 reads the same
1,000 hypervisors from a Prometheus that allows 5 million samples a query
(--query.max-samples), a tenth of its default: what a cloud ten times as
large, or of 40 CPUs a hypervisor, meets with the default. The client
then asks the queries in halves until they pass. For each size and period
ahead (--ahead, forecast_days 7), side by side:

- ``history``: Reader._history as it is: 2 range queries;
- ``one query a part``: the same parts asked one by one (4 queries: CPU
  and RAM, now and over the step before, as a reader without the joining
  label would);
- ``default resolution``: the same 2 queries with subqueries at
  Prometheus' default resolution, its evaluation interval (``[1h:]``, as
  the forecast's queries were before);
- ``CPU from a recording rule``: the 2 queries with ``queries: cpu:
  instance:node_cpu_utilisation:rate5m``;
- ``forecast``: for scale, the forecast's own instant queries (CPU and
  RAM over the period ahead on each of the 7 days), at the reader's
  resolution and at the default one.

Each is run once to warm the page cache, then --runs times, in turn; the
median wall time is the figure (the client's: requests, JSON, the
reader's checks), with Prometheus' share (until its answer's headers: the
evaluation, not the encoding), the requests and the bytes of the answers
(JSON, as the answer cap counts them; gzip on the wire). The history's
size is checked (every hypervisor, every step) and the skill computed on it
(core/load/skill.py). The data stays in DIR for the next run; --fresh makes it
again. --render JSON prints a run's table again.
"""

import argparse
import datetime
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import requests
import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from osc_leveller.cloud import hostmatch  # noqa: E402
from osc_leveller.cloud import measure  # noqa: E402
from osc_leveller.cloud import prometheus  # noqa: E402
from osc_leveller.core.load import skill  # noqa: E402
from osc_leveller.core.model import model  # noqa: E402
from osc_leveller.core.settings import config  # noqa: E402

DAY = 86400
SCRAPE = 60  # seconds between samples, Prometheus' default interval
MEMORY = 256 * 2 ** 30  # each hypervisor's MemTotal
# A host's CPU as node-mixin's recording rule keeps it (kube-prometheus);
# the data has it too, for a `queries: cpu:` that reads it.
RECORDED = 'instance:node_cpu_utilisation:rate5m'
DATA_VERSION = 2


def name(index):
    return 'hv%04d' % (index + 1)


# ---------------------------------------------------------------- the data

class Load:
    """Each hypervisor's CPU and RAM over time: half follow office hours,
    half come in bursts (a few hours busy at random), with noise."""

    def __init__(self, hypervisors, cpus, seed):
        rng = random.Random(seed)
        self.rng = rng
        self.hosts = [{'base': rng.uniform(.1, .4), 'day': rng.uniform(0, .4)
                       if i % 2 == 0 else 0.0, 'burst': 0.0,
                       'ram': rng.uniform(.3, .7)} for i in range(hypervisors)]
        self.cpus = cpus
        self.idle = [[rng.uniform(1e6, 1e7) for _ in range(cpus)]
                     for _ in range(hypervisors)]

    def step(self, t):
        """(cpu idle counters, available bytes, CPU busy) of each host at
        t."""
        hour = (t % DAY) / 3600.0
        office = max(0.0, math.sin(math.pi * (hour - 8) / 10)) \
            if 8 <= hour < 18 else 0.0
        for host, idle in zip(self.hosts, self.idle):
            if host['day'] == 0.0 and self.rng.random() < 1 / 240:
                host['burst'] = self.rng.uniform(.2, .5) \
                    if host['burst'] == 0.0 else 0.0
            load = host['base'] + host['day'] * office + host['burst']
            total = 0.0
            for c in range(self.cpus):
                busy = min(1.0, max(0.0, load + self.rng.gauss(0, .05)))
                idle[c] += SCRAPE * (1 - busy)
                total += busy
            ram = min(.95, host['ram'] + .1 * office * (host['day'] > 0) +
                      self.rng.gauss(0, .005))
            yield idle, int(MEMORY * (1 - ram)), total / self.cpus


def write_day(path, load, start, end):
    """OpenMetrics samples of [start, end), every SCRAPE seconds."""
    n = len(load.hosts)
    cpu = [['node_cpu_seconds_total{cpu="%d",instance="%s:9100",job="node",'
            'mode="idle"} ' % (c, name(i)) for c in range(load.cpus)]
           for i in range(n)]
    available = ['node_memory_MemAvailable_bytes{instance="%s:9100",'
                 'job="node"} ' % name(i) for i in range(n)]
    total = ['node_memory_MemTotal_bytes{instance="%s:9100",job="node"} '
             '%d' % (name(i), MEMORY) for i in range(n)]
    recorded = ['%s{instance="%s:9100",job="node"} ' % (RECORDED, name(i))
                for i in range(n)]
    samples = 0
    with open(path, 'w') as f:
        for t in range(start, end, SCRAPE):
            stamp = ' %d\n' % t
            lines = []
            for i, (idle, free, busy) in enumerate(load.step(t)):
                lines.extend('%s%.2f%s' % (cpu[i][c], idle[c], stamp)
                             for c in range(load.cpus))
                lines.append('%s%d%s' % (available[i], free, stamp))
                lines.append(total[i] + stamp)
                lines.append('%s%.4f%s' % (recorded[i], busy, stamp))
            f.write(''.join(lines))
            samples += len(lines)
        f.write('# EOF\n')
    return samples


def backfill(directory, hypervisors, cpus, days, seed):
    """DAYS days of series up to a whole hour, in directory/data; their
    description (meta.json) kept beside them."""
    meta_path = os.path.join(directory, 'meta.json')
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if (meta['hypervisors'], meta['cpus'], meta['days'],
                meta.get('version')) == (hypervisors, cpus, days,
                                         DATA_VERSION):
            return meta
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    end = int(time.time()) // 3600 * 3600
    start = end - days * DAY - 3600
    load = Load(hypervisors, cpus, seed)
    data = os.path.join(directory, 'data')
    samples, made, filled = 0, 0.0, 0.0
    # One file a UTC day, each a block of its own (promtool reads a file
    # once for each block it makes).
    cut = start
    while cut <= end:
        upto = min(end + SCRAPE, (cut // DAY + 1) * DAY)
        path = os.path.join(directory, 'day.om')
        began = time.monotonic()
        samples += write_day(path, load, cut, upto)
        made += time.monotonic() - began
        began = time.monotonic()
        subprocess.run(['promtool', 'tsdb', 'create-blocks-from',
                        'openmetrics', '--max-block-duration=24h', '-q',
                        path, data], check=True, stdout=subprocess.DEVNULL)
        filled += time.monotonic() - began
        os.remove(path)
        print('  %s: %d samples' % (_utc(cut), samples), file=sys.stderr)
        cut = upto
    meta = {'version': DATA_VERSION, 'hypervisors': hypervisors,
            'cpus': cpus, 'days': days, 'start': start, 'end': end,
            'scrape_seconds': SCRAPE, 'series': hypervisors * (cpus + 3),
            'samples': samples,
            'generate_seconds': round(made, 1),
            'promtool_seconds': round(filled, 1)}
    with open(meta_path, 'w') as f:
        json.dump(meta, f, indent=1)
    return meta


# ---------------------------------------------------------- the Prometheus

class Prometheus:
    """The machine's prometheus on 127.0.0.1:port over directory/data."""

    def __init__(self, directory, port, max_samples=None):
        self.url = 'http://127.0.0.1:%d' % port
        self.config = os.path.join(directory, 'prometheus.yml')
        with open(self.config, 'w') as f:
            f.write('global:\n  scrape_interval: 1m\n'
                    '  evaluation_interval: 1m\n')
        self.log = open(os.path.join(directory, 'prometheus.log'), 'w')
        self.process = subprocess.Popen(
            ['prometheus', '--config.file=' + self.config,
             '--storage.tsdb.path=' + os.path.join(directory, 'data'),
             '--storage.tsdb.retention.time=60d',
             '--web.listen-address=127.0.0.1:%d' % port] + (
                ['--query.max-samples=%d' % max_samples]
                if max_samples else []),
            stdout=self.log, stderr=subprocess.STDOUT)

    def wait(self):
        """Until it answers and its compactions have settled (none for
        two of its minutely checks)."""
        deadline = time.monotonic() + 1800
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError('prometheus exited: see %s' %
                                   self.log.name)
            try:
                metrics = requests.get(self.url + '/metrics', timeout=5).text
            except requests.RequestException:
                time.sleep(1)
                continue
            now = [line for line in metrics.splitlines()
                   if line.startswith(('prometheus_tsdb_compactions_total',
                                       'prometheus_tsdb_blocks_loaded'))]
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since > 130:
                return last
            time.sleep(5)
        raise RuntimeError('prometheus did not settle')

    def version(self):
        return requests.get(self.url + '/api/v1/status/buildinfo',
                            timeout=5).json()['data']['version']

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


# --------------------------------------------------------------- measuring

class Counting(prometheus.Client):
    """The plugin's client, counting its requests, the bytes of their
    answers and the time until Prometheus' answer began."""

    def reset(self):
        """Counts from zero, and no connection kept from the run before
        (a cron run is a new process; Prometheus closes idle ones)."""
        self.requests, self.bytes, self.server = 0, 0, 0.0
        self.close()

    def _read(self, response, what, *args):
        body = super()._read(response, what, *args)
        self.requests += 1
        self.bytes += len(body)
        self.server += response.elapsed.total_seconds()
        return body


class OnePerPart(Counting):
    """Asks each part of a joined range query on its own."""

    def query_range(self, promql, start, end, step):
        found = []
        for part in promql.split(' or label_replace('):
            if not part.startswith('label_replace('):
                part = 'label_replace(' + part
            found += super().query_range(part, start, end, step)
        return found


class DefaultResolution(measure.Reader):
    """Subqueries at Prometheus' default resolution."""

    def _mean(self, promql, period, offset=''):
        return 'avg_over_time((%s)[%s:]%s)' % (promql, period, offset)


def setup(url, hypervisors, ahead, days, end, client_class=Counting,
          reader_class=measure.Reader, cpu=measure.HOST_QUERIES['cpu']):
    client = client_class(url, retries=0, timeout=1800,
                          max_answer_mb=1024)
    client.reset()
    reader = reader_class(client, queries={
        'cpu': cpu, 'ram': measure.HOST_QUERIES['ram']}, window='5m',
        forecast=model.Forecast(ahead, days, 0.5))
    refs = [hostmatch.HostRef(name(i), name(i)) for i in range(hypervisors)]
    matcher = hostmatch.Matcher(refs, reader.host_match, reader.host_label,
                                reader.host_pattern)
    answer = requests.get(url + '/api/v1/query', params={
        'query': 'node_memory_MemTotal_bytes', 'time': end}, timeout=60)
    matcher.learn([(item['metric'], 1.0)
                   for item in answer.json()['data']['result']])
    hosts = {ref.name: {'cpu': .5, 'ram': .5} for ref in refs}
    return client, reader, matcher, hosts


def history_once(setup_, end):
    client, reader, matcher, hosts = setup_
    client.reset()
    reading = measure.Reading(read_at=end, hosts=hosts)
    began = time.perf_counter()
    history = reader._history(matcher, reading)
    seconds = time.perf_counter() - began
    if history is None:
        raise RuntimeError('; '.join(reading.notes))
    return seconds, client.requests, client.bytes, client.server, history


def forecast_once(url, ahead, days, end, reader_class):
    """The forecast's own instant queries (CPU and RAM) at end."""
    reader = reader_class(None, window='5m', forecast=model.Forecast(
        ahead, days, 0.5))
    began = time.perf_counter()
    size, server = 0, 0.0
    for metric in ('cpu', 'ram'):
        response = requests.get(url + '/api/v1/query', params={
            'query': reader._ahead(reader._render(
                measure.HOST_QUERIES[metric])), 'time': end}, timeout=1800)
        response.raise_for_status()
        size += len(response.content)
        server += response.elapsed.total_seconds()
    return time.perf_counter() - began, 2, size, server, None


def check(history, hypervisors, ahead, days):
    """The history's shape, and the skill computed on it."""
    step = history.step
    scored = int(min(days, skill.MOST_DAYS) * DAY // step)
    back = scored - 1 + int(round(days * DAY / step))
    for kind, want in (('now', scored), ('actual', back + 1)):
        for figure in ('cpu', 'ram'):
            series = getattr(history, kind)[figure]
            if len(series) != hypervisors or any(
                    len(v) != want for v in series.values()):
                raise RuntimeError('%s %s: %d hypervisors, %s points, not '
                                   '%d and %d' % (
                                       kind, figure, len(series),
                                       sorted({len(v) for v in
                                               series.values()})[:5],
                                       hypervisors, want))
    began = time.perf_counter()
    found = skill.errors(history, {name(i): 'az%d' % (i // 10)
                                   for i in range(hypervisors)}, days)
    seconds = time.perf_counter() - began
    errors = [figures['cpu'] for figures in found.values()]
    total = sum(errors, model.ForecastErrors())
    return {'points': {'now': scored, 'actual': back + 1},
            'skill_seconds': round(seconds, 3),
            'skill_points': total.points,
            'rms_now': round(math.sqrt(total.now / total.points), 4),
            'rms_ahead': round(math.sqrt(total.ahead / total.points), 4)}


def measure_size(url, meta, ahead, days, runs, only=None):
    end = meta['end']
    n = meta['hypervisors']
    variants = [
        ('history', lambda s=setup(url, n, ahead, days, end): history_once(
            s, end)),
        ('one query a part', lambda s=setup(
            url, n, ahead, days, end, OnePerPart): history_once(s, end)),
        ('default resolution', lambda s=setup(
            url, n, ahead, days, end, reader_class=DefaultResolution):
            history_once(s, end)),
        ('CPU from a recording rule', lambda s=setup(
            url, n, ahead, days, end, cpu=RECORDED): history_once(s, end)),
        ('forecast', lambda: forecast_once(url, ahead, days, end,
                                           measure.Reader)),
        ('forecast, default resolution', lambda: forecast_once(
            url, ahead, days, end, DefaultResolution)),
    ]
    variants = [(label, once) for label, once in variants
                if not only or label in only]
    results = {label: [] for label, _ in variants}
    failed = {}  # label: why, once Prometheus refused it
    checked = None
    for run in range(runs + 1):  # the first warms the page cache
        for label, once in variants:
            if label in failed:
                continue
            try:
                found = once()
            except (RuntimeError, requests.RequestException) as exc:
                failed[label] = str(exc).rsplit("': ", 1)[-1]
                print('  %d %s %s: %s' % (n, ahead, label, failed[label]),
                      file=sys.stderr)
                continue
            print('  %d %s %s: %.2f s' % (n, ahead, label, found[0]),
                  file=sys.stderr)
            if run:
                results[label].append(found)
            if label == 'history' and checked is None:
                checked = check(found[4], n, ahead, days)
    rows = []
    for label, found in results.items():
        row = {'hypervisors': n, 'cpus': meta['cpus'], 'ahead': ahead,
               'days': days, 'variant': label,
               'max_samples': meta.get('max_samples')}
        if label in failed:
            row['error'] = failed[label]
        else:
            row.update({
                'requests': found[0][1], 'bytes': found[0][2],
                'seconds': round(statistics.median(f[0] for f in found), 3),
                'prometheus_seconds': round(statistics.median(
                    f[3] for f in found), 3),
                'all_seconds': [round(f[0], 3) for f in found]})
        rows.append(row)
    return rows, checked


def _utc(seconds):
    return datetime.datetime.fromtimestamp(
        seconds, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M')


def table(rows):
    cells = []
    for row in rows:
        variant = row['variant']
        if row.get('max_samples'):
            variant = '%s, max-samples %s' % (
                variant, '{:,}'.format(row['max_samples']))
        first = ('{:,}'.format(row['hypervisors']), str(row['cpus']),
                 str(row['ahead']), variant)
        if 'error' in row:
            cells.append(first + ('refused: %s' % row['error'], '', '', ''))
            continue
        cells.append(first + (str(row['requests']),
                              '%.1f' % (row['bytes'] / 2 ** 20),
                              '%.2f' % row['seconds'],
                              '%.2f' % row['prometheus_seconds']))
    return tabulate.tabulate(
        cells, ('hypervisors', 'CPUs', 'ahead', 'variant', 'requests',
                'answers (MiB)', 'wall time (s)', 'of which Prometheus (s)'),
        tablefmt='github', disable_numparse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', nargs='+', default=['100x4', '1000x4'],
                        help='HYPERVISORSxCPUS[@MAX_SAMPLES]: hypervisors, '
                             'each with CPUS idle series; with MAX_SAMPLES, '
                             'Prometheus\' --query.max-samples, and only '
                             'the variants of --limited')
    parser.add_argument('--limited', nargs='+',
                        default=['history', 'default resolution'],
                        help='the variants run under a MAX_SAMPLES')
    parser.add_argument('--history-days', type=int, default=14)
    parser.add_argument('--ahead', nargs='+', default=['1h', '10m'])
    parser.add_argument('--days', type=int, default=7,
                        help='forecast_days')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--port', type=int, default=19190)
    parser.add_argument('--dir', default=os.path.join(
        tempfile.gettempdir(), 'skill-cost'))
    parser.add_argument('--fresh', action='store_true')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--json')
    parser.add_argument('--merge', action='store_true',
                        help='keep the other sizes\' results in --json')
    parser.add_argument('--render', metavar='JSON',
                        help='print the table of a run\'s results')
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            print(table(json.load(f)['rows']))
        return
    if shutil.which('prometheus') is None or shutil.which('promtool') is None:
        parser.error('needs prometheus and promtool on the PATH')
    rows, sizes = [], []
    spec_variants = {spec: args.limited for spec in args.sizes
                     if '@' in spec}
    started = time.monotonic()
    for spec in args.sizes:
        size, _, most = spec.partition('@')
        n, cpus = (int(x) for x in size.split('x'))
        directory = os.path.join(args.dir, size)
        if args.fresh:
            shutil.rmtree(directory, ignore_errors=True)
        print('%d hypervisors of %d CPUs: data' % (n, cpus), file=sys.stderr)
        meta = backfill(directory, n, cpus, args.history_days, args.seed)
        meta = dict(meta, max_samples=int(most) if most else None)
        server = Prometheus(directory, args.port, meta['max_samples'])
        try:
            server.wait()
            meta['prometheus'] = server.version()
            meta['checks'] = {}
            for ahead in args.ahead:
                found, checked = measure_size(
                    server.url, meta, ahead, args.days, args.runs,
                    spec_variants.get(spec))
                rows += found
                meta['checks'][ahead] = checked
        finally:
            server.stop()
        meta['blocks_mib'] = round(sum(
            os.path.getsize(os.path.join(root, f))
            for root, _, files in os.walk(os.path.join(directory, 'data'))
            for f in files) / 2 ** 20, 1)
        sizes.append(meta)
        if args.json:  # after each size: a long run keeps what it has
            write(args.json, args, sizes, rows,
                  time.monotonic() - started)
    print(table(rows))


def write(path, args, sizes, rows, seconds):
    """The results into path; with --merge, those of other sizes there
    are kept (a size's rows and data replace its earlier ones)."""
    found = {'data': [], 'rows': [], 'seconds': 0}
    if args.merge and os.path.exists(path):
        with open(path) as f:
            found = json.load(f)

    def key(item):
        return item['hypervisors'], item['cpus'], item.get('max_samples')

    def order(item):  # by size, the longer period ahead first
        return (item['hypervisors'], item['cpus'],
                item.get('max_samples') or 0,
                -config.seconds(item.get('ahead', '0s')))
    ran = {key(meta) for meta in sizes}
    data = sorted([m for m in found['data'] if key(m) not in ran] + sizes,
                  key=order)
    rows = sorted([r for r in found['rows'] if key(r) not in ran] + rows,
                  key=order)
    with open(path, 'w') as f:
        json.dump({'date': datetime.date.today().isoformat(),
                   'machine': {'cpus': os.cpu_count(),
                               'python': platform.python_version()},
                   'seconds': round(found.get('seconds', 0) + seconds),
                   'runs': args.runs, 'forecast_days': args.days,
                   'window': '5m', 'data': data, 'rows': rows},
                  f, indent=1)
        f.write('\n')


if __name__ == '__main__':
    main()
