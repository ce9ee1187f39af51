"""A plan: ordered live migrations with reasons, waves and a state fingerprint.

Plan files (format ``osc-leveller-plan/1``, schema in osc_leveller/data) carry
the moves in execution order, the predicted imbalance before and after, and a
fingerprint of the placement they were planned on, so ``apply`` can tell when
the cloud has changed since.
"""

import dataclasses
import hashlib
import json

from osc_leveller.core.load import duration
from osc_leveller.core.load import scoring
from osc_leveller.core.model import errors
from osc_leveller.core.model import files
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.model import validation
from osc_leveller.core.planning import kinds
from osc_leveller.core.settings import options as opts

FORMAT = 'osc-leveller-plan/1'
WHAT = 'plan file'  # as messages name it


class PlanError(errors.LevellerError, ValueError):
    """A plan file cannot be used; the message says why and where."""


class OtherCloud(PlanError):
    """The plan was made on another cloud than the one read now."""


@dataclasses.dataclass(frozen=True)
class Move:
    server_id: str
    server_name: str
    source: str  # hypervisor_hostname
    destination: str  # hypervisor_hostname
    destination_host: str  # compute service host, what os-migrateLive takes
    wave: int
    domain: str
    ram_gb: float
    gain: float  # reduction of the domain's sum of squared score deviations
    source_score: tuple  # (before, after)
    destination_score: tuple  # (before, after)
    imbalance: tuple  # the domain's (before, after)
    reason: str
    # Moves of one exchange (servers that trade places between hypervisors
    # where neither can move alone) share this label; they only lower the
    # load together, and apply runs them as one.
    exchange: str = ''
    # The better-ranked destination that refused the server, and why:
    # (hypervisor, reason), or () when the best one took it.
    refused: tuple = ()
    # How long the live migration should take, from Nova's history
    # (core/load/duration.py): (seconds, basis), or () when it cannot tell.
    estimate: tuple = ()


@dataclasses.dataclass(frozen=True)
class Plan:
    moves: tuple
    imbalance_before: float
    imbalance_after: float
    domains: tuple  # dicts: domain, hosts, before, after, moves
    fingerprint: str
    snapshot_taken_at: float
    snapshot_source: dict
    options: dict
    created_at: float
    note: str = ''  # why the plan is empty, when it is
    kind: str = kinds.BALANCE.name  # see core/planning/kinds.py

    @property
    def migrated_gb(self):
        return sum(m.ram_gb for m in self.moves)


def build(snapshot, options, moves, before, after, created, note='',
          kind=kinds.BALANCE, held=None, lost=None, forecast=None, targets=None,
          entries=None):
    """The Plan of moves made on snapshot with options (PlannerOptions).

    before, after: the scoring.DomainStats of every domain before and after
    the moves; created: when planning started (seconds since the epoch);
    held: {domain: what keeps it above the threshold with no move};
    lost: {domain: why it had no N+1 to keep, with keep_n_plus_one};
    forecast: {domain: {figure: skill.Skill}}, the forecast's measured
    skill and the weight it had; targets: {domain: its target}, recorded
    when forecast_target is set; entries: {domain: {key: value}}, a
    kind's own items of its domains' entries (plan --free-hosts: freed).
    """
    held = held or {}
    lost = lost or {}
    forecast = forecast or {}
    moves = with_estimates(snapshot, moves)
    return Plan(
        moves=moves,
        imbalance_before=scoring.pooled_imbalance(before),
        imbalance_after=scoring.pooled_imbalance(after),
        domains=tuple(
            dict({'domain': b.domain, 'hosts': b.hosts,
                  'before': b.imbalance, 'after': a.imbalance,
                  'moves': sum(1 for m in moves if m.domain == b.domain)},
                 **({'held': held[b.domain]} if b.domain in held else {}),
                 **({'n_plus_one': lost[b.domain]} if b.domain in lost
                    else {}),
                 **({'forecast': {f: dataclasses.asdict(s) for f, s in
                                  forecast[b.domain].items()}}
                    if b.domain in forecast else {}),
                 **({'target': round(targets[b.domain], 6)}
                    if options.forecast_target is not None and targets
                    else {}),
                 **(entries or {}).get(b.domain, {}))
            for b, a in zip(before, after)),
        fingerprint=fingerprint(snapshot),
        snapshot_taken_at=snapshot.taken_at,
        snapshot_source=dict(snapshot.source),
        options=opts.to_document(options),
        created_at=created,
        note=note,
        kind=kind.name)


class Waves:
    """Wave numbers for moves in planning order: one wave after the last
    move on either of its hypervisors. Moves of one wave share no
    hypervisor, and a move's validity depends only on the moves before it
    on its two hypervisors, so wave order is as valid as planning order; it
    is the order apply runs."""

    def __init__(self):
        self.last = {}

    def next(self, source, destination):
        wave = max(self.last.get(source, 0),
                   self.last.get(destination, 0)) + 1
        self.last[source] = self.last[destination] = wave
        return wave


def with_estimates(snapshot, moves):
    """The moves, each with its duration estimate where the cloud's
    history tells one."""
    durations = duration.Durations(snapshot)
    found = []
    for move in moves:
        estimate = duration.of_move(durations, move)
        if estimate is not None:
            move = dataclasses.replace(move, estimate=(
                round(estimate.seconds, 1), estimate.basis))
        found.append(move)
    return tuple(found)


def fingerprint(snap):
    """A digest of everything the filters read, except load.

    Placement, service state, aggregates, traits, server placement and state,
    server groups, images (if recorded). Metrics are left out on purpose: they change every scrape,
    and apply re-checks load itself.
    """
    encode = _encoder()
    parts = []
    add = parts.append
    for hyp in sorted(snap.hypervisors, key=lambda h: h.name):
        svc = hyp.service
        add(encode((
            hyp.name, hyp.host, hyp.availability_zone, svc.status, svc.state,
            svc.forced_down, sorted(hyp.usages.items()),
            sorted((rc, i.total, i.reserved, i.allocation_ratio, i.max_unit)
                   for rc, i in hyp.inventories.items()),
            sorted((a.name, sorted(a.metadata.items()))
                   for a in hyp.aggregates),
            hyp.cpu_model, sorted(hyp.cpu_features),
            None if hyp.traits is None else sorted(hyp.traits))))
    servers = sorted(snap.servers, key=lambda s: s.id)
    for server in servers:
        add(encode((
            server.id, server.hypervisor, server.status, server.task_state,
            server.locked, server.project_id, sorted(server.metadata.items()),
            sorted(server.resources.items()), list(server.blockers))))
    for group in sorted(snap.server_groups, key=lambda g: g.id):
        add(encode((group.id, group.policy, group.max_server_per_host,
                    sorted(group.members))))
    # What the image rules read (core/rules/images.py), if the snapshot
    # records it: a snapshot of before it did keeps the fingerprint it had.
    images = {}
    for server in servers:
        image = server.image
        if image is not None:
            add(encode((server.id, image.id, image.why)))
            images.setdefault(image.id, image)
    for image_id, image in sorted(images.items()):
        add(encode((image_id, image.disk_format, None if image.properties is None
                    else sorted(image.properties.items()))))
    return 'sha256:' + hashlib.sha256(''.join(parts).encode()).hexdigest()


def _encoder():
    """json.dumps(values, sort_keys=True) as one function for every item.

    The standard encoder makes a new C encoder on every call: at 500,000
    servers that was a third of the time of encoding. The fingerprint's
    bytes are the standard encoder's (its tests compare the two).
    """
    standard = json.JSONEncoder(sort_keys=True)
    try:
        encode_items = json.encoder.c_make_encoder(
            None, standard.default, json.encoder.encode_basestring_ascii,
            None, standard.key_separator, standard.item_separator,
            True, False, True)
    except TypeError:  # no C accelerator (None), or another signature
        return standard.encode

    def encode(values):
        return ''.join(encode_items(values, 0))
    return encode


def check_cloud(plan, snapshot):
    """A note when it cannot be told whether the plan was made on the
    snapshot's cloud, else None; OtherCloud when it was made on another.

    A plan records its snapshot's source, and so the cloud it was read
    from (cloud/identity.py). A plan that records none (made before the
    source did, or on a snapshot of no cloud: the demo, a Watcher cluster
    file) goes ahead with the note: the record is no seal (whoever edits a
    plan file can write any cloud into it), only a guard against applying
    a plan to the wrong cloud by mistake, and every move is checked
    against the cloud either way.
    """
    made_on, here = _cloud(plan.snapshot_source), _cloud(snapshot.source)
    if made_on is None:
        return ('the plan records no cloud (it was made before osc-leveller '
                'recorded one, or on a snapshot of none: the demo, a Watcher '
                'cluster file): each move is checked against this cloud')
    if here is None:
        return ('this cloud\'s Keystone catalog names no Nova service, so it '
                'cannot be compared with the plan\'s (%s): each move is '
                'checked against this cloud' % describe(plan.snapshot_source))
    if made_on[0] != here[0] or None not in (made_on[1], here[1]) and \
            made_on[1] != here[1]:
        raise OtherCloud(
            'the plan was made on another cloud (%s) than this one (%s): '
            'plan again on this cloud, or choose the plan\'s cloud with '
            '--os-cloud' % (describe(plan.snapshot_source),
                            describe(snapshot.source)))
    return None


def _cloud(source):
    """(Nova's service id, its region) of a snapshot source, or None."""
    service = source.get(snapshot_io.NOVA_SERVICE)
    if not service:
        return None
    return service, source.get(snapshot_io.NOVA_REGION) or None


def describe(source):
    """A snapshot source's cloud in words: its clouds.yaml name, Keystone,
    region and Nova service."""
    parts = [fmt % errors.name(source[key]) for key, fmt in (
        ('cloud', 'clouds.yaml cloud %s'),
        (snapshot_io.KEYSTONE, 'Keystone %s'),
        (snapshot_io.NOVA_REGION, 'region %s'),
        (snapshot_io.NOVA_SERVICE, 'Nova service %s')) if source.get(key)]
    return ', '.join(parts) or 'no cloud named'


def to_document(plan):
    return {
        'format': FORMAT,
        'kind': plan.kind,
        'created_at': snapshot_io.format_time(plan.created_at),
        'snapshot': {
            'taken_at': snapshot_io.format_time(plan.snapshot_taken_at),
            'source': dict(plan.snapshot_source),
            'fingerprint': plan.fingerprint,
        },
        'options': plan.options,
        'imbalance': {'before': plan.imbalance_before,
                      'after': plan.imbalance_after,
                      'domains': [dict(d) for d in plan.domains]},
        'note': plan.note,
        'moves': [_move_doc(m) for m in plan.moves],
    }


def _move_doc(move):
    doc = dataclasses.asdict(move)
    for key in ('source_score', 'destination_score', 'imbalance'):
        doc[key] = {'before': move.__dict__[key][0],
                    'after': move.__dict__[key][1]}
    if move.refused:
        doc['refused'] = dict(zip(('hypervisor', 'reason'), move.refused))
    else:
        del doc['refused']
    if move.estimate:
        doc['estimate'] = dict(zip(('seconds', 'basis'), move.estimate))
    else:
        del doc['estimate']
    return doc


def from_document(document, origin='plan', strict=False):
    """A Plan from a decoded plan document; strict: read by a strict JSON
    reader (see validation.validate)."""
    try:
        validation.validate(document, 'plan-v1', strict)
        moves = tuple(_move(m) for m in document['moves'])
        kind = _kind(document.get('kind', kinds.BALANCE.name))
        _check_chains(moves, kind)
        _check_exchanges(moves, kind)
        snap = document['snapshot']
        return Plan(
            moves=moves,
            imbalance_before=document['imbalance']['before'],
            imbalance_after=document['imbalance']['after'],
            domains=tuple(document['imbalance'].get('domains', ())),
            fingerprint=snap['fingerprint'],
            snapshot_taken_at=snapshot_io.parse_time(
                snap['taken_at'], 'snapshot.taken_at'),
            snapshot_source=snap.get('source', {}),
            options=document.get('options', {}),
            created_at=snapshot_io.parse_time(
                document['created_at'], 'created_at'),
            note=document.get('note', ''),
            kind=kind.name)
    except validation.ValidationError as exc:
        raise PlanError('%s: %s' % (origin, exc)) from exc


def _kind(name):
    try:
        return kinds.of(name)
    except kinds.UnknownKind:
        raise validation.not_one_of('kind', name, kinds.saved()) from None


def _check_chains(moves, kind):
    """A server moves once, or twice within one exchange (parking), unless
    its kind repeats moves (a path to a target placement). A server moves
    on only from where its previous move took it."""
    last = {}
    for index, move in enumerate(moves):
        before = last.get(move.server_id)
        if before is not None and not kind.repeats and not (
                move.exchange and move.exchange == before.exchange):
            raise validation.ValidationError(
                'moves[%d].server_id' % index,
                'server %s is moved twice' % move.server_id)
        if before is not None and before.destination != move.source:
            raise validation.ValidationError(
                'moves[%d].source' % index,
                'server %s is on %s after its previous move, not on %s' % (
                    move.server_id, before.destination, move.source))
        if before is not None and before.wave >= move.wave:
            raise validation.ValidationError(
                'moves[%d].wave' % index,
                'server %s moves again in wave %d, not after its previous '
                'move (wave %d)' % (move.server_id, move.wave, before.wave))
        last[move.server_id] = move


def _check_exchanges(moves, kind):
    """An exchange is what the planner makes and nothing wider: two servers
    trading places between two hypervisors, in two moves or three (one of
    them parked on the way). apply counts an exchange as one move of its
    batch, so a label on other moves would stretch --batch."""
    groups = {}
    for index, move in enumerate(moves):
        if move.exchange:
            if not kind.exchanges:
                raise validation.ValidationError(
                    'moves[%d].exchange' % index,
                    'a %s plan has no exchanges' % kind.name)
            groups.setdefault(move.exchange, []).append((index, move))
    for label, group in groups.items():
        where = 'moves[%d].exchange' % group[-1][0]
        first, last = {}, {}
        for _, move in group:
            first.setdefault(move.server_id, move.source)
            last[move.server_id] = move.destination
        servers = sorted(first)
        if len(servers) != 2 or len(group) > 3:
            raise validation.ValidationError(
                where, '%s: an exchange is two servers in two or three moves '
                '(got %d servers in %d moves)' % (label, len(servers),
                                                  len(group)))
        a, b = servers
        if not (first[a] == last[b] and first[b] == last[a]
                and first[a] != first[b]):
            raise validation.ValidationError(
                where, '%s: its two servers do not trade places' % label)


def _move(doc):
    values = dict(doc)
    for key in ('source_score', 'destination_score', 'imbalance'):
        values[key] = (doc[key]['before'], doc[key]['after'])
    if 'refused' in doc:
        values['refused'] = (doc['refused']['hypervisor'],
                             doc['refused']['reason'])
    if 'estimate' in doc:
        values['estimate'] = (doc['estimate']['seconds'],
                              doc['estimate']['basis'])
    return Move(**values)


def dumps(plan):
    """The plan file's text."""
    return json.dumps(to_document(plan), indent=2, sort_keys=True) + '\n'


def write(plan, path):
    files.write_atomic(path, dumps(plan), WHAT)


def read(path, max_mb=files.MAX_MB):
    try:
        document, strict = files.read_json(path, WHAT, max_mb)
    except files.FileError as exc:
        raise PlanError(str(exc)) from None
    if not isinstance(document, dict) or document.get('format') != FORMAT:
        raise PlanError('%s is not an osc-leveller plan (format %r expected)'
                        % (path, FORMAT))
    try:
        return from_document(document, origin=path, strict=strict)
    except RecursionError:
        raise PlanError('%s is nested too deeply to be a plan' % path) \
            from None
