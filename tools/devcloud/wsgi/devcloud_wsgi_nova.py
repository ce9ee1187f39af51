"""gunicorn entry point for nova.

The service parses sys.argv with oslo.config, so gunicorn's own command line
is hidden from it; DEVCLOUD_WSGI_ARGS passes the service's own arguments.
"""
import os
import sys

sys.argv = ['nova-api'] + os.environ.get('DEVCLOUD_WSGI_ARGS', '').split()
from nova.wsgi.osapi_compute import application  # noqa: E402,F401
