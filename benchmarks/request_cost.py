"""What one Placement GET costs the client, layer by layer.

A whole read of 1,000 hypervisors sends some 3,000 requests to Placement
(inventories, allocations and traits of each provider). This times the
client's own CPU for one such GET through each layer a request can take,
against a scalecloud answering at once (no latency), in turn, --repeat
rounds of --requests each, medians:

- ``openstacksdk proxy, path``: ``conn.placement.get(path)``, as the
  collector sent them before it looked the endpoint up once a read;
- ``openstacksdk proxy, URL``: the same with the endpoint's URL, as it
  sends them now (no catalog lookup a request);
- ``requests``: the ``requests.Session`` keystoneauth uses, the token in
  the headers;
- ``requests, environment read once``: a session that does not scan the
  environment for proxies and CA bundles on every request;
- ``urllib3``: a pool manager, the layer under requests.

    python benchmarks/request_cost.py --json benchmarks/results/request_cost.json

The figures are a floor for the read, not a plan: every layer but the
first two drops something keystoneauth does for each request (token
renewal, retries, its logging, the environment's proxies and CA bundle).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks import stamp  # noqa: E402


def layers(conn):
    """[(name, get(uuid) -> decoded body)]."""
    import requests
    import urllib3

    placement = conn.placement
    base = placement.get_endpoint().rstrip('/')
    path = '/resource_providers/%s/inventories'
    headers = dict(conn.session.get_auth_headers(),
                   Accept='application/json')
    plain = conn.session.session
    once = requests.Session()
    once.trust_env = False
    once.auth = plain.auth
    for prefix, adapter in plain.adapters.items():
        once.mount(prefix, adapter)
    settings = plain.merge_environment_settings(
        base, {}, None, conn.session.verify, conn.session.cert)
    pool = urllib3.PoolManager(maxsize=4)
    return [
        ('openstacksdk proxy, path',
         lambda u: placement.get(path % u).json()),
        ('openstacksdk proxy, URL',
         lambda u: placement.get(base + path % u).json()),
        ('requests',
         lambda u: plain.get(base + path % u, headers=headers).json()),
        ('requests, environment read once',
         lambda u: once.get(base + path % u, headers=headers,
                            **settings).json()),
        ('urllib3',
         lambda u: json.loads(pool.request(
             'GET', base + path % u, headers=headers).data)),
    ]


def child(args):
    """In a process of its own (scalecloud's threads would count in this
    one's CPU): the rounds, one JSON line."""
    from openstack import config

    from osc_leveller.cloud import connection

    # As the plugin connects (its timeouts, pool, no .netrc).
    conn = connection.open_connection(
        config.OpenStackConfig(), argparse.Namespace(cloud=args.cloud))
    uuids = [rp['uuid'] for rp in conn.placement.get(
        '/resource_providers').json()['resource_providers']]
    ways = layers(conn)
    seen = {name: [] for name, _ in ways}
    for _ in range(args.repeat):
        for name, get in ways:
            started = time.process_time()
            for i in range(args.requests):
                get(uuids[i % len(uuids)])
            seen[name].append(
                (time.process_time() - started) / args.requests)
    print(json.dumps(seen))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=100)
    parser.add_argument('--requests', type=int, default=500)
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--json', metavar='FILE')
    parser.add_argument('--child', action='store_true',
                        help=argparse.SUPPRESS)
    parser.add_argument('--cloud', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    from benchmarks import generate
    from tools.scalecloud import cloud as scale

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'cluster.json')
        with open(path, 'w') as stream:
            json.dump(generate.generate(args.hosts, args.hosts * 50, 1),
                      stream)
        with scale.ScaleCloud(path, latency=0, bandwidth=None) as cloud:
            env = cloud.shell_env(cloud.write_clouds_yaml(
                os.path.join(tmp, 'clouds.yaml')))
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), '--child',
                 '--cloud', scale.CLOUD, '--requests', str(args.requests),
                 '--repeat', str(args.repeat)],
                env=dict(env, PYTHONPATH=ROOT), capture_output=True,
                check=False)
    if out.returncode:
        sys.exit(out.stderr.decode()[-3000:])
    seen = json.loads(out.stdout.decode().splitlines()[-1])
    rows = [{'layer': name, 'cpu_ms_per_request': round(
        1000 * statistics.median(times), 3)} for name, times in seen.items()]
    for row in rows:
        print('%-34s %6.3f ms of CPU a request' % (
            row['layer'], row['cpu_ms_per_request']))
    if args.json:
        stamp.write(args.json, stamp.stamped(
            requests=args.requests, repeat=args.repeat, rows=rows))


if __name__ == '__main__':
    main()
