"""Terminals (`"pty"`) for a microVM sandbox (docs/vm.md "Terminals").

The terminal is the guest's: the agent allocates it from a private devpts
instance in the guest, makes its slave the command's stdio and controlling
terminal, and sends the master's bytes as STDOUT frames; the relay gives
the daemon one end of a socket pair where a namespace init gives the
master. The API is the namespace engine's, so the checks are test_pty.py's,
on one VM for the class: isatty on 0/1/2, the size at create and after a
resize (SIGWINCH), echo and line editing, ^C to the foreground job, ^D,
exit statuses, kill, the walls of the command (uid 1000, no capabilities,
no_new_privs, seccomp) and nothing left behind.
"""
import re
import time

import test_pty  # not its class: the runner would run its tests too
from sbx_helpers import wait_until
from vm_util import OneVMTest


class VMPty(OneVMTest):
    # test_pty.py's helpers: start, output (through attach), wait, stdin, resize.
    start = test_pty.PtyTest.start
    output = test_pty.PtyTest.output
    wait = test_pty.PtyTest.wait
    stdin = test_pty.PtyTest.stdin
    resize = test_pty.PtyTest.resize

    def kill_and_wait(self, pid):
        r = self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (self.sid, pid),
                       {"signal": "SIGKILL"})
        self.assertEqual(r.status, 204, r)
        return self.wait(self.sid, pid)

    def test_terminal_is_stdio_and_controlling_tty(self):
        pid = self.start(self.sid, "test -t 0 && test -t 1 && test -t 2 && echo ISATTY; tty; "
                                   "stty size; stat -c 'owner=%U group=%G mode=%a' $(tty); "
                                   "ps -o tty= -p $$; echo via-dev-tty > /dev/tty; exit 7",
                         cols=100, rows=30)
        res = self.wait(self.sid, pid)
        self.assertEqual((res["exit_code"], res["signal"], res["reason"]), (7, None, None), res)
        self.assertEqual(res["stderr"], "")
        out = res["stdout"]
        self.assertIn("ISATTY\r\n", out)
        m = re.search(r"^(/dev/pts/(\d+))\r$", out, re.M)
        self.assertIsNotNone(m, out)
        self.assertIn("\r\n30 100\r\n", out)
        self.assertIn("owner=user group=tty mode=620", out)
        self.assertIn("pts/%s" % m.group(2), out)
        self.assertIn("via-dev-tty", out)

    def test_walls_of_a_terminal_command(self):
        # The same walls as every command in the guest: uid 1000, no
        # capability at all, no_new_privs, the seccomp filter.
        res = self.d.exec(self.sid, cmd="id -u; id -g; grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|"
                                        "NoNewPrivs|Seccomp):' /proc/self/status",
                          pty={"cols": 80, "rows": 24})
        self.assertEqual(res["exit_code"], 0, res)
        lines = [l.split() for l in res["stdout"].split("\r\n") if l]
        self.assertEqual(lines[:2], [["1000"], ["1000"]], res)
        got = {k.rstrip(":"): v for k, v in lines[2:]}
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(got[cap], "0000000000000000", got)
        self.assertEqual((got["NoNewPrivs"], got["Seccomp"]), ("1", "2"), got)
        # root in the guest gets its own terminal, still without capabilities.
        res = self.d.exec(self.sid, cmd="stat -c owner=%U $(tty); grep CapEff /proc/self/status",
                          user="root", pty={"cols": 1, "rows": 1})
        self.assertEqual(res["exit_code"], 0, res)
        self.assertRegex(res["stdout"], r"^owner=root\r\nCapEff:\s+0000000000000000\r\n$")

    def test_exec_with_pty_one_stream(self):
        res = self.d.exec(self.sid, cmd="tty; stty size; echo err >&2; exit 3",
                          pty={"cols": 90, "rows": 20})
        self.assertEqual(res["exit_code"], 3, res)
        self.assertRegex(res["stdout"], r"^/dev/pts/\d+\r\n20 90\r\nerr\r\n$")
        self.assertEqual(res["stderr"], "")
        res = self.d.exec(self.sid, cmd="stty size", pty={"cols": 1000, "rows": 1000})
        self.assertEqual(res["stdout"], "1000 1000\r\n", res)

    def test_resize_sends_sigwinch(self):
        pid = self.start(self.sid, argv=test_pty.WINCH_PROG, cols=80, rows=24)
        text, _ = self.output(self.sid, pid, r"READY", timeout=60)
        tty = re.search(r"/dev/pts/\d+", text).group(0)
        r = self.resize(self.sid, pid, {"cols": 120, "rows": 40})
        self.assertEqual((r.status, r.body), (204, b""), r)
        self.assertEqual(self.d.sh(self.sid, "stty size < " + tty)["stdout"], "40 120\n")
        text, _ = self.output(self.sid, pid, r"WINCH 40 120", timeout=60)
        if "WINCH 40 120" not in text:  # what the command's state was, for the failure
            text += self.d.sh(self.sid, "p=$(pgrep -o -f 'import os, select'); grep -E "
                              "'State|Sig' /proc/$p/status; cat /proc/$p/wchan /proc/$p/stack; "
                              "ps -o pid,pgid,sid,tpgid,tty,stat,comm -e | grep -v ' \\['",
                              user="root")["stdout"]
        self.assertIn("WINCH 40 120", text)
        # The size is set before anything that follows on the wire: another
        # command sees it (the same user owns the terminal).
        r = self.resize(self.sid, pid, {"cols": 7, "rows": 3})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.d.sh(self.sid, "stty size < " + tty)["stdout"], "3 7\n")
        self.assertEqual(self.stdin(self.sid, pid, b"x\n").status, 204)
        text, _ = self.output(self.sid, pid, r"got:x[\s\S]*WINCH 3 7|WINCH 3 7[\s\S]*got:x",
                              timeout=60)
        self.assertIn("WINCH 3 7", text)
        self.assertIn("got:x", text)
        # Out of range: refused by the API as on a namespace sandbox.
        self.assertError(self.resize(self.sid, pid, {"cols": 0, "rows": 3}), 400)
        self.assertError(self.resize(self.sid, pid, {"cols": 1001, "rows": 3}), 400)
        res = self.kill_and_wait(pid)
        self.assertEqual(res["signal"], "SIGKILL", res)
        # Finished: a resize is a conflict now.
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"cmd": "exit 0", "pty": {"cols": 10, "rows": 10}})
        done = r.json()["pid"]
        wait_until(lambda: not self.d.api("GET", "/v1/sandboxes/%s/processes/%d"
                                          % (self.sid, done)).json()["running"],
                   what="the command to finish", timeout=60)
        self.assertError(self.resize(self.sid, done, {"cols": 20, "rows": 20}), 409, "conflict")
        # A command without a terminal has nothing to resize.
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid, {"cmd": "sleep 60"})
        plain = r.json()["pid"]
        body = self.assertError(self.resize(self.sid, plain, {"cols": 80, "rows": 24}), 400,
                                "invalid_argument")
        self.assertIn("no terminal", body["message"])
        self.kill_and_wait(plain)

    def test_interactive_shell_echo_editing_ctrl_c(self):
        pid = self.start(self.sid, argv=["/bin/bash", "--norc", "--noprofile", "-i"],
                         env={"TERM": "xterm-256color", "PS1": "PROMPT$ "})
        self.output(self.sid, pid, r"PROMPT\$ ", timeout=60)
        # Quoted so that the terminal's echo of the line is not the answer.
        self.assertEqual(self.stdin(self.sid, pid, b"echo hel''lo $TERM; tty\n").status, 204)
        text, _ = self.output(self.sid, pid, r"hello xterm-256color\r\n/dev/pts/\d+", timeout=60)
        self.assertRegex(text, r"echo hel''lo \$TERM; tty\r\n")  # the echo of the line
        self.assertRegex(text, r"hello xterm-256color\r\n/dev/pts/\d+")
        # Line editing: DEL erases the X before the line is run.
        self.assertEqual(self.stdin(self.sid, pid, b"echo ed''iX\x7ft\n").status, 204)
        text, _ = self.output(self.sid, pid, r"(?m)^edit\r$", timeout=60)
        self.assertRegex(text, r"(?m)^edit\r$")
        # ^C reaches the foreground job as SIGINT.
        self.assertEqual(self.stdin(self.sid, pid, b"sleep 60; echo after-sleep\n").status, 204)
        self.output(self.sid, pid, r"sleep 60; echo after-sleep\r\n", timeout=60)
        deadline = time.monotonic() + 60
        while "sleep 60" not in self.d.sh(self.sid, "ps -eo args")["stdout"]:
            self.assertLess(time.monotonic(), deadline, "sleep never started")
            time.sleep(0.2)
        self.assertEqual(self.stdin(self.sid, pid, b"\x03").status, 204)
        self.assertEqual(self.stdin(self.sid, pid, b"echo st=$?\n").status, 204)
        text, _ = self.output(self.sid, pid, r"st=130", timeout=60)
        self.assertIn("st=130", text)
        self.assertIsNone(re.search(r"(?m)^after-sleep\r$", text), text)
        self.assertEqual(self.stdin(self.sid, pid, b"exit 5\n").status, 204)
        res = self.wait(self.sid, pid)
        self.assertEqual((res["exit_code"], res["signal"]), (5, None), res)

    def test_ctrl_d_and_eof(self):
        pid = self.start(self.sid, argv=["cat"])
        self.assertEqual(self.stdin(self.sid, pid, b"abc\n\x04").status, 204)
        res = self.wait(self.sid, pid)
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(res["stdout"], "abc\r\nabc\r\n", res)
        # The API's eof is not the terminal's: the command runs on.
        pid = self.start(self.sid, "read -r a; echo \"a=$a\"; read -r b; echo \"b=$b\"",
                         stdin="first\n")
        text, _ = self.output(self.sid, pid, r"a=first", timeout=60)
        self.assertIn("a=first", text)
        self.assertEqual(self.stdin(self.sid, pid, b"", eof="1").status, 204)
        info = self.d.api("GET", "/v1/sandboxes/%s/processes/%d" % (self.sid, pid)).json()
        self.assertEqual((info["running"], info["stdin_open"]), (True, False), info)
        self.assertEqual(self.kill_and_wait(pid)["signal"], "SIGKILL")

    def test_kill_and_big_output(self):
        pid = self.start(self.sid, "echo started; sleep 60")
        self.output(self.sid, pid, "started", timeout=60)
        r = self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (self.sid, pid),
                       {"signal": "SIGTERM"})
        self.assertEqual(r.status, 204, r)
        res = self.wait(self.sid, pid)
        self.assertEqual((res["exit_code"], res["signal"]), (None, "SIGTERM"), res)
        self.assertIn("started", res["stdout"])
        # All of it arrives, even with a leftover holding the terminal.
        pid = self.start(self.sid, "setsid sleep 300 & head -c 200000 /dev/zero | tr '\\0' x; "
                                   "echo; echo END; exit 4")
        res = self.wait(self.sid, pid, timeout="60s")
        self.assertEqual(res["exit_code"], 4, res)
        self.assertTrue(res["stdout"].endswith("END\r\n"), res["stdout"][-200:])
        self.assertEqual(res["stdout"].count("x"), 200000)
        self.d.sh(self.sid, "pkill -x sleep; true")

    def test_zz_nothing_left(self):
        # Runs last (by name): every terminal is closed and no command of
        # these tests runs on in the guest.
        deadline = time.monotonic() + 30
        while True:
            pts = self.d.sh(self.sid, "ls /dev/pts")["stdout"].split()
            procs = self.d.sh(self.sid, "ps -eo user=,args= | grep -v -e 'ps -eo' -e grep "
                                        "| grep -E '^(user|1000) '", user="root")["stdout"]
            if pts == ["ptmx"] and procs == "":
                break
            self.assertLess(time.monotonic(), deadline, (pts, procs))
            time.sleep(0.5)
        listed = self.d.api("GET", "/v1/sandboxes/%s/processes" % self.sid).json()["processes"]
        self.assertEqual([p for p in listed if p.get("running")], [], listed)
