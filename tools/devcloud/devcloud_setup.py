#!/usr/bin/env python3
"""The devcloud's API side: catalog, flavors, AZs, scenarios, status.

Called by the devcloud script with the devcloud venv's Python:

    devcloud_setup.py catalog
    devcloud_setup.py wait-computes N SECONDS
    devcloud_setup.py post-start COMPUTES_DIR
    devcloud_setup.py real-flavors                real.128, real.256, real.512
    devcloud_setup.py hypervisors SCENARIO       print the scenario's SPECs
    devcloud_setup.py delete-service HOST [HOST ...]
    devcloud_setup.py clear                      delete all servers and groups
    devcloud_setup.py load SCENARIO COMPUTES_DIR
    devcloud_setup.py status
    devcloud_setup.py wait-scraped PROMETHEUS_URL EXPORTER_URL TARGETS_DIR
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import openstack
import yaml

import devcloud_retry  # beside this script

KEYSTONE_PORT = os.environ.get('KEYSTONE_PORT', '5000')
PORTS = {
    'compute': ('nova', os.environ.get('NOVA_PORT', '8774'), '/v2.1'),
    'placement': ('placement', os.environ.get('PLACEMENT_PORT', '8778'), ''),
    'image': ('glance', os.environ.get('GLANCE_PORT', '9292'), ''),
    'network': ('neutron', os.environ.get('NEUTRON_PORT', '9696'), ''),
    # Aetos in front of Prometheus: the leveller finds it here
    'metric-storage': ('aetos', os.environ.get('AETOS_PORT', '8042'), ''),
}
FLAVORS = [('m1.tiny', 1, 512, 1), ('m1.small', 1, 2048, 20),
           ('m1.medium', 2, 4096, 40), ('m1.large', 4, 8192, 80),
           ('m1.xlarge', 8, 16384, 160)]
IMAGE_ID = '11111111-1111-4111-8111-111111111111'  # served by the fake Glance
# For real QEMU guests (devcloud start --real): small, so that a TCG guest
# boots in seconds and a live migration moves little memory.
REAL_FLAVORS = [('real.128', 1, 128, 1), ('real.256', 1, 256, 1),
                ('real.512', 1, 512, 1)]
LOAD_KEYS = {'cpu': 'devcloud:cpu', 'mem': 'devcloud:mem'}


def conn():
    # GETs, PUTs and DELETEs retried on a dropped keep-alive connection (CI
    # lost a `clear` in wait_for_delete to one); POSTs not: see
    # devcloud_retry.
    return devcloud_retry.retrying(openstack.connect(
        auth_url='http://127.0.0.1:%s/v3' % KEYSTONE_PORT,
        username='admin', password=os.environ.get('ADMIN_PASSWORD', 'admin'),
        project_name='admin', user_domain_name='Default',
        project_domain_name='Default', region_name='RegionOne',
        identity_api_version='3', compute_api_version='2.95'))


def catalog():
    c = conn()
    have = {s.type for s in c.identity.services()}
    for stype, (name, port, suffix) in PORTS.items():
        if stype in have:
            continue
        svc = c.identity.create_service(name=name, type=stype, enabled=True)
        for iface in ('public', 'internal', 'admin'):
            c.identity.create_endpoint(
                service_id=svc.id, interface=iface, region_id='RegionOne',
                url='http://127.0.0.1:%s%s' % (port, suffix))
        print('catalog: %s -> 127.0.0.1:%s%s' % (stype, port, suffix))
    member(c)


def member(c):
    """Project and user demo with only the member role (devcloud-member).

    Idempotent; an existing user gets DEMO_PASSWORD again, so it matches the
    clouds.yaml that every start writes.
    """
    password = os.environ.get('DEMO_PASSWORD', 'demo')
    role = c.identity.find_role('member') or \
        c.identity.create_role(name='member')
    project = c.identity.find_project('demo', domain_id='default') or \
        c.identity.create_project(name='demo', domain_id='default',
                                  description='devcloud non-admin project')
    user = c.identity.find_user('demo', domain_id='default')
    if user is None:
        user = c.identity.create_user(name='demo', domain_id='default',
                                      password=password,
                                      default_project_id=project.id)
    else:
        c.identity.update_user(user, password=password)
    if not c.identity.validate_user_has_project_role(project, user, role):
        c.identity.assign_project_role_to_user(project, user, role)
    print('user demo: member of project demo')


def wait_computes(n, timeout=240):
    c = conn()
    started = time.time()
    while time.time() - started < timeout:
        try:
            # a forced-down compute (the rules scenario's) runs: Nova
            # says it is down
            up = [s for s in c.compute.services(binary='nova-compute')
                  if s.state == 'up' or s.is_forced_down]
            hyps = list(c.compute.hypervisors())
            rps = list(c.placement.resource_providers())
            if len(up) >= n and len(hyps) >= n and len(rps) >= n:
                print('%d computes up, %d hypervisors, %d resource providers '
                      'after %.0f s' % (len(up), len(hyps), len(rps),
                                        time.time() - started))
                return
        except openstack.exceptions.SDKException as exc:
            print('waiting: %s' % exc)
        time.sleep(2)
    sys.exit('timeout waiting for %d computes' % n)


def post_start(computes_dir):
    """Flavors, and each hypervisor in the aggregate of its AZ only."""
    c = conn()
    _flavors(c, FLAVORS)
    wanted = {}
    for host in sorted(os.listdir(computes_dir)):
        path = os.path.join(computes_dir, host, 'az')
        if os.path.exists(path):
            wanted[host] = open(path).read().strip()
    aggregates = {a.name: c.compute.get_aggregate(a.id)
                  for a in c.compute.aggregates()}
    for host, az in wanted.items():
        for name, agg in aggregates.items():
            if name.startswith('agg-') and host in (agg.hosts or []) and \
                    name != 'agg-' + az:
                c.compute.remove_host_from_aggregate(agg, host)
        if not az:
            continue
        name = 'agg-' + az
        if name not in aggregates:
            aggregates[name] = c.compute.create_aggregate(
                name=name, availability_zone=az)
        if host in (aggregates[name].hosts or []):
            continue
        for _ in range(60):
            try:
                c.compute.add_host_to_aggregate(aggregates[name], host)
                break
            except openstack.exceptions.NotFoundException:
                time.sleep(1)  # not mapped to a cell yet
    print('flavors and AZ aggregates: %s' % wanted)


def _flavors(c, flavors):
    """The flavors [(name, vcpus, ram MiB, disk GiB)] that are missing."""
    have = {f.name for f in c.compute.flavors()}
    for name, vcpus, ram, disk in flavors:
        if name not in have:
            c.compute.create_flavor(name=name, vcpus=vcpus, ram=ram,
                                    disk=disk, is_public=True)


def real_flavors():
    _flavors(conn(), REAL_FLAVORS)
    print('flavors for real guests: %s' % ', '.join(f[0] for f in REAL_FLAVORS))


def read_scenario(path):
    with open(path) as f:
        scenario = yaml.safe_load(f)
    if not isinstance(scenario, dict) or not scenario.get('hypervisors'):
        sys.exit('%s: a scenario needs a list of hypervisors' % path)
    return scenario


def hypervisor_specs(path):
    for h in read_scenario(path)['hypervisors']:
        print(spec_of(h))


def spec_of(h):
    """The devcloud script's SPEC of a scenario's hypervisor; the fields
    after reserved_mb only when one is given (a SPEC names the state a
    hypervisor was made with: the older ones stay the same)."""
    fields = [h['name'], h['vcpus'], h['memory_mb'], h.get('disk_gb', 1000),
              h.get('cpu_model', 'Nehalem'), '+'.join(h.get('features', [])),
              h.get('az', ''), h.get('cpu_ratio', 4.0),
              h.get('ram_ratio', 1.0), h.get('reserved_mb', 0)]
    if h.get('pcpus') or h.get('hypervisor_version') or h.get('resources'):
        fields += [h.get('pcpus', 0), h.get('hypervisor_version', 1000),
                   '+'.join('%s=%d' % (rc, n) for rc, n in
                            sorted((h.get('resources') or {}).items()))]
    return ':'.join(str(v) for v in fields)


def delete_service(*hosts):
    c = conn()
    for host in hosts:
        for svc in c.compute.services(binary='nova-compute', host=host):
            c.compute.delete_service(svc)
            print('deleted compute service %s' % host)


def clear(c):
    """Delete every server and server group, and wait until they are gone."""
    servers = list(c.compute.servers(all_projects=True))
    for server in servers:
        if server.is_locked:
            c.compute.unlock_server(server)
        c.compute.delete_server(server)
    for server in servers:
        c.compute.wait_for_delete(server, wait=300)
    for group in c.compute.server_groups(all_projects=True):
        c.compute.delete_server_group(group)
    # A scenario starts with every compute service enabled and up (a
    # drain, a failed test or the rules scenario may have left one
    # disabled or forced down),
    for service in c.compute.services(binary='nova-compute'):
        if service.status == 'disabled':
            c.compute.enable_service(service)
        if service.is_forced_down:
            c.compute.put('/os-services/%s' % service.id,
                          json={'forced_down': False}, microversion='2.53')
    # and with only the aggregates of AZs (post_start): the rules
    # scenario's would isolate hosts and projects.
    for agg in c.compute.aggregates():
        if not agg.name.startswith('agg-'):
            for host in c.compute.get_aggregate(agg.id).hosts or []:
                c.compute.remove_host_from_aggregate(agg, host)
            c.compute.delete_aggregate(agg)
    # Nova can leak a migration's allocation, e.g. when a server is deleted
    # while it live-migrates; with no servers left, every allocation is one.
    for rp in c.placement.resource_providers():
        found = c.placement.get(
            '/resource_providers/%s/allocations' % rp.id,
            microversion='1.28').json()['allocations']
        for consumer in found:
            print('clear: leaked allocation of %s on %s' % (consumer, rp.name))
            c.placement.delete('/allocations/%s' % consumer,
                               microversion='1.28')


def expand(entries):
    """Server entries with count: name 'web-{i}' becomes web-1, web-2 ..."""
    for entry in entries:
        count = int(entry.get('count', 1))
        for i in range(1, count + 1):
            item = dict(entry)
            item['name'] = entry['name'].format(i=i)
            yield item


def load(path, computes_dir):
    scenario = read_scenario(path)
    c = conn()
    started = time.time()
    clear(c)
    post_start(computes_dir)
    have = {f.name: f for f in c.compute.flavors()}
    for f in scenario.get('flavors', []):
        if f['name'] not in have:
            have[f['name']] = c.compute.create_flavor(
                name=f['name'], vcpus=f['vcpus'], ram=f['ram'],
                disk=f.get('disk', 10), is_public=True)
    groups = {}
    for g in scenario.get('server_groups', []):
        groups[g['name']] = c.compute.create_server_group(
            name=g['name'], policy=g['policy'], rules=g.get('rules') or {})
    azs = {h['name']: h.get('az') or 'nova' for h in scenario['hypervisors']}
    created = []
    for entry in expand(scenario.get('servers', [])):
        metadata = {LOAD_KEYS[k]: str(v)
                    for k, v in (entry.get('load') or {}).items()}
        metadata.update(entry.get('metadata') or {})
        kwargs = {}
        if entry.get('group'):
            kwargs['scheduler_hints'] = {'group': groups[entry['group']].id}
        server = c.compute.create_server(
            name=entry['name'], flavor_id=have[entry['flavor']].id,
            image_id=IMAGE_ID, networks='none', metadata=metadata,
            availability_zone='%s:%s' % (azs[entry['host']], entry['host']),
            **kwargs)
        created.append((server, entry))
    for server, entry in created:
        c.compute.wait_for_server(server, status='ACTIVE', wait=600,
                                  interval=1)
    for server, entry in created:
        state = entry.get('state', 'active')
        if state == 'paused':
            c.compute.pause_server(server)
            c.compute.wait_for_server(server, status='PAUSED', wait=120)
        elif state == 'shutoff':
            c.compute.stop_server(server)
            c.compute.wait_for_server(server, status='SHUTOFF', wait=120)
        elif state == 'locked':
            c.compute.lock_server(server, locked_reason='devcloud scenario')
        elif state != 'active':
            sys.exit('%s: unknown state %r' % (entry['name'], state))
    print('scenario %s: %d servers in %.0f s' % (
        os.path.basename(path), len(created), time.time() - started))


def status():
    c = conn()
    for s in c.compute.services():
        print('service %-15s %-10s %-8s %-4s %s' % (
            s.binary, s.host, s.status, s.state, s.availability_zone))
    # the node (resource provider) names differ from the service hosts
    hosts = {h.name: (h.service_details or {}).get('host')
             for h in c.compute.hypervisors(details=True)}
    for rp in c.placement.resource_providers():
        inv = {i.resource_class: (i.total, i.allocation_ratio, i.reserved)
               for i in c.placement.resource_provider_inventories(rp)}
        print('hypervisor %-20s host %-8s VCPU %s MEMORY_MB %s' % (
            rp.name, hosts.get(rp.name), inv.get('VCPU'),
            inv.get('MEMORY_MB')))
    print('servers: %d' % len(list(c.compute.servers(all_projects=True))))


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b''
    except (urllib.error.URLError, ConnectionError):
        return None, b''


def wait_scraped(prometheus, exporter, targets_dir, timeout=90):
    """Until Prometheus has scraped every exporter target twice, all up.

    Two samples of each series: a rate() over any window then has a value.
    The exporter writes the targets at its first poll (its /healthz is 200
    from then on); Prometheus reads them within its file_sd refresh.
    """
    started = time.time()
    while True:
        status, body = _get(exporter + '/healthz')
        if status == 200:
            break
        if time.time() - started > timeout:
            sys.exit('timeout waiting for the exporter at %s: %s' % (
                exporter, body.decode(errors='replace').strip() or 'no answer'))
        time.sleep(0.25)
    query = urllib.parse.urlencode({'query': 'count_over_time(up[1m]) >= 2 and up == 1'})
    found = wanted = 0
    while time.time() - started < timeout:
        wanted = 0
        for name in sorted(os.listdir(targets_dir)):
            if name.endswith('.json'):
                with open(os.path.join(targets_dir, name)) as f:
                    wanted += sum(len(group['targets']) for group in json.load(f))
        status, body = _get('%s/api/v1/query?%s' % (prometheus, query))
        if status == 200:
            found = len(json.loads(body)['data']['result'])
            if found >= wanted:
                print('%d targets up and scraped twice after %.0f s' % (
                    wanted, time.time() - started))
                return
        time.sleep(0.5)
    sys.exit('timeout: %d of %d targets up and scraped twice (see %s/targets)' % (
        found, wanted, prometheus))


def main(argv):
    commands = {
        'catalog': (catalog, 0), 'wait-computes': (wait_computes, 2),
        'post-start': (post_start, 1), 'hypervisors': (hypervisor_specs, 1),
        'real-flavors': (real_flavors, 0),
        'delete-service': (delete_service, -1), 'load': (load, 2),
        'clear': (lambda: clear(conn()), 0),
        'status': (status, 0), 'wait-scraped': (wait_scraped, 3),
    }
    if len(argv) < 2 or argv[1] not in commands:
        sys.exit(__doc__)
    arity = commands[argv[1]][1]  # -1: one or more
    if len(argv) - 2 != arity and not (arity < 0 and len(argv) > 2):
        sys.exit(__doc__)
    func, _ = commands[argv[1]]
    args = argv[2:]
    if argv[1] == 'wait-computes':
        args = [int(args[0]), int(args[1])]
    func(*args)


if __name__ == '__main__':
    main(sys.argv)
