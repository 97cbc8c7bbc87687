"""A VM's root filesystem is a read-only image (docs/vm.md "The root
filesystem"): template base's, built from the host's Debian packages by the
privileged parent on first use, cached by content in STATE/vm-images.

One VM for the class (TCG: a boot takes seconds); the cache tests boot one
more and restore a snapshot.
"""
import hashlib
import os

from harness import DaemonTest
from sbx_helpers import q
from test_templates import tar_bytes, userland

VM_DIR = "/usr/local/lib/sbx/vm"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class VMImage(DaemonTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        # Files the host has outside any package of the image: never in a VM.
        cls.canaries = ["/usr/local/share/sbx-vmimg-canary-%d" % os.getpid(),
                        "/usr/share/sbx-vmimg-canary-%d" % os.getpid()]
        for c in cls.canaries:
            with open(c, "w") as f:
                f.write("host only\n")
        super().setUpClass()
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                "disk": "64M", "timeout": "10m"})
        assert r.status == 201, r
        cls.sid = r.json()["id"]
        cls.images = os.path.join(cls.d.state, "vm-images")

    @classmethod
    def tearDownClass(cls):
        for c in cls.canaries:
            try:
                os.unlink(c)
            except OSError:
                pass
        super().tearDownClass()

    def tearDown(self):
        pass  # the class's VM lives until the class ends

    def sh(self, cmd, sid=None, **kw):
        return self.d.sh(sid or self.sid, cmd, **kw)

    def py(self, code, sid=None):
        return self.d.exec(sid or self.sid, argv=["/usr/bin/python3", "-c", code])

    def cached(self):
        """base's image (the first one built)."""
        names = sorted(os.listdir(self.images), key=lambda n: os.stat(
            os.path.join(self.images, n)).st_mtime)
        imgs = [n for n in names if n.endswith(".img")]
        self.assertGreaterEqual(len(imgs), 1, names)
        return os.path.join(self.images, imgs[0])

    def test_python_runs_as_user(self):
        res = self.d.exec(self.sid, argv=["/usr/bin/python3", "-c",
                                          "import os; print(2+2, os.getuid(), os.getgid())"])
        self.assertEqual((res["exit_code"], res["stdout"]), (0, "4 1000 1000\n"), res)
        # The standard library, with its compiled modules (nothing to write).
        res = self.d.exec(self.sid, argv=[
            "/usr/bin/python3", "-c",
            "import json, ssl, sqlite3, hashlib, subprocess, urllib.request, os.path as p\n"
            "print(p.exists(json.__cached__), hashlib.sha256(b'').hexdigest()[:8])"])
        self.assertEqual((res["exit_code"], res["stdout"]), (0, "True e3b0c442\n"), res)
        # The API's cmd runs the image's bash, not busybox's sh.
        # busybox only fills in what no package brings (nc, wget...).
        res = self.sh("echo $BASH_VERSION; readlink -f /bin/sh /usr/bin/awk /usr/bin/ls "
                      "/usr/bin/nc")
        self.assertRegex(res["stdout"], r"^5\.\d+\.\d+.*\n/usr/bin/dash\n/usr/bin/mawk\n"
                         r"/usr/bin/ls\n/usr/bin/busybox\n$")

    def test_guest_kernel(self):
        with open(VM_DIR + "/KERNEL") as f:
            want = f.read().strip().replace("linux-image-", "")
        self.assertEqual(self.sh("uname -r")["stdout"], want + "\n")
        self.assertNotEqual(want, os.uname().release)

    def test_root_is_read_only(self):
        res = self.py("import errno, os\n"
                      "for p in ('/usr/x', '/etc/passwd', '/x', '/usr/bin/python3'):\n"
                      "    try:\n"
                      "        open(p, 'a').close(); print(p, 'written')\n"
                      "    except OSError as e:\n"
                      "        print(p, errno.errorcode[e.errno])\n")
        self.assertEqual(res["stdout"], "/usr/x EROFS\n/etc/passwd EROFS\n/x EROFS\n"
                         "/usr/bin/python3 EROFS\n", res)
        mounts = self.sh("cat /proc/mounts")["stdout"].splitlines()
        root = [m.split() for m in mounts if m.split()[1] == "/"]
        self.assertEqual(len(root), 1, mounts)
        self.assertEqual((root[0][0], root[0][2]), ("/dev/vda", "ext4"))
        self.assertEqual({"ro", "nosuid", "nodev"} - set(root[0][3].split(",")), set(), root)
        # No setuid or setgid file in the image (they are dropped when it is made).
        res = self.sh("find / -xdev -perm /6000 -type f 2>/dev/null; echo done")
        self.assertEqual(res["stdout"], "done\n", res)
        # The image's device has no node in the guest's /dev.
        res = self.py("import errno\ntry:\n open('/dev/vda','rb')\n"
                      "except OSError as e: print(errno.errorcode[e.errno])")
        self.assertEqual(res["stdout"], "ENOENT\n", res)

    def test_dev_is_minimal_and_read_only(self):
        # The namespace engine's /dev: no disk, port, memory or console node.
        res = self.sh("ls -A /dev | sort | tr '\\n' ' '")
        self.assertEqual(res["stdout"], "fd full null ptmx pts random shm stderr stdin stdout tty "
                         "urandom zero ", res)
        # Not even the guest's root can add, remove or replace a node there.
        for cmd in ("touch /dev/x", "rm -f /dev/null", "mknod /dev/vda2 b 254 0",
                    "mount -t devtmpfs d /tmp"):
            res = self.d.exec(self.sid, cmd=cmd + "; echo rc=$?", user="root")
            self.assertRegex(res["stdout"], r"rc=[1-9]", (cmd, res))
        res = self.d.exec(self.sid, cmd="touch /dev/x", user="root")
        self.assertIn("Read-only file system", res["stderr"], res)
        # The devices work; /dev/shm is the disk's (writable, for the user).
        res = self.sh("head -c 4 /dev/zero | wc -c; echo x > /dev/null; head -c 8 /dev/urandom "
                      "| wc -c; echo s > /dev/shm/s && cat /dev/shm/s")
        self.assertEqual(res["stdout"], "4\n8\ns\n", res)

    def test_disk_writable_and_limited(self):
        # Files of 1 MiB (one file is also limited by RLIMIT_FSIZE: EFBIG).
        code = ("import errno, os\n"
                "for d in ('/home/user', '/tmp'):\n"
                "    n = 0\n"
                "    try:\n"
                "        for n in range(100):\n"
                "            with open('%s/fill%d' % (d, n), 'wb') as f: f.write(b'x' * (1 << 20))\n"
                "        print(d, 'no limit')\n"
                "    except OSError as e:\n"
                "        print(d, errno.errorcode[e.errno], 56 <= n <= 64)\n"
                "    for i in range(n + 1): os.unlink('%s/fill%d' % (d, i))\n")
        res = self.py(code)
        self.assertEqual(res["stdout"], "/home/user ENOSPC True\n/tmp ENOSPC True\n", res)
        res = self.sh("echo hi > /home/user/f && cat /home/user/f && echo t > /tmp/t && cat /tmp/t")
        self.assertEqual(res["stdout"], "hi\nt\n", res)

    def test_host_files_absent(self):
        for c in self.canaries:
            res = self.sh("cat %s 2>&1; echo rc=$?" % c)
            self.assertIn("No such file", res["stdout"], c)
        # Not the host's /usr: only the image's packages (no compiler, no daemon).
        for path in ("/usr/bin/gcc", "/usr/bin/qemu-system-x86_64", "/usr/local/lib/sbx",
                     "/var/lib/dpkg/status", "/etc/shadow"):
            res = self.sh("test -e %s; echo $?" % path)
            self.assertEqual(res["stdout"], "1\n", path)
        res = self.sh("cat /etc/passwd")
        self.assertIn("user:x:1000:1000:user:/home/user:/bin/bash\n", res["stdout"])
        # TLS roots, the tools the API's files routes and commands use.
        res = self.sh("ls /etc/ssl/certs/ca-certificates.crt && which awk sh curl hostname "
                      "sha256sum ps")
        self.assertEqual(res["exit_code"], 0, res)

    def test_cache_files(self):
        st = os.stat(self.images)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o700))
        img = self.cached()
        st = os.stat(img)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        key = os.path.basename(img)[:-4]
        self.assertRegex(key, "^[0-9a-f]{64}$")
        with open(os.path.join(self.images, key + ".sum")) as f:
            self.assertEqual(f.read(), sha256_file(img) + "\n")
        self.assertEqual(sorted(n for n in os.listdir(self.images) if n.startswith(key)),
                         [key + ".img", key + ".sum"])
        self.assertFalse([n for n in os.listdir(self.images) if n.startswith(".")])
        # QEMU gets the image as an fd, never a path into the state directory.
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if not (self.d.uid_base <= os.stat("/proc/" + name).st_uid < self.d.uid_end):
                    continue
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"qemu-system-x86_64"):
                self.assertNotIn(self.d.state.encode(), b" ".join(argv))
                self.assertIn(b"file=/dev/fdset/1,format=raw,if=none,readonly=on,id=root,"
                              b"file.locking=off", argv)

    def test_stored_template(self):
        """A stored template (from a directory) is a VM's root too: an image
        of its layers under sbx's /etc, cached by its tree."""
        body = tar_bytes(userland() + [("srv", "dir"), ("srv/hello.txt", "file", b"hi there\n")])
        r = self.d.api("POST", "/v1/templates?" + q(name="vmdir", format="dir"), body, raw=True,
                       timeout=300)
        self.assertEqual(r.status, 201, r)
        sid = None
        try:
            r = self.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "template": "vmdir",
                                                     "memory": "256M", "timeout": "5m"})
            self.assertEqual(r.status, 201, r)
            sid = r.json()["id"]
            res = self.d.exec(sid, argv=["/bin/sh", "-c",
                                         "cat /srv/hello.txt; cat /etc/hostname; id -u; "
                                         "echo x > /srv/hello.txt; echo w > /home/user/w && "
                                         "cat /home/user/w; test -e /usr/bin/python3; echo $?"])
            self.assertEqual(res["stdout"], "hi there\nsandbox\n1000\nw\n1\n", res)
            self.assertIn("Read-only file system", res["stderr"])
            imgs = [n for n in os.listdir(self.images) if n.endswith(".img")]
            self.assertEqual(len(imgs), 2, imgs)  # base's and the template's
            # Its snapshot restores onto the same image.
            res = self.d.exec(sid, argv=["/bin/sh", "-c", "echo saved > /home/user/s"])
            self.assertEqual(res["exit_code"], 0, res)
            r = self.d.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "vmdir1"})
            self.assertEqual(r.status, 201, r)
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "vmdir1", "timeout": "5m"})
            self.assertEqual(r.status, 201, r)
            copy = r.json()["id"]
            res = self.d.exec(copy, argv=["/bin/sh", "-c", "cat /srv/hello.txt /home/user/s"])
            self.assertEqual(res["stdout"], "hi there\nsaved\n", res)
            self.d.kill(copy)
            # code-interpreter-v1's image (base's plus its packages):
            # test_vm_code.py.
        finally:
            if sid:
                self.d.kill(sid)
            self.d.api("DELETE", "/v1/snapshots/vmdir1")
            self.d.api("DELETE", "/v1/templates/vmdir")

    def test_z_snapshot_needs_its_image(self):
        """A restore attaches the very image the snapshot ran on: one that is
        gone, corrupt or rebuilt since is a clear 409, not a broken guest; a
        new VM rebuilds a corrupt image."""
        base = "/v1/sandboxes/" + self.sid
        self.assertEqual(self.sh("echo kept > /home/user/marker")["exit_code"], 0)
        r = self.d.api("POST", base + "/snapshots", {"name": "img1"})
        self.assertEqual(r.status, 201, r)
        img = self.cached()
        key = os.path.basename(img)[:-4]
        rec = os.path.join(self.d.state, "snapshots", b"default".hex(), "img1", "vm.root")
        with open(rec) as f:
            self.assertEqual(f.read(), "%s %s\n" % (key, sha256_file(img)))
        copies = []
        try:
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "img1", "timeout": "5m"})
            self.assertEqual(r.status, 201, r)
            copies.append(r.json()["id"])
            res = self.d.exec(copies[-1], argv=["/usr/bin/python3", "-c",
                                                "print(open('/home/user/marker').read())"])
            self.assertEqual(res["stdout"], "kept\n\n", res)
            # Gone: 409, and nothing left behind.
            os.rename(img, img + ".away")
            try:
                r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "img1"})
                msg = self.assertError(r, 409, "conflict")["message"]
                self.assertIn("root image %s is no longer on this host" % key, msg)
            finally:
                os.rename(img + ".away", img)
            # Corrupt: 409 for the restore ...
            with open(img, "r+b") as f:
                f.seek(1 << 20)
                f.write(b"\xff" * 4096)
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "img1"})
            self.assertIn("is corrupt", self.assertError(r, 409, "conflict")["message"])
            # ... a new VM gets a rebuilt image ...
            r = self.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                     "timeout": "5m"})
            self.assertEqual(r.status, 201, r)
            copies.append(r.json()["id"])
            self.assertEqual(self.py("print(2+2)", sid=copies[-1])["stdout"], "4\n")
            with open(os.path.join(self.images, key + ".sum")) as f:
                self.assertEqual(f.read(), sha256_file(img) + "\n")
            # ... whose bytes differ: the snapshot's guest cannot use them.
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "img1"})
            self.assertIn("was rebuilt with other bytes",
                          self.assertError(r, 409, "conflict")["message"])
            self.assertEqual(len(self.d.api("GET", "/v1/sandboxes").json()["sandboxes"]),
                             1 + len(copies))
            self.assertFalse([n for n in os.listdir(self.images) if n.startswith(".")])
        finally:
            for c in copies:
                self.d.kill(c)
            self.d.api("DELETE", "/v1/snapshots/img1")
