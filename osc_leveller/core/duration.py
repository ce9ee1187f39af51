"""How long a live migration will take, from Nova's own history.

Nova's libvirt driver records each live migration's progress on its
migration record (os-migrations 2.80): the guest's RAM, the bytes sent, the
pages a guest dirtied while it ran sent again included, and what was left
to send at its last look. The record's created_at and updated_at bound how
long the whole move took: pre-checks, the copy and the switch-over.

From the completed live migrations of the history read:

- the fixed cost of a move and the rate bytes go at: a line through (bytes
  sent, seconds), fitted robustly (the median slope between migrations of
  sizes at least SPREAD apart, then the median intercept). Without sizes
  that far apart the two cannot be told apart: no fixed cost, and the rate
  is the median of bytes / seconds, which overestimates larger moves;
- the rate between two compute hosts where servers moved between them
  (either way): the median of bytes / (seconds - fixed cost).

A server's bytes are what its own last live migration sent, which holds its
dirty rate at the rate of then; else its RAM times the cloud's median of
bytes sent per byte of RAM. A server whose last live migration was stopped
after sending NO_CONVERGENCE times its RAM with pages still to send is
predicted never to converge. The libvirt exporters clouds run
(cloud/libvirt.py) export no dirty rate: libvirt measures one only when
asked to (virDomainStartDirtyRateCalc), so past migrations are where it
shows.

Times in Nova's records have whole seconds on most databases: a move of a
few seconds is known to about a second.
"""

import collections
import dataclasses
import math
import statistics

from osc_leveller.core import model

SPREAD = 1.25  # sizes this far apart tell the fixed cost from the rate
NO_CONVERGENCE = 2.0  # sent this many times its RAM and not done: never
NEWEST = 200  # completed migrations fitted, the newest
MIB = 1024.0 * 1024.0
# apply's wait for a move: this many times its estimate, at least
# WAIT_AT_LEAST seconds, never beyond apply.timeout.
WAIT_FACTOR = 3.0
WAIT_AT_LEAST = 60.0


@dataclasses.dataclass(frozen=True)
class Estimate:
    seconds: float  # math.inf: never converges at the rates seen
    basis: str  # how it was reached, for people

    @property
    def converges(self):
        return math.isfinite(self.seconds)

    def text(self):
        return describe(self.seconds)


def describe(seconds):
    if not math.isfinite(seconds):
        return 'never'
    if seconds < 90:
        return 'about %d s' % max(1, round(seconds))
    return 'about %d min' % round(seconds / 60)


def wait_for(estimate, timeout):
    """Seconds apply waits for a move before it aborts it."""
    if estimate is None or not estimate.converges:
        return timeout
    return min(timeout, max(WAIT_AT_LEAST, WAIT_FACTOR * estimate.seconds))


def _seconds(mig):
    if mig.created_at is None or mig.updated_at is None:
        return None
    return mig.updated_at - mig.created_at


def _figures(mig):
    """A live migration whose record has Nova's progress figures."""
    return (mig.migration_type == 'live-migration'
            and mig.memory_total and mig.memory_processed is not None)


def _fit(points):
    """(fixed seconds, seconds per byte, how) of (bytes, seconds) points."""
    points = sorted(points)
    slopes = [(t2 - t1) / (p2 - p1)
              for i, (p1, t1) in enumerate(points)
              for p2, t2 in points[i + 1:] if p2 >= p1 * SPREAD]
    if slopes:
        per_byte = statistics.median(slopes)
        if per_byte > 0:
            fixed = statistics.median(t - per_byte * p for p, t in points)
            if fixed >= 0:
                return fixed, per_byte, 'fitted'
    return 0.0, statistics.median(t / p for p, t in points), 'one size'


class Durations:
    """Estimates of live migrations in one snapshot's cloud."""

    def __init__(self, snapshot):
        self.snapshot = snapshot
        self.last = {}  # server id -> its newest ended record with figures
        done = []
        for mig in snapshot.migrations:
            if not _figures(mig) or mig.in_progress:
                continue
            when = mig.updated_at or mig.created_at or 0.0
            kept = self.last.get(mig.server_id)
            if kept is None or when >= (kept.updated_at or
                                        kept.created_at or 0.0):
                self.last[mig.server_id] = mig
            seconds = _seconds(mig)
            if mig.moved and mig.memory_processed > 0 and seconds and \
                    seconds > 0:
                done.append((when, mig, seconds))
        done = [(m, s) for _, m, s in sorted(
            done, key=lambda d: (d[0], d[1].id))[-NEWEST:]]
        self.count = len(done)
        self.fixed = self.per_byte = None
        self.pairs = {}
        if done:
            self.fixed, self.per_byte, self.how = _fit(
                [(m.memory_processed, s) for m, s in done])
            rates = collections.defaultdict(list)
            for mig, seconds in done:
                copying = seconds - self.fixed
                if copying > 0:
                    rates[_pair(mig.source_compute, mig.dest_compute)].append(
                        mig.memory_processed / copying)
            self.pairs = {pair: (statistics.median(found), len(found))
                          for pair, found in rates.items()}
            self.sent_per_byte = statistics.median(
                m.memory_processed / m.memory_total for m, _ in done)

    def __bool__(self):
        """Whether anything can be estimated at all."""
        return bool(self.count or self.last)

    def of(self, server, source_host, destination_host):
        """The Estimate of moving the server live between the compute
        hosts, or None when the history cannot tell."""
        last = self.last.get(server.id)
        if last is not None and not last.moved and \
                last.memory_remaining and \
                last.memory_processed >= NO_CONVERGENCE * last.memory_total:
            return Estimate(math.inf, 'its last live migration sent %.0f MiB, '
                            '%.1f times its RAM, and was %s with %.0f MiB '
                            'still to send' % (
                                last.memory_processed / MIB,
                                last.memory_processed / last.memory_total,
                                last.status.lower(),
                                last.memory_remaining / MIB))
        if not self.count:
            return None
        if last is not None and last.moved:
            sent = last.memory_processed
            what = 'what its last live migration sent'
        elif last is not None:
            sent = last.memory_processed + (last.memory_remaining or 0)
            what = 'what its last live migration sent and had left'
        else:
            sent = server.ram_gb * 1024 * MIB * self.sent_per_byte
            what = 'its RAM x %.2f, the bytes sent per byte of RAM' % (
                self.sent_per_byte)
        rate, count = self.pairs.get(_pair(source_host, destination_host),
                                     (None, 0))
        if rate is not None:
            where = '%d between these hosts' % count
        else:
            rate, where = 1 / self.per_byte, 'cloud-wide'
        seconds = self.fixed + sent / rate
        fixed = '%.0f s fixed' % self.fixed if self.how == 'fitted' else \
            'no fixed cost told apart (sizes too alike)'
        return Estimate(seconds, '%.0f MiB (%s) at %.0f MiB/s (%s), %s; '
                        'from %d completed live migrations' % (
                            sent / MIB, what, rate / MIB, where, fixed,
                            self.count))


def _pair(a, b):
    return (a, b) if a <= b else (b, a)


def of_move(durations, move):
    """The Estimate of a plan.Move in the durations' snapshot, or None."""
    snap = durations.snapshot
    server = snap.server(move.server_id)
    source = snap.find_hypervisor(move.source)
    if server is None or source is None or \
            server.status in model.STOPPED_STATUSES:
        return None
    return durations.of(server, source.host, move.destination_host)
