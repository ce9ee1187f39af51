"""The exact optimum with at most K moves, to measure how far the planner is.

For each balancing domain and each K, a MILP (scipy.optimize.milp, HiGHS)
finds the placement with at most K servers moved that minimises the
planner's own objective in that domain: the sum of squared deviations from
the domain mean of each part of the host score, CPU and RAM. Its constraints
are the planner's, read from the same objects the planner uses:

- a server moves only if the planner may move it at all (status, locks,
  cooldown, scope ...), within its balancing domain, to a hypervisor the
  static filters accept (AZ, CPU, aggregates, tenant, traits, service);
- Placement capacity under the allocation ratios, per resource class;
- server groups: anti-affinity limit per hypervisor, affinity members only
  where another member already is (what the filter lets a member do);
- the score ceiling.

Where the initial state already breaks a limit (an overcommitted host, a
group over its limit), the limit is relaxed to the current value, and the
order of the moves is ignored: both can only make the optimum better, so the
gap is, if anything, overstated. The planner runs on the same domain alone
(every other hypervisor excluded), with --max-moves K: once as shipped, and
once with a huge --move-cost, which makes it rank moves by gain alone, the
MILP's objective.

A part's SSE is min over m of sum (p_h - m)^2, convex in (p, m): it is
bounded from below by tangent planes t_h >= 2c (p_h - m) - c^2 on a grid of
c. The MILP value is thus a lower bound of the true optimum, and the true
SSE of its placement an upper bound; both are reported.

    python benchmarks/optimum.py --hosts 20 --servers 300 [--k 10] [--json F]
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
from scipy import optimize
from scipy import sparse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import generate  # noqa: E402
from osc_leveller.core.model import snapshot as snapshot_io  # noqa: E402
from osc_leveller.core.planning import paths  # noqa: E402
from osc_leveller.core.planning import planner  # noqa: E402
from osc_leveller.core.rules import filters  # noqa: E402
from osc_leveller.core.settings import options as opts  # noqa: E402

TANGENTS = np.linspace(-1.0, 1.0, 161)  # c of the cuts: step 0.0125
RESOURCES = ('VCPU', 'MEMORY_MB', 'DISK_GB')
GAIN_ONLY = 1e9  # --move-cost that makes the planner rank by gain alone


class Model:
    """The MILP of one balancing domain of a snapshot."""

    def __init__(self, snap, options, domain):
        self.snap = snap
        self.options = options
        self.planner = planner.Planner(snap, options)
        p = self.planner
        self.hosts = sorted(h for h in p.scope if p.domain_of[h] == domain)
        self.index = {h: i for i, h in enumerate(self.hosts)}
        self.variables = []  # (server id, host) of every x
        self.choices = {}  # server id -> its variables, staying first
        for src in self.hosts:
            for sid in p.search.movable_on(src):
                allowed = [src] + [h for h in self.hosts
                                   if h != src and self._may(sid, h)]
                if len(allowed) > 1:
                    self.choices[sid] = list(range(
                        len(self.variables), len(self.variables) +
                        len(allowed)))
                    self.variables += [(sid, h) for h in allowed]

    def _may(self, sid, host):
        server = self.snap.server(sid)
        dest = self.snap.hypervisor(host)
        state = self.planner.state
        rules = self.planner.rules
        for check in (filters.not_source,) + paths.STATIC_FILTERS:
            if check(server, dest, state, rules):
                return False
        for group in rules.groups_of.get(sid, ()):
            if not group.policy.endswith('anti-affinity'):
                others = [m for m in rules.group_members[group.id]
                          if m != sid]
                if others and not any(state.host_of(m) == host
                                      for m in others):
                    return False
        return True

    def solve(self, k, time_limit=120.0, rounds=6):
        """(moves [(server id, destination)], lower bound, seconds, status).

        Kelley's cutting planes: after each solve, a cut at every host's
        actual deviation, until the cuts' value matches the true SSE.
        """
        cuts = [list(TANGENTS) for _ in range(2 * len(self.hosts))]
        seconds = 0.0
        for _ in range(rounds):
            moves, bound, spent, status, deviations = self._solve(
                k, time_limit, cuts)
            seconds += spent
            if moves is None:
                break
            if self.sse(moves) - bound <= 1e-9 + 1e-6 * bound:
                break
            for i, d in enumerate(deviations):
                cuts[i].append(d)
        return moves, bound, seconds, status

    def _solve(self, k, time_limit, cuts):
        p = self.planner
        n_x, n_h = len(self.variables), len(self.hosts)
        # Columns: x (binary); per part (CPU, RAM): p_h, t_h, then m.
        part0 = [n_x, n_x + 2 * n_h + 1]
        n = n_x + 2 * (2 * n_h + 1)
        rows, lo, hi = [], [], []

        def add(coefs, low, high):
            rows.append(coefs)
            lo.append(low)
            hi.append(high)

        staying = [indexes[0] for indexes in self.choices.values()]
        fixed = {h: list(p.state.parts(h)) for h in self.hosts}
        for sid, indexes in self.choices.items():
            src = self.variables[indexes[0]][1]
            for i, v in enumerate(p.model.server_parts(sid, src)):
                fixed[src][i] -= v
        on = {h: [] for h in self.hosts}
        for j, (sid, h) in enumerate(self.variables):
            on[h].append(j)
        for part in (0, 1):
            for h in self.hosts:
                coefs = {part0[part] + self.index[h]: 1.0}
                for j in on[h]:
                    sid = self.variables[j][0]
                    coefs[j] = -p.model.server_parts(sid, h)[part]
                add(coefs, fixed[h][part], fixed[h][part])
        for indexes in self.choices.values():
            add({j: 1.0 for j in indexes}, 1, 1)
        add({j: -1.0 for j in staying}, -np.inf, k - len(staying))
        for h in self.hosts:
            hyp = self.snap.hypervisor(h)
            for rc in RESOURCES:
                inv = hyp.inventories.get(rc)
                if inv is None:
                    continue
                used = base = hyp.usage(rc)
                coefs = {}
                for j in on[h]:
                    sid = self.variables[j][0]
                    amount = self.snap.server(sid).resources.get(rc, 0)
                    if amount:
                        coefs[j] = amount
                        if j in staying:
                            base -= amount
                if coefs:
                    add(coefs, -np.inf, max(inv.capacity, used) - base)
        rules = p.rules
        for group in self.snap.server_groups:
            if not group.policy.endswith('anti-affinity'):
                continue
            limit = (group.max_server_per_host or 1) \
                if group.policy == 'anti-affinity' else 1
            members = rules.group_members[group.id]
            for h in self.hosts:
                coefs = {j: 1.0 for j in on[h]
                         if self.variables[j][0] in members}
                now = [m for m in members if p.state.host_of(m) == h]
                pinned = sum(1 for m in now if m not in self.choices)
                if coefs:
                    add(coefs, -np.inf, max(limit, len(now)) - pinned)
        for h in self.hosts:  # the ceiling, on the score (parts summed)
            i = self.index[h]
            add({part0[0] + i: 1.0, part0[1] + i: 1.0}, -np.inf,
                max(self.options.ceiling, p.state.score(h)))
        for part in (0, 1):
            mean = part0[part] + 2 * n_h
            for h in self.hosts:
                i = self.index[h]
                for c in cuts[part * n_h + i]:
                    add({part0[part] + n_h + i: 1.0,
                         part0[part] + i: -2 * c, mean: 2 * c},
                        -c * c, np.inf)
        matrix = sparse.lil_matrix((len(rows), n))
        for r, coefs in enumerate(rows):
            for j, v in coefs.items():
                matrix[r, j] = v
        low = np.full(n, -np.inf)
        high = np.full(n, np.inf)
        low[:n_x], high[:n_x] = 0, 1
        cost = np.zeros(n)
        for part in (0, 1):
            cost[part0[part] + n_h:part0[part] + 2 * n_h] = 1.0
        integrality = np.zeros(n)
        integrality[:n_x] = 1
        started = time.perf_counter()
        result = optimize.milp(
            cost, integrality=integrality, bounds=optimize.Bounds(low, high),
            constraints=optimize.LinearConstraint(matrix.tocsr(), lo, hi),
            options={'time_limit': time_limit, 'mip_rel_gap': 1e-6})
        seconds = time.perf_counter() - started
        if result.x is None:
            return None, None, seconds, result.message, None
        moves = [self.variables[j] for j in range(n_x)
                 if result.x[j] > 0.5 and j not in staying]
        bound = getattr(result, 'mip_dual_bound', None)
        deviations = [result.x[part0[part] + i] -
                      result.x[part0[part] + 2 * n_h]
                      for part in (0, 1) for i in range(n_h)]
        return moves, result.fun if bound is None else bound, seconds, \
            result.message, deviations

    def sse(self, moves):
        """The planner's objective in this domain after the moves."""
        state = self.planner.state.copy()
        for sid, dst in moves:
            state.apply(sid, dst)
        total = 0.0
        for part in (0, 1):
            values = [state.parts(h)[part] for h in self.hosts]
            mean = sum(values) / len(values)
            total += sum((v - mean) ** 2 for v in values)
        return total


def _ours(snap, options, model, k, move_cost):
    # min_gain stops the planner where a move is not worth it; the MILP
    # has no such stop, so neither does the planner here.
    alone = opts.PlannerOptions(**dict(
        options.__dict__, max_moves=k, threshold=0.0, min_gain=1e-9,
        move_cost_gb=move_cost,
        exclude_hosts=frozenset(h.name for h in snap.hypervisors
                                if h.name not in model.hosts)))
    plan = planner.make_plan(snap, alone)
    return model.sse([(m.server_id, m.destination) for m in plan.moves]), \
        len(plan.moves)


def compare(snap, ks, options=None, time_limit=120.0, min_hosts=3):
    """Per domain above the threshold with at least min_hosts hosts, per K:
    the planner's SSE
    (as shipped, and ranking by gain alone), the optimum's, the shares."""
    options = options or opts.PlannerOptions()
    first = planner.Planner(snap, options)
    # The domains the planner would balance: above the threshold.
    domains = [s.domain for s in first.stats()
               if s.imbalance >= options.threshold]
    rows = []
    for domain in domains:
        model = Model(snap, options, domain)
        if len(model.hosts) < min_hosts or not model.choices:
            continue
        start = model.sse([])
        for k in ks:
            shipped, _ = _ours(snap, options, model, k,
                               options.move_cost_gb)
            by_gain, made = _ours(snap, options, model, k, GAIN_ONLY)
            moves, bound, seconds, status = model.solve(k, time_limit)
            best = model.sse(moves) if moves is not None else None

            def share(value):
                if best is None or start - best <= 1e-12:
                    return None
                return (start - value) / (start - best)

            rows.append({
                'domain': domain, 'hosts': len(model.hosts),
                'servers': len(model.choices), 'k': k, 'start_sse': start,
                'ours_sse': shipped, 'ours_gain_only_sse': by_gain,
                'ours_gain_only_moves': made, 'optimum_sse': best,
                'optimum_lower_bound': bound,
                'optimum_moves': None if moves is None else len(moves),
                'milp_seconds': seconds, 'milp_status': status,
                # Shares of the optimum's improvement.
                'share': share(shipped), 'share_gain_only': share(by_gain)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=20)
    parser.add_argument('--servers', type=int, default=300)
    parser.add_argument('--seed', type=int, action='append')
    parser.add_argument('--k', type=int, default=10)
    parser.add_argument('--time-limit', type=float, default=120.0)
    parser.add_argument('--json', metavar='FILE')
    args = parser.parse_args(argv)
    results = []
    for seed in args.seed or [1]:
        cluster = generate.generate(args.hosts, args.servers, seed)
        with tempfile.NamedTemporaryFile('w', suffix='.json') as f:
            json.dump(cluster, f)
            f.flush()
            snap = snapshot_io.load(f.name)
        rows = compare(snap, range(1, args.k + 1), opts.PlannerOptions(),
                       args.time_limit)
        print('%d hosts / %d servers, seed %d' % (args.hosts, args.servers,
                                                  seed))
        print('%-28s %3s %9s %9s %9s %9s %7s %7s %6s' % (
            'domain', 'K', 'start', 'ours', 'by gain', 'optimum', 'share',
            'by gain', 'MILP s'))
        for r in rows:
            print('%-28s %3d %9.5f %9.5f %9.5f %9.5f %6.1f%% %6.1f%% %6.1f'
                  % ('%s (%d hosts)' % (r['domain'], r['hosts']), r['k'],
                     r['start_sse'], r['ours_sse'], r['ours_gain_only_sse'],
                     r['optimum_sse'], 100 * (r['share'] or 0),
                     100 * (r['share_gain_only'] or 0), r['milp_seconds']),
                  flush=True)
        results.append({'hosts': args.hosts, 'servers': args.servers,
                        'seed': seed, 'rows': rows})
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'results': results}, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
