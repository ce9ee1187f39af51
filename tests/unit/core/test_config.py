import datetime
import unittest

from osc_leveller.core.settings import config
from osc_leveller.core.settings import options


def settings(*sections):
    return config.Settings([('layer%d' % i, config.flatten(s, 'layer%d' % i))
                            for i, s in enumerate(sections)])


def _nested(section):
    """{'a': {'b.c': 1}} as {'a': {'b': {'c': 1}}}."""
    nested = {}
    for name, value in section.items():
        if isinstance(value, dict):
            value = _nested(value)
        head, _, rest = name.partition('.')
        if rest:
            nested.setdefault(head, {}).update(_nested({rest: value}))
        else:
            nested[name] = value
    return nested


class TestFlatten(unittest.TestCase):
    def test_nested_keys_and_conversions(self):
        # openstacksdk hands clouds.yaml numbers over as strings.
        flat = config.flatten({
            'threshold': '0.2', 'max_moves': '3', 'include_locked': True,
            'exclude_hosts': 'hv1', 'weights': {'cpu': 2},
            'prometheus': {'url': 'http://p', 'queries': {'cpu': 'q'}}},
            'here')
        self.assertEqual({
            'threshold': 0.2, 'max_moves': 3, 'include_locked': True,
            'exclude_hosts': ('hv1',), 'weights.cpu': 2.0,
            'prometheus.url': 'http://p', 'prometheus.queries.cpu': 'q'},
            flat)
        self.assertIsInstance(flat['max_moves'], int)
        self.assertEqual({}, config.flatten(None, 'here'))

    def test_errors_name_the_layer_and_the_key(self):
        for section, message in (
                ({'treshold': 1},
                 'f.yaml: unknown setting treshold (did you mean threshold?)'),
                ({'prometheus': {'quries': {}}},
                 'did you mean prometheus.queries?'),
                ({'prometheus': 'http://p'},
                 'f.yaml: prometheus: must be a mapping of url, token'),
                ({'max_moves': 1.5},
                 'f.yaml: max_moves: must be a whole number (got 1.5)'),
                ({'threshold': 'high'}, 'threshold: must be a number'),
                ({'threshold': True}, 'threshold: must be a number'),
                ({'threshold': float('nan')}, 'must be a finite number'),
                ({'cooldown': -1}, 'cooldown: must be >= 0 (got -1)'),
                ({'ceiling': 0}, 'ceiling: must be > 0 (got 0)'),
                ({'include_locked': 'yes'}, 'must be true or false'),
                ({'cpu_compatibility': 'x'}, 'must be model or features'),
                ({'prometheus': {'no_metrics': 'ignore'}},
                 'must be allocations or exclude'),
                ({'exclude_hosts': [1, 2]}, 'must be a list of names'),
                ({'prometheus': {'url': 9090}}, 'prometheus.url: must be text'),
                ('threshold: 1', 'the leveller settings must be a mapping')):
            with self.assertRaises(config.ConfigError) as ctx:
                config.flatten(section, 'f.yaml')
            self.assertIn(message, str(ctx.exception))

    def test_a_long_value_is_echoed_as_a_short_prefix(self):
        # A 5,000-character value of every setting, shaped to pass the
        # first checks of its kind, and as an unknown key and a weight
        # pair: no message quotes more than a short prefix of it.
        long = 'A' * 5000
        shapes = {
            config.TIME_ZONE: 'Europe/' + long, config.QUERY: '{%s}' % long,
            config.URL: 'http://%s:99999/' % long, config.PATTERN: '(' + long,
            config.DURATION: long, config.CHOICE: long,
            config.WINDOWS: ['TZ=Europe/%s 22:00-06:00' % long,
                             '0 2 * * 5-1%s' % long, 'Mon %s' % long],
            config.LIST: [long + '\ud800'], config.TEXT: long + '\ud800',
            config.FILE: long + '\ud800',
            config.HEADERS: [{long + ':': 'x'}, {'X-A': long + '\n'}, long],
            config.BOOL: long, config.INT: long, config.FLOAT: long}
        cases = []
        for key in config.KEYS:
            values = shapes[key.kind]
            for value in values if isinstance(values, list) else [values]:
                cases.append(({key.name: value} if '.' not in key.name else
                              {key.name.split('.')[0]: {key.name.split(
                                  '.', 1)[1]: value}}, key.name))
        cases.append(({long: 1}, 'unknown setting'))
        for section, name in cases:
            section = _nested(section)
            with self.subTest(name), self.assertRaises(
                    config.ConfigError) as ctx:
                config.flatten(section, 'f.yaml')
            self.assertIn(name, str(ctx.exception))
            self.assertLess(len(str(ctx.exception)), 600, name)
            self.assertNotIn('A' * 81, str(ctx.exception), name)
        for pair in (long, 'cpu=' + long):
            with self.assertRaises(config.ConfigError) as ctx:
                config.weight_flags([pair])
            self.assertNotIn('A' * 81, str(ctx.exception))

    def test_numbers_past_a_float(self):
        # An int too large for a float, and clouds.yaml's text of an int
        # that float() would round into range.
        for value in (10 ** 400, -10 ** 400, '9007199254740993', '1e999'):
            with self.assertRaises(config.ConfigError) as ctx:
                config.flatten({'weights': {'cpu': value}}, 'f.yaml')
            self.assertIn('f.yaml: weights.cpu: must be a finite number of '
                          'at most 2**53', str(ctx.exception))
        self.assertEqual({'max_moves': 2 ** 53}, config.flatten(
            {'max_moves': str(2 ** 53)}, 'f.yaml'))

    def test_query_placeholders_take_no_conversion_or_format(self):
        for query, shown in (('rate(x[{window!z}])', '{window!z}'),
                             ('avg by ({label:d}) (up)', '{label:d}'),
                             ('rate(x[{window.real}])', '{window.real}')):
            with self.assertRaises(config.ConfigError) as ctx:
                config.flatten({'prometheus': {'queries': {'cpu': query}}},
                               'f.yaml')
            self.assertIn('prometheus.queries.cpu: must be PromQL whose '
                          'placeholders are {window} and {label}, not '
                          + shown, str(ctx.exception))

    def test_lasting_is_a_prometheus_duration(self):
        for good in ('3h', '90m', '1h30m', '1d'):
            self.assertEqual({'prometheus.lasting': good}, config.flatten(
                {'prometheus': {'lasting': good}}, 'f.yaml'))
        for bad in ('3 hours', '3H', '-3h', 'h', '3h ', '3.5h'):
            with self.assertRaisesRegex(
                    config.ConfigError, r'^f\.yaml: prometheus\.lasting: '
                    r'must be a Prometheus duration such as 3h or 90m '):
                config.flatten({'prometheus': {'lasting': bad}}, 'f.yaml')

    def test_the_grammar_of_a_prometheus_duration(self):
        # Every unit, in any order, repeated: summed.
        for text, seconds in (('500ms', 0.5), ('90s', 90), ('1h30m', 5400),
                              ('30m1h', 5400), ('1h1h', 7200),
                              ('2w1d', 15 * 86400), ('1y', 365 * 86400),
                              ('0005m', 300), ('1m1s1ms', 61.001)):
            with self.subTest(text=text):
                self.assertEqual({'prometheus.lasting': text}, config.flatten(
                    {'prometheus': {'lasting': text}}, 'f.yaml'))
                self.assertEqual(seconds, config.seconds(text))
        for text in ('5', 'm', '1.5h', '3H', '1h 30m', '1hour', '5mss',
                     '1ms1', '-1m', '+1m', '1e3s', '\u0665m'):
            with self.subTest(text=text):
                with self.assertRaisesRegex(config.ConfigError,
                                            'must be a Prometheus duration'):
                    config.check(config.BY_NAME['prometheus.forecast_ahead'],
                                 text, 'f.yaml')
        # prometheus.window is text, read the same way: none is no time.
        self.assertEqual(0, config.seconds('five minutes'))
        self.assertEqual(0, config.seconds(''))

    def test_a_number_prometheus_cannot_hold(self):
        # Prometheus keeps durations in int64 milliseconds: 19 digits may
        # fit, 20 never do; thousands would make int() raise.
        self.assertEqual({'prometheus.lasting': '9' * 19 + 'ms'},
                         config.flatten({'prometheus': {
                             'lasting': '9' * 19 + 'ms'}}, 'f.yaml'))
        for key in ('prometheus.lasting', 'prometheus.forecast_ahead',
                    'guard.since'):
            for text in ('1' + '0' * 19 + 'ms', '9' * 5000 + 'h'):
                with self.subTest(key=key, digits=len(text.rstrip('hms'))):
                    with self.assertRaisesRegex(
                            config.ConfigError, '^f.yaml: %s: must be a '
                            'Prometheus duration such as 3h' % key):
                        config.check(config.BY_NAME[key], text, 'f.yaml')
        self.assertEqual(0, config.seconds('9' * 5000 + 'm'))

    def test_the_forecast_looks_at_most_12h_ahead(self):
        for good, seconds in (('1h', 3600), ('90m', 5400), ('12h', 43200),
                              ('1h30m', 5400)):
            self.assertEqual({'prometheus.forecast_ahead': good},
                             config.flatten({'prometheus': {
                                 'forecast_ahead': good}}, 'f.yaml'))
            self.assertEqual(seconds, config.seconds(good))
        for bad in ('13h', '1d', '12h1s'):
            with self.assertRaisesRegex(
                    config.ConfigError, r'^f\.yaml: prometheus\.'
                    r'forecast_ahead: must be a Prometheus duration up to '
                    r'12h '):
                config.flatten({'prometheus': {'forecast_ahead': bad}},
                               'f.yaml')
        self.assertEqual({'prometheus.forecast_days': 7}, config.flatten(
            {'prometheus': {'forecast_days': 7}}, 'f.yaml'))
        with self.assertRaises(config.ConfigError):
            config.flatten({'prometheus': {'forecast_weight': 1.5}}, 'f.yaml')

    def test_a_malformed_url_is_refused_and_masked(self):
        for url in ('http://ops:s3cret@[::1', 'http://[::1:9090'):
            with self.assertRaises(config.ConfigError) as ctx:
                config.check(config.BY_NAME['prometheus.url'], url,
                             '--prometheus-url', flag=True)
            self.assertIn('--prometheus-url: must be an http or https URL',
                          str(ctx.exception))
            self.assertNotIn('s3cret', str(ctx.exception))

    def test_every_default_passes_its_own_check(self):
        for key in config.KEYS:
            self.assertEqual(key.default, config.check(key, key.default, 'x'),
                             key.name)

    def test_defaults_are_the_planners(self):
        built = options.from_settings(config.Settings())
        self.assertEqual(options.PlannerOptions(), built)

    def test_windows(self):
        flat = config.flatten({'windows': {
            'time_zone': 'Europe/Berlin',
            'blackout': ['Mon-Fri 08:00-18:00', '2026-12-20..2027-01-04'],
            'allowed': ['22:00-06:00', '0 22 * * 5 for 56h']}}, 'f.yaml')
        self.assertEqual('Europe/Berlin', flat['windows.time_zone'])
        self.assertEqual(('Mon-Fri 08:00-18:00', '2026-12-20..2027-01-04'),
                         flat['windows.blackout'])
        self.assertEqual(('22:00-06:00', '0 22 * * 5 for 56h'),
                         flat['windows.allowed'])
        # A date alone, as YAML reads it unquoted: that day.
        flat = config.flatten({'windows': {'blackout': [
            datetime.date(2026, 12, 24), '2026-12-31']}}, 'f.yaml')
        self.assertEqual(('2026-12-24', '2026-12-31'),
                         flat['windows.blackout'])
        for section, message in (
                ({'time_zone': 'Mars/Olympus'},
                 'f.yaml: windows.time_zone: must be an IANA time zone such '
                 'as Europe/Berlin (unknown time zone Mars/Olympus'),
                ({'time_zone': ''}, 'windows.time_zone: must be an IANA'),
                ({'time_zone': 5}, 'windows.time_zone: must be text'),
                ({'blackout': ['Mon-Fri 08:00-18:00', '0 25 * * *']},
                 'f.yaml: windows.blackout: must be windows such as '
                 '"Mon-Fri 08:00-18:00", "0 22 * * 5 for 56h" or '
                 '"2026-12-20..2027-01-04" (\'0 25 * * *\': hour \'25\' is '
                 'not 0..23)'),
                ({'allowed': 'TZ=Nowhere/Town 22:00-06:00'},
                 'windows.allowed: must be windows such as'),
                ({'blackout': ['TZ=Nowhere/Town 2026-12-20..2027-01-04']},
                 "windows.blackout: must be windows such as \"Mon-Fri "
                 "08:00-18:00\", \"0 22 * * 5 for 56h\" or "
                 "\"2026-12-20..2027-01-04\" ('TZ=Nowhere/Town "
                 "2026-12-20..2027-01-04': unknown time zone Nowhere/Town"),
                ({'allowed': ['2027-01-04..2026-12-20']},
                 "('2027-01-04..2026-12-20': ends before it starts)"),
                ({'blackout': [{'cron': '0 2 * * *'}]},
                 'windows.blackout: must be a list of windows written as '
                 'text'),
                ({'blackout': [datetime.datetime(2026, 12, 24, 18)]},
                 'must be a list of windows written as text'),
                ({'blackout': 5}, 'must be a list of windows'),
                ({'blackout': {'a': 'b'}}, 'must be a list of windows')):
            with self.subTest(section=section):
                with self.assertRaises(config.ConfigError) as ctx:
                    config.flatten({'windows': section}, 'f.yaml')
                self.assertIn(message, str(ctx.exception))
                self.assertNotIn('Traceback', str(ctx.exception))


class TestWeightFlags(unittest.TestCase):
    def test_pairs(self):
        self.assertEqual({'weights.cpu': 2.0, 'weights.ram_pressure': 0.0},
                         config.weight_flags(['cpu=2', 'ram_pressure= 0']))

    def test_bad_pairs(self):
        for pair, message in (
                ('disk=1', '--weight disk=1: use NAME=VALUE with NAME one of '
                           'cpu, ram, cpu_pressure, ram_pressure'),
                ('cpu', 'use NAME=VALUE'),
                ('cpu=lots', "--weight cpu=lots: must be a number (got "
                             "'lots')"),
                ('cpu=-1', 'must be >= 0'),
                ('cpu=nan', 'must be a finite number')):
            with self.assertRaises(config.ConfigError) as ctx:
                config.weight_flags([pair])
            self.assertIn(message, str(ctx.exception))

    def test_zero_cpu_and_ram_is_refused_by_the_planner(self):
        effective = config.Settings([('--weight', config.weight_flags(
            ['cpu=0', 'ram=0']))])
        with self.assertRaises(ValueError) as ctx:
            options.from_settings(effective)
        self.assertIn('cannot both be 0', str(ctx.exception))


class TestSettings(unittest.TestCase):
    def test_later_layers_win_and_sources_are_kept(self):
        effective = settings({'threshold': 0.1, 'max_moves': 5},
                             {'threshold': 0.2})
        self.assertEqual((0.2, 'layer1'), (effective['threshold'],
                                           effective.sources['threshold']))
        self.assertEqual((5, 'layer0'), (effective['max_moves'],
                                         effective.sources['max_moves']))
        self.assertEqual(('default', 0.85), (effective.sources['ceiling'],
                                             effective['ceiling']))

    def test_exclusions_add_up_scopes_replace(self):
        effective = settings(
            {'exclude_hosts': ['hv1', 'hv2'], 'availability_zones': ['az1']},
            {'exclude_hosts': ['hv2', 'hv3'], 'availability_zones': ['az2']})
        self.assertEqual(('hv1', 'hv2', 'hv3'), effective['exclude_hosts'])
        self.assertEqual('layer0 + layer1', effective.sources['exclude_hosts'])
        self.assertEqual(('az2',), effective['availability_zones'])

    def test_blackouts_add_up_allowed_windows_replace(self):
        effective = settings(
            {'windows': {'blackout': ['Mon 08:00-12:00'],
                         'allowed': ['22:00-06:00']}},
            {'windows': {'blackout': ['0 2 * * *'],
                         'allowed': ['Sat 00:00-24:00']}})
        self.assertEqual(('Mon 08:00-12:00', '0 2 * * *'),
                         effective['windows.blackout'])
        self.assertEqual(('Sat 00:00-24:00',), effective['windows.allowed'])
        self.assertEqual([('windows.blackout',
                           ['Mon 08:00-12:00', '0 2 * * *'],
                           'layer0 + layer1')],
                         [r for r in effective.rows()
                          if r[0] == 'windows.blackout'])

    def test_section(self):
        effective = settings({'prometheus': {
            'url': 'http://p', 'queries': {'cpu': 'q'}}})
        section = effective.section('prometheus')
        self.assertEqual('http://p', section['url'])
        self.assertEqual({'cpu': 'q'}, section['queries'])
        self.assertEqual(10.0, section['timeout'])
        self.assertNotIn('token', section)  # unset keys are left out

    def test_rows_mask_secrets(self):
        effective = settings({'prometheus': {
            'url': 'https://ops:s3cret@prom:9090/x', 'token': 'tok',
            'password': 'pw', 'username': 'ops'}})
        rows = {name: value for name, value, _ in effective.rows()}
        self.assertEqual('https://ops:******@prom:9090/x',
                         rows['prometheus.url'])
        self.assertEqual('******', rows['prometheus.token'])
        self.assertEqual('******', rows['prometheus.password'])
        self.assertEqual('ops', rows['prometheus.username'])
        self.assertNotIn('s3cret', repr(effective.rows()))
        self.assertIsNone(rows['prometheus.ca_bundle'])
        self.assertEqual([k.name for k in config.KEYS], list(rows))

    def test_headers_are_checked_and_their_values_masked(self):
        # X_Tenant: as openstacksdk hands clouds.yaml's X-Tenant over.
        effective = settings({'prometheus': {'headers': {
            'X-Scope-OrgID': 'team-a', 'X_Tenant': 1234}}})
        self.assertEqual({'X-Scope-OrgID': 'team-a', 'X-Tenant': '1234'},
                         effective['prometheus.headers'])
        rows = {name: value for name, value, _ in effective.rows()}
        self.assertEqual({'X-Scope-OrgID': '******', 'X-Tenant': '******'},
                         rows['prometheus.headers'])
        self.assertEqual(['team-a', '1234'], effective.secrets())
        for bad, message in (
                ({'X Scope': 'a'}, "not a header named 'X Scope'"),
                ({'X-A': 'a\r\nX-B: b'}, 'without line breaks'),
                ({'X-A': True}, 'not so for X-A'),
                (['X-A: a'], 'a mapping of header names')):
            with self.subTest(bad), self.assertRaises(
                    config.ConfigError) as ctx:
                settings({'prometheus': {'headers': bad}})
            self.assertIn('prometheus.headers: must be ', str(ctx.exception))
            self.assertIn(message, str(ctx.exception))
            self.assertNotIn('b\'', str(ctx.exception))
            self.assertIn("(got '******')", str(ctx.exception))

    def test_url_without_password_is_shown_as_is(self):
        self.assertEqual('http://p:9090', config.mask_url('http://p:9090'))
