"""Files the leveller reads and writes: read whole and checked, written in
one step.

A read refuses a file above a size limit before reading it: a huge file is
a one-line error, not minutes of swapping or a MemoryError. Loading a
snapshot takes about seven times its size in memory; the default limit is
three times the snapshot of a cloud of 10,000 hypervisors and 500,000
servers (about 320 MiB).

A write goes to a temporary file in the same directory and replaces the
target with a rename, so a failure part-way (a full disk, an interrupt, a
value that cannot be written) leaves the old file as it was, never a part.
"""

import json
import math
import os
import tempfile

import orjson

from osc_leveller.core import errors

MiB = 2 ** 20
MAX_MB = 1024


class FileError(errors.LevellerError):
    """A file cannot be read or written; the message names it."""


class TooLarge(FileError):
    """A file is above the size limit; nothing of it was read."""


def read_text(path, what, max_mb=MAX_MB):
    """The file's text; what names it in messages ('plan file')."""
    return _decode(_read(path, what, max_mb), path, what)


def read_json(path, what, max_mb=MAX_MB):
    """(document, strict) of a JSON file.

    strict: orjson read it, which refuses what JSON does not allow and
    Python's reader takes (NaN, Infinity, 1e400, lone surrogate escapes).
    When orjson refuses, Python's reader says why as before, or reads the
    document so that validation names the field that is wrong.
    """
    data = _read(path, what, max_mb)
    try:
        return orjson.loads(data), True
    except orjson.JSONDecodeError:
        pass
    return parse_json(_decode(data, path, what), path), False


def _read(path, what, max_mb):
    limit = max_mb * MiB
    try:
        with open(path, 'rb') as f:
            # Also read at most limit + 1 bytes: a pipe or a device has no
            # size until it is read.
            size = os.fstat(f.fileno()).st_size
            data = f.read(limit + 1) if size <= limit else b''
    except FileNotFoundError:
        raise FileError('%s %s does not exist' % (what, path)) from None
    except OSError as exc:
        raise FileError('cannot read %s %s: %s' % (
            what, path, exc.strerror or exc)) from None
    if size > limit or len(data) > limit:
        known = '%d MiB, ' % math.ceil(size / MiB) if size > limit else ''
        raise TooLarge('%s %s is %sover the limit of %d MiB' % (
            what, path, known, max_mb))
    return data


def _decode(data, path, what):
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise FileError('%s %s is not UTF-8 text (byte %d is not): a binary '
                        'file?' % (what, path, exc.start)) from None


def parse_json(text, where):
    try:
        return json.loads(text)
    except RecursionError:
        raise FileError('%s is nested too deeply to be a leveller file'
                        % where) from None
    except ValueError as exc:  # also an int of over 4,300 digits
        raise FileError('%s is not valid JSON: %s' % (where, exc)) from None


def write_json(path, document, what):
    """Write document as indented JSON, keys sorted, in one step.

    orjson, as it writes a cloud of 1,000 hypervisors in 0.05 s where
    Python's indenting encoder takes 1.5 s.
    """
    try:
        data = orjson.dumps(document, option=orjson.OPT_INDENT_2 |
                            orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError as exc:
        raise FileError('cannot write %s %s: %s' % (what, path, exc)) \
            from None
    write_atomic(path, data, what)


def write_atomic(path, text, what, mode=None):
    """Replace the file at path with text (str or bytes), or leave it as
    it was. The new file keeps the old one's mode unless mode is given."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(
            dir=directory, prefix='.%s.' % os.path.basename(path),
            suffix='.tmp')
    except OSError as exc:
        raise FileError('cannot write %s %s: %s' % (
            what, path, exc.strerror or exc)) from None
    try:
        if isinstance(text, str):
            text = text.encode('utf-8')
        with os.fdopen(fd, 'wb') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, _mode(path) if mode is None else mode)
        os.replace(temporary, path)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise FileError('cannot write %s %s: %s' % (
                what, path, exc.strerror or exc)) from None
        raise


def _mode(path):
    """The file's mode if it exists, else what open() would have given
    (mkstemp makes its files private)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
