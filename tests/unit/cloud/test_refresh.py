"""The executor's targeted re-read (cloud/refresh.py) against the stand-in.

What a move touches, read again, must be what a whole read says of it, at
a cost that does not grow with the cloud; and a move made stale by a change
the targeted read sees must still be refused.
"""

import collections
import copy
import unittest
from unittest import mock

from osc_leveller.cloud import actions
from osc_leveller.cloud import measure
from osc_leveller.cloud import prometheus
from osc_leveller.cloud import refresh
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.planning import plan as plan_mod
from osc_leveller.core.run import executor
from osc_leveller.core.settings import options as opts
from tests.unit import builders as b
from tests.unit import standin


def cloud(hosts=4):
    """hv1 hot; web, an anti-affinity group across hv1 and hv3."""
    hyps = [b.hypervisor('hv%d' % i) for i in range(1, hosts + 1)]
    servers = [b.server('hot%d' % i, 'hv1', vcpus=4, ram_gb=16)
               for i in range(6)]
    servers += [b.server('cool%d' % h, 'hv%d' % h, vcpus=4, ram_gb=16)
                for h in range(2, hosts + 1)]
    servers += [b.server('web1', 'hv1'), b.server('web2', 'hv3')]
    groups = [{'id': 'g-web', 'name': 'web', 'policy': 'anti-affinity',
               'members': ['id-web1', 'id-web2']}]
    return b.document(hyps, servers, groups)


def move(server, source, destination, wave=1):
    return plan_mod.Move(
        server_id='id-' + server, server_name=server, source=source,
        destination=destination, destination_host=b.compute_host(
            destination), wave=wave, gain=0.1, reason='test',
        domain='az1/Gen1', ram_gb=4.0, source_score=(0.5, 0.4),
        destination_score=(0.1, 0.2), imbalance=(0.2, 0.1))


def comparable(document, servers=()):
    """What the checks read: hypervisors, servers, groups, and the moving
    servers' migrations, as the core model writes them back."""
    doc = snapshot_io.to_document(snapshot_io.parse(copy.deepcopy(document)))
    for hyp in doc['hypervisors']:
        hyp['aggregates'].sort(key=lambda a: a['name'])
    return {
        'hypervisors': sorted(doc['hypervisors'], key=lambda h: h['name']),
        'servers': sorted(doc['servers'], key=lambda s: s['id']),
        'server_groups': sorted(doc['server_groups'], key=lambda g: g['id']),
        'migrations': sorted((m for m in doc['migrations']
                              if m['server_id'] in servers),
                             key=lambda m: str(m['id'])),
    }


class TestRefresh(unittest.TestCase):
    def test_what_a_move_touches_is_read_as_a_whole_read_reads_it(self):
        with standin.StandIn(cloud()) as sim:
            acts = actions.Actions(sim.connection())
            acts.snapshot()
            # Others act on hv1 and hv2 after the first read: a migration
            # into hv2, the moving server's group partner arriving there,
            # and hv2's service disabled.
            acts.live_migrate('id-hot1', 'cmp-hv2')
            acts.set_service('cmp-hv2', False, 'maintenance')
            m = move('web1', 'hv1', 'hv2')
            acts.snapshot(moves=[m])
            refreshed = acts.document
            whole = actions.Actions(sim.connection())
            whole.snapshot()
            self.assertEqual(comparable(whole.document, {'id-web1'}),
                             comparable(refreshed, {'id-web1'}))
            self.assertEqual([], sim.errors)

    def test_hv1_is_read_again_not_hv10(self):
        """Nova matches hypervisor_hostname_pattern, and the node filter
        of the server list, anywhere in a name (SQL LIKE, a regular
        expression): asked for hv1 it answers hv10 and hv11 too, here
        listed before hv1. The re-read keeps hv1's own, and a server that
        left hv1 for hv10 (which no re-read covers) is where Nova has it."""
        document = cloud(hosts=11)
        document['hypervisors'].reverse()
        with standin.StandIn(document) as sim:
            acts = actions.Actions(sim.connection())
            acts.snapshot()
            acts.live_migrate('id-hot1', 'cmp-hv2')
            acts.live_migrate('id-hot2', 'cmp-hv10')
            refreshed = acts.snapshot(moves=[move('web1', 'hv1', 'hv2')])
            whole = actions.Actions(sim.connection())
            whole.snapshot()
            self.assertEqual([], sim.errors)
        self.assertEqual('hv10', refreshed.server('id-hot2').hypervisor)
        self.assertEqual({'hot0', 'hot3', 'hot4', 'hot5', 'web1'},
                         {s.name for s in refreshed.servers_on('hv1')})
        expected = comparable(whole.document, {'id-web1'})
        found = comparable(acts.document, {'id-web1'})
        self.assertEqual(expected['servers'], found['servers'])
        self.assertEqual(
            [h for h in expected['hypervisors'] if h['name'] in ('hv1',
                                                                 'hv2')],
            [h for h in found['hypervisors'] if h['name'] in ('hv1', 'hv2')])

    def test_measured_load_is_read_again_for_the_touched_hosts(self):
        # kolla-ansible's labels: instance is Nova's host_ip and a port.
        hosts = {'192.0.2.%d:9100' % (i + 1): 0.1 * i for i in range(1, 5)}
        guests = {'id-hot0': 0.5, 'id-cool2': 0.25}

        def answer(query):
            if 'libvirt' in query:
                return [({'instance': '192.0.2.2:9177', 'domain': 'i-%s' % sid,
                          'job': 'libvirt', 'instance_id': sid}, value)
                        for sid, value in guests.items()]
            return [({'instance': instance, 'job': 'node'}, value)
                    for instance, value in hosts.items()]
        with standin.StandIn(cloud(), prometheus=answer, prometheus_names=[
                'libvirt_domain_openstack_info']) as sim:
            reader = measure.Reader(prometheus.Client(sim.prometheus_url,
                                                      retries=0))
            acts = actions.Actions(sim.connection(), metrics=reader)
            before = acts.snapshot()
            hosts['192.0.2.2:9100'] = 0.95
            hosts['192.0.2.3:9100'] = 0.05
            guests['id-hot0'] = 0.875
            m = move('hot0', 'hv1', 'hv2')
            # Prometheus' answer serves a minute of re-checks...
            sim.reset_counts()
            soon = acts.snapshot(moves=[m])
            self.assertEqual(0, sum(n for key, n in sim.counts.items()
                                    if key[0] == 'prometheus'))
            self.assertEqual(0.1, soon.hypervisor('hv1').metrics.cpu)
            # ... and is asked again after that.
            with mock.patch.object(refresh, 'MEASURED_MAX_AGE', 0.0):
                after = acts.snapshot(moves=[m])
            whole = actions.Actions(sim.connection(), metrics=reader)
            whole.snapshot()
        self.assertEqual(0.1, before.hypervisor('hv1').metrics.cpu)
        self.assertEqual(0.95, after.hypervisor('hv1').metrics.cpu)
        self.assertEqual(0.875, after.server('id-hot0').usage.cpu)
        self.assertEqual(comparable(whole.document, {'id-hot0'}),
                         comparable(acts.document, {'id-hot0'}))

    def test_lasting_load_is_read_again_with_the_rest(self):
        # prometheus.lasting: the re-read of a touched host brings its
        # figures over the period too, as a whole read would.
        hosts = {'192.0.2.%d:9100' % (i + 1): 0.1 * i for i in range(1, 5)}
        guests = {'id-hot0': 0.5, 'id-cool2': 0.25}

        def answer(query):
            over = 0.5 if query.startswith('avg_over_time((') else 1.0
            if 'libvirt' in query:
                return [({'instance': '192.0.2.2:9177', 'domain': 'i-%s' % sid,
                          'job': 'libvirt', 'instance_id': sid},
                         value * over) for sid, value in guests.items()]
            return [({'instance': instance, 'job': 'node'}, value * over)
                    for instance, value in hosts.items()]
        with standin.StandIn(cloud(), prometheus=answer, prometheus_names=[
                'libvirt_domain_openstack_info']) as sim:
            reader = measure.Reader(prometheus.Client(sim.prometheus_url,
                                                      retries=0),
                                    lasting='3h')
            acts = actions.Actions(sim.connection(), metrics=reader)
            before = acts.snapshot()
            hosts['192.0.2.2:9100'] = 0.95
            guests['id-hot0'] = 0.875
            with mock.patch.object(refresh, 'MEASURED_MAX_AGE', 0.0):
                after = acts.snapshot(moves=[move('hot0', 'hv1', 'hv2')])
            whole = actions.Actions(sim.connection(), metrics=reader)
            whole.snapshot()
        self.assertEqual('3h', after.lasting)
        self.assertEqual(0.05, before.hypervisor('hv1').metrics.lasting.cpu)
        self.assertEqual(0.475, after.hypervisor('hv1').metrics.lasting.cpu)
        self.assertEqual(0.4375,
                         after.server('id-hot0').usage.lasting.cpu)
        self.assertEqual(comparable(whole.document, {'id-hot0'}),
                         comparable(acts.document, {'id-hot0'}))

    def test_a_targeted_answer_of_the_wrong_shape_is_an_error(self):
        # Items that are not objects: one clear error naming the read,
        # never a traceback from joining it.
        for prefix, names in (('/allocations/', 'Placement GET /allocations'),
                              ('/v2.1/os-server-groups/',
                               'Nova GET /os-server-groups'),
                              ('/v2.1/servers/detail',
                               'Nova GET /servers/detail?node=')):
            with standin.StandIn(cloud()) as sim:
                acts = actions.Actions(sim.connection())
                acts.snapshot()
                service = 'placement' if 'allocations' in prefix else 'nova'
                sim.fault(service, prefix, 'shape:items')
                with self.assertRaises(executor.ActionError) as ctx:
                    acts.snapshot(moves=[move('web1', 'hv1', 'hv2')])
                self.assertIn(names, str(ctx.exception))

    def test_requests_per_move_do_not_grow_with_the_cloud(self):
        counts = []
        for hosts in (4, 40):
            with standin.StandIn(cloud(hosts)) as sim:
                acts = actions.Actions(sim.connection())
                acts.snapshot()
                sim.reset_counts()
                acts.snapshot(moves=[move('web1', 'hv1', 'hv2')])
                counts.append(collections.Counter(
                    {key: n for key, n in sim.counts.items()
                     if key[0] in ('nova', 'placement')}))
        self.assertEqual(counts[0], counts[1])
        self.assertEqual(2, counts[0][
            'placement', 'GET', '/resource_providers/{id}/traits'])
        self.assertLessEqual(sum(counts[0].values()), 17, counts[0])

    def test_the_moving_servers_image_is_not_read_again(self):
        # Nova schedules the move with the properties the image had when
        # the server booted (its request spec), whatever Glance says now.
        image = standin.derived_uuid('image', 'f4x16')  # hot servers'
        with standin.StandIn(cloud()) as sim:
            acts = actions.Actions(sim.connection())
            first = acts.snapshot()
            self.assertEqual({}, dict(first.server('id-hot1').image
                                      .properties))
            sim.set_image(image, {'id': image, 'name': 'licensed',
                                  'disk_format': 'raw',
                                  'trait:CUSTOM_LIC': 'required'})
            sim.reset_counts()
            snap = acts.snapshot(moves=[move('hot1', 'hv1', 'hv2')])
            self.assertEqual(0, sim.counts['glance', 'GET',
                                           '/v2/images/{id}'])
            self.assertIs(first.server('id-hot1').image,
                          snap.server('id-hot1').image)
            self.assertIs(snap.server('id-hot1').image,
                          snap.server('id-hot2').image)
            self.assertEqual([], sim.errors)

    def test_a_member_moved_to_the_destination_is_seen(self):
        with standin.StandIn(cloud()) as sim:
            acts = actions.Actions(sim.connection())
            acts.snapshot()
            # web2 was on hv3, which the move of web1 does not touch.
            acts.live_migrate('id-web2', 'cmp-hv2')
            snap = acts.snapshot(moves=[move('web1', 'hv1', 'hv2')])
            self.assertEqual('hv2', snap.server('id-web2').hypervisor)


class TestStaleMovesAreRefused(unittest.TestCase):
    """The executor against the stand-in: the first round is checked
    against the whole read, later ones against targeted reads."""

    def run_moves(self, sim, acts, moves, between=None):
        options = opts.PlannerOptions(cooldown_hours=0.0)
        runner = executor.Executor(
            acts, options, executor.ApplyOptions(max_parallel=1,
                                                 poll_interval=0.0,
                                                 stop_on_error=False),
            sleep=lambda seconds: between and between.pop(0)())
        return runner.run(moves, snapshot=acts.snapshot()).results

    def second_move_refused(self, second, change, why, traits=None):
        """hot0 moves first; change() happens while it runs; the second
        move, checked against a targeted read, is refused for why.
        traits: {hypervisor: its traits}."""
        document = cloud()
        for hyp in document['hypervisors']:
            hyp['traits'] = (traits or {}).get(hyp['name'], [])
        with standin.StandIn(document) as sim:
            self.sim = sim
            acts = actions.Actions(sim.connection())
            moves = [move('hot0', 'hv1', 'hv2'), second]
            results = self.run_moves(sim, acts, moves, between=[
                lambda: change(acts)])
        self.assertEqual([executor.DONE, executor.SKIPPED],
                         [r.status for r in results])
        self.assertIn(why, results[1].reason)

    def test_a_destination_disabled_after_the_first_move(self):
        self.second_move_refused(
            move('hot1', 'hv1', 'hv4', wave=2),
            lambda acts: acts.set_service('cmp-hv4', False, 'broken disk'),
            'hv4: compute service is disabled (broken disk)')

    def test_a_group_member_arriving_on_the_destination(self):
        self.second_move_refused(
            move('web1', 'hv1', 'hv4', wave=2),
            lambda acts: acts.live_migrate('id-web2', 'cmp-hv4'),
            'anti-affinity group web: hv4 already hosts web2')

    def test_a_group_member_that_just_left_the_destination(self):
        """Nova's scheduler counts web2 on hv3 for a while after it left:
        the targeted read reads the group's other members' migrations."""
        self.second_move_refused(
            move('web1', 'hv1', 'hv3', wave=2),
            lambda acts: acts.live_migrate('id-web2', 'cmp-hv4'),
            "anti-affinity group web: Nova's scheduler may still count web2 "
            "on hv3")

    def test_an_image_changed_in_glance_during_the_run(self):
        """Nova checks the properties of boot time: a move is not refused
        for what Glance says since (a trait required, the image gone)."""
        image = standin.derived_uuid('image', 'f4x16')
        for change in ({'id': image, 'name': 'licensed',
                        'disk_format': 'raw',
                        'trait:CUSTOM_LIC': 'required'}, None):
            with standin.StandIn(cloud()) as sim:
                acts = actions.Actions(sim.connection())
                moves = [move('hot0', 'hv1', 'hv2'),
                         move('hot1', 'hv1', 'hv4', wave=2)]
                results = self.run_moves(sim, acts, moves, between=[
                    lambda: sim.set_image(image, change)])
            self.assertEqual([executor.DONE, executor.DONE],
                             [r.status for r in results], change)


if __name__ == '__main__':
    unittest.main()
