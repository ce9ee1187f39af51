"""Read again only what some moves touch, into an earlier snapshot document.

Before it starts a migration the executor re-checks the move against the
cloud. Those checks read the moving server (status, task, lock, flavour,
metadata, its allocations and migrations), its source and destination
(compute service, hypervisor details, aggregates, Placement inventories,
allocations and traits, the servers on them and their measured load) and
where the members of its server groups are. This module reads exactly
that, a fixed number of requests whatever the size of the cloud, and keeps
the rest of the earlier document, which no re-check of these moves reads.

A server that was on a re-read hypervisor and is no longer there, and a
member of a re-read group that the earlier document does not know, are read
one by one, so that the group rules see where they are now.
"""

import datetime
import time

from openstack import exceptions as sdk_exc

from osc_leveller.cloud import answers
from osc_leveller.cloud import collect
from osc_leveller.cloud import document as document_mod
from osc_leveller.cloud import glance
from osc_leveller.cloud import prometheus
from osc_leveller.core.model import snapshot

# Seconds a Prometheus answer serves the re-checks of later moves.
MEASURED_MAX_AGE = 60.0


def refresh(collector, document, server_ids, hypervisors, now=None):
    """`document` with what these moves touch read again, as a new document.

    server_ids: the moving servers; hypervisors: the names of their sources
    and destinations. `document` itself is not changed. A hypervisor gone
    from Nova or Placement is left out, as a full read leaves it out.
    """
    with snapshot.no_gc():  # a new document of every server
        return _refresh(collector, document, server_ids, hypervisors, now)


def _refresh(collector, document, server_ids, hypervisors, now):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    read = _Reader(collector)
    moving = sorted(set(server_ids))
    old = {h['name']: h for h in document['hypervisors']}
    names = sorted(n for n in set(hypervisors) if n in old)
    parts = {}
    for name in names:
        found = read.hypervisor(name, old[name])
        if found is not None:
            parts[name] = found
    on = {}  # server id -> Nova's server, on a re-read hypervisor now
    for name in parts:
        on.update(read.servers_on(name))
    groups, gone_groups = [], set()
    for group in document['server_groups']:
        if set(moving) & set(group['members']):
            fresh = read.group(group['id'])
            if fresh is None:
                gone_groups.add(group['id'])
            else:
                groups.append(fresh)
    # The servers of the re-read hypervisors and the members of the
    # groups that the document does not have, in one pass over it.
    alone, members = set(moving), {m for g in groups for m in g['members']}
    unknown = set(members)
    for server in document['servers']:
        if server['hypervisor'] in names:
            alone.add(server['id'])
        if members:
            unknown.discard(server['id'])
    alone.update(unknown)
    elsewhere = {sid: read.server(sid) for sid in sorted(alone - set(on))}
    # Nova's scheduler counts a member of a strict anti-affinity group on a
    # host it left, or was tried on, a moment ago (core/rules/filters.py
    # _lingering): its fellows' migrations are read too.
    fellows = {m for g in groups if g.get('policy') == 'anti-affinity'
               for m in g['members']}
    migrated = sorted(set(moving) | fellows)
    migrations = [m for sid in migrated for m in read.migrations(sid, now)]
    held = {sid: read.allocations(sid) for sid in moving}
    part = document_mod.build_document(
        now=now, cloud=None, region=None,
        services=[p['service'] for p in parts.values() if p['service']],
        hypervisors=[p['details'] for p in parts.values()],
        aggregates=read.aggregates(), servers=list(on.values()),
        groups=groups, migrations=migrations,
        providers=[(p['provider'], p['inventories'])
                   for p in parts.values()],
        allocations={p['provider']['uuid']: p['allocations']
                     for p in parts.values()},
        traits={p['provider']['uuid']: p['traits'] for p in parts.values()
                if p['traits'] is not None})
    for name, p in parts.items():
        if p['details'].get('host_ip'):
            collector.host_ips[name] = p['details']['host_ip']
    result = _merge(document, part, names, elsewhere, gone_groups, migrated)
    _own(result, {**on, **{k: v for k, v in elsewhere.items() if v}}, held,
         collector)
    if 'images' in document:
        _images(result, read)
    else:  # an earlier document that records no images gets none
        for server in result['servers']:
            server.pop('image', None)
    if collector.metrics is not None:
        _measure(result, collector, set(names))
    return result


def _merge(document, part, names, elsewhere, gone_groups, migrated):
    """The earlier document with the parts read now put in (the
    migrations of the servers in migrated)."""
    fresh = {h['name']: h for h in part['hypervisors']}
    hypervisors = [fresh[h['name']] if h['name'] in names else h
                   for h in document['hypervisors']
                   if h['name'] not in names or h['name'] in fresh]
    placed = {h['name'] for h in hypervisors}
    servers = {s['id']: s for s in part['servers']}
    result, before = [], {}
    for doc in document['servers']:
        sid = doc['id']
        if sid in servers:
            before[sid] = doc
            continue
        if sid in elsewhere:
            server = elsewhere[sid]
            if server is None or server.get(document_mod.NODE) not in placed:
                continue  # deleted, or on a hypervisor not planned with
            doc = dict(doc, hypervisor=server[document_mod.NODE],
                       host=server.get(document_mod.HOST),
                       status=server.get('status') or 'UNKNOWN',
                       task_state=server.get(document_mod.TASK),
                       locked=bool(server.get('locked')))
        result.append(doc)
    for sid, doc in servers.items():
        if sid in before:  # child providers were not read again
            doc['blockers'] = sorted(set(doc['blockers']) | {
                b for b in before[sid]['blockers']
                if b.startswith('allocation on child')})
    result.extend(servers.values())
    listed = {d['id'] for d in result}
    for sid, server in elsewhere.items():
        if server is not None and sid not in listed and \
                server.get(document_mod.NODE) in placed:
            result.append(document_mod.server_doc(server))
    groups = {g['id']: g for g in part['server_groups']}
    server_groups = [groups.pop(g['id'], g) for g in document['server_groups']
                     if g['id'] not in gone_groups]
    server_groups.extend(groups.values())
    migrations = [m for m in document['migrations']
                  if m['server_id'] not in migrated] + part['migrations']
    return dict(document, taken_at=part['taken_at'], hypervisors=hypervisors,
                servers=result, server_groups=server_groups,
                migrations=migrations)


def _own(document, nova_servers, held, collector):
    """The moving servers as Nova says, with the blockers and resources
    of their own allocations."""
    by_uuid = {h['uuid']: h['name'] for h in document['hypervisors']}
    for i, doc in enumerate(document['servers']):
        allocations = held.get(doc['id'])
        server = nova_servers.get(doc['id'])
        if allocations is None or server is None:
            continue
        children = {document_mod.child_allocation(
                        collector.children[rp], resources)
                    for rp, resources in allocations.items()
                    if rp in collector.children}
        own = {by_uuid.get(rp, rp): resources
               for rp, resources in allocations.items()
               if rp not in collector.children}
        fresh = document_mod.server_doc(server, children, own)
        fresh.update({k: v for k, v in doc.items()
                      if k in ('usage', 'server_groups')})
        document['servers'][i] = fresh


def _images(document, read):
    """The images of servers whose image the document does not have yet,
    read from Glance; the others as they were. Nova schedules a move with
    the properties the server's image had at boot (its request spec), not
    Glance's of now: reading an image again before each move brings
    nothing closer to what Nova checks."""
    images = dict(document['images'])
    used = {server['image'] for server in document['servers']
            if server.get('image')}
    for image in sorted(used - set(images)):
        images[image] = read.image(image)
    document['images'] = document_mod.images_section(used, images)


def _measure(document, collector, names):
    """Measured load of the re-read hypervisors and of their servers.

    Prometheus answers for every hypervisor and server at once, so it is
    asked again only when its last answer is older than MEASURED_MAX_AGE:
    the figures are averages over minutes (prometheus.window) anyway.
    """
    last = collector.last_reading
    if last is not None and time.monotonic() - last[0] < MEASURED_MAX_AGE:
        reading = last[1]
    else:
        refs = collect.host_refs(document, collector.host_ips)
        try:
            reading = collector.read(refs, {
                s['id']: s['hypervisor'] for s in document['servers']},
                guard=False)  # a re-check plans nothing
        except prometheus.PrometheusError as exc:
            raise collect.CollectError(str(exc)) from exc
    document['hypervisors'] = [
        dict(h, metrics=reading.host(h['name'])) if h['name'] in names
        else h for h in document['hypervisors']]
    servers = []
    for server in document['servers']:
        if server['hypervisor'] in names:
            server = {k: v for k, v in server.items() if k != 'usage'}
            if server['id'] in reading.servers:
                server['usage'] = reading.server(server['id'])
        servers.append(server)
    document['servers'] = servers


class _Reader:
    """The targeted reads, each named in its errors as collect names them."""

    def __init__(self, collector):
        self.conn = collector.conn
        self.retries = collector.retries
        self.history_hours = collector.history_hours
        self.version = collect.servers_version(self.conn.compute)

    def hypervisor(self, name, before):
        """Nova's and Placement's view of one hypervisor, or None if gone."""
        what = 'Nova GET /os-hypervisors/detail?hypervisor_hostname_pattern'
        with collect.reading(what):
            try:
                found = collect.hypervisors(
                    self.conn.compute, self.retries,
                    hypervisor_hostname_pattern=name)
            except sdk_exc.NotFoundException:
                return None  # Nova's answer when nothing matches
            # The pattern matches parts of names: keep the exact one.
            details = next((h for h in found
                            if h['hypervisor_hostname'] == name), None)
        if details is None:
            return None
        host = document_mod.compute_host(details)
        with collect.reading('Nova GET /os-services?host=%s' % host):
            service = next(iter(collect.services(
                self.conn.compute, self.retries, host=host)), None)
        provider = self._provider(name, before['uuid'])
        if provider is None:
            return None
        provider, inventories = provider
        url = '/resource_providers/%s/allocations' % provider['uuid']
        with collect.reading('Placement GET %s' % url):
            allocations = collect._get(
                self.conn.placement, url, 'allocations', dict, self.retries,
                microversion=collect.ALLOCATIONS_VERSION)
        # Unread, they are unknown: a move that needs them is refused.
        traits, _ = collect.read_traits(self.conn.placement,
                                        provider['uuid'], self.retries)
        return {'details': details, 'service': service,
                'provider': provider, 'inventories': inventories,
                'allocations': allocations, 'traits': traits}

    def _provider(self, name, uuid):
        """(provider, inventories) by the earlier uuid, else by name."""
        url = '/resource_providers/%s/inventories' % uuid
        with collect.reading('Placement GET %s' % url):
            try:
                return ({'uuid': uuid, 'name': name}, collect._get(
                    self.conn.placement, url, 'inventories', dict,
                    self.retries))
            except sdk_exc.NotFoundException:
                pass  # registered again under a new uuid, or deleted
        with collect.reading('Placement GET /resource_providers?name=%s'
                             % name):
            found = collect._get(self.conn.placement, '/resource_providers',
                                 'resource_providers', list, self.retries,
                                 params={'name': name},
                                 microversion=collect.PLACEMENT_MIN)
            root = next((rp for rp in found if answers.mapping(
                'a resource provider', rp) and rp.get('name') == name
                and not rp.get('parent_provider_uuid')), None)
        if root is None:
            return None
        url = '/resource_providers/%s/inventories' % root['uuid']
        with collect.reading('Placement GET %s' % url):
            return ({'uuid': str(root['uuid']), 'name': name}, collect._get(
                self.conn.placement, url, 'inventories', dict, self.retries))

    def servers_on(self, name):
        """{server id: Nova's server} of the servers on a hypervisor."""
        with collect.reading('Nova GET /servers/detail?node=%s' % name):
            # Nova matches node as a regular expression, anywhere in the
            # name: hv1 brings hv10's servers too.
            return {s['id']: s for s in collect.servers(
                self.conn.compute, self.version, self.retries, node=name)
                if s.get(document_mod.NODE) == name}

    def server(self, server_id):
        url = '/servers/%s' % server_id
        with collect.reading('Nova GET %s' % url):
            try:
                server = collect._get(self.conn.compute, url, 'server', dict,
                                      self.retries,
                                      microversion=self.version)
            except sdk_exc.NotFoundException:
                return None
            server[document_mod.NODE]  # KeyError: not an admin's view
            return server

    def group(self, group_id):
        url = '/os-server-groups/%s' % group_id
        with collect.reading('Nova GET %s' % url):
            try:
                group = collect._get(self.conn.compute, url, 'server_group',
                                     dict, self.retries,
                                     microversion=collect.COMPUTE_MIN)
            except sdk_exc.NotFoundException:
                return None
            if not all(isinstance(m, str) for m in group['members']):
                raise TypeError('"members" is not a list of server ids')
            return group

    def migrations(self, server_id, now):
        since = now - datetime.timedelta(hours=self.history_hours)
        with collect.reading('Nova GET /os-migrations?instance_uuid=%s'
                             % server_id):
            return collect.migrations(self.conn.compute, since, self.retries,
                                      instance_uuid=server_id)

    def aggregates(self):
        with collect.reading('Nova GET /os-aggregates'):
            return collect.aggregates(self.conn.compute, self.retries)

    def image(self, image_id):
        """Glance's entry for an image, unknown if it cannot be read."""
        service, why = glance.image_service(self.conn)
        if service is not None:
            entry, why = glance.read_image(service, image_id, self.retries)
            if entry is not None:
                return entry
        return document_mod.unread_image(why)

    def allocations(self, server_id):
        """{provider uuid: resources} of the server's own allocations."""
        url = '/allocations/%s' % server_id
        with collect.reading('Placement GET %s' % url):
            found = collect._get(self.conn.placement, url, 'allocations',
                                 dict, self.retries)
            return {rp: dict(alloc['resources'])
                    for rp, alloc in found.items()}
