"""benchmarks/series.py: the classic mix as it was, the daily, bursty and
mixed ones deterministic, and what a forecast of each is worth."""

import hashlib
import json
import unittest

from benchmarks import generate
from benchmarks import series as series_mod


def digest(document):
    """The SHA-256 of the document as series.py's CLI writes it."""
    return hashlib.sha256(json.dumps(document).encode()).hexdigest()


class TestClassic(unittest.TestCase):
    cluster = generate.generate(6, 150, seed=3)

    def test_unchanged(self):
        # Digests of the series before the mixes (version 80a1591): the
        # results in benchmarks/results and the tests built on them stay
        # valid only while the default mix draws the same values.
        self.assertEqual(
            'f0dfbb862c7295a6c3eeb04e6d559048ac5424916b9f93bcae5e824265dcfc0a',
            digest(series_mod.series(self.cluster, hours=48, seed=7)))
        self.assertEqual(
            'ca4df0f1092b870591169cd8292764b74e328b6ba2ebeaad5d710498f49c7ba8',
            digest(series_mod.series(self.cluster, hours=24,
                                     step_minutes=30, seed=2)))
