import dataclasses
import datetime
import io
import json
import os
import tempfile
import types
from unittest import mock

from osc_lib import exceptions
from osc_lib.test import base

from osc_leveller.cloud import cloudlock
from osc_leveller.cloud import collect
from osc_leveller.cloud import connection
from osc_leveller.core.load import scoring
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import paths
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.settings import config
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import apply as apply_cmd
from osc_leveller.v1 import columns
from osc_leveller.v1 import common
from osc_leveller.v1 import config as config_cmd
from osc_leveller.v1 import evacuate as evacuate_cmd
from osc_leveller.v1 import migrating
from osc_leveller.v1 import plan
from osc_leveller.v1 import score
from osc_leveller.v1 import runfiles
from osc_leveller.v1 import snapshot
from tests.unit import builders as b
from tests.unit.cloud import test_cloudlock
from tests.unit.core import test_drain
from tests.unit.core import test_n_plus_one
from tests.unit.core import test_runmetrics
from tests.unit.core import test_executor
from tests.unit.core import test_forecast
from tests.unit.core import test_guard
from tests.unit.core import test_planner
from tests.unit.v1 import test_run_lock

UTC = datetime.timezone.utc


class CommandTest(base.TestCommand):
    def setUp(self):
        super().setUp()
        self.app.stderr = io.StringIO()
        # What the openstack shell gives a command to find the cloud with.
        self.app.cloud_config = mock.Mock()
        self.app.options = mock.Mock(cloud='devcloud')
        # The leveller: section of the devcloud entry in clouds.yaml.
        self.clouds_yaml = {}
        self.app.cloud_config.get_one.side_effect = lambda **kw: (
            types.SimpleNamespace(name='devcloud', config={
                'leveller': self.clouds_yaml}))
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, content):
        path = os.path.join(self.tmp.name, name)
        with open(path, 'w') as f:
            f.write(content if isinstance(content, str)
                    else json.dumps(content))
        return path

    def run_cmd(self, cls, args):
        cmd = cls(self.app, None)
        parsed = self.check_parser(cmd, args, [])
        return cmd.take_action(parsed)

    def live(self, document):
        """Commands see `document` as what the live cloud returned."""
        self.prometheus_settings = []
        return mock.patch.multiple(
            'osc_leveller.v1.common',
            connection=mock.Mock(leveller_section=connection.leveller_section,
                                 open_connection=mock.Mock()),
            measure=mock.Mock(reader_from_settings=(
                lambda settings, **guard: self.prometheus_settings.append(
                    settings))),
            collect=mock.Mock(CollectError=collect.CollectError, Collector=(
                lambda conn, **kw: mock.Mock(collect=lambda: document))))

    def assert_command_error(self, cls, args, message):
        error = self.assertRaises(exceptions.CommandError, self.run_cmd, cls,
                                  args)
        self.assertIn(message, str(error))


class TestScore(CommandTest):
    def test_parser(self):
        cmd = score.ScoreLeveller(self.app, None)
        self.check_parser(cmd, ['--snapshot', 'demo', '--weight', 'cpu=2',
                                '--weight', 'ram=1', '--long', '--summary'],
                          [('snapshot', 'demo'),
                           ('weight', ['cpu=2', 'ram=1']),
                           ('long', True), ('summary', True)])

    def test_hosts_hottest_first(self):
        hyps, servers = b.three_hosts()
        path = self.write('s.json', b.document(hyps, servers))
        names, rows = self.run_cmd(score.ScoreLeveller, ['--snapshot', path])
        self.assertEqual(score.HOST_COLUMNS, names)
        self.assertEqual('hv1', rows[0][0])
        self.assertEqual(3, len(rows))
        vcpu = rows[0][3]
        self.assertEqual('24 / 128', vcpu.human_readable())
        self.assertEqual({'used': 24, 'capacity': 128.0},
                         vcpu.machine_readable())
        self.assertEqual(18.8, rows[0][5].machine_readable())
        self.assertEqual('', rows[0][7].human_readable())
        self.assertIsInstance(rows[0][8], columns.ScoreColumn)
        # cpu 24/128 allocated, ram 96/128 GiB: (0.1875 + 0.75) / 2
        self.assertEqual(0.4688, rows[0][8].machine_readable())
        self.assertEqual('0.47 ████▊     ', rows[0][8].human_readable())
        summary = self.app.stderr.getvalue()
        self.assertIn('Load from Placement allocations for 3 of 3', summary)
        self.assertIn('az1/Gen1', summary)
        self.assertIn('N+1 yes', summary)

    def test_long_and_weights(self):
        _, rows = self.run_cmd(score.ScoreLeveller,
                               ['--snapshot', 'demo', '--long'])
        self.assertEqual(len(score.HOST_COLUMNS + score.LONG_COLUMNS),
                         len(rows[0]))
        self.assertIn('metrics', {r[13] for r in rows})
        _, cpu_only = self.run_cmd(score.ScoreLeveller, [
            '--snapshot', 'demo', '--weight', 'ram=0', '--weight',
            'cpu_pressure=0', '--weight', 'ram_pressure=0'])
        for row in cpu_only:
            self.assertAlmostEqual(row[5].machine_readable() / 100,
                                   row[8].machine_readable(),
                                   places=2)

    def test_summary(self):
        names, rows = self.run_cmd(score.ScoreLeveller,
                                   ['--snapshot', 'demo', '--summary'])
        self.assertEqual(score.DOMAIN_COLUMNS + ('N+1',), names)
        self.assertEqual(6, len(rows))
        self.assertEqual(39, sum(r[1] for r in rows))
        self.assertEqual(['yes'] * 6, [r[7].human_readable() for r in rows])
        self.assertEqual([(True, [], [])] * 6, [
            (n['ok'], n['lost'], n['unplaced'])
            for n in (r[7].machine_readable() for r in rows)])
        # Losing two of a domain's hypervisors is too much for one of them.
        names, rows = self.run_cmd(score.ScoreLeveller, [
            '--snapshot', 'demo', '--summary', '--headroom', '2'])
        self.assertEqual('N+2', names[-1])
        lost = [r for r in rows if r[7].human_readable() != 'yes']
        self.assertEqual(1, len(lost), rows)
        text = lost[0][7].human_readable()
        self.assertRegex(text, r'^no: losing \S+, \S+, \d+ servers? '
                         r'fit nowhere: ')
        # -f json: the same answer in fields, not only the sentence.
        found = lost[0][7].machine_readable()
        self.assertEqual((False, 2, text), (found['ok'], found['k'],
                                            found['reason']))
        snap = snapshot_io.load('demo')
        self.assertEqual(2, len(found['lost']))
        self.assertTrue(all(snap.hypervisor(h).usable and scoring.domain_of(
            snap.hypervisor(h)) == lost[0][0] for h in found['lost']))
        self.assertIn('%s, %s, %d server' % (
            found['lost'][0], found['lost'][1], len(found['unplaced'])),
            text)
        for entry in found['unplaced']:
            server = snap.server(entry['server_id'])
            self.assertIn(server.hypervisor, found['lost'])
            self.assertEqual(server.label, entry['server'])
            self.assertTrue(entry['reason'])
        self.assertIn(found['unplaced'][0]['reason'], text)
        self.assertIn('  N+2 no: losing', self.run_stderr(
            ['--snapshot', 'demo', '--headroom', '2']))
        self.assert_command_error(score.ScoreLeveller, [
            '--snapshot', 'demo', '--headroom', '0'], '--headroom')

    def run_stderr(self, args):
        self.app.stderr = io.StringIO()
        self.run_cmd(score.ScoreLeveller, args)
        return self.app.stderr.getvalue()

    def test_a_saturated_hypervisor_shows_its_demand(self):
        """hv1's 16 threads are all busy, and its server waited for one a
        quarter of its 16 vCPUs' time: 125 % CPU, and said."""
        hyps = [b.hypervisor('hv1', vcpus=16, cpu=1.0, ram=0.5),
                b.hypervisor('hv2', vcpus=16, cpu=0.2, ram=0.5)]
        servers = [b.server('s1', 'hv1', vcpus=16, cpu=0.75, ram=0.5)]
        servers[0]['usage']['cpu_steal'] = 0.25
        path = self.write('s.json', b.document(hyps, servers))
        _, rows = self.run_cmd(score.ScoreLeveller, ['--snapshot', path])
        self.assertEqual(('hv1', 125.0), (rows[0][0],
                                          rows[0][5].machine_readable()))
        self.assertIn('CPU saturated (its servers ask for more than its '
                      'threads, busy plus steal): hv1 125 %',
                      self.app.stderr.getvalue())
        del servers[0]['usage']['cpu_steal']
        path = self.write('s.json', b.document(hyps, servers))
        _, rows = self.run_cmd(score.ScoreLeveller, ['--snapshot', path])
        self.assertEqual(100.0, rows[0][5].machine_readable())
        self.assertEqual(1, self.app.stderr.getvalue().count('saturated'))

    def test_inventory_that_contradicts_allocations_has_no_score(self):
        # VCPU total 0 with 24 vCPUs allocated would read as 22 times full.
        hyps, servers = b.three_hosts()
        hyps[0]['inventories']['VCPU']['total'] = 0
        path = self.write('s.json', b.document(hyps, servers))
        _, rows = self.run_cmd(score.ScoreLeveller, ['--snapshot', path])
        self.assertEqual(['hv2', 'hv3', 'hv1'], [r[0] for r in rows])
        self.assertIsNone(rows[2][8].machine_readable())
        self.assertIsNone(rows[2][5].machine_readable())
        self.assertIn('Left out, no score: inventory contradicts '
                      'allocations: hv1 (VCPU 24 allocated, but capacity 0 '
                      '(total 0, reserved 0))', self.app.stderr.getvalue())
        _, rows = self.run_cmd(score.ScoreLeveller, ['--snapshot', path,
                                                     '--summary'])
        self.assertEqual([2], [r[1] for r in rows])  # hv2 and hv3
        _, moves = self.run_cmd(plan.PlanLeveller, ['--snapshot', path])
        self.assertEqual([], moves)
        self.assertIn('Left out of balancing, inventory contradicts '
                      'allocations: hv1', self.app.stderr.getvalue())

    def test_plan_says_what_holds_a_domain(self):
        held = test_planner.TestHeldDomains().ram_locked()
        path = self.write('s.json', b.document(*held))
        _, moves = self.run_cmd(plan.PlanLeveller, ['--snapshot', path])
        self.assertEqual([], moves)
        self.assertIn('Held: az1/Gen1 (imbalance ', self.app.stderr.getvalue())
        self.assertIn('MEMORY_MB full refuses 14 of the 14 moves',
                      self.app.stderr.getvalue())

    def test_plan_and_explain_say_what_the_forecast_earned(self):
        doc = test_forecast.measured(test_forecast.office_world(),
                                     (1.0, 0.1, 0.0), ram=(0.1, 1.0, 0.2))
        path = self.write('s.json', doc)
        out = self.write('p.json', {})
        _, moves = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', path, '--output-file', out])
        self.assertTrue(moves)
        line = ('Forecast: az1/Gen1: CPU error 0.065 against 0.204 for now, '
                '0.107 blended; weight 0.50 (earned 0.91, bounded by '
                'forecast_weight); RAM error 0.204 against 0.065 for now; '
                'weight 0 (no better than now)')
        self.assertIn(line, self.app.stderr.getvalue().splitlines())
        with open(out) as saved:
            [domain] = json.load(saved)['imbalance']['domains']
        self.assertEqual((0.5, 0.0), (domain['forecast']['cpu']['weight'],
                                      domain['forecast']['ram']['weight']))
        self.app.stderr = io.StringIO()
        self.run_cmd(plan.PlanLeveller, ['--snapshot', path, '--explain',
                                         'office'])
        self.assertIn(line, self.app.stderr.getvalue().splitlines())

    def test_live_cloud_notes_are_shown(self):
        hyps, servers = b.three_hosts()
        document = b.document(hyps, servers)
        document['source']['note'] = 'left out, no resource provider: hv9'
        with self.live(document):
            _, rows = self.run_cmd(score.ScoreLeveller, [])
        self.assertEqual(3, len(rows))
        self.assertIn('Note: left out, no resource provider: hv9',
                      self.app.stderr.getvalue())

    def test_live_cloud_errors_are_command_errors(self):
        refused = collect.CollectError('cannot connect to the cloud: no auth')
        with mock.patch.object(connection, 'open_connection',
                               side_effect=refused):
            self.assert_command_error(score.ScoreLeveller, [],
                                      'cannot connect to the cloud')

    def test_bad_input(self):
        self.assert_command_error(score.ScoreLeveller,
                                  ['--snapshot', '/nonexistent.json'],
                                  'does not exist')
        self.assert_command_error(
            score.ScoreLeveller, ['--snapshot', self.write('x.json', '[1')],
            'is not valid JSON')
        self.assert_command_error(
            score.ScoreLeveller, ['--snapshot', 'demo', '--weight', 'gpu=1'],
            '--weight gpu=1: use NAME=VALUE with NAME one of cpu, ram')
        self.assert_command_error(
            score.ScoreLeveller, ['--snapshot', 'demo', '--weight', 'cpu=0',
                                  '--weight', 'ram=0'],
            'the cpu and ram weights cannot both be 0')


class TestPlan(CommandTest):
    def test_parser_defaults(self):
        cmd = plan.PlanLeveller(self.app, None)
        # No argparse defaults: a flag left out keeps the settings' value.
        self.check_parser(cmd, ['--snapshot', 'demo'], [
            ('max_moves', None), ('threshold', None), ('min_gain', None),
            ('include_locked', None), ('exclude_host', None),
            ('cpu_compatibility', None), ('output_file', None),
            ('config', None), ('no_prometheus', False)])
        self.check_parser(cmd, ['--include-locked', '--exclude-host', 'a',
                                '--exclude-host', 'b', '--cooldown', '2'],
                          [('include_locked', True),
                           ('exclude_host', ['a', 'b']), ('cooldown', 2.0)])

    def test_plan_rows_in_execution_order(self):
        self.assertFalse(plan.PlanLeveller.need_sort_by_cliff)
        names, rows = self.run_cmd(plan.PlanLeveller,
                                   ['--snapshot', 'demo', '--long'])
        self.assertEqual(plan.MOVE_COLUMNS + plan.LONG_COLUMNS, names)
        self.assertEqual(list(range(1, 15)), [r[0] for r in rows])
        self.assertTrue(all(r[6] for r in rows))
        self.assertIn('imbalance 0.092 ->', self.app.stderr.getvalue())
        self.assertEqual(rows[0][3].split('.')[0], rows[0][8])
        imbalance = rows[0][13].machine_readable()
        self.assertLess(imbalance['after'], imbalance['before'])

    def test_output_file(self):
        path = os.path.join(self.tmp.name, 'plan.json')
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--max-moves', '3', '--output-file', path])
        saved = plan_mod.read(path)
        self.assertEqual([r[1] for r in rows],
                         [m.server_name for m in saved.moves])
        self.assertIn('saved to ' + path, self.app.stderr.getvalue())
        self.assert_command_error(plan.PlanLeveller, [
            '--snapshot', 'demo', '--output-file',
            os.path.join(self.tmp.name, 'no', 'such', 'dir.json')],
            'the directory %s does not exist' % os.path.join(
                self.tmp.name, 'no', 'such'))

    def test_nothing_to_do(self):
        _, rows = self.run_cmd(plan.PlanLeveller,
                               ['--snapshot', 'demo', '--threshold', '1'])
        self.assertEqual([], rows)
        self.assertIn('Nothing to do: imbalance is below the threshold',
                      self.app.stderr.getvalue())

    def test_scope_options(self):
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--availability-zone', 'az2',
            '--exclude-host', 'cmp-b12'])
        self.assertTrue(rows)
        for row in rows:
            self.assertTrue(row[2].startswith('cmp-b'))
            self.assertNotIn('cmp-b12', row[2] + row[3])
        # The plan speaks of the selected zone only: its domains, and the
        # imbalance before and after, pooled over them.
        path = os.path.join(self.tmp.name, 'az2.json')
        self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--availability-zone', 'az2',
            '--output-file', path])
        with open(path) as f:
            document = json.load(f)
        domains = document['imbalance']['domains']
        self.assertEqual({'az2'}, {d['domain'].split('/')[0]
                                   for d in domains})
        for when in ('before', 'after'):
            pooled = (sum(d['hosts'] * d[when] ** 2 for d in domains)
                      / sum(d['hosts'] for d in domains)) ** 0.5
            self.assertAlmostEqual(pooled, document['imbalance'][when])

    def test_explain(self):
        names, rows = self.run_cmd(plan.PlanLeveller,
                                   ['--snapshot', 'demo', '--explain',
                                    'web1-0'])
        self.assertEqual(plan.EXPLAIN_COLUMNS, names)
        self.assertEqual(40, len(rows))
        self.assertEqual('current', rows[0][3])
        reasons = ' '.join(r[4] for r in rows)
        self.assertIn('anti-affinity group web-1', reasons)
        self.assertIn('availability zone', reasons)
        self.assertIn('may move', self.app.stderr.getvalue())
        self.assert_command_error(plan.PlanLeveller, [
            '--snapshot', 'demo', '--explain', 'nope'], 'no such server')

    def test_bad_input(self):
        for args, message in (
                (['--max-moves', '-1'], '--max-moves: must be >= 0 (got -1)'),
                (['--threshold', '-0.1'], '--threshold: must be >= 0'),
                (['--ceiling', '0'], '--ceiling: must be > 0 (got 0.0)'),
                (['--exclude-host', 'hv99'],
                 'exclude_hosts (--exclude-host): hv99: no such hypervisor'),
                (['--availability-zone', 'az9'], 'no such availability zone'),
                (['--weight', 'cpu=x'], "--weight cpu=x: must be a number (got 'x')"),
                (['--weight', 'cpu=0', '--weight', 'ram=0'],
                 'the cpu and ram weights cannot both be 0')):
            self.assert_command_error(plan.PlanLeveller,
                                      ['--snapshot', 'demo'] + args, message)
        self.assertRaises(base.ParserException, self.run_cmd,
                          plan.PlanLeveller, ['--max-moves', 'many'])


class TestTargetPlacement(CommandTest):
    def test_a_path_saved_as_a_placement_plan(self):
        path = os.path.join(self.tmp.name, 'plan.json')
        target = self.write('target.yaml', 'vm-0796: cmp-a02\n'
                            'vm-0678: cmp-a01.cloud.example.net\n')
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--target-placement', target,
            '--output-file', path])
        self.assertEqual({'vm-0796', 'vm-0678'}, {r[1] for r in rows})
        self.assertTrue(all(r[6].startswith('target placement; ')
                            for r in rows))
        saved = plan_mod.read(path)
        self.assertEqual(kinds.PLACEMENT.name, saved.kind)
        self.assertIn('Path to the target placement: 2 live migrations (0 '
                      'parking)', self.app.stderr.getvalue())

    def test_implausible_metrics_judged_on_allocations(self):
        """hv2 reads full: moving a server there passes the ceiling, unless
        the guard finds hv2's metrics implausible: then its domain is
        judged on Placement allocations, where hv2 has room."""
        doc = test_guard.cloud()
        doc['hypervisors'][1]['metrics'].update(cpu=0.99, ram=0.99)
        doc['guard']['hypervisors']['hv2']['before'] = {'cpu': 0.99,
                                                        'ram': 0.99}
        target = self.write('target.yaml', 'hv1-s0: hv2\n')
        args = ['--snapshot', self.write('s.json', doc),
                '--target-placement', target]
        self.assert_command_error(plan.PlanLeveller, args, 'ceiling')
        doc['guard']['hypervisors']['hv2']['cpus'] = 0
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', self.write('s.json', doc),
            '--target-placement', target])
        self.assertEqual([('hv1-s0', 'hv1', 'hv2')],
                         [r[1:4] for r in rows])
        self.assertIn('Implausible metrics: az1/Gen1: capacity: node_exporter '
                      'of hv2 shows no CPUs (Placement: 32); destinations '
                      'there are chosen from Placement allocations',
                      self.app.stderr.getvalue())

    def test_errors(self):
        good = self.write('good.yaml', 'vm-0796: cmp-a02\n')
        for content, message in (
                (None, 'missing.yaml does not exist'),
                ('a: [b', 't.yaml: not valid YAML'),
                ('- vm-0796', 'expected a mapping of server'),
                ('vm-9999: cmp-a02', 'vm-9999: no such server'),
                ('vm-0796: cmp-b02', 'the target placement cannot be '
                 'reached: vm-0796 cannot go to cmp-b02.cloud.example.net: '
                 'availability zone az2 differs')):
            path = self.write('t.yaml', content) if content else \
                os.path.join(self.tmp.name, 'missing.yaml')
            self.assert_command_error(plan.PlanLeveller, [
                '--snapshot', 'demo', '--target-placement', path], message)
        self.assert_command_error(plan.PlanLeveller, [
            '--snapshot', 'demo', '--target-placement', good, '--explain',
            'vm-0796'], '--explain and --target-placement do not go together')


class TestSnapshot(CommandTest):

    def test_writes_the_live_state(self):
        hyps, servers = b.three_hosts()
        document = b.document(hyps, servers)
        path = os.path.join(self.tmp.name, 'live.json')
        with self.live(document):
            names, values = self.run_cmd(snapshot.SnapshotLeveller,
                                         ['--output-file', path])
        self.assertEqual(('File', 'Taken At', 'Hypervisors', 'Servers',
                          'Server Groups', 'Migrations'), names)
        self.assertEqual((path, b.TAKEN_AT, 3, 8, 0, 0), values)
        self.assertEqual(3, len(snapshot_io.load(path).hypervisors))

    def test_errors(self):
        self.assertRaises(base.ParserException, self.run_cmd,
                          snapshot.SnapshotLeveller, [])
        hyps, servers = b.three_hosts()
        with self.live(b.document(hyps, servers)):
            self.assert_command_error(
                snapshot.SnapshotLeveller,
                ['--output-file', os.path.join(self.tmp.name, 'no', 'x')],
                'the directory %s does not exist' % os.path.join(
                    self.tmp.name, 'no'))
        bad = b.document(hyps, servers)
        bad['servers'][0]['hypervisor'] = 'hv9'
        with self.live(bad):
            self.assert_command_error(
                snapshot.SnapshotLeveller,
                ['--output-file', os.path.join(self.tmp.name, 'y')],
                "unknown hypervisor 'hv9'")


class TestSettings(CommandTest):
    def show(self, args):
        names, rows = self.run_cmd(config_cmd.ShowConfig, args)
        self.assertEqual(('Setting', 'Value', 'Source'), names)
        return {name: (value.machine_readable(), source)
                for name, value, source in rows}

    def test_clouds_yaml_then_file_then_flags(self):
        self.clouds_yaml = {'threshold': '0.2', 'max_moves': '7',
                            'exclude_hosts': ['hv1'],
                            'prometheus': {'url': 'http://p:9090'}}
        path = self.write('leveller.yaml',
                          'leveller:\n  max_moves: 9\n  ceiling: 0.7\n')
        shown = self.show(['--config', path, '--ceiling', '0.6',
                           '--exclude-host', 'hv2', '--weight', 'cpu=2'])
        self.assertEqual((0.2, 'clouds.yaml (devcloud)'), shown['threshold'])
        self.assertEqual((9, '--config ' + path), shown['max_moves'])
        self.assertEqual((0.6, '--ceiling'), shown['ceiling'])
        self.assertEqual((['hv1', 'hv2'],
                          'clouds.yaml (devcloud) + --exclude-host'),
                         shown['exclude_hosts'])
        self.assertEqual((2.0, '--weight'), shown['weights.cpu'])
        self.assertEqual((64.0, "default"), shown["move_cost"])
        self.assertEqual(('http://p:9090', 'clouds.yaml (devcloud)'),
                         shown['prometheus.url'])
        # Unset queries show the PromQL the profile runs.
        self.assertIn('node_cpu_seconds_total',
                      shown['prometheus.queries.cpu'][0])

    def test_every_declared_flag_is_offered(self):
        offered = set()
        for cls in (plan.PlanLeveller, score.ScoreLeveller,
                    apply_cmd.ApplyLeveller, evacuate_cmd.EvacuateLeveller,
                    snapshot.SnapshotLeveller, config_cmd.ShowConfig):
            parser = cls(self.app, None).get_parser('leveller')
            offered.update(parser._option_string_actions)
        declared = {name for key in config.KEYS if key.flag
                    for name in (key.flag.name, key.flag.negative) if name}
        self.assertLessEqual(declared, offered)

    def test_secrets_are_masked(self):
        self.clouds_yaml = {'prometheus': {
            'url': 'https://ops:s3cret@p:9090', 'token': 'tok3n',
            'password': 'pw'}}
        shown = self.show([])
        self.assertEqual('https://ops:******@p:9090',
                         shown['prometheus.url'][0])
        self.assertEqual('******', shown['prometheus.token'][0])
        self.assertNotIn('s3cret', repr(shown))
        self.assertNotIn('tok3n', repr(shown))

    def test_utilisation_profile_has_no_pressure_queries(self):
        self.clouds_yaml = {'prometheus': {'profile': 'utilisation'}}
        shown = self.show([])
        self.assertIsNone(shown['prometheus.queries.cpu_pressure'][0])

    def test_bad_settings_are_command_errors(self):
        self.clouds_yaml = {'treshold': '0.1'}
        self.assert_command_error(
            config_cmd.ShowConfig, [],
            'clouds.yaml cloud devcloud: leveller: unknown setting treshold '
            '(did you mean threshold?)')
        self.clouds_yaml = {}
        for content, message in (
                ('max_moves: [1\n', 'not valid YAML'),
                ('- 1\n', 'the leveller settings must be a mapping')):
            path = self.write('bad.yaml', content)
            self.assert_command_error(config_cmd.ShowConfig,
                                      ['--config', path],
                                      '--config %s: %s' % (path, message))
        self.assert_command_error(config_cmd.ShowConfig,
                                  ['--config', '/nonexistent.yaml'],
                                  '--config file /nonexistent.yaml does not exist')

    def test_dates_in_a_config_file_are_windows(self):
        # Unquoted, YAML reads 2026-12-24 as a date and 2026-02-30 fails
        # its loader; both are text to the settings.
        path = self.write('freeze.yaml', 'windows:\n  blackout:\n'
                          '    - 2026-12-24\n    - 2026-12-31..2027-01-01\n')
        shown = self.show(['--config', path])
        self.assertEqual(['2026-12-24', '2026-12-31..2027-01-01'],
                         shown['windows.blackout'][0])
        path = self.write('bad.yaml', 'windows:\n  blackout: [2026-02-30]\n')
        self.assert_command_error(
            config_cmd.ShowConfig, ['--config', path],
            "--config %s: windows.blackout: must be windows such as" % path)
        self.assert_command_error(
            config_cmd.ShowConfig, ['--config', path],
            "('2026-02-30': '2026-02-30' is not a date: 2026-02 has 28 days)")

    def test_plan_uses_the_settings(self):
        self.clouds_yaml = {'threshold': 1}
        _, rows = self.run_cmd(plan.PlanLeveller, ['--snapshot', 'demo'])
        self.assertEqual([], rows)
        _, rows = self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--threshold', '0.05', '--max-moves', '2'])
        self.assertEqual(2, len(rows))

    def test_prometheus_flags(self):
        self.clouds_yaml = {'prometheus': {'url': 'http://p:9090'}}
        hyps, servers = b.three_hosts()
        with self.live(b.document(hyps, servers)):
            self.run_cmd(score.ScoreLeveller, [])
            self.run_cmd(score.ScoreLeveller, ['--prometheus-url', 'http://q'])
            self.run_cmd(score.ScoreLeveller, ['--no-prometheus'])
        self.assertEqual(['http://p:9090', 'http://q', ''],
                         [s['url'] for s in self.prometheus_settings])

    def test_hypervisors_without_metrics_can_be_left_out(self):
        hyps, servers = b.three_hosts()
        document = b.document(hyps, servers)
        document['hypervisors'][0]['metrics'] = {'cpu': 0.9, 'ram': 0.9}
        self.clouds_yaml = {'prometheus': {'url': 'http://p:9090',
                                           'no_metrics': 'exclude'}}
        with self.live(document):
            _, rows = self.run_cmd(plan.PlanLeveller, [])
        self.assertIn('Left out of balancing, no metrics '
                      '(prometheus.no_metrics: exclude): hv2, hv3',
                      self.app.stderr.getvalue())
        self.assertEqual([], rows)


class SimulatedNovaTest(CommandTest):
    """Commands that act on the cloud, over tests.unit.core's FakeNova."""

    def setUp(self):
        super().setUp()
        hyps, servers = test_executor.hot_cloud()
        self.nova = test_executor.FakeNova(hyps, servers, polls=1)
        self.clouds_yaml = {'apply': {
            'poll_interval': 0.1,
            'lock_file': os.path.join(self.tmp.name, 'apply.lock'),
            'journal': os.path.join(self.tmp.name, 'journal.jsonl')},
            'prometheus': {'password': 'pr0m-secret'}}
        patcher = mock.patch.multiple(migrating, actions_mod=mock.Mock(
            Actions=lambda *a, **kw: self.nova))
        patcher.start()
        self.addCleanup(patcher.stop)
        connect = mock.patch.object(common, 'open_connection',
                                    lambda app, effective, request_id: None)
        connect.start()
        self.addCleanup(connect.stop)

    def apply(self, args):
        cmd = apply_cmd.ApplyLeveller(self.app, None)
        parsed = self.check_parser(cmd, args, [])
        self.app.stdout = io.StringIO()
        code = cmd.run(parsed)
        return code, self.app.stdout.getvalue(), self.app.stderr.getvalue()

    def evacuate(self, args):
        cmd = evacuate_cmd.EvacuateLeveller(self.app, None)
        parsed = self.check_parser(cmd, args, [])
        self.app.stdout = io.StringIO()
        code = cmd.run(parsed)
        out = self.app.stdout.getvalue()
        return code, json.loads(out) if out.strip() else [], \
            self.app.stderr.getvalue()

    def journal(self):
        with open(os.path.join(self.tmp.name, 'journal.jsonl')) as f:
            return [json.loads(line) for line in f]


class TestApply(SimulatedNovaTest):
    """The command's guards, exit codes and journal."""

    def test_cron_mode_batch_one(self):
        code, out, err = self.apply(['--batch', '1', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        rows = json.loads(out)
        self.assertEqual('done', rows[0]['Status'])
        self.assertEqual({'not started'}, {r['Status'] for r in rows[1:]})
        self.assertIn(': done in', err)
        events = [e['event'] for e in self.journal()]
        self.assertEqual(['start', 'migrate', 'done'], events[:3])
        self.assertEqual('end', events[-1])
        self.assertEqual(1, len({e['request_id'] for e in self.journal()}))
        self.assertTrue(self.journal()[0]['request_id'].startswith('req-'))

    def with_aggregates(self):
        """Nova's os-aggregates (test_cloudlock's stand-in) behind the
        connection the run opens."""
        now = [datetime.datetime.now(datetime.timezone.utc)]
        aggregates = test_cloudlock.Aggregates(lambda: now)
        connect = mock.patch.object(
            common, 'open_connection', lambda app, effective, request_id:
            types.SimpleNamespace(compute=aggregates))
        connect.start()
        self.addCleanup(connect.stop)
        return aggregates

    def test_another_controllers_cloud_lock_refuses_the_run(self):
        aggregates = self.with_aggregates()
        cloudlock.CloudLock(aggregates, 600, 'ctl2 pid 7 req-1').acquire()
        code, out, err = self.apply(['--batch', '1', '--cloud-lock', '10m'])
        self.assertEqual(migrating.EXIT_REFUSED, code, err)
        self.assertIn('holds the cloud lock', err)
        self.assertIn('ctl2 pid 7 req-1', err)
        self.assertEqual(['refused'], [e['event'] for e in self.journal()])
        # Without the setting (empty) nothing is asked of it.
        code, out, err = self.apply(['--batch', '1', '--cloud-lock', ''])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)

    def test_a_run_takes_the_cloud_lock_and_a_dry_run_none(self):
        aggregates = self.with_aggregates()
        code, out, err = self.apply(['--batch', '1', '--cloud-lock', '10m',
                                     '--dry-run'])
        self.assertEqual({}, aggregates.found)
        self.clouds_yaml['apply']['cloud_lock'] = '10m'
        code, out, err = self.apply(['--batch', '1'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        (lock,) = aggregates.found.values()
        records = [e for e in self.journal() if e['event'] != 'note']
        run = records[-1]['request_id']
        self.assertIn(run, lock['metadata'][cloudlock.HOLDER])
        taken = [e for e in records if e['request_id'] == run]
        self.assertEqual(['cloud-lock', 'start'],
                         [e['event'] for e in taken[:2]])
        self.assertEqual(lock['metadata'][cloudlock.UNTIL], taken[0]['until'])

    def test_a_failed_move_exits_3_and_the_journal_says_so(self):
        plan_path = os.path.join(self.tmp.name, 'plan.json')
        the_plan = test_executor.planner.make_plan(
            self.nova.snapshot(), core_options.PlannerOptions())
        plan_mod.write(the_plan, plan_path)
        self.nova.behaviour[the_plan.moves[0].destination] = 'fail'
        code, out, err = self.apply([plan_path, '--max-parallel', '1',
                                     '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_PROBLEMS, code)
        rows = json.loads(out)
        self.assertEqual('failed', rows[0]['Status'])
        failed = [e for e in self.journal() if e['event'] == 'failed']
        self.assertEqual(the_plan.moves[0].server_id, failed[0]['server_id'])
        self.assertEqual(3, self.journal()[-1]['exit_code'])
        with open(os.path.join(self.tmp.name, 'journal.jsonl')) as f:
            self.assertNotIn('pr0m-secret', f.read())

    def test_keep_n_plus_one_from_the_flag_or_the_plan_file(self):
        hyps, servers = test_n_plus_one.tight_cloud()
        plain = os.path.join(self.tmp.name, 'plain.json')
        kept = os.path.join(self.tmp.name, 'kept.json')
        self.nova = test_executor.FakeNova(hyps, servers, polls=1)
        # Made without the option: g fills hv2, where A would go.
        the_plan = test_executor.planner.make_plan(
            self.nova.snapshot(), core_options.PlannerOptions())
        self.assertEqual(['g'], [m.server_name for m in the_plan.moves])
        plan_mod.write(the_plan, plain)
        plan_mod.write(dataclasses.replace(the_plan, options=dict(
            the_plan.options, keep_n_plus_one=True)), kept)
        metrics = os.path.join(self.tmp.name, 'leveller.prom')
        for args in ([plain, '--keep-n-plus-one'], [kept]):
            self.nova = test_executor.FakeNova(hyps, servers, polls=1)
            code, out, err = self.apply(args + ['-f', 'json',
                                                '--metrics-file', metrics])
            # Its only move skipped: not a success.
            self.assertEqual(apply_cmd.EXIT_ALL_SKIPPED, code, err)
            row, = json.loads(out)
            self.assertEqual('skipped', row['Status'], args)
            self.assertIn('would break N+1: losing hv1', row['Reason'])
            with open(metrics) as f:
                self.assertEqual(1, test_runmetrics.samples(f.read())[
                    'openstack_leveller_last_run_moves', frozenset({
                        'command': 'apply', 'status': 'skipped',
                        'reason': 'n_plus_one'}.items())])
        self.assertIn('The plan was made with keep_n_plus_one', err)
        self.nova = test_executor.FakeNova(hyps, servers, polls=1)
        code, out, err = self.apply([plain, '-f', 'json'])
        self.assertEqual('done', json.loads(out)[0]['Status'])

    def test_nothing_to_do(self):
        code, out, err = self.apply(['--threshold', '1', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code)
        self.assertEqual([], json.loads(out))
        self.assertIn('Nothing to do: imbalance is below the threshold', err)
        self.assertEqual([], self.nova.calls)

    def test_lock_held_refuses(self):
        lock = runfiles.Lock(os.path.join(self.tmp.name, 'apply.lock'))
        held = runfiles.Lock(lock.path)
        # flock is per open file: a second open of the same path conflicts.
        held.acquire()
        self.addCleanup(held.release)
        code, out, err = self.apply([])
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertIn('Refused: another leveller run holds the lock', err)
        self.assertIn('(process %d)' % os.getpid(), err)
        self.assertEqual([], self.nova.calls)

    def test_the_lock_is_held_for_the_whole_run(self):
        """A second run (another process) is refused while this one reads
        the cloud and while it migrates; it gets the lock once this one
        has ended. The same for evacuate."""
        path = os.path.join(self.tmp.name, 'apply.lock')
        seen = []

        def watched(call):
            def during(*args, **kwargs):
                if call.__name__ not in dict(seen):  # the first of each
                    seen.append((call.__name__,
                                 test_run_lock.second_run(path)))
                return call(*args, **kwargs)
            return during
        self.nova.snapshot = watched(self.nova.snapshot)
        self.nova.live_migrate = watched(self.nova.live_migrate)
        held = (False, 'another leveller run holds the lock %s (process %d)'
                % (path, os.getpid()))
        for run in (lambda: self.apply(['--batch', '1']),
                    lambda: self.evacuate(['hv1', '--max-parallel', '1', '-f',
                                           'json'])):
            del seen[:]
            self.assertEqual(0, run()[0])
            self.assertEqual([('snapshot', held), ('live_migrate', held)],
                             seen)
            self.assertEqual((True, ''), test_run_lock.second_run(path))

    def test_running_migrations_refuse(self):
        self.nova.migrations.append({
            'id': '7', 'server_id': 'id-web1', 'status': 'running',
            'migration_type': 'live-migration', 'source_compute': 'hv1',
            'dest_compute': 'hv2', 'created_at': b.TAKEN_AT})
        code, out, err = self.apply([])
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertIn('1 migration already running: id-web1 hv1 -> hv2 '
                      '(running)', err)
        self.assertEqual('refused', self.journal()[-1]['event'])

    def test_dry_run(self):
        code, out, err = self.apply(['--dry-run', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code)
        self.assertEqual({'would run'}, {r['Status'] for r in json.loads(out)})
        self.assertEqual([], self.nova.calls)

    def test_interrupted_while_reading_the_cloud(self):
        def interrupt():
            raise KeyboardInterrupt
        self.nova.snapshot = interrupt
        code, out, err = self.apply([])
        self.assertEqual(apply_cmd.EXIT_INTERRUPTED, code)
        self.assertEqual(['interrupted', 'end'], [e['event']
                                                  for e in self.journal()])
        self.assertEqual(130, self.journal()[-1]['exit_code'])

    def test_bad_plan_file(self):
        path = self.write('plan.json', '{"format": "nope"}')
        self.assert_command_error(apply_cmd.ApplyLeveller, [path],
                                  path)
        self.assertEqual([], self.nova.calls)


class TestApplyPlacement(SimulatedNovaTest):
    def test_a_parked_server_moves_on(self):
        self.nova = test_executor.FakeNova(
            [b.hypervisor('hv%d' % i, ram_gb=32) for i in (1, 2, 3)],
            [b.server('a', 'hv1', ram_gb=24), b.server('b', 'hv2', ram_gb=24),
             b.server('small', 'hv3', ram_gb=4)], polls=1)
        path = os.path.join(self.tmp.name, 'plan.json')
        plan_mod.write(paths.make_plan(
            self.nova.snapshot(), {'id-a': 'hv2', 'id-b': 'hv1'},
            core_options.PlannerOptions()), path)
        self.assert_command_error(
            apply_cmd.ApplyLeveller, [path],
            '%s is a path to a target placement (kind placement)' % path)
        self.assertEqual([], self.nova.calls)
        code, out, err = self.apply([path, '--placement-plan', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual([('a', 'hv3', 'done'), ('b', 'hv1', 'done'),
                          ('a', 'hv2', 'done')],
                         [(r['Server'], r['Destination'], r['Status'])
                          for r in json.loads(out)])

    def test_a_balancing_plan_edited_into_a_placement_keeps_every_check(self):
        # kind: placement turns off the cooldown and "it evens out the
        # load" only when the operator asks on the command line.
        path = os.path.join(self.tmp.name, 'plan.json')
        the_plan = test_executor.planner.make_plan(
            self.nova.snapshot(), core_options.PlannerOptions())
        document = plan_mod.to_document(the_plan)
        document['kind'] = kinds.PLACEMENT.name
        self.write('plan.json', json.dumps(document))
        self.assert_command_error(apply_cmd.ApplyLeveller, [path],
                                  '--placement-plan')
        self.assertEqual([], self.nova.calls)

    def test_placement_plan_flag_needs_a_placement_plan(self):
        path = os.path.join(self.tmp.name, 'plan.json')
        plan_mod.write(test_executor.planner.make_plan(
            self.nova.snapshot(), core_options.PlannerOptions()), path)
        self.assert_command_error(
            apply_cmd.ApplyLeveller, [path, '--placement-plan'],
            '--placement-plan: %s is a balance plan' % path)
        self.assert_command_error(
            apply_cmd.ApplyLeveller, ['--placement-plan'],
            '--placement-plan needs the plan file')
        self.assertEqual([], self.nova.calls)

    def test_a_kind_that_asks_brings_its_own_flag(self):
        # A goal of its own that skips checks of balancing, as a target
        # placement does: its declaration alone gives apply the flag that
        # runs a file of it, and the others' flags do not.
        shuffle = kinds.declare(dataclasses.replace(
            kinds.PLACEMENT, name='shuffle', title='a shuffle',
            asks=('--shuffle-plan', 'it shuffles', 'Run a shuffle plan')))
        self.addCleanup(kinds.BY_NAME.pop, shuffle.name)
        self.nova = test_executor.FakeNova(
            [b.hypervisor('hv%d' % i, ram_gb=32) for i in (1, 2, 3)],
            [b.server('a', 'hv1', ram_gb=8), b.server('b', 'hv2', ram_gb=8)],
            polls=1)
        document = plan_mod.to_document(paths.make_plan(
            self.nova.snapshot(), {'id-a': 'hv2', 'id-b': 'hv1'},
            core_options.PlannerOptions()))
        document['kind'] = shuffle.name
        path = self.write('plan.json', json.dumps(document))
        self.assert_command_error(
            apply_cmd.ApplyLeveller, [path],
            '%s is a shuffle (kind shuffle): it shuffles; run it with '
            '--shuffle-plan' % path)
        self.assert_command_error(
            apply_cmd.ApplyLeveller, [path, '--placement-plan'],
            '--placement-plan: %s is a shuffle plan, not a path to a '
            'target placement' % path)
        self.assertEqual([], self.nova.calls)
        code, out, err = self.apply([path, '--shuffle-plan', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual({'done'}, {r['Status'] for r in json.loads(out)})

    def test_placement_moves_keep_the_project_scope(self):
        self.nova = test_executor.FakeNova(
            [b.hypervisor('hv%d' % i, ram_gb=32) for i in (1, 2, 3)],
            [b.server('a', 'hv1', ram_gb=8, project_id='p2'),
             b.server('b', 'hv2', ram_gb=8)], polls=1)
        path = os.path.join(self.tmp.name, 'plan.json')
        plan_mod.write(paths.make_plan(
            self.nova.snapshot(), {'id-a': 'hv3', 'id-b': 'hv3'},
            core_options.PlannerOptions()), path)
        code, out, err = self.apply([path, '--placement-plan', '--project',
                                     'p1', '-f', 'json'])
        rows = {r['Server']: r for r in json.loads(out)}
        self.assertEqual('skipped', rows['a']['Status'])
        self.assertIn('project p2 is not among the selected projects',
                      rows['a']['Reason'])
        self.assertEqual('done', rows['b']['Status'])
        self.assertEqual([('live_migrate', 'id-b', b.compute_host('hv3'))],
                         [c for c in self.nova.calls
                          if c[0] == 'live_migrate'])


class TestEvacuate(SimulatedNovaTest):
    """Drain and restore."""

    def test_drain_disables_the_service_and_empties_the_host(self):
        code, rows, err = self.evacuate(['hv1', '--reason', 'RAM swap',
                                         '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_EMPTY, code, err)
        self.assertEqual(8, len(rows))
        self.assertEqual({'done'}, {r['Status'] for r in rows})
        self.assertEqual(('set_service', b.compute_host('hv1'), False,
                          'RAM swap'),
                         self.nova.calls[0])
        self.assertNotIn('hv1', {s['hypervisor']
                                 for s in self.nova.servers.values()})
        self.assertIn('Empty: hv1', err)

    def test_servers_that_stay_make_exit_3(self):
        self.nova.servers['id-web0']['locked'] = True
        code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_LEFT, code, err)
        stays = [r for r in rows if r['Status'] == 'stays']
        self.assertEqual(['web0'], [r['Server'] for r in stays])
        self.assertIn('locked', stays[0]['Reason'])
        self.assertIn('Not empty: hv1 (1 servers)', err)

    def test_dry_run_changes_nothing(self):
        code, rows, err = self.evacuate(['hv1', '--dry-run', '-f', 'json'])
        self.assertEqual(0, code, err)
        self.assertEqual({'would run'}, {r['Status'] for r in rows})
        self.assertEqual([], self.nova.calls)

    def test_no_wait_then_a_second_run_finishes_the_drain(self):
        code, rows, err = self.evacuate(['hv1', '--no-wait', '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_EMPTY, code, err)
        self.assertEqual(['started'] * 2 + ['not started'] * 6,
                         [r['Status'] for r in rows])
        self.assertIn('Started 2 migrations out of hv1; run "openstack '
                      'leveller evacuate hv1" to continue and wait', err)
        self.assertEqual(2, len(self.nova.running))
        self.assertEqual('disabled', self.nova.hyps[0]['service']['status'])
        # Time passing lets Nova finish what the first run started.
        ticks = mock.patch.object(evacuate_cmd.EvacuateLeveller, 'sleep',
                                  staticmethod(lambda s: [
                                      self.nova.server(i)
                                      for i in list(self.nova.running)]))
        with ticks:
            code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_EMPTY, code, err)
        self.assertIn('Waiting for 2 migrations already running out of hv1',
                      err)
        self.assertEqual(['done'] * 6, [r['Status'] for r in rows])
        self.assertNotIn('hv1', {s['hypervisor']
                                 for s in self.nova.servers.values()})

    def test_a_server_still_migrating_is_waited_for(self):
        # Nova closed the migration record; the server's task is not clear
        # yet. The drain waits for it instead of leaving it behind.
        server = self.nova.servers['id-web0']
        server.update(status='MIGRATING', task_state='migrating')

        def settle(seconds):
            server.update(status='ACTIVE', task_state=None)
        with mock.patch.object(evacuate_cmd.EvacuateLeveller, 'sleep',
                               staticmethod(settle)):
            code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_EMPTY, code, err)
        self.assertEqual({'done'}, {r['Status'] for r in rows}, rows)
        self.assertIn('web0', [r['Server'] for r in rows])
        self.assertIn('Waiting for 1 server still migrating out of hv1', err)

    def test_another_hosts_migration_still_refuses(self):
        self.nova.live_migrate('id-web0', b.compute_host('hv2'))
        self.nova.servers['id-web0']['hypervisor'] = 'hv3'  # out of hv3
        self.nova.migrations[-1]['source_compute'] = b.compute_host('hv3')
        code, rows, err = self.evacuate(['hv1'])
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertIn('1 migration already running', err)

    def test_no_wait_cannot_cold_migrate(self):
        self.assert_command_error(
            evacuate_cmd.EvacuateLeveller,
            ['hv1', '--no-wait', '--cold-migrate-stopped'],
            '--no-wait cannot be used with --cold-migrate-stopped')

    def test_refusals_before_anything_moves(self):
        self.nova.hyps[0]['service'] = {'status': 'enabled', 'state': 'down'}
        code, rows, err = self.evacuate(['hv1'])
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertIn('openstack server evacuate', err)
        self.nova.hyps[0]['service'] = {'status': 'enabled', 'state': 'up'}
        code, rows, err = self.evacuate(['hv1', 'hv2', 'hv3', 'hv4'])
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertIn('8 servers fit nowhere', err)
        self.assertIn('nothing was moved', err)
        self.assertEqual([], self.nova.calls)
        self.assert_command_error(evacuate_cmd.EvacuateLeveller, ['hv9'],
                                  'hv9: no such hypervisor')

    def test_n_plus_one(self):
        # hv1's 96 GiB into hv2-hv4 (3 x 128): losing one more leaves 96
        # GiB for 256 free: fine. Drain two hosts and it is not.
        self.nova.servers.update({
            'id-x%d' % i: b.server('x%d' % i, 'hv2', vcpus=4, ram_gb=12)
            for i in range(8)})
        code, rows, err = self.evacuate(['hv1', 'hv2', '--keep-n-plus-one'])
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertIn('after this drain az1/Gen1 has no N+1 headroom: losing',
                      err)
        self.assertEqual([], self.nova.calls)
        code, rows, err = self.evacuate(['hv1', 'hv2', '--dry-run', '-f',
                                         'json'])
        self.assertEqual(0, code)
        self.assertIn('Warning: after this drain az1/Gen1 has no N+1', err)

    def test_n_plus_k(self):
        # hv1's 8 servers (96 GiB) spread over hv2-hv4: any two of those
        # can go, not all three.
        code, rows, err = self.evacuate(['hv1', '--dry-run', '--headroom',
                                         '2', '-f', 'json'])
        self.assertEqual(0, code)
        self.assertNotIn('headroom', err)
        code, rows, err = self.evacuate(['hv1', '--headroom', '3',
                                         '--keep-n-plus-one'])
        self.assertEqual(apply_cmd.EXIT_REFUSED, code)
        self.assertIn('after this drain az1/Gen1 has no N+3 headroom: only '
                      '3 hypervisors', err)
        self.assertEqual([], self.nova.calls)

    def test_restore_moves_stopped_servers_back_cold(self):
        self.nova.servers['id-web0']['status'] = 'SHUTOFF'
        code, rows, err = self.evacuate(['hv1', '--cold-migrate-stopped',
                                         '-f', 'json'])
        self.assertEqual(0, code, err)
        code, rows, err = self.evacuate(['hv1', '--restore', '--move-back',
                                         '-f', 'json'])
        self.assertEqual(0, code, err)  # restored; the stopped one skipped
        back = {r['Server']: r for r in rows}
        self.assertEqual('skipped', back['web0']['Status'])
        self.assertIn('--cold-migrate-stopped', back['web0']['Reason'])
        code, rows, err = self.evacuate(['hv1', '--restore', '--move-back',
                                         '--cold-migrate-stopped', '-f',
                                         'json'])
        self.assertEqual(0, code, err)
        self.assertEqual([('web0', 'done')], [(r['Server'], r['Status'])
                                              for r in rows])
        self.assertEqual('hv1', self.nova.servers['id-web0']['hypervisor'])
        self.assertEqual('SHUTOFF', self.nova.servers['id-web0']['status'])
        self.assertEqual(2, self.nova.calls.count(('confirm', 'id-web0')))

    def test_move_back_needs_restore(self):
        self.assert_command_error(
            evacuate_cmd.EvacuateLeveller, ['hv1', '--move-back'],
            '--move-back works with --restore only')
        self.assertEqual([], self.nova.calls)

    def test_restore_is_journalled_like_a_drain(self):
        code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        code, rows, err = self.evacuate(['hv1', '--restore', '--move-back',
                                         '-f', 'json'])
        self.assertEqual(0, code, err)
        journal = self.journal()
        restore = [e for e in journal if e['event'] == 'start'][-1]
        self.assertEqual((['hv1'], True, 8), (
            restore['restore'], restore['move_back'], restore['moves']))
        after = journal[journal.index(restore):]
        self.assertEqual(['start', 'enable-service'],
                         [e['event'] for e in after[:2]])
        self.assertEqual(('end', 0), (after[-1]['event'],
                                      after[-1]['exit_code']))
        self.assertEqual(8, sum(1 for e in after if e['event'] == 'done'))
        # Without --move-back: the service, between a start and an end.
        code, rows, err = self.evacuate(['hv1', '--restore'])
        self.assertEqual(['start', 'enable-service', 'end'],
                         [e['event'] for e in self.journal()[-3:]])

    def test_a_cold_drain_checks_saturation_again(self):
        """Planned with 22.4 of hv2's 32 threads busy, big (idle) and live
        (8 threads) go there and the stopped server to hv3, one at a time.
        By the time live's move starts hv2 has 25.6 busy: it is skipped;
        the stopped server still goes, cold."""
        hyps, servers = test_drain.busy_neighbour_cloud(0.7)
        servers.append(b.server('big', 'hv1', ram_gb=40, cpu=0.0))
        self.nova = test_executor.FakeNova(hyps, servers, polls=1)
        read = self.nova.snapshot

        def busier(moves=None):
            if moves is not None:  # the re-read before a later move
                self.nova.hyps[1]['metrics']['cpu'] = 0.8
            return read(moves)
        self.nova.snapshot = busier
        code, rows, err = self.evacuate(['hv1', '--cold-migrate-stopped',
                                         '--max-parallel', '1', '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_LEFT, code, err)
        found = {r['Server']: (r['To'], r['Status']) for r in rows}
        self.assertEqual({'big': ('hv2', 'done'), 'live': ('hv2', 'skipped'),
                          'stopped': ('hv3', 'done')}, found)
        self.assertEqual('hv2: CPU would be saturated: its servers would '
                         'ask for 33.6 of its 32 threads (25.6 before this '
                         'server)', next(r['Reason'] for r in rows
                                         if r['Server'] == 'live'))
        self.assertEqual('hv1', self.nova.servers['id-live']['hypervisor'])
        self.assertEqual('hv3', self.nova.servers['id-stopped']['hypervisor'])

    def test_the_hosts_named_are_the_hosts_drained(self):
        """hv1 beside hv10 and hv11 (az2): draining and restoring hv1
        touch neither; hv10's servers, drained first, do not come back to
        hv1; and once hv1 is gone from Nova its name drains nothing."""
        hyps, servers = test_executor.hot_cloud()
        hyps += [b.hypervisor('hv10', az='az2'),
                 b.hypervisor('hv11', az='az2')]
        servers += [b.server('ten%d' % i, 'hv10', vcpus=4, ram_gb=12)
                    for i in range(2)]
        self.nova = test_executor.FakeNova(hyps, servers, polls=1)
        code, rows, err = self.evacuate(['hv10', '-f', 'json'])
        self.assertEqual(0, code, err)
        self.assertEqual({'ten0', 'ten1'}, {r['Server'] for r in rows})
        code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        self.assertEqual(0, code, err)
        self.assertEqual({'web%d' % i for i in range(8)},
                         {r['Server'] for r in rows})
        code, rows, err = self.evacuate(['hv1', '--restore', '--move-back',
                                         '-f', 'json'])
        self.assertEqual(0, code, err)
        self.assertEqual({('web%d' % i, 'done') for i in range(8)},
                         {(r['Server'], r['Status']) for r in rows})
        where = {s['name']: s['hypervisor'] for s in self.nova.servers.values()}
        self.assertEqual({'hv11'}, {where['ten0'], where['ten1']})
        self.assertEqual(
            {'hv1': 'enabled', 'hv10': 'disabled', 'hv11': 'enabled'},
            {h['name']: h['service']['status'] for h in self.nova.hyps
             if h['name'] in ('hv1', 'hv10', 'hv11')})
        # hv1 taken out of Nova (and hv11 replaced by hv20): its name is
        # no other hypervisor's, though it begins hv10's alone.
        self.nova = test_executor.FakeNova(
            [h for h in hyps if h['name'] not in ('hv1', 'hv11')] + [
                b.hypervisor('hv20', az='az2')],
            [s for s in servers if s['hypervisor'] != 'hv1'], polls=1)
        error = self.assertRaises(exceptions.CommandError, self.evacuate,
                                  ['hv1', '-f', 'json'])
        self.assertIn('hv1: no such hypervisor or compute host', str(error))
        self.assertEqual([], self.nova.calls)

    def test_waits_use_the_commands_clock(self):
        # A migration out of hv1 that never ends: the drain waits for it
        # on its own clock, then refuses, without sleeping for real.
        self.nova.live_migrate('id-web0', b.compute_host('hv2'))
        self.nova.behaviour['hv2'] = 'stuck'
        now = [0.0]
        slept = []

        def sleep(seconds):
            slept.append(seconds)
            now[0] += seconds
        with mock.patch.multiple(evacuate_cmd.EvacuateLeveller,
                                 clock=staticmethod(lambda: now[0]),
                                 sleep=staticmethod(sleep)):
            code, rows, err = self.evacuate(['hv1', '--timeout', '30'])
        self.assertEqual(migrating.EXIT_REFUSED, code, err)
        self.assertIn('already running out of hv1 after 30 s', err)
        self.assertAlmostEqual(30.0, sum(slept), delta=0.2)  # 0.1 s each

    def test_restore_moves_servers_back(self):
        code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        self.assertEqual(0, code, err)
        code, rows, err = self.evacuate(['hv1', '--restore', '--move-back',
                                         '-f', 'json'])
        self.assertEqual(0, code, err)
        self.assertEqual(('set_service', b.compute_host('hv1'), True,
                          mock.ANY),
                         [c for c in self.nova.calls
                          if c[0] == 'set_service'][-1])
        self.assertEqual({'done'}, {r['Status'] for r in rows})
        self.assertEqual(8, len(rows))
        self.assertEqual({'hv1'}, {s['hypervisor']
                                   for s in self.nova.servers.values()
                                   if s['name'].startswith('web')})


class WindowsTest(SimulatedNovaTest):
    """A clock to set, and a check that a refusal touched nothing."""

    def setUp(self):
        super().setUp()
        self.connections = []
        connect = mock.patch.object(
            common, 'open_connection',
            lambda *args: self.connections.append(args))
        connect.start()
        self.addCleanup(connect.stop)

    def at(self, instant):
        clock = mock.patch.object(migrating.MigratingCommand, 'now',
                                  staticmethod(lambda: instant))
        clock.start()
        self.addCleanup(clock.stop)

    def assert_untouched(self):
        """No read of the cloud, no connection, no lock taken."""
        self.assertEqual(0, self.nova.snapshots)
        self.assertEqual([], self.nova.calls)
        self.assertEqual([], self.connections)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name,
                                                     'apply.lock')))


class TestWindows(WindowsTest):
    """Maintenance windows, decided before the lock and any cloud call."""

    BLACKOUT = ('Refused: in the blackout window "Mon-Fri 08:00-18:00" '
                '(Europe/Berlin) until 2026-11-24 18:00 CET (2026-11-24 17:00 '
                'UTC)\n')

    def setUp(self):
        super().setUp()
        self.clouds_yaml['windows'] = {'time_zone': 'Europe/Berlin',
                                       'blackout': ['Mon-Fri 08:00-18:00']}
        # Tuesday 11:00 in Berlin: inside the blackout.
        self.at(datetime.datetime(2026, 11, 24, 10, 0, tzinfo=UTC))

    def test_apply_in_a_blackout_exits_5_and_touches_nothing(self):
        code, out, err = self.apply(['-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_WINDOW, code)
        self.assertEqual(5, code)
        self.assertEqual(self.BLACKOUT, err)
        self.assertEqual('', out)
        self.assert_untouched()
        record = self.journal()[-1]
        self.assertEqual(('refused', 5, '2026-11-24T17:00:00Z'), (
            record['event'], record['exit_code'], record['until']))
        self.assertEqual(self.BLACKOUT[len('Refused: '):-1],
                         record['reason'])

    def test_apply_after_the_blackout_runs(self):
        self.at(datetime.datetime(2026, 11, 24, 17, 0, tzinfo=UTC))
        code, out, err = self.apply(['--batch', '1', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual('done', json.loads(out)[0]['Status'])
        self.assertNotIn('blackout', err)
        self.assertGreater(self.nova.snapshots, 0)

    def test_apply_outside_every_allowed_window(self):
        self.clouds_yaml['windows'] = {'allowed': ['22:00-06:00']}
        code, out, err = self.apply([])
        self.assertEqual(apply_cmd.EXIT_WINDOW, code)
        self.assertEqual(
            'Refused: outside every allowed window ("22:00-06:00") until '
            '2026-11-24 22:00 UTC\n', err)
        self.assert_untouched()
        self.at(datetime.datetime(2026, 11, 24, 23, 0, tzinfo=UTC))
        code, out, err = self.apply(['--batch', '1'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)

    def test_a_plan_file_is_applied_with_a_note(self):
        plan_path = os.path.join(self.tmp.name, 'plan.json')
        plan_mod.write(test_executor.planner.make_plan(
            self.nova.snapshot(), core_options.PlannerOptions(max_moves=1)),
            plan_path)
        code, out, err = self.apply([plan_path, '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual(['done'], [r['Status'] for r in json.loads(out)])
        self.assertIn('Note: in the blackout window "Mon-Fri 08:00-18:00" '
                      '(Europe/Berlin) until 2026-11-24 18:00 CET '
                      '(2026-11-24 17:00 UTC); going ahead: the windows '
                      'hold apply without a plan file only', err)

    def test_a_dry_run_says_it_would_be_refused_and_shows_the_plan(self):
        code, out, err = self.apply(['--dry-run', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual({'would run'},
                         {r['Status'] for r in json.loads(out)})
        self.assertIn('Note: a run now would be refused (exit 5): in the '
                      'blackout window', err)
        self.assertEqual([], self.nova.calls)

    def test_evacuate_honours_blackouts_unless_told(self):
        code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_WINDOW, code)
        self.assertEqual(self.BLACKOUT, err)
        self.assertEqual([], rows)
        self.assert_untouched()
        self.app.stderr = io.StringIO()
        code, rows, err = self.evacuate(['hv1', '--ignore-windows',
                                         '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_EMPTY, code, err)
        self.assertEqual({'done'}, {r['Status'] for r in rows})
        self.assertIn('; going ahead: --ignore-windows', err)

    def test_a_restore_that_moves_nothing_is_not_held(self):
        code, rows, err = self.evacuate(['hv1', '--restore'])
        self.assertEqual(evacuate_cmd.EXIT_EMPTY, code, err)
        code, rows, err = self.evacuate(['hv1', '--restore', '--move-back'])
        self.assertEqual(evacuate_cmd.EXIT_WINDOW, code, err)

    def test_bad_windows_are_errors_before_anything(self):
        self.clouds_yaml['windows'] = {'blackout': ['0 25 * * *']}
        self.assert_command_error(
            apply_cmd.ApplyLeveller, [],
            "clouds.yaml cloud devcloud: leveller: windows.blackout: must be "
            "windows such as")
        self.assert_untouched()


class TestOneOffWindows(WindowsTest):
    """A one-off freeze holds apply and evacuate as the weekly windows do."""

    FREEZE = ('Refused: in the blackout window "2026-12-20..2027-01-04" '
              '(Europe/Berlin) until 2027-01-05 00:00 CET (2027-01-04 23:00 '
              'UTC)\n')

    def setUp(self):
        super().setUp()
        self.clouds_yaml['windows'] = {'time_zone': 'Europe/Berlin',
                                       'blackout': ['2026-12-20..2027-01-04']}
        # New Year's Eve, noon in Berlin: inside the freeze.
        self.at(datetime.datetime(2026, 12, 31, 11, 0, tzinfo=UTC))

    def test_apply_in_a_freeze_exits_5_and_touches_nothing(self):
        code, out, err = self.apply(['-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_WINDOW, code)
        self.assertEqual(self.FREEZE, err)
        self.assertEqual('', out)
        self.assert_untouched()
        record = self.journal()[-1]
        self.assertEqual(('refused', 5, '2027-01-04T23:00:00Z'), (
            record['event'], record['exit_code'], record['until']))

    def test_the_last_day_is_in_the_freeze(self):
        # 2027-01-04 23:59 in Berlin, then midnight.
        self.at(datetime.datetime(2027, 1, 4, 22, 59, tzinfo=UTC))
        code, out, err = self.apply([])
        self.assertEqual(apply_cmd.EXIT_WINDOW, code)
        self.assertEqual(self.FREEZE, err)
        self.assert_untouched()
        self.at(datetime.datetime(2027, 1, 4, 23, 0, tzinfo=UTC))
        code, out, err = self.apply(['--batch', '1', '-f', 'json'])
        self.assertEqual(apply_cmd.EXIT_DONE, code, err)
        self.assertEqual('done', json.loads(out)[0]['Status'])

    def test_evacuate_in_a_freeze(self):
        code, rows, err = self.evacuate(['hv1', '-f', 'json'])
        self.assertEqual(evacuate_cmd.EXIT_WINDOW, code)
        self.assertEqual(self.FREEZE, err)
        self.assert_untouched()

    def test_an_allowed_range_ahead_says_when_it_opens(self):
        self.clouds_yaml['windows'] = {
            'allowed': ['TZ=America/New_York 2027-01-09..2027-01-10']}
        code, out, err = self.apply([])
        self.assertEqual(apply_cmd.EXIT_WINDOW, code)
        self.assertEqual(
            'Refused: outside every allowed window ("TZ=America/New_York '
            '2027-01-09..2027-01-10") until 2027-01-09 00:00 EST (2027-01-09 '
            '05:00 UTC)\n', err)
        self.assert_untouched()

    def test_an_impossible_date_is_an_error_before_anything(self):
        self.clouds_yaml['windows'] = {'blackout': ['2026-02-30..2026-03-02']}
        self.assert_command_error(
            apply_cmd.ApplyLeveller, [],
            "clouds.yaml cloud devcloud: leveller: windows.blackout: must be "
            "windows such as \"Mon-Fri 08:00-18:00\", \"0 22 * * 5 for 56h\" "
            "or \"2026-12-20..2027-01-04\" ('2026-02-30..2026-03-02': "
            "'2026-02-30' is not a date: 2026-02 has 28 days)")
        self.assert_untouched()
