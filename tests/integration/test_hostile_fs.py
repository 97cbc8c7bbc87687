"""Hostile code vs. the filesystem view (DESIGN.md invariants 2, 5, 7).

Code inside a sandbox tries to see the host's files, to write outside its
disk, to find what a previous sandbox left, to read PID 1's secrets through
/proc, and to find a leaked fd. Every outcome is an exact errno or an exact
listing.

Observed errnos, and why each is that one:

- Creating a file anywhere but /home/user, /tmp and /dev/shm: EROFS. The
  skeleton root (/, /etc, /dev, /run, /var, /root) is a tmpfs made read-only
  once built, /usr is a read-only overlay of the sandbox's own over the
  host's /usr, and /proc/sys is a read-only bind over procfs. filename_create() takes mnt_want_write()
  before any permission or Landlock check, so EROFS wins for every user.
- Opening an existing file of that tree for writing: the permission check
  (may_open -> inode_permission) runs before do_dentry_open() asks the
  mount for write access, so EACCES when the caller may not write the file
  anyway (host files are owned by unmapped ids, shown as nobody; host-wide
  sysctls only let the initial namespace's root write), and EROFS only when
  the permission check passes (/etc/passwd for root inside, 0666 sysctls
  like ns_last_pid, and every file of /usr: overlayfs checks a write to a
  file of a lower layer as a read, since it would copy the file up). The exact table is WritesOutside.WRITE_EXISTING.
- /root as `user`: EACCES (0700 root); as root inside, creating in it is
  EROFS (the skeleton is read-only).
- mknod of a device in the writable /tmp: EACCES, not EPERM. Landlock's
  security_path_mknod() hook runs in do_mknodat() before vfs_mknod()'s
  CAP_MKNOD check, and no Landlock rule grants MAKE_CHAR anywhere. In /dev
  (read-only): EROFS, from mnt_want_write() in filename_create().
- /proc/1/{exe,root,cwd,fd/N} readlink and /proc/1/{mem,environ,maps,fd}
  open: EACCES for `user` and for root inside. sbx-init is not dumpable
  (PR_SET_DUMPABLE 0), so ptrace_may_access() needs CAP_SYS_PTRACE over its
  user namespace, which nobody inside has (CVE-2019-5736, CVE-2016-9962).
"""
import fcntl
import json
import os
import re
import subprocess
import unittest

from harness import DaemonTest
from hostile_util import (canary_name, kill_and_check_gone, probe_one, put_probe, py,
                          sandbox_host_pids, sh_ok, wait_until)

ASAN_SUBSET = False


class HostFilesInvisible(DaemonTest):
    """Invariant 2: nothing of the host but the template's read-only tree."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A canary in the host's /tmp and one in the daemon's state dir:
        # neither may be visible inside by any path.
        cls.tmp_canary = os.path.join("/tmp", canary_name())
        with open(cls.tmp_canary, "w") as f:
            f.write("host tmp canary\n")
        cls.state_canary = os.path.join(cls.d.state, canary_name())
        with open(cls.state_canary, "w") as f:
            f.write("state canary\n")

    @classmethod
    def tearDownClass(cls):
        for p in (cls.tmp_canary, cls.state_canary):
            try:
                os.unlink(p)
            except OSError:
                pass
        super().tearDownClass()

    def setUp(self):
        self.sid = self.d.create()
        put_probe(self.d, self.sid)

    def listdir(self, path, user=None):
        res = self.d.exec(self.sid, argv=["/usr/bin/python3", "-c",
                                          "import json,os,sys; "
                                          "print(json.dumps(sorted(os.listdir(sys.argv[1]))))",
                                          path], **({"user": user} if user else {}))
        self.assertEqual(res["exit_code"], 0, res)
        return json.loads(res["stdout"])

    def test_etc_is_generated_not_the_hosts(self):
        self.assertTrue(os.path.exists("/etc/shadow"), "the host should have /etc/shadow")
        self.assertEqual(probe_one(self, self.sid, "open", "/etc/shadow", "r"), "ENOENT")
        self.assertEqual(probe_one(self, self.sid, "open", "/etc/shadow", "r", user="root"),
                         "ENOENT")
        expected = {"passwd", "group", "hosts", "hostname", "nsswitch.conf", "resolv.conf",
                    "shells", "os-release", "localtime"}
        for host, name in (("/etc/ssl/certs", "ssl"), ("/etc/alternatives", "alternatives"),
                           ("/etc/ld.so.cache", "ld.so.cache"), ("/etc/services", "services"),
                           ("/etc/protocols", "protocols"), ("/etc/R", "R")):
            if os.path.exists(host):
                expected.add(name)
        # the JDK's configuration, each /etc/java-N-openjdk of the host
        expected |= {n for n in os.listdir("/etc") if re.fullmatch(r"java-\d+-openjdk", n)}
        self.assertEqual(set(self.listdir("/etc")), expected)
        # /etc/ssl: the host's certs, and sbx's egress CA (its certificate,
        # and the host's bundle with it: docs/egress.md, Credentials).
        self.assertEqual(sorted(self.listdir("/etc/ssl")),
                         (["certs"] if os.path.exists("/etc/ssl/certs") else [])
                         + ["sbx-ca-bundle.crt", "sbx-ca.crt"])
        # The generated passwd, not the host's.
        passwd = sh_ok(self, self.sid, "cat /etc/passwd")
        self.assertEqual([l.split(":")[0] for l in passwd.splitlines()], ["root", "user", "nobody"])

    def test_root_home_var_run_sys(self):
        self.assertEqual(probe_one(self, self.sid, "open", "/root", "r"), "EACCES")
        self.assertEqual(self.listdir("/root", user="root"), [])
        self.assertEqual(self.listdir("/home"), ["user"])
        self.assertEqual(self.listdir("/home/user"), [])
        self.assertEqual(self.listdir("/var"), ["tmp"])
        self.assertEqual(sh_ok(self, self.sid, "readlink /var/tmp"), "/tmp\n")
        self.assertEqual(self.listdir("/run"), [])
        self.assertEqual(probe_one(self, self.sid, "open", "/sys", "path"), "ENOENT")
        self.assertEqual(probe_one(self, self.sid, "open", "/sys/fs/cgroup", "path"), "ENOENT")
        # The top level: the skeleton's own directories, plus the host's
        # merged-/usr links (or binds) that exist on this host.
        top = {"dev", "etc", "home", "proc", "root", "run", "tmp", "usr", "var"}
        top |= {n for n in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
                if os.path.lexists("/" + n)}
        self.assertEqual(self.listdir("/"), sorted(top))

    def test_host_tmp_canary_absent(self):
        name = os.path.basename(self.tmp_canary)
        self.assertEqual(probe_one(self, self.sid, "open", "/tmp/" + name, "r"), "ENOENT")
        self.assertEqual(probe_one(self, self.sid, "open", "/var/tmp/" + name, "r"), "ENOENT")
        # The sandbox's /tmp holds only what we put there.
        self.assertEqual(self.listdir("/tmp"), ["probe"])
        self.assertEqual(self.listdir("/dev/shm"), [])

    def test_state_dir_unreachable(self):
        state = self.d.state
        for path in (state, os.path.join(state, "sbx.sock"), self.state_canary):
            self.assertEqual(probe_one(self, self.sid, "open", path, "path"), "ENOENT", path)
            self.assertEqual(probe_one(self, self.sid, "open", path, "path", user="root"),
                             "ENOENT", path)
        # Not under any other name either: search the whole tree but procfs
        # and the host's read-only /usr (which the daemon does not write).
        names = [os.path.basename(state), os.path.basename(self.state_canary), "sbx.sock",
                 os.path.basename(self.tmp_canary)]
        out = sh_ok(self, self.sid,
                    "find / -xdev \\( -path /proc -o -path /usr \\) -prune -o -print 2>/dev/null; "
                    "find /home/user /tmp /dev/shm /dev/pts /etc/ssl -print 2>/dev/null; true",
                    user="root")
        for n in names:
            self.assertNotIn(n, out)
        # No mount of the sandbox comes from the state dir or the host's /tmp:
        # the only host filesystem mounts are the template's read-only binds.
        mountinfo = sh_ok(self, self.sid, "cat /proc/self/mountinfo")
        self.assertNotIn(state, mountinfo)
        virtual = {"tmpfs", "proc", "devpts", "devtmpfs"}
        host_binds = {}
        for line in mountinfo.splitlines():
            f = line.split()
            fstype = f[f.index("-") + 1]
            # No host device node: /dev is the sandbox's own tmpfs, and
            # /proc's masks are its null.
            self.assertNotEqual(fstype, "devtmpfs", line)
            if fstype not in virtual or f[4] in ("/etc/ssl/sbx-ca.crt",
                                                   "/etc/ssl/sbx-ca-bundle.crt"):
                # (The CA's files are binds from /run, a tmpfs on most hosts.)
                host_binds[f[4]] = f[3]
                self.assertTrue(f[5].startswith("ro,"), line)
        allowed = {"/etc/" + n for n in os.listdir("/etc") if re.fullmatch(r"java-\d+-openjdk", n)}
        allowed |= {"/usr", "/etc/ssl/certs", "/etc/alternatives", "/etc/ld.so.cache",
                   "/etc/services", "/etc/protocols", "/etc/R", "/bin", "/sbin", "/lib", "/lib32",
                   "/lib64", "/libx32", "/etc/ssl/sbx-ca.crt", "/etc/ssl/sbx-ca-bundle.crt"}
        self.assertIn("/usr", host_binds)
        # The egress CA's public files, from where the daemon publishes them
        # (docs/egress.md, Credentials); never its key.
        for name in ("/etc/ssl/sbx-ca.crt", "/etc/ssl/sbx-ca-bundle.crt"):
            self.assertRegex(host_binds.get(name, ""),
                             r"^/sbx/egress-ca/[0-9a-f]{32}/(ca|bundle)\.crt$|"
                             r"^/run/sbx/egress-ca/[0-9a-f]{32}/(ca|bundle)\.crt$")
        self.assertLessEqual(set(host_binds), allowed, host_binds)


# Watches the paths argv[2:] until /tmp/others-done appears (made through
# the files API: nothing runs in the sandbox meanwhile), then uses argv[1]
# itself ("r:PATH" reads it, "w:PATH" writes it): "others=N self=M", in
# bytes of events.
WATCHER = r"""
import ctypes, os, select, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
mask = 0x1 | 0x2 | 0x10 | 0x20  # IN_ACCESS, IN_MODIFY, IN_CLOSE_NOWRITE, IN_OPEN
wds = [libc.inotify_add_watch(fd, p.encode(), mask) for p in sys.argv[2:]]
assert fd >= 0 and min(wds) >= 0, ctypes.get_errno()
def drain():
    n = 0
    while select.select([fd], [], [], 0.3)[0]:
        n += len(os.read(fd, 65536))
    return n
open("/tmp/watching", "w").close()
while not os.path.exists("/tmp/others-done"):
    time.sleep(0.02)
others = drain()
how, path = sys.argv[1].split(":", 1)
with open(path, how + "b") as f:
    f.read(1) if how == "r" else f.write(b"x")
print("others=%d self=%d" % (others, drain()))
"""

HOLDER = r"""
import fcntl, os, time
f = open("/usr/bin/python3", "rb")
fcntl.flock(f, fcntl.LOCK_EX)
open("/tmp/locked", "w").close()
while not os.path.exists("/tmp/release"):
    time.sleep(0.02)
"""

TRY_LOCK = r"""
import errno, fcntl
try:
    fcntl.flock(open("/usr/bin/python3", "rb"), fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except OSError as e:
    print(errno.errorcode[e.errno])
"""


class NoSharedHostInodes(DaemonTest):
    """Issue 16 items 7 and 8: /usr was the host's inodes bound in, so a
    sandbox saw the host's and other tenants' every exec and read there
    (inotify) and could block them (flock LOCK_EX on a read-only
    descriptor). Each sandbox's /usr is now an overlay of its own."""

    def start(self, sid, argv):
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": argv})
        self.assertEqual(r.status, 201, r)
        return r.json()["pid"]

    def wait_file(self, sid, path):
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/%s/files/stat?path=%s"
                                      % (sid, path)).status == 200, what=path)

    def result(self, sid, pid):
        r = self.d.api("GET", "/v1/sandboxes/%s/processes/%d/wait?timeout=60s" % (sid, pid))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["exit_code"], 0, r.json())
        return r.json()["stdout"]

    def test_usr_is_an_overlay_of_the_sandboxs_own(self):
        a, b = self.d.create(), self.d.create()
        line = [l for l in sh_ok(self, a, "cat /proc/self/mountinfo").splitlines()
                if l.split()[4] == "/usr"]
        self.assertEqual(len(line), 1, line)
        f = line[0].split()
        self.assertEqual(f[f.index("-") + 1], "overlay", line)
        self.assertTrue(f[5].startswith("ro,nosuid,nodev"), line)
        # Not the host's device, and not another sandbox's.
        devs = [sh_ok(self, sid, "stat -c %d /usr/bin/true").strip() for sid in (a, b)]
        self.assertNotEqual(devs[0], devs[1])
        self.assertNotIn(str(os.stat("/usr/bin/true").st_dev), devs)
        # Still the host's files, read-only.
        self.assertEqual(sh_ok(self, a, "sha256sum /usr/bin/true").split()[0],
                         sh_ok(self, b, "sha256sum /usr/bin/true").split()[0])

    def events_from_others(self, own_use, watched, host_use, other_cmd):
        """Sandbox a watches `watched` while the host (host_use) and another
        sandbox (other_cmd) use them; asserts it saw none of that, and saw
        its own use (own_use) of them: the watch works."""
        a, b = self.d.create(), self.d.create()
        pid = self.start(a, ["/usr/bin/python3", "-c", WATCHER, own_use] + watched)
        self.wait_file(a, "/tmp/watching")
        for _ in range(3):
            host_use()
        sh_ok(self, b, other_cmd)
        self.assertEqual(self.d.upload(a, "/tmp/others-done", b"").status, 201)
        out = self.result(a, pid)
        counts = dict(kv.split("=") for kv in out.split())
        self.assertEqual(counts["others"], "0", out)
        self.assertGreater(int(counts["self"]), 0, out)
        return a

    def test_inotify_sees_nobody_elses_use(self):
        def host_use():
            subprocess.run(["/usr/bin/true"], check=True)
            with open("/usr/bin/true", "rb") as f:
                f.read(1)
        self.events_from_others("r:/usr/bin/true", ["/usr/bin", "/usr/bin/true"], host_use,
                                "/usr/bin/true; cat /usr/bin/true > /dev/null")

    def test_dev_nodes_are_the_sandboxs_own(self):
        """The sibling: /dev/null, /dev/urandom, ... were the host's inodes
        bound in (a watch saw every write to /dev/null on the host)."""
        def host_use():
            with open("/dev/null", "wb") as f:
                f.write(b"x")
            with open("/dev/urandom", "rb") as f:
                f.read(16)
        a = self.events_from_others("w:/dev/null", ["/dev/null", "/dev/urandom"], host_use,
                                    "echo x > /dev/null; head -c 16 /dev/urandom > /dev/null")
        # Still the devices, and the mount is read-only, nosuid, noexec.
        self.assertEqual(sh_ok(self, a, "head -c 4 /dev/zero | od -An -tx1").split(),
                         ["00", "00", "00", "00"])
        line = [l for l in sh_ok(self, a, "cat /proc/self/mountinfo").splitlines()
                if l.split()[4] == "/dev"]
        self.assertEqual(len(line), 1, line)
        self.assertTrue(line[0].split()[5].startswith("ro,nosuid,noexec"), line)

    def test_flock_blocks_nobody_else(self):
        a, b = self.d.create(), self.d.create()
        pid = self.start(a, ["/usr/bin/python3", "-c", HOLDER])
        self.wait_file(a, "/tmp/locked")
        try:
            # The lock holds inside its sandbox ...
            self.assertEqual(py(self, a, TRY_LOCK).strip(), "EAGAIN")  # EWOULDBLOCK
            # ... and for nobody else: the host, another tenant.
            with open("/usr/bin/python3", "rb") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
            self.assertEqual(py(self, b, TRY_LOCK).strip(), "free")
        finally:
            self.assertEqual(self.d.upload(a, "/tmp/release", b"").status, 201)
        self.result(a, pid)


class WritesOutsideReadOnlyRoot(DaemonTest):
    """With --read-only-root, writes anywhere but the sandbox's disk fail
    with the exact errno, for root inside too."""

    extra_args = ("--read-only-root",)

    CREATE = {
        # path: errno as `user`, as root inside
        "/x": ("EROFS", "EROFS"),
        "/usr/x": ("EROFS", "EROFS"),
        "/usr/bin/x": ("EROFS", "EROFS"),
        "/bin/x": ("EROFS", "EROFS"),
        "/etc/x": ("EROFS", "EROFS"),
        "/dev/x": ("EROFS", "EROFS"),
        "/run/x": ("EROFS", "EROFS"),
        "/var/x": ("EROFS", "EROFS"),
        "/root/x": ("EACCES", "EROFS"),
        "/etc/ssl/certs/x": ("EROFS", "EROFS"),
        "/home/x": ("EROFS", "EROFS"),
        # procfs cannot create files at all.
        "/proc/x": ("ENOENT", "ENOENT"),
    }
    # Existing files: the permission check in may_open() runs before
    # do_dentry_open() asks the mount for write access, so a file the caller
    # may not write anyway answers EACCES, and only a file it could write
    # reaches the read-only mount and answers EROFS.
    WRITE_EXISTING = {
        # 0644, owned by root inside
        "/etc/passwd": ("EACCES", "EROFS"),
        # owned by host root, unmapped inside (nobody), in the sandbox's own
        # overlay without an upper layer: overlayfs checks a write to a
        # lower file as a read (it would copy the file up), which passes,
        # and the read-only mount refuses
        "/usr/bin/python3": ("EROFS", "EROFS"),
        "/bin/sh": ("EROFS", "EROFS"),
        # host-wide sysctls: only the initial namespace's root may write
        "/proc/sys/kernel/hostname": ("EACCES", "EACCES"),
        "/proc/sys/kernel/core_pattern": ("EACCES", "EACCES"),
        "/proc/sys/vm/drop_caches": ("EACCES", "EACCES"),
        "/proc/sys/net/ipv4/ip_forward": ("EACCES", "EACCES"),
        # 0666: the permission check passes; the read-only bind refuses
        "/proc/sys/kernel/ns_last_pid": ("EROFS", "EROFS"),
    }

    def setUp(self):
        self.sid = self.d.create()
        put_probe(self.d, self.sid)

    def check(self, table, mode):
        for user, col in (("user", 0), ("root", 1)):
            got = {p: probe_one(self, self.sid, "open", p, mode, user=user) for p in table}
            want = {p: v[col] for p, v in table.items()}
            self.assertEqual(got, want, user)

    def test_create_outside_disk(self):
        self.check(self.CREATE, "creat")

    def test_write_existing(self):
        self.check(self.WRITE_EXISTING, "w")

    def test_sysrq_trigger(self):
        # Absent on kernels without CONFIG_MAGIC_SYSRQ (this machine's).
        # Where present it is 0200, owned by the host's root (unmapped
        # inside), under a read-only bind: the permission check answers
        # first, EACCES (not exercised on a kernel without it).
        if os.path.exists("/proc/sysrq-trigger"):
            want = "EACCES"
        else:
            want = "ENOENT"
        for user in ("user", "root"):
            self.assertEqual(probe_one(self, self.sid, "open", "/proc/sysrq-trigger", "w", user=user),
                             want)

    def test_shell_level_writes(self):
        # What a script sees: rm, mv, chmod, ln in the read-only tree.
        res = self.d.sh(self.sid, "rm -f /etc/passwd; mv /etc/hosts /tmp/h; chmod 777 /etc; "
                        "ln -s /tmp /usr/evil; touch /bin/evil; mkdir /evil", user="root")
        self.assertNotEqual(res["exit_code"], 0)
        self.assertEqual(res["stderr"].count("Read-only file system"), 6, res["stderr"])
        self.assertEqual(sh_ok(self, self.sid, "ls /etc/passwd; ls /etc/hosts; ls -d /etc"),
                         "/etc/passwd\n/etc/hosts\n/etc\n")

    def test_the_disk_is_writable(self):
        # The control: the three writable places work for both users.
        for path in ("/home/user/ok", "/tmp/ok", "/dev/shm/ok"):
            self.assertEqual(probe_one(self, self.sid, "open", path, "creat"), "ok")
        self.assertEqual(probe_one(self, self.sid, "open", "/tmp/ok-root", "creat", user="root"), "ok")


class WritesOutside(WritesOutsideReadOnlyRoot):
    """By default "/" (the skeleton) is writable by root inside, as E2B's
    root is, and by nobody else: the host's directories, /dev and /proc/sys
    stay read-only mounts, and `user` writes only its disk. The skeleton is
    on the disk: in its limit."""

    extra_args = ()
    CREATE = {
        # path: errno as `user`, as root inside ("ok": created)
        "/x": ("EACCES", "ok"),
        "/usr/x": ("EROFS", "EROFS"),
        "/usr/bin/x": ("EROFS", "EROFS"),
        "/bin/x": ("EROFS", "EROFS"),
        "/etc/x": ("EACCES", "ok"),
        "/dev/x": ("EROFS", "EROFS"),
        "/run/x": ("EACCES", "ok"),
        "/var/x": ("EACCES", "ok"),
        "/root/x": ("EACCES", "ok"),
        "/etc/ssl/certs/x": ("EROFS", "EROFS"),
        "/home/x": ("EACCES", "ok"),
        "/proc/x": ("ENOENT", "ENOENT"),
    }
    WRITE_EXISTING = dict(WritesOutsideReadOnlyRoot.WRITE_EXISTING)
    WRITE_EXISTING["/etc/passwd"] = ("EACCES", "ok")  # root's own file, in its own skeleton

    def test_shell_level_writes(self):
        res = self.d.sh(self.sid, "set -e; rm /etc/passwd; mv /etc/hosts /tmp/h; chmod 700 /etc; "
                        "mkdir -p /opt/tool; echo x > /opt/tool/f", user="root")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(sh_ok(self, self.sid, "ls -d /opt/tool/f /tmp/h", user="root"), "/opt/tool/f\n/tmp/h\n")
        res = self.d.sh(self.sid, "ln -s /tmp /usr/evil; touch /bin/evil; mknod /dev/n c 1 3; "
                        "touch /etc/ssl/certs/evil", user="root")
        self.assertEqual(res["stderr"].count("Read-only file system"), 4, res["stderr"])

    def test_skeleton_in_the_disk_limit(self):
        sid = self.d.create(disk="64M")
        res = self.d.sh(sid, "dd if=/dev/zero of=/big bs=1M count=100", user="root")
        self.assertNotEqual(res["exit_code"], 0)
        self.assertIn("No space left on device", res["stderr"])
        # the disk's one limit: /tmp has what / left
        self.assertNotEqual(self.d.sh(sid, "dd if=/dev/zero of=/tmp/more bs=1M count=8")["exit_code"], 0)

    def test_a_part_root_replaced_is_refused(self):
        # Root inside moves /home away and makes a /home/user of its own: a
        # fork or snapshot must not take that directory for the disk's part.
        sid = self.d.create()
        sh_ok(self, sid, "echo real > /home/user/f")
        sh_ok(self, sid, "mv /home /home.away && mkdir -p /home/user && echo planted > /home/user/f", user="root")
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % sid, {})
        self.assertEqual(r.status, 500, r)
        self.assertIn("Invalid cross-device link", r.body.decode())
        self.assertEqual(sh_ok(self, sid, "cat /home.away/user/f"), "real\n")


class NothingCarried(DaemonTest):
    """Invariant 7 and 'leftovers between runs': a new sandbox starts clean."""

    pool = 1

    def test_files_processes_ipc_not_carried(self):
        a = self.d.create()
        sh_ok(self, a, "echo a > /home/user/left; echo a > /tmp/left; echo a > /dev/shm/left; "
                       "mkdir -p /tmp/dir/sub; echo x > /tmp/.hidden")
        # A background process and a System V shared memory segment.
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % a, {"cmd": "exec sleep 1000"})
        self.assertEqual(r.status, 201, r)
        shm = py(self, a, "import ctypes; libc=ctypes.CDLL(None); "
                          "print(libc.shmget(0x5b0, 4096, 0o1666))")
        self.assertGreaterEqual(int(shm), 0)
        self.assertEqual(sh_ok(self, a, "ipcs -m | grep -c '^0x'"), "1\n")
        kill_and_check_gone(self, self.d, a)

        # Several fresh sandboxes (one from the pool, the rest built now).
        for _ in range(3):
            b = self.d.create()
            self.assertEqual(sh_ok(self, b, "ls -A /home/user /tmp /dev/shm"),
                             "/dev/shm:\n\n/home/user:\n\n/tmp:\n")
            ps = self.d.exec(b, argv=["ps", "-eo", "pid=,comm="])
            self.assertEqual(ps["stdout"].split(), ["1", "memfd:sbx-init", str(ps["pid"]), "ps"])
            self.assertEqual(sh_ok(self, b, "ipcs -m | grep -c '^0x' || true"), "0\n")
            self.assertEqual(self.d.kill(b).status, 204)

    def test_concurrent_sandboxes_share_nothing(self):
        a = self.d.create()
        b = self.d.create()
        name = canary_name()
        sh_ok(self, a, "echo secret > /tmp/%s; echo secret > /dev/shm/%s" % (name, name))
        # An abstract unix socket listening in A: network namespaces scope
        # them (CVE-2020-15257), so B cannot reach it.
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % a,
                       {"argv": ["/usr/bin/python3", "-c",
                                 "import socket,time\ns=socket.socket(socket.AF_UNIX)\n"
                                 "s.bind('\\0%s')\ns.listen()\nprint('up',flush=True)\n"
                                 "time.sleep(1000)" % name]})
        self.assertEqual(r.status, 201, r)
        # In A the socket is reachable (retrying until the listener is up);
        # then, while it certainly listens, B gets ECONNREFUSED.
        retry = ("import socket,time\nfor i in range(3000):\n"
                 " s=socket.socket(socket.AF_UNIX)\n"
                 " try: s.connect('\\0%s'); print('ok'); break\n"
                 " except ConnectionRefusedError: s.close(); time.sleep(0.01)\n" % name)
        self.assertEqual(py(self, a, retry), "ok\n")
        code = ("import socket,errno\ns=socket.socket(socket.AF_UNIX)\n"
                "try:\n s.connect('\\0%s'); print('ok')\n"
                "except OSError as e: print(errno.errorcode[e.errno])" % name)
        self.assertEqual(py(self, b, code), "ECONNREFUSED\n")
        self.assertEqual(py(self, a, code), "ok\n")
        for p in ("/tmp/", "/dev/shm/"):
            res = self.d.sh(b, "cat " + p + name)
            self.assertEqual(res["exit_code"], 1, res)
            self.assertIn("No such file or directory", res["stderr"])


class ProcSysDev(DaemonTest):
    """/proc masks, /proc/sys read-only, no /sys, a minimal /dev."""

    MASKED = ["kcore", "keys", "key-users", "timer_list", "sched_debug", "latency_stats",
              "kallsyms", "kpagecount", "kpageflags", "kpagecgroup", "vmallocinfo", "slabinfo",
              "config.gz", "modules"]
    MASKED_DIRS = ["acpi", "scsi", "asound", "driver", "pressure"]

    def setUp(self):
        self.sid = self.d.create()
        put_probe(self.d, self.sid)

    def test_masked_proc_files(self):
        code = ("import os,sys,stat,json\nout={}\n"
                "for n in sys.argv[1:]:\n"
                " p='/proc/'+n\n"
                " try: st=os.stat(p)\n"
                " except FileNotFoundError: out[n]='absent'; continue\n"
                " data=open(p,'rb').read()\n"
                " out[n]='%s %d:%d %d' % ('chr' if stat.S_ISCHR(st.st_mode) else 'other',"
                " os.major(st.st_rdev), os.minor(st.st_rdev), len(data))\n"
                "print(json.dumps(out))")
        for user in ("user", "root"):
            res = self.d.exec(self.sid, argv=["/usr/bin/python3", "-c", code] + self.MASKED,
                              user=user)
            self.assertEqual(res["exit_code"], 0, res)
            got = json.loads(res["stdout"])
            for n in self.MASKED:
                host_has = os.path.exists("/proc/" + n)
                # Present on the host: covered by /dev/null (a 1:3 device
                # that reads empty); absent: absent inside too.
                self.assertEqual(got[n], "chr 1:3 0" if host_has else "absent", n)
            # Writing a masked file opens the host's /dev/null (a device node
            # on a read-only mount is still writable: the write goes to the
            # driver, not the filesystem), so it swallows the bytes.
            if os.path.exists("/proc/keys"):
                self.assertEqual(sh_ok(self, self.sid, "echo x > /proc/keys; wc -c < /proc/keys",
                                       user=user), "0\n")

    def test_masked_proc_dirs(self):
        for n in self.MASKED_DIRS:
            res = self.d.sh(self.sid, "ls -A /proc/%s" % n)
            if os.path.exists("/proc/" + n):
                self.assertEqual((res["exit_code"], res["stdout"]), (0, ""), n)
            else:
                self.assertEqual(res["exit_code"], 2, n)

    def test_boot_id_is_the_sandboxs_own(self):
        # The host's boot id would be one identifier shared by every
        # sandbox on the host, for all tenants: each sandbox has its own,
        # random, in the kernel's format, read-only, fresh at each boot.
        path = "/proc/sys/kernel/random/boot_id"
        with open(path) as f:
            host = f.read()
        other = self.d.create()
        a, b = sh_ok(self, self.sid, "cat " + path), sh_ok(self, other, "cat " + path)
        self.assertRegex(a, r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$")
        self.assertEqual(len({host, a, b}), 3, (host, a, b))
        self.assertEqual(sh_ok(self, self.sid, "cat " + path), a)  # the same for the sandbox's life
        res = self.d.sh(self.sid, "echo x > " + path, user="root")
        self.assertIn("Read-only file system", res["stderr"])
        self.assertNotEqual(self.d.sh(self.sid, "umount " + path, user="root")["exit_code"], 0)
        self.assertEqual(sh_ok(self, self.sid, "cat " + path), a)

    def test_proc_sys_read_only(self):
        # A shell's `>` opens with O_TRUNC, and do_open() takes the mount's
        # write access before the permission check when truncating: EROFS
        # here, where a plain O_WRONLY open gets EACCES (WRITE_EXISTING).
        for user in ("user", "root"):
            res = self.d.sh(self.sid, "echo x > /proc/sys/kernel/hostname", user=user)
            self.assertEqual(res["exit_code"], 1)
            self.assertIn("Read-only file system", res["stderr"])
        # Reads still work (programs read sysctls).
        self.assertEqual(sh_ok(self, self.sid, "cat /proc/sys/kernel/hostname"), "sandbox\n")
        mounts = sh_ok(self, self.sid, "grep -E ' /proc/(sys|irq|bus|fs) ' /proc/self/mountinfo")
        for line in mounts.splitlines():
            self.assertIn(" ro,", line)

    def test_no_sys(self):
        self.assertEqual(probe_one(self, self.sid, "open", "/sys", "path"), "ENOENT")
        self.assertEqual(probe_one(self, self.sid, "open", "/sys/kernel", "path", user="root"),
                         "ENOENT")

    def test_dev_exactly(self):
        self.assertEqual(sh_ok(self, self.sid, "ls -A /dev").split(),
                         sorted(["null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx",
                                 "shm", "fd", "stdin", "stdout", "stderr"]))
        self.assertEqual(sh_ok(self, self.sid, "ls -A /dev/pts").split(), ["ptmx"])
        kinds = sh_ok(self, self.sid,
                      "stat -c '%n %F %t:%T' /dev/null /dev/zero /dev/full /dev/random "
                      "/dev/urandom /dev/tty; readlink /dev/ptmx /dev/fd /dev/stdin /dev/stdout "
                      "/dev/stderr")
        self.assertEqual(kinds.splitlines(), [
            "/dev/null character special file 1:3",
            "/dev/zero character special file 1:5",
            "/dev/full character special file 1:7",
            "/dev/random character special file 1:8",
            "/dev/urandom character special file 1:9",
            "/dev/tty character special file 5:0",
            "pts/ptmx", "/proc/self/fd", "/proc/self/fd/0", "/proc/self/fd/1",
            "/proc/self/fd/2"])

    def test_dev_use(self):
        res = self.d.sh(self.sid, "echo hi > /dev/null && head -c 4 /dev/zero | od -An -tx1 && "
                        "head -c 16 /dev/urandom | wc -c && echo x > /dev/full")
        self.assertEqual(res["exit_code"], 1, res)
        self.assertEqual(res["stdout"], " 00 00 00 00\n16\n")
        self.assertIn("No space left on device", res["stderr"])  # /dev/full works as designed
        # No controlling terminal: /dev/tty opens with ENXIO.
        self.assertEqual(probe_one(self, self.sid, "open", "/dev/tty", "rw"), "ENXIO")

    def test_mknod(self):
        for user in ("user", "root"):
            # Landlock (no MAKE_CHAR right anywhere) answers before CAP_MKNOD.
            self.assertEqual(probe_one(self, self.sid, "mknod", "/tmp/n-" + user, user=user),
                             "EACCES")
            self.assertEqual(probe_one(self, self.sid, "mknod", "/dev/n-" + user, user=user),
                             "EROFS")
            self.assertEqual(probe_one(self, self.sid, "mknod", "/home/user/n", user=user),
                             "EACCES")
        self.assertEqual(sh_ok(self, self.sid, "ls -A /tmp"), "probe\n")
        # FIFOs are fine.
        self.assertEqual(sh_ok(self, self.sid, "mkfifo /tmp/f && stat -c %F /tmp/f"), "fifo\n")


class LeakedFds(DaemonTest):
    """Invariant 5: a command starts with exactly 0, 1, 2 (runc create.bats
    "detect fd leak as comprehensively as possible", CVE-2024-21626)."""

    def setUp(self):
        self.sid = self.d.create()
        put_probe(self.d, self.sid)

    def fds(self, user=None, **fields):
        f = dict(fields)
        if user:
            f["user"] = user
        res = self.d.exec(self.sid, argv=["/tmp/probe", "fds"], **f)
        self.assertEqual(res["exit_code"], 0, res)
        return dict(l.split(" ", 1) for l in res["stdout"].splitlines())

    def test_exec_fds(self):
        for user in ("user", "root"):
            got = self.fds(user=user)
            self.assertEqual(sorted(got), ["0", "1", "2"], got)
            self.assertEqual(got["0"], "/dev/null")
            self.assertTrue(got["1"].startswith("pipe:["), got)
            self.assertTrue(got["2"].startswith("pipe:["), got)
            self.assertNotEqual(got["1"], got["2"])
        got = self.fds(stdin="some input")
        self.assertEqual(sorted(got), ["0", "1", "2"], got)
        self.assertTrue(got["0"].startswith("pipe:["), got)

    def test_through_a_shell_and_background(self):
        out = sh_ok(self, self.sid, "/tmp/probe fds | cut -d' ' -f1 | tr '\\n' ' '")
        self.assertEqual(out, "0 1 2 ")
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"argv": ["/tmp/probe", "fds"], "stdin_open": True})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        # (The probe does not read its stdin; it exits by itself.)
        w = self.d.api("GET", "/v1/sandboxes/%s/processes/%d/wait?timeout=30" % (self.sid, pid))
        self.assertEqual(w.status, 200, w)
        lines = w.json()["stdout"].splitlines()
        self.assertEqual([l.split()[0] for l in lines], ["0", "1", "2"], lines)

    def test_host_view_of_init_fds(self):
        # From the host, like runc's create.bats: sbx-init holds exactly its
        # stdio (/dev/null), its control socket and the daemon's end of it
        # (kept so that the sandbox outlives a daemon restart), its
        # signalfd and deadline timer, O_PATH fds of the sandbox's own root
        # and disk (for a daemon that re-adopts it), its egress listener
        # (127.0.0.1:3128 in the sandbox's own network namespace, docs/
        # egress.md), the listener of its sudo (an abstract unix socket of
        # that namespace, src/iso/init/sudo.c), and the daemon's ends of
        # each command's output pipes;
        # nothing of the daemon's (state dir, database, cgroup dirs, the
        # init memfd, host paths).
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"argv": ["sleep", "1000"]})
        self.assertEqual(r.status, 201, r)
        wait_until(lambda: len(sandbox_host_pids(self.d, self.sid)) == 2, what="the sleep")
        pids = sandbox_host_pids(self.d, self.sid)
        init = [p for p in pids if open("/proc/%d/comm" % p).read() == "memfd:sbx-init\n"][0]
        cmd = [p for p in pids if p != init][0]

        def fds(pid):
            d = "/proc/%d/fd" % pid
            return {int(fd): os.readlink(os.path.join(d, fd)) for fd in os.listdir(d)}

        def settled(f):
            # init closes the command's own stdio ends just after the spawn
            return f if len(f) == 13 else None
        try:
            got = wait_until(lambda: settled(fds(init)), timeout=10, what="init's fds to settle")
        except AssertionError:
            got = fds(init)
        self.assertEqual(sorted(got)[:11], list(range(11)), got)
        self.assertEqual(len(got), 13, got)
        self.assertEqual([got[i] for i in (0, 1, 2)], ["/dev/null"] * 3)
        self.assertRegex(got[3], r"^socket:\[\d+\]$")
        self.assertRegex(got[4], r"^socket:\[\d+\]$")
        self.assertEqual(got[5], "anon_inode:[signalfd]")
        self.assertEqual(got[6], "anon_inode:[timerfd]")
        self.assertEqual((got[7], got[8]), ("/", "/"))  # the sandbox's root and disk
        # fd 9: a TCP socket listening on 127.0.0.1:3128, in init's own
        # network namespace (its /proc/PID/net/tcp), nowhere else.
        inode = re.match(r"^socket:\[(\d+)\]$", got[9]).group(1)
        with open("/proc/%d/net/tcp" % init) as f:
            rows = [line.split() for line in f.readlines()[1:]]
        mine = [r for r in rows if r[9] == inode]
        self.assertEqual([(r[1], r[3]) for r in mine], [("0100007F:0C38", "0A")], got)
        # fd 10: sudo's, a unix socket listening on @sbx-sudo
        inode = re.match(r"^socket:\[(\d+)\]$", got[10]).group(1)
        with open("/proc/%d/net/unix" % init) as f:
            rows = [line.split() for line in f.readlines()[1:]]
        self.assertEqual([r[7] for r in rows if r[6] == inode], ["@sbx-sudo"], got)
        pipes = sorted(v for k, v in got.items() if k > 10)
        self.assertEqual(len(pipes), 2)
        for p in pipes:
            self.assertRegex(p, r"^pipe:\[\d+\]$")
        # Wait until the sleep is asleep, not just exec'd: while coreutils
        # starts, glibc opens and closes files of its own (the locale's
        # gconv-modules.cache was caught open once, a CI flake; on a slow
        # guest one closed between the listing and its readlink).
        def asleep():
            with open("/proc/%d/syscall" % cmd) as f:
                return f.read().split()[0] in ("35", "230")  # nanosleep, clock_nanosleep
        wait_until(asleep, what="the sleep to sleep")
        # They are the read ends of the sleep's stdout and stderr.
        cmd_fds = fds(cmd)
        self.assertEqual(sorted([cmd_fds[1], cmd_fds[2]]), pipes)
        got = fds(cmd)
        self.assertEqual(sorted(got), [0, 1, 2], got)

    def test_init_fds_not_readable(self):
        for user in ("user", "root"):
            self.assertEqual(probe_one(self, self.sid, "open", "/proc/1/fd", "r", user=user),
                             "EACCES")
            self.assertEqual(probe_one(self, self.sid, "readlink", "/proc/1/fd/3", user=user),
                             "EACCES")


class InitProcFiles(DaemonTest):
    """PID 1 is not dumpable: its exe, memory, environment and fds are closed
    even to root inside (CVE-2019-5736, CVE-2016-9962)."""

    def test_proc_1(self):
        sid = self.d.create()
        put_probe(self.d, sid)
        for user in ("user", "root"):
            for link in ("/proc/1/exe", "/proc/1/root", "/proc/1/cwd", "/proc/1/fd/0"):
                self.assertEqual(probe_one(self, sid, "readlink", link, user=user), "EACCES",
                                 (user, link))
            for f, mode in (("/proc/1/mem", "r"), ("/proc/1/mem", "rw"), ("/proc/1/environ", "r"),
                            ("/proc/1/maps", "r"), ("/proc/1/exe", "r"), ("/proc/1/root", "path")):
                self.assertEqual(probe_one(self, sid, "open", "%s" % f, mode, user=user),
                                 "EACCES", (user, f, mode))
        # /proc/1/exe is the sealed memfd, never a host path; its name shows
        # in the one place that does not need ptrace access.
        self.assertEqual(sh_ok(self, sid, "cat /proc/1/comm"), "memfd:sbx-init\n")
        self.assertEqual(sh_ok(self, sid, "tr '\\0' '|' < /proc/1/cmdline"), "sbx-init|" + "|" * 7)
        # Our own /proc entries stay usable.
        self.assertEqual(probe_one(self, sid, "readlink", "/proc/self/root"), "=/")


if __name__ == "__main__":
    unittest.main()
