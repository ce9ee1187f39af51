"""The cloud lock (cloud/cloudlock.py) against a stand-in of Nova's
os-aggregates API that keeps names unique, as Nova's API database does."""

import datetime
import json
import unittest

import requests

from osc_leveller.cloud import cloudlock

T0 = datetime.datetime(2026, 12, 2, 15, 0, tzinfo=datetime.timezone.utc)
MINUTE = datetime.timedelta(minutes=1)


def answer(status, body=None):
    response = requests.Response()
    response.status_code = status
    response._content = json.dumps({} if body is None else body).encode()
    response.headers['Content-Type'] = 'application/json'
    response.url = 'http://127.0.0.1:8774/v2.1/os-aggregates'
    return response


class Aggregates:
    """Nova's aggregates: unique names, metadata, created_at."""

    def __init__(self, clock):
        self.clock = clock
        self.found = {}
        self.next_id = 1

    def post(self, url, **kwargs):
        body = kwargs['json']
        if url == '/os-aggregates':
            name = body['aggregate']['name']
            if any(a['name'] == name for a in self.found.values()):
                return answer(409, {'conflictingRequest': {
                    'message': 'Aggregate %s already exists.' % name}})
            found = self.found[self.next_id] = {
                'id': self.next_id, 'name': name, 'metadata': {},
                'hosts': [], 'created_at': self.clock()[0].strftime(
                    '%Y-%m-%dT%H:%M:%S.000000')}
            self.next_id += 1
            return answer(200, {'aggregate': found})
        found = self.found.get(int(url.split('/')[2]))
        if found is None:
            return answer(404)
        found['metadata'].update(body['set_metadata']['metadata'])
        return answer(200, {'aggregate': found})

    def get(self, url):
        if url == '/os-aggregates':
            return answer(200, {'aggregates': list(self.found.values())})
        found = self.found.get(int(url.split('/')[2]))
        return answer(404) if found is None else answer(
            200, {'aggregate': found})

    def delete(self, url):
        return answer(200) if self.found.pop(int(url.split('/')[2]), None) \
            else answer(404)


class TestCloudLock(unittest.TestCase):

    def setUp(self):
        self.now = [T0]
        self.nova = Aggregates(lambda: self.now)

    def lock(self, holder, seconds=600):
        return cloudlock.CloudLock(self.nova, seconds, holder,
                                   now=lambda: self.now[0])

    def test_one_run_per_interval(self):
        first = self.lock('ctl1')
        first.acquire()
        self.assertEqual(T0 + 10 * MINUTE, first.until)
        # The run ended; another controller's run in the same interval
        # is refused, and says whose lock and until when.
        self.now[0] = T0 + 9 * MINUTE
        with self.assertRaises(cloudlock.Held) as held:
            self.lock('ctl2').acquire()
        self.assertIn('ctl1', str(held.exception))
        self.assertIn('2026-12-02T15:10:00Z', str(held.exception))
        # Once it is over, the next run takes it.
        self.now[0] = T0 + 11 * MINUTE
        second = self.lock('ctl2')
        second.acquire()
        (found,) = self.nova.found.values()
        self.assertEqual('ctl2', found['metadata'][cloudlock.HOLDER])
        self.assertEqual([], found['hosts'])

    def test_kept_while_the_run_moves(self):
        run = self.lock('ctl1')
        run.acquire()
        self.now[0] = T0 + 4 * MINUTE
        run.keep()  # more than half left: nothing asked
        self.assertEqual(T0 + 10 * MINUTE, run.until)
        self.now[0] = T0 + 7 * MINUTE
        run.keep()
        self.assertEqual(T0 + 17 * MINUTE, run.until)
        self.now[0] = T0 + 16 * MINUTE
        with self.assertRaises(cloudlock.Held):
            self.lock('ctl2').acquire()

    def test_a_lost_lock_stops_the_moves(self):
        run = self.lock('ctl1')
        run.acquire()
        self.now[0] = T0 + 12 * MINUTE  # expired: ctl2 takes it
        self.lock('ctl2').acquire()
        with self.assertRaises(cloudlock.Lost):
            run.keep()

    def test_a_holder_that_died_before_recording_its_time(self):
        # Created, no metadata yet: it counts from its creation.
        self.nova.post('/os-aggregates', json={'aggregate': {
            'name': cloudlock.NAME}})
        self.now[0] = T0 + 5 * MINUTE
        with self.assertRaises(cloudlock.Held) as held:
            self.lock('ctl2').acquire()
        self.assertIn('not recorded', str(held.exception))
        self.now[0] = T0 + 11 * MINUTE
        self.lock('ctl2').acquire()

    def test_nova_refusing_is_an_error_not_a_hold(self):
        class Forbidden(Aggregates):
            def post(self, url, **kwargs):
                return answer(403, {'forbidden': {
                    'message': 'Policy doesn\'t allow '
                               'os_compute_api:os-aggregates:create'}})
        self.nova = Forbidden(lambda: self.now)
        with self.assertRaises(cloudlock.LockError) as error:
            self.lock('ctl1').acquire()
        self.assertIn('os-aggregates:create', str(error.exception))

    def test_a_bad_answer_is_an_error(self):
        class Broken(Aggregates):
            def get(self, url):
                return answer(200, {'aggregates': 'none'})
        self.nova = Broken(lambda: self.now)
        self.lock('ctl1').acquire()
        with self.assertRaises(cloudlock.LockError):
            self.lock('ctl2').acquire()
