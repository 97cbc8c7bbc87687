"""The microVM engine's lifecycle (docs/vm.md "Fork and hibernate"): a fork
of a running VM carries its memory, processes included; a hibernated VM
has no QEMU and holds no host memory until it resumes. One VM for the
module (TCG: a boot takes seconds, a restore about one).
"""
import os

from harness import DaemonTest, cgroup_hierarchies
from test_vm import alive, qemu_of
from vm_util import GuestCounter

COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /tmp/vmcount; sleep 0.05; done")


def procs_under(cgroup_parent):
    """Pids of the processes in a daemon's cgroups (its uid range may be
    another test daemon's too on a shared host; its cgroup parent is not)."""
    out = []
    needle = "/%s/" % cgroup_parent
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % name) as f:
                if needle in f.read():
                    out.append(int(name))
        except OSError:
            pass
    return out


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def internal_entries(state):
    """The daemon's own entries left in the snapshot store (.sbx-*, .tmp-*)."""
    out = []
    root = os.path.join(state, "snapshots")
    for tenant in os.listdir(root):
        for name in os.listdir(os.path.join(root, tenant)):
            if name.startswith("."):
                out.append(os.path.join(tenant, name))
    return out


class VMLife(GuestCounter, DaemonTest):
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

    def test_a_fork_bad_input(self):
        base = "/v1/sandboxes/%s/fork" % self.sid
        for count in (0, 257, "2", -1):
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

    def has_cgroup(self, sid):
        return any(os.path.isdir(os.path.join(h, self.d.cgroup_parent, sid))
                   for h in cgroup_hierarchies())

    def hib_file(self, sid):
        return os.path.join(self.d.state, "snapshots", b"default".hex(), ".sbx-hib-" + sid,
                            "vm.mig")

    def test_c_hibernate_bad_input(self):
        r = self.d.api("POST", "/v1/sandboxes", {"isolation": "namespace"})
        self.assertEqual(r.status, 201, r)
        ns = r.json()["id"]
        r = self.d.api("POST", "/v1/sandboxes/%s/pause" % ns, {"to_disk": True})
        self.assertIn("VM", self.assertError(r, 501, "not_implemented")["message"])
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + ns).json()["state"], "running")
        for bad in ("yes", 1):
            r = self.d.api("POST", "/v1/sandboxes/%s/pause" % self.sid, {"to_disk": bad})
            self.assertError(r, 400, "invalid_argument")
        self.assertEqual(self.d.kill(ns).status, 204)

    def test_d_hibernate_and_resume(self):
        base = "/v1/sandboxes/" + self.sid
        before = self.wait_count_above(self.sid, 2)
        (qemu,) = qemu_of(self.sid)
        self.assertGreater(rss_kib([qemu]), 16 << 10)
        r = self.d.api("POST", base + "/pause", {"to_disk": True})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["state"], r.json()["hibernated"]), ("paused", True))
        got = self.d.api("GET", base).json()
        self.assertEqual((got["state"], got["hibernated"]), ("paused", True))
        # No QEMU, no relay, no cgroup: its host memory is freed.
        self.assertFalse(alive(qemu))
        self.assertEqual(qemu_of(self.sid), set())
        self.assertEqual(procs_under(self.d.cgroup_parent), [])
        self.assertFalse(self.has_cgroup(self.sid))
        # Its memory is in a file only root reads.
        st = os.stat(self.hib_file(self.sid))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        self.assertGreater(st.st_size, 1 << 20)
        self.assertEqual(self.d.api("GET", "/v1/snapshots").json()["snapshots"], [])
        # Paused: again is a 409, as is work in it (no auto_resume), a
        # fork or a snapshot; its commands' streams ended.
        for body in ({"to_disk": True}, {}):
            self.assertError(self.d.api("POST", base + "/pause", body), 409, "conflict")
        self.assertError(self.d.api("POST", base + "/exec", {"cmd": "true"}), 409, "conflict")
        self.assertError(self.d.api("POST", base + "/fork", {"count": 1}), 409, "conflict")
        self.assertError(self.d.api("POST", base + "/snapshots", {"name": "h"}), 409, "conflict")
        self.assertError(self.d.api("GET", base + "/metrics"), 409, "conflict")
        r = self.d.api("GET", "%s/processes/%d" % (base, self.counter_pid))
        self.assertIn(r.status, (200, 404), r)
        if r.status == 200:
            self.assertNotEqual(r.json().get("state"), "running", r.json())
        # Resume: the same VM from the file, the counter goes on from where
        # it was, the file is gone.
        r = self.d.api("POST", base + "/resume", {})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "running")
        self.assertNotIn("hibernated", r.json())
        self.assertEqual(len(qemu_of(self.sid)), 1)
        self.assertTrue(self.has_cgroup(self.sid))
        self.assertFalse(os.path.exists(os.path.dirname(self.hib_file(self.sid))))
        got = self.vcount(self.sid)
        self.assertGreaterEqual(got, before)
        self.wait_count_above(self.sid, got)
        self.assertEqual(self.d.sh(self.sid, "echo again")["stdout"], "again\n")
        self.assertEqual(self.d.api("GET", base + "/metrics").status, 200)

    def test_e_hibernate_auto_resume_and_kill(self):
        """A VM made with auto_resume wakes on a command; a kill of a
        hibernated one leaves no file, process or cgroup."""
        r = self.d.api("POST", "/v1/sandboxes/%s/snapshots" % self.sid, {"name": "life"})
        self.assertEqual(r.status, 201, r)
        r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "life",
                                                 "auto_resume": True})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/life").status, 204)
        before = self.wait_count_above(sid, 0)
        r = self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {"to_disk": True})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(qemu_of(sid), set())
        # A command wakes it.
        got = self.vcount(sid)
        self.assertGreaterEqual(got, before)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["state"], "running")
        self.assertEqual(len(qemu_of(sid)), 1)
        # Hibernated again (by the CLI), then killed: nothing is left of it.
        res = self.d.sbx("pause", "--to-disk", sid)
        self.assertEqual((res.returncode, res.stderr), (0, b""))
        got = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual((got["state"], got.get("hibernated")), ("paused", True))
        res = self.d.sbx("pause", "--to-disk", sid)
        self.assertEqual(res.returncode, 1)
        self.assertIn(b"already paused", res.stderr)
        self.assertTrue(os.path.exists(self.hib_file(sid)))
        self.assertEqual(self.d.kill(sid).status, 204)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).status, 404)
        self.assertFalse(os.path.exists(os.path.dirname(self.hib_file(sid))))
        self.assertEqual(qemu_of(sid), set())
        self.assertFalse(self.has_cgroup(sid))
        self.assertEqual(internal_entries(self.d.state), [])

    def test_f_e2b_pause_hibernates(self):
        """E2B's pause of a VM persists it as E2B's does (memory to a file,
        no QEMU), and connect restores it where it was."""
        key = self.d.new_key("default")
        hdr = {"X-API-Key": key}
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % self.sid, {"count": 1})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxes"][0]["id"]
        before = self.wait_count_above(sid, 0)
        r = self.d.api("POST", "/sandboxes/%s/pause" % sid, {}, headers=hdr)
        self.assertEqual(r.status, 204, r)
        got = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual((got["state"], got.get("hibernated")), ("paused", True))
        self.assertEqual(qemu_of(sid), set())
        self.assertTrue(os.path.exists(self.hib_file(sid)))
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/pause" % sid, {}, headers=hdr).status,
                         409)
        r = self.d.api("POST", "/v2/sandboxes/%s/connect" % sid, {"timeout": 300}, headers=hdr)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(len(qemu_of(sid)), 1)
        self.assertFalse(os.path.exists(os.path.dirname(self.hib_file(sid))))
        got = self.vcount(sid)
        self.assertGreaterEqual(got, before)
        self.wait_count_above(sid, got)
        self.assertEqual(self.d.kill(sid).status, 204)

    def test_z_kill_leaves_nothing(self):
        self.assertEqual(self.d.kill(self.sid).status, 204)
        for pid in self.qemu:
            self.assertFalse(alive(pid), "QEMU %d survived the kill" % pid)
        self.assertEqual(internal_entries(self.d.state), [])
        self.assertEqual(procs_under(self.d.cgroup_parent), [])
