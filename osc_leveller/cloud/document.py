"""Nova's and Placement's answers joined into a snapshot document.

One builder per section of the document (osc-leveller-snapshot/1): its
source, hypervisors, servers, server groups and migrations. Join keys:
hypervisor_hostname == provider name == server's hypervisor_hostname;
service host == aggregate host == server's compute host. A part of an
answer that does not have the shape of Nova's or Placement's is a
CollectError naming that part.
"""

import collections
import json
import sys

from osc_leveller.cloud import answers
from osc_leveller.cloud import glance
from osc_leveller.core.model import snapshot

# Nova's names of the server fields read (servers/detail, admin).
NODE = 'OS-EXT-SRV-ATTR:hypervisor_hostname'
HOST = 'OS-EXT-SRV-ATTR:host'
TASK = 'OS-EXT-STS:task_state'
# What the document keeps of a Placement inventory.
INVENTORY = ('total', 'reserved', 'allocation_ratio', 'min_unit',
             'max_unit', 'step_size')


def build_document(now, cloud, region, services, hypervisors, aggregates,
                   servers, groups, migrations, providers, allocations,
                   unanswered=None, traits=None, traits_unread=None,
                   images=None):
    """Join what Nova and Placement said into a snapshot document.

    The joins, all of them:

    - hypervisor_hostname == root resource provider name == server's
      hypervisor_hostname (OS-EXT-SRV-ATTR:hypervisor_hostname);
    - hypervisor's service host == compute service host == aggregate host;
    - a consumer of a root provider's allocations is a server or a
      migration (its uuid): during a migration the source's allocation
      belongs to the migration and counts in usages. A server's own
      resources are its allocation on its own hypervisor (a
      rebuild-evacuation holds one on both);
    - an allocation on a child provider (a vGPU, a PCI device) is a
      blocker of its server.

    providers: [(provider, its inventories)]; allocations: {provider uuid:
    Placement's allocations}; unanswered: {provider uuid: why} of providers
    Placement did not answer for. A hypervisor whose provider, or one of
    its children, went unanswered is left out, and the note says so.
    traits: {provider uuid: its traits}; a hypervisor whose provider is
    not there has unknown traits (null), and traits_unread {provider uuid:
    why they could not be read} names it in the note. A part of an answer
    that does not have the shape of Nova's or Placement's is a
    CollectError naming that part. images: {image id: its entry (see
    cloud/glance.py)}, or None to record no images section.
    """
    by_host = _services_by_host(services)
    host_aggregates = _aggregates_by_host(aggregates)
    roots, children, silent = _provider_tree(providers, unanswered or {})
    hyps = build_hypervisors(hypervisors, roots, silent, by_host,
                             host_aggregates, allocations, traits,
                             traits_unread)
    server_docs = build_servers(servers, hyps,
                                _child_allocations(children, allocations))
    image_section, image_note = build_images(server_docs, images) \
        if images is not None else (None, None)
    if hyps.not_answered and not hyps.docs:
        raise answers.CollectError(
            'Placement answered for none of the %d hypervisors: %s' % (
                len(hyps.not_answered),
                answers.short(', '.join(sorted(hyps.not_answered)))))
    document = {
        'format': snapshot.FORMAT,
        'taken_at': snapshot.format_datetime(now),
        'source': build_source(cloud, region, hyps, image_note),
        'hypervisors': hyps.docs,
        'servers': server_docs,
        'server_groups': build_server_groups(groups),
        'migrations': build_migrations(migrations),
    }
    if image_section is not None:
        document['images'] = image_section
    return document


def build_images(server_docs, images):
    """The images section of the servers' images (one not in images is
    not read: unknown) and the note on those whose properties are
    unknown."""
    counts = collections.Counter(
        s['image'] for s in server_docs if s.get('image'))
    section = images_section(counts, images)
    boot_volumes = sum(1 for s in server_docs if not s.get('image'))
    return section, glance.note(section, counts, boot_volumes)


def images_section(used, images):
    """The images section of the image ids used: each one's entry in
    images, or unknown if it was not read."""
    return {i: images.get(i) or unread_image('not read') for i in sorted(used)}


def unread_image(why):
    """The entry of an image whose properties are unknown."""
    return {'name': None, 'disk_format': None, 'properties': None,
            'why': why}


def build_source(cloud, region, hyps, image_note=None):
    """Where the document comes from, noting the hypervisors left out."""
    source = {'kind': 'cloud', 'cloud': cloud, 'region': region}
    notes = []
    if hyps.left_out:
        notes.append('left out, no resource provider in Placement: %s'
                     % ', '.join(sorted(hyps.left_out)))
    if hyps.not_answered:
        notes.append('left out, Placement did not answer for them: %s'
                     % ', '.join(sorted(hyps.not_answered)))
    if hyps.traits_unread:
        notes.append('traits not read, flavors with trait extra specs do '
                     'not move to them: %s' % ', '.join(
                         sorted(hyps.traits_unread)))
    if image_note:
        notes.append(image_note)
    if notes:
        source['note'] = '; '.join(notes)
    return source


def _services_by_host(services):
    with answers.reading('Nova GET /os-services'):
        return {s['host']: s for s in services}


def _aggregates_by_host(aggregates):
    """{compute host: its aggregates, as the document writes them}."""
    found = {}
    with answers.reading('Nova GET /os-aggregates'):
        for agg in aggregates:
            for host in agg.get('hosts') or []:
                found.setdefault(host, []).append({
                    'name': agg['name'],
                    'metadata': {k: str(v) for k, v in
                                 (agg.get('metadata') or {}).items()}})
    return found


def _provider_tree(providers, unanswered):
    """roots {name: (provider, inventories)}, children {uuid: provider}
    and silent {root uuid: why}: the roots Placement did not answer for,
    or for one of whose children."""
    with answers.reading('Placement GET /resource_providers'):
        roots = {rp['name']: (rp, inv) for rp, inv in providers
                 if not rp.get('parent_provider_uuid')}
        children = {rp['uuid']: rp for rp, _ in providers
                    if rp.get('parent_provider_uuid')}
        silent = dict(unanswered)
        for uuid, rp in children.items():
            if uuid in unanswered:
                silent.setdefault(rp.get('root_provider_uuid') or
                                  rp['parent_provider_uuid'],
                                  '%s: %s' % (rp['name'], unanswered[uuid]))
    return roots, children, silent


class Hypervisors(collections.namedtuple('Hypervisors', (
        'docs', 'consumers', 'left_out', 'not_answered', 'traits_unread'))):
    """The hypervisors section and what the rest of the document joins to
    it: consumers {consumer: {hypervisor: resources on its root provider}};
    the names of hypervisors left out, without a root provider, and those
    Placement did not answer for, with why; those whose traits it did not
    give, with why."""


def compute_host(hyp):
    """The compute service host of a hypervisor record: where its servers
    and aggregates say they are (the node name, if Nova gives none)."""
    return (hyp.get('service') or {}).get('host') or \
        hyp['hypervisor_hostname']


def build_hypervisors(hypervisors, roots, silent, by_host, host_aggregates,
                      allocations, traits=None, traits_unread=None):
    """Hypervisors with their root provider's inventories, usages and
    traits (see build_document)."""
    traits, traits_unread = traits or {}, traits_unread or {}
    found = Hypervisors([], {}, [], [], [])
    for hyp in hypervisors:
        with answers.reading('Nova GET /os-hypervisors/detail'):
            name = hyp['hypervisor_hostname']
            if not isinstance(name, str):
                raise TypeError('hypervisor_hostname is %s, not text'
                                % type(name).__name__)
            host = compute_host(hyp)
        root = roots.get(name)
        if root is None:  # not reported to Placement yet: nothing to plan with
            found.left_out.append(name)
            continue
        rp, inventory = root
        if rp['uuid'] in silent:
            found.not_answered.append('%s (%s)' % (name, silent[rp['uuid']]))
            continue
        usages, held = _usages(rp['uuid'], allocations)
        for consumer, resources in held.items():
            found.consumers.setdefault(consumer, {})[name] = resources
        inventories = _inventories(rp['uuid'], inventory)
        with answers.reading('Nova GET /os-hypervisors/detail (%s)' % name):
            found.docs.append(_hypervisor_doc(
                hyp, host, rp['uuid'], by_host.get(host), host_aggregates,
                inventories, usages, traits.get(rp['uuid'])))
        if rp['uuid'] in traits_unread:
            found.traits_unread.append('%s (%s)' % (
                name, traits_unread[rp['uuid']]))
    return found


def _usages(uuid, allocations):
    """A provider's usages, and {consumer: resources} of its allocations."""
    usages, held = {}, {}
    with answers.reading('Placement GET /resource_providers/%s/allocations'
                         % uuid):
        for consumer, alloc in allocations.get(uuid, {}).items():
            resources = alloc.get('resources', {})
            for rc, amount in resources.items():
                usages[rc] = usages.get(rc, 0) + amount
            held[consumer] = dict(resources)
    return usages, held


def _inventories(uuid, inventories):
    with answers.reading('Placement GET /resource_providers/%s/inventories'
                         % uuid):
        return {rc: {k: inv[k] for k in INVENTORY if k in inv}
                for rc, inv in inventories.items()
                if answers.mapping(rc, inv)}


def _hypervisor_doc(hyp, host, uuid, service, host_aggregates, inventories,
                    usages, traits=None):
    service = service or {}
    return {
        'name': hyp['hypervisor_hostname'],
        'host': host,
        'uuid': uuid,
        'availability_zone': service.get('zone'),
        'aggregates': host_aggregates.get(host, []),
        'service': {
            'status': service.get('status') or 'disabled',
            'state': service.get('state') or 'down',
            'forced_down': bool(service.get('forced_down', False)),
            'disabled_reason': service.get('disabled_reason'),
        },
        'inventories': inventories,
        'usages': usages,
        'cpu': _cpu_info(hyp),
        'traits': None if traits is None else list(traits),
        'metrics': None,
        'hypervisor_type': _text(hyp.get('hypervisor_type')),
        'hypervisor_version': _version(hyp.get('hypervisor_version')),
    }


def _text(value):
    return value if isinstance(value, str) and value else None


def _version(value):
    """Nova's hypervisor_version, an integer; anything else is unknown."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= 2 ** 53 - 1 else None


def _cpu_info(hypervisor):
    info = hypervisor.get('cpu_info') or {}
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            info = {}
    return {'arch': info.get('arch'), 'model': info.get('model'),
            'features': sorted(info.get('features') or [])}


def _child_allocations(children, allocations):
    """{server id: its allocations on child providers, as blockers name
    them}."""
    found = {}
    for uuid, rp in children.items():
        with answers.reading(
                'Placement GET /resource_providers/%s/allocations' % uuid):
            for consumer, alloc in allocations.get(uuid, {}).items():
                found.setdefault(consumer, set()).add(child_allocation(
                    rp['name'], alloc['resources']))
    return found


def child_allocation(provider, resources):
    """An allocation on a child provider, as a server's blocker names it:
    'hv1_pgpu0 (VGPU)'."""
    return '%s (%s)' % (provider, ', '.join(sorted(resources)))


def build_servers(servers, hyps, child_allocations):
    """The servers on the document's hypervisors: one unplaced (BUILD,
    ERROR) or on a hypervisor left out is not planned with. servers: an
    iterable, read once."""
    known = {d['name'] for d in hyps.docs}
    docs = []
    shared = Shared()
    for server in servers:
        with answers.reading('Nova GET /servers/detail (server %s)' % (
                server.get('id', '?') if isinstance(server, dict) else '?')):
            answers.mapping('a server', server)
            if server.get(NODE) in known:
                docs.append(server_doc(
                    server, child_allocations.get(server['id'], ()),
                    hyps.consumers.get(server['id']), shared))
    return docs


class Shared(dict):
    """One object for each distinct text and flavor the servers of a
    document repeat (their hypervisor, host, project, status, image, and
    flavor): 250,000 servers have a few thousand, each decoded once per
    server. Values no one changes: texts (interned), and flavors as built
    here (held by this dict)."""

    @staticmethod
    def text(value):
        return sys.intern(value) if type(value) is str else value

    def flavor(self, flavor):
        key = tuple(flavor[k] for k in FLAVOR_FIELDS) + tuple(
            flavor['extra_specs'].items())
        return self.setdefault(key, flavor)


# What server_doc and the image reads use of a server of servers/detail,
# which has some 40 fields (1.8 KB of JSON): a page's servers are cut to
# these as it is read, or a read of 250,000 servers holds gigabytes.
SERVER_FIELDS = ('id', 'name', 'tenant_id', NODE, HOST, 'status', TASK,
                 'locked', 'flavor', 'image', 'metadata', 'tags',
                 'pinned_availability_zone')


def used_of_server(server):
    """The SERVER_FIELDS of a server, its image cut to its id."""
    used = {key: server[key] for key in SERVER_FIELDS if key in server}
    image = used.get('image')
    if isinstance(image, dict) and 'id' in image:
        used['image'] = {'id': image['id']}
    return used


def server_doc(server, child_allocations=(), held=None, shared=None):
    """A server of Nova's servers/detail as the document writes it.

    child_allocations: its allocations on child providers (blockers);
    held: {hypervisor: resources} of its own allocations; shared: the
    Shared values of the document's servers.
    """
    shared = Shared() if shared is None else shared
    text = shared.text
    node = text(server[NODE])
    flavor = shared.flavor(flavor_of(server.get('flavor') or {}))
    blockers = ['allocation on child resource provider %s' % c
                for c in sorted(child_allocations)]
    if flavor['extra_specs'].get('pci_passthrough:alias'):
        blockers.append('PCI passthrough device (%s)' %
                        flavor['extra_specs']['pci_passthrough:alias'])
    image = server.get('image')
    doc = {
        'id': server['id'],
        'name': server.get('name'),
        'project_id': text(server.get('tenant_id')),
        'hypervisor': node,
        'host': text(server.get(HOST)),
        'status': text(server.get('status') or 'UNKNOWN'),
        'task_state': server.get(TASK),
        'locked': bool(server.get('locked')),
        'flavor': flavor,
        # Nova says "" for the image of a server booted from a volume.
        'boot_from_volume': not (isinstance(image, dict) and
                                 image.get('id')),
        'metadata': {k: str(v) for k, v in
                     (server.get('metadata') or {}).items()},
        'tags': list(server.get('tags') or []),
        'pinned_availability_zone': server.get('pinned_availability_zone'),
        'blockers': blockers,
    }
    booted_from = glance.image_id(server)
    if booted_from:
        doc['image'] = text(booted_from)
    if held:
        doc['resources'] = held.get(node) or next(iter(held.values()))
    return doc


FLAVOR_FIELDS = ('name', 'vcpus', 'ram', 'disk', 'ephemeral', 'swap')


def flavor_of(flavor):
    """The embedded flavor of a server (2.47+: original_name, extra_specs)."""
    get = flavor.get
    return {
        'name': get('original_name') or get('name'),
        'vcpus': int(get('vcpus') or 0),
        'ram': int(get('ram') or 0),
        'disk': int(get('disk') or 0),
        'ephemeral': int(get('ephemeral') or 0),
        'swap': int(get('swap') or 0),
        'extra_specs': {k: str(v) for k, v in
                        (get('extra_specs') or {}).items()},
    }


def build_server_groups(groups):
    with answers.reading('Nova GET /os-server-groups'):
        return [{
            'id': group['id'], 'name': group.get('name'),
            'project_id': group.get('project_id'),
            'policy': group['policy'],
            'rules': {k: int(v) for k, v in
                      (group.get('rules') or {}).items()
                      if k == 'max_server_per_host'},
            'members': list(group.get('members') or []),
        } for group in groups]


def build_migrations(migrations):
    """Nova's migrations of servers (one without instance_uuid has no
    server to join to)."""
    with answers.reading('Nova GET /os-migrations'):
        return [_migration_doc(m) for m in migrations
                if answers.mapping('a migration', m)
                and m.get('instance_uuid')]


def _migration_doc(migration):
    return {
        'id': migration['id'], 'server_id': migration['instance_uuid'],
        'status': migration['status'],
        'migration_type': migration.get('migration_type'),
        'source_compute': migration.get('source_compute'),
        'dest_compute': migration.get('dest_compute'),
        'created_at': _timestamp(migration.get('created_at')),
        'updated_at': _timestamp(migration.get('updated_at')),
    }


def _timestamp(value):
    """Nova's naive UTC times ('2026-11-20T09:00:00.000000') as ISO 8601.

    Text, not parsed: one that is no time fails the document's check,
    which names the field (migrations[0].created_at).
    """
    if not value:
        return None
    return value if value.endswith('Z') or '+' in value[10:] \
        else value.split('.')[0] + 'Z'
