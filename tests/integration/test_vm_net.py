"""Egress from a microVM sandbox (docs/vm.md "Egress", docs/egress.md).

The guest has no network device: its agent listens on the guest's own
127.0.0.1:3128 and streams each connection over virtio-serial to the relay,
which hands it to the daemon's egress proxy like a namespace init's accepted
connection. One VM for the class; the upstreams are HTTP and echo servers
on the host's loopback, which the proxy may reach only with
--egress-allow-private (tests only).
"""
import hashlib
import http.server
import json
import os
import socketserver
import threading
import time

from harness import DaemonTest
from vm_util import OneVMTest


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/big/"):
            body = big_body(int(self.path.split("/")[2]))
        else:
            body = ("hello from the host: %s" % self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def big_body(n):
    block = hashlib.sha256(b"sbx").digest() * 2048  # 64 KiB
    return (block * (n // len(block) + 1))[:n]


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)


class ThreadingTCP(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class VMNet(OneVMTest):
    extra_args = ("--egress-allow-private",)
    vm_body = dict(OneVMTest.vm_body, network={"allow": ["127.0.0.1"]})

    @classmethod
    def setUpClass(cls):
        cls.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        cls.http.daemon_threads = True
        cls.echo = ThreadingTCP(("127.0.0.1", 0), Echo)
        for s in (cls.http, cls.echo):
            threading.Thread(target=s.serve_forever, daemon=True).start()
            # Gone after the daemon, and even when the setup fails.
            cls.addClassCleanup(s.server_close)
            cls.addClassCleanup(s.shutdown)
        cls.port = cls.http.server_address[1]
        cls.echo_port = cls.echo.server_address[1]
        super().setUpClass()

    def sh(self, cmd, **kw):
        kw.setdefault("timeout", "60s")
        return self.d.sh(self.sid, cmd, **kw)

    def put_network(self, body):
        return self.d.api("PUT", "/v1/sandboxes/%s/network" % self.sid, body)

    def proxy_get(self, host, port, path):
        """A GET through the proxy with busybox nc (raw bytes, no client
        logic): what the proxy answered, head and body."""
        req = "GET http://%s:%d%s HTTP/1.1\\r\\nHost: %s:%d\\r\\n\\r\\n" % (host, port, path,
                                                                        host, port)
        res = self.sh("printf '%s' | nc 127.0.0.1 3128" % req)
        self.assertEqual(res["exit_code"], 0, res)
        return res["stdout"]

    def test_a_environment_names_the_proxy(self):
        env = dict(l.split("=", 1) for l in self.sh("env")["stdout"].splitlines() if "=" in l)
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            self.assertEqual(env.get(k), "http://127.0.0.1:3128", k)
        self.assertEqual(env.get("NO_PROXY"), "localhost,127.0.0.1,::1")

    def test_allowed_fetch_with_wget_and_nc(self):
        # busybox wget follows http_proxy: the request leaves the guest only
        # through the relay.
        res = self.sh("busybox wget -q -O - http://127.0.0.1:%d/from-wget" % self.port)
        self.assertEqual((res["exit_code"], res["stdout"]),
                         (0, "hello from the host: /from-wget"), res)
        out = self.proxy_get("127.0.0.1", self.port, "/from-nc")
        self.assertTrue(out.startswith("HTTP/1.1 200"), out)
        self.assertTrue(out.endswith("\r\n\r\nhello from the host: /from-nc"), out)

    def test_denied_host_gets_the_proxys_403(self):
        out = self.proxy_get("127.0.0.2", self.port, "/x")
        self.assertTrue(out.startswith("HTTP/1.1 403"), out)
        self.assertIn("sbx: egress to 127.0.0.2:%d is not allowed by this sandbox's policy"
                      % self.port, out)

    def test_audit_records_the_vms_connections(self):
        self.proxy_get("127.0.0.1", self.port, "/audited")
        self.proxy_get("127.0.0.2", self.port, "/refused")
        want = {("127.0.0.1", "allow"), ("127.0.0.2", "deny")}
        seen = set()
        for _ in range(100):
            with open(os.path.join(self.d.state, "audit", "audit.log")) as f:
                for line in f:
                    r = json.loads(line)
                    if r.get("kind") == "egress" and r.get("sandbox") == self.sid \
                            and r.get("port") == self.port:
                        seen.add((r["host"], r["decision"]))
            if want <= seen:
                break
            time.sleep(0.1)
        self.assertLessEqual(want, seen)

    def test_big_download_and_upload_intact(self):
        n = 3 * 1024 * 1024
        res = self.sh("busybox wget -q -O - http://127.0.0.1:%d/big/%d | sha256sum"
                      % (self.port, n))
        self.assertEqual(res["stdout"].split()[0], hashlib.sha256(big_body(n)).hexdigest(), res)
        # Both directions at once through a CONNECT tunnel to the echo
        # server: 2 MiB up, the same 2 MiB back (the windows, both ways).
        res = self.sh("{ printf 'CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n'; "
                      "seq 1 300000; } | nc 127.0.0.1 3128 | tail -n +3 | sha256sum; "
                      "seq 1 300000 | sha256sum" % self.echo_port)
        got, want = res["stdout"].split()[0::2]
        self.assertEqual(got, want, res)

    def test_stuck_stream_does_not_hold_up_commands(self):
        # A client that never reads: its echo fills the window and stops;
        # the port keeps carrying other commands' output and other streams.
        base = "/v1/sandboxes/" + self.sid
        r = self.d.api("POST", base + "/processes",
                       {"cmd": "{ printf 'CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n'; yes; } "
                               "| nc 127.0.0.1 3128 | sleep 600" % self.echo_port})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        try:
            time.sleep(2)
            res = self.sh("seq 1 100000 | wc -l")
            self.assertEqual(res["stdout"].strip(), "100000")
            out = self.proxy_get("127.0.0.1", self.port, "/while-stuck")
            self.assertTrue(out.endswith("hello from the host: /while-stuck"), out)
        finally:
            self.d.api("POST", "%s/processes/%d/signal" % (base, pid), {"signal": "SIGKILL"})
            self.sh("kill -9 $(pidof yes nc sleep) 2>/dev/null; true")

    def test_policy_change_applies_to_the_next_connection(self):
        r = self.put_network({"allow": ["127.0.0.2"]})
        self.assertEqual(r.status, 200, r)
        try:
            out = self.proxy_get("127.0.0.1", self.port, "/x")
            self.assertTrue(out.startswith("HTTP/1.1 403"), out)
            # No policy at all: nothing connects, commands get no proxy.
            r = self.put_network({"allow": [], "deny": []})
            self.assertEqual(r.status, 200, r)
            self.assertIn(r.json().get("network"), (None, {"allow": [], "deny": []}))
            # The proxy address goes nowhere (issue 16: not even to the
            # egress process): the connection ends unanswered.
            req = "GET http://127.0.0.1:%d/x HTTP/1.1\\r\\n\\r\\n" % self.port
            res = self.sh("printf '%s' | nc 127.0.0.1 3128" % req)
            self.assertEqual(res["stdout"], "", res)
            self.assertNotIn("proxy", self.sh("env")["stdout"].lower())
            # Straight to the server's address: the guest's own lo. (busybox
            # wget crashes on a refused connect, on the host too: nc.)
            res = self.sh("echo x | nc 127.0.0.1 %d 2>&1" % self.port)
            self.assertEqual(res["exit_code"], 1, res)
            self.assertIn("can't connect to remote host (127.0.0.1): Connection refused",
                          res["stdout"], res)
        finally:
            r = self.put_network({"allow": ["127.0.0.1"]})
            self.assertEqual(r.status, 200, r)
        out = self.proxy_get("127.0.0.1", self.port, "/again")
        self.assertTrue(out.endswith("hello from the host: /again"), out)

    def test_guest_loopback_is_its_own(self):
        # The host's servers are on the host's 127.0.0.1: from the guest
        # that address is the guest's own lo, where nothing listens.
        self.assertEqual(self.sh("ls /sys/class/net")["stdout"].split(), ["lo"])
        for port in (self.port, self.echo_port):
            res = self.sh("echo hi | nc 127.0.0.1 %d; echo rc=$?" % port)
            self.assertIn("rc=1", res["stdout"], res)
            self.assertIn("Connection refused", res["stderr"], res)
        # No route anywhere else: only lo's 127.0.0.0/8.
        self.assertEqual(self.sh("tail -n +2 /proc/net/route")["stdout"], "")

    def test_restored_copy_has_egress_and_no_old_streams(self):
        # A stream open during the save belongs to the source: in the copy
        # the agent ends it when the new relay says PING; new ones work.
        base = "/v1/sandboxes/" + self.sid
        r = self.d.api("POST", base + "/processes",
                       {"cmd": "{ printf 'CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n'; "
                               "sleep 600; } | nc 127.0.0.1 3128 > /tmp/held" % self.echo_port})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        copy = None
        try:
            time.sleep(1)
            r = self.d.api("POST", base + "/snapshots", {"name": "net1"})
            self.assertEqual(r.status, 201, r)
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "net1", "timeout": "5m",
                                                    "network": {"allow": ["127.0.0.1"]}})
            self.assertEqual(r.status, 201, r)
            copy = r.json()["id"]
            req = "GET http://127.0.0.1:%d/in-copy HTTP/1.1\\r\\n\\r\\n" % self.port
            res = self.d.sh(copy, "printf '%s' | nc 127.0.0.1 3128" % req, timeout="60s")
            self.assertTrue(res["stdout"].endswith("hello from the host: /in-copy"), res)
            # The held connection's client (it runs on in the copy) saw its
            # stream end when the agent answered the new relay's PING.
            res = self.d.sh(copy, "for i in $(seq 100); do pidof nc >/dev/null || "
                                  "{ echo gone; exit 0; }; sleep 0.1; done; echo held",
                            timeout="60s")
            self.assertEqual(res["stdout"], "gone\n", res)
            # The source's held stream still works in the source.
            out = self.proxy_get("127.0.0.1", self.port, "/in-source")
            self.assertTrue(out.endswith("hello from the host: /in-source"), out)
        finally:
            self.d.api("POST", "%s/processes/%d/signal" % (base, pid), {"signal": "SIGKILL"})
            self.sh("kill -9 $(pidof nc sleep) 2>/dev/null; true")
            if copy:
                self.d.api("DELETE", "/v1/sandboxes/" + copy)
            self.d.api("DELETE", "/v1/snapshots/net1")

    def test_many_connections_at_once(self):
        # 80 clients at once, over the 64 streams: the rest wait in the
        # guest's backlog and all get their answer.
        script = ("for i in $(seq 1 80); do "
                  "( printf 'GET http://127.0.0.1:%d/n$i HTTP/1.1\\r\\n\\r\\n' "
                  "| nc 127.0.0.1 3128 | tail -c 30; echo ) > /tmp/c$i & done; wait; "
                  "cat /tmp/c* | grep -c 'hello from the host: /n'; "
                  "for f in /tmp/c*; do grep -q hello $f || { echo $f; cat $f; }; done" % self.port)
        res = self.sh(script, timeout="120s")
        self.assertEqual(res["stdout"].split("\n")[0], "80", res)


class VMNetHostileGuest(DaemonTest):
    """The guest's root (`"user": "root"`, root in the guest only) cannot
    write into the virtio-serial port beside the agent: the port opens once
    (virtio_console), and the agent holds it."""
    pool = 0

    def test_guest_root_cannot_open_the_port(self):
        r = self.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                 "disk": "64M", "timeout": "5m"})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        # A CONN_DATA (33) of 1 byte for stream 999, which no OPEN named.
        frame = "\\041\\000\\000\\000\\001\\000\\000\\000\\347\\003\\000\\000\\000\\000\\000\\000x"
        cmd = ("for d in /sys/class/virtio-ports/*; do "
               "[ \"$(cat $d/name)\" = sbx ] && printf '%s' > /dev/${d##*/}; done; echo rc=$?"
               % frame)
        res = self.d.exec(sid, cmd=cmd, user="root", timeout="60s")
        # The guest's /dev is the minimal read-only one: the port has no
        # node there, and none can be made (no capability, read-only).
        self.assertIn("Read-only file system", res["stderr"], res)
        self.assertEqual(res["stdout"], "rc=1\n", res)
        self.assertEqual(self.d.sh(sid, "echo alive")["stdout"], "alive\n")
        self.d.api("DELETE", "/v1/sandboxes/" + sid)
