"""Hostile code vs. the files API (DESIGN.md invariant 6) and tenants vs.
each other's sandboxes.

Code inside plants symlinks to /etc/shadow, /, /proc/1/root, ../../..,
the daemon's state dir and a host canary, then the test drives every files
route through them and through `..`-laden paths. Every request either stays
inside the sandbox (the sandbox's own files: its /etc/shadow does not
exist -> 404, its "/" is read-only -> 403) or is refused (400 for magic
links: RESOLVE_NO_MAGICLINKS -> ELOOP; 403 for /proc). Host canaries are
never read, modified or created, including while the sandbox races
directory/symlink swaps against repeated uploads.

The files API acts as the sandbox's user: it must not read or remove what
that user could not (the move between /tmp and /home/user copies; it used
to run that copy as the daemon's root).
"""
import os
import unittest
import uuid
from urllib.parse import urlencode

from harness import DaemonTest
from hostile_util import canary_name, put_in_one_write, py, sh_ok, wait_until

ASAN_SUBSET = False


class FilesApiEscapes(DaemonTest):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.secret = "host-secret-" + uuid.uuid4().hex
        cls.canary = os.path.join("/tmp", canary_name())
        with open(cls.canary, "w") as f:
            f.write(cls.secret)
        cls.state_canary = os.path.join(cls.d.state, canary_name())
        with open(cls.state_canary, "w") as f:
            f.write(cls.secret)
        cls.canary_stat = os.stat(cls.canary)
        cls.state_listing = sorted(os.listdir(cls.d.state))

    @classmethod
    def tearDownClass(cls):
        for p in (cls.canary, cls.state_canary):
            try:
                os.unlink(p)
            except OSError:
                pass
        super().tearDownClass()

    def setUp(self):
        self.sid = self.d.create()
        self.base = "/v1/sandboxes/%s/files" % self.sid
        self.responses = []
        sh_ok(self, self.sid, "cd /home/user && ln -s /etc/shadow shadow && ln -s / root && "
                              "ln -s /proc/1/root p1 && ln -s ../../../../ up && "
                              "ln -s {state} state && ln -s {canary} canary && "
                              "ln -s {state_canary} state_canary && ln -s /proc/1/fd/3 fd3 && "
                              "ln -s /proc/self/cwd selfcwd".format(
                                  state=self.d.state, canary=self.canary,
                                  state_canary=self.state_canary))

    def tearDown(self):
        # After every test: no response carried a host secret, and the
        # host canaries are untouched.
        for r in self.responses:
            self.assertNotIn(self.secret.encode(), r.body, r)
        st = os.stat(self.canary)
        self.assertEqual((st.st_ino, st.st_size, st.st_mtime_ns),
                         (self.canary_stat.st_ino, self.canary_stat.st_size,
                          self.canary_stat.st_mtime_ns))
        with open(self.canary) as f:
            self.assertEqual(f.read(), self.secret)
        with open(self.state_canary) as f:
            self.assertEqual(f.read(), self.secret)
        self.assertEqual(sorted(os.listdir(self.d.state)), self.state_listing)
        super().tearDown()

    # -- helpers -----------------------------------------------------------

    def call(self, method, route, query=None, body=None, raw=False):
        path = self.base + route + ("?" + urlencode(query) if query else "")
        r = self.d.api(method, path, body, raw=raw)
        self.responses.append(r)
        return r

    def get(self, p, **q):
        return self.call("GET", "", dict(path=p, **q))

    def stat(self, p, **q):
        return self.call("GET", "/stat", dict(path=p, **q))

    def list(self, p, **q):
        return self.call("GET", "/list", dict(path=p, **q))

    def put(self, p, data=b"x", **q):
        # Headers and body in one write: the daemon answers a refused upload
        # as soon as it has the headers and closes, and http.client's second
        # send() would then fail with EPIPE instead of showing the answer.
        path = self.base + "?" + urlencode(dict(path=p, **q))
        r = put_in_one_write(self.d, path, data)
        self.responses.append(r)
        return r

    def mkdir(self, p, parents=False):
        return self.call("POST", "/mkdir", body={"path": p, "parents": parents})

    def move(self, a, b, overwrite=False):
        return self.call("POST", "/move", body={"from": a, "to": b, "overwrite": overwrite})

    def remove(self, p, recursive=False):
        q = {"path": p}
        if recursive:
            q["recursive"] = "1"
        return self.call("DELETE", "", q)

    def status(self, r):
        return r.status

    # -- reads ---------------------------------------------------------------

    def test_download_through_links(self):
        sandbox_passwd = sh_ok(self, self.sid, "cat /etc/passwd").encode()
        cases = {
            "/home/user/shadow": 404,          # the sandbox's /etc/shadow: absent
            "/home/user/root/etc/shadow": 404,
            "/home/user/root": 400,            # a directory
            "/home/user/up/etc/shadow": 404,
            "/home/user/canary": 404,          # the host /tmp is not the sandbox's
            "/home/user/state_canary": 404,
            "/home/user/state/sbx.sock": 404,
            "/home/user/p1": 400,              # magic link: ELOOP
            "/home/user/p1/etc/passwd": 400,
            "/home/user/selfcwd/x": 404,       # no "self" for the daemon in the sandbox's pid ns
            "/home/user/fd3": 403,             # /proc/1/fd is closed to the user
            "/proc/1/root/etc/passwd": 400,
            "/proc/1/environ": 403,
            "/proc/self/environ": 404,         # the daemon is not in the pid namespace
            "/proc/kcore": 404 if not os.path.exists("/proc/kcore") else 403,
            "/dev/null": 403,
            "/dev/zero": 403,
            self.canary: 404,
            self.state_canary: 404,
            "/../../../../" + self.canary: 404,
            "../../../../../etc/shadow": 404,
        }
        for p, want in cases.items():
            r = self.get(p)
            self.assertEqual(r.status, want, (p, r))
            # Root inside (no CAP_DAC_OVERRIDE) enters /home/user (0755) as
            # anyone may: the same answers.
            r = self.get(p, user="root")
            self.assertEqual(r.status, want, (p, r))
        # Links and `..` that stay inside lead to the sandbox's own files.
        for p in ("/home/user/root/etc/passwd", "/home/user/up/etc/passwd", "/../../etc/passwd",
                  "../../../etc/passwd", "/home/user/../../etc/./passwd"):
            r = self.get(p)
            self.assertEqual((r.status, r.body), (200, sandbox_passwd), p)

    def test_stat_and_list_through_links(self):
        r = self.stat("/home/user/root")
        self.assertEqual((r.status, r.json()["type"], r.json()["target"]), (200, "symlink", "/"))
        self.assertEqual(self.stat("/home/user/root/etc/shadow").status, 404)
        self.assertEqual(self.stat("/home/user/canary").json()["target"], self.canary)
        self.assertEqual(self.stat(self.canary).status, 404)
        self.assertEqual(self.stat(self.d.state).status, 404)
        self.assertEqual(self.stat("/home/user/p1/etc").status, 400)
        # /proc is refused by every route, stat included: the daemon's own
        # privileges must not read what the sandbox user cannot (init's
        # magic links: the user gets EACCES inside).
        for p in ("/proc/1/exe", "/proc/1/root", "/proc/1/cwd", "/proc/1/environ", "/proc/1",
                  "/proc", "/proc/self"):
            for user in ("user", "root"):
                r = self.stat(p, user=user)
                self.assertEqual(r.status, 403, (p, user, r))
        # Listing through links shows the sandbox's tree.
        r = self.list("/home/user/root")
        names = sorted(e["name"] for e in r.json()["entries"])
        self.assertEqual(names, sorted(sh_ok(self, self.sid, "ls -A /").split()))
        r = self.list("/home/user/up/", depth=2)
        self.assertEqual(r.status, 200, r.status)
        paths = [e["path"] for e in r.json()["entries"]]
        self.assertIn("/home/user/up/etc/passwd", paths)
        self.assertFalse([p for p in paths if os.path.basename(self.canary) in p], paths)
        for p in ("/home/user/p1", "/proc", "/proc/1", "/home/user/root/proc", "/dev/pts"):
            self.assertIn(self.list(p).status, (400, 403), p)
        self.assertEqual(self.list("/home/user/state").status, 404)
        # A deep listing from "/" never enters /proc and never shows host paths.
        # (Directories the caller may not read, like /root for the user, are
        # listed but not entered.)
        for user in ("user", "root"):
            r = self.list("/", depth=3, user=user)
            self.assertEqual(r.status, 200, (user, r.status, r.body[:300]))
            entries = r.json()["entries"]
            paths = [e["path"] for e in entries]
            self.assertIn("/etc/passwd", paths)
            self.assertIn("/proc", paths)
            self.assertFalse([p for p in paths if p.startswith("/proc/")], user)
            self.assertFalse([p for p in paths if p.startswith(self.d.state)], user)
            self.assertFalse([p for p in paths if os.path.basename(self.canary) in p], user)
            # /root (0700) is root's; /home/user (0755) anyone's to read
            if user == "user":
                self.assertFalse([p for p in paths if p.startswith("/root/")], user)
            else:
                self.assertIn("/home/user/canary", paths)

    # -- writes --------------------------------------------------------------

    def test_upload_through_links(self):
        cases = {
            "/home/user/root/x": 403,           # the sandbox's read-only "/"
            "/home/user/up/x": 403,
            "/home/user/root/etc/x": 403,
            "/home/user/root/usr/x": 403,
            "/home/user/p1/x": 400,
            "/home/user/state/x": 404,          # no such directory in the sandbox
            "/home/user/root/proc/1/x": 403,
            "/proc/1/x": 403,
            "/proc/sys/kernel/core_pattern": 403,
            "/dev/pts/x": 403,
            "/dev/x": 403,
            self.canary: 201,                   # = the sandbox's own /tmp
            "/../../.." + self.state_canary: 404,
        }
        for p, want in cases.items():
            r = self.put(p, b"payload")
            self.assertEqual(r.status, want, (p, r))
        # parents=1 does not create through a dangling link (like mkdir -p),
        # and a link to a real sandbox directory leads into the sandbox.
        r = self.put("/home/user/state/deep/x", b"payload", parents="1")
        self.assertEqual(r.status, 404, r)
        self.assertFalse(os.path.exists(os.path.join(self.d.state, "deep")))
        sh_ok(self, self.sid, "ln -s /tmp /home/user/tmplink")
        r = self.put("/home/user/tmplink/" + self.d.state.lstrip("/") + "/deep/x", b"payload",
                     parents="1")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(sh_ok(self, self.sid, "cat /tmp/tmp/%s/deep/x" % os.path.basename(self.d.state)),
                         "payload")
        self.assertFalse(os.path.exists(os.path.join(self.d.state, "deep")))
        # Writing "over" a link replaces the link in the sandbox, not its target.
        r = self.put("/home/user/canary", b"replaced")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(sh_ok(self, self.sid, "stat -c %F /home/user/canary; cat /home/user/canary"),
                         "regular file\nreplaced")

    def test_mkdir_move_remove_through_links(self):
        self.assertEqual(self.mkdir("/home/user/root/newdir").status, 403)
        self.assertEqual(self.mkdir("/home/user/p1/newdir").status, 400)
        self.assertEqual(self.mkdir("/home/user/state/newdir", parents=True).status, 404)
        self.assertFalse(os.path.exists(os.path.join(self.d.state, "newdir")))
        self.assertEqual(self.mkdir("/proc/1/newdir").status, 403)
        # Moves: out of the sandbox tree is impossible; into /proc refused.
        # (A symlink cannot be copied across mounts: 400; a file: the
        # read-only skeleton refuses it.)
        self.assertEqual(self.move("/home/user/shadow", "/home/user/root/etc/shadow").status, 400)
        sh_ok(self, self.sid, "echo mine > /home/user/file")
        self.assertEqual(self.move("/home/user/file", "/home/user/root/etc/shadow").status, 403)
        self.assertEqual(self.move("/home/user/file", "/home/user/up/x").status, 403)
        self.assertEqual(sh_ok(self, self.sid, "cat /home/user/file"), "mine\n")
        self.assertEqual(self.move("/home/user/up/etc/passwd", "/home/user/p").status, 403)
        self.assertEqual(self.move("/home/user/canary", "/proc/1/x").status, 403)
        self.assertEqual(self.move(self.canary, "/home/user/c").status, 404)
        self.assertEqual(self.move("/home/user/p1/etc/passwd", "/home/user/p").status, 400)
        # Moving the link itself moves the link.
        r = self.move("/home/user/canary", "/home/user/moved")
        self.assertEqual((r.status, r.json()["type"]), (200, "symlink"), r)
        # Removing through links removes inside the sandbox only.
        self.assertEqual(self.remove("/home/user/root/etc/passwd").status, 403)
        self.assertEqual(self.remove(self.canary).status, 404)
        self.assertEqual(self.remove(self.state_canary).status, 404)
        self.assertEqual(self.remove("/home/user/state_canary").status, 204)  # the link
        self.assertEqual(self.remove("/home/user/root/proc", recursive=True).status, 403)
        self.assertEqual(self.remove("/home/user/p1/tmp", recursive=True).status, 400)
        self.assertEqual(self.remove("/home/user/up/usr", recursive=True).status, 403)
        self.assertEqual(sh_ok(self, self.sid, "ls /usr/bin/python3 /etc/passwd"),
                         "/etc/passwd\n/usr/bin/python3\n")

    def test_move_acts_as_the_user(self):
        # Root inside leaves a private file in the sticky /tmp; the user
        # cannot read or remove it, so a move through the API (acting as
        # the user) must not either (it copies across the /tmp and
        # /home/user mounts).
        sh_ok(self, self.sid, "echo root-only > /tmp/secret && chmod 600 /tmp/secret",
              user="root")
        self.assertEqual(self.d.sh(self.sid, "cat /tmp/secret")["exit_code"], 1)
        r = self.move("/tmp/secret", "/home/user/stolen")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(self.get("/home/user/stolen").status, 404)
        self.assertEqual(sh_ok(self, self.sid, "cat /tmp/secret", user="root"), "root-only\n")
        # Readable, but in another user's name in the sticky /tmp: the user
        # could copy it but not remove it, so the move fails and changes
        # nothing (no copy left behind).
        sh_ok(self, self.sid, "echo public > /tmp/public && chmod 644 /tmp/public", user="root")
        r = self.move("/tmp/public", "/home/user/public")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(self.stat("/home/user/public").status, 404)
        self.assertEqual(sh_ok(self, self.sid, "cat /tmp/public"), "public\n")
        # From the read-only tree: readable, not removable: refused, no copy.
        r = self.move("/etc/hosts", "/home/user/hosts")
        self.assertEqual(r.status, 403, r)
        self.assertEqual(self.stat("/home/user/hosts").status, 404)
        # As root inside, with its own file, the move works and moves.
        r = self.move("/tmp/secret", "/tmp/../home/user/../../tmp/s2")
        self.assertEqual(r.status, 403, r)  # user acting: cannot rename root's file
        r = self.call("POST", "/move", {"user": "root"}, {"from": "/tmp/secret", "to": "/root/s"})
        self.assertEqual(r.status, 200, r)  # /root is root's, on its writable skeleton
        self.assertEqual(sh_ok(self, self.sid, "cat /root/s; test -e /tmp/secret || echo gone", user="root"),
                         "root-only\ngone\n")
        sh_ok(self, self.sid, "mv /root/s /tmp/secret", user="root")
        # The user's own files move across fine, and are gone from the source.
        sh_ok(self, self.sid, "echo mine > /tmp/mine")
        r = self.move("/tmp/mine", "/home/user/mine")
        self.assertEqual((r.status, r.json()["type"]), (200, "file"), r)
        self.assertEqual(sh_ok(self, self.sid, "cat /home/user/mine; ls /tmp"),
                         "mine\npublic\nsecret\n")

    # -- races ---------------------------------------------------------------

    def test_swap_race_against_uploads(self):
        # Inside: /home/user/d flips between a real directory and a symlink
        # (to "/", to the host state dir's path, to /proc/1/root, to ../..)
        # with renameat2(RENAME_EXCHANGE), as fast as it can, while the test
        # uploads into /home/user/d/ again and again.
        name = canary_name("race")
        swapper = (
            "import ctypes,os,sys,itertools\n"
            "libc=ctypes.CDLL(None,use_errno=True)\n"
            "os.chdir('/home/user')\n"
            "os.mkdir('d')\n"
            "targets=sys.argv[1:]\n"
            "for i,t in enumerate(targets): os.symlink(t,'l%d'%i)\n"
            "print('ready',flush=True)\n"
            "for n in itertools.count():\n"
            " if os.path.exists('/tmp/stop'): break\n"
            " l=b'l%d'%(n%len(targets))\n"
            " libc.renameat2(-100,b'd',-100,l,2)\n"  # RENAME_EXCHANGE
            " libc.renameat2(-100,b'd',-100,l,2)\n")
        targets = ["/", self.d.state, "/proc/1/root", "../../..", "/tmp", os.path.dirname(self.canary)]
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"argv": ["python3", "-c", swapper] + targets})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/%s/files/stat?path=/home/user/l5"
                                      % self.sid).status == 200, what="the swapper")
        statuses = {}
        for i in range(300):
            leaf = "%s-%d" % (name, i)
            q = {"parents": "1"} if i % 3 == 0 else {}
            r = self.put("/home/user/d/" + leaf, self.secret.encode()[:4] + b"-payload", **q)
            statuses[r.status] = statuses.get(r.status, 0) + 1
            if i % 10 == 0:
                self.mkdir("/home/user/d/%s-dir" % leaf)
                self.get("/home/user/d/" + leaf)
                self.list("/home/user/d")
        sh_ok(self, self.sid, "touch /tmp/stop")
        w = self.d.api("GET", "/v1/sandboxes/%s/processes/%d/wait?timeout=30" % (self.sid, pid))
        self.assertEqual(w.json().get("exit_code"), 0, w)
        # Uploads only ever landed in the sandbox: its own d/, its /tmp or a
        # directory under it. Nothing on the host.
        self.assertLessEqual(set(statuses), {201, 400, 403, 404}, statuses)
        self.assertGreater(statuses.get(201, 0), 0, statuses)
        def host_names():
            # The daemon's state dir (all of it), the host's /tmp with every
            # test daemon's dir under it, and the top of "/" and of the
            # daemon's cwd.
            seen = []
            for dirpath, dirs, files in os.walk(self.d.state):
                seen += files + dirs
            seen += os.listdir("/tmp") + os.listdir("/") + os.listdir(os.getcwd())
            for n in os.listdir("/tmp"):
                if n.startswith("sbx-test") and os.path.isdir(os.path.join("/tmp", n)):
                    for dirpath, dirs, files in os.walk(os.path.join("/tmp", n)):
                        seen += files + dirs
            return seen
        self.assertEqual([n for n in host_names() if n.startswith(name)], [])
        landed = sh_ok(self, self.sid, "find / -xdev -name '%s*' 2>/dev/null; "
                                       "find /home/user /tmp -name '%s*'" % (name, name))
        self.assertTrue(landed.strip(), landed)
        for path in landed.split():
            self.assertTrue(path.startswith(("/home/user/", "/tmp/")), path)


class UploadsAndMemory(DaemonTest):
    """The disk is a tmpfs whose pages count against the sandbox's memory
    limit, also when the files API writes them: uploads and moves are
    copied by a helper that the sandbox's init forks, so the pages are
    charged to the sandbox's memory cgroup, not the daemon's. Otherwise a
    tenant could park host RAM outside every limit."""

    def test_uploads_count_against_memory(self):
        sid = self.d.create(memory="256M", disk="200M")
        before = self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid).json()["memory_bytes"]
        size = 96 << 20
        r = put_in_one_write(self.d, "/v1/sandboxes/%s/files?path=/home/user/big" % sid,
                             b"x" * size)
        self.assertEqual(r.status, 201, r.status)
        m = self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid).json()
        self.assertGreaterEqual(m["memory_bytes"] - before, size, m)
        # A move between /tmp and /home/user (a copy) is charged the same way.
        r = self.d.api("POST", "/v1/sandboxes/%s/files/move" % sid,
                       {"from": "/home/user/big", "to": "/tmp/big"})
        self.assertEqual(r.status, 200, r)
        m = self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid).json()
        self.assertGreaterEqual(m["memory_bytes"] - before, size, m)

    def test_upload_beyond_memory_is_refused(self):
        # 32M of memory: the disk holds at most 16M, and the upload is
        # refused (413) without leaving anything behind.
        from sbx_helpers import raw_unix
        sid = self.d.create(memory="32M", disk="256M")
        body = b"x" * (24 << 20)
        status, _, _ = raw_unix(self.d, b"PUT /v1/sandboxes/%s/files?path=/home/user/big HTTP/1.1\r\n"
                                b"Host: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                                % (sid.encode(), len(body)), body)
        self.assertEqual(status, 413)
        self.assertEqual(self.d.sh(sid, "ls -A /home/user")["stdout"], "")

    def test_sandbox_writes_count_against_memory(self):
        # The control: the same bytes written by the sandbox itself stop at
        # the disk's cap (memory - 16M), with ENOSPC or SIGXFSZ.
        sid = self.d.create(memory="32M", disk="256M")
        res = self.d.exec(sid, argv=["dd", "if=/dev/zero", "of=/home/user/big", "bs=1M",
                                     "count=96"])
        self.assertFalse(res["oom_killed"], res)
        self.assertTrue(res["signal"] == "SIGXFSZ" or "No space left" in res["stderr"], res)
        self.assertEqual(self.d.sh(sid, "echo alive")["stdout"], "alive\n")


class TenantsApart(DaemonTest):
    """Invariant 8 and the API's tenant rule: another tenant's sandbox is 404
    on every route, exactly like an unknown id."""

    listen = True

    def test_foreign_sandbox_is_404(self):
        key_a = self.d.new_key("tenant-a")
        key_b = self.d.new_key("tenant-b")
        r = self.d.tcp("POST", "/v1/sandboxes", {}, key=key_a)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        self.d.upload(sid, "/home/user/a.txt", b"tenant a data")
        base = "/v1/sandboxes/" + sid
        routes = [
            ("GET", base, None),
            ("GET", base + "/files?path=/home/user/a.txt", None),
            ("GET", base + "/files/stat?path=/home/user/a.txt", None),
            ("GET", base + "/files/list?path=/home/user", None),
            ("PUT", base + "/files?path=/home/user/b.txt", b"from b"),
            ("POST", base + "/files/mkdir", {"path": "/home/user/bdir"}),
            ("POST", base + "/files/move", {"from": "/home/user/a.txt", "to": "/home/user/c"}),
            ("DELETE", base + "/files?path=/home/user/a.txt", None),
            ("POST", base + "/exec", {"cmd": "cat /home/user/a.txt"}),
            ("POST", base + "/processes", {"cmd": "sleep 1"}),
            ("GET", base + "/processes", None),
            ("GET", base + "/metrics", None),
            ("POST", base + "/timeout", {"timeout": 1}),
            ("DELETE", base, None),
        ]
        unknown = "/v1/sandboxes/" + "z" * 20
        for method, path, body in routes:
            raw = isinstance(body, bytes)
            r = self.d.tcp(method, path, body, key=key_b, raw=raw)
            self.assertError(r, 404, "not_found")
            self.assertNotIn(b"tenant a data", r.body)
            # Indistinguishable from an unknown id (same status and kind).
            r2 = self.d.tcp(method, path.replace(base, unknown), body, key=key_b, raw=raw)
            self.assertEqual((r2.status, r2.json()["error"]), (404, "not_found"))
            # No key at all: 401.
            r3 = self.d.tcp(method, path, body, raw=raw)
            self.assertError(r3, 401, "unauthorized")
        # B's listing does not show it; A still owns it, untouched.
        r = self.d.tcp("GET", "/v1/sandboxes", key=key_b)
        self.assertEqual(r.json()["sandboxes"], [])
        r = self.d.tcp("GET", base + "/files?path=/home/user/a.txt", key=key_a)
        self.assertEqual((r.status, r.body), (200, b"tenant a data"))
        r = self.d.tcp("GET", base + "/files/list?path=/home/user", key=key_a)
        self.assertEqual([e["name"] for e in r.json()["entries"]], ["a.txt"])
        self.assertEqual(self.d.tcp("GET", base, key=key_a).json()["state"], "running")

    def test_sandbox_cannot_reach_another_through_proc_or_files(self):
        key_a = self.d.new_key("tenant-a")
        key_b = self.d.new_key("tenant-b")
        a = self.d.tcp("POST", "/v1/sandboxes", {}, key=key_a).json()["id"]
        b = self.d.tcp("POST", "/v1/sandboxes", {}, key=key_b).json()["id"]
        marker = canary_name()
        self.d.upload(a, "/home/user/" + marker, b"a's file")
        self.d.api("POST", "/v1/sandboxes/%s/processes" % a, {"cmd": "cd /home/user && exec sleep 1000"})
        # From inside B: nothing of A in /proc, nor anywhere on the disk.
        out = py(self, b, "import os\nhits=[]\n"
                          "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
                          " try: hits.append(os.readlink('/proc/%s/cwd' % pid))\n"
                          " except OSError: pass\n"
                          "print(sorted(set(hits)))")
        self.assertEqual(out, "['/home/user']\n")  # B's own processes only
        res = self.d.sh(b, "find / -xdev -name '%s' 2>/dev/null; ls /home/user" % marker)
        self.assertEqual(res["stdout"], "")


if __name__ == "__main__":
    unittest.main()
