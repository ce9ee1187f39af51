"""Progress of a long read of the cloud, on stderr.

On a terminal, one line redrawn in place (a bar where the total is known),
shown once a read has lasted half a second and wiped when it ends.
Elsewhere (cron, a pipe), one line per phase that lasted a second or more,
so a small cloud's runs stay quiet. Nothing goes to stdout: ``-f json``
stays clean.
"""

import time

SHOW_AFTER = 0.5  # seconds before a terminal line appears
LOG_AFTER = 1.0  # seconds a phase lasts before it earns a line in a log
REDRAW = 0.1  # seconds between terminal redraws
WIDTH = 24  # characters of the bar


class Progress:
    def __init__(self, stream, tty=None, clock=time.monotonic):
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.started = self.what = None
        self.done = self.total = 0
        self.drawn = 0.0  # when the terminal line was last drawn
        self.width = 0  # characters of the terminal line on screen

    def begin(self, what, total=None):
        self.what, self.total, self.done = what, total, 0
        self.started = self.clock()
        self._draw()

    def advance(self, count=1):
        self.done += count
        self._draw()

    def end(self, summary):
        elapsed = self.clock() - self.started
        if self.tty:
            self._wipe()
        elif elapsed >= LOG_AFTER:
            self.stream.write('Read %s: %s in %.1f s\n' % (
                self.what, summary, elapsed))
            self.stream.flush()

    def _draw(self):
        now = self.clock()
        if not self.tty or now - self.started < SHOW_AFTER or \
                now - self.drawn < REDRAW:
            return
        self.drawn = now
        if self.total:
            filled = WIDTH * min(self.done, self.total) // self.total
            text = 'Reading %s [%s%s] %d/%d' % (
                self.what, '#' * filled, '.' * (WIDTH - filled),
                self.done, self.total)
        else:
            text = 'Reading %s ... %d' % (self.what, self.done)
        self.stream.write('\r' + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def _wipe(self):
        if self.width:
            self.stream.write('\r' + ' ' * self.width + '\r')
            self.stream.flush()
            self.width = 0
