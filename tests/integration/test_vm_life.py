"""The microVM engine's lifecycle (docs/vm.md "Fork and hibernate"): a fork
of a running VM carries its memory, processes included; a hibernated VM
has no QEMU and holds no host memory until it resumes. One VM for the
module (TCG: a boot takes seconds, a restore about one).
"""
import os
import time

from harness import DaemonTest
from test_vm import alive, qemu_pids


def qemu_of(sid):
    """Pids of the QEMUs in sandbox sid's cgroup (not another daemon's)."""
    out = set()
    for pid in qemu_pids():
        try:
            with open("/proc/%d/cgroup" % pid) as f:
                if sid in f.read():
                    out.add(pid)
        except OSError:
            pass
    return out

COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /tmp/vmcount; sleep 0.05; done")


def internal_entries(state):
    """The daemon's own entries left in the snapshot store (.sbx-*, .tmp-*)."""
    out = []
    root = os.path.join(state, "snapshots")
    for tenant in os.listdir(root):
        for name in os.listdir(os.path.join(root, tenant)):
            if name.startswith("."):
                out.append(os.path.join(tenant, name))
    return out


class VMLife(DaemonTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                "disk": "64M", "timeout": "10m",
                                                "metadata": {"who": "source"}})
        assert r.status == 201, r
        cls.sid = r.json()["id"]
        cls.qemu = qemu_of(cls.sid)
        assert len(cls.qemu) == 1, cls.qemu
        r = cls.d.api("POST", "/v1/sandboxes/%s/processes" % cls.sid, {"cmd": COUNTER})
        assert r.status == 201, r
        cls.counter_pid = r.json()["pid"]

    def tearDown(self):
        # The module's VM lives on; whatever a test made ends with it.
        for sb in self.d.api("GET", "/v1/sandboxes").json()["sandboxes"]:
            if sb["id"] != self.sid:
                self.d.kill(sb["id"])

    def vcount(self, sid):
        out = self.d.sh(sid, "cat /tmp/vmcount 2>/dev/null")["stdout"].strip()
        return int(out) if out else 0

    def wait_count_above(self, sid, value):
        for _ in range(300):
            got = self.vcount(sid)
            if got > value:
                return got
        self.fail("the counter in %s did not pass %d" % (sid, value))

    def test_a_fork_bad_input(self):
        base = "/v1/sandboxes/%s/fork" % self.sid
        for count in (0, 17, "2", -1):
            self.assertError(self.d.api("POST", base, {"count": count}), 400, "invalid_argument")
        self.assertError(self.d.api("POST", "/v1/sandboxes/nope/fork", {"count": 1}), 404)
        # A paused VM cannot save its memory (the vCPUs must answer QEMU).
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/pause" % self.sid, {}).status, 200)
        try:
            r = self.d.api("POST", base, {"count": 1})
            self.assertIn("resume it", self.assertError(r, 409, "conflict")["message"])
        finally:
            self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/resume" % self.sid,
                                        {}).status, 200)
        self.assertEqual(internal_entries(self.d.state), [])

    def test_b_fork_carries_memory(self):
        before = self.wait_count_above(self.sid, 2)
        self.assertEqual(self.d.sh(self.sid, "echo source > /home/user/who")["exit_code"], 0)
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % self.sid, {"count": 2})
        self.assertEqual(r.status, 201, r)
        body = r.json()
        self.assertFalse(body["processes_not_carried"])
        self.assertIn("memory", body["note"])
        self.assertGreater(body["memory_image_bytes"], 1 << 20)
        copies = [sb["id"] for sb in body["sandboxes"]]
        self.assertEqual(len(set(copies)), 2)
        self.assertNotIn(self.sid, copies)
        for sb in body["sandboxes"]:
            self.assertEqual((sb["isolation"], sb["metadata"], sb["limits"]["memory"]),
                             ("vm", {"who": "source"}, 256 << 20))
        for c in copies:
            self.assertEqual(len(qemu_of(c)), 1)
        # The memory image was the daemon's own: not listed, and gone.
        self.assertEqual(self.d.api("GET", "/v1/snapshots").json()["snapshots"], [])
        self.assertEqual(internal_entries(self.d.state), [])
        # Each copy's counter goes on from the saved value (the shell that
        # holds it was carried), not from 0; the source counts on.
        for c in copies:
            got = self.vcount(c)
            self.assertGreaterEqual(got, before)
            self.wait_count_above(c, got)
            self.assertEqual(self.d.sh(c, "cat /home/user/who")["stdout"], "source\n")
            # The carried loop is not in the copy's process list (its API
            # stream stayed with the source).
            procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % c).json()["processes"]
            self.assertEqual(procs, [])
        self.wait_count_above(self.sid, before)
        # The copies are independent of each other and of the source.
        self.assertEqual(self.d.sh(copies[0], "echo one > /home/user/only")["exit_code"], 0)
        for other in (copies[1], self.sid):
            res = self.d.sh(other, "test -e /home/user/only && echo yes || echo no")
            self.assertEqual(res["stdout"], "no\n")
        for c in copies:
            self.assertEqual(self.d.kill(c).status, 204)

    def test_z_kill_leaves_nothing(self):
        self.assertEqual(self.d.kill(self.sid).status, 204)
        for pid in self.qemu:
            self.assertFalse(alive(pid), "QEMU %d survived the kill" % pid)
        self.assertEqual(internal_entries(self.d.state), [])
