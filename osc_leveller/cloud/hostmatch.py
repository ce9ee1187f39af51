"""Which Prometheus target is which hypervisor, with no relabelling needed.

A node_exporter target (its series share ``instance`` and ``job``) is
matched to a hypervisor by the first of these methods that names exactly one
(the order is ``prometheus.host_match``):

* ``label``: a configured label (``prometheus.host_label``) holds the
  hypervisor's name, in full or short form (openstack-helm's ``hostname``,
  or a relabelling of one's own);
* ``instance``: ``instance`` is a host name, in full or short form
  (kolla-ansible with ``prometheus_instance_label``);
* ``host_ip``: ``instance`` is ``IP:port`` and the IP is Nova's ``host_ip``
  of the hypervisor (kolla-ansible's default: the API interface address);
* ``nodename``: ``node_uname_info{nodename}`` of the target names it.

A method that names two hypervisors is passed over and noted; a hypervisor
that two targets claim is a note naming them: never a guess. A target that
names no hypervisor (a controller's, a storage node's) is left out quietly.
"""

import collections
import dataclasses
import ipaddress
import re

from osc_leveller.core.settings import config

METHODS = config.HOST_MATCH


@dataclasses.dataclass(frozen=True)
class HostRef:
    """A hypervisor as Nova knows it: node name, service host, host_ip."""
    name: str
    host: str = None
    ip: str = None


def address(instance):
    """The host part of an ``instance`` label: 'a:9100' -> 'a',
    '[::1]:9100' -> '::1'."""
    instance = instance or ''
    if instance.startswith('['):
        return instance[1:].partition(']')[0]
    if instance.count(':') > 1:  # a bare IPv6 address, no port
        return instance
    return instance.partition(':')[0]


def ip_of(text):
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def short(name):
    return name.split('.')[0].lower()


def target_key(labels):
    """What a target's series have in common: (instance, job)."""
    return labels.get('instance'), labels.get('job')


class Matcher:
    """Places targets on hypervisors; remembers how, and what went wrong."""

    def __init__(self, hypervisors, methods=METHODS, label=None,
                 pattern=r'^([^:]+)'):
        self.hypervisors = {ref.name: ref for ref in hypervisors}
        self.methods = tuple(methods)
        self.label = label
        self.pattern = re.compile(pattern)
        # Indexes: a reading places one series per server, thousands of
        # them, against as many hypervisors.
        self.by_ip = collections.defaultdict(set)
        self.by_name = collections.defaultdict(set)   # full name or host
        self.by_short = collections.defaultdict(set)
        for ref in self.hypervisors.values():
            if ip_of(ref.ip or ''):
                self.by_ip[ip_of(ref.ip)].add(ref.name)
            for name in {ref.name, ref.host or ref.name}:
                self.by_name[name.lower()].add(ref.name)
                self.by_short[short(name)].add(ref.name)
        self.targets = {}    # (instance, job) -> hypervisor name
        self.how = {}        # hypervisor name -> how its target matched
        self.series = {}     # hypervisor name -> (instance, job)
        self.notes = []
        self._located = {}   # what locate() found, by the labels it reads

    # ------------------------------------------------------------ names
    def named(self, value):
        """Hypervisors a name stands for: full name or host, else short."""
        if not value:
            return []
        return list(self.by_name.get(value.lower()) or
                    self.by_short.get(short(value), ()))

    def _label_value(self, labels):
        value = labels.get(self.label) if self.label else None
        if not value:
            return None
        match = self.pattern.search(value)
        if match:
            return match.group(1) if match.groups() else match.group(0)
        return value

    def candidates(self, method, labels):
        """(hypervisors the method names, what it read) for one series."""
        if method == 'label':
            value = self._label_value(labels)
            return self.named(value), '%s=%s' % (self.label, value)
        if method == 'instance':
            value = address(labels.get('instance'))
            if not value or ip_of(value):
                return [], None
            return self.named(value), 'instance %s' % value
        if method == 'host_ip':
            value = ip_of(address(labels.get('instance')))
            return list(self.by_ip.get(value, ())), 'host_ip %s' % value
        if method == 'nodename':
            value = labels.get('nodename')
            return self.named(value), 'nodename %s' % value
        raise ValueError(method)

    def place(self, labels):
        """(hypervisor, how) for one series' labels, or (None, why not)."""
        ambiguous = []
        for method in self.methods:
            found, read = self.candidates(method, labels)
            found = sorted(set(found))
            if len(found) == 1:
                return found[0], read
            if found:
                ambiguous.append('%s names %s' % (read, ' and '.join(found)))
        if ambiguous:
            return None, '; '.join(ambiguous)
        return None, None

    # ---------------------------------------------------------- targets
    def learn(self, samples):
        """Place every target of a node_exporter series list."""
        claims = collections.defaultdict(list)
        seen = set()
        for labels, _ in samples:
            key = target_key(labels)
            if key in seen:  # node_uname_info has one series a target
                continue
            seen.add(key)
            name, how = self.place(labels)
            if name is None:
                if how:  # ambiguous: say so; nothing matched: a stranger
                    self.notes.append('the node_exporter target %s cannot be '
                                      'told apart: %s' % (show(key), how))
                continue
            claims[name].append((key, how))
        for name, found in sorted(claims.items()):
            keys = sorted(set(k for k, _ in found), key=str)
            if len(keys) > 1:
                self.notes.append('%s matches %d node_exporter targets (%s): '
                                  'its series are not used' % (
                                      name, len(keys),
                                      ', '.join(show(k) for k in keys)))
                continue
            self.targets[keys[0]] = name
            self.series[name] = keys[0]
            self.how[name] = found[0][1]

    def locate(self, labels):
        """The hypervisor of any series (a libvirt exporter's too), or None.

        A node_exporter target is known by (instance, job); another
        exporter on the same host shares its address, not its port or job.
        """
        key = target_key(labels)
        if key in self.targets:
            return self.targets[key]
        seen = key + (labels.get(self.label), labels.get('nodename'))
        if seen not in self._located:
            self._located[seen] = self._place_anywhere(labels)
        return self._located[seen]

    def _place_anywhere(self, labels):
        name, _ = self.place(labels)
        if name is not None:
            return name
        host = address(labels.get('instance'))
        found = {n for (instance, _), n in self.targets.items()
                 if address(instance) == host} if host else ()
        return next(iter(found)) if len(found) == 1 else None


def show(key):
    instance, job = key
    return 'instance=%s job=%s' % (instance, job) if job else \
        'instance=%s' % instance
