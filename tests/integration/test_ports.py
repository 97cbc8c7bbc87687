"""The HTTP proxy to ports inside a sandbox: `* /v1/sandboxes/ID/ports/PORT/REST`.

Servers run inside the sandbox (the host's python3, as the sandbox's user);
the daemon's front end cannot connect anywhere itself, so every connection
is made by the sandbox's init in the sandbox's network namespace and handed
over. Checked here:

- bytes go through unchanged both ways: files, request bodies with a
  length and chunked, 20 MB answers with a length, chunked and delimited by
  the server closing, the path and query exactly as the client wrote them;
- the client's credentials (X-API-Key, the Authorization key, E2b-* and
  X-Access-Token, any header carrying a key) and hop-by-hop headers never
  reach the server; Host is kept, X-Forwarded-For added;
- errors: nothing listening (502), bad ports (400), another tenant's or an
  unknown sandbox (404), no key (401), Upgrade (501), and servers that send
  garbage, endless headers, switch protocols, close early or stall
  (502/504), after which the daemon still serves;
- the host's loopback is never reached, whatever the port;
- at most 64 proxied requests per sandbox (429 beyond);
- init leaks nothing: no helper process, no socket left in its fd table;
- a sandbox re-adopted after a daemon restart still proxies.
"""
import hashlib
import http.client
import json
import os
import socket
import threading
import time
import unittest

from harness import Daemon, DaemonTest, UnixHTTPConnection
from hostile_util import sandbox_host_pids
from sbx_helpers import wait_until

ASAN_SUBSET = True

# Servers inside the sandbox. `echo` answers what it got (JSON), or big
# bodies; the other modes misbehave in one way each.
SERVER = r'''
import base64, hashlib, json, os, socket, sys, threading, time

mode, port = sys.argv[1], int(sys.argv[2])
family = socket.AF_INET6 if mode == "v6only" else socket.AF_INET
host = "::1" if mode == "v6only" else "127.0.0.1"

def read_head(f):
    lines = []
    while True:
        line = f.readline(65537)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.rstrip(b"\r\n").decode("latin-1"))

def read_body(f, headers):
    te = [v for k, v in headers if k.lower() == "transfer-encoding"]
    if te:
        out = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return out, True
            out += f.read(size)
            f.readline()
    cl = [v for k, v in headers if k.lower() == "content-length"]
    return (f.read(int(cl[0])) if cl else b""), False

PATTERN = bytes(range(256)) * 256

def pattern(n):
    while n > 0:
        chunk = PATTERN[:min(n, len(PATTERN))]
        yield chunk
        n -= len(chunk)

def echo(conn):
    f = conn.makefile("rb")
    head = read_head(f)
    if head is None:
        return
    method, target, version = head[0].split(" ", 2)
    headers = [tuple(x.strip() for x in l.split(":", 1)) for l in head[1:]]
    body, chunked = read_body(f, headers)
    path, _, query = target.partition("?")
    args = dict(a.split("=", 1) for a in query.split("&") if "=" in a)
    if path == "/big":
        n = int(args["n"])
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % n)
        for c in pattern(n):
            conn.sendall(c)
        return
    if path == "/bigchunked":
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        for c in pattern(int(args["n"])):
            conn.sendall(b"%x\r\n%s\r\n" % (len(c), c))
        conn.sendall(b"0\r\n\r\n")
        return
    if path == "/bigclose":
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
        for c in pattern(int(args["n"])):
            conn.sendall(c)
        return
    if path == "/status":
        code = int(args["code"])
        conn.sendall(b"HTTP/1.1 %d Whatever\r\nX-Code: %d\r\nContent-Length: 0\r\n\r\n" % (code, code))
        return
    if path == "/hop":
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close, X-Hop-Out\r\nX-Hop-Out: 1\r\n"
                     b"Keep-Alive: timeout=5\r\nX-Kept: yes\r\nSet-Cookie: a=1\r\n"
                     b"Set-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok")
        return
    out = json.dumps({"method": method, "target": target, "version": version,
                      "headers": headers, "chunked": chunked, "length": len(body),
                      "sha256": hashlib.sha256(body).hexdigest(),
                      "body": base64.b64encode(body[:65536]).decode()}).encode()
    if method == "HEAD":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(out))
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                 b"Connection: close\r\n\r\n%s" % (len(out), out))

def misbehave(conn):
    f = conn.makefile("rb")
    if mode != "close":
        read_head(f)
    if mode == "garbage":
        conn.sendall(b"this is not HTTP at all\r\n\r\n")
    elif mode == "endless":
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        while True:
            conn.sendall(b"X-Endless: " + b"a" * 1000 + b"\r\n")
    elif mode == "stall":
        time.sleep(3600)
    elif mode == "short":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
    elif mode == "switch":
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n")
        time.sleep(1)
    elif mode == "interim":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    elif mode == "badheader":
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nok")

def websocket(conn):
    # The handshake of RFC 6455, then every byte back as it came (the
    # proxy relays bytes; frames are the two ends' business).
    f = conn.makefile("rb")
    head = read_head(f)
    if head is None:
        return
    h = dict((k.lower(), v) for k, v in (tuple(x.strip() for x in l.split(":", 1)) for l in head[1:]))
    if head[0].split(" ")[1] == "/reject":
        conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
        return
    accept = base64.b64encode(hashlib.sha1(
        (h.get("sec-websocket-key", "") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Accept: " + accept + b"\r\nX-Seen: "
                 + json.dumps(sorted(h)).encode() + b"\r\n\r\nHELLO")
    while True:
        data = f.read1(65536)
        if not data:
            break
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)

def serve(conn):
    try:
        if mode in ("echo", "v6only"):
            echo(conn)
        elif mode == "ws":
            websocket(conn)
        else:
            misbehave(conn)
    except OSError:
        pass
    finally:
        conn.close()

s = socket.socket(family, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port))
s.listen(256)
open("/tmp/ready-%d" % port, "w").close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''

ECHO, V6ONLY, WS = 8100, 8110, 8120
MISBEHAVING = {"garbage": 8101, "endless": 8102, "stall": 8103, "close": 8104, "short": 8105,
               "switch": 8106, "interim": 8107, "badheader": 8108}
FAKE_KEY = "e2b_" + "0123456789abcdef" * 2 + "01234567"


def pattern_digest(n):
    block = bytes(range(256)) * 256
    h = hashlib.sha256()
    while n > 0:
        c = block[:min(n, len(block))]
        h.update(c)
        n -= len(c)
    return h.hexdigest()


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        return vals[0] if vals else None

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:300])


def start_servers(d, sid, modes):
    """Upload the server and start one per mode; wait until each listens."""
    r = d.upload(sid, "/tmp/srv.py", SERVER.encode())
    assert r.status == 201, r
    for mode, port in modes:
        r = d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                  {"argv": ["/usr/bin/python3", "/tmp/srv.py", mode, str(port)]})
        assert r.status == 201, r
    for _, port in modes:
        wait_until(lambda: d.api("GET", "/v1/sandboxes/%s/files/stat?path=/tmp/ready-%d"
                                 % (sid, port)).status == 200, what="port %d to listen" % port)


class PortsTest(DaemonTest):
    listen = True
    pool = 1
    extra_args = ("--proxy-timeout", "3s")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.key = cls.d.new_key("tenant-a")
        cls.other_key = cls.d.new_key("tenant-b")
        r = cls.d.tcp("POST", "/v1/sandboxes", {"timeout": 3600}, key=cls.key)
        assert r.status == 201, r
        cls.sid = r.json()["id"]
        start_servers(cls.d, cls.sid, [("echo", ECHO), ("v6only", V6ONLY), ("ws", WS)]
                      + sorted(MISBEHAVING.items(), key=lambda kv: kv[1]))

    def tearDown(self):
        # The class's sandbox lives on; any other is killed.
        r = self.d.api("GET", "/v1/sandboxes")
        for sb in r.json().get("sandboxes", []):
            if sb["id"] != self.sid:
                self.d.kill(sb["id"])

    @classmethod
    def tearDownClass(cls):
        cls.d.kill(cls.sid)
        super().tearDownClass()

    # ---- clients ----------------------------------------------------------

    def url(self, port, rest="/", sid=None):
        return "/v1/sandboxes/%s/ports/%s%s" % (sid or self.sid, port, rest)

    def conn(self, tcp):
        if tcp:
            host, port = self.d.listen.rsplit(":", 1)
            return http.client.HTTPConnection(host, int(port), timeout=60)
        return UnixHTTPConnection(self.d.socket_path, timeout=60)

    def req(self, method, path, body=None, headers=None, tcp=False, key=None, chunked=False):
        c = self.conn(tcp)
        h = dict(headers or {})
        if key is not None:
            h["X-API-Key"] = key
        try:
            if chunked:
                c.request(method, path, body=iter(body), headers=h, encode_chunked=True)
            else:
                c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return Resp(r.status, r.getheaders(), data)
        finally:
            c.close()

    def raw(self, data, tcp=False, timeout=30):
        """Send raw bytes; return everything the daemon sent back."""
        if tcp:
            host, port = self.d.listen.rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=timeout)
        else:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(timeout)
            s.connect(self.d.socket_path)
        out = b""
        try:
            s.sendall(data)
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        except (socket.timeout, ConnectionResetError):
            pass
        finally:
            s.close()
        return out

    def echo(self, rest="/", **kw):
        r = self.req(kw.pop("method", "GET"), self.url(ECHO, rest), **kw)
        self.assertEqual(r.status, 200, r)
        return r.json()

    def assertError(self, resp, status, kind=None):
        self.assertEqual(resp.status, status, resp)
        body = resp.json()
        self.assertEqual(body["code"], status, body)
        self.assertTrue(body["message"])
        if kind:
            self.assertEqual(body["error"], kind, body)
        return body

    def assertServing(self):
        self.assertEqual(self.d.api("GET", "/healthz").status, 200)
        self.assertEqual(self.echo("/alive")["target"], "/alive")


class Passthrough(PortsTest):

    def test_file_from_http_server(self):
        # The stock `python3 -m http.server`, as a user would start it.
        data = os.urandom(3 * 1024 * 1024 + 7)
        self.assertEqual(self.d.upload(self.sid, "/home/user/site/blob.bin", data,
                                       parents="1").status, 201)
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"argv": ["/usr/bin/python3", "-m", "http.server", "8000"],
                        "cwd": "/home/user/site"})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        r = wait_until(lambda: (lambda r: r if r.status == 200 else None)(
            self.req("GET", self.url(8000, "/blob.bin"))), what="http.server")
        self.assertEqual(r.body, data)
        self.assertEqual(r.header("Content-Length"), str(len(data)))
        # The same over TCP with the tenant's key.
        r = self.req("GET", self.url(8000, "/blob.bin"), tcp=True, key=self.key)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(hashlib.sha256(r.body).digest(), hashlib.sha256(data).digest())
        r = self.req("GET", self.url(8000, "/nope"))
        self.assertEqual(r.status, 404)  # the server's own 404, passed on
        self.assertIn(b"File not found", r.body)
        self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (self.sid, pid),
                   {"signal": "SIGKILL"})

    def test_request_line_passed_exactly(self):
        for rest, target in [("", "/"), ("/", "/"), ("?a=1", "/?a=1"),
                             ("/a%2Fb/../c//d?x=%20y&z&%00=1", "/a%2Fb/../c//d?x=%20y&z&%00=1"),
                             ("/deep/" + "/".join("s%d" % i for i in range(40)),
                              "/deep/" + "/".join("s%d" % i for i in range(40)))]:
            with self.subTest(rest=rest):
                got = self.echo(rest)
                self.assertEqual(got["target"], target)
                self.assertEqual(got["version"], "HTTP/1.1")
        for method in ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"):
            with self.subTest(method=method):
                self.assertEqual(self.echo("/m", method=method)["method"], method)
        # HEAD: the head only, with the length the server gave.
        r = self.req("HEAD", self.url(ECHO, "/h"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"")
        self.assertGreater(int(r.header("Content-Length")), 0)

    def test_request_bodies(self):
        for size in (0, 1, 65536, 5 * 1024 * 1024 + 3):
            body = os.urandom(size)
            with self.subTest(size=size, chunked=False):
                got = self.echo("/post", method="POST", body=body)
                self.assertEqual((got["length"], got["sha256"], got["chunked"]),
                                 (size, hashlib.sha256(body).hexdigest(), False))
                if size:
                    self.assertIn(["Content-Length", str(size)], got["headers"])
            with self.subTest(size=size, chunked=True):
                parts = [body[i:i + 100000] for i in range(0, size, 100000)]
                got = self.echo("/post", method="PUT", body=parts, chunked=True)
                self.assertEqual((got["length"], got["sha256"], got["chunked"]),
                                 (size, hashlib.sha256(body).hexdigest(), True))
                self.assertFalse([h for h in got["headers"] if h[0].lower() == "content-length"])

    def test_big_answers_stream(self):
        n = 20 * 1000 * 1000 + 13
        want = pattern_digest(n)
        for path, framing in (("/big", "length"), ("/bigchunked", "chunked"),
                              ("/bigclose", "close")):
            with self.subTest(framing=framing):
                c = self.conn(False)
                try:
                    c.request("GET", self.url(ECHO, "%s?n=%d" % (path, n)))
                    r = c.getresponse()
                    self.assertEqual(r.status, 200)
                    if framing == "length":
                        self.assertEqual(r.getheader("Content-Length"), str(n))
                    else:
                        self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
                    h, got = hashlib.sha256(), 0
                    while True:
                        b = r.read(1 << 20)
                        if not b:
                            break
                        h.update(b)
                        got += len(b)
                    self.assertEqual((got, h.hexdigest()), (n, want))
                finally:
                    c.close()

    def test_statuses_and_headers_back(self):
        for code in (201, 204, 301, 304, 404, 418, 500, 503, 599):
            with self.subTest(code=code):
                r = self.req("GET", self.url(ECHO, "/status?code=%d" % code))
                self.assertEqual(r.status, code)
                self.assertEqual(r.header("X-Code"), str(code))
        r = self.req("GET", self.url(ECHO, "/hop"))
        self.assertEqual((r.status, r.body), (200, b"ok"))
        names = [k.lower() for k, _ in r.headers]
        self.assertEqual(r.header("X-Kept"), "yes")
        self.assertEqual(sorted(v for k, v in r.headers if k.lower() == "set-cookie"),
                         ["a=1", "b=2"])
        self.assertNotIn("x-hop-out", names)
        self.assertNotIn("keep-alive", names)
        # A proxied answer is the server's: none of the API's own headers.
        self.assertNotIn("cache-control", names)
        # Interim answers (100, 103) are skipped; the real one follows.
        r = self.req("GET", self.url(MISBEHAVING["interim"]))
        self.assertEqual((r.status, r.body), (200, b"ok"))

    def test_ipv6_only_server(self):
        # Node binds "localhost" to ::1 only: init tries [::1] after 127.0.0.1.
        got = self.echo()  # the echo server is IPv4
        self.assertEqual(got["target"], "/")
        r = self.req("GET", self.url(V6ONLY, "/six"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["target"], "/six")

    def test_keep_alive_client(self):
        # Several proxied requests on one client connection.
        c = self.conn(True)
        try:
            for i in range(5):
                c.request("POST", self.url(ECHO, "/k%d" % i), body=b"x" * i,
                          headers={"X-API-Key": self.key})
                r = c.getresponse()
                got = json.loads(r.read())
                self.assertEqual((got["target"], got["length"]), ("/k%d" % i, i))
        finally:
            c.close()


class Headers(PortsTest):

    def test_credentials_never_reach_the_sandbox(self):
        sent = {"X-API-Key": self.key, "Authorization": "Bearer " + self.key,
                "E2b-Sandbox-Id": self.sid, "E2b-Sandbox-Port": "8100",
                "X-Access-Token": "secret-token", "Cookie": "session=abc; k=" + FAKE_KEY,
                "X-Custom": "kept", "X-Other": "mentions " + self.key}
        got = self.echo("/h", tcp=True, headers=sent)
        names = [k.lower() for k, _ in got["headers"]]
        text = json.dumps(got)
        self.assertNotIn(self.key, text)
        self.assertNotIn(FAKE_KEY, text)
        for n in ("x-api-key", "authorization", "e2b-sandbox-id", "e2b-sandbox-port",
                  "x-access-token", "cookie", "x-other"):
            self.assertNotIn(n, names)
        self.assertIn(["X-Custom", "kept"], got["headers"])
        # An Authorization that is the app's own goes through (the key came
        # in X-API-Key).
        got = self.echo("/h", tcp=True, key=self.key, headers={"Authorization": "Basic dTpw"})
        self.assertIn(["Authorization", "Basic dTpw"], got["headers"])
        self.assertNotIn(self.key, json.dumps(got))

    def test_hop_by_hop_dropped_host_kept(self):
        got = self.echo("/h", headers={"Connection": "keep-alive, X-Hop", "X-Hop": "1",
                                       "Keep-Alive": "timeout=5", "TE": "trailers",
                                       "Proxy-Authorization": "Basic eDp5",
                                       "Host": "8100-abc.sbx.example",
                                       "X-Forwarded-For": "10.1.2.3"})
        h = dict((k.lower(), v) for k, v in got["headers"])
        for n in ("x-hop", "keep-alive", "te", "proxy-authorization", "upgrade"):
            self.assertNotIn(n, h)
        self.assertEqual(h["connection"], "close")
        self.assertEqual(h["host"], "8100-abc.sbx.example")
        self.assertEqual(h["x-forwarded-proto"], "http")
        self.assertEqual(h["x-forwarded-for"], "10.1.2.3")  # unix socket: no address to add
        got = self.echo("/h", tcp=True, key=self.key)
        h = dict((k.lower(), v) for k, v in got["headers"])
        self.assertEqual(h["x-forwarded-for"], "127.0.0.1")
        self.assertTrue(h["host"].startswith("127.0.0.1:"), h)
        # HTTP/1.0 without Host: the port asked for.
        out = self.raw(b"GET " + self.url(ECHO, "/ten").encode() + b" HTTP/1.0\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.0 200") or out.startswith(b"HTTP/1.1 200"), out)
        body = json.loads(out.split(b"\r\n\r\n", 1)[1])
        self.assertIn(["Host", "127.0.0.1:%d" % ECHO], body["headers"])

    def test_mask_request_host(self):
        """E2B's maskRequestHost: the sandbox's servers see that Host, with
        ${PORT} the port asked for, whatever the client sent; a value that
        could end the header line or start another is a 400 and no sandbox."""
        before = len(self.d.api("GET", "/v1/sandboxes").json()["sandboxes"])
        for bad in ("evil\r\nX-Injected: 1", "a b", "x/y", "%0d%0a", "", "h" * 254, 7):
            r = self.d.tcp("POST", "/v1/sandboxes", {"mask_request_host": bad}, key=self.key)
            self.assertEqual(r.status, 400, (bad, r))
            r = self.d.tcp("POST", "/sandboxes", {"templateID": "base",
                                                  "network": {"maskRequestHost": bad}},
                           key=self.key)
            self.assertEqual(r.status, 400, (bad, r))
        self.assertEqual(len(self.d.api("GET", "/v1/sandboxes").json()["sandboxes"]), before)
        r = self.d.tcp("POST", "/sandboxes", {"templateID": "base", "network": {
            "maskRequestHost": "custom-host.example.com:${PORT}"}}, key=self.key)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        info = self.d.tcp("GET", "/sandboxes/" + sid, key=self.key).json()
        self.assertEqual(info["network"]["maskRequestHost"], "custom-host.example.com:${PORT}")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["mask_request_host"],
                         "custom-host.example.com:${PORT}")
        start_servers(self.d, sid, [("echo", ECHO)])
        r = self.req("GET", self.url(ECHO, "/m", sid=sid), headers={"Host": "8100-x.example"})
        self.assertEqual(r.status, 200, r)
        h = dict((k.lower(), v) for k, v in r.json()["headers"])
        self.assertEqual(h["host"], "custom-host.example.com:%d" % ECHO)
        # Not carried where it was not asked for: the class's sandbox keeps
        # the client's.
        got = self.echo("/n", headers={"Host": "8100-x.example"})
        self.assertIn(["Host", "8100-x.example"], got["headers"])
        # A fork has its source's settings, this one too.
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % sid, {})
        self.assertEqual(r.status, 201, r)
        child = r.json()["sandboxes"][0]["id"]
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + child).json()["mask_request_host"],
                         "custom-host.example.com:${PORT}")

    def test_other_upgrades_ignored(self):
        # h2c and the like are offers a server may ignore: dropped, and the
        # request goes on as plain HTTP/1.1.
        got = self.echo("/h2c", headers={"Connection": "Upgrade, HTTP2-Settings",
                                         "Upgrade": "h2c", "HTTP2-Settings": "AAMAAABkAAQAoAAAAAIAAAAA"})
        names = [k.lower() for k, _ in got["headers"]]
        for n in ("upgrade", "http2-settings"):
            self.assertNotIn(n, names)
        self.assertIn(["Connection", "close"], got["headers"])

    def test_bad_request_lines(self):
        # libmicrohttpd lets these through; the proxy must not send them on.
        for line in (b"GET " + self.url(ECHO, "/a b").encode() + b" HTTP/1.1",
                     b"GET " + self.url(ECHO, "/a\x01b").encode() + b" HTTP/1.1",
                     b"G@T " + self.url(ECHO, "/x").encode() + b" HTTP/1.1"):
            with self.subTest(line=line):
                out = self.raw(line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
                self.assertTrue(out.startswith(b"HTTP/1.1 400"), out[:200])
        self.assertServing()


WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="
WS_ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 1.3


def ws_connect(test, path, tcp=False, headers=None, early=b""):
    """Open a WebSocket through the daemon; returns (socket, head, bytes
    already read after the head)."""
    if tcp:
        host, port = test.d.listen.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=30)
    else:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(test.d.socket_path)
    h = {"Host": "x", "Upgrade": "websocket", "Connection": "Upgrade",
         "Sec-WebSocket-Key": WS_KEY, "Sec-WebSocket-Version": "13"}
    h.update(headers or {})
    s.sendall(("GET %s HTTP/1.1\r\n" % path).encode()
              + "".join("%s: %s\r\n" % kv for kv in h.items()).encode() + b"\r\n" + early)
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        if not b:
            break
        data += b
    head, _, rest = data.partition(b"\r\n\r\n")
    return s, head.decode("latin-1"), rest


def recv_exactly(s, n, have=b""):
    while len(have) < n:
        b = s.recv(min(1 << 20, n - len(have)))
        if not b:
            break
        have += b
    return have


class WebSockets(PortsTest):

    def test_relay_both_ways(self):
        for tcp in (False, True):
            with self.subTest(tcp=tcp):
                s, head, rest = ws_connect(self, self.url(WS, "/chat"), tcp=tcp,
                                           headers={"X-API-Key": self.key} if tcp else None,
                                           early=b"EARLY")
                try:
                    lines = head.split("\r\n")
                    self.assertEqual(lines[0], "HTTP/1.1 101 Switching Protocols", head)
                    hdr = dict((k.lower(), v.strip()) for k, v in
                               (l.split(":", 1) for l in lines[1:]))
                    self.assertEqual(hdr["sec-websocket-accept"], WS_ACCEPT)
                    self.assertEqual(hdr["upgrade"].lower(), "websocket")
                    self.assertIn("upgrade", hdr["connection"].lower())
                    # What the server saw: the handshake, none of our credentials.
                    seen = json.loads(hdr["x-seen"])
                    self.assertIn("sec-websocket-key", seen)
                    self.assertIn("upgrade", seen)
                    self.assertNotIn("x-api-key", seen)
                    # The server's first bytes (sent with its 101), then the
                    # client's early bytes (sent with the handshake) echoed.
                    got = recv_exactly(s, 10, rest)
                    self.assertEqual(got, b"HELLOEARLY")
                    data = os.urandom(2 * 1024 * 1024)
                    sender = threading.Thread(target=s.sendall, args=(data,))
                    sender.start()
                    back = recv_exactly(s, len(data))
                    sender.join()
                    self.assertEqual(back, data)
                    # The client's end reaches the server, whose end comes back.
                    s.shutdown(socket.SHUT_WR)
                    self.assertEqual(s.recv(10), b"")
                finally:
                    s.close()
        self.assertServing()

    def test_refused_handshake_and_idle(self):
        s, head, rest = ws_connect(self, self.url(WS, "/reject"))
        try:
            self.assertTrue(head.startswith("HTTP/1.1 403"), head)
            self.assertEqual(recv_exactly(s, 2, rest), b"no")
        finally:
            s.close()
        # A silent WebSocket ends after the idle timeout (3 s here).
        s, head, rest = ws_connect(self, self.url(WS, "/idle"))
        try:
            self.assertTrue(head.startswith("HTTP/1.1 101"), head)
            self.assertEqual(recv_exactly(s, 5, rest), b"HELLO")
            t0 = time.monotonic()
            self.assertEqual(s.recv(10), b"")
            self.assertLess(time.monotonic() - t0, 20)
        finally:
            s.close()
        # A 101 the client did not ask for is refused (test_misbehaving_servers
        # too), and so is a handshake with a body.
        r = self.req("GET", self.url(WS, "/b"), body=b"x", headers={
            "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": WS_KEY})
        self.assertError(r, 400, "invalid_argument")
        self.assertServing()


class Errors(PortsTest):

    def test_nothing_listens(self):
        r = self.req("GET", self.url(8999, "/x"))
        body = self.assertError(r, 502, "bad_gateway")
        self.assertEqual(body["message"], "nothing listens on port 8999 in sandbox %s" % self.sid)

    def test_bad_ports(self):
        for port in ("0", "70000", "65536", "abc", "-1", "1e3", "%38100", "08100", "080000"):
            with self.subTest(port=port):
                self.assertError(self.req("GET", self.url(port, "/")), 400, "invalid_argument")
        self.assertEqual(self.echo("/ok")["target"], "/ok")
        # 65535 is a port (nothing listens there).
        self.assertError(self.req("GET", self.url("65535")), 502, "bad_gateway")

    def test_tenants(self):
        r = self.req("GET", self.url(ECHO, "/t"), tcp=True, key=self.other_key)
        self.assertError(r, 404, "not_found")
        r2 = self.req("GET", self.url(ECHO, "/t", sid="zzzzzzzzzzzzzzzzzzzz"), tcp=True,
                      key=self.other_key)
        self.assertError(r2, 404, "not_found")
        self.assertEqual(r.json()["message"].replace(self.sid, "ID"),
                         r2.json()["message"].replace("zzzzzzzzzzzzzzzzzzzz", "ID"))
        self.assertError(self.req("POST", self.url(ECHO, "/t"), body=b"x" * 100, tcp=True),
                         401, "unauthorized")
        self.assertError(self.req("GET", self.url(ECHO, "/t"), tcp=True, key=FAKE_KEY), 401)
        r = self.req("GET", self.url(ECHO, "/t"), tcp=True, key=self.key)
        self.assertEqual(r.status, 200, r)

    def test_misbehaving_servers(self):
        cases = [("garbage", 502, "malformed"), ("endless", 502, "larger than 64 KiB"),
                 ("close", 502, "closed the connection"),
                 ("switch", 502, "switched protocols"), ("badheader", 502, "malformed"),
                 ("stall", 504, "did not answer within 3 s")]
        for mode, status, words in cases:
            with self.subTest(mode=mode):
                t0 = time.monotonic()
                r = self.req("POST", self.url(MISBEHAVING[mode], "/x"), body=b"hello")
                body = self.assertError(r, status)
                self.assertIn(words, body["message"])
                self.assertLess(time.monotonic() - t0, 30)
                self.assertServing()
        # A body cut short: the client sees the connection end early.
        c = self.conn(False)
        try:
            c.request("GET", self.url(MISBEHAVING["short"]))
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            with self.assertRaises(http.client.IncompleteRead):
                r.read()
        finally:
            c.close()
        self.assertServing()

    def test_client_hangs_up_mid_answer(self):
        # Stop reading a 200 MB answer after a little, and hang up: the
        # daemon drops the upstream connection and goes on serving.
        c = self.conn(False)
        c.request("GET", self.url(ECHO, "/big?n=%d" % (200 * 1000 * 1000)))
        r = c.getresponse()
        self.assertEqual(len(r.read(100000)), 100000)
        c.close()
        self.assertServing()

    def test_host_loopback_unreachable(self):
        # A server on the host's 127.0.0.1: the same port number through
        # the proxy is the sandbox's own loopback, where nothing listens.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.setblocking(False)
        port = srv.getsockname()[1]
        try:
            for tcp in (False, True):
                r = self.req("GET", self.url(port, "/"), tcp=tcp, key=self.key if tcp else None)
                self.assertError(r, 502, "bad_gateway")
            # The daemon's own listener, as a port of the sandbox.
            lport = int(self.d.listen.rsplit(":", 1)[1])
            self.assertError(self.req("GET", self.url(lport, "/healthz")), 502, "bad_gateway")
            with self.assertRaises(BlockingIOError):
                srv.accept()
        finally:
            srv.close()

    def test_dead_sandbox(self):
        sid = self.d.create()
        self.assertEqual(self.d.kill(sid).status, 204)
        self.assertError(self.req("GET", self.url(ECHO, "/", sid=sid)), 404, "not_found")


class Limits(PortsTest):

    def test_per_sandbox_limit(self):
        # 64 requests held by a server that never answers; the 65th is
        # refused at once; all 64 end with 504 after the idle timeout.
        socks = []
        head = ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % self.url(MISBEHAVING["stall"])).encode()
        try:
            for _ in range(64):
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(30)
                s.connect(self.d.socket_path)
                s.sendall(head)
                socks.append(s)
            time.sleep(1)
            r = self.req("GET", self.url(ECHO, "/one-more"))
            self.assertError(r, 429, "resource_exhausted")
            for s in socks:
                out = b""
                while b"\r\n\r\n" not in out:
                    b = s.recv(4096)
                    if not b:
                        break
                    out += b
                self.assertTrue(out.startswith(b"HTTP/1.1 504"), out[:100])
        finally:
            for s in socks:
                s.close()
        # Places are given back.
        wait_until(lambda: self.req("GET", self.url(ECHO, "/again")).status == 200,
                   timeout=15, what="the proxy places to come back")

    def test_init_keeps_nothing(self):
        # Init connects without a helper process and keeps no socket once
        # it has handed it over, whatever the outcome.
        pids = sandbox_host_pids(self.d, self.sid)
        init = [p for p in pids if open("/proc/%d/comm" % p).read() == "memfd:sbx-init\n"][0]

        def nfds():
            return len(os.listdir("/proc/%d/fd" % init))
        before = nfds()
        threads = []
        for i in range(40):
            port = (ECHO, 8999, MISBEHAVING["close"], MISBEHAVING["garbage"])[i % 4]
            t = threading.Thread(target=self.req, args=("GET", self.url(port, "/n%d" % i)))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        wait_until(lambda: nfds() == before, timeout=10, what="init's fds to settle")
        self.assertEqual(sorted(sandbox_host_pids(self.d, self.sid)), sorted(pids))


class E2BRouting(PortsTest):
    """E2B's preview URLs reach the same proxy: Host PORT-ID.DOMAIN (with
    --domain), or the SDK's E2b-Sandbox-Id and E2b-Sandbox-Port headers."""

    extra_args = PortsTest.extra_args + ("--domain", "sbx.test")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # E2B's connect answer carries the sandbox's traffic token.
        r = cls.d.tcp("POST", "/v2/sandboxes/%s/connect" % cls.sid, {"timeout": 3600}, key=cls.key)
        assert r.status == 200, r
        cls.traffic = r.json()["trafficAccessToken"]

    def test_who_gets_through(self):
        host = {"Host": "%d-%s.sbx.test" % (ECHO, self.sid)}
        ok = [dict(host, **{"E2b-Traffic-Access-Token": self.traffic}),
              dict(host, **{"X-API-Key": self.key}),
              dict(host, Authorization="Bearer " + self.key)]
        denied = [host, dict(host, **{"E2b-Traffic-Access-Token": self.traffic[:-1] + "x"}),
                  dict(host, **{"E2b-Traffic-Access-Token": ""}),
                  dict(host, **{"X-API-Key": self.other_key}),
                  dict(host, **{"X-Access-Token": self.traffic}),
                  dict(host, **{"X-API-Key": "e2b_" + "0" * 40})]
        for h in ok:
            with self.subTest(ok=h):
                self.assertEqual(self.req("GET", "/who", headers=h, tcp=True).status, 200)
        for h in denied:
            with self.subTest(denied=h):
                r = self.req("GET", "/who", headers=h, tcp=True)
                self.assertError(r, 401, "unauthorized")
        self.assertServing()

    def test_host_and_headers(self):
        for tcp in (False, True):
            for headers in ({"Host": "%d-%s.sbx.test" % (ECHO, self.sid)},
                            {"Host": "%d-%s.SBX.test:8443" % (ECHO, self.sid.upper())},
                            {"E2b-Sandbox-Id": self.sid, "E2b-Sandbox-Port": str(ECHO)}):
                with self.subTest(tcp=tcp, headers=headers):
                    if tcp:
                        headers = dict(headers, **{"E2b-Traffic-Access-Token": self.traffic})
                    r = self.req("POST", "/app/x%2Fy?q=%00&r", body=b"e2b", headers=headers,
                                 tcp=tcp)
                    self.assertEqual(r.status, 200, r)
                    got = r.json()
                    self.assertEqual((got["method"], got["target"], got["length"]),
                                     ("POST", "/app/x%2Fy?q=%00&r", 3))
                    names = [k.lower() for k, _ in got["headers"]]
                    self.assertNotIn("e2b-sandbox-id", names)
                    self.assertNotIn("e2b-sandbox-port", names)
                    self.assertNotIn("e2b-traffic-access-token", names)
                    if "Host" in headers:
                        self.assertIn(["Host", headers["Host"]], got["headers"])
        # Streaming and errors are the proxy's.
        n = 5 * 1000 * 1000
        r = self.req("GET", "/big?n=%d" % n, headers={"Host": "%d-%s.sbx.test" % (ECHO, self.sid)})
        self.assertEqual((r.status, len(r.body)), (200, n))
        self.assertEqual(hashlib.sha256(r.body).hexdigest(), pattern_digest(n))
        r = self.req("GET", "/", headers={"Host": "8999-%s.sbx.test" % self.sid})
        self.assertError(r, 502, "bad_gateway")
        r = self.req("GET", "/", headers={"Host": "%d-%s.sbx.test" % (MISBEHAVING["stall"],
                                                                     self.sid)})
        self.assertError(r, 504, "gateway_timeout")
        s, head, rest = ws_connect(self, "/e2b", headers={"Host": "%d-%s.sbx.test" % (WS, self.sid)})
        try:
            self.assertTrue(head.startswith("HTTP/1.1 101"), head)
            s.sendall(b"ping")
            self.assertEqual(recv_exactly(s, 9, rest), b"HELLOping")
        finally:
            s.close()
        # An unknown sandbox is E2B's "gone".
        r = self.req("GET", "/", headers={"Host": "%d-%s.sbx.test" % (ECHO, "a" * 20)})
        self.assertEqual(r.status, 502, r)
        self.assertEqual(r.json()["sandboxId"], "a" * 20)
        self.assertServing()

    def test_credentials_dropped(self):
        r = self.req("GET", "/c", tcp=True, headers={
            "Host": "%d-%s.sbx.test" % (ECHO, self.sid), "X-API-Key": self.key,
            "X-Access-Token": "tok", "E2b-Traffic-Access-Token": self.traffic,
            "Authorization": "Bearer " + self.key})
        self.assertEqual(r.status, 200, r)
        got = r.json()
        self.assertNotIn(self.key, json.dumps(got))
        self.assertNotIn(self.traffic, json.dumps(got))
        names = [k.lower() for k, _ in got["headers"]]
        for n in ("x-api-key", "x-access-token", "e2b-traffic-access-token", "authorization"):
            self.assertNotIn(n, names)


class WebSocketStop(unittest.TestCase):
    """A daemon stopping with WebSockets open ends them and stops cleanly."""

    def test_stop_with_open_websockets(self):
        # With --kill-on-exit the servers die first; without, the sandbox
        # (and its server) lives on and only the stop can end the relays.
        for kill_on_exit in (True, False):
            with self.subTest(kill_on_exit=kill_on_exit):
                self.stop_with_open_websockets(kill_on_exit)

    def stop_with_open_websockets(self, kill_on_exit):
        d = Daemon(pool=0, kill_on_exit=kill_on_exit).start()
        socks = []
        try:
            sid = d.create()
            start_servers(d, sid, [("ws", WS)])

            class T:
                pass
            t = T()
            t.d = d
            early = []
            for _ in range(3):
                s, head, rest = ws_connect(t, "/v1/sandboxes/%s/ports/%d/s" % (sid, WS))
                self.assertTrue(head.startswith("HTTP/1.1 101"), head)
                socks.append(s)
                # The server's first bytes, through the relay before the
                # stop (on a loaded host they may follow the head later).
                early.append(recv_exactly(s, 5, rest))
            t0 = time.monotonic()
            self.assertEqual(d.stop(), 0)
            self.assertLess(time.monotonic() - t0, 20)
            for s, data in zip(socks, early):
                s.settimeout(10)
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    data += b
                self.assertEqual(data, b"HELLO")
        finally:
            for s in socks:
                s.close()
            d.stop()
            if not kill_on_exit:
                # The sandbox outlived its daemon: a next one ends it.
                d.args.append("--kill-on-exit")
                d.start()
                self.assertEqual(d.stop(), 0)
            self.assertEqual(d.cleanup(), [])


class Restart(unittest.TestCase):
    """A sandbox kept across a daemon restart still proxies (init speaks
    the same protocol version and connects for the new daemon)."""

    def test_proxy_after_restart(self):
        d = Daemon(pool=0, kill_on_exit=False).start()
        d2 = None
        try:
            sid = d.create()
            start_servers(d, sid, [("echo", ECHO)])
            r = d.api("GET", "/v1/sandboxes/%s/ports/%d/before" % (sid, ECHO))
            self.assertEqual(r.status, 200, r)
            d.stop()
            d2 = Daemon(pool=0, kill_on_exit=False)
            os.rmdir(d2.state)
            for attr in ("state", "cgroup_parent", "uid_base", "uid_end", "args"):
                setattr(d2, attr, getattr(d, attr))
            d2.args = d2.args + ["--kill-on-exit"]
            d2.start()
            r = d2.api("GET", "/v1/sandboxes/%s/ports/%d/after" % (sid, ECHO))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["target"], "/after")
        finally:
            for x in (d2, d):
                if x is not None and x.proc is not None and x.proc.poll() is None:
                    x.stop()
            if d2 is None:
                # The first daemon leaves its sandbox running: end it.
                d.args.append("--kill-on-exit")
                d.start()
                d.stop()
            problems = (d2 or d).cleanup()
            if d2 is not None:
                try:
                    os.unlink(d.log_path)
                except OSError:
                    pass
            self.assertEqual(problems, [])


if __name__ == "__main__":
    unittest.main()
