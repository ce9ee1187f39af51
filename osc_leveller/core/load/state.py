"""A cloud state derived from a snapshot plus the moves planned so far.

The snapshot is frozen; ``State`` is an overlay holding only what moves
change: where servers are, each hypervisor's Placement usage and load. Filters
read a State, the planner applies moves to it, and a fresh State per check
lets tests replay a plan move by move.
"""

import collections

from osc_leveller.core.load import scoring


class State:
    def __init__(self, snapshot, load_model):
        self.snapshot = snapshot
        self.load_model = load_model
        self._host_of = {}
        self._usage = {}  # hypervisor -> Counter, copied on first write
        # CPU, RAM and the number of servers.
        self._load = {name: [h.cpu_load, h.ram_load,
                             len(snapshot.servers_on(name))]
                      for name, h in load_model.hosts.items()}
        self.moved = set()
        self.history = []  # (server, source, destination) of each move

    def host_of(self, server_id):
        moved = self._host_of.get(server_id)
        return moved if moved is not None else \
            self.snapshot.server(server_id).hypervisor

    def usage(self, hypervisor_name, resource_class):
        usage = self._usage.get(hypervisor_name)
        if usage is not None:
            return usage[resource_class]
        return self.snapshot.hypervisor(hypervisor_name).usage(resource_class)

    def cpu_load(self, hypervisor_name):
        """Threads asked for (measured) or vCPUs allocated."""
        return self._load[hypervisor_name][0]

    def score(self, hypervisor_name):
        return self.load_model.score(hypervisor_name,
                                     *self._load[hypervisor_name])

    def parts(self, hypervisor_name):
        """(CPU part, RAM part) of the score: they add up to it."""
        return self.load_model.parts(hypervisor_name,
                                     *self._load[hypervisor_name])

    def dimensions(self, hypervisor_name):
        return self.load_model.dimensions(hypervisor_name,
                                          *self._load[hypervisor_name])

    def copy(self):
        """An independent State with the same moves applied."""
        other = State.__new__(State)
        other.snapshot = self.snapshot
        other.load_model = self.load_model
        other._host_of = dict(self._host_of)
        other._usage = {name: collections.Counter(usage)
                        for name, usage in self._usage.items()}
        other._load = {name: list(load) for name, load in self._load.items()}
        other.moved = set(self.moved)
        other.history = list(self.history)
        return other

    def trial(self, hypervisors):
        """A State to try a few moves among these hypervisors on, then
        throw away: it copies their usage and load only (a copy of the
        whole State per trial made a dry run of many exchanges slow down
        as it went), and reads where servers are through this State, which
        it leaves unchanged. Its moved and history hold its own moves."""
        other = State.__new__(State)
        other.snapshot = self.snapshot
        other.load_model = self.load_model
        other._host_of = collections.ChainMap({}, self._host_of)
        other._usage = {name: collections.Counter(self._usage[name])
                        for name in hypervisors if name in self._usage}
        other._load = {name: list(self._load[name]) for name in hypervisors}
        other.moved = set()
        other.history = []
        return other

    def apply(self, server_id, destination):
        """Record a live migration of the server to the destination."""
        server = self.snapshot.server(server_id)
        source = self.host_of(server_id)
        for name, sign in ((source, -1), (destination, 1)):
            usage = self._usage.get(name)
            if usage is None:
                usage = collections.Counter(
                    self.snapshot.hypervisor(name).usages)
                self._usage[name] = usage
            for rc, amount in server.resources.items():
                usage[rc] += sign * amount
            cpu, ram = self.load_model.amounts(server_id, name)
            load = self._load[name]
            load[0] += sign * cpu
            load[1] += sign * ram
            load[2] += sign
        self._host_of[server_id] = destination
        self.moved.add(server_id)
        self.history.append((server_id, source, destination))


def new_state(snapshot, weights=None):
    return State(snapshot, scoring.LoadModel(snapshot, weights))
