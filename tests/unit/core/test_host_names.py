"""A hypervisor or compute host is named exactly: hv1 is never hv10.

Most fixtures number hypervisors hv01, hv02 (or hv1 to hv4), where no name
begins another, so matching by a name's beginning would pass them. Here
hv1 sits beside hv10, and hv2.example.net (host hv2) beside
hv20.example.net (host hv20), in every place the core matches a name:
--exclude-host, find_hypervisor (evacuate's hosts, a target placement's
names, in-flight migrations) and the compute hosts of Nova's migration
records (move back, the return window).
"""

import unittest

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.planning import drain
from osc_leveller.core.planning import planner
from osc_leveller.core.rules import filters
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

NOW = b.TAKEN_AT


def prefixed(hot='hv10'):
    """hv1, hv10, hv2.example.net (host hv2) and hv20.example.net (host
    hv20), one domain; six busy servers on the hot one."""
    hyps = [b.hypervisor('hv1'), b.hypervisor('hv10'),
            b.hypervisor('hv2.example.net', host='hv2'),
            b.hypervisor('hv20.example.net', host='hv20')]
    servers = [b.server('busy%d' % i, hot, vcpus=4, ram_gb=16, cpu=0.9)
               for i in range(6)]
    servers += [b.server('idle-%s' % h['host'], h['name'], cpu=0.05)
                for h in hyps if h['name'] != hot]
    for h in hyps:
        h['metrics'] = {'cpu': 0.9 if h['name'] == hot else 0.1, 'ram': 0.3}
    return hyps, servers


def name_of(hypervisor):
    return hypervisor.name if hypervisor is not None else None


def migration(server, source, dest, at=NOW, status='completed'):
    return {'id': '%s-%s' % (server, source), 'server_id': 'id-' + server,
            'status': status, 'migration_type': 'live-migration',
            'source_compute': source, 'dest_compute': dest,
            'created_at': at, 'updated_at': at}


class TestFindHypervisor(unittest.TestCase):
    def test_by_its_name_or_its_host_and_nothing_else(self):
        snap = b.snapshot(*prefixed())
        for hyp in snap.hypervisors:
            self.assertIs(hyp, snap.find_hypervisor(hyp.name))
            self.assertIs(hyp, snap.find_hypervisor(hyp.host))
        for ref in ('hv', 'hv2.example', 'cmp-hv', 'hv2.', 'HV1', ''):
            self.assertIsNone(name_of(snap.find_hypervisor(ref)), ref)

    def test_a_name_gone_from_nova_names_nothing(self):
        """hv1 and hv2.example.net removed: their names begin those of
        hv10 and hv20.example.net, which they must not find."""
        hyps, servers = prefixed()
        snap = b.snapshot([h for h in hyps if h['name'] in (
            'hv10', 'hv20.example.net')], [s for s in servers if s[
                'hypervisor'] in ('hv10', 'hv20.example.net')])
        for ref in ('hv1', 'cmp-hv1', 'hv2', 'hv2.example.net'):
            self.assertIsNone(name_of(snap.find_hypervisor(ref)), ref)

    def test_in_flight_migrations_are_placed_by_their_hosts(self):
        """A migration between hv1 and hv2 is out of scope when both are
        excluded, whatever hv10 and hv20 do."""
        hyps, servers = prefixed()
        running = migration('idle-hv20', 'cmp-hv1', 'hv2', status='running')
        snap = b.snapshot(hyps, servers, migrations=[running])
        options = opts.PlannerOptions(exclude_hosts=frozenset(
            {'hv1', 'hv2.example.net'}))
        self.assertEqual([], executor.in_flight(snap, options))
        options = opts.PlannerOptions(exclude_hosts=frozenset({'hv1'}))
        self.assertEqual(['id-idle-hv20'], [
            m.server_id for m in executor.in_flight(snap, options)])


class TestExcludeHost(unittest.TestCase):
    def test_excluding_hv1_leaves_hv10_in(self):
        for excluded in ('hv1', 'cmp-hv1'):
            with self.subTest(excluded=excluded):
                snap = b.snapshot(*prefixed())
                options = opts.PlannerOptions(
                    exclude_hosts=frozenset({excluded, 'hv2'}))
                rules = filters.Rules(snap, options)
                self.assertIsNone(filters.source_in_scope(
                    snap.server('id-busy0'), rules))
                state = state_mod.new_state(snap)
                server = snap.server('id-idle-hv20')
                self.assertIsNone(filters.excluded_host(
                    server, snap.hypervisor('hv10'), state, rules))
                self.assertIsNone(filters.excluded_host(
                    server, snap.hypervisor('hv20.example.net'), state,
                    rules))
                self.assertEqual('excluded by --exclude-host',
                                 filters.excluded_host(
                                     server, snap.hypervisor('hv1'), state,
                                     rules))
                # hv10 is balanced, onto hv20 only.
                plan = planner.make_plan(snap, options)
                self.assertTrue(plan.moves)
                self.assertEqual({('hv10', 'hv20.example.net')}, {
                    (m.source, m.destination) for m in plan.moves})


class TestMigrationRecords(unittest.TestCase):
    """Nova's migration records name compute hosts: cmp-hv1, cmp-hv10."""

    def test_move_back_returns_what_left_that_host_only(self):
        hyps, servers = prefixed(hot='hv20.example.net')
        servers += [b.server('from1', 'hv2.example.net'),
                    b.server('from10', 'hv2.example.net')]
        migrations = [migration('from1', 'cmp-hv1', 'hv2'),
                      migration('from10', 'cmp-hv10', 'hv2')]
        snap = b.snapshot(hyps, servers, migrations=migrations)
        for name, server in (('hv1', 'from1'), ('hv10', 'from10')):
            moves = drain.move_back(snap, [snap.hypervisor(name)])
            self.assertEqual([(server, name)], [
                (m.server_name, m.destination) for m in moves])

    def test_the_return_window_is_the_host_left(self):
        hyps, servers = prefixed()
        servers.append(b.server('from10', 'hv2.example.net'))
        snap = b.snapshot(hyps, servers, migrations=[
            migration('from10', 'cmp-hv10', 'hv2')])
        rules = filters.Rules(snap, opts.PlannerOptions())
        state = state_mod.new_state(snap)
        server = snap.server('id-from10')
        self.assertIsNone(filters.returning(server, snap.hypervisor('hv1'),
                                            state, rules))
        self.assertIn('it left cmp-hv10', filters.returning(
            server, snap.hypervisor('hv10'), state, rules))
