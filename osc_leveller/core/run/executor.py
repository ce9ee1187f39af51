"""Carry out live migrations with every safety limit in one place.

The executor never trusts a plan: before it starts a migration it reads
again what the move touches (actions.snapshot(moves)) and re-checks it with
the planner's own filters (server still on the planned source, ACTIVE,
idle, outside its cooldown; destination still enabled, up and with room;
the move still lowers the load). A move that no longer holds is skipped
with the reason. Of a move it takes only which server goes from which
hypervisor to which: the compute host Nova is asked for is the destination
hypervisor's host in the cloud just read, never a host named in a plan
file. Success is what Nova shows afterwards: the migration record completed
AND the server ACTIVE, without a task, on that host and that hypervisor. A
failed live migration leaves the server ACTIVE on its source, so ACTIVE
alone proves nothing.

The cloud is reached only through ``actions`` (see cloud/actions.py):
snapshot(moves=None), live_migrate(server_id, host), cold_migrate(server_id,
host), confirm(server_id), server(server_id), migration(server_id, since,
cold) and abort(server_id, migration_id).
"""

import dataclasses
import time

from osc_leveller.core.load import duration
from osc_leveller.core.model import errors
from osc_leveller.core.model import model
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.rules import checks
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy
from osc_leveller.core.run import pending as pending_mod

DONE = 'done'
FAILED = 'failed'
SKIPPED = 'skipped'
TIMED_OUT = 'timed-out'
ABORTED = 'aborted'
DRY_RUN = 'would run'
STARTED = 'started'  # requested, not waited for
NOT_STARTED = 'not started'
PROBLEMS = (FAILED, TIMED_OUT, ABORTED)

ABORT_GRACE = 120.0  # seconds to let Nova roll back after an abort
# A running move's memory figures are shown at most this often (seconds).
PROGRESS_EVERY = 5.0
MIB = 1024 * 1024


class ActionError(errors.LevellerError):
    """Nova refused or could not be asked; the message says why."""


class JournalError(errors.LevellerError):
    """The journal cannot take a record; the message names it."""


@dataclasses.dataclass(frozen=True)
class ServerView:
    """What Nova says about one server right now."""
    status: str
    task_state: str
    host: str  # compute service host
    hypervisor: str  # hypervisor_hostname


@dataclasses.dataclass(frozen=True)
class MigrationView:
    id: str  # Nova's integer id, what the abort call takes
    status: str
    # Nova's progress of a live migration's memory copy, in bytes (None:
    # not reported). processed counts pages sent again, so it may pass total.
    memory_total: int = None
    memory_processed: int = None
    memory_remaining: int = None

    @property
    def memory(self):
        """(total, processed, remaining), or None when Nova shows none
        (all null, or all 0 before libvirt's job has started)."""
        figures = (self.memory_total, self.memory_processed,
                   self.memory_remaining)
        return figures if any(figures) else None


@dataclasses.dataclass(frozen=True)
class ApplyOptions:
    batch: int = None  # most migrations to start; None: all
    max_parallel: int = 2
    per_source: int = 1  # migrations out of one hypervisor at a time
    timeout: float = 900.0  # per migration, seconds
    poll_interval: float = 2.0
    stop_on_error: bool = True
    dry_run: bool = False
    wait: bool = True  # False: start the first moves and return
    # A later plan wave may need room an earlier one frees, so it waits for
    # it; a drain's moves only add to their destinations and need no order.
    waves: bool = True


@dataclasses.dataclass
class Result:
    move: object  # plan.Move
    status: str
    reason: str = ''
    duration: float = None
    migration_id: str = ''
    # The server's name as the cloud read before the move names it; None
    # when the cloud does not know the server.
    server: str = None

    @property
    def plan_name(self):
        """The plan's name of the server when the cloud names it
        otherwise, else '': a plan file may name one server and carry
        another's id."""
        named = self.move.server_name
        return named if named and named != self.server else ''


@dataclasses.dataclass(frozen=True)
class Run:
    results: list  # a Result per move, in plan order
    error: str = None  # why the run stopped early, if it did

    @property
    def problems(self):
        return [r for r in self.results if r.status in PROBLEMS]

    @property
    def requested(self):
        """The moves Nova was asked to migrate."""
        return [r for r in self.results
                if r.status not in (SKIPPED, NOT_STARTED, DRY_RUN)]


class Executor:
    def __init__(self, actions, planner_options, options, journal=None,
                 progress=None, clock=time.monotonic, sleep=time.sleep,
                 wall=time.time, kind=kinds.BALANCE):
        """kind: the kinds.Kind of the moves, whose re-check says why a
        move no longer holds, on the load it declares, and whether its
        stopped servers migrate cold."""
        self.kind = kind
        self.methods = {}  # server id -> policy.COLD or LIVE, as it started
        self.actions = actions
        self.planner_options = planner_options
        self.options = options
        self.journal = journal or (lambda event, **fields: None)
        self.progress = progress or (lambda text: None)
        self.clock = clock
        self.sleep = sleep
        self.wall = wall
        self._names, self._seen, self._stopped = {}, None, {}  # see run()
        self.journal_error = None  # why the journal took no more records
        # What a run left when it was interrupted (KeyboardInterrupt).
        self.interrupted = None
        self._asking = None  # the move Nova is being asked to migrate

    def run(self, moves, snapshot=None):
        """The Run of the moves. snapshot: the state just read.

        A move starts as soon as a slot is free, not when a whole round has
        ended: every start reads the cloud again for the move and re-checks
        it. A journal that cannot take a record stops the run from starting
        moves, as a failure would; the moves already started are waited for
        (or aborted past their timeout) all the same. When that happens
        before Nova was asked for any migration, JournalError: the run
        refuses to start. Interrupted (KeyboardInterrupt), the run's results
        so far are kept in self.interrupted before it goes on up.
        """
        moves = list(moves)
        results = {}
        pending = pending_mod.Pending(moves)
        # Server names as the cloud last read names them (see _server).
        self._names, self._seen = {}, snapshot
        # The last result of each exchange that did not succeed.
        self._stopped = {}
        running = {}  # move -> _Watch
        try:
            error = self._loop(moves, snapshot, results, pending, running)
        except KeyboardInterrupt:
            if self._asking is not None:  # Nova may have taken it
                self._record(results, Result(
                    self._asking, STARTED, 'interrupted while Nova was asked '
                    'to migrate it'))
            self._unfinished([m for m in running if m not in results],
                             [m for m in moves if m not in results
                              and m not in running], results,
                             filters.Refusal('interrupted', 'interrupted'))
            self.interrupted = Run([results[m] for m in moves], 'interrupted')
            raise
        run = Run([results[m] for m in moves], error)
        if self.journal_error is not None and not run.requested:
            raise JournalError(self.journal_error)
        return run

    def _loop(self, moves, snapshot, results, pending, running):
        """Start, watch and settle the moves; why the run stopped early,
        or None."""
        stale = self.kind.recheck(moves)
        index = {id(move): i for i, move in enumerate(moves)}
        # The batch counts moves, an exchange's moves as one: half an
        # exchange may leave the load worse than before.
        budget = len(moves) if self.options.batch is None else \
            self.options.batch
        units = set()
        stopped = False
        look = True  # something changed since the cloud was last read
        error = None  # why the run stopped early, if it did
        while True:
            if self.journal_error is not None:
                stopped, error = True, error or self.journal_error
            if look and not stopped and self._room(pending, units, budget,
                                                   running):
                try:
                    view = _View(snapshot, self.kind.load)
                    chosen = self._round(pending, view, results,
                                         (units, budget), list(running),
                                         stale)
                except ActionError as exc:
                    error = filters.Refusal('cannot read the cloud: %s'
                                            % exc, 'cloud_unreadable')
                    stopped = True
                    continue
                # Nothing chosen while moves run: wait for one to end.
                look = not running
                for move in chosen:
                    if self.journal_error is not None:
                        started = False
                    elif self.options.dry_run:
                        self._record(results, Result(
                            move, DRY_RUN, 're-checked against the cloud'))
                        self._log('would-run', **self._fields(move))
                        continue
                    else:
                        started = self._start(move, chosen[move], results,
                                              running, len(moves))
                    if not started:  # the journal failed first
                        pending.put_back(index[id(move)])
                        units.discard(_unit(move))
                    elif move in results and self.options.stop_on_error:
                        stopped = True  # Nova refused it
                snapshot = None  # the next start reads the cloud again
                continue
            if not running or not self.options.wait:
                break
            self.sleep(self.options.poll_interval)
            for move in self._settle(running, results, len(moves)):
                look = True
                if self.options.stop_on_error and \
                        results[move].status in PROBLEMS:
                    stopped = True
        error = error or self.journal_error
        self._unfinished(running, [pending.moves[i] for i in pending.walk()],
                         results, error or (
                             filters.Refusal('not waited for; run again to '
                                             'continue', 'not_waited')
                             if not self.options.wait
                             else filters.Refusal(
                                 'the batch limit of %d was reached' % budget,
                                 'batch_limit')
                             if len(units) >= budget
                             else filters.Refusal('an earlier move failed',
                                                  'earlier_failure')))
        return error

    def _log(self, event, **fields):
        """Journal a record; False when the journal cannot take it, which
        stops the run from starting moves (what is under way goes on)."""
        try:
            self.journal(event, **fields)
        except JournalError as exc:
            self.journal_error = self.journal_error or filters.Refusal(
                str(exc), 'journal_unwritable')
            return False
        return True

    def _room(self, pending, units, budget, running):
        """Whether another move may start now: one is pending, the batch
        has room for it (or it belongs to an exchange already started), a
        slot is free, and no earlier wave is still running."""
        return bool(pending) and (
            len(units) < budget or any(
                pending.has_exchange(unit) for unit in units
                if isinstance(unit, str))
        ) and len(running) < self.options.max_parallel and (
            not self.options.waves or all(
                m.wave == pending.moves[pending.first].wave
                for m in running))

    def _unfinished(self, running, waiting, results, why):
        """Results of the moves the run leaves: started and not waited
        for, or not started, and why."""
        for move in running:
            self._record(results, Result(move, STARTED, 'migrating; not '
                                         'waited for', None))
            self._log('started', **self._fields(move))
        for move in waiting:
            self._record(results, Result(move, NOT_STARTED, why))
            self._log('not-started', reason=why, **self._fields(move))

    def _round(self, pending, view, results, batch, running, stale):
        """Moves to start now, each with the compute host to ask Nova for
        and the estimate of its duration (or None); stale ones are skipped
        on the way.

        Only moves of the first pending wave go together (later waves may
        need room that earlier ones free). No hypervisor is a destination
        twice, nor both a source and a destination, among the running and
        the chosen moves; a dry run takes every move in turn, checked
        against the state after the ones before. batch: (units started,
        most units), where a unit is a move or a whole exchange. The rest
        of an exchange one of whose moves did not succeed is skipped.
        Each move is checked against a view of the cloud read for it (see
        _View); ActionError when it cannot be read, nothing chosen then.
        """
        units, budget = batch
        wave = pending.moves[pending.first].wave
        left = pending.waves[wave]  # moves of that wave not visited yet
        parallel = len(pending) if self.options.dry_run else \
            self.options.max_parallel - len(running)
        sources, destinations = {}, set()
        for move in running:
            sources[move.source] = sources.get(move.source, 0) + 1
            destinations.add(move.destination)
        chosen, taken = {}, []
        skipped, first = [], {}  # this round's skips of exchange moves
        try:
            for index in pending.walk():
                move = pending.moves[index]
                if len(chosen) >= parallel:
                    break
                if move.wave == wave:
                    left -= 1
                elif not left and (chosen or running) and \
                        self.options.waves and not self.options.dry_run:
                    break  # only later waves are left: they wait
                if _unit(move) not in units and len(units) >= budget:
                    continue
                if (chosen or running) and not self.options.dry_run and (
                        (self.options.waves and move.wave != wave)
                        or sources.get(move.source, 0) >=
                        self.options.per_source
                        or move.source in destinations
                        or move.destination in destinations
                        or move.destination in sources):
                    continue
                # A round sees the stops recorded before it, and the first
                # of its own for an exchange that had none.
                stop = move.exchange and (self._stopped.get(move.exchange)
                                          or first.get(move.exchange))
                if stop:
                    other, result = stop
                    reason = filters.Refusal('its %s stopped: %s was %s' % (
                        move.exchange, self._label(other), result.status),
                        checks.EXCHANGE_STOPPED)
                else:
                    snapshot, state, rules = view.read(
                        self.actions, lambda: list(chosen) + self._ahead(
                            index, pending, parallel - len(chosen), units,
                            budget, (wave, left)),
                        chosen, self.planner_options)
                    self._seen = snapshot
                    self._names[move.server_id] = _name_in(snapshot, move)
                    reason = stale(move, snapshot, state, rules)
                pending.remove(index)
                if reason:
                    result = self._record(results, Result(move, SKIPPED,
                                                          reason), later=True)
                    if move.exchange:
                        skipped.append((move, result))
                        first.setdefault(move.exchange, (move, result))
                    self._log('skipped', reason=reason,
                              **self._fields(move))
                    self.progress('%s: skipped, %s' % (self._label(move),
                                                       reason))
                    continue
                host = snapshot.hypervisor(move.destination).host
                # Its estimate from the cloud just read, never the plan's,
                # and cold only for a server read stopped just now: a cold
                # migration of one started since would stop it.
                server = snapshot.server(move.server_id)
                self.methods[move.server_id] = policy.kind_of(server) \
                    if self.kind.migrates_stopped else policy.LIVE
                chosen[move] = (host, server and rules.durations.to(
                    server, host))
                taken.append(index)
                units.add(_unit(move))
                state.apply(move.server_id, move.destination)
                sources[move.source] = sources.get(move.source, 0) + 1
                destinations.add(move.destination)
        except ActionError:
            # Not started: pending again, so the run says so.
            for index in taken:
                pending.put_back(index)
                units.discard(_unit(pending.moves[index]))
            raise
        finally:
            for move, result in skipped:
                self._stopped[move.exchange] = (move, result)
        return chosen

    def _ahead(self, index, pending, slots, units, budget, wave):
        """The move, the rest of its exchange, and the next moves that may
        fill the round's other slots: what one read of the cloud covers.
        wave: (the round's wave, how many of its moves are pending after
        this one)."""
        wave, left = wave
        taken = {index} | set(pending.mates(index))
        ahead = [pending.moves[i] for i in [index] + pending.mates(index)]
        for other in pending.after(index):
            if len(ahead) >= slots or (self.options.waves and not left):
                break
            move = pending.moves[other]
            if move.wave == wave:
                left -= 1
            if other not in taken and (
                    _unit(move) in units or len(units) < budget) and (
                    not self.options.waves or move.wave == wave):
                ahead.append(move)
        return ahead

    def _record(self, results, result, later=False):
        """results[move] = result, with the server's name as the cloud
        names it. A stopped exchange is remembered (at the end of the
        round, when later)."""
        result.server = self._server(result.move)
        results[result.move] = result
        if result.move.exchange and result.status not in (DONE, DRY_RUN) \
                and not later:
            self._stopped[result.move.exchange] = (result.move, result)
        return result

    def _server(self, move):
        """The server's name in the state read for its move, else in the
        last state read; None when the cloud does not know it."""
        if move.server_id in self._names:
            return self._names[move.server_id]
        return _name_in(self._seen, move) if self._seen else None

    def _label(self, move):
        return '%s %s -> %s' % (self._server(move) or move.server_id,
                                move.source, move.destination)

    def _fields(self, move):
        """A move's fields in the journal: the server as the cloud names
        it, and as the plan does when that differs."""
        fields = {'server_id': move.server_id, 'server': self._server(move),
                  'source': move.source, 'destination': move.destination}
        if move.server_name and move.server_name != fields['server']:
            fields['plan_server'] = move.server_name
        return fields

    def _start(self, move, target, results, running, total):
        """Ask Nova to migrate the server to the compute host: the move is
        running then, or failed if Nova refused. False when the journal
        could not say so first: nothing asked, no result. target: (compute
        host, Estimate or None); the move is waited for as long as its
        estimate says, within the timeout (core/load/duration.py)."""
        host, estimate = target
        wait = duration.wait_for(estimate, self.options.timeout)
        since = self.wall()
        number = len(results) + len(running) + 1
        sized = {} if estimate is None else {
            'estimate_seconds': round(estimate.seconds, 1),
            'wait_seconds': round(wait, 1)}
        if not self._log('migrate', destination_host=host, **sized,
                         **self._fields(move)):
            return False
        self._asking = move
        try:
            if self._cold(move):
                self.actions.cold_migrate(move.server_id, host)
            else:
                self.actions.live_migrate(move.server_id, host)
        except ActionError as exc:
            self._asking = None
            self._record(results, Result(move, FAILED, str(exc), 0.0))
            self._log('failed', reason=str(exc), **self._fields(move))
            self.progress('[%d/%d] %s: failed, %s' % (
                number, total, self._label(move), exc))
            return True
        running[move] = _Watch(number, host, since, self.clock(), wait)
        self._asking = None
        self.progress('[%d/%d] %s: migrating%s' % (
            number, total, self._label(move), '' if estimate is None else
            ' (%s expected, waits up to %.0f s)' % (estimate.text(), wait)))
        return True

    def _settle(self, running, results, total):
        """Poll the running moves once; the ones that ended."""
        ended = []
        for move, watch in list(running.items()):
            result = self._outcome(move, watch)
            if result is None:
                self._show_memory(move, watch, total)
                continue
            del running[move]
            ended.append(move)
            self._record(results, result)
            self._log(result.status, reason=result.reason,
                      duration=round(result.duration, 1),
                      migration_id=result.migration_id,
                      **self._fields(move), **_memory_fields(watch.memory))
            self.progress('[%d/%d] %s: %s in %.0f s%s' % (
                watch.number, total, self._label(move), result.status,
                result.duration, ', ' + result.reason
                if result.status != DONE else ''))
        return ended

    def _show_memory(self, move, watch, total):
        """A progress line with Nova's memory figures of a running move,
        when they changed, at most once in PROGRESS_EVERY seconds."""
        if watch.memory is None or watch.memory == watch.shown:
            return
        now = self.clock()
        if watch.shown_at is not None and \
                now - watch.shown_at < PROGRESS_EVERY:
            return
        watch.shown, watch.shown_at = watch.memory, now
        self.progress('[%d/%d] %s: %s' % (watch.number, total,
                                          self._label(move),
                                          _memory_text(watch.memory)))

    def _cold(self, move):
        return self.methods.get(move.server_id) == policy.COLD

    def _outcome(self, move, watch):
        """The move's Result once Nova has settled it, else None."""
        elapsed = self.clock() - watch.started
        try:
            server = self.actions.server(move.server_id)
            migration = self.actions.migration(move.server_id, watch.since,
                                               cold=self._cold(move))
            if migration is not None and migration.memory is not None:
                watch.memory = migration.memory
            if (self._cold(move) and server is not None
                    and server.status == 'VERIFY_RESIZE'
                    and not watch.confirmed):
                # A cold migration waits for a confirmation; we asked for
                # this one, and confirm it once it is on the destination.
                if _landed(server, move, watch):
                    self.actions.confirm(move.server_id)
                    watch.confirmed = True
                return None
        except ActionError as exc:
            if elapsed < watch.wait:
                return None  # a blip reading Nova; the timeout still holds
            return Result(move, TIMED_OUT, 'cannot read Nova: %s' % exc,
                          elapsed)
        mig_id = migration.id if migration else ''
        mig_status = (migration.status if migration else '').lower()
        if server is None:
            return Result(move, FAILED, 'the server was deleted during its '
                          'migration', elapsed, mig_id)
        settled = server.task_state is None
        if watch.confirmed and server.status == 'VERIFY_RESIZE':
            # Nova saves the migration as confirmed a moment before the
            # server leaves VERIFY_RESIZE (compute manager _confirm_resize).
            settled = False
        if settled and mig_status in model.MOVED_STATUSES:
            if (_landed(server, move, watch)
                    and server.status in model.LIVE_MIGRATABLE_STATUSES
                    + model.STOPPED_STATUSES):
                return Result(move, DONE, 'verified on %s' % server.hypervisor,
                              elapsed, mig_id)
            return Result(move, FAILED, 'Nova says %s, but the server is %s '
                          'on %s (host %s)' % (
                              mig_status, server.status, server.hypervisor,
                              server.host), elapsed, mig_id)
        if settled and mig_status in model.FAILED_STATUSES + \
                model.CANCELLED_STATUSES:
            status = ABORTED if watch.aborted and \
                mig_status in model.CANCELLED_STATUSES else FAILED
            return Result(move, status, 'migration %s; the server is %s on '
                          '%s' % (mig_status, server.status,
                                  server.hypervisor), elapsed, mig_id)
        if watch.aborted:
            if elapsed >= watch.wait + ABORT_GRACE:
                return Result(move, TIMED_OUT, 'aborted after %.0f s, but '
                              'Nova still reports %s' % (
                                  watch.wait, mig_status or 'no migration'),
                              elapsed, mig_id)
            return None
        if elapsed < watch.wait:
            return None
        return self._abort(move, watch, migration, elapsed)

    def _abort(self, move, watch, migration, elapsed):
        """Ask Nova to abort a migration past its timeout: None while Nova
        rolls it back, a TIMED_OUT Result when it cannot be aborted."""
        watch.aborted = True
        mig_id = migration.id if migration else ''
        status = (migration.status if migration else '').lower()
        if migration is None or status not in model.ABORTABLE_STATUSES:
            return Result(move, TIMED_OUT, 'no result after %.0f s and the '
                          'migration cannot be aborted (status %s)' % (
                              elapsed, status or 'unknown'),
                          elapsed, mig_id)
        self._log('abort', migration_id=mig_id, **self._fields(move))
        try:
            self.actions.abort(move.server_id, migration.id)
        except ActionError as exc:
            return Result(move, TIMED_OUT, 'no result after %.0f s; abort '
                          'refused: %s' % (elapsed, exc), elapsed, mig_id)
        return None


class _View:
    """The cloud as one round's checks see it.

    Given a snapshot just read, every move is checked against it. Else each
    move is checked against the cloud read again for it and for the moves
    chosen before it in the round (actions.snapshot(moves): only what they
    touch), with those chosen moves applied to the state. Checked on the
    load the kind of plan is made on (core/planning/context.py).
    """

    def __init__(self, snapshot=None, load=context.PLANNED):
        self.whole = snapshot is not None
        self.snapshot = snapshot
        self.load = load
        self.state = self.rules = None
        self.covers = set()

    def read(self, actions, around, chosen, planner_options):
        """(snapshot, state, rules) fresh for the moves around() returns
        (asked only when the cloud is read for them), with the chosen
        moves applied."""
        if self.state is not None and self.whole:
            return self.snapshot, self.state, self.rules
        if not self.whole:
            around = around()
            if self.state is not None and \
                    {id(m) for m in around} <= self.covers:
                return self.snapshot, self.state, self.rules
            self.snapshot = actions.snapshot(moves=around)
            self.covers = {id(m) for m in around}
        # N+1 is kept in this state, if asked.
        checking = context.Context(self.snapshot, planner_options, self.load)
        self.rules, self.state = checking.rules, checking.state
        for move in chosen:
            self.state.apply(move.server_id, move.destination)
        return self.snapshot, self.state, self.rules


def _landed(server, move, watch):
    """On the compute host Nova was asked for, and on its hypervisor."""
    return server.host == watch.host and server.hypervisor == move.destination


@dataclasses.dataclass
class _Watch:
    number: int
    host: str  # the compute host Nova was asked to migrate to
    since: float  # wall-clock time the migration was requested
    started: float  # monotonic
    wait: float  # seconds before it is aborted
    aborted: bool = False
    confirmed: bool = False
    memory: tuple = None  # the last MigrationView.memory Nova showed
    shown: tuple = None  # the figures last put on a progress line
    shown_at: float = None  # and when (monotonic)


def _mib(value):
    return value / MIB


def _memory_text(memory):
    """'96 of 128 MiB sent, 31 MiB remaining', of what Nova shows."""
    total, processed, remaining = memory
    parts = []
    if processed is not None:
        parts.append('%.0f%s MiB sent' % (
            _mib(processed), '' if total is None else ' of %.0f' % _mib(total)))
    elif total is not None:
        parts.append('%.0f MiB to send' % _mib(total))
    if remaining is not None:
        parts.append('%.0f MiB remaining' % _mib(remaining))
    return ', '.join(parts)


def _memory_fields(memory):
    """The journal's memory_*_mb fields of the last figures seen."""
    if memory is None:
        return {}
    return {'memory_%s_mb' % name: None if value is None
            else round(_mib(value), 1)
            for name, value in zip(('total', 'processed', 'remaining'),
                                   memory)}


def in_flight(snapshot, options):
    """Live migrations Nova is running that touch the hypervisors in scope."""
    found = []
    for mig in snapshot.migrations:
        if not mig.in_progress:
            continue
        hosts = [snapshot.find_hypervisor(h) for h in (mig.source_compute,
                                                       mig.dest_compute)]
        if any(h is not None and filters.in_scope(h, options)
               for h in hosts) or not any(hosts):
            found.append(mig)
    return found


def _unit(move):
    return move.exchange or id(move)


def _name_in(snapshot, move):
    server = snapshot.server(move.server_id)
    return server.name if server is not None else None
