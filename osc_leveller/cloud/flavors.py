"""Read one flavor from Nova, for plan --make-room: the flavor of servers
not yet made, so no snapshot holds it unless a server already has it."""

from osc_leveller.cloud import answers
from osc_leveller.cloud import collect
from osc_leveller.cloud import document
from osc_leveller.core.model import model


class UnknownFlavor(answers.CollectError):
    """Nova has no flavor of that name or ID."""


def read(compute, ref, retries=collect.RETRIES):
    """The model.Flavor Nova names ref (name, else ID), public or not."""
    with answers.reading('Nova GET /flavors/detail'):
        found = collect.flavors(compute, retries)
        match = [f for f in found if f.get('name') == ref] or \
            [f for f in found if f.get('id') == ref]
        if len(match) > 1:
            raise UnknownFlavor('%d flavors of Nova are named %s: name it '
                                'by ID' % (len(match), ref))
        if not match:
            raise UnknownFlavor('Nova has no flavor named %s, nor of that '
                                'ID' % ref)
        shown = dict(match[0])
        # Nova shows ephemeral under its extension's name, no swap as "".
        shown.setdefault('ephemeral', shown.get('OS-FLV-EXT-DATA:ephemeral'))
        doc = document.flavor_of(shown)
        for field in ('vcpus', 'ram', 'disk', 'ephemeral', 'swap'):
            if doc[field] < 0:
                raise ValueError('flavor %s: %s %d is negative' % (
                    ref, field, doc[field]))
        return model.Flavor(
            name=doc['name'] or ref, vcpus=doc['vcpus'], ram=doc['ram'],
            disk=doc['disk'], ephemeral=doc['ephemeral'], swap=doc['swap'],
            extra_specs=model.frozen_mapping(doc['extra_specs']))
