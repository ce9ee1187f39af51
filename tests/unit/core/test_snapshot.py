import collections
import copy
import dataclasses
import datetime
import gc
import json
import os
import tempfile
import unittest
from unittest import mock

from osc_leveller.core.model import model
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b


class TestDemo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.snap = snapshot_io.load('demo')

    def test_shape(self):
        snap = self.snap
        self.assertEqual(40, len(snap.hypervisors))
        self.assertEqual({'az1', 'az2'},
                         {h.availability_zone for h in snap.hypervisors})
        self.assertEqual(3, len({h.cpu_model for h in snap.hypervisors}))
        self.assertGreaterEqual(len(snap.servers), 750)
        self.assertGreaterEqual(len({s.flavor.name for s in snap.servers}), 8)
        policies = collections.Counter(g.policy for g in snap.server_groups)
        self.assertGreaterEqual(policies['anti-affinity'], 5)
        self.assertGreaterEqual(policies['affinity'], 1)
        disabled = [h for h in snap.hypervisors if not h.service.usable]
        self.assertEqual(1, len(disabled))
        self.assertTrue(disabled[0].service.disabled_reason)

    def test_some_servers_cannot_move(self):
        rules = filters.Rules(self.snap, opts.PlannerOptions())
        reasons = [policy.BALANCE.why_not(s, rules) for s in self.snap.servers]
        kinds = {r.split(' ')[0] for r in reasons if r}
        for expected in ('status', 'task_state', 'locked', 'cannot',
                         'opted', 'migrated'):
            self.assertIn(expected, kinds)

    def test_a_couple_of_hot_hosts(self):
        hot = [h for h in self.snap.hypervisors if h.metrics.cpu > 0.9]
        self.assertEqual(2, len(hot))
        self.assertTrue(all(h.metrics.cpu_pressure > 0 for h in hot))

    def test_usages_match_servers(self):
        for hyp in self.snap.hypervisors:
            ram = sum(s.resources.get(model.MEMORY_MB, 0)
                      for s in self.snap.servers_on(hyp.name))
            self.assertEqual(ram, hyp.usage(model.MEMORY_MB))
            self.assertLessEqual(ram, hyp.capacity(model.MEMORY_MB))


class TestRoundTrip(unittest.TestCase):
    def test_document_round_trip(self):
        snap = snapshot_io.load('demo')
        again = snapshot_io.parse(json.loads(json.dumps(
            snapshot_io.to_document(snap))))
        self.assertEqual(snap.hypervisors, again.hypervisors)
        self.assertEqual(snap.servers, again.servers)
        self.assertEqual(snap.server_groups, again.server_groups)
        self.assertEqual(snap.migrations, again.migrations)
        self.assertEqual(snap.taken_at, again.taken_at)


class TestTraits(unittest.TestCase):
    """A list of traits is what Placement said; no list is unknown, which
    the trait rule refuses (core/rules/filters.py required_traits)."""

    def document(self):
        hyps, servers = b.three_hosts()
        doc = copy.deepcopy(b.document(hyps, servers))
        doc['hypervisors'][0]['traits'] = ['HW_CPU_X86_AVX2', 'CUSTOM_NVME']
        doc['hypervisors'][1]['traits'] = []
        doc['hypervisors'][2]['traits'] = None
        return doc

    def test_known_empty_and_unknown_round_trip(self):
        snap = snapshot_io.parse(self.document())
        self.assertEqual([frozenset({'HW_CPU_X86_AVX2', 'CUSTOM_NVME'}),
                          frozenset(), None],
                         [h.traits for h in snap.hypervisors])
        written = json.loads(json.dumps(snapshot_io.to_document(snap)))
        self.assertEqual([['CUSTOM_NVME', 'HW_CPU_X86_AVX2'], [], None],
                         [h['traits'] for h in written['hypervisors']])
        self.assertEqual(snap.hypervisors,
                         snapshot_io.parse(written).hypervisors)

    def test_an_older_snapshot_without_traits_loads_them_unknown(self):
        doc = self.document()
        for hyp in doc['hypervisors']:
            del hyp['traits']
        snap = snapshot_io.parse(doc)
        self.assertEqual([None] * 3, [h.traits for h in snap.hypervisors])

    def test_unknown_and_empty_traits_differ_in_the_fingerprint(self):
        # A plan made while traits were unknown is not the plan of a
        # cloud whose hypervisors have none.
        doc = self.document()
        unknown = plan_mod.fingerprint(snapshot_io.parse(doc))
        doc['hypervisors'][2]['traits'] = []
        self.assertNotEqual(unknown,
                            plan_mod.fingerprint(snapshot_io.parse(doc)))


class TestBuild(unittest.TestCase):
    def test_servers_have_every_field(self):
        # Built by model.make, not by the dataclass's __init__.
        snap = snapshot_io.load('demo')
        names = {f.name for f in dataclasses.fields(model.Server)}
        for server in snap.servers:
            self.assertEqual(names, set(vars(server)))
            self.assertEqual(server, model.Server(**vars(server)))
            self.assertEqual(server.usage, model.ServerUsage(
                **vars(server.usage)))

    def test_flavors_are_shared_as_written(self):
        hyps, servers = b.three_hosts()
        doc = b.document(hyps, servers)
        doc['servers'][1]['flavor'] = dict(doc['servers'][0]['flavor'])
        doc['servers'][2]['flavor'] = dict(doc['servers'][0]['flavor'],
                                           vcpus=float(
                                               doc['servers'][0]['flavor'][
                                                   'vcpus']))
        first, same, floats = snapshot_io.parse(doc).servers[:3]
        self.assertIs(first.flavor, same.flavor)
        self.assertIs(first.resources, same.resources)
        # 2.0 vCPUs stay a float, as written.
        self.assertEqual(first.flavor, floats.flavor)
        self.assertIs(int, type(first.resources['VCPU']))
        self.assertIs(float, type(floats.resources['VCPU']))


class TestFlavorResources(unittest.TestCase):
    def flavor(self, **kw):
        values = dict(vcpus=4, ram=8192, disk=40, ephemeral=10, swap=1536)
        values.update(kw)
        return model.Flavor(**values)

    def test_local_disk(self):
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 8192, 'DISK_GB': 52},
                         snapshot_io.flavor_resources(self.flavor(), False))

    def test_boot_from_volume_keeps_ephemeral_and_swap(self):
        self.assertEqual(12, snapshot_io.flavor_resources(
            self.flavor(), True)['DISK_GB'])

    def test_dedicated_cpus_and_overrides(self):
        specs = {'hw:cpu_policy': 'dedicated', 'resources:DISK_GB': '0',
                 'resources:CUSTOM_FPGA': '1', 'resources:BAD': 'x'}
        self.assertEqual(
            {'PCPU': 4, 'MEMORY_MB': 8192, 'CUSTOM_FPGA': 1},
            snapshot_io.flavor_resources(self.flavor(extra_specs=specs),
                                         False))


class TestParseOnTheEarlier(unittest.TestCase):
    """parse(document, before=(earlier, its snapshot)), as apply's
    re-check parses a document refresh made from the one before: what
    is new is validated and built, the rest kept as it was."""

    def setUp(self):
        with open(os.path.join(os.path.dirname(snapshot_io.__file__), '..',
                               '..', 'data', 'demo-snapshot.json')) as f:
            doc = json.load(f)
        doc['images'] = {
            'img-a': {'name': 'a', 'disk_format': 'raw',
                      'properties': {'hw_architecture': 'x86_64'}},
            'img-b': {'name': 'b', 'disk_format': 'qcow2',
                      'properties': None}}
        for i, server in enumerate(doc['servers']):
            server['image'] = ('img-a', 'img-b')[i % 2]
        # As a live read records them: Placement's usages.
        for entry, hyp in zip(doc['hypervisors'],
                              snapshot_io.parse(doc).hypervisors):
            entry['usages'] = dict(hyp.usages)
        self.earlier = doc
        self.snap = snapshot_io.parse(doc)

    def refreshed(self, names):
        """The earlier document with the entries of these hypervisors
        and of their servers new objects, as refresh puts them in."""
        doc = self.earlier
        return dict(doc, hypervisors=[
            copy.deepcopy(h) if h['name'] in names else h
            for h in doc['hypervisors']], servers=[
            copy.deepcopy(s) if s['hypervisor'] in names else s
            for s in doc['servers']])

    def assertParsedAlike(self, doc):
        again = snapshot_io.parse(doc, before=(self.earlier, self.snap))
        whole = snapshot_io.parse(doc)
        self.assertEqual(snapshot_io.to_document(whole),
                         snapshot_io.to_document(again))
        # Images compare by identity: one object per image.
        self.assertEqual(len(doc['images']),
                         len({id(s.image) for s in again.servers}))
        # Its indexes, made from the earlier snapshot's, are those it
        # would make itself.
        for index in ('_servers', '_servers_on'):
            self.assertIn(index, vars(again))
            made = getattr(model.Snapshot, index).func(again)
            self.assertEqual(made, getattr(again, index))
        self.assertTrue(again.well_formed())
        return again

    def test_what_was_not_read_again_is_the_earlier_model(self):
        names = {h['name'] for h in self.earlier['hypervisors'][:2]}
        doc = self.refreshed(names)
        moving = next(s for s in doc['servers'] if s['hypervisor'] in names)
        moving['hypervisor'] = self.earlier['hypervisors'][5]['name']
        doc['hypervisors'][0]['usages']['MEMORY_MB'] += 1024
        doc['servers'].remove(next(
            s for s in doc['servers'] if s['hypervisor'] in names))
        added = dict(moving, id='a-new-server', name='new')
        doc['servers'].append(added)
        again = self.assertParsedAlike(doc)
        before = {s.id: s for s in self.snap.servers}
        for server, entry in zip(again.servers, doc['servers']):
            if entry['hypervisor'] in names or entry is added or \
                    entry is moving:
                self.assertIsNot(before.get(server.id), server)
            else:
                self.assertIs(before[server.id], server)
        self.assertIs(self.snap.hypervisors[2], again.hypervisors[2])
        self.assertIsNot(self.snap.hypervisors[0], again.hypervisors[0])
        self.assertEqual(moving['hypervisor'],
                         again.server(moving['id']).hypervisor)

    def test_an_image_read_again_reaches_every_server_of_it(self):
        doc = dict(self.refreshed(set()), images=dict(
            self.earlier['images'], **{'img-b': {
                'name': 'b', 'disk_format': 'qcow2',
                'properties': {'hw_architecture': 'aarch64'}}}))
        again = self.assertParsedAlike(doc)
        for server in again.servers:
            self.assertEqual(server.image.id == 'img-b',
                             server.image.known and server.image.properties[
                                 'hw_architecture'] == 'aarch64')

    def test_kept_entries_past_a_long_run_dropped(self):
        doc = self.refreshed(set())
        del doc['servers'][10:20]
        with mock.patch.object(snapshot_io, 'LOOK_AHEAD', 5):
            again = self.assertParsedAlike(doc)
        # Past the look-ahead they are built again, alike.
        self.assertIs(self.snap.servers[9], again.servers[9])
        self.assertIsNot(self.snap.servers[20], again.servers[10])
        with mock.patch.object(snapshot_io, 'LOOK_AHEAD', 20):
            again = self.assertParsedAlike(doc)
        self.assertIs(self.snap.servers[20], again.servers[10])
        self.assertIs(self.snap.servers[-1], again.servers[-1])

    def test_an_image_gone_from_the_images_is_refused(self):
        doc = dict(self.refreshed(set()), images={
            'img-a': self.earlier['images']['img-a']})
        with self.assertRaisesRegex(snapshot_io.SnapshotError,
                                    "image 'img-b' is not in"):
            snapshot_io.parse(doc, before=(self.earlier, self.snap))

    def test_images_recorded_now_and_not_before(self):
        earlier = dict(self.earlier)
        del earlier['images']
        earlier['servers'] = [{k: v for k, v in entry.items()
                               if k != 'image'} for entry in earlier['servers']]
        self.earlier, self.snap = earlier, snapshot_io.parse(earlier)
        doc = dict(self.refreshed(set()), images={})
        again = snapshot_io.parse(doc, before=(self.earlier, self.snap))
        self.assertEqual(snapshot_io.to_document(snapshot_io.parse(doc)),
                         snapshot_io.to_document(again))
        self.assertIsNone(self.snap.servers[0].image)
        self.assertIn(again.servers[0].image,
                      (snapshot_io.NO_IMAGE, snapshot_io.BOOT_VOLUME))

    def test_a_bad_new_entry_is_named_in_the_whole_document(self):
        doc = self.refreshed({self.earlier['hypervisors'][3]['name']})
        index = next(i for i, s in enumerate(doc['servers'])
                     if s['hypervisor'] == doc['hypervisors'][3]['name'])
        doc['servers'][index]['locked'] = 'no'
        with self.assertRaisesRegex(snapshot_io.SnapshotError,
                                    r'servers\[%d\]\.locked' % index):
            snapshot_io.parse(doc, before=(self.earlier, self.snap))

    def test_a_duplicate_of_a_kept_server_is_refused(self):
        doc = self.refreshed(set())
        doc['servers'].append(dict(doc['servers'][0]))
        with self.assertRaisesRegex(snapshot_io.SnapshotError,
                                    'duplicate server'):
            snapshot_io.parse(doc, before=(self.earlier, self.snap))


class TestBadSnapshots(unittest.TestCase):
    def assert_error(self, document, *fragments):
        with self.assertRaises(snapshot_io.SnapshotError) as ctx:
            snapshot_io.parse(document, origin='x.json')
        for fragment in fragments:
            self.assertIn(fragment, str(ctx.exception))

    def good(self):
        hyps, servers = b.three_hosts()
        return copy.deepcopy(b.document(hyps, servers))

    def test_good_document_loads(self):
        snap = snapshot_io.parse(self.good())
        self.assertEqual(3, len(snap.hypervisors))

    def test_not_a_snapshot(self):
        self.assert_error([], 'neither an osc-leveller snapshot')
        self.assert_error({'x': 1}, 'neither an osc-leveller snapshot')

    def test_wrong_format(self):
        doc = self.good()
        doc['format'] = 'osc-leveller-snapshot/9'
        self.assert_error(doc, "has format 'osc-leveller-snapshot/9'")

    def test_schema_errors_name_the_field(self):
        cases = [
            (('hypervisors', 1, 'inventories', 'VCPU', 'allocation_ratio'), -1,
             'x.json: hypervisors[1].inventories.VCPU.allocation_ratio: '
             'must be > 0 (got -1)'),
            (('servers', 2, 'flavor', 'vcpus'), 'four',
             'servers[2].flavor.vcpus: must be integer (got "four")'),
            (('hypervisors', 0, 'metrics'), {'cpu': 1.5, 'ram': 0.1},
             'hypervisors[0].metrics.cpu: must be <= 1 (got 1.5)'),
            (('hypervisors', 0, 'service', 'status'), 'maybe',
             'hypervisors[0].service.status: must be one of "enabled", '
             '"disabled"'),
            (('servers', 0, 'colour'), 'blue',
             'servers[0].colour: is not a known field'),
            (('taken_at',), 'yesterday', 'taken_at: must match'),
            # Trait names as Placement allows them, a bounded list.
            (('hypervisors', 0, 'traits'), ['hw_cpu_x86_avx2'],
             'hypervisors[0].traits[0]: must match'),
            (('hypervisors', 0, 'traits'), [''],
             'hypervisors[0].traits[0]: must not be empty'),
            (('hypervisors', 0, 'traits'), ['A' * 256],
             'hypervisors[0].traits[0]: must be at most 255 characters (got '
             '256: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...)'),
            (('hypervisors', 0, 'traits'), [7],
             'hypervisors[0].traits[0]: must be string (got 7)'),
            (('hypervisors', 0, 'traits'), 'CUSTOM_NVME',
             'hypervisors[0].traits: must be array or null'),
            (('hypervisors', 0, 'traits'), ['CUSTOM_%d' % i
                                            for i in range(1001)],
             'hypervisors[0].traits: must have at most 1000 items (got '
             '1001)'),
        ]
        for path, value, message in cases:
            doc = self.good()
            target = doc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
            self.assert_error(doc, message)

    def test_missing_field(self):
        doc = self.good()
        del doc['servers'][1]['hypervisor']
        self.assert_error(doc, 'servers[1].hypervisor: is required')

    def test_semantic_errors(self):
        doc = self.good()
        doc['servers'][1]['hypervisor'] = 'hv9'
        self.assert_error(doc, "servers[1].hypervisor: unknown hypervisor "
                               "'hv9'")
        doc = self.good()
        doc['servers'][1]['id'] = doc['servers'][0]['id']
        self.assert_error(doc, 'servers[1].id: duplicate server')
        doc = self.good()
        doc['hypervisors'][2]['name'] = 'hv1'
        self.assert_error(doc, "hypervisors[2].name: duplicate hypervisor")
        doc = self.good()
        doc['hypervisors'][0]['inventories']['VCPU']['reserved'] = 99
        self.assert_error(doc, 'VCPU.reserved: must not exceed total')
        doc = self.good()
        doc['taken_at'] = '2026-13-45T99:00'
        self.assert_error(doc, 'taken_at: is not an ISO 8601 time')
        for moment in ('0001-01-01T00:00:00+14:00',
                       '9999-12-31T23:59:59-14:00'):
            doc = self.good()
            doc['taken_at'] = moment
            self.assert_error(doc, 'taken_at: is outside the years 1 to 9999')

    def test_times_of_year_one_round_trip(self):
        seconds = snapshot_io.parse_time('0001-01-01T00:00:00Z')
        self.assertEqual('0001-01-01T00:00:00Z',
                         snapshot_io.format_time(seconds))
        self.assertEqual('2026-11-20T12:00:00Z', snapshot_io.format_time(
            snapshot_io.parse_time('2026-11-20T12:00:00.75Z')))

    def test_datetimes_are_written_in_utc_to_the_second(self):
        utc = datetime.timezone.utc
        moment = datetime.datetime(2026, 11, 20, 9, 0, 0, 999999)
        for written in (moment, moment.replace(tzinfo=utc),
                        moment.replace(hour=11, tzinfo=datetime.timezone(
                            datetime.timedelta(hours=2)))):
            self.assertEqual('2026-11-20T09:00:00Z',
                             snapshot_io.format_datetime(written))
        # Not through a float: that would round this into year 10000.
        self.assertEqual('9999-12-31T23:59:59Z', snapshot_io.format_datetime(
            datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)))
        self.assertEqual('0001-01-01T00:00:00Z', snapshot_io.format_datetime(
            datetime.datetime(1, 1, 1)))

    def test_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, 'nope.json')
            with self.assertRaises(snapshot_io.SnapshotError) as ctx:
                snapshot_io.load(missing)
            self.assertIn('does not exist', str(ctx.exception))
            broken = os.path.join(tmp, 'broken.json')
            with open(broken, 'w') as f:
                f.write('{"format": ')
            with self.assertRaises(snapshot_io.SnapshotError) as ctx:
                snapshot_io.load(broken)
            self.assertIn('broken.json is not valid JSON', str(ctx.exception))
            with self.assertRaises(snapshot_io.SnapshotError) as ctx:
                snapshot_io.load(tmp)
            self.assertIn('cannot read snapshot file', str(ctx.exception))
            good = os.path.join(tmp, 'good.json')
            with open(good, 'w') as f:
                json.dump(self.good(), f)
            self.assertEqual(3, len(snapshot_io.load(good).hypervisors))
            with open(good, 'a') as f:
                f.write(' ' * 2 ** 20)
            with self.assertRaises(snapshot_io.SnapshotError) as ctx:
                snapshot_io.load(good, max_mb=1)
            self.assertEqual(
                'snapshot file %s is 2 MiB, over the limit of 1 MiB: loading '
                'it takes about seven times its size in memory (setting '
                'max_snapshot_mb raises the limit)' % good, str(ctx.exception))


class TestNoGc(unittest.TestCase):
    """A large loading window leaves what it made in the oldest generation,
    all of it still collectable; a small one leaves the collector be."""

    def window(self):
        import weakref

        class Node:
            pass

        with snapshot_io.no_gc():
            with snapshot_io.no_gc():  # nested: the outermost decides
                self.assertFalse(gc.isenabled())
            self.assertFalse(gc.isenabled())
            node = Node()
            node.cycle = node  # garbage once let go: a closed connection
            kept = [Node() for _ in range(1000)]
            alive = weakref.ref(node)
        self.assertTrue(gc.isenabled())
        self.assertEqual(0, gc.get_freeze_count())
        return kept, alive

    @staticmethod
    def old(thing):
        return any(o is thing for o in gc.get_objects(generation=2))

    def test_a_large_window_is_moved_to_the_oldest_generation(self):
        with mock.patch.object(snapshot_io, 'PROMOTE_AT', 500):
            kept, alive = self.window()
        self.assertTrue(self.old(kept[0]))
        gc.collect()
        self.assertIsNone(alive())

    def test_a_small_window_is_left_young(self):
        kept, alive = self.window()
        self.assertFalse(self.old(kept[0]))
        gc.collect(generation=1)
        self.assertIsNone(alive())
