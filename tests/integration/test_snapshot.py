"""Fork and snapshots: copies of a sandbox's writable file system (/home/user,
/tmp, /dev/shm) made by the privileged parent from a tree the sandbox wrote.

Checked: contents, owners and modes survive; copies are independent (a
change in one is in no other); settings are carried, processes are not; a
hostile tree (links to host files, FIFOs, sockets, device-like names, deep
nesting, a full disk) never makes the copier read outside the sandbox and
gives a clear error or a skip; bad input is a 400 and leaves nothing.
"""
import json
import os
import unittest

from harness import Daemon, DaemonTest
from sbx_helpers import wait_until

SETUP = r'''
set -e
cd /home/user
mkdir -p proj/sub
printf 'hello' > proj/a.txt
printf 'secret' > proj/sub/b.txt
chmod 640 proj/a.txt
chmod 700 proj/sub
printf '#!/bin/sh\necho run\n' > proj/tool.sh
chmod 755 proj/tool.sh
ln -s a.txt proj/link
printf 'tmpdata' > /tmp/t.txt
printf 'shm' > /dev/shm/s
'''

def kernel_at_least(major, minor):
    release = os.uname().release.split("-")[0].split(".")
    return (int(release[0]), int(release[1])) >= (major, minor)


# What this kernel makes of a snapshot, worked out apart from the daemon's
# own probe (docs/security.md section 7): a layer needs user.* xattrs on
# tmpfs, a sandbox's disk (6.6), and idmapped mounts of the state
# directory's filesystem (a tmpfs: 6.3; the tests' /tmp is a disk's).
LAYERS = kernel_at_least(6, 6)


# (Directory sizes are the file system's own: a tmpfs's differ from those
# of the host's file system under a snapshot layer.)
STAT = ("stat -c '%n %U:%G %a' proj proj/sub && "
        "stat -c '%n %U:%G %a %s' proj/a.txt proj/sub/b.txt proj/tool.sh /tmp/t.txt /dev/shm/s && "
        "readlink proj/link && cat proj/a.txt proj/sub/b.txt")


class Fork(DaemonTest):
    pool = 2

    def fork(self, sid, body=None):
        return self.d.api("POST", "/v1/sandboxes/%s/fork" % sid, body if body is not None else {})

    def ids(self):
        return sorted(s["id"] for s in self.d.api("GET", "/v1/sandboxes").json()["sandboxes"])

    def test_fork_copies_files_owners_modes_and_settings(self):
        r = self.d.api("POST", "/v1/sandboxes", {"env": {"A": "1"}, "metadata": {"k": "v"},
                                                  "memory": "256M", "timeout": 600})
        self.assertEqual(r.status, 201, r)
        src = r.json()
        sid = src["id"]
        res = self.d.sh(sid, SETUP)
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(self.d.exec(sid, cmd="printf r > /tmp/rootfile; chmod 604 /tmp/rootfile",
                                     user="root")["exit_code"], 0)
        want = self.d.sh(sid, STAT + " && stat -c '%U %a' /tmp/rootfile")
        self.assertEqual(want["exit_code"], 0, want)
        r = self.fork(sid, {"count": 3})
        self.assertEqual(r.status, 201, r)
        body = r.json()
        self.assertIs(body["processes_not_carried"], True)
        self.assertEqual(len(body["sandboxes"]), 3)
        self.assertGreaterEqual(body["copied"]["files"], 5)
        kids = [s["id"] for s in body["sandboxes"]]
        self.assertEqual(len(set(kids + [sid])), 4)
        for k in body["sandboxes"]:
            self.assertEqual(k["env"], {"A": "1"})
            self.assertEqual(k["metadata"], {"k": "v"})
            self.assertEqual(k["limits"], src["limits"])
            self.assertEqual(k["template"], src["template"])
            self.assertEqual(k["tenant"], src["tenant"])
            self.assertEqual(k["timeout"], 600)
            got = self.d.sh(k["id"], STAT + " && stat -c '%U %a' /tmp/rootfile")
            self.assertEqual(got["stdout"], want["stdout"])
            self.assertEqual(self.d.sh(k["id"], "./proj/tool.sh")["stdout"], "run\n")
        # Independent: a change in one fork is in no other, nor in the source.
        self.d.sh(kids[0], "echo changed > proj/a.txt; rm proj/sub/b.txt")
        self.d.sh(sid, "echo later > proj/new.txt")
        for k in kids[1:] + [sid]:
            self.assertEqual(self.d.sh(k, "cat proj/a.txt")["stdout"], "hello")
            self.assertEqual(self.d.sh(k, "cat proj/sub/b.txt")["stdout"], "secret")
        for k in kids:
            self.assertEqual(self.d.sh(k, "test -e proj/new.txt; echo $?")["stdout"], "1\n")

    def test_processes_are_not_carried_and_the_source_runs_on(self):
        sid = self.d.create()
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                       {"cmd": "while :; do date +%s%N >> /home/user/tick; sleep 0.05; done"})
        self.assertEqual(r.status, 201, r)
        wait_until(lambda: self.d.sh(sid, "test -s tick && echo y")["stdout"] == "y\n")
        r = self.fork(sid)
        self.assertEqual(r.status, 201, r)
        kid = r.json()["sandboxes"][0]["id"]
        procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % kid).json()["processes"]
        self.assertEqual(procs, [])
        n = int(self.d.sh(sid, "wc -l < tick")["stdout"])
        wait_until(lambda: int(self.d.sh(sid, "wc -l < tick")["stdout"]) > n + 2,
                   what="the source to run on after the fork")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "running")

    def test_fork_of_a_paused_sandbox_leaves_it_paused(self):
        sid = self.d.create()
        self.d.sh(sid, "echo p > keep")
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {}).status, 200)
        r = self.fork(sid)
        self.assertEqual(r.status, 201, r)
        kid = r.json()["sandboxes"][0]["id"]
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "paused")
        self.assertEqual(self.d.sh(kid, "cat keep")["stdout"], "p\n")

    def test_hostile_tree(self):
        sid = self.d.create()
        res = self.d.exec(sid, cmd=r'''
cd /home/user
ln -s /etc/shadow shadow
ln -s / rootlink
ln -s ../../../../../../../../etc/passwd up
mkfifo fifo
python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.bind('/home/user/sock')"
touch null zero console
mkdir -p d && ln -s /proc/1/root d/escape
''')
        self.assertEqual(res["exit_code"], 0, res)
        r = self.fork(sid)
        self.assertEqual(r.status, 201, r)
        body = r.json()
        self.assertEqual(body["copied"]["skipped_special"], 2)  # the FIFO and the socket
        kid = body["sandboxes"][0]["id"]
        out = self.d.sh(kid, "readlink shadow rootlink up d/escape; ls -A | sort | tr '\\n' ' '")
        self.assertEqual(out["stdout"],  # (the FIFO and socket are gone)
                         "/etc/shadow\n/\n../../../../../../../../etc/passwd\n/proc/1/root\n"
                         "console d null rootlink shadow up zero ")
        # Links were copied as links: no file of the fork holds the host's
        # shadow, and the device-like names are empty regular files.
        out = self.d.exec(kid, cmd="find /home/user -type f -size +0 | wc -l; stat -c %F null")
        self.assertEqual(out["stdout"], "0\nregular empty file\n")
        with open("/etc/shadow", "rb") as f:
            host = f.read()
        got = self.d.api("GET", "/v1/sandboxes/%s/files?path=/home/user/shadow" % kid)
        self.assertNotEqual(got.body, host)

    def test_deep_tree_is_refused_and_leaves_nothing(self):
        sid = self.d.create()
        res = self.d.sh(sid, "p=/home/user; for i in $(seq 200); do p=$p/d; done; "
                             "python3 -c \"import os; os.makedirs('$p')\"")
        self.assertEqual(res["exit_code"], 0, res)
        before = self.ids()
        r = self.fork(sid, {"count": 2})
        body = self.assertError(r, 400, "invalid_argument")
        self.assertIn("deeper than 128", body["message"])
        self.assertEqual(self.ids(), before)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "running")
        self.assertEqual(self.d.sh(sid, "echo ok")["stdout"], "ok\n")

    def test_full_disk(self):
        sid = self.d.create(disk="16M")
        res = self.d.sh(sid, "for i in $(seq 40); do head -c 1048576 /dev/urandom > f$i || break;"
                             " done 2>&1; df -k /home/user | tail -1")
        self.assertIn("No space left", res["stdout"], res)
        size = self.d.sh(sid, "cat f* | md5sum")["stdout"]
        r = self.fork(sid)
        self.assertEqual(r.status, 201, r)
        kid = r.json()["sandboxes"][0]["id"]
        self.assertEqual(self.d.sh(kid, "cat f* | md5sum")["stdout"], size)

    def test_many_at_once(self):
        """More than the 16 the first fork took: each child its own copy,
        its own id range and cgroup; all of them go with one kill each."""
        sid = self.d.create(memory="64M", disk="8M")
        self.d.sh(sid, "echo many > /home/user/m")
        r = self.fork(sid, {"count": 24})
        self.assertEqual(r.status, 201, r)
        kids = [sb["id"] for sb in r.json()["sandboxes"]]
        self.assertEqual(len(set(kids)), 24)
        self.assertEqual(self.d.sh(kids[-1], "cat /home/user/m")["stdout"], "many\n")
        self.d.sh(kids[0], "echo changed > /home/user/m")
        self.assertEqual(self.d.sh(kids[1], "cat /home/user/m")["stdout"], "many\n")
        for kid in kids:
            self.assertEqual(self.d.kill(kid).status, 204)
        # Past --max-sandboxes: a 429, and no child of it is left.
        before = self.ids()
        self.assertError(self.fork(sid, {"count": 256}), 429)
        self.assertEqual(self.ids(), before)

    def test_bad_input(self):
        sid = self.d.create()
        before = self.ids()
        for body in ({"count": 0}, {"count": 257}, {"count": 10 ** 12}, {"count": "2"},
                     {"count": -1}, {"bogus": 1}, {"timeout": 0.1}):
            self.assertError(self.fork(sid, body), 400, "invalid_argument")
        self.assertError(self.fork("a" * 20), 404)
        self.assertEqual(self.ids(), before)

    def test_cli_and_e2b(self):
        sid = self.d.create()
        self.d.sh(sid, "echo cli > f")
        p = self.d.sbx("fork", sid, "--count", "2")
        self.assertEqual(p.returncode, 0, p)
        kids = p.stdout.decode().split()
        self.assertEqual(len(kids), 2)
        for k in kids:
            self.assertEqual(self.d.sh(k, "cat f")["stdout"], "cli\n")
        self.assertEqual(self.d.sbx("fork", sid, "--count", "0").returncode, 2)
        r = self.d.api("POST", "/sandboxes/%s/fork" % sid, {"count": 2, "timeout": 120})
        self.assertEqual(r.status, 201, r)
        items = r.json()
        self.assertEqual(len(items), 2)
        for it in items:
            k = it["sandbox"]["sandboxID"]
            self.assertTrue(it["sandbox"]["envdAccessToken"])
            self.assertEqual(self.d.sh(k, "cat f")["stdout"], "cli\n")
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/fork" % sid, {"count": 257}).status, 400)


if __name__ == "__main__":
    unittest.main()


SNAP_BASE = 0xFFFE0000


class Snapshots(DaemonTest):
    listen = True

    def snap(self, sid, name):
        return self.d.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": name})

    def store_dir(self, tenant="default"):
        return os.path.join(self.d.state, "snapshots", tenant.encode().hex())

    def tearDown(self):
        super().tearDown()
        for s in self.d.api("GET", "/v1/snapshots").json()["snapshots"]:
            self.d.api("DELETE", "/v1/snapshots/%s" % s["name"])

    def test_snapshot_reproduces_files_and_nothing_leaks(self):
        sid = self.d.create()
        self.assertEqual(self.d.sh(sid, SETUP)["exit_code"], 0)
        want = self.d.sh(sid, STAT)
        r = self.snap(sid, "s1")
        self.assertEqual(r.status, 201, r)
        body = r.json()
        self.assertEqual(body["name"], "s1")
        self.assertEqual(body["source"], sid)
        self.assertEqual(body["template"], "base")
        self.assertGreaterEqual(body["files"], 5)
        self.assertGreater(body["bytes"], 0)
        # On the host: stored once, root-only, owners canonical.
        st = os.stat(os.path.join(self.d.state, "snapshots"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o700))
        st = os.lstat(os.path.join(self.store_dir(), "s1", "home", "proj", "a.txt"))
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o777),
                         (SNAP_BASE + 1000, SNAP_BASE + 1000, 0o640))
        # Later changes in the source do not reach it.
        self.d.sh(sid, "echo later >> proj/a.txt; rm -r proj/sub")
        r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "s1"})
        self.assertEqual(r.status, 201, r)
        a = r.json()["id"]
        self.assertEqual(self.d.sh(a, STAT)["stdout"], want["stdout"])
        # Nor changes in a sandbox made from it.
        self.d.sh(a, "echo mine > proj/a.txt; touch proj/extra")
        b = self.d.create(snapshot="s1")
        self.assertEqual(self.d.sh(b, STAT)["stdout"], want["stdout"])
        self.assertEqual(self.d.sh(b, "test -e proj/extra; echo $?")["stdout"], "1\n")

    def test_snapshot_of_a_snapshot_sandbox_is_flat(self):
        sid = self.d.create()
        self.d.sh(sid, "echo one > one")
        self.assertEqual(self.snap(sid, "base1").status, 201)
        a = self.d.create(snapshot="base1")
        self.d.sh(a, "echo two > two")
        r = self.snap(a, "base2")
        self.assertEqual(r.status, 201, r)
        # base1 is a's lower layer: it stays while a runs.
        body = self.assertError(self.d.api("DELETE", "/v1/snapshots/base1"), 409, "conflict")
        self.assertIn("in use by 1", body["message"])
        self.assertEqual(self.d.kill(a).status, 204)
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/base1").status, 204)
        # base2 is flat: it needs base1 no more.
        b = self.d.create(snapshot="base2")
        self.assertEqual(self.d.sh(b, "cat one two")["stdout"], "one\ntwo\n")

    def test_list_delete_and_bad_input(self):
        sid = self.d.create()
        self.assertEqual(self.snap(sid, "keep.me-1_x").status, 201)
        self.assertError(self.snap(sid, "keep.me-1_x"), 409, "conflict")
        names = [s["name"] for s in self.d.api("GET", "/v1/snapshots").json()["snapshots"]]
        self.assertEqual(names, ["keep.me-1_x"])
        for bad in ("", "../x", ".hidden", "-x", "a/b", "x" * 65, "a b", "é"):
            self.assertError(self.snap(sid, bad), 400, "invalid_argument")
        self.assertError(self.d.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {}), 400)
        self.assertError(self.d.api("POST", "/v1/sandboxes/%s/snapshots" % sid,
                                    {"name": "ok", "x": 1}), 400)
        self.assertError(self.snap("a" * 20, "ok"), 404)
        self.assertError(self.d.api("POST", "/v1/sandboxes", {"snapshot": "nope"}), 404)
        self.assertError(self.d.api("POST", "/v1/sandboxes", {"snapshot": "../../etc"}), 400)
        self.assertError(self.d.api("POST", "/v1/sandboxes",
                                    {"snapshot": "keep.me-1_x", "template": "code-interpreter-v1"}),
                         400)
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/keep.me-1_x").status, 204)
        self.assertFalse(os.path.exists(os.path.join(self.store_dir(), "keep.me-1_x")))
        self.assertEqual(os.listdir(self.store_dir()), [])
        self.assertError(self.d.api("DELETE", "/v1/snapshots/keep.me-1_x"), 404)
        self.assertError(self.d.api("DELETE", "/v1/snapshots/..%2f..%2fetc"), 404)
        self.assertError(self.d.api("POST", "/v1/sandboxes", {"snapshot": "keep.me-1_x"}), 404)

    @unittest.skipUnless(LAYERS, "snapshots are copies on this kernel (SnapshotsOnTmpfs checks"
                                 " the copy's contract)")
    def test_a_layer_costs_only_what_changes(self):
        sid = self.d.create(disk="64M")
        self.d.sh(sid, "head -c 20000000 /dev/urandom > big; mkdir -p d/e; echo x > d/e/x")
        want = self.d.sh(sid, "md5sum < big")["stdout"]
        self.assertEqual(self.snap(sid, "big").status, 201)
        # Shared, read-only, not copied: an 8M disk holds a sandbox on a
        # 20 MB snapshot, and its disk holds only what it changes.
        kids = [self.d.create(snapshot="big", disk="8M") for _ in range(3)]
        for k in kids:
            self.assertEqual(self.d.sh(k, "md5sum < big")["stdout"], want)
            self.assertLess(self.d.api("GET", "/v1/sandboxes/%s/metrics" % k).json()["disk_bytes"],
                            1 << 20)
        k = kids[0]
        res = self.d.sh(k, "rm -r d && mkdir d && ls d | wc -l; rm big; test -e big; echo $?")
        self.assertEqual(res["stdout"], "0\n1\n", res)
        self.assertEqual(self.d.sh(kids[1], "ls d/e; md5sum < big")["stdout"], "x\n" + want)
        # Changing the big file copies it up: more than this disk holds.
        res = self.d.sh(kids[1], "echo more >> big")
        self.assertNotEqual(res["exit_code"], 0, res)
        self.assertEqual(self.d.sh(kids[2], "md5sum < big")["stdout"], want)

    def test_sparse_files_stay_sparse(self):
        # The red team's attack: a sandbox using 4 KiB made a snapshot
        # write gigabytes of zeros to the host's state disk. Holes are kept:
        # 200 files of 400 MiB (about the disk's size, a command's largest
        # file) with a byte each cost the store about 200 blocks, and a
        # sandbox made from the snapshot sees them as they were.
        size = (400 << 20) + 2
        sid = self.d.create()
        res = self.d.sh(sid, "for i in $(seq 200); do truncate -s 400M s$i; echo x >> s$i; done;"
                             " du -sk . | cut -f1")
        self.assertEqual(res["exit_code"], 0, res)
        r = self.snap(sid, "sparse")
        self.assertEqual(r.status, 201, r)
        self.assertLess(r.json()["bytes"], 4 << 20)
        stored = os.path.join(self.store_dir(), "sparse", "home")
        blocks = sum(os.lstat(os.path.join(stored, n)).st_blocks for n in os.listdir(stored))
        self.assertLess(blocks * 512, 4 << 20)
        self.assertEqual(os.path.getsize(os.path.join(stored, "s7")), size)
        k = self.d.create(snapshot="sparse")
        got = self.d.sh(k, "stat -c '%s' s7; tail -c 2 s7; du -sk . | cut -f1")["stdout"].split()
        self.assertEqual(got[:2], [str(size), "x"])
        self.assertLess(int(got[2]), 8 << 10)
        # A fork keeps them sparse too (its target is a disk of the same size).
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1})
        self.assertEqual(r.status, 201, r)
        f = r.json()["sandboxes"][0]["id"]
        self.assertEqual(self.d.sh(f, "stat -c '%s' s200")["stdout"], "%d\n" % size)
        self.assertLess(int(self.d.sh(f, "du -sk . | cut -f1")["stdout"]), 8 << 10)
        for x in (k, f):
            self.d.kill(x)

    def test_hostile_tree(self):
        sid = self.d.create()
        self.d.sh(sid, "ln -s /etc/shadow shadow; mkfifo fifo; ln -s /proc/self/root root")
        r = self.snap(sid, "hostile")
        self.assertEqual(r.status, 201, r)
        d = os.path.join(self.store_dir(), "hostile", "home")
        self.assertEqual(sorted(os.listdir(d)), ["root", "shadow"])
        self.assertEqual(os.readlink(os.path.join(d, "shadow")), "/etc/shadow")
        k = self.d.create(snapshot="hostile")
        self.assertEqual(self.d.sh(k, "readlink shadow root")["stdout"],
                         "/etc/shadow\n/proc/self/root\n")

    def test_tenants_are_isolated(self):
        ka, kb = self.d.new_key("ta"), self.d.new_key("tb")
        r = self.d.tcp("POST", "/v1/sandboxes", {}, key=ka)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        r = self.d.tcp("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "mine"}, key=ka)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.d.tcp("GET", "/v1/snapshots", key=kb).json()["snapshots"], [])
        self.assertEqual(self.d.tcp("POST", "/v1/sandboxes", {"snapshot": "mine"}, key=kb).status,
                         404)
        self.assertEqual(self.d.tcp("DELETE", "/v1/snapshots/mine", key=kb).status, 404)
        self.assertEqual(self.d.tcp("GET", "/snapshots", key=kb).json(), [])
        r = self.d.tcp("POST", "/v1/sandboxes", {"snapshot": "mine"}, key=ka)
        self.assertEqual(r.status, 201, r)
        for s in (sid, r.json()["id"]):
            self.d.tcp("DELETE", "/v1/sandboxes/%s" % s, key=ka)
        self.assertEqual(self.d.tcp("DELETE", "/v1/snapshots/mine", key=ka).status, 204)

    def test_cli(self):
        sid = self.d.create()
        self.d.sh(sid, "echo via-cli > f")
        p = self.d.sbx("snapshot", "create", sid, "clisnap")
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(p.stdout, b"clisnap\n")
        p = self.d.sbx("snapshot", "ls")
        self.assertEqual(p.returncode, 0, p)
        self.assertIn(b"clisnap", p.stdout)
        p = self.d.sbx("create", "--snapshot", "clisnap")
        self.assertEqual(p.returncode, 0, p)
        k = p.stdout.decode().split()[-1]
        self.assertEqual(self.d.sh(k, "cat f")["stdout"], "via-cli\n")
        p = self.d.sbx("snapshot", "rm", "clisnap")
        self.assertEqual(p.returncode, 1, p)
        self.assertIn(b"in use by 1", p.stderr)
        self.d.kill(k)
        self.assertEqual(self.d.sbx("snapshot", "rm", "clisnap").returncode, 0)
        self.assertEqual(self.d.sbx("snapshot", "rm", "clisnap").returncode, 1)
        self.assertEqual(self.d.sbx("snapshot", "create", sid).returncode, 2)

    def test_e2b(self):
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base"})
        sid = r.json()["sandboxID"]
        self.d.sh(sid, "echo e2b > f")
        r = self.d.api("POST", "/sandboxes/%s/snapshots" % sid, {})
        self.assertEqual(r.status, 201, r)
        snap = r.json()["snapshotID"]
        self.assertEqual(r.json()["names"], [snap])
        listed = self.d.api("GET", "/snapshots?sandboxID=%s" % sid).json()
        self.assertEqual([s["snapshotID"] for s in listed], [snap])
        self.assertEqual(self.d.api("GET", "/snapshots?sandboxID=other").json(), [])
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": snap})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.d.sh(r.json()["sandboxID"], "cat f")["stdout"], "e2b\n")
        self.assertEqual(self.d.api("DELETE", "/templates/%s" % snap).status, 409)
        self.d.kill(r.json()["sandboxID"])
        self.assertEqual(self.d.api("DELETE", "/templates/%s" % snap).status, 204)
        self.assertEqual(self.d.api("DELETE", "/templates/%s" % snap).status, 404)
        self.assertEqual(self.d.api("POST", "/v2/sandboxes", {"templateID": snap}).status, 404)


from test_restart import RestartTest  # noqa: E402




class SnapshotsOnTmpfs(DaemonTest):
    """The daemon's state (and so its snapshot store) on a tmpfs, which
    takes idmapped mounts only from Linux 6.3: before that snapshots cannot
    be layers (nor before 6.6, whose tmpfs has no user.* xattrs for
    overlayfs's marks), and sandboxes made from one get a copy. The contract is the
    same either way: the files, a disk that leaves the sandbox the same
    room for its own changes, and a 409 on deleting a snapshot in use; the
    answer and /v1/info say which it was."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pool=0, state_on_tmpfs=True).start()
        cls.addClassCleanup(cls._stop_if_running, cls.d)

    def test_layer_or_copy_keeps_the_contract(self):
        d = self.d
        mode = "layer" if LAYERS else "copy"
        info = d.api("GET", "/v1/info").json()["kernel"]["paths"]
        self.assertEqual(info["snapshots"], mode, info)
        if mode == "copy":
            self.assertRegex(info["snapshots_why"], "idmapped|xattrs")
        sid = d.create(disk="64M")
        d.sh(sid, "head -c 20000000 /dev/urandom > big; echo small > small")
        want = d.sh(sid, "md5sum < big")["stdout"]
        self.assertEqual(d.api("POST", "/v1/sandboxes/%s/snapshots" % sid,
                               {"name": "big"}).status, 201)
        r = d.api("POST", "/v1/sandboxes", {"snapshot": "big", "disk": "8M"})
        self.assertEqual(r.status, 201, r)
        kid = r.json()
        self.assertEqual(kid["snapshot"], {"name": "big", "as": mode})
        self.assertEqual(kid["limits"]["disk"], 8 << 20)
        self.assertEqual(d.sh(kid["id"], "md5sum < big")["stdout"], want)
        # Its own 8M, whichever way: 6M of new data fit, 10M more do not.
        res = d.sh(kid["id"], "head -c 6000000 /dev/zero > mine && echo ok")
        self.assertEqual(res["stdout"], "ok\n", res)
        res = d.sh(kid["id"], "head -c 10000000 /dev/zero > more")
        self.assertNotEqual(res["exit_code"], 0, res)
        body = self.assertError(d.api("DELETE", "/v1/snapshots/big"), 409, "conflict")
        self.assertIn("in use by 1", body["message"])
        self.assertEqual(d.kill(kid["id"]).status, 204)
        self.assertEqual(d.api("DELETE", "/v1/snapshots/big").status, 204)


class SnapshotRestart(RestartTest):
    def test_a_layered_sandbox_survives_a_restart(self):
        sid = self.d.create()
        self.d.sh(sid, "echo kept > k")
        r = self.d.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "r1"})
        self.assertEqual(r.status, 201, r)
        k = self.d.create(snapshot="r1")
        self.d.sh(k, "echo mine >> k")
        self.kill9()
        self.restart()
        self.assertEqual(self.d.sh(k, "cat k")["stdout"], "kept\nmine\n")
        # Still in use after the restart (its lower layer, or its copy's).
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/r1").status, 409)
        self.d.kill(k)
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/r1").status, 204)
