"""Commands on a pseudo-terminal (`"pty": {"cols": C, "rows": R}`): the
terminal comes from the sandbox's own devpts instance (init makes it), is
the command's stdin, stdout, stderr and controlling terminal, can be
resized while the command runs (SIGWINCH), takes input through the stdin
route, and ends cleanly when the command does. Hostile sizes are refused,
another sandbox never sees the terminal, and the host's terminals stay out
of reach. The restart case (a terminal command outlives a daemon killed
with SIGKILL and is re-adopted, terminal and all) is in PtyRestart.
"""
import os
import re
import time

from harness import DaemonTest
from sbx_helpers import open_stream, read_event, wait_until
from test_faults import http_pid, open_connections, prlimit_nofile
from test_restart import RestartTest, alive, find_init, host_pid, processes

ASAN_SUBSET = True

# Prints its terminal's name and "READY", then one line per SIGWINCH with
# the new size ("WINCH rows cols") and "got:LINE" for each line it reads;
# with an argument, "tick" every 0.2 s without input. (Not bash: its `read`
# loses trapped signals that come while it waits.)
WINCH_CODE = r"""
import os, select, signal, sys
def winch(*_):
    c, r = os.get_terminal_size(0)
    os.write(1, b"WINCH %d %d\n" % (r, c))
signal.signal(signal.SIGWINCH, winch)
# Python runs a handler between bytecodes: a signal that lands just before
# a blocking read waits for the read's end. The wakeup pipe makes the
# select return instead (a slow VM guest hit that window).
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
os.write(1, ("%s\nREADY\n" % os.ttyname(0)).encode())
tick, buf = len(sys.argv) > 1, b""
while True:
    ready = select.select([0, wake_r], [], [], 0.2 if tick else None)[0]
    if wake_r in ready:
        os.read(wake_r, 512)
    if not ready:
        os.write(1, b"tick\n")
        continue
    if 0 not in ready:
        continue
    data = os.read(0, 4096)
    if not data:
        break
    buf += data
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        os.write(1, b"got:" + line + b"\n")
"""
WINCH_PROG = ["python3", "-c", WINCH_CODE]


class PtyTest(DaemonTest):
    pool = 2

    # ---- helpers -------------------------------------------------------

    def start(self, sid, cmd=None, argv=None, cols=80, rows=24, **fields):
        body = dict(fields)
        if cmd is not None:
            body["cmd"] = cmd
        if argv is not None:
            body["argv"] = argv
        body["pty"] = {"cols": cols, "rows": rows}
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, body)
        self.assertEqual(r.status, 201, r)
        info = r.json()
        self.assertIsInstance(info["pid"], int, info)
        self.assertIs(info["pty"], True, info)
        # Its terminal takes input while it runs (a command that already
        # ended, `stty size` on a loaded machine, has none to take).
        self.assertIs(info["stdin_open"], info["running"], info)
        return info["pid"]

    def output(self, sid, pid, until, timeout=30):
        """The terminal's output from its first byte, read through attach
        until `until` (a regex) matches it or the command ends; returns
        (text, exit event or None)."""
        conn, resp = open_stream(self.d, "GET", "/v1/sandboxes/%s/processes/%d/attach"
                                 % (sid, pid), timeout=timeout)
        text, end = "", None
        deadline = time.monotonic() + timeout
        try:
            self.assertEqual(resp.status, 200)
            while time.monotonic() < deadline:
                ev = read_event(resp)
                if ev is None:
                    break
                if ev["type"] == "stdout":
                    text += ev["data"]
                self.assertNotEqual(ev["type"], "stderr", ev)  # a terminal has one stream
                if ev["type"] == "exit":
                    end = ev
                    break
                if until and re.search(until, text):
                    break
        finally:
            conn.close()
        return text, end

    def wait(self, sid, pid, timeout="30s"):
        r = self.d.api("GET", "/v1/sandboxes/%s/processes/%d/wait?timeout=%s" % (sid, pid, timeout))
        self.assertEqual(r.status, 200, r)
        res = r.json()
        self.assertNotEqual(res.get("running"), True, res)
        return res

    def stdin(self, sid, pid, data, **query):
        qs = "?" + "&".join("%s=%s" % kv for kv in query.items()) if query else ""
        return self.d.api("POST", "/v1/sandboxes/%s/processes/%d/stdin%s" % (sid, pid, qs),
                          data, raw=True)

    def resize(self, sid, pid, body):
        return self.d.api("POST", "/v1/sandboxes/%s/processes/%d/resize" % (sid, pid), body)

    # ---- the terminal --------------------------------------------------

    def test_terminal_is_stdio_and_controlling_tty(self):
        sid = self.d.create()
        pid = self.start(sid, "test -t 0 && test -t 1 && test -t 2 && echo ISATTY; tty; stty size; "
                              "stat -c 'owner=%U group=%G mode=%a' $(tty); "
                              "ps -o tty= -p $$; echo via-dev-tty > /dev/tty; exit 7",
                         cols=100, rows=30)
        res = self.wait(sid, pid)
        self.assertEqual((res["exit_code"], res["signal"], res["reason"]), (7, None, None), res)
        out = res["stdout"]
        self.assertEqual(res["stderr"], "")
        self.assertIn("ISATTY\r\n", out)
        m = re.search(r"^(/dev/pts/(\d+))\r$", out, re.M)
        self.assertIsNotNone(m, out)
        self.assertIn("\r\n30 100\r\n", out)
        # Its user owns it, as after a login; devpts's tty group, mode 620.
        self.assertIn("owner=user group=tty mode=620", out)
        self.assertIn("pts/%s" % m.group(2), out)  # its controlling terminal
        self.assertIn("via-dev-tty", out)           # /dev/tty is that terminal

    def test_root_gets_its_own_terminal_too(self):
        sid = self.d.create()
        pid = self.start(sid, "stat -c 'owner=%U' $(tty); id -u", user="root", cols=1, rows=1)
        res = self.wait(sid, pid)
        self.assertEqual(res["exit_code"], 0, res)
        self.assertIn("owner=root", res["stdout"])

    def test_largest_size(self):
        sid = self.d.create()
        pid = self.start(sid, "stty size", cols=1000, rows=1000)
        res = self.wait(sid, pid)
        self.assertEqual(res["exit_code"], 0, res)
        self.assertIn("1000 1000", res["stdout"])

    def test_listing_says_pty(self):
        sid = self.d.create()
        tpid = self.start(sid, "sleep 60")
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "sleep 60"})
        self.assertEqual(r.status, 201, r)
        ppid = r.json()["pid"]
        self.assertIs(r.json()["pty"], False)
        listed = {p["pid"]: p for p in
                  self.d.api("GET", "/v1/sandboxes/%s/processes" % sid).json()["processes"]}
        self.assertIs(listed[tpid]["pty"], True)
        self.assertIs(listed[ppid]["pty"], False)
        r = self.d.api("GET", "/v1/sandboxes/%s/processes/%d" % (sid, tpid))
        self.assertIs(r.json()["pty"], True, r)

    # ---- resize ---------------------------------------------------------

    def test_resize_sends_sigwinch(self):
        sid = self.d.create()
        pid = self.start(sid, argv=WINCH_PROG, cols=80, rows=24)
        self.output(sid, pid, r"READY")
        r = self.resize(sid, pid, {"cols": 120, "rows": 40})
        self.assertEqual((r.status, r.body), (204, b""), r)
        text, _ = self.output(sid, pid, r"WINCH 40 120")
        self.assertIn("WINCH 40 120", text)
        # The answer comes once init has set it: whatever runs next sees the
        # new size.
        tty = re.search(r"/dev/pts/\d+", self.d.sh(sid, "ls /dev/pts/[0-9]*")["stdout"]).group(0)
        r = self.resize(sid, pid, {"cols": 7, "rows": 3})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.d.sh(sid, "stty size < " + tty)["stdout"], "3 7\n")
        self.assertEqual(self.stdin(sid, pid, b"x\n").status, 204)
        text, _ = self.output(sid, pid, r"got:x[\s\S]*WINCH 3 7|WINCH 3 7[\s\S]*got:x")
        self.assertIn("WINCH 3 7", text)
        self.assertIn("got:x", text)
        r = self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, pid),
                       {"signal": "SIGKILL"})
        self.assertEqual(r.status, 204, r)
        res = self.wait(sid, pid)
        self.assertEqual(res["signal"], "SIGKILL", res)
        # Finished: a resize is a conflict now.
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                       {"cmd": "exit 0", "pty": {"cols": 10, "rows": 10}})
        done = r.json()["pid"]
        wait_until(lambda: not self.d.api("GET", "/v1/sandboxes/%s/processes/%d" % (sid, done))
                   .json()["running"], what="the command to finish")
        self.assertError(self.resize(sid, done, {"cols": 20, "rows": 20}), 409, "conflict")

    def test_resize_errors(self):
        sid = self.d.create()
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "sleep 60"})
        plain = r.json()["pid"]
        body = self.assertError(self.resize(sid, plain, {"cols": 80, "rows": 24}), 400,
                                "invalid_argument")
        self.assertIn("no terminal", body["message"])
        self.assertError(self.resize(sid, 4000000, {"cols": 80, "rows": 24}), 404, "not_found")
        self.assertError(self.resize(sid, 0, {"cols": 80, "rows": 24}), 400)
        self.assertError(self.d.api("POST", "/v1/sandboxes/nope/processes/2/resize",
                                    {"cols": 80, "rows": 24}), 404)
        pid = self.start(sid, "stty size; sleep 60", cols=33, rows=11)
        for bad in ({}, {"cols": 80}, {"rows": 24}, {"cols": 0, "rows": 24},
                    {"cols": 80, "rows": 0}, {"cols": 70000, "rows": 24},
                    {"cols": 80, "rows": 1001}, {"cols": -1, "rows": 24},
                    {"cols": "80", "rows": "24"}, {"cols": 80.0, "rows": 24},
                    {"cols": True, "rows": 24}, {"cols": None, "rows": 24},
                    {"cols": 2 ** 32 + 80, "rows": 24}, {"cols": 2 ** 63 - 1, "rows": 24},
                    {"cols": 80, "rows": 24, "x": 1}, [80, 24], "80x24"):
            body = self.assertError(self.resize(sid, pid, bad), 400, "invalid_argument")
            self.assertTrue(body["message"])
        # None of that changed the size.
        r = self.d.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "stty size < /dev/pts/0"})
        self.assertEqual(r.json()["stdout"].strip(), "11 33", r)

    # ---- input ----------------------------------------------------------

    def test_input_reaches_an_interactive_shell(self):
        sid = self.d.create()
        pid = self.start(sid, argv=["/bin/bash", "--norc", "--noprofile", "-i"],
                         env={"TERM": "xterm-256color", "PS1": "PROMPT$ "})
        self.output(sid, pid, r"PROMPT\$ ")
        # Quoted so that the terminal's echo of the line is not the answer.
        self.assertEqual(self.stdin(sid, pid, b"echo hel''lo $TERM; tty\n").status, 204)
        text, _ = self.output(sid, pid, r"hello xterm-256color\r\n/dev/pts/\d+")
        self.assertRegex(text, r"hello xterm-256color\r\n/dev/pts/\d+")
        # ^C reaches the foreground job as SIGINT, as on any terminal.
        self.assertEqual(self.stdin(sid, pid, b"sleep 60; echo after-sleep\n").status, 204)
        time.sleep(0.5)
        self.assertEqual(self.stdin(sid, pid, b"\x03").status, 204)
        self.assertEqual(self.stdin(sid, pid, b"echo st=$?\n").status, 204)
        text, _ = self.output(sid, pid, r"st=130")
        self.assertIn("st=130", text)
        # (The line itself is echoed; its output never came.)
        self.assertIsNone(re.search(r"(?m)^after-sleep\r$", text), text)
        self.assertEqual(self.stdin(sid, pid, b"exit 5\n").status, 204)
        res = self.wait(sid, pid)
        self.assertEqual((res["exit_code"], res["signal"]), (5, None), res)

    def test_initial_stdin_and_eof(self):
        sid = self.d.create()
        pid = self.start(sid, "read -r a; echo \"a=$a\"; read -r b; echo \"b=$b\"",
                         stdin="first\n")
        text, _ = self.output(sid, pid, r"a=first")
        self.assertIn("a=first", text)
        # eof closes the API's side; a terminal has no end of input but ^D,
        # so the command still runs, and further writes are refused.
        self.assertEqual(self.stdin(sid, pid, b"", eof="1").status, 204)
        info = self.d.api("GET", "/v1/sandboxes/%s/processes/%d" % (sid, pid)).json()
        self.assertEqual((info["running"], info["stdin_open"]), (True, False), info)
        self.assertError(self.stdin(sid, pid, b"x\n"), 409, "conflict")
        self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, pid),
                   {"signal": "SIGKILL"})
        self.assertEqual(self.wait(sid, pid)["signal"], "SIGKILL")

    def test_ctrl_d_ends_cat(self):
        sid = self.d.create()
        pid = self.start(sid, argv=["cat"])
        self.assertEqual(self.stdin(sid, pid, b"abc\n\x04").status, 204)
        res = self.wait(sid, pid)
        self.assertEqual(res["exit_code"], 0, res)
        # The echo of the line, then cat's copy of it.
        self.assertEqual(res["stdout"], "abc\r\nabc\r\n", res)

    # ---- endings ---------------------------------------------------------

    def test_kill(self):
        sid = self.d.create()
        pid = self.start(sid, "echo started; sleep 60")
        self.output(sid, pid, "started")
        r = self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, pid),
                       {"signal": "SIGTERM"})
        self.assertEqual(r.status, 204, r)
        res = self.wait(sid, pid)
        self.assertEqual((res["exit_code"], res["signal"]), (None, "SIGTERM"), res)
        self.assertIn("started", res["stdout"])

    def test_output_complete_when_a_leftover_holds_the_terminal(self):
        # A process left behind in its own session keeps the slave open: the
        # master never reads EIO, yet the command ends, with all its output.
        sid = self.d.create()
        pid = self.start(sid, "setsid sleep 300 & head -c 200000 /dev/zero | tr '\\0' x; "
                              "echo; echo END; exit 4")
        res = self.wait(sid, pid, timeout="30s")
        self.assertEqual(res["exit_code"], 4, res)
        out = res["stdout"]
        self.assertTrue(out.endswith("END\r\n"), out[-200:])
        self.assertEqual(out.count("x"), 200000)
        # The leftover still runs, holding the terminal.
        ps = self.d.sh(sid, "readlink /proc/$(pgrep -xf 'sleep 300')/fd/1")
        self.assertRegex(ps["stdout"], r"^/dev/pts/\d+( \(deleted\))?\n$")

    def test_lossless_stream_of_a_terminal(self):
        # A stream paces the command (its buffer fills while the client does
        # not read, the terminal fills, the command blocks), and the end is
        # complete even with a leftover holding the terminal: the last read
        # after the exit happens when the client catches up.
        sid = self.d.create()
        size = 2000000
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % sid,
                                 {"cmd": "setsid sleep 300 & head -c %d /dev/zero | "
                                         "tr '\\0' x; echo; echo END; exit 6" % size,
                                  "stream": True, "pty": {"cols": 80, "rows": 24}},
                                 timeout=60)
        try:
            self.assertEqual(resp.status, 200)
            start = read_event(resp)
            pid = start["pid"]
            # Not reading: it blocks (the stream's buffer, the socket's and
            # the terminal's are full), it does not finish.
            time.sleep(2)
            info = self.d.api("GET", "/v1/sandboxes/%s/processes/%d" % (sid, pid)).json()
            self.assertIs(info["running"], True, info)
            there = self.d.sh(sid, "test -d /proc/%d && echo there" % pid)["stdout"]
            self.assertEqual(there, "there\n")
            text, end = "", None
            while end is None:
                ev = read_event(resp)
                self.assertIsNotNone(ev, text[-200:])
                if ev["type"] == "stdout":
                    text += ev["data"]
                elif ev["type"] == "exit":
                    end = ev
                else:
                    self.assertEqual(ev["type"], "keepalive", ev)
        finally:
            conn.close()
        self.assertEqual(end["exit_code"], 6, end)
        self.assertEqual(text.count("x"), size)
        self.assertTrue(text.endswith("END\r\n"), text[-100:])

    def test_a_terminal_command_that_cannot_start(self):
        sid = self.d.create()
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                       {"argv": ["/nonexistent"], "pty": {"cols": 80, "rows": 24}})
        self.assertEqual(r.status, 201, r)
        res = r.json()
        self.assertEqual((res["pid"], res["exit_code"], res["running"]), (None, 127, False), res)
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                       {"cmd": "exit 0", "cwd": "/nonexistent",
                        "pty": {"cols": 80, "rows": 24}})
        self.assertEqual(r.json()["exit_code"], 126, r)
        # Nothing left behind: the sandbox's devpts has no terminal open.
        self.assertEqual(self.d.sh(sid, "ls /dev/pts")["stdout"].split(), ["ptmx"])

    def test_exec_with_pty(self):
        sid = self.d.create()
        res = self.d.exec(sid, cmd="tty; stty size; echo err >&2; exit 3",
                          pty={"cols": 90, "rows": 20})
        self.assertEqual(res["exit_code"], 3, res)
        self.assertRegex(res["stdout"], r"^/dev/pts/\d+\r\n20 90\r\nerr\r\n$")
        self.assertEqual(res["stderr"], "")
        # A stream, resized while it runs.
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % sid,
                                 {"argv": WINCH_PROG, "stream": True,
                                  "pty": {"cols": 80, "rows": 24}}, timeout=30)
        try:
            self.assertEqual(resp.status, 200)
            start = read_event(resp)
            pid = start["pid"]
            text = ""
            while "READY" not in text:
                ev = read_event(resp)
                self.assertEqual(ev["type"], "stdout", ev)
                text += ev["data"]
            self.assertEqual(self.resize(sid, pid, {"cols": 61, "rows": 17}).status, 204)
            while "WINCH 17 61" not in text:
                ev = read_event(resp)
                self.assertEqual(ev["type"], "stdout", (ev, text))
                text += ev["data"]
            self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, pid),
                       {"signal": "SIGKILL"})
            while True:
                ev = read_event(resp)
                if ev["type"] == "exit":
                    self.assertEqual(ev["signal"], "SIGKILL", ev)
                    break
        finally:
            conn.close()

    def test_many_terminals(self):
        sid = self.d.create()
        pids = [self.start(sid, "tty; read -r x; echo \"bye $x\"") for _ in range(20)]
        ttys = set()
        for pid in pids:
            text, _ = self.output(sid, pid, r"/dev/pts/\d+\r\n")
            ttys.add(re.search(r"/dev/pts/\d+", text).group(0))
        self.assertEqual(len(ttys), 20)
        for i, pid in enumerate(pids):
            self.assertEqual(self.stdin(sid, pid, b"%d\n" % i).status, 204)
        for i, pid in enumerate(pids):
            res = self.wait(sid, pid)
            self.assertIn("bye %d\r\n" % i, res["stdout"])
        # Every terminal is gone with its command (init let go of the master).
        wait_until(lambda: self.d.sh(sid, "ls /dev/pts")["stdout"].split() == ["ptmx"],
                   what="the terminals to be released")

    def test_daemon_out_of_fds(self):
        # The front end cannot take the terminal's master (or its second
        # descriptor): the command is killed with a reason, not left running
        # unseen; the sandbox and the daemon carry on.
        sid = self.d.create()
        fe = http_pid(self.d)
        saved = prlimit_nofile(fe)
        try:
            for spare in (1, 2):
                # Quiet first: no connection open, and the pool refilled (a
                # refill opens descriptors of its own, and would take the
                # spare one the request's connection needs: it then hung,
                # never accepted, on a loaded machine).
                wait_until(lambda: open_connections(self.d) == 0
                           and self.d.api("GET", "/v1/info").json()["pool"] == self.pool,
                           what="connections to close and the pool to refill")
                wait_until(lambda: open_connections(self.d) == 0, what="connections to close")
                used = set(int(x) for x in os.listdir("/proc/%d/fd" % fe))
                n, free = 0, 0
                while free < spare:  # the request's connection takes one
                    if n not in used:
                        free += 1
                    n += 1
                prlimit_nofile(fe, (n, saved[1]))
                r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                               {"cmd": "sleep 60", "pty": {"cols": 80, "rows": 24}})
                prlimit_nofile(fe, saved)
                self.assertEqual(r.status, 201, r)
                pid = r.json()["pid"]
                res = self.wait(sid, pid)
                self.assertEqual(res["signal"], "SIGKILL", res)
                self.assertIn("could not take its terminal", res["reason"])
        finally:
            prlimit_nofile(fe, saved)
        res = self.d.exec(sid, cmd="tty", pty={"cols": 80, "rows": 24})
        self.assertEqual(res["exit_code"], 0, res)

    # ---- hostile input -----------------------------------------------------

    def test_hostile_sizes(self):
        sid = self.d.create()
        for bad in (0, 70000, "80x24", -1, True, [80, 24], {}, {"cols": 80},
                    {"rows": 24}, {"cols": 0, "rows": 24}, {"cols": 80, "rows": 0},
                    {"cols": 70000, "rows": 24}, {"cols": 80, "rows": 70000},
                    {"cols": -80, "rows": 24}, {"cols": 80, "rows": -24},
                    {"cols": "80", "rows": 24}, {"cols": 80, "rows": "24"},
                    {"cols": 80.0, "rows": 24}, {"cols": 80.5, "rows": 24},
                    {"cols": 1001, "rows": 24}, {"cols": 2 ** 32 + 80, "rows": 24},
                    {"cols": 2 ** 16 + 80, "rows": 24}, {"cols": 80, "rows": 24, "x": 1},
                    {"cols": None, "rows": 24}):
            for route in ("processes", "exec"):
                r = self.d.api("POST", "/v1/sandboxes/%s/%s" % (sid, route),
                               {"cmd": "touch /tmp/started", "pty": bad})
                body = self.assertError(r, 400, "invalid_argument")
                self.assertIn("pty", body["message"], (bad, body))
        # Nothing ran.
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/processes" % sid)
                         .json()["processes"], [])
        self.assertEqual(self.d.sh(sid, "test -e /tmp/started; echo $?")["stdout"], "1\n")
        # null is "no terminal".
        r = self.d.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "test -t 1", "pty": None})
        self.assertEqual(r.json()["exit_code"], 1, r)

    def test_terminals_per_sandbox_are_capped(self):
        # The host's terminals are shared by all sandboxes: one sandbox holds
        # at most 256 (its devpts max), and then a terminal command cannot
        # start, with a reason; the others are not affected.
        a, b = self.d.create(), self.d.create()
        pid = self.start(a, "python3 -c 'import os, errno, sys\n"
                            "fds = []\n"
                            "try:\n"
                            " while len(fds) < 400: fds.append(os.openpty())\n"
                            "except OSError as e: print(len(fds), errno.errorcode[e.errno])\n"
                            "sys.stdout.flush(); sys.stdin.read()'")
        text, _ = self.output(a, pid, r"\d+ \w+")
        # Its own terminal is the first of the 256.
        self.assertIn("255 ENOSPC", text)
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % a,
                       {"cmd": "true", "pty": {"cols": 80, "rows": 24}})
        res = r.json()
        self.assertEqual((res["pid"], res["exit_code"]), (None, 126), res)
        self.assertEqual(res["reason"], "cannot open a terminal: No space left on device")
        res = self.d.exec(b, cmd="tty", pty={"cols": 80, "rows": 24})
        self.assertEqual((res["exit_code"], res["stdout"]), (0, "/dev/pts/0\r\n"), res)

    # ---- isolation ---------------------------------------------------------

    def test_terminal_not_visible_to_other_sandboxes(self):
        a, b = self.d.create(), self.d.create()
        pid = self.start(a, "tty; sleep 60")
        text, _ = self.output(a, pid, r"/dev/pts/\d+")
        n = re.search(r"/dev/pts/(\d+)", text).group(1)
        self.assertEqual(self.d.sh(a, "ls /dev/pts", user="root")["stdout"].split(),
                         sorted([n, "ptmx"]))
        # Sandbox b has its own devpts: nothing of a's is there, and the
        # number means nothing.
        res = self.d.sh(b, "ls /dev/pts; cat /dev/pts/%s" % n, user="root")
        self.assertEqual(res["stdout"].split(), ["ptmx"], res)
        self.assertIn("No such file or directory", res["stderr"])
        # Nor can b reach it through its own ptmx numbering.
        res = self.d.exec(b, argv=["python3", "-c",
                                   "import os; m, s = os.openpty(); print(os.ttyname(s))"])
        self.assertEqual(res["stdout"], "/dev/pts/0\n", res)

    def test_no_host_terminal(self):
        sid = self.d.create()
        # Without a terminal a command has no controlling tty: /dev/tty leads
        # nowhere (the sandbox never gets a host tty; CVE-2017-5226).
        res = self.d.sh(sid, "cat /dev/tty; ps -o tty= -p $$")
        self.assertIn("No such device or address", res["stderr"])
        self.assertEqual(res["stdout"].strip(), "?")
        # With one, /dev/tty is that terminal and nothing else (its size).
        pid = self.start(sid, "python3 -c 'import os; fd = os.open(\"/dev/tty\", os.O_RDWR); "
                              "print(os.get_terminal_size(fd))'", cols=77, rows=23)
        res = self.wait(sid, pid)
        self.assertIn("columns=77, lines=23", res["stdout"], res)
        # TIOCSTI stays refused even on its own terminal.
        pid = self.start(sid, "python3 -c 'import fcntl, termios, errno\n"
                              "try:\n fcntl.ioctl(0, termios.TIOCSTI, b\"x\")\n"
                              "except OSError as e: print(\"errno\", errno.errorcode[e.errno])'")
        res = self.wait(sid, pid)
        self.assertIn("errno EPERM", res["stdout"], res)
        # The daemon's front end, which holds the masters, never got one of
        # them as its controlling terminal.
        front = [p for p in os.listdir("/proc") if p.isdigit() and
                 _ppid(p) == self.d.proc.pid and b"--frontend" in _cmdline(p)]
        self.assertEqual(len(front), 1, front)
        self.assertEqual(_stat(front[0])[4], _stat(self.d.proc.pid)[4])
        # Nor is the sandbox's init in the daemon's session (whose terminal,
        # if it was started from a shell, would be its controlling one).
        init = find_init(self.d, sid)
        st, daemon = _stat(init), _stat(self.d.proc.pid)
        self.assertNotEqual(st[3], daemon[3])  # session
        self.assertEqual(st[4], 0)             # tty_nr: none


def _stat(pid):
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp,
    session, tty_nr, ..."""
    with open("/proc/%s/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return [rest[0]] + [int(x) for x in rest[1:6]]


def _ppid(pid):
    try:
        return _stat(pid)[1]
    except OSError:
        return None


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


class PtyRestart(RestartTest):
    """A terminal command survives a daemon killed with SIGKILL: init keeps
    the master, the next daemon gets it back on ATTACH, and input, output,
    resize and signals work as before."""

    pool = 0

    def start(self, sid, cmd=None, argv=None, cols=80, rows=24):
        body = {"cmd": cmd} if cmd is not None else {"argv": argv}
        body["pty"] = {"cols": cols, "rows": rows}
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, body)
        self.assertEqual(r.status, 201, r)
        return r.json()["pid"]

    def attach_until(self, sid, pid, pattern, timeout=30):
        conn, resp = open_stream(self.d, "GET", "/v1/sandboxes/%s/processes/%d/attach"
                                 % (sid, pid), timeout=timeout)
        text = ""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and not re.search(pattern, text):
                ev = read_event(resp)
                if ev is None or ev["type"] == "exit":
                    break
                if ev["type"] == "stdout":
                    text += ev["data"]
        finally:
            conn.close()
        return text

    def test_terminal_command_is_readopted(self):
        d = self.d
        sid = d.create()
        pid = self.start(sid, argv=WINCH_PROG + ["tick"])
        text = self.attach_until(sid, pid, r"READY")
        tty = re.search(r"/dev/pts/\d+", text).group(0)
        self.assertEqual(d.api("POST", "/v1/sandboxes/%s/processes/%d/stdin" % (sid, pid),
                               b"one\n", raw=True).status, 204)
        self.attach_until(sid, pid, r"got:one")
        # A second one that ends while no daemon runs, and one on pipes.
        late = self.start(sid, "sleep 1; echo LATE; exit 9")
        r = d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                  {"cmd": "read -r x; echo plain-$x", "stdin_open": True})
        plain = r.json()["pid"]
        self.assertIs(r.json()["pty"], False)
        hp = host_pid(d, sid, pid)
        self.kill9()
        time.sleep(1.5)  # `late` ends, the loop ticks into the kept master
        self.assertTrue(alive(hp))
        d = self.restart()
        listed = {p["pid"]: p for p in processes(d, sid)}
        self.assertEqual((listed[pid]["running"], listed[pid]["pty"], listed[pid]["stdin_open"]),
                         (True, True, True), listed[pid])
        self.assertIs(listed[late]["pty"], True)
        self.assertIs(listed[plain]["pty"], False)
        self.assertEqual(d.api("POST", "/v1/sandboxes/%s/processes/%d/stdin?eof=1" % (sid, plain),
                               b"ok\n", raw=True).status, 204)
        r = d.api("GET", "/v1/sandboxes/%s/processes/%d/wait?timeout=30s" % (sid, plain))
        self.assertEqual((r.json()["exit_code"], r.json()["stdout"]), (0, "plain-ok\n"), r)
        # Ticks written while no daemon ran are there.
        self.assertRegex(self.attach_until(sid, pid, r"tick"), r"tick")
        # Input and resize reach the same terminal.
        self.assertEqual(d.api("POST", "/v1/sandboxes/%s/processes/%d/stdin" % (sid, pid),
                               b"two\n", raw=True).status, 204)
        r = d.api("POST", "/v1/sandboxes/%s/processes/%d/resize" % (sid, pid),
                  {"cols": 50, "rows": 20})
        self.assertEqual(r.status, 204, r)
        text = self.attach_until(sid, pid, r"got:two[\s\S]*WINCH 20 50|WINCH 20 50[\s\S]*got:two")
        self.assertIn("got:two", text)
        self.assertIn("WINCH 20 50", text)
        res = d.exec(sid, cmd="stty size < %s" % tty)
        self.assertEqual(res["stdout"].strip(), "20 50", res)
        # The one that ended meanwhile: its status and its last words.
        r = d.api("GET", "/v1/sandboxes/%s/processes/%d/wait?timeout=30s" % (sid, late))
        res = r.json()
        self.assertEqual(res["exit_code"], 9, res)
        self.assertIn("LATE", res["stdout"])
        r = d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, pid),
                  {"signal": "SIGKILL"})
        self.assertEqual(r.status, 204, r)
        r = d.api("GET", "/v1/sandboxes/%s/processes/%d/wait?timeout=30s" % (sid, pid))
        self.assertEqual(r.json()["signal"], "SIGKILL", r)
        self.assertFalse(alive(hp))
