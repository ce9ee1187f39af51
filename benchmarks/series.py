"""Seeded load series for a generated cluster: what each server asks for,
step by step, over hours or days.

benchmarks/generate.py gives one moment; this gives the days around it.
Each server gets a shape, drawn by weight from its mix, around its level in
the cluster (``cpu_util``, ``mem_util``), with its own phase and amplitude:

=========== ======= ===== ====== ==========================================
shape       classic daily bursty CPU, as a fraction of the server's vCPUs
=========== ======= ===== ====== ==========================================
steady      30 %    10 %  5 %    its level all day
office      25 %    15 %         weekdays 09-17 local time at 1.5-3x its
                                 level (up to 100 %), ramps 07-09 and
                                 17-19, 0.1-0.4x its level at night and at
                                 weekends; local time is UTC -3 h to +3 h
evening     15 %    40 %         a smooth daily wave, highest at 19-22
                                 local time, its level times 1 +- 0.3-0.8
night-batch 10 %    35 %         a 2-5 h batch starting 00-03 local time
                                 every night at 70-100 %, 0.1-0.3x its
                                 level the rest of the day
bursty      12 %          25 %   0.3-0.7x its level, with bursts of 1-4 h
                                 at 80-100 % starting about once every
                                 12 h, at random
business                  70 %   a business-critical server, no daily
                                 rhythm: 0.1-0.3x its level, with bursts
                                 to 80-100 % of its peak (0.4-0.9, or its
                                 level if higher) at random times; bursts
                                 and the low stretches between them are
                                 lognormal, heavy-tailed (median 1 h and
                                 6 h, sigma 1.2: hours, now and then
                                 days), the low ones shorter near a
                                 month's peak (median 1.5 h); a quarter of
                                 them sit flat at 90-100 % of their peak
                                 around each month's end, from a lognormal
                                 time before it (median 60 h, sigma 0.6)
                                 to one after (median 24 h, sigma 0.8)
drift-up     4 %                 from 0.3-0.7x its level, up by 0.1-0.25 a
                                 day (a service that grows, a leak), RAM
                                 up 0.05-0.1 a day
drift-down   4 %                 from 50-90 % (or its level, if higher),
                                 down by 0.1-0.25 a day, RAM down 0.05-0.1
                                 a day
=========== ======= ===== ====== ==========================================

A month's end is 00:00 UTC on the 1st; its peak is the day before and the
day after, with a week's rise before and two days' fall after. The default
start, Monday 23 November 2026, puts days 8 and 9, the ones a forecast from
seven days of history is judged on, at the peak of November's end.

The mixes (``--mix``): classic, the default, the series of every result so
far; daily, only shapes that repeat from day to day; bursty, business
mostly, nothing daily; mixed, by balancing domain (``az/cpu_model`` of the
server's hypervisor): half the domains draw from daily and the others from
bursty (the odd one), as a hash of the seed and the domain's name orders
them; the series say which in ``domains``.

Every value gets noise (10 % of it, plus 0.01) and is clamped to 0..1: a
server cannot ask for more than its vCPUs. RAM follows the level of
``mem_util``, 0.9-1.1x of it as the server's activity goes (drift shapes
drift instead). A SHUTOFF server asks for nothing. The figures are
demand: what a host's Prometheus shows (capped at 100 % of the host,
servers throttled) is benchmarks/cron_replay.py's business.

Seeded: a server's series depends only on the seed, its id and the mix (for
mixed, its domain's), so the same cluster and seed give the same series,
whatever the order of the servers.

``--errors`` prints instead, for each mix, what a forecast of each
hypervisor's CPU at the next step is worth (errors()): the mean absolute
error of this step's value (persistence), of the same-hour mean of the
days before and of their blend, and the std of hypervisor CPU per domain.

    python benchmarks/generate.py --hosts 80 --servers 3200 --seed 1 -o c.json
    python benchmarks/series.py c.json --hours 72 --seed 1 -o s.json
    python benchmarks/series.py c.json --hours 216 --mix mixed -o m.json
    python benchmarks/series.py --errors --seed 1
"""

import argparse
import collections
import datetime
import hashlib
import json
import math
import os
import random
import statistics
import sys

import tabulate

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import generate  # noqa: E402

START = '2026-11-23T00:00:00Z'  # a Monday
# (shape, weight)
SHAPES = (('steady', 30), ('office', 25), ('evening', 15),
          ('night-batch', 10), ('bursty', 12), ('drift-up', 4),
          ('drift-down', 4))
# The mixes: (shape, weight) each. 'mixed' gives each balancing domain
# one of DAILY and BURSTY (domain_mixes).
CLASSIC, DAILY, BURSTY, MIXED = 'classic', 'daily', 'bursty', 'mixed'
MIXES = {CLASSIC: SHAPES,
         DAILY: (('steady', 10), ('office', 15), ('evening', 40),
                 ('night-batch', 35)),
         BURSTY: (('steady', 5), ('bursty', 25), ('business', 70))}
MIX_NAMES = (CLASSIC, DAILY, BURSTY, MIXED)
HOUR = 3600.0
DAY = 24 * HOUR


def series(cluster, hours=48, step_minutes=60, seed=1, start=START,
           mix=CLASSIC):
    """{'start', 'step_minutes', 'steps', 'seed', 'servers': {id: {'shape',
    'cpu': [...], 'ram': [...]}}}: hours * 60 / step_minutes + 1 values a
    server, the first at start. Mixes other than classic add 'mix', and
    mixed adds 'domains': {domain: 'daily' or 'bursty'}."""
    steps = int(round(hours * 60.0 / step_minutes)) + 1
    origin = epoch(start)
    times = [origin + i * step_minutes * 60.0 for i in range(steps)]
    if mix == MIXED:
        domains = domain_mixes(cluster, seed)
        mix_of = {h['name']: domains[domain_of(h)]
                  for h in cluster['hypervisors']}
    elif mix in MIXES:
        mix_of = collections.defaultdict(lambda: mix)
    else:
        raise ValueError('no mix %r, only %s' % (mix, ', '.join(MIX_NAMES)))
    tables = {name: ([s for s, _ in table], [w for _, w in table])
              for name, table in MIXES.items()}
    out = {}
    for server in cluster['servers']:
        rng = random.Random('%d:%s' % (seed, server['id']))
        shape = rng.choices(*tables[mix_of[server.get('host')]])[0]
        if server.get('status', 'ACTIVE') == 'SHUTOFF':
            out[server['id']] = {'shape': 'stopped', 'cpu': [0.0] * steps,
                                 'ram': [0.0] * steps}
            continue
        cpu, ram = _SHAPES[shape](rng, server.get('cpu_util', 0.0),
                                  server.get('mem_util', 0.0), times,
                                  step_minutes / 60.0)
        out[server['id']] = {
            'shape': shape,
            'cpu': [_noisy(rng, v, 0.1, 0.01) for v in cpu],
            'ram': [_noisy(rng, v, 0.0, 0.005) for v in ram]}
    made = {'start': start, 'step_minutes': step_minutes, 'steps': steps,
            'seed': seed, 'servers': out}
    if mix != CLASSIC:
        made['mix'] = mix
    if mix == MIXED:
        made['domains'] = domains
    return made


def domain_of(hypervisor):
    """The balancing domain, as core/load/scoring.py names it."""
    return '%s/%s' % (hypervisor.get('az') or 'no-az',
                      hypervisor.get('cpu_model') or 'any-cpu')


def domain_mixes(cluster, seed):
    """{domain: 'daily' or 'bursty'}: half the domains each (the odd one
    bursty), in the order of a hash of the seed and the domain's name."""
    names = sorted({domain_of(h) for h in cluster['hypervisors']},
                   key=lambda d: hashlib.sha256(
                       ('%d:%s' % (seed, d)).encode()).hexdigest())
    return dict(sorted((d, DAILY if i < len(names) // 2 else BURSTY)
                       for i, d in enumerate(names)))


def epoch(text):
    return datetime.datetime.fromisoformat(
        text.replace('Z', '+00:00')).timestamp()


def _local(when, offset):
    """(hour of the day 0..24, weekday 0 Monday) at UTC + offset hours."""
    moment = datetime.datetime.fromtimestamp(
        when + offset * HOUR, datetime.timezone.utc)
    return moment.hour + moment.minute / 60.0, moment.weekday()


def _noisy(rng, value, relative, absolute):
    if relative:
        value *= 1.0 + rng.gauss(0.0, relative)
    return round(min(1.0, max(0.0, value + rng.gauss(0.0, absolute))), 3)


def _ramp(hour, up, full, down, off):
    """0 before up, 1 from full to down, 0 after off, linear between."""
    if full <= hour <= down:
        return 1.0
    if up < hour < full:
        return (hour - up) / (full - up)
    if down < hour < off:
        return (off - hour) / (off - down)
    return 0.0


def _with_activity(activity, low, high, mem):
    """CPU between low and high as activity goes 0..1; RAM 0.9-1.1x."""
    cpu = [low + (high - low) * a for a in activity]
    ram = [mem * (0.9 + 0.2 * a) for a in activity]
    return cpu, ram


def _steady(rng, level, mem, times, step_hours):
    return [level] * len(times), [mem] * len(times)


def _office(rng, level, mem, times, step_hours):
    offset = rng.uniform(-3.0, 3.0)
    low = level * rng.uniform(0.1, 0.4)
    high = min(1.0, level * rng.uniform(1.5, 3.0))
    activity = []
    for when in times:
        hour, weekday = _local(when, offset)
        activity.append(0.0 if weekday >= 5 else _ramp(hour, 7, 9, 17, 19))
    return _with_activity(activity, low, high, mem)


def _evening(rng, level, mem, times, step_hours):
    offset = rng.uniform(-3.0, 3.0)
    peak = rng.uniform(19.0, 22.0)
    swing = rng.uniform(0.3, 0.8)
    activity = [(1.0 + math.cos(2 * math.pi * (_local(w, offset)[0] - peak)
                                / 24.0)) / 2.0 for w in times]
    return _with_activity(activity, level * (1 - swing),
                          min(1.0, level * (1 + swing)), mem)


def _night_batch(rng, level, mem, times, step_hours):
    offset = rng.uniform(-3.0, 3.0)
    begin = rng.uniform(0.0, 3.0)
    end = begin + rng.uniform(2.0, 5.0)
    activity = [1.0 if begin <= _local(w, offset)[0] < end else 0.0
                for w in times]
    return _with_activity(activity, level * rng.uniform(0.1, 0.3),
                          rng.uniform(0.7, 1.0), mem)


def _bursty(rng, level, mem, times, step_hours):
    low = level * rng.uniform(0.3, 0.7)
    activity, left, high = [], 0.0, 1.0
    for _ in times:
        if left <= 0 and rng.random() < step_hours / 12.0:
            left = rng.uniform(1.0, 4.0)
            high = rng.uniform(0.8, 1.0)
        activity.append(1.0 if left > 0 else 0.0)
        left -= step_hours
    cpu = [high if a else low for a in activity]
    return cpu, [mem * (0.9 + 0.2 * a) for a in activity]


# business, lognormal lengths (median hours, sigma): of a burst; of the
# low stretch between two, far from a month's end and at it.
BURSTS = (1.0, 1.2)
GAPS = (6.0, 1.5, 1.2)
# The share of business servers that sit at their peak around a month's
# end, and lognormal (median hours, sigma): how long before the month's
# end that starts, and how long after it ends.
MONTH_PEAK = (0.25, (60.0, 0.6), (24.0, 0.8))


def month_peak(when, ends):
    """How near a month's peak `when` is, 0..1: 1 on a month's last day
    and the next month's first, rising over the week before, falling over
    the two days after; ends: month_ends() around when."""
    hours = min(((when - end) / HOUR for end in ends), key=abs)
    if -24 <= hours <= 24:
        return 1.0
    if -192 < hours < -24:
        return (hours + 192) / 168.0
    if 24 < hours < 72:
        return (72 - hours) / 48.0
    return 0.0


def month_ends(first, last):
    """The month's ends (00:00 UTC on the 1st), in seconds since the epoch:
    from the one that starts first's month to the first more than 31 days
    after last."""
    moment = datetime.datetime.fromtimestamp(
        first, datetime.timezone.utc).replace(
            day=1, hour=0, minute=0, second=0, microsecond=0)
    ends = [moment.timestamp()]
    while ends[-1] <= last + 31 * DAY:
        moment = (moment + datetime.timedelta(days=32)).replace(day=1)
        ends.append(moment.timestamp())
    return ends


def _business(rng, level, mem, times, step_hours):
    peak = min(1.0, max(level, rng.uniform(0.4, 0.9)))
    low = level * rng.uniform(0.1, 0.3)
    # Bursts from a month before the first value: the first is under way.
    at, busy, runs = times[0] - 30 * DAY, False, []  # (end, cpu, busy)
    ends = month_ends(at, times[-1])
    while at <= times[-1]:
        if busy:
            median, sigma = BURSTS
        else:
            far, near, sigma = GAPS
            median = far + (near - far) * month_peak(at, ends)
        at += rng.lognormvariate(math.log(median), sigma) * HOUR
        runs.append((at, peak * rng.uniform(0.8, 1.0) if busy
                     else low * rng.uniform(0.6, 1.4), busy))
        busy = not busy
    stretches = []  # (start, end, cpu): flat at the peak
    share, (lead, lead_sigma), (lag, lag_sigma) = MONTH_PEAK
    if rng.random() < share:
        for end in ends:
            stretches.append((
                end - rng.lognormvariate(math.log(lead), lead_sigma) * HOUR,
                end + rng.lognormvariate(math.log(lag), lag_sigma) * HOUR,
                peak * rng.uniform(0.9, 1.0)))
    cpu, activity, index = [], [], 0
    for when in times:
        while runs[index][0] <= when:
            index += 1
        value, busy = runs[index][1:]
        for start, end, flat in stretches:
            if start <= when < end:
                value, busy = flat, True
        cpu.append(value)
        activity.append(1.0 if busy else 0.0)
    return cpu, [mem * (0.9 + 0.2 * a) for a in activity]


def _drift(sign):
    def shape(rng, level, mem, times, step_hours):
        slope = sign * rng.uniform(0.1, 0.25)
        mem_slope = sign * rng.uniform(0.05, 0.1)
        first = level * rng.uniform(0.3, 0.7) if sign > 0 else \
            max(level, rng.uniform(0.5, 0.9))
        days = [(w - times[0]) / DAY for w in times]
        return ([first + slope * d for d in days],
                [min(1.0, max(0.0, mem + mem_slope * d)) for d in days])
    return shape


_SHAPES = {'steady': _steady, 'office': _office, 'evening': _evening,
           'night-batch': _night_batch, 'bursty': _bursty,
           'business': _business,
           'drift-up': _drift(1), 'drift-down': _drift(-1)}


def errors(cluster, made, days=7, weight=0.7, domains=None):
    """What a forecast of each hypervisor's CPU at the next step is worth
    on made, a series of cluster, over the steps with days of history:

    {'persistence', 'same_hour', 'blend': the mean absolute error of this
    step's value, of the mean of the next step's time on each of the days
    before, and of weight times that plus 1 - weight times this step's;
    'domain_std': the std of hypervisor CPU per domain of two or more,
    averaged over the domains and steps (None: no such domain); 'steps':
    the steps predicted}.

    Hypervisor CPU is its servers' demand over its threads, capped at 1
    as node_exporter shows it; domains: only the hypervisors of these.
    """
    per_day = int(round(DAY / (made['step_minutes'] * 60.0)))
    first = days * per_day
    if made['steps'] <= first:
        raise ValueError('%d steps leave no step with %d days of history'
                         % (made['steps'], days))
    demand = {h['name']: [0.0] * made['steps']
              for h in cluster['hypervisors']}
    for server in cluster['servers']:
        host = demand[server['host']]
        for i, value in enumerate(made['servers'][server['id']]['cpu']):
            host[i] += value * server['vcpus']
    cpu, members = {}, collections.defaultdict(list)
    for hyp in cluster['hypervisors']:
        if domains is None or domain_of(hyp) in domains:
            cpu[hyp['name']] = [min(1.0, v / hyp['vcpus'])
                                for v in demand[hyp['name']]]
            members[domain_of(hyp)].append(hyp['name'])
    misses = collections.defaultdict(list)
    for values in cpu.values():
        for i in range(first, made['steps']):
            now = values[i - 1]
            same = statistics.mean(values[i - d * per_day]
                                   for d in range(1, days + 1))
            misses['persistence'].append(abs(values[i] - now))
            misses['same_hour'].append(abs(values[i] - same))
            misses['blend'].append(abs(
                values[i] - weight * same - (1 - weight) * now))
    spread = [statistics.pstdev(cpu[h][i] for h in hosts)
              for hosts in members.values() if len(hosts) > 1
              for i in range(first, made['steps'])]
    if not cpu:
        raise ValueError('no hypervisor in %s' % ', '.join(domains))
    result = {k: round(statistics.mean(v), 4) for k, v in misses.items()}
    result.update(domain_std=round(statistics.mean(spread), 4)
                  if spread else None, steps=made['steps'] - first)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('cluster', nargs='?',
                        help='a cluster file of generate.py; with --errors, '
                        'by default generate.py\'s 80 hypervisors and '
                        '3,200 servers of --seed')
    parser.add_argument('--hours', type=float,
                        help='48 by default, 216 with --errors')
    parser.add_argument('--step-minutes', type=float, default=60)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--start', default=START,
                        help='the first value\'s time, ISO 8601 UTC')
    parser.add_argument('--mix', choices=MIX_NAMES, default=CLASSIC,
                        help='the shapes the servers draw from')
    parser.add_argument('--errors', action='store_true',
                        help='instead of the series, print for each mix '
                        'what a forecast of hypervisor CPU at the next step '
                        'is worth')
    parser.add_argument('--days', type=int, default=7,
                        help='with --errors: days of history')
    parser.add_argument('--weight', type=float, default=0.7,
                        help='with --errors: the weight of the same-hour '
                        'mean in the blend')
    parser.add_argument('-o', '--output', default='-')
    args = parser.parse_args(argv)
    if args.cluster:
        with open(args.cluster) as stream:
            cluster = json.load(stream)
    elif args.errors:
        cluster = generate.generate(80, 3200, args.seed)
    else:
        parser.error('a cluster file is needed')
    hours = args.hours or (216 if args.errors else 48)
    if not args.errors:
        generate.write(series(cluster, hours, args.step_minutes, args.seed,
                              args.start, args.mix), args.output)
        return 0
    try:
        print(error_table(cluster, hours, args.step_minutes, args.seed,
                          args.start, args.days, args.weight))
    except ValueError as exc:
        parser.error(str(exc))
    return 0


def error_table(cluster, hours, step_minutes, seed, start, days, weight):
    """The markdown table of errors() for each mix, the mixed one's daily
    and bursty domains apart too."""
    cells = []
    for mix in MIX_NAMES:
        made = series(cluster, hours, step_minutes, seed, start, mix)
        rows = [(mix, None)]
        if mix == MIXED:
            for kind in (DAILY, BURSTY):
                domains = [d for d, k in made['domains'].items() if k == kind]
                if domains:
                    rows.append(('%s: %s domains' % (mix, kind), domains))
        for name, domains in rows:
            got = errors(cluster, made, days, weight, domains)
            cells.append((name, '%.3f' % got['persistence'],
                          '%.3f' % got['same_hour'], '%.3f' % got['blend'],
                          '-' if got['domain_std'] is None else
                          '%.3f' % got['domain_std']))
    return tabulate.tabulate(
        cells, ('mix', 'persistence', 'same-hour mean, %d days' % days,
                'blend %g' % weight, 'domain std'),
        tablefmt='github', disable_numparse=True)


if __name__ == '__main__':
    sys.exit(main())
