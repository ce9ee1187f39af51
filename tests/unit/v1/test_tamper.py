"""A plan file cannot steer a migration.

Property: a plan file with any of its fields changed is refused, or every
live migration that reaches (a simulated) Nova is one an independent
oracle accepts on the cloud as it is at that moment: the compute host is
the destination hypervisor's own, the destination is in the server's AZ
and CPU model, has room under the allocation ratios, keeps the server
groups, is enabled, up and not excluded; the server may move (ACTIVE, no
task, not locked, outside its cooldown, not on an excluded hypervisor) and
the move takes load from a hotter hypervisor to a cooler one below the
ceiling. Never more migrations start than --batch allows, and a change to a
field that does not say what moves where (the host, a name, a figure, a
wave, the kind, an exchange label, the options ...) cannot add one.

The oracle is tests/unit/oracle.py, written from the rules, not from the
product's filters.
"""

import copy
import dataclasses
import functools
import io
import json
import os
from unittest import mock

import hypothesis
from hypothesis import strategies as st
from osc_lib import exceptions

from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import apply as apply_cmd
from osc_leveller.v1 import common
from osc_leveller.v1 import migrating
from tests.unit import builders as b
from tests.unit import oracle
from tests.unit.core import test_executor
from tests.unit.v1 import test_commands

NOW = snapshot_io.parse_time(b.TAKEN_AT)
BATCH = 3
COOLDOWN_HOURS = 6.0
CEILING = 0.85
EXCLUDED = 'hv3'
# Fields that say what moves where; changing the others may only take
# migrations away.
STEERING = ('server_id', 'source', 'destination')
MOVE_FIELDS = STEERING + (
    'server_name', 'destination_host', 'wave', 'domain', 'ram_gb', 'gain',
    'source_score', 'destination_score', 'imbalance', 'reason', 'exchange')
TOP_FIELDS = ('kind', 'options', 'note', 'created_at', 'imbalance',
              'snapshot')
# The cloud the simulated Nova is, as a live read records it.
HERE = {'kind': 'cloud', 'cloud': 'prod',
        'keystone': 'https://keystone.example.net:5000/v3',
        'nova_service': 'a1b2c3', 'nova_region': 'RegionOne'}


def cloud():
    """hv1 hot; hv2 and hv3 (excluded) cool, same AZ and CPU model; hv4 of
    another CPU model, hv5 in another AZ, hv6 disabled, hv7 full of RAM; a
    locked server, one in its cooldown, an anti-affinity pair."""
    hyps = [b.hypervisor('hv1'), b.hypervisor('hv2'), b.hypervisor('hv3'),
            b.hypervisor('hv4', model='Gen2'), b.hypervisor('hv5', az='az2'),
            b.hypervisor('hv6', status='disabled'),
            b.hypervisor('hv7', ram_gb=32)]
    servers = [b.server('web%d' % i, 'hv1', vcpus=8, ram_gb=16)
               for i in range(6)]
    servers += [b.server('locked', 'hv1', vcpus=8, ram_gb=16, locked=True),
                b.server('recent', 'hv1', vcpus=8, ram_gb=16),
                b.server('db1', 'hv1', vcpus=4, ram_gb=8,
                         server_groups=['g-db']),
                b.server('db2', 'hv2', vcpus=4, ram_gb=8,
                         server_groups=['g-db']),
                b.server('filler', 'hv7', vcpus=2, ram_gb=30)]
    groups = [{'id': 'g-db', 'name': 'db', 'policy': 'anti-affinity',
               'members': ['id-db1', 'id-db2']}]
    migrations = [{'id': '1', 'server_id': 'id-recent', 'status': 'completed',
                   'migration_type': 'live-migration',
                   'source_compute': 'cmp-hv2', 'dest_compute': 'cmp-hv1',
                   'created_at': '2026-11-20T11:00:00Z',
                   'updated_at': '2026-11-20T11:00:00Z'}]
    return hyps, servers, groups, migrations


class JudgedNova(test_executor.FakeNova):
    """The simulated Nova, judging each live migration as it arrives."""

    def __init__(self):
        hyps, servers, self.groups, migrations = cloud()
        # Migrations it makes are stamped with the real time, as the
        # executor's clock runs: later than NOW, so inside the cooldown.
        super().__init__(hyps, servers, migrations, polls=1)
        self.sent = []  # (server id, host, why it is wrong or None)

    source = HERE

    def snapshot(self, moves=None):
        self.snapshots += 1
        return dataclasses.replace(b.snapshot(
            self.hyps, list(self.servers.values()), self.groups,
            self.migrations), source=model.frozen_mapping(self.source))

    def live_migrate(self, server_id, host, kind='live-migration'):
        self.sent.append((server_id, host, self.judge(server_id, host)))
        super().live_migrate(server_id, host, kind)

    def judge(self, server_id, host):
        """Why this migration should not reach Nova, or None."""
        document = b.document(self.hyps, list(self.servers.values()),
                              self.groups, self.migrations)
        nodes = [h['name'] for h in self.hyps if h['host'] == host]
        if len(nodes) != 1:
            return 'host %s names no hypervisor' % host
        world = oracle.Cloud(document, 'model', (1.0, 1.0))
        server = self.servers.get(server_id)
        if server is None:
            return 'no such server'
        source, destination = server['hypervisor'], nodes[0]
        why = world.refusal(server_id, source, destination)
        if why:
            return why
        if EXCLUDED in (source, destination):
            return 'touches the excluded %s' % EXCLUDED
        for migration in self.migrations:
            moved = snapshot_io.parse_time(migration.get('updated_at')
                                           or migration['created_at'])
            if migration['server_id'] == server_id and \
                    migration['status'] in ('completed', 'confirmed') and \
                    NOW - moved < COOLDOWN_HOURS * 3600:
                return 'inside its cooldown'
        hotter = world.score(source)
        world.move(server_id, destination)
        if world.score(destination) >= hotter:
            return 'does not even out the load'
        if world.score(destination) > CEILING:
            return 'above the ceiling'
        return None


class AppliedPlan(test_commands.CommandTest):
    """A plan of cloud(), applied by the command to JudgedNova."""

    def setUp(self):
        super().setUp()
        self.clouds_yaml = {'apply': {
            'poll_interval': 0.1,
            'lock_file': os.path.join(self.tmp.name, 'apply.lock'),
            'journal': ''}}
        nova = JudgedNova()
        options = core_options.PlannerOptions(
            exclude_hosts=frozenset([EXCLUDED]), now=NOW)
        self.plan = plan_mod.to_document(planner.make_plan(nova.snapshot(),
                                                           options))
        self.assertGreaterEqual(len(self.plan['moves']), 2)
        self.baseline = self.apply(self.plan)
        self.assertEqual(min(BATCH, len(self.plan['moves'])),
                         len(self.baseline))
        self.assertEqual([None] * len(self.baseline),
                         [why for _, _, why in self.baseline])

    def apply(self, document, *flags, nova=None):
        """The migrations sent when `apply FILE --batch 3` runs document;
        None when the command refused the file."""
        nova = nova or JudgedNova()
        path = self.write('plan.json', json.dumps(document))
        cmd = apply_cmd.ApplyLeveller(self.app, None)
        parsed = self.check_parser(cmd, [
            path, '--batch', str(BATCH), '--max-parallel', '1',
            '--exclude-host', EXCLUDED] + list(flags), [])
        # The simulated Nova moves on when asked; no need to wait for it.
        quick = functools.partial(executor.Executor, sleep=lambda _: None)
        with mock.patch.object(migrating, 'actions_mod', mock.Mock(
                Actions=lambda *args, **kwargs: nova)), \
                mock.patch.object(common, 'open_connection',
                                  lambda *args, **kwargs: None), \
                mock.patch.object(apply_cmd.executor, 'Executor', quick):
            self.app.stdout = io.StringIO()
            try:
                cmd.run(parsed)
            except exceptions.CommandError:
                self.assertEqual([], nova.sent)
                return None
        return nova.sent


class TestTamperedPlans(AppliedPlan):
    def check(self, tampered, steering):
        """The (server id, host) pairs the tampered plan sent, or None
        when it was refused."""
        sent = self.apply(tampered)
        if sent is None:
            return None
        self.assertEqual([], [s for s in sent if s[2]], tampered['moves'])
        self.assertLessEqual(len(sent), BATCH)
        if not steering:
            self.assertLessEqual({s[:2] for s in sent},
                                 {s[:2] for s in self.baseline})
        return {s[:2] for s in sent}

    @hypothesis.settings(max_examples=150, deadline=None,
                         suppress_health_check=[
                             hypothesis.HealthCheck.function_scoped_fixture])
    @hypothesis.given(data=st.data())
    def test_no_field_steers_a_migration(self, data):
        names = sorted({h['name'] for h in cloud()[0]} |
                       {h['host'] for h in cloud()[0]} |
                       {s['id'] for s in cloud()[1]})
        values = st.one_of(
            st.sampled_from(names + ['', 'nowhere', 'hv1.evil']),
            st.sampled_from(['placement', 'balance', 'exchange 1']),
            st.integers(-2, 10), st.floats(allow_nan=False),
            st.sampled_from([None, [], {}, True, 10 ** 20]))
        tampered = copy.deepcopy(self.plan)
        steering = False
        for _ in range(data.draw(st.integers(1, 3))):
            if data.draw(st.booleans()):
                where = tampered['moves'][data.draw(st.integers(
                    0, len(tampered['moves']) - 1))]
                field = data.draw(st.sampled_from(MOVE_FIELDS))
                steering = steering or field in STEERING
            else:
                where = tampered
                field = data.draw(st.sampled_from(TOP_FIELDS))
            where[field] = data.draw(values)
        self.check(tampered, steering)

    def test_every_field_and_hypervisor(self):
        """The first move's source, destination and host set to each name
        the cloud knows, one at a time: the exhaustive version of the
        property above. Most of them the checks skip."""
        names = sorted({h['name'] for h in cloud()[0]} |
                       {h['host'] for h in cloud()[0]})
        first = self.plan['moves'][0]['server_id']
        moved, kept = 0, 0
        for field in ('destination', 'destination_host', 'source'):
            for name in names:
                tampered = copy.deepcopy(self.plan)
                tampered['moves'][0][field] = name
                sent = self.check(tampered, field in STEERING)
                if first in {server for server, _ in sent}:
                    moved += 1
                else:
                    kept += 1
        # The host is looked up (every destination_host moves it); the
        # other hypervisors, and a wrong source, are skipped.
        self.assertGreaterEqual(moved, len(names))
        self.assertGreater(kept, len(names))

    def test_known_attacks(self):
        move = self.plan['moves'][0]
        other_az = dict(move, destination_host='cmp-hv5')
        sent = self.apply(dict(self.plan, moves=[other_az]))
        self.assertEqual([(move['server_id'], 'cmp-' + move['destination'],
                           None)], sent)
        # kind: placement would skip the cooldown and the load check.
        self.assertIsNone(self.apply(dict(self.plan, kind='placement')))
        # One exchange label on every move would stretch --batch 3.
        labelled = copy.deepcopy(self.plan)
        for each in labelled['moves']:
            each['exchange'] = 'exchange 1'
        self.assertIsNone(self.apply(labelled))
        # The server in its cooldown, the locked one, to other AZs/models.
        for server, destination in (('id-recent', 'hv2'),
                                    ('id-locked', 'hv2'),
                                    ('id-web0', 'hv5'), ('id-web0', 'hv4'),
                                    ('id-web0', 'hv6'), ('id-web0', 'hv7'),
                                    ('id-web0', EXCLUDED)):
            forged = dict(move, server_id=server, destination=destination,
                          destination_host='cmp-' + destination)
            self.assertEqual([], self.apply(dict(self.plan, moves=[forged])),
                             (server, destination))


class TestThePlansCloud(AppliedPlan):
    """A plan file records the cloud it was made on; apply refuses one
    made on another cloud, before any move."""

    def refusal(self, document, nova=None):
        self.clouds_yaml['apply']['journal'] = os.path.join(
            self.tmp.name, 'journal.jsonl')
        self.app.stderr = io.StringIO()
        with mock.patch.object(common.exceptions, 'CommandError',
                               RecordedError):
            self.assertIsNone(self.apply(document, nova=nova))
        with open(self.clouds_yaml['apply']['journal']) as f:
            journal = [json.loads(line) for line in f]
        os.remove(self.clouds_yaml['apply']['journal'])
        return RecordedError.last, journal

    def test_the_plan_records_the_cloud(self):
        self.assertEqual(HERE, self.plan['snapshot']['source'])

    def test_a_plan_of_another_cloud_is_refused(self):
        here = ('clouds.yaml cloud prod, Keystone https://keystone.example.'
                'net:5000/v3, region RegionOne, Nova service a1b2c3')
        for change, there in (
                ({'nova_service': 'd4e5f6'}, here.replace('a1b2c3',
                                                          'd4e5f6')),
                ({'nova_region': 'RegionTwo'}, here.replace('One', 'Two')),
                ({'nova_service': 'd4e5f6', 'nova_region': None,
                  'keystone': None}, 'clouds.yaml cloud prod, Nova service '
                 'd4e5f6')):
            other = copy.deepcopy(self.plan)
            other['snapshot']['source'].update(change)
            path = os.path.join(self.tmp.name, 'plan.json')
            message, journal = self.refusal(other)
            self.assertEqual(
                '%s: the plan was made on another cloud (%s) than this one '
                '(%s): plan again on this cloud, or choose the plan\'s cloud '
                'with --os-cloud' % (path, there, here), message)
            self.assertEqual(['end'], [r['event'] for r in journal])
            self.assertEqual((1, message), (journal[0]['exit_code'],
                                            journal[0]['reason']))

    def test_a_plan_without_a_cloud_goes_ahead_with_a_note(self):
        # Older plan files, plans made on the demo or a Watcher cluster
        # file: whoever edits a plan can write any cloud into it, so the
        # record is no seal; each move is checked all the same.
        for dropped in (('nova_service',), ('nova_service', 'nova_region',
                                            'keystone')):
            bare = copy.deepcopy(self.plan)
            for key in dropped:
                del bare['snapshot']['source'][key]
            self.app.stderr = io.StringIO()
            self.assertEqual(self.baseline, self.apply(bare))
            self.assertIn('the plan records no cloud',
                          self.app.stderr.getvalue())
        bare['snapshot'].pop('source')
        self.assertEqual(self.baseline, self.apply(bare))

    def test_a_cloud_that_names_no_nova_service_is_said(self):
        nova = JudgedNova()
        nova.source = {'kind': 'cloud', 'cloud': 'prod'}
        self.app.stderr = io.StringIO()
        self.assertEqual(self.baseline, self.apply(self.plan, nova=nova))
        self.assertIn("this cloud's Keystone catalog names no Nova service, "
                      "so it cannot be compared with the plan's (clouds.yaml "
                      "cloud prod, Keystone https://keystone.example.net:"
                      "5000/v3, region RegionOne, Nova service a1b2c3)",
                      self.app.stderr.getvalue())

    def test_a_long_cloud_in_the_plan_is_quoted_briefly(self):
        other = copy.deepcopy(self.plan)
        other['snapshot']['source'].update(nova_service='x' * 5000,
                                           keystone='y' * 5000)
        message, _ = self.refusal(other)
        self.assertLess(len(message), 700)


class RecordedError(exceptions.CommandError):
    """The shell's error, its message kept for the test."""
    last = None

    def __init__(self, message=None, *args):
        RecordedError.last = message
        super().__init__(message, *args)


class TestServerNames(AppliedPlan):
    """Rows, progress and the journal name a server as the cloud read
    before its move names it; the plan's name only where it differs."""

    def run_json(self, document):
        """(sent, rows, stderr, journal) of `apply FILE -f json`."""
        journal = os.path.join(self.tmp.name, 'names.jsonl')
        self.clouds_yaml['apply']['journal'] = journal
        self.app.stderr = io.StringIO()
        sent = self.apply(document, '-f', 'json')
        with open(journal) as f:
            records = [json.loads(line) for line in f]
        os.remove(journal)
        return (sent, json.loads(self.app.stdout.getvalue()),
                self.app.stderr.getvalue(), records)

    def test_a_swapped_server_id_is_named_as_the_cloud_names_it(self):
        moved = {m['server_id'] for m in self.plan['moves']}
        first = self.plan['moves'][0]
        other = next(s for s in cloud()[1] if s['id'] not in moved and
                     s['hypervisor'] == first['source'] and
                     s['name'].startswith('web'))
        swapped = copy.deepcopy(self.plan)
        swapped['moves'][0]['server_id'] = other['id']
        sent, rows, stderr, journal = self.run_json(swapped)
        # The other server moves (every check passes for it) ...
        self.assertEqual(other['id'], sent[0][0])
        # ... and everything says so.
        self.assertEqual(other['name'], rows[0]['Server'])
        self.assertIn('the plan names it %s' % first['server_name'],
                      rows[0]['Reason'])
        self.assertIn('%s %s -> %s: migrating' % (
            other['name'], first['source'], first['destination']), stderr)
        self.assertNotIn(first['server_name'] + ' ', stderr)
        migrate = [r for r in journal if r['event'] == 'migrate'][0]
        self.assertEqual((other['id'], other['name'], first['server_name']),
                         (migrate['server_id'], migrate['server'],
                          migrate['plan_server']))
        # The moves the plan names rightly carry no plan name.
        self.assertEqual([], [r for r in rows[1:]
                              if 'the plan names it' in r['Reason']])
        self.assertEqual([], [r for r in journal if 'plan_server' in r and
                              r['server_id'] != other['id']])

    def test_a_server_the_cloud_does_not_know_is_named_by_its_id(self):
        unknown = copy.deepcopy(self.plan)
        unknown['moves'][0]['server_id'] = 'id-nosuch'
        sent, rows, _, journal = self.run_json(unknown)
        self.assertEqual('id-nosuch', rows[0]['Server'])
        self.assertEqual('the server no longer exists; the plan names it %s'
                         % self.plan['moves'][0]['server_name'],
                         rows[0]['Reason'])
        skipped = [r for r in journal if r['event'] == 'skipped'][0]
        self.assertEqual((None, self.plan['moves'][0]['server_name']),
                         (skipped['server'], skipped['plan_server']))
