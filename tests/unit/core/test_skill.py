"""core/load/skill.py: each predictor of the period ahead scored on a history,
from the domain's mean, and the weight a domain's history earns."""

import math
import random
import unittest

from osc_leveller.core.load import skill
from osc_leveller.core.model import model

HOUR = 3600.0
DAY_STEPS = 24


def history(values, lasting=None):
    """A History of hourly steps from {host: [value per step]}, the last
    value at index 0; actual at an index is the value of that step (the
    mean over the hour before it)."""
    def indexed(series):
        return {h: {i - len(v) + 1: x for i, x in enumerate(v)}
                for h, v in series.items()}
    return skill.History(
        HOUR, now={'cpu': indexed(values)}, actual={'cpu': indexed(values)},
        lasting=None if lasting is None else {'cpu': indexed(lasting)})


def daily(rng, days):
    """Each host its own shape over the day, the same every day."""
    shapes = {h: [rng.random() for _ in range(DAY_STEPS)]
              for h in ('hv1', 'hv2', 'hv3')}
    return {h: shape * days for h, shape in shapes.items()}


def bursty(rng, steps):
    """Each host holds a level for a random stretch, then jumps: the hour
    ahead is this hour, almost always; the same hour yesterday is not."""
    out = {}
    for host in ('hv1', 'hv2', 'hv3'):
        level, series = rng.random(), []
        for _ in range(steps):
            if rng.random() < 0.05:
                level = rng.random()
            series.append(level)
        out[host] = series
    return out


class TestErrors(unittest.TestCase):
    domains = dict.fromkeys(('hv1', 'hv2', 'hv3'), 'az1/x')

    def test_a_daily_load_is_forecast_without_error(self):
        found = skill.errors(history(daily(random.Random(1), 9)),
                             self.domains, 7)
        total = sum((found[h]['cpu'] for h in found), model.ForecastErrors())
        self.assertGreater(total.points, 3 * 100)
        self.assertAlmostEqual(0.0, total.ahead)
        self.assertGreater(total.now, 1.0)
        earned = skill.skill([found[h]['cpu'] for h in found], 0.7)
        self.assertEqual(1.0, earned.earned)
        self.assertEqual(0.7, earned.weight)
        self.assertEqual('', earned.why)

    def test_a_bursty_load_is_best_predicted_by_now(self):
        found = skill.errors(history(bursty(random.Random(2), 9 * 24)),
                             self.domains, 7)
        earned = skill.skill([found[h]['cpu'] for h in found], 0.7)
        self.assertLess(earned.now, earned.ahead / 2)
        # A blend would err a little less than now, but the forecast
        # alone errs more: no skill, no weight.
        self.assertGreater(earned.earned, 0.0)
        self.assertEqual(0.0, earned.weight)
        self.assertIn('CPU error %.3f against %.3f for now; weight 0 (no '
                      'better than now)' % (earned.ahead, earned.now),
                      earned.describe('cpu'))

    def test_a_forecast_that_adds_nothing_gets_no_weight(self):
        # Its errors are now's and more: blending only adds them.
        found = skill.skill([model.ForecastErrors(
            30, now=0.3, ahead=1.2, cross=0.4)], 0.7)
        self.assertEqual(0.0, found.earned)
        self.assertEqual(0.0, found.weight)
        self.assertEqual('CPU error 0.200 against 0.100 for now; weight 0 '
                         '(no better than now)', found.describe('cpu'))

    def test_load_that_rises_everywhere_at_once_is_no_error(self):
        # Every host follows the same random hourly swings on top of its
        # own level: now misses each swing, but not who is above whom.
        rng = random.Random(3)
        swings = [rng.random() * 0.5 for _ in range(9 * 24)]
        values = {h: [base + s for s in swings]
                  for h, base in (('hv1', 0.1), ('hv2', 0.2), ('hv3', 0.4))}
        found = skill.errors(history(values), self.domains, 7)
        for host in values:
            self.assertAlmostEqual(0.0, found[host]['cpu'].now)
            self.assertAlmostEqual(0.0, found[host]['cpu'].ahead)

    def test_a_hypervisor_alone_in_its_domain_has_nothing_to_even(self):
        values = bursty(random.Random(4), 9 * 24)
        found = skill.errors(history(values), {'hv1': 'a', 'hv2': 'b',
                                               'hv3': 'b'}, 7)
        self.assertNotIn('hv1', found)
        self.assertEqual({'hv2', 'hv3'}, set(found))

    def test_unknown_hypervisors_are_left_out(self):
        found = skill.errors(history(bursty(random.Random(5), 100)),
                             {'hv1': 'a', 'hv2': 'a'}, 1)
        self.assertEqual({'hv1', 'hv2'}, set(found))

    def test_the_past_days_there_are(self):
        # Two days of history and forecast_days 7: each step is scored on
        # the days it has (here the day before), from step 24 on.
        values = daily(random.Random(6), 2)
        found = skill.errors(history(values), self.domains, 7)
        # Steps -47..-1 have a truth one step later; those from -24 on
        # have the day before too.
        self.assertEqual(24, found['hv1']['cpu'].points)
        self.assertAlmostEqual(0.0, found['hv1']['cpu'].ahead)

    def test_a_missing_value_leaves_out_that_step(self):
        values = daily(random.Random(7), 3)
        h = history(values)
        del h.now['cpu']['hv2'][-5]
        found = skill.errors(h, self.domains, 1)
        self.assertEqual(found['hv1']['cpu'].points - 1,
                         found['hv2']['cpu'].points)

    def test_the_load_that_lasted(self):
        rng = random.Random(8)
        values = bursty(rng, 4 * 24)
        # The lasting average here is the truth itself: no error.
        truth = {h: v[1:] + [v[-1]] for h, v in values.items()}
        found = skill.errors(history(values, lasting=truth),
                             self.domains, 1)
        total = sum((found[h]['cpu'] for h in found), model.ForecastErrors())
        self.assertIsNotNone(total.lasting)
        self.assertLessEqual(total.lasting, total.now)
        earned = skill.skill([found[h]['cpu'] for h in found], 1)
        self.assertIn('for the load that lasted', earned.describe('cpu'))

    def test_a_step_that_is_not_a_whole_part_of_the_day(self):
        # 7 minutes: a day is 205.7 steps, the nearest step is taken.
        step = 420.0
        per_day = 86400 / step
        values = {h: [math.sin(2 * math.pi * i / per_day + k)
                      for i in range(int(3 * per_day))]
                  for k, h in enumerate(('hv1', 'hv2', 'hv3'))}
        h = history(values)
        h.step = step
        found = skill.errors(h, self.domains, 2)
        total = sum((found[x]['cpu'] for x in found), model.ForecastErrors())
        self.assertLess(total.ahead / total.points, 0.01)


class TestSkill(unittest.TestCase):
    def sums(self, seed, correlation):
        rng = random.Random(seed)
        errors = []
        for _ in range(3):
            now = ahead = cross = 0.0
            for _ in range(50):
                a = rng.gauss(0, 0.1)
                b = correlation * a + rng.gauss(0, 0.08)
                now += a * a
                ahead += b * b
                cross += a * b
            errors.append(model.ForecastErrors(50, now, ahead, cross))
        return errors

    def test_the_weight_with_the_least_error(self):
        for seed, correlation in ((1, 0.0), (2, 0.3), (3, -0.2)):
            errors = self.sums(seed, correlation)
            found = skill.skill(errors, 1.0)
            total = sum(errors, model.ForecastErrors())

            def blend(w):
                return ((1 - w) ** 2 * total.now + 2 * w * (1 - w) *
                        total.cross + w ** 2 * total.ahead)
            best = min((w / 1000 for w in range(1001)), key=blend)
            self.assertAlmostEqual(best, found.earned, places=2)
            if found.weight:
                self.assertAlmostEqual(
                    math.sqrt(blend(found.weight) / total.points),
                    found.blend, places=3)
                self.assertLessEqual(found.blend, found.now)

    def test_bounded_by_the_setting(self):
        errors = [model.ForecastErrors(30, now=3.0, ahead=0.3, cross=0.2)]
        found = skill.skill(errors, 0.5)
        self.assertGreater(found.earned, 0.5)
        self.assertEqual(0.5, found.weight)
        self.assertIn('bounded by forecast_weight', found.describe('ram'))

    def test_too_little_history(self):
        found = skill.skill([model.ForecastErrors(5, 3.0, 0.1, 0.1)] * 2, 1.0)
        self.assertEqual(0.0, found.weight)
        self.assertEqual('only 5 steps of history, 12 needed', found.why)

    def test_no_history(self):
        found = skill.skill([], 1.0)
        self.assertEqual(0.0, found.weight)
        self.assertEqual('CPU: no history to measure the forecast on; '
                         'weight 0', found.describe('cpu'))


if __name__ == '__main__':
    unittest.main()
