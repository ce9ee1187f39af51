"""The Nova calls the executor makes, and nothing else.

Every request of one run carries the same global request id, so Nova's logs
and the journal can be matched. Live migrations go to a named host with
``block_migration='auto'`` and never with force: Nova's scheduler still
checks the destination.
"""

import datetime

from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import collect
from osc_leveller.core import executor
from osc_leveller.core import snapshot as snapshot_io

LIVE_MIGRATE_VERSION = '2.30'  # a named host without force
MIGRATIONS_VERSION = '2.80'  # instance_uuid filter, uuid and integer id
ABORT_VERSION = '2.65'  # abort queued and preparing migrations too
ERRORS = (sdk_exc.SDKException, ksa_exc.ClientException)


class Actions:
    def __init__(self, conn, metrics=None, history_hours=24.0):
        self.conn = conn  # opened with the run's global request id
        self.metrics = metrics
        self.history_hours = history_hours

    def snapshot(self):
        """The cloud now, as the core model."""
        try:
            return snapshot_io.parse(collect.Collector(
                self.conn, history_hours=self.history_hours,
                metrics=self.metrics).collect(), origin='the cloud')
        except (collect.CollectError, snapshot_io.SnapshotError) as exc:
            raise executor.ActionError(str(exc)) from exc

    def live_migrate(self, server_id, host):
        try:
            response = self.conn.compute.post(
                '/servers/%s/action' % server_id,
                json={'os-migrateLive': {'host': host,
                                         'block_migration': 'auto'}},
                microversion=LIVE_MIGRATE_VERSION)
            sdk_exc.raise_from_response(response)
        except ERRORS as exc:
            raise executor.ActionError(
                'Nova refused the live migration: %s' % _why(exc)) from exc

    def server(self, server_id):
        """An executor.ServerView, or None once the server is gone."""
        try:
            server = self.conn.compute.get_server(server_id)
        except sdk_exc.NotFoundException:
            return None
        except ERRORS as exc:
            raise executor.ActionError(_why(exc)) from exc
        return executor.ServerView(
            status=server.status, task_state=server.task_state,
            host=server.compute_host,
            hypervisor=server.hypervisor_hostname)

    def migration(self, server_id, since):
        """The server's newest live migration created at or after since."""
        moment = datetime.datetime.fromtimestamp(
            since - 5, datetime.timezone.utc)  # clocks differ a little
        try:
            response = self.conn.compute.get(
                '/os-migrations', params={
                    'instance_uuid': server_id,
                    'migration_type': 'live-migration',
                    'changes-since': moment.strftime('%Y-%m-%dT%H:%M:%SZ')},
                microversion=MIGRATIONS_VERSION)
            sdk_exc.raise_from_response(response)
        except ERRORS as exc:
            raise executor.ActionError(_why(exc)) from exc
        found = response.json().get('migrations') or []
        if not found:
            return None
        newest = max(found, key=lambda m: (m.get('created_at') or '',
                                           m.get('id') or 0))
        return executor.MigrationView(id=str(newest['id']),
                                      status=newest.get('status') or '')

    def abort(self, server_id, migration_id):
        try:
            response = self.conn.compute.delete(
                '/servers/%s/migrations/%s' % (server_id, migration_id),
                microversion=ABORT_VERSION)
            sdk_exc.raise_from_response(response)
        except ERRORS as exc:
            raise executor.ActionError(_why(exc)) from exc


def _why(exc):
    """Nova's own words, without the URL and request noise."""
    details = getattr(exc, 'details', None)
    return details or str(exc)
