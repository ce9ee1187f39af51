"""Free hypervisors (plan --free-hosts [N]): empty as many as possible in
each balancing domain, or N in each, moving the fewest GiB.

One domain (scoring.domain_of) at a time, over its usable hypervisors in
scope. Hypervisors already empty are free at no cost and count first.
Then, again and again, the hypervisor whose movable servers hold the
least RAM now is tried: its servers, largest first, each go to the
fullest hypervisor (most RAM allocated, then highest score) that is not
free and accepts it under every destination rule of policy.FREE_HOSTS
(Nova's rules, capacity, the ceiling, saturation), those that stay busy
anyway first. Filling the fullest first (best fit) keeps the roomiest
hypervisors whole for the candidates after, and keeps free the ones
already freed. A domain is planned again with the hypervisors the last
pass could not free filled first, and the best pass kept (_Freer._domain):
on the benchmark's clusters this frees 90 to 100 % of the exact optimum's
hypervisors (benchmarks/consolidation.py).

A hypervisor is not freeable, and the plan says why, when a server on it
may not move (locked, pinned, PCI, opted out: the policy's reason), when
one of its servers fits nowhere (the reasons counted, as a drain counts
them), or, with keep_n_plus_one, when the hypervisors left in its domain
would lose N+K headroom (core/rules/headroom.py). Its trial moves are
rolled back; it never makes the plan fail.
"""

import bisect
import collections
import copy
import dataclasses
import time

from osc_leveller.core.load import scoring
from osc_leveller.core.model import model
from osc_leveller.core.planning import context
from osc_leveller.core.planning import kinds
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.rules import filters
from osc_leveller.core.rules import headroom

KIND = kinds.FREE_HOSTS
SHOWN = 3  # refusals named in a reason
PASSES = 2  # at most, per domain (see _Freer._domain)
# The codes of a hypervisor's own reasons for staying busy; a server that
# may not move gives its rule's code.
UNPLACED = 'unplaced'
NO_HEADROOM = 'headroom'


class TooMany(ValueError):
    """N hypervisors cannot be freed in some domain; says what can."""


@dataclasses.dataclass(frozen=True)
class Freed:
    hypervisor: str
    domain: str
    servers: tuple  # labels of the servers it held
    ram_gb: float  # RAM of those servers


@dataclasses.dataclass(frozen=True)
class Freeing:
    moves: tuple  # plan.Move, in wave order
    freed: tuple  # Freed, per domain in the order freed
    not_freed: tuple  # (hypervisor, domain, reason)
    stats: tuple  # (before, after): scoring.DomainStats of each domain


def free_hosts(snapshot, options, count=None, headroom_k=1, cold=False):
    """A Freeing of the snapshot: count (None: as many as possible) free
    hypervisors in each domain; with options.keep_n_plus_one, each domain
    keeps N+headroom_k; cold: stopped servers migrate cold too."""
    planning = context.Context(snapshot, options, KIND.load)
    freer = _Freer(planning, count, headroom_k, KIND.cold if cold else KIND)
    return freer.run()


class _Freer:
    def __init__(self, planning, count, k, kind):
        self.snapshot = planning.snapshot
        self.rules = planning.rules
        self.options = planning.options
        self.state = planning.new_state()
        self.count = count
        self.k = k
        self.policy = kind.policy
        self.by_model = self.options.by_model
        self.members = collections.defaultdict(list)
        for hyp in self.snapshot.hypervisors:
            if hyp.usable and filters.in_scope(hyp, self.options):
                self.members[scoring.domain_of(hyp, self.by_model)].append(
                    hyp)
        self.moves = []
        self.freed = []
        self.not_freed = []
        self.waves = plan_mod.Waves()
        self.receiving = set()  # hypervisors the moves so far fill
        self.anchored = set()  # hypervisors filled first: they stay busy
        # The static destination rules come first: what they say of a
        # server and a hypervisor holds in every pass over a domain (a
        # server is tried from its own hypervisor only), so it is kept.
        rules = self.policy.destinations
        static = [r for r in rules if r.static]
        rest = [r for r in rules if not r.static and r.code != 'not_source']
        if static and rules.index(static[-1]) < min(
                (rules.index(r) for r in rest), default=len(rules)):
            self._static_rules, self._other_rules = tuple(static), tuple(rest)
        else:
            self._static_rules, self._other_rules = (), rules
        self._static = {}  # (server id, hypervisor) -> refusal or None
        self._saturates = self.policy.applies('saturation')

    def stats(self):
        scores, domain_of = {}, {}
        for domain, hyps in self.members.items():
            for hyp in hyps:
                scores[hyp.name] = self.state.score(hyp.name)
                domain_of[hyp.name] = domain
        return scoring.domain_stats(scores, domain_of)

    def run(self):
        before = self.stats()
        for domain in sorted(self.members):
            self._domain(domain, self.members[domain])
        moves = sorted(self.moves, key=lambda m: m.wave)  # stable
        return Freeing(tuple(moves), tuple(self.freed),
                       tuple(self.not_freed), (before, self.stats()))

    def _domain(self, domain, hyps):
        """Free what can be freed in one domain, in up to PASSES passes:
        the hypervisors that stay busy (a server that may not move, or,
        after a pass, not freed) take servers first, which keeps the others
        free to be emptied; the pass that frees the most (then moves the
        fewest GiB) is kept. Two passes more freed one hypervisor more at
        300 / 15,000 and at 1,000 / 50,000 (272, not 271), in twice the
        time."""
        anchored = {h.name for h in hyps if any(
            self.policy.why_not(s, self.rules)
            for s in self.snapshot.servers_on(h.name))}
        state, waves = self.state, self.waves
        kept = self.moves, self.freed, self.not_freed, self.receiving
        best = None
        for _ in range(PASSES):
            self.state, self.waves = state.copy(), copy.deepcopy(waves)
            self.moves, self.freed, self.not_freed = [], [], []
            self.receiving, self.anchored = set(), anchored
            # What each hypervisor has left of each resource class, kept
            # as moves are tried (a fast first look; the rules decide).
            self._room = {h.name: {rc: inv.capacity - self.state.usage(
                h.name, rc) for rc, inv in h.inventories.items()}
                for h in hyps}
            self._pass(domain, hyps)
            found = (len(self.freed), -sum(m.ram_gb for m in self.moves))
            if best is None or found > best[0]:
                best = (found, self.state, self.waves, self.moves,
                        self.freed, self.not_freed, self.receiving)
            stuck = {name for name, _, _ in self.not_freed} - anchored
            if not stuck:
                break
            anchored = anchored | stuck
        self._static.clear()  # the next domain has other hypervisors
        self.moves, self.freed, self.not_freed, self.receiving = kept
        self.state, self.waves = best[1], best[2]
        moves, freed, not_freed, receiving = best[3:]
        self.moves.extend(moves)
        self.freed.extend(freed)
        self.not_freed.extend(not_freed)
        self.receiving.update(receiving)

    def _pass(self, domain, hyps):
        free = set()
        for hyp in sorted(hyps, key=lambda h: h.name):
            if not self.snapshot.servers_on(hyp.name) and \
                    self._wanted(free):
                free.add(hyp.name)
                self.freed.append(Freed(hyp.name, domain, (), 0.0))
        # Least RAM first. A candidate's servers never change before its
        # turn: a hypervisor that took servers keeps them (a server moves
        # once), and is no candidate any more.
        candidates = sorted(
            (h for h in hyps if h.name not in free),
            key=lambda h: (sum(s.ram_gb for s in self.snapshot.servers_on(
                h.name)), h.name))
        for hyp in candidates:
            if not self._wanted(free):
                break
            if hyp.name in self.receiving:
                # It took servers: busy, and said so when it must stay.
                why = self._unmovable(hyp)
                if why:
                    self.not_freed.append((hyp.name, domain, why))
                continue
            why = self._free(hyp, domain, hyps, free)
            if why:
                self.not_freed.append((hyp.name, domain, why))
            else:
                free.add(hyp.name)

    def _wanted(self, free):
        return self.count is None or len(free) < self.count

    def _free(self, hyp, domain, hyps, free):
        """Empty hyp onto the others of its domain not free; why not, with
        the state left as it was, or None with its moves made."""
        servers = self._servers(hyp)
        why = self._unmovable(hyp)
        if why:
            return why
        # Fullest first, kept in order as servers arrive.
        targets = sorted((self._fullest(h), h) for h in hyps
                         if h.name != hyp.name and h.name not in free)
        # Tried on a copy of the domain's hypervisors alone, made again on
        # the state if it frees hyp (a copy of the whole state per
        # candidate was a third of the time); N+K reads every domain.
        saved, moves = self.state, []
        self.state = saved.copy() if self.options.keep_n_plus_one else \
            saved.trial([h.name for h in hyps])
        for server in servers:
            dest, refusals = self._destination(server, targets)
            if dest is None:
                self._undo(moves)
                self.state = saved
                return filters.Refusal(
                    'no hypervisor of its domain accepts %s (%.0f GiB): %s'
                    % (server.label, server.ram_gb, '; '.join(
                        '%s (%d hypervisor%s)' % (why, n, 's' * (n > 1))
                        for why, n in refusals.most_common(SHOWN))
                       or 'no other hypervisor left'), UNPLACED)
            moves.append((server, dest, self._move(server, dest)))
            index = next(i for i, (_, h) in enumerate(targets) if h is dest)
            del targets[index]
            bisect.insort(targets, (self._fullest(dest), dest))
        if self.options.keep_n_plus_one:
            names = {h.name for _, h in targets}
            found = headroom.of_domains(self.snapshot, self.state, self.rules,
                                        self.k, names=names)
            lost = [f for f in found if f.domain == domain and not f.ok]
            if lost:
                self._undo(moves)
                self.state = saved
                return filters.Refusal(
                    'freeing it would leave %s without N+%d headroom: %s'
                    % (domain, self.k, lost[0].why()), NO_HEADROOM)
        if not self.options.keep_n_plus_one:
            for server, dest, _ in moves:
                saved.apply(server.id, dest.name)
            self.state = saved
        self.freed.append(Freed(hyp.name, domain, tuple(
            s.label for s in servers), sum(s.ram_gb for s in servers)))
        for server, dest, scores in moves:
            self.receiving.add(dest.name)
            self.moves.append(self._planned(server, hyp, dest, domain,
                                            scores))
        return None

    def _servers(self, hyp):
        """Its servers, largest first."""
        return sorted(self.snapshot.servers_on(hyp.name),
                      key=lambda s: (-s.ram_gb, -s.flavor.vcpus, s.label,
                                     s.id))

    def _unmovable(self, hyp):
        """Why a server of hyp may not move, or None."""
        for server in self._servers(hyp):
            why = self.policy.why_not(server, self.rules)
            if why:
                return filters.Refusal('%s cannot move: %s' % (
                    server.label, why), getattr(why, 'code', None))

    def _destination(self, server, targets):
        """The fullest target that accepts the server, and the refusals
        of the others counted by clause. targets: [(_fullest, hypervisor)],
        sorted.

        Most of the fullest have no room or no CPU left for it: the
        capacity or the saturation rule would refuse them, so only the
        others are asked, unless none accepts it; then every one is, to
        count why."""
        # Less than an unit short is left to the rules: what is left is
        # a float, and the capacity rule's sum decides.
        # RAM first: it is what most of the fullest lack.
        needs = sorted(((rc, amount - 0.5) for rc, amount
                        in server.resources.items() if amount),
                       key=lambda need: need[0] != model.MEMORY_MB)
        state, room = self.state, self._room
        for _, dest in targets:
            left, short = room[dest.name], False
            for rc, amount in needs:  # a loop: any() costs twice as much
                if left.get(rc, amount) < amount:
                    short = True
                    break
            if short:
                continue
            if self._saturates and filters.saturated(
                    state, dest.name,
                    state.load_model.amounts(server.id, dest.name)[0]):
                continue
            if self._why_not(server, dest) is None:
                return dest, None
        refusals = collections.Counter()
        for _, dest in targets:
            why = self._why_not(server, dest)
            if why is None:  # the RAM test above is the capacity rule's
                return dest, None
            refusals[why.split(':')[0]] += 1
        return None, refusals

    def _why_not(self, server, dest):
        """policy.why_not_destination, the static rules' answer kept."""
        key = server.id, dest.name
        why = self._static.get(key, False)
        if why is False:
            why = self._static[key] = filters.first_reason(
                self._static_rules, server, dest, self.state, self.rules)
        return why or filters.first_reason(self._other_rules, server, dest,
                                           self.state, self.rules)

    def _fullest(self, hyp):
        inv = hyp.inventories.get(model.MEMORY_MB)
        used = self.state.usage(hyp.name, model.MEMORY_MB)
        share = used / inv.capacity if inv and inv.capacity else 0.0
        return (hyp.name not in self.anchored, -share,
                -self.state.score(hyp.name), hyp.name)

    def _move(self, server, dest):
        source = self.state.host_of(server.id)
        self._take(server, source, dest.name)
        src_before, dst_before = self.state.score(source), \
            self.state.score(dest.name)
        self.state.apply(server.id, dest.name)
        return ((src_before, self.state.score(source)),
                (dst_before, self.state.score(dest.name)))

    def _undo(self, moves):
        """What is left, as it was before these trial moves."""
        for server, dest, _ in reversed(moves):
            self._take(server, dest.name, self.snapshot.server(
                server.id).hypervisor)

    def _take(self, server, source, destination):
        """What is left on source and destination once server moves."""
        for rc, amount in server.resources.items():
            for name, sign in ((source, 1), (destination, -1)):
                left = self._room[name]
                if rc in left:
                    left[rc] += sign * amount

    def _planned(self, server, hyp, dest, domain, scores):
        (src, dst) = scores
        return plan_mod.Move(
            server_id=server.id, server_name=server.name, source=hyp.name,
            destination=dest.name, destination_host=dest.host,
            wave=self.waves.next(hyp.name, dest.name), domain=domain,
            ram_gb=server.ram_gb, gain=0.0, source_score=src,
            destination_score=dst, imbalance=(0.0, 0.0),
            reason='frees %s: %s goes %.2f -> %.2f, the fullest hypervisor '
                   'that accepts it%s' % (
                       hyp.name, dest.host, dst[0], dst[1],
                       '; %s: a cold migration' % server.status
                       if server.status in model.STOPPED_STATUSES else ''))


def make_plan(snapshot, options, count=None, headroom_k=1, cold=False):
    """The plan (kind free-hosts) of free_hosts; TooMany when count
    hypervisors cannot be freed in every domain."""
    created = time.time()
    found = free_hosts(snapshot, options, count, headroom_k, cold)
    if count is not None:
        got = collections.Counter(f.domain for f in found.freed)
        short = [s.domain for s in found.stats[0] if got[s.domain] < count]
        if short:
            raise TooMany(
                '%d hypervisors cannot be freed in every balancing domain: '
                'at most %s (free as many as possible without N, or '
                'choose domains with --availability-zone or --exclude-host)'
                % (count, ', '.join('%d in %s' % (got[s.domain], s.domain)
                                    for s in found.stats[0])))
    before, after = found.stats
    entries = collections.defaultdict(dict)
    for freed in found.freed:
        entries[freed.domain].setdefault('freed', []).append({
            'hypervisor': freed.hypervisor, 'servers': list(freed.servers),
            'ram_gb': round(freed.ram_gb, 3)})
    for name, domain, why in found.not_freed:
        entries[domain].setdefault('not_freed', []).append({
            'hypervisor': name, 'reason': str(why)})
    note = '' if found.moves else (
        'no hypervisor can be freed' if not found.freed else
        'the hypervisors freed are empty already')
    plan = plan_mod.build(snapshot, options, found.moves, before, after,
                          created, note=note, kind=KIND, entries=entries)
    # What was asked, beside the planner's options: N per domain (0: as
    # many as possible), and K of the N+K kept with keep_n_plus_one.
    asked = {'free_hosts': count or 0}
    if options.keep_n_plus_one:
        asked['headroom'] = headroom_k
    if cold:  # apply must be told so too (v1/apply.py)
        asked['cold_migrate_stopped'] = True
    return dataclasses.replace(plan, options=dict(plan.options, **asked))


def freed_hosts(plan):
    """{hypervisor: [server label]} of the hypervisors a free-hosts plan
    frees, from its domains' entries."""
    return {f['hypervisor']: f['servers'] for d in plan.domains
            for f in d.get('freed', ())}
