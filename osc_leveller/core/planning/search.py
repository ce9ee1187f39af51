"""Single moves, best first: the planner's search step.

Each step takes, in a domain, the candidate that lowers its imbalance the
most per (RAM moved + a fixed per-migration cost) and passes every filter
against the state left by the moves before it. The hottest sources and the
coolest destinations are searched first, the rest only when nothing there
passes the filters. What the search needs of each server of a source is
kept in tables until a move touches that source: only the destinations'
parts and the domain's totals change under it.
"""

import dataclasses
import heapq

from osc_leveller.core.load import scoring
from osc_leveller.core.rules import policy

# Search the hottest sources and coolest destinations first; widen only when
# nothing there passes the filters.
FIRST_SOURCES = 4
FIRST_DESTINATIONS = 12


@dataclasses.dataclass(frozen=True)
class Single:
    """A candidate move of one server."""
    value: float  # imbalance drop per GiB moved
    server: str
    source: str
    destination: str
    gain: float  # drop of the domain's parts' SSE
    refused: tuple = None  # (hypervisor, reason): a better one that refused


class MoveSearch:
    """The best single moves of the planner's state, domain by domain."""

    def __init__(self, snapshot, state, rules, options):
        self.snapshot = snapshot
        self.state = state
        self.model = state.load_model
        self.rules = rules
        self.options = options
        # Filled host by host as the search reaches them: most hypervisors
        # are never a source.
        self._movable = {}  # hypervisor -> ids of servers that may move
        self._tables = {}  # hypervisor -> {host model: _table}
        self._loads = {}  # (hypervisor, host model) -> _loads_of

    def moved(self, *hosts):
        """Forget what a move on these hypervisors made stale."""
        for host in hosts:
            self._tables.pop(host, None)

    def best(self, domain, scores):
        """The best valid single move in a domain (a Single), or None.
        scores: {host: score} of the domain's hosts."""
        hot, cool = domain.hot(scores), domain.coolest(scores)
        tried = None
        for sources, dests in ((hot[:FIRST_SOURCES], cool[:FIRST_DESTINATIONS]),
                               (hot, cool)):
            if tried == (len(sources), len(dests)):
                break
            tried = (len(sources), len(dests))
            found = self._search(domain, sources, dests)
            if found is not None:
                return found
        return None

    def _search(self, domain, sources, dests):
        """The best valid move from sources to dests, or None.

        The candidates are taken best first, in the order a full sort
        would give, but a server's moves to a class of destinations (same
        host model, so the same load arrives) are only computed once an
        upper bound on their value could come first: the gain with the
        class's lowest parts. The bound runs the same floating-point
        operations on smaller operands, and rounding is monotone, so it is
        never below a computed gain. Most servers of a hot host never
        get past their bound.
        """
        min_gain = max(self.options.min_gain, 1e-12)
        hosts = self.model.hosts
        n = len(domain.hosts)
        total_c, total_r = domain.total
        total = total_c + total_r
        spread = domain.spread()
        sse = spread * spread * n
        # Covers ** 0.5 (libm pow) being monotone only to an ulp or so.
        slack = 1e-12 * spread
        parts = self.state.parts
        classes = {}
        for dst in dests:
            p_c, p_r = parts(dst)
            classes.setdefault(_model_of(hosts[dst]), []).append(
                (dst, p_c, p_r, p_c + p_r))
        classes = [(key, min(t[1] for t in targets),
                    max(t[1] for t in targets), min(t[2] for t in targets),
                    max(t[2] for t in targets), targets)
                   for key, targets in classes.items()]
        units = []
        heap = []
        for src in sources:
            for key, lo_c, hi_c, lo_r, hi_r, targets in classes:
                for unit in self._table(src, key):
                    (sid, cost, fixed, b_c, b_r, d_c, d_r, b, d_total,
                     score_fixed) = unit
                    if d_c or d_r:
                        shift = (2 * total_c * d_c + d_c * d_c
                                 + 2 * total_r * d_r + d_r * d_r) / n
                    else:  # what the line above gives, whatever the totals
                        shift = 0.0
                    q_c = lo_c if b_c >= 0 else hi_c
                    q_r = lo_r if b_r >= 0 else hi_r
                    bound = -(fixed + 2 * b_c * q_c + b_c * b_c
                              + 2 * b_r * q_r + b_r * b_r - shift)
                    if bound <= min_gain:
                        continue
                    drop = spread - (max(0.0, sse - bound) / n) ** 0.5
                    heap.append((-(drop + slack) / cost, 0, len(units)))
                    units.append((unit, src, shift, targets))
        heapq.heapify(heap)
        rejected = {}
        while heap:
            entry = heapq.heappop(heap)
            if entry[1] == 0:
                unit, src, shift, targets = units[entry[2]]
                (sid, cost, fixed, b_c, b_r, d_c, d_r, b, d_total,
                 score_fixed) = unit
                score_shift = (2 * total * d_total + d_total ** 2) / n
                for dst, p_c, p_r, p_sum in targets:
                    if dst == src:
                        continue
                    # _Domain.gain and _score_gain inlined, with the
                    # arithmetic of the bound above, operand for operand.
                    gain = -(fixed + 2 * b_c * p_c + b_c * b_c
                             + 2 * b_r * p_r + b_r * b_r - shift)
                    if gain > min_gain and -(
                            score_fixed + 2 * b * p_sum + b * b
                            - score_shift) >= 0:
                        # What the imbalance (a per-domain figure, averaged
                        # over domains) drops by, per GiB: comparable
                        # across domains of different sizes.
                        drop = spread - (max(0.0, sse - gain) / n) ** 0.5
                        heapq.heappush(heap, (-drop / cost, 1, sid, dst, src,
                                              gain))
                continue
            neg_value, _, sid, dst, src, gain = entry
            server = self.snapshot.server(sid)
            reason = policy.BALANCE.why_not_destination(
                server, self.snapshot.hypervisor(dst), self.state, self.rules)
            if reason is None:
                return Single(-neg_value, sid, src, dst, gain,
                              rejected.get(sid))
            rejected.setdefault(sid, (dst, reason))
        return None

    def _table(self, src, model):
        """What the search needs of each server of src that may still
        move, towards hosts of the given model: kept until a move touches
        src, as only the destinations' parts and the domain's totals change
        under it."""
        tables = self._tables.setdefault(src, {})
        table = tables.get(model)
        if table is None:
            s_c, s_r = self.state.parts(src)
            s_sum = s_c + s_r
            moved = self.state.moved
            table = tables[model] = [
                (sid, cost,
                 -2 * a_c * s_c + a_c * a_c - 2 * a_r * s_r + a_r * a_r,
                 b_c, b_r, d_c, d_r, b, d_total, -2 * a * s_sum + a * a)
                for sid, cost, a_c, a_r, a, b_c, b_r, d_c, d_r, b, d_total
                in self._loads_of(src, model) if sid not in moved]
        return table

    def _loads_of(self, src, model):
        """Per server of src that may move: its cost and the parts it
        takes from src and brings to a host of the given model."""
        loads = self._loads.get((src, model))
        if loads is not None:
            return loads
        loads = self._loads[src, model] = []
        host = self.model.hosts[src]
        cpu_coef, ram_coef, count_coef, measured = model
        for sid in self.movable_on(src):
            load = self.model.servers[sid]
            # LoadModel.amounts and server_parts, inlined.
            if host.mode == scoring.METRICS:
                a_c = host.cpu_coef * load.cores + host.count_coef
                a_r = host.ram_coef * load.ram_mb
            else:
                a_c = host.cpu_coef * load.vcpus + host.count_coef
                a_r = host.ram_coef * load.alloc_ram_mb
            if measured:
                b_c = cpu_coef * load.cores + count_coef
                b_r = ram_coef * load.ram_mb
            else:
                b_c = cpu_coef * load.vcpus + count_coef
                b_r = ram_coef * load.alloc_ram_mb
            a, b = a_c + a_r, b_c + b_r
            loads.append((
                sid, self.snapshot.server(sid).ram_gb
                + self.options.move_cost_gb, a_c, a_r, a, b_c, b_r,
                b_c - a_c, b_r - a_r, b, b - a))
        return loads

    def movable_on(self, host):
        """Servers of an in-scope hypervisor that may move at all."""
        ids = self._movable.get(host)
        if ids is None:
            ids = self._movable[host] = [
                s.id for s in self.snapshot.servers_on(host)
                if not policy.BALANCE.why_not(s, self.rules)]
        return ids

    def free(self, host):
        """Servers of a host the planner may still move."""
        return [sid for sid in self.movable_on(host)
                if sid not in self.state.moved]


def _model_of(host):
    """Hosts alike for the load a server brings: same mode, coefficients."""
    return host.cpu_coef, host.ram_coef, host.count_coef, \
        host.mode == scoring.METRICS
