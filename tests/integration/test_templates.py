"""Templates (docs/templates.md): from a directory tar and from OCI image
archives built here from plain files (tarfile + hashlib, no registry);
whiteouts, config, layer sharing, read-only files, and hostile archives
that must fail with a clear error and leave nothing behind."""
import fcntl
import gzip
import hashlib
import io
import json
import os
import tarfile

from harness import DaemonTest
from sbx_helpers import q, raw_unix

BUSYBOX = "/bin/busybox"


def tar_bytes(entries, gz=False):
    """entries: (name, kind, payload, extra) with kind file|dir|symlink|hardlink|chr."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            name, kind = e[0], e[1]
            payload = e[2] if len(e) > 2 else b""
            extra = e[3] if len(e) > 3 else {}
            ti = tarfile.TarInfo(name)
            ti.mode = extra.get("mode", 0o755 if kind == "dir" else 0o644)
            ti.mtime = 1700000000
            if kind == "file":
                ti.size = len(payload)
                t.addfile(ti, io.BytesIO(payload))
                continue
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, payload
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, payload
            elif kind == "chr":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            t.addfile(ti)
    data = buf.getvalue()
    return gzip.compress(data) if gz else data


def userland():
    """A layer with busybox as /bin/sh, cat, ls, pwd, env, touch, id."""
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    ents = [("bin", "dir"), ("bin/busybox", "file", bb, {"mode": 0o755})]
    for a in ("sh", "cat", "ls", "pwd", "env", "touch", "id", "echo", "rm", "stat"):
        ents.append(("bin/" + a, "symlink", "busybox"))
    return ents


def sha(b):
    return hashlib.sha256(b).hexdigest()


def oci_archive(layers, config=None, docker=False, mangle=None):
    """An OCI image archive (or docker save's manifest.json form) of the
    given layer blobs. mangle(files) may change files before packing."""
    config = config or {}
    cfg = {"architecture": "amd64", "os": "linux", "config": config,
           "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(l) for l in layers]}}
    cfg_b = json.dumps(cfg).encode()
    files = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode()}
    for b in layers + [cfg_b]:
        files["blobs/sha256/" + sha(b)] = b
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                      "digest": "sha256:" + sha(cfg_b), "size": len(cfg_b)},
           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                       "digest": "sha256:" + sha(l), "size": len(l)} for l in layers]}
    man_b = json.dumps(man).encode()
    if docker:
        files["manifest.json"] = json.dumps([{
            "Config": "blobs/sha256/" + sha(cfg_b), "RepoTags": ["t:latest"],
            "Layers": ["blobs/sha256/" + sha(l) for l in layers]}]).encode()
    else:
        files["blobs/sha256/" + sha(man_b)] = man_b
        files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": "sha256:" + sha(man_b), "size": len(man_b)}]}).encode()
    if mangle:
        mangle(files)
    return tar_bytes([(k, "file", v) for k, v in sorted(files.items())])


class TemplatesTest(DaemonTest):
    pool = 1
    listen = True
    extra_args = ("--template-max-size", "64M", "--template-max-files", "2000")

    def build(self, name, body, fmt="oci"):
        return self.d.api("POST", "/v1/templates?" + q(name=name, format=fmt), body, raw=True,
                          timeout=300)

    def sh(self, sid, cmd, **kw):
        return self.d.exec(sid, argv=["/bin/sh", "-c", cmd], **kw)

    def store(self, *parts):
        return os.path.join(self.d.state, "templates", *parts)

    def layer_dirs(self):
        return sorted(os.listdir(self.store("layers")))

    def assert_clean(self):
        self.assertEqual(os.listdir(self.store("tmp")), [])

    def tearDown(self):
        super().tearDown()
        for t in self.d.api("GET", "/v1/templates").json()["templates"]:
            if not t["builtin"]:
                self.d.api("DELETE", "/v1/templates/" + t["name"])

    # ---- from a directory -------------------------------------------------

    def test_dir_template_runs_with_its_files(self):
        body = tar_bytes(userland() + [("srv", "dir"), ("srv/hello.txt", "file", b"hi there\n")])
        r = self.build("mydir", body, fmt="dir")
        self.assertEqual(r.status, 201, r)
        info = r.json()
        self.assertEqual(info["name"], "mydir")
        self.assertEqual(info["source"], "dir")
        self.assertEqual(len(info["layers"]), 1)
        sid = self.d.create(template="mydir")
        res = self.sh(sid, "cat /srv/hello.txt; cat /etc/hostname; id -u; ls /home")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(res["stdout"], "hi there\nsandbox\n1000\nuser\n")
        # the files API sees the same root
        r = self.d.api("GET", "/v1/sandboxes/%s/files?%s" % (sid, q(path="/srv/hello.txt")))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"hi there\n")
        # the template's files are read-only, the disk is writable
        res = self.sh(sid, "echo x > /srv/hello.txt; echo rc=$?; touch /home/user/ok && echo w")
        self.assertIn("Read-only file system", res["stderr"])
        self.assertIn("rc=1", res["stdout"])
        self.assertIn("w\n", res["stdout"])
        res = self.sh(sid, "touch /bin/new; rm /bin/busybox; echo $?", user="root")
        self.assertIn("Read-only file system", res["stderr"])
        self.assertEqual(res["stdout"], "1\n")
        self.d.kill(sid)
        # layers on the host: root's, no setuid, not writable by others
        lay = self.store("layers", info["layers"][0].split(":")[1])
        st = os.stat(os.path.join(lay, "bin", "busybox"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))
        self.assertEqual(st.st_mode & 0o7777, 0o755)
        self.assertEqual(os.stat(self.store("layers")).st_mode & 0o777, 0o700)

    def test_setuid_bits_are_stripped(self):
        body = tar_bytes(userland() + [("su", "file", b"#!/bin/sh\n", {"mode": 0o6755})])
        r = self.build("suid", body, fmt="dir")
        self.assertEqual(r.status, 201, r)
        lay = self.store("layers", r.json()["layers"][0].split(":")[1])
        self.assertEqual(os.stat(os.path.join(lay, "su")).st_mode & 0o7777, 0o755)

    # ---- from an OCI image archive ----------------------------------------

    def two_layer_image(self, docker=False, gz=False):
        l1 = tar_bytes(userland() + [
            ("data", "dir"), ("data/keep.txt", "file", b"keep\n"), ("data/gone.txt", "file", b"x"),
            ("opq", "dir"), ("opq/a.txt", "file", b"a"), ("opq/b.txt", "file", b"b")], gz=gz)
        l2 = tar_bytes([
            ("data", "dir"), ("data/.wh.gone.txt", "file", b""),
            ("opq", "dir"), ("opq/.wh..wh..opq", "file", b""), ("opq/c.txt", "file", b"c"),
            ("new.txt", "file", b"layer two\n")], gz=gz)
        cfg = {"Env": ["FOO=bar baz", "PATH=/bin"], "WorkingDir": "/data", "User": ""}
        return l1, l2, oci_archive([l1, l2], cfg, docker=docker)

    def check_two_layer(self, name):
        sid = self.d.create(template=name)
        res = self.sh(sid, "ls /data; echo --; ls /opq; echo --; cat /new.txt; echo \"$FOO\"; pwd")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(res["stdout"], "keep.txt\n--\nc.txt\n--\nlayer two\nbar baz\n/data\n")
        res = self.sh(sid, "stat /data/gone.txt", user="root")
        self.assertNotEqual(res["exit_code"], 0)
        self.d.kill(sid)

    def test_oci_two_layers_whiteouts_and_config(self):
        l1, l2, body = self.two_layer_image()
        r = self.build("oci2", body)
        self.assertEqual(r.status, 201, r)
        info = r.json()
        self.assertEqual(info["layers"], ["sha256:" + sha(l1), "sha256:" + sha(l2)])
        self.assertEqual(info["env"], {"FOO": "bar baz", "PATH": "/bin"})
        self.assertEqual(info["workdir"], "/data")
        self.check_two_layer("oci2")
        # inspect and list
        r = self.d.api("GET", "/v1/templates/oci2")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["layers"], info["layers"])
        names = [t["name"] for t in self.d.api("GET", "/v1/templates").json()["templates"]]
        self.assertIn("oci2", names)
        self.assertIn("base", names)

    def test_nested_index(self):
        layer = tar_bytes(userland() + [("n.txt", "file", b"nested\n")])

        def nest(files):
            inner = files["index.json"].replace(b'"schemaVersion": 2', b'"schemaVersion": 2', 1)
            files["blobs/sha256/" + sha(inner)] = inner
            files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": [{
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "digest": "sha256:" + sha(inner), "size": len(inner)}]}).encode()
        r = self.build("nested", oci_archive([layer], mangle=nest))
        self.assertEqual(r.status, 201, r)
        sid = self.d.create(template="nested")
        self.assertEqual(self.sh(sid, "cat /n.txt")["stdout"], "nested\n")

    def test_docker_save_form_gzip_layers(self):
        _, _, body = self.two_layer_image(docker=True, gz=True)
        r = self.build("dock", body)
        self.assertEqual(r.status, 201, r)
        self.check_two_layer("dock")

    def test_shared_layer_stored_once_and_sandboxes_share(self):
        base = tar_bytes(userland() + [("big", "file", os.urandom(4 * 1024 * 1024))])
        a = tar_bytes([("a.txt", "file", b"A")])
        b = tar_bytes([("b.txt", "file", b"B")])
        before = set(self.layer_dirs())
        self.assertEqual(self.build("sha", oci_archive([base, a])).status, 201)
        self.assertEqual(self.build("shb", oci_archive([base, b])).status, 201)
        added = set(self.layer_dirs()) - before
        self.assertEqual(added, {sha(base), sha(a), sha(b)})  # the base layer once
        du_before = dir_bytes(self.store("layers"))
        sids = [self.d.create(template="sha") for _ in range(5)]
        for sid in sids:
            res = self.sh(sid, "cat /a.txt; ls -l /big | wc -c >/dev/null; echo")
            self.assertEqual(res["stdout"], "A\n", res)
        self.assertEqual(dir_bytes(self.store("layers")), du_before)
        # in use: 409; the layers shared with shb stay after sha goes
        r = self.d.api("DELETE", "/v1/templates/sha")
        self.assertError(r, 409)
        for sid in sids:
            self.d.kill(sid)
        self.assertEqual(self.d.api("DELETE", "/v1/templates/sha").status, 204)
        self.assertEqual(set(self.layer_dirs()) - before, {sha(base), sha(b)})
        self.assertEqual(self.d.api("DELETE", "/v1/templates/shb").status, 204)
        self.assertEqual(set(self.layer_dirs()) - before, set())
        self.assert_clean()

    def test_unknown_template(self):
        r = self.d.api("POST", "/v1/sandboxes", {"template": "nope"})
        body = self.assertError(r, 404)
        self.assertIn("unknown template `nope`", body["message"])
        self.assertError(self.d.api("GET", "/v1/templates/nope"), 404)
        self.assertError(self.d.api("DELETE", "/v1/templates/nope"), 404)
        self.assertError(self.d.api("DELETE", "/v1/templates/base"), 403)

    def test_bad_names_and_duplicates(self):
        body = tar_bytes(userland())
        for bad in ("Upper", "../x", "base", "a" * 40, "-x"):
            r = self.build(bad, body, fmt="dir")
            self.assertError(r, 400)
        self.assertError(self.build("ok", body, fmt="bogus"), 400)
        self.assertEqual(self.build("dup", body, fmt="dir").status, 201)
        self.assertError(self.build("dup", body, fmt="dir"), 409)
        self.assert_clean()

    # ---- hostile archives ---------------------------------------------------

    def assert_refused(self, name, body, status, text, fmt="oci"):
        before = self.layer_dirs()
        r = self.build(name, body, fmt=fmt)
        err = self.assertError(r, status)
        self.assertIn(text, err["message"])
        self.assertEqual(self.layer_dirs(), before)
        self.assertFalse(os.path.exists(self.store("by-name", name)))
        self.assert_clean()
        self.assertError(self.d.api("GET", "/v1/templates/" + name), 404)

    def test_hostile_path_traversal(self):
        self.assert_refused("h1", oci_archive([tar_bytes([("../escape", "file", b"x")])]), 400,
                            "leaves the tree")
        self.assert_refused("h1", tar_bytes([("a/../../escape", "file", b"x")]), 400,
                            "leaves the tree", fmt="dir")
        self.assertFalse(os.path.exists(os.path.join(self.d.state, "templates", "escape")))

    def test_hostile_absolute_path(self):
        self.assert_refused("h2", oci_archive([tar_bytes([("/etc/evil", "file", b"x")])]), 400,
                            "absolute path")

    def test_hostile_symlink_write_through(self):
        layer = tar_bytes([("etc", "symlink", "/"), ("etc/passwd", "file", b"pwned")])
        self.assert_refused("h3", oci_archive([layer]), 400, "goes through a symlink")
        rel = tar_bytes([("up", "symlink", "../../../../.."), ("up/tmp/x", "file", b"pwned")])
        self.assert_refused("h3", oci_archive([rel]), 400, "goes through a symlink")
        with open("/etc/passwd", "rb") as f:
            self.assertNotIn(b"pwned", f.read())

    def test_hostile_hardlink_outside(self):
        self.assert_refused("h4", oci_archive([tar_bytes([("s", "hardlink", "/etc/shadow")])]),
                            400, "absolute path")
        self.assert_refused("h4", oci_archive([tar_bytes([("s", "hardlink", "../../shadow")])]),
                            400, "leaves the tree")

    def test_hostile_device_node(self):
        self.assert_refused("h5", oci_archive([tar_bytes([("mem", "chr")])]), 400, "device node")

    def test_hostile_bad_digest(self):
        def corrupt(files):
            for k in list(files):
                if k.startswith("blobs/") and files[k].startswith(b"bin"):
                    files[k] = files[k][:-1] + b"\x01"
        layer = tar_bytes([("bin", "dir")])
        self.assert_refused("h6", oci_archive([layer], mangle=corrupt), 400,
                            "does not match its digest")

    def test_hostile_bomb_and_oversized(self):
        # 100 MiB of zeros gzip to ~100 KiB; the limit is 64 MiB.
        zeros = io.BytesIO()
        with tarfile.open(fileobj=zeros, mode="w") as t:
            ti = tarfile.TarInfo("zeros")
            ti.size = 100 * 1024 * 1024
            t.addfile(ti, io.BytesIO(bytes(ti.size)))
        bomb = gzip.compress(zeros.getvalue(), compresslevel=9)
        self.assertLess(len(bomb), 1024 * 1024)
        self.assert_refused("h7", oci_archive([bomb]), 413, "larger than")
        # too many files
        many = tar_bytes([("f%d" % i, "file", b"") for i in range(2100)])
        self.assert_refused("h7", oci_archive([many]), 413, "more than 2000 files")
        # an upload over the limit: 413 before anything is built
        head = ("POST /v1/templates?name=h7&format=dir HTTP/1.1\r\nHost: x\r\n"
                "Content-Length: %d\r\n\r\n" % (65 * 1024 * 1024)).encode()
        status, _, body = raw_unix(self.d, head, b"\0" * (1024 * 1024))
        self.assertEqual(status, 413, body)
        self.assert_clean()

    def test_hostile_truncated_and_malformed(self):
        _, _, good = self.two_layer_image()
        self.assert_refused("h8", good[: len(good) // 2], 400, "")
        self.assert_refused("h8", b"not a tar at all" * 100, 400, "")

        def bad_index(files):
            files["index.json"] = b"{\"manifests\": [ {"
        self.assert_refused("h8", oci_archive([tar_bytes([("x", "file", b"")])],
                                              mangle=bad_index), 400, "malformed index.json")

        def no_index(files):
            del files["index.json"]
        self.assert_refused("h8", oci_archive([tar_bytes([("x", "file", b"")])],
                                              mangle=no_index), 400, "not an image archive")
        layer = tar_bytes([("x", "file", b"")])

        def truncated_layer(files):
            k = "blobs/sha256/" + sha(layer)
            files[k] = files[k][:700]
        self.assert_refused("h8", oci_archive([layer], mangle=truncated_layer), 400,
                            "does not match its digest")

    # ---- tenants, E2B, CLI, restarts -------------------------------------------

    def test_tenants_and_e2b_template_id(self):
        ka, kb = self.d.new_key("ta"), self.d.new_key("tb")
        body = tar_bytes(userland() + [("mark", "file", b"ta's\n")])
        r = self.d.tcp("POST", "/v1/templates?" + q(name="tpa", format="dir"), body, key=ka,
                       raw=True)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["owner"], "ta")
        # another tenant: it does not exist
        self.assertError(self.d.tcp("GET", "/v1/templates/tpa", key=kb), 404)
        self.assertError(self.d.tcp("DELETE", "/v1/templates/tpa", key=kb), 404)
        self.assertError(self.d.tcp("POST", "/v1/sandboxes", {"template": "tpa"}, key=kb), 404)
        names = [t["name"] for t in self.d.tcp("GET", "/v1/templates", key=kb).json()["templates"]]
        self.assertNotIn("tpa", names)
        # E2B: templateID is the template's name
        h = {"X-API-Key": ka, "Content-Type": "application/json"}
        r = self.d.tcp("POST", "/sandboxes", json.dumps({"templateID": "tpa"}), headers=h,
                       raw=True)
        self.assertEqual(r.status, 201, r)
        e2b = r.json()
        self.assertEqual(e2b["templateID"], "tpa")
        sid = e2b["sandboxID"]
        self.assertEqual(self.sh(sid, "cat /mark")["stdout"], "ta's\n")
        h["X-API-Key"] = kb
        r = self.d.tcp("POST", "/sandboxes", json.dumps({"templateID": "tpa"}), headers=h,
                       raw=True)
        self.assertEqual(r.status, 404, r)
        self.d.kill(sid)
        # a template the administrator built is everyone's, removable by it only
        self.assertEqual(self.build("global1", tar_bytes(userland()), fmt="dir").status, 201)
        self.assertEqual(self.d.tcp("GET", "/v1/templates/global1", key=kb).status, 200)
        self.assertError(self.d.tcp("DELETE", "/v1/templates/global1", key=kb), 403)
        self.assertEqual(self.d.tcp("DELETE", "/v1/templates/tpa", key=ka).status, 204)

    def test_cli(self):
        import tempfile
        with tempfile.TemporaryDirectory(prefix="sbx-tmpl-cli-") as src:
            os.makedirs(os.path.join(src, "bin"))
            os.symlink(BUSYBOX, os.path.join(src, "bin", "busybox.lnk"))
            with open(BUSYBOX, "rb") as f, open(os.path.join(src, "bin", "busybox"), "wb") as g:
                g.write(f.read())
            os.chmod(os.path.join(src, "bin", "busybox"), 0o755)
            os.symlink("busybox", os.path.join(src, "bin", "sh"))
            os.symlink("busybox", os.path.join(src, "bin", "cat"))
            with open(os.path.join(src, "motd"), "w") as f:
                f.write("from the cli\n")
            r = self.d.sbx("template", "build", "clitmpl", "--from-dir", src)
            self.assertEqual(r.returncode, 0, r)
            self.assertIn(b"clitmpl: 1 layer", r.stdout)
        r = self.d.sbx("template", "ls")
        self.assertEqual(r.returncode, 0, r)
        self.assertRegex(r.stdout.decode(), r"(?m)^clitmpl\s+dir\s+1\s")
        r = self.d.sbx("template", "inspect", "clitmpl")
        self.assertEqual(json.loads(r.stdout)["name"], "clitmpl")
        r = self.d.sbx("run", "--template", "clitmpl", "--", "/bin/cat", "/motd")
        self.assertEqual((r.returncode, r.stdout), (0, b"from the cli\n"), r)
        r = self.d.sbx("template", "rm", "clitmpl")
        self.assertEqual(r.returncode, 0, r)
        r = self.d.sbx("template", "inspect", "clitmpl")
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"not found", r.stderr)
        r = self.d.sbx("template", "build", "x", "--from-oci", "/nonexistent.tar")
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"cannot read", r.stderr)

    def test_cli_upload_progress_on_a_terminal(self):
        """On a terminal, template build shows the upload's bytes and
        percent, then what the daemon does; in a script, one line."""
        import tempfile
        from harness import SBX
        from sbx_helpers import run_with_tty_stderr
        blob = os.urandom(6 << 20)  # incompressible: the archive stays ~6 MB
        archive = oci_archive([tar_bytes(userland() + [("big.bin", "file", blob)])])
        with tempfile.NamedTemporaryFile(suffix=".tar") as f:
            f.write(archive)
            f.flush()
            env = {"PATH": "/usr/bin:/bin", "SBX_STATE": self.d.state}
            rc, out, said = run_with_tty_stderr(
                [SBX, "template", "build", "progressed", "--from-oci", f.name], env, timeout=300)
            self.assertEqual(rc, 0, said)
            self.assertIn(b"progressed: ", out)
            self.assertRegex(said, rb"\rsbx: uploaded [0-9.]+ of [0-9.]+ MB \([0-9]{1,2}%\)")
            self.assertRegex(said, rb"uploaded ([0-9.]+) of \1 MB \(100%\); the daemon unpacks")
            # not a terminal: no progress line
            r = self.d.sbx("template", "build", "progressed2", "--from-oci", f.name)
            self.assertEqual(r.returncode, 0, r)
            self.assertNotIn(b"uploaded", r.stderr)
        for n in ("progressed", "progressed2"):
            self.assertEqual(self.d.api("DELETE", "/v1/templates/" + n).status, 204)

    def test_survives_restart(self):
        self.assertEqual(self.build("keep", tar_bytes(userland()), fmt="dir").status, 201)
        self.d.stop()
        self.d.start()
        sid = self.d.create(template="keep")
        self.assertEqual(self.sh(sid, "echo ok")["stdout"], "ok\n")


class RecipeCacheTest(DaemonTest):
    """The recipe build cache (iso/tmpl_cache.c): `sbx template cache`
    shows it, `sbx template prune` empties it, never while a build holds
    it, never following a link out of it, and for the administrator only.
    The entries are made by hand here (a real build's: test_templates_recipe,
    which needs the Debian mirror)."""
    pool = 0
    listen = True

    def cache(self):
        return os.path.join(self.d.state, "templates", "cache")

    def fill(self):
        """Two builds and a crashed build's copy; 1 MiB of content in all."""
        c = self.cache()
        os.makedirs(os.path.join(c, "a" * 64, "usr", "lib"), exist_ok=True)
        with open(os.path.join(c, "a" * 64, "usr", "lib", "big"), "wb") as f:
            f.write(os.urandom(1 << 20))
        os.makedirs(os.path.join(c, "b" * 64, "etc"), exist_ok=True)
        os.makedirs(os.path.join(c, ".tmp-" + "c" * 64 + "-12345"), exist_ok=True)

    def test_usage_prune_and_refusals(self):
        # nothing built yet: no cache directory, an empty cache
        r = self.d.api("GET", "/v1/template-cache")
        self.assertEqual((r.status, r.json()), (200, {"entries": 0, "bytes": 0}), r)
        self.fill()
        # a link in the cache to a directory outside: the prune removes the
        # link, never what it points at
        outside = os.path.join(self.d.state, "outside-the-cache")
        os.mkdir(outside)
        with open(os.path.join(outside, "keep"), "w") as f:
            f.write("keep\n")
        os.symlink(outside, os.path.join(self.cache(), "d" * 64))
        r = self.d.api("GET", "/v1/template-cache")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["entries"], 4, r)
        self.assertGreaterEqual(r.json()["bytes"], 1 << 20, r)
        p = self.d.sbx("template", "cache")
        self.assertEqual(p.returncode, 0, p)
        self.assertRegex(p.stdout.decode(), r"^4 cached recipe builds, 1\.\d MB\n$")
        # a tenant (TCP) may neither look nor prune: recipes are the administrator's
        key = self.d.new_key("tenant-a")
        for method in ("GET", "DELETE"):
            self.assertError(self.d.tcp(method, "/v1/template-cache", key=key), 403, "forbidden")
        self.assertEqual(len(os.listdir(self.cache())), 4)
        # a build holds the cache (a shared flock, this daemon's or another's):
        # the prune is refused and removes nothing
        fd = os.open(self.cache(), os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            body = self.assertError(self.d.api("DELETE", "/v1/template-cache"), 409, "conflict")
            self.assertIn("a recipe build is using the cache", body["message"])
            p = self.d.sbx("template", "prune")
            self.assertEqual(p.returncode, 1, p)
            self.assertIn(b"a recipe build is using the cache", p.stderr)
            self.assertEqual(len(os.listdir(self.cache())), 4)
            # a look at it is not refused by a build
            self.assertEqual(self.d.api("GET", "/v1/template-cache").json()["entries"], 4)
        finally:
            os.close(fd)
        p = self.d.sbx("template", "prune", "--json")
        self.assertEqual(p.returncode, 0, p)
        gone = json.loads(p.stdout)
        self.assertEqual(gone["entries"], 4, gone)
        self.assertGreaterEqual(gone["bytes"], 1 << 20, gone)
        self.assertEqual(os.listdir(self.cache()), [])
        self.assertEqual(os.listdir(outside), ["keep"])
        r = self.d.api("GET", "/v1/template-cache")
        self.assertEqual(r.json(), {"entries": 0, "bytes": 0}, r)
        p = self.d.sbx("template", "prune")
        self.assertEqual((p.returncode, p.stdout), (0, b"removed 0 cached recipe builds, 0.0 MB\n"), p)
        # bad usage is a usage error, and changes nothing
        p = self.d.sbx("template", "prune", "--force")
        self.assertEqual(p.returncode, 2, p)
        self.assertIn(b"unexpected argument `--force`", p.stderr)


class TemplateRestartTest(DaemonTest):
    """A sandbox of a stored template outlives a daemon restart, and keeps
    its template from being removed (the new daemon's registry knows it)."""
    pool = 0

    @classmethod
    def setUpClass(cls):
        from harness import Daemon
        cls.d = Daemon(pool=0, kill_on_exit=False).start()

    def test_adopted_sandbox_holds_its_template(self):
        r = self.d.api("POST", "/v1/templates?" + q(name="kept", format="dir"),
                       tar_bytes(userland() + [("f", "file", b"still here\n")]), raw=True)
        self.assertEqual(r.status, 201, r)
        sid = self.d.create(template="kept")
        self.d.stop()
        self.d.start()
        res = self.d.exec(sid, argv=["/bin/cat", "/f"])
        self.assertEqual(res["stdout"], "still here\n", res)
        self.assertError(self.d.api("DELETE", "/v1/templates/kept"), 409)
        self.d.kill(sid)
        self.assertEqual(self.d.api("DELETE", "/v1/templates/kept").status, 204)


def dir_bytes(path):
    total = 0
    for root, dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.lstat(p).st_blocks * 512
    return total


class TenantQuotas(TemplatesTest):
    """A tenant's templates and snapshots are bounded in count and bytes
    (the red team stored 20 templates of 1 GB each from 1 MB uploads): past
    a bound, a 429 or 413 that names it, nothing stored, and the tenant
    sees its usage in GET /v1/info. The administrator is not bounded."""

    extra_args = TemplatesTest.extra_args + ("--tenant-templates", "2",
                                             "--tenant-template-bytes", "6M",
                                             "--tenant-snapshot-bytes", "3M")

    def test_templates_and_snapshots_are_bounded(self):
        key = self.d.new_key("quota")
        mb = os.urandom(1 << 20)

        def build(name, size_mb):
            body = tar_bytes(userland() + [("data", "file", mb * size_mb)])
            return self.d.tcp("POST", "/v1/templates?" + q(name=name, format="dir"), body,
                              key=key, raw=True, timeout=300)
        self.assertEqual(build("q1", 1).status, 201)
        usage = self.d.tcp("GET", "/v1/info", key=key).json()["usage"]["templates"]
        self.assertEqual((usage["count"], usage["max_count"], usage["max_bytes"]),
                         (1, 2, 6 << 20))
        self.assertGreater(usage["bytes"], 1 << 20)
        # Bytes: q1 holds about 3 MiB with busybox; 4 MiB more do not fit.
        body = self.assertError(build("q2", 4), 413, "too_large")
        self.assertIn("template quota leaves", body["message"])
        self.assertNotIn("q2", [t["name"] for t in self.d.api("GET", "/v1/templates").json()
                                ["templates"]])
        self.assert_clean()
        self.assertEqual(build("q2", 1).status, 201)
        # Count: two at most.
        body = self.assertError(build("q3", 1), 429, "resource_exhausted")
        self.assertIn("has 2 templates (at most 2", body["message"])
        # The administrator has no quota.
        self.assertEqual(self.build("admin1", tar_bytes(userland()), fmt="dir").status, 201)
        # Snapshots: 3 MiB of the tenant's.
        sid = self.d.tcp("POST", "/v1/sandboxes", {}, key=key).json()["id"]
        self.sh(sid, "head -c 2000000 /dev/urandom > /home/user/a")
        r = self.d.tcp("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "s1"}, key=key)
        self.assertEqual(r.status, 201, r)
        body = self.assertError(self.d.tcp("POST", "/v1/sandboxes/%s/snapshots" % sid,
                                           {"name": "s2"}, key=key), 413, "too_large")
        self.assertIn("snapshot quota leaves", body["message"])
        snaps = self.d.tcp("GET", "/v1/snapshots", key=key).json()["snapshots"]
        self.assertEqual([s["name"] for s in snaps], ["s1"])
        tenant_dir = os.path.join(self.d.state, "snapshots", b"quota".hex())
        self.assertEqual(sorted(os.listdir(tenant_dir)), ["s1"])
        usage = self.d.tcp("GET", "/v1/info", key=key).json()["usage"]["snapshots"]
        self.assertEqual((usage["count"], usage["max_bytes"]), (1, 3 << 20))
        self.d.tcp("DELETE", "/v1/snapshots/s1", key=key)
        self.d.tcp("DELETE", "/v1/sandboxes/" + sid, key=key)
