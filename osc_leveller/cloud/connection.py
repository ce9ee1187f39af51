"""Open an openstacksdk connection from the openstack shell's options.

The leveller's commands do not make the shell authenticate up front
(``auth_required = False``), so ``--snapshot`` works with no cloud at all;
a live run asks for the connection here, with the same cloud selection the
shell would have used (``--os-cloud``, ``OS_*`` variables, clouds.yaml).

Every request has a connect and a read timeout (settings ``cloud.*``; the
read timeout is openstacksdk's own ``api_timeout``, which a clouds.yaml
entry may set), reads that get no answer are retried ``cloud.retries``
times, and the connection pool holds as many connections as the collector
has threads, so parallel Placement reads never wait for a free one.
"""

import logging
import urllib.parse

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import identity as ksa_identity
from keystoneauth1 import session as ksa_session
from openstack import connection
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import collect
from osc_leveller.core.settings import config


def open_connection(cloud_config, options, settings=None, request_id=None):
    """settings: the ``cloud`` settings section (connect_timeout,
    read_timeout, retries); a read_timeout left out is the cloud's own
    api_timeout, else the default. request_id: a global request id sent
    with every call (req-<uuid>)."""
    settings = settings or {}
    try:
        region = cloud_config.get_one(
            cloud=getattr(options, 'cloud', None), argparse=options,
            validate=True, app_name='osc-leveller')
        read = settings.get('read_timeout') or _api_timeout(region)
        connect = settings.get(
            'connect_timeout', config.BY_NAME['cloud.connect_timeout'].default)
        region.config['api_timeout'] = read
        region.config['connect_retries'] = settings.get(
            'retries', config.BY_NAME['cloud.retries'].default)
        conn = connection.Connection(config=region,
                                     global_request_id=request_id)
    except (sdk_exc.ConfigException, ksa_exc.ClientException) as exc:
        raise collect.CollectError(
            'cannot connect to the cloud: %s (choose one with --os-cloud or '
            'OS_* variables, or plan offline with --snapshot)' % exc) from exc
    skip_unlogged_bodies()
    # requests takes a (connect, read) pair where the SDK sets one figure.
    conn.session.timeout = (connect, read)
    # The Placement readers and the Nova pages read at the same time may
    # share one endpoint (one load balancer): a connection each.
    adapter = ksa_session.TCPKeepAliveAdapter(
        pool_maxsize=collect.WORKERS + 2)
    for scheme in ('https://', 'http://'):
        conn.session.session.mount(scheme, adapter)
    # requests looks for a ~/.netrc before every request that has no auth
    # of its own (4 % of a large read's CPU), and would send what it finds
    # to OpenStack's APIs, which take tokens: an auth that adds nothing.
    conn.session.session.auth = _no_netrc
    # Authenticate now, so a Keystone failure is named after Keystone and
    # not after the first Nova or Placement request that needed a token.
    with collect.reading(_authentication(region)):
        conn.authorize()
        auth = conn.session.auth
        if isinstance(auth, ksa_identity.BaseIdentityPlugin):
            # keystoneauth reads the token's body (expiry, catalog) only
            # when first needed: read it here too.
            access = auth.get_access(conn.session)
            access.will_expire_soon()
            access.service_catalog.get_endpoints()
    return conn


def _no_netrc(request):
    return request


def skip_unlogged_bodies():
    """keystoneauth decodes and re-encodes every response body for a debug
    line whenever its logger is enabled for debug, which the shell's root
    logger makes it, even when no handler writes debug lines: 50,000
    servers cost seconds of that. Unless a handler takes debug lines
    (``--debug``, a debug log file), its logger skips them."""
    handlers = [h for h in logging.getLogger().handlers]
    if handlers and min(h.level for h in handlers) > logging.DEBUG:
        session = logging.getLogger('keystoneauth.session')
        if session.level == logging.NOTSET:
            session.setLevel(logging.INFO)


def _authentication(region):
    """How messages name the token request: 'Keystone POST
    /v3/auth/tokens' (every v3 plugin posts there)."""
    url = (region.config.get('auth') or {}).get('auth_url') or ''
    try:
        path = urllib.parse.urlsplit(url).path.rstrip('/')
    except ValueError:
        path = ''
    if path.endswith('/v3'):
        return 'Keystone POST %s/auth/tokens' % path
    return 'Keystone authentication at %s' % (url or 'the auth URL')


def _api_timeout(region):
    """The clouds.yaml entry's api_timeout, checked, else our default."""
    key = config.BY_NAME['cloud.read_timeout']
    value = region.config.get('api_timeout')
    if value is None:
        return key.default
    return config.check(key, value, 'clouds.yaml cloud %s: api_timeout'
                        % region.name, flag=True)


def leveller_section(cloud_config, options):
    """(cloud name, the ``leveller:`` section of its clouds.yaml entry).

    Reading it needs no credentials; a cloud that cannot be found has no
    section, and a live read then reports the real problem.
    """
    try:
        region = cloud_config.get_one(
            cloud=getattr(options, 'cloud', None), argparse=options,
            validate=False, app_name='osc-leveller')
    except sdk_exc.ConfigException:
        return None, None
    return region.name, region.config.get('leveller')
