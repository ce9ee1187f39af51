"""Keeping N+1 while balancing (keep_n_plus_one): no move after which
the loss of a hypervisor of its domain, absorbed before the move, would
leave servers nowhere.

The check of core/rules/headroom.py packs a domain's hypervisors one by one;
doing that again for every candidate move would cost a whole domain's
packing per candidate. Instead each hypervisor's placement is kept, and a
move is checked against what the placements put on its two hypervisors
(Guard).
"""

from osc_leveller.core.rules import filters
from osc_leveller.core.rules import headroom as packing

# How a refusal starts.
REFUSAL = 'would break N+1'
# Lose a move's destination and its server goes back where it came from
# (Guard._doubt): the rebuild rules that do not depend on what else is
# there say whether it may; its room there is weighed apart, against what
# the packing puts there.
_WAY_BACK = tuple(r for r in packing.FILTERS if r.static)


def headroom(server, dest, state, rules):
    """Balancing destination filter, with keep_n_plus_one: no move after
    which the loss of a hypervisor of the domain, absorbed before it,
    would leave servers nowhere. Only in the state kept (Rules.kept_state);
    an exchange is checked whole (exchange_breaks)."""
    if not rules.options.keep_n_plus_one or state is not rules.kept_state:
        return None
    return guard_of(state, rules).why_not(server, dest)


# Balancing's last destination rule: the one rule above N+1 packing, so
# declared here rather than in filters.RULES.
RULE = filters.Rule('headroom', headroom, destination=True, balancing=True)


def exchange_breaks(state, rules, sequence):
    """Why the moves of an exchange, made in the kept state, would break
    N+1, or None."""
    if not rules.options.keep_n_plus_one or state is not rules.kept_state:
        return None
    return guard_of(state, rules).why_not_all(sequence)


def guard_of(state, rules):
    if rules.guard is None or rules.guard.state is not state:
        rules.guard = Guard(state, rules)
    return rules.guard


class Guard:
    """N+1 kept move by move, in one state as it changes.

    Each hypervisor's packing (where its servers would be rebuilt if it
    were lost, found as pack() finds it) is kept, with what it puts on each
    other hypervisor. A move s: src -> dst leaves a packing valid when dst
    has room for s on top of what the packing puts there, with no hard
    anti-affinity clash; src only gains room. Losing dst itself is absorbed
    by sending s back to src, which it has just left. Only a hypervisor
    whose packing that does not prove is packed again, in the state after
    the move. Losses not absorbed to start with are not held against any
    move (Guard.lost says which): they cannot be broken further than
    "no".
    """

    def __init__(self, state, rules):
        self.state = state
        self.rules = rules
        self.members = packing.domains(state.snapshot, rules)
        self.domain_of = {h.name: domain for domain, hyps in
                          self.members.items() for h in hyps}
        self.residents = packing.residents(state.snapshot, state,
                                           self.members)
        self.placed = {}  # hypervisor -> {server id: where it is rebuilt}
        self.on = {}  # hypervisor -> {other: ([server], {class: amount})}
        self.exempt = set()  # hypervisors whose loss is not absorbed
        self.lost = {}  # domain -> Headroom: the first such loss
        # domain -> {(server id, destination): {hypervisor: placed}}: what
        # a move found to keep N+1 meant, until a move in the domain.
        self.vetted = {}
        self.synced = len(state.history)
        for domain in sorted(self.members):
            self._pack_domain(domain, first=True)

    def why_not(self, server, dest):
        """Why moving the server to dest would break N+1, or None."""
        self._sync()
        domain = self.domain_of.get(dest.name)
        if domain is None:
            return None
        src = self.state.host_of(server.id)
        repacked = {}
        for hyp in self.members[domain]:
            if hyp.name in self.exempt or not self._doubt(
                    hyp.name, server, src, dest):
                continue
            placed, unplaced = self._repack(hyp, {server.id: dest.name})
            if unplaced:
                return self._broken(domain, hyp, unplaced)
            repacked[hyp.name] = placed
        self.vetted.setdefault(domain, {})[server.id, dest.name] = repacked
        return None

    def why_not_all(self, sequence):
        """Why these moves, all made, would break N+1, or None."""
        self._sync()
        moves = dict(sequence)
        domains = sorted({self.domain_of.get(dst) for _, dst in sequence}
                         - {None})
        for domain in domains:
            for hyp in self.members[domain]:
                if hyp.name in self.exempt:
                    continue
                unplaced = self._repack(hyp, moves)[1]
                if unplaced:
                    return self._broken(domain, hyp, unplaced)
        return None

    def _broken(self, domain, hyp, unplaced):
        return '%s: %s' % (REFUSAL, packing.Headroom(
            domain, 1, len(self.members[domain]), (hyp.name,),
            unplaced).why())

    def _doubt(self, name, server, src, dest):
        """Whether the kept packing of hypervisor name may not hold once
        the server moves from src to dest."""
        placed = self.placed[name]
        if name == dest.name:
            # Lost with the server on it: the server goes back to src,
            # where it leaves the room it takes now, unless src is above
            # its capacity (an allocation ratio lowered, say).
            home = self.state.snapshot.hypervisor(src)
            if home is None:
                return True
            trial = packing.Trial(self.state)
            trial.move(server, dest.name)
            if filters.first_reason(_WAY_BACK, server, home, trial,
                                    self.rules):
                return True
            there = self.on[name].get(src)
            amounts = there[1] if there else {}
            for rc, amount in server.resources.items():
                inv = home.inventories.get(rc)
                if amount and (inv is None or self.state.usage(src, rc)
                               + amounts.get(rc, 0) > inv.capacity):
                    return True
            return self._clash(server, there)
        if name == src and placed.get(server.id) == dest.name:
            return False
        there = self.on[name].get(dest.name)
        if there is None:
            return False  # the capacity filter saw dest's room
        servers, amounts = there
        for rc, amount in server.resources.items():
            if amount and self.state.usage(dest.name, rc) + amounts.get(
                    rc, 0) + amount > dest.inventories[rc].capacity:
                return True
        return self._clash(server, there)

    def _clash(self, server, there):
        """A hard anti-affinity group of the server among the servers a
        packing puts on one hypervisor."""
        if not there:
            return False
        groups = {g.id for g in self.rules.groups_of.get(server.id, ())
                  if g.policy == 'anti-affinity'}
        return bool(groups) and any(
            g.id in groups for other in there[0]
            for g in self.rules.groups_of.get(other.id, ()))

    def _repack(self, hyp, moves):
        """(placed, unplaced) of losing hyp once the moves
        {server id: destination} are made."""
        trial = packing.Trial(self.state)
        snapshot = self.state.snapshot
        leaving = [s for s in self.residents[hyp.name] if s.id not in moves]
        for sid, dst in moves.items():
            server = snapshot.server(sid)
            trial.move(server, dst)
            if dst == hyp.name:
                leaving.append(server)
        domain = self.domain_of[hyp.name]
        roomiest = sorted(self.members[domain], key=lambda h: (
            -packing.free_ram(h, trial), h.name))
        unplaced, placed = packing.placement(
            (hyp,), roomiest, {hyp.name: leaving}, trial, self.rules)
        return placed, unplaced

    def _pack_domain(self, domain, first=False):
        hyps = self.members[domain]
        roomiest = sorted(hyps, key=lambda h: (
            -packing.free_ram(h, self.state), h.name))
        for hyp in sorted(hyps, key=lambda h: h.name):
            if hyp.name in self.exempt:
                continue  # once not absorbed, never held to it
            unplaced, placed = packing.placement(
                (hyp,), roomiest, self.residents, self.state, self.rules)
            if unplaced:
                self.exempt.add(hyp.name)
                if first and domain not in self.lost:
                    self.lost[domain] = packing.Headroom(
                        domain, 1, len(hyps), (hyp.name,), unplaced)
            else:
                self._keep(hyp.name, placed)

    def _keep(self, name, placed):
        self.placed[name] = placed
        on = self.on[name] = {}
        snapshot = self.state.snapshot
        for sid, there in placed.items():
            servers, amounts = on.setdefault(there, ([], {}))
            server = snapshot.server(sid)
            servers.append(server)
            for rc, amount in server.resources.items():
                amounts[rc] = amounts.get(rc, 0) + amount

    def _sync(self):
        """Follow the moves made in the state since the last look: one
        vetted in its domain's state updates the packings it touched;
        others (an exchange's) mean packing their domains again."""
        history = self.state.history
        new = history[self.synced:]
        self.synced = len(history)
        snapshot = self.state.snapshot
        again = set()
        for sid, src, dst in new:
            server = snapshot.server(sid)
            if src in self.residents:
                self.residents[src].remove(server)
            if dst in self.residents:
                self.residents[dst].append(server)
            domains = {self.domain_of.get(h) for h in (src, dst)} - {None}
            found = [self.vetted.get(d, {}).get((sid, dst)) for d in domains]
            for domain in domains:
                self.vetted.pop(domain, None)
            if domains & again or None in found:
                again |= domains
                continue
            self._moved(sid, src, dst)
            for vetted in found:
                for name, placed in vetted.items():
                    self._keep(name, placed)
        for domain in sorted(again):
            self._pack_domain(domain)

    def _moved(self, sid, src, dst):
        """The packings of src and dst once the server moved: it leaves
        src's, and dst's sends it back to src."""
        if sid in self.placed.get(src, ()):
            placed = dict(self.placed[src])
            del placed[sid]
            self._keep(src, placed)
        if dst in self.placed:
            self._keep(dst, dict(self.placed[dst], **{sid: src}))
