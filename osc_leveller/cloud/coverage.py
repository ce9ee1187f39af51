"""What Prometheus covers: per hypervisor, how it matched and what falls back.

Built from a snapshot document and the measure.Reading that filled it.
``metrics check`` shows it whole; score, plan and apply print its one-line
summary whenever anything falls back, so nothing falls back silently.
"""

import dataclasses

# Guests that run and so have load a libvirt exporter can show.
RUNNING = frozenset(('ACTIVE', 'MIGRATING', 'VERIFY_RESIZE', 'REBOOT',
                     'HARD_REBOOT', 'RESCUE', 'PASSWORD'))
SHOWN = 5  # hypervisors named in the one-line summary


@dataclasses.dataclass
class Row:
    hypervisor: str
    matched_by: str     # how its node_exporter target was matched, or None
    load_from: str      # 'metrics' or 'allocations'
    why: str            # why allocations, or None
    pressure: bool      # PSI series present
    servers: int        # running servers on it
    matched: int        # of them, with any series of their own
    cpu_series: int     # of them, with their own CPU series
    ram_series: int     # of them, with their own RAM series
    steal_series: int = 0  # of them, with their own CPU steal series

    def series(self, metric):
        return {'cpu': self.cpu_series, 'ram': self.ram_series,
                'cpu_steal': self.steal_series}[metric]


@dataclasses.dataclass
class Coverage:
    rows: list
    profiles: list      # libvirt.Profile objects in use
    identity: str       # the series that placed node_exporter targets
    notes: list         # what is wrong and should be fixed
    info: list          # what was resolved, for the report only
    unreachable: str = None

    @property
    def hosts_measured(self):
        return sum(r.load_from == 'metrics' for r in self.rows)

    @property
    def servers(self):
        return sum(r.servers for r in self.rows)

    @property
    def matched(self):
        return sum(r.matched for r in self.rows)

    def measured(self, metric):
        """Running servers with their own series of a metric."""
        return sum(r.series(metric) for r in self.rows)

    def ram_missing(self):
        """Why no profile measures server RAM, or None."""
        if any('ram' in p.queries for p in self.profiles):
            return None
        return '; '.join('%s: %s' % (p.exporter, p.missing)
                         for p in self.profiles if p.missing) or None

    def steal_missing(self):
        """Why no profile measures server CPU steal, or None."""
        if any('cpu_steal' in p.queries for p in self.profiles):
            return None
        return '; '.join('%s: %s' % (p.exporter, p.no_steal)
                         for p in self.profiles if p.no_steal) or None

    def summary(self):
        """One line when anything falls back, else None."""
        if self.unreachable:
            return None  # said by the caller, with the reason
        parts = []
        total = len(self.rows)
        unmeasured = [r for r in self.rows if r.load_from != 'metrics']
        if unmeasured:
            parts.append('%d of %d hypervisors scored from Placement '
                         'allocations (%s)' % (len(unmeasured), total,
                                               _reasons(unmeasured)))
        measured = [r for r in self.rows if r.load_from == 'metrics']
        running = sum(r.servers for r in measured)
        for metric in ('cpu', 'ram'):
            own = sum(r.series(metric) for r in measured)
            if own < running:
                parts.append('%s of %d of %d running servers from a share '
                             'of their hypervisor\'s' % (
                                 metric.upper(), running - own, running))
        if not parts:
            return None
        return ('Prometheus: %s: \'openstack leveller metrics check\' says '
                'why' % '; '.join(parts))


def build(document, reading):
    """The Coverage of a document that add_metrics filled from reading."""
    rows = []
    on = {}
    for server in document['servers']:
        if server.get('status') in RUNNING:
            on.setdefault(server.get('hypervisor'), []).append(server)
    for hyp in document['hypervisors']:
        name = hyp['name']
        metrics = hyp.get('metrics')
        servers = on.get(name, [])
        usage = [s.get('usage') or {} for s in servers]
        rows.append(Row(
            hypervisor=name, matched_by=reading.matched.get(name),
            load_from='metrics' if metrics else 'allocations',
            why=None if metrics else (
                reading.unreachable and 'Prometheus not reachable' or
                reading.problems.get(name) or 'no series'),
            pressure=bool(metrics) and any(
                metrics.get(m) is not None
                for m in ('cpu_pressure', 'ram_pressure')),
            servers=len(servers), matched=sum(bool(u) for u in usage),
            cpu_series=sum(u.get('cpu') is not None for u in usage),
            ram_series=sum(u.get('ram') is not None for u in usage),
            steal_series=sum(u.get('cpu_steal') is not None for u in usage)))
    return Coverage(rows=rows, profiles=list(reading.profiles),
                    identity=reading.identity, notes=list(reading.notes),
                    info=list(reading.info), unreachable=reading.unreachable)


def _reasons(rows):
    """'hv1, hv2: why; hv3: why', naming at most SHOWN hypervisors."""
    by_reason = {}
    for row in sorted(rows, key=lambda r: r.hypervisor)[:SHOWN]:
        by_reason.setdefault(row.why, []).append(row.hypervisor)
    text = '; '.join('%s: %s' % (', '.join(names), why)
                     for why, names in by_reason.items())
    if len(rows) > SHOWN:
        text += '; and %d more' % (len(rows) - SHOWN)
    return text
