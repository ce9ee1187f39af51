"""The leveller's settings: every key, its default, and where a value came from.

Settings come in layers, later ones winning: the defaults here, the
``leveller:`` section of the cloud's clouds.yaml entry, a ``--config`` YAML
file, then command-line flags. Keys are written nested in YAML and dotted
here (``prometheus.url``). Unknown keys and wrong types are errors that name
the layer and the key, so a typo never silently keeps a default.

Each setting is declared once, as a Key: its type, default, bounds, help,
flag and planner option. The flags (v1/flags.py), the planner's options
and their record in a plan file (core/settings/options.py), ``config show`` and the
configuration reference (osc_leveller/sphinxext.py) are built from KEYS.
"""

import dataclasses
import datetime
import difflib
import math
import re
import string
import urllib.parse

from osc_leveller.core.model import errors
from osc_leveller.core.model import files
from osc_leveller.core.settings import windows

DEFAULT = 'default'
MASK = '******'

# The values of cpu_compatibility.
CPU_MODEL, CPU_FEATURES = 'model', 'features'
FLOAT, INT, BOOL, TEXT, LIST, CHOICE = (
    'number', 'integer', 'true/false', 'text', 'list', 'choice')
URL, PATTERN, QUERY = 'URL', 'regular expression', 'PromQL'
DURATION = 'Prometheus duration'
TIME_ZONE, WINDOWS = 'time zone', 'list of windows'
FILE = 'file name'  # empty text: none, unless the key is required
HEADERS = 'mapping of HTTP headers'
# An HTTP header's name (RFC 9110's token); its value: no control character.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r'[^\x00-\x1f\x7f]*')
# What a query may name between braces (measure.Reader fills them in).
PLACEHOLDERS = ('window', 'label')
# How a node_exporter target is matched to a hypervisor (cloud/hostmatch.py)
# and whose libvirt series give server load (cloud/libvirt.py).
HOST_MATCH = ('label', 'instance', 'host_ip', 'nodename')
SERVER_PROFILES = ('auto', 'inovex', 'tinkoff', 'kumina', 'vexxhost', 'none')
# The guard's checks of implausible metrics (core/load/guard.py), also the
# reasons the metrics file gives.
GUARD_CHECKS = ('capacity', 'coverage_drop', 'load_jump', 'impossible_load')
# Beyond this a number means nothing here, and an int would not fit a float.
MAX_NUMBER = 2 ** 53
# user:password@ after a scheme, to the last @ (a password may hold one).
_USERINFO = re.compile(r'(://[^/?#@:]*:).*@')


class ConfigError(errors.LevellerError, ValueError):
    """A setting is unknown or has the wrong type; the message says where."""


@dataclasses.dataclass(frozen=True)
class Flag:
    """The command-line flag that sets a key; v1/flags.py builds it.

    help may name the key's {help} and its {default}. A true/false key may
    have a negative flag that sets it to false.
    """
    name: str
    help: str = '{help}'
    metavar: str = None
    negative: str = None
    negative_help: str = None

    @property
    def dest(self):
        """The attribute argparse stores the value in (from the name)."""
        return self.name[2:].replace('-', '_')


@dataclasses.dataclass(frozen=True)
class Key:
    name: str
    kind: str
    default: object
    help: str
    minimum: float = None
    choices: tuple = ()
    secret: bool = False
    # Lists from several layers add up instead of the last one replacing.
    additive: bool = False
    # The minimum itself is not allowed either.
    above: bool = False
    maximum: float = None
    # Empty text is not a value (a file path that must name a file).
    required: bool = False
    flag: Flag = None
    # The planner's field (core.options.PlannerOptions) it fills, also its
    # key in a plan file's options; a dotted one is an item of a dict field.
    option: str = None
    # A plan file records the option only when it is not the default, so
    # that plans read the same as before the setting existed.
    recorded_if_set: bool = False


# The dimensions of a hypervisor's score (core/load/scoring.py) and their
# weights. Pressure is a symptom of contention already partly visible in
# utilisation. The server count is off unless weighted: a balancing plan
# then evens out the number of servers per hypervisor with the load.
DIMENSIONS = ('cpu', 'ram', 'cpu_pressure', 'ram_pressure', 'count')
DEFAULT_WEIGHTS = {'cpu': 1.0, 'ram': 1.0, 'cpu_pressure': 0.5,
                   'ram_pressure': 0.5, 'count': 0.0}
_WEIGHT_HELP = {'count': 'Weight of the number of servers in the host score '
                         '(the servers on the hypervisor over twice the '
                         'mean per hypervisor; 0: not counted)'}


def _weight(name):
    return Key('weights.' + name, FLOAT, DEFAULT_WEIGHTS[name],
               minimum=0, option='weights.' + name,
               help=_WEIGHT_HELP.get(name, 'Weight of %s in the host score'
                                     % name.replace('_', ' ')),
               recorded_if_set=name == 'count')


KEYS = (
    Key('threshold', FLOAT, 0.05, minimum=0, option='threshold',
        help='Leave alone the balancing domains whose imbalance (standard '
             'deviation of host scores) is below this',
        flag=Flag('--threshold', '{help} (default {default})',
                  '<imbalance>')),
    Key('target', FLOAT, None, minimum=0, option='target',
        help='Imbalance a domain is brought down to once it is above the '
             'threshold (none: 90 % of the threshold), so that a domain '
             'hovering at the threshold is not nudged at every run',
        flag=Flag('--target', 'Once a domain is above the threshold, plan '
                  'until its imbalance is below this (default: 90 % of the '
                  'threshold)', '<imbalance>')),
    Key('forecast_target', FLOAT, None, minimum=0, option='forecast_target',
        recorded_if_set=True,
        help='With prometheus.forecast_days: the target of the domains '
             'where the forecast has weight (its history shows the load '
             'follows the day); the others keep target: load with no daily '
             'rhythm gains nothing from going deeper (none: target '
             'everywhere)',
        flag=Flag('--forecast-target', '{help}', '<imbalance>')),
    Key('min_drop', FLOAT, 0.05, minimum=0, maximum=1, option='min_drop',
        help='Least part of its domain\'s imbalance a move must take off, '
             'plus min_drop_per_gb for each GiB it copies, both times 2 / '
             'the number of hypervisors in the domain (a domain of n levels '
             'in about n / 2 moves): 0.05 asks 1 % in a domain of 10',
        flag=Flag('--min-drop', 'Plan a move only if it lowers its '
                  'domain\'s imbalance by at least this part of it, plus '
                  '--min-drop-per-gb for each GiB of RAM it copies, both '
                  'times 2 / the number of hypervisors in the domain: 0.05 '
                  'asks 1 % in a domain of 10 (default {default})',
                  '<fraction>')),
    Key('min_drop_per_gb', FLOAT, 0.0025, minimum=0, maximum=1,
        option='min_drop_per_gb',
        help='Part of its domain\'s imbalance a move must take off beyond '
             'min_drop for each GiB of RAM it copies, times 2 / the number '
             'of hypervisors in the domain (0.0025: 1.6 % more for a 32 '
             'GiB server in a domain of 10)',
        flag=Flag('--min-drop-per-gb', 'Part of its domain\'s imbalance a '
                  'move must take off beyond --min-drop for each GiB of RAM '
                  'it copies, times 2 / the number of hypervisors in the '
                  'domain (0.0025: 1.6 % more for a 32 GiB server in a '
                  'domain of 10; default {default})', '<fraction>')),
    Key('min_gain', FLOAT, 0.0005, minimum=0, option='min_gain',
        help='Least drop of the sum of squared score deviations a move '
             'must bring',
        flag=Flag('--min-gain', 'Stop when no move lowers the sum of '
                  'squared deviations of the host scores from their domain '
                  'mean by at least this (default {default})', '<gain>')),
    Key('max_moves', INT, 25, minimum=0, option='max_moves',
        help='Most live migrations in one plan',
        flag=Flag('--max-moves', 'Plan at most this many live migrations '
                  '(default {default})', '<count>')),
    Key('ceiling', FLOAT, 0.85, minimum=0, above=True, option='ceiling',
        help='No move may push a destination\'s score above this',
        flag=Flag('--ceiling', 'Never raise a destination\'s score above '
                  'this, so no new hot spot is made (default {default})',
                  '<score>')),
    Key('move_cost', FLOAT, 64.0, minimum=0, option='move_cost_gb',
        help='Fixed cost of one migration in GiB of RAM copied',
        flag=Flag('--move-cost', 'Fixed cost of one migration, in GiB of '
                  'RAM copied; higher values favour fewer, larger moves '
                  '(default {default})', '<GiB>')),
    Key('headroom', INT, 1, minimum=1, maximum=10,
        help='N+k: how many hypervisors of each balancing domain may be '
             'lost, their servers placed on the others (score --summary, '
             'evacuate)',
        flag=Flag('--headroom', 'Check N+K: could the servers of any K '
                  'hypervisors of a balancing domain be placed on the '
                  'others (default {default})', '<k>')),
    Key('keep_n_plus_one', BOOL, False, option='keep_n_plus_one',
        help='Keep N+1: plan and apply no move after which the servers of '
             'a hypervisor, if it were lost, could no longer be placed on '
             'the others of its balancing domain; evacuate refuses, instead '
             'of warning, a drain that leaves a domain without N+K '
             '(headroom)',
        flag=Flag('--keep-n-plus-one', 'Refuse any move after which the '
                  'servers of a hypervisor of the balancing domain could no '
                  'longer be placed on the others if it were lost (N+1); '
                  'evacuate refuses a drain that leaves a domain without '
                  'N+K (--headroom) and otherwise only warns',
                  negative='--no-keep-n-plus-one',
                  negative_help='Do not hold moves to N+1 (default)')),
    Key('cpu_compatibility', CHOICE, CPU_MODEL,
        choices=(CPU_MODEL, CPU_FEATURES), option='cpu_compatibility',
        help='Servers move between the same CPU model, or to hypervisors '
             'with every CPU feature of the current one',
        flag=Flag('--cpu-compatibility', '"model": servers move only '
                  'between hypervisors with the same CPU model, and each '
                  'model is its own balancing domain; "features": also to '
                  'hypervisors offering every CPU feature of the current '
                  'one, one domain per availability zone and CPU '
                  'architecture (default {default})')),
    Key('cooldown', FLOAT, 6.0, minimum=0, option='cooldown_hours',
        help='Hours after a server\'s last migration (Nova\'s history) '
             'before it may move again',
        flag=Flag('--cooldown', 'Do not move a server migrated less than '
                  'this many hours ago, per Nova\'s migration history '
                  '(default {default})', '<hours>')),
    Key('cooldown_max', FLOAT, 24.0, minimum=0, option='cooldown_max_hours',
        help='Most hours a server\'s cooldown grows to: it is at least 12 '
             'times its last migration\'s duration, and doubles with each '
             'of its moves in the last 24 h (never below cooldown)',
        flag=Flag('--cooldown-max', 'A server\'s cooldown grows with its '
                  'moves in the last 24 h (x 2 each) and with how long its '
                  'last migration took (x 12), up to this many hours '
                  '(default {default})', '<hours>')),
    Key('return_window', FLOAT, 24.0, minimum=0,
        option='return_window_hours',
        help='Hours after a server left a hypervisor during which balancing '
             'does not send it back there, unless no other hypervisor fits '
             'it (0: no such rule)',
        flag=Flag('--return-window', 'Do not send a server back to a '
                  'hypervisor it left less than this many hours ago, per '
                  'Nova\'s migration history, unless no other hypervisor '
                  'fits it (default {default}; 0: allow)', '<hours>')),
    Key('include_locked', BOOL, False, option='include_locked',
        help='Also move locked servers',
        flag=Flag('--include-locked', negative='--no-include-locked',
                  negative_help='Leave locked servers where they are '
                                '(default)')),
    Key('exclude_hosts', LIST, (), additive=True, option='exclude_hosts',
        help='Hypervisors never balanced (no moves off or onto them)',
        flag=Flag('--exclude-host', 'Neither move servers off nor onto '
                  'this hypervisor (repeat for several; adds to '
                  'exclude_hosts in the settings)', '<hypervisor>')),
    Key('exclude_projects', LIST, (), additive=True,
        option='exclude_projects',
        help='Projects whose servers never move',
        flag=Flag('--exclude-project', 'Never move servers of this project '
                  '(repeat for several; adds to exclude_projects in the '
                  'settings)', '<project-id>')),
    Key('availability_zones', LIST, (), option='availability_zones',
        help='Only balance these availability zones (empty: all)',
        flag=Flag('--availability-zone', 'Only balance hypervisors in this '
                  'availability zone (repeat for several)', '<zone>')),
    Key('projects', LIST, (), option='projects',
        help='Only move servers of these projects (empty: all)',
        flag=Flag('--project', 'Only move servers of this project (repeat '
                  'for several)', '<project-id>')),
    Key('nova.scheduler_instance_sync_interval', INT, 120, minimum=0,
        maximum=86400, option='instance_sync_interval', recorded_if_set=True,
        help='As Nova\'s [DEFAULT] option of that name, in seconds: for so '
             'long after a live migration leaves a hypervisor, or the '
             'scheduler picks one for a move that then fails, Nova\'s '
             'scheduler still counts the server there, and '
             'ServerGroupAntiAffinityFilter refuses its group\'s other '
             'members that hypervisor'),
    Key('nova.query_placement_for_image_type_support', BOOL, False,
        option='image_type_prefilter', recorded_if_set=True,
        help='As Nova\'s [scheduler] option of that name: true when it is '
             'on, so that a server not booted from a volume moves only to '
             'a hypervisor whose resource provider has the trait of its '
             'image\'s disk_format (COMPUTE_IMAGE_TYPE_QCOW2 for qcow2)'),
    Key('nova.image_metadata_prefilter', BOOL, False,
        option='image_metadata_prefilter', recorded_if_set=True,
        help='As Nova\'s [scheduler] option of that name: true when it is '
             'on, so that image properties such as hw_disk_bus and '
             'hw_vif_model require their traits (COMPUTE_STORAGE_BUS_VIRTIO '
             '...) of a destination'),
    Key('max_snapshot_mb', INT, files.MAX_MB, minimum=1,
        help='Largest snapshot file read, in MiB; a larger one is refused '
             'unread, since loading takes about seven times its size in '
             'memory'),
    Key('output.follow_symlinks', BOOL, False,
        help='Write an output file (--output-file, --report, '
             '--metrics-file) through a symbolic link at its path: replace '
             'the regular file the link resolves to, or create it if the '
             'link dangles; when false, a link there is refused',
        flag=Flag('--follow-symlinks', 'Write output files through a '
                  'symbolic link at their path: replace the file the link '
                  'resolves to, or create it if the link dangles (setting '
                  'output.follow_symlinks)',
                  negative='--no-follow-symlinks',
                  negative_help='Refuse a symbolic link at an output file\'s '
                                'path (default)')),
) + tuple(_weight(d) for d in DIMENSIONS) + (
    Key('cloud.connect_timeout', FLOAT, 10.0, minimum=0, above=True,
        maximum=3600,
        help='Seconds to wait for a connection to Keystone, Nova or '
             'Placement'),
    Key('cloud.read_timeout', FLOAT, 60.0, minimum=0, above=True,
        maximum=3600,
        help='Seconds to wait for each answer of Keystone, Nova or '
             'Placement (openstacksdk\'s api_timeout)'),
    Key('cloud.retries', INT, 2, minimum=0, maximum=10,
        help='Retries of a read from Nova or Placement that got no answer '
             '(requests that change something are never sent twice); a '
             'service that stalls fails after about (retries + 1) x '
             'read_timeout'),
    Key('cloud.max_images', INT, 1000, minimum=0, maximum=100000,
        help='Most images read from Glance (one request each) for the '
             'properties Nova\'s scheduler reads of them, the images of the '
             'most servers first; the servers of the others move only to '
             'hypervisors as capable as theirs'),
    Key('prometheus.url', URL, None,
        help='Prometheus base URL; without it, Aetos in the catalog '
             '(metric-storage) with the cloud\'s token if it has one, else '
             'load comes from Placement allocations',
        flag=Flag('--prometheus-url', 'Read measured load from this '
                  'Prometheus (setting prometheus.url)', '<url>')),
    Key('prometheus.token', TEXT, None, secret=True,
        help='Bearer token for Prometheus'),
    Key('prometheus.username', TEXT, None, help='Basic-auth user name'),
    Key('prometheus.password', TEXT, None, secret=True,
        help='Basic-auth password'),
    Key('prometheus.ca_bundle', TEXT, None,
        help='CA bundle file to verify Prometheus\' TLS certificate'),
    Key('prometheus.cert_file', FILE, None,
        help='Client certificate (PEM) presented to Prometheus, or to the '
             'proxy in front of it, for TLS client authentication; it may '
             'hold the private key too (empty: none)'),
    Key('prometheus.key_file', FILE, None,
        help='Private key (PEM, not encrypted) of cert_file, when it is '
             'not in that file (empty: none)'),
    Key('prometheus.headers', HEADERS, None, secret=True,
        help='Extra HTTP headers sent with every request to Prometheus, '
             'as name: value (the tenant of Thanos or Mimir: '
             'X-Scope-OrgID: team-a; _ in a name is read as -); their '
             'values are secrets, shown masked'),
    Key('prometheus.connect_timeout', FLOAT, 5.0, minimum=0, above=True,
        maximum=3600,
        help='Seconds to wait for a connection to Prometheus'),
    Key('prometheus.timeout', FLOAT, 10.0, minimum=0, above=True,
        maximum=3600,
        help='Seconds to wait for each Prometheus answer'),
    Key('prometheus.history_timeout', FLOAT, 120.0, minimum=0, above=True,
        maximum=3600,
        help='Seconds to wait for each answer of the history the '
             'forecast\'s skill is measured on (forecast_days), the '
             'heaviest queries asked: about 26 s on 1,000 hypervisors. One '
             'that takes longer is not asked again, and the forecast gets '
             'no weight'),
    Key('prometheus.retries', INT, 2, minimum=0, maximum=10,
        help='Retries of a query that got no answer, HTTP 5xx, or 429 '
             'with Retry-After: the first at once, then after 0.5, 1, 2, '
             '2 ... s, or what Retry-After asks up to 10 s'),
    Key('prometheus.max_answer_mb', INT, 512, minimum=1,
        maximum=1024 * 1024,
        help='Largest answer to one query read, in MiB; a larger one is '
             'cut off and the run goes on with load from allocations. A '
             'cloud of 500,000 servers answers a server query with about '
             '100 MiB (200 bytes a server; 512 MiB leaves room for 1,000)'),
    Key('prometheus.window', TEXT, '5m',
        help='Smoothing window of rate() in the queries ({window})'),
    Key('prometheus.lasting', DURATION, None,
        help='Also read each figure averaged over this period (a '
             'Prometheus duration: 3h), and plan on the load that lasted: '
             'for each server the lower of now and its average, so a burst '
             'of the moment moves nothing (empty: off)'),
    Key('prometheus.forecast_days', INT, 0, minimum=0, maximum=60,
        help='Also read each figure over the period ahead '
             '(forecast_ahead) on each of this many past days, and plan on '
             'a blend of now and their average: load that comes at this '
             'time of day (0: off)'),
    Key('prometheus.forecast_ahead', DURATION, '1h', maximum=12 * 3600,
        help='The period ahead a forecast covers: how often cron runs '
             'apply (a Prometheus duration)'),
    Key('prometheus.forecast_weight', FLOAT, 0.5, minimum=0, maximum=1,
        help='The most the forecast may weigh in the load a plan is made '
             'on: each domain\'s weight, for CPU and for RAM, is the one '
             'that predicted the period ahead best on the cloud\'s own '
             'history, 0 where the forecast adds nothing to now'),
    Key('prometheus.host_match', LIST, HOST_MATCH, choices=HOST_MATCH,
        help='How a node_exporter target is matched to a hypervisor, tried '
             'in this order: host_label, instance as a host name, instance '
             'as Nova\'s host_ip, node_uname_info nodename'),
    Key('prometheus.host_label', TEXT, 'hostname',
        help='Label carrying the hypervisor name (openstack-helm sets '
             'hostname; empty: none)'),
    Key('prometheus.host_pattern', PATTERN, '^([^:]+)',
        help='Regular expression whose first group is the hypervisor name '
             'in that label (strips ports)'),
    Key('prometheus.server_profile', CHOICE, 'auto',
        choices=SERVER_PROFILES,
        help='Which libvirt exporter\'s series give per-server load: found '
             'from the metric names Prometheus has, one named, or none'),
    Key('prometheus.profile', CHOICE, 'pressure',
        choices=('pressure', 'utilisation'),
        help='Default query set: utilisation plus PSI pressure, or '
             'utilisation only'),
    Key('prometheus.no_metrics', CHOICE, 'allocations',
        choices=('allocations', 'exclude'),
        help='A hypervisor without usable metrics is scored from Placement '
             'allocations, or left out of balancing'),
) + tuple(
    Key('prometheus.queries.' + m, QUERY, None,
        help='PromQL for host %s (empty text: do not query it)'
        % m.replace('_', ' '))
    for m in ('cpu', 'ram', 'cpu_pressure', 'ram_pressure')
) + tuple(
    Key('prometheus.server_queries.' + m, QUERY, None,
        help='PromQL for server %s, by label uuid or instance_id '
             '(replaces server_profile)' % m.replace('_', ' '))
    for m in ('cpu', 'ram', 'cpu_steal')
) + (
    # The guard against implausible metrics (core/load/guard.py).
    Key('guard.checks', LIST, GUARD_CHECKS, choices=GUARD_CHECKS,
        help='Which checks of the measured load hold a balancing domain '
             'when its metrics cannot be true (empty: none): capacity, '
             'coverage_drop, load_jump, impossible_load'),
    Key('guard.capacity_tolerance', FLOAT, 0.25, minimum=0, maximum=1,
        help='How far node_exporter\'s CPU count and memory may be from '
             'Placement\'s totals, as a share of the larger (0.25: 48 CPUs '
             'against 64 pass, 32 do not); none at all never passes'),
    Key('guard.coverage_drop', FLOAT, 0.2, minimum=0, above=True,
        maximum=1,
        help='Share of a domain\'s hypervisors, or of its running servers, '
             'that may lose their metrics since the reference'),
    Key('guard.load_jump', FLOAT, 0.4, minimum=0, above=True, maximum=1,
        help='How far the CPU or RAM of more than half of a domain\'s '
             'hypervisors may move, all one way, since the reference'),
    Key('guard.impossible_load', FLOAT, 0.1, minimum=0,
        help='How far above its vCPUs a server\'s CPU may read, and its '
             'servers\' CPU above what its hypervisor reads busy, as a '
             'share of the vCPUs or of the hypervisor\'s CPUs'),
    Key('guard.since', DURATION, '1h',
        help='The reference when no metrics file keeps one (plan, runs '
             'without --metrics-file): Prometheus\' figures this long ago '
             '(a Prometheus duration; empty: no reference then)'),
) + (
    Key('windows.time_zone', TIME_ZONE, 'UTC',
        help='IANA time zone of the windows (a window may name its own: '
             'TZ=America/New_York Mon-Fri 09:00-17:00)'),
    # Blackouts add up, so a --config file never drops the cloud's.
    Key('windows.blackout', WINDOWS, (), additive=True,
        help='When apply without a plan file and evacuate move nothing: '
             'weekday/time ranges (Mon-Fri 08:00-18:00), cron '
             'expressions, alone (the minutes they match) or with a '
             'length (0 22 * * 5 for 56h), or one-off ranges of dates, the '
             'end day included (2026-12-20..2027-01-04)'),
    Key('windows.allowed', WINDOWS, (),
        help='If set, the only times apply without a plan file and '
             'evacuate move servers (a blackout still wins); written like '
             'blackout'),
    Key('apply.batch', INT, None, minimum=0,
        help='Most live migrations one apply starts (none: the whole plan)',
        flag=Flag('--batch', 'Start at most this many live migrations '
                  '(cron: 1)', '<count>')),
    Key('apply.max_parallel', INT, 2, minimum=1,
        help='Most live migrations running at once',
        flag=Flag('--max-parallel', 'Migrations running at once (default '
                  '{default})', '<count>')),
    Key('apply.timeout', FLOAT, 900.0, minimum=1, option='move_timeout',
        recorded_if_set=True,
        help='Seconds one live migration may take before it is aborted; '
             'a move Nova\'s history predicts to take longer is not '
             'planned',
        flag=Flag('--timeout', 'Abort a migration that has not finished '
                  'after this long (default {default})', '<seconds>')),
    Key('apply.poll_interval', FLOAT, 2.0, minimum=0.1,
        help='Seconds between two looks at a running migration'),
    Key('apply.stop_on_error', BOOL, True,
        help='Start no further migration after one failed',
        flag=Flag('--stop-on-error', '{help} (default)',
                  negative='--continue-on-error',
                  negative_help='Go on with the other moves after a '
                                'failure')),
    Key('apply.lock_file', FILE, '~/.local/state/osc-leveller/apply.lock',
        required=True,
        help='Lock held while apply runs, so runs never overlap',
        flag=Flag('--lock-file', 'Lock that keeps two runs from '
                  'overlapping (default {default})', '<file>')),
    Key('apply.cloud_lock', DURATION, None, maximum=24 * 3600,
        help='With the same apply job on several controllers: a run holds '
             'a lock in the cloud (a Nova host aggregate without hosts) '
             'for this long from its start, and as long as it moves, so '
             'one controller acts per interval (set it to the job\'s '
             'interval, e.g. 10m; empty: none; a dry run takes none)',
        flag=Flag('--cloud-lock', 'Hold the cloud lock for this long, so '
                  'that of the controllers running this job one acts per '
                  'interval (setting apply.cloud_lock; a Prometheus '
                  'duration such as 10m; empty: none)', '<duration>')),
    Key('apply.journal', FILE, '~/.local/state/osc-leveller/journal.jsonl',
        help='JSON-lines record of every action (empty text: none)',
        flag=Flag('--journal', 'Append a JSON line per action to this file '
                  '(default {default}; empty: none)', '<file>')),
    Key('apply.metrics_file', FILE, None,
        help='node_exporter textfile-collector file (name.prom) that each '
             'apply or evacuate replaces with the figures of its run: '
             'moves, imbalance, exit code, last success (none or empty '
             'text: not written; a dry run never writes it)',
        flag=Flag('--metrics-file', 'Replace this node_exporter textfile '
                  'collector file (name.prom) with the figures of the run '
                  '(setting apply.metrics_file; empty: none; a dry run does '
                  'not write it)', '<file>')),
)
BY_NAME = {k.name: k for k in KEYS}


def flatten(section, where):
    """{dotted key: checked value} from a nested mapping; ConfigError if bad."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConfigError('%s: the leveller settings must be a mapping, not '
                          '%s' % (where, type(section).__name__))
    flat = {}
    _walk(section, '', where, flat)
    return flat


def _walk(mapping, prefix, where, flat):
    for name, value in mapping.items():
        dotted = prefix + str(name)
        if dotted in BY_NAME:
            flat[dotted] = check(BY_NAME[dotted], value, where)
        elif any(k.startswith(dotted + '.') for k in BY_NAME):
            if not isinstance(value, dict):
                raise ConfigError('%s: %s: must be a mapping of %s' % (
                    where, dotted, ', '.join(
                        k.name[len(dotted) + 1:] for k in KEYS
                        if k.name.startswith(dotted + '.'))))
            _walk(value, dotted + '.', where, flat)
        else:
            known = {k.name.rsplit('.', i)[0] for k in KEYS for i in (0, 1)}
            close = difflib.get_close_matches(dotted, sorted(known), n=1)
            raise ConfigError('%s: unknown setting %s%s' % (
                where, errors.name(dotted),
                ' (did you mean %s?)' % close[0] if close else ''))


def check(key, value, where, flag=False):
    """The value converted to the key's kind, or ConfigError.

    where names the layer; a flag names the setting itself. The message
    quotes a bad value briefly, and never a secret.
    """
    def bad(expected):
        shown = MASK if key.secret else mask_url(value) \
            if key.kind == URL and isinstance(value, str) else value
        return ConfigError('%s: %smust be %s (got %s)' % (
            where, '' if flag else key.name + ': ', expected,
            errors.quote(shown)))

    if value is None:
        return None
    if key.kind in (FLOAT, INT):
        return _number(key, value, bad)
    if key.kind == BOOL:
        if not isinstance(value, bool):
            raise bad('true or false')
        return value
    if key.kind == HEADERS:
        return _headers(value, bad)
    if key.kind in (LIST, WINDOWS):
        items = [value] if isinstance(value, str) else value
        if key.kind == WINDOWS and isinstance(items, (list, tuple)):
            # YAML (clouds.yaml, as openstacksdk reads it) makes a date
            # alone, 2026-12-24, a date: the one-off window of that day.
            items = [i.isoformat() if type(i) is datetime.date else i
                     for i in items]
        if not isinstance(items, (list, tuple)) or not all(
                isinstance(i, str) and _printable(i) for i in items):
            raise bad('a list of names' if key.kind == LIST else
                      'a list of windows written as text')
        if key.choices and not set(items) <= set(key.choices):
            raise bad('a list of ' + ', '.join(key.choices))
        if key.kind == WINDOWS:
            _windows(items, bad)
        return tuple(items)
    if not isinstance(value, str) or not _printable(value):
        raise bad('text')
    if key.kind == FILE and not value.strip() and (value or key.required):
        raise bad('a file name, not empty' if key.required else
                  'a file name, or empty text for none')
    if key.kind == CHOICE and value not in key.choices:
        raise bad(' or '.join(key.choices))
    if key.kind == URL and value:
        _url(value, bad)
    if key.kind == PATTERN:
        try:
            re.compile(value)
        except re.error as exc:
            raise bad('a regular expression (%s)' % exc) from None
    if key.kind == QUERY and value:
        _query(value, bad)
    if key.kind == TIME_ZONE:
        try:
            windows.zone(value)
        except windows.WindowError as exc:
            raise bad('an IANA time zone such as Europe/Berlin (%s)' % exc) \
                from None
    if key.kind == DURATION and value:
        found = windows.seconds(value)
        if found is None:
            raise bad('a Prometheus duration such as 3h or 90m')
        if key.maximum is not None and found > key.maximum:
            raise bad('a Prometheus duration up to %gh' % (
                key.maximum / 3600))
    return value


def _headers(value, bad):
    """{name: value} of HTTP headers; a number (a tenant written bare in
    YAML) is its text. openstacksdk turns every - of a clouds.yaml key
    into _, so an _ in a name is read as - (proxies drop names with _)."""
    if not isinstance(value, dict):
        raise bad('a mapping of header names to values')
    headers = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise bad('a mapping of HTTP header names (letters, digits and '
                      '-) to values, not a header named %s' % errors.quote(
                          name))
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            text = str(text)
        if not isinstance(text, str) or not _printable(text) or \
                not _HEADER_VALUE.fullmatch(text):
            raise bad('a mapping of header names to values of text without '
                      'line breaks or control characters, not so for %s' %
                      name)
        headers[name.replace('_', '-')] = text
    return headers


def seconds(duration):
    """The seconds of a Prometheus duration ('1h30m'); 0 for text that is
    none (prometheus.window is text) and for a key not set (None)."""
    return (windows.seconds(duration) or 0) if duration else 0


def _number(key, value, bad):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if not isinstance(value, str):
            raise bad('a number')
        # openstacksdk hands clouds.yaml numbers over as text: an integer
        # is read whole, since float('9007199254740993') rounds into range.
        try:
            value = int(value)
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                raise bad('a number') from None
    # abs() first: an int too large for a float makes isfinite() raise.
    if abs(value) > MAX_NUMBER or not math.isfinite(value):
        raise bad('a finite number of at most 2**53')
    if key.kind == INT:
        if value != int(value):
            raise bad('a whole number')
        value = int(value)
    if key.minimum is not None and (
            value < key.minimum or key.above and value == key.minimum):
        raise bad('%s %g' % ('>' if key.above else '>=', key.minimum))
    if key.maximum is not None and value > key.maximum:
        raise bad('<= %g' % key.maximum)
    return float(value) if key.kind == FLOAT else value


def _printable(text):
    """Text the terminal can show: no lone surrogate (from a JSON escape)."""
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return True


def _url(value, bad):
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise bad('an http or https URL (%s)' % exc) from None
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise bad('an http or https URL with a host name')


def _windows(items, bad):
    """Each item reads as a window (its zone is checked when it names one;
    windows.time_zone is checked on its own)."""
    for item in items:
        try:
            windows.parse(item)
        except windows.WindowError as exc:
            raise bad('windows such as "Mon-Fri 08:00-18:00", "0 22 * * 5 '
                      'for 56h" or "2026-12-20..2027-01-04" (%s)' % exc) \
                from None


def _query(value, bad):
    """The query's {placeholders} are the known ones; {{ }} are braces."""
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion
                  in string.Formatter().parse(value) if name is not None]
    except ValueError as exc:
        raise bad('PromQL with {window} or {label} placeholders and {{ }} '
                  'for braces (%s)' % exc) from None
    for name, spec, conversion in fields:
        # A conversion or format spec ({window!z}, {label:d}) would only
        # fail when the query is filled in, in the middle of a live read.
        if name not in PLACEHOLDERS or spec or conversion:
            raise bad('PromQL whose placeholders are {window} and {label}, '
                      'not %s; write braces of PromQL as {{ }}' % errors.name(
                          '{%s%s%s}' % (name, '!' + conversion if conversion
                                        else '', ':' + spec if spec else '')))


def weight_flags(pairs, where='--weight'):
    """{'weights.cpu': 2.0, ...} from 'name=value' strings; ConfigError if bad."""
    flat = {}
    names = [k.name[len('weights.'):] for k in KEYS
             if k.name.startswith('weights.')]
    for pair in pairs or ():
        name, sep, value = pair.partition('=')
        key = BY_NAME.get('weights.' + name.strip())
        if not sep or key is None:
            raise ConfigError('%s %s: use NAME=VALUE with NAME one of %s' % (
                where, errors.name(pair), ', '.join(names)))
        flat[key.name] = check(key, value.strip(), '%s %s' % (
            where, errors.name(pair)), flag=True)
    return flat


class Settings:
    """The effective value of every key and the layer it came from."""

    def __init__(self, layers=()):
        """layers: [(source, {dotted key: value})], lowest priority first."""
        self.values = {k.name: k.default for k in KEYS}
        self.sources = {k.name: DEFAULT for k in KEYS}
        for source, flat in layers:
            for name, value in flat.items():
                if value is None:
                    continue
                origin = source
                if BY_NAME[name].additive and self.values[name]:
                    value = tuple(dict.fromkeys(self.values[name] + value))
                    origin = '%s + %s' % (self.sources[name], source)
                self.values[name] = value
                self.sources[name] = origin

    def __getitem__(self, name):
        return self.values[name]

    def section(self, prefix):
        """{rest of key: value} of the keys under prefix, nested one level."""
        result = {}
        for name, value in self.values.items():
            if not name.startswith(prefix + '.') or value is None:
                continue
            head, _, tail = name[len(prefix) + 1:].partition('.')
            if tail:
                result.setdefault(head, {})[tail] = value
            else:
                result[head] = value
        return result

    def secrets(self):
        """The secret values in effect: secret keys, URL passwords."""
        found = []
        for key in KEYS:
            value = self.values[key.name]
            if key.secret and value:
                found.extend(value.values() if key.kind == HEADERS
                             else [value])
            if key.kind == URL and value:
                password = urllib.parse.urlsplit(value).password
                if password:
                    found.append(urllib.parse.unquote(password))
                    found.append(password)
        return found

    def rows(self):
        """(key, value, source) for display, secrets masked."""
        return [(k.name, display(k, self.values[k.name]),
                 self.sources[k.name]) for k in KEYS]


def display(key, value):
    if value is None or key.kind == FILE and not value:
        return None
    if key.kind == HEADERS:  # the names tell which are set
        return {name: MASK for name in value}
    if key.secret:
        return MASK
    if key.name == 'prometheus.url':
        return mask_url(value)
    if key.kind in (LIST, WINDOWS):
        return list(value)
    return value


def mask_url(url):
    """The URL with any password in it replaced by the mask."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # not a URL (an unclosed [IPv6 host): mask by shape
        return _USERINFO.sub(r'\1%s@' % MASK, url)
    if parts.password is None:
        return url
    netloc = '%s:%s@%s' % (parts.username, MASK,
                           parts.netloc.rpartition('@')[2])
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
