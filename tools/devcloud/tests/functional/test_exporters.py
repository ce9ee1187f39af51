"""The exporters' flavours on the running devcloud, through Prometheus.

Each test switches the flavour (`devcloud exporters FLAVOUR`: only the
exporters and Prometheus restart) and checks, in Prometheus, that every
target is up with the labels the deployment gives it, and that every
hypervisor and every server with a libvirt domain has its series, named and
labelled as the real exporter does. In `debian` the first hypervisor's
series come from Debian's real node_exporter and libvirt exporter.

The scenario is the one loaded (hot-host after test_devcloud); a server on
the first hypervisor is paused and another stopped for the class, so every
domain state shows.
"""

import collections

from devcloud.tests.functional import base

# servers whose libvirt domain is running, paused, shut off (none: no domain)
DOMAIN_STATES = {'ACTIVE': 'running', 'MIGRATING': 'running',
                 'PAUSED': 'paused', 'SHUTOFF': 'shutoff',
                 'SUSPENDED': 'shutoff'}


class TestExporterFlavours(base.DevcloudTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        conn = base.connection()
        # Whatever an earlier class left loaded, or hot-host on a cloud
        # with no server (or no hypervisor: one of run --clouds N's own)
        if not list(conn.compute.servers(all_projects=True)):
            base.devcloud('load', 'hot-host')
        cls.first = first = min(base.hypervisor_names())
        cls.changed = []
        on_first = [s for s in conn.compute.servers(all_projects=True)
                    if s.compute_host == first]
        states = {s.status for s in on_first}
        active = [s for s in on_first if s.status == 'ACTIVE']
        if 'PAUSED' not in states and active:
            server = active.pop()
            conn.compute.pause_server(server)
            conn.compute.wait_for_server(server, status='PAUSED', wait=120)
            cls.changed.append((server, 'PAUSED'))
        if 'SHUTOFF' not in states and active:
            server = active.pop()
            conn.compute.stop_server(server)
            conn.compute.wait_for_server(server, status='SHUTOFF', wait=120)
            cls.changed.append((server, 'SHUTOFF'))
        cls.node = base.hypervisor_names()
        cls.ips = base.host_ips()
        cls.servers = list(conn.compute.servers(all_projects=True))

    @classmethod
    def tearDownClass(cls):
        try:
            if base.flavour() != 'kolla':
                base.devcloud('exporters', 'kolla')
        finally:
            conn = base.connection()
            for server, state in cls.changed:
                if state == 'PAUSED':
                    conn.compute.unpause_server(server)
                else:
                    conn.compute.start_server(server)
                conn.compute.wait_for_server(server, status='ACTIVE', wait=120)
            super().tearDownClass()

    # ------------------------------------------------------------ helpers

    def switch(self, flavour):
        base.devcloud('exporters', flavour)
        self.assertEqual(flavour, base.flavour())

    def targets(self):
        """{job: {service host: target labels}}, every target up."""
        found = collections.defaultdict(dict)
        active = base.prometheus_get('/api/v1/targets')['activeTargets']
        ips = {ip: host for host, ip in self.ips.items()}
        for target in active:
            self.assertEqual('up', target['health'], target)
            labels = target['labels']
            ip = target['scrapeUrl'].split('//')[1].split(':')[0]
            host = ips.get(ip) or ips.get(ip.replace('127.0.1.', '127.0.0.'))
            self.assertIsNotNone(host, target)
            found[labels['job']][host] = labels
        self.assertEqual(2 * len(self.node), len(active))
        return found

    def domains(self, states):
        """The servers whose domain is in one of the states."""
        return {s.id: s for s in self.servers
                if DOMAIN_STATES.get(s.status) in states}

    def label_keys(self, metric):
        result = base.prometheus_get('/api/v1/query', {'query': metric})['result']
        return {tuple(sorted(k for k in r['metric'] if k != '__name__'))
                for r in result}

    def values(self, query, key):
        result = base.prometheus_get('/api/v1/query', {'query': query})['result']
        return {r['metric'][key]: float(r['value'][1]) for r in result}

    def check_nodes(self, node_job):
        """node_exporter series of every hypervisor, found by nodename."""
        hosts = set(self.node)
        self.assertEqual(hosts, set(base.by_host('node_memory_MemTotal_bytes')))
        self.assertEqual(hosts, set(base.by_host(base.HOST_CPU)))   # a 10 s rate
        self.assertEqual(hosts, set(base.by_host(
            'rate(node_pressure_cpu_waiting_seconds_total[30s])')))
        self.assertEqual(hosts, set(base.by_host(
            'node_pressure_memory_stalled_seconds_total')))
        modes = self.values('count by (mode) (node_cpu_seconds_total{job="%s"})'
                            % node_job, 'mode')
        self.assertEqual({'user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq',
                          'steal'}, set(modes))

    def check_server_cpu(self, states):
        cpu = base.server_cpu('30s')
        self.assertEqual(set(self.domains(states)), set(cpu))

    def check_vcpu_delay(self, states):
        """Time and delay for each vCPU of the domains in states."""
        names = {s.instance_name: s.flavor.vcpus for s in self.domains(states).values()}
        for family in ('time', 'delay'):
            metric = 'libvirt_domain_vcpu_%s_seconds_total' % family
            self.assertEqual({('domain', 'instance', 'job', 'vcpu')}, self.label_keys(metric))
            self.assertEqual(names, self.values('count by (domain) (%s)' % metric, 'domain'))

    # ------------------------------------------------------------ flavours

    def test_debian(self):
        self.switch('debian')
        targets = self.targets()
        self.assertEqual({'node', 'libvirt'}, set(targets))
        for job, port in (('node', 9100), ('libvirt', 9177)):
            for host, labels in targets[job].items():
                # the monitoring network: not Nova's host_ip
                ip = self.ips[host].replace('127.0.0.', '127.0.1.')
                self.assertEqual({'job': job, 'instance': '%s:%d' % (ip, port)}, labels)
        self.check_nodes('node')
        # kumina: active domains only, Nova's metadata on every series
        self.check_server_cpu(('running', 'paused'))
        self.assertEqual({('domain', 'flavor', 'instance', 'job', 'name', 'project_name',
                           'uuid')}, self.label_keys('libvirt_domain_info_virtual_cpus'))
        states = self.values('libvirt_domain_state_code', 'uuid')
        self.assertEqual({i: 1.0 for i in self.domains(('running',))} |
                         {i: 3.0 for i in self.domains(('paused',))}, states)
        # the first hypervisor's series are the real binaries': build info,
        # and block statistics the test driver makes up from the clock
        first = targets['node'][self.first]['instance']
        build = self.values('node_exporter_build_info', 'instance')
        self.assertEqual([first], list(build))
        real = {s.id for s in self.domains(('running', 'paused')).values()
                if s.compute_host == self.first}
        self.assertTrue(real)
        self.assertEqual(real, set(self.values(
            'libvirt_domain_block_stats_read_bytes_total', 'uuid')))
        names = self.values('libvirt_domain_info_cpu_time_seconds_total{instance="%s"}'
                            % targets['libvirt'][self.first]['instance'], 'domain')
        self.assertEqual({s.instance_name for s in self.servers if s.id in real}, set(names))

    def test_helm(self):
        self.switch('helm')
        targets = self.targets()
        self.assertEqual({'node-exporter', 'openstack/libvirt-exporter'}, set(targets))
        pods = set()
        for host, labels in targets['node-exporter'].items():
            self.assertEqual({'job': 'node-exporter', 'hostname': self.node[host],
                              'instance': self.ips[host] + ':9100'}, labels)
        for host, labels in targets['openstack/libvirt-exporter'].items():
            pods.add(labels.pop('pod'))
            self.assertEqual({'job': 'openstack/libvirt-exporter', 'namespace': 'openstack',
                              'container': 'libvirt-exporter', 'endpoint': 'metrics',
                              'instance': self.ips[host] + ':9474'}, labels)
        self.assertEqual(len(self.node), len(pods))
        self.check_nodes('node-exporter')
        # vexxhost: uuid only; every domain, CPU time (ns) of active ones
        self.check_server_cpu(('running', 'paused'))
        self.assertEqual(set(self.domains(('running', 'paused', 'shutoff'))),
                         set(self.values('libvirtd_domain_domain_state', 'uuid')))
        self.assertEqual({('container', 'endpoint', 'instance', 'job', 'namespace', 'pod',
                           'uuid')}, self.label_keys('libvirtd_domain_balloon_current'))
        # KiB: the maximum is the flavor's RAM in KiB
        maximum = self.values('libvirtd_domain_balloon_maximum', 'uuid')
        for server in self.domains(('running',)).values():
            self.assertEqual(server.flavor.ram * 1024, maximum[server.id])

    def test_kolla(self):
        self.switch('kolla')
        targets = self.targets()
        self.assertEqual({'node', 'libvirt_exporter'}, set(targets))
        for job, port in (('node', 9100), ('libvirt_exporter', 9177)):
            for host, labels in targets[job].items():
                self.assertEqual({'job': job, 'instance': '%s:%d' % (self.ips[host], port)},
                                 labels)
        self.check_nodes('node')
        # inovex: every domain, shut-off ones too; domain = Nova's libvirt name
        info = {r['metric']['instance_id']: r['metric'] for r in base.prometheus_get(
            '/api/v1/query', {'query': 'libvirt_domain_openstack_info'})['result']}
        everything = self.domains(('running', 'paused', 'shutoff'))
        self.assertEqual(set(everything), set(info))
        for uuid, server in everything.items():
            self.assertEqual(server.instance_name, info[uuid]['domain'])
            self.assertEqual(server.name, info[uuid]['instance_name'])
            self.assertEqual(server.project_id, info[uuid]['project_id'])
        self.assertEqual({('domain', 'instance', 'job')},
                         self.label_keys('libvirt_domain_info_cpu_time_seconds_total'))
        self.check_server_cpu(('running', 'paused', 'shutoff'))
        active = {everything[i].instance_name for i in self.domains(('running', 'paused'))}
        self.assertEqual(active, set(self.values('libvirt_domain_memory_stats_rss_bytes',
                                                 'domain')))
        self.assertEqual(active, set(self.values('libvirt_domain_memory_stats_used_percent',
                                                 'domain')))
        self.check_vcpu_delay(('running', 'paused'))

    def test_kolla_legacy(self):
        self.switch('kolla-legacy')
        targets = self.targets()
        self.assertEqual({'node', 'libvirt_exporter'}, set(targets))
        for job in ('node', 'libvirt_exporter'):
            for host, labels in targets[job].items():
                # prometheus_instance_label: the short host name
                self.assertEqual({'job': job, 'instance': host}, labels)
        self.check_nodes('node')
        # Tinkoff: running and shut-off domains, not paused ones
        self.check_server_cpu(('running', 'shutoff'))
        meta = self.values('libvirt_domain_info_meta', 'uuid')
        self.assertEqual(set(self.domains(('running', 'shutoff'))), set(meta))
        self.assertEqual({('domain', 'instance', 'job')},
                         self.label_keys('libvirt_domain_memory_stats_actual_balloon_bytes'))
        self.check_vcpu_delay(('running',))
