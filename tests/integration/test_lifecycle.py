"""The daemon's own life: stopping cleanly, dying hard and restarting on
the same state, one daemon per state directory, the pool, the sandbox
limit. Each test starts its own daemons."""
import os
import signal
import subprocess
import time
import unittest

from harness import Daemon, cgroup_hierarchies, processes_with_uid_in
from sbx_helpers import sandbox_ids, wait_until


class Lifecycle(unittest.TestCase):
    def setUp(self):
        self.daemons = []

    def tearDown(self):
        problems = []
        for d in self.daemons:
            if d.proc and d.proc.poll() is None:
                d.stop()
        for d in self.daemons:
            if os.path.isdir(d.state):
                problems += d.cleanup()
            elif os.path.exists(d.log_path):
                os.unlink(d.log_path)
        self.assertEqual(problems, [])

    def daemon(self, **kw):
        d = Daemon(**kw)
        self.daemons.append(d)
        return d.start()

    def background(self, d, sid, argv=("sleep", "1000")):
        r = d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": list(argv)})
        self.assertEqual(r.status, 201, r)

    def test_sigterm_with_kill_on_exit_kills_everything(self):
        d = self.daemon(pool=2)
        ids = [d.create() for _ in range(3)]
        for sid in ids:
            self.background(d, sid)
            self.background(d, sid, ("sh", "-c", "sleep 1000 & sleep 1000"))
        self.assertTrue(processes_with_uid_in(d.uid_base, d.uid_end))
        self.assertEqual(d.stop(signal.SIGTERM), 0)
        self.assertIn("stopped", d.read_log())
        # Nothing left: no process, cgroup or mount (checked by cleanup).
        self.assertEqual(d.cleanup(), [])
        self.daemons.remove(d)

    def test_one_daemon_per_state_dir(self):
        d = self.daemon(pool=0)
        sid = d.create()
        # Same state dir; everything else distinct, so only the state clashes.
        args = list(d.args)
        args[args.index("--cgroup-parent") + 1] = d.cgroup_parent + "-b"
        args[args.index("--uid-base") + 1] = str(d.uid_base + (1 << 22))
        p = subprocess.run(args, capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                           **d.popen_kwargs())
        self.assertEqual(p.returncode, 1, p)
        err = p.stderr.decode()
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("another daemon", err)
        self.assertIn(d.state, err)
        # The first one is unharmed: socket, sandbox and all.
        self.assertEqual(d.api("GET", "/healthz").status, 200)
        self.assertEqual(sandbox_ids(d), [sid])
        self.assertEqual(d.exec(sid, argv=["echo", "still"])["stdout"], "still\n")
        for h in cgroup_hierarchies():
            self.assertFalse(os.path.exists(os.path.join(h, d.cgroup_parent + "-b")))

    def test_cgroup_parent_must_be_a_plain_path(self):
        # "" or "/" would make the hierarchy's root the parent, whose every
        # child a start would remove as a leftover sandbox. (A leading "/"
        # makes a path from the root: test_absolute_cgroup_parent.)
        d = Daemon(pool=0)
        try:
            for bad in ("", "/", "//", "a/../b", "/a/../b", "./x", "x//y", "sp ace", "x\ny"):
                with self.subTest(parent=bad):
                    args = list(d.args)
                    args[args.index("--cgroup-parent") + 1] = bad
                    p = subprocess.run(args, capture_output=True, timeout=30,
                                       stdin=subprocess.DEVNULL)
                    self.assertEqual(p.returncode, 2, p)
                    self.assertIn("--cgroup-parent", p.stderr.decode())
        finally:
            self.assertEqual(d.cleanup(), [])

    def test_absolute_cgroup_parent(self):
        # A leading "/": the sandboxes' parent from the root, wherever the
        # daemon runs (an operator's delegated cgroup: sbx-sandboxes.service).
        probe = Daemon(pool=0)
        name = probe.tag + "-abs"
        probe.cleanup()
        d = self.daemon(pool=0, extra=("--cgroup-parent", "/" + name))
        d.cgroup_parent = name
        self.assertEqual(d.api("GET", "/v1/info").json()["cgroup_parent"], "/" + name)
        sid = d.create()
        for h in cgroup_hierarchies():
            self.assertTrue(os.path.isdir(os.path.join(h, name, sid)), h)
        d.kill(sid)

    def test_pool(self):
        d = self.daemon(pool=3)
        info = lambda: d.api("GET", "/v1/info").json()
        wait_until(lambda: info()["pool"] == 3, timeout=60, what="the pool to fill")
        self.assertEqual(info()["sandboxes"], 0)
        sid = d.create()
        self.assertEqual(info()["sandboxes"], 1)
        self.assertEqual(d.exec(sid, argv=["echo", "pooled"])["stdout"], "pooled\n")
        # A create with other limits from the pool gets them.
        other = d.create(memory="64M", pids=32, disk="8M", cpus=0.5)
        m = d.api("GET", "/v1/sandboxes/%s/metrics" % other).json()
        self.assertEqual((m["memory_limit"], m["pids_limit"], m["disk_limit"]),
                         (64 << 20, 32, 8 << 20))
        res = d.exec(other, cmd="df -k /tmp | tail -1")
        self.assertEqual(int(res["stdout"].split()[1]), 8 * 1024)
        # Taken sandboxes are replaced.
        wait_until(lambda: info()["pool"] == 3, timeout=60, what="the pool to refill")
        # Pooled sandboxes are nobody's: not listed, not counted.
        self.assertEqual(sorted(sandbox_ids(d)), sorted([sid, other]))

    def test_no_pool(self):
        d = self.daemon(pool=0)
        time.sleep(0.5)
        self.assertEqual(d.api("GET", "/v1/info").json()["pool"], 0)
        ids = [d.create() for _ in range(2)]
        for sid in ids:
            self.assertEqual(d.exec(sid, argv=["echo", sid])["stdout"], sid + "\n")
        self.assertEqual(d.api("GET", "/v1/info").json()["pool"], 0)

    def test_sandbox_limit(self):
        d = self.daemon(pool=1, extra=("--max-sandboxes", "2"))
        ids = [d.create(), d.create()]
        r = d.api("POST", "/v1/sandboxes", {})
        self.assertEqual(r.status, 429, r)
        body = r.json()
        self.assertEqual((body["code"], body["error"]), (429, "resource_exhausted"))
        self.assertTrue(body["message"])
        self.assertEqual(sorted(sandbox_ids(d)), sorted(ids))
        # A kill makes room again.
        self.assertEqual(d.kill(ids[0]).status, 204)
        self.assertEqual(d.api("POST", "/v1/sandboxes", {}).status, 201)


if __name__ == "__main__":
    unittest.main()
