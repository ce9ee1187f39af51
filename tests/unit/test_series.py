"""benchmarks/series.py: the classic mix as it was, the daily, bursty and
mixed ones deterministic, and what a forecast of each is worth."""

import contextlib
import hashlib
import io
import json
import os
import tempfile
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


class TestMixes(unittest.TestCase):
    cluster = generate.generate(8, 320, seed=1)  # 4 domains

    def test_deterministic_whatever_the_order(self):
        reordered = dict(self.cluster,
                         servers=list(reversed(self.cluster['servers'])))
        for mix in (series_mod.DAILY, series_mod.BURSTY, series_mod.MIXED):
            with self.subTest(mix=mix):
                one = series_mod.series(self.cluster, 30, seed=4, mix=mix)
                self.assertEqual(mix, one['mix'])
                self.assertEqual(one, series_mod.series(
                    self.cluster, 30, seed=4, mix=mix))
                self.assertEqual(one, series_mod.series(
                    reordered, 30, seed=4, mix=mix))
                other = series_mod.series(self.cluster, 30, seed=5, mix=mix)
                self.assertNotEqual(one['servers'], other['servers'])

    def test_shapes_of_each_mix(self):
        for mix, table in series_mod.MIXES.items():
            made = series_mod.series(self.cluster, 2, mix=mix)
            drawn = {s['shape'] for s in made['servers'].values()}
            self.assertEqual({s for s, _ in table} | {'stopped'}, drawn)
        self.assertNotIn('mix', series_mod.series(self.cluster, 2))
        with self.assertRaisesRegex(ValueError, 'no mix .weekly.'):
            series_mod.series(self.cluster, 2, mix='weekly')

    def test_mixed_by_whole_domains(self):
        made = series_mod.series(self.cluster, 30, seed=4, mix='mixed')
        domains = {series_mod.domain_of(h) for h in
                   self.cluster['hypervisors']}
        self.assertEqual(domains, set(made['domains']))
        self.assertEqual(['bursty', 'bursty', 'daily', 'daily'],
                         sorted(made['domains'].values()))
        alone = {mix: series_mod.series(self.cluster, 30, seed=4, mix=mix)
                 for mix in ('daily', 'bursty')}
        domain = {h['name']: series_mod.domain_of(h)
                  for h in self.cluster['hypervisors']}
        for server in self.cluster['servers']:
            # Every server of a domain draws as its domain's mix does.
            mix = made['domains'][domain[server['host']]]
            self.assertEqual(alone[mix]['servers'][server['id']],
                             made['servers'][server['id']])

    def test_domain_mixes(self):
        hyps = [{'az': 'az%d' % (i % 5), 'cpu_model': 'm'}
                for i in range(10)]
        got = series_mod.domain_mixes({'hypervisors': hyps}, 1)
        self.assertEqual(['az0/m', 'az1/m', 'az2/m', 'az3/m', 'az4/m'],
                         list(got))
        # Half each, the odd one bursty; the seed decides which.
        self.assertEqual(2, list(got.values()).count('daily'))
        draws = {tuple(series_mod.domain_mixes({'hypervisors': hyps},
                                               seed).values())
                 for seed in range(1, 20)}
        self.assertGreater(len(draws), 3)
        self.assertEqual(got, series_mod.domain_mixes(
            {'hypervisors': list(reversed(hyps))}, 1))


class TestBusiness(unittest.TestCase):

    def test_month_peak(self):
        def at(text):
            when = series_mod.epoch(text)
            return series_mod.month_peak(when, series_mod.month_ends(
                when, when))
        self.assertEqual(0.0, at('2026-11-22T00:00:00Z'))
        self.assertAlmostEqual(0.5, at('2026-11-26T12:00:00Z'))
        self.assertEqual(1.0, at('2026-11-30T00:00:00Z'))
        self.assertEqual(1.0, at('2026-12-02T00:00:00Z'))
        self.assertAlmostEqual(0.5, at('2026-12-03T00:00:00Z'))
        self.assertEqual(0.0, at('2026-12-15T00:00:00Z'))
        self.assertEqual(1.0, at('2027-03-01T23:00:00Z'))  # after February

    def test_no_daily_rhythm_and_a_month_peak(self):
        made = series_mod.series(generate.generate(8, 320, seed=1), 216,
                                 mix='bursty')
        cpu = [s['cpu'] for s in made['servers'].values()
               if s['shape'] == 'business']
        week = sum(sum(c[:168]) for c in cpu) / (168 * len(cpu))
        for hour in range(24):
            mean = sum(sum(c[hour:168:24]) for c in cpu) / (7 * len(cpu))
            self.assertLess(abs(mean - week), 0.25 * week, hour)
        # Days 8 and 9, November's last and December's first, against
        # the first two.
        first, last = (sum(sum(c[a:a + 48]) for c in cpu)
                       for a in (0, 168))
        self.assertGreater(last, 1.8 * first)


class TestForecastErrors(unittest.TestCase):
    cluster = {
        'hypervisors': [
            {'name': 'cn1', 'vcpus': 4, 'az': 'az1', 'cpu_model': 'm'},
            {'name': 'cn2', 'vcpus': 4, 'az': 'az1', 'cpu_model': 'm'}],
        'servers': [{'id': 'a', 'host': 'cn1', 'vcpus': 2},
                    {'id': 'b', 'host': 'cn2', 'vcpus': 8}]}
    # Two steps a day, two days of history: steps 4 and 5 are predicted.
    made = {'step_minutes': 720, 'steps': 6, 'servers': {
        'a': {'cpu': [0.2, 0.4, 0.6, 0.8, 1.0, 0.0]},
        'b': {'cpu': [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}}}

    def test_by_hand(self):
        # cn1 reads 0.1 0.2 0.3 0.4 | 0.5 0.0; cn2 0.2 0.4 0.6 0.8 | 1.0
        # 1.0, capped at 1 (asked for 1.2).
        got = series_mod.errors(self.cluster, self.made, days=2, weight=0.5)
        self.assertEqual(2, got['steps'])
        self.assertAlmostEqual((0.1 + 0.5 + 0.2 + 0.0) / 4,
                               got['persistence'])
        self.assertAlmostEqual((0.3 + 0.3 + 0.6 + 0.4) / 4, got['same_hour'])
        self.assertAlmostEqual((0.2 + 0.4 + 0.4 + 0.2) / 4, got['blend'])
        self.assertAlmostEqual((0.25 + 0.5) / 2, got['domain_std'])

    def test_domains_and_history(self):
        got = series_mod.errors(self.cluster, self.made, days=2,
                                domains=['az1/m'])
        self.assertAlmostEqual(0.2, got['persistence'])
        with self.assertRaisesRegex(ValueError, 'no hypervisor in az2/m'):
            series_mod.errors(self.cluster, self.made, days=2,
                              domains=['az2/m'])
        with self.assertRaisesRegex(ValueError, 'no step with 3 days'):
            series_mod.errors(self.cluster, self.made, days=3)

    def test_bursty_and_daily_mixes(self):
        # Nine days: the last two, at November's end, have seven of
        # history. On the bursty mix this hour's value is the far better
        # forecast, on the daily one the same hour of the days before.
        cluster = generate.generate(8, 320, seed=1)
        got = {mix: series_mod.errors(cluster, series_mod.series(
            cluster, 216, mix=mix)) for mix in ('bursty', 'daily')}
        self.assertLess(1.5 * got['bursty']['persistence'],
                        got['bursty']['same_hour'])
        self.assertLess(1.5 * got['daily']['same_hour'],
                        got['daily']['persistence'])


class TestCommandLine(unittest.TestCase):

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.cluster = generate.generate(8, 320, seed=1)
        self.cluster_file = os.path.join(self.tmp, 'c.json')
        generate.write(self.cluster, self.cluster_file)

    def main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = series_mod.main(list(argv))
            except SystemExit as exc:
                code = exc.code
        return code, out.getvalue(), err.getvalue()

    def test_mix(self):
        path = os.path.join(self.tmp, 's.json')
        self.assertEqual(0, self.main(self.cluster_file, '--hours', '4',
                                      '--mix', 'mixed', '-o', path)[0])
        with open(path) as stream:
            self.assertEqual(series_mod.series(self.cluster, 4, mix='mixed'),
                             json.load(stream))
        code, _, err = self.main(self.cluster_file, '--mix', 'weekly')
        self.assertEqual(2, code)
        self.assertIn("invalid choice: 'weekly'", err)

    def test_errors(self):
        code, out, _ = self.main(self.cluster_file, '--errors', '--hours',
                                 '72', '--days', '2')
        self.assertEqual(0, code)
        cells = [[c.strip() for c in line.strip('|').split('|')]
                 for line in out.splitlines()[2:]]
        rows = {row[0]: row[1:] for row in cells}
        self.assertEqual(['classic', 'daily', 'bursty', 'mixed',
                          'mixed: daily domains', 'mixed: bursty domains'],
                         list(rows))
        got = series_mod.errors(self.cluster, series_mod.series(
            self.cluster, 72, mix='bursty'), days=2)
        self.assertEqual(['%.3f' % got[k] for k in (
            'persistence', 'same_hour', 'blend')], rows['bursty'][:3])
        code, _, err = self.main(self.cluster_file, '--errors', '--hours',
                                 '47', '--days', '2')
        self.assertEqual(2, code)
        self.assertIn('48 steps leave no step with 2 days of history', err)
        code, _, err = self.main('--hours', '48')
        self.assertEqual(2, code)
        self.assertIn('a cluster file is needed', err)
