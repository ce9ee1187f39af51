"""Does a planned move still hold in the cloud as it is now?

apply and evacuate ask before each migration they start, against the cloud
read again for that move (core/run/executor.py). A check is a function
``(move, snapshot, state, rules) -> reason or None``: the move's server
must still be on its planned source and pass the policy of its kind of move
(core/rules/policy.py), its destination every destination filter in the state
left by the moves before it, and a balancing move must still even out the
load.
"""

from osc_leveller.core.rules import filters
from osc_leveller.core.rules import policy as policies

# The codes of the re-checks' own refusals (the metrics file's reason
# classes); a rule's refusal keeps its rule's code.
SERVER_GONE = 'server_gone'
SERVER_MOVED = 'server_moved'
DESTINATION_GONE = 'destination_gone'
NO_GAIN = 'no_gain'
EXCHANGE_STOPPED = 'exchange_stopped'


def recheck(move, snapshot, state, rules, policy):
    """Why a move no longer holds in this snapshot under policy, or None."""
    server = snapshot.server(move.server_id)
    if server is None:
        return filters.Refusal('the server no longer exists', SERVER_GONE)
    where = state.host_of(server.id)  # a dry run's moves count as made
    if where != move.source:
        return filters.Refusal('it is now on %s, not on the planned source '
                               '%s' % (where, move.source), SERVER_MOVED)
    reason = policy.why_not(server, rules)
    if reason:
        return reason
    dest = snapshot.hypervisor(move.destination)
    if dest is None:
        return filters.Refusal('the destination %s no longer exists'
                               % move.destination, DESTINATION_GONE)
    reason = policy.why_not_destination(server, dest, state, rules)
    if reason:
        return reason.reworded('%s: %s' % (dest.name, reason))
    return None


def balance(move, snapshot, state, rules):
    """A balancing move: the checks, and it must still even out the load."""
    reason = recheck(move, snapshot, state, rules, policies.BALANCE)
    if reason:
        return reason
    source_now = state.score(move.source)
    dest_after = state.score(move.destination) + state.load_model.delta(
        move.server_id, move.destination)
    if dest_after >= source_now:
        return filters.Refusal(
            'no longer evens out the load: %s would reach %.2f, %s is at '
            '%.2f' % (move.destination, dest_after, move.source, source_now),
            NO_GAIN)
    return None


def placement(move, snapshot, state, rules):
    """A move towards an operator's target placement."""
    return recheck(move, snapshot, state, rules, policies.PLACEMENT)


def make_room(move, snapshot, state, rules):
    """A move making room for new servers of a flavor: every rule of its
    policy, against the cloud now."""
    return recheck(move, snapshot, state, rules, policies.MAKE_ROOM)


def drain(cold_migrate_stopped):
    """The check of a drain's moves (stopped servers cold, or staying)."""
    policy = policies.drain(cold_migrate_stopped)

    def check(move, snapshot, state, rules):
        return recheck(move, snapshot, state, rules, policy)
    return check


class BalancePlan:
    """The checks of a balancing plan's moves; an exchange's moves as one.

    The moves of an exchange lower the load only together: the first of
    them that passes the filters checks the whole exchange against the
    cloud now (the hotter of its two hypervisors must end cooler), and a
    server moving on from where its exchange parked it is not held by the
    cooldown that the parking move started.
    """

    def __init__(self, moves):
        self.exchanges = {}
        for move in moves:
            if move.exchange:
                self.exchanges.setdefault(move.exchange, []).append(move)
        self.checked = set()

    def __call__(self, move, snapshot, state, rules):
        if not move.exchange:
            return balance(move, snapshot, state, rules)
        group = self.exchanges[move.exchange]
        index = next(i for i, m in enumerate(group) if m is move)
        parked = any(m.server_id == move.server_id for m in group[:index])
        reason = recheck(move, snapshot, state, rules,
                         policies.BALANCE_AGAIN if parked
                         else policies.BALANCE)
        if reason or move.exchange in self.checked:
            return reason
        self.checked.add(move.exchange)
        return _exchange(group[index:], state)


def _exchange(moves, state):
    """Why the rest of an exchange no longer evens out the load, or None."""
    first, last = {}, {}
    for move in moves:
        first.setdefault(move.server_id, move.source)
        last[move.server_id] = move.destination
    gone = [sid for sid in first if state.snapshot.server(sid) is None]
    if gone:
        return filters.Refusal('its exchange\'s server %s no longer exists'
                               % gone[0], EXCHANGE_STOPPED)
    touched = {h for m in moves for h in (m.source, m.destination)}
    gone = sorted(h for h in touched if state.snapshot.hypervisor(h) is None)
    if gone:  # since the plan was made, or the plan file names it
        return filters.Refusal('its exchange\'s hypervisor %s is not in the '
                               'cloud' % gone[0], EXCHANGE_STOPPED)
    hosts = sorted(set(first.values()) | set(last.values()))
    after = state.trial(touched | {state.host_of(sid) for sid in first})
    for move in moves:
        after.apply(move.server_id, move.destination)
    hottest = max(hosts, key=state.score)
    worst = max(hosts, key=after.score)
    if after.score(worst) >= state.score(hottest):
        return filters.Refusal(
            'the exchange no longer evens out the load: %s would reach '
            '%.2f, %s is at %.2f' % (worst, after.score(worst), hottest,
                                     state.score(hottest)), NO_GAIN)
    return None


NOT_FREED = 'not_freed'


class FreeHostsPlan:
    """The checks of a plan freeing hypervisors (plan --free-hosts): every
    check of its policy (policy.FREE_HOSTS, or FREE_HOSTS_COLD when
    stopped servers migrate cold), and the move must still free its source:
    each server now there is one the plan moves off it. A server that
    arrived since, or one the plan no longer sees there, would keep the
    host busy, and the moves off it would be churn for nothing."""

    def __init__(self, moves, policy=policies.FREE_HOSTS):
        self.policy = policy
        self.leaving = {}  # source -> the servers the plan moves off it
        for move in moves:
            self.leaving.setdefault(move.source, set()).add(move.server_id)

    def __call__(self, move, snapshot, state, rules):
        reason = recheck(move, snapshot, state, rules, self.policy)
        if reason:
            return reason
        planned = self.leaving.get(move.source, set())
        staying = sorted(
            s.label for s in snapshot.servers_on(move.source)
            if s.id not in planned and state.host_of(s.id) == move.source)
        if staying:
            return filters.Refusal(
                '%s would not be freed: %s %s on it and not in the plan' % (
                    move.source, ', '.join(staying[:3]) + (
                        ' and %d more' % (len(staying) - 3)
                        if len(staying) > 3 else ''),
                    'is' if len(staying) == 1 else 'are'), NOT_FREED)
        return None


# plan --spread count: a move that no longer narrows the gap between the
# server counts of its two hypervisors.
COUNT_EVEN = 'count_even'


def servers_on(state, host):
    """How many servers the hypervisor holds in state (moves counted)."""
    count = len(state.snapshot.servers_on(host))
    for _, source, destination in state.history:
        count += (destination == host) - (source == host)
    return count


def spread(move, snapshot, state, rules):
    """A move of plan --spread count: the checks of balancing, and its
    source must still hold more servers than its destination + 1."""
    reason = recheck(move, snapshot, state, rules, policies.SPREAD)
    if reason:
        return reason
    source = servers_on(state, move.source)
    destination = servers_on(state, move.destination)
    if source <= destination + 1:
        return filters.Refusal(
            'no longer evens out the server counts: %s holds %d, %s %d' % (
                move.source, source, move.destination, destination),
            COUNT_EVEN)
    return None
