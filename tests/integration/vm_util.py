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
