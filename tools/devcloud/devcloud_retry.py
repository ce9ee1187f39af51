"""Retries for the devcloud's own HTTP clients on a dropped connection.

Used by devcloud_setup.py, exporter.py and the functional tests' SDK
connections (tests/functional/base.py, tools/devcloud/tests).

Why: requests keeps idle connections to Keystone, Nova and Placement in a
pool, and gunicorn closes a connection that stays idle for its keep-alive
time. A request sent on a pooled connection just as the server closes it
fails with ConnectionResetError (or RemoteDisconnected) although the server
is fine: CI once lost TestMixed.setUpClass that way, in `devcloud load` ->
`clear` -> wait_for_delete, which polls every 2 s, exactly gunicorn's
default keep-alive. The devcloud script now gives gunicorn a keep-alive far
longer than any client's polling interval (see gunicorn_spawn), which
closes that race in practice; this module covers what is left (a client
idle just as long as the keep-alive, a server restart).

What is retried, by urllib3 under requests (keystoneauth and openstacksdk
send through it):

* a connection that could not be opened (refused, connect timeout), for any
  method: the server never saw the request;
* a connection that broke after the request was sent, and an HTTP 503, only
  for the idempotent methods GET, HEAD, PUT, DELETE and OPTIONS: sending one
  of those twice has the effect of sending it once. A POST (create a
  server, live-migrate, get a token) may have been acted upon, so it is not
  sent again; its caller sees the error.
"""

import requests.adapters
from urllib3.util import retry as urllib3_retry

IDEMPOTENT = frozenset(('GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS'))
RETRIES = 3


def idempotent_retry(retries=RETRIES):
    """urllib3 Retry: see the module docstring."""
    return urllib3_retry.Retry(
        total=retries, connect=retries, read=retries, status=retries,
        other=0, allowed_methods=IDEMPOTENT, status_forcelist=(503,),
        # the first retry at once (a fresh connection), then after 1 s, 2 s
        backoff_factor=0.5,
        # after the last 503, hand the response to the caller (the SDK
        # raises its own error with the server's message)
        raise_on_status=False)


def mount(http_session, retries=RETRIES):
    """Retry on a requests.Session (keystoneauth's `session.session`)."""
    adapter = requests.adapters.HTTPAdapter(
        max_retries=idempotent_retry(retries))
    for prefix in ('http://', 'https://'):
        http_session.mount(prefix, adapter)
    return http_session


def retrying(conn, retries=RETRIES):
    """An openstack.connection.Connection, its HTTP session retrying."""
    mount(conn.session.session, retries)
    return conn
