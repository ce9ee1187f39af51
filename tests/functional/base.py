"""Helpers for functional tests against the devcloud (tools/devcloud).

The tests drive real commands: the devcloud script, the `openstack` shell of
this environment (python-openstackclient plus this plugin) and Prometheus'
HTTP API, all on 127.0.0.1. Run them with `tox -e functional`, which brings
the devcloud up around them.

A scenario names compute service hosts (hv01); their hypervisors are nodes
with other names (hv01.devcloud.test), as on real clouds. The leveller's
Source and Destination, a snapshot's `hypervisor` fields and the
Prometheus series name nodes; `destination_host`, a server's
OS-EXT-SRV-ATTR:host and `--live-migration --host` name service hosts.
DevcloudTestCase.node maps one to the other.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The devcloud's own test helpers (tools/devcloud/tests/functional/base.py):
# its script, the openstack shell, Prometheus and openstacksdk on it.
sys.path.insert(0, str(ROOT / 'tools'))
from devcloud.tests.functional import base as _devcloud  # noqa: E402

CPU = _devcloud.HOST_CPU

scenario = _devcloud.scenario
devcloud = _devcloud.devcloud
openstack = _devcloud.openstack
promql = _devcloud.promql
promql_for = _devcloud.promql_for
connection = _devcloud.connection
wait_for = _devcloud.wait_for
DevcloudTestCase = _devcloud.DevcloudTestCase
prometheus_get = _devcloud.prometheus_get
by_host = _devcloud.by_host


def by_label(query, label):
    """{value of label: sample} of an instant query, straight from
    Prometheus."""
    return {item['metric'].get(label): float(item['value'][1])
            for item in prometheus_get('/api/v1/query',
                                       {'query': query})['result']}


def by_hypervisor(query):
    """{hypervisor name: sample} of a query by node_exporter target (one
    that keeps instance and job), joined as the devcloud's own checks do."""
    node = _devcloud.hypervisor_names()
    return {node.get(host): value
            for host, value in _devcloud.by_host(query).items()}


def by_hypervisor_at(query, when, node):
    """by_hypervisor of the query at a time (the epoch, in seconds); node:
    {service host: hypervisor name}."""
    joined = '(%s) * on(instance, job) group_left(nodename) ' \
             'node_uname_info' % query
    return {node.get(item['metric'].get('nodename')):
            float(item['value'][1])
            for item in prometheus_get('/api/v1/query', {
                'query': joined, 'time': when})['result']}
