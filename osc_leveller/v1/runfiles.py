"""The files an apply run keeps: its lock and its journal."""

import datetime
import fcntl
import json
import os


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
