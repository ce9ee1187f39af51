"""python -m tools.scalecloud serve|report: see tools/scalecloud/__init__.py."""

import argparse
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
import urllib.request

from tools.scalecloud import cloud as scale


def serve(args):
    cloud = scale.ScaleCloud(
        args.cluster, latency=args.latency, concurrency=args.concurrency or None,
        bandwidth=args.bandwidth or None,
        migration_overhead=args.migration_overhead,
        live_migrations_per_host=args.live_migrations_per_host,
        failure_rate=args.failure_rate, seed=args.seed, images=args.images,
        max_limit=args.max_limit, port=args.port)
    clouds_yaml = args.clouds_yaml or os.path.join(
        tempfile.mkdtemp(prefix='scalecloud-'), 'clouds.yaml')
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    os.makedirs(os.path.dirname(os.path.abspath(clouds_yaml)), exist_ok=True)
    with cloud:
        cloud.write_clouds_yaml(clouds_yaml)
        print('# scalecloud: %d hypervisors, %d servers, loaded in %.1f s' % (
            len(cloud._hyps), len(cloud._server_seq), cloud.load_seconds))
        print('export OS_CLIENT_CONFIG_FILE=%s OS_CLOUD=%s' % (
            shlex.quote(clouds_yaml), scale.CLOUD))
        print('# or, without a clouds.yaml (then the leveller has no '
              'Prometheus URL):')
        print('# export %s' % ' '.join(
            '%s=%s' % (k, shlex.quote(v))
            for k, v in sorted(cloud.os_environ().items())))
        print('# Prometheus: %s' % cloud.prometheus_url)
        print('# counts: python -m tools.scalecloud report --admin-url %s '
              '(or curl %s/report); stop with Ctrl-C or SIGTERM' % (
                  cloud.admin_url, cloud.admin_url))
        sys.stdout.flush()
        done.wait()
        print(cloud.report(), file=sys.stderr)
    return 0


def report(args):
    url = args.admin_url.rstrip('/')
    if args.reset:
        request = urllib.request.Request(url + '/reset', method='POST')
        urllib.request.urlopen(request, timeout=30).close()
        return 0
    with urllib.request.urlopen(url + '/', timeout=60) as response:
        summary = json.load(response)
    print(json.dumps(summary, indent=1) if args.json
          else scale.format_report(summary))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m tools.scalecloud',
        description='A simulated Keystone, Nova, Placement, Glance and '
                    'Prometheus on '
                    '127.0.0.1 serving a generated cloud of any size.')
    commands = parser.add_subparsers(dest='command', required=True)
    p = commands.add_parser('serve', help='serve a cluster until stopped')
    p.add_argument('--cluster', required=True,
                   help='a benchmarks/generate.py cluster or a snapshot file')
    p.add_argument('--latency', type=float, default=scale.LATENCY,
                   help='seconds before each answer (default %(default)s)')
    p.add_argument('--concurrency', type=int, default=scale.CONCURRENCY,
                   help='requests one service serves at once, the rest '
                        'wait; 0: no limit (default %(default)s)')
    p.add_argument('--bandwidth', type=float, default=scale.BANDWIDTH,
                   help='MiB/s a migration copies (server RAM / this is its '
                        'time); 0: migrations complete at once '
                        '(default %(default)s)')
    p.add_argument('--migration-overhead', type=float, default=0.0,
                   help='seconds every migration takes besides the copy')
    p.add_argument('--live-migrations-per-host', type=int, default=1,
                   help="Nova's max_concurrent_live_migrations (default 1)")
    p.add_argument('--failure-rate', type=float, default=0.0,
                   help='share of migrations that fail and roll back')
    p.add_argument('--seed', type=int, default=0,
                   help='seed of the failures drawn')
    p.add_argument('--max-limit', type=int, default=1000,
                   help="Nova's [api] max_limit, its page size")
    p.add_argument('--port', type=int, default=0,
                   help='first of six consecutive ports (Keystone, Nova, '
                        'Placement, Glance, Prometheus, admin); default: '
                        'free ones')
    p.add_argument('--images', type=int, default=scale.images_mod.IMAGES,
                   help='Glance images the servers of a generated cluster '
                        'boot from (default %(default)s)')
    p.add_argument('--clouds-yaml', help='where to write the clouds.yaml '
                                         '(default: a new temporary directory)')
    p.set_defaults(run=serve)
    p = commands.add_parser('report', help='the counts of a running serve')
    p.add_argument('--admin-url', required=True)
    p.add_argument('--json', action='store_true')
    p.add_argument('--reset', action='store_true',
                   help='start the counts and peaks again instead')
    p.set_defaults(run=report)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == '__main__':
    sys.exit(main())
