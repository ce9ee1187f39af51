"""Seeded, imbalanced clusters for the benchmarks.

The output is the cluster JSON of the Watcher baseline harness
(../shared/bench/watcher_baseline), so Watcher's strategies and osc-leveller
read the same file, plus an optional ``server_groups`` list that Watcher
ignores. What makes a cluster realistic here:

- 2-4 availability zones and 2-4 CPU generations (each generation has its own
  host size); every AZ mixes generations, so balancing domains (AZ x CPU
  model) differ in size;
- flavours from 1 vCPU/2 GiB to 24 vCPU/256 GiB, small ones most common;
- hot hosts (a placement skew: they got more servers), cold ones, and a few
  near-full ones (RAM allocated above 90 %);
- peaky utilisation: most servers idle along, some run near 100 %;
- anti-affinity groups spread over hosts of one AZ, affinity pairs on one
  host, and a few stopped servers.

    python benchmarks/generate.py --hosts 100 --servers 2000 --seed 1 -o c.json
"""

import argparse
import bisect
import itertools
import json
import random
import sys
import uuid

# (vcpus, GiB, weight): the flavour mix.
FLAVOURS = ((1, 2, 14), (2, 4, 18), (2, 8, 14), (4, 8, 14), (4, 16, 14),
            (8, 16, 8), (8, 32, 8), (12, 48, 3), (16, 64, 4), (16, 128, 1.5),
            (24, 96, 1), (24, 256, 0.5))  # mean about 4.5 vCPU, 17 GiB
# (model, threads, GiB of RAM): one host size per CPU generation. 50
# servers a host fill about 70 % of the RAM.
GENERATIONS = (('Skylake-Server', 64, 768), ('Cascadelake-Server', 96, 1024),
               ('Icelake-Server', 128, 1536), ('SapphireRapids', 192, 2048))
RESERVED_MB = 16384
CPU_RATIO = 4.0


def generate(hosts, servers, seed=1):
    """A cluster dict with `hosts` hypervisors and `servers` servers."""
    rng = random.Random(seed)
    azs = ['az%d' % (i + 1) for i in range(rng.randint(2, 4))]
    generations = GENERATIONS[:rng.randint(2, 4)]
    hyps, heat, free = [], [], []
    for i in range(hosts):
        model, threads, ram_gb = generations[rng.randrange(len(generations))]
        kind = rng.random()
        # Hot hosts draw more servers, cold ones fewer: Nova's placement
        # history, not the load, is what makes a cloud uneven.
        heat.append(3.0 if kind < 0.1 else 0.3 if kind < 0.25 else 1.0)
        hyps.append({
            'name': 'cn%04d' % (i + 1),
            'uuid': str(uuid.UUID(int=rng.getrandbits(128))),
            'vcpus': threads, 'memory_mb': ram_gb * 1024,
            'disk_gb': 4000, 'cpu_ratio': CPU_RATIO, 'ram_ratio': 1.0,
            'reserved_memory_mb': RESERVED_MB,
            'az': azs[i % len(azs)], 'cpu_model': model,
            'state': 'up', 'status': 'enabled'})
        free.append([threads * CPU_RATIO, ram_gb * 1024 - RESERVED_MB])
    near_full = sorted(rng.sample(range(hosts), max(1, hosts // 30)))
    size = [h['memory_mb'] - RESERVED_MB for h in hyps]
    cum = list(itertools.accumulate(heat))
    flavours = [f[:2] for f in FLAVOURS]
    weights = [f[2] for f in FLAVOURS]
    out, on_host = [], [[] for _ in range(hosts)]
    for n in range(servers):
        vcpus, ram_gb = rng.choices(flavours, weights)[0]
        index = _place(rng, cum, free, size, vcpus, ram_gb * 1024,
                       near_full)
        if index is None:
            continue  # the cluster is full for this flavour
        free[index][0] -= vcpus
        free[index][1] -= ram_gb * 1024
        peaky = rng.random() < 0.15
        server = {
            'id': str(uuid.UUID(int=rng.getrandbits(128))),
            'name': 'vm-%05d' % (n + 1), 'host': hyps[index]['name'],
            'vcpus': vcpus, 'memory_mb': ram_gb * 1024,
            'disk_gb': rng.choice((0, 20, 40, 80)),
            'cpu_util': round(rng.uniform(0.75, 1.0) if peaky
                              else rng.betavariate(1.2, 4.0), 3),
            'mem_util': round(rng.uniform(0.3, 0.95), 3),
            'status': 'SHUTOFF' if rng.random() < 0.03 else 'ACTIVE'}
        out.append(server)
        on_host[index].append(server)
    return {'hypervisors': hyps, 'servers': out,
            'server_groups': _groups(rng, hyps, on_host)}


def _place(rng, cum, free, size, vcpus, ram_mb, near_full):
    """A host index with room, drawn by heat; near-full hosts fill first."""
    for index in near_full:
        if free[index][1] - ram_mb > 0.06 * size[index] and \
                free[index][0] >= vcpus and rng.random() < 0.3:
            return index
    for _ in range(20):
        index = bisect.bisect(cum, rng.random() * cum[-1])
        if free[index][0] >= vcpus and free[index][1] >= ram_mb:
            return index
    fits = [i for i, (c, r) in enumerate(free) if c >= vcpus and r >= ram_mb]
    return rng.choice(fits) if fits else None


def _groups(rng, hyps, on_host):
    """Anti-affinity groups across hosts of one AZ; affinity pairs on one."""
    groups, used = [], set()
    by_az = {}
    for index, hyp in enumerate(hyps):
        by_az.setdefault(hyp['az'], []).append(index)
    count = max(1, sum(len(s) for s in on_host) // 100)
    for g in range(count):
        az_hosts = by_az[rng.choice(sorted(by_az))]
        size = min(rng.randint(2, 4), len(az_hosts))
        members = []
        for index in rng.sample(az_hosts, size):
            candidates = [s for s in on_host[index]
                          if s['id'] not in used and s['status'] == 'ACTIVE']
            if candidates:
                members.append(rng.choice(candidates)['id'])
        used.update(members)
        if len(members) > 1:
            groups.append({'id': str(uuid.UUID(int=rng.getrandbits(128))),
                           'name': 'anti-%d' % g, 'policy': 'anti-affinity',
                           'members': members})
    for g in range(count // 2):
        index = rng.randrange(len(hyps))
        candidates = [s for s in on_host[index] if s['id'] not in used]
        if len(candidates) < 2:
            continue
        members = [s['id'] for s in rng.sample(candidates, 2)]
        used.update(members)
        groups.append({'id': str(uuid.UUID(int=rng.getrandbits(128))),
                       'name': 'affinity-%d' % g, 'policy': 'affinity',
                       'members': members})
    return groups


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, required=True)
    parser.add_argument('--servers', type=int, required=True)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('-o', '--output', default='-')
    args = parser.parse_args(argv)
    write(generate(args.hosts, args.servers, args.seed), args.output)
    return 0


def write(document, output):
    """The document as JSON in the file output, or on stdout for '-'."""
    if output == '-':
        json.dump(document, sys.stdout)
    else:
        with open(output, 'w') as stream:
            json.dump(document, stream)


if __name__ == '__main__':
    sys.exit(main())
