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

from harness import DaemonTest
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

STAT = "stat -c '%n %U:%G %a %s' proj proj/a.txt proj/sub proj/sub/b.txt proj/tool.sh /tmp/t.txt /dev/shm/s && readlink proj/link && cat proj/a.txt proj/sub/b.txt"


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

    def test_bad_input(self):
        sid = self.d.create()
        before = self.ids()
        for body in ({"count": 0}, {"count": 17}, {"count": 10 ** 12}, {"count": "2"},
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
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/fork" % sid, {"count": 99}).status, 400)


if __name__ == "__main__":
    unittest.main()
