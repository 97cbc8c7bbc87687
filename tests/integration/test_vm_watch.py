"""Directory watches on a VM sandbox (docs/vm.md, Directory watches): the
guest agent runs the namespace engine's own watch helper as a file
operation, and the daemon reads its records as it reads the namespace
helper's. Same routes, events, names, limits and errors: every check runs
on a VM and on a namespace sandbox beside it and compares the two.

One VM per class (QEMU under TCG is slow to boot): VMWatch checks events,
recursion, errors, ends and hostile records; VMWatchKill the end of a
watch when its sandbox is killed.
"""
import re

from harness import processes_with_uid_in
from sbx_helpers import wait_until
from test_watch import WatchTest


class VMWatchBase(WatchTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.vm = cls.d.create(isolation="vm", timeout="10m")
        info = cls.d.api("GET", "/v1/sandboxes/%s" % cls.vm).json()
        assert info["isolation"] == "vm", info
        cls.ns = cls.d.create(isolation="namespace", timeout="10m")

    def tearDown(self):
        # Both sandboxes live for the class; only the watches go.
        for w in self.watches:
            w.close()
        for sid in (self.vm, self.ns):
            wait_until(lambda: not self.helpers(sid), timeout=30, what="no helper left")

    def both(self, cmd, **fields):
        for sid in (self.vm, self.ns):
            self.sh(sid, cmd, **fields)


class VMWatch(VMWatchBase):
    def test_each_type_with_its_name(self):
        self.both("mkdir /home/user/w1")
        expect = [
            ("create", "a.txt"), ("write", "a.txt"), ("chmod", "a.txt"),
            ("rename", "a.txt"), ("create", "b.txt"), ("remove", "b.txt"),
            ("chmod", ""),
        ]
        for sid in (self.vm, self.ns):
            w = self.watch(sid, "/home/user/w1")
            self.assertEqual(self.helpers(sid), ["sbx-watch"])
            for cmd in ["echo hi > a.txt", "chmod 600 a.txt", "mv a.txt b.txt", "rm b.txt"]:
                self.sh(sid, "cd /home/user/w1 && " + cmd)
            self.sh(sid, "chmod 700 /home/user/w1")
            w.wait_seen(("chmod", ""))
            self.assertEqual(w.pairs(), expect, sid)
            for e in w.snapshot():
                self.assertEqual(set(e), {"type", "name"}, e)

    def test_files_api_changes_are_seen(self):
        self.both("mkdir /home/user/w2")
        seen = []
        for sid in (self.vm, self.ns):
            w = self.watch(sid, "/home/user/w2")
            r = self.d.upload(sid, "/home/user/w2/up.bin", b"x" * 1000)
            self.assertEqual(r.status, 201, r)
            w.wait_seen(("create", "up.bin"))
            # The upload's own temporaries (random names) are seen alike.
            seen.append([(t, re.sub(r"^(#|\.sbx-upload-).*", r"\1X", n)) for t, n in w.pairs()])
        self.assertEqual(seen[0], seen[1])

    def test_recursive_and_not(self):
        self.both("mkdir -p /home/user/w3/a/b")
        for sid in (self.vm, self.ns):
            deep = self.watch(sid, "/home/user/w3", recursive="true")
            flat = self.watch(sid, "/home/user/w3")
            self.sh(sid, "touch /home/user/w3/a/b/deep.txt")
            deep.wait_seen(("create", "a/b/deep.txt"))
            # A tree made at once: what it held before its watch was in
            # place is announced, and it is watched from then on.
            self.sh(sid, "mkdir -p /home/user/w3/x/y && touch /home/user/w3/x/y/early")
            for p in [("create", "x"), ("create", "x/y"), ("create", "x/y/early")]:
                deep.wait_seen(p)
            self.sh(sid, "echo z > /home/user/w3/x/y/late")
            deep.wait_seen(("write", "x/y/late"))
            self.sh(sid, "mv /home/user/w3/x /home/user/w3/x2")
            deep.wait_seen(("create", "x2"))
            self.assertIn(("rename", "x"), deep.pairs())
            self.sh(sid, "touch /home/user/w3/x2/y/moved")
            deep.wait_seen(("create", "x2/y/moved"))
            self.marker(sid, flat, "/home/user/w3", "m")
            # (touch's own chmod of m may follow)
            self.assertEqual(flat.pairs()[:4], [("create", "x"), ("rename", "x"),
                                                ("create", "x2"), ("create", "m")], sid)
            # Not recursive: only the top, as for the namespace engine.
            self.assertFalse([n for _, n in flat.pairs() if "/" in n], flat.pairs())
            deep.wait_seen(("create", "m"))
            flat.close()
            deep.close()

    def test_errors_as_namespace(self):
        self.both("touch /home/user/file")
        self.both("mkdir -p /tmp/priv && chmod 700 /tmp/priv", user="root")
        cases = [
            ("/home/user/nope", {}, 404, "not_found"),
            ("/home/user/file/x", {}, 404, "not_found"),
            ("/nope/at/all", {}, 404, "not_found"),
            ("/home/user/file", {}, 400, "invalid_argument"),
            ("/tmp/priv", {}, 403, "forbidden"),
            ("/tmp/priv/inner", {}, 403, "forbidden"),
            ("/" + "a" * 5000, {}, 400, "invalid_argument"),
            ("/tmp", {"recursive": "maybe"}, 400, "invalid_argument"),
            ("/tmp", {"user": "nobody"}, 400, "invalid_argument"),
        ]
        for path, params, status, kind in cases:
            bodies = []
            for sid in (self.vm, self.ns):
                w = self.watch(sid, path, expect=status, **params)
                self.assertEqual(w.body["error"], kind, (path, w.body))
                bodies.append(w.body)
            self.assertEqual(bodies[0], bodies[1], path)
        w = self.watch(self.vm, "/home/user/file", expect=400)
        self.assertIn("not a directory", w.body["message"])
        # Root inside may.
        w = self.watch(self.vm, "/tmp/priv", user="root")
        self.sh(self.vm, "touch /tmp/priv/r", user="root")
        w.wait_seen(("create", "r"))

    def test_hangup_leaves_no_helper(self):
        w = self.watch(self.vm, "/home/user", recursive="true")
        self.assertEqual(self.helpers(self.vm), ["sbx-watch"])
        w.close()
        wait_until(lambda: not self.helpers(self.vm), timeout=30, what="the helper gone")

    def test_removing_the_directory_ends_the_stream(self):
        self.sh(self.vm, "mkdir -p /home/user/w4/sub && touch /home/user/w4/sub/f")
        w = self.watch(self.vm, "/home/user/w4", recursive="true")
        self.sh(self.vm, "rm -rf /home/user/w4")
        wait_until(lambda: w.ended, what="the end of the stream")
        ps = w.pairs()
        self.assertEqual(ps[-1], ("remove", ""), ps)
        for p in [("remove", "sub/f"), ("remove", "sub")]:
            self.assertIn(p, ps)
        wait_until(lambda: not self.helpers(self.vm), what="no helper left")

    def test_watches_per_sandbox(self):
        ws = [self.watch(self.vm, "/tmp") for _ in range(64)]
        w = self.watch(self.vm, "/tmp", expect=429)
        self.assertEqual(w.body["error"], "resource_exhausted", w.body)
        self.assertEqual(len(self.helpers(self.vm)), 64)
        ws[0].close()
        wait_until(lambda: len(self.helpers(self.vm)) == 63, timeout=30, what="one helper gone")
        self.watch(self.vm, "/tmp")

    def test_overflow_past_the_directory_limit(self):
        self.sh(self.vm, "mkdir /tmp/many && cd /tmp/many && seq 4100 | xargs mkdir")
        w = self.watch(self.vm, "/tmp/many", expect=429, recursive="true")
        self.assertEqual(w.body["error"], "resource_exhausted", w.body)
        self.assertIn("4096", w.body["message"])
        self.sh(self.vm, "cd /tmp/many && seq 4091 4100 | xargs rmdir")
        w = self.watch(self.vm, "/tmp/many", recursive="true")
        self.sh(self.vm, "cd /tmp/many && seq 5000 5020 | xargs mkdir")
        w.wait_seen(("overflow", None))
        self.sh(self.vm, "touch /tmp/many/1/inside")
        w.wait_seen(("create", "1/inside"))
        self.sh(self.vm, "rm -rf /tmp/many")

    def test_stream_unreachable_from_commands(self):
        """The helper's stdout is the one channel of its records. As
        init's helper, it is not dumpable: no command, root's included (no
        capabilities), opens it through /proc to forge records, whichever
        user the watch runs as. (Records a broken guest kernel could forge
        are parsed as hostile: iso/watch.c, the same parser as the
        namespace engine's, tests/unit/test_watch_wire.c and
        tests/fuzz/fuzz_watch.c.)"""
        for owner in ("user", "root"):
            w = self.watch(self.vm, "/home/user", user=owner)
            for user in ("user", "root"):
                res = self.d.sh(self.vm, "p=$(pgrep -x sbx-watch); printf '\\377\\377' "
                                "> /proc/$p/fd/1", user=user)
                self.assertNotEqual(res["exit_code"], 0, (owner, res))
                self.assertIn("Permission denied", res["stderr"])
            self.marker(self.vm, w, "/home/user", "after-refusal-" + owner)
            self.assertFalse(w.ended)
            self.assertEqual([p for p in w.pairs() if p[0] != "chmod"],
                             [("create", "after-refusal-" + owner)])
            w.close()
            wait_until(lambda: not self.helpers(self.vm), what="the helper gone")

    def test_helper_killed_inside_ends_the_stream(self):
        w = self.watch(self.vm, "/home/user")
        # As the user: its pipe is not reachable through /proc (the helper
        # changed uid from the agent's root, so it is not dumpable).
        res = self.d.sh(self.vm, "p=$(pgrep -x sbx-watch); echo forged > /proc/$p/fd/1")
        self.assertNotEqual(res["exit_code"], 0, res)
        self.sh(self.vm, "pkill -KILL -x sbx-watch")
        wait_until(lambda: w.ended, what="the end of the stream")
        self.assertEqual(w.pairs(), [])


class VMWatchKill(VMWatchBase):
    def test_a_hibernation_ends_the_stream_and_the_helper(self):
        base = "/v1/sandboxes/" + self.vm
        w = self.watch(self.vm, "/tmp", recursive="true")
        self.assertEqual(self.helpers(self.vm), ["sbx-watch"])
        r = self.d.api("POST", base + "/pause", {"to_disk": True})
        self.assertEqual(r.status, 200, r)
        wait_until(lambda: w.ended, what="the end of the stream")
        r = self.d.api("POST", base + "/resume", {})
        self.assertEqual(r.status, 200, r)
        # The restored guest's agent ended the helper that served the old
        # stream; a new watch works.
        wait_until(lambda: not self.helpers(self.vm), what="the old helper gone")
        w = self.watch(self.vm, "/tmp")
        self.marker(self.vm, w, "/tmp", "after-resume")

    def test_killing_the_sandbox_ends_the_stream(self):
        w = self.watch(self.vm, "/tmp", recursive="true")
        wn = self.watch(self.ns, "/tmp")
        self.sh(self.vm, "touch /tmp/before-kill")
        w.wait_seen(("create", "before-kill"))
        for sid, x in ((self.vm, w), (self.ns, wn)):
            self.assertEqual(self.d.kill(sid).status, 204)
            wait_until(lambda: x.ended, what="the end of the stream")
        # Nothing of either sandbox is left on the host (the VM's relay and
        # QEMU run as its slot's uid).
        wait_until(lambda: not processes_with_uid_in(self.d.uid_base, self.d.uid_end),
                   timeout=30, what="no process of the sandboxes left")

    def tearDown(self):
        for w in self.watches:
            w.close()


if __name__ == "__main__":
    import unittest
    unittest.main()
