"""Files API: upload, download, stat, list, mkdir, move, remove; who may
touch what; disk limits; path validation; paths never leave the sandbox."""
import hashlib
import os
import re

from harness import DaemonTest
from sbx_helpers import MIB, error_body_ok, q, raw_unix

STAT_KEYS = {"name", "path", "type", "size", "mode", "uid", "gid", "mtime"}
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


class FilesTest(DaemonTest):
    def url(self, sid, route="", **params):
        return "/v1/sandboxes/%s/files%s?%s" % (sid, route, q(**params))

    def get(self, sid, path, **params):
        return self.d.api("GET", self.url(sid, path=path, **params))

    def stat(self, sid, path, **params):
        return self.d.api("GET", self.url(sid, "/stat", path=path, **params))

    def names(self, sid, path, **params):
        r = self.d.api("GET", self.url(sid, "/list", path=path, **params))
        self.assertEqual(r.status, 200, r)
        return sorted(e["name"] for e in r.json()["entries"])

    def sh(self, sid, cmd, **fields):
        res = self.d.sh(sid, cmd, **fields)
        self.assertEqual(res["exit_code"], 0, res)
        return res["stdout"]


class UploadDownload(FilesTest):
    def test_roundtrip(self):
        sid = self.d.create()
        data = bytes(range(256)) * 3 + b"\r\n\x00end"
        r = self.d.upload(sid, "/home/user/a.bin", data)
        self.assertEqual(r.status, 201, r)
        st = r.json()
        self.assertEqual(set(st), STAT_KEYS)
        self.assertEqual((st["name"], st["path"], st["type"], st["size"], st["mode"]),
                         ("a.bin", "/home/user/a.bin", "file", len(data), "0644"))
        self.assertEqual((st["uid"], st["gid"]), (1000, 1000))
        self.assertRegex(st["mtime"], RFC3339)
        r = self.get(sid, "/home/user/a.bin")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("Content-Type"), "application/octet-stream")
        self.assertEqual(r.body, data)
        # The sandbox sees the same bytes and owner.
        self.assertEqual(self.sh(sid, "sha256sum < a.bin; stat -c '%u %g %a' a.bin"),
                         "%s  -\n1000 1000 644\n" % hashlib.sha256(data).hexdigest())
        # And what the sandbox writes comes back exactly.
        self.sh(sid, "printf 'made\\0inside' > /tmp/made")
        self.assertEqual(self.get(sid, "/tmp/made").body, b"made\0inside")
        # Empty files too.
        self.assertEqual(self.d.upload(sid, "/tmp/empty", b"").json()["size"], 0)
        self.assertEqual(self.get(sid, "/tmp/empty").body, b"")

    def test_large_file(self):
        sid = self.d.create()
        blob = os.urandom(8 * MIB + 7)
        r = self.d.upload(sid, "/tmp/big", blob)
        self.assertEqual((r.status, r.json()["size"]), (201, len(blob)))
        got = self.get(sid, "/tmp/big").body
        self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(blob).hexdigest())
        self.assertEqual(self.sh(sid, "sha256sum < /tmp/big").split()[0],
                         hashlib.sha256(blob).hexdigest())

    def test_mode_replace_parents(self):
        sid = self.d.create()
        r = self.d.upload(sid, "/home/user/run.sh", b"#!/bin/sh\necho ran $1\n", mode="0755")
        self.assertEqual(r.json()["mode"], "0755")
        self.assertEqual(self.sh(sid, "./run.sh x; stat -c %a run.sh"), "ran x\n755\n")
        r = self.d.upload(sid, "/home/user/secret", b"s", mode="600")
        self.assertEqual(r.json()["mode"], "0600")
        # Replacing: new content, new mode, never a mix.
        r = self.d.upload(sid, "/home/user/run.sh", b"v2", mode="0640")
        self.assertEqual((r.status, r.json()["size"], r.json()["mode"]), (201, 2, "0640"))
        self.assertEqual(self.get(sid, "/home/user/run.sh").body, b"v2")
        # Refused from the query alone, yet answered after the body (a
        # client still sending must see the answer, not a reset).
        head = ("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                % (self.url(sid, path="/home/user/late", mode="4755"), 512 * 1024)).encode()
        error_body_ok(self, raw_unix(self.d, head, b"x" * 512 * 1024, strict=True), 400,
                      "invalid_argument")
        # Bad modes: refused, nothing written.
        for mode in ("4755", "2755", "1777", "0888", "abc", "", "-1", "07777"):
            with self.subTest(mode=mode):
                r = self.d.upload(sid, "/home/user/badmode", b"x", mode=mode)
                self.assertError(r, 400, "invalid_argument")
        self.assertEqual(self.get(sid, "/home/user/run.sh").body, b"v2")
        # parents=1 creates the missing directories; without it: 404.
        self.assertError(self.d.upload(sid, "/home/user/x/y/z.txt", b"z"), 404, "not_found")
        r = self.d.upload(sid, "/home/user/x/y/z.txt", b"z", parents=1)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.stat(sid, "/home/user/x/y").json()["type"], "dir")
        self.assertEqual(self.names(sid, "/home/user"), ["run.sh", "secret", "x"])
        # A directory is not replaced by a file.
        self.assertError(self.d.upload(sid, "/home/user/x", b"x"), 400, "invalid_argument")
        self.assertEqual(self.stat(sid, "/home/user/x").json()["type"], "dir")

    def test_relative_paths(self):
        sid = self.d.create()
        r = self.d.upload(sid, "rel.txt", b"rel")
        self.assertEqual(r.json()["path"], "/home/user/rel.txt")
        self.assertEqual(self.get(sid, "/home/user/rel.txt").body, b"rel")
        self.assertEqual(self.get(sid, "rel.txt").body, b"rel")
        self.assertEqual(self.stat(sid, "rel.txt").json()["path"], "/home/user/rel.txt")
        r = self.d.api("POST", "/v1/sandboxes/%s/files/mkdir" % sid, {"path": "sub/dir",
                                                                      "parents": True})
        self.assertEqual(r.json()["path"], "/home/user/sub/dir")
        r = self.d.api("POST", "/v1/sandboxes/%s/files/move" % sid, {"from": "rel.txt",
                                                                     "to": "sub/moved"})
        self.assertEqual(r.json()["path"], "/home/user/sub/moved")
        self.assertEqual(self.sh(sid, "cat /home/user/sub/moved"), "rel")
        self.assertEqual(self.d.api("DELETE", self.url(sid, path="sub", recursive=1)).status, 204)
        self.assertEqual(self.names(sid, "."), [])

    def test_path_validation(self):
        sid = self.d.create()
        for route, method in (("", "GET"), ("", "DELETE"), ("/stat", "GET"), ("/list", "GET")):
            with self.subTest(route=route, method=method, missing=True):
                r = self.d.api(method, "/v1/sandboxes/%s/files%s" % (sid, route))
                self.assertIn("path", self.assertError(r, 400, "invalid_argument")["message"])
                r = self.d.api(method, "/v1/sandboxes/%s/files%s?path=" % (sid, route))
                self.assertError(r, 400, "invalid_argument")
            with self.subTest(route=route, method=method, nul=True):
                r = self.d.api(method, "/v1/sandboxes/%s/files%s?path=/tmp/a%%00b" % (sid, route))
                self.assertError(r, 400, "invalid_argument")
            with self.subTest(route=route, method=method, long=True):
                r = self.d.api(method, self.url(sid, route, path="/tmp/" + "a" * 5000))
                self.assertError(r, 400, "invalid_argument")
        r = self.d.api("PUT", "/v1/sandboxes/%s/files" % sid, b"x", raw=True)
        self.assertError(r, 400, "invalid_argument")
        self.assertError(self.d.upload(sid, "/tmp/a\x00b", b"x"), 400, "invalid_argument")
        self.assertError(self.d.upload(sid, "/tmp/" + "d/" * 2100 + "f", b"x", parents=1), 400,
                         "invalid_argument")
        self.assertError(self.d.upload(sid, "/", b"x"), 400, "invalid_argument")
        self.assertError(self.d.upload(sid, "/tmp/..", b"x"), 400, "invalid_argument")
        for body in ({}, {"path": ""}, {"path": "/tmp/a\x00b"}, {"path": "/tmp/" + "a" * 5000},
                     {"path": 1}, {"path": "/tmp/m", "mode": 755}, {"path": "/tmp/m", "mode": "9"},
                     {"path": "/tmp/m", "parents": "yes"}, {"path": "/tmp/m", "extra": 1}):
            with self.subTest(mkdir=str(body)[:50]):
                r = self.d.api("POST", "/v1/sandboxes/%s/files/mkdir" % sid, body)
                self.assertError(r, 400, "invalid_argument")
        for body in ({}, {"from": "/tmp/a"}, {"to": "/tmp/b"}, {"from": "", "to": "/tmp/b"},
                     {"from": "/tmp/a", "to": 1}, {"from": "/tmp/a", "to": "/tmp/b",
                                                   "overwrite": "no"},
                     {"from": "/tmp/a", "to": "/tmp/b", "force": True}):
            with self.subTest(move=str(body)[:50]):
                r = self.d.api("POST", "/v1/sandboxes/%s/files/move" % sid, body)
                self.assertError(r, 400, "invalid_argument")
        for params in ({"depth": "0"}, {"depth": "17"}, {"depth": "x"}, {"depth": ""}):
            with self.subTest(list=params):
                r = self.d.api("GET", self.url(sid, "/list", path="/tmp", **params))
                self.assertError(r, 400, "invalid_argument")
        for params in ({"recursive": "maybe"}, {"user": "bob"}):
            with self.subTest(delete=params):
                self.d.upload(sid, "/tmp/keep", b"k")
                r = self.d.api("DELETE", self.url(sid, path="/tmp/keep", **params))
                self.assertError(r, 400, "invalid_argument")
        # Nothing of this changed the sandbox.
        self.assertEqual(self.names(sid, "/tmp"), ["keep"])
        self.assertEqual(self.names(sid, "/home/user"), [])


class StatListDirs(FilesTest):
    def test_stat(self):
        sid = self.d.create()
        self.sh(sid, "mkdir -p /home/user/d && echo hi > /home/user/d/f && "
                     "ln -s /etc/hostname /home/user/link && ln -s nowhere /home/user/dangling")
        st = self.stat(sid, "/home/user/d").json()
        self.assertEqual((st["type"], st["name"], st["uid"]), ("dir", "d", 1000))
        st = self.stat(sid, "/home/user/d/f").json()
        self.assertEqual((st["type"], st["size"], st["path"]), ("file", 3, "/home/user/d/f"))
        # A final symlink is reported, not followed.
        st = self.stat(sid, "/home/user/link").json()
        self.assertEqual((st["type"], st["target"]), ("symlink", "/etc/hostname"))
        st = self.stat(sid, "/home/user/dangling").json()
        self.assertEqual((st["type"], st["target"]), ("symlink", "nowhere"))
        self.assertEqual(self.stat(sid, "/").json()["type"], "dir")
        self.assertError(self.stat(sid, "/home/user/nope"), 404, "not_found")
        self.assertError(self.stat(sid, "/home/user/d/f/x"), 400, "invalid_argument")

    def test_list(self):
        sid = self.d.create()
        self.sh(sid, "mkdir -p top/a/deep top/b && echo 1 > top/f1 && echo 22 > top/a/f2 && "
                     "echo 333 > top/a/deep/f3 && ln -s f1 top/l")
        r = self.d.api("GET", self.url(sid, "/list", path="/home/user/top"))
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertFalse(body["truncated"])
        entries = {e["path"]: e for e in body["entries"]}
        self.assertEqual(sorted(entries), ["/home/user/top/a", "/home/user/top/b",
                                           "/home/user/top/f1", "/home/user/top/l"])
        for e in entries.values():
            self.assertTrue(STAT_KEYS <= set(e), e)
            self.assertRegex(e["mtime"], RFC3339)
        self.assertEqual((entries["/home/user/top/f1"]["type"], entries["/home/user/top/f1"]["size"]),
                         ("file", 2))
        self.assertEqual(entries["/home/user/top/a"]["type"], "dir")
        self.assertEqual((entries["/home/user/top/l"]["type"], entries["/home/user/top/l"]["target"]),
                         ("symlink", "f1"))
        r = self.d.api("GET", self.url(sid, "/list", path="/home/user/top", depth=2))
        paths = sorted(e["path"] for e in r.json()["entries"])
        self.assertEqual(paths, ["/home/user/top/a", "/home/user/top/a/deep", "/home/user/top/a/f2",
                                 "/home/user/top/b", "/home/user/top/f1", "/home/user/top/l"])
        r = self.d.api("GET", self.url(sid, "/list", path="/home/user/top", depth=16))
        self.assertIn("/home/user/top/a/deep/f3", [e["path"] for e in r.json()["entries"]])
        # Trailing slash, a file, a missing directory.
        self.assertEqual(self.names(sid, "/home/user/top/"), ["a", "b", "f1", "l"])
        self.assertError(self.d.api("GET", self.url(sid, "/list", path="/home/user/top/f1")), 400,
                         "invalid_argument")
        self.assertError(self.d.api("GET", self.url(sid, "/list", path="/nope")), 404, "not_found")
        # The root lists the sandbox's skeleton.
        self.assertTrue({"etc", "home", "tmp", "usr"} <= set(self.names(sid, "/")))

    def test_names_that_are_not_utf8(self):
        # The red team's find: such a name vanished from a listing (with
        # truncated false) and its stat answered 503. Now it is listed, shown
        # with U+FFFD, its exact bytes in name_base64 (and path_base64,
        # target_base64), and those bytes, %-escaped, name it again.
        import base64
        sid = self.d.create()
        self.sh(sid, "cd /home/user && mkdir w && printf x > \"w/bad$(printf '\\377')\" && "
                     "ln -s \"bad$(printf '\\376')\" w/link && echo ok > w/good")
        r = self.d.api("GET", self.url(sid, "/list", path="/home/user/w"))
        self.assertEqual(r.status, 200, r)
        entries = {e["name"]: e for e in r.json()["entries"]}
        self.assertFalse(r.json()["truncated"])
        self.assertEqual(sorted(entries), ["bad\ufffd", "good", "link"])
        bad = entries["bad\ufffd"]
        self.assertEqual(base64.b64decode(bad["name_base64"]), b"bad\xff")
        self.assertEqual(base64.b64decode(bad["path_base64"]), b"/home/user/w/bad\xff")
        self.assertEqual(bad["path"], "/home/user/w/bad\ufffd")
        self.assertNotIn("name_base64", entries["good"])
        self.assertEqual(base64.b64decode(entries["link"]["target_base64"]), b"bad\xfe")
        st = self.d.api("GET", "/v1/sandboxes/%s/files/stat?path=/home/user/w/bad%%FF" % sid)
        self.assertEqual(st.status, 200, st)
        self.assertEqual((st.json()["size"], st.json()["name_base64"]), (1, bad["name_base64"]))
        got = self.d.api("GET", "/v1/sandboxes/%s/files?path=/home/user/w/bad%%FF" % sid)
        self.assertEqual((got.status, got.body), (200, b"x"))

    def test_mkdir(self):
        sid = self.d.create()
        url = "/v1/sandboxes/%s/files/mkdir" % sid
        r = self.d.api("POST", url, {"path": "/tmp/m"})
        self.assertEqual(r.status, 201, r)
        st = r.json()
        self.assertEqual((st["type"], st["mode"], st["uid"], st["path"]), ("dir", "0755", 1000,
                                                                          "/tmp/m"))
        self.assertError(self.d.api("POST", url, {"path": "/tmp/m"}), 409, "conflict")
        self.assertError(self.d.api("POST", url, {"path": "/tmp/p/q"}), 404, "not_found")
        self.assertError(self.d.api("POST", url, {"path": "/tmp/p/q", "parents": False}), 404,
                         "not_found")
        r = self.d.api("POST", url, {"path": "/tmp/p/q/r", "parents": True, "mode": "0700"})
        self.assertEqual((r.status, r.json()["mode"]), (201, "0700"))
        # Like mkdir -p: an existing directory is fine with parents.
        self.assertEqual(self.d.api("POST", url, {"path": "/tmp/p/q/r", "parents": True}).status,
                         201)
        self.assertEqual(self.sh(sid, "stat -c %a /tmp/p/q/r; test -d /tmp/p/q && echo ok"),
                         "700\nok\n")
        # A file in the way.
        self.d.upload(sid, "/tmp/file", b"x")
        self.assertError(self.d.api("POST", url, {"path": "/tmp/file"}), 409, "conflict")
        self.assertEqual(self.get(sid, "/tmp/file").body, b"x")


class MoveRemove(FilesTest):
    def move(self, sid, **body):
        return self.d.api("POST", "/v1/sandboxes/%s/files/move" % sid, body)

    def test_move(self):
        sid = self.d.create()
        self.d.upload(sid, "/tmp/a", b"A")
        self.d.upload(sid, "/tmp/b", b"B")
        # overwrite false (the default): 409 and both untouched.
        self.assertError(self.move(sid, **{"from": "/tmp/a", "to": "/tmp/b"}), 409, "conflict")
        self.assertError(self.move(sid, **{"from": "/tmp/a", "to": "/tmp/b", "overwrite": False}),
                         409, "conflict")
        self.assertEqual((self.get(sid, "/tmp/a").body, self.get(sid, "/tmp/b").body), (b"A", b"B"))
        r = self.move(sid, **{"from": "/tmp/a", "to": "/tmp/b", "overwrite": True})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["path"], r.json()["size"]), ("/tmp/b", 1))
        self.assertEqual(self.get(sid, "/tmp/b").body, b"A")
        self.assertError(self.stat(sid, "/tmp/a"), 404, "not_found")
        # Plain rename to a new name, directories included.
        self.sh(sid, "mkdir /tmp/d && touch /tmp/d/inner")
        r = self.move(sid, **{"from": "/tmp/d", "to": "/tmp/e"})
        self.assertEqual((r.status, r.json()["type"]), (200, "dir"))
        self.assertEqual(self.names(sid, "/tmp/e"), ["inner"])
        # Missing source, missing target directory.
        self.assertError(self.move(sid, **{"from": "/tmp/nope", "to": "/tmp/x"}), 404, "not_found")
        self.assertError(self.move(sid, **{"from": "/tmp/b", "to": "/tmp/no/x"}), 404, "not_found")
        self.assertEqual(self.names(sid, "/tmp"), ["b", "e"])

    def test_move_between_tmp_and_home(self):
        sid = self.d.create()
        blob = os.urandom(300000)
        self.d.upload(sid, "/tmp/f", blob, mode="0750")
        r = self.move(sid, **{"from": "/tmp/f", "to": "/home/user/f"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["mode"], r.json()["size"]), ("0750", len(blob)))
        self.assertEqual(self.get(sid, "/home/user/f").body, blob)
        self.assertError(self.stat(sid, "/tmp/f"), 404, "not_found")
        # Back, onto an existing file: 409 unless overwrite.
        self.d.upload(sid, "/tmp/f", b"old")
        self.assertError(self.move(sid, **{"from": "/home/user/f", "to": "/tmp/f"}), 409,
                         "conflict")
        self.assertEqual(self.get(sid, "/tmp/f").body, b"old")
        self.assertEqual(self.get(sid, "/home/user/f").body, blob)
        r = self.move(sid, **{"from": "/home/user/f", "to": "/tmp/f", "overwrite": True})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.get(sid, "/tmp/f").body, blob)
        self.assertEqual(self.names(sid, "/home/user"), [])
        # No temporary file is left on either side.
        self.assertEqual(self.sh(sid, "ls -A /tmp /home/user"), "/home/user:\n\n/tmp:\nf\n")

    def test_remove(self):
        sid = self.d.create()
        self.sh(sid, "mkdir -p /tmp/empty /tmp/full/sub && touch /tmp/file /tmp/full/sub/x "
                     "/tmp/full/y && ln -s /etc /tmp/link")
        url = lambda path, **kw: self.url(sid, path=path, **kw)
        r = self.d.api("DELETE", url("/tmp/file"))
        self.assertEqual((r.status, r.body), (204, b""))
        self.assertError(self.stat(sid, "/tmp/file"), 404, "not_found")
        self.assertEqual(self.d.api("DELETE", url("/tmp/empty")).status, 204)
        self.assertError(self.d.api("DELETE", url("/tmp/full")), 409, "conflict")
        self.assertEqual(self.names(sid, "/tmp/full"), ["sub", "y"])
        self.assertEqual(self.d.api("DELETE", url("/tmp/full", recursive=1)).status, 204)
        # A symlink is removed, never followed.
        self.assertEqual(self.d.api("DELETE", url("/tmp/link", recursive=1)).status, 204)
        self.assertEqual(self.sh(sid, "test -f /etc/passwd && echo intact"), "intact\n")
        self.assertEqual(self.names(sid, "/tmp"), [])
        self.assertError(self.d.api("DELETE", url("/tmp/nope")), 404, "not_found")
        self.assertError(self.d.api("DELETE", url("/")), 400, "invalid_argument")


class Permissions(FilesTest):
    def test_user_and_root(self):
        sid = self.d.create()
        for user in ({}, {"user": "root"}):
            with self.subTest(**user):
                # The host's directories are read-only, whoever asks.
                self.assertError(self.d.upload(sid, "/usr/bin/x", b"x", **user), 403, "forbidden")
        # The skeleton is root's: the user may not change it ...
        self.assertError(self.d.upload(sid, "/etc/x", b"x"), 403, "forbidden")
        self.assertError(self.d.upload(sid, "/root/x", b"x"), 403, "forbidden")
        self.assertError(self.d.api("DELETE", self.url(sid, path="/etc/passwd")), 403, "forbidden")
        r = self.d.api("POST", "/v1/sandboxes/%s/files/mkdir" % sid, {"path": "/etc/newdir"})
        self.assertError(r, 403, "forbidden")
        self.assertEqual(self.sh(sid, "test -e /etc/x || test -e /etc/newdir || echo none"),
                         "none\n")
        # ... and root inside may (E2B's writable root).
        self.assertEqual(self.d.upload(sid, "/etc/x", b"x", user="root").status, 201)
        r = self.d.api("POST", "/v1/sandboxes/%s/files/mkdir?user=root" % sid, {"path": "/etc/newdir"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.sh(sid, "stat -c '%n %u' /etc/x /etc/newdir"), "/etc/x 0\n/etc/newdir 0\n")
        # /root is root's: the user cannot even look.
        self.assertError(self.d.api("GET", self.url(sid, "/list", path="/root")), 403, "forbidden")
        self.assertEqual(self.d.api("GET", self.url(sid, "/list", path="/root", user="root")).status,
                         200)
        # A root-only directory in the writable part.
        self.sh(sid, "mkdir /tmp/private && chmod 700 /tmp/private && echo s > /tmp/private/s",
                user="root")
        self.assertError(self.d.upload(sid, "/tmp/private/x", b"x"), 403, "forbidden")
        self.assertError(self.get(sid, "/tmp/private/s"), 403, "forbidden")
        self.assertError(self.d.api("DELETE", self.url(sid, path="/tmp/private/s")), 403,
                         "forbidden")
        r = self.d.upload(sid, "/tmp/private/x", b"x", user="root")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.get(sid, "/tmp/private/s", user="root").body, b"s\n")
        self.assertError(self.get(sid, "/tmp/private/s", user="nobody"), 400, "invalid_argument")

    def test_ownership(self):
        sid = self.d.create()
        self.assertEqual(self.d.upload(sid, "/tmp/u", b"u").json()["uid"], 1000)
        st = self.d.upload(sid, "/tmp/r", b"r", user="root").json()
        self.assertEqual((st["uid"], st["gid"]), (0, 0))
        r = self.d.api("POST", "/v1/sandboxes/%s/files/mkdir?user=root" % sid, {"path": "/tmp/rd"})
        self.assertEqual(r.json()["uid"], 0)
        self.assertEqual(self.sh(sid, "stat -c '%n %u %g' /tmp/u /tmp/r /tmp/rd"),
                         "/tmp/u 1000 1000\n/tmp/r 0 0\n/tmp/rd 0 0\n")
        # The user cannot replace root's file in the sticky /tmp ...
        self.assertError(self.d.api("DELETE", self.url(sid, path="/tmp/r")), 403, "forbidden")
        # ... and a sandbox made for root acts as root by default.
        rsid = self.d.create(user="root")
        self.assertEqual(self.d.upload(rsid, "/tmp/x", b"x").json()["uid"], 0)
        self.assertEqual(self.d.upload(rsid, "/tmp/y", b"y", user="user").json()["uid"], 1000)
        # the skeleton is root's to write (writable root), and so root's file
        self.assertEqual(self.d.upload(rsid, "/root/x", b"x").json()["uid"], 0)

    def test_special_files_refused(self):
        sid = self.d.create()
        self.sh(sid, "mkfifo /tmp/fifo")
        for path in ("/proc/cpuinfo", "/proc/1/environ", "/dev/null", "/dev/zero", "/dev/urandom",
                     "/tmp/fifo"):
            with self.subTest(path=path):
                self.assertError(self.get(sid, path), 403, "forbidden")
        self.assertError(self.d.api("GET", self.url(sid, "/list", path="/proc")), 403, "forbidden")
        self.assertError(self.d.api("GET", self.url(sid, "/list", path="/proc/1")), 403,
                         "forbidden")
        r = self.get(sid, "/proc/self/status")
        self.assertIn(r.status, (403, 404), r)  # /proc/self names no process of ours
        self.assertError(self.get(sid, "/tmp"), 400, "invalid_argument")  # a directory

    def test_paths_stay_inside(self):
        sid = self.d.create()
        with open("/etc/hostname", "rb") as f:
            host_hostname = f.read()
        self.assertNotEqual(host_hostname, b"sandbox\n")
        self.sh(sid, "ln -s / /home/user/root && ln -s /etc/hostname /home/user/h && "
                     "ln -s ../../../../../../etc /home/user/up")
        for path in ("/../../../etc/hostname", "/home/user/../../etc/hostname",
                     "/home/user/root/etc/hostname", "/home/user/h", "/home/user/up/hostname",
                     "../../../etc/hostname"):
            with self.subTest(path=path):
                r = self.get(sid, path)
                self.assertEqual((r.status, r.body), (200, b"sandbox\n"))
        # Writing through a link lands inside too (and /etc is read-only there).
        self.assertError(self.d.upload(sid, "/home/user/up/evil", b"x"), 403, "forbidden")
        self.assertFalse(os.path.exists("/etc/evil"))
        self.sh(sid, "ln -s /tmp /home/user/t")
        r = self.d.upload(sid, "/home/user/t/through", b"x")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.sh(sid, "cat /tmp/through"), "x")


class DiskLimits(FilesTest):
    def test_disk_full_leaves_nothing(self):
        sid = self.d.create(disk="4M")
        first = os.urandom(3 * MIB)
        self.assertEqual(self.d.upload(sid, "/home/user/first", first).status, 201)
        # Fits the disk, not what is left of it: fails while streaming.
        for path in ("/home/user/second", "/tmp/second", "/home/user/first"):
            with self.subTest(path=path):
                r = self.d.upload(sid, path, os.urandom(3 * MIB))
                self.assertError(r, 413, "too_large")
        self.assertEqual(self.sh(sid, "ls -A /home/user /tmp /dev/shm"),
                         "/dev/shm:\n\n/home/user:\nfirst\n\n/tmp:\n")
        self.assertEqual(self.names(sid, "/home/user"), ["first"])  # no hidden temp file
        self.assertEqual(self.names(sid, "/tmp"), [])
        self.assertEqual(self.get(sid, "/home/user/first").body, first)  # intact
        # Larger than the whole disk: refused before any byte is written.
        big = 5 * MIB
        head = ("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                % (self.url(sid, path="/tmp/huge"), big)).encode()
        error_body_ok(self, raw_unix(self.d, head, b"\0" * big), 413, "too_large")
        self.assertEqual(self.sh(sid, "ls -A /tmp"), "")
        # Once there is room again, uploads work.
        self.assertEqual(self.d.api("DELETE", self.url(sid, path="/home/user/first")).status, 204)
        self.assertEqual(self.d.upload(sid, "/tmp/second", os.urandom(3 * MIB)).status, 201)

    def test_copy_across_when_full(self):
        sid = self.d.create(disk="4M")
        self.assertEqual(self.d.upload(sid, "/tmp/f", os.urandom(3 * MIB)).status, 201)
        # Moving between /tmp and /home/user copies: no room for the copy.
        r = self.d.api("POST", "/v1/sandboxes/%s/files/move" % sid,
                       {"from": "/tmp/f", "to": "/home/user/f"})
        self.assertError(r, 413, "too_large")
        self.assertEqual(self.sh(sid, "ls -A /home/user /tmp"), "/home/user:\n\n/tmp:\nf\n")


if __name__ == "__main__":
    import unittest
    unittest.main()


class UploadsWhileOthersEnd(FilesTest):
    """The privileged parent's upload table: an upload being begun (its
    entry reserved, filled in without the lock) while another sandbox ends.
    Ending a sandbox dropped every entry naming its slot, and a reserved
    entry still named the slot of its previous upload: the begin's files
    were closed under it and the commit failed with `chmod: Bad file
    descriptor` (an E2B CI run under ASan), or worse, used a number that
    another open had taken meanwhile."""

    def test_uploads_race_sandbox_ends(self):
        import threading
        sid = self.d.create()
        stop = threading.Event()
        failures = []

        def churn():
            while not stop.is_set():
                other = self.d.create()
                for i in range(2):
                    r = self.d.upload(other, "/tmp/churn%d" % i, b"x" * 100)
                    if r.status != 201:
                        failures.append(("churn", r))
                self.d.kill(other)

        def uploads(n):
            for i in range(60):
                data = ("%d-%d-" % (n, i)).encode() * 50
                r = self.d.upload(sid, "/tmp/u%d-%d" % (n, i), data)
                if r.status != 201:
                    failures.append(("upload", r))
                elif self.get(sid, "/tmp/u%d-%d" % (n, i)).body != data:
                    failures.append(("content", n, i))

        workers = [threading.Thread(target=churn) for _ in range(2)]
        workers += [threading.Thread(target=uploads, args=(n,)) for n in range(3)]
        for t in workers:
            t.start()
        for t in workers[2:]:
            t.join()
        stop.set()
        for t in workers[:2]:
            t.join()
        self.assertEqual(failures, [])
