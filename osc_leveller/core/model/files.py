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
It replaces a regular file or makes one, and nothing else: the rename
would turn a device, a FIFO or a symbolic link into a regular file.
"""

import contextlib
import json
import math
import os
import stat
import tempfile

import orjson

from osc_leveller.core.model import errors

MiB = 2 ** 20
MAX_MB = 1024
# What a write refuses to replace, as messages name it.
_KINDS = ((stat.S_ISDIR, 'a directory'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'),
          (stat.S_ISFIFO, 'a FIFO (named pipe)'), (stat.S_ISSOCK, 'a socket'))


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


def dump_json(document, what, path):
    """document as indented JSON bytes, keys sorted.

    orjson, as it writes a cloud of 1,000 hypervisors in 0.05 s where
    Python's indenting encoder takes 1.5 s.
    """
    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2 |
                            orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError as exc:
        raise FileError('cannot write %s %s: %s' % (what, path, exc)) \
            from None


def write_atomic(path, data, what, mode=None, follow=False):
    """Replace the regular file at path with data (str or bytes), or
    create it; or leave it as it was. What else is at path is refused
    (write_target). The new file keeps the old one's mode unless mode is
    given."""
    target = write_target(path, what, follow)
    if isinstance(data, str):
        data = data.encode('utf-8')
    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(
            dir=os.path.dirname(os.path.abspath(target)),
            prefix='.%s.' % os.path.basename(target), suffix='.tmp')
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, _mode(target) if mode is None else mode)
        # Looked at again: what is at the path may have changed while the
        # file was written. (What is put there between this and the rename
        # is still replaced: no rename replaces regular files only.)
        write_target(path, what, follow)
        os.replace(temporary, target)
    except BaseException as exc:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        if isinstance(exc, OSError):
            raise FileError('cannot write %s %s: %s' % (
                what, path, exc.strerror or exc)) from None
        raise


def write_target(path, what, follow=False):
    """The file a write to path replaces: path itself when a regular file
    or nothing is there; with follow, the file a symbolic link there
    resolves to (created if the link dangles).

    FileError, naming what is there, for anything else: a write must never
    turn a device, FIFO, socket or directory into a regular file (as root
    the rename would), nor replace a link with a file.
    """
    where = '%s %s' % (what, path)
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            link = os.readlink(path)
            if not follow:
                raise FileError(
                    '%s: is a symbolic link to %s; set output.follow_symlinks '
                    '(--follow-symlinks) to write through it' % (where, link))
            path = os.path.realpath(path)
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise FileError('%s: is a symbolic link to %s, %s, not a '
                                'regular file' % (where, path, kind(mode)))
    except FileNotFoundError:
        return path  # nothing there, or a dangling link's file to make
    except OSError as exc:
        raise FileError('cannot write %s: %s' % (
            where, exc.strerror or exc)) from None
    if not stat.S_ISREG(mode):
        raise FileError('%s: is %s, not a regular file' % (where, kind(mode)))
    return path


def kind(mode):
    """What a file of this st_mode is, as a message says it."""
    for test, text in _KINDS:
        if test(mode):
            return text
    return 'a special file'


def same_file(path, other):
    """Whether two paths name one file: the same inode where both exist,
    else the same path once links are resolved."""
    try:
        one, two = os.stat(path), os.stat(other)
    except OSError:
        return os.path.realpath(path) == os.path.realpath(other)
    return (one.st_dev, one.st_ino) == (two.st_dev, two.st_ino)


def _mode(path):
    """The file's mode if it exists, else what open() would have given
    (mkstemp makes its files private)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
