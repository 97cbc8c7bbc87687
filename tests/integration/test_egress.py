"""Egress: the per-sandbox policy and the proxy outside the sandbox.

A sandbox's network namespace has only loopback; its init listens on
127.0.0.1:3128 there and hands every connection to the egress process
(`sbxd --egress`), which decides by the sandbox's policy, resolves, refuses
non-public addresses after resolution, connects and relays. Upstream
servers here run on the host's 127.0.0.1 and 127.0.0.2, so the daemons
that must reach them run with --egress-allow-private; one daemon runs
without it and must refuse them. Checked:

- allowed hosts pass (bytes intact, 16 MB), others get 403 with a reason,
  deny wins over allow, `*` allows, none refuses (and without the proxy
  nothing is reachable: the host's 127.0.0.1 is not the sandbox's);
- CONNECT relays bytes; IP literals and CIDR ranges; a 302 to a denied
  host is handed to the client, whose next request is refused;
- private, loopback and metadata destinations are refused without the
  test option (names too: checked after resolution);
- a policy change applies to the next connection; limits on connections
  and bytes; malformed requests get 400 and nothing else breaks;
- the API (native, CLI, E2B) validates policies and shows them;
- the egress process is confined (uid, no capabilities, NNP, seccomp).
"""
import concurrent.futures
import errno
import hashlib
import http.server
import json
import os
import shutil
import socket
import socketserver
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

from harness import SLOW, Daemon, DaemonTest, free_port
from sbx_helpers import children_of, wait_until
from test_restart import RestartTest

ASAN_SUBSET = True

# Runs inside the sandbox: speaks to the proxy with raw sockets, so the test
# sees exactly what the proxy said (no client following redirects or
# retrying). Prints one JSON line.
CLIENT = r'''
import hashlib, json, os, socket, sys, time

def talk(raw, connect_payload=None, read_limit=1 << 26):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(raw)
    data = b""
    if connect_payload is not None:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        out = {"head": head.decode("latin-1")}
        if head.startswith(b"HTTP/1.1 200"):
            s.sendall(connect_payload)
            got = rest
            while len(got) < len(connect_payload):
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            out["echo"] = got.decode("latin-1")
        else:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
            out["body"] = rest.decode("latin-1")
        return out
    while len(data) < read_limit:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return {"head": head.decode("latin-1"), "len": len(body),
            "sha": hashlib.sha256(body).hexdigest(),
            "body": body[:2000].decode("latin-1")}

def tunnels(target, n, timeout):
    """n tunnels to target, one after the other: the sockets, and the first
    line of what each was answered."""
    socks, heads = [], []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", 3128), timeout=timeout)
        s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % target).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        heads.append(data.split(b"\r\n")[0].decode())
        socks.append(s)
    return socks, heads

mode = sys.argv[1]
if mode == "get":
    url, host = sys.argv[2], sys.argv[3]
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic c2VjcmV0\r\n"
           "Proxy-Connection: keep-alive\r\nX-Test: yes\r\n\r\n" % (url, host)).encode()
    print(json.dumps(talk(req)))
elif mode == "raw":
    print(json.dumps(talk(bytes.fromhex(sys.argv[2]))))
elif mode == "connect":
    target, payload = sys.argv[2], sys.argv[3].encode()
    req = ("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode()
    print(json.dumps(talk(req, connect_payload=payload)))
elif mode == "hold":
    # Open n tunnels to target and keep them; report what each got.
    socks, heads = tunnels(sys.argv[2], int(sys.argv[3]), 30)
    print(json.dumps(heads))
elif mode == "keep":
    # Like hold, but in the background: the heads go to a file (written
    # whole, then renamed) and the tunnels stay open until killed.
    out = sys.argv[4]
    socks, heads = tunnels(sys.argv[2], int(sys.argv[3]), 120)
    with open(out + ".tmp", "w") as f:
        json.dump(heads, f)
    os.rename(out + ".tmp", out)
    time.sleep(3600)
elif mode == "silent":
    # n connections that never send a request; what each is answered, in
    # order (one the proxy admitted waits for its head timeout: 408).
    n = int(sys.argv[2])
    socks = [socket.create_connection(("127.0.0.1", 3128), timeout=120) for _ in range(n)]
    out = []
    for s in socks:
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        out.append({"status": head.split(b"\r\n")[0].decode(), "body": body.decode()})
    print(json.dumps(out))
elif mode == "direct":
    host, port = sys.argv[2], int(sys.argv[3])
    try:
        socket.create_connection((host, port), timeout=5).close()
        print(json.dumps({"connected": True}))
    except OSError as e:
        print(json.dumps({"connected": False, "errno": e.errno}))
elif mode == "proxy":
    # The proxy address of a sandbox without egress: what comes back? (The
    # reset may come before connect() returns: it then fails connect.)
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
        s.sendall(b"GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = s.recv(4096)
        print(json.dumps({"got": got.decode("latin-1"), "errno": None}))
    except OSError as e:
        print(json.dumps({"got": None, "errno": e.errno}))
'''


# A tunnel that goes quiet: when does the proxy close it?
IDLE_CLIENT = r'''
import json, socket, time
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n")
data = b""
while b"\r\n\r\n" not in data:
    data += s.recv(4096)
s.sendall(b"ping")
echo = s.recv(4096)
t = time.monotonic()
rest = s.recv(4096)
print(json.dumps({"echo": echo.decode(), "rest": rest.decode(), "closed_after": time.monotonic() - t}))
'''


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/big/"):
            n = int(self.path.split("/")[2])
            body = big_body(n)
        elif self.path.startswith("/redirect/"):
            to = self.path[len("/redirect/"):]
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
            body = json.dumps({"path": self.path, "headers": dict(self.headers),
                               "server": self.server.server_address[0]}).encode()
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


def start_servers():
    servers = {}
    for addr in ("127.0.0.1", "127.0.0.2"):
        s = http.server.ThreadingHTTPServer((addr, 0), Upstream)
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers[addr] = s
    echo = ThreadingTCP(("127.0.0.1", 0), Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    servers["echo"] = echo
    return servers


class EgressBase(DaemonTest):
    pool = 1
    listen = True
    extra_args = ("--egress-allow-private",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.servers = start_servers()
        cls.port1 = cls.servers["127.0.0.1"].server_address[1]
        cls.port2 = cls.servers["127.0.0.2"].server_address[1]
        cls.echo_port = cls.servers["echo"].server_address[1]

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers.values():
            s.shutdown()
            s.server_close()
        super().tearDownClass()

    def box(self, allow=None, deny=None):
        body = {}
        if allow is not None or deny is not None:
            body["network"] = {"allow": allow or [], "deny": deny or []}
        sid = self.d.create(**body)
        r = self.d.upload(sid, "/tmp/client.py", CLIENT.encode())
        self.assertEqual(r.status, 201, r)
        return sid

    def client(self, sid, *args):
        # A bound, not a timing: 16 MB through the proxy took 52-60 s in
        # an emulated 6.1 guest.
        r = self.d.exec(sid, argv=["python3", "/tmp/client.py"] + list(args),
                        timeout="%ds" % (60 * SLOW))
        self.assertEqual(r["exit_code"], 0, r)
        return json.loads(r["stdout"])

    def get(self, sid, host, port, path="/echo"):
        hostport = "%s:%d" % (host, port)
        return self.client(sid, "get", "http://%s%s" % (hostport, path), hostport)

    def status(self, out):
        return int(out["head"].split(" ")[1])

    def egress_records(self, sid):
        out = []
        with open(os.path.join(self.d.state, "audit", "audit.log")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("kind") == "egress" and r.get("sandbox") == sid:
                    out.append(r)
        return out

    def set_network(self, sid, allow=(), deny=()):
        r = self.d.api("PUT", "/v1/sandboxes/%s/network" % sid,
                       {"allow": list(allow), "deny": list(deny)})
        self.assertEqual(r.status, 200, r)
        return r.json()


class TestEgress(EgressBase):
    def test_allowed_host_passes_and_headers_are_cleaned(self):
        sid = self.box(allow=["127.0.0.1"])
        out = self.get(sid, "127.0.0.1", self.port1, "/echo?q=1#frag")
        self.assertEqual(self.status(out), 200, out)
        seen = json.loads(out["body"])
        self.assertEqual(seen["path"], "/echo?q=1")
        h = {k.lower(): v for k, v in seen["headers"].items()}
        self.assertEqual(h["host"], "127.0.0.1:%d" % self.port1)
        self.assertEqual(h["x-test"], "yes")
        self.assertEqual(h["connection"], "close")
        self.assertNotIn("proxy-authorization", h)
        self.assertNotIn("proxy-connection", h)

    def test_large_download_is_intact(self):
        sid = self.box(allow=["localhost"])
        n = 16 * 1024 * 1024 + 7
        out = self.get(sid, "localhost", self.port1, "/big/%d" % n)
        self.assertEqual(self.status(out), 200, out["head"])
        self.assertEqual(out["len"], n)
        self.assertEqual(out["sha"], hashlib.sha256(big_body(n)).hexdigest())

    def test_host_not_in_list_is_refused_with_a_reason(self):
        sid = self.box(allow=["example.org", "127.0.0.2"])
        out = self.get(sid, "evil.example", 443)
        self.assertEqual(self.status(out), 403, out)
        self.assertIn("sbx: egress to evil.example:443 is not allowed by this sandbox's policy",
                      out["body"])
        out = self.get(sid, "127.0.0.1", self.port1)
        self.assertEqual(self.status(out), 403, out)
        self.assertIn("127.0.0.1:%d is not allowed" % self.port1, out["body"])
        # The one allowed still passes.
        self.assertEqual(self.status(self.get(sid, "127.0.0.2", self.port2)), 200)

    def test_deny_wins_over_allow(self):
        sid = self.box(allow=["*"], deny=["127.0.0.2", "localhost:%d" % self.port1])
        self.assertEqual(self.status(self.get(sid, "127.0.0.2", self.port2)), 403)
        self.assertEqual(self.status(self.get(sid, "localhost", self.port1)), 403)
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 200)
        # A range denied catches a name that resolves into it.
        self.set_network(sid, allow=["*"], deny=["127.0.0.0/30"])
        out = self.get(sid, "localhost", self.port1)
        self.assertEqual(self.status(out), 403, out)

    def test_star_allows_everything(self):
        sid = self.box(allow=["*"])
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 200)
        self.assertEqual(self.status(self.get(sid, "localhost", self.port1)), 200)
        self.assertEqual(self.status(self.get(sid, "127.0.0.2", self.port2)), 200)
        # A name that does not resolve (.invalid never does): 502 and why.
        out = self.get(sid, "no-such-host.invalid", 80)
        self.assertEqual(self.status(out), 502, out)
        self.assertIn("sbx: cannot resolve no-such-host.invalid:80", out["body"])
        # Nothing listens: 502 too.
        port = free_port()
        out = self.get(sid, "127.0.0.1", port)
        self.assertEqual(self.status(out), 502, out)
        self.assertIn("cannot connect to 127.0.0.1:%d: Connection refused" % port, out["body"])

    def test_none_refuses_and_there_is_no_route(self):
        sid = self.box()
        info = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual(info["network"], {"allow": [], "deny": []})
        env = self.d.sh(sid, "env")["stdout"]
        self.assertNotIn("HTTP_PROXY", env)
        # Its proxy address goes nowhere (issue 16): reset, whatever was
        # sent, and the egress process never saw it (no audit record).
        out = self.client(sid, "proxy")
        self.assertEqual(out, {"got": None, "errno": errno.ECONNRESET}, out)
        self.assertEqual(self.egress_records(sid), [])
        # Without the proxy: the host's 127.0.0.1 is not the sandbox's.
        self.assertEqual(self.client(sid, "direct", "127.0.0.1", str(self.port1))["connected"],
                         False)
        # And nothing else routes (no interface but lo).
        out = self.client(sid, "direct", "1.1.1.1", "80")
        self.assertFalse(out["connected"])

    def test_proxy_env_is_set_and_curl_uses_it(self):
        sid = self.box(allow=["127.0.0.2"])
        env = dict(l.split("=", 1) for l in self.d.sh(sid, "env")["stdout"].splitlines() if "=" in l)
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            self.assertEqual(env[k], "http://127.0.0.1:3128")
        self.assertEqual(env["NO_PROXY"], "localhost,127.0.0.1,::1")
        if not os.path.exists("/usr/bin/curl"):
            self.skipTest("no curl")
        r = self.d.sh(sid, "curl -sS -f http://127.0.0.2:%d/via-curl" % self.port2)
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(json.loads(r["stdout"])["path"], "/via-curl")
        # Python's urllib too, through the environment.
        r = self.d.exec(sid, argv=["python3", "-c",
                                   "import urllib.request as u;"
                                   "print(u.urlopen('http://127.0.0.2:%d/py').read().decode())"
                                   % self.port2])
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(json.loads(r["stdout"])["path"], "/py")

    def test_connect_relays_bytes(self):
        sid = self.box(allow=["127.0.0.1:%d" % self.echo_port])
        payload = "hello through the tunnel " * 100
        out = self.client(sid, "connect", "127.0.0.1:%d" % self.echo_port, payload)
        self.assertTrue(out["head"].startswith("HTTP/1.1 200"), out)
        self.assertEqual(out["echo"], payload)
        # Another port of the same host is not in the list.
        out = self.client(sid, "connect", "127.0.0.1:%d" % self.port1, "x")
        self.assertTrue(out["head"].startswith("HTTP/1.1 403"), out)

    def test_https_through_connect_with_a_test_ca(self):
        if not os.path.exists("/usr/bin/curl") or shutil.which("openssl") is None:
            self.skipTest("no curl or openssl")
        tmp = tempfile.mkdtemp(prefix="sbx-egress-tls-")
        server = None
        try:
            def ossl(*args):
                subprocess.run(["openssl"] + list(args), cwd=tmp, check=True,
                               capture_output=True)
            ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
                 "-out", "ca.pem", "-days", "1", "-subj", "/CN=sbx egress test CA")
            ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out",
                 "srv.csr", "-subj", "/CN=localhost")
            with open(os.path.join(tmp, "ext"), "w") as f:
                f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
            ossl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", "srv.pem", "-days", "1", "-extfile", "ext")
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
            server.daemon_threads = True
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(tmp, "srv.pem"), os.path.join(tmp, "srv.key"))
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            port = server.server_address[1]
            sid = self.box(allow=["localhost:%d" % port])
            with open(os.path.join(tmp, "ca.pem"), "rb") as f:
                self.assertEqual(self.d.upload(sid, "/tmp/ca.pem", f.read()).status, 201)
            # (--noproxy '': NO_PROXY names localhost, the upstream here.)
            curl = "curl -sS --noproxy '' --cacert /tmp/ca.pem "
            r = self.d.sh(sid, curl + "https://localhost:%d/tls" % port)
            self.assertEqual(r["exit_code"], 0, r)
            self.assertEqual(json.loads(r["stdout"])["path"], "/tls")
            # The certificate is checked end to end: sbx does not look inside.
            r = self.d.sh(sid, "curl -sS --noproxy '' https://localhost:%d/tls" % port)
            self.assertNotEqual(r["exit_code"], 0, r)
            self.assertIn("certificate", r["stderr"])
            # Another host: the tunnel is refused, and curl says 403.
            r = self.d.sh(sid, curl + "-o /dev/null -w '%%{http_connect}' "
                                      "https://127.0.0.1:%d/tls" % port)
            self.assertEqual(r["stdout"], "403", r)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
            shutil.rmtree(tmp, ignore_errors=True)

    def test_ip_literals_and_cidrs(self):
        sid = self.box(allow=["127.0.0.0/8"])
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 200)
        self.assertEqual(self.status(self.get(sid, "127.0.0.2", self.port2)), 200)
        # A name resolving into the range passes too.
        self.assertEqual(self.status(self.get(sid, "localhost", self.port1)), 200)
        self.set_network(sid, allow=["10.0.0.0/8", "[::1]:%d" % self.port1])
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 403)
        self.set_network(sid, allow=["127.0.0.2/32"])
        self.assertEqual(self.status(self.get(sid, "127.0.0.2", self.port2)), 200)
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 403)

    def test_redirect_to_denied_host_is_not_followed(self):
        sid = self.box(allow=["127.0.0.1"])
        target = "http://127.0.0.2:%d/secret" % self.port2
        out = self.get(sid, "127.0.0.1", self.port1, "/redirect/" + target)
        self.assertEqual(self.status(out), 302, out)
        self.assertIn("Location: " + target, out["head"])
        # The client's follow-up is judged again.
        out = self.client(sid, "get", target, "127.0.0.2:%d" % self.port2)
        self.assertEqual(self.status(out), 403, out)
        if os.path.exists("/usr/bin/curl"):
            # (--noproxy '': NO_PROXY names 127.0.0.1, which is the upstream here.)
            r = self.d.sh(sid, "curl -sS -L --noproxy '' -o /dev/null -w '%%{http_code}' "
                               "http://127.0.0.1:%d/redirect/%s" % (self.port1, target))
            self.assertEqual(r["stdout"], "403", r)

    def test_policy_change_applies_to_the_next_connection(self):
        sid = self.box(allow=["127.0.0.1"])
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 200)
        info = self.set_network(sid)  # none: no egress at all
        self.assertEqual(info["network"], {"allow": [], "deny": []})
        self.assertEqual(self.client(sid, "proxy"), {"got": None, "errno": errno.ECONNRESET})
        info = self.set_network(sid, allow=["LocalHost."], deny=[])
        self.assertEqual(info["network"], {"allow": ["localhost"], "deny": []})
        self.assertEqual(self.status(self.get(sid, "localhost", self.port1)), 200)

    def test_malformed_requests_get_400(self):
        sid = self.box(allow=["*"])
        cases = [
            b"garbage\r\n\r\n",
            b"\x00\x01\x02\r\n\r\n",
            b"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
            b"CONNECT [::1 HTTP/1.1\r\n\r\n",
            b"CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n",
            b"CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n",
            b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET https://127.0.0.1/ HTTP/1.1\r\n\r\n",
            b"GET http://user:pw@127.0.0.1/ HTTP/1.1\r\n\r\n",
            b"GET http://127.0.0.1/ HTTP/1.1\r\n folded: header\r\n\r\n",
            b"GET http://127.0.0.1/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET http://bad_host!/ HTTP/1.1\r\n\r\n",
            b"GET http://127.0.0.1/ HTTP/2.0\r\n\r\n",
            b"GET http://127.0.0.1/ HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n",
        ]
        for raw in cases:
            out = self.client(sid, "raw", raw.hex())
            self.assertEqual(self.status(out), 400, (raw[:60], out))
            self.assertIn("sbx: ", out["body"])
        # Everything still works.
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 200)

    def test_connection_limit_per_sandbox(self):
        sid = self.box(allow=["127.0.0.1:%d" % self.echo_port])
        heads = self.client(sid, "hold", "127.0.0.1:%d" % self.echo_port, "70")
        self.assertEqual(heads[:64], ["HTTP/1.1 200 Connection established"] * 64)
        self.assertEqual(heads[64:], ["HTTP/1.1 429 Too Many Requests"] * 6)
        # Closed (the command exited): the slots come back.
        wait_until(lambda: self.status(self.get(sid, "127.0.0.1", self.port1)) == 403,
                   what="the tunnels to close")

    def test_api_validation(self):
        bad = [
            {"allow": "example.com"},
            {"allow": [1]},
            {"allow": ["exa mple.com"]},
            {"allow": ["*.*.com"]},
            {"allow": ["example.com:0"]},
            {"allow": ["example.com:70000"]},
            {"allow": ["10.0.0.1/8"]},
            {"allow": ["10.0.0.0/33"]},
            {"allow": ["[::1"]},
            {"allow": ["a" * 300]},
            {"allow": ["x%d.com" % i for i in range(257)]},
            {"rules": []},
            ["example.com"],
        ]
        for net in bad:
            r = self.d.api("POST", "/v1/sandboxes", {"network": net})
            body = self.assertError(r, 400, "invalid_argument")
            self.assertIn("network", body["message"], body)
        sid = self.d.create(network={"allow": ["Example.COM", "*.pypi.org:443", "10.0.0.0/8",
                                               "::1", "[2001:db8::1]:8080", "example.com"],
                                     "deny": ["*"]})
        net = self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]
        self.assertEqual(net, {"allow": ["example.com", "*.pypi.org:443", "10.0.0.0/8", "::1",
                                         "[2001:db8::1]:8080"], "deny": ["*"]})
        r = self.d.api("PUT", "/v1/sandboxes/%s/network" % sid, {"allow": ["bad host"]})
        self.assertError(r, 400, "invalid_argument")
        r = self.d.api("PUT", "/v1/sandboxes/nosuchsandbox0000000/network", {"allow": []})
        self.assertEqual(r.status, 404, r)

    def test_cli_net(self):
        r = self.d.sbx("run", "--net", "allow:127.0.0.2,localhost", "--", "sh", "-c",
                       "curl -sS http://127.0.0.2:%d/cli" % self.port2)
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(json.loads(r.stdout)["path"], "/cli")
        r = self.d.sbx("run", "--net", "none", "--", "sh", "-c",
                       "curl -sS -o /dev/null -w '%%{http_code}' -x http://127.0.0.1:3128 "
                       "http://127.0.0.2:%d/cli" % self.port2)
        # No egress: the proxy address resets (curl: 56 failure receiving,
        # 55 failure sending, or 7 when the reset came before connect()
        # returned).
        self.assertEqual(r.stdout, b"000", r)
        self.assertIn(r.returncode, (7, 55, 56), r)
        r = self.d.sbx("run", "--net", "allow:bad host", "--", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"network", r.stderr)
        sid = self.d.create()
        r = self.d.sbx("net", sid, "allow:127.0.0.2", "deny:127.0.0.2:1")
        self.assertEqual(r.returncode, 0, r)
        net = self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]
        self.assertEqual(net, {"allow": ["127.0.0.2"], "deny": ["127.0.0.2:1"]})
        r = self.d.sbx("net", sid, "all")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]["allow"],
                         ["*"])
        r = self.d.sbx("net", sid, "none")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]["allow"], [])
        r = self.d.sbx("net", sid)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn(b"none", r.stdout)

    def test_e2b_network(self):
        # (E2B's default lifetime is 15 s; this test takes longer than that
        # on an emulated machine: its sandboxes get 10 minutes.)
        key = self.d.new_key()
        h = {"X-API-Key": key, "Content-Type": "application/json"}

        def e2b(method, path, body=None):
            return self.d.tcp(method, path, body, headers=h)

        def native(sid):
            return self.d.tcp("GET", "/v1/sandboxes/" + sid, key=key).json()["network"]

        r = e2b("POST", "/sandboxes", {"templateID": "base", "timeout": 600})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        self.assertEqual(native(sid), {"allow": [], "deny": []})
        info = e2b("GET", "/sandboxes/" + sid).json()
        self.assertIs(info["allowInternetAccess"], False)
        self.assertEqual(info["network"], {"allowOut": [], "denyOut": ["0.0.0.0/0"]})

        sid = e2b("POST", "/sandboxes", {"templateID": "base", "timeout": 600, "allow_internet_access": True}).json()["sandboxID"]
        self.assertEqual(native(sid), {"allow": ["*"], "deny": []})
        self.assertIs(e2b("GET", "/sandboxes/" + sid).json()["allowInternetAccess"], True)

        sid = e2b("POST", "/sandboxes", {"templateID": "base", "timeout": 600, "allow_internet_access": True,
                                         "network": {"denyOut": ["127.0.0.2"]}}).json()["sandboxID"]
        self.assertEqual(native(sid), {"allow": ["*"], "deny": ["127.0.0.2"]})
        self.assertEqual(e2b("GET", "/sandboxes/" + sid).json()["network"],
                         {"allowOut": [], "denyOut": ["127.0.0.2"]})

        r = e2b("POST", "/sandboxes", {"templateID": "base", "timeout": 600,
                                       "network": {"allowOut": ["127.0.0.1"],
                                                   "denyOut": ["0.0.0.0/0"]}})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        self.assertEqual(native(sid), {"allow": ["127.0.0.1"], "deny": []})
        self.assertEqual(e2b("GET", "/sandboxes/" + sid).json()["network"],
                         {"allowOut": ["127.0.0.1"], "denyOut": ["0.0.0.0/0"]})
        r = self.d.tcp("PUT", "/v1/sandboxes/%s/files?path=/tmp/client.py" % sid,
                       CLIENT.encode(), key=key, raw=True)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 200)
        self.assertEqual(self.status(self.get(sid, "127.0.0.2", self.port2)), 403)

        # updateNetwork: the whole setting, in force for the next connection.
        r = e2b("PUT", "/sandboxes/%s/network" % sid,
                {"allowOut": ["127.0.0.2"], "denyOut": ["0.0.0.0/0"]})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(native(sid), {"allow": ["127.0.0.2"], "deny": []})
        self.assertEqual(self.status(self.get(sid, "127.0.0.2", self.port2)), 200)
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1)), 403)
        r = e2b("PUT", "/sandboxes/%s/network" % sid, {"allow_internet_access": False})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(native(sid), {"allow": [], "deny": []})

        for body in ({"templateID": "base", "timeout": 600, "network": {"allowOut": ["x.com"]}},
                     {"templateID": "base", "timeout": 600, "network": {"rules": {"x.com": [{}]}}},
                     {"templateID": "base", "timeout": 600, "network": {"egressProxy": {"address": "a:1"}}},
                     {"templateID": "base", "timeout": 600, "network": {"allowOut": "x.com"}},
                     {"templateID": "base", "timeout": 600, "network": {"denyOut": ["not a host"]}},
                     {"templateID": "base", "timeout": 600, "allow_internet_access": "yes"}):
            r = e2b("POST", "/sandboxes", body)
            self.assertEqual(r.status, 400, (body, r))
        r = e2b("PUT", "/sandboxes/%s/network" % sid, {"bogus": 1})
        self.assertEqual(r.status, 400, r)
        r = e2b("PUT", "/sandboxes/%s/network" % ("a" * 20), {})
        self.assertEqual(r.status, 404, r)

    def test_audit_records_every_attempt(self):
        sid = self.box(allow=["127.0.0.1"])
        self.assertEqual(self.status(self.get(sid, "127.0.0.1", self.port1, "/big/100000")), 200)
        self.assertEqual(self.status(self.get(sid, "evil.example", 443)), 403)
        out = self.client(sid, "connect", "127.0.0.2:%d" % self.port2, "x")
        self.assertTrue(out["head"].startswith("HTTP/1.1 403"), out)

        recs = wait_until(lambda: self.egress_records(sid)[2:] and self.egress_records(sid),
                          what="the egress records")
        self.assertEqual(len(recs), 3, recs)
        ok, bad, tunnel = recs
        self.assertEqual((ok["host"], ok["port"], ok["decision"], ok["reason"]),
                         ("127.0.0.1", self.port1, "allow", None))
        self.assertGreater(ok["bytes_in"], 100000)
        self.assertGreater(ok["bytes_out"], 50)
        self.assertEqual((bad["host"], bad["port"], bad["decision"], bad["bytes_in"],
                          bad["bytes_out"]), ("evil.example", 443, "deny", 0, 0))
        self.assertIn("not allowed by this sandbox's policy", bad["reason"])
        self.assertEqual((tunnel["host"], tunnel["port"], tunnel["decision"]),
                         ("127.0.0.2", self.port2, "deny"))
        r = self.d.sbx("audit", "verify")
        self.assertEqual(r.returncode, 0, r)

    def test_egress_process_is_confined(self):
        pids = [p for p, _, cmd in children_of(self.d.proc.pid)
                if cmd.split(b"\0")[1:2] == [b"--egress"]]
        self.assertEqual(len(pids), 1, pids)
        with open("/proc/%d/status" % pids[0]) as f:
            st = dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
        import pwd
        sbx_uid = pwd.getpwnam("sbx").pw_uid
        self.assertEqual(st["Uid"].split()[0], str(sbx_uid))
        self.assertEqual(int(st["CapEff"], 16), 0)
        self.assertEqual(int(st["CapBnd"], 16), 0)
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")


class TestEgressNoPrivate(EgressBase):
    """A daemon without --egress-allow-private: what production does."""
    # Recipe builds may reach this mirror on loopback; sandboxes may not.
    extra_args = ("--template-mirror", "http://localhost/debian")

    def test_private_destinations_are_refused(self):
        sid = self.box(allow=["*"])
        for host, port, shown in [("127.0.0.1", self.port1, "127.0.0.1 (loopback)"),
                                  ("localhost", self.port1, "(loopback)"),
                                  ("169.254.169.254", 80, "169.254.169.254 (metadata)"),
                                  ("10.1.2.3", 80, "10.1.2.3 (private)"),
                                  ("192.168.0.1", 80, "(private)"),
                                  ("100.64.0.1", 80, "(shared (CGNAT))"),
                                  ("0.0.0.0", 80, "(unspecified)"),
                                  ("224.0.0.1", 80, "(multicast)")]:
            out = self.get(sid, host, port)
            self.assertEqual(self.status(out), 403, (host, out))
            self.assertIn("non-public address", out["body"])
            self.assertIn(shown, out["body"])
        for target in ["[::1]:%d" % self.port1, "[fd00:ec2::254]:80", "[fe80::1]:80",
                       "[::ffff:127.0.0.1]:%d" % self.port1]:
            out = self.client(sid, "connect", target, "x")
            self.assertTrue(out["head"].startswith("HTTP/1.1 403"), (target, out))
            self.assertIn("non-public address", out["body"])
        # Even named explicitly in the allowlist, and even the host and port
        # of the builds' mirror (--template-mirror): 403 before any dial
        # (not 502, nothing listens on port 80), with the reason in the
        # status line, which apt, pip and git show.
        self.set_network(sid, allow=["127.0.0.1", "localhost"])
        out = self.get(sid, "127.0.0.1", self.port1)
        self.assertEqual(self.status(out), 403, out)
        out = self.get(sid, "localhost", 80)
        self.assertTrue(out["head"].startswith(
            "HTTP/1.1 403 Forbidden (sbx: a non-public address)\r\n"), out)
        out = self.get(sid, "example.com", 80)
        self.assertTrue(out["head"].startswith(
            "HTTP/1.1 403 Forbidden (sbx: not in the sandbox's allowlist)\r\n"), out)
        self.assertIn("not allowed by this sandbox's policy", out["body"])

    def test_this_hosts_own_public_address_is_refused(self):
        # The red team's attack: a host's public address is in no special
        # range, and a sandbox with open egress reached every host service
        # bound to 0.0.0.0 through it. Here the host gets such an address
        # (on lo, for the test: local all the same, and no packet leaves
        # the host) and a server on 0.0.0.0, and the proxy refuses the
        # address as this host's, after resolution as before.
        addr = "11.22.33.44"
        server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Upstream)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        subprocess.run(["ip", "addr", "add", addr + "/32", "dev", "lo"], check=True)
        try:
            sid = self.box(allow=["*"])
            out = self.get(sid, addr, server.server_address[1])
            self.assertEqual(self.status(out), 403, out)
            self.assertIn("non-public address 11.22.33.44 (this host)", out["body"])
            # SIIT and local NAT64 forms of a loopback address, too.
            for target in ["[::ffff:0:127.0.0.1]:%d" % self.port1,
                           "[64:ff9b:1::127.0.0.1]:%d" % self.port1]:
                out = self.client(sid, "connect", target, "x")
                self.assertTrue(out["head"].startswith("HTTP/1.1 403"), (target, out))
                self.assertIn("(loopback)", out["body"])
        finally:
            subprocess.run(["ip", "addr", "del", addr + "/32", "dev", "lo"])
            server.shutdown()
            server.server_close()


class TestEgressByteLimit(EgressBase):
    extra_args = ("--egress-allow-private", "--egress-max-bytes", "1000000",
                  "--egress-idle-timeout", "2s")

    def test_idle_connections_are_closed(self):
        sid = self.box(allow=["127.0.0.1"])
        r = self.d.exec(sid, argv=["python3", "-c", IDLE_CLIENT % self.echo_port], timeout="30s")
        self.assertEqual(r["exit_code"], 0, r)
        out = json.loads(r["stdout"])
        self.assertEqual(out["echo"], "ping")
        # Closed by the proxy after 2 s of silence (not at once, not never).
        self.assertGreaterEqual(out["closed_after"], 1.5, out)
        self.assertLess(out["closed_after"], 10, out)

    def test_byte_limit(self):
        sid = self.box(allow=["127.0.0.1"])
        out = self.get(sid, "127.0.0.1", self.port1, "/big/600000")
        self.assertEqual(self.status(out), 200)
        self.assertEqual(out["len"], 600000)
        # The next one crosses the allowance: cut short.
        out = self.get(sid, "127.0.0.1", self.port1, "/big/600000")
        self.assertLess(out["len"], 600000)
        # And then nothing more.
        out = self.get(sid, "127.0.0.1", self.port1)
        self.assertEqual(self.status(out), 429, out)
        self.assertIn("byte allowance", out["body"])
        wait_until(lambda: "egress byte allowance" in self.d.read_log(), what="the log line")
        # Another sandbox has its own.
        sid2 = self.box(allow=["127.0.0.1"])
        self.assertEqual(self.status(self.get(sid2, "127.0.0.1", self.port1)), 200)


OPEN_200 = "HTTP/1.1 200 Connection established"
OPEN_429 = "HTTP/1.1 429 Too Many Requests"


class EgressTenants(EgressBase):
    """Sandboxes of tenants other than the default (keys over TCP)."""

    def tenant_box(self, key):
        r = self.d.tcp("POST", "/v1/sandboxes",
                       {"network": {"allow": ["127.0.0.1:%d" % self.echo_port]}}, key=key)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        r = self.d.upload(sid, "/tmp/client.py", CLIENT.encode())
        self.assertEqual(r.status, 201, r)
        return sid

    def keep(self, sid, n):
        """n tunnels to the echo server, kept open in the background: what
        each was answered."""
        r = self.d.sh(sid, "python3 /tmp/client.py keep 127.0.0.1:%d %d /tmp/keep.out"
                      " </dev/null >/tmp/keep.err 2>&1 &" % (self.echo_port, n))
        self.assertEqual(r["exit_code"], 0, r)

        def heads():
            out = self.d.sh(sid, "cat /tmp/keep.out 2>/dev/null")["stdout"]
            return json.loads(out) if out else None
        return wait_until(heads, what="the tunnels of " + sid)

    def reasons(self, sid):
        return [r["reason"] for r in self.egress_records(sid) if r["decision"] != "allow"]


class TestEgressFairShare(EgressTenants):
    """Connections at once, per tenant and per sandbox (egress/limits.h):
    16 open in all, 8 per tenant, 6 per sandbox; the last quarter (past
    12) only for tenants under their fair share."""
    extra_args = ("--egress-allow-private", "--egress-connections", "16",
                  "--egress-tenant-connections", "8", "--egress-sandbox-connections", "6")

    def test_one_tenant_cannot_take_everyones_egress(self):
        a, b, c, d = (self.d.new_key(t) for t in ("fa", "fb", "fc", "fd"))
        a1, a2 = self.tenant_box(a), self.tenant_box(a)
        # A sandbox's own bound, then its tenant's.
        self.assertEqual(self.keep(a1, 7), [OPEN_200] * 6 + [OPEN_429])
        self.assertEqual(self.keep(a2, 4), [OPEN_200] * 2 + [OPEN_429] * 2)
        # B: past 12 in all, a tenant holding its share (16 / (2 tenants
        # + 1 to come) = 5) gets no more.
        b1 = self.tenant_box(b)
        self.assertEqual(self.keep(b1, 6), [OPEN_200] * 5 + [OPEN_429])
        # C is under its share (16 / 4 = 4) and gets what is left: 3.
        c1 = self.tenant_box(c)
        self.assertEqual(self.keep(c1, 4), [OPEN_200] * 3 + [OPEN_429])
        wait_until(lambda: len(self.reasons(c1)) == 1, what="c1's refusal")
        self.assertEqual(self.reasons(a1), ["this sandbox has too many egress connections open"])
        self.assertEqual(self.reasons(a2),
                         ["this tenant's sandboxes have too many egress connections open"] * 2)
        self.assertEqual(self.reasons(b1), [
            "the egress proxy is busy, and this tenant's sandboxes hold their fair share of"
            " its connections"])
        self.assertEqual(self.reasons(c1), ["the egress proxy has too many connections open"])
        # A's sandboxes go: their 8 places come back (a connection's audit
        # record is written once its place is free).
        for sid, n in ((a1, 7), (a2, 4)):
            self.assertEqual(self.d.kill(sid).status, 204)
            wait_until(lambda: len(self.egress_records(sid)) == n, what="%s's records" % sid)
        # D, with B 5 and C 3 held: up to 12 in all, then its share (16 /
        # 4 = 4) is reached.
        d1 = self.tenant_box(d)
        self.assertEqual(self.keep(d1, 5), [OPEN_200] * 4 + [OPEN_429])


class TestEgressSilent(EgressTenants):
    """Connections yet to send their request (pending) count apart, a
    quarter of the room in all and per tenant: 64 open, 32 per tenant and
    16 per sandbox give 16 pending in all and 8 per tenant."""
    extra_args = ("--egress-allow-private", "--egress-connections", "64",
                  "--egress-tenant-connections", "32", "--egress-sandbox-connections", "16")

    def test_silent_connections_count_apart(self):
        a, b = self.d.new_key("sa"), self.d.new_key("sb")
        a1, a2, b1 = (self.tenant_box(k) for k in (a, a, b))
        # All at once: A's two sandboxes open 10 connections that say
        # nothing; B one, and 6 tunnels.
        jobs = [(a1, "silent", "5"), (a2, "silent", "5"), (b1, "silent", "1"),
                (b1, "hold", "127.0.0.1:%d" % self.echo_port, "6")]
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            results = list(pool.map(lambda j: self.client(*j), jobs))
        timeout = "HTTP/1.1 408 Request Timeout"
        a_answers = results[0] + results[1]
        # 8 of A's wait for their request (408 at the end), 2 are refused
        # at once, by the tenant's bound.
        self.assertEqual(sorted(x["status"] for x in a_answers),
                         [timeout] * 8 + [OPEN_429] * 2, a_answers)
        for x in a_answers:
            self.assertEqual(x["body"].strip(), {
                timeout: "sbx: the request head did not come in time",
                OPEN_429: "sbx: this tenant's sandboxes have too many egress connections waiting"
                          " for their request"}[x["status"]], x)
        # B's silent one waited its turn too; its tunnels all opened.
        self.assertEqual([x["status"] for x in results[2]], [timeout])
        self.assertEqual(results[3], [OPEN_200] * 6)


class EgressRestart(RestartTest):
    """The policy is kept with the sandbox: a restarted daemon enforces it."""

    def test_policy_survives_a_restart(self):
        want = {"allow": ["pypi.org", "*.pythonhosted.org:443"], "deny": ["10.0.0.0/8"]}
        sid = self.d.create(network=want)
        other = self.d.create()
        self.kill9()
        self.restart()
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"], want)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + other).json()["network"],
                         {"allow": [], "deny": []})
        self.assertIn("HTTP_PROXY=", self.d.sh(sid, "env")["stdout"])
        r = self.d.api("PUT", "/v1/sandboxes/%s/network" % sid, {})
        self.assertEqual(r.status, 200, r)
        self.kill9()
        self.restart()
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"],
                         {"allow": [], "deny": []})
        self.assertNotIn("HTTP_PROXY=", self.d.sh(sid, "env")["stdout"])


if __name__ == "__main__":
    unittest.main()


class TestE2BOpenInternet(DaemonTest):
    """--e2b-open-internet: an E2B create that says nothing of the network
    gets E2B's default, the internet; the native API and an explicit E2B
    setting keep their meaning."""

    pool = 0
    listen = True
    extra_args = ("--e2b-open-internet",)

    def test_bare_e2b_create_is_open(self):
        key = self.d.new_key()
        h = {"X-API-Key": key, "Content-Type": "application/json"}

        def native(sid):
            return self.d.tcp("GET", "/v1/sandboxes/" + sid, key=key).json()["network"]

        r = self.d.tcp("POST", "/sandboxes", {"templateID": "base", "timeout": 600}, headers=h)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        self.assertEqual(native(sid), {"allow": ["*"], "deny": []})
        r = self.d.tcp("GET", "/sandboxes/" + sid, headers=h)
        self.assertIs(r.json()["allowInternetAccess"], True)
        r = self.d.tcp("POST", "/sandboxes", {"templateID": "base", "timeout": 600,
                                             "allow_internet_access": False}, headers=h)
        self.assertEqual(native(r.json()["sandboxID"]), {"allow": [], "deny": []})
        # sbx's own API: no network unless asked for, whatever the flag
        r = self.d.tcp("POST", "/v1/sandboxes", {"timeout": "10m"}, key=key)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(native(r.json()["id"]), {"allow": [], "deny": []})
