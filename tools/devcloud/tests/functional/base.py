"""Helpers for the devcloud's self-checks against the running devcloud.

Plain commands only (the devcloud script, the `openstack` shell, Prometheus'
HTTP API, openstacksdk), all on 127.0.0.1; nothing of the plugin. Run them
with `devcloud check` or `tox -e functional`.
"""

import fcntl
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

from devcloud import devcloud_retry


def _take_a_devcloud():
    """Under `devcloud run --clouds N` (DEVCLOUD_SLOTS), this process takes
    one of the N devclouds: the first whose slot file it can lock, held
    until it exits, and its environment (ports, clouds.yaml, DEVCLOUD_HOME,
    a HOME of its own) becomes this process'. Before anything below reads
    the environment; so N test processes at once never share a cloud."""
    slots = os.environ.get('DEVCLOUD_SLOTS')
    if not slots:
        return
    for path in sorted(pathlib.Path(slots).glob('*.env')):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _TAKEN.append(fd)  # the lock lives as long as the process
        os.environ.update(line.split('=', 1) for line in
                          path.read_text().splitlines() if '=' in line)
        return
    raise RuntimeError('every devcloud of %s is taken: more test processes '
                       'than devcloud run --clouds started' % slots)


_TAKEN = []
_take_a_devcloud()

CODE = pathlib.Path(__file__).resolve().parents[2]
DEVCLOUD = CODE / 'devcloud'
SCENARIOS = CODE / 'scenarios'
PROMETHEUS = 'http://127.0.0.1:%s' % os.environ.get('PROMETHEUS_PORT', '9090')
AETOS = 'http://127.0.0.1:%s' % os.environ.get('AETOS_PORT', '8042')


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


def openstack(*args, parse=True, check=True, timeout=300, env=None,
              cloud='devcloud'):
    """Run the openstack shell on the devcloud; -f json output parsed.
    cloud: another of its clouds.yaml (devcloud-member, devcloud-aetos)."""
    exe = shutil.which('openstack', path=os.path.dirname(sys.executable)) \
        or shutil.which('openstack')
    command = [exe, '--os-cloud', cloud] + list(args)
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


def prometheus_get(path, params=None, attempts=3):
    """GET Prometheus' JSON API; a refused or dropped connection retried."""
    url = PROMETHEUS + path
    if params:
        url += '?' + urllib.parse.urlencode(params)
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
    return body['data']


def promql(query):
    """Instant query: {key: value}, the key the series' uuid, else its
    nodename, else its hypervisor label."""
    values = {}
    for item in prometheus_get('/api/v1/query', {'query': query})['result']:
        metric = item['metric']
        key = metric.get('uuid') or metric.get('nodename') or \
            metric.get('hypervisor')
        values[key] = float(item['value'][1])
    return values


def flavour():
    """The exporters' flavour the devcloud runs (devcloud exporters)."""
    return devcloud('exporters').strip()


# Per hypervisor, in every flavour: a node_exporter series joined on its
# target with node_uname_info, whose nodename is the compute service host.
# The query must keep the labels instance and job.
HOST_CPU = ('1 - avg by (instance, job) '
            '(rate(node_cpu_seconds_total{mode="idle"}[10s]))')
HOST_CPU_PRESSURE = 'rate(node_pressure_cpu_waiting_seconds_total[10s])'


def by_host(query):
    """{service host: value} of a node_exporter query (see HOST_CPU)."""
    return promql('(%s) * on(instance, job) group_left(nodename) '
                  'node_uname_info' % query)


# Each libvirt exporter's CPU time of a server, in cores, keyed by uuid.
SERVER_CPU = {
    # inovex: domain only; Nova's uuid is instance_id on the info metric
    'kolla': 'label_replace(rate(libvirt_domain_info_cpu_time_seconds_total'
             '[{window}]) * on(domain, instance) group_left(instance_id) '
             'libvirt_domain_openstack_info, "uuid", "$1", "instance_id", '
             '"(.+)")',
    # Tinkoff: domain only; uuid on libvirt_domain_info_meta
    'kolla-legacy': 'rate(libvirt_domain_info_cpu_time_seconds_total'
                    '[{window}]) * on(domain, instance) group_left(uuid) '
                    'libvirt_domain_info_meta',
    # vexxhost: uuid, nanoseconds
    'helm': 'rate(libvirtd_domain_cpu_time[{window}]) / 1e9',
    # kumina: uuid on every series
    'debian': 'rate(libvirt_domain_info_cpu_time_seconds_total[{window}])',
}


def server_cpu(window='10s'):
    """{server uuid: cores} of the servers whose CPU time is exported."""
    return promql(SERVER_CPU[flavour()].format(window=window))


def host_ips():
    """{service host: Nova's host_ip} (os-hypervisors detail, 2.87)."""
    response = connection().compute.get('/os-hypervisors/detail',
                                        microversion='2.87')
    return {h['service']['host']: h['host_ip']
            for h in response.json()['hypervisors']}


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
    import openstack as sdk
    return devcloud_retry.retrying(sdk.connect(cloud='devcloud'))


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

    cls.node maps each service host (hv01) to its hypervisor name
    (hv01.devcloud.test), what os-hypervisors, Placement and the exporter
    call it; cls.host the other way.
    """

    SCENARIO = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if 'OS_CLIENT_CONFIG_FILE' not in os.environ:
            raise RuntimeError('OS_CLIENT_CONFIG_FILE is not set: run the '
                               'tests with tox -e functional (or devcloud '
                               'check)')
        if cls.SCENARIO:
            devcloud('load', cls.SCENARIO)
        cls.node = hypervisor_names()
        cls.host = {node: host for host, node in cls.node.items()}
