"""The files an apply run keeps: its lock, its journal and its metrics."""

import datetime
import fcntl
import json
import os
import stat

from osc_leveller.core import files
from osc_leveller.core import runmetrics


class LockHeld(Exception):
    """Another run holds the lock; the message names its process."""


class Lock:
    """An exclusive, non-blocking flock, released when the process ends."""

    def __init__(self, path):
        self.path = os.path.expanduser(path)
        self.file = None

    def acquire(self):
        os.makedirs(os.path.dirname(self.path) or '.', exist_ok=True)
        self.file = open(self.path, 'a+', encoding='utf-8')
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or 'unknown'
            self.file.close()
            self.file = None
            raise LockHeld('another leveller run holds the lock %s '
                           '(process %s)' % (self.path, holder)) from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write('%d\n' % os.getpid())
        self.file.flush()
        return self

    def release(self):
        if self.file is not None:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()
            self.file = None


class Journal:
    """Appends one JSON object per line: when, which run, what happened.

    Only what the executor passes is written (servers, hosts, statuses,
    reasons); credentials never reach it.
    """

    def __init__(self, path, run_id):
        self.path = os.path.expanduser(path) if path else None
        self.run_id = run_id
        self.file = None
        if self.path:
            os.makedirs(os.path.dirname(self.path) or '.', exist_ok=True)
            self.file = open(self.path, 'a', encoding='utf-8')

    def __call__(self, event, **fields):
        if self.file is None:
            return
        record = {'time': datetime.datetime.now(datetime.timezone.utc)
                  .isoformat(timespec='milliseconds').replace('+00:00', 'Z'),
                  'request_id': self.run_id, 'event': event}
        record.update(fields)
        self.file.write(json.dumps(record, sort_keys=False) + '\n')
        self.file.flush()

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None


def write_metrics(path, record, exit_code, now):
    """Replace the metrics file with this run's, atomically.

    node_exporter may read the file at any moment: the text goes to a
    temporary file in the same directory (same file system), which then
    replaces it, so a scrape sees the old file or the new one, never half
    of one. The last success comes from the file being replaced.
    """
    path = os.path.expanduser(path)
    text = runmetrics.exposition(
        record, exit_code, now,
        runmetrics.last_success(_previous(path), record.command, now))
    directory = os.path.dirname(path) or '.'
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise files.FileError('cannot write the metrics file %s: %s' % (
            path, exc.strerror or exc)) from None
    # node_exporter reads *.prom only, so it skips the temporary file;
    # it runs as another user, hence 0644.
    files.write_atomic(path, text, 'the metrics file', mode=0o644)


def _previous(path):
    """The previous metrics file's text, or '' if there is none to read."""
    try:
        # Non-blocking, and regular files only: a FIFO put there would
        # otherwise hang the cron job.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return ''
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ''  # fdopen of a directory would fail and keep fd open
        return os.read(fd, runmetrics.MAX_PREVIOUS).decode('utf-8', 'replace')
    except OSError:
        return ''
    finally:
        os.close(fd)


def previous(path):
    """The text of the metrics file at path, or '' (read as write_metrics
    reads the file it replaces)."""
    return _previous(os.path.expanduser(path))
