"""Files the leveller reads and writes: read whole and checked, written in
one step.

A write goes to a temporary file in the same directory and replaces the
target with a rename, so a failure part-way (a full disk, an interrupt, a
value that cannot be written) leaves the old file as it was, never a part.
"""

import json
import os
import tempfile

from osc_leveller.core import errors


class FileError(errors.LevellerError):
    """A file cannot be read or written; the message names it."""


def read_text(path, what):
    """The file's text; what names it in messages ('plan file')."""
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except FileNotFoundError:
        raise FileError('%s %s does not exist' % (what, path)) from None
    except UnicodeDecodeError as exc:
        raise FileError('%s %s is not UTF-8 text (byte %d is not): a binary '
                        'file?' % (what, path, exc.start)) from None
    except OSError as exc:
        raise FileError('cannot read %s %s: %s' % (
            what, path, exc.strerror or exc)) from None


def parse_json(text, where):
    try:
        return json.loads(text)
    except RecursionError:
        raise FileError('%s is nested too deeply to be a leveller file'
                        % where) from None
    except ValueError as exc:  # also an int of over 4,300 digits
        raise FileError('%s is not valid JSON: %s' % (where, exc)) from None


def write_atomic(path, text, what):
    """Replace the file at path with text, or leave it as it was."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(
            dir=directory, prefix='.%s.' % os.path.basename(path),
            suffix='.tmp')
    except OSError as exc:
        raise FileError('cannot write %s %s: %s' % (
            what, path, exc.strerror or exc)) from None
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, _mode(path))
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
