"""Hostile code looks for the daemon's secrets (DESIGN.md invariant 4).

The daemon is started with a canary variable in its environment and holds
an API key; code inside a sandbox searches its environment, every readable
/proc/*/environ and cmdline, and every file it can read outside /usr and
/proc for either. None may appear anywhere.
"""
import os
import unittest
import uuid

from harness import Daemon, DaemonTest, free_port
from hostile_util import put_probe, run_probe

ASAN_SUBSET = False

SEARCH = r"""
import os, sys
needles = [n.encode() for n in sys.argv[1:]]
hits = []
def check(where, data):
    for n in needles:
        if n in data:
            hits.append(where)
for k, v in os.environ.items():
    check("env:" + k, (k + "=" + v).encode())
for pid in os.listdir("/proc"):
    # Our own cmdline holds the needles (they are our arguments).
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    for f in ("environ", "cmdline"):
        try:
            with open("/proc/%s/%s" % (pid, f), "rb") as fh:
                check("/proc/%s/%s" % (pid, f), fh.read())
        except OSError:
            pass
readable = 0
for top in ("/etc", "/home", "/tmp", "/dev/shm", "/run", "/var", "/root"):
    for dirpath, dirs, files in os.walk(top):
        for name in files:
            p = os.path.join(dirpath, name)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                with open(p, "rb") as fh:
                    check(p, fh.read(1 << 22))
                readable += 1
            except OSError:
                pass
print("hits", hits)
print("readable", readable > 0)
"""


class DaemonEnvironmentCanary(DaemonTest):
    """A dedicated daemon whose environment carries SBX_CANARY_SECRET."""

    listen = True

    @classmethod
    def setUpClass(cls):
        cls.canary = "canary-" + uuid.uuid4().hex
        saved = os.environ.get("SBX_CANARY_SECRET")
        os.environ["SBX_CANARY_SECRET"] = cls.canary
        try:
            cls.d = Daemon(pool=2, listen="127.0.0.1:%d" % free_port()).start()
        finally:
            if saved is None:
                del os.environ["SBX_CANARY_SECRET"]
            else:
                os.environ["SBX_CANARY_SECRET"] = saved
        with open("/proc/%d/environ" % cls.d.proc.pid, "rb") as f:
            assert cls.canary.encode() in f.read(), "the canary did not reach the daemon"
        cls.key = cls.d.new_key("tenant-a")

    def check_sandbox(self, sid, users=("user", "root")):
        for user in users:
            res = self.d.exec(sid, argv=["/usr/bin/python3", "-c", SEARCH, self.canary,
                                         "SBX_CANARY_SECRET", self.key],
                              user=user)
            self.assertEqual(res["exit_code"], 0, res)
            self.assertEqual(res["stdout"], "hits []\nreadable True\n", (user, res))

    def test_env_of_commands(self):
        sid = self.d.create(env={"VISIBLE": "yes"})
        res = self.d.exec(sid, argv=["env"])
        names = sorted(l.split("=", 1)[0] for l in res["stdout"].splitlines())
        self.assertEqual(names, ["HOME", "HOSTNAME", "LANG", "LOGNAME", "PATH", "SHELL", "USER",
                                 "VISIBLE"])
        self.check_sandbox(sid)

    def test_pool_and_background_processes(self):
        # A pre-built pool sandbox and a long-running process both count.
        sid = self.d.create()
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "exec sleep 1000"})
        self.assertEqual(r.status, 201, r)
        self.check_sandbox(sid)

    def test_tenant_sandbox_over_tcp(self):
        r = self.d.tcp("POST", "/v1/sandboxes", {}, key=self.key)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        self.check_sandbox(sid)
        # The probe's view: PID 1's environment is not even readable.
        put_probe(self.d, sid)
        for user in ("user", "root"):
            self.assertEqual(run_probe(self, sid, "open", "/proc/1/environ", "r", user=user),
                             ["open(/proc/1/environ,r) EACCES"])

    def test_cli_run(self):
        p = self.d.sbx("run", "--", "sh", "-c", "env; cat /proc/self/environ",
                       env={"SBX_CANARY_SECRET": self.canary})
        self.assertEqual(p.returncode, 0, p)
        self.assertNotIn(self.canary.encode(), p.stdout)
        self.assertNotIn(b"SBX_CANARY_SECRET", p.stdout)


if __name__ == "__main__":
    unittest.main()
