"""The files an apply run keeps: its lock, its journal and its metrics."""

import datetime
import fcntl
import json
import os
import stat

from osc_leveller.core.model import files
from osc_leveller.core.run import executor
from osc_leveller.core.run import runmetrics


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

    Each record is one write(2) of a whole line on a descriptor opened with
    O_APPEND, so records of two processes never mix. A write that fails or
    comes up short (a full disk) is taken back to where it started, so no
    part of a line stays; from then on the journal takes no record
    (executor.JournalError, counted in unwritten) but a run's closing ones
    (last()), each tried once. A torn last line found on opening, left by a
    crash, a power loss or a kill part-way through a write, is said in one
    note and kept; the next record starts on a new line.
    """

    def __init__(self, path, run_id, note=None):
        self.path = os.path.expanduser(path) if path else None
        self.run_id = run_id
        self.fd = None
        self.error = None  # why records are no longer written
        self.unwritten = 0  # records of this run that were not written
        self._start = b''  # a newline that ends a torn last line
        if self.path:
            self.fd = _open_journal(self.path)
            torn = _torn_tail(self.fd)
            if torn:
                self._start = b'\n'
                (note or (lambda text: None))(
                    'the journal %s ends in a torn record (%s without an '
                    'end of line, left by a crash, a power loss or a kill '
                    'part-way through a write); it is kept, and new records '
                    'start on a new line' % (self.path, torn))

    def __call__(self, event, **fields):
        """Write one record; executor.JournalError when it cannot be."""
        if self.fd is None:
            return
        if self.error is not None:
            self.unwritten += 1
            raise executor.JournalError(self.error)
        self._write(event, fields)

    def last(self, event, **fields):
        """A closing record (interrupted, end): tried once even after a
        failure, and never an error; whether it was written."""
        if self.fd is None:
            return True
        try:
            self._write(event, fields)
        except executor.JournalError:
            return False
        return True

    def _write(self, event, fields):
        record = {'time': datetime.datetime.now(datetime.timezone.utc)
                  .isoformat(timespec='milliseconds').replace('+00:00', 'Z'),
                  'request_id': self.run_id, 'event': event}
        record.update(fields)
        data = self._start + (json.dumps(record) + '\n').encode('utf-8')
        try:
            written = os.write(self.fd, data)
            if written < len(data):
                # O_APPEND leaves the offset at the end of what was written.
                start = os.lseek(self.fd, 0, os.SEEK_CUR) - written
                why = _why_short(self.fd, data[written:], written, len(data))
                os.ftruncate(self.fd, start)
                raise OSError(None, why)
        except OSError as exc:
            self.unwritten += 1
            self.error = 'cannot write the journal %s: %s' % (
                self.path, exc.strerror or exc)
            raise executor.JournalError(self.error) from None
        self._start = b''

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _open_journal(path):
    """A descriptor appending to the journal: a regular file (made if need
    be), or /dev/null. Anything else is refused before it is opened, as
    opening a FIFO, a socket or a device may block or act; the descriptor's
    own kind is checked again, in case the path changed meanwhile."""
    def refuse(why):
        return executor.JournalError('cannot write the journal %s: %s' % (
            path, why))

    try:
        kind = _not_a_journal(os.stat(path))
    except FileNotFoundError:
        kind = None
    except OSError as exc:
        raise refuse(exc.strerror or exc) from None
    if kind:
        raise refuse(kind)
    try:
        os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT |
                     os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise refuse(exc.strerror or exc) from None
    kind = _not_a_journal(os.fstat(fd))
    if kind:
        os.close(fd)
        raise refuse(kind)
    return fd


def _not_a_journal(st):
    """Why a file of this stat cannot be the journal, or None."""
    if stat.S_ISREG(st.st_mode) or (
            stat.S_ISCHR(st.st_mode) and st.st_rdev == _DEV_NULL):
        return None
    return 'it is %s, not a regular file (/dev/null, or an empty ' \
        'apply.journal, for none)' % files.kind(st.st_mode)


_DEV_NULL = os.makedev(1, 3)  # Linux's /dev/null, wherever its node is


def _torn_tail(fd, most=1 << 16):
    """How much of a regular file follows its last end of line, as text
    ('' when it ends in one); only its last `most` bytes are read."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return ''
    tail = os.pread(fd, min(st.st_size, most), max(0, st.st_size - most))
    if tail.endswith(b'\n'):
        return ''
    cut = tail.rfind(b'\n')
    if cut < 0 and st.st_size > most:
        return 'more than %d bytes' % most
    return '%d bytes' % (len(tail) - cut - 1)


def _why_short(fd, rest, written, wanted):
    """Why a write took only part of a record: what writing the rest
    says (the file system's error), the line being taken back anyway."""
    try:
        os.write(fd, rest)
    except OSError as exc:
        return exc.strerror or str(exc)
    return 'only %d of %d bytes of a record were written' % (written, wanted)


def read_journal(path):
    """(records, notes) of a journal file: its whole records in order, and
    a note for each line that is not one (a torn last line, or a torn
    record a later run ended with its newline), which is skipped."""
    records, notes = [], []
    with open(os.path.expanduser(path), 'rb') as f:
        for number, line in enumerate(f, start=1):
            torn = not line.endswith(b'\n')
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                record = None
            if torn or not isinstance(record, dict):
                notes.append('%s line %d: %s, skipped' % (
                    path, number, 'a torn last line (no end of line)'
                    if torn else 'not a whole record'))
                continue
            records.append(record)
    return records, notes


def write_metrics(path, record, exit_code, now, follow=False):
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
    files.write_atomic(path, text, 'the metrics file', mode=0o644,
                       follow=follow)


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
