"""The port proxy into a microVM sandbox (docs/vm.md "Port proxy").

The guest has no network device: for each proxied request the relay opens
a stream to the agent (SBX_VMF_CONN_CONNECT), which connects to the guest's
127.0.0.1:PORT and answers; the bytes then travel in the egress streams'
frames. The daemon's side is the namespace engine's, unchanged, so the
outcomes asserted are test_ports.py's: the same server (python3 as the
sandbox's user), the same statuses. One VM for the class.
"""
import hashlib
import os
import threading

import test_ports as tp
from harness import UnixHTTPConnection
from vm_util import OneVMTest

ECHO, V6ONLY = tp.ECHO, tp.V6ONLY


class VMPorts(OneVMTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        tp.start_servers(cls.d, cls.sid, [("echo", ECHO), ("v6only", V6ONLY)])

    def req(self, method, port, rest="/", body=None):
        c = UnixHTTPConnection(self.d.socket_path, timeout=60)
        try:
            c.request(method, "/v1/sandboxes/%s/ports/%s%s" % (self.sid, port, rest), body=body)
            r = c.getresponse()
            return tp.Resp(r.status, r.getheaders(), r.read())
        finally:
            c.close()

    def test_get_reaches_the_guests_server(self):
        r = self.req("GET", ECHO, "/a/b?x=1&y=%20")
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual((j["method"], j["target"]), ("GET", "/a/b?x=1&y=%20"))

    def test_post_body_arrives_intact(self):
        body = os.urandom(3 << 20)
        r = self.req("POST", ECHO, "/up", body=body)
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual((j["length"], j["sha256"]), (len(body), hashlib.sha256(body).hexdigest()))

    def test_big_answer_intact(self):
        n = 5 << 20
        for path in ("/big", "/bigchunked", "/bigclose"):
            r = self.req("GET", ECHO, "%s?n=%d" % (path, n))
            self.assertEqual(r.status, 200, (path, r))
            self.assertEqual(len(r.body), n, path)
            self.assertEqual(hashlib.sha256(r.body).hexdigest(), tp.pattern_digest(n), path)

    def test_server_on_v6_loopback_only(self):
        r = self.req("GET", V6ONLY, "/v6")
        self.assertEqual(r.status, 200, r)

    def test_nothing_listening_is_502_as_in_a_namespace(self):
        for port in ("8199", "65535"):
            r = self.req("GET", port)
            self.assertEqual(r.status, 502, r)
            self.assertEqual(r.json()["error"], "bad_gateway", r)
        self.assertEqual(self.req("GET", "0").status, 400)

    def test_many_requests_at_once(self):
        results = []

        def one(i):
            n = 100000 + i
            r = self.req("GET", ECHO, "/big?n=%d" % n)
            results.append((r.status, len(r.body) == n
                            and hashlib.sha256(r.body).hexdigest() == tp.pattern_digest(n)))

        # Two rounds of 40: more than the 64 streams a VM may hold, so the
        # second passes only if every stream of the first ended.
        for _ in range(2):
            threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        self.assertEqual(sorted(results), [(200, True)] * 80)
        # The VM still serves, and its commands too.
        self.assertEqual(self.req("GET", ECHO).status, 200)
        res = self.d.sh(self.sid, "echo ok", timeout="30s")
        self.assertEqual(res["stdout"], "ok\n", res)
