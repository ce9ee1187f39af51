"""Plan live migrations that lower the imbalance the most per GiB moved.

The planner is a pipeline, one balancing domain (AZ x CPU class) at a
time:

1. classify: the hypervisors in scope, grouped into domains; a domain
   below the threshold is left alone, one above it is levelled down to the
   target (hysteresis: a domain hovering at the threshold is not nudged at
   every run);
2. objective (core/planning/objective.py): each domain's imbalance and what a move
   gains, from running sums;
3. search (core/planning/search.py): the best valid single move per GiB moved;
4. exchanges (core/planning/exchanges.py): when no single move helps a domain above
   the threshold, two servers trade places;
5. ordering: the moves grouped into waves (plan.Waves), their figures
   recomputed in the order apply runs them.

A snapshot read with lasting figures is planned on the load that lasted
(core/load/lasting.py), and a domain above the threshold only for the moment is
left alone, saying so. So is a domain whose metrics the guard finds
implausible (core/load/guard.py: held, its reason given).

A domain's best candidate is taken only if it pays for itself: it takes
off at least min_drop of the domain's imbalance, plus min_drop_per_gb for
each GiB of RAM it copies, both times 2 / n for a domain of n hypervisors:
a move evens out two of them, so in a large domain each takes off a small
part. Otherwise levelling that domain stops there.

Each step takes, across domains, the best candidate and applies it to the
state, so every intermediate state passes every filter; only the domain a
move touched is searched again.
"""

import collections
import dataclasses
import time

from osc_leveller.core.load import forecast
from osc_leveller.core.load import scoring
from osc_leveller.core.load import state as state_mod
from osc_leveller.core.planning import context
from osc_leveller.core.planning import exchanges
from osc_leveller.core.planning import held
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import objective
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.planning import search
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import n_plus_one
from osc_leveller.core.rules import policy
from osc_leveller.core.settings import options as opts


class Planner:
    def __init__(self, snapshot, options, held=None):
        """held: {domain: why} of the domains the guard holds (core/load/guard.py
        held()): nothing is planned there."""
        self.guarded = dict(held or {})
        self.options = options.validate()
        self.by_model = options.by_model
        self.context = context.Context(snapshot, self.options,
                                       kinds.BALANCE.load)
        self.measured = snapshot
        snapshot = self.snapshot = self.context.snapshot
        self.state = self.context.state  # where N+1 is kept, if asked
        self.model = self.state.load_model
        self.rules = self.context.rules
        self.search = search.MoveSearch(snapshot, self.state, self.rules,
                                        self.options)
        self.exchanges = 0
        # Classify: the usable hypervisors in scope, and their domains.
        self.scope = [h.name for h in snapshot.hypervisors
                      if h.usable and filters.in_scope(h, self.options)]
        self.domain_of = {
            h: scoring.domain_of(snapshot.hypervisor(h), self.by_model)
            for h in self.scope}

    def stats(self, state=None):
        """The DomainStats of the planned state, or of state."""
        state = state or self.state
        scores = {h: state.score(h) for h in self.scope}
        return scoring.domain_stats(scores, self.domain_of)

    def plan(self):
        started = time.time()
        before = self.stats()
        groups = {}
        for host in self.scope:
            groups.setdefault(self.domain_of[host], []).append(host)
        groups = {name: sorted(hosts) for name, hosts in groups.items()
                  if len(hosts) > 1}
        domains = [objective.Domain(name, hosts, self.state)
                   for name, hosts in sorted(groups.items())]
        above = [d for d in domains if d.std() >= self.options.threshold]
        active = [d for d in above if d.name not in self.guarded]
        moves = []
        waves = plan_mod.Waves()
        best = {d.name: self._best(d) for d in active}
        limited = set()  # domains left for --max-moves, not held back
        unpaid = {}  # domain -> why its best move is not worth making
        targets = self.targets()
        while len(moves) < self.options.max_moves:
            ready = [d for d in active if best[d.name] is not None]
            if not ready:
                break
            domain = max(ready, key=lambda d: (best[d.name].value, d.name))
            found = best[domain.name]
            why = self._unpaid(domain, found)
            if why:
                unpaid[domain.name] = why
                best[domain.name] = None
                continue
            if isinstance(found, search.Single):
                moves.append(self._apply(domain, found, waves))
            elif len(found.sequence) <= self.options.max_moves - len(moves):
                moves.extend(self._exchange(domain, found, waves))
            else:  # the exchange does not fit in --max-moves
                best[domain.name] = None
                limited.add(domain.name)
                continue
            best[domain.name] = self._best(domain) \
                if domain.std() >= targets[domain.name] else None
        moves = self._in_wave_order(moves, groups)
        # Above the threshold with nothing left to try: say what holds it.
        held_back = {
            d.name: unpaid.get(d.name) or held.why_held(
                self.snapshot, self.state, self.rules, policy.BALANCE, d)
            for d in active if best[d.name] is None and d.name not in
            limited and d.std() >= self.options.threshold}
        held_back.update(self._momentary(before))
        held_back.update(self.guarded)
        return plan_mod.build(self.snapshot, self.options, moves, before,
                              self.stats(), started,
                              note=self._note(before, above, moves),
                              targets=targets,
                              held=held_back, lost=self._lost(groups),
                              forecast=forecast.skills(self.measured,
                                                       self.by_model))

    def _lost(self, groups):
        """{domain: why}: the domains in scope that had no N+1 to keep
        when planning started (keep_n_plus_one)."""
        if not self.options.keep_n_plus_one:
            return {}
        lost = n_plus_one.guard_of(self.state, self.rules).lost
        return {name: lost[name].why() for name in groups if name in lost}

    def _momentary(self, before):
        """{domain: why}: above the threshold now, not on the load planned
        on (the load that lasted, the load to come)."""
        if self.measured is self.snapshot:
            return {}
        now = self.stats(self.context.state_now())
        return forecast.held(now, before, self.options.threshold,
                             self.measured, self.by_model)

    def target(self):
        """The imbalance a domain above the threshold is brought down to,
        without forecast_target."""
        return opts.target_of(self.options.threshold, self.options.target)

    def targets(self):
        """{domain: its target}: forecast_target where the forecast has
        weight, when set."""
        base, deeper = self.target(), self.options.forecast_target
        weighing = forecast.weighing(self.measured, self.by_model) \
            if deeper is not None else ()
        return collections.defaultdict(lambda: base, dict.fromkeys(
            weighing, deeper))

    def _unpaid(self, domain, found):
        """Why a candidate does not pay for itself, or None: it must take
        off min_drop of the domain's imbalance plus min_drop_per_gb for each
        GiB it copies, times 2 / the domain's hypervisors."""
        options = self.options
        if not options.min_drop and not options.min_drop_per_gb:
            return None
        before = domain.std()
        if isinstance(found, search.Single):
            src, dst, sid = found.source, found.destination, found.server
            s_old, d_old = self.state.parts(src), self.state.parts(dst)
            a = self.model.server_parts(sid, src)
            b = self.model.server_parts(sid, dst)
            after = domain.std_after([
                (s_old, (s_old[0] - a[0], s_old[1] - a[1])),
                (d_old, (d_old[0] + b[0], d_old[1] + b[1]))])
            ids = [sid]
            what = '%s from %s to %s' % (self.snapshot.server(sid).label,
                                         src, dst)
        else:
            state = self.state.copy()
            for sid, there in found.sequence:
                state.apply(sid, there)
            after = objective.Domain(domain.name, domain.hosts, state).std()
            ids = [sid for sid, _ in found.sequence]
            a, b, src, dst = found.pair
            what = 'an exchange of %s (%s) and %s (%s)' % (
                self.snapshot.server(a).label, src,
                self.snapshot.server(b).label, dst)
        gib = sum(self.snapshot.server(sid).ram_gb for sid in ids)
        n = len(domain.hosts)
        share = (options.min_drop + options.min_drop_per_gb * gib) * 2 / n
        if before > 0 and before - after >= before * share:
            return None
        return ('its best move, %s, would take the imbalance %.3f -> %.3f '
                '(%.1f %%), less than the %.1f %% that moving %g GiB must '
                '(min_drop %g + min_drop_per_gb %g a GiB, x 2 / %d '
                'hypervisors)' % (
                    what, before, after, 100 * (before - after) / before
                    if before else 0.0, 100 * share, round(gib, 1),
                    options.min_drop, options.min_drop_per_gb, n))

    def _best(self, domain):
        """The best candidate of a domain: a single move, else an
        exchange, else None."""
        scores = {h: self.state.score(h) for h in domain.hosts}
        return self.search.best(domain, scores) or exchanges.best(
            self.snapshot, self.state, self.rules, self.options, domain,
            scores, self.search.free)

    def _in_wave_order(self, moves, groups):
        """The moves wave by wave, their figures recomputed in that order.

        Moves of one wave share no hypervisor, and a move's validity depends
        only on the moves before it on its two hypervisors, so this order is
        as valid as the planning order, and it is the order apply runs.
        """
        ordered = sorted(moves, key=lambda m: m.wave)  # stable
        state = state_mod.State(self.snapshot, self.model)
        domains = {name: objective.Domain(name, hosts, state)
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
        if all(d.name in self.guarded for d in active):
            return 'implausible metrics hold every domain above the ' \
                'threshold (see the Held lines)'
        if self.options.max_moves == 0:
            return '--max-moves is 0'
        return 'no move passes the filters and gains at least %g' % \
            self.options.min_gain

    def _exchange(self, domain, best, waves):
        """The moves of an exchange, applied to the state."""
        a, b, src, dst = best.pair
        self.exchanges += 1
        label = 'exchange %d' % self.exchanges
        before = {h: self.state.score(h) for h in (src, dst)}
        mean = domain.mean()
        moves = []
        for sid, there in best.sequence:
            server = self.snapshot.server(sid)
            final = dst if sid == a else src
            if there != final:
                role = 'parking: %s waits on %s, then goes on to %s' % (
                    server.label, there, final)
            else:
                role = 'this move takes %s to %s' % (server.label, there)
            moves.append(self._apply(domain, search.Single(
                0.0, sid, self.state.host_of(sid), there, 0.0), waves,
                reason=role))
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

    def _apply(self, domain, best, waves, reason=None):
        sid, src, dst = best.server, best.source, best.destination
        server = self.snapshot.server(sid)
        std_before = domain.std()
        src_before, dst_before = self.state.score(src), self.state.score(dst)
        src_parts, dst_parts = self.state.parts(src), self.state.parts(dst)
        hottest = max(domain.hosts, key=lambda h: (self.state.score(h), h))
        mean = domain.mean()
        self.state.apply(sid, dst)
        self.search.moved(src, dst)
        src_after, dst_after = self.state.score(src), self.state.score(dst)
        domain.update(src_parts, self.state.parts(src))
        domain.update(dst_parts, self.state.parts(dst))
        wave = waves.next(src, dst)
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
        refused = ()
        if best.refused is not None:
            refused = best.refused
            reason += ' (%s refused: %s)' % (
                self.snapshot.hypervisor(refused[0]).host, refused[1])
        return plan_mod.Move(
            server_id=sid, server_name=server.name, source=src,
            destination=dst,
            destination_host=dest_host,
            wave=wave, domain=domain.name, ram_gb=server.ram_gb,
            gain=best.gain, source_score=(src_before, src_after),
            destination_score=(dst_before, dst_after),
            imbalance=(std_before, domain.std()), reason=reason,
            refused=refused)

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
            reason = policy.BALANCE.why_not_destination(server, hyp,
                                                        self.state, self.rules)
            if reason:
                rows.append((hyp.name, domain, score, 'rejected', reason))
                continue
            after = score + self.model.delta(server.id, hyp.name)
            rows.append((hyp.name, domain, score, 'accepted',
                         'score would be %.2f -> %.2f%s' % (
                             score, after, self._estimate(server, hyp))))
        order = {'current': 0, 'accepted': 1, 'rejected': 2}
        rows.sort(key=lambda r: (order[r[3]], r[2], r[0]))
        return refusal, rows

    def _estimate(self, server, dest):
        """'; live migration about N s (basis)' where the history tells."""
        estimate = self.rules.durations.to(server, dest.host)
        if estimate is None:
            return ''
        return '; live migration %s (%s)' % (estimate.text(), estimate.basis)


def _describe(server, load_model):
    load = load_model.servers[server.id]
    text = '%d vCPU, %g GiB' % (load.vcpus, round(server.ram_gb, 1))
    if server.usage.cpu is not None:
        text += ', %d%% CPU busy' % round(server.usage.cpu * 100)
    return text


def make_plan(snapshot, options, held=None):
    return Planner(snapshot, options, held).plan()
