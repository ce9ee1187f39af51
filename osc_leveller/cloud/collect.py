"""Read a live cloud from Nova and Placement into a snapshot document.

The result is the documented snapshot format (osc-leveller-snapshot/1), so a
live run and ``--snapshot FILE`` go through the same validation and the same
core model. Compute calls are a fixed handful plus one per page, whatever the
number of hypervisors; Placement has no bulk read, so it costs one call for
the providers plus two per provider (inventories, allocations) and one per
hypervisor's own provider (its traits), and Glance one per distinct image
of the servers (cloud/glance.py), made in parallel. Lists are read as
JSON, not as openstacksdk resources: building a resource costs milliseconds,
minutes for the servers of a large cloud. The answers are joined into the
document by cloud/document.py and checked as cloud/answers.py says.
"""

import collections
import concurrent.futures
import dataclasses
import datetime
import json
import re
import threading
import time
import types
import urllib.parse

from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc
from openstack import utils as sdk_utils

from osc_leveller.cloud import answers
from osc_leveller.cloud import coverage
from osc_leveller.cloud import document as document_mod
from osc_leveller.cloud import glance
from osc_leveller.cloud import hostmatch
from osc_leveller.cloud import identity
from osc_leveller.cloud import prometheus
from osc_leveller.core.load import scoring
from osc_leveller.core.load import skill
from osc_leveller.core.model import snapshot

CollectError = answers.CollectError  # what every read here raises
reading = answers.reading

# 2.53: uuids for services and hypervisors; 2.59: migration uuids and
# changes-since; 2.64: server group policy and rules.
COMPUTE_MIN = '2.64'
# The last version whose hypervisor details carry cpu_info.
HYPERVISOR_VERSION = '2.87'
# The newest server fields read (2.96: pinned_availability_zone); older
# Novas answer at their own newest version.
SERVERS_VERSION = '2.96'
MIGRATIONS_VERSION = '2.80'  # uuid, paging by next link
SERVICE_VERSION = '2.53'  # service ids are uuids
PLACEMENT_MIN = '1.14'  # root and parent provider uuids
ALLOCATIONS_VERSION = '1.28'
TRAITS_VERSION = '1.6'  # GET /resource_providers/{uuid}/traits from 1.6
# Trait names as Placement allows them (placement/schemas/trait.py), and
# at most as many per provider as a snapshot holds.
TRAIT_NAME = re.compile('[A-Z0-9_]{1,255}')
MAX_TRAITS = 1000
GROUP_PAGE = 1000
WORKERS = 16  # parallel Placement reads; the connection pool is as large
RETRIES = 2  # reads that got no answer, sent again (setting cloud.retries)


def _get(proxy, url, key, kind, retries=RETRIES, **kwargs):
    """body[key] of a GET, checked to be a kind (list or dict)."""
    # A GET is safe to send again when a pooled keep-alive connection was
    # closed under it ("Remote end closed connection without response").
    return _body(proxy, url, key, kind, retries, **kwargs)[key]


def _body(proxy, url, key, kind, retries=RETRIES, **kwargs):
    """The body of a GET, checked to hold a kind (list or dict) at key."""
    response = proxy.get(url, connect_retries=retries, **kwargs)
    sdk_exc.raise_from_response(response)
    body = response.json()
    if not isinstance(body, dict) or not isinstance(body.get(key), kind):
        raise TypeError('expected an object with a %s "%s", got %s' % (
            kind.__name__, key, answers.short(json.dumps(body)[:80])))
    return body


def _pages(proxy, url, key, retries=RETRIES, params=None, on_page=None,
           keep=None, **kwargs):
    """Every item of a list Nova pages with next links ('<key>_links'),
    each cut to what keep(item) returns, if given.

    The next link's marker is sent to our own endpoint, not to the host the
    link names (a proxy may name one we cannot reach). A marker or a page
    seen before would page forever: that is an error.
    """
    items, markers, ids = [], set(), set()
    params = dict(params or {})
    while True:
        body = _body(proxy, url, key, list, retries, params=params, **kwargs)
        page = body[key]
        for item in page:
            answers.mapping('an item of "%s"' % key, item)
        new = {item.get('id') for item in page}
        if page and new <= ids:
            raise ValueError('paging loops: the page after marker %s repeats '
                             '%s already read' % (params.get('marker'), key))
        ids.update(new)
        items.extend(page if keep is None else map(keep, page))
        if on_page is not None:
            on_page(len(page))
        marker = _next_marker(body, key)
        if marker is None:
            return items
        if marker in markers:
            raise ValueError('paging loops: the next link of "%s" repeats '
                             'marker %s' % (key, answers.short(marker)))
        markers.add(marker)
        params['marker'] = marker


def _next_marker(body, key):
    """The marker of the body's next link, or None on the last page."""
    for link in body.get(key + '_links') or []:
        if isinstance(link, dict) and link.get('rel') == 'next':
            query = urllib.parse.urlsplit(str(link.get('href'))).query
            marker = urllib.parse.parse_qs(query).get('marker')
            if not marker:
                raise ValueError('the next link of "%s" has no marker: %s' % (
                    key, answers.short(link.get('href'))))
            return marker[0]
    return None


def check_access(conn):
    """Fail early, and clearly, on old APIs or missing admin rights."""
    with reading('Nova and Placement version discovery'):
        compute = sdk_utils.supports_microversion(conn.compute, COMPUTE_MIN)
        placement = sdk_utils.supports_microversion(conn.placement,
                                                    PLACEMENT_MIN)
    if not compute:
        raise CollectError(
            'Nova API microversion %s or later is needed (check '
            '--os-compute-api-version and the cloud\'s Nova release)'
            % COMPUTE_MIN)
    if not placement:
        raise CollectError('Placement API microversion %s or later is needed'
                           % PLACEMENT_MIN)
    try:
        with reading('Nova GET /os-services'):
            return services(conn.compute)
    except CollectError as exc:
        if isinstance(exc.__cause__, sdk_exc.ForbiddenException):
            raise CollectError(
                'listing compute services was refused: the leveller needs an '
                'admin role (Nova\'s default policy)') from exc
        raise


def services(compute, retries=RETRIES, **query):
    """The nova-compute services (of a host, with host=...)."""
    found = _get(compute, '/os-services', 'services', list, retries,
                 params=dict(query, binary='nova-compute'),
                 microversion=SERVICE_VERSION)
    for service in found:
        answers.mapping('a compute service', service)
    return found


def provider_traits(placement, uuid, retries=RETRIES):
    """The traits of a resource provider, checked as Placement writes them:
    a list of at most MAX_TRAITS trait names."""
    found = _get(placement, '/resource_providers/%s/traits' % uuid, 'traits',
                 list, retries, microversion=TRAITS_VERSION)
    if len(found) > MAX_TRAITS:
        raise ValueError('%d traits, more than the %d a provider may have '
                         'here' % (len(found), MAX_TRAITS))
    for name in found:
        if not isinstance(name, str) or not TRAIT_NAME.fullmatch(name):
            text = json.dumps(name)
            raise ValueError('%s is not a trait name (1 to 255 of A-Z, '
                             '0-9 and _)' % (text if len(text) <= 40
                                             else text[:37] + '...'))
    return sorted(set(found))


def servers_version(compute):
    """The newest server microversion both we and Nova know."""
    return sdk_utils.maximum_supported_microversion(
        compute, SERVERS_VERSION) or COMPUTE_MIN


def servers(compute, version, retries=RETRIES, on_page=None, **query):
    """Servers of every project, with details (of a node, with node=...)."""
    return _pages(compute, '/servers/detail', 'servers', retries,
                  params=dict(query, all_tenants=1), microversion=version,
                  on_page=on_page, keep=document_mod.used_of_server)


def flavors(compute, retries=RETRIES):
    """Every flavor, public or not, with its extra specs (2.61)."""
    return _pages(compute, '/flavors/detail', 'flavors', retries,
                  params={'is_public': 'None'}, microversion='2.61')


def hypervisors(compute, retries=RETRIES, **query):
    """Hypervisor details at 2.87, the last version with cpu_info; no
    Ironic nodes."""
    found = _pages(compute, '/os-hypervisors/detail', 'hypervisors',
                   retries, params=query, microversion=HYPERVISOR_VERSION)
    return [h for h in found if h.get('hypervisor_type') != 'ironic']


def migrations(compute, since, retries=RETRIES, **query):
    """Migrations updated since then (changes-since)."""
    since = snapshot.format_datetime(since)
    return _pages(compute, '/os-migrations', 'migrations', retries,
                  params=dict(query, **{'changes-since': since}),
                  microversion=MIGRATIONS_VERSION)


def aggregates(compute, retries=RETRIES):
    found = _get(compute, '/os-aggregates', 'aggregates', list, retries,
                 microversion=COMPUTE_MIN)
    for aggregate in found:
        answers.mapping('an aggregate', aggregate)
    return found


class Quiet:
    """Progress that says nothing (see v1/progress.py for what speaks)."""

    def begin(self, what, total=None):
        pass

    def advance(self, count=1):
        pass

    def end(self, summary):
        pass


class Collector:
    def __init__(self, conn, history_hours=24.0, workers=WORKERS,
                 metrics=None, retries=RETRIES, progress=None,
                 max_images=glance.MAX_IMAGES):
        self.conn = conn
        self.max_images = max_images
        self.history_hours = history_hours
        self.workers = workers
        self.metrics = metrics  # a measure.Reader, or None
        self.coverage = None    # what the metrics cover, after collect()
        self.retries = retries
        self.progress = progress or Quiet()
        # Learnt by collect(), for refresh.refresh: child resource
        # providers (id -> name) and Nova's host_ip of each hypervisor.
        self.children = {}
        self.host_ips = {}
        self.last_reading = None  # (monotonic time, measure.Reading)

    def read(self, refs, servers, guard=True):
        """The metrics reader's Reading, remembered with its time."""
        reading = self.metrics.read(refs, servers, guard)
        self.last_reading = (time.monotonic(), reading)
        return reading

    def collect(self, now=None):
        """The snapshot document; CollectError when the cloud cannot be read."""
        with snapshot.no_gc():  # 3.3 of 13.6 s of CPU at 50,000 servers
            return self._collect(now)

    def _collect(self, now):
        now = now or datetime.datetime.now(datetime.timezone.utc)
        compute_services, hyps = self._read_hypervisors()
        providers = self._read_providers()
        # Placement's two reads per provider go on in parallel while Nova's
        # pages are read one after another, and so does Prometheus.
        ahead = Measuring(self, _expected_refs(hyps, providers)) \
            if self.metrics is not None else None
        pool = concurrent.futures.ThreadPoolExecutor(self.workers)
        # Names that are not text: build_document says what is wrong.
        names = {name for name in (h.get('hypervisor_hostname')
                                   for h in hyps) if isinstance(name, str)}
        placement = direct(self.conn.placement)
        try:
            pending = [pool.submit(self._provider, rp, names, placement)
                       for rp in providers]
            found = self._read_servers()
            # Glance's reads queue behind Placement's in the same pool.
            wanted, images = self._wanted_images(found, names)
            service, why = glance.image_service(self.conn) if wanted \
                else (None, None)
            if why:
                images.update((image, document_mod.unread_image(why))
                              for image in wanted)
                wanted = []
            image_reads = [pool.submit(glance.read_image, service, image,
                                       self.retries) for image in wanted]
            aggs, groups, migs = self._read_nova_lists(now)
            providers, allocations, unanswered, traits = \
                self._placement_answers(providers, pending)
            images.update(self._image_answers(wanted, image_reads))
            document = document_mod.build_document(
                now=now, cloud=getattr(self.conn.config, 'name', None),
                region=getattr(self.conn.config, 'region_name', None),
                services=compute_services, hypervisors=hyps,
                aggregates=aggs, servers=_let_go(found), groups=groups,
                migrations=migs, providers=providers,
                allocations=allocations, unanswered=unanswered,
                traits=traits.known, traits_unread=traits.unread,
                images=images)
            document['source'].update(identity.of(self.conn))
            self.children = {rp['uuid']: rp['name'] for rp, _ in providers
                             if rp.get('parent_provider_uuid')}
            self.host_ips = {h['hypervisor_hostname']: h.get('host_ip')
                             for h in hyps}
            if ahead is not None:
                self._add_measured(document, ahead)
        finally:  # on an error, what is still queued is not sent
            pool.shutdown(wait=False, cancel_futures=True)
            if ahead is not None:
                ahead.abandon()
        return document

    def _read_hypervisors(self):
        """Nova's compute services (access checked) and hypervisors."""
        self.progress.begin('Nova compute services and hypervisors')
        compute_services = check_access(self.conn)
        with reading('Nova GET /os-hypervisors/detail'):
            found = hypervisors(self.conn.compute, self.retries)
        self.progress.end('%d hypervisors' % len(found))
        return compute_services, found

    def _read_providers(self):
        with reading('Placement GET /resource_providers'):
            providers = _get(self.conn.placement, '/resource_providers',
                             'resource_providers', list, self.retries,
                             microversion=PLACEMENT_MIN)
            for rp in providers:
                answers.mapping('a resource provider', rp)
                rp['uuid'] = str(rp['uuid'])
        return providers

    def _read_servers(self):
        say = self.progress
        say.begin('Nova servers')
        with reading('Nova GET /servers/detail'):
            found = servers(self.conn.compute,
                            servers_version(self.conn.compute),
                            self.retries, on_page=say.advance)
        say.end('%d servers' % len(found))
        return found

    def _wanted_images(self, servers, hypervisors):
        """(the image ids to read from Glance, {image id: the entry of
        one not read}) of the servers on these hypervisors."""
        with reading('Nova GET /servers/detail'):
            wanted, skipped = glance.wanted_images(
                [s for s in servers
                 if s.get(document_mod.NODE) in hypervisors],
                self.max_images)
        return wanted, {image: document_mod.unread_image(why)
                        for image, why in skipped.items()}

    def _image_answers(self, wanted, reads):
        """{image id: its entry} as Glance's reads end."""
        say = self.progress
        say.begin('Glance images', total=len(wanted))
        found = {}
        for image, future in zip(wanted, reads):
            entry, why = future.result()
            found[image] = entry or document_mod.unread_image(why)
            say.advance()
        say.end('%d images, %d of them unknown' % (
            len(found), sum(1 for e in found.values()
                            if e['properties'] is None)))
        return found

    def _read_nova_lists(self, now):
        """Aggregates, server groups and the migrations of the history."""
        say = self.progress
        say.begin('Nova aggregates, server groups and migrations')
        with reading('Nova GET /os-aggregates'):
            aggs = aggregates(self.conn.compute, self.retries)
        groups = self._server_groups()
        since = now - datetime.timedelta(hours=self.history_hours)
        with reading('Nova GET /os-migrations'):
            migs = migrations(self.conn.compute, since, self.retries)
        say.end('%d server groups, %d migrations' % (len(groups), len(migs)))
        return aggs, groups, migs

    def _placement_answers(self, providers, pending):
        """[(provider, inventories)], {uuid: allocations}, {uuid: why} of
        the providers Placement did not answer for, and the Traits of the
        hypervisors' providers, as _provider's reads end."""
        say = self.progress
        say.begin('Placement inventories, allocations and traits',
                  total=len(providers))
        results = {}
        for rp, future in zip(providers, pending):
            results[rp['uuid']] = future.result()
            say.advance()
        say.end('%d resource providers' % len(providers))
        unanswered = {uuid: r.why for uuid, r in results.items() if r.why}
        allocations = {uuid: r.allocations for uuid, r in results.items()
                       if uuid not in unanswered}
        found = Traits({}, {})
        for uuid, r in results.items():
            if r.traits_why:
                found.unread[uuid] = r.traits_why
            elif r.traits is not None:
                found.known[uuid] = r.traits
        return ([(rp, results[rp['uuid']].inventories) for rp in providers],
                allocations, unanswered, found)

    def _add_measured(self, document, ahead):
        """Prometheus's reading, begun ahead, joined to the document."""
        say = self.progress
        say.begin('Prometheus')
        measured = ahead.result(host_refs(document, self.host_ips), {
            s['id']: s['hypervisor'] for s in document['servers']})
        self.coverage = add_metrics(document, measured)
        say.end('load of %d hypervisors, %d servers' % (
            sum(1 for h in document['hypervisors'] if h['metrics']),
            sum(1 for s in document['servers'] if 'usage' in s)))

    def _server_groups(self):
        """All groups: the API pages by offset and gives no next link, and
        a page may be shorter than asked for (Nova's max_limit), so the
        end is the first empty page."""
        groups, offset, seen = [], 0, set()
        with reading('Nova GET /os-server-groups'):
            while True:
                page = _get(self.conn.compute, '/os-server-groups',
                            'server_groups', list, self.retries, params={
                                'all_projects': True, 'limit': GROUP_PAGE,
                                'offset': offset}, microversion=COMPUTE_MIN)
                if not page:
                    return groups
                # An answer that ignores the offset would page forever.
                for group in page:
                    answers.mapping('a server group', group)
                ids = {group.get('id') for group in page}
                if seen.issuperset(ids):
                    raise ValueError('the page at offset %d repeats server '
                                     'groups already read' % offset)
                seen.update(ids)
                groups.extend(page)
                offset += len(page)

    def _provider(self, rp, hypervisors, placement):
        """What Placement says of one provider (a ProviderAnswer); when it
        did not answer, why: that provider is left out, not the whole read
        (an answer of the wrong shape still ends it). The traits of a
        hypervisor's own provider (a root named as Nova names a
        hypervisor) are read too; if they cannot be, they are unknown.
        placement: the proxy to read with (direct)."""
        try:
            url = '/resource_providers/%s/inventories' % rp['uuid']
            with reading('Placement GET %s' % url):
                inventories = _get(placement, url, 'inventories', dict,
                                   self.retries)
            url = '/resource_providers/%s/allocations' % rp['uuid']
            with reading('Placement GET %s' % url):
                allocations = _get(placement, url, 'allocations', dict,
                                   self.retries,
                                   microversion=ALLOCATIONS_VERSION)
        except CollectError as exc:
            reason = no_answer(exc.__cause__)
            if not reason:
                raise
            return ProviderAnswer(None, None, reason)
        answer = ProviderAnswer(inventories, allocations)
        if rp.get('name') in hypervisors and \
                not rp.get('parent_provider_uuid'):
            found, why = read_traits(placement, rp['uuid'], self.retries)
            answer = answer._replace(traits=found, traits_why=why)
        return answer


class direct:
    """A service proxy whose GETs go to its endpoint's URL, looked up once.
    Given a path, keystoneauth looks the endpoint up in the catalog again
    for every request: a quarter of the CPU each of Placement's
    per-provider reads cost (3,000 at 1,000 hypervisors; 1.10 ms with a
    path, 0.83 ms with the URL, benchmarks/request_cost.py). Everything else
    of the request (token, microversion, retries, logging) is the
    proxy's. Without an endpoint, the proxy says why as it did."""

    def __init__(self, proxy):
        self.proxy = proxy
        try:
            self.base = (proxy.get_endpoint() or '').rstrip('/')
        except (sdk_exc.SDKException, ksa_exc.ClientException):
            self.base = ''

    def get(self, url, **kwargs):
        return self.proxy.get(self.base + url, **kwargs)


class ProviderAnswer(collections.namedtuple('ProviderAnswer', (
        'inventories', 'allocations', 'why', 'traits', 'traits_why'),
        defaults=(None, None, None))):
    """Placement's answers for one provider: why, if it did not answer;
    traits (a list, None if not read) and why they could not be."""


class Traits(collections.namedtuple('Traits', 'known unread')):
    """The traits of hypervisors' providers: known {uuid: [trait]} and
    unread {uuid: why they could not be read}."""


def read_traits(placement, uuid, retries=RETRIES):
    """([trait], None), or (None, why) when Placement did not answer for
    them or its answer cannot be used: unknown traits, never none."""
    try:
        with reading('Placement GET /resource_providers/%s/traits' % uuid):
            return provider_traits(placement, uuid, retries), None
    except CollectError as exc:
        return None, no_answer(exc.__cause__) or answers.short(exc)


def no_answer(exc):
    """How a service under load failed to answer (timed out, no
    connection, a server-side error), or None for any other failure."""
    if isinstance(exc, ksa_exc.ConnectTimeout):
        return 'timed out'
    if isinstance(exc, ksa_exc.ConnectionError):
        return 'no connection'
    status = getattr(exc, 'status_code', None)
    if isinstance(status, int) and (status == 408 or status >= 500):
        return 'HTTP %d' % status
    return None


def host_refs(document, host_ips):
    """The document's hypervisors as Prometheus matches them.

    host_ips: {hypervisor: Nova's host_ip}, to match node_exporter targets
    whose instance label is IP:port.
    """
    return [hostmatch.HostRef(h['name'], h['host'], host_ips.get(h['name']))
            for h in document['hypervisors']]


def _expected_refs(hypervisors, providers):
    """host_refs of the document to come, if Placement answers for every
    provider: the hypervisors with a root provider. None when an answer's
    shape leaves that unsure (build_document then says what is wrong)."""
    roots = {rp.get('name') for rp in providers
             if not rp.get('parent_provider_uuid')}
    refs = []
    for hyp in hypervisors:
        name, service = hyp.get('hypervisor_hostname'), hyp.get('service')
        if not isinstance(name, str) or not isinstance(service or {}, dict):
            return None
        if name in roots:
            refs.append(hostmatch.HostRef(
                name, document_mod.compute_host(hyp), hyp.get('host_ip')))
    return refs


def _let_go(items):
    """The items, each let go of as it is handed over: Nova's servers,
    held once, not again beside the document's."""
    items.reverse()
    while items:
        yield items.pop()


class Measuring:
    """A Prometheus reading that starts before Nova's servers are read.

    Its queries go out at once; the servers it joins them to are handed
    over when Nova has listed them. If the hypervisors are not those it
    started with (Placement left some out), the reading is taken again.
    abandon() after an error lets the reading end without them.
    """

    def __init__(self, collector, refs):
        self.collector, self.refs = collector, refs
        self._servers = concurrent.futures.Future()
        self._done = concurrent.futures.Future()
        if refs is not None:
            # A daemon: an error elsewhere never waits for Prometheus.
            threading.Thread(target=self._run, name='prometheus',
                             daemon=True).start()

    def _run(self):
        try:
            self._done.set_result(self.collector.read(self.refs,
                                                      self._servers.result))
        except BaseException as exc:  # handed to result()
            self._done.set_exception(exc)

    def result(self, refs, servers):
        """The Reading for these hypervisors and {server id: hypervisor}."""
        try:
            if refs != self.refs:
                self.abandon()
                return self.collector.read(refs, servers)
            self._servers.set_result(servers)
            return self._done.result()
        except prometheus.PrometheusError as exc:
            raise CollectError(str(exc)) from exc

    def abandon(self):
        if not self._servers.done():
            self._servers.set_exception(CollectError('no servers to join'))


def _domains(document):
    """{hypervisor: balancing domain} of a document's hypervisors, the
    domains split by CPU model (a plan split by architecture pools them)."""
    return {h['name']: scoring.domain_of(types.SimpleNamespace(
        availability_zone=h.get('availability_zone') or '',
        cpu_model=(h.get('cpu') or {}).get('model') or '',
        cpu_arch=(h.get('cpu') or {}).get('arch') or ''))
        for h in document['hypervisors']}


def add_metrics(document, reading):
    """Measured load into the document; its Coverage says what falls back."""
    for hyp in document['hypervisors']:
        hyp['metrics'] = reading.host(hyp['name'])
    for server in document['servers']:
        if server['id'] in reading.servers:
            server['usage'] = reading.server(server['id'])
    if reading.lasting_hosts or reading.lasting_servers:
        document['lasting'] = reading.lasting
    if reading.guard is not None:
        document['guard'] = reading.guard
    elif reading.unreachable:  # every hypervisor's metrics lost at once
        document['guard'] = {'unreachable': reading.unreachable,
                             'hypervisors': {}}
    if reading.forecast_hosts or reading.forecast_servers:
        # Without a history (its queries failed: a note says why), no
        # domain has skill, and the forecast gets no weight.
        found = skill.errors(reading.history, _domains(document),
                             reading.forecast.days) \
            if reading.history is not None else {}
        document['forecast'] = snapshot.forecast_doc(
            dataclasses.replace(reading.forecast, skill=found))
    elif reading.forecast:
        days = reading.forecast.days
        reading.notes.append(
            'no forecast: Prometheus has no series over the %s ahead of '
            'this time on %s (retention, or a new cloud): planned on the '
            'load of now' % (reading.forecast.ahead, 'the day before'
                             if days == 1 else 'each of the last %d days' %
                             days))
    found = coverage.build(document, reading)
    notes = [document['source']['note']] if 'note' in document['source'] \
        else []
    if reading.unreachable:
        notes.append('%s: load from Placement allocations' %
                     reading.unreachable)
    notes.extend(reading.notes)
    summary = found.summary()
    if summary:
        notes.append(summary)
    if notes:
        document['source']['note'] = '; '.join(notes)
    return found
