import unittest

from osc_leveller.core import extra_specs


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
