"""cloud/flavors.py: one flavor read from Nova's list, checked."""

import json
import unittest
from unittest import mock

import requests

from osc_leveller.cloud import answers
from osc_leveller.cloud import flavors


def nova(*listed):
    """A compute proxy whose GET /flavors/detail answers these flavors."""
    response = requests.Response()
    response.status_code = 200
    response._content = json.dumps({'flavors': list(listed)}).encode()
    proxy = mock.Mock()
    proxy.get.return_value = response
    return proxy


def flavor(name, fid='f1', **fields):
    shown = {'id': fid, 'name': name, 'vcpus': 8, 'ram': 65536, 'disk': 80,
             'OS-FLV-EXT-DATA:ephemeral': 5, 'swap': '',
             'extra_specs': {'trait:CUSTOM_X': 'required'}}
    shown.update(fields)
    return shown


class TestRead(unittest.TestCase):
    def test_by_name_then_by_id(self):
        compute = nova(flavor('lv.huge'), flavor('other', fid='lv.x'))
        found = flavors.read(compute, 'lv.huge')
        self.assertEqual(('lv.huge', 8, 65536, 80, 5, 0),
                         (found.name, found.vcpus, found.ram, found.disk,
                          found.ephemeral, found.swap))
        self.assertEqual({'trait:CUSTOM_X': 'required'},
                         dict(found.extra_specs))
        self.assertEqual('other', flavors.read(compute, 'lv.x').name)
        self.assertEqual({'is_public': 'None'},
                         compute.get.call_args.kwargs['params'])

    def test_unknown_or_ambiguous(self):
        with self.assertRaisesRegex(flavors.UnknownFlavor,
                                    'no flavor named nosuch'):
            flavors.read(nova(flavor('lv.huge')), 'nosuch')
        with self.assertRaisesRegex(flavors.UnknownFlavor,
                                    '2 flavors of Nova are named a'):
            flavors.read(nova(flavor('a'), flavor('a', fid='f2')), 'a')

    def test_numbers_are_checked(self):
        for bad in ({'ram': 'NaN'}, {'vcpus': -1}, {'disk': 1e999},
                    {'ram': None, 'vcpus': 'x'}):
            with self.assertRaisesRegex(answers.CollectError,
                                        'Nova GET /flavors/detail'):
                flavors.read(nova(flavor('a', **bad)), 'a')
