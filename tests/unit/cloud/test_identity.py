"""Which cloud a snapshot is read from, against the stand-in cloud's
Keystone (real keystoneauth and openstacksdk)."""

import unittest
from unittest import mock

from osc_leveller.cloud import collect
from osc_leveller.cloud import identity
from tests.unit import builders as b
from tests.unit import standin


def source_of(cloud, **connection):
    return collect.Collector(cloud.connection(**connection)).collect()[
        'source']


class TestIdentity(unittest.TestCase):
    def test_a_read_records_its_cloud(self):
        hyps, servers = b.three_hosts()
        with standin.StandIn(b.document(hyps, servers)) as cloud:
            source = source_of(cloud)
            internal = source_of(cloud, interface='internal')
            nova = standin.derived_uuid('service-entry', 'nova')
            self.assertEqual({
                'kind': 'cloud', 'cloud': 'defaults', 'region': 'RegionOne',
                'keystone': cloud.auth_url, 'nova_service': nova,
                'nova_region': 'RegionOne'}, source)
            # Another interface of the same Keystone: the same cloud.
            self.assertEqual(source, internal)
        with standin.StandIn(b.document(hyps, servers),
                             region='RegionTwo') as other:
            other.deployment = 'elsewhere'
            source = source_of(other)
        self.assertEqual(('RegionTwo', standin.derived_uuid(
            'service-entry', 'elsewherenova')), (
            source['nova_region'], source['nova_service']))

    def test_no_catalog_no_nova(self):
        # A connection whose auth is no Keystone plugin (an admin token,
        # endpoint overrides): the auth URL only, when there is one.
        conn = mock.Mock()
        conn.config.config = {'auth': {'auth_url': 'https://k.example/v3'}}
        self.assertEqual({'keystone': 'https://k.example/v3'},
                         identity.of(conn))
        self.assertEqual({}, identity.of(mock.Mock()))

    def test_the_auth_url_without_credentials(self):
        for url, shown in (
                ('https://user:secret@keystone.example:5000/v3?x=1#top',
                 'https://keystone.example:5000/v3'),
                ('http://[fd00::1]:5000/v3', 'http://[fd00::1]:5000/v3'),
                ('http://keystone:99999/v3', None), ('', None), (5, None)):
            self.assertEqual(shown, identity.auth_url(url), url)
