"""The microVM engine (docs/vm.md): one VM for the module, under TCG here.

QEMU and the guest kernel come from scripts/install-deps.sh; when they are
missing these tests FAIL (no skip): CI installs them.
"""
import os
import shutil
import socket
import tempfile
import unittest

from harness import Daemon, DaemonTest
from sbx_helpers import open_stream, read_event

VM_DIR = "/usr/local/lib/sbx/vm"
QEMU = "/usr/bin/qemu-system-x86_64"


def qemu_pids():
    """Pids of every QEMU process on the host (other users' too)."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0.endswith(b"qemu-system-x86_64"):
            out.add(int(name))
    return out


def qemu_of(sid):
    """Pids of the QEMUs in sandbox sid's cgroup: other daemons (other test
    runs on the same host) start QEMUs too."""
    out = set()
    for pid in qemu_pids():
        try:
            with open("/proc/%d/cgroup" % pid) as f:
                if "/%s\n" % sid in f.read():
                    out.add(pid)
        except OSError:
            pass
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class VM(DaemonTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        assert os.access(QEMU, os.X_OK), "qemu-system-x86 is not installed (scripts/install-deps.sh)"
        assert os.path.isfile(VM_DIR + "/vmlinuz"), "no guest kernel (scripts/install-deps.sh)"
        super().setUpClass()
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                "disk": "64M", "timeout": "10m"})
        assert r.status == 201, r
        cls.sb = r.json()
        cls.sid = cls.sb["id"]
        cls.qemu = qemu_of(cls.sid)

    def tearDown(self):
        pass  # the module's VM lives until test_zz_kill

    def sh(self, cmd, **kw):
        return self.d.sh(self.sid, cmd, **kw)

    def test_create_answers_isolation(self):
        self.assertEqual(self.sb["isolation"], "vm")
        got = self.d.api("GET", "/v1/sandboxes/" + self.sid).json()
        self.assertEqual(got["isolation"], "vm")
        self.assertEqual(len(self.qemu), 1, self.qemu)

    def test_exec_exit_codes_and_output(self):
        res = self.sh("echo out; echo err >&2; exit 3")
        self.assertEqual((res["exit_code"], res["stdout"], res["stderr"]), (3, "out\n", "err\n"))
        res = self.sh("kill -9 $$")
        self.assertEqual(res["signal"], "SIGKILL")
        res = self.d.exec(self.sid, argv=["/no/such"])
        self.assertEqual(res["exit_code"], 127)
        self.assertIn("No such file", res["reason"])

    def test_command_ends_with_its_main_process(self):
        # A child left in the background holds stdout and stderr open: the
        # command still ends when sh exits (as on the namespace engine),
        # with what it printed, and the child runs on. Before the agent
        # drained on exit, this waited for the sandbox's 10-minute end.
        res = self.d.api("POST", "/v1/sandboxes/%s/exec" % self.sid,
                         {"cmd": "sleep 1000 & echo started; echo err >&2",
                          "timeout": "5m"}, timeout=120)
        self.assertEqual(res.status, 200, res)
        res = res.json()
        self.assertEqual((res["exit_code"], res["stdout"], res["stderr"], res["timed_out"]),
                         (0, "started\n", "err\n", False))
        left = self.sh("pgrep -x sleep | wc -l")
        self.assertEqual(left["stdout"].strip(), "1", left)
        self.sh("pkill -x sleep")
        # --timeout is enforced although the child holds the pipes: the
        # group is killed and the answer says so.
        res = self.d.api("POST", "/v1/sandboxes/%s/exec" % self.sid,
                         {"cmd": "sleep 1000 & echo waiting; wait", "timeout": "2s"},
                         timeout=120)
        self.assertEqual(res.status, 200, res)
        res = res.json()
        self.assertEqual((res["stdout"], res["timed_out"]), ("waiting\n", True), res)
        self.assertEqual(self.sh("pgrep -x sleep | wc -l")["stdout"].strip(), "0")

    def test_guest_kernel_is_its_own(self):
        res = self.sh("uname -r")
        self.assertTrue(res["stdout"].strip().endswith("-cloud-amd64"), res)
        self.assertNotEqual(res["stdout"].strip(), os.uname().release)

    def test_stream(self):
        conn, resp = open_stream(self.d, "POST", "/v1/sandboxes/%s/exec" % self.sid,
                                 {"argv": ["sh", "-c", "echo ready; cat; echo eof"],
                                  "stream": True, "stdin_open": True})
        try:
            start = read_event(resp)
            self.assertEqual(start["type"], "start")
            self.assertEqual(read_event(resp), {"type": "stdout", "data": "ready\n"})
            stdin = "/v1/sandboxes/%s/processes/%d/stdin" % (self.sid, start["pid"])
            self.assertEqual(self.d.api("POST", stdin, b"line 1\n", raw=True).status, 204)
            self.assertEqual(read_event(resp), {"type": "stdout", "data": "line 1\n"})
            self.assertEqual(self.d.api("POST", stdin + "?eof=1", b"", raw=True).status, 204)
            rest = []
            while True:
                ev = read_event(resp)
                if ev is None:
                    break
                rest.append(ev)
                if ev["type"] == "exit":
                    break
            self.assertIn({"type": "stdout", "data": "eof\n"}, rest)
            self.assertEqual(rest[-1]["type"], "exit")
            self.assertEqual(rest[-1]["exit_code"], 0)
        finally:
            conn.close()

    def test_stdin_and_large_output(self):
        data = "x" * 300000
        res = self.d.exec(self.sid, argv=["wc", "-c"], stdin=data)
        self.assertEqual(res["stdout"].strip(), "300000")
        res = self.sh("head -c 1000000 /dev/zero | tr '\\0' y")
        self.assertEqual(res["stdout"], "y" * 1000000)

    def test_files_through_the_guest(self):
        res = self.d.exec(self.sid, argv=["sh", "-c", "cat > /home/user/f.txt"],
                          stdin="hello vm\n")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(self.sh("cat /home/user/f.txt")["stdout"], "hello vm\n")
        files = "/v1/sandboxes/%s/files?path=" % self.sid
        r = self.d.api("GET", files + "/home/user/f.txt")
        self.assertEqual((r.status, r.body), (200, b"hello vm\n"))
        self.assertEqual(self.sh("printf '\\000\\001\\377' > /tmp/bin; echo x > /tmp/locked; "
                                 "chmod 000 /tmp/locked")["exit_code"], 0)
        self.assertEqual(self.d.api("GET", files + "/tmp/bin").body, b"\x00\x01\xff")
        self.assertIn("No such file", self.assertError(
            self.d.api("GET", files + "/home/user/nope"), 404)["message"])
        self.assertError(self.d.api("GET", files + "/tmp/locked"), 403)
        self.assertError(self.d.api("GET", files + "/home/user"), 400)
        # The download left no process behind in the list.
        procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % self.sid).json()["processes"]
        self.assertEqual([p for p in procs if p.get("argv", [""])[0] == "sbx-fs"], [])
        # Uploads: written in the guest as the user, replaced atomically.
        data = bytes(range(256)) * 1000
        r = self.d.api("PUT", files + "/home/user/g.bin&mode=0600", data, raw=True)
        self.assertEqual(r.status, 201, r)
        got = r.json()
        del got["mtime"]
        self.assertEqual(got, {"name": "g.bin", "path": "/home/user/g.bin", "type": "file",
                               "size": len(data), "mode": "0600", "uid": 1000, "gid": 1000})
        self.assertEqual(self.d.api("GET", files + "/home/user/g.bin").body, data)
        self.assertEqual(self.sh("stat -c '%a %u %s' /home/user/g.bin")["stdout"],
                         "600 1000 256000\n")
        r = self.d.api("PUT", files + "/home/user/g.bin", b"new", raw=True)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.d.api("GET", files + "/home/user/g.bin").body, b"new")
        self.assertError(self.d.api("PUT", files + "/home/user/d/e/x", b"x", raw=True), 404)
        r = self.d.api("PUT", files + "/home/user/d/e/x&parents=1", b"x", raw=True)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.sh("cat /home/user/d/e/x")["stdout"], "x")
        self.assertError(self.d.api("PUT", files + "/bin/x", b"x", raw=True), 403)
        self.assertEqual(self.sh("mkdir /home/user/ro && chmod 555 /home/user/ro")["exit_code"], 0)
        self.assertError(self.d.api("PUT", files + "/home/user/ro/x", b"x", raw=True), 403)
        self.assertError(self.d.api("PUT", files + "/home/user/dir/", b"x", raw=True), 400)
        # A client that leaves mid-upload: nothing is written.
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.d.socket_path)
        s.sendall(b"PUT /v1/sandboxes/%s/files?path=/home/user/cut HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 100000\r\n\r\n" % self.sid.encode() + b"y" * 5000)
        self.sh("sleep 1")
        s.close()
        for _ in range(100):
            procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % self.sid).json()["processes"]
            if not [p for p in procs if p.get("argv", [""])[0] == "sbx-fs"]:
                break
            self.sh("sleep 0.1")
        self.assertEqual(self.sh("test -e /home/user/cut; echo $?")["stdout"], "1\n")
        # No temporary file left behind, no command left in the list.
        self.assertEqual(self.sh("ls -a /home/user /home/user/d/e /bin | grep -c sbx-upload")
                         ["stdout"], "0\n")
        procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % self.sid).json()["processes"]
        self.assertEqual([p for p in procs if p.get("argv", [""])[0] == "sbx-fs"], [])
        # The rest of the API too (test_vm_files.py compares every route).
        r = self.d.api("GET", "/v1/sandboxes/%s/files/stat?path=/home/user/f.txt" % self.sid)
        self.assertEqual((r.status, r.json()["size"]), (200, 9), r)
        self.assertFalse(os.path.exists("/home/user/f.txt"))

    def test_root_read_only_disk_sized(self):
        res = self.sh("touch /bin/x 2>&1; echo rc=$?")
        self.assertIn("Read-only file system", res["stdout"])
        self.assertIn("rc=1", res["stdout"])
        res = self.sh("dd if=/dev/zero of=/tmp/big bs=1M count=80; echo rc=$?; "
                      "stat -c %s /tmp/big; rm -f /tmp/big")
        self.assertIn("rc=1", res["stdout"], res)
        self.assertLessEqual(int(res["stdout"].split()[-1]), 64 << 20, res)
        self.assertIn("No space left on device", res["stderr"], res)

    def test_user_and_walls(self):
        self.assertEqual(self.sh("id -u; id -g")["stdout"], "1000\n1000\n")
        status = self.sh("cat /proc/self/status")["stdout"]
        fields = dict(l.split(":", 1) for l in status.splitlines() if ":" in l)
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(fields[cap].strip(), 16), 0, cap)
        self.assertEqual(fields["NoNewPrivs"].strip(), "1")
        self.assertEqual(fields["Seccomp"].strip(), "2")

    def test_memory_bomb_stops_inside_guest(self):
        res = self.sh("tail /dev/zero")
        self.assertNotEqual(res["exit_code"], 0, res)
        # One line without end grows in a 256 MiB guest until the guest kernel
        # OOM-kills it; the agent (oom_score_adj -1000) and the VM live on.
        self.assertEqual(res["signal"], "SIGKILL", res)
        self.assertEqual(self.sh("echo alive")["stdout"], "alive\n")
        for pid in self.qemu:
            self.assertTrue(alive(pid))

    def test_no_network_device(self):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        srv.settimeout(0.2)
        port = srv.getsockname()[1]
        accepted = []

        def accept():
            try:
                accepted.append(srv.accept())
            except OSError:
                pass

        try:
            self.assertEqual(self.sh("ls /sys/class/net")["stdout"].split(), ["lo"])
            for host in ("127.0.0.1", "10.0.2.2"):
                res = self.sh("nc -w 2 %s %d </dev/null; echo rc=$?" % (host, port))
                self.assertNotIn("rc=0", res["stdout"] + res["stderr"])
            accept()
            self.assertEqual(accepted, [])
        finally:
            srv.close()

    def test_pty_exec(self):
        # Terminals work on a VM (test_vm_pty.py has the details).
        r = self.d.api("POST", "/v1/sandboxes/%s/exec" % self.sid,
                       {"cmd": "test -t 0 && stty size; exit 2", "pty": {"cols": 80, "rows": 24}})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["exit_code"], r.json()["stdout"]), (2, "24 80\r\n"), r.json())

    def test_default_is_namespace(self):
        r = self.d.api("POST", "/v1/sandboxes", {})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["isolation"], "namespace")
        self.d.kill(r.json()["id"])
        r = self.d.api("POST", "/v1/sandboxes", {"isolation": "xen"})
        body = self.assertError(r, 400)
        self.assertIn("isolation must be", body["message"])

    def count(self):
        out = self.sh("cat /tmp/count 2>/dev/null")["stdout"].strip()
        return int(out) if out else 0

    def test_pause_resume(self):
        """The lifecycle API's pause freezes the VM's cgroup (QEMU and the
        relay): the guest stops where it is and goes on after resume."""
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % self.sid,
                       {"cmd": "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done"})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        base = "/v1/sandboxes/" + self.sid
        try:
            for _ in range(200):
                if self.count() > 0:
                    break
            r = self.d.api("POST", base + "/pause", {})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["state"], "paused")
            self.assertEqual(self.d.api("GET", base).json()["state"], "paused")
            for qpid in self.qemu:
                with open("/proc/%d/cgroup" % qpid) as f:
                    self.assertIn(self.sid, f.read())
            r = self.d.api("POST", base + "/exec", {"cmd": "true"})
            self.assertIn("paused", self.assertError(r, 409, "conflict")["message"])
            r = self.d.api("POST", base + "/resume", {})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["state"], "running")
            # The same process goes on counting from where it was.
            first = self.count()
            self.assertGreater(first, 0)
            for _ in range(200):
                if self.count() > first:
                    break
            self.assertGreater(self.count(), first)
            procs = self.d.api("GET", base + "/processes").json()
            self.assertIn(pid, [p["pid"] for p in procs["processes"]])
        finally:
            self.d.api("POST", "%s/processes/%d/signal" % (base, pid), {"signal": "SIGKILL"})

    def vcount(self, sid):
        out = self.d.sh(sid, "cat /tmp/vmcount 2>/dev/null")["stdout"].strip()
        return int(out) if out else 0

    def test_snapshot_restore_memory(self):
        """A snapshot of a VM is its memory (disk included, a tmpfs in guest
        RAM): a copy restored from it goes on from where the source was."""
        base = "/v1/sandboxes/" + self.sid
        store = os.path.join(self.d.state, "snapshots", b"default".hex())
        for bad in ("", "../x", ".hidden", "a/b", "x" * 65):
            self.assertError(self.d.api("POST", base + "/snapshots", {"name": bad}), 400,
                             "invalid_argument")
        self.assertError(self.d.api("POST", "/v1/sandboxes", {"snapshot": "nope"}), 404)
        # The shell's own memory holds the counter; the file only shows it.
        r = self.d.api("POST", base + "/processes",
                       {"cmd": "i=0; while :; do i=$((i+1)); echo $i > /tmp/vmcount; "
                               "sleep 0.05; done"})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["pid"]
        self.assertEqual(self.sh("echo before > /home/user/marker")["exit_code"], 0)
        copy = None
        try:
            for _ in range(200):
                if self.vcount(self.sid) > 2:
                    break
            before = self.vcount(self.sid)
            self.assertGreater(before, 2)
            # A paused VM cannot save its memory: a clear 409.
            self.assertEqual(self.d.api("POST", base + "/pause", {}).status, 200)
            r = self.d.api("POST", base + "/snapshots", {"name": "mem1"})
            self.assertIn("resume it", self.assertError(r, 409, "conflict")["message"])
            self.assertEqual(self.d.api("POST", base + "/resume", {}).status, 200)
            r = self.d.api("POST", base + "/snapshots", {"name": "mem1"})
            self.assertEqual(r.status, 201, r)
            snap = r.json()
            self.assertEqual((snap["name"], snap["isolation"], snap["source"], snap["memory"]),
                             ("mem1", "vm", self.sid, 256 << 20))
            self.assertGreater(snap["bytes"], 1 << 20)
            st = os.stat(os.path.join(store, "mem1", "vm.mig"))
            self.assertEqual((st.st_uid, st.st_mode & 0o777, st.st_size),
                             (0, 0o600, snap["bytes"]))
            self.assertError(self.d.api("POST", base + "/snapshots", {"name": "mem1"}), 409,
                             "conflict")
            # The source is unaffected: the same process goes on counting.
            after = self.vcount(self.sid)
            self.assertGreaterEqual(after, before)
            self.assertIn(pid, [p["pid"] for p in
                                self.d.api("GET", base + "/processes").json()["processes"]])
            # A restore must be the same machine, and a VM.
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "mem1", "isolation": "namespace"})
            self.assertIn("isolation must be `vm`", self.assertError(r, 400)["message"])
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "mem1", "memory": "512M"})
            self.assertIn("leave them out", self.assertError(r, 400)["message"])
            r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "mem1", "timeout": "5m"})
            self.assertEqual(r.status, 201, r)
            copy = r.json()["id"]
            self.assertEqual(r.json()["isolation"], "vm")
            copy_qemu = qemu_of(copy)
            self.assertEqual(len(copy_qemu), 1, copy_qemu)
            # The counter continues from the saved value, not from 0.
            got = self.vcount(copy)
            self.assertGreaterEqual(got, before)
            for _ in range(200):
                if self.vcount(copy) > got:
                    break
            self.assertGreater(self.vcount(copy), got)
            # Its files came along; what it writes stays its own.
            self.assertEqual(self.d.sh(copy, "cat /home/user/marker")["stdout"], "before\n")
            self.assertEqual(self.d.sh(copy, "echo copy > /home/user/mine")["exit_code"], 0)
            self.assertEqual(self.sh("cat /home/user/mine 2>&1; echo rc=$?")["stdout"].split()[-1],
                             "rc=1")
            # The source's counter is its own, still going.
            s1 = self.vcount(self.sid)
            for _ in range(200):
                if self.vcount(self.sid) > s1:
                    break
            self.assertGreater(self.vcount(self.sid), s1)
            # The running counter belongs to no one in the copy: not listed.
            procs = self.d.api("GET", "/v1/sandboxes/%s/processes" % copy).json()["processes"]
            self.assertNotIn(pid, [p["pid"] for p in procs])
            res = self.d.sh(copy, "ps -o pid,args | grep -c '[v]mcount'")
            self.assertEqual(res["stdout"].strip(), "1", res)
            # The snapshot is not the copy's lower layer: it goes while the copy runs.
            self.assertEqual(self.d.api("DELETE", "/v1/snapshots/mem1").status, 204)
            self.assertFalse(os.path.exists(os.path.join(store, "mem1")))
            self.assertError(self.d.api("DELETE", "/v1/snapshots/mem1"), 404)
            self.assertError(self.d.api("POST", "/v1/sandboxes", {"snapshot": "mem1"}), 404)
            self.assertEqual(self.d.sh(copy, "echo alive")["stdout"], "alive\n")
            self.assertEqual(self.d.kill(copy).status, 204)
            copy = None
            for q in copy_qemu:
                self.assertFalse(alive(q), "the copy's QEMU %d survived the kill" % q)
        finally:
            if copy:
                self.d.kill(copy)
            self.d.api("POST", "%s/processes/%d/signal" % (base, pid), {"signal": "SIGKILL"})
            self.d.api("DELETE", "/v1/snapshots/mem1")

    def test_cli_create_says_what_it_waits_for(self):
        """A VM create without a pooled VM boots for seconds: on a terminal
        sbx create says so after a second (never in a script's stderr)."""
        from harness import SBX
        from sbx_helpers import run_with_tty_stderr
        env = {"PATH": "/usr/bin:/bin", "SBX_STATE": self.d.state}
        rc, out, said = run_with_tty_stderr(
            [SBX, "create", "--isolation", "vm", "--memory", "256M", "--disk", "64M"], env)
        self.assertEqual(rc, 0, said)
        sid = out.decode().split()[-1]
        self.assertIn(b"sbx: creating the sandbox: booting a VM", said)
        self.assertEqual(self.d.kill(sid).status, 204)

    def test_zz_kill_leaves_no_qemu(self):
        self.assertTrue(self.qemu)
        self.assertEqual(self.d.kill(self.sid).status, 204)
        for pid in self.qemu:
            self.assertFalse(alive(pid), "QEMU %d survived the kill" % pid)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + self.sid).status, 404)


class VMBrokenFiles(unittest.TestCase):
    """A missing or corrupt kernel is a clear error at create (no boot)."""

    def check(self, setup, needle):
        tmp = tempfile.mkdtemp(prefix="sbx-vmdir-")
        os.chmod(tmp, 0o755)
        try:
            setup(tmp)
            d = Daemon(pool=0, extra=("--vm-dir", tmp)).start()
            try:
                r = d.api("POST", "/v1/sandboxes", {"isolation": "vm"})
                self.assertEqual(r.status, 503, r)
                self.assertIn(needle, r.json()["message"])
                self.assertEqual(d.api("GET", "/v1/sandboxes").json()["sandboxes"], [])
            finally:
                d.stop()
                self.assertEqual(d.cleanup(), [])
        finally:
            shutil.rmtree(tmp)

    def test_missing_kernel(self):
        self.check(lambda t: None, "isolation vm: no guest kernel at /tmp/sbx-vmdir-")

    def test_corrupt_kernel(self):
        def setup(t):
            with open(t + "/vmlinuz", "wb") as f:
                f.write(b"\x7fELF" + b"\0" * 4096)
        self.check(setup, "is corrupt (not a bzImage)")

    def test_corrupt_module(self):
        def setup(t):
            shutil.copy(VM_DIR + "/vmlinuz", t + "/vmlinuz")
            shutil.copy(VM_DIR + "/busybox", t + "/busybox")
            os.mkdir(t + "/modules")
            for m in ("virtio_ring", "virtio", "virtio_mmio", "virtio_console"):
                with open(t + "/modules/%s.ko" % m, "wb") as f:
                    f.write(b"garbage")
        self.check(setup, "modules/virtio_ring.ko is missing or corrupt")


if __name__ == "__main__":
    unittest.main()
