"""Which cloud a snapshot is read from, as its snapshot's source records it.

A plan keeps its snapshot's source, so ``apply`` can tell a plan made on
another cloud (core/planning/plan.py other_cloud). The cloud is known by Nova's
entry in Keystone's catalog: its service id, the same for every project,
user and interface of that Keystone, and the region of the endpoint used.
A clouds.yaml name or an auth URL is not: two machines may name one cloud
differently, or reach its Keystone at an internal and a public address.
The auth URL is kept too, for the operator to read, without any user
name, password, query or fragment it may carry.
"""

import urllib.parse

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import identity as ksa_identity

from osc_leveller.core.model import snapshot


def of(conn):
    """{keystone, nova_service, nova_region} of an authorised
    connection, each only when known: an auth method without a catalog
    (admin token, endpoint overrides) leaves Nova's out."""
    found = {}
    config = getattr(conn, 'config', None)  # openstacksdk's CloudRegion
    settings = getattr(config, 'config', None)
    auth = settings.get('auth') if isinstance(settings, dict) else None
    keystone = auth_url(auth.get('auth_url') if isinstance(auth, dict)
                        else None)
    if keystone:
        found[snapshot.KEYSTONE] = keystone
    plugin = getattr(getattr(conn, 'session', None), 'auth', None)
    if not isinstance(plugin, ksa_identity.BaseIdentityPlugin):
        return found
    try:
        access = plugin.get_access(conn.session)
        nova = access.service_catalog.endpoint_data_for(
            service_type='compute',
            interface=config.get_interface('compute'),
            region_name=config.get_region_name('compute'))
    except (ksa_exc.ClientException, AttributeError, TypeError):
        return found
    for key, value in ((snapshot.NOVA_SERVICE, nova.service_id),
                       (snapshot.NOVA_REGION, nova.region_name)):
        if isinstance(value, str) and value:
            found[key] = value
    return found


def auth_url(url):
    """The auth URL as an operator may read it: scheme, host, port, path."""
    if not isinstance(url, str) or not url:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ''
        port = parts.port
    except ValueError:
        return None
    if ':' in host:
        host = '[%s]' % host  # an IPv6 address
    return urllib.parse.urlunsplit((
        parts.scheme, host + (':%d' % port if port else ''), parts.path,
        '', '')) or None
