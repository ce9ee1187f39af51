"""What a server's image makes Nova's scheduler demand (core/rules/images.py):
its required traits, ImagePropertiesFilter, the prefilters, NUMA, and the
conservative rule for images whose properties are unknown."""

import copy
import unittest

from osc_leveller.core.load import state as state_mod
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import images
from osc_leveller.core.rules import policy
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b

IMG = '5d1c7f2a-0000-4000-8000-000000000001'


def qemu(name, **extra):
    """A libvirt/KVM hypervisor as Nova shows it."""
    extra.setdefault('hypervisor_type', 'QEMU')
    extra.setdefault('hypervisor_version', 8002000)
    return b.hypervisor(name, **extra)


def document(properties=None, dest=None, source=None, image=IMG,
             disk_format='qcow2', name='ubuntu', server_extra=None):
    """hv1 hosting s1, booted from image IMG with these properties (None:
    unknown), and an empty hv2."""
    server = b.server('s1', 'hv1', **dict(server_extra or {}))
    if image:
        server['image'] = image
    doc = b.document([qemu('hv1', **(source or {})),
                      qemu('hv2', **(dest or {}))], [server])
    doc['images'] = {IMG: {'name': name, 'disk_format': disk_format,
                           'properties': properties}}
    return doc


def why_not(doc, dest='hv2', **options):
    snap = snapshot_io.parse(copy.deepcopy(doc))
    rules = filters.Rules(snap, opts.PlannerOptions(**options))
    return policy.BALANCE.why_not_to(snap.find_server('s1'),
                                     snap.hypervisor(dest),
                                     state_mod.new_state(snap), rules)


class TestRequiredTraits(unittest.TestCase):
    def test_image_traits_join_the_flavors(self):
        doc = document({'trait:CUSTOM_LICENSED': 'required',
                        'trait:CUSTOM_IGNORED': 'preferred'})
        self.assertEqual('resource provider hv2 lacks trait CUSTOM_LICENSED '
                         'required by image ubuntu', why_not(doc))
        self.assertIsNone(why_not(document(
            {'trait:CUSTOM_LICENSED': 'required'},
            dest={'traits': ['CUSTOM_LICENSED']})))
        flavor = {'name': 'nvme', 'vcpus': 2, 'ram': 4096,
                  'extra_specs': {'trait:CUSTOM_NVME': 'required'}}
        doc = document({'trait:CUSTOM_LICENSED': 'required'},
                       dest={'traits': ['CUSTOM_LICENSED']},
                       server_extra={'flavor': flavor})
        self.assertIn('CUSTOM_NVME required by flavor nvme', why_not(doc))

    def test_unknown_traits_refuse_an_image_that_requires_one(self):
        doc = document({'trait:CUSTOM_LICENSED': 'required'},
                       dest={'traits': None})
        self.assertEqual(
            'traits of resource provider hv2 are unknown (not read from '
            'Placement): cannot check trait CUSTOM_LICENSED required by '
            'image ubuntu', why_not(doc))

    def test_the_image_type_prefilter_only_when_it_is_on(self):
        doc = document({})
        self.assertIsNone(why_not(doc))
        self.assertEqual(
            'resource provider hv2 lacks trait COMPUTE_IMAGE_TYPE_QCOW2 '
            'required by image ubuntu (disk_format qcow2, '
            'query_placement_for_image_type_support)',
            why_not(doc, image_type_prefilter=True))
        doc = document({}, dest={'traits': ['COMPUTE_IMAGE_TYPE_QCOW2']})
        self.assertIsNone(why_not(doc, image_type_prefilter=True))
        # No trait for a format os-traits does not name (Nova adds none).
        self.assertIsNone(why_not(document({}, disk_format='bare'),
                                  image_type_prefilter=True))

    def test_the_image_metadata_prefilter_only_when_it_is_on(self):
        doc = document({'hw_disk_bus': 'virtio', 'hw_vif_model': 'e1000'})
        self.assertIsNone(why_not(doc))
        self.assertIn('lacks trait COMPUTE_STORAGE_BUS_VIRTIO required by '
                      'image ubuntu (hw_disk_bus=virtio, image_metadata_'
                      'prefilter)', why_not(doc, image_metadata_prefilter=True))
        doc = document({'hw_disk_bus': 'virtio', 'hw_vif_model': 'e1000'},
                       dest={'traits': ['COMPUTE_STORAGE_BUS_VIRTIO']})
        self.assertIn('lacks trait COMPUTE_NET_VIF_MODEL_E1000', why_not(
            doc, image_metadata_prefilter=True))


class TestImagePropertiesFilter(unittest.TestCase):
    def test_no_properties_no_demand(self):
        self.assertIsNone(why_not(document({})))

    def test_architecture_of_the_destination(self):
        self.assertIsNone(why_not(document({'hw_architecture': 'x86_64'})))
        # Nova's aliases and its legacy name.
        self.assertIsNone(why_not(document({'architecture': 'AMD64'})))
        reason = why_not(document({'hw_architecture': 'aarch64'}))
        self.assertEqual(
            'image ubuntu asks for hw_architecture=aarch64: hv2 (hypervisor '
            'type QEMU, CPU architecture x86_64) is not known to run such '
            'guests: the API shows only those two (ImagePropertiesFilter)',
            reason)

    def test_the_current_name_wins_over_the_legacy_one(self):
        doc = document({'architecture': 'x86_64',
                        'hw_architecture': 'aarch64'})
        self.assertIn('hw_architecture=aarch64', why_not(doc))

    def test_hypervisor_type_as_the_api_shows_it(self):
        self.assertIsNone(why_not(document({'img_hv_type': 'qemu',
                                            'hw_vm_mode': 'hvm'})))
        # QEMU does not say whether its guests run under KVM.
        self.assertIn('img_hv_type=kvm: hv2 (hypervisor type QEMU',
                      why_not(document({'img_hv_type': 'kvm'})))
        fake = {'hypervisor_type': 'fake'}
        self.assertIsNone(why_not(document(
            {'hypervisor_type': 'fake', 'architecture': 'x86_64'},
            dest=fake, source=fake)))
        self.assertIn('hw_vm_mode=xen', why_not(document(
            {'hw_vm_mode': 'xen'}, dest=fake, source=fake)))
        self.assertIn('hypervisor type unknown', why_not(document(
            {'hw_architecture': 'x86_64'}, dest={'hypervisor_type': None})))

    def test_a_value_nova_does_not_know_is_refused(self):
        self.assertEqual(
            'image ubuntu: hw_vm_mode=paravirt is not one Nova knows, so '
            'the leveller cannot check it (ImagePropertiesFilter)',
            why_not(document({'hw_vm_mode': 'paravirt'})))

    def test_requested_hypervisor_version(self):
        props = {'img_hv_type': 'qemu',
                 'img_hv_requested_version': '>= 8.0, < 9'}
        self.assertIsNone(why_not(document(props)))
        self.assertEqual(
            'image ubuntu asks for hypervisor version >= 8.0, < 9, hv2 has '
            '9.1.0 (ImagePropertiesFilter)',
            why_not(document(props, dest={'hypervisor_version': 9001000})))
        self.assertIn('the version of hv2 is unknown', why_not(
            document(props, dest={'hypervisor_version': None})))
        self.assertIn('is not a version requirement the leveller reads',
                      why_not(document({'hypervisor_type': 'qemu',
                                        'hypervisor_version_requires':
                                        '~= 8'})))
        # Only with a matching guest does Nova look at the version.
        self.assertIsNone(why_not(document(
            {'img_hv_requested_version': '>= 99'})))

    def test_version_predicates_as_oslo_reads_them(self):
        self.assertTrue(images.version_satisfies('==8.2', 8002000))
        self.assertTrue(images.version_satisfies('>=8.2.0,<=8.2', 8002000))
        self.assertFalse(images.version_satisfies('!= 8.2.0', 8002000))
        self.assertFalse(images.version_satisfies('>8.2', 8002000))
        self.assertTrue(images.version_satisfies('<8.10', 8002000))
        for bad in ('8.2', '>= x', '>=', '>= 1,'):
            with self.subTest(bad):
                self.assertRaises(ValueError, images.version_satisfies, bad,
                                  8002000)


class TestWhatTheApiCannotShow(unittest.TestCase):
    def test_a_numa_topology_keeps_the_server_where_it_is(self):
        for key, value in (('hw_cpu_policy', 'dedicated'),
                           ('hw_numa_nodes', '2'),
                           ('hw_mem_page_size', 'large')):
            with self.subTest(key):
                reason = why_not(document({key: value}))
                self.assertTrue(reason.startswith(
                    'has a NUMA topology (image ubuntu: %s=%s)'
                    % (key, value)), reason)
                self.assertIn('(NUMATopologyFilter)', reason)
        self.assertIsNone(why_not(document({'hw_cpu_policy': 'shared'})))

    def test_physical_address_bits_are_not_read(self):
        self.assertIn('hw_maxphysaddr_bits=42', why_not(
            document({'hw_maxphysaddr_bits': '42'})))

    def test_traits_the_leveller_does_not_model_need_a_host_as_capable(self):
        props = {'hw_tpm_version': '2.0'}
        source = {'traits': ['COMPUTE_SECURITY_TPM_2_0', 'HW_CPU_X86_AVX2']}
        reason = why_not(document(props, source=source,
                                  dest={'traits': ['HW_CPU_X86_AVX2']}))
        self.assertEqual(
            'image ubuntu sets hw_tpm_version=2.0, which Nova turns into '
            'required traits the leveller does not model: it moves only to '
            'a hypervisor as capable as hv1 (every trait, the same '
            'hypervisor type and CPU architecture), and hv2 lacks its trait '
            'COMPUTE_SECURITY_TPM_2_0', reason)
        self.assertIsNone(why_not(document(props, source=source,
                                           dest=source)))
        # A value that asks for no trait asks nothing.
        self.assertIsNone(why_not(document({'hw_sound_model': 'ich6'},
                                           source=source)))


class TestUnknownImages(unittest.TestCase):
    """An image gone from Glance: as capable as the source, never a
    guess."""

    def test_a_destination_as_capable_as_the_source(self):
        source = {'traits': ['CUSTOM_LICENSED', 'COMPUTE_STATUS_DISABLED']}
        self.assertIsNone(why_not(document(
            None, source=source, dest={'traits': ['CUSTOM_LICENSED',
                                                  'CUSTOM_MORE']})))
        reason = why_not(document(None, source=source))
        self.assertEqual(
            'the properties of image ubuntu are unknown (not read): it moves '
            'only to a hypervisor as capable as hv1 (every trait, the same '
            'hypervisor type and CPU architecture), and hv2 lacks its trait '
            'CUSTOM_LICENSED', reason)

    def test_the_same_hypervisor_type_and_architecture(self):
        # The conductor's own check of the type comes first.
        self.assertIn("hypervisor type fake differs from hv1's QEMU", why_not(
            document(None, dest={'hypervisor_type': 'fake'})))
        arm = {'cpu_info': {'arch': 'aarch64', 'model': 'Gen1',
                            'features': []}}
        self.assertIn('CPU architecture', why_not(document(None, dest=arm)))
        self.assertIn('the hypervisor type of hv2 is unknown', why_not(
            document(None, dest={'hypervisor_type': None})))

    def test_unknown_traits_are_not_as_capable(self):
        self.assertIn('the traits of hv2 are unknown', why_not(
            document(None, dest={'traits': None})))
        self.assertIn('the traits of hv1 are unknown', why_not(
            document(None, source={'traits': None})))

    def test_a_server_booted_from_a_volume(self):
        doc = document({}, image=None, source={'traits': ['CUSTOM_X']},
                       server_extra={'boot_from_volume': True})
        self.assertIn('image its boot volume are unknown (booted from a '
                      'volume: Nova takes its image properties from Cinder',
                      why_not(doc))
        self.assertIsNone(why_not(document(
            {}, image=None, source={'traits': ['CUSTOM_X']},
            dest={'traits': ['CUSTOM_X']},
            server_extra={'boot_from_volume': True})))

    def test_a_snapshot_that_records_no_images_applies_no_image_rule(self):
        doc = document(None, source={'traits': ['CUSTOM_X']})
        del doc['images'], doc['servers'][0]['image']
        self.assertIsNone(why_not(doc))
        self.assertIsNone(snapshot_io.parse(doc).servers[0].image)

    def test_the_planner_moves_it_only_where_it_may(self):
        hyps = [qemu('hv1', traits=['CUSTOM_X']), qemu('hv2'),
                qemu('hv3', traits=['CUSTOM_X'])]
        servers = [b.server('s%d' % i, 'hv1', vcpus=4, ram_gb=16,
                            image=IMG) for i in range(6)]
        doc = b.document(hyps, servers)
        doc['images'] = {IMG: None}
        moves = planner.make_plan(snapshot_io.parse(doc),
                                  opts.PlannerOptions()).moves
        self.assertTrue(moves)
        self.assertEqual({'hv3'}, {m.destination for m in moves})


class TestSnapshotFormat(unittest.TestCase):
    def test_round_trip(self):
        doc = document({'hw_architecture': 'x86_64',
                        'trait:CUSTOM_X': 'required'})
        doc['images']['gone'] = None
        doc['servers'].append(dict(b.server('s2', 'hv2'), image='gone'))
        doc['servers'].append(dict(b.server('s3', 'hv2'),
                                   boot_from_volume=True))
        snap = snapshot_io.parse(copy.deepcopy(doc))
        s1, s2, s3 = snap.servers
        self.assertEqual('x86_64', s1.image.properties['hw_architecture'])
        self.assertFalse(s2.image.known)
        self.assertEqual('not read', s2.image.why)
        self.assertIs(snapshot_io.BOOT_VOLUME, s3.image)
        again = snapshot_io.to_document(snap)
        self.assertEqual({IMG, 'gone'}, set(again['images']))
        self.assertIsNone(again['images']['gone']['properties'])
        self.assertNotIn('image', again['servers'][2])
        self.assertEqual(again, snapshot_io.to_document(
            snapshot_io.parse(again)))

    def test_the_servers_of_one_image_share_it(self):
        doc = document({})
        doc['servers'].append(dict(b.server('s2', 'hv2'), image=IMG))
        s1, s2 = snapshot_io.parse(doc).servers
        self.assertIs(s1.image, s2.image)

    def test_an_old_snapshot_writes_and_fingerprints_as_before(self):
        doc = document({})
        del doc['images'], doc['servers'][0]['image']
        snap = snapshot_io.parse(copy.deepcopy(doc))
        self.assertNotIn('images', snapshot_io.to_document(snap))
        self.assertNotIn('image', snapshot_io.to_document(snap)['servers'][0])
        before = plan_mod.fingerprint(snap)
        recorded = snapshot_io.parse(document({}))
        self.assertNotEqual(before, plan_mod.fingerprint(recorded))
        changed = snapshot_io.parse(document({'hw_cpu_policy': 'dedicated'}))
        self.assertNotEqual(plan_mod.fingerprint(recorded),
                            plan_mod.fingerprint(changed))

    def test_a_server_naming_an_image_not_recorded(self):
        doc = document({})
        doc['servers'][0]['image'] = 'other'
        with self.assertRaisesRegex(snapshot_io.SnapshotError,
                                    r"servers\[0\].image: image 'other' is "
                                    "not in the snapshot's images"):
            snapshot_io.parse(doc)
        del doc['images']
        with self.assertRaisesRegex(snapshot_io.SnapshotError,
                                    'no images section'):
            snapshot_io.parse(doc)

    def test_bad_properties_are_refused_by_the_schema(self):
        for bad in ({'hw_architecture': 64}, {'': 'x'},
                    {'trait:X': 'r' * 256}):
            with self.subTest(bad):
                self.assertRaises(snapshot_io.SnapshotError,
                                  snapshot_io.parse, document(bad))
        doc = document({})
        doc['images'][IMG]['colour'] = 'blue'
        self.assertRaises(snapshot_io.SnapshotError, snapshot_io.parse, doc)


class TestSettings(unittest.TestCase):
    def test_a_plan_records_the_prefilters_only_when_they_are_on(self):
        self.assertNotIn('image_type_prefilter',
                         opts.to_document(opts.PlannerOptions()))
        recorded = opts.to_document(opts.PlannerOptions(
            image_type_prefilter=True))
        self.assertIs(True, recorded['image_type_prefilter'])
        self.assertNotIn('image_metadata_prefilter', recorded)
