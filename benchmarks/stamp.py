"""What a benchmark's results file starts with, and how it is written."""

import datetime
import json
import os
import platform


def stamped(**fields):
    """A results document: the day (UTC), the Python and the cores it ran
    on, then the fields in the order given."""
    return dict(date=datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%d'), python=platform.python_version(), cores=os.cpu_count(),
        **fields)


def write(path, document, indent=1):
    """The document as JSON in path, ending with a newline."""
    with open(path, 'w') as stream:
        json.dump(document, stream, indent=indent)
        stream.write('\n')
