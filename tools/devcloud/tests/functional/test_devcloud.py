"""The devcloud itself: Nova, Placement and Prometheus as the scenarios say.

A scenario names service hosts (hv01); their hypervisors (nodes, resource
providers, the exporter's series) are hv01.$DEVCLOUD_NODE_DOMAIN.
"""

import os
import time

from devcloud.tests.functional import base
from devcloud.tests.functional.base import scenario

CPU = base.HOST_CPU
CPU_PRESSURE = base.HOST_CPU_PRESSURE
NODE_DOMAIN = os.environ.get('DEVCLOUD_NODE_DOMAIN', 'devcloud.test')


# The classes run in the order of their names (stestr, one worker), each
# loading its scenario; a load that changes the hypervisors recreates them
# (about a minute). Mixed, then hot-host, which the plugin's functional
# tests load first when they run next (tox -e functional). What near-full
# promises is checked on its file (unit/test_scenarios.py); that Nova
# refuses a live migration to a hypervisor lacking a CPU feature of the
# source, and the leveller with it, by the conformance test
# (tests/functional/test_nova_agrees.py).


class TestOverloadedHost(base.DevcloudTestCase):
    """hot-host, last."""

    SCENARIO = 'hot-host'
    fresh = False

    def wait_for_fresh_series(self):
        """Until the exporter serves this scenario's hypervisors, for a rate
        window. It lists hypervisors every 30 s: after a load recreated them
        under the same names (mixed's 32-thread hv03 becomes hot-host's
        16-thread one), it may still compute the old sizes for a while."""
        if TestOverloadedHost.fresh:
            return
        memory = {h['name']: h['memory_mb'] * 1024 ** 2
                  for h in scenario('hot-host')['hypervisors']}
        base.wait_for(lambda: base.by_host('node_memory_MemTotal_bytes') ==
                      memory, 90, message='the hot-host sizes in Prometheus')
        time.sleep(12)  # rate()'s 10 s window, and a scrape
        TestOverloadedHost.fresh = True

    def test_node_names_differ_from_service_hosts(self):
        hosts = {h['name'] for h in scenario('hot-host')['hypervisors']}
        self.assertEqual(hosts, set(self.node))
        for host, node in self.node.items():
            self.assertEqual(host + '.' + NODE_DOMAIN if NODE_DOMAIN else host,
                             node)
        nodes = set(self.node.values())
        services = base.openstack('compute', 'service', 'list', '--service',
                                  'nova-compute')
        self.assertEqual(hosts, {s['Host'] for s in services})
        conn = base.connection()
        self.assertEqual(nodes, {rp.name for rp in
                                 conn.placement.resource_providers()})
        servers = list(conn.compute.servers(all_projects=True))
        self.assertTrue(servers)
        for server in servers:
            self.assertEqual(self.node[server.compute_host],
                             server.hypervisor_hostname, server.name)
        # Each hypervisor has an address of its own, Nova's host_ip, and
        # the node_exporter there names its service host.
        ips = base.host_ips()
        self.assertEqual(hosts, set(ips))
        self.assertEqual(len(hosts), len(set(ips.values())))
        base.wait_for(lambda: set(base.by_host('up')) == hosts, 60,
                      message='a node_exporter up for every hypervisor')

    def test_hypervisors_and_inventories(self):
        wanted = {h['name']: h for h in scenario('hot-host')['hypervisors']}
        hypervisors = base.openstack('hypervisor', 'list')
        self.assertEqual({self.node[h] for h in wanted},
                         {h['Hypervisor Hostname'] for h in hypervisors})
        self.assertEqual({'up'}, {h['State'] for h in hypervisors})
        conn = base.connection()
        for rp in conn.placement.resource_providers():
            spec = wanted[self.host[rp.name]]
            inventory = {i.resource_class: i for i in
                         conn.placement.resource_provider_inventories(rp)}
            self.assertEqual(spec['vcpus'], inventory['VCPU'].total)
            self.assertEqual(spec['cpu_ratio'],
                             inventory['VCPU'].allocation_ratio)
            self.assertEqual(spec['memory_mb'], inventory['MEMORY_MB'].total)
            self.assertEqual(spec['reserved_mb'],
                             inventory['MEMORY_MB'].reserved)

    def test_prometheus_has_series_for_every_hypervisor_and_server(self):
        self.wait_for_fresh_series()
        hosts = {h['name'] for h in scenario('hot-host')['hypervisors']}
        memory = base.wait_for(
            lambda: (lambda m: m if set(m) == hosts else None)(
                base.by_host('node_memory_MemTotal_bytes')),
            60, message='the memory of exactly %s' % sorted(hosts))
        self.assertEqual({64 * 1024 ** 3}, set(memory.values()))
        servers = {s['ID'] for s in base.openstack('server', 'list',
                                                   '--all-projects')}
        base.wait_for(lambda: set(base.server_cpu()) == servers, 60,
                      message='CPU time of exactly the servers')
        # hv01's servers want 24.6 of its 16 threads; the rate window needs
        # a few seconds after a scenario load to cover only the new servers
        # (and no more the load an earlier scenario put on hv02).
        base.wait_for(lambda: (lambda cpu: cpu.get('hv01', 0) > 0.95 and
                               cpu.get('hv02', 1) < 0.2)(base.by_host(CPU)),
                      60, message='hv01 CPU busy, hv02 not')
        self.assertGreater(base.by_host(CPU_PRESSURE)['hv01'], 0.1)
        # Their CPU times show what they got, not what they ask: together
        # the 16 threads less the host's own 2 %.
        on_hv01 = {s.id for s in base.connection().compute.servers(
            all_projects=True) if s.compute_host == 'hv01'}
        cpu = base.server_cpu()
        self.assertAlmostEqual(16 * 0.98, sum(cpu[i] for i in on_hv01),
                               delta=0.3)

    def test_exporter_faults_as_prometheus_scrapes_them(self):
        """devcloud fault HOST metrics MODE (by host or node name): the
        scrape of a node_exporter without CPUs, then one that fails."""
        self.wait_for_fresh_series()
        cpus = 'count by (instance, job) (node_cpu_seconds_total{mode="idle"})'
        base.devcloud('fault', 'hv02', 'metrics', 'zero-cpus')
        self.addCleanup(base.devcloud, 'fault', 'hv02', 'metrics', 'clear')
        base.wait_for(lambda: 'hv02' not in base.by_host(cpus), 30,
                      message='hv02 without CPU series')
        self.assertEqual(16, base.by_host(cpus)['hv03'])
        self.assertIn('hv02', base.by_host('node_memory_MemTotal_bytes'))
        base.devcloud('fault', self.node['hv02'], 'metrics', 'down')
        # A failed scrape marks the target's series stale at once.
        base.wait_for(lambda: 'hv02' not in base.by_host(
            'node_memory_MemTotal_bytes'), 30, message='hv02 not scraped')
        base.devcloud('fault', 'hv02', 'metrics', 'clear')
        base.wait_for(lambda: base.by_host(cpus).get('hv02') == 16, 30,
                      message='hv02 scraped with its 16 CPUs again')


class TestMixed(base.DevcloudTestCase):
    """mixed, first."""

    SCENARIO = 'mixed'

    def test_azs_cpu_models_ratios_and_states(self):
        spec = scenario('mixed')
        wanted = {h['name']: h for h in spec['hypervisors']}
        conn = base.connection()
        for rp in conn.placement.resource_providers():
            h = wanted[self.host[rp.name]]
            inventory = {i.resource_class: i for i in
                         conn.placement.resource_provider_inventories(rp)}
            self.assertEqual(h['cpu_ratio'],
                             inventory['VCPU'].allocation_ratio, rp.name)
            self.assertEqual(h.get('ram_ratio', 1.0),
                             inventory['MEMORY_MB'].allocation_ratio, rp.name)
            self.assertEqual(h['reserved_mb'],
                             inventory['MEMORY_MB'].reserved, rp.name)
            traits = set(conn.placement.get(
                '/resource_providers/%s/traits' % rp.id,
                microversion='1.6').json()['traits'])
            # The fake driver reports the features os-traits knows as traits.
            known = {'HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_AVX512F',
                     'HW_CPU_X86_AVX512VNNI'}
            expected = {'HW_CPU_X86_' + f.upper() for f in h['features']}
            self.assertEqual(expected & known, traits & known, rp.name)
        zones = {a['Name']: a for a in base.openstack('aggregate', 'list',
                                                      '--long')}
        self.assertEqual('az1', zones['agg-az1']['Availability Zone'])
        servers = {s['Name']: s for s in base.openstack(
            'server', 'list', '--all-projects', '--long')}
        self.assertEqual(sum(s.get('count', 1) for s in spec['servers']),
                         len(servers))
        self.assertEqual('PAUSED', servers['paused-1']['Status'])
        self.assertEqual('SHUTOFF', servers['shutoff-1']['Status'])
        self.assertTrue(base.openstack('server', 'show',
                                       'locked-1')['locked'])
        self.assertEqual('az2', servers['db-1']['Availability Zone'])
        groups = {g['Name']: g for g in base.openstack(
            'server', 'group', 'list', '--all-projects')}
        self.assertEqual('anti-affinity', groups['web']['Policy'])
        self.assertEqual('affinity', groups['cache']['Policy'])
