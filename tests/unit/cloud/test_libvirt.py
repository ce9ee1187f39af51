"""The libvirt exporter profiles (cloud/libvirt.py) against the names the
settings accept (core/settings/config.py SERVER_PROFILES) and the guides: core may
not import cloud, so the names are written twice and tied here. A profile
added to libvirt.py alone fails these tests, naming what is missing."""

import pathlib
import unittest

from osc_leveller.cloud import libvirt
from osc_leveller.core.settings import config

GUIDE = pathlib.Path(__file__).resolve().parents[3] / 'doc' / 'source' / \
    'user' / 'index.rst'
REFERENCE = GUIDE.parents[1] / 'reference' / 'configuration.rst'
CHOICES_OF_OUR_OWN = {'auto', 'none'}  # detect, or no per-server load


class TestProfileNames(unittest.TestCase):
    def test_every_profile_is_a_choice_of_the_setting_and_back(self):
        key = config.BY_NAME['prometheus.server_profile']
        self.assertEqual(config.SERVER_PROFILES, key.choices)
        self.assertEqual(set(libvirt.PROFILES),
                         set(key.choices) - CHOICES_OF_OUR_OWN)
        self.assertFalse(CHOICES_OF_OUR_OWN & set(libvirt.PROFILES))
        for name, profile in libvirt.PROFILES.items():
            self.assertEqual(name, profile.name)
            self.assertEqual(name, config.check(key, name, 'test'))

    def test_every_profile_is_detected(self):
        # detect() tries ORDER; kumina's marker is the others' CPU series,
        # so it must come last.
        self.assertCountEqual(libvirt.PROFILES, libvirt.ORDER)
        self.assertEqual('kumina', libvirt.ORDER[-1])
        for name in libvirt.ORDER[:-1]:
            marker = libvirt.PROFILES[name].marker
            self.assertEqual([name], [p.name for p in libvirt.detect(
                {marker}, lambda: self.fail('kumina asked for'))])

    def test_every_profile_is_in_the_guides(self):
        # The user guide's table of exporters, and the reference page's
        # queries (tests/unit/test_doc_examples.py checks those in full).
        guide, reference = GUIDE.read_text(), REFERENCE.read_text()
        for name, profile in libvirt.PROFILES.items():
            self.assertTrue('   * - ``%s``\n' % name in guide, 'no row for '
                            '%s in the user guide\'s table' % name)
            self.assertTrue('``%s`` (%s)' % (name, profile.exporter) in
                            reference, 'no queries of %s in the reference '
                            'page' % name)
