"""sbx integration test harness: real daemons, real sandboxes, real HTTP.

Each test class gets its own daemon (sbxd) with a private state directory,
its own cgroup parent and its own host uid range, so tests never touch a
production daemon or each other. After every test the harness checks that
nothing was left behind: no process in the daemon's uid range outside live
sandboxes, and after the daemon stops no cgroup, mount or state directory.

Run with Debian's /usr/bin/python3 (stdlib only).
"""
import hashlib
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("SBX_BUILD", "build"))
SBX = os.path.join(BUILD, "sbx")
SBXD = os.path.join(BUILD, "sbxd")
PROBE = os.path.join(BUILD, "probe")
CGROUP_ROOT = "/sys/fs/cgroup"
IDS_PER_SANDBOX = 65536
MAX_SANDBOXES = 64
# Test daemons take uid ranges in [0x80000000, 0xA0000000): 64 slots of 2^23
# ids. The benchmark uses 0xB0000000 and up, production 0x60000000.
HARNESS_SLOTS = 64
# In a software-emulated guest (tests/kernel/guest.py) the CPU is some 20
# times slower: waits for a server in a sandbox to come up are that much
# longer (bounds on waiting, never timings a test asserts).
EMULATED = os.environ.get("SBX_TEST_EMULATED") == "1"
SLOW = 4 if EMULATED else 1

_daemon_counter = itertools.count()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:300])


def cgroup_hierarchies():
    """Directories under which a daemon with cgroup parent P creates P/<id>."""
    if cgroup_version() == 2:
        return [CGROUP_ROOT]
    return [os.path.join(CGROUP_ROOT, c) for c in ("memory", "pids", "cpu", "cpuacct", "freezer")
            if os.path.isdir(os.path.join(CGROUP_ROOT, c))]


def processes_with_uid_in(lo, hi):
    """(pid, uid, comm) of every host process whose real uid is in [lo, hi)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/status" % pid) as f:
                status = f.read()
        except OSError:
            continue
        uid = comm = None
        for line in status.splitlines():
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
            elif line.startswith("Name:"):
                comm = line.split(None, 1)[1] if len(line.split()) > 1 else ""
        if uid is not None and lo <= uid < hi:
            found.append((int(pid), uid, comm))
    return found


def cgroup_version():
    return 2 if os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")) else 1


_service = []


def delegated_service():
    """cgroup v2, with the harness alone in a cgroup of its own (a delegated
    service: tests/kernel's guests run the suites so): that cgroup, from the
    root without its leading '/', with the harness moved into its leaf
    "runner", so that each test daemon runs in a delegated cgroup of its
    own below it as it would under systemd. None otherwise (cgroup v1; a
    login shell's cgroup): daemons then put their sandboxes' cgroups at the
    root. SBX_TEST_DELEGATE=0 turns it off."""
    if _service:
        return _service[0]
    found = None
    if cgroup_version() == 2 and os.environ.get("SBX_TEST_DELEGATE", "1") != "0":
        with open("/proc/self/cgroup") as f:
            own = f.read().strip().split("::", 1)[1].strip("/")
        leaf = os.path.basename(own)
        if own and leaf == "runner":
            found = os.path.dirname(own)
        elif own:
            base = os.path.join(CGROUP_ROOT, own)
            with open(os.path.join(base, "cgroup.procs")) as f:
                procs = f.read().split()
            if procs == [str(os.getpid())]:
                os.makedirs(os.path.join(base, "runner"), exist_ok=True)
                with open(os.path.join(base, "runner", "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
                with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory +pids +cpu")
                found = own
    _service.append(found)
    return found


def enter_cgroup(path):
    """A preexec_fn that moves the child into cgroup `path` (from the root),
    or None."""
    if path is None:
        return None
    procs = os.path.join(CGROUP_ROOT, path, "cgroup.procs")

    def enter():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    return enter


def leftovers(uid_base, uid_end, cgroup_parent, state):
    """After a daemon stopped: what it left behind (processes in its uid
    range, cgroups under its parent, mounts of its state dir), removed as
    far as possible. Returns the problems found, [] when clean."""
    problems = []
    deadline = time.time() + 5
    while True:
        left = processes_with_uid_in(uid_base, uid_end)
        if not left or time.time() > deadline:
            break
        time.sleep(0.05)
    if left:
        problems.append("processes left: %r" % left[:10])
        for pid, _, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for h in cgroup_hierarchies():
        parent = os.path.join(h, cgroup_parent)
        if not os.path.isdir(parent):
            continue
        subs = [d for d in os.listdir(parent) if os.path.isdir(os.path.join(parent, d))]
        if subs:
            problems.append("cgroups left in %s: %r" % (parent, subs))
        for d in subs:
            try:
                os.rmdir(os.path.join(parent, d))
            except OSError:
                pass
        try:
            os.rmdir(parent)
        except OSError as e:
            problems.append("cannot remove %s: %s" % (parent, e))
    with open("/proc/self/mountinfo") as f:
        mounts = [l for l in f if state in l]
    if mounts:
        problems.append("mounts left: %r" % mounts)
    return problems


class Daemon:
    """One sbxd with a private state dir, cgroup parent and uid range."""

    def __init__(self, pool=2, listen=None, extra=(), max_sandboxes=MAX_SANDBOXES,
                 kill_on_exit=True, state_on_tmpfs=False):
        n = next(_daemon_counter)
        self.tag = "sbx-test-%d-%d" % (os.getpid(), n)
        self.state = tempfile.mkdtemp(prefix=self.tag + "-")
        # A state directory on a tmpfs of its own: a file system that takes
        # idmapped mounts only from Linux 6.3 (snapshots are copies below).
        self.state_tmpfs = state_on_tmpfs
        if state_on_tmpfs:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700,size=1g", "sbx-test-state",
                            self.state], check=True)
        # The sandboxes' cgroups, from the cgroup root: TAG, or with a
        # delegated service SERVICE/TAG/TAG (the daemon's own delegated
        # cgroup SERVICE/TAG, its leaf SERVICE/TAG/daemon).
        service = delegated_service()
        self.cgroup_parent = (service + "/" + self.tag + "/" + self.tag) if service else self.tag
        # Distinct ranges per daemon: 2^23 ids (128 sandboxes) each, far from
        # the production default (0x60000000). Not the last slot: the daemon
        # wants room for twice --max-sandboxes ranges below 2^32 - 1.
        self.uid_base = 0x80000000 + ((os.getpid() * 16 + n) % HARNESS_SLOTS) * (1 << 23)
        self.uid_end = self.uid_base + (max_sandboxes + pool + 16) * IDS_PER_SANDBOX
        self.listen = listen
        self.pool = pool
        self.args = [SBXD, "--state", self.state, "--pool", str(pool),
                     "--cgroup-parent", self.tag, "--uid-base", str(self.uid_base),
                     "--max-sandboxes", str(max_sandboxes)] + list(extra)
        # Python importing numpy, pandas and matplotlib takes minutes there.
        if EMULATED and not any(a.startswith("--code-start-timeout") for a in extra):
            self.args += ["--code-start-timeout", "10m"]
        # By default a stopped daemon leaves running sandboxes for the next
        # start; a test daemon's stop must leave nothing (see test_restart).
        if kill_on_exit:
            self.args.append("--kill-on-exit")
        if listen:
            self.args += ["--listen", listen]
        self.log_path = os.path.join(tempfile.gettempdir(), self.tag + ".log")
        self.proc = None

    @property
    def socket_path(self):
        return os.path.join(self.state, "sbx.sock")

    @property
    def daemon_cgroup(self):
        """The delegated cgroup a daemon of this one's parent runs in (from
        the root), or None: made on first use."""
        if not delegated_service():
            return None
        own = os.path.dirname(self.cgroup_parent)
        os.makedirs(os.path.join(CGROUP_ROOT, own), exist_ok=True)
        return own

    def popen_kwargs(self):
        """What starts an sbxd process as this daemon (Daemon.start, and
        tests that start one by hand): in its delegated cgroup, or in its
        leaf once the first start made the cgroup an inner one."""
        own = self.daemon_cgroup
        if own is None:
            return {}
        leaf = own + "/daemon"
        where = leaf if os.path.isdir(os.path.join(CGROUP_ROOT, leaf)) else own
        return {"preexec_fn": enter_cgroup(where)}

    def remove_daemon_cgroup(self):
        """After the daemon's end: its delegated cgroup and leaf, if empty."""
        own = self.daemon_cgroup
        if own is None:
            return
        for d in (own + "/daemon", own):
            try:
                os.rmdir(os.path.join(CGROUP_ROOT, d))
            except OSError:
                pass

    def start(self, _attempt=0):
        self.log = open(self.log_path, "wb")
        env = dict(os.environ)
        # A sanitizer build: keep ASan's quarantine of freed memory small, so
        # that the tests bounding the daemon's memory measure the daemon,
        # and make any report end the daemon with a failure the tests see.
        env.setdefault("ASAN_OPTIONS", "quarantine_size_mb=8:detect_leaks=1:abort_on_error=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, **self.popen_kwargs())
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                log = self.read_log()
                if "is using uid base" in log and _attempt < 16:
                    # Another test run (or a benchmark) holds this range:
                    # the daemon's host-wide lock said so. Take another.
                    self.log.close()
                    span = self.uid_end - self.uid_base
                    slot = (self.uid_base - 0x80000000) // (1 << 23)
                    self.uid_base = 0x80000000 + ((slot + 17) % HARNESS_SLOTS) * (1 << 23)
                    self.uid_end = self.uid_base + span
                    self.args[self.args.index("--uid-base") + 1] = str(self.uid_base)
                    return self.start(_attempt + 1)
                # Nothing of this daemon exists yet but its state dir and log.
                self.log.close()
                self.remove_daemon_cgroup()
                shutil.rmtree(self.state, ignore_errors=True)
                os.unlink(self.log_path)
                raise RuntimeError("sbxd exited: %s" % log)
            try:
                if self.api("GET", "/healthz").status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("sbxd did not start: %s" % self.read_log())

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else 0
        self.log.close() if self.proc else None
        return rc

    def cleanup(self):
        """After stop: everything of this daemon must be gone. Returns problems."""
        early = []
        if self.state_tmpfs:
            # Not lazily: anything still mounted below it is a leftover.
            p = subprocess.run(["umount", self.state], capture_output=True, text=True)
            if p.returncode != 0:
                early.append("state tmpfs busy: %s" % p.stderr.strip())
            self.state_tmpfs = False
        problems = early + leftovers(self.uid_base, self.uid_end, self.cgroup_parent, self.state)
        self.remove_daemon_cgroup()
        # The egress CA's public files (docs/egress.md): a daemon that was
        # killed (not stopped) could not remove them.
        pub = "/run/sbx/egress-ca/" + hashlib.sha256(self.state.encode()).hexdigest()[:32]
        shutil.rmtree(pub, ignore_errors=True)
        for d in ("/run/sbx/egress-ca", "/run/sbx"):
            try:
                os.rmdir(d)
            except OSError:
                pass
        shutil.rmtree(self.state, ignore_errors=True)
        try:
            os.unlink(self.log_path)
        except OSError:
            pass
        return problems

    # ---- HTTP ----------------------------------------------------------

    def api(self, method, path, body=None, headers=None, timeout=None, raw=False):
        conn = UnixHTTPConnection(self.socket_path, timeout=timeout or 120 * SLOW)
        return _request(conn, method, path, body, headers, raw)

    def tcp(self, method, path, body=None, key=None, headers=None, timeout=None, raw=False):
        host, port = self.listen.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout or 120 * SLOW)
        h = dict(headers or {})
        if key is not None:
            h["Authorization"] = "Bearer " + key
        return _request(conn, method, path, body, h, raw)

    def create(self, **fields):
        r = self.api("POST", "/v1/sandboxes", fields)
        if r.status != 201:
            raise AssertionError("create failed: %r" % r)
        return r.json()["id"]

    def exec(self, sid, **fields):
        r = self.api("POST", "/v1/sandboxes/%s/exec" % sid, fields)
        if r.status != 200:
            raise AssertionError("exec failed: %r" % r)
        return r.json()

    def sh(self, sid, cmd, **fields):
        return self.exec(sid, cmd=cmd, **fields)

    def kill(self, sid):
        return self.api("DELETE", "/v1/sandboxes/%s" % sid)

    def new_key(self, tenant="default"):
        r = self.api("POST", "/v1/keys", {"tenant": tenant})
        assert r.status == 201, r
        return r.json()["key"]

    # ---- CLI -----------------------------------------------------------

    def sbx(self, *args, input=None, timeout=120, env=None, check=False):
        e = {"PATH": "/usr/bin:/bin", "SBX_STATE": self.state}
        if env:
            e.update(env)
        return subprocess.run([SBX] + list(args), input=input, capture_output=True,
                              timeout=timeout, env=e, check=check)

    def upload(self, sid, path, data, **query):
        from urllib.parse import urlencode
        q = urlencode(dict(path=path, **query))
        return self.api("PUT", "/v1/sandboxes/%s/files?%s" % (sid, q), data, raw=True)


def _request(conn, method, path, body, headers, raw):
    h = dict(headers or {})
    if body is not None and not raw and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    try:
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, dict(resp.getheaders()), data)
    finally:
        conn.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class DaemonTest(unittest.TestCase):
    """A test class with one daemon for all its tests (started in setUpClass).

    After each test, sandboxes the test left running are killed and the
    harness checks that none of their processes survived.
    """

    pool = 2
    listen = False
    extra_args = ()

    @classmethod
    def setUpClass(cls):
        listen = "127.0.0.1:%d" % free_port() if cls.listen else None
        cls.d = Daemon(pool=cls.pool, listen=listen, extra=cls.extra_args).start()
        # A subclass's setUpClass that fails after this line skips
        # tearDownClass, but class cleanups still run: its daemon (and the
        # sandboxes it would otherwise leave) never outlive the module.
        cls.addClassCleanup(cls._stop_if_running, cls.d)

    @staticmethod
    def _stop_if_running(d):
        if d.proc is not None and d.proc.poll() is None:
            d.stop()
            d.cleanup()

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        problems = cls.d.cleanup()
        if rc != 0:
            problems.append("sbxd exited with %r" % rc)
        if problems:
            raise AssertionError("after the daemon stopped: " + "; ".join(problems))

    def tearDown(self):
        r = self.d.api("GET", "/v1/sandboxes")
        for sb in r.json().get("sandboxes", []):
            self.d.kill(sb["id"])

    def assertError(self, resp, status, kind=None):
        self.assertEqual(resp.status, status, resp)
        body = resp.json()
        self.assertEqual(body["code"], status, body)
        self.assertIsInstance(body["message"], str)
        self.assertTrue(body["message"])
        if kind:
            self.assertEqual(body["error"], kind, body)
        return body
