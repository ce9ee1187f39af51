"""The requests osc-leveller sends, with their microversions: one list.

Both checks of scalecloud read it: tests/unit/test_scalecloud.py requires
the plugin's own traffic (collect, refresh, the actions, measure) to be
exactly these calls, and tests/functional/test_scalecloud.py sends each of
them to the devcloud and to scalecloud serving the devcloud's snapshot and
compares the answers' structure.

path, params and body hold {placeholders} (see fill()). version: a
microversion, or 'max:X' for the highest the cloud supports up to X (what
openstacksdk negotiates, and the collector for servers). pages: the next
links' key of a listing Nova pages. A call the functional test must not
let change anything names its harmless variant in `probe` (placeholders
that make Nova refuse it, or a change to what already is).
"""

import collections
import re

from osc_leveller.cloud import libvirt
from osc_leveller.cloud import measure

Call = collections.namedtuple(
    'Call', 'service method path version params body pages probe',
    defaults=(None, None, {}, None, None, None))

NOVA, PLACEMENT, GLANCE = 'nova', 'placement', 'glance'
SDK_SERVER = 'max:2.100'  # openstacksdk's Server
SDK_SERVICE = 'max:2.69'  # openstacksdk's Service
PROBE_HOST = 'scalecloud-no-such-host'
_PLACEHOLDER = re.compile(r'\{(username|password|project|since|server|'
                          r'hypervisor|host|provider|service|group|'
                          r'migration|status|image|time)\}')
# Nova refuses these moves before anything happens: no such host.
REFUSED = {'host': PROBE_HOST}


def _prometheus():
    """The plugin's queries with its default settings (window 5m,
    host_label hostname, the libvirt exporter found: kolla's inovex)."""
    queries = list(measure.IDENTITY[:1])
    queries += [q.format(window='5m', label='instance, job, hostname')
                for q in measure.HOST_QUERIES.values()]
    queries += [q.format(window='5m')
                for q in libvirt.PROFILES['inovex'].queries.values()]
    # The guard's: sizes only, without a reference time to compare with.
    queries.append(measure.Reader(None).guard_query([], 0))
    # Each instant query of a read at the read's time.
    calls = [Call('prometheus', 'GET', '/api/v1/query',
                  params={'query': q, 'time': '{time}'}) for q in queries]
    calls.append(Call('prometheus', 'GET', '/api/v1/label/__name__/values',
                      params={'match[]': '{__name__=~"%s"}' % libvirt.NAMES}))
    return calls


CALLS = [
    # keystoneauth: discovery and a password token
    Call('keystone', 'GET', '/v3'),
    Call('keystone', 'POST', '/v3/auth/tokens', body={'auth': {
        'identity': {'methods': ['password'], 'password': {'user': {
            'name': '{username}', 'password': '{password}',
            'domain': {'name': 'Default'}}}},
        'scope': {'project': {'name': '{project}',
                              'domain': {'name': 'Default'}}}}}),
    # openstacksdk's version discovery
    Call(NOVA, 'GET', '/v2.1'),
    Call(PLACEMENT, 'GET', '/'),
    Call(GLANCE, 'GET', '/'),
    # collect.Collector
    Call(NOVA, 'GET', '/v2.1/os-services', '2.53',
         {'binary': 'nova-compute'}),
    Call(NOVA, 'GET', '/v2.1/os-hypervisors/detail', '2.87',
         pages='hypervisors_links'),
    Call(NOVA, 'GET', '/v2.1/os-aggregates', '2.64'),
    Call(NOVA, 'GET', '/v2.1/servers/detail', 'max:2.96',
         {'all_tenants': '1'}, pages='servers_links'),
    Call(NOVA, 'GET', '/v2.1/os-server-groups', '2.64',
         {'all_projects': 'True', 'limit': '1000', 'offset': '0'}),
    Call(NOVA, 'GET', '/v2.1/os-migrations', '2.80',
         {'changes-since': '{since}'}, pages='migrations_links'),
    Call(PLACEMENT, 'GET', '/resource_providers', '1.14'),
    Call(PLACEMENT, 'GET', '/resource_providers/{provider}/inventories'),
    Call(PLACEMENT, 'GET', '/resource_providers/{provider}/allocations',
         '1.28'),
    # a hypervisor's own provider only; refresh.refresh sends it too
    Call(PLACEMENT, 'GET', '/resource_providers/{provider}/traits', '1.6'),
    # each distinct image of the servers; refresh.refresh: the moving
    # servers' images
    Call(GLANCE, 'GET', '/v2/images/{image}'),
    # refresh.refresh: what the executor reads again before a move
    Call(NOVA, 'GET', '/v2.1/os-hypervisors/detail', '2.87',
         {'hypervisor_hostname_pattern': '{hypervisor}'}),
    Call(NOVA, 'GET', '/v2.1/os-services', '2.53',
         {'binary': 'nova-compute', 'host': '{host}'}),
    Call(PLACEMENT, 'GET', '/resource_providers', '1.14',
         {'name': '{hypervisor}'}),
    Call(NOVA, 'GET', '/v2.1/servers/detail', 'max:2.96',
         {'all_tenants': '1', 'node': '{hypervisor}'}),
    Call(NOVA, 'GET', '/v2.1/servers/{server}', 'max:2.96'),
    Call(NOVA, 'GET', '/v2.1/os-server-groups/{group}', '2.64'),
    Call(NOVA, 'GET', '/v2.1/os-migrations', '2.80',
         {'changes-since': '{since}', 'instance_uuid': '{server}'}),
    Call(PLACEMENT, 'GET', '/allocations/{server}'),
    # actions.Actions
    Call(NOVA, 'POST', '/v2.1/servers/{server}/action', '2.34',
         body={'os-migrateLive': {'host': '{host}',
                                  'block_migration': 'auto'}},
         probe=REFUSED),
    Call(NOVA, 'POST', '/v2.1/servers/{server}/action', '2.56',
         body={'migrate': {'host': '{host}'}}, probe=REFUSED),
    # refused unless the server waits in VERIFY_RESIZE
    Call(NOVA, 'POST', '/v2.1/servers/{server}/action', '2.56',
         body={'confirmResize': None}, probe={}),
    Call(NOVA, 'GET', '/v2.1/servers/{server}', SDK_SERVER),
    Call(NOVA, 'GET', '/v2.1/os-services', SDK_SERVICE,
         {'binary': 'nova-compute', 'host': '{host}'}),
    Call(NOVA, 'PUT', '/v2.1/os-services/{service}', '2.53',
         body={'status': '{status}'}, probe={'status': 'enabled'}),
    Call(NOVA, 'GET', '/v2.1/os-migrations', '2.80',
         {'instance_uuid': '{server}', 'migration_type': 'live-migration',
          'changes-since': '{since}'}),
    # a running live migration's memory figures (404 once it ended)
    Call(NOVA, 'GET', '/v2.1/servers/{server}/migrations/{migration}', '2.80'),
    # no such migration: refused
    Call(NOVA, 'DELETE', '/v2.1/servers/{server}/migrations/{migration}',
         '2.65', probe={'migration': '0'}),
] + _prometheus()


def version(call, maximum):
    """The microversion call is sent with to a cloud whose maximum is
    maximum ('2.100'), or None."""
    if call.version is None or not call.version.startswith('max:'):
        return call.version
    wanted = call.version[4:]
    return min(wanted, maximum, key=lambda v: tuple(map(int, v.split('.'))))


def header(call, maximum):
    """{OpenStack-API-Version: ...} for a call, or {}."""
    chosen = version(call, maximum)
    if chosen is None:
        return {}
    return {'OpenStack-API-Version': '%s %s' % (
        'compute' if call.service == NOVA else call.service, chosen)}


def fill(value, values):
    """value (a path, params or a body) with its {placeholders} filled."""
    if isinstance(value, str):  # PromQL has braces of its own
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), value)
    if isinstance(value, dict):
        return {k: fill(v, values) for k, v in value.items()}
    return value


def key(call, maximum):
    """What a recorded request and a call sent to a cloud of that maximum
    microversion have in common: service, method, path template (ids as
    {id}), query names (and values, for Prometheus), microversion."""
    path = call.path
    for name in ('server', 'provider', 'service', 'group', 'migration',
                 'image'):
        path = path.replace('{%s}' % name, '{id}')
    if call.path == '/api/v1/label/__name__/values':
        path = '/api/v1/label/{id}/values'
    params = tuple(sorted(call.params.items() if call.service == 'prometheus'
                          else call.params))
    return (call.service, call.method, path, params, version(call, maximum))
