"""Snapshot files: read, validate, write; the bundled demo; format detection.

A snapshot is the JSON form of core.model.Snapshot (format
``osc-leveller-snapshot/1``, schema in osc_leveller/data). ``load()`` also
accepts the simple cluster JSON of the Watcher baseline harness (see
core.watcher_cluster), so one file can run through both planners.
"""

import contextlib
import dataclasses
import datetime
import gc
import json
import math
import os
from importlib import resources

import orjson

from osc_leveller.core.model import errors
from osc_leveller.core.model import files
from osc_leveller.core.model import model
from osc_leveller.core.model import validation
from osc_leveller.core.model import watcher_cluster

FORMAT = 'osc-leveller-snapshot/1'
DEMO = 'demo'
# Keys of a snapshot's source that say which cloud it was read from
# (cloud/identity.py): what tells one cloud from another, and the auth URL
# an operator reads.
NOVA_SERVICE = 'nova_service'
NOVA_REGION = 'nova_region'
KEYSTONE = 'keystone'


class SnapshotError(errors.LevellerError, ValueError):
    """The snapshot cannot be used; the message says why and where."""


def load(ref, max_mb=files.MAX_MB):
    """A Snapshot from 'demo' or a file path, validated; a file of over
    max_mb MiB is refused unread."""
    if ref == DEMO:
        text = resources.files('osc_leveller.data').joinpath(
            'demo-snapshot.json').read_text(encoding='utf-8')
        return parse(json.loads(text), origin='the demo snapshot')
    try:
        with no_gc():
            document, strict = files.read_json(ref, 'snapshot file', max_mb)
    except files.TooLarge as exc:
        raise SnapshotError('%s: loading it takes about seven times its size '
                            'in memory (setting max_snapshot_mb raises the '
                            'limit)' % exc) from None
    except files.FileError as exc:
        if not os.path.exists(ref):
            raise SnapshotError('%s (use --snapshot demo for the bundled '
                                'demo)' % exc) from None
        raise SnapshotError(str(exc)) from None
    return parse(document, origin=ref, strict=strict)


def parse(document, origin='snapshot', strict=False, before=None):
    """A Snapshot from a decoded JSON document of either known format.

    strict: read by a strict JSON reader (see validation.validate).
    before: (an earlier document, its Snapshot) that this one was made from
    by putting new entries in place of some (cloud/refresh.py): the
    hypervisors and servers that are the earlier document's very objects
    keep their model objects and are not validated again, so a re-check
    at 250,000 servers builds what it read, not the whole cloud.
    """
    with no_gc():
        schema = 'snapshot-v1'
        if isinstance(document, dict) and 'format' not in document and \
                watcher_cluster.looks_like(document):
            try:
                document = watcher_cluster.to_snapshot_document(
                    document, origin, strict)
            except validation.ValidationError as exc:
                raise SnapshotError(
                    '%s (Watcher cluster file): %s' % (origin, exc)) from exc
            except RecursionError:
                raise SnapshotError('%s is nested too deeply to be a '
                                    'snapshot' % origin) from None
            schema = None  # valid as made (the unit tests check it)
        elif not isinstance(document, dict) or 'format' not in document:
            raise SnapshotError(
                '%s is neither an osc-leveller snapshot (no "format" field) '
                'nor a Watcher baseline cluster file' % origin)
        elif document['format'] != FORMAT:
            raise SnapshotError(
                '%s has format %r; this osc-leveller reads %r' % (
                    origin, document['format'], FORMAT))
        try:
            kept = _kept(document, before) if schema and before else None
            if schema:
                _validate(document, schema, strict, kept)
            return _build(document, kept)
        except validation.ValidationError as exc:
            raise SnapshotError('%s: %s' % (origin, exc)) from exc
        except RecursionError:
            raise SnapshotError('%s is nested too deeply to be a snapshot'
                                % origin) from None


def _validate(document, schema, strict, kept):
    """validation.validate of the entries not kept (the schema checks each
    entry alone); a failure names its place in the whole document."""
    if kept is None:
        return validation.validate(document, schema, strict)
    try:
        validation.validate(dict(document, **{
            section: [e for i, e in enumerate(document[section])
                      if i not in kept[section]]
            for section in ('hypervisors', 'servers')}), schema, strict)
    except validation.ValidationError:
        validation.validate(document, schema, strict)
        raise


def _kept(document, before):
    """{section: {index: model object}} of the hypervisors and servers
    that are the very entries of the earlier document; 'images': the
    earlier Images by id (None if it had none, or they are not known);
    'earlier': its snapshot; 'gone': its servers that are not kept."""
    earlier, snap = before
    found = {'images': getattr(snap, '_images', None), 'earlier': snap,
             'gone': []}
    for section in ('hypervisors', 'servers'):
        entries = document.get(section)
        found[section] = _same_entries(
            entries, earlier[section], getattr(snap, section),
            found['gone'] if section == 'servers' else []) \
            if isinstance(entries, list) else {}
    return found


# How far past a dropped run of earlier entries a kept one is looked for.
LOOK_AHEAD = 1000


def _same_entries(entries, earlier, models, gone):
    """{index in entries: model} of the entries that are, by identity,
    entries of earlier (models: theirs, in order); the models of the
    others go to gone. refresh keeps the earlier entries in their order,
    drops a few and puts new ones in: one walk finds them. An entry found
    past LOOK_AHEAD dropped ones is taken for new and built again: slower,
    never wrong."""
    found, j, end = {}, 0, len(earlier)
    for i, entry in enumerate(entries):
        if j < end and entry is earlier[j]:
            found[i] = models[j]
            j += 1
            continue
        for k in range(j + 1, min(j + LOOK_AHEAD, end)):
            if entry is earlier[k]:
                found[i] = models[k]
                gone.extend(models[j:k])
                j = k + 1
                break
    gone.extend(models[j:])
    return found


# A loading window that made more objects the collector tracks than this
# (a cloud of some 10,000 servers) moves them to its oldest generation.
PROMOTE_AT = 100000


@contextlib.contextmanager
def no_gc():
    """Loading (and reading the cloud, cloud/collect.py) makes millions of
    objects and no reference cycles: the cyclic garbage collector, run
    every few hundred allocations, would walk them again and again (half
    the time of loading, a quarter of the CPU of a read).

    A large window ends by moving what it made to the oldest generation
    untraversed (freeze, then unfreeze at once). Else the young
    collections that follow walk those millions of objects as they promote
    them, and a full collection follows: 5.5 s of planning 10,000
    hypervisors from a file, 0.3 s after. It is only for large windows:
    the move also takes the window's cyclic garbage (a read's closed
    connections) past the young collections, to wait for a full one. Done
    for every window, a test run reading thousands of times kept their
    sockets open until it ran out of descriptors.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_count()[0] > PROMOTE_AT:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def parse_time(text, path='timestamp'):
    """Seconds since the epoch from ISO 8601; naive times are UTC."""
    if text.endswith(('Z', 'z')):  # Python 3.10 reads no 'Z'
        text = text[:-1] + '+00:00'
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise validation.ValidationError(
            path, 'is not an ISO 8601 time (got %r)' % text) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    try:
        # Its offset may take it past year 1 or 9999, which no plan or
        # snapshot could then write back.
        moment = moment.astimezone(datetime.timezone.utc)
    except OverflowError:
        raise validation.ValidationError(
            path, 'is outside the years 1 to 9999 in UTC (got %r)' % text) \
            from None
    return moment.timestamp()


def format_time(seconds):
    """ISO 8601 in UTC, to the second, of seconds since the epoch."""
    return format_datetime(
        datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc))


def format_datetime(moment):
    """ISO 8601 in UTC, to the second ('2026-11-20T09:00:00Z'), of a
    datetime; a naive one is UTC, as parse_time reads it."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    moment = moment.astimezone(datetime.timezone.utc)
    # Not strftime: its %Y writes year 1 as '1', which no reader takes back.
    return moment.isoformat(timespec='seconds').replace('+00:00', 'Z')


def flavor_resources(flavor, boot_from_volume):
    """The allocation Nova's scheduler makes for a flavor (no PCI, no NUMA)."""
    specs = flavor.extra_specs
    cpu_class = model.PCPU if specs.get(
        'hw:cpu_policy') == 'dedicated' else model.VCPU
    wanted = {
        cpu_class: flavor.vcpus,
        model.MEMORY_MB: flavor.ram,
        model.DISK_GB: (0 if boot_from_volume else flavor.disk)
        + flavor.ephemeral + int(math.ceil(flavor.swap / 1024.0)),
    }
    extra = {}
    for key, value in specs.items():
        # resources:RC=N replaces the flavor's amount (0 drops it);
        # granular resourcesN:RC=N adds a request group.
        prefix, sep, rc = key.partition(':')
        if not sep or not prefix.startswith('resources'):
            continue
        try:
            amount = int(value)
        except ValueError:
            continue
        if prefix == 'resources':
            wanted[rc] = amount
        else:
            extra[rc] = extra.get(rc, 0) + amount
    for rc, amount in extra.items():
        wanted[rc] = wanted.get(rc, 0) + amount
    return {rc: amount for rc, amount in wanted.items() if amount > 0}


def _build(doc, kept=None):
    kept = kept or {'hypervisors': {}, 'servers': {}, 'images': None,
                    'gone': []}
    old = kept['hypervisors']
    hypervisors = tuple(
        old[i] if i in old else _hypervisor(h, 'hypervisors[%d]' % i)
        for i, h in enumerate(doc['hypervisors']))
    names = set()
    for i, hyp in enumerate(hypervisors):
        if hyp.name in names:
            raise validation.ValidationError(
                'hypervisors[%d].name' % i, 'duplicate hypervisor %r' % hyp.name)
        names.add(hyp.name)
    flavors = {}
    images = _images(doc.get('images'), kept['images'])
    old = kept['servers']
    try:
        earlier = kept['images']
        if images is None or earlier is None or any(
                images.get(key) is not image for key, image in earlier.items()):
            # An image changed or went: the servers of it are built again.
            old = {i: server for i, server in old.items() if server.image
                   is _server_image(doc['servers'][i], images)}
            kept['gone'].extend(server for i, server in
                                kept['servers'].items() if i not in old)
        servers = tuple(old[i] if i in old else _server(data, flavors, images)
                        for i, data in enumerate(doc['servers']))
    except _BadImage:
        _find_bad_image(doc['servers'], images)
    hypervisors = _fill_usages(hypervisors, servers, doc['hypervisors'])
    groups = tuple(_server_group(g) for g in doc.get('server_groups', ()))
    migrations = tuple(
        _migration(m, 'migrations[%d]' % i)
        for i, m in enumerate(doc.get('migrations', ())))
    snap = model.Snapshot(
        hypervisors=hypervisors,
        servers=servers,
        server_groups=groups,
        migrations=migrations,
        taken_at=parse_time(doc['taken_at'], 'taken_at'),
        source=model.frozen_mapping(doc.get('source')),
        lasting=doc.get('lasting') or '',
        forecast=_forecast(doc['forecast'], names) if doc.get('forecast')
        else None,
        guard=_guard(doc['guard'], names) if doc.get('guard') else None,
    )
    if old:
        _index_from(snap, kept['earlier'], old, kept['gone'])
    if not snap.well_formed():
        _find_bad_server(servers, names)
    # What a parse on this one (before=) starts from: its Image objects.
    object.__setattr__(snap, '_images', images)
    return snap


def _index_from(snap, earlier, kept, gone):
    """Give snap the server indexes of earlier, made again only for the
    hypervisors whose servers changed: at 250,000 servers, building them
    anew was 0.37 s of a re-check's 0.61 s of parsing, this 0.07 s.

    kept: {index: server} of snap's servers that are earlier's objects;
    gone: earlier's other servers. The kept are in earlier's order
    (refresh keeps it), so on a hypervisor whose servers are all kept,
    and none new, the tuple is the same.
    """
    if snap._hypervisors.keys() != earlier._hypervisors.keys():
        return  # made when asked for
    servers = snap.servers
    fresh = [servers[i] for i in range(len(servers)) if i not in kept]
    by_id = dict(earlier._servers)
    for server in gone:
        del by_id[server.id]
    for server in fresh:
        by_id[server.id] = server
    touched = {s.hypervisor for s in gone}
    touched.update(s.hypervisor for s in fresh)
    by_host = dict(earlier._servers_on)
    changed = {name: [] for name in touched}
    for server in servers:
        if server.hypervisor in changed:
            changed[server.hypervisor].append(server)
    by_host.update((name, tuple(on)) for name, on in changed.items())
    snap.__dict__['_servers'] = by_id
    snap.__dict__['_servers_on'] = by_host


def _forecast(data, names):
    """model.Forecast of a document's forecast section. Its skill's sums
    are checked beyond the schema: each squared error of a figure in 0..1,
    taken from its domain's mean, is at most 4, and no sum of products is
    larger than its squares allow (Cauchy-Schwarz)."""
    found = None
    if 'skill' in data:
        found = {}
        for name, figures in data['skill']['hypervisors'].items():
            where = 'forecast.skill.hypervisors.%s' % name
            if name not in names:
                raise validation.ValidationError(where, 'unknown hypervisor')
            found[name] = {}
            for figure, raw in figures.items():
                sums = model.ForecastErrors(**raw)
                squares = [sums.now, sums.ahead] + (
                    [sums.lasting] if sums.lasting is not None else [])
                if max(squares) > 4 * sums.points * (1 + 1e-9) or \
                        sums.cross ** 2 > sums.now * sums.ahead * (
                            1 + 1e-9) + 1e-12:
                    raise validation.ValidationError(
                        '%s.%s' % (where, figure), 'sums of squared errors '
                        'that no %d steps can give' % sums.points)
                found[name][figure] = sums
    return model.Forecast(
        data['ahead'], data['days'], data['weight'],
        None if found is None else model.frozen_mapping(
            {n: model.frozen_mapping(f) for n, f in found.items()}))


def forecast_doc(forecast):
    """The forecast section of a document, from a model.Forecast."""
    doc = {'ahead': forecast.ahead, 'days': forecast.days,
           'weight': forecast.weight}
    if forecast.skill is not None:
        doc['skill'] = {'hypervisors': {
            name: {figure: {k: v for k, v in dataclasses.asdict(e).items()
                            if v is not None}
                   for figure, e in figures.items()}
            for name, figures in forecast.skill.items()}}
    return doc


def _guard(data, names):
    """GuardFacts from a document's guard section, for known hypervisors."""
    facts = {}
    for name, raw in data.get('hypervisors', {}).items():
        if name not in names:
            raise validation.ValidationError(
                'guard.hypervisors.%s' % name, 'unknown hypervisor')
        before = raw.get('before')
        facts[name] = model.HostFacts(**dict(
            raw, before=model.HostMetrics(**before) if before else None))
    reference, read_at = data.get('reference'), data.get('read_at')
    return model.GuardFacts(
        reference=parse_time(reference, 'guard.reference') if reference
        else None,
        read_at=float(read_at) if read_at is not None else None,
        reference_from=data.get('reference_from') or '',
        window=float(data.get('window') or 0.0),
        hypervisors=model.frozen_mapping(facts),
        unreachable=data.get('unreachable') or '')


class _BadImage(Exception):
    """A server names an image the document does not record."""


# What a snapshot that records images says of the image of a server that
# names none (shared by those servers).
BOOT_VOLUME = model.Image(why='booted from a volume: Nova takes its image '
                          'properties from Cinder, which the leveller does '
                          'not read')
NO_IMAGE = model.Image(why='no image recorded')


def _images(data, earlier):
    """{image id: model.Image} of a document's images section, None when
    it has none (images not recorded). An image recorded as null, or
    whose properties are null, has unknown properties. An image as it was
    in earlier ({id: Image}) is that object: one per image (Images compare
    by identity), and the servers kept from before still have theirs."""
    if data is None:
        return None
    found = {}
    for image_id, raw in data.items():
        raw = raw or {}
        props = raw.get('properties')
        image = model.Image(
            id=image_id, name=raw.get('name') or '',
            disk_format=raw.get('disk_format') or '',
            properties=None if props is None else
            model.frozen_mapping(props),
            why=raw.get('why') or ('' if props is not None else 'not read'))
        was = (earlier or {}).get(image_id)
        found[image_id] = was if was is not None and all(
            getattr(was, f) == getattr(image, f) for f in _IMAGE_FIELDS) \
            else image
    return found


_IMAGE_FIELDS = tuple(f.name for f in dataclasses.fields(model.Image))


def _server_image(data, images):
    """The model.Image of a server document, None if not recorded."""
    image_id = data.get('image')
    if images is None:
        if image_id:
            raise _BadImage()
        return None
    if not image_id:
        return BOOT_VOLUME if data.get('boot_from_volume') else NO_IMAGE
    found = images.get(image_id)
    if found is None:
        raise _BadImage()
    return found


def _find_bad_image(servers, images):
    for i, data in enumerate(servers):
        image_id = data.get('image')
        if image_id and (images is None or image_id not in images):
            raise validation.ValidationError(
                'servers[%d].image' % i, 'image %r is not in the snapshot\'s '
                'images' % image_id if images is not None else
                'names an image, but the snapshot has no images section')
    raise AssertionError('no server names an unknown image')


def _find_bad_server(servers, names):
    ids = set()
    for i, server in enumerate(servers):
        if server.id in ids:
            raise validation.ValidationError(
                'servers[%d].id' % i, 'duplicate server %r' % server.id)
        if server.hypervisor not in names:
            raise validation.ValidationError(
                'servers[%d].hypervisor' % i,
                'unknown hypervisor %r' % server.hypervisor)
        ids.add(server.id)


def _hypervisor(data, path):
    service = data.get('service', {})
    cpu = data.get('cpu', {})
    metrics = data.get('metrics')
    inventories = {}
    for rc, inv in data['inventories'].items():
        inventories[rc] = model.Inventory(
            total=inv['total'],
            reserved=inv.get('reserved', 0),
            allocation_ratio=float(inv.get('allocation_ratio', 1.0)),
            min_unit=inv.get('min_unit', 1),
            max_unit=inv.get('max_unit', inv['total']),
            step_size=inv.get('step_size', 1))
        if inventories[rc].reserved > inv['total']:
            raise validation.ValidationError(
                '%s.inventories.%s.reserved' % (path, rc),
                'must not exceed total (%d > %d)' % (inv['reserved'], inv['total']))
    return model.Hypervisor(
        name=data['name'],
        host=data.get('host') or data['name'],
        uuid=data.get('uuid', ''),
        availability_zone=data.get('availability_zone') or '',
        aggregates=tuple(
            model.Aggregate(a['name'], model.frozen_mapping(a.get('metadata')))
            for a in data.get('aggregates', ())),
        service=model.Service(
            status=service.get('status', 'enabled'),
            state=service.get('state', 'up'),
            forced_down=service.get('forced_down', False),
            disabled_reason=service.get('disabled_reason') or ''),
        inventories=model.frozen_mapping(inventories),
        usages=model.frozen_mapping(data.get('usages')),
        cpu_arch=cpu.get('arch') or '',
        cpu_model=cpu.get('model') or '',
        cpu_features=frozenset(cpu.get('features', ())),
        traits=_traits(data.get('traits')),
        metrics=_metrics(metrics) if metrics else None,
        hypervisor_type=data.get('hypervisor_type') or '',
        hypervisor_version=data.get('hypervisor_version'),
    )


def _traits(names):
    """A hypervisor's traits; None (unknown) when the document has none:
    no list at all is not an empty one."""
    return None if names is None else frozenset(names)


def _metrics(data):
    """HostMetrics from a document's mapping, with its lasting and
    forecast ones."""
    lasting, forecast = data.get('lasting'), data.get('forecast')
    return model.HostMetrics(**dict(
        data, lasting=model.HostMetrics(**lasting) if lasting else None,
        forecast=model.HostMetrics(**forecast) if forecast else None))


def _fill_usages(hypervisors, servers, raw):
    """Hypervisors without recorded usages get the sum of their servers'."""
    if all('usages' in h for h in raw):
        return hypervisors
    totals = {}
    for server in servers:
        host = totals.setdefault(server.hypervisor, {})
        for rc, amount in server.resources.items():
            host[rc] = host.get(rc, 0) + amount
    return tuple(
        hyp if 'usages' in data else
        dataclasses.replace(hyp, usages=model.frozen_mapping(totals.get(hyp.name)))
        for hyp, data in zip(hypervisors, raw))


def _server(data, flavors, images=None):
    flavor, resources_ = _flavor(data, flavors)
    get = data.get
    groups, metadata, tags, blockers, usage = (
        get('server_groups'), get('metadata'), get('tags'), get('blockers'),
        get('usage'))
    return model.make(model.Server, {
        'id': data['id'],
        'name': get('name') or '',
        'hypervisor': data['hypervisor'],
        'project_id': get('project_id') or '',
        'status': get('status', 'ACTIVE'),
        'task_state': get('task_state'),
        'locked': get('locked', False),
        'flavor': flavor,
        'boot_from_volume': get('boot_from_volume', False),
        'server_groups': tuple(groups) if groups else (),
        'metadata': model.frozen_mapping(metadata),
        'tags': tuple(tags) if tags else (),
        'pinned_availability_zone': get('pinned_availability_zone') or '',
        'resources': resources_ if 'resources' not in data else
        model.frozen_mapping(data['resources']),
        'blockers': tuple(blockers) if blockers else (),
        'usage': _usage(usage) if usage else _NO_USAGE,
        'image': _server_image(data, images),
    })


_NO_USAGE = model.ServerUsage()


def _usage(data):
    lasting, forecast = data.get('lasting'), data.get('forecast')
    return model.make(model.ServerUsage, {
        'cpu': data.get('cpu'), 'ram': data.get('ram'),
        'cpu_steal': data.get('cpu_steal'),
        'lasting': _usage(lasting) if lasting else None,
        'forecast': _usage(forecast) if forecast else None})


def _flavor(data, flavors):
    """(Flavor, what it allocates) of a server, one pair per distinct
    flavor: 500,000 servers have a few dozen."""
    raw = data['flavor']
    bfv = data.get('boot_from_volume', False)
    # The JSON text: == would take a flavor of 2.0 vCPUs for one of 2.
    key = orjson.dumps(raw), bfv
    found = flavors.get(key)
    if found is None:
        flavor = model.Flavor(
            name=raw.get('name') or raw.get('original_name') or '',
            vcpus=raw['vcpus'],
            ram=raw['ram'],
            disk=raw.get('disk', 0),
            ephemeral=raw.get('ephemeral', 0),
            swap=raw.get('swap', 0),
            extra_specs=model.frozen_mapping(raw.get('extra_specs')))
        found = flavors[key] = (flavor, model.frozen_mapping(
            flavor_resources(flavor, bfv)))
    return found


def _server_group(data):
    return model.ServerGroup(
        id=data['id'],
        name=data.get('name') or '',
        policy=data['policy'],
        members=tuple(data['members']),
        max_server_per_host=data.get('rules', {}).get('max_server_per_host'),
        project_id=data.get('project_id') or '')


def _migration(data, path):
    def when(key):
        value = data.get(key)
        return parse_time(value, '%s.%s' % (path, key)) if value else None

    return model.Migration(
        id=str(data.get('uuid') or data.get('id') or ''),
        server_id=data['server_id'],
        status=data['status'],
        migration_type=data.get('migration_type') or 'live-migration',
        source_compute=data.get('source_compute') or '',
        dest_compute=data.get('dest_compute') or '',
        created_at=when('created_at'),
        updated_at=when('updated_at'),
    )


def to_document(snap):
    """The JSON document (format 1) of a Snapshot; parse() reads it back."""
    doc = {
        'format': FORMAT,
        'taken_at': format_time(snap.taken_at),
        'source': dict(snap.source),
        'hypervisors': [_hypervisor_doc(h) for h in snap.hypervisors],
        'servers': [_server_doc(s) for s in snap.servers],
        'server_groups': [_group_doc(g) for g in snap.server_groups],
        'migrations': [_migration_doc(m) for m in snap.migrations],
    }
    if snap.lasting:
        doc['lasting'] = snap.lasting
    if snap.forecast:
        doc['forecast'] = forecast_doc(snap.forecast)
    if snap.guard:
        doc['guard'] = guard_doc(snap.guard)
    recorded = images_of(snap)
    if recorded is not None:
        doc['images'] = {i.id: _image_doc(i) for i in recorded if i.id}
    return doc


def images_of(snap):
    """The distinct model.Images of a snapshot's servers, in server
    order; None when it does not record images."""
    found = {}
    for server in snap.servers:
        if server.image is not None:
            found.setdefault(id(server.image), server.image)
    return list(found.values()) if found else None


def _image_doc(image):
    doc = {'name': image.name or None,
           'disk_format': image.disk_format or None,
           'properties': None if image.properties is None else
           dict(image.properties)}
    if image.why:
        doc['why'] = image.why
    return doc


def guard_doc(guard):
    """The guard section of a document, from GuardFacts."""
    return {
        'reference': format_time(guard.reference)
        if guard.reference is not None else None,
        'reference_from': guard.reference_from or None,
        'read_at': guard.read_at,
        'window': guard.window,
        'hypervisors': {name: _facts_doc(f)
                        for name, f in guard.hypervisors.items()},
        'unreachable': guard.unreachable or None}


def _facts_doc(facts):
    doc = {k: v for k, v in vars(facts).items()
           if v is not None and k != 'before'}
    if facts.before is not None:
        doc['before'] = _figures_doc(facts.before)
    return doc


def _hypervisor_doc(h):
    doc = {
        'name': h.name,
        'host': h.host,
        'uuid': h.uuid,
        'availability_zone': h.availability_zone,
        'aggregates': [{'name': a.name, 'metadata': dict(a.metadata)}
                       for a in h.aggregates],
        'service': {'status': h.service.status, 'state': h.service.state,
                    'forced_down': h.service.forced_down,
                    'disabled_reason': h.service.disabled_reason or None},
        'inventories': {
            rc: {'total': i.total, 'reserved': i.reserved,
                 'allocation_ratio': i.allocation_ratio,
                 'min_unit': i.min_unit, 'max_unit': i.max_unit,
                 'step_size': i.step_size}
            for rc, i in h.inventories.items()},
        'usages': dict(h.usages),
        'cpu': {'arch': h.cpu_arch, 'model': h.cpu_model,
                'features': sorted(h.cpu_features)},
        'traits': None if h.traits is None else sorted(h.traits),
        'metrics': None,
    }
    if h.hypervisor_type:
        doc['hypervisor_type'] = h.hypervisor_type
    if h.hypervisor_version is not None:
        doc['hypervisor_version'] = h.hypervisor_version
    if h.metrics is not None:
        doc['metrics'] = _figures_doc(h.metrics)
    return doc


def _figures_doc(figures):
    """The known figures of a HostMetrics or ServerUsage, lasting and
    forecast ones nested."""
    doc = {k: v for k, v in vars(figures).items()
           if v is not None and k not in _NESTED}
    for key in _NESTED:
        if getattr(figures, key) is not None:
            doc[key] = _figures_doc(getattr(figures, key))
    return doc


_NESTED = ('lasting', 'forecast')


def _server_doc(s):
    f = s.flavor
    doc = {
        'id': s.id, 'name': s.name, 'project_id': s.project_id,
        'hypervisor': s.hypervisor, 'status': s.status,
        'task_state': s.task_state, 'locked': s.locked,
        'flavor': {'name': f.name, 'vcpus': f.vcpus, 'ram': f.ram,
                   'disk': f.disk, 'ephemeral': f.ephemeral, 'swap': f.swap,
                   'extra_specs': dict(f.extra_specs)},
        'boot_from_volume': s.boot_from_volume,
        'server_groups': list(s.server_groups),
        'metadata': dict(s.metadata), 'tags': list(s.tags),
        'pinned_availability_zone': s.pinned_availability_zone or None,
        'resources': dict(s.resources),
        'blockers': list(s.blockers),
        'usage': None,
    }
    usage = _figures_doc(s.usage)
    if usage:
        doc['usage'] = usage
    if s.image is not None and s.image.id:
        doc['image'] = s.image.id
    return doc


def _group_doc(g):
    doc = {'id': g.id, 'name': g.name, 'project_id': g.project_id,
           'policy': g.policy, 'members': list(g.members), 'rules': {}}
    if g.max_server_per_host is not None:
        doc['rules']['max_server_per_host'] = g.max_server_per_host
    return doc


def _migration_doc(m):
    return {
        'id': m.id or None, 'server_id': m.server_id, 'status': m.status,
        'migration_type': m.migration_type,
        'source_compute': m.source_compute, 'dest_compute': m.dest_compute,
        'created_at': format_time(m.created_at) if m.created_at else None,
        'updated_at': format_time(m.updated_at) if m.updated_at else None,
    }
