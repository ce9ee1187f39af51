"""The cloud lock: when the same apply job runs on several controllers, one
of them acts per interval.

The lock is a Nova host aggregate without hosts (so it changes no
scheduling), named NAME. Nova keeps aggregate names unique in its API
database, so of two controllers creating it at the same moment one gets
it and the other a conflict. Its metadata says who holds it and until
when; a run keeps it while it moves servers and leaves it to expire, so
the next controller's run in the same interval is refused. An admin
creates aggregates: the leveller's credentials can already. Clocks are
compared across controllers: keep them in time (NTP), as Keystone's
tokens need anyway.
"""

import datetime

from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc

NAME = 'osc-leveller-apply-lock'
HOLDER, UNTIL = 'osc_leveller_holder', 'osc_leveller_until'
TIME = '%Y-%m-%dT%H:%M:%SZ'  # UNTIL's, in UTC
UTC = datetime.timezone.utc
ERRORS = (sdk_exc.SDKException, ksa_exc.ClientException)


class Held(Exception):
    """Another run holds the lock; the message says whose, until when."""


class Lost(Exception):
    """The lock this run held is gone, or another run's now."""


class LockError(Exception):
    """Nova did not answer as the lock needs; the message says what."""


class CloudLock:
    def __init__(self, compute, seconds, holder, now=None):
        self.compute = compute  # the connection's compute proxy
        self.seconds = seconds
        self.holder = holder
        self.now = now or (lambda: datetime.datetime.now(UTC))
        self.id = None
        self.until = None

    def acquire(self):
        """Take the lock, or Held; a lock left past its time (a run that
        died) is removed first. Two tries: the second one follows such a
        removal or a lock removed while it was read."""
        for _ in range(2):
            found = self._create()
            if found is not None:
                self.id = found['id']
                self._keep_until(self.now() + self._length())
                return
            held = self._find()
            if held is None:
                continue
            until = _until(held, self._length())
            if until is not None and until > self.now():
                raise Held('another controller\'s run holds the cloud lock '
                           '(Nova aggregate %s) until %s: %s' % (
                               NAME, text(until),
                               held.get('metadata', {}).get(HOLDER) or
                               'its holder is not recorded yet'))
            self._delete(held['id'])
        raise Held('the cloud lock (Nova aggregate %s) changed hands while '
                   'this run took it: another controller starts now' % NAME)

    def keep(self):
        """Before each move: the lock kept for a whole interval more once
        half of it is gone; Lost if it is no longer this run's."""
        if self.id is None:
            return
        now = self.now()
        if now + self._length() / 2 < self.until:
            return
        found = self._get(self.id)
        if found is None or found.get('metadata', {}).get(HOLDER) != \
                self.holder:
            raise Lost('this run no longer holds the cloud lock (Nova '
                       'aggregate %s): another controller may act; no '
                       'further move starts' % NAME)
        self._keep_until(now + self._length())

    def _length(self):
        return datetime.timedelta(seconds=self.seconds)

    # Nova's os-aggregates API.

    def _create(self):
        """The aggregate created, or None when it exists (409; some Nova
        versions answer a race on the unique name with 500)."""
        try:
            response = self.compute.post('/os-aggregates', json={
                'aggregate': {'name': NAME}})
            sdk_exc.raise_from_response(response)
        except sdk_exc.HttpException as exc:
            if exc.status_code in (409, 500):
                return None
            raise LockError('cannot create the cloud lock (Nova aggregate '
                            '%s): %s' % (NAME, _why(exc))) from exc
        except ERRORS as exc:
            raise LockError('cannot create the cloud lock (Nova aggregate '
                            '%s): %s' % (NAME, _why(exc))) from exc
        return _aggregate(response)

    def _find(self):
        try:
            response = self.compute.get('/os-aggregates')
            sdk_exc.raise_from_response(response)
            aggregates = response.json().get('aggregates')
        except (ERRORS + (ValueError, AttributeError)) as exc:
            raise LockError('cannot read the cloud lock (Nova GET '
                            '/os-aggregates): %s' % _why(exc)) from exc
        if not isinstance(aggregates, list):
            raise LockError('Nova GET /os-aggregates: no list of aggregates')
        for found in aggregates:
            if isinstance(found, dict) and found.get('name') == NAME:
                return _checked(found)
        return None

    def _get(self, aggregate_id):
        try:
            response = self.compute.get('/os-aggregates/%s' % aggregate_id)
            if response.status_code == 404:
                return None
            sdk_exc.raise_from_response(response)
        except ERRORS as exc:
            raise LockError('cannot read the cloud lock (Nova aggregate '
                            '%s): %s' % (NAME, _why(exc))) from exc
        return _aggregate(response)

    def _delete(self, aggregate_id):
        try:
            response = self.compute.delete('/os-aggregates/%s' % aggregate_id)
            if response.status_code != 404:
                sdk_exc.raise_from_response(response)
        except ERRORS as exc:
            raise LockError('cannot remove the expired cloud lock (Nova '
                            'aggregate %s): %s' % (NAME, _why(exc))) from exc

    def _keep_until(self, until):
        try:
            response = self.compute.post(
                '/os-aggregates/%s/action' % self.id, json={'set_metadata': {
                    'metadata': {HOLDER: self.holder, UNTIL: text(until)}}})
            sdk_exc.raise_from_response(response)
        except ERRORS as exc:
            raise LockError('cannot keep the cloud lock (Nova aggregate '
                            '%s): %s' % (NAME, _why(exc))) from exc
        self.until = until


def _aggregate(response):
    try:
        found = response.json().get('aggregate')
    except (ValueError, AttributeError) as exc:
        raise LockError('Nova answered no aggregate for the cloud lock') \
            from exc
    return _checked(found)


def _checked(found):
    if not isinstance(found, dict) or not isinstance(
            found.get('id'), int) or not isinstance(
            found.get('metadata') or {}, dict):
        raise LockError('Nova answered an aggregate without an id or with '
                        'bad metadata for the cloud lock %s' % NAME)
    return found


def _until(aggregate, length):
    """When the lock ends: its recorded time, else (its holder died before
    recording it) its creation plus one interval; None if unreadable."""
    recorded = (aggregate.get('metadata') or {}).get(UNTIL)
    if isinstance(recorded, str):
        try:
            return datetime.datetime.strptime(recorded, TIME).replace(
                tzinfo=UTC)
        except ValueError:
            return None
    created = aggregate.get('created_at')
    if isinstance(created, str):
        try:
            return datetime.datetime.fromisoformat(created[:19]).replace(
                tzinfo=UTC) + length
        except ValueError:
            return None
    return None


def text(when):
    """A time as the lock records it."""
    return when.astimezone(UTC).strftime(TIME)


def _why(exc):
    return getattr(exc, 'details', None) or str(exc) or type(exc).__name__
