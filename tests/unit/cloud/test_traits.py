"""Traits read live from Placement, against the stand-in cloud.

The collector reads the traits of each hypervisor's resource provider and
the trait rule (core/rules/filters.py required_traits) checks flavors against
them; traits that cannot be read are unknown, never none: a flavor with
trait specs is refused there, every other flavor is not. Apply's targeted
re-read reads them again, so a trait added or removed since the plan is
seen before the move starts.
"""

import json
import unittest

import requests
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import actions
from osc_leveller.cloud import collect
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.rules import filters
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b
from tests.unit import standin
from tests.unit.cloud.test_refresh import move

NVME = 'CUSTOM_NVME'
AVX2 = 'HW_CPU_X86_AVX2'


def flavor(name, **specs):
    return {'name': name, 'vcpus': 2, 'ram': 4096, 'disk': 10,
            'extra_specs': specs}


def cloud():
    """hv1 hosts needs-nvme, no-nvme and plain; hv2 has CUSTOM_NVME,
    hv3 does not; hv4 has CUSTOM_NVME only on a child provider."""
    hyps = [b.hypervisor('hv1', traits=[AVX2]),
            b.hypervisor('hv2', traits=[NVME, AVX2]),
            b.hypervisor('hv3', traits=[AVX2]),
            b.hypervisor('hv4', traits=[AVX2])]
    servers = [
        b.server('needs-nvme', 'hv1', flavor=flavor(
            'nvme', **{'trait:' + NVME: 'required'})),
        b.server('no-nvme', 'hv1', flavor=flavor(
            'no-nvme', **{'trait:' + NVME: 'forbidden'})),
        b.server('plain', 'hv1', flavor=flavor('plain'))]
    return b.document(hyps, servers)


CHILDREN = {'hv4': [{'name': 'hv4_nvme0', 'traits': [NVME],
                     'inventories': {'CUSTOM_DISK_NVME': {'total': 2}}}]}


def verdicts(document):
    """{(server, hypervisor): the trait rule's reason, or None}."""
    snap = snapshot_io.parse(document)
    rules = filters.Rules(snap, opts.PlannerOptions())
    state = state_mod.new_state(snap)
    return {(s.name, h.name): filters.required_traits(s, h, state, rules)
            for s in snap.servers for h in snap.hypervisors
            if h.name != s.hypervisor}


def uuid_of(name):
    return standin.derived_uuid('hypervisor', name)


class TestStandInTraits(unittest.TestCase):
    """GET and PUT /resource_providers/{uuid}/traits as Placement answers
    them (placement/handlers/trait.py)."""

    def setUp(self):
        self.cloud = standin.StandIn(cloud(), child_providers=CHILDREN)
        self.cloud.start()
        self.addCleanup(self.cloud.stop)
        self.conn = self.cloud.connection()

    def get(self, uuid, version):
        return requests.get(
            '%s/resource_providers/%s/traits' % (self.cloud.placement_url,
                                                 uuid),
            headers={'X-Auth-Token': self.cloud.token(),
                     'OpenStack-API-Version': 'placement ' + version})

    def put(self, uuid, body, version='1.6'):
        return requests.put(
            '%s/resource_providers/%s/traits' % (self.cloud.placement_url,
                                                 uuid),
            data=json.dumps(body),
            headers={'X-Auth-Token': self.cloud.token(),
                     'Content-Type': 'application/json',
                     'OpenStack-API-Version': 'placement ' + version})

    def test_the_sdk_reads_and_sets_them(self):
        get = self.conn.placement.get_resource_provider_trait
        found, stale = get(uuid_of('hv2')), get(uuid_of('hv2'))
        self.assertEqual(([NVME, AVX2], 1), (
            sorted(found.traits), found.resource_provider_generation))
        changed = self.conn.placement.set_resource_provider_trait(
            found, traits=[AVX2])
        self.assertEqual(([AVX2], 2), (
            changed.traits, changed.resource_provider_generation))
        self.assertEqual([AVX2], self.get(uuid_of('hv2'), '1.6').json()[
            'traits'])
        # Set at the generation read before: someone changed them since.
        with self.assertRaises(sdk_exc.ConflictException):
            self.conn.placement.set_resource_provider_trait(
                stale, traits=[NVME])
        self.assertEqual([], self.cloud.errors)

    def test_versions_unknown_providers_and_children(self):
        self.assertEqual(404, self.get(uuid_of('hv2'), '1.5').status_code)
        answer = self.get(uuid_of('hv2'), '1.14')
        self.assertEqual({'traits': [NVME, AVX2],
                          'resource_provider_generation': 1}, answer.json())
        self.assertNotIn('Last-Modified', answer.headers)
        answer = self.get(uuid_of('hv2'), '1.15')
        self.assertEqual('no-cache', answer.headers['Cache-Control'])
        self.assertIn('GMT', answer.headers['Last-Modified'])
        missing = self.get('4c1f3a3e-0000-4000-8000-000000000000', '1.6')
        self.assertEqual(404, missing.status_code)
        self.assertIn('No resource provider with uuid', missing.json()[
            'errors'][0]['detail'])
        child = standin.derived_uuid('child', 'hv4_nvme0')
        self.assertEqual([NVME], self.get(child, '1.6').json()['traits'])

    def test_put_checks_the_body_and_the_names(self):
        uuid = uuid_of('hv3')
        for body, status in (
                ({'traits': [NVME]}, 400),  # no generation
                ({'traits': NVME, 'resource_provider_generation': 1}, 400),
                ({'traits': [''], 'resource_provider_generation': 1}, 400),
                ({'traits': ['nvme'], 'resource_provider_generation': 1},
                 400),  # no such trait
                ({'traits': [NVME], 'resource_provider_generation': 7},
                 409)):
            with self.subTest(body):
                self.assertEqual(status, self.put(uuid, body).status_code)
        self.assertEqual(404, self.put(uuid, {
            'traits': [NVME], 'resource_provider_generation': 1},
            version='1.5').status_code)
        answer = self.put(uuid, {'traits': [NVME, AVX2, NVME],
                                 'resource_provider_generation': 1})
        self.assertEqual({'traits': [NVME, AVX2],
                          'resource_provider_generation': 2}, answer.json())


class TestCollectTraits(unittest.TestCase):
    def collect(self, *faults, children=None):
        with standin.StandIn(cloud(), child_providers=children) as sim:
            for fault in faults:
                sim.fault(*fault)
            document = collect.Collector(sim.connection(),
                                         retries=0).collect()
            self.assertEqual([], sim.errors)
            counts = sim.counts
        return document, counts

    def test_read_for_each_hypervisor_and_checked(self):
        document, counts = self.collect()
        self.assertEqual({'hv1': [AVX2], 'hv2': [NVME, AVX2],
                          'hv3': [AVX2], 'hv4': [AVX2]},
                         {h['name']: h['traits']
                          for h in document['hypervisors']})
        self.assertEqual(4, counts[
            'placement', 'GET', '/resource_providers/{id}/traits'])
        found = verdicts(document)
        self.assertIsNone(found['needs-nvme', 'hv2'])
        self.assertEqual('resource provider hv3 lacks trait CUSTOM_NVME '
                         'required by flavor nvme', found['needs-nvme', 'hv3'])
        self.assertEqual('resource provider hv2 has trait CUSTOM_NVME '
                         'forbidden by flavor no-nvme',
                         found['no-nvme', 'hv2'])
        self.assertIsNone(found['no-nvme', 'hv3'])

    def test_a_childs_traits_do_not_count_and_are_not_read(self):
        # Placement matches the traits of the providers serving a group's
        # resources; hv4's child serves none of a movable server's.
        document, counts = self.collect(children=CHILDREN)
        self.assertEqual(4, counts[
            'placement', 'GET', '/resource_providers/{id}/traits'])
        found = verdicts(document)
        self.assertIn('hv4 lacks trait CUSTOM_NVME',
                      found['needs-nvme', 'hv4'])
        self.assertIsNone(found['no-nvme', 'hv4'])

    def test_unreadable_traits_refuse_trait_flavors_only(self):
        path = '/resource_providers/%s/traits' % uuid_of('hv2')
        for kind, why in (
                ('status:503', 'HTTP 503'),
                ('status:404', 'Not Found'),
                ('status:403', 'Forbidden'),
                ('non-json', 'the answer is not JSON'),
                ('shape:null', 'unexpected shape'),
                ('shape:string', 'unexpected shape'),
                ('shape:items', '"unexpected" is not a trait name'),
                ('reset', 'no connection')):
            with self.subTest(kind):
                document, _ = self.collect(('placement', path, kind))
                hv2 = next(h for h in document['hypervisors']
                           if h['name'] == 'hv2')
                self.assertIsNone(hv2['traits'])
                note = document['source']['note']
                self.assertIn('traits not read, flavors with trait extra '
                              'specs do not move to them: hv2 (', note)
                self.assertIn(why, note)
                found = verdicts(document)
                for server in ('needs-nvme', 'no-nvme'):
                    self.assertIn('traits of resource provider hv2 are '
                                  'unknown (not read from Placement): '
                                  'cannot check trait CUSTOM_NVME',
                                  found[server, 'hv2'])
                self.assertIsNone(found['plain', 'hv2'])
                # The others were read.
                self.assertEqual([AVX2], next(
                    h['traits'] for h in document['hypervisors']
                    if h['name'] == 'hv3'))

    def test_answers_that_are_not_trait_lists(self):
        for traits, why in (
                (['hw_cpu_x86_avx2'], '"hw_cpu_x86_avx2" is not a trait '
                 'name'),
                ([AVX2, 7], '7 is not a trait name'),
                (['A' * 256], 'is not a trait name'),
                (['CUSTOM_%d' % i for i in range(1001)],
                 '1001 traits, more than the 1000'),
                ([[AVX2]], '["HW_CPU_X86_AVX2"] is not a trait name')):
            with self.subTest(why), standin.StandIn(cloud()) as sim:
                sim._provider_index[uuid_of('hv3')]['traits'] = traits
                document = collect.Collector(sim.connection(),
                                             retries=0).collect()
                hv3 = next(h for h in document['hypervisors']
                           if h['name'] == 'hv3')
                self.assertIsNone(hv3['traits'])
                self.assertIn(why, document['source']['note'])
                snapshot_io.parse(document)  # a valid snapshot all the same

    def test_the_limit_is_the_snapshots(self):
        from osc_leveller.core.model import validation
        schema = validation.load_schema('snapshot-v1')
        traits = schema['$defs']['hypervisor']['properties']['traits']
        self.assertEqual(collect.MAX_TRAITS, traits['maxItems'])


class TestRecheck(unittest.TestCase):
    """A trait changed after the plan: the move is checked against the
    traits read again, before it starts."""

    def test_the_targeted_read_reads_them_as_a_whole_read(self):
        with standin.StandIn(cloud()) as sim:
            acts = actions.Actions(sim.connection())
            acts.snapshot()
            rpt = acts.conn.placement.get_resource_provider_trait(
                uuid_of('hv3'))
            acts.conn.placement.set_resource_provider_trait(
                rpt, traits=[NVME, AVX2])
            sim.reset_counts()
            snap = acts.snapshot(moves=[move('needs-nvme', 'hv1', 'hv3')])
            self.assertEqual(frozenset({AVX2, NVME}),
                             snap.hypervisor('hv3').traits)
            # hv1 and hv3, read again; nothing else.
            self.assertEqual(2, sim.counts[
                'placement', 'GET', '/resource_providers/{id}/traits'])

    def run_moves(self, sim, acts, moves, change):
        options = opts.PlannerOptions(cooldown_hours=0.0)
        runner = executor.Executor(
            acts, options, executor.ApplyOptions(max_parallel=1,
                                                 poll_interval=0.0,
                                                 stop_on_error=False),
            sleep=lambda seconds: change and change.pop(0)())
        return runner.run(moves, snapshot=acts.snapshot()).results

    def second_move(self, second, change):
        """plain moves first; change(sim, acts) happens while it runs;
        the result of the second move, checked against a targeted read."""
        with standin.StandIn(cloud()) as sim:
            acts = actions.Actions(sim.connection())
            results = self.run_moves(
                sim, acts, [move('plain', 'hv1', 'hv4'), second],
                [lambda: change(sim, acts)])
            self.assertEqual([], sim.errors)
        self.assertEqual(executor.DONE, results[0].status)
        return results[1]

    def set_traits(self, acts, name, traits):
        rpt = acts.conn.placement.get_resource_provider_trait(uuid_of(name))
        acts.conn.placement.set_resource_provider_trait(rpt, traits=traits)

    def test_a_required_trait_removed_since_the_plan(self):
        result = self.second_move(
            move('needs-nvme', 'hv1', 'hv2', wave=2),
            lambda sim, acts: self.set_traits(acts, 'hv2', [AVX2]))
        self.assertEqual(executor.SKIPPED, result.status)
        self.assertIn('resource provider hv2 lacks trait CUSTOM_NVME',
                      result.reason)

    def test_a_forbidden_trait_added_since_the_plan(self):
        result = self.second_move(
            move('no-nvme', 'hv1', 'hv3', wave=2),
            lambda sim, acts: self.set_traits(acts, 'hv3', [NVME, AVX2]))
        self.assertEqual(executor.SKIPPED, result.status)
        self.assertIn('resource provider hv3 has trait CUSTOM_NVME '
                      'forbidden', result.reason)

    def test_traits_unreadable_at_the_recheck(self):
        result = self.second_move(
            move('no-nvme', 'hv1', 'hv3', wave=2),
            lambda sim, acts: sim.fault(
                'placement', '/resource_providers/%s/traits' % uuid_of(
                    'hv3'), 'status:503'))
        self.assertEqual(executor.SKIPPED, result.status)
        self.assertIn('traits of resource provider hv3 are unknown',
                      result.reason)

    def test_unchanged_traits_let_it_go(self):
        result = self.second_move(
            move('no-nvme', 'hv1', 'hv3', wave=2),
            lambda sim, acts: self.set_traits(acts, 'hv2', [AVX2]))
        self.assertEqual(executor.DONE, result.status)


if __name__ == '__main__':
    unittest.main()
