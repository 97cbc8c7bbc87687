"""A hibernated VM survives a daemon restart (docs/vm.md "Fork and
hibernate", "Restarts"): its record stays hibernated, its memory's file
stays in the store, and a resume after the restart (POST .../resume, a
command with auto_resume, E2B's connect) restores it where it was: the
same guest (its boot id), a shell loop's counter going on from the saved
value, its files. A kill after the restart removes the file; a file that
is gone or damaged fails the resume as before a restart, leaving it
hibernated until killed.

A running VM does not survive a restart yet: its record ends "lost".

The restarts are test_restart.py's (one lineage of daemons on one state
dir, cgroup parent and uid range, without --kill-on-exit).
"""
import os
import signal
import unittest

from harness import cgroup_hierarchies
from sbx_helpers import wait_until
from test_restart import RestartTest, db_row, db_update
from test_vm import qemu_of
from test_vm_life import internal_entries, procs_under
from vm_util import QEMU, GuestCounter

COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /tmp/vmcount; sleep 0.05; done"
VM = {"isolation": "vm", "memory": "256M", "disk": "64M", "timeout": "10m"}


class HibernatedVMRestart(GuestCounter, RestartTest):
    pool = 0

    def setUp(self):
        assert os.access(QEMU, os.X_OK), "qemu-system-x86 is not installed (scripts/install-deps.sh)"
        super().setUp()

    # ---- helpers -------------------------------------------------------

    def assertError(self, resp, status, kind):
        self.assertEqual(resp.status, status, resp)
        body = resp.json()
        self.assertEqual((body["code"], body["error"]), (status, kind), body)
        return body

    def hib_dir(self, sid):
        return os.path.join(self.d.state, "snapshots", b"default".hex(), ".sbx-hib-" + sid)

    def has_cgroup(self, sid):
        return any(os.path.isdir(os.path.join(h, self.d.cgroup_parent, sid))
                   for h in cgroup_hierarchies())

    def boot_id(self, sid):
        return self.d.sh(sid, "cat /proc/sys/kernel/random/boot_id")["stdout"].strip()

    def hibernate(self, sid):
        r = self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {"to_disk": True})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(qemu_of(sid), set())
        self.assertTrue(os.path.isfile(os.path.join(self.hib_dir(sid), "vm.mig")))

    def restart_daemon(self, how):
        """Ends the daemon (SIGTERM or SIGKILL), checks that nothing of
        its VMs runs meanwhile, and starts the next one."""
        if how == signal.SIGKILL:
            self.kill9()
        else:
            self.assertEqual(self.d.stop(), 0)
            self.hold_names()
        # A running VM's relay and QEMU end with the daemon (not yet a
        # hibernated one's concern: it has none).
        wait_until(lambda: procs_under(self.d.cgroup_parent) == [], timeout=20)
        return self.restart()

    def assert_hibernated(self, sid):
        got = self.d.api("GET", "/v1/sandboxes/" + sid)
        self.assertEqual(got.status, 200, got)
        got = got.json()
        self.assertEqual((got["state"], got.get("hibernated"), got["isolation"]),
                         ("paused", True, "vm"))
        self.assertEqual(db_row(self.d, sid)["hibernated"], 1)
        self.assertFalse(self.has_cgroup(sid))
        self.assertEqual(qemu_of(sid), set())

    def assert_resumed(self, sid, before, boot):
        """The same guest, its counter on from the saved value, its file."""
        self.assertEqual(len(qemu_of(sid)), 1)
        self.assertTrue(self.has_cgroup(sid))
        self.assertFalse(os.path.exists(self.hib_dir(sid)))
        got = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual(got["state"], "running")
        self.assertNotIn("hibernated", got)
        self.assertEqual(db_row(self.d, sid)["hibernated"], 0)
        self.assertEqual(self.boot_id(sid), boot)
        got = self.vcount(sid)
        self.assertGreaterEqual(got, before)
        self.wait_count_above(sid, got)
        self.assertEqual(self.d.sh(sid, "cat /home/user/kept")["stdout"], "kept\n")
        return self.wait_count_above(sid, got)

    # ---- tests ---------------------------------------------------------

    def test_hibernated_vm_survives_restarts(self):
        r = self.d.api("POST", "/v1/sandboxes", dict(VM, auto_resume=True,
                                                     metadata={"who": "hib"}))
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        key = self.d.new_key("default")
        self.background(sid, cmd=COUNTER)
        self.assertEqual(self.d.sh(sid, "echo kept > /home/user/kept")["exit_code"], 0)
        boot = self.boot_id(sid)
        self.assertEqual(len(boot), 36)
        before = self.wait_count_above(sid, 2)
        # A running VM next to it does not survive (yet): lost.
        other = self.d.create(**VM)

        # 1. SIGTERM, then an explicit resume.
        self.hibernate(sid)
        self.restart_daemon(signal.SIGTERM)
        self.assert_hibernated(sid)
        got = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual(got["metadata"], {"who": "hib"})
        self.assertEqual(db_row(self.d, other)["state"], "lost")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + other).status, 404)
        self.assertEqual(qemu_of(other), set())
        # While hibernated: what answered 409 before a restart still does.
        base = "/v1/sandboxes/" + sid
        self.assertEqual(self.d.api("GET", base + "/metrics").status, 409)
        self.assertEqual(self.d.api("POST", base + "/pause", {"to_disk": True}).status, 409)
        r = self.d.api("POST", base + "/resume", {})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "running")
        before = self.assert_resumed(sid, before, boot)

        # 2. SIGKILL, then a command wakes it (auto_resume).
        self.hibernate(sid)
        self.restart_daemon(signal.SIGKILL)
        self.assert_hibernated(sid)
        got = self.vcount(sid)
        self.assertGreaterEqual(got, before)
        before = self.assert_resumed(sid, before, boot)

        # 3. E2B's pause, a restart, E2B's connect.
        hdr = {"X-API-Key": key}
        r = self.d.api("POST", "/sandboxes/%s/pause" % sid, {}, headers=hdr)
        self.assertEqual(r.status, 204, r)
        self.restart_daemon(signal.SIGTERM)
        self.assert_hibernated(sid)
        r = self.d.api("POST", "/v2/sandboxes/%s/connect" % sid, {"timeout": 300}, headers=hdr)
        self.assertEqual(r.status, 201, r)
        before = self.assert_resumed(sid, before, boot)

        # 4. Hibernated across a restart, then killed: nothing is left.
        self.hibernate(sid)
        self.restart_daemon(signal.SIGKILL)
        self.assert_hibernated(sid)
        self.assertEqual(self.d.kill(sid).status, 204)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).status, 404)
        self.assertEqual(db_row(self.d, sid)["state"], "killed")
        self.assertFalse(os.path.exists(self.hib_dir(sid)))
        self.assertEqual(internal_entries(self.d.state), [])
        self.assertEqual(procs_under(self.d.cgroup_parent), [])
        # And the next daemon has nothing of it.
        self.restart_daemon(signal.SIGTERM)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes").json()["sandboxes"], [])
        self.assertEqual(internal_entries(self.d.state), [])

    def test_damaged_or_missing_file_after_restart(self):
        sid = self.d.create(**VM)
        self.hibernate(sid)
        self.restart_daemon(signal.SIGKILL)
        self.assert_hibernated(sid)
        mig = os.path.join(self.hib_dir(sid), "vm.mig")
        base = "/v1/sandboxes/" + sid
        # Cut short: QEMU's restore fails; it stays hibernated, file kept.
        size = os.path.getsize(mig)
        with open(mig, "r+b") as f:
            f.truncate(size // 2)
        r = self.d.api("POST", base + "/resume", {})
        r = self.assertError(r, 503, "unavailable")
        self.assertTrue(r["message"].startswith("resuming hibernated sandbox `%s`: " % sid), r)
        self.assert_hibernated(sid)
        self.assertTrue(os.path.exists(mig))
        self.assertEqual(procs_under(self.d.cgroup_parent), [])
        # Gone: the same.
        os.unlink(mig)
        r = self.d.api("POST", base + "/resume", {})
        r = self.assertError(r, 409, "conflict")
        self.assertEqual(r["message"], "resuming hibernated sandbox `%s`: its saved memory is "
                         "gone (it can only be killed)" % sid)
        self.assert_hibernated(sid)
        self.assertEqual(procs_under(self.d.cgroup_parent), [])
        # A kill ends it and removes what is left of the file.
        self.assertEqual(self.d.kill(sid).status, 204)
        self.assertFalse(os.path.exists(self.hib_dir(sid)))
        self.assertEqual(internal_entries(self.d.state), [])

    def test_file_of_an_ended_record_goes(self):
        """The previous daemon ended between the save and its record (the
        record says running): the next one ends the record, lost, and
        removes the file."""
        sid = self.d.create(**VM)
        self.hibernate(sid)
        self.kill9()
        db_update(self.d, "UPDATE sandboxes SET state = 'running', hibernated = 0 WHERE id = ?",
                  (sid,))
        self.restart()
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).status, 404)
        self.assertEqual(db_row(self.d, sid)["state"], "lost")
        self.assertFalse(os.path.exists(self.hib_dir(sid)))
        self.assertEqual(internal_entries(self.d.state), [])


if __name__ == "__main__":
    unittest.main()
