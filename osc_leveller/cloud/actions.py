"""The Nova calls the executor makes, and nothing else.

Every request of one run carries the same global request id, so Nova's logs
and the journal can be matched. Live migrations go to a named host with
``block_migration='auto'`` and never with force: Nova's scheduler still
checks the destination. A request that changes something is never sent
twice: only reads are retried when they get no answer.
"""

import dataclasses
import datetime

import requests
from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import answers
from osc_leveller.cloud import cloudlock
from osc_leveller.cloud import collect
from osc_leveller.cloud import refresh
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.core.run import executor

LIVE_MIGRATE_VERSION = '2.34'  # a named host, no force, pre-checks async
MIGRATIONS_VERSION = '2.80'  # instance_uuid filter, uuid and integer id
ABORT_VERSION = '2.65'  # abort queued and preparing migrations too
# What GET /servers/ID/migrations/ID shows (Nova's in_progress, less
# post-migrating: memory copied by then).
PROGRESS_STATUSES = ('queued', 'preparing', 'running')
COLD_MIGRATE_VERSION = '2.56'  # a named host
SERVICE_VERSION = '2.53'  # services by uuid
ERRORS = (sdk_exc.SDKException, ksa_exc.ClientException)
# What a read of an answer that is not Nova's can raise.
SHAPE = (requests.exceptions.JSONDecodeError, KeyError, TypeError,
         AttributeError, ValueError)


class Actions:
    def __init__(self, conn, metrics=None, history_hours=24.0,
                 retries=collect.RETRIES, progress=None,
                 max_images=collect.glance.MAX_IMAGES, cloud_lock=None):
        self.conn = conn  # opened with the run's global request id
        # Kept before each migration starts (cloudlock.CloudLock.keep).
        self.cloud_lock = cloud_lock
        self.collector = collect.Collector(
            conn, history_hours=history_hours, metrics=metrics,
            retries=retries, progress=progress, max_images=max_images)
        self.retries = retries
        self.document = self.snap = None  # the last one read, parsed

    def snapshot(self, moves=None):
        """The cloud now, as the core model.

        moves: read again only what these moves touch (their servers,
        sources and destinations, see cloud/refresh.py) into the last
        document read; the whole cloud when None or nothing was read yet.
        """
        try:
            if moves is None or self.document is None:
                document = self.collector.collect()
                before = None
            else:
                document = refresh.refresh(
                    self.collector, self.document,
                    [m.server_id for m in moves],
                    {h for m in moves for h in (m.source, m.destination)})
                # What refresh kept is parsed already.
                before = self.document, self.snap
            snap = snapshot_io.parse(document, origin='the cloud',
                                     before=before)
        except (collect.CollectError, snapshot_io.SnapshotError) as exc:
            raise executor.ActionError(str(exc)) from exc
        self.document, self.snap = document, snap
        return snap

    def live_migrate(self, server_id, host):
        self._keep_lock()
        self._action(server_id, {'os-migrateLive': {
            'host': host, 'block_migration': 'auto'}},
            LIVE_MIGRATE_VERSION, 'Nova refused the live migration')

    def cold_migrate(self, server_id, host):
        """Migrate a stopped server; the executor confirms it afterwards."""
        self._keep_lock()
        self._action(server_id, {'migrate': {'host': host}},
                     COLD_MIGRATE_VERSION, 'Nova refused the cold migration')

    def confirm(self, server_id):
        self._action(server_id, {'confirmResize': None},
                     COLD_MIGRATE_VERSION, 'Nova refused to confirm it')

    def _keep_lock(self):
        if self.cloud_lock is None:
            return
        try:
            self.cloud_lock.keep()
        except (cloudlock.Lost, cloudlock.LockError) as exc:
            raise executor.ActionError(str(exc)) from exc

    def _action(self, server_id, body, version, what):
        try:
            response = self.conn.compute.post(
                '/servers/%s/action' % server_id, json=body,
                microversion=version, connect_retries=0)
            sdk_exc.raise_from_response(response)
        except ksa_exc.ConnectTimeout as exc:
            # Sent, but no answer: Nova may have taken it.
            raise executor.ActionError(
                'no answer from Nova to POST /servers/%s/action (%s); it may '
                'still run: see "openstack server migration list --server '
                '%s"' % (server_id, _why(exc), server_id)) from exc
        except ERRORS as exc:
            raise executor.ActionError('%s: %s' % (what, _why(exc))) from exc

    def set_service(self, host, enabled, reason=None):
        """Enable or disable the nova-compute service of a compute host."""
        try:
            found = list(self.conn.compute.services(host=host,
                                                    binary='nova-compute'))
            if not found:
                raise executor.ActionError(
                    'no nova-compute service on host %s' % host)
            body = {'status': 'enabled' if enabled else 'disabled'}
            if not enabled and reason:
                body['disabled_reason'] = reason
            response = self.conn.compute.put(
                '/os-services/%s' % found[0].id, json=body,
                microversion=SERVICE_VERSION, connect_retries=0)
            sdk_exc.raise_from_response(response)
        except ERRORS + SHAPE as exc:
            raise executor.ActionError(
                'cannot %s the compute service of %s: %s' % (
                    'enable' if enabled else 'disable', host, _why(exc))
            ) from exc

    def server(self, server_id):
        """An executor.ServerView, or None once the server is gone."""
        try:
            server = self.conn.compute.get_server(server_id)
            return executor.ServerView(
                status=server.status, task_state=server.task_state,
                host=server.compute_host,
                hypervisor=server.hypervisor_hostname)
        except sdk_exc.NotFoundException:
            return None
        except ERRORS + SHAPE as exc:
            raise executor.ActionError('Nova GET /servers/%s: %s' % (
                server_id, _why(exc))) from exc

    def migration(self, server_id, since, cold=False):
        """The server's newest migration of that kind updated since then."""
        moment = datetime.datetime.fromtimestamp(
            since - 5, datetime.timezone.utc)  # clocks differ a little
        try:
            response = self.conn.compute.get(
                '/os-migrations', params={
                    'instance_uuid': server_id,
                    'migration_type': 'migration' if cold else
                    'live-migration',
                    'changes-since': moment.strftime('%Y-%m-%dT%H:%M:%SZ')},
                microversion=MIGRATIONS_VERSION,
                connect_retries=self.retries)
            sdk_exc.raise_from_response(response)
            found = response.json()['migrations']
            if not found:
                return None
            newest = max(found, key=lambda m: (str(m.get('created_at') or ''),
                                               int(m.get('id') or 0)))
            view = executor.MigrationView(
                id=str(newest['id']), status=str(newest.get('status') or ''))
        except ERRORS + SHAPE as exc:
            raise executor.ActionError('Nova GET /os-migrations: %s' % _why(
                exc)) from exc
        if cold or view.status.lower() not in PROGRESS_STATUSES:
            return view
        return dataclasses.replace(view, **self._memory(server_id, view.id))

    def _memory(self, server_id, migration_id):
        """A running live migration's memory figures (os-migrations leaves
        them out; the server's migrations API has them while it runs).
        Only for the progress line: a failed read means no figures."""
        try:
            response = self.conn.compute.get(
                '/servers/%s/migrations/%s' % (server_id, migration_id),
                microversion=MIGRATIONS_VERSION, connect_retries=0)
            sdk_exc.raise_from_response(response)
            shown = response.json()['migration']
            return {'memory_%s' % name: _bytes(shown.get(
                'memory_%s_bytes' % name))
                for name in ('total', 'processed', 'remaining')}
        except ERRORS + SHAPE:
            return {}

    def abort(self, server_id, migration_id):
        try:
            response = self.conn.compute.delete(
                '/servers/%s/migrations/%s' % (server_id, migration_id),
                microversion=ABORT_VERSION, connect_retries=0)
            sdk_exc.raise_from_response(response)
        except ERRORS as exc:
            raise executor.ActionError(_why(exc)) from exc


def _bytes(value):
    """A byte count of Nova's progress figures, or None: null, and anything
    but a non-negative integer below 2**63 (a float, a text, a boolean), is
    unknown rather than an error, as it only feeds the progress line."""
    if type(value) is not int or not 0 <= value < 2 ** 63:
        return None
    return value


def _why(exc):
    """Nova's own words, without the URL and request noise."""
    if isinstance(exc, SHAPE) and not isinstance(exc, ERRORS):
        return 'the answer is not Nova\'s (%s: %s)' % (
            type(exc).__name__, answers.why(exc))
    return answers.why(exc)
