"""Hostile code vs. processes and privileges (DESIGN.md invariant 1, and the
pid namespace / per-sandbox uid range of the isolation model).

Observed outcomes worth knowing:

- kill(1, SIGKILL) as root inside *succeeds* (returns 0: root inside and
  sbx-init share uid 0 of the sandbox's user namespace, so the permission
  check passes) but does nothing: the kernel drops SIGKILL/SIGSTOP sent to a
  pid namespace's init from inside that namespace (SIGNAL_UNKILLABLE). As
  `user` the same call is EPERM (other uid, no CAP_KILL).
- ptrace is denied by the seccomp policy even on one's own child (EPERM;
  src/iso/seccomp.c: CVE-2019-13272, pre-4.8 filter bypass); signals
  between processes of one sandbox work.
- Setuid binaries of the host's /usr (passwd, su, chsh...) run without
  elevation: /usr is mounted nosuid, no_new_privs is set, and their owner
  (host root) is not even mapped in the sandbox's user namespace.
- TIOCSTI is EPERM from the filter on every fd: on the command's stdio
  (pipes and /dev/null; without the filter the kernel would say ENOTTY) and
  on a pty the sandbox opens itself through /dev/ptmx (which works).
"""
import os
import unittest

from harness import DaemonTest
from hostile_util import (kill_and_check_gone, probe_one, put_probe, py, run_probe,
                          sandbox_host_pids, sh_ok, wait_until)

ASAN_SUBSET = False


def status_fields(text, names):
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k in names:
            out[k] = v.split()
    return out


class Privileges(DaemonTest):

    def setUp(self):
        self.sid = self.d.create()
        put_probe(self.d, self.sid)

    def test_caps_nnp_seccomp(self):
        for user, uid in (("user", 1000), ("root", 0)):
            lines = run_probe(self, self.sid, "caps", user=user)
            self.assertEqual(lines, ["CapInh 0", "CapPrm 0", "CapEff 0", "CapBnd 0", "CapAmb 0",
                                     "NoNewPrivs 1", "Seccomp 2",
                                     "uid %d euid %d gid %d egid %d" % (uid, uid, uid, uid)],
                             user)
            st = status_fields(sh_ok(self, self.sid, "cat /proc/self/status", user=user),
                               ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
                                "Seccomp", "Uid", "Gid", "Groups"))
            for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                self.assertEqual(st[cap], ["0000000000000000"], (user, cap))
            self.assertEqual(st["NoNewPrivs"], ["1"])
            self.assertEqual(st["Seccomp"], ["2"])
            self.assertEqual(st["Uid"], [str(uid)] * 4)
            self.assertEqual(st["Gid"], [str(uid)] * 4)
            self.assertEqual(st.get("Groups", []), [])

    def test_root_inside_is_nobody_outside(self):
        # uid 0 inside maps to the sandbox's own unprivileged host range.
        out = sh_ok(self, self.sid, "cat /proc/self/uid_map /proc/self/gid_map; "
                                    "cat /proc/self/setgroups", user="root")
        lines = [l.split() for l in out.splitlines()]
        self.assertEqual(lines[0][0], "0")
        self.assertEqual(lines[0][2], "65536")
        base = int(lines[0][1])
        self.assertGreaterEqual(base, self.d.uid_base)
        self.assertLess(base, self.d.uid_end)
        self.assertEqual(lines[1], lines[0])
        self.assertEqual(lines[2], ["deny"])  # CVE-2014-8989
        # From the host: the sandbox's processes run as that host uid.
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"cmd": "exec sleep 1000", "user": "root"})
        self.assertEqual(r.status, 201, r)
        uids = set()
        for pid in sandbox_host_pids(self.d, self.sid):
            with open("/proc/%d/status" % pid) as f:
                uids.add(int(status_fields(f.read(), ("Uid",))["Uid"][0]))
        self.assertEqual(uids, {base})

    def test_setuid_binaries_do_not_elevate(self):
        # Start each setuid binary, wait for its first output byte (it has
        # exec'd and committed its credentials by then), read its status.
        code = ("import subprocess,sys\n"
                "p=subprocess.Popen(sys.argv[1:],stdin=subprocess.PIPE,stdout=subprocess.PIPE,"
                "stderr=subprocess.STDOUT)\n"
                "first=p.stdout.read(1)\n"
                "st=open('/proc/%d/status'%p.pid).read()\n"
                "p.kill(); p.wait()\n"
                "print(first!=b'', ' '.join(l.split(':')[1].split()[0] for l in st.splitlines()"
                " if l.split(':')[0] in ('Uid','Gid','CapEff')))")
        tried = 0
        for binary in ("/usr/bin/passwd", "/usr/bin/su", "/usr/bin/chsh", "/usr/bin/newgrp",
                       "/usr/bin/gpasswd"):
            if not os.path.exists(binary) or not os.stat(binary).st_mode & 0o4000:
                continue
            tried += 1
            # The bit is still there (nosuid ignores it, it is not removed).
            self.assertEqual(sh_ok(self, self.sid, "stat -c %A " + binary)[3], "s")
            res = self.d.exec(self.sid, argv=["python3", "-c", code, binary])
            self.assertEqual(res["exit_code"], 0, res)
            self.assertEqual(res["stdout"], "True 1000 1000 0000000000000000\n", (binary, res))
        if not tried:
            self.skipTest("no setuid binary in the host's /usr")
        mounts = sh_ok(self, self.sid, "grep ' /usr ' /proc/self/mountinfo")
        self.assertIn("nosuid", mounts.split()[5])

    def test_cannot_regain_privileges(self):
        # setuid(0) from user, capset raising anything, a new user namespace
        # to get capabilities in: all refused.
        code = ("import ctypes,errno,os\nlibc=ctypes.CDLL(None,use_errno=True)\nout=[]\n"
                "def r(rc): out.append('ok' if rc==0 else errno.errorcode[ctypes.get_errno()])\n"
                "r(libc.setuid(0)); r(libc.setgid(0)); r(libc.setresuid(0,0,0))\n"
                "r(libc.unshare(0x10000000))\n"  # CLONE_NEWUSER
                "r(libc.prctl(8,1,0,0,0))\n"  # PR_SET_KEEPCAPS 1: SECBIT_KEEP_CAPS_LOCKED
                "print(' '.join(out))")
        res = self.d.exec(self.sid, argv=["python3", "-c", code])
        self.assertEqual(res["stdout"], "EPERM EPERM EPERM EPERM EPERM\n", res)
        # Root inside cannot change to another uid either (no CAP_SETUID).
        code2 = code.replace("setuid(0)", "setuid(1000)").replace("setgid(0)", "setgid(1000)") \
                    .replace("setresuid(0,0,0)", "setresuid(1000,1000,1000)")
        res = self.d.exec(self.sid, argv=["python3", "-c", code2], user="root")
        self.assertEqual(res["stdout"], "EPERM EPERM EPERM EPERM EPERM\n", res)


class Scheduling(DaemonTest):
    """A busy loop may not starve the host: no real-time or deadline
    policies (no CAP_SYS_NICE, RLIMIT_RTPRIO 0), no raised priority, no
    real-time I/O class."""

    def test_no_realtime(self):
        sid = self.d.create()
        code = ("import os,errno,ctypes\nout=[]\n"
                "def t(f):\n"
                " try: f(); out.append('ok')\n"
                " except OSError as e: out.append(errno.errorcode[e.errno])\n"
                "t(lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))\n"
                "t(lambda: os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1)))\n"
                "t(lambda: os.setpriority(os.PRIO_PROCESS, 0, -5))\n"
                "libc=ctypes.CDLL(None,use_errno=True)\n"
                # ioprio_set(IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_RT << 13 | 4)
                "rc=libc.syscall(251, 1, 0, (1 << 13) | 4)\n"
                "out.append('ok' if rc == 0 else errno.errorcode[ctypes.get_errno()])\n"
                "print(' '.join(out), os.sched_getscheduler(0))")
        for user in ("user", "root"):
            self.assertEqual(py(self, sid, code, user=user), "EPERM EPERM EACCES EPERM 0\n", user)
        self.assertEqual(sh_ok(self, sid, "ulimit -r; ulimit -e"), "0\n0\n")


class PidVisibility(DaemonTest):

    def test_only_own_processes(self):
        sid = self.d.create()
        res = self.d.exec(sid, argv=["ps", "-eo", "pid=,ppid=,user=,comm="])
        rows = [l.split() for l in res["stdout"].splitlines()]
        self.assertEqual(rows, [["1", "0", "root", "memfd:sbx-init"],
                                [str(res["pid"]), "1", "user", "ps"]])
        # /proc holds init and the lister itself: nothing of the host.
        res = self.d.exec(sid, argv=["python3", "-c", "import os; print(sorted(int(p) for p in "
                                     "os.listdir('/proc') if p.isdigit()))"])
        self.assertEqual(res["stdout"], "[1, %d]\n" % res["pid"], res)
        self.assertEqual(sh_ok(self, sid, "cat /proc/1/cgroup | cut -d: -f3 | sort -u"), "/\n")

    def test_sandboxes_cannot_see_or_signal_each_other(self):
        a = self.d.create()
        b = self.d.create()
        put_probe(self.d, a)
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % b, {"cmd": "exec sleep 1000"})
        self.assertEqual(r.status, 201, r)
        b_pids = sandbox_host_pids(self.d, b)
        self.assertEqual(len(b_pids), 2)
        visible_in_a = sh_ok(self, a, "ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '").split()
        for hp in b_pids:
            if str(hp) in visible_in_a:
                self.skipTest("host pid %d collides with a pid of sandbox A" % hp)
            for user in ("user", "root"):
                self.assertEqual(probe_one(self, a, "kill", hp, 9, user=user), "ESRCH", hp)
                self.assertEqual(probe_one(self, a, "kill", hp, 0, user=user), "ESRCH", hp)
        # kill -9 -1 as root in A reaches only A's own processes (all but
        # init and the caller): A's sleep dies, B's does not.
        res = self.d.exec(a, cmd="sleep 1000 & kill -9 -1; wait $!; echo $?", user="root")
        self.assertEqual(res["stdout"], "137\n", res)
        self.assertEqual(sorted(sandbox_host_pids(self.d, b)), sorted(b_pids))
        self.assertEqual(sh_ok(self, b, "ps -eo comm= | grep -c sleep"), "1\n")
        # A itself is fine afterwards (init survived).
        self.assertEqual(sh_ok(self, a, "echo ok"), "ok\n")


class SignalsInside(DaemonTest):

    def test_siblings(self):
        sid = self.d.create()
        put_probe(self.d, sid)
        for user in ("user", "root"):
            self.assertEqual(run_probe(self, sid, "siblings", user=user),
                             ["ptrace(ATTACH,child) EPERM", "kill(child,0) ok",
                              "kill(child,SIGTERM) ok", "child SIGTERM"], user)
        # Shell job control style signalling works too.
        self.assertEqual(sh_ok(self, sid, "sleep 100 & kill -TERM $!; wait $!; echo $?"),
                         "143\n")

    def test_init_survives_kill(self):
        sid = self.d.create()
        put_probe(self.d, sid)
        self.assertEqual(probe_one(self, sid, "kill", 1, 9), "EPERM")
        self.assertEqual(probe_one(self, sid, "kill", 1, 15), "EPERM")
        before = wait_until(lambda: (lambda p: p if len(p) == 1 else None)(
            sandbox_host_pids(self.d, sid)), what="only init to run")
        for sig in (9, 15, 19, 2, 1):  # KILL TERM STOP INT HUP
            self.assertEqual(probe_one(self, sid, "kill", 1, sig, user="root"), "ok", sig)
        res = self.d.exec(sid, cmd="kill -9 1; kill -STOP 1; kill -SEGV 1; echo $?", user="root")
        self.assertEqual(res["stdout"], "0\n", res)
        # Still the same init, still serving, not stopped.
        self.assertEqual(sh_ok(self, sid, "cat /proc/1/comm; grep State /proc/1/status"),
                         "memfd:sbx-init\nState:\tS (sleeping)\n")
        self.assertEqual(sandbox_host_pids(self.d, sid), before)  # only init, the same one
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["state"], "running")
        kill_and_check_gone(self, self.d, sid)


class KeyringAndTty(DaemonTest):

    def test_keyring_blocked(self):
        sid = self.d.create()
        put_probe(self.d, sid)
        for user in ("user", "root"):
            for name in ("keyctl", "add_key", "request_key"):
                self.assertEqual(run_probe(self, sid, "syscall", name, user=user),
                                 [name + " EPERM"])
        # The keyutils tool, if the host has it, fails the same way.
        if os.path.exists("/usr/bin/keyctl"):
            res = self.d.sh(sid, "keyctl show")
            self.assertNotEqual(res["exit_code"], 0)
        # /proc/keys is masked: nothing of the host's keyrings.
        self.assertEqual(sh_ok(self, sid, "wc -c < /proc/keys"), "0\n")

    def test_tiocsti(self):
        sid = self.d.create()
        put_probe(self.d, sid)
        want = ["tiocsti(stdin) EPERM", "tiocsti(stdout) EPERM", "tiocsti(stderr) EPERM",
                "openpty ok", "isatty(pty) ok", "tiocsti(pty master) EPERM",
                "tiocsti(pty slave) EPERM"]
        for user in ("user", "root"):
            self.assertEqual(run_probe(self, sid, "tiocsti", user=user), want, user)
        # With stdin from the API (a pipe) it is the same.
        res = self.d.exec(sid, argv=["/tmp/probe", "tiocsti"], stdin="x")
        self.assertEqual(res["stdout"].splitlines(), want)
        # No controlling terminal at all: the command leads its own session.
        self.assertEqual(sh_ok(self, sid, "ps -o tty= -p $$"), "?\n")


if __name__ == "__main__":
    unittest.main()
