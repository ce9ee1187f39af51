"""Image properties read from Glance by the collector (cloud/glance.py),
against the stand-in: one request per image, and what it makes of an
image Glance does not show, an answer it cannot use, a Glance it cannot
reach. Unknown properties are never none."""

import unittest

from osc_leveller.cloud import collect
from osc_leveller.core.model import snapshot as snapshot_io
from tests.unit import builders as b
from tests.unit import standin

GLANCE_GET = ('glance', 'GET', '/v2/images/{id}')


def cloud_of_images(counts=None):
    """hv1 and hv2; for each image id, that many servers booted from it
    (default: 'img-a' with a required trait, 3 servers; 'img-b', 1)."""
    counts = counts or {'img-a': 3, 'img-b': 1}
    servers = []
    for image, count in counts.items():
        servers += [b.server('%s-%d' % (image, i), 'hv1', image=image)
                    for i in range(count)]
    doc = b.document([b.hypervisor('hv1'), b.hypervisor('hv2')], servers)
    doc['images'] = {image: {'name': image, 'disk_format': 'raw',
                             'properties': {}} for image in counts}
    doc['images']['img-a']['properties'] = {'trait:CUSTOM_A': 'required'}
    return doc


def collect_images(cloud, **kwargs):
    """The images section and the note of a collection."""
    document = collect.Collector(cloud.connection(), retries=0,
                                 **kwargs).collect(now=cloud.taken_at)
    snapshot_io.parse(document)  # valid as written
    return document['images'], document['source'].get('note', '')


class TestGlance(unittest.TestCase):
    def test_one_request_per_distinct_image(self):
        with standin.StandIn(cloud_of_images()) as cloud:
            images, note = collect_images(cloud)
            self.assertEqual(2, cloud.counts[GLANCE_GET])
            self.assertEqual([], cloud.errors)
        self.assertEqual({'trait:CUSTOM_A': 'required'},
                         images['img-a']['properties'])
        self.assertEqual({}, images['img-b']['properties'])
        self.assertNotIn('image properties', note)

    def test_unknown_when_glance_does_not_show_it(self):
        with standin.StandIn(cloud_of_images()) as cloud:
            cloud.set_image('img-a', None)
            cloud.fault('glance', '/v2/images/img-b', 'status:403')
            images, note = collect_images(cloud)
        self.assertEqual((None, 'gone from Glance (404)'), (
            images['img-a']['properties'], images['img-a']['why']))
        self.assertEqual('Glance refused to show it (403)',
                         images['img-b']['why'])
        # Each reason in full, those of the most servers first.
        self.assertIn('image properties unknown for 3 servers (gone from '
                      'Glance (404)), 1 server (Glance refused to show it '
                      '(403)): they move only to hypervisors as capable as '
                      'theirs', note)

    def test_unknown_when_glance_does_not_answer(self):
        for kind, why in (('reset', 'no connection to Glance'),
                          ('status:500', 'Glance answered HTTP 500'),
                          ('non-json', 'the answer is not JSON'),
                          ('shape:list', 'the image is list, not an object'),
                          ('shape:null', 'the image is NoneType')):
            with self.subTest(kind), standin.StandIn(
                    cloud_of_images()) as cloud:
                cloud.fault('glance', '/v2/images/img-a', kind)
                images, note = collect_images(cloud)
                self.assertIsNone(images['img-a']['properties'])
                self.assertIn(why, images['img-a']['why'])
                self.assertEqual({}, images['img-b']['properties'])
                self.assertIn('3 servers', note)

    def test_answers_glance_would_never_give(self):
        bad = {
            'a property that is not text': {'hw_architecture': 64},
            'the answer is about image "img-b"': {'id': 'img-b'},
            'property trait:CUSTOM_A is longer than Nova keeps': {
                'trait:CUSTOM_A': 'r' * 256},
            'name is not text': {'name': ['a']},
        }
        for why, change in bad.items():
            body = {'id': 'img-a', 'name': 'img-a', 'disk_format': 'raw',
                    'status': 'active'}
            body.update(change)
            with self.subTest(why), standin.StandIn(
                    cloud_of_images()) as cloud:
                cloud.set_image('img-a', body)
                images, _ = collect_images(cloud)
                self.assertIsNone(images['img-a']['properties'])
                self.assertTrue(images['img-a']['why'].startswith(
                    'Glance\'s answer could not be used'), images['img-a'])
                self.assertIn(why.split(' that ')[0].replace(
                    'a property', 'property hw_architecture'),
                    images['img-a']['why'])

    def test_no_glance_in_the_catalog(self):
        with standin.StandIn(cloud_of_images()) as cloud:
            cloud.not_in_catalog.add('image')
            images, note = collect_images(cloud)
            self.assertEqual(0, cloud.counts[GLANCE_GET])
        self.assertEqual({'no image service in the catalog'},
                         {i['why'] for i in images.values()})
        self.assertIn('4 servers (no image service in the catalog)', note)

    def test_glance_without_a_version_we_read(self):
        with standin.StandIn(cloud_of_images()) as cloud:
            cloud.fault('glance', '/', 'status:500')
            images, _ = collect_images(cloud)
            self.assertEqual([], cloud.errors)
        self.assertTrue(all(i['why'].startswith('Glance could not be '
                                                'reached') for i in
                            images.values()), images)

    def test_at_most_max_images_the_most_used_first(self):
        with standin.StandIn(cloud_of_images()) as cloud:
            images, note = collect_images(cloud, max_images=1)
            self.assertEqual(1, cloud.counts[GLANCE_GET])
        self.assertEqual({'trait:CUSTOM_A': 'required'},
                         images['img-a']['properties'])
        self.assertEqual(
            'not read: more than cloud.max_images (1) images',
            images['img-b']['why'])
        self.assertIn('1 server (not read: more than cloud.max_images (1) '
                      'images)', note)

    def test_an_image_id_is_sent_quoted(self):
        # Nova's answer is untrusted: an id cannot reach another path, a
        # query or a fragment.
        odd = '../os-hypervisors?x=1#'
        with standin.StandIn(cloud_of_images({'img-a': 1, odd: 1})) as cloud:
            images, _ = collect_images(cloud)
            seen = [r for r in cloud.requests if r.service == 'glance' and
                    r.path != '/']
        self.assertEqual(sorted(['/v2/images/img-a', '/v2/images/' + odd]),
                         sorted(r.path for r in seen))
        self.assertEqual([{}, {}], [r.query for r in seen])
        self.assertEqual('gone from Glance (404)', images[odd]['why'])


if __name__ == '__main__':
    unittest.main()
