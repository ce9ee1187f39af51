"""scalecloud: a simulated cloud API for scale work (issue 14).

Keystone, Nova, Placement and Prometheus on 127.0.0.1, answering the
requests osc-leveller makes, serving a generated cluster of any size
(benchmarks/generate.py), with a per-request latency, a concurrency limit,
request counts by endpoint, the most requests in flight, and migrations
that take time. The emulation is tests/unit/standin.py's; see
doc/source/contributor/scalecloud.rst.

    python -m tools.scalecloud serve --cluster /tmp/c1000.json \\
        --latency 0.02 --concurrency 64

    from tools.scalecloud import ScaleCloud
    with ScaleCloud('/tmp/c1000.json') as cloud:
        ...
        print(cloud.report())
"""

from tools.scalecloud.cloud import ScaleCloud  # noqa: F401
