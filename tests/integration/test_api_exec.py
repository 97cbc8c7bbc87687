"""Running commands: exec in one-result and stream mode, environment, cwd,
users, stdin, timeouts, output limits and encodings, background processes
(list, signal, wait, stdin, attach), and commands cut short by their
sandbox's end."""
import base64
import hashlib
import json
import os
import socket
import threading
import time

from harness import DaemonTest
from sbx_helpers import (MIB, open_stream, parse_ndjson, q, read_event, sandbox_ids,
                         wait_until)

DEFAULT_KEYS = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "HOSTNAME"}


def env_of(res):
    """`env -0` output as a dict."""
    return dict(kv.split("=", 1) for kv in res["stdout"].split("\0") if kv)


class ExecBasics(DaemonTest):
    @classmethod
    def setUpClass(cls):
        # A variable of ours that must never reach a sandbox.
        os.environ["SBX_TEST_CANARY"] = "leaked"
        try:
            super().setUpClass()
        finally:
            del os.environ["SBX_TEST_CANARY"]

    def test_argv_and_cmd(self):
        sid = self.d.create()
        res = self.d.exec(sid, argv=["printf", "%s|", "a b", "$HOME", "*", "'q'"])
        self.assertEqual(res["stdout"], "a b|$HOME|*|'q'|")  # no shell in between
        self.assertEqual((res["exit_code"], res["signal"], res["reason"]), (0, None, None))
        self.assertIsInstance(res["pid"], int)
        self.assertGreater(res["pid"], 0)
        self.assertGreaterEqual(res["duration"], 0)
        self.assertEqual(set(res), {"pid", "exit_code", "signal", "timed_out", "oom_killed",
                                    "sandbox_ended", "duration", "stdout", "stderr", "stdout_truncated",
                                    "stderr_truncated", "reason"})
        res = self.d.exec(sid, cmd="echo $((6 * 7)) | tr 4 X; exit 9")
        self.assertEqual((res["stdout"], res["exit_code"]), ("X2\n", 9))
        self.assertEqual(self.d.exec(sid, argv=["/usr/bin/env", "true"])["exit_code"], 0)
        res = self.d.exec(sid, argv=["sh", "-c", "echo out; echo err >&2; exit 255"])
        self.assertEqual((res["stdout"], res["stderr"], res["exit_code"]), ("out\n", "err\n", 255))

    def test_environment_precedence(self):
        sid = self.d.create(env={"A": "sandbox", "B": "sandbox", "LANG": "C"})
        env = env_of(self.d.exec(sid, argv=["env", "-0"], env={"A": "exec", "C": "exec"}))
        self.assertEqual(env["A"], "exec")      # exec > sandbox
        self.assertEqual(env["B"], "sandbox")   # sandbox > defaults
        self.assertEqual(env["C"], "exec")
        self.assertEqual(env["LANG"], "C")      # sandbox overrides a default
        self.assertEqual(env["HOME"], "/home/user")
        self.assertEqual(env["USER"], "user")
        self.assertEqual(env["LOGNAME"], "user")
        self.assertEqual(env["SHELL"], "/bin/bash")
        self.assertEqual(env["HOSTNAME"], "sandbox")
        self.assertIn("/usr/bin", env["PATH"].split(":"))
        # Nothing else: in particular nothing of the daemon's environment.
        self.assertEqual(set(env), DEFAULT_KEYS | {"A", "B", "C"})
        self.assertNotIn("leaked", json.dumps(env))
        # The exec env also beats the defaults.
        env = env_of(self.d.exec(sid, argv=["env", "-0"], env={"HOME": "/tmp", "PATH": "/bin"}))
        self.assertEqual((env["HOME"], env["PATH"]), ("/tmp", "/bin"))
        # And root gets root's defaults.
        env = env_of(self.d.exec(sid, argv=["env", "-0"], user="root"))
        self.assertEqual((env["HOME"], env["USER"], env["LOGNAME"]), ("/root", "root", "root"))
        self.assertEqual(set(env), DEFAULT_KEYS | {"A", "B"})

    def test_users(self):
        sid = self.d.create()
        res = self.d.exec(sid, cmd="id -u; id -g; pwd")
        self.assertEqual(res["stdout"], "1000\n1000\n/home/user\n")
        res = self.d.exec(sid, cmd="id -u; id -g; pwd", user="root")
        self.assertEqual(res["stdout"], "0\n0\n/root\n")
        sid = self.d.create(user="root")
        self.assertEqual(self.d.exec(sid, cmd="id -u; pwd")["stdout"], "0\n/root\n")
        self.assertEqual(self.d.exec(sid, cmd="id -u; pwd", user="user")["stdout"],
                         "1000\n/home/user\n")

    def test_cwd(self):
        sid = self.d.create()
        self.assertEqual(self.d.exec(sid, argv=["pwd"], cwd="/tmp")["stdout"], "/tmp\n")
        self.assertEqual(self.d.exec(sid, argv=["pwd"], cwd="/")["stdout"], "/\n")
        self.assertEqual(self.d.exec(sid, argv=["pwd"], cwd="/root", user="root")["stdout"],
                         "/root\n")
        for cwd, user in (("/nonexistent", None), ("/etc/passwd", None), ("/root", "user")):
            with self.subTest(cwd=cwd):
                fields = {"argv": ["touch", "/tmp/ran"], "cwd": cwd}
                if user:
                    fields["user"] = user
                res = self.d.exec(sid, **fields)
                self.assertEqual(res["exit_code"], 126, res)
                self.assertIsNone(res["pid"])
                self.assertIsNone(res["signal"])
                self.assertIn(cwd, res["reason"])
                self.assertNotIn("\n", res["reason"])
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/files/stat?path=/tmp/ran" % sid).status,
                         404)

    def test_cannot_start(self):
        sid = self.d.create()
        self.d.upload(sid, "/home/user/noexec.sh", b"#!/bin/sh\necho hi\n", mode="0644")
        for argv, code in ((["no-such-command"], 127), (["/no/such/path"], 127),
                           (["/etc/passwd"], 126), (["/home/user/noexec.sh"], 126),
                           (["/tmp"], 126)):
            with self.subTest(argv=argv):
                res = self.d.exec(sid, argv=argv)
                self.assertEqual(res["exit_code"], code, res)
                self.assertIsNone(res["pid"])
                self.assertIsNone(res["signal"])
                self.assertFalse(res["timed_out"])
                self.assertTrue(res["reason"])
        # A shell says the same for what it cannot run.
        self.assertEqual(self.d.exec(sid, cmd="no-such-command")["exit_code"], 127)

    def test_stdin(self):
        sid = self.d.create()
        res = self.d.exec(sid, argv=["cat"], stdin="héllo\nwörld €\n")
        self.assertEqual(res["stdout"], "héllo\nwörld €\n")
        every = bytes(range(256)) * 4
        res = self.d.exec(sid, argv=["cat"], stdin_b64=base64.b64encode(every).decode(),
                          encoding="base64")
        self.assertEqual(base64.b64decode(res["stdout"]), every)
        # Without stdin, reads see end of file at once.
        res = self.d.exec(sid, argv=["cat"], timeout=20)
        self.assertEqual((res["stdout"], res["exit_code"], res["timed_out"]), ("", 0, False))
        res = self.d.exec(sid, cmd="read x; echo \"[$x]\" $?", timeout=20)
        self.assertEqual(res["stdout"], "[] 1\n")
        # Large input, byte exact.
        blob = os.urandom(512 * 1024)
        res = self.d.exec(sid, argv=["sha256sum"], stdin_b64=base64.b64encode(blob).decode())
        self.assertEqual(res["stdout"].split()[0], hashlib.sha256(blob).hexdigest())
        # A command that does not read its stdin still finishes.
        res = self.d.exec(sid, argv=["true"], stdin="x" * 200000)
        self.assertEqual(res["exit_code"], 0)

    def test_timeout(self):
        sid = self.d.create()
        for timeout in (1, "500ms", 0.5, "1s"):
            with self.subTest(timeout=timeout):
                res = self.d.exec(sid, cmd="echo before; sleep 60 & sleep 60; echo after",
                                  timeout=timeout)
                self.assertTrue(res["timed_out"], res)
                self.assertIsNone(res["exit_code"])
                self.assertEqual(res["signal"], "SIGKILL")
                self.assertFalse(res["oom_killed"])
                self.assertIn("timed out", res["reason"])
                self.assertEqual(res["stdout"], "before\n")
        # The whole process group went: no sleep survives.
        ps = self.d.exec(sid, argv=["ps", "-eo", "comm="])["stdout"].split()
        self.assertNotIn("sleep", ps)
        # A timeout that does not fire changes nothing.
        res = self.d.exec(sid, argv=["echo", "quick"], timeout=30)
        self.assertEqual((res["stdout"], res["timed_out"], res["exit_code"]), ("quick\n", False, 0))

    def test_killed_by_signal_and_oom(self):
        sid = self.d.create(memory="32M")
        res = self.d.exec(sid, cmd="kill -SEGV $$")
        self.assertEqual((res["exit_code"], res["signal"]), (None, "SIGSEGV"))
        self.assertIn("SIGSEGV", res["reason"])
        self.assertFalse(res["oom_killed"])
        res = self.d.exec(sid, argv=["python3", "-c", "b = bytearray(256 * 1024 * 1024)"])
        self.assertTrue(res["oom_killed"], res)
        self.assertEqual((res["exit_code"], res["signal"]), (None, "SIGKILL"))
        self.assertIn("out of memory", res["reason"])
        self.assertIn("32M", res["reason"])
        # The sandbox survives its command's death.
        self.assertEqual(self.d.exec(sid, argv=["echo", "alive"])["stdout"], "alive\n")

    def test_max_output(self):
        sid = self.d.create()
        res = self.d.exec(sid, cmd="head -c 5000 /dev/zero | tr '\\0' a; printf E >&2",
                          max_output=1000)
        self.assertEqual(res["stdout"], "a" * 1000)
        self.assertTrue(res["stdout_truncated"])
        self.assertEqual(res["stderr"], "E")
        self.assertFalse(res["stderr_truncated"])
        self.assertEqual(res["exit_code"], 0)
        res = self.d.exec(sid, cmd="head -c 5000 /dev/zero | tr '\\0' b", max_output="1k")
        self.assertEqual(res["stdout"], "b" * 1024)
        # The command is not blocked by what is dropped (no SIGPIPE either).
        res = self.d.exec(sid, cmd="head -c 20000000 /dev/zero; echo done >&2", max_output=100)
        self.assertEqual((len(res["stdout"]), res["stdout_truncated"]), (100, True))
        self.assertEqual((res["stderr"], res["exit_code"]), ("done\n", 0))
        # Default: 1 MiB per stream.
        res = self.d.exec(sid, cmd="head -c 1048577 /dev/zero | tr '\\0' c")
        self.assertEqual((len(res["stdout"]), res["stdout_truncated"]), (MIB, True))
        res = self.d.exec(sid, cmd="head -c 1048576 /dev/zero | tr '\\0' c")
        self.assertEqual((len(res["stdout"]), res["stdout_truncated"]), (MIB, False))
        # Exactly max_output bytes kept, in base64 too.
        res = self.d.exec(sid, cmd="head -c 3000 /dev/urandom", max_output=777, encoding="base64")
        self.assertEqual(len(base64.b64decode(res["stdout"])), 777)

    def test_encodings(self):
        sid = self.d.create()
        blob = bytes(range(256)) + os.urandom(100000)
        self.assertEqual(self.d.upload(sid, "/tmp/blob", blob).status, 201)
        res = self.d.exec(sid, cmd="cat /tmp/blob; cat /tmp/blob >&2", encoding="base64")
        self.assertEqual(base64.b64decode(res["stdout"]), blob)
        self.assertEqual(base64.b64decode(res["stderr"]), blob)
        # utf8: valid text unchanged, invalid bytes become U+FFFD.
        res = self.d.exec(sid, cmd="printf 'a\\377b\\303'; printf '\\303\\251\\342\\202\\254' >&2")
        self.assertEqual(res["stdout"], "a\ufffdb\ufffd")
        self.assertEqual(res["stderr"], "é€")
        res = self.d.exec(sid, argv=["printf", "ok \U0001F600 \\0 end"])
        self.assertEqual(res["stdout"], "ok \U0001F600 \0 end")


class ExecStream(DaemonTest):
    def stream(self, sid, **fields):
        fields["stream"] = True
        r = self.d.api("POST", "/v1/sandboxes/%s/exec" % sid, fields)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("Content-Type"), "application/x-ndjson")
        return parse_ndjson(r.body)

    def test_events_in_order(self):
        sid = self.d.create()
        events = self.stream(sid, cmd="echo o1; sleep 0.2; echo e1 >&2; sleep 0.2; echo o2; "
                                      "sleep 0.2; printf e2 >&2; exit 3")
        self.assertEqual(events[0]["type"], "start")
        self.assertIsInstance(events[0]["pid"], int)
        self.assertEqual(events[-1]["type"], "exit")
        self.assertEqual([e["type"] for e in events].count("exit"), 1)
        out = [(e["type"], e["data"]) for e in events[1:-1]]
        self.assertEqual(out, [("stdout", "o1\n"), ("stderr", "e1\n"), ("stdout", "o2\n"),
                               ("stderr", "e2")])
        ex = events[-1]
        self.assertEqual(ex["pid"], events[0]["pid"])
        self.assertEqual((ex["exit_code"], ex["signal"], ex["timed_out"], ex["oom_killed"],
                          ex["reason"]), (3, None, False, False, None))
        self.assertGreaterEqual(ex["duration"], 0)

    def test_cannot_start(self):
        sid = self.d.create()
        events = self.stream(sid, argv=["no-such-command"])
        self.assertEqual([e["type"] for e in events], ["start", "exit"])
        self.assertIsNone(events[0]["pid"])
        self.assertEqual(events[1]["exit_code"], 127)
        self.assertTrue(events[1]["reason"])

    def test_lossless_and_binary(self):
        sid = self.d.create()
        blob = os.urandom(3 * MIB)
        self.assertEqual(self.d.upload(sid, "/tmp/blob", blob).status, 201)
        events = self.stream(sid, cmd="cat /tmp/blob; cat /tmp/blob >&2", encoding="base64")
        out = b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == "stdout")
        err = b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == "stderr")
        self.assertEqual(hashlib.sha256(out).digest(), hashlib.sha256(blob).digest())
        self.assertEqual(hashlib.sha256(err).digest(), hashlib.sha256(blob).digest())
        # A slow reader loses nothing either: the command waits for it.
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % sid,
                                 {"cmd": "cat /tmp/blob", "stream": True, "encoding": "base64"})
        got = []
        try:
            while True:
                ev = read_event(resp)
                if ev is None or ev["type"] == "exit":
                    break
                if ev["type"] == "stdout":
                    got.append(base64.b64decode(ev["data"]))
                    if len(got) % 8 == 0:
                        time.sleep(0.05)
        finally:
            conn.close()
        self.assertEqual(b"".join(got), blob)
        # utf8 mode: a character split between reads is kept whole.
        events = self.stream(sid, cmd="printf '\\303'; sleep 0.3; printf '\\251\\377'")
        text = "".join(e["data"] for e in events if e["type"] == "stdout")
        self.assertEqual(text, "é\ufffd")

    def test_every_attached_reader_of_a_stream_gets_every_byte(self):
        """A lossless stream is paced by every reader attached to it, not
        by the first alone (which used to take output from under the
        second: issue 17)."""
        sid = self.d.create()
        blob = os.urandom(3 * MIB)
        self.assertEqual(self.d.upload(sid, "/tmp/blob", blob).status, 201)
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % sid,
                                 {"cmd": "while [ ! -e /tmp/go ]; do sleep 0.02; done;"
                                         " cat /tmp/blob", "stream": True, "encoding": "base64"})
        conn2 = None
        try:
            start = read_event(resp)
            self.assertEqual(start["type"], "start")
            conn2, resp2 = open_stream(self.d, "GET", "/v1/sandboxes/%s/processes/%d/attach"
                                       "?encoding=base64" % (sid, start["pid"]))
            self.assertEqual(read_event(resp2)["type"], "start")
            self.assertEqual(self.d.upload(sid, "/tmp/go", b"").status, 201)

            def collect(r, slow):
                got, types = [], []
                while True:
                    ev = read_event(r)
                    if ev is None or ev["type"] == "exit":
                        return b"".join(got), types, ev
                    types.append(ev["type"])
                    if ev["type"] == "stdout":
                        got.append(base64.b64decode(ev["data"]))
                        if slow and len(got) % 8 == 0:
                            time.sleep(0.05)
            results = {}
            t = threading.Thread(target=lambda: results.update(first=collect(resp, False)))
            t.start()
            second = collect(resp2, True)  # the slower one: the command waits for it too
            t.join(120)
            self.assertFalse(t.is_alive())
            for name, (out, types, end) in (("first", results["first"]), ("second", second)):
                self.assertNotIn("dropped", types, name)
                self.assertEqual(hashlib.sha256(out).hexdigest(),
                                 hashlib.sha256(blob).hexdigest(), name)
                self.assertEqual(end["exit_code"], 0, name)
        finally:
            conn.close()
            if conn2 is not None:
                conn2.close()

    def test_keepalive(self):
        """A keepalive line after 10 s without output (the one slow test)."""
        sid = self.d.create()
        events = self.stream(sid, cmd="sleep 11.5; echo done")
        types = [e["type"] for e in events]
        self.assertIn("keepalive", types)
        self.assertLess(types.index("keepalive"), types.index("stdout"))
        self.assertEqual(types[-1], "exit")

    def test_stdin_open_with_stream(self):
        sid = self.d.create()
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % sid,
                                 {"argv": ["sh", "-c", "echo ready; cat; echo eof"],
                                  "stream": True, "stdin_open": True})
        try:
            start = read_event(resp)
            self.assertEqual(start["type"], "start")
            self.assertEqual(read_event(resp), {"type": "stdout", "data": "ready\n"})
            stdin = "/v1/sandboxes/%s/processes/%d/stdin" % (sid, start["pid"])
            self.assertEqual(self.d.api("POST", stdin, b"line 1\n", raw=True).status, 204)
            self.assertEqual(read_event(resp), {"type": "stdout", "data": "line 1\n"})
            self.assertEqual(self.d.api("POST", stdin + "?eof=1", b"last\n", raw=True).status, 204)
            rest = []
            while True:
                ev = read_event(resp)
                rest.append(ev)
                if ev is None or ev["type"] == "exit":
                    break
        finally:
            conn.close()
        self.assertEqual("".join(e["data"] for e in rest if e and e["type"] == "stdout"),
                         "last\neof\n")
        self.assertEqual(rest[-1]["exit_code"], 0)

    def running_commands(self, sid):
        ps = self.d.exec(sid, argv=["ps", "-eo", "args="])["stdout"]
        return [l.strip() for l in ps.splitlines() if "sleep 100" in l]

    def test_disconnect_kills_the_command(self):
        sid = self.d.create()
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % sid,
                                 {"cmd": "echo started; sleep 100; touch /tmp/finished",
                                  "stream": True})
        self.assertEqual(read_event(resp)["type"], "start")
        self.assertEqual(read_event(resp)["data"], "started\n")
        self.assertTrue(self.running_commands(sid))
        conn.close()
        resp.close()
        wait_until(lambda: not self.running_commands(sid), timeout=20,
                   what="the abandoned command to be killed")
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/%s/processes"
                                      % sid).json()["processes"] == [],
                   what="the killed command to leave the list")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/files/stat?path=/tmp/finished"
                                    % sid).status, 404)

    def test_disconnect_with_a_full_buffer(self):
        """Found by the soak: a stream abandoned while its buffer was full
        (the writer blocked on the pipe) left the command listed as
        running for ever, and the event loop spinning on the pipe's
        hangup once the kill ended the writer."""
        from harness import processes_with_uid_in
        sid = self.d.create()
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % sid,
                                 {"cmd": "yes soak", "stream": True})
        self.assertEqual(read_event(resp)["type"], "start")

        def writer_blocked():
            # `yes` sleeps in (anon_)pipe_write only once the loop stopped
            # reading: the stream's buffer is full (nobody reads the socket).
            for pid, _, comm in processes_with_uid_in(self.d.uid_base, self.d.uid_end):
                if comm == "yes":
                    try:
                        with open("/proc/%d/wchan" % pid) as f:
                            return f.read().endswith("pipe_write")
                    except OSError:
                        return False
            return False
        wait_until(lambda: all(writer_blocked() for _ in range(3)), what="the writer to block")
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        resp.close()
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/%s/processes"
                                      % sid).json()["processes"] == [], timeout=20,
                   what="the abandoned command to leave the list")
        self.assertEqual(self.d.sh(sid, "echo still")["stdout"], "still\n")

    def test_disconnect_in_one_result_mode(self):
        sid = self.d.create()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.d.socket_path)
        body = json.dumps({"cmd": "sleep 100"}).encode()
        s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                  % (sid.encode(), len(body), body))
        wait_until(lambda: self.running_commands(sid), what="the command to start")
        s.close()
        wait_until(lambda: not self.running_commands(sid), timeout=20,
                   what="the abandoned command to be killed")


class BackgroundProcesses(DaemonTest):
    def start(self, sid, **fields):
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, fields)
        self.assertEqual(r.status, 201, r)
        return r.json()

    def path(self, sid, pid, suffix=""):
        return "/v1/sandboxes/%s/processes/%d%s" % (sid, pid, suffix)

    def wait(self, sid, pid, timeout=None):
        suffix = "/wait" + ("?" + q(timeout=timeout) if timeout else "")
        r = self.d.api("GET", self.path(sid, pid, suffix))
        self.assertEqual(r.status, 200, r)
        return r.json()

    def test_start_list_get_wait(self):
        sid = self.d.create()
        p = self.start(sid, cmd="echo out; echo err >&2; read x; exit 5", stdin_open=True)
        self.assertIsInstance(p["pid"], int)
        self.assertEqual(p["argv"], ["/bin/bash", "-c", "echo out; echo err >&2; read x; exit 5"])
        self.assertEqual((p["cwd"], p["user"], p["running"], p["stdin_open"]),
                         ("/home/user", "user", True, True))
        self.assertIn("started_at", p)
        q2 = self.start(sid, argv=["sleep", "60"], cwd="/tmp", user="root")
        self.assertEqual((q2["argv"], q2["cwd"], q2["user"], q2["stdin_open"]),
                         (["sleep", "60"], "/tmp", "root", False))
        listed = self.d.api("GET", "/v1/sandboxes/%s/processes" % sid).json()["processes"]
        self.assertEqual([x["pid"] for x in listed], [p["pid"], q2["pid"]])  # oldest first
        got = self.d.api("GET", self.path(sid, p["pid"])).json()
        self.assertTrue(got["running"])
        # Wait with a timeout that passes: the process object, still running.
        for timeout in ("300ms", "0"):
            w = self.wait(sid, p["pid"], timeout=timeout)
            self.assertTrue(w["running"], w)
            self.assertEqual(w["pid"], p["pid"])
            self.assertNotIn("exit_code", w)
        # Let it finish; before collection it is listed, finished, with its result.
        self.assertEqual(self.d.api("POST", self.path(sid, p["pid"], "/stdin?eof=1"), b"go\n",
                                    raw=True).status, 204)
        done = wait_until(lambda: not self.d.api("GET", self.path(sid, p["pid"])).json()["running"]
                          and self.d.api("GET", self.path(sid, p["pid"])).json(),
                          what="the process to finish")
        self.assertEqual((done["exit_code"], done["running"]), (5, False))
        listed = self.d.api("GET", "/v1/sandboxes/%s/processes" % sid).json()["processes"]
        self.assertIn(p["pid"], [x["pid"] for x in listed])
        # Wait collects it: the result with its output, then it is gone.
        res = self.wait(sid, p["pid"])
        self.assertEqual((res["exit_code"], res["stdout"], res["stderr"]), (5, "out\n", "err\n"))
        self.assertEqual(self.d.api("GET", self.path(sid, p["pid"])).status, 404)
        listed = self.d.api("GET", "/v1/sandboxes/%s/processes" % sid).json()["processes"]
        self.assertEqual([x["pid"] for x in listed], [q2["pid"]])
        # Waiting with a timeout on a process that ends in time gives its result.
        r = self.start(sid, cmd="sleep 0.3; echo late")
        res = self.wait(sid, r["pid"], timeout="30s")
        self.assertEqual((res["exit_code"], res["stdout"]), (0, "late\n"))

    def test_cannot_start(self):
        sid = self.d.create()
        for argv, code in ((["no-such-command"], 127), (["/etc/passwd"], 126)):
            with self.subTest(argv=argv):
                r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": argv})
                self.assertEqual(r.status, 201, r)
                p = r.json()
                self.assertEqual((p["pid"], p["running"], p["exit_code"]), (None, False, code))
                self.assertTrue(p["reason"])
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/processes" % sid).json(),
                         {"processes": []})

    def test_signals(self):
        sid = self.d.create()
        for body, name in (({"signal": "SIGTERM"}, "SIGTERM"), ({"signal": 15}, "SIGTERM"),
                           ({}, "SIGTERM"), ({"signal": "KILL"}, "SIGKILL"),
                           ({"signal": 10}, "SIGUSR1"), ({"signal": "SIGHUP"}, "SIGHUP")):
            with self.subTest(body=body):
                p = self.start(sid, argv=["sleep", "60"])
                r = self.d.api("POST", self.path(sid, p["pid"], "/signal"), body)
                self.assertEqual(r.status, 204, r)
                res = self.wait(sid, p["pid"], timeout="30s")
                self.assertEqual((res["exit_code"], res["signal"]), (None, name), res)
                self.assertIn(name, res["reason"])
        # A handled signal: the command decides its status.
        p = self.start(sid, cmd="trap 'echo got INT; exit 7' INT; echo ready; "
                                "while :; do sleep 0.05; done")
        self.read_until(sid, p["pid"], "ready\n")
        self.assertEqual(self.d.api("POST", self.path(sid, p["pid"], "/signal"),
                                    {"signal": "SIGINT"}).status, 204)
        res = self.wait(sid, p["pid"], timeout="30s")
        self.assertEqual((res["exit_code"], res["signal"], res["stdout"]),
                         (7, None, "ready\ngot INT\n"))
        # The signal reaches the whole process group.
        p = self.start(sid, cmd="sleep 60 & sleep 60 & wait")
        self.assertEqual(self.d.api("POST", self.path(sid, p["pid"], "/signal"),
                                    {"signal": "SIGKILL"}).status, 204)
        self.wait(sid, p["pid"], timeout="30s")
        ps = self.d.exec(sid, argv=["ps", "-eo", "comm="])["stdout"].split()
        self.assertNotIn("sleep", ps)
        # Signalling a finished process: 409.
        p = self.start(sid, argv=["true"])
        wait_until(lambda: not self.d.api("GET", self.path(sid, p["pid"])).json()["running"],
                   what="true to finish")
        r = self.d.api("POST", self.path(sid, p["pid"], "/signal"), {"signal": "SIGTERM"})
        self.assertError(r, 409, "conflict")

    def read_until(self, sid, pid, text, stderr_text=""):
        """Attach and read until `text` has appeared on stdout (and
        `stderr_text` on stderr: the daemon reads the two pipes apart, so
        one's output being kept says nothing of the other's)."""
        conn, resp = open_stream(self.d, "GET", self.path(sid, pid, "/attach"))
        seen = {"stdout": "", "stderr": ""}
        try:
            while text not in seen["stdout"] or stderr_text not in seen["stderr"]:
                ev = read_event(resp)
                self.assertIsNotNone(ev, "stream ended before %r" % text)
                if ev["type"] in seen:
                    seen[ev["type"]] += ev["data"]
        finally:
            conn.close()
        return seen["stdout"]

    def test_stdin(self):
        sid = self.d.create()
        p = self.start(sid, argv=["cat"], stdin_open=True)
        st = self.path(sid, p["pid"], "/stdin")
        self.assertEqual(self.d.api("POST", st, b"abc", raw=True).status, 204)
        self.assertEqual(self.d.api("POST", st, b"\x00\xff", raw=True).status, 204)
        self.assertEqual(self.d.api("POST", st + "?eof=1", b"def", raw=True).status, 204)
        # Closed: further writes are refused, whether or not it has exited.
        self.assertError(self.d.api("POST", st, b"late", raw=True), 409, "conflict")
        res = self.d.api("GET", self.path(sid, p["pid"], "/wait?encoding=base64")).json()
        self.assertEqual(base64.b64decode(res["stdout"]), b"abc\x00\xffdef")
        # Not opened: 409 too; eof alone closes.
        p = self.start(sid, argv=["cat"])
        self.assertFalse(p["stdin_open"])
        self.assertError(self.d.api("POST", self.path(sid, p["pid"], "/stdin"), b"x", raw=True),
                         409, "conflict")
        p = self.start(sid, argv=["cat"], stdin_open=True, stdin="pre-")
        self.assertEqual(self.d.api("POST", self.path(sid, p["pid"], "/stdin?eof=1"), b"",
                                    raw=True).status, 204)
        self.assertEqual(self.wait(sid, p["pid"], timeout="30s")["stdout"], "pre-")
        # Finished and collected: 404; finished not collected: 409.
        p = self.start(sid, argv=["true"], stdin_open=True)
        self.d.api("POST", self.path(sid, p["pid"], "/stdin?eof=1"), b"", raw=True)
        wait_until(lambda: not self.d.api("GET", self.path(sid, p["pid"])).json()["running"],
                   what="true to finish")
        self.assertError(self.d.api("POST", self.path(sid, p["pid"], "/stdin"), b"x", raw=True),
                         409, "conflict")
        self.wait(sid, p["pid"])
        self.assertError(self.d.api("POST", self.path(sid, p["pid"], "/stdin"), b"x", raw=True),
                         404, "not_found")
        # Large input through several requests, byte exact.
        p = self.start(sid, argv=["sha256sum"], stdin_open=True)
        blob = os.urandom(3 * MIB)
        for i in range(0, len(blob), MIB):
            r = self.d.api("POST", self.path(sid, p["pid"], "/stdin"), blob[i:i + MIB], raw=True)
            self.assertEqual(r.status, 204, r)
        self.d.api("POST", self.path(sid, p["pid"], "/stdin?eof=1"), b"", raw=True)
        res = self.wait(sid, p["pid"], timeout="60s")
        self.assertEqual(res["stdout"].split()[0], hashlib.sha256(blob).hexdigest())

    def test_attach_replays_then_follows(self):
        sid = self.d.create()
        p = self.start(sid, cmd="echo one; echo err1 >&2; read x; echo two; exit 4",
                       stdin_open=True)
        conn, resp = open_stream(self.d, "GET", self.path(sid, p["pid"], "/attach"))
        try:
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("Content-Type"), "application/x-ndjson")
            self.assertEqual(read_event(resp), {"type": "start", "pid": p["pid"]})
            seen = []
            while ("stdout", "one\n") not in seen or ("stderr", "err1\n") not in seen:
                ev = read_event(resp)
                seen.append((ev["type"], ev["data"]))
            # Now live: feed stdin, the next line comes through this stream.
            self.d.api("POST", self.path(sid, p["pid"], "/stdin?eof=1"), b"go\n", raw=True)
            ev = read_event(resp)
            self.assertEqual(ev, {"type": "stdout", "data": "two\n"})
            ev = read_event(resp)
            self.assertEqual((ev["type"], ev["exit_code"]), ("exit", 4))
            self.assertIsNone(read_event(resp))
        finally:
            conn.close()
        # A second attach after the end replays everything, then exit.
        events = parse_ndjson(self.d.api("GET", self.path(sid, p["pid"], "/attach")).body)
        self.assertEqual(events[0]["type"], "start")
        self.assertEqual("".join(e["data"] for e in events if e["type"] == "stdout"), "one\ntwo\n")
        self.assertEqual(events[-1]["type"], "exit")
        # Attaching collects nothing: wait still has the result.
        self.assertEqual(self.wait(sid, p["pid"])["stdout"], "one\ntwo\n")

    def test_attach_without_following(self):
        """?follow=0 (sbx logs): what is kept now, then the end, with no exit
        line while the process runs; it runs on and nothing is collected."""
        sid = self.d.create()
        p = self.start(sid, cmd="echo kept; echo kept-err >&2; exec sleep 1000")
        self.read_until(sid, p["pid"], "kept\n", stderr_text="kept-err\n")
        r = self.d.api("GET", self.path(sid, p["pid"], "/attach?follow=0"), timeout=60)
        self.assertEqual(r.status, 200, r)
        events = parse_ndjson(r.body)
        self.assertEqual(events[0], {"type": "start", "pid": p["pid"]})
        # (the two streams' order between them is not kept)
        self.assertEqual(sorted((e["type"], e["data"]) for e in events[1:] if "data" in e),
                         [("stderr", "kept-err\n"), ("stdout", "kept\n")])
        self.assertNotIn("exit", [e["type"] for e in events])
        self.assertTrue(self.d.api("GET", self.path(sid, p["pid"])).json()["running"])
        self.assertError(self.d.api("GET", self.path(sid, p["pid"], "/attach?follow=maybe")), 400,
                         "invalid_argument")
        # an ended one's: everything and its exit line, as a following attach gives
        self.d.api("POST", self.path(sid, p["pid"], "/signal"), {"signal": "SIGKILL"})
        wait_until(lambda: not self.d.api("GET", self.path(sid, p["pid"])).json()["running"],
                   what="the process to end")
        events = parse_ndjson(self.d.api("GET", self.path(sid, p["pid"], "/attach?follow=0")).body)
        self.assertEqual(events[-1]["type"], "exit")
        self.assertEqual(self.wait(sid, p["pid"])["stdout"], "kept\n")

    def test_detaching_leaves_the_process(self):
        sid = self.d.create()
        p = self.start(sid, cmd="echo hi; sleep 60")
        conn, resp = open_stream(self.d, "GET", self.path(sid, p["pid"], "/attach"))
        self.assertEqual(read_event(resp)["type"], "start")
        self.assertEqual(read_event(resp), {"type": "stdout", "data": "hi\n"})
        conn.close()
        resp.close()
        time.sleep(1.5)  # longer than the daemon's check for hung-up clients
        self.assertTrue(self.d.api("GET", self.path(sid, p["pid"])).json()["running"])

    def test_attach_reports_dropped_output(self):
        sid = self.d.create()
        total = 3 * MIB + 12345
        p = self.start(sid, cmd="head -c %d /dev/zero | tr '\\0' x; echo tail >&2" % total)
        wait_until(lambda: not self.d.api("GET", self.path(sid, p["pid"])).json()["running"],
                   what="the producer to finish")
        events = parse_ndjson(self.d.api("GET", self.path(sid, p["pid"], "/attach")).body)
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "start")
        self.assertEqual(types[-1], "exit")
        dropped = [e for e in events if e["type"] == "dropped"]
        self.assertEqual(len(dropped), 1, types[:5])
        # The last 1 MiB is kept; the rest is reported, before the output.
        self.assertEqual((dropped[0]["stdout"], dropped[0]["stderr"]), (total - MIB, 0))
        self.assertLess(types.index("dropped"), types.index("stdout"))
        out = "".join(e["data"] for e in events if e["type"] == "stdout")
        self.assertEqual(out, "x" * MIB)
        self.assertEqual("".join(e["data"] for e in events if e["type"] == "stderr"), "tail\n")
        # wait gives the same buffered output, marked truncated.
        res = self.wait(sid, p["pid"])
        self.assertEqual((len(res["stdout"]), res["stdout_truncated"]), (MIB, True))
        self.assertEqual((res["stderr"], res["stderr_truncated"]), ("tail\n", False))
        self.assertEqual(set(res["stdout"]), {"x"})

    def test_output_buffer_is_the_newest(self):
        sid = self.d.create()
        p = self.start(sid, cmd="seq 1 400000")  # ~2.6 MB
        res = self.wait(sid, p["pid"], timeout="60s")
        lines = res["stdout"].split("\n")
        self.assertTrue(res["stdout_truncated"])
        self.assertEqual(lines[-2:], ["400000", ""])
        self.assertEqual(len(res["stdout"].encode()), MIB)


def rt_sigaction(sig, handler):
    """Signal `sig` to handler 0 (SIG_DFL) or 1 (SIG_IGN), by the system
    call (x86-64's struct: handler, flags, restorer, mask)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    act = (ctypes.c_ulong * 4)(handler, 0, 0, 0)
    if libc.syscall(13, sig, ctypes.byref(act), None, 8) != 0:  # SYS_rt_sigaction
        raise OSError(ctypes.get_errno(), "rt_sigaction")


class InheritedIgnoredSignals(BackgroundProcesses):
    """A daemon started by nohup, or as a shell's background job, has
    SIGHUP, SIGINT and SIGQUIT ignored, and exec keeps ignored signals:
    none of that may reach a sandbox's commands (a terminal's ^C and a
    signal sent by the API would do nothing)."""

    # (not SIGTERM: the harness stops the daemon with it)
    IGNORED = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGCHLD")

    @classmethod
    def setUpClass(cls):
        import signal
        saved = {n: signal.signal(getattr(signal, n), signal.SIG_IGN) for n in cls.IGNORED}
        # and 32, glibc's own (CI's runs have started the daemon with it
        # ignored), by the system call: glibc's sigaction refuses it
        rt_sigaction(32, 1)
        try:
            super().setUpClass()
        finally:
            rt_sigaction(32, 0)
            for n, h in saved.items():
                signal.signal(getattr(signal, n), h)

    def test_commands_start_with_default_dispositions(self):
        sid = self.d.create()
        # the daemon itself was started with them ignored (the control)
        with open("/proc/%d/status" % self.d.proc.pid) as f:
            ign = int([l for l in f if l.startswith("SigIgn:")][0].split()[1], 16)
        self.assertTrue(ign & (1 << (1 - 1)) and ign & (1 << (2 - 1)), hex(ign))  # HUP, INT
        for how in ({"argv": ["grep", "^Sig[IB]", "/proc/self/status"]},):
            res = self.d.exec(sid, **how)
            self.assertEqual(res["stdout"], "SigBlk:\t0000000000000000\n"
                                            "SigIgn:\t0000000000000000\n", res)
        for sig in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGTERM"):
            with self.subTest(signal=sig):
                p = self.start(sid, argv=["sleep", "60"])
                r = self.d.api("POST", self.path(sid, p["pid"], "/signal"), {"signal": sig})
                self.assertEqual(r.status, 204, r)
                res = self.wait(sid, p["pid"], timeout="30s")
                self.assertEqual((res.get("exit_code"), res.get("signal")), (None, sig), res)


class CutShort(DaemonTest):
    def test_sandbox_killed_meanwhile(self):
        sid = self.d.create()
        p = "/v1/sandboxes/" + sid
        results = {}

        def call(name, body):
            results[name] = self.d.api("POST", p + "/exec", body)

        threads = [threading.Thread(target=call, args=("one", {"cmd": "sleep 100"})),
                   threading.Thread(target=call, args=("stream", {"cmd": "echo x; sleep 100",
                                                                  "stream": True}))]
        bg = self.d.api("POST", p + "/processes", {"argv": ["sleep", "100"]}).json()["pid"]
        threads.append(threading.Thread(
            target=lambda: results.__setitem__("wait", self.d.api(
                "GET", p + "/processes/%d/wait" % bg))))
        for t in threads:
            t.start()
        wait_until(lambda: len([x for x in self.d.api("GET", p + "/processes").json()["processes"]
                                if x["running"]]) == 3, what="three running commands")
        self.assertEqual(self.d.kill(sid).status, 204)
        for t in threads:
            t.join(30)
            self.assertFalse(t.is_alive())
        one = results["one"]
        self.assertEqual(one.status, 200, one)
        self.assertEqual(one.json()["reason"], "sandbox killed")
        self.assertIsNone(one.json()["exit_code"])
        events = parse_ndjson(results["stream"].body)
        self.assertEqual(events[-1]["type"], "exit")
        self.assertEqual(events[-1]["reason"], "sandbox killed")
        # (A wait that reaches the daemon only after the kill finds nothing:
        # a plain 404. One that was waiting gets the result.)
        if results["wait"].status == 404:
            self.assertEqual(results["wait"].json()["error"], "not_found")
        else:
            self.assertEqual(results["wait"].json()["reason"], "sandbox killed")
        # And then it is gone for every route.
        self.assertError(self.d.api("POST", p + "/exec", {"argv": ["true"]}), 404, "not_found")

    def test_sandbox_expired_meanwhile(self):
        sid = self.d.create(timeout=2)
        res = self.d.exec(sid, cmd="echo before; sleep 100")
        self.assertEqual(res["reason"], "sandbox expired")
        self.assertIsNone(res["exit_code"])
        self.assertEqual(res["stdout"], "before\n")
        wait_until(lambda: sid not in sandbox_ids(self.d), what="the sandbox to be gone")


if __name__ == "__main__":
    import unittest
    unittest.main()
