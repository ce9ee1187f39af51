"""The files a command writes, checked before any work starts.

Every output (plan and snapshot --output-file, --report, --metrics-file)
is written by core.files.write_atomic, which replaces a regular file or
makes one and refuses anything else at the path: a device, FIFO, socket or
directory, and a symbolic link unless output.follow_symlinks is set.
check() asks the same when the command starts, before the cloud is read,
a plan is made or the lock is taken, and refuses one file named twice: as
two outputs, or as an output and a file the command reads.

``-`` is standard output for the outputs of plan, score and snapshot: the
file is then all the command prints there (StdoutCommand).
"""

import os

from osc_lib import exceptions

from osc_leveller.core.model import files
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.settings import config

STDOUT = '-'
FOLLOW = 'output.follow_symlinks'
# The files the commands read, by option: (how messages name it, dest).
READ = (('--snapshot', 'snapshot'), ('--config', 'config'),
        ('--target-placement', 'target_placement'),
        ('plan file', 'plan_file'))


def check(replaced, written=(), read=(), follow=False, no_stdout=None,
          makes_directory=False):
    """Refuse now what a write would refuse later, and a file named twice.

    replaced: (name, path) of each output write_atomic replaces; written:
    of the other files the command writes (the journal, the lock); read: of
    the files it reads. name is the flag or setting as messages name it; a
    path of None or empty text is not given. no_stdout: why ``-`` is not
    standard output here, if it is not. makes_directory: the writer makes
    a missing directory, so it need not exist yet.
    """
    replaced = [(name, path) for name, path in replaced if path]
    to_stdout = [name for name, path in replaced if path == STDOUT]
    if to_stdout and no_stdout:
        raise exceptions.CommandError(
            '%s -: cannot be standard output: %s; give a file name (./- for '
            'a file named -)' % (to_stdout[0], no_stdout))
    if len(to_stdout) > 1:
        raise exceptions.CommandError(
            '%s -: only one output can be standard output' % ' -, '.join(
                to_stdout))
    mine = [(name, path) for name, path in replaced if path != STDOUT]
    for name, path in mine:
        target = files.write_target(path, name, follow)
        if not makes_directory:
            _directory(name, path, target)
    mine += [(name, path) for name, path in written if path]
    read = [(name, path) for name, path in read if path]
    for index, (name, path) in enumerate(mine):
        for other, other_path in mine[index + 1:] + read:
            if files.same_file(path, other_path):
                raise exceptions.CommandError(
                    '%s %s and %s %s are the same file: give each its own'
                    % (name, path, other, other_path))


def _directory(name, path, target):
    """The directory of a new file exists and may be written in."""
    directory = os.path.dirname(os.path.abspath(target))
    # (A parent that is a file failed write_target already.)
    if not os.path.isdir(directory):
        raise exceptions.CommandError('%s %s: the directory %s does not '
                                      'exist' % (name, path, directory))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise exceptions.CommandError('%s %s: cannot write in the directory '
                                      '%s' % (name, path, directory))


def read_files(parsed_args):
    """(name, path) of the files the command's options name to read."""
    found = []
    for name, dest in READ:
        path = getattr(parsed_args, dest, None)
        if path and not (dest == 'snapshot' and path == snapshot_io.DEMO):
            found.append((name, path))
    return found


def setting(effective, name):
    """(how messages name it, path) of a file setting: its flag when the
    flag set it, else the setting and its layer."""
    key = config.BY_NAME[name]
    source = effective.sources[name]
    where = source if key.flag and source == key.flag.name else \
        '%s (%s)' % (name, source)
    return where, _expand(effective[name])


def flag(parsed_args, name):
    """(flag, path) of a file setting's flag; path None if not given, or
    if the flag's value is not one (the settings said so already)."""
    key = config.BY_NAME[name]
    try:
        value = config.check(key, getattr(parsed_args, key.flag.dest, None),
                             key.flag.name, flag=True)
    except config.ConfigError:
        value = None
    return key.flag.name, _expand(value)


def _expand(path):
    return os.path.expanduser(path) if path and path != STDOUT else path


def write(app, path, data, what, follow=False):
    """Write one output (str or bytes): standard output for ``-``, else
    replace the file (core.files.write_atomic)."""
    if path != STDOUT:
        files.write_atomic(path, data, what, follow=follow)
        return
    try:
        app.stdout.write(data.decode('utf-8') if isinstance(data, bytes)
                         else data)
        app.stdout.flush()
    except OSError as exc:
        raise files.FileError('cannot write the %s to standard output: %s'
                              % (what, exc.strerror or exc)) from None


def name(path):
    """Where an output went, as a summary line says it."""
    return 'standard output' if path == STDOUT else path


class StdoutCommand:
    """A command (before cliff's class in its bases) whose --output-file or
    --report may be ``-``: then that file is all it prints on standard
    output, whatever -f says; its notes go to standard error as always."""

    OPTIONS = ('output_file', 'report')

    def produce_output(self, parsed_args, column_names, data):
        if STDOUT in (getattr(parsed_args, o, None) for o in self.OPTIONS):
            return 0
        return super().produce_output(parsed_args, column_names, data)
