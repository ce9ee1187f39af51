"""The tables of doc/source/reference/benchmarks.rst, from the JSON results.

    python benchmarks/render.py benchmarks/results/small.json \
        benchmarks/results/large.json [--optimum benchmarks/results/optimum.json]
"""

import argparse
import json
import sys

import tabulate

COLUMNS = ('Planner', 'Moves', 'GiB moved', 'CPU std', 'RAM std', 'Refused',
           'Time (s)', 'Peak MB', 'Note')


def table(headers, rows):
    # Cells as written: tabulate would read '0.030' as a number.
    return tabulate.tabulate(rows, headers, tablefmt='rst',
                             disable_numparse=True)


def title(text, char):
    return '%s\n%s' % (text, char * len(text))


def cluster(result):
    before = result['before']
    rows = []
    for r in result['rows']:
        refused = r['refused']
        note = ', '.join('%s %d' % kv for kv in sorted(refused.items()))
        if 'target_met' in r:
            note = 'target %s' % ('met' if r['target_met'] else 'not met')
        rows.append((r['planner'], r['moves'], r['moved_gib'],
                     '%.3f' % r['after']['cpu'], '%.3f' % r['after']['ram'],
                     sum(refused.values()), '%.2f' % r['seconds'],
                     '%.0f' % r['peak_mb'] if 'peak_mb' in r else '-', note))
    return '%s\n\n%s' % (title(
        '%d hypervisors / %d servers (seed %d): before, CPU std %.3f, RAM '
        'std %.3f' % (result['hosts'], result['servers'], result['seed'],
                      before['cpu'], before['ram']), '-'),
        table(COLUMNS, rows))


def optimum(results):
    out = []
    for result in results:
        rows = [('%s (%d hosts, %d movable)' % (r['domain'], r['hosts'],
                                                r['servers']),
                 r['k'], '%.5f' % r['start_sse'], '%.5f' % r['ours_sse'],
                 '%.5f' % r['ours_gain_only_sse'], '%.5f' % r['optimum_sse'],
                 '%.1f %%' % (100 * r['share_gain_only']),
                 '%.1f %%' % (100 * r['share']), '%.1f' % r['milp_seconds'])
                for r in result['rows'] if r['share'] is not None]
        out.append('%s\n\n%s' % (title(
            '%d hypervisors / %d servers, seed %d' % (
                result['hosts'], result['servers'], result['seed']), '-'),
            table(('Domain', 'K', 'SSE before', 'Ours', 'Ours by effect',
                   'Optimum', 'Share by effect', 'Share as shipped',
                   'MILP (s)'), rows)))
    return '\n\n'.join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('results', nargs='+')
    parser.add_argument('--optimum')
    args = parser.parse_args(argv)
    for path in args.results:
        with open(path) as f:
            for result in json.load(f)['results']:
                print(cluster(result) + '\n')
    if args.optimum:
        with open(args.optimum) as f:
            print(optimum(json.load(f)['results']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
