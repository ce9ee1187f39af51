"""Exchanges: when no single move helps a domain above the threshold.

The cool hosts may be full, or any one server may overshoot. Then a server
of a hot host trades places with a smaller or quieter one of a cool host;
the path finder (core/planning/paths.py) orders the two moves, parking one on a
third hypervisor when neither host has room first.
"""

import dataclasses

from osc_leveller.core.planning import paths
from osc_leveller.core.rules import n_plus_one
from osc_leveller.core.rules import policy

# Pairs of the hottest and coolest hosts, and how many of the best pairs of
# servers get a path search.
EXCHANGE_SOURCES = 2
EXCHANGE_DESTINATIONS = 6
EXCHANGE_TRIES = 20
# The busiest servers of a hot host, the quietest of a cool one: the pairs
# that can gain most, and a bound on the search on crowded hosts.
EXCHANGE_SERVERS = 32


@dataclasses.dataclass(frozen=True)
class Exchange:
    """A candidate exchange: its moves in a valid order."""
    value: float  # imbalance drop per GiB moved
    sequence: tuple  # (server id, hypervisor), parking moves included
    pair: tuple  # (server a, server b, a's host, b's host)


def best(snapshot, state, rules, options, domain, scores, free):
    """The best Exchange of two servers between a hot and a cool host of
    the domain that a valid sequence of moves reaches, or None.

    scores: {host: score} of the domain's hosts; free(host): the servers
    of a host the planner may still move.
    """
    mean = domain.mean()
    hot = domain.hot(scores)[:EXCHANGE_SOURCES]
    cool = [h for h in domain.coolest(scores)
            if scores[h] < mean][:EXCHANGE_DESTINATIONS]
    n = len(domain.hosts)
    spread = domain.spread()
    sse = spread * spread * n
    parts = state.load_model.server_parts
    min_gain = max(options.min_gain, 1e-12)
    candidates = []
    for src in hot:
        src_parts = state.parts(src)
        outs = sorted(free(src), key=lambda sid: (
            -sum(parts(sid, src)), sid))[:EXCHANGE_SERVERS]
        for dst in cool:
            dst_parts = state.parts(dst)
            ins = sorted(free(dst), key=lambda sid: (
                sum(parts(sid, dst)), sid))[:EXCHANGE_SERVERS]
            going = [(a, parts(a, src), parts(a, dst)) for a in outs]
            coming = [(b, parts(b, dst), parts(b, src)) for b in ins]
            for a, a_out, a_in in going:
                for b, b_out, b_in in coming:
                    # src gives a and takes b; dst the other way round.
                    out = (a_out[0] - b_in[0], a_out[1] - b_in[1])
                    into = (a_in[0] - b_out[0], a_in[1] - b_out[1])
                    gain = domain.gain(src_parts, out, dst_parts, into)
                    lost, taken = sum(out), sum(into)
                    # Like a single move (and as apply re-checks it),
                    # the hotter host must end cooler.
                    if gain <= min_gain or max(
                            scores[src] - lost,
                            scores[dst] + taken) >= scores[src] or \
                            domain.score_gain(scores[src], lost,
                                              scores[dst], taken) <= 0:
                        continue
                    drop = spread - (max(0.0, sse - gain) / n) ** 0.5
                    candidates.append((-drop, a, b, src, dst))
    candidates.sort()
    for neg_drop, a, b, src, dst in candidates[:EXCHANGE_TRIES]:
        try:
            sequence = paths.sequence(snapshot, {a: dst, b: src}, options,
                                      state, rules, (a, b), policy.BALANCE)
        except paths.PathError:
            continue
        if n_plus_one.exchange_breaks(state, rules, sequence):
            continue
        cost = sum(snapshot.server(sid).ram_gb
                   + options.move_cost_gb for sid, _ in sequence)
        return Exchange(-neg_drop / cost, tuple(sequence), (a, b, src, dst))
    return None
