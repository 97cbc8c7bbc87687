#!/usr/bin/python3
"""sbx benchmark, side by side with bubblewrap, in one run.

    make bench                      # /usr/bin/python3 bench/bench.py --build build
    /usr/bin/python3 bench/bench.py --quick     # a shorter smoke run

Starts its own daemon (private state directory, cgroup parent `sbx-bench`,
uid range from 0xB0000000), measures

  1. `sbx run -- /bin/true` against bwrap running /bin/true (interleaved),
  2. the same with `/usr/bin/python3 -c pass`,
  3. sandbox creates/s and create+delete cycles/s with 1, 2, 4, 8 parallel
     clients (each a thread with its own keep-alive unix-socket connection),
     against bwrap starts/s with as many parallel launchers,
  4. the exec round trip in a running sandbox over one keep-alive
     connection, against a bare posix_spawn of /bin/true on the host,
  5. host memory per idle sandbox (200 idle sandboxes), against as many idle
     bwrap sandboxes,

prints a table against the design targets and writes build/bench.json.
Stdlib only; run it with Debian's /usr/bin/python3 as root.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "integration"))
from harness import cgroup_hierarchies, cgroup_version, leftovers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CGROUP_ROOT = "/sys/fs/cgroup"
IDS_PER_SANDBOX = 65536
# 0xB0000000: far from production (0x60000000) and above the integration
# tests' ranges ([0x80000000, 0xA0000000)), so both can run at once.
UID_BASE = 2952790016
CGROUP_PARENT = "sbx-bench"
MAX_SANDBOXES = 400
CLK_TCK = os.sysconf("SC_CLK_TCK")

BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib", "/lib",
         "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
TRUE = ["/bin/true"]
PYPASS = ["/usr/bin/python3", "-c", "pass"]


def log(*a):
    print(*a, flush=True)


def shell_join(argv):
    import shlex
    return " ".join(shlex.quote(a) for a in argv)


# ---------------------------------------------------------------------------
# statistics

def pct(xs, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def summary(xs_s):
    """Milliseconds summary of a list of durations in seconds."""
    ms = [x * 1e3 for x in xs_s]
    return {"n": len(ms), "median_ms": statistics.median(ms), "p99_ms": pct(ms, 99),
            "p90_ms": pct(ms, 90), "min_ms": min(ms), "mean_ms": statistics.fmean(ms),
            "max_ms": max(ms)}


def paired_ci(diffs, resamples=2000):
    """Median of per-round differences (sbx - bwrap, same round) with a 95%
    bootstrap interval: an interval that contains 0 is a tie within noise."""
    import random
    rnd = random.Random(1)
    n = len(diffs)
    meds = sorted(statistics.median(rnd.choices(diffs, k=n)) for _ in range(resamples))
    return {"median_ms": statistics.median(diffs), "ci95_ms": [meds[int(0.025 * resamples)],
                                                               meds[int(0.975 * resamples) - 1]]}


def ratio(a, b):
    return a / b if b else float("nan")


# ---------------------------------------------------------------------------
# a minimal HTTP/1.1 client on a unix socket: keep-alive, precise timing,
# far less client overhead than http.client

class HTTPError(Exception):
    pass


class Conn:
    def __init__(self, path, timeout=60):
        self.path = path
        self.timeout = timeout
        self.sock = None
        self.buf = b""

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s
        self.buf = b""

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise HTTPError("connection closed by the daemon")
        self.buf += d

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def request(self, method, path, body=None):
        """(status, body bytes). body: dict (sent as JSON), bytes or None."""
        if self.sock is None:
            self.connect()
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        head = "%s %s HTTP/1.1\r\nHost: localhost\r\n" % (method, path)
        if body is not None:
            head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        self.sock.sendall(head.encode() + b"\r\n" + (body or b""))
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        raw, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            headers[k.strip().lower()] = v.strip()
        if status in (204, 304) or method == "HEAD":
            data = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while self._line() != b"":
                        pass
                    break
                parts.append(self._exact(size))
                self._exact(2)
            data = b"".join(parts)
        elif "content-length" in headers:
            data = self._exact(int(headers["content-length"]))
        else:
            while True:
                try:
                    self._fill()
                except HTTPError:
                    break
            data, self.buf = self.buf, b""
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, data

    def json(self, method, path, body=None, expect=(200,)):
        st, data = self.request(method, path, body)
        if st not in expect:
            raise HTTPError("%s %s -> %d %r" % (method, path, st, data[:300]))
        return json.loads(data) if data else None


# ---------------------------------------------------------------------------
# host facts

def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for l in f:
            k, v = l.split(":", 1)
            out[k] = int(v.split()[0]) * 1024
    return out


def proc_status(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            st = f.read()
    except OSError:
        return None
    d = {}
    for l in st.splitlines():
        k, _, v = l.partition(":")
        d[k] = v.strip()
    return d


def children_of(ppid):
    kids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[1]) == ppid:
            kids.append(int(p))
    return kids


def cpu_seconds(pid, children=True):
    """utime+stime (+cutime+cstime) of a process, in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return 0.0
    f = st[st.rindex(")") + 2:].split()
    t = int(f[11]) + int(f[12])
    if children:
        t += int(f[13]) + int(f[14])
    return t / CLK_TCK


def host_busy_seconds():
    """CPU time all CPUs spent not idle since boot (every process and kernel
    thread, including other load on the host), in seconds."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / CLK_TCK


def pss(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for l in f:
                if l.startswith("Pss:"):
                    return int(l.split()[1]) * 1024
    except OSError:
        pass
    return 0


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------
# process launching (the same path for sbx, bwrap and the bare host)

class Launcher:
    def __init__(self, errlog):
        self.errlog = errlog
        self.env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    def run(self, argv, env=None):
        """Spawn argv (stdin and stdout /dev/null, stderr to the log), wait.
        Returns (wall seconds, rusage of the child and what it reaped)."""
        fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
              (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
              (os.POSIX_SPAWN_OPEN, 2, self.errlog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)]
        t0 = time.perf_counter()
        pid = os.posix_spawn(argv[0] if argv[0].startswith("/") else shutil.which(argv[0]),
                             argv, env or self.env, file_actions=fa)
        _, status, ru = os.wait4(pid, 0)
        t1 = time.perf_counter()
        if status != 0:
            raise RuntimeError("%s failed (status %d); see %s:\n%s" %
                               (shell_join(argv), status, self.errlog, tail(self.errlog)))
        return t1 - t0, ru


def tail(path, n=2000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------
# the daemon

class Daemon:
    def __init__(self, build, workdir, pool):
        # Private copies: others may rebuild BUILD while this runs, and every
        # figure must come from the same binaries.
        self.sbxd = os.path.join(workdir, "sbxd")
        self.sbx = os.path.join(workdir, "sbx")
        shutil.copy2(os.path.join(build, "sbxd"), self.sbxd)
        shutil.copy2(os.path.join(build, "sbx"), self.sbx)
        self.state = os.path.join(workdir, "state")
        os.mkdir(self.state, 0o700)
        self.log_path = os.path.join(workdir, "sbxd.log")
        self.pool = pool
        self.uid_base = UID_BASE
        self.uid_end = UID_BASE + (MAX_SANDBOXES + pool + 16) * IDS_PER_SANDBOX
        self.args = [self.sbxd, "--state", self.state, "--pool", str(pool),
                     "--cgroup-parent", CGROUP_PARENT, "--uid-base", str(UID_BASE),
                     "--max-sandboxes", str(MAX_SANDBOXES), "--kill-on-exit"]
        self.proc = None
        self.sock = os.path.join(self.state, "sbx.sock")
        self.warned_pool = False
        self.problems = []

    def start(self):
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("sbxd exited:\n" + tail(self.log_path))
            try:
                c = Conn(self.sock, timeout=5)
                st, _ = c.request("GET", "/healthz")
                c.close()
                if st == 200:
                    return self
            except (OSError, HTTPError):
                pass
            time.sleep(0.02)
        raise RuntimeError("sbxd did not start:\n" + tail(self.log_path))

    @property
    def pid(self):
        return self.proc.pid

    def zygote_pids(self):
        """The daemon's root-owned children (the zygote), not sandbox inits."""
        out = []
        for p in children_of(self.pid):
            st = proc_status(p)
            if st and int(st["Uid"].split()[0]) < self.uid_base:
                out.append(p)
        return out

    def sandbox_inits(self):
        out = []
        for p in children_of(self.pid):
            st = proc_status(p)
            if st and int(st["Uid"].split()[0]) >= self.uid_base:
                out.append(p)
        return out

    def cpu(self):
        """CPU seconds of the daemon, everything it reaped (sandbox inits and
        their commands) and the live zygote."""
        return cpu_seconds(self.pid) + sum(cpu_seconds(z) for z in self.zygote_pids())

    def wait_idle(self, conn, timeout=30):
        """Until no sandbox runs and the pool is full again. A pool that does
        not refill is reported (once) and the run goes on: creates still work
        without it, only slower."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            info = conn.json("GET", "/v1/info")
            if info.get("sandboxes", 0) == 0 and info.get("pool", 0) >= self.pool:
                return True
            time.sleep(0.05)
        if info.get("sandboxes", 0) != 0:
            raise RuntimeError("sandboxes left running: %r\n%s" % (info, self.diagnose()))
        if not self.warned_pool:
            self.warned_pool = True
            self.problems.append("the pool did not refill within %ds: %r" % (timeout, info))
            log("  WARNING: the daemon's pool did not refill within %ds (%r); its threads:\n%s"
                % (timeout, info, self.diagnose()))
        return False

    def diagnose(self):
        """What every thread of the daemon and its children is doing."""
        lines = []
        for pid in [self.pid] + children_of(self.pid):
            for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
                base = "/proc/%d/task/%s/" % (pid, tid)
                try:
                    with open(base + "comm") as f:
                        comm = f.read().strip()
                    with open(base + "wchan") as f:
                        wchan = f.read().strip()
                    with open(base + "syscall") as f:
                        sc = f.read().split()[:1]
                    with open(base + "stat") as f:
                        state = f.read().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                lines.append("  %d/%s %-16s %s wchan=%s syscall=%s" % (pid, tid, comm, state, wchan,
                                                                      sc[0] if sc else "?"))
        if shutil.which("gdb"):
            try:
                cmds = []
                for v in ("running", "pool_count", "creating", "pool_building", "stopping"):
                    cmds += ["-ex", "print sbx_core.%s" % v]
                out = subprocess.run(["gdb", "-p", str(self.pid), "-batch"] + cmds
                                     + ["-ex", "thread apply all bt 10"],
                                     capture_output=True, text=True, timeout=60).stdout
                lines += ["  " + l for l in out.splitlines()
                          if l.startswith(("#", "Thread", "$"))]
            except (OSError, subprocess.SubprocessError):
                pass
        return "\n".join(lines[:150])

    def wait_pool(self, conn, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if conn.json("GET", "/v1/info").get("pool", 0) >= self.pool:
                return
            time.sleep(0.05)

    def stop(self, timeout=60):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        return self.proc.returncode

    def cleanup(self):
        """After stop: nothing of this daemon may be left. Returns problems."""
        return leftovers(self.uid_base, self.uid_end, CGROUP_PARENT, self.state)


def delete_all(d, nthreads=4):
    c = Conn(d.sock)
    ids = [sb["id"] for sb in c.json("GET", "/v1/sandboxes")["sandboxes"]]
    c.close()
    return parallel_delete(d, ids, nthreads)


def parallel_delete(d, ids, nthreads):
    ids = list(ids)
    lock = threading.Lock()
    errors = []

    def worker():
        c = Conn(d.sock)
        while True:
            with lock:
                if not ids:
                    break
                sid = ids.pop()
            try:
                c.json("DELETE", "/v1/sandboxes/" + sid, expect=(204, 404))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        c.close()

    ts = [threading.Thread(target=worker) for _ in range(nthreads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------
# 1, 2: whole runs, interleaved

def bench_runs(d, launcher, cmd, runs, warmup, label):
    sbx_argv = [d.sbx, "run", "--"] + cmd
    bw_argv = BWRAP + cmd
    host_argv = cmd
    sbx_env = dict(launcher.env, SBX_STATE=d.state)
    info = Conn(d.sock)
    for _ in range(warmup):
        launcher.run(sbx_argv, sbx_env)
        launcher.run(bw_argv)
        launcher.run(host_argv)
    t_sbx, t_bw, t_host = [], [], []
    cpu_sbx_client = cpu_bw = 0.0
    pool_hits = 0
    d.wait_pool(info)
    cpu0 = d.cpu()
    for i in range(runs):
        pooled = info.json("GET", "/v1/info").get("pool", 0)
        pool_hits += pooled > 0
        order = (0, 1, 2) if i % 2 == 0 else (2, 1, 0)
        for which in order:
            if which == 0:
                t, ru = launcher.run(sbx_argv, sbx_env)
                t_sbx.append(t)
                cpu_sbx_client += ru.ru_utime + ru.ru_stime
            elif which == 1:
                t, ru = launcher.run(bw_argv)
                t_bw.append(t)
                cpu_bw += ru.ru_utime + ru.ru_stime
            else:
                t, _ = launcher.run(host_argv)
                t_host.append(t)
    # let the pool refill finish so its CPU is counted against these runs
    d.wait_pool(info)
    cpu_daemon = d.cpu() - cpu0
    info.close()
    diff_ms = [(a - b) * 1e3 for a, b in zip(t_sbx, t_bw)]
    res = {
        "label": label,
        "paired_diff_ms": paired_ci(diff_ms),
        "sbx_command": shell_join(["SBX_STATE=" + d.state] + sbx_argv),
        "bwrap_command": shell_join(bw_argv),
        "sbx": summary(t_sbx), "bwrap": summary(t_bw), "host": summary(t_host),
        "pool_hits": pool_hits, "runs": runs,
        "cpu_ms_per_run": {
            "sbx_client": cpu_sbx_client / runs * 1e3,
            "sbx_daemon_side": cpu_daemon / runs * 1e3,
            "sbx_total": (cpu_sbx_client + cpu_daemon) / runs * 1e3,
            "bwrap": cpu_bw / runs * 1e3,
        },
    }
    return res


def bench_run_breakdown(d, launcher, n):
    """Where the time of `sbx run -- /bin/true` goes: the steps the CLI takes,
    timed one by one over the API (same requests, one keep-alive connection),
    plus the CLI's own start-up. Odd iterations wait for the pool refill that
    the create triggers before exec'ing, to show what that refill costs the
    command that runs meanwhile."""
    c = Conn(d.sock)
    info = Conn(d.sock)
    env = dict(launcher.env, SBX_STATE=d.state)
    body = json.dumps({"argv": TRUE, "stream": True, "encoding": "base64"}).encode()
    T = {k: [] for k in ("cli_start", "create", "exec_now", "exec_after_refill", "delete", "steps_total")}
    for i in range(n + 4):
        d.wait_pool(info)
        t_cli, _ = launcher.run([d.sbx, "--help"], env)
        t0 = time.perf_counter()
        sid = c.json("POST", "/v1/sandboxes", {}, expect=(201,))["id"]
        t1 = time.perf_counter()
        if i % 2:
            d.wait_pool(info)
            time.sleep(0.005)
            t1b = time.perf_counter()
        else:
            t1b = t1
        st, data = c.request("POST", "/v1/sandboxes/%s/exec" % sid, body)
        t2 = time.perf_counter()
        if st != 200 or b'"exit_code":0' not in data.replace(b" ", b""):
            raise HTTPError("exec -> %d %r" % (st, data[:300]))
        c.json("DELETE", "/v1/sandboxes/" + sid, expect=(204,))
        t3 = time.perf_counter()
        if i < 4:
            continue
        T["cli_start"].append(t_cli)
        T["create"].append(t1 - t0)
        T["exec_after_refill" if i % 2 else "exec_now"].append(t2 - t1b)
        T["delete"].append(t3 - t2)
        if not i % 2:
            T["steps_total"].append(t3 - t0)
    c.close()
    info.close()
    return {k: summary(v) for k, v in T.items() if v}


def print_breakdown(b):
    names = [("cli_start", "sbx CLI start-up and exit (sbx --help)"),
             ("create", "POST /v1/sandboxes (pool hit)"),
             ("exec_now", "POST exec /bin/true, streamed, right away"),
             ("exec_after_refill", "  same, after the pool refill finished"),
             ("delete", "DELETE /v1/sandboxes/ID (waits for teardown)"),
             ("steps_total", "create + exec + delete (right away)")]
    log("  where a run's time goes (each step timed alone over the API, %d runs):" % b["create"]["n"])
    for k, name in names:
        if k in b:
            log("    %-46s median %7.2f ms  p90 %7.2f ms" % (name, b[k]["median_ms"], b[k]["p90_ms"]))


def print_runs(r):
    s, b, h = r["sbx"], r["bwrap"], r["host"]
    log("  %-34s %10s %10s %10s %10s" % ("", "median ms", "p90 ms", "p99 ms", "min ms"))
    for name, x in (("sbx run", s), ("bwrap", b), ("host, no sandbox", h)):
        log("  %-34s %10.2f %10.2f %10.2f %10.2f" % (name, x["median_ms"], x["p90_ms"],
                                                     x["p99_ms"], x["min_ms"]))
    log("  sbx/bwrap: median %.2fx, p99 %.2fx   (pool had a pre-built sandbox before %d/%d runs)"
        % (ratio(s["median_ms"], b["median_ms"]), ratio(s["p99_ms"], b["p99_ms"]),
           r["pool_hits"], r["runs"]))
    pd = r["paired_diff_ms"]
    log("  sbx - bwrap in the same round: median %+.2f ms, 95%% CI [%+.2f, %+.2f]%s"
        % (pd["median_ms"], pd["ci95_ms"][0], pd["ci95_ms"][1],
           " (a tie within noise)" if pd["ci95_ms"][0] <= 0 <= pd["ci95_ms"][1] else ""))
    c = r["cpu_ms_per_run"]
    log("  CPU per run: sbx %.2f ms (client %.2f + daemon/zygote/sandbox %.2f), bwrap %.2f ms"
        % (c["sbx_total"], c["sbx_client"], c["sbx_daemon_side"], c["bwrap"]))


# ---------------------------------------------------------------------------
# 3: creates per second

def bench_creates(d, clients, total, cycle_total):
    """creates/s with `clients` threads (own connection each), then deletes;
    then create+delete cycles/s."""
    res = {"clients": clients}
    ctl = Conn(d.sock)
    d.wait_idle(ctl)

    def run_phase(n_total, fn):
        lock = threading.Lock()
        left = [n_total]
        lat = []
        errors = []
        barrier = threading.Barrier(clients + 1, timeout=120)

        def worker():
            c = Conn(d.sock)
            c.connect()
            mine = []
            barrier.wait()
            while True:
                with lock:
                    if left[0] == 0:
                        break
                    left[0] -= 1
                try:
                    mine.append(fn(c))
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)
                    break
            c.close()
            with lock:
                lat.extend(mine)

        ts = [threading.Thread(target=worker) for _ in range(clients)]
        for t in ts:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        wall = time.perf_counter() - t0
        if errors:
            raise errors[0]
        return wall, lat

    created = []
    created_lock = threading.Lock()

    def create(c):
        t = time.perf_counter()
        sb = c.json("POST", "/v1/sandboxes", {}, expect=(201,))
        dt = time.perf_counter() - t
        with created_lock:
            created.append(sb["id"])
        return dt

    cpu0, host0 = d.cpu(), host_busy_seconds()
    wall, lat = run_phase(total, create)
    cpu_create, host_create = d.cpu() - cpu0, host_busy_seconds() - host0
    res["creates"] = total
    res["creates_per_s"] = total / wall
    res["create_latency"] = summary(lat)
    res["daemon_cpu_ms_per_create"] = cpu_create / total * 1e3
    res["host_cpu_ms_per_create"] = host_create / total * 1e3
    # deletes, with as many clients
    dwall = parallel_delete(d, created, clients)
    res["deletes_per_s"] = total / dwall
    d.wait_idle(ctl)

    def cycle(c):
        t = time.perf_counter()
        sb = c.json("POST", "/v1/sandboxes", {}, expect=(201,))
        c.json("DELETE", "/v1/sandboxes/" + sb["id"], expect=(204,))
        return time.perf_counter() - t

    cpu0, host0 = d.cpu(), host_busy_seconds()
    wall, lat = run_phase(cycle_total, cycle)
    cpu_cycle, host_cycle = d.cpu() - cpu0, host_busy_seconds() - host0
    res["cycles"] = cycle_total
    res["cycles_per_s"] = cycle_total / wall
    res["cycle_latency"] = summary(lat)
    res["daemon_cpu_ms_per_cycle"] = cpu_cycle / cycle_total * 1e3
    res["host_cpu_ms_per_cycle"] = host_cycle / cycle_total * 1e3
    d.wait_idle(ctl)
    ctl.close()
    return res


def bench_bwrap_starts(launcher, clients, total):
    lock = threading.Lock()
    left = [total]
    errors = []
    argv = BWRAP + TRUE

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            try:
                launcher.run(argv)
            except Exception as e:  # noqa: BLE001
                errors.append(e)
                return

    ts = [threading.Thread(target=worker) for _ in range(clients)]
    t0, host0 = time.perf_counter(), host_busy_seconds()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return total / (time.perf_counter() - t0), (host_busy_seconds() - host0) / total * 1e3


# ---------------------------------------------------------------------------
# 4: exec round trip

def bench_exec(d, launcher, runs, warmup):
    c = Conn(d.sock)
    sid = c.json("POST", "/v1/sandboxes", {}, expect=(201,))["id"]
    path = "/v1/sandboxes/%s/exec" % sid
    bodies = {
        "argv /bin/true": json.dumps({"argv": ["/bin/true"]}).encode(),
        "argv /bin/sh -c :": json.dumps({"argv": ["/bin/sh", "-c", ":"]}).encode(),
    }
    res = {"sandbox": sid}
    # the API floor: a GET of the sandbox over the same connection
    floor = []
    for i in range(warmup + runs):
        t = time.perf_counter()
        st, _ = c.request("GET", "/v1/sandboxes/" + sid)
        if i >= warmup:
            floor.append(time.perf_counter() - t)
        assert st == 200, st
    res["GET sandbox (API floor)"] = summary(floor)
    lat = {k: [] for k in bodies}
    cpu0 = d.cpu()
    for i in range(warmup + runs):
        for k, body in bodies.items():
            t = time.perf_counter()
            st, data = c.request("POST", path, body)
            dt = time.perf_counter() - t
            if st != 200:
                raise HTTPError("exec -> %d %r" % (st, data[:300]))
            r = json.loads(data)
            if r.get("exit_code") != 0:
                raise HTTPError("exec %s failed: %r" % (k, r))
            if i >= warmup:
                lat[k].append(dt)
    cpu = d.cpu() - cpu0
    for k in bodies:
        res[k] = summary(lat[k])
    res["daemon_cpu_ms_per_exec"] = cpu / ((warmup + runs) * len(bodies)) * 1e3
    host = []
    for i in range(warmup + runs):
        t, _ = launcher.run(TRUE)
        if i >= warmup:
            host.append(t)
    res["host posix_spawn /bin/true"] = summary(host)
    c.json("DELETE", "/v1/sandboxes/" + sid, expect=(204,))
    c.close()
    return res


# ---------------------------------------------------------------------------
# 5: memory per idle sandbox

def settle_meminfo(samples=5, gap=0.2):
    """Median of a few samples of /proc/meminfo after a short settle."""
    time.sleep(1.0)
    got = []
    for _ in range(samples):
        got.append(meminfo())
        time.sleep(gap)
    return {k: statistics.median(m[k] for m in got) for k in got[0]}


MEM_KEYS = ("MemAvailable", "MemFree", "Slab", "SReclaimable", "SUnreclaim", "KernelStack",
            "PageTables", "Shmem", "Cached", "Percpu", "VmallocUsed", "AnonPages")
# What a sandbox costs the kernel, without the page cache and anonymous memory
# of unrelated processes that make MemAvailable noisy on a shared host.
KERNEL_KEYS = ("Slab", "KernelStack", "PageTables", "Percpu", "VmallocUsed", "Shmem")


def mem_delta(lo, hi):
    """Growth from sample lo to sample hi (for MemAvailable/MemFree: the drop)."""
    return {k: (lo[k] - hi[k]) if k in ("MemAvailable", "MemFree") else hi[k] - lo[k]
            for k in MEM_KEYS if k in lo and k in hi}


def daemon_pss(d):
    pids = [d.pid] + children_of(d.pid)
    return sum(pss(p) for p in pids), len(pids)


def cgroup_mem(d, ids):
    """Mean memory charged to each sandbox's own cgroup (v1: usage and kmem)."""
    if cgroup_version() == 2:
        vals = [read_int(os.path.join(CGROUP_ROOT, CGROUP_PARENT, i, "memory.current")) for i in ids]
        vals = [v for v in vals if v is not None]
        return {"memory.current": statistics.fmean(vals) if vals else None}
    base = os.path.join(CGROUP_ROOT, "memory", CGROUP_PARENT)
    out = {}
    for f in ("memory.usage_in_bytes", "memory.kmem.usage_in_bytes"):
        vals = [read_int(os.path.join(base, i, f)) for i in ids]
        vals = [v for v in vals if v is not None]
        out[f] = statistics.fmean(vals) if vals else None
    return out


def bench_memory(d, n):
    c = Conn(d.sock)
    d.wait_idle(c)
    before = settle_meminfo()
    pss0, np0 = daemon_pss(d)
    created = []
    lock = threading.Lock()

    def worker(k):
        cc = Conn(d.sock)
        for _ in range(k):
            sid = cc.json("POST", "/v1/sandboxes", {}, expect=(201,))["id"]
            with lock:
                created.append(sid)
        cc.close()

    nthreads = 4
    ts = [threading.Thread(target=worker, args=(n // nthreads + (i < n % nthreads),))
          for i in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    d.wait_pool(c)
    after = settle_meminfo()
    pss1, np1 = daemon_pss(d)
    cg = cgroup_mem(d, created)
    parallel_delete(d, created, 4)
    d.wait_idle(c)
    released = settle_meminfo()
    c.close()
    delta = mem_delta(before, after)
    rdelta = mem_delta(released, after)
    per = {k: v / n / 2**20 for k, v in delta.items()}
    rper = {k: v / n / 2**20 for k, v in rdelta.items()}
    kern = sum(delta[k] for k in KERNEL_KEYS if k in delta)
    res = {
        "sandboxes": n,
        "delta_bytes": delta,
        "per_sandbox_mib": per,
        "released_per_sandbox_mib": rper,
        "pss_before": pss0, "pss_after": pss1, "processes_before": np0, "processes_after": np1,
        "per_sandbox_mib_memavailable": per["MemAvailable"],
        "per_sandbox_mib_memavailable_released": rper["MemAvailable"],
        "per_sandbox_mib_slab_plus_pss": (delta["Slab"] + pss1 - pss0) / n / 2**20,
        "per_sandbox_mib_slab_plus_pss_released": (rdelta["Slab"] + pss1 - pss0) / n / 2**20,
        "per_sandbox_mib_pss": (pss1 - pss0) / n / 2**20,
        "per_sandbox_mib_kernel_plus_pss": (kern + pss1 - pss0) / n / 2**20,
        "cgroup_mean_bytes": cg,
    }
    return res


def bench_bwrap_memory(n):
    before = settle_meminfo()
    procs = []
    argv = BWRAP + ["/bin/sleep", "3600"]
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, start_new_session=True))
        # every one must have reached its sleep
        deadline = time.time() + 60
        while time.time() < deadline:
            sleeping = sum(1 for p in procs for k in children_of(p.pid)
                           for g in [k] + children_of(k)
                           if (proc_status(g) or {}).get("Name") == "sleep")
            if sleeping >= n:
                break
            time.sleep(0.1)
        after = settle_meminfo()
        tree = []
        for p in procs:
            tree.append(p.pid)
            for k in children_of(p.pid):
                tree.append(k)
                tree.extend(children_of(k))
        total_pss = sum(pss(x) for x in tree)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        for p in procs:
            p.wait()
    delta = mem_delta(before, after)
    kern = sum(delta[k] for k in KERNEL_KEYS if k in delta)
    return {
        "sandboxes": n, "command": shell_join(argv), "delta_bytes": delta,
        "per_sandbox_mib_kernel_plus_pss": (kern + total_pss) / n / 2**20,
        "per_sandbox_mib": {k: v / n / 2**20 for k, v in delta.items()},
        "per_sandbox_mib_memavailable": delta["MemAvailable"] / n / 2**20,
        "per_sandbox_mib_slab_plus_pss": (delta["Slab"] + total_pss) / n / 2**20,
        "processes": len(tree),
    }


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory with sbx and sbxd")
    ap.add_argument("--quick", action="store_true", help="a short smoke run")
    ap.add_argument("--pool", type=int, default=4, help="daemon --pool (default 4)")
    ap.add_argument("--runs", type=int, help="runs of each command for 1, 2 (default 300)")
    ap.add_argument("--creates", type=int,
                    help="creates per client level (default 380: below --max-sandboxes 400 with the pool)")
    ap.add_argument("--idle", type=int, help="idle sandboxes for the memory figure (default 200)")
    ap.add_argument("--json", help="output file (default BUILD/bench.json)")
    ap.add_argument("--only", help="comma list of sections to run: run,python,create,exec,memory")
    a = ap.parse_args()

    if os.geteuid() != 0:
        sys.exit("bench: needs root (the daemon does)")
    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    for b in ("sbx", "sbxd"):
        if not os.access(os.path.join(build, b), os.X_OK):
            sys.exit("bench: %s/%s missing; run make first" % (build, b))
    if shutil.which("bwrap") is None:
        sys.exit("bench: bwrap not found (apt-get install bubblewrap)")
    q = a.quick
    runs = a.runs or (40 if q else 300)
    py_runs = a.runs or (20 if q else 150)
    warmup = 5 if q else 20
    # Stay below --max-sandboxes with the pool on top: at the cap, sbxd's pool
    # filler goes to sleep and deleting sandboxes does not wake it (kill
    # decrements `running` without signalling pool_cond), so the pool would
    # stay empty for the rest of the run.
    creates = a.creates or (60 if q else min(400, MAX_SANDBOXES - a.pool - 16))
    levels = (1, 2, 4, 8)
    idle = a.idle or (40 if q else 200)
    exec_runs = 100 if q else 500
    only = set(a.only.split(",")) if a.only else {"run", "python", "create", "exec", "memory"}
    out_json = a.json or os.path.join(build, "bench.json")

    if creates > MAX_SANDBOXES - a.pool:
        log("bench: note: %d creates per level reach --max-sandboxes %d with the pool on top;"
            " sbxd's pool filler may then stop refilling" % (creates, MAX_SANDBOXES))
    workdir = tempfile.mkdtemp(prefix="sbx-bench-")
    # The daemon's unprivileged front end (user sbx) must reach the state dir
    # inside: search permission, nothing more.
    os.chmod(workdir, 0o711)
    errlog = os.path.join(workdir, "children.err")
    launcher = Launcher(errlog)
    try:
        d = Daemon(build, workdir, a.pool)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    results = {
        "host": {"kernel": os.uname().release, "cpus": os.cpu_count(),
                 "cgroup": "v%d" % cgroup_version(),
                 "mem_total_mib": meminfo()["MemTotal"] / 2**20,
                 "loadavg_start": os.getloadavg()},
        "config": {"quick": q, "pool": a.pool, "runs": runs, "python_runs": py_runs,
                   "warmup": warmup, "creates_per_level": creates, "levels": list(levels),
                   "idle_sandboxes": idle, "exec_runs": exec_runs},
        "commands": {"daemon": None, "sbx_run": None, "bwrap": shell_join(BWRAP + ["CMD"])},
    }
    rc = 0
    try:
        d.start()
        results["commands"]["daemon"] = shell_join(d.args)
        results["commands"]["sbx_run"] = shell_join(["SBX_STATE=" + d.state, d.sbx, "run", "--", "CMD"])
        log("sbx benchmark%s: kernel %s, %d CPUs, cgroup %s, load %.2f"
            % (" (quick)" if q else "", results["host"]["kernel"], results["host"]["cpus"],
               results["host"]["cgroup"], os.getloadavg()[0]))
        results["binaries"] = binaries_info(build, d)
        log("build:  %s (repo at git %s; sbxd sha256 %s, built %s), run from private copies"
            % (os.path.relpath(build, ROOT) if build.startswith(ROOT) else build,
               results["binaries"]["git"], results["binaries"]["sbxd_sha256"][:12],
               results["binaries"]["sbxd_mtime"]))
        log("daemon: %s" % results["commands"]["daemon"])
        log("sbx:    %s" % results["commands"]["sbx_run"])
        log("bwrap:  %s" % results["commands"]["bwrap"])
        log("host:   CMD started directly (os.posix_spawn); every command is timed from")
        log("        posix_spawn to wait4 in this process, stdin/stdout /dev/null")

        if "run" in only:
            log("\n1. /bin/true, %d interleaved rounds after %d warmup (pool %d)" % (runs, warmup, a.pool))
            log("  [load average %.2f %.2f %.2f]" % os.getloadavg())
            results["run_true"] = bench_runs(d, launcher, TRUE, runs, warmup, "/bin/true")
            print_runs(results["run_true"])
            results["run_breakdown"] = bench_run_breakdown(d, launcher, 30 if q else 100)
            print_breakdown(results["run_breakdown"])
        if "python" in only:
            log("\n2. /usr/bin/python3 -c pass, %d interleaved rounds after %d warmup"
                % (py_runs, min(warmup, 10)))
            log("  [load average %.2f %.2f %.2f]" % os.getloadavg())
            results["run_python"] = bench_runs(d, launcher, PYPASS, py_runs, min(warmup, 10),
                                               "python3 -c pass")
            print_runs(results["run_python"])

        if "create" in only:
            log("\n3. sandbox creates, %d per level (pool %d: sustained rate, not a burst);"
                " bwrap /bin/true starts" % (creates, a.pool))
            log("  [load average %.2f %.2f %.2f]" % os.getloadavg())
            log("  %7s %10s %10s %9s %9s %10s %11s %10s %8s" % (
                "clients", "creates/s", "create p50", "p99 ms", "deletes/s", "cycles/s",
                "cycle p50", "bwrap st/s", "ratio"))
            results["creates"] = []
            for n in levels:
                r = bench_creates(d, n, creates, creates)
                r["bwrap_starts_per_s"], r["bwrap_host_cpu_ms_per_start"] = bench_bwrap_starts(
                    launcher, n, max(creates // 2, 40))
                results["creates"].append(r)
                log("  %7d %10.1f %10.2f %9.2f %9.1f %10.1f %11.2f %10.1f %7.2fx" % (
                    n, r["creates_per_s"], r["create_latency"]["median_ms"],
                    r["create_latency"]["p99_ms"], r["deletes_per_s"], r["cycles_per_s"],
                    r["cycle_latency"]["median_ms"], r["bwrap_starts_per_s"],
                    ratio(r["creates_per_s"], r["bwrap_starts_per_s"])))
            log("  CPU per op at 1/2/4/8 clients, ms (daemon+zygote+reaped inits | whole host, incl."
                " kernel threads and any other load):")
            log("    create        %s | %s" % (
                "/".join("%.2f" % r["daemon_cpu_ms_per_create"] for r in results["creates"]),
                "/".join("%.2f" % r["host_cpu_ms_per_create"] for r in results["creates"])))
            log("    create+delete %s | %s" % (
                "/".join("%.2f" % r["daemon_cpu_ms_per_cycle"] for r in results["creates"]),
                "/".join("%.2f" % r["host_cpu_ms_per_cycle"] for r in results["creates"])))
            log("    bwrap start   - | %s" % "/".join("%.2f" % r["bwrap_host_cpu_ms_per_start"]
                                                    for r in results["creates"]))
            log("  (a create's CPU of the sandbox init itself is only counted once it is reaped, so the"
                " daemon-side create figure is low; host CPU / %d CPUs bounds the rate)" % os.cpu_count())

        if "exec" in only:
            log("\n4. exec round trip, %d requests each over one keep-alive connection" % exec_runs)
            log("  [load average %.2f %.2f %.2f]" % os.getloadavg())
            r = bench_exec(d, launcher, exec_runs, 20)
            results["exec"] = r
            log("  %-44s %10s %10s %10s" % ("", "median ms", "p99 ms", "min ms"))
            for k in ("argv /bin/true", "argv /bin/sh -c :", "GET sandbox (API floor)",
                      "host posix_spawn /bin/true"):
                x = r[k]
                name = ("POST exec " + k) if k.startswith("argv") else k
                log("  %-44s %10.3f %10.3f %10.3f" % (name, x["median_ms"], x["p99_ms"], x["min_ms"]))
            if "run_true" in results:
                x = results["run_true"]["bwrap"]
                log("  %-44s %10.3f %10.3f %10.3f" % ("bwrap whole run /bin/true (from 1.)",
                                                      x["median_ms"], x["p99_ms"], x["min_ms"]))
            log("  daemon-side CPU per exec: %.2f ms" % r["daemon_cpu_ms_per_exec"])

        if "memory" in only:
            log("\n5. host memory per idle sandbox, %d idle sandboxes (pool %d refilled"
                " before both samples)" % (idle, a.pool))
            log("  [load average %.2f %.2f %.2f]" % os.getloadavg())
            r = bench_memory(d, idle)
            results["memory"] = r
            rb = bench_bwrap_memory(idle)
            results["memory_bwrap"] = rb
            log("  %-30s %10s %14s %12s" % ("MiB per sandbox", "sbx", "sbx released", "bwrap sleep"))
            for k in MEM_KEYS:
                if k in r["per_sandbox_mib"]:
                    log("  %-30s %10.3f %14.3f %12.3f" % (
                        "delta " + k, r["per_sandbox_mib"][k], r["released_per_sandbox_mib"][k],
                        rb["per_sandbox_mib"][k]))
            log("  %-30s %10.3f %14s %12.3f" % ("PSS of processes", r["per_sandbox_mib_pss"], "",
                                                rb["per_sandbox_mib_slab_plus_pss"]
                                                - rb["per_sandbox_mib"]["Slab"]))
            log("  %-30s %10.3f %14.3f %12.3f" % ("Slab + PSS", r["per_sandbox_mib_slab_plus_pss"],
                                                  r["per_sandbox_mib_slab_plus_pss_released"],
                                                  rb["per_sandbox_mib_slab_plus_pss"]))
            log("  %-30s %10.3f %14s %12.3f" % ("kernel parts + PSS (*)", r["per_sandbox_mib_kernel_plus_pss"],
                                                "", rb["per_sandbox_mib_kernel_plus_pss"]))
            log("  (*) Slab+KernelStack+PageTables+Percpu+VmallocUsed+Shmem growth + PSS: without the"
                " page cache and\n      anonymous memory of unrelated processes that make MemAvailable"
                " noisy on a shared host")
            a, b = r["per_sandbox_mib_memavailable"], r["per_sandbox_mib_memavailable_released"]
            if abs(a - b) > 0.3 * max(abs(a), abs(b), 0.1):
                log("  NOTE: MemAvailable dropped by %.2f MiB/sandbox on create but came back by %.2f on"
                    " delete: other load on the host moved it; trust Slab+PSS more" % (a, b))
            cg = {k: (v / 2**20 if v is not None else None) for k, v in r["cgroup_mean_bytes"].items()}
            log("  sandbox cgroup (mean): " + ", ".join(
                "%s %.3f MiB" % (k, v) for k, v in cg.items() if v is not None))
            log("  bwrap: %s" % rb["command"])
    except BaseException as e:
        rc = 1
        log("\nbench: FAILED: %s: %s" % (type(e).__name__, e))
        if d.proc is not None:
            log("daemon log tail:\n" + tail(d.log_path))
        if isinstance(e, KeyboardInterrupt):
            rc = 130
    finally:
        try:
            if d.proc is not None and d.proc.poll() is None:
                delete_all(d)
        except Exception as e:  # noqa: BLE001
            log("bench: deleting the remaining sandboxes: %s" % e)
        code = d.stop()
        problems = d.cleanup()
        if code not in (0, None):
            problems.append("sbxd exited with %r" % code)
        if problems:
            rc = rc or 1
            log("bench: after the daemon stopped: " + "; ".join(problems))
            log("daemon log tail:\n" + tail(d.log_path))
        shutil.rmtree(workdir, ignore_errors=True)
        results["cleanup_problems"] = problems
        results["warnings"] = d.problems
        results["loadavg_end"] = os.getloadavg()

    table = final_table(results)
    results["table"] = table
    os.makedirs(os.path.dirname(out_json), exist_ok=True)
    with open(out_json, "w") as f:
        json.dump(results, f, indent=2, default=str)
        f.write("\n")
    log("\nresults written to %s" % os.path.relpath(out_json, ROOT)
        if out_json.startswith(ROOT) else "\nresults written to %s" % out_json)
    return rc


def binaries_info(build, d):
    import hashlib
    with open(d.sbxd, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()
    try:
        git = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        git = "?"
    mtime = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                          time.gmtime(os.stat(os.path.join(build, "sbxd")).st_mtime))
    return {"git": git, "sbxd_sha256": h, "sbxd_mtime": mtime}


def final_table(R):
    rows = []

    def row(fig, sbx, bw, unit, target, met, ratio_v=None):
        rows.append({"figure": fig, "sbx": sbx, "bwrap": bw, "unit": unit,
                     "ratio": ratio_v if ratio_v is not None else (ratio(sbx, bw) if bw else None),
                     "target": target, "met": met})

    if "run_true" in R:
        s, b = R["run_true"]["sbx"], R["run_true"]["bwrap"]
        ci = R["run_true"]["paired_diff_ms"]["ci95_ms"]
        met = s["median_ms"] <= b["median_ms"]
        if not met and ci[0] <= 0:
            met = "tie"  # slower median, but within the noise of the paired rounds
        row("run /bin/true median", s["median_ms"], b["median_ms"], "ms", "<= bwrap", met)
        row("run /bin/true p99", s["p99_ms"], b["p99_ms"], "ms", "", None)
        c = R["run_true"]["cpu_ms_per_run"]
        row("run /bin/true CPU", c["sbx_total"], c["bwrap"], "ms", "", None)
    if "run_python" in R:
        s, b = R["run_python"]["sbx"], R["run_python"]["bwrap"]
        row("run python3 -c pass median", s["median_ms"], b["median_ms"], "ms", "", None)
        row("run python3 -c pass p99", s["p99_ms"], b["p99_ms"], "ms", "", None)
    if R.get("creates"):
        best = max(R["creates"], key=lambda r: r["creates_per_s"])
        for r in R["creates"]:
            row("creates/s, %d client%s" % (r["clients"], "s" if r["clients"] > 1 else ""),
                r["creates_per_s"], r["bwrap_starts_per_s"], "/s",
                ">= 400" if r is best else "", (r["creates_per_s"] >= 400) if r is best else None)
        for r in R["creates"]:
            row("create+delete/s, %d client%s" % (r["clients"], "s" if r["clients"] > 1 else ""),
                r["cycles_per_s"], r["bwrap_starts_per_s"], "/s", "", None)
    if "exec" in R:
        e = R["exec"]
        bw = R["run_true"]["bwrap"]["median_ms"] if "run_true" in R else None
        row("exec /bin/true median", e["argv /bin/true"]["median_ms"], bw, "ms", "<= 2",
            e["argv /bin/true"]["median_ms"] <= 2.0)
        row("exec /bin/true p99", e["argv /bin/true"]["p99_ms"],
            R["run_true"]["bwrap"]["p99_ms"] if "run_true" in R else None, "ms", "", None)
        row("exec sh -c : median", e["argv /bin/sh -c :"]["median_ms"], None, "ms", "", None)
        row("host spawn /bin/true median", e["host posix_spawn /bin/true"]["median_ms"], None,
            "ms", "", None)
    if "memory" in R:
        m, mb = R["memory"], R.get("memory_bwrap", {})
        row("MiB/idle sandbox, MemAvailable", m["per_sandbox_mib_memavailable"],
            mb.get("per_sandbox_mib_memavailable"), "MiB", "<= 1",
            m["per_sandbox_mib_memavailable"] <= 1.0)
        row("MiB/idle sandbox, Slab+PSS", m["per_sandbox_mib_slab_plus_pss"],
            mb.get("per_sandbox_mib_slab_plus_pss"), "MiB", "<= 1",
            m["per_sandbox_mib_slab_plus_pss"] <= 1.0)

    def f(v):
        if v is None:
            return "-"
        return "%.2f" % v if abs(v) < 100 else "%.0f" % v

    log("\n%-34s %10s %10s %8s %9s %6s" % ("figure", "sbx", "bwrap", "ratio", "target", "met?"))
    log("-" * 82)
    for r in rows:
        met = "-" if r["met"] is None else r["met"] if isinstance(r["met"], str) else (
            "yes" if r["met"] else "NO")
        unit = r["unit"]
        log("%-34s %10s %10s %8s %9s %6s" % (
            r["figure"] + " (" + unit + ")", f(r["sbx"]), f(r["bwrap"]),
            ("%.2fx" % r["ratio"]) if r["ratio"] is not None else "-", r["target"] or "-", met))
    if any(r["bwrap"] is not None and "creates" in r["figure"] or "create+" in r["figure"] for r in rows):
        log("(bwrap column for creates: bwrap /bin/true whole runs started per second with as many"
            " parallel launchers;\n exec rows: bwrap's whole /bin/true run; memory: idle bwrap"
            " running /bin/sleep;\n tie: slower median, but the 95% CI of the paired per-round"
            " difference contains 0)")
    return rows


if __name__ == "__main__":
    sys.exit(main())
