"""Bad input: every malformed or out-of-range request gets the right status
and a JSON {code, error, message} body, and changes nothing. Then the TCP
listener: API keys, key management, tenant isolation, revocation."""
import json
import socket

from harness import DaemonTest
from sbx_helpers import MIB, error_body_ok, q, raw_unix, sandbox_ids

# A broad but quick module: the sanitizer build runs it too.
ASAN_SUBSET = True

MARKER = "/tmp/marker"


class BodyErrors(DaemonTest):
    """Malformed bodies, on every route that takes one."""

    def json_routes(self, sid, pid):
        p = "/v1/sandboxes/" + sid
        return [("POST", "/v1/sandboxes"), ("POST", p + "/timeout"), ("POST", p + "/exec"),
                ("POST", p + "/processes"), ("POST", p + "/processes/%d/signal" % pid),
                ("POST", p + "/files/mkdir"), ("POST", p + "/files/move"), ("POST", "/v1/keys")]

    def test_malformed_bodies(self):
        sid = self.d.create()
        pid = self.background_sleep(sid)
        bodies = ['{', '{"a":}', 'nul', '{"a" 1}', "{'a': 1}", '{"a":1}x', '\xff',
                  '[]', '[{"argv": ["true"]}]', '"string"', '42', 'null', 'true']
        for method, path in self.json_routes(sid, pid):
            for body in bodies:
                with self.subTest(path=path, body=body):
                    r = self.d.api(method, path, body.encode("latin-1"), raw=True)
                    self.assertError(r, 400, "invalid_argument")
        self.assertNothingChanged(sid, pid)

    def test_unknown_fields_are_named(self):
        sid = self.d.create()
        pid = self.background_sleep(sid)
        for method, path in self.json_routes(sid, pid):
            with self.subTest(path=path):
                r = self.d.api(method, path, {"memroy": "1G"})
                body = self.assertError(r, 400, "invalid_argument")
                self.assertIn("memroy", body["message"])
        # Also next to valid fields, and for fields that exist elsewhere.
        p = "/v1/sandboxes/" + sid
        for path, body, field in (
                ("/v1/sandboxes", {"memory": "1G", "argv": ["x"]}, "argv"),
                (p + "/exec", {"cmd": "touch " + MARKER, "memory": "1G"}, "memory"),
                (p + "/processes", {"cmd": "touch " + MARKER, "stream": True}, "stream"),
                (p + "/processes", {"cmd": "touch " + MARKER, "max_output": 10}, "max_output"),
                (p + "/timeout", {"timeout": 60, "extra": 1}, "extra")):
            with self.subTest(body=body):
                r = self.d.api("POST", path, body)
                self.assertIn(field, self.assertError(r, 400, "invalid_argument")["message"])
        self.assertNothingChanged(sid, pid)

    def test_duplicate_keys_and_nul(self):
        sid = self.d.create()
        p = "/v1/sandboxes/" + sid
        cases = [
            ("/v1/sandboxes", '{"memory": "64M", "memory": "128M"}'),
            ("/v1/sandboxes", '{"env": {"A": "1", "A": "2"}}'),
            ("/v1/sandboxes", '{"template": "ba\\u0000se"}'),
            ("/v1/sandboxes", '{"env": {"A": "x\\u0000y"}}'),
            ("/v1/sandboxes", '{"env": {"A\\u0000B": "x"}}'),
            ("/v1/sandboxes", '{"metadata": {"k": "\\u0000"}}'),
            (p + "/exec", '{"cmd": "touch %s", "cmd": "true"}' % MARKER),
            (p + "/exec", '{"cmd": "touch %s\\u0000; true"}' % MARKER),
            (p + "/exec", '{"argv": ["touch", "%s\\u0000"]}' % MARKER),
            (p + "/exec", '{"argv": ["touch", "%s"], "cwd": "/tmp\\u0000"}' % MARKER),
            (p + "/exec", '{"argv": ["touch", "%s"], "stdin": "\\u0000"}' % MARKER),
        ]
        before = sandbox_ids(self.d)
        for path, body in cases:
            with self.subTest(body=body):
                self.assertError(self.d.api("POST", path, body.encode(), raw=True), 400,
                                 "invalid_argument")
        self.assertEqual(sandbox_ids(self.d), before)
        self.assertNoMarker(sid)

    def test_oversized_bodies(self):
        sid = self.d.create()
        big = b'{"cmd": "touch /tmp/marker", "env": {"X": "' + b"a" * MIB + b'"}}'
        p = "/v1/sandboxes/" + sid
        for path in ("/v1/sandboxes", p + "/exec", p + "/processes", p + "/timeout",
                     p + "/files/mkdir", "/v1/keys"):
            with self.subTest(path=path, encoding="content-length"):
                head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
                    path.encode(), len(big))
                error_body_ok(self, raw_unix(self.d, head, big), 413, "too_large")
            with self.subTest(path=path, encoding="chunked"):
                chunked = b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 65536]), big[i:i + 65536])
                                   for i in range(0, len(big), 65536)) + b"0\r\n\r\n"
                head = (b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                        b"Connection: close\r\n\r\n" % path.encode())
                error_body_ok(self, raw_unix(self.d, head, chunked), 413, "too_large")
        self.assertEqual(sandbox_ids(self.d), [sid])
        self.assertNoMarker(sid)
        # Exactly 1 MiB is still accepted.
        body = b"{}" + b" " * (MIB - 2)
        r = self.d.api("POST", "/v1/sandboxes", body, raw=True)
        self.assertEqual(r.status, 201, r)
        # Process stdin takes raw bytes, at most 1 MiB per request.
        pid = self.d.api("POST", p + "/processes",
                         {"argv": ["cat"], "stdin_open": True}).json()["pid"]
        head = b"POST %s/processes/%d/stdin HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
            p.encode(), pid, MIB + 1)
        error_body_ok(self, raw_unix(self.d, head, b"x" * (MIB + 1)), 413, "too_large")
        r = self.d.api("POST", p + "/processes/%d/stdin?eof=1" % pid, b"y" * MIB, raw=True)
        self.assertEqual(r.status, 204, r)
        res = self.d.api("GET", p + "/processes/%d/wait" % pid).json()
        self.assertEqual(res["stdout"], "y" * MIB)  # nothing of the refused write

    # ---- helpers --------------------------------------------------------

    def background_sleep(self, sid):
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": ["sleep", "300"]})
        self.assertEqual(r.status, 201, r)
        return r.json()["pid"]

    def assertNoMarker(self, sid):
        r = self.d.api("GET", "/v1/sandboxes/%s/files/stat?%s" % (sid, q(path=MARKER)))
        self.assertEqual(r.status, 404, "a refused request ran a command: %r" % r)

    def assertNothingChanged(self, sid, pid):
        self.assertEqual(sandbox_ids(self.d), [sid])
        self.assertNoMarker(sid)
        sb = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual(sb["timeout"], 300)
        procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % sid).json()["processes"]
        self.assertEqual([(p["pid"], p["running"]) for p in procs], [(pid, True)])
        self.assertEqual(self.d.api("GET", "/v1/keys").json()["keys"], [])
        r = self.d.api("GET", "/v1/sandboxes/%s/files/list?path=/home/user" % sid)
        self.assertEqual(r.json()["entries"], [])


class CreateErrors(DaemonTest):
    """Every create field with a wrong type or an out-of-range value."""

    BAD = [
        # (field, value, words the message must contain)
        ("template", 1, "template"), ("template", ["base"], "template"),
        ("template", "", "template"),
        ("timeout", True, "timeout"), ("timeout", [60], "timeout"), ("timeout", {}, "timeout"),
        ("timeout", "soon", "timeout"), ("timeout", 0, "timeout"), ("timeout", "0s", "timeout"),
        ("timeout", -1, "timeout"), ("timeout", 0.5, "timeout"), ("timeout", "10d", "timeout"),
        ("timeout", 86401, "timeout"), ("timeout", "25h", "timeout"),
        ("memory", True, "memory"), ("memory", [1], "memory"), ("memory", "lots", "memory"),
        ("memory", 1.5, "memory"), ("memory", "1P", "memory"), ("memory", "1K", "memory"),
        ("memory", 1024, "memory"), ("memory", "15M", "memory"), ("memory", -1, "memory"),
        ("memory", 0, "memory"), ("memory", "-64M", "memory"), ("memory", "1T", "memory"),
        ("cpus", True, "cpus"), ("cpus", "many", "cpus"), ("cpus", [1], "cpus"),
        ("cpus", 0, "cpus"), ("cpus", "0", "cpus"), ("cpus", 0.001, "cpus"), ("cpus", -1, "cpus"),
        ("cpus", 1000, "cpus"), ("cpus", "1000", "cpus"), ("cpus", 0.0004, "cpus"),
        ("cpus", "0.0001", "cpus"), ("memory", "0", "memory"), ("disk", "0K", "disk"),
        ("pids", "64", "pids"), ("pids", 1.5, "pids"), ("pids", True, "pids"),
        ("pids", 0, "pids"), ("pids", 15, "pids"), ("pids", -5, "pids"),
        ("pids", 65537, "pids"), ("pids", 10 ** 6, "pids"), ("pids", 2 ** 40, "pids"),
        ("disk", 0, "disk"), ("disk", "512K", "disk"), ("disk", "300G", "disk"),
        ("disk", -1, "disk"), ("disk", True, "disk"), ("disk", 2.5, "disk"),
        ("env", "A=B", "env"), ("env", ["A=B"], "env"), ("env", {"A": 1}, "env"),
        ("env", {"A": None}, "env"), ("env", {"A": ["x"]}, "env"), ("env", {"A=B": "x"}, "env"),
        ("env", {"": "x"}, "env"), ("env", {"A" * 257: "x"}, "env"),
        ("metadata", [], "metadata"), ("metadata", "k=v", "metadata"),
        ("metadata", {"k": 1}, "metadata"), ("metadata", {"k": {"x": "y"}}, "metadata"),
        ("metadata", {"k": "v" * 1025}, "metadata"), ("metadata", {"k" * 129: "v"}, "metadata"),
        ("metadata", {"": "v"}, "metadata"),
        ("metadata", {"k%d" % i: "v" for i in range(65)}, "metadata"),
        ("user", 1000, "user"), ("user", "bob", "user"), ("user", "", "user"),
        ("user", "ROOT", "user"),
    ]

    def test_bad_values(self):
        for field, value, word in self.BAD:
            with self.subTest(field=field, value=repr(value)[:40]):
                r = self.d.api("POST", "/v1/sandboxes", {field: value})
                body = self.assertError(r, 400, "invalid_argument")
                self.assertIn(word, body["message"])
                self.assertNotIn("\n", body["message"])
        self.assertEqual(sandbox_ids(self.d), [])
        self.assertEqual(self.d.api("GET", "/v1/info").json()["sandboxes"], 0)

    def test_unknown_template_is_not_found(self):
        # A well-formed name of no template: 404, naming it; nothing made.
        body = self.assertError(self.d.api("POST", "/v1/sandboxes", {"template": "nope"}), 404,
                                "not_found")
        self.assertIn("`nope`", body["message"])
        self.assertEqual(sandbox_ids(self.d), [])

    def test_env_too_large(self):
        many = {"V%d" % i: "x" for i in range(257)}
        huge = {"V%d" % i: "x" * 1024 for i in range(130)}  # > 128 KiB in all
        for env in (many, huge):
            self.assertError(self.d.api("POST", "/v1/sandboxes", {"env": env}), 400,
                             "invalid_argument")
        self.assertEqual(sandbox_ids(self.d), [])

    def test_boundaries_are_accepted(self):
        ok = [{"pids": 16}, {"pids": 65536}, {"timeout": 1}, {"timeout": "24h"},
              {"memory": "16M"}, {"disk": "1M"}, {"cpus": 0.01},
              {"env": {"V%d" % i: "x" for i in range(256)}},
              {"metadata": {"k%03d" % i: "v" * 1024 for i in range(63)} | {"k" * 128: "v"}}]
        for body in ok:
            with self.subTest(body=repr(body)[:60]):
                r = self.d.api("POST", "/v1/sandboxes", body)
                self.assertEqual(r.status, 201, r)
                self.d.kill(r.json()["id"])


class ExecErrors(DaemonTest):
    """A refused exec or process start runs nothing."""

    BAD = [
        {},
        {"cmd": "touch " + MARKER, "argv": ["touch", MARKER]},
        {"argv": []}, {"argv": "touch " + MARKER}, {"argv": ["touch", MARKER, 1]},
        {"argv": [""]}, {"argv": None, "cmd": None},
        {"cmd": ["touch", MARKER]}, {"cmd": 1},
        {"cmd": "touch " + MARKER, "env": {"A=B": "x"}},
        {"cmd": "touch " + MARKER, "env": {"A": 1}},
        {"cmd": "touch " + MARKER, "env": ["A=B"]},
        {"cmd": "touch " + MARKER, "cwd": "tmp"},
        {"cmd": "touch " + MARKER, "cwd": 1},
        {"cmd": "touch " + MARKER, "user": "bob"},
        {"cmd": "touch " + MARKER, "user": 0},
        {"cmd": "touch " + MARKER, "stdin": "a", "stdin_b64": "YQ=="},
        {"cmd": "touch " + MARKER, "stdin_b64": "not base64!"},
        {"cmd": "touch " + MARKER, "stdin": 1},
        {"cmd": "touch " + MARKER, "stdin_open": "yes"},
        {"cmd": "touch " + MARKER, "timeout": 0},
        {"cmd": "touch " + MARKER, "timeout": "fast"},
        {"cmd": "touch " + MARKER, "timeout": -2},
        {"cmd": "touch " + MARKER, "stream": 1},
        {"cmd": "touch " + MARKER, "encoding": "hex"},
        {"cmd": "touch " + MARKER, "encoding": 64},
        {"cmd": "touch " + MARKER, "max_output": "1T"},
        {"cmd": "touch " + MARKER, "max_output": -1},
        {"cmd": "touch " + MARKER, "max_output": "big"},
    ]
    BG_ONLY_BAD = [{"cmd": "touch " + MARKER, "stream": False},
                   {"cmd": "touch " + MARKER, "max_output": 100},
                   {"cmd": "touch " + MARKER, "encoding": "utf8"}]

    def test_bad_exec_runs_nothing(self):
        sid = self.d.create()
        p = "/v1/sandboxes/" + sid
        for route, bodies in (("/exec", self.BAD), ("/processes", self.BAD + self.BG_ONLY_BAD)):
            for body in bodies:
                with self.subTest(route=route, body=body):
                    self.assertError(self.d.api("POST", p + route, body), 400, "invalid_argument")
        # A command over 1000 KiB (argv, env and cwd) is too large, not run.
        huge = {"argv": ["touch", MARKER] + ["x" * 1000] * 1040}
        for route in ("/exec", "/processes"):
            self.assertError(self.d.api("POST", p + route, huge), 413, "too_large")
        r = self.d.api("GET", "/v1/sandboxes/%s/files/stat?%s" % (sid, q(path=MARKER)))
        self.assertEqual(r.status, 404, "a refused exec ran: %r" % r)
        self.assertEqual(self.d.api("GET", p + "/processes").json()["processes"], [])
        # The same command, well formed, does run (the marker test is real).
        self.assertEqual(self.d.exec(sid, cmd="touch " + MARKER)["exit_code"], 0)
        r = self.d.api("GET", "/v1/sandboxes/%s/files/stat?%s" % (sid, q(path=MARKER)))
        self.assertEqual(r.status, 200, r)

    def test_process_route_errors(self):
        sid = self.d.create()
        p = "/v1/sandboxes/" + sid
        pid = self.d.api("POST", p + "/processes",
                         {"cmd": "trap 'touch %s' TERM HUP INT USR1; sleep 300 & wait" % MARKER,
                          "stdin_open": True}).json()["pid"]
        pp = p + "/processes/%d" % pid
        for body in ({"signal": "SIGFOO"}, {"signal": "TERM9"}, {"signal": 0}, {"signal": 32},
                     {"signal": 99}, {"signal": -15}, {"signal": 1.5}, {"signal": ["TERM"]},
                     {"signal": True}, {"sig": "TERM"},
                     # 2^32 + 1 and 2^32 + 9: not SIGHUP and SIGKILL (fuzz_json).
                     {"signal": 4294967297}, {"signal": 4294967305}):
            with self.subTest(body=body):
                self.assertError(self.d.api("POST", pp + "/signal", body), 400, "invalid_argument")
        for query in ("timeout=soon", "timeout=-1", "timeout=0x10", "encoding=hex"):
            with self.subTest(query=query):
                self.assertError(self.d.api("GET", pp + "/wait?" + query), 400, "invalid_argument")
        self.assertError(self.d.api("GET", pp + "/attach?encoding=hex"), 400, "invalid_argument")
        r = self.d.api("POST", pp + "/stdin?eof=maybe", b"x", raw=True)
        self.assertError(r, 400, "invalid_argument")
        # Still running, stdin still open, no signal delivered.
        info = self.d.api("GET", pp).json()
        self.assertTrue(info["running"], info)
        self.assertTrue(info["stdin_open"], info)
        r = self.d.api("GET", "/v1/sandboxes/%s/files/stat?%s" % (sid, q(path=MARKER)))
        self.assertEqual(r.status, 404, r)
        # Unknown processes: 404; not a number: 400.
        for bad in ("99999", "123456"):
            for method, suffix, body in (("GET", "", None), ("GET", "/wait", None),
                                         ("GET", "/attach", None),
                                         ("POST", "/signal", {"signal": "SIGKILL"}),
                                         ("POST", "/stdin", b"x")):
                with self.subTest(pid=bad, route=suffix):
                    r = self.d.api(method, p + "/processes/" + bad + suffix, body,
                                   raw=isinstance(body, bytes))
                    self.assertError(r, 404, "not_found")
        for bad in ("abc", "-1", "0", "1.5", "99999999999"):
            with self.subTest(pid=bad):
                self.assertError(self.d.api("GET", p + "/processes/" + bad), 400,
                                 "invalid_argument")


class RouteErrors(DaemonTest):
    def test_unknown_sandbox_ids(self):
        real = self.d.create()
        for sid in ("aaaaaaaaaaaaaaaaaaaa", real[:-1] + ("a" if real[-1] != "a" else "b"),
                    "short", "UPPERCASEUPPERCASE12", "a" * 21, "a" * 200, "..", "%2e%2e",
                    "with%20space", "%ff", "%c3%a9", real.upper()):
            for method, suffix, body in (
                    ("GET", "", None), ("DELETE", "", None), ("POST", "/timeout", {"timeout": 60}),
                    ("GET", "/metrics", None), ("POST", "/exec", {"argv": ["true"]}),
                    ("POST", "/processes", {"argv": ["true"]}), ("GET", "/processes", None),
                    ("GET", "/processes/1", None), ("GET", "/files?path=/tmp/x", None),
                    ("GET", "/files/stat?path=/tmp", None), ("GET", "/files/list?path=/tmp", None),
                    ("POST", "/files/mkdir", {"path": "/tmp/x"}),
                    ("POST", "/files/move", {"from": "/tmp/a", "to": "/tmp/b"}),
                    ("DELETE", "/files?path=/tmp/x", None)):
                with self.subTest(id=sid, method=method, route=suffix):
                    r = self.d.api(method, "/v1/sandboxes/" + sid + suffix, body)
                    self.assertError(r, 404, "not_found")
            with self.subTest(id=sid, method="PUT"):
                r = self.d.upload(sid, "/tmp/x", b"data")
                self.assertError(r, 404, "not_found")
        self.assertEqual(sandbox_ids(self.d), [real])

    def test_unknown_routes_and_methods(self):
        sid = self.d.create()
        for path in ("/", "/v1", "/v3/sandboxes", "/v1/nothing", "/v1/sandboxes/%s/nothing" % sid,
                     "/v1/sandboxes/%s/files/nothing" % sid, "/v1/sandboxes/%s/processes/1/x" % sid,
                     "/v1/sandboxes/a/b/c/d/e/f/g/h/i", "/healthz/x", "/v1/keys/a/b",
                     "/" + "x" * 3000):
            with self.subTest(path=path[:60]):
                self.assertError(self.d.api("GET", path), 404, "not_found")
        for method, path in (("PUT", "/v1/sandboxes"), ("DELETE", "/v1/sandboxes"),
                             ("PATCH", "/v1/sandboxes/" + sid), ("PUT", "/v1/sandboxes/" + sid),
                             ("POST", "/healthz"), ("DELETE", "/v1/info"),
                             ("GET", "/v1/sandboxes/%s/exec" % sid),
                             ("GET", "/v1/sandboxes/%s/timeout" % sid),
                             ("POST", "/v1/sandboxes/%s/metrics" % sid),
                             ("POST", "/v1/sandboxes/%s/files" % sid),
                             ("PUT", "/v1/sandboxes/%s/files/stat" % sid),
                             ("GET", "/v1/sandboxes/%s/files/mkdir" % sid),
                             ("DELETE", "/v1/sandboxes/%s/processes" % sid),
                             ("GET", "/v1/sandboxes/%s/processes/1/stdin" % sid),
                             ("PUT", "/v1/keys"), ("GET", "/v1/keys/k123")):
            with self.subTest(method=method, path=path):
                self.assertError(self.d.api(method, path), 405, "method_not_allowed")
        # Neither changed the sandbox.
        self.assertEqual(sandbox_ids(self.d), [sid])
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["state"], "running")

    def test_nul_in_the_url(self):
        """%00 must not cut the path: DELETE /v1/sandboxes/ID%00/files
        would otherwise kill the sandbox, and ?path=/tmp/keep%00x act on
        /tmp/keep."""
        sid = self.d.create()
        self.assertEqual(self.d.upload(sid, "/tmp/keep", b"keep").status, 201)
        p = "/v1/sandboxes/" + sid
        for method, path in (("DELETE", p + "%00/files?path=/tmp/keep"),
                             ("DELETE", p + "/files%00?path=/tmp/keep"),
                             ("DELETE", p + "/files?path=/tmp/keep%00x"),
                             ("DELETE", p + "/files?path%00=/tmp/keep"),
                             ("GET", p + "/files?path=/tmp/keep%00x"),
                             ("GET", p + "/files/stat?path=/tmp/keep%00"),
                             ("GET", "/v1/sandboxes/x%00y"),
                             ("POST", p + "%00/exec"),
                             ("GET", "/healthz%00")):
            with self.subTest(method=method, path=path):
                self.assertError(self.d.api(method, path), 400, "invalid_argument")
        r = self.d.upload(sid, "/tmp/new\x00file", b"x")
        self.assertError(r, 400, "invalid_argument")
        self.assertEqual(sandbox_ids(self.d), [sid])
        r = self.d.api("GET", p + "/files/list?path=/tmp")
        self.assertEqual([e["name"] for e in r.json()["entries"]], ["keep"])
        self.assertEqual(self.d.api("GET", p + "/files?path=/tmp/keep").body, b"keep")

    def test_encoded_question_mark_in_the_path(self):
        """A %3F is part of a segment, not the start of the query: the
        path was cut there, and DELETE /v1/sandboxes/ID%3F/files killed
        the sandbox (found by fuzz_http)."""
        sid = self.d.create()
        self.assertEqual(self.d.upload(sid, "/tmp/keep", b"keep").status, 201)
        p = "/v1/sandboxes/" + sid
        for method, path in (("DELETE", p + "%3F/files?path=/tmp/keep"),
                             ("DELETE", p + "%3Fx"),
                             ("GET", p + "%3F")):
            with self.subTest(method=method, path=path):
                self.assertError(self.d.api(method, path), 404, "not_found")
        self.assertEqual(self.d.api("GET", "/healthz%3F").status, 404)
        self.assertEqual(sandbox_ids(self.d), [sid])
        self.assertEqual(self.d.api("GET", p + "/files?path=/tmp/keep").body, b"keep")

    def test_expect_100_continue_without_a_body_is_answered(self):
        """libmicrohttpd 0.9.75 sends 100 Continue to a body-less request
        with Expect: 100-continue and, when a pipelined request is already
        buffered, runs the handler early and refuses its reply: the kill
        happened, no answer came, and the connection hung until the idle
        timeout (found by fuzz_mhd)."""
        sid = self.d.create()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(self.d.socket_path)
        s.sendall(b"DELETE /v1/sandboxes/" + sid.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                  b"Expect: 100-continue\r\n\r\n"
                  b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        try:
            while True:
                chunk = s.recv(65536)  # a hang is a socket.timeout: an error
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        statuses = [line.split(b" ")[1] for line in data.split(b"\r\n")
                    if line.startswith(b"HTTP/1.1 ")]
        self.assertEqual(statuses[-2:], [b"204", b"200"], data)
        self.assertEqual(sandbox_ids(self.d), [])

    def test_bad_metadata_filters(self):
        sid = self.d.create(metadata={"team": "a"})
        for query in ("metadata.team=%ff", "metadata.%ff=a", "metadata.=a", "metadata.team"):
            with self.subTest(query=query):
                self.assertError(self.d.api("GET", "/v1/sandboxes?" + query), 400,
                                 "invalid_argument")
        self.assertEqual(sandbox_ids(self.d), [sid])

    def test_set_timeout_errors_keep_the_deadline(self):
        sid = self.d.create(timeout=120)
        before = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        for body in ({}, {"timeout": None}, {"timeout": 0}, {"timeout": 0.5}, {"timeout": -1},
                     {"timeout": "25h"}, {"timeout": "10d"}, {"timeout": 86401},
                     {"timeout": "later"}, {"timeout": True}, {"timeout": [60]},
                     {"timeout": 60, "memory": "1G"}):
            with self.subTest(body=body):
                self.assertError(self.d.api("POST", "/v1/sandboxes/%s/timeout" % sid, body),
                                 400, "invalid_argument")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json(), before)


class TcpAuth(DaemonTest):
    listen = True

    def test_keys_are_required(self):
        for method, path, body in (("GET", "/v1/sandboxes", None), ("GET", "/v1/info", None),
                                   ("POST", "/v1/sandboxes", {}), ("GET", "/v1/keys", None),
                                   ("DELETE", "/v1/sandboxes/aaaaaaaaaaaaaaaaaaaa", None)):
            with self.subTest(method=method, path=path, key=None):
                self.assertError(self.d.tcp(method, path, body), 401, "unauthorized")
            for bad in ("e2b_" + "0" * 40, "nonsense", "x" * 300):
                with self.subTest(method=method, path=path, key=bad[:10]):
                    self.assertError(self.d.tcp(method, path, body, key=bad), 401, "unauthorized")
                    r = self.d.tcp(method, path, body, headers={"X-API-Key": bad})
                    self.assertError(r, 401, "unauthorized")
        for header in ({"Authorization": "Bearer"}, {"Authorization": "Bearer "},
                       {"Authorization": "Basic dXNlcjpwYXNz"}, {"X-API-Key": ""}):
            with self.subTest(header=header):
                self.assertError(self.d.tcp("GET", "/v1/sandboxes", headers=header), 401,
                                 "unauthorized")
        self.assertEqual(sandbox_ids(self.d), [])
        # Health needs no key.
        self.assertEqual(self.d.tcp("GET", "/healthz").status, 200)

    def test_refusals_wait_for_the_body(self):
        """A refusal made from the headers alone (here 401, 404, 405) is sent
        once the request's body is in: a client still sending it gets the
        answer, not a reset connection."""
        body = b'{"metadata": {"k": "' + b"x" * (600 * 1024) + b'"}}'
        key = self.d.new_key("acme")
        for path, auth, status in (("/v1/sandboxes", "", 401),
                                   ("/v1/sandboxes", "Authorization: Bearer e2b_bad\r\n", 401),
                                   ("/v1/nothing", "X-API-Key: %s\r\n" % key, 404),
                                   ("/healthz", "", 405),
                                   ("/v1/keys", "X-API-Key: %s\r\n" % key, 403)):
            with self.subTest(path=path, status=status):
                head = ("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n"
                        % (path, auth, len(body))).encode()
                error_body_ok(self, raw_unix(self.d, head, body, strict=True, tcp=True), status)
        self.assertEqual(sandbox_ids(self.d), [])

    def test_bearer_and_x_api_key(self):
        key = self.d.new_key("acme")
        r = self.d.tcp("GET", "/v1/sandboxes", key=key)
        self.assertEqual(r.status, 200, r)
        r = self.d.tcp("GET", "/v1/sandboxes", headers={"X-API-Key": key})
        self.assertEqual(r.status, 200, r)
        r = self.d.tcp("POST", "/v1/sandboxes", {}, headers={"X-API-Key": key})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["tenant"], "acme")

    def key_ids(self):
        return [k["id"] for k in self.d.api("GET", "/v1/keys").json()["keys"]]

    def test_key_management_only_on_the_unix_socket(self):
        before = self.key_ids()
        key = self.d.new_key("acme")
        kid = [k for k in self.key_ids() if k not in before][0]
        for method, path, body in (("GET", "/v1/keys", None), ("POST", "/v1/keys", {}),
                                   ("POST", "/v1/keys", {"tenant": "other"}),
                                   ("DELETE", "/v1/keys/" + kid, None)):
            with self.subTest(method=method, path=path):
                self.assertError(self.d.tcp(method, path, body, key=key), 403, "forbidden")
        self.assertEqual(self.key_ids(), before + [kid])
        self.assertEqual(self.d.tcp("GET", "/v1/info", key=key).status, 200)

    def test_key_objects(self):
        before = self.key_ids()
        r = self.d.api("POST", "/v1/keys", {"tenant": "team.one-2_x"})
        self.assertEqual(r.status, 201, r)
        k = r.json()
        self.assertEqual(set(k), {"id", "tenant", "key", "created_at"})
        self.assertRegex(k["key"], r"^e2b_[0-9a-f]{40}$")
        self.assertEqual(k["tenant"], "team.one-2_x")
        r = self.d.api("POST", "/v1/keys")  # default tenant
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["tenant"], "default")
        listed = self.d.api("GET", "/v1/keys").json()["keys"]
        self.assertEqual(len(listed), len(before) + 2)
        mine = [x for x in listed if x["id"] == k["id"]][0]
        self.assertEqual(mine["prefix"], k["key"][:8])
        self.assertEqual(mine["tenant"], "team.one-2_x")
        self.assertEqual(mine["created_at"], k["created_at"])
        # The key itself is shown once, never listed.
        self.assertNotIn(k["key"], json.dumps(listed))
        for bad in ("", "a b", "a/b", "x" * 65, "é", 1, ["t"], {"t": "x"}):
            with self.subTest(tenant=bad):
                self.assertError(self.d.api("POST", "/v1/keys", {"tenant": bad}), 400,
                                 "invalid_argument")
        self.assertEqual(len(self.key_ids()), len(before) + 2)
        self.assertEqual(self.d.api("POST", "/v1/keys", {"tenant": "x" * 64}).status, 201)
        self.assertError(self.d.api("DELETE", "/v1/keys/knotakey1"), 404, "not_found")
        self.assertError(self.d.api("DELETE", "/v1/keys/" + "k" * 100), 404, "not_found")

    def test_revoked_key_fails(self):
        key = self.d.new_key("acme")
        r = self.d.tcp("POST", "/v1/sandboxes", {}, key=key)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        kid = [k["id"] for k in self.d.api("GET", "/v1/keys").json()["keys"]
               if k["prefix"] == key[:8]][0]
        p = self.d.sbx("key", "rm", kid)
        self.assertEqual(p.returncode, 0, p)
        for method, path in (("GET", "/v1/sandboxes"), ("GET", "/v1/sandboxes/" + sid),
                             ("GET", "/v1/info")):
            self.assertError(self.d.tcp(method, path, key=key), 401, "unauthorized")
        self.assertError(self.d.tcp("POST", "/v1/sandboxes", {}, key=key), 401, "unauthorized")
        self.assertEqual(sandbox_ids(self.d), [sid])
        self.assertNotIn(kid, [k["id"] for k in self.d.api("GET", "/v1/keys").json()["keys"]])
        # Removing it again: 404.
        p = self.d.sbx("key", "rm", kid)
        self.assertEqual(p.returncode, 1, p)
        self.assertEqual(len(p.stderr.splitlines()), 1, p)


class TenantIsolation(DaemonTest):
    listen = True

    def test_foreign_sandbox_looks_unknown(self):
        a, b = self.d.new_key("tenant-a"), self.d.new_key("tenant-b")
        r = self.d.tcp("POST", "/v1/sandboxes", {"metadata": {"who": "b"}}, key=b)
        self.assertEqual(r.status, 201, r)
        sb = r.json()["id"]
        r = self.d.tcp("POST", "/v1/sandboxes", {"metadata": {"who": "a"}}, key=a)
        sa = r.json()["id"]
        admin = self.d.create(metadata={"who": "admin"})
        pid = self.d.tcp("POST", "/v1/sandboxes/%s/processes" % sb,
                         {"argv": ["cat"], "stdin_open": True}, key=b).json()["pid"]
        self.assertEqual(self.d.upload(sb, "/tmp/secret", b"b's data").status, 201)
        ghost = "zzzzzzzzzzzzzzzzzzzz"
        routes = [("GET", "", None), ("DELETE", "", None), ("POST", "/timeout", {"timeout": 5}),
                  ("GET", "/metrics", None), ("POST", "/exec", {"cmd": "touch " + MARKER}),
                  ("POST", "/processes", {"cmd": "touch " + MARKER}), ("GET", "/processes", None),
                  ("GET", "/processes/%d" % pid, None), ("GET", "/processes/%d/wait" % pid, None),
                  ("GET", "/processes/%d/attach" % pid, None),
                  ("POST", "/processes/%d/signal" % pid, {"signal": "SIGKILL"}),
                  ("POST", "/processes/%d/stdin?eof=1" % pid, b"from a"),
                  ("GET", "/files?path=/tmp/secret", None),
                  ("PUT", "/files?path=/tmp/planted", b"x"),
                  ("GET", "/files/stat?path=/tmp/secret", None),
                  ("GET", "/files/list?path=/tmp", None),
                  ("POST", "/files/mkdir", {"path": "/tmp/dir"}),
                  ("POST", "/files/move", {"from": "/tmp/secret", "to": "/tmp/moved"}),
                  ("DELETE", "/files?path=/tmp/secret", None)]
        for method, suffix, body in routes:
            with self.subTest(method=method, route=suffix):
                raw = isinstance(body, bytes)
                foreign = self.d.tcp(method, "/v1/sandboxes/" + sb + suffix, body, key=a, raw=raw)
                unknown = self.d.tcp(method, "/v1/sandboxes/" + ghost + suffix, body, key=a,
                                     raw=raw)
                fb = self.assertError(foreign, 404, "not_found")
                ub = self.assertError(unknown, 404, "not_found")
                self.assertEqual(fb["message"].replace(sb, "ID"), ub["message"].replace(ghost, "ID"))
        # B's sandbox is untouched: alive, same deadline, process and files intact.
        r = self.d.tcp("GET", "/v1/sandboxes/" + sb, key=b)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["timeout"], 300)
        info = self.d.tcp("GET", "/v1/sandboxes/%s/processes/%d" % (sb, pid), key=b).json()
        self.assertTrue(info["running"] and info["stdin_open"], info)
        files = self.d.api("GET", "/v1/sandboxes/%s/files/list?path=/tmp" % sb).json()["entries"]
        self.assertEqual([e["name"] for e in files], ["secret"])
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/files?path=/tmp/secret" % sb).body,
                         b"b's data")
        # Lists: each tenant sees its own; the administrator sees all.
        def listed(key, query=""):
            r = self.d.tcp("GET", "/v1/sandboxes" + query, key=key)
            self.assertEqual(r.status, 200, r)
            return [(s["id"], s["tenant"]) for s in r.json()["sandboxes"]]
        self.assertEqual(listed(a), [(sa, "tenant-a")])
        self.assertEqual(listed(b), [(sb, "tenant-b")])
        self.assertEqual(listed(a, "?metadata.who=b"), [])
        self.assertEqual(sorted(sandbox_ids(self.d)), sorted([sa, sb, admin]))
        # A's own sandbox works for A; the admin's is foreign to both.
        self.assertEqual(self.d.tcp("GET", "/v1/sandboxes/" + sa, key=a).status, 200)
        self.assertError(self.d.tcp("GET", "/v1/sandboxes/" + admin, key=a), 404, "not_found")
        # Finally B can close its own stdin and collect its process.
        r = self.d.tcp("POST", "/v1/sandboxes/%s/processes/%d/stdin?eof=1" % (sb, pid), b"bye",
                       key=b, raw=True)
        self.assertEqual(r.status, 204, r)
        r = self.d.tcp("GET", "/v1/sandboxes/%s/processes/%d/wait" % (sb, pid), key=b)
        self.assertEqual(r.json()["stdout"], "bye")


if __name__ == "__main__":
    import unittest
    unittest.main()
