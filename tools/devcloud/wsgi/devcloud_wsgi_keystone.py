"""gunicorn entry point for keystone.

The service parses sys.argv with oslo.config, so gunicorn's own command line
is hidden from it; DEVCLOUD_WSGI_ARGS passes the service's own arguments.
"""
import os
import sys

sys.argv = [sys.argv[0]] + os.environ.get('DEVCLOUD_WSGI_ARGS', '').split()
from keystone.wsgi.api import application  # noqa: E402,F401
