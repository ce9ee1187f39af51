#!/usr/bin/env python3
"""The conformance scenario: a cloud rich in Nova's rules, from a seed.

    rules.py SEED COMPUTES_DIR SERVERS

Run by `devcloud rules SEED [SERVERS]` after it loaded scenarios/rules.yaml
(the hypervisors; every server and group deleted). From the seed it adds,
all through the APIs as an operator would:

- custom traits on resource providers (CUSTOM_SSD, CUSTOM_BLUE, and
  CUSTOM_ISOLATED on the hypervisor of an isolated aggregate);
- aggregates with metadata: matched by flavors'
  aggregate_instance_extra_specs (ssd, speed; a value may list several,
  "true, nvme"), filter_tenant_id for projects (one project per key, a
  comma list, a key with a suffix), trait:CUSTOM_ISOLATED=required;
- projects rules-a, rules-b and rules-c, whose servers user rules-ops
  (admin in each) boots;
- flavors with required and forbidden traits, aggregate extra specs
  (scoped, unscoped, with operators), hw:cpu_policy=dedicated (PCPU) and a
  custom resource class (resources:CUSTOM_FPGA);
- server groups of the four policies, one anti-affinity group with
  max_server_per_host 2;
- servers booted from images whose properties Nova's scheduler reads
  (ImagePropertiesFilter's guest and hypervisor version, a required
  trait), and from an image deleted from Glance once they are built;
- servers pinned to an availability zone or not, on hypervisors the
  scheduler accepts for them (booted with a requested host, Nova's filters
  run), two hypervisors filled near their RAM, locked, paused and stopped
  servers;
- a disabled compute service and a forced-down one.

A host the scheduler refuses for a server is tried again with another.
Prints one line per step; the cloud it made is read back by whoever uses
it (the conformance harness reads it as the leveller does).
"""

import os
import random
import sys
import time
import uuid

import openstack

import devcloud_setup  # beside this script

PROJECTS = ('rules-a', 'rules-b', 'rules-c')
OPS_USER = 'rules-ops'
OPS_PASSWORD = os.environ.get('RULES_PASSWORD', 'rules')
# name: (vcpus, ram MB, disk GB, extra specs)
FLAVORS = {
    'r.tiny': (1, 512, 1, {}),
    'r.small': (1, 2048, 10, {}),
    'r.medium': (2, 4096, 20, {}),
    'r.large': (4, 8192, 40, {}),
    'r.big': (4, 12288, 40, {}),
    'r.ssd': (2, 4096, 20, {'aggregate_instance_extra_specs:ssd': 'true'}),
    'r.fast': (2, 4096, 20, {'aggregate_instance_extra_specs:speed': '>= 2'}),
    'r.speedy': (1, 2048, 10, {'speed': '<or> 1 <or> 3'}),
    'r.trait': (2, 4096, 20, {'trait:CUSTOM_SSD': 'required'}),
    'r.notblue': (2, 4096, 20, {'trait:CUSTOM_BLUE': 'forbidden'}),
    'r.vnni': (2, 4096, 20, {'trait:HW_CPU_X86_AVX512VNNI': 'required'}),
    'r.isolated': (1, 2048, 10, {'trait:CUSTOM_ISOLATED': 'required'}),
    'r.pinned': (2, 2048, 10, {'hw:cpu_policy': 'dedicated'}),
    'r.fpga': (1, 2048, 10, {'resources:CUSTOM_FPGA': '1'}),
}
# How often each flavor is drawn for a server.
MIX = (['r.small'] * 4 + ['r.medium'] * 4 + ['r.large'] * 2 + ['r.tiny'] +
       ['r.ssd'] * 2 + ['r.fast'] * 2 + ['r.speedy'] * 2 + ['r.trait'] * 2 +
       ['r.notblue'] * 2 + ['r.vnni'] + ['r.isolated'] + ['r.pinned'] * 2 +
       ['r.fpga'] * 2)
# name, policy, max_server_per_host
GROUPS = (('web', 'anti-affinity', None), ('db', 'anti-affinity', 2),
          ('cache', 'affinity', None), ('batch', 'soft-anti-affinity', None),
          ('app', 'soft-affinity', None))
# The images servers boot from (fake_glance_neutron.py): most the plain
# one; some ask what ImagePropertiesFilter checks (the fake driver's guests;
# a libvirt version before 9.0) or a trait; 'gone' is made for the seed
# and deleted once the servers are built: the leveller finds it unknown.
IMAGES = {'plain': devcloud_setup.IMAGE_ID,
          'guest': '33333333-3333-4333-8333-333333333333',
          'before-9': '44444444-4444-4444-8444-444444444444',
          'ssd': '55555555-5555-4555-8555-555555555555'}
IMAGE_MIX = ['plain'] * 8 + ['guest', 'before-9', 'before-9', 'ssd', 'ssd',
                             'gone', 'gone']
COMPUTE_VERSION = '2.74'  # create with a requested host, Nova's filters run
# The hosts a role may fall on, drawn in this order, each host one role:
# five set aside (scenarios/rules.yaml), so that the hypervisors whose
# CPU or version differ, and an alike pair in each zone, stay open.
SET_ASIDE = ('hv02', 'hv08', 'hv10', 'hv11', 'hv12')
# Alike pairs, open: servers there can move to the other.
ALIKE = ('hv01', 'hv09', 'hv05', 'hv06')
ROLES = (('isolated', ('hv10', 'hv12')), ('tenant-b', ('hv11', 'hv12')),
         ('tenant-ac', ('hv02', 'hv11')), ('disabled', SET_ASIDE),
         ('forced-down', SET_ASIDE))


def say(text):
    print('rules: %s' % text, flush=True)


class Host:
    """What the generator knows of a hypervisor, to pick hosts Nova takes."""

    def __init__(self, name, node, spec):
        self.name, self.node, self.spec = name, node, spec
        self.az = spec.get('az') or None
        self.traits = {'HW_CPU_X86_' + f.upper() for f in spec['features']}
        self.aggregates = []  # (name, metadata)
        self.ram = (spec['memory_mb'] - spec.get('reserved_mb', 0)) * \
            spec.get('ram_ratio', 1.0)
        self.vcpus = spec['vcpus'] * spec.get('cpu_ratio', 4.0)
        self.pcpus = spec.get('pcpus', 0)
        self.fpgas = (spec.get('resources') or {}).get('CUSTOM_FPGA', 0)
        self.servers = []  # (server id, group)

    def values(self, key):
        """Nova's view of an aggregate metadata key: every value of every
        aggregate, split at commas."""
        return {v.strip() for _, md in self.aggregates if key in md
                for v in md[key].split(',')}

    def tenants(self):
        return {v.strip() for _, md in self.aggregates for k, value in
                md.items() if k.startswith('filter_tenant_id')
                for v in value.split(',')}

    def isolated(self):
        return {k[len('trait:'):] for _, md in self.aggregates
                for k, v in md.items() if k.startswith('trait:') and
                v == 'required'}


class Builder:
    def __init__(self, seed, computes_dir, count):
        self.rng = random.Random(seed)
        self.seed, self.count = seed, count
        self.c = devcloud_setup.conn()
        self.scenario = devcloud_setup.read_scenario(os.path.join(
            os.path.dirname(os.path.abspath(__file__)), 'scenarios',
            'rules.yaml'))
        nodes = {h.service_details['host']: h.name
                 for h in self.c.compute.hypervisors(details=True)}
        self.hosts = {h['name']: Host(h['name'], nodes[h['name']], h)
                      for h in self.scenario['hypervisors']}
        self.project_ids = {}
        self.tenant_aggregates = {}  # project -> hosts it is confined to
        self.conns = {}

    # --- identity -----------------------------------------------------
    def projects(self):
        ident = self.c.identity
        admin_role = ident.find_role('admin')
        # Made anew, its password the one asked for now.
        old = ident.find_user(OPS_USER, domain_id='default')
        if old is not None:
            ident.delete_user(old)
        user = ident.create_user(name=OPS_USER, domain_id='default',
                                 password=OPS_PASSWORD)
        for name in PROJECTS:
            project = ident.find_project(name, domain_id='default') or \
                ident.create_project(name=name, domain_id='default',
                                     description='devcloud rules scenario')
            if not ident.validate_user_has_project_role(project, user,
                                                        admin_role):
                ident.assign_project_role_to_user(project, user, admin_role)
            self.project_ids[name] = project.id
        self.project_ids['admin'] = ident.find_project(
            'admin', domain_id='default').id
        say('projects %s' % ', '.join(sorted(self.project_ids)))

    def conn_of(self, project):
        if project == 'admin':
            return self.c
        if project not in self.conns:
            # Not the clouds.yaml of OS_CLOUD: its admin would win over
            # these credentials.
            self.conns[project] = devcloud_setup.devcloud_retry.retrying(
                openstack.connect(
                    load_yaml_config=False, load_envvars=False,
                    auth_url='http://127.0.0.1:%s/v3' %
                    devcloud_setup.KEYSTONE_PORT, username=OPS_USER,
                    password=OPS_PASSWORD, project_name=project,
                    user_domain_name='Default', project_domain_name='Default',
                    region_name='RegionOne', identity_api_version='3'))
        return self.conns[project]

    # --- flavors, traits, aggregates -----------------------------------
    def flavors(self):
        have = {f.name: f for f in self.c.compute.flavors()}
        for name, (vcpus, ram, disk, specs) in FLAVORS.items():
            flavor = have.get(name) or self.c.compute.create_flavor(
                name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
            if specs:
                self.c.compute.create_flavor_extra_specs(flavor, specs)
            have[name] = flavor
        self.flavor_ids = {name: have[name].id for name in FLAVORS}
        say('%d flavors' % len(FLAVORS))

    def traits(self):
        names = sorted(self.hosts)
        chosen = {
            'CUSTOM_SSD': self.rng.sample(names, 4),
            'CUSTOM_BLUE': self.rng.sample(names, 3),
            'CUSTOM_ISOLATED': [self.role['isolated']],
        }
        placement = self.c.placement
        for trait in chosen:
            placement.put('/traits/%s' % trait, microversion='1.6')
        providers = {rp.name: rp.id
                     for rp in placement.resource_providers()}
        for name in names:
            host = self.hosts[name]
            wanted = {t for t, on in chosen.items() if name in on}
            url = '/resource_providers/%s/traits' % providers[host.node]
            for _ in range(5):  # the compute may update it meanwhile
                now = placement.get(url, microversion='1.6').json()
                # another seed's traits go (the hypervisors stay)
                kept = set(now['traits']) - set(chosen)
                body = {'traits': sorted(kept | wanted),
                        'resource_provider_generation':
                            now['resource_provider_generation']}
                answer = placement.put(url, json=body, microversion='1.6')
                if answer.status_code == 200:
                    break
                time.sleep(1)
            else:
                sys.exit('rules: could not set traits on %s' % host.node)
            host.traits |= wanted
        say('traits %s' % {t: sorted(h) for t, h in chosen.items()})

    def aggregates(self):
        names = sorted(self.hosts)
        rng = self.rng
        ids = self.project_ids
        b_host, ac_host = self.role['tenant-b'], self.role['tenant-ac']
        b_hosts = [b_host]
        # rules-c on two: one shared with rules-a, one with rules-b
        c_hosts = [ac_host, b_host]
        ssd_value = rng.choice(['true', 'true, nvme'])
        wanted = [
            ('rules-ssd', {'ssd': ssd_value}, rng.sample(names, 3)),
            ('rules-ssd-too', {'ssd': 'true'}, rng.sample(names, 1)),
            ('rules-speed', {'speed': '3'}, rng.sample(names, 3)),
            ('rules-slow', {'speed': '1'}, rng.sample(names, 2)),
            # confines rules-b there (limit_tenants_to_placement_aggregate)
            ('rules-tenant-b', {'filter_tenant_id': ids['rules-b']},
             b_hosts),
            # a list: isolates the hosts, confines neither project
            ('rules-tenant-ac', {'filter_tenant_id': '%s,%s' % (
                ids['rules-a'], ids['rules-c'])}, [ac_host]),
            # a suffixed key, one project: confines rules-c there
            ('rules-tenant-c', {'filter_tenant_id_2': ids['rules-c']},
             c_hosts),
            ('rules-isolated', {'trait:CUSTOM_ISOLATED': 'required'},
             [self.role['isolated']]),
        ]
        for name, metadata, hosts in wanted:
            agg = self.c.compute.create_aggregate(name=name)
            self.c.compute.set_aggregate_metadata(agg, metadata)
            for host in hosts:
                self.c.compute.add_host_to_aggregate(agg, host)
                self.hosts[host].aggregates.append((name, metadata))
        self.tenant_aggregates = {'rules-b': set(b_hosts),
                                  'rules-c': set(c_hosts)}
        say('aggregates %s' % {n: h for n, _, h in wanted})

    # --- where a server may go ------------------------------------------
    def image_of(self, name):
        """The image a server boots from: the rs-NN servers go through
        IMAGE_MIX in turn from a place the seed draws (so that a few
        servers already boot from each), the others the plain one. The
        rest of the scenario draws as it did before images."""
        if not name.startswith('rs-'):
            return 'plain'
        start = random.Random(self.seed).randrange(len(IMAGE_MIX))
        return IMAGE_MIX[(start + int(name[3:])) % len(IMAGE_MIX)]

    def fits(self, host, flavor, project, zone, group, image='plain'):
        vcpus, ram, _, specs = FLAVORS[flavor]
        if zone and host.az != zone:
            return False
        if image == 'before-9' and host.spec['hypervisor_version'] >= 9000000:
            return False
        if image == 'ssd' and 'CUSTOM_SSD' not in host.traits:
            return False
        dedicated = specs.get('hw:cpu_policy') == 'dedicated'
        if host.ram < ram or (not dedicated and host.vcpus < vcpus):
            return False
        required = {k[6:] for k, v in specs.items()
                    if k.startswith('trait:') and v == 'required'}
        forbidden = {k[6:] for k, v in specs.items()
                     if k.startswith('trait:') and v == 'forbidden'}
        if not required <= host.traits or forbidden & host.traits:
            return False
        if not host.isolated() <= required:
            return False
        tenants = host.tenants()
        if tenants and self.project_ids[project] not in tenants:
            return False
        confined = self.tenant_aggregates.get(project)
        if confined and host.name not in confined:
            return False
        if 'aggregate_instance_extra_specs:ssd' in specs and \
                'true' not in host.values('ssd'):
            return False
        speeds = {float(v) for v in host.values('speed')}
        if 'aggregate_instance_extra_specs:speed' in specs and \
                not any(s >= 2 for s in speeds):
            return False
        if 'speed' in specs and not speeds & {1.0, 3.0}:
            return False
        if specs.get('hw:cpu_policy') == 'dedicated' and host.pcpus < vcpus:
            return False
        if 'resources:CUSTOM_FPGA' in specs and host.fpgas < 1:
            return False
        if group is not None:
            policy, limit, members = group
            here = sum(1 for _, g in host.servers if g is members)
            if policy == 'anti-affinity' and here >= (limit or 1):
                return False
            placed = [h for h in self.hosts.values()
                      if any(g is members for _, g in h.servers)]
            if policy == 'affinity' and placed and host not in placed:
                return False
        return True

    def take(self, host, flavor, server_id, group):
        vcpus, ram, _, specs = FLAVORS[flavor]
        host.ram -= ram
        if specs.get('hw:cpu_policy') == 'dedicated':
            host.pcpus -= vcpus
        else:
            host.vcpus -= vcpus
        if 'resources:CUSTOM_FPGA' in specs:
            host.fpgas -= 1
        host.servers.append((server_id, group))

    # --- servers ------------------------------------------------------
    def groups(self):
        made = []
        for name, policy, limit in GROUPS:
            rules = {'max_server_per_host': limit} if limit else {}
            group = self.c.compute.create_server_group(
                name=name, policy=policy, rules=rules)
            made.append((group, (policy, limit, [])))
        say('server groups %s' % ', '.join(
            '%s (%s)' % (g.name, d[0]) for g, d in made))
        return made

    def wishes(self, groups):
        """(name, flavor, project, pinned, group) of each server."""
        rng = self.rng
        found = []
        for group, details in groups:
            for i in range(rng.choice((2, 3))):
                found.append(('%s-%d' % (group.name, i + 1),
                              rng.choice(['r.small', 'r.medium', 'r.tiny']),
                              'admin', True, (group, details)))
        # one of each flavor with a rule and a plain one of each other
        # project first, then a mix
        first = [(f, None) for f, (_, _, _, specs) in FLAVORS.items()
                 if specs] + [('r.small', p) for p in PROJECTS]
        i = 0
        while len(found) < self.count:
            i += 1
            project = rng.choice(['admin'] * 5 + list(PROJECTS))
            flavor, chosen = first[i - 1] if i <= len(first) else (
                rng.choice(MIX), None)
            found.append(('rs-%02d' % i, flavor, chosen or project,
                          rng.random() < 0.6, None))
        return found

    def boot(self, name, flavor, project, pinned, group, exclude=()):
        """Boot on a host it fits; None if none does."""
        details = group[1] if group else None
        hosts = [h for h in self.hosts.values() if h.name not in exclude]
        self.rng.shuffle(hosts)
        image = self.image_of(name)
        for host in hosts:
            zone = host.az if pinned else None
            if not self.fits(host, flavor, project, zone, details, image):
                continue
            body = {'server': {
                'name': name, 'flavorRef': self.flavor_ids[flavor],
                'imageRef': IMAGES[image], 'networks': 'none',
                'host': host.name}}
            if zone:
                body['server']['availability_zone'] = zone
            if group:
                body['os:scheduler_hints'] = {'group': group[0].id}
            answer = self.conn_of(project).compute.post(
                '/servers', json=body, microversion=COMPUTE_VERSION)
            if answer.status_code != 202:
                sys.exit('rules: booting %s failed: %s' % (name, answer.text))
            server_id = answer.json()['server']['id']
            self.take(host, flavor, server_id, details[2] if details else None)
            if details:
                details[2].append(server_id)
            return server_id, host
        return None

    def wait(self, ids, timeout=600):
        """{id: status} once every server is ACTIVE or ERROR."""
        deadline = time.time() + timeout
        while True:
            found = {s['id']: s['status'] for s in self.c.compute.get(
                '/servers/detail', params={'all_tenants': 1},
                microversion='2.60').json()['servers'] if s['id'] in ids}
            if all(found.get(i) in ('ACTIVE', 'ERROR') for i in ids):
                return found
            if time.time() > deadline:
                sys.exit('rules: servers not built after %d s: %s' % (
                    timeout, {i: found.get(i) for i in ids
                              if found.get(i) not in ('ACTIVE', 'ERROR')}))
            time.sleep(1)

    def servers(self, groups):
        started = time.time()
        pending, nowhere = {}, []
        for wish in self.wishes(groups):
            # a group's members on hypervisors no role closes
            booted = self.boot(*wish, exclude=set(self.role.values())
                               if wish[4] else ())
            if booted:
                pending[booted[0]] = (wish, booted[1])
            else:
                nowhere.append(wish[0])
        built = 0
        for attempt in range(3):
            status = self.wait(set(pending))
            failed = {i: pending[i] for i, s in status.items() if s == 'ERROR'}
            built += len(pending) - len(failed)
            pending = {}
            for server_id, (wish, host) in failed.items():
                self.c.compute.delete_server(server_id)
                host.servers = [s for s in host.servers if s[0] != server_id]
                if wish[4]:
                    wish[4][1][2].remove(server_id)
                booted = self.boot(*wish, exclude={host.name} | (
                    set(self.role.values()) if wish[4] else set()))
                if booted:
                    pending[booted[0]] = (wish, booted[1])
            if not pending:
                break
        say('%d servers in %.0f s; no host for %s' % (
            built, time.time() - started, ', '.join(nowhere) or 'none'))

    def fill(self):
        """Two hypervisors near their RAM (less than 6 GiB left), with
        servers of a project they take."""
        ids = []
        for name in self.rng.sample(sorted(
                n for n, h in self.hosts.items()
                if n not in self.role.values() and h.vcpus >= 32), 2):
            host = self.hosts[name]
            while host.ram > 6144:
                flavor = 'r.big' if host.ram > 16384 else 'r.medium'
                projects = [p for p in ('admin',) + PROJECTS
                            if self.fits(host, flavor, p, host.az, None)]
                if not projects:
                    break
                booted = self.boot('fill-%s-%d' % (name, len(ids) + 1),
                                   flavor, projects[0], bool(host.az), None,
                                   exclude=set(self.hosts) - {name})
                if not booted:
                    break
                ids.append(booted[0])
        status = self.wait(set(ids))
        say('near full: %d servers, %d failed' % (
            len(ids), sum(s == 'ERROR' for s in status.values())))

    def states(self):
        # plain ones, in no group, on alike hypervisors no role closes
        # (they can move between them)
        grouped = {m for g in self.c.compute.server_groups(all_projects=True)
                   for m in g.member_ids}
        servers = [s for s in self.c.compute.servers(all_projects=True)
                   if s.status == 'ACTIVE' and s.id not in grouped and
                   not FLAVORS[s.flavor['original_name']][3] and
                   s.compute_host in ALIKE]
        servers.sort(key=lambda s: s.name)
        picked = self.rng.sample(servers, 4)
        for server in picked[:2]:
            self.c.compute.lock_server(server, locked_reason='rules scenario')
        self.c.compute.pause_server(picked[2])
        self.c.compute.stop_server(picked[3])
        self.c.compute.wait_for_server(picked[2], status='PAUSED', wait=120)
        self.c.compute.wait_for_server(picked[3], status='SHUTOFF', wait=120)
        say('locked %s, paused %s, stopped %s' % (
            ', '.join(s.name for s in picked[:2]), picked[2].name,
            picked[3].name))

    def gone_image(self):
        """An image of this seed, as an operator uploads one to Glance."""
        image_id = str(uuid.uuid5(uuid.NAMESPACE_URL, 'rules/%d' % self.seed))
        glance = self.c.image
        if glance.get('/images/%s' % image_id).status_code == 404:
            answer = glance.post('/images', json={
                'id': image_id, 'name': 'rules-%d-gone' % self.seed,
                'disk_format': 'raw', 'container_format': 'bare'})
            if answer.status_code != 201:
                sys.exit('rules: creating an image failed: %s' % answer.text)
            answer = glance.put('/images/%s/file' % image_id, data=b'\0' * 512,
                                headers={'Content-Type':
                                         'application/octet-stream'})
            if answer.status_code != 204:
                sys.exit('rules: uploading an image failed: %s' % answer.text)
        IMAGES['gone'] = image_id

    def forget_image(self):
        answer = self.c.image.delete('/images/%s' % IMAGES['gone'])
        if answer.status_code != 204:
            sys.exit('rules: deleting an image failed: %s' % answer.text)
        say('image %s deleted from Glance: %d servers boot from it' % (
            IMAGES['gone'], sum(1 for s in self.c.compute.servers(
                all_projects=True) if s.image.id == IMAGES['gone'])))

    def services(self):
        disabled, down = self.role['disabled'], self.role['forced-down']
        for service in self.c.compute.services(binary='nova-compute'):
            if service.host == disabled:
                self.c.compute.disable_service(
                    service, disabled_reason='rules scenario')
            elif service.host == down:
                answer = self.c.compute.put(
                    '/os-services/%s' % service.id,
                    json={'forced_down': True}, microversion='2.53')
                if answer.status_code != 200:
                    sys.exit('rules: forcing %s down failed: %s' % (
                        down, answer.text))
        say('disabled %s, forced down %s' % (disabled, down))

    def build(self):
        started = time.time()
        self.role = {}
        for role, hosts in ROLES:
            self.role[role] = self.rng.choice(
                [h for h in hosts if h not in self.role.values()])
        say('roles %s' % self.role)
        self.projects()
        self.flavors()
        self.traits()
        self.aggregates()
        groups = self.groups()
        self.gone_image()
        self.servers(groups)
        self.fill()
        self.forget_image()
        self.states()
        self.services()
        say('seed %d built in %.0f s' % (self.seed, time.time() - started))


def main(argv):
    if len(argv) != 4 or not argv[1].isdigit() or not argv[3].isdigit():
        sys.exit(__doc__)
    Builder(int(argv[1]), argv[2], int(argv[3])).build()


if __name__ == '__main__':
    main(sys.argv)
