"""The microVM engine (docs/vm.md): one VM for the module, under TCG here.

QEMU and the guest kernel come from scripts/install-deps.sh; when they are
missing these tests FAIL (no skip): CI installs them.
"""
import os
import shutil
import socket
import tempfile
import threading
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
        before = qemu_pids()
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                "disk": "64M", "timeout": "10m"})
        assert r.status == 201, r
        cls.sb = r.json()
        cls.sid = cls.sb["id"]
        cls.qemu = qemu_pids() - before

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

    def test_files_through_exec_and_api_501(self):
        res = self.d.exec(self.sid, argv=["sh", "-c", "cat > /home/user/f.txt"],
                          stdin="hello vm\n")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(self.sh("cat /home/user/f.txt")["stdout"], "hello vm\n")
        r = self.d.api("GET", "/v1/sandboxes/%s/files?path=/home/user/f.txt" % self.sid)
        body = self.assertError(r, 501, "not_implemented")
        self.assertIn("not supported for isolation vm", body["message"])
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

    def test_unsupported_answers_501(self):
        r = self.d.api("POST", "/v1/sandboxes/%s/exec" % self.sid,
                       {"cmd": "true", "pty": {"cols": 80, "rows": 24}})
        body = self.assertError(r, 501, "not_implemented")
        self.assertIn("isolation vm", body["message"])

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

    def test_snapshot_fork_template_network_501(self):
        base = "/v1/sandboxes/" + self.sid
        r = self.d.api("POST", base + "/snapshots", {"name": "s1"})
        self.assertIn("snapshots", self.assertError(r, 501, "not_implemented")["message"])
        r = self.d.api("POST", base + "/fork", {"count": 1})
        self.assertIn("fork", self.assertError(r, 501, "not_implemented")["message"])
        for body, what in (({"isolation": "vm", "template": "code-interpreter-v1"}, "templates"),
                           ({"isolation": "vm", "network": {"allow": ["*"]}}, "network egress")):
            r = self.d.api("POST", "/v1/sandboxes", body)
            self.assertIn(what, self.assertError(r, 501, "not_implemented")["message"])

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
