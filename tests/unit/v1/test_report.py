import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from benchmarks import generate
from osc_leveller.core.load import scoring
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import planner
from osc_leveller.core.planning import report as report_data
from osc_leveller.core.settings import options as core_options
from osc_leveller.v1 import plan
from osc_leveller.v1 import report
from osc_leveller.v1 import score
from tests.unit.core import test_n_plus_one
from tests.unit.core import test_report as core_test
from tests.unit.v1 import test_commands

# Set by .ci/run: there the browser test must run, never skip.
REQUIRE_BROWSER = 'OSC_LEVELLER_REQUIRE_BROWSER'
WINDOW = (1280, 2000)


class Page(html.parser.HTMLParser):
    """The elements of a rendered report: (tag, attributes, the domain of
    the section and the chart they are in, whether a closed <details>
    hides them), and the text of the reasons."""

    def __init__(self, text):
        super().__init__()
        self.elements = []
        self._closed = False  # in a <details> without open
        self.reasons = []
        self.refusals = []
        self.held = {}
        self.notes = []  # (domain, text) of the N+1 notes
        self._domain = self._chart = None
        self._text = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = attrs.get('class', '').split()
        if tag == 'section' and 'domain' in classes:
            self._domain = attrs['data-domain']
        if tag == 'svg':
            self._chart = attrs.get('data-chart')
        self.elements.append((tag, attrs, self._domain, self._chart,
                              self._closed))
        if tag == 'details':
            self._closed = 'open' not in attrs
        if {'reason', 'refusal', 'held', 'n-plus-one'} & set(classes):
            self._text = (classes, [])

    def handle_endtag(self, tag):
        if tag == 'svg':
            self._chart = None
        if tag == 'details':
            self._closed = False
        if tag in ('td', 'li', 'p') and self._text is not None:
            classes, parts = self._text
            text = ''.join(parts)
            if 'reason' in classes:
                self.reasons.append((self._domain, text))
            elif 'refusal' in classes:
                self.refusals.append((self._domain, text))
            elif 'n-plus-one' in classes:
                self.notes.append((self._domain, text))
            else:
                self.held[self._domain] = text
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text[1].append(data)

    def find(self, tag, cls=None, domain=None, chart=None, hidden=None):
        """hidden: True, only those a closed <details> hides; False, only
        those it does not."""
        return [attrs for t, attrs, d, c, folded in self.elements
                if t == tag and (cls is None or cls in attrs.get(
                    'class', '').split())
                and (domain is None or d == domain)
                and (chart is None or c == chart)
                and (hidden is None or folded == hidden)]


def png_size(path):
    """(width, height) of a PNG file, from its header."""
    with open(path, 'rb') as f:
        head = f.read(24)
    if head[:8] != b'\x89PNG\r\n\x1a\n' or head[12:16] != b'IHDR':
        raise AssertionError('%s is not a PNG file' % path)
    return struct.unpack('>II', head[16:24])


def chromium():
    """The browser's path; a skip where none is installed, unless
    REQUIRE_BROWSER is set (CI), where its absence fails the test."""
    path = shutil.which('chromium') or shutil.which('chromium-browser')
    if path is None:
        if os.environ.get(REQUIRE_BROWSER):
            raise AssertionError(
                '%s is set but no chromium is installed (apt-get install '
                'chromium)' % REQUIRE_BROWSER)
        raise unittest.SkipTest('no chromium: set %s to make this a '
                                'failure' % REQUIRE_BROWSER)
    return path


def render_in_browser(page, tmp):
    """(the DOM chromium rendered, the screenshot's path), from one start
    of headless chromium with a fresh profile and no network of its own."""
    shot = os.path.join(tmp, 'screenshot.png')
    profile = os.path.join(tmp, 'profile')
    os.mkdir(profile)
    done = subprocess.run(
        [chromium(), '--headless', '--no-sandbox', '--disable-gpu',
         '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--user-data-dir=' + profile,
         '--screenshot=' + shot, '--dump-dom',
         '--window-size=%d,%d' % WINDOW, 'file://' + os.path.abspath(page)],
        capture_output=True, text=True, timeout=120)
    if done.returncode or not os.path.exists(shot):
        raise AssertionError('chromium failed (%d): %s' % (
            done.returncode, done.stderr[-2000:]))
    return done.stdout, shot


class TestReportInBrowser(test_commands.CommandTest):
    def test_the_demo_plan_as_chromium_renders_it(self):
        path = os.path.join(self.tmp.name, 'report.html')
        saved = os.path.join(self.tmp.name, 'plan.json')
        self.run_cmd(plan.PlanLeveller, [
            '--snapshot', 'demo', '--report', path, '--output-file', saved])
        the_plan = plan_mod.read(saved)
        dom, shot = render_in_browser(path, self.tmp.name)
        page = Page(dom)

        self.assertEqual(WINDOW, png_size(shot))
        # A blank page of that size is 12 KB; the report's bars and text
        # make it many times that.
        self.assertGreater(os.path.getsize(shot), 100 * 1024)

        domains = {d['domain'] for d in the_plan.domains}
        sections = [a['data-domain'] for a in page.find('section', 'domain')]
        self.assertEqual(sorted(domains), sorted(sections))
        # The overview links each domain to its section, in that order.
        self.assertEqual(
            ['#' + a['id'] for a in page.find('section', 'domain')],
            [a['href'] for a in page.find('a')])
        snap = snapshot_io.load('demo')
        for name in sections:
            hosts = sorted(h.name for h in snap.hypervisors
                           if h.usable and scoring.domain_of(h) == name)
            charts = [a['data-chart'] for a in page.find(
                'svg', 'chart', domain=name)]
            self.assertEqual(['cpu', 'ram', 'score'], charts)
            for chart in charts:
                for when in ('before', 'after'):
                    bars = page.find('rect', when, domain=name, chart=chart)
                    self.assertEqual(hosts, sorted(
                        b['data-hypervisor'] for b in bars), (name, chart))
                    self.assertTrue(all(float(b['width']) >= 0
                                        for b in bars))
            self.assertEqual(1, len(page.find('rect', 'threshold',
                                              domain=name, chart='score')))
            self.assertEqual(1, len(page.find('line', 'ceiling',
                                              domain=name, chart='score')))
            self.assertEqual(1, len(page.find('line', 'gauge-threshold',
                                              domain=name)))
            moves = [m for m in the_plan.moves if m.domain == name]
            self.assertEqual([m.server_id for m in moves], [
                a['data-server'] for a in page.find('tr', 'move',
                                                    domain=name)])
            self.assertEqual([m.reason for m in moves],
                             [r for d, r in page.reasons if d == name])
        # The hottest hypervisor gives servers away: its CPU bar after is
        # shorter than before, and its colour says hot before.
        a03 = {b['class']: float(b['width']) for b in page.find(
            'rect', domain='az1/Skylake-Server', chart='cpu')
            if b.get('data-hypervisor') == 'cmp-a03.cloud.example.net'}
        self.assertLess(a03['bar after hot'], a03['bar before hot'])
        self.assertEqual(
            [('az2/Icelake-Server', 'vm-0079: cmp-b19.cloud.example.net '
              'refused: aggregate finance is reserved for other projects')],
            page.refusals)
        self.assertEqual(['az2/Icelake-Server'], list(page.held))
        self.assertIn('its best move, vm-0432', page.held[
            'az2/Icelake-Server'])
        # Self-contained: nothing to fetch, nothing to run.
        for tag in ('script', 'link', 'img', 'iframe', 'object'):
            self.assertEqual([], page.find(tag), tag)

    def test_a_large_domain_folded_as_chromium_renders_it(self):
        snap, _, the_plan = core_test.large_plan()
        drawn = self.folded_in_browser(
            snap, the_plan, generate.generate(240, 6000, seed=4))
        sizes = {len(d.hosts) > report_data.FOLD_ABOVE
                 for d in drawn.domains}
        self.assertEqual({True, False}, sizes)  # folded and whole ones

    def test_a_cloud_of_1000_hypervisors_as_chromium_renders_it(self):
        # 8 domains of 119 to 136 hypervisors, every one folded
        cluster = generate.generate(1000, 50000, seed=1)
        snap = snapshot_io.parse(cluster)
        the_plan = planner.make_plan(snap, core_options.PlannerOptions())
        drawn = self.folded_in_browser(snap, the_plan, cluster)
        self.assertEqual(8, len(drawn.domains))
        self.assertTrue(all(len(d.hosts) > report_data.FOLD_ABOVE
                            for d in drawn.domains))

    def folded_in_browser(self, snap, the_plan, cluster):
        """The report of a saved plan as chromium draws it: each domain of
        more than FOLD_ABOVE hypervisors folded, the others whole; the
        report's data, for more checks."""
        cluster = self.write('cluster.json', cluster)
        saved = self.write('plan.json', plan_mod.dumps(the_plan))
        path = os.path.join(self.tmp.name, 'large.html')
        self.run_cmd(report.ReportLeveller, [
            saved, '--snapshot', cluster, '--output-file', path])
        dom, shot = render_in_browser(path, self.tmp.name)
        page = Page(dom)
        self.assertEqual(WINDOW, png_size(shot))
        self.assertGreater(os.path.getsize(shot), 100 * 1024)
        drawn = report_data.of_plan(snap, the_plan,
                                    core_options.PlannerOptions())
        for domain in drawn.domains:
            name = domain.name
            by_score = [h.hypervisor for h in domain.hosts]
            touched = {e for m in domain.moves
                       for e in (m.source, m.destination)}
            details = page.find('details', domain=name)
            charted = [b['data-hypervisor'] for b in page.find(
                'rect', 'before', domain=name, chart='score', hidden=False)]
            rows = [r['data-hypervisor'] for r in page.find(
                'tr', 'folded-host', domain=name)]
            gaps = page.find('text', 'gap', domain=name, chart='score')
            if len(by_score) <= report_data.FOLD_ABOVE:
                self.assertEqual(([], by_score, [], []), (
                    details, charted, rows, gaps))
                continue
            # The chart leaves a gap where hypervisors are folded.
            self.assertTrue(gaps, name)
            # One <details>, closed, holding a row per hypervisor folded,
            # and nothing else of the domain hidden.
            self.assertEqual(1, len(details), name)
            self.assertNotIn('open', details[0])
            self.assertEqual(rows, [r['data-hypervisor'] for r in page.find(
                'tr', 'folded-host', domain=name, hidden=True)])
            self.assertEqual([], page.find('rect', domain=name, hidden=True))
            # The hottest and coolest and every hypervisor a move touches
            # are charted, hottest first; the rest folded, each once.
            ends = set(by_score[:report_data.ENDS] +
                       by_score[-report_data.ENDS:])
            self.assertTrue(ends | touched <= set(charted), name)
            self.assertEqual(by_score, sorted(charted + rows,
                                              key=by_score.index))
            self.assertEqual([h for h in by_score if h in charted], charted)
            self.assertEqual(len(by_score), len(set(charted + rows)))
            self.assertEqual(len(by_score) - len(ends | touched), len(rows))
            for move in domain.moves:
                self.assertEqual([move.server_id], [
                    a['data-server'] for a in page.find(
                        'tr', 'move', domain=name, hidden=False)
                    if a['data-server'] == move.server_id])
        for tag in ('script', 'link', 'img', 'iframe', 'object'):
            self.assertEqual([], page.find(tag), tag)
        return drawn


class TestReportCommand(test_commands.CommandTest):
    def test_a_saved_plan_draws_as_plan_drew_it(self):
        saved = os.path.join(self.tmp.name, 'plan.json')
        made = os.path.join(self.tmp.name, 'made.html')
        self.run_cmd(plan.PlanLeveller, ['--snapshot', 'demo', '--threshold',
                                         '0.06', '--output-file', saved,
                                         '--report', made])
        path = os.path.join(self.tmp.name, 'drawn.html')
        names, values = self.run_cmd(report.ReportLeveller, [
            saved, '--snapshot', 'demo', '--output-file', path])
        with open(made, 'rb') as f, open(path, 'rb') as g:
            first, drawn = f.read(), g.read()
        self.assertEqual(first, drawn)
        shown = dict(zip(names, values))
        the_plan = plan_mod.read(saved)
        self.assertEqual({
            'Report': path, 'Plan File': saved, 'Kind': 'balance',
            'Moves': len(the_plan.moves), 'Balancing Domains': 6,
            'Hypervisors': 39, 'Folded': 0,
            'Drawn On': "the plan's snapshot", 'Bytes': len(drawn)}, shown)
        self.assertIn('Report written to ' + path, self.app.stderr.getvalue())

    def demo_plan(self):
        """(a plan file of the demo snapshot, that snapshot's document)."""
        saved = os.path.join(self.tmp.name, 'plan.json')
        self.run_cmd(plan.PlanLeveller, ['--snapshot', 'demo',
                                         '--output-file', saved])
        with open(os.path.join(os.path.dirname(snapshot_io.__file__), '..',
                               '..', 'data', 'demo-snapshot.json')) as f:
            return saved, json.load(f)

    def test_drawn_on_a_later_snapshot_it_says_so(self):
        saved, document = self.demo_plan()
        document['taken_at'] = '2026-11-20T10:30:00Z'
        later = self.write('later.json', document)
        path = os.path.join(self.tmp.name, 'r.html')
        names, values = self.run_cmd(report.ReportLeveller, [
            saved, '--snapshot', later, '--output-file', path])
        self.assertEqual('the state of 2026-11-20 10:30 UTC',
                         dict(zip(names, values))['Drawn On'])
        self.assertIn('Note: drawn on the state of 2026-11-20 10:30 UTC, '
                      'not on the snapshot the plan was made on '
                      '(2026-11-20 09:00 UTC)\n', self.app.stderr.getvalue())
        with open(path, encoding='utf-8') as f:
            text = f.read()
        self.assertIn('<p class="drawn">Drawn on the state of 2026-11-20 '
                      '10:30 UTC, not on the snapshot the plan was made on:',
                      text)
        # A server the plan does not move, gone: the placement changed.
        moved = {m.server_id for m in plan_mod.read(saved).moves}
        document['servers'] = [s for s in document['servers']
                               if s['id'] not in moved][1:] + [
            s for s in document['servers'] if s['id'] in moved]
        changed = self.write('changed.json', document)
        names, values = self.run_cmd(report.ReportLeveller, [
            saved, '--snapshot', changed, '--output-file', path])
        self.assertEqual('the state of 2026-11-20 10:30 UTC, changed',
                         dict(zip(names, values))['Drawn On'])
        self.assertIn('which has changed since: placement, capacity or '
                      'rules differ', self.app.stderr.getvalue())

    def test_drawn_on_the_live_cloud_and_not_on_another(self):
        saved, document = self.demo_plan()
        document['taken_at'] = '2026-11-20T11:00:00Z'
        path = os.path.join(self.tmp.name, 'r.html')
        with self.live(document):
            names, values = self.run_cmd(report.ReportLeveller, [
                saved, '--output-file', path])
        self.assertEqual('the state of 2026-11-20 11:00 UTC',
                         dict(zip(names, values))['Drawn On'])
        with open(path, encoding='utf-8') as f:
            page = Page(f.read())
        self.assertEqual(len(plan_mod.read(saved).moves),
                         len(page.find('tr', 'move')))
        # A plan that records its cloud is drawn on that cloud only.
        with open(saved) as f:
            recorded = json.load(f)
        recorded['snapshot']['source'][snapshot_io.NOVA_SERVICE] = 'c0ffee'
        other = self.write('other.json', recorded)
        document['source'][snapshot_io.NOVA_SERVICE] = 'beef'
        os.remove(path)
        with self.live(document):
            self.assert_command_error(report.ReportLeveller, [
                other, '--output-file', path],
                '%s: the plan was made on another cloud' % other)
        self.assertFalse(os.path.exists(path))

    def test_a_snapshot_without_the_plans_servers_is_refused(self):
        saved = os.path.join(self.tmp.name, 'plan.json')
        self.run_cmd(plan.PlanLeveller, ['--snapshot', 'demo',
                                         '--output-file', saved])
        cluster = self.write('cluster.json', generate.generate(
            12, 60, seed=3))
        path = os.path.join(self.tmp.name, 'r.html')
        self.assert_command_error(report.ReportLeveller, [
            saved, '--snapshot', cluster, '--output-file', path],
            '%s: moves[0]: server ' % saved)
        self.assert_command_error(report.ReportLeveller, [
            saved, '--snapshot', cluster, '--output-file', path],
            'draw it on the snapshot it was made on (--snapshot FILE')
        self.assertFalse(os.path.exists(path))


class TestReportFile(test_commands.CommandTest):
    def test_plan_output_unchanged_and_report_written(self):
        args = ['--snapshot', 'demo', '--long', '--max-moves', '5']
        names, rows = self.run_cmd(plan.PlanLeveller, args)
        path = os.path.join(self.tmp.name, 'report.html')
        with open(path, 'w') as f:
            f.write('an old report')
        names2, rows2 = self.run_cmd(plan.PlanLeveller,
                                     args + ['--report', path])
        self.assertEqual(names, names2)
        self.assertEqual([tuple(str(c) for c in r) for r in rows],
                         [tuple(str(c) for c in r) for r in rows2])
        self.assertIn('Report written to ' + path,
                      self.app.stderr.getvalue())
        with open(path, encoding='utf-8') as f:
            page = Page(f.read())
        self.assertEqual(5, len(page.find('tr', 'move')))
        self.assertEqual([], [n for n in os.listdir(self.tmp.name)
                              if n.endswith('.tmp')])

    def test_score_shows_the_current_state(self):
        path = os.path.join(self.tmp.name, 'now.html')
        self.run_cmd(score.ScoreLeveller, ['--snapshot', 'demo', '--summary',
                                           '--report', path])
        with open(path, encoding='utf-8') as f:
            page = Page(f.read())
        self.assertEqual(6, len(page.find('section', 'domain')))
        bars = page.find('rect', 'bar')
        self.assertEqual(['bar now'] * 39 * 3, [
            ' '.join(b['class'].split()[:2]) for b in bars])
        self.assertEqual([], page.find('rect', 'after'))
        self.assertEqual([], page.find('tr', 'move'))

    def test_a_report_that_cannot_be_written(self):
        for target, message in (
                (self.tmp.name, 'is a directory'),
                (os.path.join(self.tmp.name, 'no', 'r.html'),
                 'does not exist')):
            for cls in (plan.PlanLeveller, score.ScoreLeveller):
                self.assert_command_error(cls, [
                    '--snapshot', 'demo', '--report', target],
                    '--report %s: ' % target)
                self.assert_command_error(cls, [
                    '--snapshot', 'demo', '--report', target], message)
        self.assert_command_error(plan.PlanLeveller, [
            '--snapshot', 'demo', '--explain', 'vm-0157', '--report',
            os.path.join(self.tmp.name, 'r.html')],
            '--explain and --report do not go together')

    def test_names_and_reasons_from_the_cloud_are_escaped(self):
        evil = '<script>alert(1)</script>&"\'<img src=x onerror=alert(2)>'
        host = report_data.Host(evil + '.example', evil,
                                report_data.Load(0.5, 0.5, 0.5),
                                report_data.Load(0.4, 0.4, 0.4))
        move = core_test.demo_plan()[2].moves[0]
        move = plan_mod.Move(**dict(
            move.__dict__, server_name=evil, source=evil + '.example',
            reason=evil, refused=()))
        page = report.render(report_data.Report(
            kind='plan', snapshot_taken_at=0.0,
            snapshot_source={'cloud': evil}, threshold=0.05, target=0.045,
            ceiling=0.85, imbalance_before=0.1, imbalance_after=0.05,
            note=evil, domains=(report_data.Domain(
                name=evil, imbalance_before=0.1, imbalance_after=0.05,
                mean_before=0.5, mean_after=0.4, hosts=(host,),
                moves=(move,), refused=(report_data.Refusal(
                    evil, evil, evil),), held=evil, n_plus_one=evil,
                freed=(report_data.Freed(evil, (evil,), 8.0),),
                not_freed=(report_data.NotFreed(evil, evil),)),),
            goal=evil))
        self.assertNotIn('<script', page)
        self.assertNotIn('<img', page)
        self.assertIn('&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#34;'
                      '&#39;&lt;img', page)
        parsed = Page(page)
        self.assertEqual([evil], [a['data-domain']
                                  for a in parsed.find('section')])
        self.assertEqual([evil], [r for _, r in parsed.reasons])

    def test_estimates_in_their_own_column(self):
        from tests.unit.core import test_duration
        snapshot = test_duration.hot(test_duration.history())
        options = core_options.PlannerOptions(
            now=test_duration.NOW, cooldown_hours=0)
        the_plan = planner.make_plan(snapshot, options)
        self.assertTrue(the_plan.moves)
        text = report.render(report_data.of_plan(snapshot, the_plan, options))
        page = Page(text)
        self.assertIn('<th>Expected</th>', text)
        cells = [a for tag, a, _, _, _ in page.elements
                 if tag == 'td' and 'estimate' in a.get('class', '')]
        self.assertEqual(len(the_plan.moves), len(cells))
        self.assertEqual([m.estimate[1] for m in the_plan.moves],
                         [c['title'] for c in cells])
        # Without a history: no such column.
        plain = planner.make_plan(test_duration.hot([]), options)
        self.assertNotIn('Expected', report.render(report_data.of_plan(
            test_duration.hot([]), plain, options)))

    def test_a_domain_without_n_plus_one_says_so(self):
        snapshot = test_n_plus_one.no_spare()
        options = core_options.PlannerOptions(keep_n_plus_one=True)
        the_plan = planner.make_plan(snapshot, options)
        page = Page(report.render(report_data.of_plan(snapshot, the_plan,
                                                      options)))
        self.assertEqual(
            ['az1/Gen1'], [d for d, text in page.notes
                           if 'N+1: none when planning started (losing hv1, '
                           '1 server fit nowhere: db1' in text])

    def test_free_hosts_and_spread_show_what_they_made(self):
        path = os.path.join(self.tmp.name, 'free.html')
        self.run_cmd(plan.PlanLeveller, ['--snapshot', 'demo',
                                         '--free-hosts', '--report', path])
        said = self.app.stderr.getvalue()
        with open(path, encoding='utf-8') as f:
            text = f.read()
        page = Page(text)
        self.assertIn('<p class="goal"><b>Free hosts: as many hypervisors '
                      'as possible emptied in each balancing domain</b></p>',
                      text)
        # Every hypervisor plan says it freed, in its domain's section.
        freed = [line.split()[1] for line in said.splitlines()
                 if line.startswith('Freed: ')]
        self.assertTrue(freed)
        self.assertEqual(sorted(freed), sorted(
            a['data-hypervisor'] for a in page.find('li', 'freed')))
        self.assertEqual(
            sum(line.startswith('Not freed: ') for line in said.splitlines()),
            len(page.find('li', 'not-freed')))
        self.assertIn('<th>Freed</th>', text)
        self.assertEqual([], page.find('tr', 'count'))

        path = os.path.join(self.tmp.name, 'spread.html')
        self.run_cmd(plan.PlanLeveller, ['--snapshot', 'demo', '--spread',
                                         'count', '--report', path])
        with open(path, encoding='utf-8') as f:
            text = f.read()
        page = Page(text)
        self.assertIn('Spread by server count: server counts', text)
        # A row per usable hypervisor: the 39 with bars.
        self.assertEqual(39, len(page.find('tr', 'count')))
        self.assertEqual([], page.find('li', 'freed'))
        self.assertNotIn('<th>Freed</th>', text)

    def test_jinja2_only_with_a_report(self):
        code = ('import sys; import osc_leveller.v1.plan, '
                'osc_leveller.v1.score; print("jinja2" in sys.modules)')
        done = subprocess.run([sys.executable, '-c', code],
                              capture_output=True, text=True, check=True)
        self.assertEqual('False', done.stdout.strip())


class TestPng(unittest.TestCase):
    def test_png_size_reads_the_header(self):
        with tempfile.NamedTemporaryFile(suffix='.png') as f:
            f.write(b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR' +
                    struct.pack('>II', 1280, 2000))
            f.flush()
            self.assertEqual((1280, 2000), png_size(f.name))
            f.seek(0)
            f.write(b'GIF89a')
            f.flush()
            self.assertRaises(AssertionError, png_size, f.name)
