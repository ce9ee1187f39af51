"""Seeded load series for a generated cluster: what each server asks for,
step by step, over hours or days.

benchmarks/generate.py gives one moment; this gives the days around it.
Each server gets a shape, drawn by weight, around its level in the cluster
(``cpu_util``, ``mem_util``), with its own phase and amplitude:

============ ====== ===========================================================
shape        weight CPU, as a fraction of the server's own vCPUs
============ ====== ===========================================================
steady       30 %   its level all day
office       25 %   weekdays 09-17 local time at 1.5-3x its level (up to
                    100 %), ramps 07-09 and 17-19, 0.1-0.4x its level at
                    night and at weekends; local time is UTC -3 h to +3 h
evening      15 %   a smooth daily wave, highest at 19-22 local time, its
                    level times 1 +- 0.3-0.8
night-batch  10 %   a 2-5 h batch starting 00-03 local time every night at
                    70-100 %, 0.1-0.3x its level the rest of the day
bursty       12 %   0.3-0.7x its level, with bursts of 1-4 h at 80-100 %
                    starting about once every 12 h, at random
drift-up      4 %   from 0.3-0.7x its level, up by 0.1-0.25 a day (a
                    service that grows, a leak), RAM up 0.05-0.1 a day
drift-down    4 %   from 50-90 % (or its level, if higher), down by
                    0.1-0.25 a day, RAM down 0.05-0.1 a day
============ ====== ===========================================================

Every value gets noise (10 % of it, plus 0.01) and is clamped to 0..1: a
server cannot ask for more than its vCPUs. RAM follows the level of
``mem_util``, 0.9-1.1x of it as the server's activity goes (drift shapes
drift instead). A SHUTOFF server asks for nothing. The figures are
demand: what a host's Prometheus shows (capped at 100 % of the host,
servers throttled) is benchmarks/cron_replay.py's business.

Seeded: a server's series depends only on the seed and its id, so the same
cluster and seed give the same series, whatever the order of the servers.

    python benchmarks/generate.py --hosts 80 --servers 3200 --seed 1 -o c.json
    python benchmarks/series.py c.json --hours 72 --seed 1 -o s.json
"""

import argparse
import datetime
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from benchmarks import generate  # noqa: E402

START = '2026-11-23T00:00:00Z'  # a Monday
# (shape, weight)
SHAPES = (('steady', 30), ('office', 25), ('evening', 15),
          ('night-batch', 10), ('bursty', 12), ('drift-up', 4),
          ('drift-down', 4))
HOUR = 3600.0
DAY = 24 * HOUR


def series(cluster, hours=48, step_minutes=60, seed=1, start=START):
    """{'start', 'step_minutes', 'steps', 'seed', 'servers': {id: {'shape',
    'cpu': [...], 'ram': [...]}}}: hours * 60 / step_minutes + 1 values a
    server, the first at start."""
    steps = int(round(hours * 60.0 / step_minutes)) + 1
    origin = epoch(start)
    times = [origin + i * step_minutes * 60.0 for i in range(steps)]
    names = [s for s, _ in SHAPES]
    weights = [w for _, w in SHAPES]
    out = {}
    for server in cluster['servers']:
        rng = random.Random('%d:%s' % (seed, server['id']))
        shape = rng.choices(names, weights)[0]
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
    return {'start': start, 'step_minutes': step_minutes, 'steps': steps,
            'seed': seed, 'servers': out}


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
           'drift-up': _drift(1), 'drift-down': _drift(-1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('cluster', help='a cluster file of generate.py')
    parser.add_argument('--hours', type=float, default=48)
    parser.add_argument('--step-minutes', type=float, default=60)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--start', default=START,
                        help='the first value\'s time, ISO 8601 UTC')
    parser.add_argument('-o', '--output', default='-')
    args = parser.parse_args(argv)
    with open(args.cluster) as stream:
        cluster = json.load(stream)
    generate.write(series(cluster, args.hours, args.step_minutes, args.seed,
                          args.start), args.output)
    return 0


if __name__ == '__main__':
    sys.exit(main())
