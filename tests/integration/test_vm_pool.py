"""The pool keeps one booted VM once a VM was asked for (docs/vm.md "Pool").

A boot takes seconds under TCG: a create with the default limits takes the
pooled VM instead (its QEMU was running before the create), a create with
other limits boots its own, and a pooled VM is a fresh guest like any.
"""
import time
import unittest

from harness import DaemonTest
from test_vm import alive, qemu_pids as all_qemu_pids


class VMPool(DaemonTest):
    pool = 1

    def qemu_pids(self):
        """This daemon's QEMUs: other tests may run VMs on this host."""
        out = set()
        for pid in all_qemu_pids():
            try:
                with open("/proc/%d/status" % pid) as f:
                    uid = int([ln for ln in f if ln.startswith("Uid:")][0].split()[1])
            except (OSError, IndexError):
                continue
            if self.d.uid_base <= uid < self.d.uid_end:
                out.add(pid)
        return out

    def wait_pool(self, n, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.d.api("GET", "/v1/info").json()["pool"]
            if got >= n:
                return got
            time.sleep(0.2)
        self.fail("the pool never reached %d sandboxes (has %d)" % (n, got))

    def create_vm(self, **extra):
        body = {"isolation": "vm", "timeout": "10m"}
        body.update(extra)
        r = self.d.api("POST", "/v1/sandboxes", body)
        self.assertEqual(r.status, 201, r)
        return r.json()

    def test_pooled_vm(self):
        # No VM is booted ahead until one is asked for: only the base
        # (namespace) sandbox is in the pool.
        self.wait_pool(1)
        time.sleep(1)
        self.assertEqual(self.d.api("GET", "/v1/info").json()["pool"], 1)
        first = self.create_vm()
        self.assertEqual(self.d.sh(first["id"], "echo one")["stdout"], "one\n")

        # Now one VM boots ahead (it may start while the first one boots).
        self.wait_pool(2)
        booted = self.qemu_pids()
        self.assertEqual(len(booted), 2, booted)
        second = self.create_vm()
        self.assertEqual(second["isolation"], "vm")
        self.assertEqual(second["limits"], first["limits"])
        res = self.d.sh(second["id"], "echo two; id -u; ls -A /home/user | wc -l")
        self.assertEqual(res["stdout"], "two\n1000\n0\n", res)
        # A guest of its own: the first VM's files are not in it.
        self.assertEqual(self.d.sh(first["id"], "echo mine > /home/user/f")["exit_code"], 0)
        self.assertEqual(self.d.sh(second["id"], "cat /home/user/f")["exit_code"], 1)

        # Which QEMU is whose, from what a kill ends: the first's is one of
        # the two that ran before the second create, and the second's is
        # the other: the pooled guest, booted before it was asked for.
        self.assertEqual(self.d.kill(first["id"]).status, 204)
        gone = {pid for pid in booted if not alive(pid)}
        self.assertEqual(len(gone), 1, gone)
        (pooled,) = booted - gone
        self.assertTrue(alive(pooled))
        self.assertEqual(self.d.kill(second["id"]).status, 204)
        self.assertFalse(alive(pooled), "the second VM was not the pooled one")

        # Other limits than the pool's: a boot of its own, the pool untouched.
        self.wait_pool(2)
        before = self.qemu_pids()
        other = self.create_vm(memory="256M")
        self.assertEqual(other["limits"]["memory"], 256 << 20)
        own = self.qemu_pids() - before
        self.assertEqual(len(own), 1, own)
        self.assertEqual(self.d.api("GET", "/v1/info").json()["pool"], 2)
        self.assertEqual(self.d.sh(other["id"], "echo three")["stdout"], "three\n")
        self.assertEqual(self.d.kill(other["id"]).status, 204)
        for pid in own:
            self.assertFalse(alive(pid), "QEMU %d survived the kill" % pid)


if __name__ == "__main__":
    unittest.main()
