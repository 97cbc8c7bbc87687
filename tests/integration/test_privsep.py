"""Privilege separation, seen from the host: the process that parses HTTP
and JSON is not root, holds no capability, runs under seccomp and
no_new_privs, dies with its parent, and is restarted by it after a crash
without the sandboxes noticing. (What the front end's filter and Landlock
domain refuse, syscall by syscall, is tests/unit/test_privsep.c; the
parent's protocol against malformed requests too.)"""
import os
import pwd
import signal
import subprocess
import unittest

from harness import Daemon, DaemonTest, processes_with_uid_in
from sbx_helpers import wait_until


def status_fields(pid):
    fields = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.split()
    return fields


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


def frontend_of(d, role="--frontend"):
    """The daemon's front end (or, with role="--egress", its egress proxy):
    its child running as the front end's user, in that role."""
    uid = pwd.getpwnam("sbx").pw_uid
    found = []
    for p in children(d.proc.pid):
        try:
            if int(status_fields(p)["Uid"][0]) == uid and argv1(p) == role:
                found.append(p)
        except FileNotFoundError:
            pass  # it ended meanwhile (a front end that was just killed)
    return found[0] if len(found) == 1 else None


def argv1(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    return argv[1].decode() if len(argv) > 1 else None


class FrontEnd(DaemonTest):
    pool = 0

    def test_runs_unprivileged(self):
        fe = wait_until(lambda: frontend_of(self.d), what="the front end")
        st = status_fields(fe)
        acct = pwd.getpwnam("sbx")
        self.assertEqual(st["Uid"], [str(acct.pw_uid)] * 4)
        self.assertEqual(st["Gid"], [str(acct.pw_gid)] * 4)
        self.assertEqual(st.get("Groups", []), [])
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(st[cap][0], 16), 0, cap)
        self.assertEqual(st["NoNewPrivs"], ["1"])
        self.assertEqual(st["Seccomp"], ["2"])  # a filter
        # The parent keeps root, and is the one with the engine: the zygote
        # (sbx-init) is its child, not the front end's.
        parent = status_fields(self.d.proc.pid)
        self.assertEqual(parent["Uid"][0], "0")
        self.assertEqual(children(fe), [])
        # The front end holds no cgroup directory and no sandbox root.
        for fd in os.listdir("/proc/%d/fd" % fe):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (fe, fd))
            except OSError:
                continue
            self.assertNotIn("/sys/fs/cgroup", target)
            self.assertNotEqual(target, "/")

    def test_crash_is_survived(self):
        sid = self.d.create()
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                       {"cmd": "i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.05; done"})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        self.d.upload(sid, "/home/user/kept.txt", b"kept")
        fe = frontend_of(self.d)
        os.kill(fe, signal.SIGSEGV)  # as a parser bug would
        # The parent starts another front end, which re-adopts the sandbox.
        wait_until(lambda: (lambda n: n is not None and n != fe)(frontend_of(self.d)),
                   what="a new front end")
        wait_until(lambda: self.d.api("GET", "/healthz").status == 200, what="the API back")
        procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % sid).json()["processes"]
        self.assertEqual([(p["pid"], p["running"]) for p in procs], [(pid, True)])
        first = int(self.d.exec(sid, cmd="cat /tmp/n")["stdout"])
        wait_until(lambda: int(self.d.exec(sid, cmd="cat /tmp/n")["stdout"]) > first,
                   what="the command still counting")
        r = self.d.api("GET", "/v1/sandboxes/%s/files?path=/home/user/kept.txt" % sid, raw=True)
        self.assertEqual((r.status, r.body), (200, b"kept"))
        self.assertIn("the front end died", self.d.read_log())
        self.assertEqual(self.d.kill(sid).status, 204)


class Lifecycle(unittest.TestCase):
    def test_front_end_dies_with_its_parent(self):
        d = Daemon(pool=1).start()
        try:
            fe = wait_until(lambda: frontend_of(d), what="the front end")
            eg = wait_until(lambda: frontend_of(d, "--egress"), what="the egress proxy")
            d.proc.kill()
            d.proc.wait()
            wait_until(lambda: not os.path.exists("/proc/%d" % fe)
                       or status_fields(fe)["State"][0] == "Z", what="the front end to die")
            wait_until(lambda: not os.path.exists("/proc/%d" % eg)
                       or status_fields(eg)["State"][0] == "Z", what="the egress proxy to die")
            # Its pool sandbox ends with its control socket...
            wait_until(lambda: not processes_with_uid_in(d.uid_base, d.uid_end),
                       what="the pool sandbox to end")
        finally:
            d.stop()
            # ...and leaves an empty cgroup, which the next start would remove
            # (cleanup does it here).
            self.assertEqual([p for p in d.cleanup() if not p.startswith("cgroups left")], [])

    def test_account_must_exist_and_not_be_root(self):
        for user, words in (("sbx-no-such-user", "no account `sbx-no-such-user`"),
                            ("root", "must not be root")):
            for attempt in range(5):
                d = Daemon(pool=0, extra=("--user", user))
                try:
                    p = subprocess.run(d.args, capture_output=True, timeout=30,
                                       stdin=subprocess.DEVNULL)
                finally:
                    self.assertEqual(d.cleanup(), [])
                # Started by hand, without Daemon.start's move to a free uid
                # range: another test run's daemon may hold this one.
                if b"another daemon is using uid base" not in p.stderr:
                    break
            self.assertEqual(p.returncode, 1, p)
            self.assertIn(words, p.stderr.decode())

    def test_unreachable_state_dir_is_a_clear_error(self):
        # A state directory under a directory the front end cannot search.
        top = "/tmp/sbx-privsep-%d" % os.getpid()
        os.makedirs(top + "/state", exist_ok=True)
        os.chmod(top, 0o700)
        d = Daemon(pool=0)
        args = list(d.args)
        args[args.index("--state") + 1] = top + "/state"
        try:
            p = subprocess.run(args, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 1, p)
            self.assertIn("out of the front end's reach", p.stderr.decode())
        finally:
            subprocess.run(["rm", "-rf", top])
            self.assertEqual(d.cleanup(), [])


if __name__ == "__main__":
    unittest.main()
