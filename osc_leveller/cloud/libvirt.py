"""Per-server load from the libvirt exporters that clouds actually run.

Each exporter names its series differently (read from their sources):

* ``inovex``: inovex prometheus-libvirt-exporter, kolla-ansible 2024.1+ and
  openstack-helm. Series carry ``domain`` only; the Nova server id is
  ``instance_id`` on ``libvirt_domain_openstack_info``.
* ``tinkoff``: Tinkoff libvirt-exporter, kolla-ansible up to 2023.2. Series
  carry ``domain`` only; the id is ``uuid`` on ``libvirt_domain_info_meta``.
* ``kumina``: kumina libvirt_exporter (Debian's prometheus-libvirt-exporter).
  ``uuid`` on every series; no memory statistics at all.
* ``vexxhost``: vexxhost libvirtd_exporter (openstack-helm's older sidecar).
  ``uuid`` on every series, CPU time in ns, balloon sizes in KiB, no vCPU
  count (one ``libvirtd_domain_vcpu_state`` series a vCPU).

A domain name repeats on two hosts during a live migration and across cells,
so joins are on (instance, job, domain), never on the domain alone.

RAM is the resident set the host holds for the server (what a migration
frees on the source), clamped to the server's size because it includes
QEMU's own overhead; else in-guest use from the balloon driver. Never the
balloon size: that is the allocation, about 100 % on every server.

CPU steal is the time a server's vCPUs were ready to run but waited for a
host CPU (libvirt's ``vcpu.<n>.delay``): inovex and Tinkoff export it as
``libvirt_domain_vcpu_delay_seconds_total``, kumina and vexxhost do not.
CPU time plus steal is what the server asked for, which is how a host whose
servers want more than its threads shows above 100 %.
"""

import dataclasses

_ON = 'on (instance, job, domain)'
_IN_GUEST = (
    '(libvirt_domain_memory_stats_available_bytes - {on} '
    'libvirt_domain_memory_stats_usable_bytes) / {on} '
    '(libvirt_domain_memory_stats_available_bytes > 0)').format(on=_ON)
_RESIDENT = (
    'clamp_max((libvirt_domain_memory_stats_rss_bytes > 0) / {on} '
    'libvirt_domain_info_maximum_memory_bytes, 1)').format(on=_ON)


def _cpu(select='', keep=''):
    """CPU time per second per vCPU; select: a label matcher, braced for
    str.format. Matching on() keeps only its own labels; keep=' group_left
    ()' keeps all of the CPU series' (kumina's uuid)."""
    return ('rate(libvirt_domain_info_cpu_time_seconds_total%s[{window}]) '
            '/ %s%s libvirt_domain_info_virtual_cpus' % (select, _ON, keep))


# Time runnable vCPUs waited for a host CPU (libvirt's vcpu.<n>.delay, the
# guest's steal time), per second per vCPU: what the server asked for
# beyond what it got. The delay series has a vcpu label; summed away.
_STEAL = ('sum by (instance, job, domain) '
          '(rate(libvirt_domain_vcpu_delay_seconds_total[{window}])) '
          '/ %s libvirt_domain_info_virtual_cpus' % _ON)


def _with_id(expression, info, label):
    """The expression with the server id label joined from an info series."""
    return '(%s) * %s group_left (%s) %s' % (expression, _ON, label, info)


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    exporter: str      # what an operator calls it
    marker: str        # a metric name only this exporter has
    id_label: str      # the label that holds the Nova server id
    queries: dict      # metric -> PromQL with {window}
    missing: str = ''  # why a metric has no query, for the coverage report
    no_steal: str = ''  # why it has no steal query, likewise


def _joined(name, exporter, info, id_label):
    """A profile whose series name the domain only, the server id being on
    the info series."""
    return Profile(name, exporter, info, id_label, {
        'cpu': _with_id(_cpu(), info, id_label),
        'ram': _with_id('%s or %s' % (_RESIDENT, _IN_GUEST), info, id_label),
        'cpu_steal': _with_id(_STEAL, info, id_label),
    })


_NO_DELAY = 'the exporter reports no vCPU delay (steal time)'
PROFILES = {p.name: p for p in (
    _joined('inovex', 'inovex prometheus-libvirt-exporter',
            'libvirt_domain_openstack_info', 'instance_id'),
    _joined('tinkoff', 'Tinkoff libvirt-exporter', 'libvirt_domain_info_meta',
            'uuid'),
    Profile(
        'kumina', 'kumina libvirt_exporter',
        'libvirt_domain_info_cpu_time_seconds_total', 'uuid', {
            'cpu': _cpu('{{uuid!=""}}', keep=' group_left ()'),
        }, missing='the exporter reports no resident or in-guest memory',
        no_steal=_NO_DELAY),
    Profile(
        'vexxhost', 'vexxhost libvirtd_exporter',
        'libvirtd_domain_cpu_time', 'uuid', {
            'cpu': 'rate(libvirtd_domain_cpu_time[{window}]) / 1e9 / '
                   'on (instance, job, uuid) count by (instance, job, uuid) '
                   '(libvirtd_domain_vcpu_state)',
            'ram': 'clamp_max((libvirtd_domain_balloon_rss > 0) / '
                   'on (instance, job, uuid) libvirtd_domain_balloon_maximum, '
                   '1) or (libvirtd_domain_balloon_available - '
                   'on (instance, job, uuid) libvirtd_domain_balloon_usable) '
                   '/ on (instance, job, uuid) '
                   '(libvirtd_domain_balloon_available > 0)',
        }, no_steal=_NO_DELAY),
)}
# Tried in this order; kumina's marker is also inovex's and Tinkoff's CPU
# series, so it counts only when its series carry a uuid.
ORDER = ('inovex', 'tinkoff', 'vexxhost', 'kumina')
NAMES = r'libvirtd?_domain_.*'
KUMINA_CHECK = 'count(libvirt_domain_info_cpu_time_seconds_total{uuid!=""})'
CUSTOM = Profile('custom', 'leveller: prometheus: server_queries', '',
                 'uuid', {})


def detect(names, kumina_series):
    """Profiles whose marker is among the metric names present.

    names: metric names Prometheus has; kumina_series: a callable telling
    whether any libvirt CPU series carries a uuid (asked only if needed).
    """
    found = [PROFILES[p] for p in ORDER[:-1] if PROFILES[p].marker in names]
    # inovex and Tinkoff have kumina's CPU series too, without the uuid.
    if PROFILES['kumina'].marker in names and not any(
            p.name in ('inovex', 'tinkoff') for p in found) and \
            kumina_series():
        found.append(PROFILES['kumina'])
    return found


def server_id(labels, profile):
    """The Nova server id a sample names, or None."""
    for label in (profile.id_label, 'uuid', 'instance_id'):
        if labels.get(label):
            return labels[label]
    return None
