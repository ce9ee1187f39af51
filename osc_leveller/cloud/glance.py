"""The image properties Nova's scheduler reads, from Glance.

One GET /v2/images/{id} per distinct image of the servers, in the
collector's pool: Glance has no bulk read by id. Glance shows an image's
properties as top-level keys of its answer (text values); only those the
rules read (core/rules/images.py) are kept. An image Glance does not show (gone:
404, refused: 403) or does not answer for has unknown properties, never
none: the rules then hold its servers to hypervisors as capable as theirs.

Nova schedules with the properties the image had when the server was
booted; Glance gives those of now. An operator rarely changes an image's
properties after its servers boot, and a property added since only makes
the rules stricter; one removed since is the case this cannot see.
"""

import collections
import json
import urllib.parse

from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import answers
from osc_leveller.core.rules import images
from osc_leveller.core.settings import config

# Images read per collection, the images of the most servers first.
MAX_IMAGES = config.BY_NAME['cloud.max_images'].default
ID_LENGTH = 255
SHOWN = 3  # reasons a note names


def image_id(server):
    """The Glance id of the image a server of Nova's servers/detail was
    booted from, or None when it was booted from a volume ("")."""
    image = server.get('image')
    if not isinstance(image, dict) or not image.get('id'):
        return None
    found = image['id']
    if not isinstance(found, str) or len(found) > ID_LENGTH:
        raise TypeError('image id %s is not text of at most %d characters'
                        % (answers.short(json.dumps(found)[:60]), ID_LENGTH))
    return found


def image_entry(body, wanted):
    """The snapshot's entry for Glance's answer about image wanted:
    name, disk_format and the kept properties, checked."""
    answers.mapping('the image', body)
    if body.get('id') != wanted:
        raise ValueError('the answer is about image %s' % answers.short(
            json.dumps(body.get('id'))[:60]))
    entry = {'name': _text(body, 'name', images.MAX_VALUE),
             'disk_format': _text(body, 'disk_format', 64), 'properties': {}}
    for key, value in body.items():
        if not images.kept(key):
            continue
        if not isinstance(value, str):
            raise TypeError('property %s is %s, not text' % (
                answers.short(key), type(value).__name__))
        if len(value) > images.MAX_VALUE or not key or \
                len(key) > images.MAX_VALUE:
            raise ValueError('property %s is longer than Nova keeps' %
                             answers.short(key)[:60])
        entry['properties'][key] = value
    if len(entry['properties']) > images.MAX_PROPERTIES:
        raise ValueError('%d properties, more than %d' % (
            len(entry['properties']), images.MAX_PROPERTIES))
    return entry


def _text(body, key, longest):
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > longest:
        raise TypeError('%s is not text of at most %d characters' % (
            key, longest))
    return value


def image_service(conn):
    """(openstacksdk's image proxy, None), or (None, why Glance cannot be
    read): not in the catalog, or its version discovery failed."""
    try:
        proxy = conn.image
        proxy.get  # a service left out of the catalog raises here
        return proxy, None
    except sdk_exc.ServiceDisabledException:
        return None, 'no image service in the catalog'
    except (sdk_exc.SDKException, ksa_exc.ClientException) as exc:
        return None, 'Glance could not be reached (%s)' % answers.why(exc)


def read_image(image_proxy, wanted, retries):
    """(entry, None), or (None, why its properties are unknown)."""
    url = '/images/%s' % urllib.parse.quote(wanted, safe='')
    try:
        with answers.reading('Glance GET /v2%s' % url):
            response = image_proxy.get(url, connect_retries=retries)
            if response.status_code in (403, 404):
                return None, {403: 'Glance refused to show it (403)',
                              404: 'gone from Glance (404)'}[
                                  response.status_code]
            if response.status_code >= 400:
                return None, 'Glance answered HTTP %d' % response.status_code
            return image_entry(response.json(), wanted), None
    except answers.CollectError as exc:
        cause = exc.__cause__
        if isinstance(cause, ksa_exc.ConnectTimeout):
            return None, 'Glance timed out'
        if isinstance(cause, ksa_exc.ConnectionError):
            return None, 'no connection to Glance'
        return None, 'Glance\'s answer could not be used: %s' % (
            answers.short(exc))


def wanted_images(servers, limit):
    """(the image ids to read, {image id: why not read}) of Nova's
    servers: the images of the most servers first, at most limit."""
    counts = collections.Counter(i for i in map(image_id, servers) if i)
    ranked = sorted(counts, key=lambda i: (-counts[i], i))
    skipped = {i: 'not read: more than cloud.max_images (%d) images'
               % limit for i in ranked[limit:]}
    return ranked[:limit], skipped


def note(entries, servers, boot_volumes):
    """The snapshot's note on images whose properties are unknown, or
    None. entries: {image id: entry}; servers: {image id: how many
    servers}; boot_volumes: servers booted from a volume."""
    unknown = collections.Counter()
    for image, entry in entries.items():
        if entry.get('properties') is None:
            unknown[entry.get('why') or 'not read'] += servers.get(image, 0)
    ranked = [(why, count) for why, count in unknown.most_common() if count]
    parts = ['%s (%s)' % (_servers(count), why)
             for why, count in ranked[:SHOWN]]
    if len(ranked) > SHOWN:
        parts.append('%s (other reasons)' % _servers(
            sum(count for _, count in ranked[SHOWN:])))
    if boot_volumes:
        parts.append('%s booted from a volume (Cinder\'s, not read)'
                     % _servers(boot_volumes))
    if not parts:
        return None
    return 'image properties unknown for %s: they move only to ' \
        'hypervisors as capable as theirs' % ', '.join(parts)


def _servers(count):
    return '%d server%s' % (count, '' if count == 1 else 's')
