"""The files API on a VM sandbox (docs/vm.md, Files): every route answers
as for a namespace sandbox, with the same JSON, status codes and messages.

One daemon whose default engine is the VM (so that E2B's create, which
names no engine, boots one) and one VM for the module; the namespace
sandbox beside it gets the same tree, and every answer is compared.
"""
import http.client
import json
import time
from urllib.parse import quote

from harness import DaemonTest

ENVD = "49983"

# The same tree in both: plain file, directory, symlink, a root-owned
# directory, a file only root reads; names with a newline and a byte that
# is not UTF-8; a name of 255 bytes.
SETUP = r"""
set -e
cd /home/user
mkdir -p t/sub/deeper
printf hello > t/a.txt
chmod 640 t/a.txt
printf 12345678 > t/sub/b.bin
: > t/sub/deeper/c
ln -s a.txt t/link
ln -s /proc/1/root t/p1
ln -s /nowhere t/dangling
printf x > "t/new
line"
printf x > "$(printf 't/bad\377name')"
printf x > t/$(printf 'n%.0s' $(seq 1 255))
"""
SETUP_ROOT = r"""
set -e
mkdir -p /tmp/rootdir/inner
printf s > /tmp/rootdir/secret
chmod 600 /tmp/rootdir/secret
chmod 755 /tmp/rootdir
"""


def without_times(v):
    if isinstance(v, dict):
        return {k: without_times(x) for k, x in v.items() if k != "mtime"}
    if isinstance(v, list):
        return [without_times(x) for x in v]
    return v


class VMFiles(DaemonTest):
    pool = 0
    listen = True
    extra_args = ("--domain", "sbx.test", "--isolation", "vm")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.key = cls.d.new_key("vmfiles")
        # The VM, through E2B (the daemon's default engine).
        st, body = cls.request_cls("POST", "/v2/sandboxes", json.dumps(
            {"templateID": "base", "timeout": 600}),
            {"X-API-Key": cls.key, "Content-Type": "application/json"})
        assert st == 201, body
        cls.e2b = json.loads(body)
        cls.vm = cls.e2b["sandboxID"]
        info = cls.d.api("GET", "/v1/sandboxes/%s" % cls.vm).json()
        assert info["isolation"] == "vm", info
        cls.ns = cls.d.create(isolation="namespace", timeout="10m")
        for sid in (cls.vm, cls.ns):
            r = cls.d.sh(sid, SETUP)
            assert r["exit_code"] == 0, r
            r = cls.d.sh(sid, SETUP_ROOT, user="root")
            assert r["exit_code"] == 0, r

    @classmethod
    def request_cls(cls, method, path, body=None, headers=None):
        host, port = cls.d.listen.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=120)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def tearDown(self):
        pass  # both sandboxes live for the module

    # ---- helpers --------------------------------------------------------

    def call(self, sid, method, route, query=None, body=None, raw=False):
        path = "/v1/sandboxes/%s/%s" % (sid, route)
        if query:
            path += "?" + "&".join("%s=%s" % (k, quote(v, safe="/")) for k, v in query.items())
        return self.d.api(method, path, body, raw=raw)

    def refused_both(self, method, route, query=None, body=None, raw=False):
        """The request refused (403) on both sandboxes: their messages."""
        rv = self.call(self.vm, method, route, query, body, raw)
        rn = self.call(self.ns, method, route, query, body, raw)
        self.assertEqual((rv.status, rn.status), (403, 403), (route, query, rv, rn))
        return rv.json()["message"], rn.json()["message"]

    def same(self, method, route, query=None, body=None, raw=False, status=None):
        """The request on both sandboxes: same status, same JSON (mtimes
        aside). Returns the VM's answer."""
        rv = self.call(self.vm, method, route, query, body, raw)
        rn = self.call(self.ns, method, route, query, body, raw)
        self.assertEqual(rv.status, rn.status, (route, query, body, rv, rn))
        if status is not None:
            self.assertEqual(rv.status, status, (route, query, rv))
        if rv.body or rn.body:
            if rv.status == 200 and route == "files" and method == "GET":
                self.assertEqual(rv.body, rn.body)
            else:
                self.assertEqual(without_times(rv.json()), without_times(rn.json()),
                                 (route, query, body))
        return rv

    def refused(self, method, route, query=None, body=None):
        """A path through /proc/1/root (a magic link): both refuse it. The
        namespace engine's parent may follow /proc/1 and stops at the
        magic link (400, ELOOP); in a guest, the user may not look into
        the agent's /proc/1 at all (403, EACCES)."""
        for sid in (self.vm, self.ns):
            r = self.call(sid, method, route, query, body)
            self.assertIn(r.status, (400, 403), (sid, route, query, body, r))
            self.assertIn(r.json()["error"], ("invalid_argument", "forbidden"))

    def both_sh(self, cmd, **kw):
        out = []
        for sid in (self.vm, self.ns):
            out.append(self.d.sh(sid, cmd, **kw))
        return out

    def envd(self, method, path, body=None, headers=None):
        h = {"E2b-Sandbox-Id": self.vm, "E2b-Sandbox-Port": ENVD,
             "X-Access-Token": self.e2b["envdAccessToken"]}
        h.update(headers or {})
        return self.request_cls(method, path, body, h)

    def rpc(self, name, msg):
        st, body = self.envd("POST", "/filesystem.Filesystem/" + name, json.dumps(msg).encode(),
                             {"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
        return st, json.loads(body) if body else None

    # ---- the routes, compared -------------------------------------------

    def test_stat(self):
        for p in ("/home/user/t/a.txt", "/home/user/t", "/home/user/t/", "t/link",
                  "/home/user/t/dangling", "/home/user/t/p1",
                  "/../../home/user/t/a.txt", "/home/user/t/new\nline",
                  "/home/user/t/" + "n" * 255):
            self.same("GET", "files/stat", {"path": p}, status=200)
        # /home is the root image's (ext4 in a VM, vm.md "The root
        # filesystem"): the same but for a directory's size.
        rv, rn = (without_times(self.call(sid, "GET", "files/stat",
                                          {"path": "/home/user/.."}).json())
                  for sid in (self.vm, self.ns))
        rv.pop("size"), rn.pop("size")
        self.assertEqual(rv, rn)
        r = self.call(self.vm, "GET", "files/stat", {"path": "/home/user/t/link"}).json()
        self.assertEqual((r["type"], r["target"], r["mode"], r["uid"]),
                         ("symlink", "a.txt", "0777", 1000))
        r = self.call(self.vm, "GET", "files/stat", {"path": "/home/user/t/a.txt"}).json()
        self.assertEqual({k: r[k] for k in ("name", "path", "type", "size", "mode", "uid", "gid")},
                         {"name": "a.txt", "path": "/home/user/t/a.txt", "type": "file",
                          "size": 5, "mode": "0640", "uid": 1000, "gid": 1000})
        # Errors: the namespace engine's status, code and words.
        for p in ("/home/user/nope", "/home/user/t/a.txt/x", "/home/user/t/dangling/x",
                  "/home/user/t/" + "n" * 256, "/" + "a/" * 2100, "/proc/1/environ",
                  "/tmp/rootdir/secret/x", "rel/nope"):
            self.same("GET", "files/stat", {"path": p})
        for p in ("/home/user/t/p1/etc", "/proc/1/root/etc"):
            self.refused("GET", "files/stat", {"path": p})
        # The operation's own /proc/self is a magic link too (the parent of
        # a namespace sandbox has no /proc/self there: 404).
        self.assertError(self.call(self.vm, "GET", "files/stat",
                                   {"path": "/proc/self/root/etc"}), 400)
        # "/" is each engine's own root: the guest's is its image.
        r = self.call(self.vm, "GET", "files/stat", {"path": "/"}).json()
        self.assertEqual((r["name"], r["path"], r["type"]), ("/", "/", "dir"))
        self.assertError(self.call(self.vm, "GET", "files/stat", {"path": "/home/user/nope"}), 404)
        self.assertError(self.call(self.vm, "GET", "files/stat", {"path": "/proc/1/environ"}), 403)
        # The guest has a sysfs (read-only), refused like procfs.
        self.assertIn("not accessible", self.assertError(
            self.call(self.vm, "GET", "files/stat", {"path": "/sys/kernel"}), 403)["message"])
        self.same("GET", "files/stat", {}, status=400)

    def test_list(self):
        for depth in ("1", "2", "3"):
            r = self.same("GET", "files/list", {"path": "/home/user/t", "depth": depth},
                          status=200)
        names = sorted(e["path"] for e in r.json()["entries"])
        self.assertIn("/home/user/t/sub/deeper/c", names)
        self.assertIn("/home/user/t/new\nline", names)
        self.same("GET", "files/list", {"path": "/home/user/t/link"})
        self.refused("GET", "files/list", {"path": "/home/user/t/p1"})
        for p, depth in (("/home/user/nope", "1"), ("/home/user/t/a.txt", "1"),
                         ("/proc", "1"), ("/proc/1/fd", "1"),
                         ("/home/user/t", "0"), ("/home/user/t", "17"), ("/home/user/t", "x")):
            self.same("GET", "files/list", {"path": p, "depth": depth})
        # As root: /tmp/rootdir is readable by both, listed alike.
        r1 = self.call(self.vm, "GET", "files/list", {"path": "/tmp/rootdir", "user": "root"})
        r2 = self.call(self.ns, "GET", "files/list", {"path": "/tmp/rootdir", "user": "root"})
        self.assertEqual(without_times(r1.json()), without_times(r2.json()))

    def test_list_is_bounded(self):
        mk = ("mkdir /tmp/many && cd /tmp/many && i=0; while [ $i -lt 10005 ]; do "
              ": > f$i; i=$((i+1)); done")
        for r in self.both_sh(mk):
            self.assertEqual(r["exit_code"], 0, r)
        r = self.call(self.vm, "GET", "files/list", {"path": "/tmp/many"})
        self.assertEqual(r.status, 200)
        body = r.json()
        self.assertEqual((len(body["entries"]), body["truncated"]), (10000, True))
        rn = self.call(self.ns, "GET", "files/list", {"path": "/tmp/many"}).json()
        self.assertEqual((len(rn["entries"]), rn["truncated"]), (10000, True))
        self.both_sh("rm -rf /tmp/many")

    def test_mkdir_move_delete(self):
        self.same("POST", "files/mkdir", body={"path": "/home/user/m1"}, status=201)
        self.same("POST", "files/mkdir", body={"path": "/home/user/m1"}, status=409)
        self.same("POST", "files/mkdir", body={"path": "/home/user/m2/a/b"}, status=404)
        self.same("POST", "files/mkdir", body={"path": "/home/user/m2/a/b", "parents": True,
                                               "mode": "0700"}, status=201)
        self.same("POST", "files/mkdir", body={"path": "rel/d", "parents": True}, status=201)
        self.same("POST", "files/mkdir", body={"path": "/home/user/m2/.."}, status=400)
        self.same("POST", "files/mkdir", body={"path": "/home/user/t/a.txt/x"}, status=400)
        self.refused("POST", "files/mkdir", body={"path": "/home/user/t/p1/x"})
        self.same("POST", "files/mkdir", body={"path": "/tmp/rootdir/x"}, status=403)
        # "/": read-only in the VM; root's (writable root) in the namespace
        # sandbox, so `user` may not write it either
        self.assertEqual(self.refused_both("POST", "files/mkdir", body={"path": "/sbx-ro"}),
                         ("mkdir `/sbx-ro`: Read-only file system", "mkdir `/sbx-ro`: Permission denied"))
        self.same("POST", "files/mkdir", body={"path": "/proc/x"}, status=403)
        self.same("POST", "files/mkdir", body={"path": "/home/user/x", "mode": "4755"})
        self.same("POST", "files/mkdir", body={"nope": 1})
        # move: rename, across /tmp and /home/user, overwrite, errors.
        self.both_sh("printf one > /home/user/mv1; printf two > /home/user/mv2")
        self.same("POST", "files/move", body={"from": "/home/user/mv1", "to": "/home/user/mv3"},
                  status=200)
        self.same("POST", "files/move", body={"from": "/home/user/mv2", "to": "/home/user/mv3"},
                  status=409)
        self.same("POST", "files/move", body={"from": "/home/user/mv2", "to": "/home/user/mv3",
                                              "overwrite": True}, status=200)
        self.same("POST", "files/move", body={"from": "/home/user/mv3", "to": "/tmp/mv4"},
                  status=200)
        self.same("GET", "files", {"path": "/tmp/mv4"}, status=200)
        self.same("POST", "files/move", body={"from": "/home/user/m1", "to": "/tmp/m1"},
                  status=400)
        self.same("POST", "files/move", body={"from": "/tmp/rootdir/secret", "to": "/tmp/s"},
                  status=403)
        self.same("POST", "files/move", body={"from": "/home/user/nope", "to": "/tmp/s"},
                  status=404)
        self.same("POST", "files/move", body={"from": "/home/user/t", "to": "/home/user/t/sub/in"})
        self.refused("POST", "files/move", body={"from": "/home/user/t/p1/etc", "to": "/tmp/x"})
        # delete
        self.same("DELETE", "files", {"path": "/home/user/m2"}, status=409)
        self.same("DELETE", "files", {"path": "/home/user/m2", "recursive": "1"}, status=204)
        self.same("DELETE", "files", {"path": "/home/user/m2"}, status=404)
        self.same("DELETE", "files", {"path": "/tmp/rootdir/secret"}, status=403)
        self.same("DELETE", "files", {"path": "/tmp/rootdir", "recursive": "1"}, status=403)
        self.same("DELETE", "files", {"path": "/home/user/.."}, status=400)
        self.same("DELETE", "files", {"path": "/"}, status=400)
        self.same("DELETE", "files", {"path": "/proc/1/environ"})
        self.both_sh("ln -s /proc/1/root /home/user/p1del")
        self.same("DELETE", "files", {"path": "/home/user/p1del"}, status=204)  # the link only
        self.same("DELETE", "files", {"path": "/tmp/mv4"}, status=204)
        # Nothing the refusals touched changed, in the VM.
        r = self.d.sh(self.vm, "ls /tmp/rootdir; ls /proc/1 >/dev/null", user="root")
        self.assertEqual(r["stdout"], "inner\nsecret\n", r)
        self.assertEqual(self.d.sh(self.vm, "cat /home/user/t/a.txt")["stdout"], "hello")

    def test_upload_download_same_shape(self):
        self.same("PUT", "files", {"path": "/home/user/up.bin", "mode": "0600"}, b"\x00\xffdata",
                  raw=True, status=201)
        self.same("GET", "files", {"path": "/home/user/up.bin"}, status=200)
        self.same("PUT", "files", {"path": "rel-up"}, b"x", raw=True, status=201)
        self.same("PUT", "files", {"path": "/home/user/dir/"}, b"x", raw=True, status=400)
        self.same("GET", "files", {"path": "/home/user/t"}, status=400)
        self.same("GET", "files", {"path": "/home/user/t/nope"}, status=404)
        self.same("GET", "files", {"path": "/tmp/rootdir/secret"}, status=403)
        self.same("GET", "files", {"path": "/home/user/t/a.txt/x"}, status=400)
        self.same("GET", "files", {"path": "/" + "a/" * 2100}, status=400)
        self.same("GET", "files", {"path": "/proc/1/environ"})
        self.same("PUT", "files", {"path": "/home/user/nodir/x"}, b"x", raw=True, status=404)
        self.same("PUT", "files", {"path": "/home/user/d2/e/x", "parents": "1"}, b"x", raw=True,
                  status=201)
        self.same("PUT", "files", {"path": "/tmp/rootdir/x"}, b"x", raw=True, status=403)
        self.assertEqual(self.refused_both("PUT", "files", {"path": "/sbx-ro"}, b"x", raw=True),
                         ("create `/sbx-ro`: Read-only file system", "create `/sbx-ro`: Permission denied"))
        self.same("PUT", "files", {"path": "/home/user/t"}, b"x", raw=True, status=400)
        self.same("PUT", "files", {"path": "/" + "a/" * 2100 + "x"}, b"x", raw=True, status=400)
        # The agent's port to the host has no node in the guest's /dev (the
        # minimal, read-only one), directly or through a link; a device is
        # not a regular file (403); /proc is refused.
        r = self.d.sh(self.vm, "ls /dev | grep vport; ln -s /dev/vport0p1 /home/user/port; "
                               "ln -s /proc/1/environ /home/user/env")
        self.assertNotIn("vport", r["stdout"], r)
        for p in ("/dev/vport0p1", "/home/user/port"):
            self.assertError(self.call(self.vm, "GET", "files", {"path": p}), 404)
            self.assertError(self.call(self.vm, "GET", "files", {"path": p, "user": "root"}), 404)
        for p in ("/dev/null", "/home/user/env", "/proc/1/environ", "/proc/1/mem"):
            self.assertError(self.call(self.vm, "GET", "files", {"path": p}), 403)
        # An upload replaces a link by a file, as for a namespace sandbox;
        # /dev and procfs are out of reach, for root too.
        for p in ("/dev/vport0p1", "/proc/1/environ", "/proc/1/mem"):
            self.assertError(self.call(self.vm, "PUT", "files", {"path": p}, b"x", raw=True), 403)
            self.assertError(self.call(self.vm, "PUT", "files", {"path": p, "user": "root"}, b"x",
                                       raw=True), 403)
        for p in ("/proc/1/environ", "/proc/1/mem"):
            self.assertError(self.call(self.vm, "GET", "files", {"path": p, "user": "root"}), 403)
        # A few MiB through the guest and back.
        big = b"z" * (3 << 20)
        self.same("PUT", "files", {"path": "/tmp/big"}, big, raw=True, status=201)
        self.assertEqual(self.call(self.vm, "GET", "files", {"path": "/tmp/big"}).body, big)

    def test_exec_cannot_reach_file_operations(self):
        # The file operations' argv is only a name to an ordinary exec.
        r = self.d.exec(self.vm, argv=["sbx-fs", "stat", "/"])
        self.assertEqual(r["exit_code"], 127, r)
        self.assertEqual(r["stdout"], "")

    # ---- E2B ------------------------------------------------------------

    def test_e2b_filesystem_rpcs(self):
        st, body = self.rpc("Stat", {"path": "/home/user/t/a.txt"})
        self.assertEqual(st, 200, body)
        self.assertEqual((body["entry"]["name"], body["entry"]["type"], body["entry"]["size"]),
                         ("a.txt", "FILE_TYPE_FILE", "5"))
        st, body = self.rpc("Stat", {"path": "/home/user/nope"})
        self.assertEqual((st, body["code"]), (404, "not_found"), body)
        st, body = self.rpc("MakeDir", {"path": "/home/user/e2b/x"})
        self.assertEqual(st, 200, body)
        st, body = self.rpc("MakeDir", {"path": "/usr/evil"})
        self.assertEqual((st, body["code"]), (403, "permission_denied"), body)
        st, body = self.rpc("ListDir", {"path": "/home/user/e2b", "depth": 1})
        self.assertEqual(st, 200, body)
        self.assertEqual([e["name"] for e in body["entries"]], ["x"])
        st, body = self.rpc("Move", {"source": "/home/user/e2b/x", "destination": "/home/user/e2b/y"})
        self.assertEqual(st, 200, body)
        self.assertEqual(body["entry"]["path"], "/home/user/e2b/y")
        st, body = self.rpc("Remove", {"path": "/home/user/e2b"})
        self.assertEqual(st, 200, body)
        st, body = self.rpc("Stat", {"path": "/home/user/e2b"})
        self.assertEqual(st, 404, body)
        for p in ("/../../../etc/shadow", "../../../../etc/shadow"):
            st, body = self.rpc("Stat", {"path": p})
            self.assertEqual((st, body["code"]), (404, "not_found"), body)

    def test_e2b_polled_watcher(self):
        # E2B's polled watchers on a VM (its watches: test_vm_watch.py).
        r = self.d.sh(self.vm, "mkdir -p /tmp/pw")
        self.assertEqual(r["exit_code"], 0, r)
        st, body = self.rpc("CreateWatcher", {"path": "/tmp/pw"})
        self.assertEqual(st, 200, body)
        wid = body["watcherId"]
        r = self.d.sh(self.vm, "touch /tmp/pw/f.txt")
        self.assertEqual(r["exit_code"], 0, r)
        events = []
        deadline = time.monotonic() + 30
        while "f.txt" not in [e["name"] for e in events] and time.monotonic() < deadline:
            st, body = self.rpc("GetWatcherEvents", {"watcherId": wid})
            self.assertEqual(st, 200, body)
            events += body["events"]
            time.sleep(0.05)
        self.assertIn("f.txt", [e["name"] for e in events if e["type"] == "EVENT_TYPE_CREATE"])
        st, body = self.rpc("RemoveWatcher", {"watcherId": wid})
        self.assertEqual(st, 200, body)
        st, body = self.rpc("CreateWatcher", {"path": "/nope"})
        self.assertEqual((st, body["code"]), (404, "not_found"), body)

    def test_e2b_files_get_post(self):
        boundary = "XyZ"
        body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/e.txt\""
                b"\r\nContent-Type: application/octet-stream\r\n\r\nhi e2b\r\n--XyZ--\r\n")
        st, out = self.envd("POST", "/files", body,
                            {"Content-Type": "multipart/form-data; boundary=" + boundary})
        self.assertEqual(st, 200, out)
        self.assertEqual(json.loads(out), [{"path": "/tmp/e.txt", "name": "e.txt", "type": "file"}])
        st, out = self.envd("GET", "/files?path=/tmp/e.txt")
        self.assertEqual((st, out), (200, b"hi e2b"))
        st, out = self.envd("GET", "/files?path=/nope")
        self.assertEqual(st, 404, out)
        self.assertEqual(self.d.sh(self.vm, "cat /tmp/e.txt")["stdout"], "hi e2b")

    def test_zz_nothing_left(self):
        procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % self.vm).json()["processes"]
        self.assertEqual(procs, [])
