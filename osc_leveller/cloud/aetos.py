"""Aetos: Prometheus behind Keystone, found in the catalog as metric-storage.

Aetos (OpenStack's reverse proxy in front of Prometheus) checks the
Keystone token of every request and passes a part of Prometheus' HTTP API
through: instant queries (/api/v1/query, GET only), series, labels, label
values, targets and status. It serves no range queries (query_range), which
the forecast's skill asks (measure.Reader._history): the client asks each
as an instant query of a subquery that gives the same points instead
(prometheus._as_subquery).

Its policy gives every project's series only to the admin role of the
token's project, or to the service role. Reader and member get their
queries rewritten to the series of their own project, which hypervisor
series do not have: every hypervisor would be scored from allocations
unawares. Such a token is refused here instead, naming the role it lacks.

The token is keystoneauth's, of the cloud's own credentials: it goes into
each request's X-Auth-Token header, renewed by keystoneauth when it
expires, and never into a message.
"""

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import identity as ksa_identity

from osc_leveller.cloud import prometheus

SERVICE_TYPE = 'metric-storage'
# Aetos' policies.py: *:all_projects is "role:admin and project_id:<the
# token's>" or "role:service".
ALL_PROJECTS = ('admin', 'service')


def endpoint(conn):
    """Aetos' URL in the connection's catalog (its interface and region),
    or None when the catalog has no metric-storage."""
    try:
        url = conn.endpoint_for(SERVICE_TYPE)
    except (ksa_exc.ClientException, AttributeError, TypeError, KeyError):
        return None
    return url if isinstance(url, str) and url else None


class KeystoneToken:
    """The connection's token as request headers, for prometheus.Client."""

    def __init__(self, session):
        self.session = session

    def headers(self):
        try:
            headers = self.session.get_auth_headers()
        except ksa_exc.ClientException as exc:
            raise prometheus.Unreachable(
                'cannot get a Keystone token for Aetos: %s' %
                type(exc).__name__) from exc
        if not headers:
            raise prometheus.PrometheusError(
                'the cloud\'s credentials give no Keystone token for Aetos')
        return headers


def access_of(conn):
    """(user, project, roles) of the connection's token, each None when
    the auth plugin does not say (an admin token, say)."""
    plugin = getattr(conn.session, 'auth', None)
    if not isinstance(plugin, ksa_identity.BaseIdentityPlugin):
        return None, None, None
    try:
        access = plugin.get_access(conn.session)
    except ksa_exc.ClientException:
        return None, None, None
    return (access.username, access.project_name,
            sorted(access.role_names or ()))


def client(conn, url, **options):
    """A prometheus.Client reading through Aetos at url with the
    connection's token; PrometheusError, naming the roles, when the token
    would only see its own project's series."""
    user, project, roles = access_of(conn)
    if roles is not None and not set(roles) & set(ALL_PROJECTS):
        raise prometheus.PrometheusError(
            'Aetos at %s (catalog %s) shows every project\'s metrics only to '
            'the admin role of the token\'s project or the service role; '
            'user %s in project %s has %s, so it would see only project %s\'s '
            'series and no hypervisor\'s: give it the admin (or service) role, '
            'or set leveller: prometheus: url to read a Prometheus directly' % (
                url, SERVICE_TYPE, user, project,
                'the roles ' + ', '.join(roles) if roles else 'no role',
                project))
    via = 'Aetos at %s (catalog %s), Keystone token of user %s, project %s' \
        % (url, SERVICE_TYPE, user, project)
    if roles:
        via += ', roles %s' % ', '.join(roles)
    # TLS verified as the cloud's services are: against its cacert
    verify = getattr(conn.session, 'verify', None)
    return prometheus.Client(
        url, auth=KeystoneToken(conn.session), via=via, ranges=False,
        ca_bundle=verify if isinstance(verify, str) else None, **options)
