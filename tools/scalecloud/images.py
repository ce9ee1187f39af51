"""The Glance images a Watcher cluster's servers boot from.

A Watcher cluster (benchmarks/generate.py) names no image. A real cloud
has tens to hundreds: a few base images most servers boot from, a long
tail of project snapshots, some of them deleted since. These are drawn
from a seed: image i is chosen with weight 1 / (i + 1) (Zipf), every
GONE-th of the tail is gone from Glance (404), and the properties are
those operators set (architecture, bus and NIC models, an OS), one built
for AVX2 requiring the trait (every CPU model of traits.py has it, as the
hypervisors Nova booted its servers on would).
"""

import random

from osc_leveller.core.model import model

IMAGES = 100
GONE = 20  # one image of the tail in GONE is deleted
BASE = ({'hw_architecture': 'x86_64', 'hw_disk_bus': 'virtio',
         'hw_vif_model': 'virtio', 'os_distro': 'ubuntu'},
        {'architecture': 'x86_64', 'hw_qemu_guest_agent': 'yes',
         'os_distro': 'rhel'},
        {'hw_architecture': 'x86_64', 'os_distro': 'windows',
         'hw_firmware_type': 'uefi', 'trait:HW_CPU_X86_AVX2': 'required'},
        {})


def assign(server_ids, count=IMAGES, seed=0):
    """({server id: image id}, [model.Image]) of count images."""
    rng = random.Random(seed)
    made = []
    for i in range(count):
        image_id = '%08x-0000-4000-8000-%012x' % (seed, i)
        gone = i >= len(BASE) and i % GONE == 0
        made.append(model.Image(
            id=image_id, name='image-%d' % i, disk_format='qcow2'
            if i % 3 else 'raw', properties=None if gone else dict(
                BASE[i % len(BASE)], os_version=str(i))))
    weights = [1.0 / (i + 1) for i in range(count)]
    chosen = rng.choices(made, weights, k=len(server_ids))
    return dict(zip(server_ids, (image.id for image in chosen))), made
