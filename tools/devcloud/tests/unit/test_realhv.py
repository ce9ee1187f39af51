"""The real hypervisors' parts that run without a cloud.

realhv_node's counters and series (pure), the guest's /init and the fake
Glance's real images (real files, a real HTTP server on 127.0.0.1), and
libvirt-hv: a real libvirt daemon and QEMU guest, stopped without leaving a
process behind (root, Debian's libvirt and a built guest needed: skipped
otherwise).
"""

import hashlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from devcloud import realhv_node

CODE = pathlib.Path(__file__).resolve().parents[2]
STATE = pathlib.Path(os.environ.get('DEVCLOUD_HOME') or
                     os.path.expanduser('~/.cache/osc-leveller-devcloud'))
GUEST = STATE / 'guest'


class CountersTest(unittest.TestCase):

    def test_guest_time_counts_from_first_sight_and_survives_departures(self):
        c = realhv_node.Counters(now=100.0)
        c.sample({'a': 50.0})               # a arrives with 50 s used elsewhere
        self.assertEqual(0.0, c.busy)
        c.sample({'a': 52.0, 'b': 1.0})
        self.assertEqual(2.0, c.busy)
        c.sample({'b': 4.0})                # a left: nothing taken away
        self.assertEqual(5.0, c.busy)
        c.sample({'a': 3.0, 'b': 4.5})      # a back, its counter restarted
        self.assertEqual(5.5, c.busy)
        user, idle = c.per_cpu(2, now=110.0)
        self.assertEqual((2.75, 7.25), (user, idle))

    def test_user_never_exceeds_the_wall_time(self):
        c = realhv_node.Counters(now=0.0)
        c.sample({'a': 0.0})
        c.sample({'a': 100.0})
        self.assertEqual((10.0, 0.0), c.per_cpu(1, now=10.0))

    def test_node_exporter_format(self):
        c = realhv_node.Counters(now=0.0)
        c.sample({'a': 0.0})
        c.sample({'a': 3.0})
        text = realhv_node.render(c, 2, 8 << 30, 1 << 30, 'rhv01', now=10.0)
        samples = {}
        for line in text.splitlines():
            if not line.startswith('#'):
                name, value = line.rsplit(' ', 1)
                samples[name] = float(value)
        self.assertEqual(8.5, samples['node_cpu_seconds_total{cpu="1",mode="idle"}'])
        self.assertEqual(1.5, samples['node_cpu_seconds_total{cpu="0",mode="user"}'])
        self.assertEqual(7 << 30, samples['node_memory_MemAvailable_bytes'])
        self.assertEqual(1, len([n for n in samples if n.startswith('node_uname_info{')
                                 and 'nodename="rhv01"' in n]))
        self.assertIn('# TYPE node_cpu_seconds_total counter', text)


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@unittest.skipUnless((GUEST / 'vmlinuz').exists(), 'the real guest is not built')
class FakeGlanceRealImagesTest(unittest.TestCase):

    def setUp(self):
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(CODE / 'fake_glance_neutron.py'), str(self.port),
             str(_free_port()), str(GUEST)], stdout=subprocess.DEVNULL)
        self.addCleanup(self.proc.wait)
        self.addCleanup(self.proc.terminate)
        for _ in range(100):
            try:
                self.get('/v2/images')
                return
            except OSError:
                time.sleep(0.1)

    def get(self, path):
        with urllib.request.urlopen('http://127.0.0.1:%d%s' % (self.port, path),
                                    timeout=5) as r:
            return r.status, r.read()

    def test_kernel_ramdisk_and_guests_with_their_data(self):
        images = {i['name']: i for i in json.loads(self.get('/v2/images')[1])['images']}
        kernel, ramdisk = images['devcloud-kernel'], images['devcloud-ramdisk']
        self.assertEqual(('aki', 'ari'), (kernel['disk_format'], ramdisk['disk_format']))
        for name in ('devcloud-guest', 'devcloud-guest-burn', 'devcloud-guest-dirty'):
            image = images[name]
            self.assertEqual('ami', image['disk_format'])
            self.assertEqual((kernel['id'], ramdisk['id']),
                             (image['kernel_id'], image['ramdisk_id']))
            self.assertIn('console=ttyS0', image['os_command_line'])
        self.assertIn('devcloud.cpu=100', images['devcloud-guest-burn']['os_command_line'])
        status, data = self.get('/v2/images/%s/file' % kernel['id'])
        self.assertEqual(200, status)
        self.assertEqual((GUEST / 'vmlinuz').read_bytes(), data)
        self.assertEqual(hashlib.sha512(data).hexdigest(), kernel['os_hash_value'])
        self.assertEqual(len(data), kernel['size'])
        # an image without data: 204, as Glance answers
        self.assertEqual(204, self.get('/v2/images/11111111-1111-4111-8111-111111111111/file')[0])


def _libvirt_usable():
    return os.geteuid() == 0 and os.path.exists('/usr/sbin/libvirtd') and \
        shutil.which('virsh') and shutil.which('unshare') and (GUEST / 'vmlinuz').exists()


def _ours(tmp):
    """pids of every process in a mount namespace whose mounts name tmp's
    unique directory: the daemon and its QEMUs, which inherit them (the
    mount root may hide tmp's parents, so only its own name is looked for)."""
    tmp = os.path.basename(tmp)
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            if tmp in pathlib.Path('/proc', pid, 'mountinfo').read_text():
                found.append(int(pid))
        except OSError:
            continue
    return found


@unittest.skipUnless(_libvirt_usable(), 'needs root, libvirt, QEMU and the real guest')
class LibvirtHvTest(unittest.TestCase):
    """One daemon on 127.0.0.49 (no devcloud uses it), a guest, a stop."""

    ADDR = '127.0.0.49'

    def hv(self, *args):
        return subprocess.run([str(CODE / 'libvirt-hv')] + list(args), capture_output=True,
                              text=True, timeout=120)

    def virsh(self, *args):
        return subprocess.run(['virsh', '-c', 'qemu+tcp://%s/system' % self.ADDR] +
                              list(args), capture_output=True, text=True, timeout=60)

    def test_a_guest_runs_and_stop_leaves_no_process(self):
        tmp = tempfile.mkdtemp(prefix='devcloud-libvirt-hv-')
        self.addCleanup(shutil.rmtree, tmp, True)
        self.addCleanup(self.hv, 'stop', tmp, 'selfcheck')
        started = self.hv('start', tmp, 'selfcheck', self.ADDR, 'selfcheck.devcloud.test')
        self.assertEqual(0, started.returncode, started.stderr)
        self.assertEqual('selfcheck.devcloud.test', self.virsh('hostname').stdout.strip())
        console = os.path.join(tmp, 'console.log')
        xml = os.path.join(tmp, 'guest.xml')
        with open(xml, 'w') as f:
            f.write(GUEST_XML % {'guest': GUEST, 'console': console})
        created = self.virsh('create', xml)
        self.assertEqual(0, created.returncode, created.stderr)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.exists(console) and 'devcloud-guest: beat 1 ' in open(console).read():
                break
            time.sleep(0.5)
        else:
            self.fail('no heartbeat from the guest in 120 s')
        self.assertEqual(2, len(_ours(tmp)))           # the daemon and its QEMU
        stopped = self.hv('stop', tmp, 'selfcheck')
        self.assertEqual(0, stopped.returncode, stopped.stderr)
        self.assertEqual([], _ours(tmp))
        self.assertNotEqual(0, self.hv('status', tmp, 'selfcheck').returncode)


GUEST_XML = """<domain type='qemu'>
  <name>selfcheck</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%(guest)s/vmlinuz</kernel>
    <initrd>%(guest)s/initrd.img</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 devcloud.beat=1</cmdline>
  </os>
  <cpu mode='custom' match='exact'><model fallback='forbid'>Westmere</model></cpu>
  <devices>
    <serial type='file'><source path='%(console)s'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""
