"""Templates from a recipe (docs/templates.md): debootstrap of a Debian
release from deb.debian.org, cached by the recipe's hash in a directory
shared by test runs (/var/tmp/sbx-recipe-cache), so only the first run
pays for debootstrap (~2 min)."""
import fcntl
import json
import os
import shutil
import stat
import time

from harness import DaemonTest, cgroup_hierarchies, processes_with_uid_in
from sbx_helpers import q

CACHE = "/var/tmp/sbx-recipe-cache"
# The build sandbox's ids on the host (SBX_TMPL_BUILD_ID_BASE + 0..65535).
BUILD_IDS = (0xFFFE0000, 0xFFFE0000 + 65536)


class RecipeTest(DaemonTest):
    pool = 0
    listen = True
    # Without --egress-allow-private, as in production: the mirror's name
    # resolves to a reserved range here (203.0.113.80, documentation), as
    # a LAN mirror or an apt cache would; builds reach it all the same (the
    # administrator named it), and nothing else.
    extra_args = ("--template-cache", CACHE)

    def build(self, name, recipe, raw=False):
        body = recipe if raw else json.dumps(recipe)
        return self.d.api("POST", "/v1/templates?" + q(name=name, format="recipe"), body,
                          raw=True, timeout=1800)

    def clean(self):
        self.assertEqual(os.listdir(os.path.join(self.d.state, "templates", "tmp")), [])

    def test_recipe_builds_and_runs(self):
        r = self.build("deb", {"release": "bookworm", "packages": []})
        self.assertEqual(r.status, 201, r)
        info = r.json()
        self.assertEqual(info["source"], "recipe")
        self.assertEqual(len(info["layers"]), 1)
        key = info["layers"][0].split(":")[1]
        self.assertTrue(os.path.isdir(os.path.join(CACHE, key)))
        sid = self.d.create(template="deb")
        res = self.d.exec(sid, argv=["/bin/sh", "-c",
                                     "cat /etc/debian_version; test -x /usr/bin/apt-get && "
                                     "echo apt; id -un; ls /dev/null"])
        self.assertEqual(res["exit_code"], 0, res)
        self.assertRegex(res["stdout"], r"^12\.\d+\napt\nuser\n/dev/null\n$")
        self.d.kill(sid)
        # no setuid file and no device node in the layer
        layer = os.path.join(self.d.state, "templates", "layers", key)
        for root, dirs, files in os.walk(layer):
            for f in files:
                st = os.lstat(os.path.join(root, f))
                self.assertEqual(st.st_mode & 0o6000, 0, os.path.join(root, f))
                self.assertEqual(st.st_uid, 0)
        # the same recipe again: from the cache, the same layer, stored once
        r = self.build("deb2", {"packages": [], "release": "bookworm"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["layers"], info["layers"])
        self.clean()
        self.assertEqual(self.d.api("DELETE", "/v1/templates/deb").status, 204)
        self.assertEqual(self.d.api("DELETE", "/v1/templates/deb2").status, 204)
        # removing the templates keeps the build cache (a rebuild is a copy),
        # which `sbx template cache` shows
        self.assertTrue(os.path.isdir(os.path.join(CACHE, key)))
        r = self.d.api("GET", "/v1/template-cache")
        self.assertEqual(r.status, 200, r)
        self.assertGreaterEqual(r.json()["entries"], 1, r)
        self.assertGreater(r.json()["bytes"], 50 << 20, r)  # a Debian base system

    def test_a_build_waits_for_a_prune(self):
        """A prune holds the cache's lock exclusively: a build waits for it
        (the kernel's lock table shows it waiting) instead of copying a
        tree being removed, and goes on once it is released."""
        import threading
        os.makedirs(CACHE, exist_ok=True)
        fd = os.open(CACHE, os.O_RDONLY | os.O_DIRECTORY)
        done = []
        t = None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            t = threading.Thread(target=lambda: done.append(
                self.build("waits", {"release": "bookworm", "packages": []})))
            t.start()
            st = os.fstat(fd)
            dev = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
            waiting = False
            for _ in range(600):
                with open("/proc/locks") as f:
                    waiting = any("-> FLOCK" in l and " READ " in l and " %s " % dev in l for l in f)
                if waiting or not t.is_alive():
                    break
                time.sleep(0.1)
            self.assertTrue(waiting, "no build waiting on the cache's lock (%s)" % dev)
            self.assertTrue(t.is_alive())
            # and a prune, meanwhile, is refused: the lock is ours, not a build's,
            # but the daemon cannot tell; it removes nothing
            self.assertError(self.d.api("DELETE", "/v1/template-cache"), 409, "conflict")
        finally:
            os.close(fd)
            if t is not None:
                t.join()
        self.assertEqual(done[0].status, 201, done[0])
        self.assertEqual(self.d.api("DELETE", "/v1/templates/waits").status, 204)

    def build_watched(self, name, recipe):
        """The build's answer and every progress line seen while it ran."""
        import threading
        done = []
        t = threading.Thread(target=lambda: done.append(self.build(name, recipe)))
        t.start()
        seen = []
        while t.is_alive():
            r = self.d.api("GET", "/v1/templates/%s/progress" % name)
            if r.status == 200:
                seen = r.json()["tail"] if not seen else seen + [
                    l for l in r.json()["tail"] if l not in seen]
        t.join()
        return done[0], seen

    def build_cgroups(self):
        """The recipe-* cgroups under the daemon's parent, any hierarchy."""
        found = []
        for h in cgroup_hierarchies():
            parent = os.path.join(h, self.d.cgroup_parent)
            if os.path.isdir(parent):
                found += [d for d in os.listdir(parent) if d.startswith("recipe-")]
        return found

    def test_second_stage_runs_in_the_build_sandbox(self):
        # A recipe no other test builds, so debootstrap runs (not a copy from
        # the cache): host root runs its first stage only; the packages'
        # maintainer scripts (the second stage) run in the build sandbox.
        r, seen = self.build_watched("stage2", {"release": "bookworm", "packages": ["jq"]})
        self.assertEqual(r.status, 201, r)
        key = r.json()["layers"][0].split(":")[1]
        try:
            text = "\n".join(seen)
            self.assertIn("sbx: debootstrap's second stage (the packages' scripts) in a build "
                          "sandbox", text)
            self.assertIn("$ container=lxc /debootstrap/debootstrap --second-stage", text)
            # the first stage unpacked; the packages were set up after it,
            # in the sandbox
            self.assertIn("I: Installing core packages...", text)
            self.assertGreater(text.index("I: Installing core packages..."),
                               text.index("$ container=lxc /debootstrap/debootstrap"))
            self.assertIn("I: Base system installed successfully.", text)
            sid = self.d.create(template="stage2")
            res = self.d.exec(sid, argv=["/bin/sh", "-c", "echo '[1,2]' | jq -c 'map(.*3)'; "
                                         "ls /var/cache/apt/archives/*.deb 2>/dev/null | wc -l"])
            self.assertEqual((res["exit_code"], res["stdout"]), (0, "[3,6]\n0\n"), res)
            self.d.kill(sid)
            # the tree the sandbox wrote is a layer like any other
            layer = os.path.join(self.d.state, "templates", "layers", key)
            for root, dirs, files in os.walk(layer):
                for f in files + dirs:
                    st = os.lstat(os.path.join(root, f))
                    self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o6000), (0, 0, 0),
                                     os.path.join(root, f))
            self.assertEqual(self.build_cgroups(), [])
            self.clean()
            self.assertEqual(self.d.api("DELETE", "/v1/templates/stage2").status, 204)
        finally:
            # the next run runs debootstrap again
            shutil.rmtree(os.path.join(CACHE, key), ignore_errors=True)

    def test_build_sandbox_confinement(self):
        # What a build command (or a maintainer script: the same sandbox)
        # sees of itself, as the failing command's output in the 400.
        probe = ("printf '%s ' $(grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status "
                 "| tr -d '\t'); echo; tr -s ' ' < /proc/self/uid_map; "
                 "echo procs=$(ls -d /proc/[0-9]* | wc -l) "
                 "cgroup=$(grep -c '/recipe-[0-9a-f]*$' /proc/self/cgroup); "
                 "(echo x > /proc/sys/kernel/hostname) 2>&1 | sed 's/^.*: //'; exit 9")
        r = self.build("conf", {"release": "bookworm", "run": [probe]})
        err = self.assertError(r, 400)
        m = err["message"]
        self.assertTrue(m.startswith("recipe: run[0] `printf"), m)
        self.assertIn("exited with status 9: ", m)
        out = m.split("exited with status 9: ", 1)[1].split("|")
        # seccomp filter, no_new_privs; all capabilities, but of a user
        # namespace whose root is an id no host account has
        self.assertEqual(out[0], "CapEff:000001ffffffffff NoNewPrivs:1 Seccomp:2 ", m)
        self.assertEqual(out[1], " 0 %d 65536" % BUILD_IDS[0], m)
        # a PID namespace of its own (the init, sh, the pipeline), the
        # build's cgroup on every line of /proc/self/cgroup
        procs, cg = out[2].split()
        self.assertLessEqual(int(procs.split("=")[1]), 5, m)
        # (in each hierarchy the daemon's parent is in: one on cgroup v2)
        hier = {os.path.realpath(h) for h in cgroup_hierarchies()
                if os.path.isdir(os.path.join(h, self.d.cgroup_parent))}
        self.assertEqual(cg, "cgroup=%d" % len(hier), m)
        # /proc is read-only
        self.assertEqual(out[3], "Read-only file system", m)
        self.assertEqual(self.build_cgroups(), [])
        self.clean()

    def test_build_sandbox_process_limit_and_leftovers(self):
        # A fork bomb in a build command stops at the build's pids.max; and
        # what a command leaves running (setsid, in the background) dies
        # with the build, not later.
        r = self.build("bomb", {"release": "bookworm", "run": [
            "setsid sleep 600 & i=0; while [ $i -lt 1500 ]; do sleep 600 & i=$((i+1)); done; "
            "echo all-started"]})
        err = self.assertError(r, 400)
        self.assertRegex(err["message"], r"exited with status 2: /bin/sh: \d+: Cannot fork$",
                         err["message"])
        self.assertEqual(processes_with_uid_in(*BUILD_IDS), [])
        self.assertEqual(self.build_cgroups(), [])
        # a command that ends leaving one running: the build succeeds, the
        # process is gone
        r = self.build("bg", {"release": "bookworm", "run": ["setsid sleep 600 &"]})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(processes_with_uid_in(*BUILD_IDS), [])
        self.assertEqual(self.build_cgroups(), [])
        shutil.rmtree(os.path.join(CACHE, r.json()["layers"][1].split(":")[1]))
        self.assertEqual(self.d.api("DELETE", "/v1/templates/bg").status, 204)
        self.clean()

    def test_progress_and_cli(self):
        import tempfile
        import threading
        # A fresh store: the build copies from the recipe cache (seconds) or
        # runs debootstrap (minutes); its progress file lives that long.
        done = []
        t = threading.Thread(target=lambda: done.append(
            self.build("p1", {"release": "bookworm"})))
        t.start()
        seen = []
        while t.is_alive():
            r = self.d.api("GET", "/v1/templates/p1/progress")
            if r.status == 200:
                seen.extend(r.json()["tail"])
            else:
                self.assertEqual(r.status, 404, r)
        t.join()
        self.assertEqual(done[0].status, 201, done[0])
        text = " ".join(seen)
        self.assertTrue("sbx: copying the cached build" in text or "sbx: debootstrap" in text,
                        seen[-5:])
        self.assertError(self.d.api("GET", "/v1/templates/p1/progress"), 404)
        # over TCP there is no progress to see
        key = self.d.new_key("tp")
        self.assertError(self.d.tcp("GET", "/v1/templates/p1/progress", key=key), 404)
        # the same recipe again: its layer is in the store already
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump({"release": "bookworm", "packages": []}, f)
            f.flush()
            r = self.d.sbx("template", "build", "p2", "--from-recipe", f.name, timeout=1800)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn(b"from a recipe", r.stderr)
        self.assertIn(b"p2: 1 layer", r.stdout)
        p1, p2 = (self.d.api("GET", "/v1/templates/" + n).json() for n in ("p1", "p2"))
        self.assertEqual((p1["layers"], p1["size_bytes"]), (p2["layers"], p2["size_bytes"]))
        self.assertEqual(os.listdir(os.path.join(self.d.state, "templates", "progress")), [])
        for n in ("p1", "p2"):
            self.assertEqual(self.d.api("DELETE", "/v1/templates/" + n).status, 204)

    def test_recipe_refusals(self):
        key = self.d.new_key("tr")
        r = self.d.tcp("POST", "/v1/templates?" + q(name="r1", format="recipe"),
                       json.dumps({"release": "bookworm"}), key=key, raw=True)
        self.assertError(r, 403)
        for bad, text in (({"release": "../x"}, "a release is"),
                          ({"release": "bookworm", "packages": ["a b"]}, "a package"),
                          ({"release": "bookworm", "sh": ["x"]}, "unknown field `sh`"),
                          ({"release": "bookworm", "run": "x"}, "`run` must be an array"),
                          ({"release": "bookworm", "run": ["true"] * 33}, "at most 32"),
                          ({"release": "bookworm", "run": ["x" * 1001]}, "`run[0]` must be"),
                          ({"release": "bookworm", "run": ["true", 3]}, "`run[1]` must be"),
                          ({"release": "bookworm", "run": [""]}, "`run[0]` must be"),
                          ({"release": "bookworm", "run": ["a\nb"]}, "`run[0]` must be"),
                          ({}, "`release`"), ("{", "malformed recipe")):
            r = self.build("r1", bad, raw=isinstance(bad, str))
            err = self.assertError(r, 400)
            self.assertIn(text, err["message"])
        self.clean()
        self.assertEqual(os.listdir(os.path.join(self.d.state, "templates", "layers")), [])

    def test_run_commands(self):
        recipe = {"release": "bookworm", "packages": [],
                  "run": ["echo built > /etc/sbx-built",
                          "printf '#!/bin/sh\\necho tool\\n' > /usr/local/bin/tool",
                          "chmod 755 /usr/local/bin/tool",
                          "rm /etc/debian_version",
                          "rm -rf /usr/share/doc && mkdir /usr/share/doc && touch /usr/share/doc/only",
                          "echo out; id -u; test -w /etc",
                          # another owner and setuid: root's and plain in the layer
                          "touch /etc/owned && chown 42:42 /etc/owned && chmod 4755 /etc/owned",
                          # the commands' / is the build overlay, not the host's
                          "touch /sbx-recipe-probe"]}
        r = self.build("run1", recipe)
        self.assertEqual(r.status, 201, r)
        info = r.json()
        self.assertEqual(len(info["layers"]), 2)
        sid = self.d.create(template="run1")
        res = self.d.exec(sid, argv=["/bin/sh", "-c",
                                     "cat /etc/sbx-built; tool; ls /etc/debian_version; "
                                     "ls /usr/share/doc; stat -c %u /etc/sbx-built"])
        self.assertEqual(res["stdout"], "built\ntool\nonly\n65534\n", res)
        self.assertIn("No such file", res["stderr"])
        self.d.kill(sid)
        self.assertFalse(os.path.exists("/sbx-recipe-probe"))
        # the commands' layer: root's files, whiteouts kept as 0/0 devices
        key = info["layers"][1].split(":")[1]
        layer = os.path.join(self.d.state, "templates", "layers", key)
        st = os.lstat(os.path.join(layer, "etc", "debian_version"))
        self.assertEqual((stat.S_ISCHR(st.st_mode), st.st_rdev), (True, 0))
        self.assertEqual(os.getxattr(os.path.join(layer, "usr", "share", "doc"),
                                     "user.overlay.opaque"), b"y")
        for root, dirs, files in os.walk(layer):
            for f in files + dirs:
                st = os.lstat(os.path.join(root, f))
                self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o6000), (0, 0, 0))
        self.assertEqual(os.lstat(os.path.join(layer, "etc", "owned")).st_mode & 0o7777, 0o755)
        self.assertTrue(os.path.exists(os.path.join(layer, "sbx-recipe-probe")))
        # again: the same layers (stored), no command runs
        r = self.build("run2", recipe)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["layers"], info["layers"])
        self.clean()
        for n in ("run1", "run2"):
            self.assertEqual(self.d.api("DELETE", "/v1/templates/" + n).status, 204)
        self.assertFalse(os.path.exists(layer))
        # and from the recipe cache (the store has no layer left): whiteouts
        # and opaque directories survive the copy
        self.assertTrue(os.path.isdir(os.path.join(CACHE, key)))
        r = self.build("run3", recipe)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["layers"], info["layers"])
        sid = self.d.create(template="run3")
        res = self.d.exec(sid, argv=["/bin/sh", "-c", "tool; ls /usr/share/doc; "
                                     "test -e /etc/debian_version || echo gone"])
        self.assertEqual(res["stdout"], "tool\nonly\ngone\n", res)
        self.d.kill(sid)
        self.assertEqual(self.d.api("DELETE", "/v1/templates/run3").status, 204)
        self.clean()
        # the next run runs the commands again
        shutil.rmtree(os.path.join(CACHE, key))

    def test_run_progress(self):
        import threading
        done = []
        t = threading.Thread(target=lambda: done.append(self.build("prog", {
            "release": "bookworm",
            "run": ["for i in 1 2 3 4 5 6 7 8; do echo step-$i; sleep 0.5; done"]})))
        t.start()
        seen = []
        while t.is_alive():
            r = self.d.api("GET", "/v1/templates/prog/progress")
            if r.status == 200:
                seen.extend(r.json()["tail"])
        t.join()
        self.assertEqual(done[0].status, 201, done[0])
        self.assertIn("$ for i in 1 2 3 4 5 6 7 8; do echo step-$i; sleep 0.5; done", seen)
        self.assertIn("step-8", seen)
        # the next run runs the command again (its output is what is checked)
        shutil.rmtree(os.path.join(CACHE, done[0].json()["layers"][1].split(":")[1]))
        self.assertEqual(self.d.api("DELETE", "/v1/templates/prog").status, 204)
        self.clean()

    def test_run_failure_and_network(self):
        # the debootstrap layer stored already: the commands run over the
        # store's copy (test_run_commands runs them over the build's)
        self.assertEqual(self.build("base0", {"release": "bookworm"}).status, 201)
        before = set(os.listdir(os.path.join(self.d.state, "templates", "layers")))
        r = self.build("bad", {"release": "bookworm",
                               "run": ["echo one", "echo to-stderr >&2; exit 3", "echo never"]})
        err = self.assertError(r, 400)
        self.assertEqual("recipe: run[1] `echo to-stderr >&2; exit 3` exited with status 3: "
                         "to-stderr", err["message"])
        self.assertError(self.d.api("GET", "/v1/templates/bad"), 404)
        self.clean()
        self.assertEqual(set(os.listdir(os.path.join(self.d.state, "templates", "layers")))
                         - before, set())
        # the build sandbox has no network: a command that reaches out fails
        r = self.build("net", {"release": "bookworm",
                               "run": ["perl -MIO::Socket::INET -e 'IO::Socket::INET->new("
                                       "PeerAddr => q(1.1.1.1:80), Timeout => 5) or die "
                                       "qq(connect: $!\\n); print qq(REACHED\\n)'"]})
        err = self.assertError(r, 400)
        self.assertIn("exited with status 101: ", err["message"])  # perl: errno ENETUNREACH
        self.assertIn("connect: Network is unreachable", err["message"])
        self.assertTrue(err["message"].endswith(": connect: Network is unreachable"), err)
        self.clean()
        self.assertEqual(set(os.listdir(os.path.join(self.d.state, "templates", "layers")))
                         - before, set())
        # and one that succeeds over the stored layer
        r = self.build("ok0", {"release": "bookworm", "run": ["echo fine > /etc/fine"]})
        self.assertEqual(r.status, 201, r)
        sid = self.d.create(template="ok0")
        self.assertEqual(self.d.exec(sid, argv=["cat", "/etc/fine"])["stdout"], "fine\n")
        self.d.kill(sid)
        shutil.rmtree(os.path.join(CACHE, r.json()["layers"][1].split(":")[1]))
        for n in ("ok0", "base0"):
            self.assertEqual(self.d.api("DELETE", "/v1/templates/" + n).status, 204)
        self.clean()

    def test_run_network_mirror_only(self):
        # another host through the build sandbox's proxy: the proxy's 403
        probe = ("perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(q(127.0.0.1:3128)) "
                 "or die qq(proxy: $!\\n); print $s qq(GET http://example.com/ HTTP/1.1\\r\\n"
                 "Host: example.com\\r\\n\\r\\n); $l = <$s>; print qq(got $l); "
                 "exit($l =~ m{^HTTP/1.1 200} ? 0 : 7)'")
        r = self.build("net2", {"release": "bookworm", "run": [probe]})
        err = self.assertError(r, 400)
        self.assertIn("exited with status 7: ", err["message"])
        # the status line says why: apt and pip show it, not the body
        self.assertIn("got HTTP/1.1 403 Forbidden (sbx: not in the sandbox's allowlist)",
                      err["message"])
        self.clean()
        self.assertError(self.d.api("GET", "/v1/templates/net2"), 404)
        # the mirror through it: apt installs a package
        r = self.build("jq", {"release": "bookworm",
                              "run": ["apt-get update -q", "apt-get install -y -q jq",
                                      "apt-get clean", "rm -rf /var/lib/apt/lists/*"]})
        self.assertEqual(r.status, 201, r)
        sid = self.d.create(template="jq")
        res = self.d.exec(sid, argv=["/bin/sh", "-c", "echo '{\"a\": 7}' | jq .a"])
        self.assertEqual((res["exit_code"], res["stdout"]), (0, "7\n"), res)
        self.d.kill(sid)
        self.clean()
        self.assertEqual(self.d.api("DELETE", "/v1/templates/jq").status, 204)
        # the next run installs from the mirror again, not from the cache
        shutil.rmtree(os.path.join(CACHE, r.json()["layers"][1].split(":")[1]))
