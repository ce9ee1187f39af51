"""gunicorn entry point for Aetos, from its own venv.

Aetos' own WSGI module parses no arguments (so no configuration file but
/etc/aetos/aetos.conf); DEVCLOUD_WSGI_ARGS passes the service's own
arguments, as for the other services.
"""
import os

from aetos import app

application = app.build_wsgi_app(
    argv=os.environ.get('DEVCLOUD_WSGI_ARGS', '').split())
