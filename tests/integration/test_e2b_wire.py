"""E2B's wire protocol with hostile and malformed input: the data plane
(envd: Connect in JSON, /files) and the control plane, spoken directly
over HTTP. Everything gets a Connect or JSON error with the exact code,
nothing changes, and the daemon keeps serving. (The SDK's own scenarios
are in tests/e2b.)"""
import base64
import http.client
import json
import os
import struct
import time

from harness import DaemonTest

ASAN_SUBSET = True

ENVD = "49983"


def envelope(obj, flags=0):
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(data)) + data


def parse_envelopes(body):
    out = []
    while body:
        if len(body) < 5:
            raise AssertionError("a cut envelope: %r" % body)
        flags, n = struct.unpack(">BI", body[:5])
        out.append((flags, json.loads(body[5:5 + n])))
        body = body[5 + n:]
    return out


class E2BWire(DaemonTest):
    listen = True
    extra_args = ("--domain", "sbx.test")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.key = cls.d.new_key("wire")

    def conn(self, timeout=60):
        host, port = self.d.listen.rsplit(":", 1)
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            c.close()

    def new_sandbox(self):
        st, _, body = self.request("POST", "/v2/sandboxes", json.dumps({"templateID": "base"}),
                                   {"X-API-Key": self.key, "Content-Type": "application/json"})
        self.assertEqual(st, 201, body)
        return json.loads(body)

    def envd(self, sb, method, path, body=None, headers=None, token=True, timeout=60):
        h = {"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": ENVD}
        if token:
            h["X-Access-Token"] = sb["envdAccessToken"]
        h.update(headers or {})
        return self.request(method, path, body, h, timeout)

    def unary(self, sb, rpc, msg, headers=None, **kw):
        h = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
        h.update(headers or {})
        body = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        st, hd, data = self.envd(sb, "POST", "/" + rpc, body, h, **kw)
        return st, json.loads(data) if data else None

    def stream(self, sb, rpc, body, headers=None, **kw):
        h = {"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
        h.update(headers or {})
        st, hd, data = self.envd(sb, "POST", "/" + rpc, body, h, **kw)
        return st, hd, data

    def assertConnectError(self, status, body, want_status, code):
        self.assertEqual(status, want_status, body)
        self.assertEqual(body["code"], code, body)
        self.assertTrue(body["message"])

    def assertStreamError(self, status, data, code):
        self.assertEqual(status, 200, data)
        env = parse_envelopes(data)
        self.assertEqual(env[-1][0], 2, env)
        self.assertEqual(env[-1][1]["error"]["code"], code, env)
        return env

    def assertAlive(self, sb):
        st, body = self.unary(sb, "process.Process/List", {})
        self.assertEqual(st, 200, body)

    # ---- routing and credentials -------------------------------------------

    def test_data_plane_needs_the_sandboxs_own_token(self):
        a, b = self.new_sandbox(), self.new_sandbox()
        st, body = self.unary(a, "process.Process/List", {}, token=False)
        self.assertEqual(st, 401, body)
        st, body = self.unary(a, "process.Process/List", {},
                              headers={"X-Access-Token": b["envdAccessToken"]}, token=False)
        self.assertEqual(st, 401, body)
        st, body = self.unary(a, "process.Process/List", {},
                              headers={"X-Access-Token": a["envdAccessToken"][:-1]}, token=False)
        self.assertEqual(st, 401, body)
        # An API key is not an envd credential.
        st, body = self.unary(a, "process.Process/List", {},
                              headers={"X-API-Key": self.key}, token=False)
        self.assertEqual(st, 401, body)
        # /health is open, as in envd; the token of a sandbox never leaks to another tenant.
        st, _, _ = self.envd(a, "GET", "/health", token=False)
        self.assertEqual(st, 204)
        other = self.d.new_key("wire-other")
        st, _, body = self.request("GET", "/sandboxes/" + a["sandboxID"], headers={"X-API-Key": other})
        self.assertEqual(st, 404, body)
        self.assertEqual(json.loads(body)["code"], 404)

    def test_unknown_and_malformed_sandbox_routes(self):
        st, _, body = self.request("GET", "/health", headers={
            "E2b-Sandbox-Id": "a" * 20, "E2b-Sandbox-Port": ENVD})
        self.assertEqual(st, 502, body)
        self.assertEqual(json.loads(body), {"sandboxId": "a" * 20, "code": 502,
                                            "message": "The sandbox was not found"})
        for sid, port in (("../../etc", ENVD), ("A" * 20, ENVD), ("a" * 21, ENVD), ("a-b" * 5, ENVD),
                          ("a" * 20, "0"), ("a" * 20, "70000"), ("a" * 20, "abc"),
                          ("a" * 20, "-1"), ("a" * 20, "049983")):
            st, _, body = self.request("GET", "/health", headers={
                "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": port})
            self.assertEqual(st, 400, (sid, port, body))
        st, _, body = self.request("GET", "/health", headers={"E2b-Sandbox-Port": ENVD})
        self.assertEqual(st, 400, body)

    def test_host_routing_with_the_domain(self):
        sb = self.new_sandbox()
        sid = sb["sandboxID"]
        h = {"X-Access-Token": sb["envdAccessToken"], "Content-Type": "application/json"}
        for host in ("49983-%s.sbx.test" % sid, "49983-%s.SBX.TEST:1234" % sid.upper()):
            st, _, body = self.request("POST", "/process.Process/List", b"{}", dict(h, Host=host))
            self.assertEqual(st, 200, (host, body))
        # Another domain, or a deeper name, is the API (which wants a key).
        for host in ("49983-%s.other.test" % sid, "x.49983-%s.sbx.test" % sid):
            st, _, body = self.request("POST", "/process.Process/List", b"{}", dict(h, Host=host))
            self.assertIn(st, (401, 404), (host, body))

    def test_basic_auth_user(self):
        sb = self.new_sandbox()
        msg = envelope({"process": {"cmd": "/usr/bin/id", "args": ["-u"]}, "stdin": False})
        for user, want in (("root:", "0\n"), ("user:", "1000\n")):
            st, _, data = self.stream(sb, "process.Process/Start", msg, {
                "Authorization": "Basic " + base64.b64encode(user.encode()).decode()})
            env = parse_envelopes(data)
            out = b"".join(base64.b64decode(e["event"]["data"]["stdout"])
                           for f, e in env if f == 0 and "data" in e.get("event", {}))
            self.assertEqual(out.decode(), want)
        for bad in ("Basic " + base64.b64encode(b"nobody:").decode(), "Basic !!!", "Bearer x",
                    "Basic " + base64.b64encode(b"root:pw").decode()):
            st, body = self.unary(sb, "process.Process/List", {}, headers={"Authorization": bad})
            self.assertEqual(st, 401, (bad, body))

    # ---- Connect framing ---------------------------------------------------

    def test_unary_rejects_bad_requests(self):
        sb = self.new_sandbox()
        st, body = self.unary(sb, "process.Process/List", {}, headers={"Content-Type": "text/plain"})
        self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(sb, "process.Process/List", {},
                              headers={"Connect-Protocol-Version": "2"})
        self.assertConnectError(st, body, 400, "invalid_argument")
        for raw in (b"{", b"[]", b"42", b'"x"', b"\xff\xfe", b'{"a":1,"a":2}'):
            st, body = self.unary(sb, "filesystem.Filesystem/Stat", raw)
            self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(sb, "filesystem.Filesystem/Stat", {"path": "/tmp", "bogus": 1})
        self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(sb, "filesystem.Filesystem/Stat", {"path": 42})
        self.assertConnectError(st, body, 400, "invalid_argument")
        # Over 1 MiB, chunked (no length to refuse it by): read, then refused.
        class Big:
            def __iter__(self):
                yield b"{"
                for _ in range(40):
                    yield b" " * 65536
                yield b"}"
        st, _, data = self.envd(sb, "POST", "/filesystem.Filesystem/Stat", Big(), {
            "Content-Type": "application/json"})  # http.client sends an iterable chunked
        self.assertIn(st, (413, 429), data)
        st, body = self.unary(sb, "process.Process/Nope", {})
        self.assertConnectError(st, body, 501, "unimplemented")
        st, body = self.unary(sb, "nope.Nope/List", {})
        self.assertConnectError(st, body, 501, "unimplemented")
        st, body = self.unary(sb, "process.Process/StreamInput", {})
        self.assertConnectError(st, body, 501, "unimplemented")
        self.assertAlive(sb)

    def test_streams_reject_bad_envelopes(self):
        sb = self.new_sandbox()
        good = {"process": {"cmd": "/bin/true"}, "stdin": False}
        bad_bodies = [
            b"",                                             # no envelope
            envelope(good)[:-3],                             # cut short
            envelope(good, flags=1),                         # compressed
            envelope(good, flags=4),                         # unknown flag
            envelope(good) + envelope(good),                 # two messages
            envelope(good, flags=2),                         # end-stream only
            envelope(b"not json"),
            envelope(b"[1,2]"),
        ]
        for body in bad_bodies:
            st, _, data = self.stream(sb, "process.Process/Start", body)
            self.assertStreamError(st, data, "invalid_argument")
        # A 4 GiB claim is refused from its header, before any allocation.
        st, _, data = self.stream(sb, "process.Process/Start", struct.pack(">BI", 0, 0xFFFFFFFF) + b"{}")
        self.assertStreamError(st, data, "resource_exhausted")
        st, _, data = self.stream(sb, "process.Process/Start", envelope(good),
                                  {"Content-Type": "application/json"})
        self.assertStreamError(st, data, "invalid_argument")
        st, _, data = self.stream(sb, "process.Process/Start", envelope(good),
                                  {"Connect-Timeout-Ms": "soon"})
        self.assertStreamError(st, data, "invalid_argument")
        for msg in ({"process": {}}, {"process": {"cmd": ""}}, {"process": "x"},
                    {"process": {"cmd": "/bin/true", "args": [1]}},
                    {"process": {"cmd": "/bin/true", "args": "x"}},
                    {"process": {"cmd": "/bin/true", "envs": {"A=B": "x"}}},
                    {"process": {"cmd": "/bin/true"}, "stdin": "yes"},
                    {"process": {"cmd": "/bin/true"}, "tag": "t" * 64},
                    {"process": {"cmd": "/bin/true", "cwd": "/no/such/dir"}},
                    {"process": {"cmd": "/bin/true"}, "extra": 1}):
            st, _, data = self.stream(sb, "process.Process/Start", envelope(msg))
            self.assertStreamError(st, data, "invalid_argument")
        # Nothing was started by any of them.
        st, body = self.unary(sb, "process.Process/List", {})
        self.assertEqual(body, {"processes": []})

    def test_start_stream_events_and_end(self):
        sb = self.new_sandbox()
        st, hd, data = self.stream(sb, "process.Process/Start", envelope(
            {"process": {"cmd": "/bin/bash", "args": ["-c", "printf out; printf err >&2; exit 7"]},
             "stdin": False}))
        self.assertEqual(st, 200)
        self.assertEqual(hd["content-type"], "application/connect+json")
        env = parse_envelopes(data)
        self.assertIn("start", env[0][1]["event"])
        self.assertGreater(env[0][1]["event"]["start"]["pid"], 0)
        end = [e for f, e in env if f == 0 and "end" in e["event"]]
        self.assertEqual(end[0]["event"]["end"], {"exitCode": 7, "exited": True,
                                                  "status": "exit status 7",
                                                  "error": "exit status 7"})
        self.assertEqual(env[-1], (2, {}))

    def test_keepalive_and_deadline(self):
        sb = self.new_sandbox()
        st, _, data = self.stream(sb, "process.Process/Start", envelope(
            {"process": {"cmd": "/bin/sleep", "args": ["2.5"]}, "stdin": False}),
            {"Keepalive-Ping-Interval": "1"})
        env = parse_envelopes(data)
        self.assertGreaterEqual(sum(1 for f, e in env if e.get("event") == {"keepalive": {}}), 1)
        t0 = time.monotonic()
        st, _, data = self.stream(sb, "process.Process/Start", envelope(
            {"process": {"cmd": "/bin/sleep", "args": ["30"]}, "stdin": False}),
            {"Connect-Timeout-Ms": "1000"})
        self.assertLess(time.monotonic() - t0, 20)
        env = parse_envelopes(data)
        self.assertEqual(env[-1][0], 2)
        # Killed by its deadline, which is the command's lifetime (envd's
        # procCtx): the stream ends deadline_exceeded, never with an end
        # event, whichever of the stream and the command's timer is first.
        self.assertEqual([e for f, e in env if f == 0 and "end" in e.get("event", {})], [])
        self.assertEqual(env[-1][1]["error"]["code"], "deadline_exceeded")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            st, body = self.unary(sb, "process.Process/List", {})
            if not body["processes"]:
                break
            time.sleep(0.1)
        self.assertEqual(body["processes"], [])

    def test_selectors_tags_signals_and_input(self):
        sb = self.new_sandbox()
        c = self.conn()
        c.request("POST", "/process.Process/Start", body=envelope(
            {"process": {"cmd": "/bin/cat"}, "tag": "my-cat", "stdin": True}),
            headers={"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": ENVD,
                     "X-Access-Token": sb["envdAccessToken"],
                     "Content-Type": "application/connect+json"})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        st, body = self.unary(sb, "process.Process/List", {})
        self.assertEqual([p["tag"] for p in body["processes"]], ["my-cat"])
        pid = body["processes"][0]["pid"]
        for bad in ({"process": {}}, {"process": {"pid": 1, "tag": "x"}}, {"process": {"pid": -1}},
                    {"process": {"pid": "12x"}}, {"process": {"pid": 2 ** 40}},
                    {"process": {"pid": pid}, "input": {"stdin": "%%%"}},
                    {"process": {"pid": pid}, "input": {"stdin": "YQ==", "pty": "YQ=="}},
                    {"process": {"pid": pid}, "input": {}}):
            st, body = self.unary(sb, "process.Process/SendInput", bad)
            self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(sb, "process.Process/SendInput",
                              {"process": {"pid": 999999}, "input": {"stdin": "YQ=="}})
        self.assertConnectError(st, body, 404, "not_found")
        st, body = self.unary(sb, "process.Process/SendInput",
                              {"process": {"tag": "my-cat"}, "input": {"stdin": "aGVsbG8K"}})
        self.assertEqual(st, 200, body)
        st, body = self.unary(sb, "process.Process/CloseStdin", {"process": {"pid": str(pid)}})
        self.assertEqual(st, 200, body)
        env = parse_envelopes(r.read())
        c.close()
        out = b"".join(base64.b64decode(e["event"]["data"]["stdout"])
                       for f, e in env if f == 0 and "data" in e.get("event", {}))
        self.assertEqual(out, b"hello\n")
        st, body = self.unary(sb, "process.Process/SendSignal",
                              {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
        self.assertConnectError(st, body, 404, "not_found")  # it has ended
        st, body = self.unary(sb, "process.Process/SendSignal",
                              {"process": {"pid": pid}, "signal": "SIGNAL_SIGSTOP"})
        self.assertConnectError(st, body, 400, "invalid_argument")

    # ---- filesystem --------------------------------------------------------

    def test_paths_stay_inside(self):
        sb = self.new_sandbox()
        host_marker = "/tmp/sbx-e2b-wire-host-%d" % os.getpid()
        for p in ("/../../../etc/shadow", "../../../../etc/shadow"):
            st, body = self.unary(sb, "filesystem.Filesystem/Stat", {"path": p})
            self.assertConnectError(st, body, 404, "not_found")
        st, body = self.unary(sb, "filesystem.Filesystem/ListDir", {"path": "/proc/1/root"})
        self.assertIn(st, (400, 403, 404), body)
        st, body = self.unary(sb, "filesystem.Filesystem/MakeDir", {"path": "/usr/evil"})
        self.assertConnectError(st, body, 403, "permission_denied")
        st, body = self.unary(sb, "filesystem.Filesystem/Move",
                              {"source": "/etc/passwd", "destination": host_marker})
        self.assertNotEqual(st, 200, body)
        self.assertFalse(os.path.exists(host_marker))
        st, body = self.unary(sb, "filesystem.Filesystem/ListDir", {"path": "/tmp", "depth": 99})
        self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(sb, "filesystem.Filesystem/Stat", {"path": "/tmp/a\u0000b"})
        self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(sb, "filesystem.Filesystem/Stat", {"path": ""})
        self.assertConnectError(st, body, 400, "invalid_argument")

    def test_files_upload_hostile(self):
        sb = self.new_sandbox()
        host_marker = "/tmp/sbx-e2b-up-%d" % os.getpid()

        def multipart(parts, boundary="XyZ"):
            out = b""
            for name, filename, data in parts:
                out += b"--" + boundary.encode() + b"\r\n"
                cd = 'form-data; name="%s"' % name
                if filename is not None:
                    cd += '; filename="%s"' % filename
                out += b"Content-Disposition: " + cd.encode() + b"\r\n"
                out += b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
            return out + b"--" + boundary.encode() + b"--\r\n"

        ct = {"Content-Type": "multipart/form-data; boundary=XyZ"}
        st, _, body = self.envd(sb, "POST", "/files", multipart([("file", "/tmp/ok.txt", b"ok")]), ct)
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body), [{"path": "/tmp/ok.txt", "name": "ok.txt", "type": "file"}])
        # Traversal in the filename stays in the sandbox (its /etc is read-only).
        st, _, body = self.envd(sb, "POST", "/files",
                                multipart([("file", "../../../.." + host_marker, b"x")]), ct)
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)[0]["path"], host_marker)
        self.assertFalse(os.path.exists(host_marker))
        st, _, body = self.envd(sb, "POST", "/files",
                                multipart([("file", "/etc/evil", b"x")]), ct)
        self.assertEqual(st, 403, body)
        st, _, body = self.envd(sb, "POST", "/files", multipart([("file", None, b"x")]), ct)
        self.assertEqual(st, 400, body)
        st, _, body = self.envd(sb, "POST", "/files", multipart([("other", "/tmp/x", b"x")]), ct)
        self.assertEqual(st, 400, body)
        st, _, body = self.envd(sb, "POST", "/files", b"garbage", {"Content-Type": "multipart/form-data"})
        self.assertEqual(st, 400, body)
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/raw", b"raw", {"Content-Type": "text/plain"})
        self.assertEqual(st, 400, body)
        st, _, body = self.envd(sb, "POST", "/files", b"raw",
                                {"Content-Type": "application/octet-stream"})
        self.assertEqual(st, 400, body)  # a raw body needs ?path=
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/meta", b"raw",
                                {"Content-Type": "application/octet-stream", "X-Metadata-a b": "b"})
        self.assertEqual(st, 400, body)  # (file metadata: test_files_metadata)
        # gzip raw bodies inflate into the file; a bad one is a 400 and no file
        import gzip
        raw_gz = {"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"}
        payload = os.urandom(200000) + b"end"
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/gz", gzip.compress(payload), raw_gz)
        self.assertEqual(st, 200, body)
        st, _, got = self.envd(sb, "GET", "/files?path=/tmp/gz")
        self.assertEqual((st, got), (200, payload))
        # (a bomb: 64 MiB of zeros in ~64 KiB, within the disk limit, whole)
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/gz0",
                                gzip.compress(b"\0" * (64 << 20)), raw_gz, timeout=120)
        self.assertEqual(st, 200, body)
        st, _, body = self.envd(sb, "POST", "/filesystem.Filesystem/Stat",
                                json.dumps({"path": "/tmp/gz0"}).encode(),
                                {"Content-Type": "application/json"})
        self.assertEqual(json.loads(body)["entry"]["size"], str(64 << 20), body)
        whole = gzip.compress(b"hello")
        for bad, why in ((b"not gzip at all", b"malformed"), (whole[:-6], b"ended before its end"),
                         (whole + b"trailing", b"after the end")):
            st, _, body = self.envd(sb, "POST", "/files?path=/tmp/gzbad", bad, raw_gz)
            self.assertEqual(st, 400, (bad, body))
            self.assertIn(why, body)
            st, _, _ = self.envd(sb, "GET", "/files?path=/tmp/gzbad")
            self.assertEqual(st, 404)
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/br", b"x",
                                dict(raw_gz, **{"Content-Encoding": "br"}))
        self.assertEqual(st, 400, body)
        # a multipart body cut in the middle of a part: a 400, and the front
        # end lives (its answer's error was once read from an unset pointer)
        cut = b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="/tmp/cut"\r\n\r\npart'
        st, _, body = self.envd(sb, "POST", "/files", cut, ct)
        self.assertEqual(st, 400, body)
        self.assertIn(b"in the middle of a part", body)
        st, _, _ = self.envd(sb, "GET", "/files?path=/tmp/cut")
        self.assertEqual(st, 404)
        self.assertNotIn("front end died", self.d.read_log())
        many = multipart([("file", "/tmp/many/%d" % i, b"") for i in range(1001)])
        st, _, body = self.envd(sb, "POST", "/files", many, ct)
        self.assertEqual(st, 429, body)
        st, _, body = self.envd(sb, "POST", "/files", multipart([("file", "/tmp/t", b"x")]), ct,
                                token=False)
        self.assertEqual(st, 401, body)
        # A disk bomb is a 507 (E2B's NotEnoughSpaceError), and leaves the sandbox working.
        big = b"\0" * (4 << 20)

        class Body:
            def __init__(self, n):
                self.n = n

            def __iter__(self):
                for _ in range(self.n):
                    yield big

        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/bomb", Body(300),
                                {"Content-Type": "application/octet-stream"}, timeout=120)
        self.assertEqual(st, 507, body)
        st, _, body = self.envd(sb, "GET", "/files?path=/tmp/bomb")
        self.assertEqual(st, 404, body)
        self.assertAlive(sb)

    # ---- file metadata (X-Metadata-*, user.e2b.* xattrs) --------------------

    def sh(self, sb, cmd):
        st, _, data = self.stream(sb, "process.Process/Start", envelope(
            {"process": {"cmd": "/bin/bash", "args": ["-c", cmd]}, "stdin": False}))
        self.assertEqual(st, 200, data)
        out, code = b"", None
        for _, e in parse_envelopes(data):
            ev = e.get("event", {})
            out += base64.b64decode(ev.get("data", {}).get("stdout", ""))
            if "end" in ev:
                code = ev["end"].get("exitCode", 0)
        self.assertEqual(code, 0, out)
        return out.decode()

    def stat(self, sb, path):
        st, body = self.unary(sb, "filesystem.Filesystem/Stat", {"path": path})
        self.assertEqual(st, 200, body)
        return body["entry"]

    def raw_post(self, sb, path, header_lines, body):
        """A request whose metadata headers are bytes no client library sends."""
        import socket
        host, port = self.d.listen.rsplit(":", 1)
        head = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"E2b-Sandbox-Id: " + sb["sandboxID"].encode() + b"\r\nE2b-Sandbox-Port: "
                + ENVD.encode() + b"\r\nX-Access-Token: " + sb["envdAccessToken"].encode()
                + b"\r\nContent-Type: application/octet-stream\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n" + b"".join(h + b"\r\n" for h in header_lines)
                + b"\r\n")
        with socket.create_connection((host, int(port)), timeout=60) as s:
            s.sendall(head + body)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return int(data.split(b" ", 2)[1]), data

    def test_files_metadata(self):
        sb = self.new_sandbox()
        raw = {"Content-Type": "application/octet-stream"}
        # A raw upload: the answer and Stat carry it; header names' case means
        # nothing (keys are lowercased, as envd does); the first of a repeated
        # header wins.
        c = self.conn()
        c.putrequest("POST", "/files?path=/home/user/m.txt")
        for k, v in (("E2b-Sandbox-Id", sb["sandboxID"]), ("E2b-Sandbox-Port", ENVD),
                     ("X-Access-Token", sb["envdAccessToken"]), ("Content-Type", raw["Content-Type"]),
                     ("Content-Length", "2"), ("X-Metadata-Author", "mish"),
                     ("x-metadata-purpose", "up load"), ("X-Metadata-author", "second"),
                     ("X-Metadata-empty", "")):
            c.putheader(k, v)
        c.endheaders(b"hi")
        r = c.getresponse()
        body = r.read()
        c.close()
        self.assertEqual(r.status, 200, body)
        want = {"author": "mish", "purpose": "up load", "empty": ""}
        self.assertEqual(json.loads(body), [{"path": "/home/user/m.txt", "name": "m.txt",
                                             "type": "file", "metadata": want}])
        self.assertEqual(self.stat(sb, "/home/user/m.txt")["metadata"], want)
        self.assertIn("'user.e2b.author'", self.sh(
            sb, "python3 -c \"import os; print(os.listxattr('/home/user/m.txt'))\""))
        # Multipart with several files: each gets the same metadata.
        mp = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/md/a\"\r\n\r\nA\r\n"
              b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/md/b\"\r\n\r\nB\r\n"
              b"--XyZ--\r\n")
        st, _, body = self.envd(sb, "POST", "/files", mp,
                                {"Content-Type": "multipart/form-data; boundary=XyZ",
                                 "X-Metadata-source": "suite"})
        self.assertEqual(st, 200, body)
        self.assertEqual([e.get("metadata") for e in json.loads(body)], [{"source": "suite"}] * 2)
        # ListDir shows it; a symlink to such a file has none (not followed),
        # nor do entries without user.e2b.* attributes.
        self.sh(sb, "ln -s /tmp/md/a /tmp/md/link; echo x > /tmp/md/plain")
        st, body = self.unary(sb, "filesystem.Filesystem/ListDir", {"path": "/tmp/md"})
        self.assertEqual(st, 200, body)
        got = dict((e["name"], e.get("metadata")) for e in body["entries"])
        self.assertEqual(got, {"a": {"source": "suite"}, "b": {"source": "suite"}, "link": None,
                               "plain": None})
        self.assertNotIn("metadata", self.stat(sb, "/tmp/md/link"))
        # Move keeps it, within one mount and across /tmp and /home/user (a copy).
        st, body = self.unary(sb, "filesystem.Filesystem/Move",
                              {"source": "/tmp/md/a", "destination": "/tmp/md/a2"})
        self.assertEqual((st, body["entry"].get("metadata")), (200, {"source": "suite"}), body)
        st, body = self.unary(sb, "filesystem.Filesystem/Move",
                              {"source": "/tmp/md/a2", "destination": "/home/user/a3"})
        self.assertEqual((st, body["entry"].get("metadata")), (200, {"source": "suite"}), body)
        # Overwriting without metadata leaves none of the old.
        st, _, body = self.envd(sb, "POST", "/files?path=/home/user/m.txt", b"again", raw)
        self.assertEqual((st, json.loads(body)[0].get("metadata")), (200, None), body)
        self.assertNotIn("metadata", self.stat(sb, "/home/user/m.txt"))
        # ... and with other metadata, only the new.
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/md/b", b"B2",
                                dict(raw, **{"X-Metadata-other": "1"}))
        self.assertEqual(st, 200, body)
        self.assertEqual(self.stat(sb, "/tmp/md/b")["metadata"], {"other": "1"})
        # Set inside the sandbox: surfaced with the prefix stripped; other
        # user.* attributes and pairs beyond our bounds are left out, never an
        # error; a directory has metadata too.
        self.sh(sb, "python3 -c \"import os\n"
                    "os.setxattr('/tmp/md/plain', 'user.e2b.author', b'oob')\n"
                    "os.setxattr('/tmp/md/plain', 'user.other', b'x')\n"
                    "os.setxattr('/tmp/md/plain', 'user.e2b.big', b'v' * 2000)\n"
                    "os.setxattr('/tmp/md/plain', 'user.e2b.ctl', b'a\\nb')\n"
                    "os.setxattr('/tmp/md/plain', 'user.e2b.bad key', b'x')\n"
                    "os.setxattr('/tmp/md', 'user.e2b.dir', b'yes')\"")
        self.assertEqual(self.stat(sb, "/tmp/md/plain")["metadata"], {"author": "oob"})
        self.assertEqual(self.stat(sb, "/tmp/md")["metadata"], {"dir": "yes"})
        st, body = self.unary(sb, "filesystem.Filesystem/ListDir", {"path": "/tmp", "depth": 2})
        got = dict((e["path"], e.get("metadata")) for e in body["entries"])
        self.assertEqual((got["/tmp/md"], got["/tmp/md/plain"]), ({"dir": "yes"}, {"author": "oob"}))
        # A file the user cannot read shows no metadata to the user (the
        # kernel's check on user.*), and root sees it.
        self.sh(sb, "chmod 000 /tmp/md/b")
        self.assertNotIn("metadata", self.stat(sb, "/tmp/md/b"))
        self.sh(sb, "chmod 644 /tmp/md/b")
        self.assertAlive(sb)

    def test_files_metadata_refused(self):
        sb = self.new_sandbox()
        raw = {"Content-Type": "application/octet-stream"}

        def refused(headers, path="/tmp/bad", body=b"data"):
            st, _, data = self.envd(sb, "POST", "/files?path=" + path, body, dict(raw, **headers))
            self.assertEqual(st, 400, (headers, data))
            st, _, _ = self.envd(sb, "GET", "/files?path=" + path)
            self.assertEqual(st, 404, headers)  # no file
            return data

        # Bytes that are no token in the key, or not printable ASCII in the
        # value: a 400 (ours, or the HTTP parser's) and no file.
        for line in (b"X-Metadata-: v", b"X-Metadata-a@b: v", b"X-Metadata-a(b: v",
                     b"X-Metadata-\xc3\xa9: v", b"X-Metadata-k: \x01", b"X-Metadata-k: a\x7fb",
                     b"X-Metadata-k: caf\xc3\xa9", b"X-Metadata-k: \xff", b"X-Metadata-k: a\tb"):
            st, data = self.raw_post(sb, "/files?path=/tmp/hostile", [line], b"data")
            self.assertEqual(st, 400, (line, data))
            st, _, _ = self.envd(sb, "GET", "/files?path=/tmp/hostile")
            self.assertEqual(st, 404, line)
        # The bounds: 32 keys, keys of 64 bytes, values of 1024, 4096 bytes
        # in all counting 9 per key (envd's budget).
        self.assertIn(b"at most 32 metadata keys",
                      refused(dict(("X-Metadata-k%d" % i, "v") for i in range(33))))
        refused({"X-Metadata-" + "k" * 65: "v"})
        self.assertIn(b"at most 1024", refused({"X-Metadata-k": "v" * 1025}))
        self.assertIn(b"at most 4096 bytes",
                      refused(dict(("X-Metadata-%s%d" % ("k" * 63, i), "v" * 1000) for i in range(4))))
        # A multipart upload refused is refused whole: none of its files.
        mp = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/mp1\"\r\n\r\nA\r\n"
              b"--XyZ--\r\n")
        st, _, body = self.envd(sb, "POST", "/files", mp, {"Content-Type": "multipart/form-data; boundary=XyZ",
                                                         "X-Metadata-k": "v" * 1025})
        self.assertEqual(st, 400, body)
        self.assertIn(b"at most 1024", body)
        st, _, _ = self.envd(sb, "GET", "/files?path=/tmp/mp1")
        self.assertEqual(st, 404)
        # At the bounds exactly: accepted.
        at = dict(("X-Metadata-k%02d" % i, "v") for i in range(32))
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/at32", b"x", dict(raw, **at))
        self.assertEqual(st, 200, body)
        self.assertEqual(len(self.stat(sb, "/tmp/at32")["metadata"]), 32)
        big = {"X-Metadata-" + "k" * 64: "v" * 1024, "X-Metadata-" + "j" * 64: "w" * 1024,
               "X-Metadata-" + "i" * 64: "x" * 1024}
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/atbig", b"x", dict(raw, **big))
        self.assertEqual(st, 200, body)
        self.assertEqual(self.stat(sb, "/tmp/atbig")["metadata"]["k" * 64], "v" * 1024)
        # A refused overwrite leaves the old file as it was.
        st, _, body = self.envd(sb, "POST", "/files?path=/tmp/atbig", b"new",
                                dict(raw, **{"X-Metadata-k": "v" * 1025}))
        self.assertEqual(st, 400, body)
        st, _, got = self.envd(sb, "GET", "/files?path=/tmp/atbig")
        self.assertEqual((st, got), (200, b"x"))
        self.assertEqual(len(self.stat(sb, "/tmp/atbig")["metadata"]), 3)
        self.assertAlive(sb)

    def test_files_download_errors(self):
        sb = self.new_sandbox()
        st, _, body = self.envd(sb, "GET", "/files?path=/tmp")
        self.assertEqual(st, 400, body)
        st, _, body = self.envd(sb, "GET", "/files?path=/nope")
        self.assertEqual(st, 404, body)
        st, _, body = self.envd(sb, "GET", "/files")
        self.assertEqual(st, 400, body)
        st, _, body = self.envd(sb, "GET", "/files?path=/etc/hostname&username=nobody")
        self.assertEqual(st, 401, body)
        st, _, body = self.envd(sb, "GET", "/files?path=/etc/hostname&signature=v1_x"
                                "&signature_expiration=1", token=False)
        self.assertEqual(st, 401, body)

    # ---- control plane -----------------------------------------------------

    def test_control_plane_rejects_bad_input(self):
        h = {"X-API-Key": self.key, "Content-Type": "application/json"}
        for body, status in ((b"{", 400), (b"[]", 400), (b'{"templateID": 5}', 400),
                             (b'{}', 400), (b'{"templateID":"base","timeout":0}', 400),
                             (b'{"templateID":"base","timeout":-5}', 400),
                             (b'{"templateID":"base","timeout":"60"}', 400),
                             (b'{"templateID":"base","timeout":999999999}', 400),
                             (b'{"templateID":"base","envVars":{"A=B":"y"}}', 400),
                             (b'{"templateID":"base","metadata":{"a":1}}', 400),
                             (b'{"templateID":"base","bogus":1}', 400),
                             (b'{"templateID":"base","autoPause":1}', 400),
                             (b'{"templateID":"base","autoResume":{"enabled":true}}', 400),
                             (b'{"templateID":"base","network":{"allowOut":["x.com"]}}', 400),
                             (b'{"templateID":"../../base"}', 404)):
            st, _, data = self.request("POST", "/v2/sandboxes", body, h)
            self.assertEqual(st, status, (body, data))
            self.assertEqual(json.loads(data)["code"], status)
        st, _, data = self.request("POST", "/v2/sandboxes", b"{}", {"Content-Type": "application/json"})
        self.assertEqual(st, 401, data)
        for q in ("limit=0", "limit=x", "limit=100000", "state=dead", "order=up",
                  "nextToken=zzz", "metadata=a%3D%25zz", "startedAfter=yesterday",
                  "startedAfter=2026-12-01T10:00:00%2B01:00"):
            st, _, data = self.request("GET", "/v2/sandboxes?" + q, headers=h)
            self.assertEqual(st, 400, (q, data))
        mine = self.new_sandbox()["sandboxID"]
        st, _, data = self.request("GET", "/v2/sandboxes?template=base&limit=1000", headers=h)
        self.assertIn(mine, [s["sandboxID"] for s in json.loads(data)])
        st, _, data = self.request("GET", "/v2/sandboxes?template=code-interpreter-v1", headers=h)
        self.assertNotIn(mine, [s["sandboxID"] for s in json.loads(data)])
        st, _, data = self.request("GET", "/sandboxes/" + "a" * 20, headers=h)
        self.assertEqual(st, 404, data)
        st, _, data = self.request("POST", "/sandboxes/%s/timeout" % ("a" * 20), b'{"timeout":10}', h)
        self.assertEqual(st, 404, data)
        sb = self.new_sandbox()
        for body in (b'{}', b'{"timeout":0}', b'{"timeout":"x"}', b'{"timeout":1.5}'):
            st, _, data = self.request("POST", "/sandboxes/%s/timeout" % sb["sandboxID"], body, h)
            self.assertEqual(st, 400, (body, data))
        st, _, data = self.request("POST", "/sandboxes/%s/pause" % sb["sandboxID"], b'{"x":1}', h)
        self.assertEqual(st, 400, data)
        st, _, data = self.request("POST", "/sandboxes/%s/fork" % sb["sandboxID"], b'{"count":0}', h)
        self.assertEqual(st, 400, data)
        self.assertAlive(sb)

    # ---- many streams ------------------------------------------------------

    def test_a_stalled_reader_blocks_nobody_else(self):
        a, b = self.new_sandbox(), self.new_sandbox()
        # A stream of endless output that its client never reads.
        stalled = self.conn()
        stalled.request("POST", "/process.Process/Start", body=envelope(
            {"process": {"cmd": "/usr/bin/yes", "args": ["x" * 1000]}, "stdin": False}),
            headers={"E2b-Sandbox-Id": a["sandboxID"], "E2b-Sandbox-Port": ENVD,
                     "X-Access-Token": a["envdAccessToken"],
                     "Content-Type": "application/connect+json"})
        stalled.getresponse()  # headers only; the body is never read
        # Forty more streams at once, in both sandboxes, all complete.
        import threading
        results = []

        def one(sb, i):
            st, _, data = self.stream(sb, "process.Process/Start", envelope(
                {"process": {"cmd": "/bin/echo", "args": ["n%d" % i]}, "stdin": False}))
            env = parse_envelopes(data)
            out = b"".join(base64.b64decode(e["event"]["data"]["stdout"])
                           for f, e in env if f == 0 and "data" in e.get("event", {}))
            results.append(out == b"n%d\n" % i)

        threads = [threading.Thread(target=one, args=(a if i % 2 else b, i)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(results, [True] * 40)
        # The stalled command is paced by its own reader (it waits), and
        # nothing else is.
        st, body = self.unary(a, "process.Process/List", {})
        self.assertEqual(len(body["processes"]), 1)
        stalled.close()
        pid = body["processes"][0]["pid"]
        st, body = self.unary(a, "process.Process/SendSignal",
                              {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
        self.assertEqual(st, 200, body)

    # ---- polled watchers -----------------------------------------------------

    def test_polled_watchers(self):
        a, b = self.new_sandbox(), self.new_sandbox()
        st, body = self.unary(a, "filesystem.Filesystem/MakeDir", {"path": "/tmp/pw"})
        self.assertEqual(st, 200, body)
        st, body = self.unary(a, "filesystem.Filesystem/CreateWatcher",
                              {"path": "/tmp/pw", "includeEntry": True})
        self.assertEqual(st, 200, body)
        wid = body["watcherId"]
        st, _, _ = self.envd(a, "POST", "/files?path=/tmp/pw/f.txt", b"hello",
                             {"Content-Type": "application/octet-stream"})
        self.assertEqual(st, 200)
        events = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e["name"] == "f.txt" for e in events):
            st, body = self.unary(a, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
            self.assertEqual(st, 200, body)
            events += body["events"]
            time.sleep(0.05)
        self.assertIn("f.txt", [e["name"] for e in events if e["type"] == "EVENT_TYPE_CREATE"])
        # The upload's own temporary name is not the user's business.
        self.assertFalse([e for e in events if e["name"] != "f.txt"], events)
        created = [e for e in events if e["type"] == "EVENT_TYPE_CREATE"]
        self.assertEqual(created[0]["entry"]["size"], "5")
        # Another sandbox cannot use it, even with its own valid token.
        st, body = self.unary(b, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        self.assertConnectError(st, body, 404, "not_found")
        st, body = self.unary(b, "filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
        self.assertConnectError(st, body, 404, "not_found")
        for bad in ({}, {"watcherId": 5}, {"watcherId": wid, "x": 1}):
            st, body = self.unary(a, "filesystem.Filesystem/GetWatcherEvents", bad)
            self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(a, "filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
        self.assertEqual(st, 200, body)
        st, body = self.unary(a, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        self.assertConnectError(st, body, 404, "not_found")
        st, body = self.unary(a, "filesystem.Filesystem/CreateWatcher", {"path": "/nope"})
        self.assertConnectError(st, body, 404, "not_found")
        # The sandbox's own limit of watches holds for polled watchers too.
        made = []
        for _ in range(70):
            st, body = self.unary(a, "filesystem.Filesystem/CreateWatcher", {"path": "/tmp/pw"})
            if st != 200:
                break
            made.append(body["watcherId"])
        self.assertConnectError(st, body, 429, "resource_exhausted")
        self.assertLessEqual(len(made), 64)

    # ---- terminals -----------------------------------------------------------

    def test_pty_sizes_and_updates(self):
        sb = self.new_sandbox()
        for pty in ({}, {"size": {}}, {"size": {"cols": 0, "rows": 24}},
                    {"size": {"cols": 80, "rows": 70000}}, {"size": {"cols": "80", "rows": 24}},
                    {"size": {"cols": -1, "rows": 24}}, "x"):
            st, _, data = self.stream(sb, "process.Process/Start", envelope(
                {"process": {"cmd": "/bin/true"}, "pty": pty}))
            self.assertStreamError(st, data, "invalid_argument")
        c = self.conn()
        c.request("POST", "/process.Process/Start", body=envelope(
            {"process": {"cmd": "/bin/cat"}, "stdin": True}),
            headers={"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": ENVD,
                     "X-Access-Token": sb["envdAccessToken"],
                     "Content-Type": "application/connect+json"})
        self.assertEqual(c.getresponse().status, 200)
        st, body = self.unary(sb, "process.Process/List", {})
        pid = body["processes"][0]["pid"]
        st, body = self.unary(sb, "process.Process/Update",
                              {"process": {"pid": pid}, "pty": {"size": {"cols": 10, "rows": 10}}})
        self.assertConnectError(st, body, 400, "invalid_argument")  # no terminal
        st, body = self.unary(sb, "process.Process/Update",
                              {"process": {"pid": pid}, "pty": {"size": {"cols": 0, "rows": 10}}})
        self.assertConnectError(st, body, 400, "invalid_argument")
        st, body = self.unary(sb, "process.Process/Update",
                              {"process": {"pid": 99999}, "pty": {"size": {"cols": 9, "rows": 9}}})
        self.assertConnectError(st, body, 404, "not_found")
        c.close()
        self.unary(sb, "process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
