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

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEVCLOUD = ROOT / 'tools' / 'devcloud' / 'devcloud'
SCENARIOS = ROOT / 'tools' / 'devcloud' / 'scenarios'
PROMETHEUS = 'http://127.0.0.1:%s' % os.environ.get('PROMETHEUS_PORT', '9090')
CPU = ('1 - avg by (hypervisor) '
       '(rate(node_cpu_seconds_total{mode="idle"}[10s]))')


def _devcloud_retry():
    """tools/devcloud/devcloud_retry.py, loaded by path (not a package here)."""
    path = ROOT / 'tools' / 'devcloud' / 'devcloud_retry.py'
    spec = importlib.util.spec_from_file_location('devcloud_retry', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


devcloud_retry = _devcloud_retry()


def scenario(name):
    with open(SCENARIOS / ('%s.yaml' % name)) as f:
        return yaml.safe_load(f)


def devcloud(*args, timeout=900):
    result = subprocess.run([str(DEVCLOUD)] + list(args), capture_output=True,
                            text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError('devcloud %s failed (%d):\n%s' % (
            ' '.join(args), result.returncode, result.stderr[-3000:]))
    return result.stdout


def openstack(*args, parse=True, check=True, timeout=300, env=None):
    """Run the openstack shell on the devcloud; -f json output parsed."""
    exe = shutil.which('openstack', path=os.path.dirname(sys.executable)) \
        or shutil.which('openstack')
    command = [exe, '--os-cloud', 'devcloud'] + list(args)
    if parse:
        command += ['-f', 'json']
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=timeout, env=env)
    if check and result.returncode != 0:
        raise AssertionError('openstack %s failed (%d):\n%s' % (
            ' '.join(args), result.returncode, result.stderr[-3000:]))
    if not parse:
        return result
    return json.loads(result.stdout or 'null')


def promql(query, attempts=3):
    """Instant query: {hypervisor (or uuid): value}.

    A refused or dropped connection is tried again (a GET: safe to repeat).
    """
    url = '%s/api/v1/query?%s' % (PROMETHEUS, urllib.parse.urlencode(
        {'query': query}))
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
            break
        except (urllib.error.URLError, ConnectionError):
            if attempt == attempts - 1:
                raise
            time.sleep(1)
    assert body['status'] == 'success', body
    values = {}
    for item in body['data']['result']:
        metric = item['metric']
        key = metric.get('hypervisor') if 'uuid' not in metric \
            else metric['uuid']
        values[key] = float(item['value'][1])
    return values


def promql_for(query, keys, timeout=60):
    """promql(query) once its series are exactly `keys`.

    Series of hypervisors or servers a scenario load removed stay until the
    first scrape after the exporter's next poll.
    """
    keys = set(keys)
    return wait_for(
        lambda: (lambda values: values if set(values) == keys else None)(
            promql(query)),
        timeout, message='%s for exactly %s' % (query, sorted(keys)))


def connection():
    """openstacksdk on the devcloud; idempotent requests retried on a
    dropped keep-alive connection (tools/devcloud/devcloud_retry.py)."""
    import openstack
    return devcloud_retry.retrying(openstack.connect(cloud='devcloud'))


def hypervisor_names():
    """{service host: hypervisor (node) name} of every compute."""
    return {h.service_details['host']: h.name
            for h in connection().compute.hypervisors(details=True)}


def wait_for(predicate, timeout, interval=2, message='condition'):
    """Poll predicate() until it returns a true value; return that value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError('timed out after %d s waiting for %s (last: %r)' % (
        timeout, message, last))


class DevcloudTestCase(unittest.TestCase):
    """Loads SCENARIO once for the class (it replaces all servers).

    cls.node: {service host: hypervisor name}, e.g. hv01 ->
    hv01.devcloud.test; cls.host the other way.
    """

    SCENARIO = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if 'OS_CLIENT_CONFIG_FILE' not in os.environ:
            raise RuntimeError('OS_CLIENT_CONFIG_FILE is not set: run the '
                               'functional tests with tox -e functional')
        if cls.SCENARIO:
            devcloud('load', cls.SCENARIO)
        cls.node = hypervisor_names()
        cls.host = {node: host for host, node in cls.node.items()}
