import unittest

from osc_leveller.core.model import extra_specs


class TestMatches(unittest.TestCase):
    def test_cases(self):
        cases = [
            ('true', 'true', True), ('true', 'True', False),
            ('8', '= 4', True), ('2', '= 4', False), ('x', '= 4', False),
            ('4', '== 4.0', True), ('5', '!= 4', True), ('4', '>= 4', True),
            ('5', '<= 4', False),
            ('abc', 's== abc', True), ('abc', 's!= abc', False),
            ('abc', 's< abd', True), ('abd', 's<= abc', False),
            ('b', 's> a', True), ('a', 's>= b', False),
            ('avx avx2 sse', '<in> avx2', True), ('sse', '<in> avx', False),
            ('avx avx2', '<all-in> avx avx2', True),
            ('avx', '<all-in> avx avx2', False),
            ('b', '<or> a <or> b', True), ('c', '<or> a <or> b', False),
            (None, '<or> a', False), ('4', '>=', False), ('', '', True),
        ]
        for value, requirement, expected in cases:
            self.assertEqual(expected,
                             extra_specs.matches(value, requirement),
                             (value, requirement))


class TestTraits(unittest.TestCase):
    """The trait requests Nova builds from a flavor's extra specs
    (nova/scheduler/utils.py ResourceRequest._process_extra_specs)."""

    def test_the_keys_nova_reads(self):
        specs = {
            'trait:CUSTOM_A': 'required',
            'trait1:CUSTOM_B': 'forbidden',  # granular group 1
            'trait_x-2:CUSTOM_C': 'required',
            # "traits" is trait with the group suffix "s" to Nova
            'traits:CUSTOM_D': 'required',
            # a suffix is 1 to 64 of [a-zA-Z0-9_-]
            'trait%s:CUSTOM_E' % ('1' * 65): 'required',
            'trait.1:CUSTOM_F': 'required',
            'aggregate_instance_extra_specs:trait:CUSTOM_G': 'required',
            'hw:trait:CUSTOM_H': 'required',
            # only the values required and forbidden, as written
            'trait:CUSTOM_I': 'Required', 'trait:CUSTOM_J': 'preferred',
            'resources:VCPU': '2'}
        # In key order: the first one a hypervisor fails is named.
        self.assertEqual([('CUSTOM_B', 'forbidden'),
                          ('CUSTOM_A', 'required'),
                          ('CUSTOM_C', 'required'),
                          ('CUSTOM_D', 'required')],
                         extra_specs.traits(specs))

    def test_no_trait_specs(self):
        self.assertEqual([], extra_specs.traits({}))
        self.assertEqual([], extra_specs.traits({'hw:cpu_policy': 'shared'}))
