"""A VM's metrics as its guest sees them (docs/vm.md "Metrics").

The host's cgroup says what the VM costs the host; the guest's memory, disk
and CPU come from its agent, checked as hostile on the host, and E2B's
metrics routes show the guest's figures.
"""
import unittest

from harness import DaemonTest

MIB = 1 << 20


class VMMetrics(DaemonTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.key = cls.d.new_key("default")
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                "disk": "64M", "timeout": "10m"})
        assert r.status == 201, r
        cls.sid = r.json()["id"]

    def tearDown(self):
        pass  # the module's VM lives until test_zz_kill

    def metrics(self):
        r = self.d.api("GET", "/v1/sandboxes/%s/metrics" % self.sid)
        self.assertEqual(r.status, 200, r)
        return r.json()

    def test_guest_view(self):
        m = self.metrics()
        g = m["guest"]
        # The guest's RAM is the VM's memory, less what its kernel keeps.
        self.assertLessEqual(g["memory_total"], 256 * MIB)
        self.assertGreater(g["memory_total"], 128 * MIB)
        self.assertGreater(g["memory_used"], 0)
        self.assertLess(g["memory_used"], g["memory_total"])
        self.assertEqual(g["cpus"], 1)
        self.assertGreater(g["processes"], 0)
        self.assertGreater(g["cpu_seconds"], 0)
        # Its disk is the guest's tmpfs of --disk: the host has no figure.
        self.assertEqual(g["disk_total"], 64 * MIB)
        self.assertEqual((m["disk_bytes"], m["disk_limit"]), (g["disk_used"], g["disk_total"]))
        # The host's own figures stay: what QEMU costs, more than the guest uses.
        self.assertGreater(m["memory_bytes"], g["memory_used"])

    def test_disk_and_memory_follow_the_guest(self):
        before = self.metrics()["guest"]
        r = self.d.sh(self.sid, "head -c 20000000 /dev/zero > /home/user/f && sync")
        self.assertEqual(r["exit_code"], 0, r)
        after = self.metrics()["guest"]
        self.assertGreaterEqual(after["disk_used"] - before["disk_used"], 20000000)
        # tmpfs is the guest's RAM: the same 20 MB are in its used memory.
        self.assertGreaterEqual(after["memory_used"] - before["memory_used"], 15 * MIB)
        self.d.sh(self.sid, "rm /home/user/f")

    def test_e2b_routes_show_the_guest(self):
        g = self.metrics()["guest"]
        r = self.d.api("GET", "/sandboxes/%s/metrics" % self.sid, headers={"X-API-Key": self.key})
        self.assertEqual(r.status, 200, r)
        # The samples kept (docs/api.md "Metrics over time"), now's last.
        entries = r.json()
        self.assertGreaterEqual(len(entries), 1)
        e = entries[-1]
        self.assertEqual(e["memTotal"], g["memory_total"])
        self.assertEqual(e["diskTotal"], 64 * MIB)
        self.assertEqual(e["cpuCount"], 1)

    def test_paused_vm_has_host_figures_only(self):
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/pause" % self.sid).status, 200)
        try:
            m = self.metrics()
            self.assertNotIn("guest", m)
            self.assertIn("memory_bytes", m)
        finally:
            self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/resume" % self.sid).status, 200)
        self.assertIn("guest", self.metrics())

    def test_zz_kill(self):
        self.assertEqual(self.d.kill(self.sid).status, 204)


if __name__ == "__main__":
    unittest.main()
