"""A saturated hypervisor, read through the real Prometheus.

hv01 of the hot-host scenario runs servers that ask for about one and a
half times its threads. The devcloud's libvirt exporter (kolla: inovex)
counts what each vCPU got and, as libvirt's vCPU delay, the time it waited:
the leveller must read that steal, score hv01 above 100 % CPU, and plan no
move that takes a hypervisor past its threads.
"""

import json
import os
import tempfile

from tests.functional import base


def threads(hyp):
    inventories = hyp.get('inventories') or {}
    return sum((inventories.get(rc) or {}).get('total', 0)
               for rc in ('VCPU', 'PCPU'))


def demand(document):
    """{hypervisor: threads its servers ask for}, as the snapshot says:
    busy plus the servers' steal."""
    asked = {h['name']: (h.get('metrics') or {}).get('cpu', 0.0) *
             threads(h) for h in document['hypervisors']}
    for server in document['servers']:
        usage = server.get('usage') or {}
        asked[server['hypervisor']] += (usage.get('cpu_steal') or 0.0) * \
            server['flavor']['vcpus']
    return asked


class TestSaturation(base.DevcloudTestCase):
    SCENARIO = 'hot-host'

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def snapshot(self):
        path = os.path.join(self.tmp.name, 'snapshot.json')
        base.openstack('leveller', 'snapshot', '--output-file', path,
                       parse=False)
        with open(path) as stream:
            return json.load(stream), path

    def test_steal_scores_the_demand_and_no_move_saturates(self):
        hot = self.node['hv01']

        def saturated():
            """The snapshot once the rates cover the scenario's load: 6 x 4
            vCPUs at 90 % and 2 x 2 at 60-90 % on hv01, plus the host's own
            work, at least 24 threads asked of 16; the others idle."""
            document, path = self.snapshot()
            by_name = {h['name']: h for h in document['hypervisors']}
            asked = demand(document)
            if by_name[hot].get('metrics') and all(
                    asked[name] / threads(by_name[name]) > 1.4
                    if name == hot else
                    asked[name] / threads(by_name[name]) < 0.1
                    for name in asked):
                return document, path
            return None
        document, path = base.wait_for(saturated, 120, interval=5,
                                       message='hv01 asked for 1.4 times '
                                       'its threads, busy plus steal')
        by_name = {h['name']: h for h in document['hypervisors']}
        asked = demand(document)
        for server in document['servers']:
            if server['name'].startswith('busy-'):
                self.assertGreater(server['usage']['cpu_steal'], 0.1, server)
        # Nothing waits on the idle hypervisors.
        for server in document['servers']:
            if server['hypervisor'] != hot:
                self.assertLess((server.get('usage') or {}).get(
                    'cpu_steal', 0.0), 0.02, server)

        result = base.openstack('leveller', 'score', '--snapshot', path,
                                '-f', 'json', parse=False)
        rows = {r['Hypervisor']: r for r in json.loads(result.stdout)}
        self.assertAlmostEqual(100 * asked[hot] / threads(by_name[hot]),
                               rows[hot]['CPU %'], delta=0.2)
        self.assertIn('CPU saturated (its servers ask for more than its '
                      'threads, busy plus steal): %s' % hot, result.stderr)

        moves = base.openstack('leveller', 'plan', '--snapshot', path,
                               '--long', '-f', 'json')
        self.assertTrue(moves, 'no move off the saturated hv01')
        after = dict(asked)
        servers = {s['id']: s for s in document['servers']}
        for move in moves:
            server = servers[move['Server ID']]
            usage = server.get('usage') or {}
            load = min(1.0, usage.get('cpu', 0.0) + usage.get(
                'cpu_steal', 0.0)) * server['flavor']['vcpus']
            after[move['Source']] -= load
            after[move['Destination']] += load
            self.assertLessEqual(
                after[move['Destination']],
                threads(by_name[move['Destination']]) + 1e-6, move)
        self.assertLess(after[hot], asked[hot])
