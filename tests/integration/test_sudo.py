"""sudo inside a sandbox (src/iso/init/sudo.c, share/sbx/sudo) and the
writable root it is for: `user` runs a command as the sandbox's root, as
E2B's passwordless sudo does, with no setuid binary and no capability, and
everything init reads from the sandbox is hostile.
"""
import json
import textwrap

from harness import SLOW, DaemonTest
from hostile_util import py, sandbox_host_pids, sh_ok, wait_until

ASAN_SUBSET = True

# A client that speaks the wire by hand (iso/proto.h "sudo"): the
# request's header, its strings, and the descriptors given.
RAW = textwrap.dedent("""
    import json, os, socket, struct, sys
    def ask(payload, fds=(0, 1, 2), read=True):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect("\\0sbx-sudo")
        if fds:
            socket.send_fds(s, [payload], list(fds))
        elif payload:
            s.send(payload)
        r = s.recv(64) if read else b""
        s.close()
        return list(struct.unpack("<iiI", r)) if len(r) == 12 else len(r)
    def req(argv, env=(), cwd="/"):
        strings = [cwd] + list(argv) + list(env)
        return struct.pack("<II", len(argv), len(env)) + b"\\0".join(x.encode() for x in strings) + b"\\0"
""")


class Sudo(DaemonTest):
    pool = 1

    def setUp(self):
        self.sid = self.d.create()

    def sh(self, cmd, user="user", **fields):
        return self.d.sh(self.sid, cmd, user=user, **fields)

    def test_runs_as_root_without_capabilities(self):
        out = sh_ok(self, self.sid, "sudo id -u; sudo -u root whoami; sudo -n -H sh -c "
                    "'grep -E \"^(CapEff|CapPrm|CapBnd|NoNewPrivs)\" /proc/self/status'", user="user")
        lines = out.splitlines()
        self.assertEqual(lines[:2], ["0", "root"])
        self.assertEqual(sorted(l.split()[1] for l in lines[2:]), ["0000000000000000"] * 3 + ["1"], out)
        # the client is sbx's, root's and read-only, and not setuid
        st = sh_ok(self, self.sid, "stat -c '%U %a' /usr/bin/sudo")
        self.assertEqual(st, "root 755\n")
        self.assertIn("Read-only file system", self.sh("echo x > /usr/bin/sudo", user="root")["stderr"])

    def test_environment_stdio_status_and_cwd(self):
        # The run's own variables do not reach the command (env is reset),
        # as E2B's envVars test expects; -E keeps them.
        r = self.d.exec(self.sid, cmd='sudo sh -c \'echo "[$FOO] $HOME $USER $SUDO_USER $PWD"\'; '
                        'sudo -E sh -c \'echo "[$FOO]"\'', env={"FOO": "bar"})
        self.assertEqual(r["stdout"], "[] /root root user /home/user\n[bar]\n", r)
        self.assertEqual(sh_ok(self, self.sid, "echo piped | sudo cat; sudo sh -c 'echo err >&2' 2>&1"),
                         "piped\nerr\n")
        r = self.sh("sudo sh -c 'exit 7'; echo $?; sudo sh -c 'kill -9 $$'; echo $?; "
                    "sudo nope; echo $?; sudo -u user id; echo $?; sudo -x true; echo $?")
        self.assertEqual(r["stdout"], "7\n137\n1\n1\n1\n", r)
        self.assertIn("sudo: nope: command not found", r["stderr"])
        self.assertIn("only root is available", r["stderr"])
        self.assertEqual(sh_ok(self, self.sid, "cd /tmp && sudo pwd && sudo -i pwd"), "/tmp\n/root\n")

    def test_root_writes_the_root_user_does_not(self):
        sh_ok(self, self.sid, "sudo mkdir -p /opt/tool && echo v1 | sudo tee /opt/tool/conf >/dev/null")
        self.assertEqual(sh_ok(self, self.sid, "cat /opt/tool/conf; stat -c %U /opt/tool/conf"), "v1\nroot\n")
        r = self.sh("echo x > /opt/tool/conf; touch /evil")
        self.assertEqual(r["stderr"].count("Permission denied"), 2, r)
        # still nosuid: a setuid-root binary root made gives user nothing
        sh_ok(self, self.sid, "sudo cp /usr/bin/id /opt/id && sudo chmod 4755 /opt/id")
        self.assertEqual(sh_ok(self, self.sid, "/opt/id -u"), "1000\n")

    def test_signals_and_a_dead_client_end_the_command(self):
        # A SIGTERM to the client (a timeout's) reaches the command, once
        # it runs; its status is the client's.
        r = self.sh("sudo sh -c 'trap \"echo got-term; exit 3\" TERM; echo ready; sleep 30 & wait' >/tmp/o 2>&1 & "
                    "p=$!; until grep -q ready /tmp/o; do sleep 0.1; done; kill -TERM $p; wait $p; "
                    "echo rc=$?; cat /tmp/o", timeout="120s")
        self.assertEqual(r["stdout"], "rc=3\nready\ngot-term\n", r)
        # A client killed outright: its end closes, and init kills the
        # command's whole group.
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"cmd": "exec sudo sh -c 'sleep 1000 & sleep 1001'"})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        wait_until(lambda: "sleep 1001" in sh_ok(self, self.sid, "ps -eo args"), what="the command")
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (self.sid, pid),
                                    {"signal": "SIGKILL"}).status, 204)
        wait_until(lambda: "sleep 100" not in sh_ok(self, self.sid, "ps -eo args"),
                   what="the command and its child to be killed")
        # and the session's helper ends too (its slot is free): only init
        # and nothing else is left in the sandbox
        wait_until(lambda: len(sandbox_host_pids(self.d, self.sid)) == 1,
                   what="the session's helper to end")

    def test_hostile_requests_are_refused(self):
        code = RAW + textwrap.dedent("""
            out = {}
            out["no_fds"] = ask(req(["/bin/true"]), fds=())
            out["two_fds"] = ask(req(["/bin/true"]), fds=(0, 1))
            out["garbage"] = ask(b"\\xff" * 7)
            out["argc_zero"] = ask(req([]))
            out["too_many_args"] = ask(struct.pack("<II", 5000, 0) + b"/\\0" + b"a\\0" * 5000)
            out["not_terminated"] = ask(req(["/bin/true"])[:-1])
            out["trailing"] = ask(req(["/bin/true"]) + b"x\\0")
            out["relative_cwd"] = ask(req(["/bin/true"], cwd="tmp"))
            out["env_without_eq"] = ask(req(["/bin/true"], env=["NOEQ"]))
            out["count_short"] = ask(struct.pack("<II", 3, 0) + b"/\\0/bin/true\\0")
            out["too_large"] = ask(req(["/bin/true", "x" * 200000]))
            out["silent"] = ask(b"", fds=(), read=True)
            out["ok"] = ask(req(["/bin/true"]))
            print(json.dumps(out))
        """)
        out = json.loads(py(self, self.sid, code))
        EINVAL, E2BIG = 22, 7
        for k in ("two_fds", "garbage", "not_terminated", "trailing", "relative_cwd", "env_without_eq",
                  "count_short"):
            self.assertEqual(out[k], [2, EINVAL, 0], k)
        self.assertEqual(out["no_fds"], [2, EINVAL, 0])
        self.assertEqual(out["argc_zero"], [2, E2BIG, 0])
        self.assertEqual(out["too_many_args"], [2, E2BIG, 0])
        # larger than a packet may be: refused by the socket or cut, never run
        self.assertIn(out["too_large"], (0, [2, EINVAL, 0]))
        # a client that sends nothing is dropped after the deadline, or
        # when it goes
        self.assertEqual(out["silent"], 0)
        self.assertEqual(out["ok"], [0, 0, 0])
        # init lived through all of it, and so does the sandbox
        self.assertEqual(sh_ok(self, self.sid, "sudo id -u"), "0\n")

    def test_sessions_are_bounded(self):
        # 16 at once; the 17th waits in the backlog (not polled), and runs
        # when one ends. Nothing is lost, nothing leaks.
        # (a bound, not a timing: 20 of sudo's Python clients start one by
        # one under the guests' emulation, on a loaded host)
        r = self.sh("for i in $(seq 20); do sudo sleep 2 & done; wait; echo done",
                    timeout="%ds" % (90 * SLOW))
        self.assertEqual(r["stdout"], "done\n", r)
        init = [p for p in sandbox_host_pids(self.d, self.sid)
                if open("/proc/%d/comm" % p).read() == "memfd:sbx-init\n"]
        self.assertEqual(len(init), 1)
        wait_until(lambda: len(sandbox_host_pids(self.d, self.sid)) == 1,
                   what="every session's helper to be reaped")


class SudoReadOnlyRoot(DaemonTest):
    """--read-only-root keeps "/" read-only for root too; sudo still runs."""

    pool = 1
    extra_args = ("--read-only-root",)

    def test_root_cannot_write_the_skeleton(self):
        sid = self.d.create()
        r = self.d.sh(sid, "sudo mkdir /opt; sudo touch /etc/x; sudo id -u", user="user")
        self.assertEqual(r["stdout"], "0\n", r)
        self.assertEqual(r["stderr"].count("Read-only file system"), 2, r)
