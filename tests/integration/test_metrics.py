"""GET /metrics: the daemon's counters in Prometheus' text format, valid by
promtool (Debian's, unpacked by scripts/install-deps.sh), moving with what
the daemon does, its labels bounded (never a sandbox id), the operator's
only (the unix socket; a tenant's key over TCP gets 403)."""
import os
import re
import shutil
import socket
import subprocess
import threading
import unittest

from harness import DaemonTest
from sbx_helpers import wait_until

PROMTOOL = shutil.which("promtool") or "/usr/local/lib/sbx/promtool"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')

# Through the sandbox's egress proxy to the test's server on 127.0.0.2:
# bytes both ways, then the end of the connection (when it is reported).
ALLOWED_CONNECT = r'''
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(b"CONNECT 127.0.0.2:%s HTTP/1.1\r\n\r\n" % sys.argv[1].encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
s.sendall(b"x" * 1000)
got = b""
while len(got) < 1000:
    got += s.recv(1000)
s.close()
print(head.split(b"\r\n")[0].decode(), len(got))
'''

DENIED_CONNECT = r'''
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(b"CONNECT 192.0.2.7:443 HTTP/1.1\r\n\r\n")
print(s.recv(200).split(b"\r\n")[0].decode())
'''


def parse(text):
    """{(name, labels): value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


class Metrics(DaemonTest):
    listen = True
    pool = 1
    # The egress test's server is on the host's loopback (127.0.0.2).
    extra_args = ("--metrics-interval", "1s", "--egress-allow-private")

    def scrape(self):
        r = self.d.api("GET", "/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        return r.body.decode()

    def value(self, name, labels=""):
        return parse(self.scrape()).get((name, labels))

    def test_valid_for_promtool(self):
        if not os.access(PROMTOOL, os.X_OK):
            self.skipTest("no promtool (scripts/install-deps.sh unpacks it)")
        sid = self.d.create()
        self.d.sh(sid, "true")
        text = self.scrape()
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # Every family has its HELP and TYPE; bounded labels only.
        families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
        for name, _ in parse(text):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            self.assertTrue(name in families or base in families, name)
        self.assertNotIn(sid, text)
        for must in ("sbx_sandboxes", "sbx_sandbox_creates_total", "sbx_sandbox_ends_total",
                     "sbx_sandbox_create_duration_seconds", "sbx_exec_start_duration_seconds",
                     "sbx_pool_sandboxes", "sbx_egress_connections_total",
                     "sbx_audit_records_total", "sbx_tenant_cpu_seconds_total",
                     "process_resident_memory_bytes", "process_open_fds", "process_threads"):
            self.assertIn(must, families)
        self.d.kill(sid)

    def test_counters_follow_the_daemon(self):
        running = '{state="running",isolation="namespace",template="base"}'
        paused = '{state="paused",isolation="namespace",template="base"}'
        before = parse(self.scrape())
        sid = self.d.create()
        self.d.sh(sid, "true")
        after = parse(self.scrape())
        self.assertEqual(after[("sbx_sandbox_creates_total", '{isolation="namespace"}')],
                         before[("sbx_sandbox_creates_total", '{isolation="namespace"}')] + 1)
        self.assertEqual(after[("sbx_sandboxes", running)], before[("sbx_sandboxes", running)] + 1)
        self.assertGreater(after[("sbx_exec_start_duration_seconds_count", "")],
                           before[("sbx_exec_start_duration_seconds_count", "")])
        self.assertEqual(after[("sbx_sandbox_create_duration_seconds_count", "")],
                         before[("sbx_sandbox_create_duration_seconds_count", "")] + 1)
        # A bad create is counted by its reason, and made nothing.
        self.assertEqual(self.d.api("POST", "/v1/sandboxes", {"memory": "1"}).status, 400)
        self.assertEqual(self.value("sbx_sandbox_create_failures_total", '{reason="invalid"}'),
                         before[("sbx_sandbox_create_failures_total", '{reason="invalid"}')] + 1)
        # Paused, then killed by the API.
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {}).status, 200)
        self.assertEqual(self.value("sbx_sandboxes", paused), before[("sbx_sandboxes", paused)] + 1)
        self.assertEqual(self.d.kill(sid).status, 204)
        now = parse(self.scrape())
        self.assertEqual(now[("sbx_sandbox_ends_total", '{reason="api"}')],
                         before[("sbx_sandbox_ends_total", '{reason="api"}')] + 1)
        self.assertEqual(now[("sbx_sandboxes", paused)], before[("sbx_sandboxes", paused)])
        # The audit log's records are counted as they are written.
        self.assertGreater(now[("sbx_audit_records_total", "")],
                           before[("sbx_audit_records_total", "")])

    def test_lifetime_end_and_tenant_usage(self):
        key = self.d.new_key("metrics-tenant")
        r = self.d.tcp("POST", "/v1/sandboxes", {"timeout": 3}, key=key)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        self.d.tcp("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"argv": ["timeout", "1", "sh", "-c", "while :; do :; done"]}, key=key)
        before = self.value("sbx_sandbox_ends_total", '{reason="timeout"}')
        wait_until(lambda: self.value("sbx_sandbox_ends_total", '{reason="timeout"}') > before,
                   what="its lifetime to end")
        got = parse(self.scrape())
        self.assertGreater(got[("sbx_tenant_cpu_seconds_total", '{tenant="metrics-tenant"}')], 0)
        self.assertGreater(
            got[("sbx_tenant_memory_byte_seconds_total", '{tenant="metrics-tenant"}')], 0)

    def test_egress_denials_are_counted(self):
        before = self.value("sbx_egress_connections_total", '{decision="deny"}')
        sid = self.d.create(network={"allow": ["example.com"]})
        out = self.d.exec(sid, argv=["python3", "-c", DENIED_CONNECT])
        self.assertIn("403", out["stdout"], out)
        wait_until(lambda: self.value("sbx_egress_connections_total", '{decision="deny"}')
                   == before + 1, what="the denial to be counted")
        self.d.kill(sid)

    def test_egress_bytes_are_counted_and_the_daemon_goes_on(self):
        """An allowed connection that moves bytes is counted (the report
        comes in on the event loop, which holds the core's lock: the
        counter must not take it again)."""
        srv = socket.socket()
        srv.bind(("127.0.0.2", 0))
        srv.listen(1)
        port = srv.getsockname()[1]

        def echo():
            c, _ = srv.accept()
            data = b""
            while len(data) < 1000:
                data += c.recv(1000)
            c.sendall(data)
            c.close()

        t = threading.Thread(target=echo, daemon=True)
        t.start()
        key = self.d.new_key("egress-tenant")
        r = self.d.tcp("POST", "/v1/sandboxes", {"network": {"allow": ["127.0.0.2"]}}, key=key)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        before = parse(self.scrape())
        out = self.d.exec(sid, argv=["python3", "-c", ALLOWED_CONNECT, str(port)])
        self.assertIn("200", out["stdout"], out)
        self.assertIn(" 1000", out["stdout"], out)
        t.join(30)
        srv.close()
        wait_until(lambda: self.value("sbx_egress_bytes_total", '{direction="out"}')
                   >= before[("sbx_egress_bytes_total", '{direction="out"}')] + 1000,
                   what="the connection's bytes to be counted")
        got = parse(self.scrape())
        self.assertGreaterEqual(got[("sbx_egress_bytes_total", '{direction="in"}')],
                                before[("sbx_egress_bytes_total", '{direction="in"}')] + 1000)
        self.assertGreaterEqual(got[("sbx_tenant_egress_bytes_total", '{tenant="egress-tenant"}')],
                                2000)
        self.assertEqual(self.d.sh(sid, "echo alive")["stdout"], "alive\n")
        self.d.kill(sid)

    def test_the_operators_only(self):
        key = self.d.new_key("not-the-operator")
        r = self.d.tcp("GET", "/metrics", key=key)
        self.assertEqual(r.status, 403, r)
        self.assertNotIn(b"sbx_sandboxes", r.body)
        r = self.d.tcp("GET", "/metrics")
        self.assertIn(r.status, (401, 403), r)


if __name__ == "__main__":
    unittest.main()
