"""Scaffolding of the test_vm* modules: one VM for a whole test class.

Booting is seconds under TCG, so a class boots once and its tests share
the guest; each test cleans up what it started in it."""
import os

from harness import DaemonTest

QEMU = "/usr/bin/qemu-system-x86_64"


class OneVMTest(DaemonTest):
    """A daemon without a pool and one VM, self.sid, for the class."""

    pool = 0
    vm_body = {"isolation": "vm", "memory": "256M", "disk": "64M", "timeout": "10m"}

    @classmethod
    def setUpClass(cls):
        assert os.access(QEMU, os.X_OK), "qemu-system-x86 is not installed (scripts/install-deps.sh)"
        super().setUpClass()
        r = cls.d.api("POST", "/v1/sandboxes", cls.vm_body)
        assert r.status == 201, r
        cls.sid = r.json()["id"]

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.api("DELETE", "/v1/sandboxes/" + cls.sid)
        finally:
            super().tearDownClass()

    def tearDown(self):
        pass  # the class's VM lives until tearDownClass


class GuestCounter:
    """For tests whose guest runs a counter into /tmp/vmcount (a shell
    loop started by the test): its value, and waiting for it to move."""

    def vcount(self, sid):
        out = self.d.sh(sid, "cat /tmp/vmcount 2>/dev/null")["stdout"].strip()
        return int(out) if out else 0

    def wait_count_above(self, sid, value):
        for _ in range(300):
            got = self.vcount(sid)
            if got > value:
                return got
        self.fail("the counter in %s did not pass %d" % (sid, value))
