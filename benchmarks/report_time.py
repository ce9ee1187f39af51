"""Time the HTML report on a generated cluster: its figures, its page, and
the page's size, for a plan's report and the current state's.

    python benchmarks/report_time.py --hosts 1000 --servers 50000 --seed 1 \
        --label branch --json benchmarks/results/report.json
    git archive main | tar -x -C /tmp/main     # the code to compare with
    python benchmarks/report_time.py --hosts 1000 --servers 50000 --seed 1 \
        --code /tmp/main --label main --commit $(git rev-parse --short main) \
        --json benchmarks/results/report.json

The cluster comes from this checkout's generate.py; --code imports
osc_leveller from another checkout, so both runs draw the same plan (the
default one, made once, untimed) on the same cluster. In this process,
--repeat times: core/planning/report.py's of_plan (what ``plan --report``
gathers) and of_state (``score --report``), then v1/report.py's render;
medians of wall and CPU time (CPU is what a busy machine changes least).
With --chromium, also headless chromium loading each page and dumping its
DOM (a fresh profile each time; wall and CPU of all its processes, medians
of --repeat), and a blank page: the browser's own start. Each run replaces
the row of its label in --json.
"""

import argparse
import datetime
import gzip
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402


def _commit(code):
    done = subprocess.run(['git', '-C', code, 'rev-parse', '--short', 'HEAD'],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ''


def _median_time(call, repeat):
    """(median wall seconds, median CPU seconds, the last result)."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = call()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def _children_cpu():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def chromium_time(page, repeat):
    """(median wall, median CPU seconds) of headless chromium loading page
    (HTML text): CPU of all its processes, which it waits for."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'page.html')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(page)
        times, cpus = [], []
        for index in range(repeat):
            profile = os.path.join(tmp, 'profile%d' % index)
            started, cpu = time.perf_counter(), _children_cpu()
            subprocess.run(
                [shutil.which('chromium'), '--headless', '--no-sandbox',
                 '--disable-gpu', '--no-first-run',
                 '--disable-background-networking',
                 '--disable-component-update', '--disable-sync',
                 '--user-data-dir=' + profile, '--dump-dom',
                 'file://' + path], capture_output=True, check=True,
                timeout=300)
            times.append(time.perf_counter() - started)
            cpus.append(_children_cpu() - cpu)
    return round(statistics.median(times), 3), round(
        statistics.median(cpus), 3)


def measure(cluster, repeat, browser=False):
    """{kind: figures} of the plan's report and the current state's."""
    from osc_leveller.core.model import snapshot as snapshot_io
    from osc_leveller.core.planning import planner
    from osc_leveller.core.planning import report as report_data
    from osc_leveller.core.settings import options as opts
    from osc_leveller.v1 import report

    snap = snapshot_io.parse(cluster)
    options = opts.PlannerOptions()
    plan = planner.make_plan(snap, options)
    report.render(report_data.of_state(snap, options))  # Jinja2 loaded
    rows = {}
    for kind, gather in (
            ('plan', lambda: report_data.of_plan(snap, plan, options)),
            ('score', lambda: report_data.of_state(snap, options))):
        gathered, gather_cpu, data = _median_time(gather, repeat)
        rendered, render_cpu, page = _median_time(
            lambda: report.render(data), repeat)
        body = page.encode('utf-8')
        rows[kind] = {
            'gather_s': round(gathered, 4), 'render_s': round(rendered, 4),
            'gather_cpu_s': round(gather_cpu, 4),
            'render_cpu_s': round(render_cpu, 4),
            'total_cpu_s': round(gather_cpu + render_cpu, 4),
            'bytes': len(body),
            'gzip_bytes': len(gzip.compress(body)),
            'bars': page.count('<rect class="bar '),
            'folded_rows': page.count('<tr class="folded-host"'),
            'moves': len(plan.moves) if kind == 'plan' else 0,
            'domains': len(data.domains)}
        if browser:
            rows[kind]['chromium_s'], rows[kind]['chromium_cpu_s'] = \
                chromium_time(page, repeat)
    if browser:
        wall, cpu = chromium_time('<!DOCTYPE html><title>blank</title>',
                                  repeat)
        rows['blank'] = {'chromium_s': wall, 'chromium_cpu_s': cpu}
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--servers', type=int, default=50000)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--code', help='import osc_leveller from this '
                        'checkout (default: this one)')
    parser.add_argument('--label', default='this')
    parser.add_argument('--commit', help='default: the code\'s git HEAD')
    parser.add_argument('--json', help='add the row to this results file')
    parser.add_argument('--chromium', action='store_true',
                        help='time headless chromium loading each page')
    args = parser.parse_args(argv)
    cluster = generate.generate(args.hosts, args.servers, args.seed)
    code = os.path.abspath(args.code or os.path.dirname(HERE))
    sys.path.insert(0, code)
    sys.dont_write_bytecode = True  # leave the other checkout as it is
    import osc_leveller
    if not osc_leveller.__file__.startswith(code + os.sep):
        parser.error('osc_leveller comes from %s, not %s' % (
            osc_leveller.__file__, code))
    row = {'label': args.label, 'commit': args.commit or _commit(code),
           'hosts': args.hosts, 'servers': args.servers, 'seed': args.seed,
           'repeat': args.repeat,
           'kinds': measure(cluster, args.repeat, args.chromium)}
    for kind, figures in row['kinds'].items():
        if kind == 'blank':
            print('%-8s blank chromium cpu %.3f s' % (
                args.label, figures['chromium_cpu_s']))
            continue
        print('%-8s %-5s cpu: gather %.3f s, render %.3f s  %8d bytes (gzip '
              '%d)  %d bars  %d folded rows%s' % (
                  args.label, kind, figures['gather_cpu_s'],
                  figures['render_cpu_s'], figures['bytes'],
                  figures['gzip_bytes'], figures['bars'],
                  figures['folded_rows'], '  chromium cpu %.3f s' % figures[
                      'chromium_cpu_s'] if 'chromium_s' in figures else ''))
    if args.json:
        results = {'results': []}
        if os.path.exists(args.json):
            with open(args.json) as f:
                results = json.load(f)
        results['results'] = [r for r in results['results']
                              if r['label'] != args.label] + [row]
        results.update(
            date=datetime.datetime.now(datetime.timezone.utc).strftime(
                '%Y-%m-%d'),
            python=platform.python_version(), cores=os.cpu_count())
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1, sort_keys=True)
            f.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
