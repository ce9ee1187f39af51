"""Why a domain above the threshold gets no move: what holds it back.

When the planner finds no move, single or exchange, for a domain still above
the threshold, the operator should not have to guess: the servers of its
hottest hypervisors either may not move at all (the policy's reasons), or
every destination refuses them (the filters' reasons), or a move would
not even out the load. The reason most candidate moves meet is named, with
the limiting resource when it is capacity ("RAM allocation of hv07: 754 of
764 GiB allocated").
"""

import collections

from osc_leveller.core.model import model

# What is looked at, as the search starts: the hottest hypervisors, their
# busiest servers, towards the coolest ones; enough to name what holds the
# domain, at a bounded cost on large domains.
SOURCES = 4
SERVERS = 16
DESTINATIONS = 50
CAPACITY = 'capacity'  # its code in filters.RULES
# Placement resource classes by what an operator calls them.
RESOURCES = {model.MEMORY_MB: ('RAM', 1024.0, ' GiB'),
             model.VCPU: ('vCPU', 1.0, ''),
             model.PCPU: ('dedicated CPU', 1.0, ''),
             model.DISK_GB: ('disk', 1.0, ' GiB')}


def why_held(snapshot, state, rules, policy, domain):
    """A sentence saying what keeps any move of the domain from happening.

    domain: an objective.Domain (its hosts); policy: who may move.
    """
    scores = {h: state.score(h) for h in domain.hosts}
    hot = domain.hot(scores)[:SOURCES]
    cool = domain.coolest(scores)[:DESTINATIONS]
    parts = state.load_model.server_parts
    staying = collections.Counter()
    refused = collections.Counter()
    example = {}
    tried = 0
    for src in hot:
        servers = sorted((s for s in snapshot.servers_on(src)
                          if s.id not in state.moved),
                         key=lambda s: (-sum(parts(s.id, src)), s.id))
        for server in servers[:SERVERS]:
            why = policy.why_not(server, rules)
            if why:
                staying[_what(why)] += 1
                continue
            for dst in cool:
                if dst == src:
                    continue
                tried += 1
                why = policy.why_not_destination(
                    server, snapshot.hypervisor(dst), state, rules)
                kind = _what(why) if why else 'no gain'
                refused[kind] += 1
                example.setdefault(kind, (dst, why))
    if not tried:
        return 'no server of its hottest hypervisors (%s) may move (%s)' % (
            ', '.join(hot), _counted(staying) or 'they host none')
    kind, count = refused.most_common(1)[0]
    if kind == 'no gain':
        return 'of the %d moves from its hottest hypervisors (%s), the %d ' \
            'the filters allow would not even out the load' % (
                tried, ', '.join(hot), count)
    dst, why = example[kind]
    return '%s refuses %d of the %d moves from its hottest hypervisors ' \
        '(%s): %s' % (kind, count, tried, ', '.join(hot),
                      _limit(snapshot, state, domain, why.resource, scores)
                      or 'for example %s: %s' % (dst, why))


def _limit(snapshot, state, domain, rc, scores):
    """'RAM allocation of hv07: 754 of 764 GiB allocated' for a resource
    rc that is full, on the coolest hypervisor of the domain, or None."""
    if rc is None:
        return None
    name, unit, suffix = RESOURCES.get(rc, (rc, 1.0, ''))
    coolest = min(domain.hosts, key=lambda h: (scores[h], h))
    inv = snapshot.hypervisor(coolest).inventories.get(rc)
    if inv is None:
        return None
    return '%s allocation of %s, the coolest: %g of %g%s allocated' % (
        name, coolest, round(state.usage(coolest, rc) / unit, 1),
        round(inv.capacity / unit, 1), suffix)


def _what(refusal):
    """What refuses, by the refusal's code: the rule ('cooldown', 'server
    groups'); for capacity, the resource that is full ('MEMORY_MB full'),
    or the inventory's limit (its whole sentence)."""
    if refusal.resource is not None:
        return '%s full' % refusal.resource
    if refusal.code == CAPACITY:
        return str(refusal)
    return refusal.code.replace('_', ' ')


def _counted(kinds):
    return ', '.join('%d held by %s' % (n, kind)
                     for kind, n in kinds.most_common(3))
