"""How long a live migration will take, from Nova's own history.

Nova keeps a record of every migration, whose created_at and updated_at
bound how long the whole move took: the pre-checks, the copy of the guest's
memory and the switch-over. Its progress figures (bytes sent and left) are
shown only while it runs (GET /servers/{id}/migrations); the history (GET
/os-migrations) drops them. So each completed live migration of a server
still in the cloud gives a point (the server's RAM, seconds), and from
those:

- the fixed cost of a move: for each pair of compute hosts, a line through
  its points, fitted robustly (the median slope between migrations of
  servers at least SPREAD apart in RAM, then the median intercept); the
  median of those intercepts, one vote a migration (rates differ between
  pairs, so one line through all would not tell it). Without sizes that far
  apart it cannot be told apart: none, and RAM alone takes the time, which
  overestimates larger moves;
- the rate between two compute hosts where servers moved between them
  (either way): the median of RAM / (seconds - fixed cost); else the
  cloud-wide median;
- the server's own pace: how much longer than its RAM alone would take its
  last completed live migration took. A guest that writes to its memory
  while it is copied has those pages sent again; the libvirt exporters
  clouds run export no dirty rate (libvirt measures one only when asked to,
  virDomainStartDirtyRateCalc), so its past moves are where it shows.

A server whose last live migration ended unfinished (cancelled, failed)
after running some time is predicted to take at least that long again.

Nova's database keeps whole seconds on most deployments: a move of a few
seconds is known to about a second.
"""

import collections
import statistics

from osc_leveller.core.model import model

SPREAD = 1.25  # RAM this far apart tells the fixed cost from the rate
NEWEST = 200  # completed migrations fitted, the newest
MIN_PACE = 0.1  # a server's own pace, at least (whole-second times)
MIB = 1024.0 * 1024.0
# apply's wait for a move: this many times its estimate, at least
# WAIT_AT_LEAST seconds, never beyond apply.timeout.
WAIT_FACTOR = 3.0
WAIT_AT_LEAST = 60.0
UNFINISHED = model.FAILED_STATUSES + model.CANCELLED_STATUSES


class Estimate:
    """seconds, and basis: how they were reached, for people. basis may be
    given as a function that words it, called on first use: the planner
    weighs many estimates and shows few."""

    def __init__(self, seconds, basis):
        self.seconds = seconds
        self._basis = basis

    @property
    def basis(self):
        if callable(self._basis):
            self._basis = self._basis()
        return self._basis

    def text(self):
        return describe(self.seconds)


def describe(seconds):
    if seconds < 90:
        return 'about %d s' % max(1, round(seconds))
    return 'about %d min' % round(seconds / 60)


def wait_for(estimate, timeout):
    """Seconds apply waits for a move before it aborts it."""
    if estimate is None:
        return timeout
    return min(timeout, max(WAIT_AT_LEAST, WAIT_FACTOR * estimate.seconds))


def _line(points):
    """The fixed seconds of a line through (bytes, seconds) points of one
    pair of hosts, or None when their sizes are too alike: the median slope
    between points SPREAD apart, then the median intercept (at least 0)."""
    points = sorted(points)
    slopes = [(t2 - t1) / (p2 - p1)
              for i, (p1, t1) in enumerate(points)
              for p2, t2 in points[i + 1:] if p2 >= p1 * SPREAD]
    if not slopes or statistics.median(slopes) <= 0:
        return None
    per_byte = statistics.median(slopes)
    return max(0.0, statistics.median(t - per_byte * p for p, t in points))


def _fixed(by_pair):
    """The fixed cost of a move: the median of the pairs' own lines'
    (one vote a migration), or None when no pair tells it. Rates differ
    between pairs, so a line through all of them would not."""
    votes = []
    for points in by_pair.values():
        fixed = _line(points)
        if fixed is not None:
            votes += [fixed] * len(points)
    return statistics.median(votes) if votes else None


class Durations:
    """Estimates of live migrations in one snapshot's cloud."""

    def __init__(self, snapshot):
        self.snapshot = snapshot
        done, self.unfinished, self.last_done = [], {}, {}
        for mig in snapshot.migrations:
            server = snapshot.server(mig.server_id)
            if (mig.migration_type != 'live-migration' or server is None
                    or mig.created_at is None or mig.updated_at is None):
                continue
            seconds = mig.updated_at - mig.created_at
            status = mig.status.lower()
            if mig.moved and seconds > 0 and server.ram_gb > 0:
                done.append((mig.updated_at, mig.id, mig, seconds,
                             server.ram_gb * 1024 * MIB))
                self.last_done[mig.server_id] = max(
                    mig.updated_at, self.last_done.get(mig.server_id,
                                                       mig.updated_at))
            elif status in UNFINISHED and seconds > 0:
                kept = self.unfinished.get(mig.server_id)
                if kept is None or mig.updated_at > kept.updated_at:
                    self.unfinished[mig.server_id] = mig
        done = [d[2:] for d in sorted(done, key=lambda d: d[:2])[-NEWEST:]]
        self.count = len(done)
        self.pairs, self.pace = {}, {}
        if not done:
            return
        by_pair = collections.defaultdict(list)
        for mig, seconds, ram in done:
            by_pair[_pair(mig.source_compute, mig.dest_compute)].append(
                (ram, seconds))
        self.fixed = _fixed(by_pair)
        if self.fixed is None or not any(
                seconds > self.fixed for _, seconds, _ in done):
            self.fixed = None  # no fixed cost told apart
        fixed = self.fixed or 0.0
        rates = {pair: [ram / (seconds - fixed) for ram, seconds in points
                        if seconds > fixed]
                 for pair, points in by_pair.items()}
        self.rate = statistics.median(r for found in rates.values()
                                      for r in found)
        self.pairs = {pair: (statistics.median(found), len(found))
                      for pair, found in rates.items() if found}
        for mig, seconds, ram in done:  # oldest first: the newest stays
            rate = self._rate(mig.source_compute, mig.dest_compute)[0]
            self.pace[mig.server_id] = max(MIN_PACE, (seconds - fixed) /
                                           (ram / rate))

    def __bool__(self):
        """Whether anything can be estimated at all."""
        return bool(self.count or self.unfinished)

    def _rate(self, source, destination):
        """(bytes a second, the migrations between the two hosts it comes
        from; 0: the cloud-wide rate)."""
        return self.pairs.get(_pair(source, destination), (self.rate, 0))

    def to(self, server, destination_host):
        """The Estimate of moving the server live from where it is now."""
        return self.of(server, self.snapshot.hypervisor(
            server.hypervisor).host, destination_host)

    def of(self, server, source_host, destination_host):
        """The Estimate of moving the server live between the compute
        hosts; None for a stopped server (a cold migration), or when the
        history cannot tell."""
        if not self or server.status in model.STOPPED_STATUSES:
            return None
        seconds, copy = 0.0, None
        if self.count:
            ram = server.ram_gb * 1024 * MIB
            rate, moves = self._rate(source_host, destination_host)
            pace = self.pace.get(server.id, 1.0)
            seconds = (self.fixed or 0.0) + pace * ram / rate
            copy = (ram, rate, moves, pace)
        last = self.unfinished.get(server.id)
        if last is None or last.updated_at <= self.last_done.get(
                server.id, float('-inf')) or \
                last.updated_at - last.created_at <= seconds:
            last = None
        else:
            seconds = last.updated_at - last.created_at
        if copy is None and last is None:
            return None
        return Estimate(seconds, lambda: self._basis(copy, last))

    def _basis(self, copy, last):
        parts = []
        if copy is not None:
            ram, rate, moves, pace = copy
            parts.append('%.0f MiB of RAM at %.0f MiB/s (%s)%s, %s; from %d '
                         'completed live migrations' % (
                             ram / MIB, rate / MIB,
                             '%d between these hosts' % moves if moves
                             else 'cloud-wide',
                             ' x %.1f, the pace of its last live migration'
                             % pace if abs(pace - 1) >= 0.1 else '',
                             '%.0f s fixed' % self.fixed
                             if self.fixed is not None else
                             'no fixed cost told apart (sizes too alike)',
                             self.count))
        if last is not None:
            parts.append('at least as long as its last live migration, '
                         '%s unfinished after %.0f s' % (
                             last.status.lower(),
                             last.updated_at - last.created_at))
        return '; '.join(parts)


def _pair(a, b):
    return (a, b) if a <= b else (b, a)


def of_move(durations, move):
    """The Estimate of a plan.Move in the durations' snapshot, or None."""
    snap = durations.snapshot
    server = snap.server(move.server_id)
    source = snap.find_hypervisor(move.source)
    if server is None or source is None:
        return None
    return durations.of(server, source.host, move.destination_host)
