"""The forecast on both kinds of load: the cron replay of
benchmarks/cron_replay.py, side by side in one run, for each mix of load
shapes (benchmarks/series.py) and each setting:

- ``defaults``: no forecast, the default target;
- ``fixed 0.7``: the forecast of the last 7 days at weight 0.7 everywhere,
  ``target: 0.035`` (what the user guide recommended before the weight was
  earned; a snapshot without skill plans so);
- ``earned``: the same settings, the weight earned per domain and figure
  on the history (core/load/skill.py), forecast_weight 0.7 its most;
- ``earned, forecast_target``: the weight earned, and the target 0.035
  only in the domains where the forecast has weight (``forecast_target:
  0.035``; the default target elsewhere).

Each replay runs cron's ``apply --batch B`` every hour over nine days of
series from a levelled cloud; the figures are of the last two days (from
hour 168, once the week of history the forecast needs is there): moves,
GiB copied, the mean imbalance over the next hour against no action, the
hours where it was worse than no action, and flip-flops.

    python benchmarks/forecast_replay.py --seed 1 --json s1.json  # 2, 3
    python benchmarks/forecast_replay.py --merge s1.json s2.json s3.json \\
        --json benchmarks/results/forecast_replay.json
"""

import argparse
import json
import os
import sys
import time

import tabulate

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import cron_replay  # noqa: E402
from benchmarks import generate  # noqa: E402
from benchmarks import series as series_mod  # noqa: E402
from benchmarks import stamp  # noqa: E402

TARGET = {'target': 0.035}
# (name, PlannerOptions fields, forecast for cron_replay.replay)
SETTINGS = (('defaults', {}, None),
            ('fixed 0.7', TARGET, (7, 0.7)),
            ('earned', TARGET, (7, 0.7, True)),
            ('earned, forecast_target', {'forecast_target': 0.035},
             (7, 0.7, True)))


def run(mix, args, settings=SETTINGS, progress=None):
    """{'mix', 'domains', 'rows': [{'setting', 'summary', 'wall_s'}]}."""
    cluster = generate.generate(args.hosts, args.servers, args.seed)
    series = series_mod.series(cluster, args.hours, 60, args.seed, mix=mix)
    world = cron_replay.World(cluster, series)
    world = cron_replay.World(cron_replay.levelled(world, args.cooldown),
                              series)
    settled = int(round(args.settled_hours))
    none, rows = {}, []
    for name, options, forecast in settings:
        began = time.perf_counter()
        result = cron_replay.replay(world, args.batch, 1, args.cooldown,
                                    none, options=options, forecast=forecast)
        rows.append({'setting': name, 'options': options,
                     'forecast': forecast,
                     'wall_s': round(time.perf_counter() - began, 1),
                     'summary': cron_replay.summary(result, world, settled)})
        if progress:
            progress(mix, rows[-1])
    return {'mix': mix, 'domains': series.get('domains'), 'rows': rows}


def table(results):
    rows = [(result['mix'], row['setting'], '%d' % s['moves'],
             format(s['gib'], ',.0f'),
             '%.4f / %.4f' % (s['imbalance_none_mean'],
                              s['imbalance_leveller_mean']),
             '%d' % s['worse'], '%d' % s['flip_flops'],
             '%d' % s['runs_next_worse'])
            for result in results
            for row, s in ((row, row['summary']) for row in result['rows'])]
    return tabulate.tabulate(
        rows, ('mix', 'setting', 'moves', 'GiB',
               'imbalance an hour later: no action / leveller',
               'hours worse than no action', 'flip-flops',
               'runs moving: next hour worse than not moving'),
        tablefmt='github', disable_numparse=True)


def merge(paths):
    """One document of the seeds' JSON files (each of one run of this
    script): the results by seed."""
    runs = []
    for path in paths:
        with open(path) as stream:
            runs.append(json.load(stream))
    merged = {k: v for k, v in runs[0].items()
              if k not in ('wall_s', 'results')}
    merged.update(wall_s=[r['wall_s'] for r in runs],
                  seeds=[r['cluster']['seed'] for r in runs],
                  results={str(r['cluster']['seed']): r['results']
                           for r in runs})
    return merged


def seeds_table(merged):
    """The README's table: each figure seed by seed (a / b / c)."""
    seeds = [str(s) for s in merged['seeds']]
    first = merged['results'][seeds[0]]
    cells = []
    for m, result in enumerate(first):
        for r, row in enumerate(result['rows']):
            rows = [merged['results'][s][m]['rows'][r]['summary']
                    for s in seeds]

            def each(fmt, key):
                return ' / '.join(fmt(x[key]) for x in rows)
            cells.append((
                result['mix'], row['setting'], each(str, 'moves'),
                each(lambda v: format(v, ',.0f'), 'gib'),
                ' / '.join('%.4f (%.4f)' % (x['imbalance_leveller_mean'],
                                            x['imbalance_none_mean'])
                           for x in rows),
                each(str, 'worse'), each(str, 'flip_flops')))
    return tabulate.tabulate(
        cells, ('mix', 'setting', 'moves', 'GiB',
                'imbalance an hour later (no action)',
                'hours worse than no action', 'flip-flops'),
        tablefmt='github', disable_numparse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=80)
    parser.add_argument('--servers', type=int, default=3200)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--hours', type=float, default=216)
    parser.add_argument('--settled-hours', type=float, default=168)
    parser.add_argument('--batch', type=cron_replay.batch_arg, default=5)
    parser.add_argument('--cooldown', type=float, default=6.0)
    parser.add_argument('--mix', action='append',
                        choices=series_mod.MIX_NAMES)
    parser.add_argument('--json', metavar='FILE')
    parser.add_argument('--merge', nargs='+', metavar='SEED_JSON',
                        help='join runs of one seed each into --json, and '
                        'print their table')
    args = parser.parse_args(argv)
    if args.merge:
        merged = merge(args.merge)
        if args.json:
            with open(args.json, 'w') as stream:
                json.dump(merged, stream, indent=1)
        print(seeds_table(merged))
        return 0
    started = time.perf_counter()

    def say(mix, row):
        s = row['summary']
        print('%s, %s: %d moves, imbalance %.4f (no action %.4f), %.0f s' % (
            mix, row['setting'], s['moves'], s['imbalance_leveller_mean'],
            s['imbalance_none_mean'], row['wall_s']), file=sys.stderr,
            flush=True)
    results = [run(mix, args, progress=say)
               for mix in args.mix or ('daily', 'bursty', 'mixed')]
    print(table(results))
    if args.json:
        with open(args.json, 'w') as stream:
            json.dump(stamp.stamped(**{
                'cluster': {'hosts': args.hosts, 'servers': args.servers,
                            'seed': args.seed},
                'hours': args.hours, 'settled_hours': args.settled_hours,
                'batch': args.batch, 'cooldown_hours': args.cooldown,
                'wall_s': round(time.perf_counter() - started, 1),
                'results': results}), stream, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
