"""Progress of long reads: a redrawn line on a terminal, phase lines in logs."""

import io
import unittest

from osc_leveller.v1 import progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def run(tty, seconds_per_provider):
    stream, clock = io.StringIO(), Clock()
    say = progress.Progress(stream, tty=tty, clock=clock)
    say.begin('Nova servers')
    say.advance(1000)
    say.end('1000 servers')  # instant: nothing to show
    say.begin('Placement', total=10)
    for _ in range(10):
        clock.now += seconds_per_provider
        say.advance()
    say.end('10 resource providers')
    return stream.getvalue()


class TestProgress(unittest.TestCase):
    def test_a_log_gets_a_line_per_slow_phase(self):
        self.assertEqual(
            'Read Placement: 10 resource providers in 2.0 s\n',
            run(tty=False, seconds_per_provider=0.2))

    def test_a_quick_read_says_nothing(self):
        self.assertEqual('', run(tty=False, seconds_per_provider=0.01))
        self.assertEqual('', run(tty=True, seconds_per_provider=0.01))

    def test_a_terminal_gets_a_bar_wiped_at_the_end(self):
        out = run(tty=True, seconds_per_provider=0.2)
        frames = out.split('\r')
        self.assertIn('Reading Placement [############............] 5/10',
                      frames)
        # The last frame, then blanks over it, and the cursor back home.
        self.assertEqual('Reading Placement [########################] '
                         '10/10', frames[-3])
        self.assertEqual(('', ''), (frames[-2].strip(), frames[-1]))
        self.assertEqual(len(frames[-3]), len(frames[-2]))
        self.assertNotIn('\n', out)


if __name__ == '__main__':
    unittest.main()
