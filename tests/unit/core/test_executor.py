"""The executor against a small simulated Nova (no network, fake clock)."""

import copy
import dataclasses
import time
import unittest

from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import planner
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b
from tests.unit.core import test_n_plus_one

NOW = snapshot_io.parse_time(b.TAKEN_AT)


class FakeNova:
    """Live migrations that take `polls` looks to finish, or misbehave.

    It answers like Nova at the microversions cloud/actions.py uses: a
    migration goes to a compute service HOST (hypervisors here have other
    names than their hosts, as on real clouds) and an unknown host is
    refused at the call; anything else is accepted (HTTP 202) and settles
    later. Migration records name source and destination by host, carry
    created and updated times, and migration() filters them by type and
    time as GET /os-migrations does.

    behaviour[destination hypervisor] is one of: ok, refuse (the
    destination's pre-checks fail after the 2.34 answer: migration error,
    server ACTIVE on its source), fail (the transfer fails and Nova rolls
    back: migration failed, server ACTIVE on its source), slow (takes five
    times longer), hang (never ends; an abort cancels it), stuck (never
    ends, cannot be aborted), vanish (the server is deleted while it
    migrates), lie (the migration says completed but the server stayed on
    its source).
    """

    def __init__(self, hyps, servers, migrations=(), polls=2,
                 wall=time.time):
        self.hyps = copy.deepcopy(hyps)
        self.servers = {s['id']: copy.deepcopy(s) for s in servers}
        self.migrations = [dict(m) for m in migrations]
        self.polls = polls
        self.wall = wall  # the time migration records are stamped with
        self.behaviour = {}
        self.running = {}  # server id -> [migration, polls left, hypervisor]
        self.calls = []
        self.started = []  # (server id, ids already migrating)
        self.confirming = {}  # server id -> polls until it is SHUTOFF
        self.peak = 0
        self.peak_per_host = 0
        self.snapshots = 0
        self.around = []  # the moves each read was asked for (None: all)
        # (total, processed, remaining) bytes a running live migration
        # shows at its first, second... poll (the last one after that), as
        # Nova 2.80 reports libvirt's memory copy; none: null figures
        self.figures = []

    def snapshot(self, moves=None):
        """The whole cloud, even when asked for what some moves touch."""
        self.snapshots += 1
        self.around.append(moves)
        return b.snapshot(self.hyps, list(self.servers.values()),
                          migrations=self.migrations)

    def unreadable_after(self, reads):
        """Every read after the first `reads` fails, as in a Placement
        outage; the moves each read was asked for, as they come."""
        real, asked = self.snapshot, []

        def flaky(moves=None):
            asked.append(moves)
            if len(asked) > reads:
                raise executor.ActionError('Placement answered HTTP 503')
            return real(moves)
        self.snapshot = flaky
        return asked

    def host_of(self, hypervisor):
        return next(h['host'] for h in self.hyps if h['name'] == hypervisor)

    def live_migrate(self, server_id, host, kind='live-migration'):
        self.calls.append(('live_migrate', server_id, host))
        nodes = [h['name'] for h in self.hyps if h['host'] == host]
        if not nodes:  # nova/compute/api.py: ComputeHostNotFound, HTTP 400
            raise executor.ActionError(
                'Nova refused the live migration: Compute host %s could not '
                'be found.' % host)
        server = self.servers[server_id]
        now = snapshot_io.format_time(self.wall())
        migration = {'id': str(len(self.migrations) + 1),
                     'server_id': server_id, 'status': 'queued',
                     'migration_type': kind,
                     'source_compute': self.host_of(server['hypervisor']),
                     'dest_compute': host, 'created_at': now,
                     'updated_at': now}
        self.migrations.append(migration)
        server['task_state'] = 'migrating'
        self.started.append((server_id, sorted(self.running)))
        self.running[server_id] = [migration, self.polls * (
            5 if self.behaviour.get(nodes[0]) == 'slow' else 1), nodes[0]]
        self.peak = max(self.peak, len(self.running))
        for role in ('source_compute', 'dest_compute'):
            hosts = [r[0][role] for r in self.running.values()]
            self.peak_per_host = max(self.peak_per_host, max(
                hosts.count(h) for h in hosts))

    def set_service(self, host, enabled, reason=None):
        self.calls.append(('set_service', host, enabled, reason))
        hyp = next(h for h in self.hyps if h['host'] == host)
        hyp['service'] = dict(hyp['service'], status='enabled' if enabled
                              else 'disabled',
                              disabled_reason='' if enabled else reason)

    def cold_migrate(self, server_id, host):
        self.live_migrate(server_id, host, kind='migration')

    def confirm(self, server_id):
        self.calls.append(('confirm', server_id))
        server = self.servers[server_id]
        assert server['status'] == 'VERIFY_RESIZE'
        # Like Nova: the migration says confirmed first, the server leaves
        # VERIFY_RESIZE a poll later.
        self.confirming[server_id] = self.polls
        migration = [m for m in self.migrations
                     if m['server_id'] == server_id][-1]
        self._set(migration, 'confirmed')

    def _set(self, migration, status):
        migration['status'] = status
        migration['updated_at'] = snapshot_io.format_time(self.wall())

    def _tick(self, server_id):
        entry = self.running.get(server_id)
        if entry is None:
            return
        migration, left, node = entry
        behaviour = self.behaviour.get(node, 'ok')
        server = self.servers.get(server_id)
        if behaviour == 'refuse':
            # The conductor's pre-checks fail: the server never left.
            del self.running[server_id]
            server['task_state'] = None
            self._set(migration, 'error')
            return
        if migration['status'] == 'queued':
            self._set(migration, 'running')
        if self.figures and migration['status'] == 'running':
            polls = migration['polls'] = migration.get('polls', -1) + 1
            migration['memory'] = self.figures[min(polls,
                                                   len(self.figures) - 1)]
        if behaviour in ('hang', 'stuck') and migration['status'] == 'running':
            return
        if left > 1 and migration['status'] == 'running':
            entry[1] -= 1
            return
        del self.running[server_id]
        if behaviour == 'vanish':
            del self.servers[server_id]
            return
        server['task_state'] = None
        if migration['status'] == 'cancelling':
            self._set(migration, 'cancelled')
        elif behaviour == 'fail':
            self._set(migration, 'failed')  # _rollback_live_migration
        elif migration['migration_type'] == 'migration':
            self._set(migration, 'finished')  # until confirmed
            server['status'] = 'VERIFY_RESIZE'
            server['hypervisor'] = node
        else:
            self._set(migration, 'completed')
            if behaviour != 'lie':
                server['hypervisor'] = node

    def server(self, server_id):
        self._tick(server_id)
        server = self.servers.get(server_id)
        if server is None:
            return None
        if server_id in self.confirming:
            self.confirming[server_id] -= 1
            if self.confirming[server_id] < 0:
                del self.confirming[server_id]
                server['status'] = 'SHUTOFF'
        return executor.ServerView(
            status=server['status'], task_state=server.get('task_state'),
            host=self.host_of(server['hypervisor']),
            hypervisor=server['hypervisor'])

    def migration(self, server_id, since, cold=False):
        """Like GET /os-migrations?instance_uuid&migration_type&
        changes-since (which compares updated_at), newest first."""
        kind = 'migration' if cold else 'live-migration'
        found = [m for m in self.migrations if m['server_id'] == server_id
                 and m['migration_type'] == kind and snapshot_io.parse_time(
                     m.get('updated_at') or m['created_at']) >= since - 5]
        if not found:
            return None
        total, processed, remaining = found[-1].get('memory', (None,) * 3)
        return executor.MigrationView(
            id=found[-1]['id'], status=found[-1]['status'],
            memory_total=total, memory_processed=processed,
            memory_remaining=remaining)

    def abort(self, server_id, migration_id):
        self.calls.append(('abort', server_id, migration_id))
        migration = self.running[server_id][0]
        if self.behaviour.get(self.running[server_id][2]) == 'stuck':
            raise executor.ActionError('abort is not possible now')
        self._set(migration, 'cancelling')
        self.running[server_id][1] = 1
        self.behaviour[self.running[server_id][2]] = 'ok'


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def hot_cloud(hosts=4, hot=8):
    hyps = [b.hypervisor('hv%d' % i) for i in range(1, hosts + 1)]
    servers = [b.server('web%d' % i, 'hv1', vcpus=4, ram_gb=12)
               for i in range(hot)]
    return hyps, servers


class ExecutorTest(unittest.TestCase):
    def setUp(self):
        self.hyps, self.servers = hot_cloud()
        self.nova = FakeNova(self.hyps, self.servers)
        self.planner_options = opts.PlannerOptions(now=NOW)
        self.plan = planner.make_plan(self.nova.snapshot(),
                                      self.planner_options)
        self.assertGreaterEqual(len(self.plan.moves), 3)
        self.journal = []
        self.progress = []

    def run_plan(self, moves=None, **options):
        clock = Clock()
        self.nova.wall = lambda: NOW + clock.now
        self.executor = executor.Executor(
            self.nova, self.planner_options,
            executor.ApplyOptions(**dict({'poll_interval': 1.0}, **options)),
            journal=lambda event, **f: self.journal.append((event, f)),
            progress=self.progress.append, clock=clock, sleep=clock.sleep,
            wall=lambda: NOW + clock.now)
        self.clock = clock
        self.run = self.executor.run(self.plan.moves if moves is None
                                     else moves)
        return self.run.results

    def statuses(self, results):
        return [r.status for r in results]

    def events(self, name):
        return [f for e, f in self.journal if e == name]


class TestSuccess(ExecutorTest):
    def test_every_move_done_and_verified(self):
        results = self.run_plan()
        self.assertEqual([executor.DONE] * len(self.plan.moves),
                         self.statuses(results))
        for result in results:
            self.assertEqual(result.move.destination,
                             self.nova.servers[result.move.server_id][
                                 'hypervisor'])
            self.assertIn('verified on', result.reason)
            self.assertGreater(result.duration, 0)
        self.assertEqual(len(self.plan.moves), len(self.events('done')))
        self.assertIn('migrating', self.progress[0])
        self.assertRegex(self.progress[-1], r'^\[\d+/\d+\] .* -> .*: done in')

    def test_limits_per_host_and_in_all(self):
        self.run_plan(max_parallel=2)
        self.assertLessEqual(self.nova.peak, 2)
        self.assertEqual(1, self.nova.peak_per_host)

    def test_moves_of_one_wave_run_together(self):
        self.hyps = [b.hypervisor('hv%d' % i) for i in range(1, 5)]
        self.servers = [b.server('web%d-%d' % (h, i), 'hv%d' % h, vcpus=4,
                                 ram_gb=12) for h in (1, 2) for i in range(8)]
        for parallel in (1, 2):
            self.nova = FakeNova(self.hyps, self.servers)
            self.plan = planner.make_plan(self.nova.snapshot(),
                                          self.planner_options)
            results = self.run_plan(max_parallel=parallel)
            self.assertEqual({executor.DONE}, set(self.statuses(results)))
            self.assertEqual(parallel, self.nova.peak)
            self.assertEqual(1, self.nova.peak_per_host)

    def test_a_free_slot_starts_the_next_move(self):
        # Three moves out of one host (a drain), two at a time: the third
        # starts when the quick one ends, not after the slow one.
        moves = [dataclasses.replace(m, wave=1) for m in self.plan.moves[:3]]
        reads = self.nova.snapshots
        self.nova.behaviour[moves[0].destination] = 'slow'
        results = self.run_plan(moves, max_parallel=2, per_source=3)
        self.assertEqual([executor.DONE] * 3, self.statuses(results))
        self.assertEqual((moves[2].server_id, [moves[0].server_id]),
                         self.nova.started[2])
        self.assertEqual(2, self.nova.peak)
        self.assertEqual(2, self.nova.snapshots - reads)  # one per start

    def test_without_waves_a_free_destination_does_not_wait(self):
        # A drain: hv2 takes two servers (waves 1 and 2), hv3 one. While
        # the slow move into hv3 runs, hv2's second move follows its first.
        moves = [dataclasses.replace(m, wave=w) for m, w in zip(
            self.plan.moves[:2], (1, 1))]
        moves.append(dataclasses.replace(
            self.plan.moves[3], destination=moves[0].destination,
            destination_host=moves[0].destination_host, wave=2))
        for waves, before in ((True, []), (False, [moves[1].server_id])):
            self.nova = FakeNova(self.hyps, self.servers)
            self.nova.behaviour[moves[1].destination] = 'slow'
            results = self.run_plan(moves, max_parallel=2, per_source=3,
                                    waves=waves)
            self.assertEqual([executor.DONE] * 3, self.statuses(results))
            self.assertEqual((moves[2].server_id, before),
                             self.nova.started[2], waves)

    def test_no_wait_starts_the_first_moves_and_returns(self):
        moves = [dataclasses.replace(m, wave=1) for m in self.plan.moves[:3]]
        results = self.run_plan(moves, max_parallel=2, per_source=3,
                                wait=False)
        self.assertEqual([executor.STARTED, executor.STARTED,
                          executor.NOT_STARTED], self.statuses(results))
        self.assertIn('run again', results[2].reason)
        self.assertEqual(0, self.clock.now)  # never polled
        self.assertEqual(2, len(self.nova.running))
        self.assertEqual(2, len(self.events('started')))

    def test_cold_migration_is_confirmed(self):
        move = self.plan.moves[0]
        self.nova.servers[move.server_id]['status'] = 'SHUTOFF'
        clock = Clock()
        self.nova.wall = lambda: NOW + clock.now
        runner = executor.Executor(
            self.nova, self.planner_options,
            executor.ApplyOptions(poll_interval=1.0),
            clock=clock, sleep=clock.sleep, wall=lambda: NOW + clock.now,
            kind=dataclasses.replace(kinds.DRAIN_COLD,
                                     recheck=lambda moves: lambda *a: None))
        results = runner.run([move]).results
        self.assertEqual(executor.DONE, results[0].status, results[0].reason)
        self.assertEqual(['migration'], [m['migration_type']
                                         for m in self.nova.migrations])
        self.assertIn(('confirm', move.server_id), self.nova.calls)
        self.assertEqual('SHUTOFF', self.nova.servers[move.server_id]['status'])
        self.assertEqual(move.destination,
                         self.nova.servers[move.server_id]['hypervisor'])

    def test_the_method_is_what_the_server_is_as_its_move_starts(self):
        # A kind that migrates stopped servers cold moves a running one
        # live (a cold migration would stop it), and one that does not
        # moves every server live.
        move = self.plan.moves[0]
        for kind, status, method in (
                (kinds.DRAIN_COLD, 'ACTIVE', 'live-migration'),
                (kinds.FREE_HOSTS_COLD, 'SHUTOFF', 'migration'),
                (kinds.BALANCE, 'ACTIVE', 'live-migration')):
            self.setUp()
            move = self.plan.moves[0]
            self.nova.servers[move.server_id]['status'] = status
            clock = Clock()
            self.nova.wall = lambda: NOW + clock.now
            runner = executor.Executor(
                self.nova, self.planner_options,
                executor.ApplyOptions(poll_interval=1.0), clock=clock,
                sleep=clock.sleep, wall=lambda: NOW + clock.now,
                kind=dataclasses.replace(
                    kind, recheck=lambda moves: lambda *a: None))
            result, = runner.run([move]).results
            self.assertEqual(executor.DONE, result.status, result.reason)
            self.assertEqual([method], [m['migration_type']
                                        for m in self.nova.migrations])

    def test_batch_starts_at_most_n(self):
        results = self.run_plan(batch=1)
        self.assertEqual(executor.DONE, results[0].status)
        self.assertEqual({executor.NOT_STARTED},
                         set(self.statuses(results[1:])))
        self.assertIn('batch limit of 1', results[1].reason)
        self.assertEqual(1, len([c for c in self.nova.calls
                                 if c[0] == 'live_migrate']))

    def test_dry_run_changes_nothing(self):
        before = copy.deepcopy(self.nova.servers)
        results = self.run_plan(dry_run=True)
        self.assertEqual({executor.DRY_RUN}, set(self.statuses(results)))
        self.assertEqual([], self.nova.calls)
        self.assertEqual(before, self.nova.servers)


class TestFailures(ExecutorTest):
    def first_destination(self, behaviour):
        self.nova.behaviour[self.plan.moves[0].destination] = behaviour
        return self.plan.moves[0]

    def test_failed_migration_leaves_the_server_on_its_source(self):
        move = self.first_destination('fail')
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.FAILED, results[0].status)
        self.assertIn('migration failed; the server is ACTIVE on %s'
                      % move.source, results[0].reason)
        self.assertEqual(move.source,
                         self.nova.servers[move.server_id]['hypervisor'])
        self.assertEqual({executor.NOT_STARTED},
                         set(self.statuses(results[1:])))
        self.assertIn('an earlier move failed', results[1].reason)
        self.assertEqual(1, len(self.events('failed')))

    def test_continue_on_error(self):
        self.first_destination('fail')
        results = self.run_plan(max_parallel=1, stop_on_error=False)
        self.assertEqual(executor.FAILED, results[0].status)
        self.assertIn(executor.DONE, self.statuses(results[1:]))

    def test_refused_by_nova_after_it_answered(self):
        move = self.first_destination('refuse')
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.FAILED, results[0].status)
        self.assertIn('migration error; the server is ACTIVE on %s'
                      % move.source, results[0].reason)
        self.assertIn('an earlier move failed', results[1].reason)

    def test_an_unknown_host_is_refused_at_the_call(self):
        # The destination's compute host was renamed since the read.
        move = self.plan.moves[0]
        real = self.nova.live_migrate

        def renamed(server_id, host):
            return real(server_id, host + '.renamed')
        self.nova.live_migrate = renamed
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.FAILED, results[0].status)
        self.assertIn('Compute host %s.renamed could not be found'
                      % b.compute_host(move.destination), results[0].reason)
        self.assertEqual(0.0, results[0].duration)

    def test_completed_but_still_on_the_source_is_a_failure(self):
        self.first_destination('lie')
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.FAILED, results[0].status)
        self.assertIn('Nova says completed, but the server is ACTIVE on',
                      results[0].reason)

    def test_timeout_aborts(self):
        move = self.first_destination('hang')
        results = self.run_plan(max_parallel=1, timeout=30)
        self.assertEqual(executor.ABORTED, results[0].status)
        self.assertIn('migration cancelled', results[0].reason)
        self.assertIn(('abort', move.server_id, '1'), self.nova.calls)
        self.assertGreaterEqual(results[0].duration, 30)
        self.assertEqual(move.source,
                         self.nova.servers[move.server_id]['hypervisor'])

    def test_timeout_when_abort_is_refused(self):
        self.first_destination('stuck')
        results = self.run_plan(max_parallel=1, timeout=30)
        self.assertEqual(executor.TIMED_OUT, results[0].status)
        self.assertIn('abort refused: abort is not possible now',
                      results[0].reason)

    def test_server_deleted_during_its_migration(self):
        self.first_destination('vanish')
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.FAILED, results[0].status)
        self.assertIn('deleted during its migration', results[0].reason)

    def test_cloud_unreadable_between_rounds(self):
        self.nova.unreadable_after(1)
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.DONE, results[0].status)
        self.assertEqual(executor.NOT_STARTED, results[1].status)
        self.assertIn('cannot read the cloud: Placement answered HTTP 503',
                      results[1].reason)
        self.assertIn('HTTP 503', self.run.error)

    def test_cloud_unreadable_in_the_middle_of_a_round(self):
        # The first move is chosen; the read for the last one fails. The
        # round starts nothing: every move is left not started, and why.
        moves = [dataclasses.replace(m, wave=1) for m in self.plan.moves[:4]]
        first = moves[0]
        moves = [first] + [dataclasses.replace(
            m, destination=first.destination,
            destination_host=first.destination_host) for m in moves[1:3]] + [
            dataclasses.replace(moves[3], destination='hv3',
                                destination_host='cmp-hv3')]
        reads = self.nova.unreadable_after(1)
        results = self.run_plan(moves, max_parallel=3, per_source=3)
        self.assertEqual(2, len(reads))
        self.assertEqual([executor.NOT_STARTED] * 4, self.statuses(results))
        self.assertEqual({'cannot read the cloud: Placement answered HTTP '
                          '503'}, {r.reason for r in results})
        self.assertEqual([], self.nova.calls)
        self.assertEqual([m.server_id for m in moves], [
            f['server_id'] for f in self.events('not-started')])


MIB = 1024 * 1024


class TestMemoryProgress(ExecutorTest):
    """Nova's memory figures of a running live migration: on a progress
    line when they change, at most every PROGRESS_EVERY seconds, and the
    last ones kept in the move's final journal record."""

    def setUp(self):
        super().setUp()
        self.move = self.plan.moves[0]
        self.lines = []  # (clock, line) of every progress line

    def run_plan(self, moves=None, **options):
        self.progress = _Timed(self.lines, lambda: self.clock.now)
        return super().run_plan(moves, **options)

    def memory_lines(self):
        return [(t, line) for t, line in self.lines if 'MiB' in line]

    def test_lines_follow_the_figures_without_flooding(self):
        # 8 MiB more every poll for 12 polls, then a copy that stalls
        # (never converges) until the timeout aborts it.
        self.nova.figures = [(128 * MIB, 8 * MIB * i, 128 * MIB - 8 * MIB * i)
                             for i in range(1, 13)]
        self.nova.behaviour[self.move.destination] = 'hang'
        results = self.run_plan(moves=[self.move], timeout=30)
        self.assertEqual([executor.ABORTED], self.statuses(results))
        shown = self.memory_lines()
        times = [t for t, _ in shown]
        self.assertGreaterEqual(len(shown), 3, self.lines)
        self.assertTrue(all(b - a >= executor.PROGRESS_EVERY
                            for a, b in zip(times, times[1:])), shown)
        # The stalled figures were shown once, not at every later poll.
        self.assertEqual('[1/1] %s %s -> %s: 96 of 128 MiB sent, 32 MiB '
                         'remaining' % (self.move.server_name,
                                        self.move.source,
                                        self.move.destination),
                         shown[-1][1])
        self.assertLess(times[-1], 20)
        [aborted] = self.events('aborted')
        self.assertEqual((128.0, 96.0, 32.0), (
            aborted['memory_total_mb'], aborted['memory_processed_mb'],
            aborted['memory_remaining_mb']))

    def test_a_done_move_keeps_its_last_figures(self):
        self.nova.figures = [(512 * MIB, 100 * MIB, None),
                             (512 * MIB, 700 * MIB + MIB // 10, 0)]
        results = self.run_plan(moves=[self.move])
        self.assertEqual([executor.DONE], self.statuses(results))
        [done] = self.events('done')
        # processed counts pages sent again: past the total is honest
        self.assertEqual((512.0, 700.1, 0.0), (
            done['memory_total_mb'], done['memory_processed_mb'],
            done['memory_remaining_mb']))
        self.assertIn('100 of 512 MiB sent', self.memory_lines()[0][1])
        self.assertNotIn('remaining', self.memory_lines()[0][1])

    def test_no_figures_no_line_and_no_fields(self):
        results = self.run_plan(moves=[self.move])
        self.assertEqual([executor.DONE], self.statuses(results))
        self.assertEqual([], self.memory_lines())
        [done] = self.events('done')
        self.assertFalse([k for k in done if k.startswith('memory_')], done)


class _Timed(list):
    """A progress callback that keeps (clock, line) of each line."""

    def __init__(self, lines, clock):
        super().__init__()
        self.lines, self.clock = lines, clock

    def append(self, line):
        super().append(line)
        self.lines.append((self.clock(), line))


def quick_history():
    """web5..web7 (12 GiB) came to hv1 seven hours ago, in 15 s each."""
    migs = []
    for i in (5, 6, 7):
        start = NOW - 7 * 3600 + 60 * i
        migs.append({
            'id': 'old%d' % i, 'server_id': 'id-web%d' % i,
            'status': 'completed', 'migration_type': 'live-migration',
            'source_compute': b.compute_host('hv2'),
            'dest_compute': b.compute_host('hv1'),
            'created_at': snapshot_io.format_time(start),
            'updated_at': snapshot_io.format_time(start + 15)})
    return migs


class TestSizedWait(ExecutorTest):
    """Each move is waited for as long as Nova's history says it should
    take (core/load/duration.py), within the timeout."""

    def setUp(self):
        super().setUp()
        self.nova = FakeNova(self.hyps, self.servers, quick_history())
        self.assertNotIn(self.plan.moves[0].server_id,
                         [m['server_id'] for m in quick_history()])

    def test_a_move_is_aborted_when_its_estimate_is_long_past(self):
        self.nova.behaviour[self.plan.moves[0].destination] = 'hang'
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.ABORTED, results[0].status)
        # Not after the 900 s timeout: 15 s expected, waited for three
        # times that, at least 60 s.
        self.assertGreaterEqual(results[0].duration, 60)
        self.assertLess(results[0].duration, 70)
        started = self.events('migrate')[0]
        self.assertAlmostEqual(15, started['estimate_seconds'], delta=2)
        self.assertEqual(60, started['wait_seconds'])
        self.assertRegex(self.progress[0], r'migrating \(about 1\d s '
                         r'expected, waits up to 60 s\)$')

    def test_the_timeout_still_bounds_the_wait(self):
        self.nova.behaviour[self.plan.moves[0].destination] = 'hang'
        results = self.run_plan(max_parallel=1, timeout=30)
        self.assertEqual(executor.ABORTED, results[0].status)
        self.assertLess(results[0].duration, 40)
        self.assertEqual(30, self.events('migrate')[0]['wait_seconds'])

    def test_the_estimate_is_the_clouds_not_the_plan_files(self):
        # A plan file may say anything: apply sizes the wait from the
        # history it reads itself.
        moves = [dataclasses.replace(m, estimate=(1e6, 'a plan file'))
                 for m in self.plan.moves[:1]]
        self.run_plan(moves, max_parallel=1)
        started = self.events('migrate')[0]
        self.assertAlmostEqual(15, started['estimate_seconds'], delta=2)

    def test_without_a_history_the_timeout_is_the_wait(self):
        self.nova = FakeNova(self.hyps, self.servers)
        self.nova.behaviour[self.plan.moves[0].destination] = 'hang'
        results = self.run_plan(max_parallel=1, timeout=200)
        self.assertGreaterEqual(results[0].duration, 200)
        self.assertNotIn('estimate_seconds', self.events('migrate')[0])


class TestServerNames(ExecutorTest):
    """Results, progress and the journal name a server as the cloud read
    before its move names it."""

    def test_names_come_from_the_cloud(self):
        move = self.plan.moves[0]
        self.nova.servers[move.server_id]['name'] = 'renamed'
        results = self.run_plan()
        self.assertEqual(('renamed', move.server_name),
                         (results[0].server, results[0].plan_name))
        self.assertEqual(['', ''], [r.plan_name for r in results[1:3]])
        self.assertEqual([r.move.server_name for r in results[1:]],
                         [r.server for r in results[1:]])
        for event in ('migrate', 'done'):
            fields = self.events(event)[0]
            self.assertEqual(('renamed', move.server_name),
                             (fields['server'], fields['plan_server']))
            self.assertNotIn('plan_server', self.events(event)[1])
        self.assertIn('renamed %s -> %s: migrating' % (
            move.source, move.destination), self.progress[0])

    def test_a_move_never_read_is_named_from_the_last_read(self):
        move = self.plan.moves[-1]
        self.nova.servers[move.server_id]['name'] = 'renamed'
        results = self.run_plan(batch=1)
        self.assertEqual((executor.NOT_STARTED, 'renamed', move.server_name),
                         (results[-1].status, results[-1].server,
                          results[-1].plan_name))

    def test_a_server_the_cloud_does_not_know(self):
        move = dataclasses.replace(self.plan.moves[0], server_id='id-nosuch')
        results = self.run_plan([move])
        self.assertEqual((executor.SKIPPED, None, move.server_name),
                         (results[0].status, results[0].server,
                          results[0].plan_name))
        self.assertEqual((None, move.server_name), (
            self.events('skipped')[0]['server'],
            self.events('skipped')[0]['plan_server']))
        self.assertIn('id-nosuch %s -> ' % move.source, self.progress[0])


class TestWhatReachesNova(ExecutorTest):
    """Of a move, Nova sees the server and the destination hypervisor's
    compute host as the cloud names it now; nothing else of the plan."""

    def migrations_sent(self):
        return [(c[1], c[2]) for c in self.nova.calls
                if c[0] == 'live_migrate']

    def test_the_host_is_looked_up_not_read_from_the_move(self):
        hv4 = next(h for h in self.nova.hyps if h['name'] == 'hv4')
        moves = [dataclasses.replace(m, destination_host=hv4['host'])
                 for m in self.plan.moves]
        results = self.run_plan(moves)
        self.assertEqual({executor.DONE}, set(self.statuses(results)))
        self.assertEqual(
            [(m.server_id, b.compute_host(m.destination))
             for m in self.plan.moves], self.migrations_sent())
        self.assertEqual([b.compute_host(m.destination)
                          for m in self.plan.moves],
                         [e['destination_host'] for e in self.events(
                             'migrate')])

    def test_a_renamed_host_is_the_one_asked_for(self):
        move = self.plan.moves[0]
        hyp = next(h for h in self.nova.hyps if h['name'] == move.destination)
        hyp['host'] = 'renamed-host'
        results = self.run_plan(max_parallel=1)
        self.assertEqual(executor.DONE, results[0].status, results[0].reason)
        self.assertEqual((move.server_id, 'renamed-host'),
                         self.migrations_sent()[0])

    def test_landing_on_another_hypervisor_of_the_host_is_a_failure(self):
        # One compute host, two hypervisors (a node of Ironic or vCenter
        # style): completed on the host, but not on the planned hypervisor.
        move = self.plan.moves[0]
        dest = next(h for h in self.nova.hyps
                    if h['name'] == move.destination)
        other = next(h for h in self.nova.hyps if h['name'] not in (
            move.source, move.destination))
        other['host'] = dest['host']
        real = self.nova._tick

        def elsewhere(server_id):
            real(server_id)
            if server_id == move.server_id and \
                    self.nova.servers[server_id]['hypervisor'] == dest['name']:
                self.nova.servers[server_id]['hypervisor'] = other['name']
        self.nova._tick = elsewhere
        results = self.run_plan([move])
        self.assertEqual(executor.FAILED, results[0].status)
        self.assertIn('Nova says completed, but the server is ACTIVE on %s '
                      '(host %s)' % (other['name'], dest['host']),
                      results[0].reason)


class TestStaleMoves(ExecutorTest):
    def test_server_moved_by_hand(self):
        move = self.plan.moves[0]
        self.nova.servers[move.server_id]['hypervisor'] = 'hv4' \
            if move.destination != 'hv4' else 'hv3'
        results = self.run_plan()
        self.assertEqual(executor.SKIPPED, results[0].status)
        self.assertIn('not on the planned source hv1', results[0].reason)
        self.assertNotIn(move.server_id, [c[1] for c in self.nova.calls])

    def test_server_deleted_before_its_turn(self):
        del self.nova.servers[self.plan.moves[0].server_id]
        results = self.run_plan()
        self.assertEqual('the server no longer exists', results[0].reason)

    def test_destination_disabled(self):
        move = self.plan.moves[0]
        hyp = next(h for h in self.nova.hyps if h['name'] == move.destination)
        hyp['service'] = {'status': 'disabled', 'state': 'up',
                          'disabled_reason': 'maintenance'}
        results = self.run_plan()
        self.assertEqual(executor.SKIPPED, results[0].status)
        self.assertIn('%s: ' % move.destination, results[0].reason)
        self.assertIn('disabled', results[0].reason)

    def test_cooldown_from_nova_history(self):
        move = self.plan.moves[0]
        self.nova.migrations.append({
            'id': '99', 'server_id': move.server_id, 'status': 'completed',
            'migration_type': 'live-migration', 'source_compute': 'hv2',
            'dest_compute': 'hv1', 'created_at': '2026-11-20T11:00:00Z',
            'updated_at': '2026-11-20T11:00:00Z'})
        results = self.run_plan()
        self.assertEqual(executor.SKIPPED, results[0].status)
        self.assertIn('inside the 6 h cooldown', results[0].reason)

    def test_a_move_that_no_longer_helps(self):
        move = self.plan.moves[0]
        # The destination filled up with load since planning.
        for i in range(8):
            self.nova.servers['id-late%d' % i] = b.server(
                'late%d' % i, move.destination, vcpus=4, ram_gb=12)
        results = self.run_plan()
        self.assertEqual(executor.SKIPPED, results[0].status)
        self.assertIn('no longer evens out the load', results[0].reason)


class LastingNova(FakeNova):
    """Snapshots with prometheus.lasting figures: each hypervisor's
    metrics and each server's usage carry lasting ones, from lasting
    ({name: (now, lasting)} of cpu; RAM steady)."""

    def __init__(self, hyps, servers, lasting):
        super().__init__(hyps, servers)
        self.lasting = lasting

    def snapshot(self, moves=None):
        self.snapshots += 1
        self.around.append(moves)
        doc = b.document(self.hyps, list(self.servers.values()),
                         migrations=self.migrations)
        doc['lasting'] = '3h'
        threads = {h['name']: h['inventories']['VCPU']['total']
                   for h in doc['hypervisors']}
        load = dict.fromkeys(threads, [0.0, 0.0])
        for server in doc['servers']:
            now, then = self.lasting[server['name']]
            server['usage'] = {'cpu': now, 'ram': 0.5,
                               'lasting': {'cpu': then, 'ram': 0.5}}
            vcpus = server['flavor']['vcpus']
            here = load[server['hypervisor']]
            load[server['hypervisor']] = [here[0] + now * vcpus,
                                          here[1] + then * vcpus]
        for hyp in doc['hypervisors']:
            now, then = (min(1.0, x / threads[hyp['name']])
                         for x in load[hyp['name']])
            hyp['metrics'] = {'cpu': now, 'ram': 0.2, 'lasting': {
                'cpu': then, 'ram': 0.2}}
        return snapshot_io.parse(doc)


class TestLastingLoad(ExecutorTest):
    """With lasting figures, a move is checked on the load that lasted,
    the load it was planned on."""

    def setUp(self):
        hyps = [b.hypervisor('hv%d' % i, vcpus=16) for i in (1, 2, 3)]
        servers = [b.server('steady%d' % i, 'hv1', vcpus=4, ram_gb=8)
                   for i in range(3)]
        servers.append(b.server('burst', 'hv2', vcpus=16, ram_gb=8))
        lasting = {'steady%d' % i: (0.9, 0.9) for i in range(3)}
        lasting['burst'] = (0.1, 0.1)
        self.nova = LastingNova(hyps, servers, lasting)
        self.planner_options = opts.PlannerOptions(now=NOW)
        self.plan = planner.make_plan(self.nova.snapshot(),
                                      self.planner_options)
        self.journal, self.progress = [], []

    def burst_where_it_goes(self, lasted):
        """The first move, run with the burst server on its destination
        at 100 % of 16 threads now and lasted over the period."""
        first = self.plan.moves[0]
        self.assertEqual('hv1', first.source)
        self.nova.servers['id-burst']['hypervisor'] = first.destination
        self.nova.lasting['burst'] = (1.0, lasted)
        return self.run_plan(moves=[first])

    def test_a_burst_of_the_moment_does_not_stop_the_move(self):
        results = self.burst_where_it_goes(0.1)
        self.assertEqual([executor.DONE], self.statuses(results))

    def test_a_load_that_lasted_does(self):
        # 75 %: 12 of 16 threads, so the move would not saturate hv3.
        results = self.burst_where_it_goes(0.75)
        self.assertEqual([executor.SKIPPED], self.statuses(results))
        self.assertIn('no longer evens out the load', results[0].reason)


class TestExchanges(ExecutorTest):
    """Exchange 1: small0 hv2 -> hv3, park0 hv3 -> hv2. Exchange 2: big0
    parks on hv3, small1 hv2 -> hv1, big0 hv3 -> hv2."""

    def setUp(self):
        self.hyps, self.servers = b.exchange_hosts()
        self.nova = FakeNova(self.hyps, self.servers)
        self.planner_options = opts.PlannerOptions(now=NOW, ceiling=1.5)
        self.plan = planner.make_plan(self.nova.snapshot(),
                                      self.planner_options)
        self.assertEqual(['exchange 1'] * 2 + ['exchange 2'] * 3,
                         [m.exchange for m in self.plan.moves])
        self.journal = []
        self.progress = []

    def host(self, name):
        return self.nova.servers['id-' + name]['hypervisor']

    def test_the_batch_counts_an_exchange_once(self):
        results = self.run_plan(batch=1)
        self.assertEqual([executor.DONE] * 2 + [executor.NOT_STARTED] * 3,
                         self.statuses(results))
        self.assertIn('batch limit of 1', results[2].reason)
        self.assertEqual(('hv3', 'hv2'), (self.host('small0'),
                                          self.host('park0')))

    def test_a_parked_server_moves_on_inside_its_cooldown(self):
        results = self.run_plan(batch=2)
        self.assertEqual([executor.DONE] * 5, self.statuses(results),
                         [r.reason for r in results])
        # big0's parking migration is in Nova's history, minutes old.
        self.assertEqual(2, len([m for m in self.nova.migrations
                                 if m['server_id'] == 'id-big0']))
        self.assertEqual(('hv2', 'hv1'), (self.host('big0'),
                                          self.host('small1')))

    def test_the_rest_of_an_exchange_stops_with_a_failed_move(self):
        self.nova.behaviour['hv3'] = 'fail'  # each exchange's first move
        results = self.run_plan(stop_on_error=False, max_parallel=1)
        self.assertEqual([executor.FAILED, executor.SKIPPED] * 1
                         + [executor.FAILED, executor.SKIPPED,
                            executor.SKIPPED], self.statuses(results))
        self.assertIn('its exchange 1 stopped: small0 hv2 -> hv3 was '
                      'failed', results[1].reason)
        self.assertIn('its exchange 2 stopped: big0 hv1 -> hv3 was failed',
                      results[4].reason)
        # Nothing half done: every server is where it was.
        for server in self.servers:
            self.assertEqual(server['hypervisor'],
                             self.host(server['name']))

    def test_an_exchange_that_no_longer_helps_is_skipped_whole(self):
        # Since planning, park0 shrank and small0 grew: trading them now
        # would make hv3 hotter than either host is.
        self.nova.servers['id-park0']['flavor']['vcpus'] = 2
        self.nova.servers['id-small0']['flavor']['vcpus'] = 24
        results = self.run_plan()
        self.assertEqual(executor.SKIPPED, results[0].status)
        self.assertIn('the exchange no longer evens out the load',
                      results[0].reason)
        self.assertIn('its exchange 1 stopped', results[1].reason)
        self.assertEqual('hv2', self.host('small0'))

    def test_an_exchange_whose_partner_is_gone_is_skipped(self):
        # park0 was deleted since the plan: trading places with it cannot
        # even out anything.
        del self.nova.servers['id-park0']
        results = self.run_plan(dry_run=True)
        self.assertEqual([executor.SKIPPED] * 2 + [executor.DRY_RUN] * 3,
                         self.statuses(results))
        self.assertEqual("its exchange's server id-park0 no longer exists",
                         results[0].reason)
        self.assertEqual('its exchange 1 stopped: small0 hv2 -> hv3 was '
                         'skipped', results[1].reason)

    def test_an_exchange_whose_later_host_is_gone_is_skipped(self):
        # The last move of exchange 2 names a hypervisor the cloud no
        # longer has (gone since the plan, or a plan file edited): the
        # exchange cannot be checked as a whole, so none of it starts.
        for index in (3, 4):  # where small1 goes, or where big0 ends
            moves = list(self.plan.moves)
            moves[index] = dataclasses.replace(moves[index],
                                               destination='hv9')
            with self.subTest(index):
                results = self.run_plan(moves=moves, dry_run=True)
                self.assertEqual(
                    [executor.DRY_RUN] * 2 + [executor.SKIPPED] * 3,
                    self.statuses(results))
                self.assertEqual("its exchange's hypervisor hv9 is not in "
                                 "the cloud", results[2].reason)

    def test_dry_run_checks_each_exchange(self):
        results = self.run_plan(dry_run=True)
        self.assertEqual({executor.DRY_RUN}, set(self.statuses(results)))
        self.assertEqual([], self.nova.calls)


class TestInFlight(unittest.TestCase):
    def test_running_migrations_in_scope(self):
        hyps, servers = hot_cloud()
        running = {'id': '1', 'server_id': 'id-web0', 'status': 'running',
                   'migration_type': 'live-migration',
                   'source_compute': 'hv1', 'dest_compute': 'hv2',
                   'created_at': b.TAKEN_AT}
        done = dict(running, id='2', status='completed')
        snap = b.snapshot(hyps, servers, migrations=[running, done])
        options = opts.PlannerOptions()
        self.assertEqual(['1'], [m.id for m in executor.in_flight(
            snap, options)])
        outside = dataclasses.replace(options,
                                      exclude_hosts=frozenset({'hv1', 'hv2'}))
        self.assertEqual([], executor.in_flight(snap, outside))
        elsewhere = dataclasses.replace(
            options, availability_zones=frozenset({'az2'}))
        hyps.append(b.hypervisor('hv9', az='az2'))
        snap = b.snapshot(hyps, servers, migrations=[running, done])
        self.assertEqual([], executor.in_flight(snap, elsewhere))


class TestKeepNPlusOne(unittest.TestCase):
    """apply re-checks N+1 before each move when asked to keep it."""

    def run_plan(self, keep):
        hyps, servers = test_n_plus_one.tight_cloud()
        nova = FakeNova(hyps, servers)
        # Planned without the option: g fills hv2, where A would go.
        plan = planner.make_plan(nova.snapshot(), opts.PlannerOptions(
            now=NOW))
        self.assertEqual(['g'], [m.server_name for m in plan.moves])
        clock = Clock()
        nova.wall = lambda: NOW + clock.now
        runner = executor.Executor(
            nova, opts.PlannerOptions(now=NOW, keep_n_plus_one=keep),
            executor.ApplyOptions(poll_interval=1.0),
            journal=lambda event, **f: None, progress=lambda text: None,
            clock=clock, sleep=clock.sleep, wall=lambda: NOW + clock.now)
        return runner.run(plan.moves, snapshot=nova.snapshot()).results[0]

    def test_a_move_that_would_break_it_is_skipped(self):
        result = self.run_plan(keep=True)
        self.assertEqual(executor.SKIPPED, result.status)
        self.assertIn('hv2: would break N+1: losing hv1, 1 server fit '
                      'nowhere: A', result.reason)
        self.assertEqual(executor.DONE, self.run_plan(keep=False).status)


class Journal:
    """A journal that takes records until `fails(event, fields)` says no,
    then none (as runfiles.Journal does after a failed write)."""

    def __init__(self, fails):
        self.fails = fails
        self.records = []
        self.error = None

    def __call__(self, event, **fields):
        if self.error is None and self.fails(event, fields):
            self.error = 'cannot write the journal /j: No space left on device'
        if self.error is not None:
            raise executor.JournalError(self.error)
        self.records.append((event, fields))


class TestJournalFails(ExecutorTest):
    """A journal that cannot take a record stops the starts, not the run."""

    def run_with(self, journal, moves=None, **options):
        clock = Clock()
        self.nova.wall = lambda: NOW + clock.now
        runner = executor.Executor(
            self.nova, self.planner_options,
            executor.ApplyOptions(**dict({'poll_interval': 1.0}, **options)),
            journal=journal, clock=clock, sleep=clock.sleep,
            wall=lambda: NOW + clock.now)
        return runner.run(self.plan.moves if moves is None else moves)

    def migrations_asked(self):
        return [c[1] for c in self.nova.calls if c[0] == 'live_migrate']

    def test_after_a_start_the_run_waits_and_starts_nothing_more(self):
        # The second "migrate" record cannot be written: that move is not
        # asked for; the first, already running, is waited for.
        journal = Journal(lambda event, fields: event == 'migrate' and any(
            e == 'migrate' for e, _ in journal.records))
        run = self.run_with(journal, max_parallel=2, per_source=3)
        first = self.plan.moves[0]
        self.assertEqual([first.server_id], self.migrations_asked())
        self.assertEqual([executor.DONE] + [executor.NOT_STARTED] * (
            len(self.plan.moves) - 1), self.statuses(run.results))
        self.assertEqual(journal.error, run.error)
        self.assertEqual({journal.error},
                         {r.reason for r in run.results[1:]})
        self.assertEqual(1, len(run.requested))
        self.assertEqual(first.destination,
                         self.nova.servers[first.server_id]['hypervisor'])

    def test_running_moves_still_end_or_are_aborted_by_the_timeout(self):
        # Full while two moves run: one ends, the other hangs and is
        # aborted past --timeout, as it would be with a working journal.
        moves = [dataclasses.replace(m, wave=1) for m in self.plan.moves]
        self.nova.behaviour[moves[1].destination] = 'hang'
        journal = Journal(lambda event, fields: event == 'done')
        run = self.run_with(journal, moves, max_parallel=2, per_source=3,
                            timeout=30)
        self.assertEqual([executor.DONE, executor.ABORTED],
                         self.statuses(run.results[:2]))
        self.assertIn('abort', [c[0] for c in self.nova.calls])
        self.assertEqual({executor.NOT_STARTED},
                         set(self.statuses(run.results[2:])))
        self.assertEqual(2, len(self.migrations_asked()))
        self.assertEqual(journal.error, run.error)

    def test_before_any_migration_the_run_refuses_to_start(self):
        for fails in ('migrate', 'skipped', 'would-run'):
            self.nova = FakeNova(self.hyps, self.servers)
            moves = self.plan.moves
            if fails == 'skipped':  # the first move is stale already
                moved = moves[0].server_id
                self.nova.servers[moved]['hypervisor'] = moves[0].destination
            journal = Journal(lambda event, fields: event == fails)
            with self.assertRaises(executor.JournalError) as caught:
                self.run_with(journal, dry_run=fails == 'would-run')
            self.assertEqual(journal.error, str(caught.exception))
            self.assertEqual([], self.migrations_asked(), fails)

    def test_a_drain_going_on_after_failures_stops_too(self):
        journal = Journal(lambda event, fields: event == 'done')
        run = self.run_with(journal, max_parallel=1, per_source=3,
                            stop_on_error=False, waves=False)
        self.assertEqual([executor.DONE] + [executor.NOT_STARTED] * (
            len(self.plan.moves) - 1), self.statuses(run.results))


class TestInterrupted(ExecutorTest):
    """Ctrl-C or SIGTERM (a KeyboardInterrupt) mid-run: the executor keeps
    what each move came to, then lets it go on up."""

    def interrupt_on(self, name, after=0):
        real = getattr(self.nova, name)
        seen = []

        def call(*args, **kwargs):
            seen.append(1)
            if len(seen) > after:
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        setattr(self.nova, name, call)

    def test_while_a_migration_runs(self):
        self.interrupt_on('server')
        self.assertRaises(KeyboardInterrupt, self.run_plan, max_parallel=1)
        results = self.executor.interrupted.results
        self.assertEqual([executor.STARTED] + [executor.NOT_STARTED] * (
            len(self.plan.moves) - 1), self.statuses(results))
        self.assertEqual({'interrupted'}, {r.reason for r in results[1:]})
        self.assertEqual(1, len(self.events('started')))
        self.assertEqual(len(self.plan.moves) - 1,
                         len(self.events('not-started')))

    def test_while_nova_is_asked(self):
        # Nova may have taken the request: the move counts as started.
        self.interrupt_on('live_migrate', after=1)
        self.assertRaises(KeyboardInterrupt, self.run_plan, max_parallel=1)
        results = self.executor.interrupted.results
        self.assertEqual([executor.DONE, executor.STARTED],
                         self.statuses(results[:2]))
        self.assertIn('interrupted while Nova was asked', results[1].reason)
        self.assertEqual(2, len(self.executor.interrupted.requested))
