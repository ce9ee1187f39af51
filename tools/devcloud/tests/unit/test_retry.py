"""devcloud_retry: idempotent requests survive a dropped keep-alive connection.

A small HTTP/1.1 server on 127.0.0.1 answers with keep-alive and, when told
to, resets a connection on the next request that arrives on it (what a
client sees when the server closes an idle connection just as the client
reuses it), or answers 503.
"""

import socket
import struct
import threading
import unittest

import requests
import urllib3

from devcloud import devcloud_retry


class Server(object):
    """Answers 200 (body: the request's method), resets or sends 503 as told."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(8)
        self.url = 'http://127.0.0.1:%d/' % self.sock.getsockname()[1]
        self.seen = []          # methods of the requests received
        self.plan = []          # 'reset' or 503 for the next requests
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        reader = conn.makefile('rb')
        with conn, reader:
            while True:
                line = reader.readline()
                if not line:
                    return
                method = line.split()[0].decode()
                length = 0
                while True:
                    header = reader.readline()
                    if header in (b'\r\n', b'\n', b''):
                        break
                    name, _, value = header.decode().partition(':')
                    if name.strip().lower() == 'content-length':
                        length = int(value)
                reader.read(length)
                with self.lock:
                    self.seen.append(method)
                    what = self.plan.pop(0) if self.plan else 200
                if what == 'reset':
                    # close with RST: the client reads ConnectionResetError
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack('ii', 1, 0))
                    return
                body = method.encode()
                conn.sendall(b'HTTP/1.1 %d X\r\nContent-Length: %d\r\n'
                             b'Connection: keep-alive\r\n\r\n%s' % (
                                 what, len(body), b'' if method == 'HEAD' else body))

    def close(self):
        self.sock.close()


class RetryTest(unittest.TestCase):

    def setUp(self):
        self.server = Server()
        self.addCleanup(self.server.close)
        self.http = devcloud_retry.mount(requests.Session())
        self.addCleanup(self.http.close)

    def test_idempotent_methods_are_sent_again_after_a_reset(self):
        for method in ('GET', 'PUT', 'DELETE', 'HEAD'):
            with self.subTest(method=method):
                del self.server.seen[:]
                self.assertEqual(200, self.http.request(method, self.server.url).status_code)
                self.server.plan.append('reset')   # on the pooled connection
                response = self.http.request(method, self.server.url, data=b'x')
                self.assertEqual(200, response.status_code)
                self.assertEqual([method] * 3, self.server.seen)

    def test_a_post_is_not_sent_again(self):
        self.assertEqual(200, self.http.post(self.server.url).status_code)
        self.server.plan.append('reset')
        with self.assertRaises(requests.ConnectionError):
            self.http.post(self.server.url, data=b'{"server": {}}')
        self.assertEqual(['POST', 'POST'], self.server.seen)

    def test_503_retried_for_a_get_only(self):
        self.server.plan.append(503)
        self.assertEqual(200, self.http.get(self.server.url).status_code)
        self.assertEqual(['GET', 'GET'], self.server.seen)
        del self.server.seen[:]
        self.server.plan.append(503)
        self.assertEqual(503, self.http.post(self.server.url).status_code)
        self.assertEqual(['POST'], self.server.seen)

    def test_gives_up_after_the_retries(self):
        adapter = self.http.get_adapter(self.server.url)
        adapter.max_retries = adapter.max_retries.new(backoff_factor=0)  # no 3 s
        self.server.plan.extend([503] * (devcloud_retry.RETRIES + 1))
        # the last 503 goes to the caller (the SDK raises its own error)
        self.assertEqual(503, self.http.get(self.server.url).status_code)
        self.assertEqual(devcloud_retry.RETRIES + 1, len(self.server.seen))

    def test_policy(self):
        retry = devcloud_retry.idempotent_retry()
        url = self.server.url
        reset = urllib3.exceptions.ProtocolError(
            'Connection aborted.', ConnectionResetError(104, 'reset'))
        refused = urllib3.exceptions.NewConnectionError(None, 'refused')
        for method in devcloud_retry.IDEMPOTENT:
            self.assertEqual(2, retry.increment(method, url, error=reset).read)
            self.assertTrue(retry.is_retry(method, 503))
        # a POST may have been acted upon: not again, unless it was never
        # sent (no connection)
        with self.assertRaises(urllib3.exceptions.ProtocolError):
            retry.increment('POST', url, error=reset)
        self.assertFalse(retry.is_retry('POST', 503))
        self.assertEqual(2, retry.increment('POST', url, error=refused).connect)


if __name__ == '__main__':
    unittest.main()
