"""A VM's fork restores its copies in parallel, all or nothing (docs/vm.md
"Fork and hibernate"): when one copy cannot be made, none is left, nor the
memory image. A daemon with room for three sandboxes makes a fork of 3 of
one VM fail on its third copy, deterministically (the cap).
"""
from harness import Daemon, DaemonTest
from test_vm import qemu_of
from test_vm_life import internal_entries


class VMForkAll(DaemonTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pool=0, max_sandboxes=3).start()
        cls.addClassCleanup(cls._stop_if_running, cls.d)
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                "timeout": "10m"})
        assert r.status == 201, r
        cls.sid = r.json()["id"]

    def tearDown(self):
        for sb in self.d.api("GET", "/v1/sandboxes").json()["sandboxes"]:
            if sb["id"] != self.sid:
                self.d.kill(sb["id"])

    def ids(self):
        return sorted(sb["id"] for sb in self.d.api("GET", "/v1/sandboxes").json()["sandboxes"])

    def test_fork_is_all_or_nothing(self):
        self.assertEqual(self.d.sh(self.sid, "echo src > /home/user/f")["exit_code"], 0)
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % self.sid, {"count": 3})
        msg = self.assertError(r, 429, "resource_exhausted")["message"]
        # Said before any copy is made (each would be made and undone).
        self.assertIn("a fork of 3 would pass the daemon's limit of 3 sandboxes", msg)
        # No copy, no QEMU of one, no memory image left; the source runs on.
        self.assertEqual(self.ids(), [self.sid])
        self.assertEqual(internal_entries(self.d.state), [])
        self.assertEqual(self.d.sh(self.sid, "cat /home/user/f")["stdout"], "src\n")
        # What fits is made, in parallel, each a copy of the source.
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % self.sid, {"count": 2})
        self.assertEqual(r.status, 201, r)
        copies = [sb["id"] for sb in r.json()["sandboxes"]]
        self.assertEqual(self.ids(), sorted(copies + [self.sid]))
        for c in copies:
            self.assertEqual(len(qemu_of(c)), 1)
            self.assertEqual(self.d.sh(c, "cat /home/user/f")["stdout"], "src\n")
        self.assertEqual(internal_entries(self.d.state), [])
