"""Plan live migrations that lower the imbalance the most per GiB moved.

Greedy best-move search, one balancing domain at a time. Within a domain
(AZ x CPU class) the objective is the sum of squared deviations from the
domain mean (SSE) of each part of the host score, CPU and RAM; a move changes
exactly two hosts by amounts the LoadModel knows in advance, so its gain is
O(1) to compute. Each step takes, across domains, the candidate that lowers
its domain's imbalance the most per (RAM moved + a fixed per-migration cost)
and passes every filter against the state left by the moves before it, so
every intermediate state is valid. Only the domain a move touched is
searched again; a domain below the threshold is left alone.

When no single move helps a domain above the threshold (the cool hosts are
full, or any one server would overshoot), the planner looks for an
exchange: a server of a hot host trades places with a smaller or quieter
one of a cool host. The path finder (core/paths.py) orders the two moves,
parking one on a third hypervisor when neither host has room first.
"""

import dataclasses
import heapq
import time

from osc_leveller.core import filters
from osc_leveller.core import options as opts
from osc_leveller.core import paths
from osc_leveller.core import plan as plan_mod
from osc_leveller.core import policy
from osc_leveller.core import scoring
from osc_leveller.core import state as state_mod

# Search the hottest sources and coolest destinations first; widen only when
# nothing there passes the filters.
FIRST_SOURCES = 4
FIRST_DESTINATIONS = 12
# Exchanges: pairs of the hottest and coolest hosts, and how many of the
# best pairs of servers get a path search.
EXCHANGE_SOURCES = 2
EXCHANGE_DESTINATIONS = 6
EXCHANGE_TRIES = 20
# The busiest servers of a hot host, the quietest of a cool one: the pairs
# that can gain most, and a bound on the search on crowded hosts.
EXCHANGE_SERVERS = 32


class _Domain:
    """Running sums of one domain's host scores, split by dimension.

    A host's score is the sum of its CPU part and its RAM part (see
    scoring.LoadModel); the planner minimises the SSE of each part, so a host
    hot on RAM and idle on CPU does not pass for balanced.
    """

    def __init__(self, name, hosts, state):
        self.name = name
        self.hosts = hosts
        self.total = [0.0, 0.0]
        self.squares = [0.0, 0.0]
        self.cross = 0.0  # sum of cpu part x ram part, for the score's std
        for h in hosts:
            self.update((0.0, 0.0), state.parts(h))
        self.best = None  # cached best candidate, None when none is left

    def mean(self):
        return sum(self.total) / len(self.hosts)

    def std(self):
        """Standard deviation of the host scores (parts summed)."""
        n = len(self.hosts)
        total = self.total[0] + self.total[1]
        squares = self.squares[0] + self.squares[1] + 2 * self.cross
        return (max(0.0, squares - total ** 2 / n) / n) ** 0.5

    def spread(self):
        """sqrt of the parts' SSE per host: what a move's drop is of."""
        n = len(self.hosts)
        sse = sum(self.squares[i] - self.total[i] ** 2 / n for i in (0, 1))
        return (max(0.0, sse) / n) ** 0.5

    def gain(self, src, a, dst, b):
        """Reduction of the parts' SSE when a host with parts src loses
        parts a and one with parts dst gains parts b."""
        n = len(self.hosts)
        result = 0.0
        for i in (0, 1):
            d_total = b[i] - a[i]
            result -= (-2 * a[i] * src[i] + a[i] * a[i] + 2 * b[i] * dst[i]
                       + b[i] * b[i] - (2 * self.total[i] * d_total
                                        + d_total ** 2) / n)
        return result

    def update(self, old, new):
        for i in (0, 1):
            self.total[i] += new[i] - old[i]
            self.squares[i] += new[i] * new[i] - old[i] * old[i]
        self.cross += new[0] * new[1] - old[0] * old[1]


class Planner:
    def __init__(self, snapshot, options):
        self.snapshot = snapshot
        self.options = options.validate()
        self.state = state_mod.new_state(snapshot, options.weights)
        self.model = self.state.load_model
        self.rules = filters.Rules(snapshot, options)
        self.scope = [h.name for h in snapshot.hypervisors
                      if self._in_scope(h)]
        self.by_model = options.cpu_compatibility == opts.CPU_MODEL
        self.domain_of = {
            h: scoring.domain_of(snapshot.hypervisor(h), self.by_model)
            for h in self.scope}
        self.exchanges = 0
        # Filled host by host as the search reaches them: most hypervisors
        # are never a source.
        self._movable = {}  # hypervisor -> ids of servers that may move
        self._tables = {}  # hypervisor -> {host model: _moves_of}
        self._loads = {}  # (hypervisor, host model) -> _loads_of

    def _in_scope(self, hyp):
        return hyp.usable and filters.in_scope(hyp, self.options)

    def stats(self):
        scores = {h: self.state.score(h) for h in self.scope}
        return scoring.domain_stats(scores, self.domain_of)

    def plan(self):
        started = time.time()
        before = self.stats()
        groups = {}
        for host in self.scope:
            groups.setdefault(self.domain_of[host], []).append(host)
        groups = {name: sorted(hosts) for name, hosts in groups.items()
                  if len(hosts) > 1}
        domains = [_Domain(name, hosts, self.state)
                   for name, hosts in sorted(groups.items())]
        active = [d for d in domains if d.std() >= self.options.threshold]
        moves = []
        last_wave = {}
        for domain in active:
            domain.best = self._best(domain)
        while len(moves) < self.options.max_moves:
            ready = [d for d in active if d.best is not None]
            if not ready:
                break
            domain = max(ready, key=lambda d: (d.best['value'], d.name))
            best = domain.best
            if 'sequence' not in best:
                moves.append(self._apply(domain, best, last_wave))
            elif len(best['sequence']) <= \
                    self.options.max_moves - len(moves):
                moves.extend(self._exchange(domain, best, last_wave))
            else:  # the exchange does not fit in --max-moves
                domain.best = None
                continue
            # A domain brought below the threshold is left alone, as the
            # next run would leave it: no moves for little gain.
            domain.best = self._best(domain) \
                if domain.std() >= self.options.threshold else None
        moves = self._in_wave_order(moves, groups)
        after = self.stats()
        return plan_mod.Plan(
            moves=tuple(moves),
            imbalance_before=scoring.pooled_imbalance(before),
            imbalance_after=scoring.pooled_imbalance(after),
            domains=tuple(
                {'domain': b.domain, 'hosts': b.hosts,
                 'before': b.imbalance, 'after': a.imbalance,
                 'moves': sum(1 for m in moves if m.domain == b.domain)}
                for b, a in zip(before, after)),
            fingerprint=plan_mod.fingerprint(self.snapshot),
            snapshot_taken_at=self.snapshot.taken_at,
            snapshot_source=dict(self.snapshot.source),
            options=opts.to_document(self.options),
            created_at=started,
            note=self._note(before, active, moves))

    def _in_wave_order(self, moves, groups):
        """The moves wave by wave, their figures recomputed in that order.

        Moves of one wave share no hypervisor, and a move's validity depends
        only on the moves before it on its two hypervisors, so this order is
        as valid as the planning order, and it is the order apply runs.
        """
        ordered = sorted(moves, key=lambda m: m.wave)  # stable
        state = state_mod.State(self.snapshot, self.model)
        domains = {name: _Domain(name, hosts, state)
                   for name, hosts in groups.items()}
        result = []
        for move in ordered:
            domain = domains[move.domain]
            src, dst = move.source, move.destination
            before = (domain.std(), state.score(src), state.score(dst))
            src_parts, dst_parts = state.parts(src), state.parts(dst)
            gain = domain.gain(src_parts,
                               self.model.server_parts(move.server_id, src),
                               dst_parts,
                               self.model.server_parts(move.server_id, dst))
            state.apply(move.server_id, dst)
            domain.update(src_parts, state.parts(src))
            domain.update(dst_parts, state.parts(dst))
            result.append(dataclasses.replace(
                move, gain=gain, imbalance=(before[0], domain.std()),
                source_score=(before[1], state.score(src)),
                destination_score=(before[2], state.score(dst))))
        return result

    def _note(self, before, active, moves):
        if moves:
            return ''
        if not before:
            return 'no enabled hypervisors in scope'
        if not active:
            worst = max(before, key=lambda s: s.imbalance)
            return ('imbalance is below the threshold %g in every domain '
                    '(highest: %.3f in %s)' % (self.options.threshold,
                                               worst.imbalance, worst.domain))
        if self.options.max_moves == 0:
            return '--max-moves is 0'
        return 'no move passes the filters and gains at least %g' % \
            self.options.min_gain

    def _best(self, domain):
        """The best valid move in a domain, or None."""
        scores = {h: self.state.score(h) for h in domain.hosts}
        mean = domain.mean()
        hot = sorted((h for h in domain.hosts if scores[h] > mean),
                     key=lambda h: (-scores[h], h))
        cool = sorted(domain.hosts, key=lambda h: (scores[h], h))
        tried = None
        for sources, dests in ((hot[:FIRST_SOURCES], cool[:FIRST_DESTINATIONS]),
                               (hot, cool)):
            if tried == (len(sources), len(dests)):
                break
            tried = (len(sources), len(dests))
            found = self._search(domain, sources, dests)
            if found is not None:
                return found
        return self._best_exchange(domain, scores)

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
                for unit in self._moves_of(src, key):
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
            reason = filters.why_not_destination(
                server, self.snapshot.hypervisor(dst), self.state, self.rules)
            if reason is None:
                return {'value': -neg_value, 'server': sid, 'source': src,
                        'destination': dst, 'gain': gain,
                        'refused': rejected.get(sid)}
            rejected.setdefault(sid, (dst, reason))
        return None

    def _moves_of(self, src, model):
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
        cpu_coef, ram_coef, measured = model
        for sid in self._movable_on(src):
            load = self.model.servers[sid]
            # LoadModel.amounts and parts, inlined.
            if host.mode == scoring.METRICS:
                a_c = host.cpu_coef * load.cores
                a_r = host.ram_coef * load.ram_mb
            else:
                a_c = host.cpu_coef * load.vcpus
                a_r = host.ram_coef * load.alloc_ram_mb
            if measured:
                b_c = cpu_coef * load.cores
                b_r = ram_coef * load.ram_mb
            else:
                b_c = cpu_coef * load.vcpus
                b_r = ram_coef * load.alloc_ram_mb
            a, b = a_c + a_r, b_c + b_r
            loads.append((
                sid, self.snapshot.server(sid).ram_gb
                + self.options.move_cost_gb, a_c, a_r, a, b_c, b_r,
                b_c - a_c, b_r - a_r, b, b - a))
        return loads

    @staticmethod
    def _score_gain(domain, s_src, a, s_dst, b):
        """The SSE reduction of the scores themselves: the parts may even
        out while the scores spread (a CPU-hot host taking RAM load), and
        the imbalance shown is the scores' std, so no move may raise it."""
        n = len(domain.hosts)
        total = domain.total[0] + domain.total[1]
        d_total = b - a
        return -(-2 * a * s_src + a * a + 2 * b * s_dst + b * b
                 - (2 * total * d_total + d_total ** 2) / n)

    def _best_exchange(self, domain, scores):
        """The best exchange of two servers between a hot and a cool host
        that a valid sequence of moves reaches, or None."""
        mean = domain.mean()
        hot = sorted((h for h in domain.hosts if scores[h] > mean),
                     key=lambda h: (-scores[h], h))[:EXCHANGE_SOURCES]
        cool = sorted((h for h in domain.hosts if scores[h] < mean),
                      key=lambda h: (scores[h], h))[:EXCHANGE_DESTINATIONS]
        n = len(domain.hosts)
        spread = domain.spread()
        sse = spread * spread * n
        parts = self.model.server_parts
        min_gain = max(self.options.min_gain, 1e-12)
        candidates = []
        for src in hot:
            src_parts = self.state.parts(src)
            outs = sorted(self._free(src), key=lambda sid: (
                -sum(parts(sid, src)), sid))[:EXCHANGE_SERVERS]
            for dst in cool:
                dst_parts = self.state.parts(dst)
                ins = sorted(self._free(dst), key=lambda sid: (
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
                                self._score_gain(domain, scores[src], lost,
                                                 scores[dst], taken) <= 0:
                            continue
                        drop = spread - (max(0.0, sse - gain) / n) ** 0.5
                        candidates.append((-drop, a, b, src, dst))
        candidates.sort()
        for neg_drop, a, b, src, dst in candidates[:EXCHANGE_TRIES]:
            try:
                sequence = paths.sequence(
                    self.snapshot, {a: dst, b: src}, self.options,
                    self.state, self.rules, (a, b), policy.BALANCE)
            except paths.PathError:
                continue
            cost = sum(self.snapshot.server(sid).ram_gb
                       + self.options.move_cost_gb for sid, _ in sequence)
            return {'value': -neg_drop / cost, 'sequence': sequence,
                    'pair': (a, b, src, dst)}
        return None

    def _movable_on(self, host):
        """Servers of an in-scope hypervisor that may move at all."""
        ids = self._movable.get(host)
        if ids is None:
            ids = self._movable[host] = [
                s.id for s in self.snapshot.servers_on(host)
                if not policy.BALANCE.why_not(s, self.rules)]
        return ids

    def _free(self, host):
        """Servers of a host the planner may still move."""
        return [sid for sid in self._movable_on(host)
                if sid not in self.state.moved]

    def _exchange(self, domain, best, last_wave):
        """The moves of an exchange, applied to the state."""
        a, b, src, dst = best['pair']
        self.exchanges += 1
        label = 'exchange %d' % self.exchanges
        before = {h: self.state.score(h) for h in (src, dst)}
        mean = domain.mean()
        moves = []
        for sid, there in best['sequence']:
            server = self.snapshot.server(sid)
            final = dst if sid == a else src
            if there != final:
                role = 'parking: %s waits on %s, then goes on to %s' % (
                    server.label, there, final)
            else:
                role = 'this move takes %s to %s' % (server.label, there)
            moves.append(self._apply(domain, {
                'server': sid, 'source': self.state.host_of(sid),
                'destination': there, 'gain': 0.0, 'refused': None},
                last_wave, reason=role))
        server_a, server_b = self.snapshot.server(a), self.snapshot.server(b)
        summary = ('%s: %s has score %.2f (domain mean %.2f) and no single '
                   'move lowers the imbalance, so %s (%s) trades places with '
                   '%s (%s) on %s; together they take %s %.2f -> %.2f and %s '
                   '%.2f -> %.2f' % (
                       label, src, before[src], mean, server_a.label,
                       _describe(server_a, self.model), server_b.label,
                       _describe(server_b, self.model), dst, src,
                       before[src], self.state.score(src), dst, before[dst],
                       self.state.score(dst)))
        return [dataclasses.replace(m, exchange=label,
                                    reason='%s; %s' % (summary, m.reason))
                for m in moves]

    def _apply(self, domain, best, last_wave, reason=None):
        sid, src, dst = best['server'], best['source'], best['destination']
        server = self.snapshot.server(sid)
        std_before = domain.std()
        src_before, dst_before = self.state.score(src), self.state.score(dst)
        src_parts, dst_parts = self.state.parts(src), self.state.parts(dst)
        hottest = max(domain.hosts, key=lambda h: (self.state.score(h), h))
        mean = domain.mean()
        self.state.apply(sid, dst)
        self._tables.pop(src, None)
        self._tables.pop(dst, None)
        src_after, dst_after = self.state.score(src), self.state.score(dst)
        domain.update(src_parts, self.state.parts(src))
        domain.update(dst_parts, self.state.parts(dst))
        wave = max(last_wave.get(src, 0), last_wave.get(dst, 0)) + 1
        last_wave[src] = last_wave[dst] = wave
        dest_host = self.snapshot.hypervisor(dst).host
        if reason is not None:  # part of an exchange
            reason += '; %s goes %.2f -> %.2f' % (
                dest_host, dst_before, dst_after)
        else:
            why = ('hottest in %s' % domain.name if hottest == src
                   else 'above the mean of %s' % domain.name)
            reason = ('%s: score %.2f, domain mean %.2f; moving %s (%s) '
                      'takes it to %.2f; %s goes %.2f -> %.2f, the best gain '
                      'per GiB moved among hypervisors that accept it' % (
                          why, src_before, mean, server.label,
                          _describe(server, self.model), src_after,
                          dest_host, dst_before, dst_after))
        if best['refused'] is not None:
            refused, why_refused = best['refused']
            reason += ' (%s refused: %s)' % (
                self.snapshot.hypervisor(refused).host, why_refused)
        return plan_mod.Move(
            server_id=sid, server_name=server.name, source=src,
            destination=dst,
            destination_host=dest_host,
            wave=wave, domain=domain.name, ram_gb=server.ram_gb,
            gain=best['gain'], source_score=(src_before, src_after),
            destination_score=(dst_before, dst_after),
            imbalance=(std_before, domain.std()), reason=reason)

    def explain(self, server):
        """Rows (hypervisor, domain, score, verdict, reason) for one server."""
        current = self.state.host_of(server.id)
        refusal = policy.BALANCE.why_not(server, self.rules)
        rows = []
        for hyp in self.snapshot.hypervisors:
            score = self.state.score(hyp.name)
            domain = scoring.domain_of(hyp, self.by_model)
            if hyp.name == current:
                rows.append((hyp.name, domain, score, 'current',
                             refusal or 'the server may move'))
                continue
            reason = filters.why_not_destination(server, hyp, self.state,
                                                 self.rules)
            if reason:
                rows.append((hyp.name, domain, score, 'rejected', reason))
                continue
            after = score + self.model.delta(server.id, hyp.name)
            rows.append((hyp.name, domain, score, 'accepted',
                         'score would be %.2f -> %.2f' % (score, after)))
        order = {'current': 0, 'accepted': 1, 'rejected': 2}
        rows.sort(key=lambda r: (order[r[3]], r[2], r[0]))
        return refusal, rows


def _model_of(host):
    """Hosts alike for the load a server brings: same mode, coefficients."""
    return host.cpu_coef, host.ram_coef, host.mode == scoring.METRICS


def _describe(server, load_model):
    load = load_model.servers[server.id]
    text = '%d vCPU, %g GiB' % (load.vcpus, round(server.ram_gb, 1))
    if server.usage.cpu is not None:
        text += ', %d%% CPU busy' % round(server.usage.cpu * 100)
    return text


def make_plan(snapshot, options):
    return Planner(snapshot, options).plan()
