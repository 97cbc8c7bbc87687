#!/usr/bin/python3
"""sbx soak: a long mixed load against one daemon, then a leak check.

    make soak                                  # 300 s, 8 clients, 2 phases
    make soak SOAK_SECONDS=60 SOAK_CLIENTS=4
    /usr/bin/python3 tests/soak/soak.py --seconds 300 --clients 8 [--build build]

Starts its own daemon through the integration harness (private state
directory, cgroup parent and uid range; a TCP listener as well as the unix
socket), warms it up, waits until it is idle with a full pool and samples
it. Then N client threads (half on the admin unix socket, half over TCP
with an API key of their own tenant) drive a realistic mix for the given
time: sandboxes with various limits, short commands, stdin, NDJSON
streams (some abandoned mid-stream by closing the socket), background
processes fed through stdin and signalled, uploads and downloads (small
and 1 MiB), listings, lifetime changes, kills (also under a running
command), sandboxes that hit their limits (memory hog, fork bomb against
a small pids limit, a lifetime that runs out on its own), API keys
created, used and revoked, and bad requests.

The load runs in phases (two by default). After each, every sandbox the
soak made is deleted (so the result does not depend on what SIGTERM does
to sandboxes), the daemon is left to become idle with a full pool again,
and is sampled once more.

What is sampled is the whole daemon process tree: the sbxd process and
its descendants that are not sandbox processes (those run with host uids
in the daemon's range [uid_base, uid_end), and are not descended into).
That is sbxd and its zygote, and a front end when sbxd forks one. Per
process and in total: VmRSS, open fds, threads, mounts in its own
mountinfo; and the host's mount count, the cgroup directories under the
daemon's cgroup parent in every hierarchy, and the processes in the
daemon's uid range (the pool's idle sandboxes only, when idle).

Pass: after every phase, fds, threads, mounts, cgroups and processes
exactly as at the start (when a count differs, the fds' kinds and the
threads' names that differ are printed). RSS may grow by max(8 MiB, 10 %)
from the idle sample half way through to the end. Not from the start:
glibc's malloc keeps what it grew once, per arena (up to 8 per core, for
a thread-per-connection server) under a trim threshold that adapts up to
32 MiB, and caches up to 40 MiB of thread stacks; measured, that
plateau is 5-7 MiB above the start sample in the first minutes, then
flat. A leak grows with the load, in the second half as in the first:
with ~18000 requests per half, 8 MiB catches ~450 bytes per request.
No 5xx and no unexpected status anywhere (the limit scenarios expect
their own), every check on results true, the daemon alive throughout and
exiting 0, no error line in its log, and nothing left behind after it
stopped (harness.leftovers).

Stdlib only; run as root with Debian's /usr/bin/python3.
"""
import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import re
import socket
import sys
import threading
import time
import traceback
from urllib.parse import quote, urlencode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402
from harness import (Daemon, UnixHTTPConnection, cgroup_hierarchies, free_port,  # noqa: E402
                     processes_with_uid_in)

MIB = 1024 * 1024
# Statuses that are never right, whatever the scenario expected.
BAD = range(500, 600)


def log(*a):
    print(*a, flush=True)


def q(**params):
    return urlencode(params, quote_via=quote)


# ---------------------------------------------------------------------------
# sampling the daemon

def _read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def _proc_table():
    """pid -> (ppid, real uid) for every process on the host."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = _read("/proc/%s/stat" % name)
            status = _read("/proc/%s/status" % name)
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        uid = None
        for line in status.splitlines():
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
                break
        table[int(name)] = (ppid, uid)
    return table


def daemon_tree(root, uid_lo, uid_hi):
    """The daemon's own processes: root and its descendants, except sandbox
    processes (uid in [uid_lo, uid_hi)), whose subtrees are not entered."""
    table = _proc_table()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid not in table:
            continue
        uid = table[pid][1]
        if uid is not None and uid_lo <= uid < uid_hi:
            continue
        out.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return out


def sample_process(pid):
    status = _read("/proc/%d/status" % pid)
    fields = dict(l.split(":", 1) for l in status.splitlines() if ":" in l)
    argv = [a.decode(errors="replace") for a in _read("/proc/%d/cmdline" % pid, "rb").split(b"\0") if a]
    role = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv[:2])) \
        or fields["Name"].strip()
    fd_targets = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            fd_targets.append(_fd_kind(os.readlink("/proc/%d/fd/%s" % (pid, fd))))
        except OSError:
            pass
    thread_names = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            thread_names.append(_read("/proc/%d/task/%s/comm" % (pid, tid)).strip())
        except OSError:
            pass
    return {
        "pid": pid,
        "role": role,
        "rss_kib": int(fields.get("VmRSS", "0 kB").split()[0]),
        "fds": len(fd_targets),
        "threads": int(fields["Threads"]),
        "mounts": len(_read("/proc/%d/mountinfo" % pid).splitlines()),
        # For the report when counts differ: what the fds are, thread names.
        "fd_kinds": sorted(fd_targets),
        "thread_names": sorted(thread_names),
    }


def _fd_kind(target):
    """An fd's target without what changes from one sandbox to the next:
    the inode of a socket, pipe or pidfd (`socket:[123]` -> `socket`), a
    sandbox id in a path (a pooled sandbox's cgroup directories)."""
    if target.endswith("]") and ":[" in target:
        return target.split(":[", 1)[0]
    return re.sub(r"/[0-9a-z]{20}(?=/|$)", "/<sandbox>", target)


def _multiset_diff(a, b):
    """(added, removed) between two lists, as sorted lists."""
    from collections import Counter
    ca, cb = Counter(a), Counter(b)
    return sorted((cb - ca).elements()), sorted((ca - cb).elements())


def count_cgroup_dirs(parent):
    out = {}
    for h in cgroup_hierarchies():
        top = os.path.join(h, parent)
        n = 0
        for _, dirs, _ in os.walk(top):
            n += len(dirs)
        out[os.path.basename(h) or "unified"] = n
    return out


def sample(d):
    """Everything the soak compares, as of now."""
    procs = []
    for pid in daemon_tree(d.proc.pid, d.uid_base, d.uid_end):
        try:
            procs.append(sample_process(pid))
        except (OSError, KeyError, ValueError):
            pass  # gone meanwhile (the next sample will tell)
    # Roles name processes across samples (a zygote may be replaced and
    # get another pid); duplicates are numbered in pid order.
    seen = {}
    for p in procs:
        n = seen.get(p["role"], 0)
        seen[p["role"]] = n + 1
        if n:
            p["role"] = "%s #%d" % (p["role"], n + 1)
    host_mounts = _read("/proc/self/mountinfo").splitlines()
    return {
        "procs": {p["role"]: p for p in procs},
        "rss_kib": sum(p["rss_kib"] for p in procs),
        "fds": sum(p["fds"] for p in procs),
        "threads": sum(p["threads"] for p in procs),
        "mounts": sum(p["mounts"] for p in procs),
        "host_mounts": len(host_mounts),
        "host_mount_lines": [" ".join(l.split()[3:]) for l in host_mounts],
        "cgroups": count_cgroup_dirs(d.cgroup_parent),
        "uid_procs": len(processes_with_uid_in(d.uid_base, d.uid_end)),
    }


def info(d):
    r = d.api("GET", "/v1/info", timeout=30)
    return r.json() if r.status == 200 else {}


def wait_idle(d, pool, timeout=120):
    """Until no sandbox runs and the pool is full. Returns the info."""
    deadline = time.monotonic() + timeout
    while True:
        i = info(d)
        if i.get("sandboxes") == 0 and i.get("pool") == pool:
            return i
        if time.monotonic() > deadline:
            raise RuntimeError("the daemon did not become idle: %r" % i)
        time.sleep(0.1)


STRICT = ("fds", "threads", "mounts", "host_mounts", "uid_procs")


def settled_sample(d, pool, like=None, timeout=60):
    """A sample of the idle daemon. Threads and fds of finished
    connections go away shortly after the connection closes, so: the
    first sample equal to `like` on every strict count, else the first of
    two equal consecutive samples; at worst the last one after timeout."""
    deadline = time.monotonic() + timeout
    prev = None
    while True:
        wait_idle(d, pool)
        s = sample(d)
        key = tuple(s[k] for k in STRICT) + (tuple(sorted(s["cgroups"].items())), len(s["procs"]))
        if like is not None:
            want = tuple(like[k] for k in STRICT) + (tuple(sorted(like["cgroups"].items())),
                                                      len(like["procs"]))
            if key == want:
                return s
        elif prev == key:
            return s
        if time.monotonic() > deadline:
            return s
        prev = key
        time.sleep(0.5)


def rss_allowance_kib(start_kib):
    return max(8 * 1024, start_kib // 10)


def compare(start, end, base=None):
    """The table (start, [base,] end, end - start) and the failures.
    Counts must be back exactly where they started. RSS is judged from
    `base` (the idle sample half way through, when there is one) to the
    end: what malloc keeps once (arenas of connection threads, freed
    chunks under its trim threshold, the thread stack cache) has grown by
    then, while a leak grows with the load, in the second half as in the
    first."""
    rows, failures = [], []
    base = base or start

    def row(name, a, m, b, strict, unit=""):
        rows.append((name, a, m, b, b - a, unit))
        if strict and b != a:
            failures.append("%s: %s at the start, %s at the end" % (name, a, b))

    for role in sorted(set(start["procs"]) | set(end["procs"])):
        a, b = start["procs"].get(role), end["procs"].get(role)
        m = base["procs"].get(role) or {}
        if a is None or b is None:
            failures.append("process %r only %s" % (role, "at the end" if a is None else "at the start"))
            continue
        label = "%s (pid %d%s)" % (role, a["pid"], "" if a["pid"] == b["pid"] else " -> %d" % b["pid"])
        row(label + " rss", a["rss_kib"], m.get("rss_kib", ""), b["rss_kib"], False, "KiB")
        row(label + " fds", a["fds"], m.get("fds", ""), b["fds"], True)
        if a["fds"] != b["fds"]:
            added, removed = _multiset_diff(a["fd_kinds"], b["fd_kinds"])
            failures.append("%s fds added %r, removed %r" % (role, added[:20], removed[:20]))
        row(label + " threads", a["threads"], m.get("threads", ""), b["threads"], True)
        if a["threads"] != b["threads"]:
            added, removed = _multiset_diff(a["thread_names"], b["thread_names"])
            failures.append("%s threads added %r, removed %r" % (role, added, removed))
        row(label + " mounts", a["mounts"], m.get("mounts", ""), b["mounts"], True)
    row("total rss", start["rss_kib"], base["rss_kib"], end["rss_kib"], False, "KiB")
    allowed = rss_allowance_kib(base["rss_kib"])
    growth = end["rss_kib"] - base["rss_kib"]
    if growth > allowed:
        failures.append("total RSS grew by %d KiB %s (allowed %d KiB)"
                        % (growth, "in the second half" if base is not start else "", allowed))
    for key, name in (("fds", "total fds"), ("threads", "total threads"),
                      ("mounts", "total mounts (own mountinfo)"), ("host_mounts", "host mounts")):
        row(name, start[key], base[key], end[key], True)
    if start["host_mounts"] != end["host_mounts"]:
        a, b = set(start["host_mount_lines"]), set(end["host_mount_lines"])
        failures.append("host mounts added %r, removed %r" % (sorted(b - a)[:5], sorted(a - b)[:5]))
    for h in sorted(set(start["cgroups"]) | set(end["cgroups"])):
        row("cgroup dirs (%s)" % h, start["cgroups"].get(h, 0), base["cgroups"].get(h, 0),
            end["cgroups"].get(h, 0), True)
    row("processes in the uid range", start["uid_procs"], base["uid_procs"], end["uid_procs"], True)
    return rows, failures, allowed, growth


def print_table(rows, with_base):
    w = max(len(r[0]) for r in rows)
    log("%-*s %10s %10s %10s %10s" % (w, "", "start", "half" if with_base else "", "end", "delta"))
    for name, a, m, b, delta, unit in rows:
        log("%-*s %10s %10s %10s %+10d %s" % (w, name, a, m if with_base else "", b, delta, unit))


# ---------------------------------------------------------------------------
# HTTP clients: one keep-alive connection per client, unix socket or TCP

class Client:
    def __init__(self, d, stats, key=None, name="client"):
        self.d = d
        self.key = key  # None: the admin unix socket
        self.stats = stats
        self.name = name
        self.conn = None

    @property
    def transport(self):
        return "tcp" if self.key else "unix"

    def new_conn(self, timeout=120):
        if self.key:
            host, port = self.d.listen.rsplit(":", 1)
            return http.client.HTTPConnection(host, int(port), timeout=timeout)
        return UnixHTTPConnection(self.d.socket_path, timeout=timeout)

    def headers(self, extra=None):
        h = {"Authorization": "Bearer " + self.key} if self.key else {}
        h.update(extra or {})
        return h

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, raw=False, headers=None, timeout=120):
        """(status, body bytes) over the keep-alive connection; reconnects
        once if the daemon closed an idle connection."""
        if body is not None and not raw and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = self.new_conn(timeout)
            self.conn.timeout = timeout
            if self.conn.sock is not None:
                self.conn.sock.settimeout(timeout)
            sent = False
            try:
                self.conn.request(method, path, body=body, headers=self.headers(headers))
                sent = True
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.close()
                return resp.status, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # A keep-alive connection the server closed while idle:
                # retry once on a new one (only if nothing was answered).
                self.close()
                if attempt or (sent and not isinstance(e, http.client.RemoteDisconnected)):
                    raise
                self.stats.record("reconnect", type(e).__name__)
            except Exception:
                self.close()
                raise

    def call(self, op, method, path, body=None, expect=(200,), raw=False, headers=None,
             timeout=120):
        try:
            status, data = self.request(method, path, body, raw, headers, timeout)
        except Exception as e:
            self.stats.record(op, "exc", ok=False, detail="%s %s: %r" % (method, path, e))
            raise ScenarioFailed(op)
        ok = status in expect and status not in BAD
        self.stats.record(op, status, ok=ok,
                          detail=None if ok else "%s %s -> %d %r" % (method, path, status, data[:300]))
        if not ok:
            raise ScenarioFailed(op)
        return status, data

    def json(self, op, method, path, body=None, expect=(200,), **kw):
        status, data = self.call(op, method, path, body, expect, **kw)
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            self.stats.record(op + ":check", "json", ok=False, detail="not JSON: %r" % data[:200])
            raise ScenarioFailed(op)

    def check(self, op, cond, detail):
        if not cond:
            self.stats.record(op + ":check", "false", ok=False, detail=detail)
            raise ScenarioFailed(op)

    def stream(self, op, method, path, body, abandon_after=None, timeout=120):
        """An NDJSON stream on a connection of its own. Returns the events;
        with abandon_after=N, closes the socket after N events instead."""
        conn = self.new_conn(timeout)
        events = []
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers=self.headers())
            resp = conn.getresponse()
            ok = resp.status == 200
            self.stats.record(op, resp.status, ok=ok,
                              detail=None if ok else "%s %s -> %d %r" % (method, path, resp.status,
                                                                         resp.read()[:300]))
            if not ok:
                raise ScenarioFailed(op)
            while True:
                if abandon_after is not None and len(events) >= abandon_after:
                    break
                line = resp.readline()
                if not line:
                    break
                events.append(json.loads(line))
                if events[-1]["type"] == "exit":
                    break
        except ScenarioFailed:
            raise
        except Exception as e:
            self.stats.record(op, "exc", ok=False, detail="%s %s: %r" % (method, path, e))
            raise ScenarioFailed(op)
        finally:
            # Abandoning: close the socket under the daemon's feet.
            if conn.sock is not None:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            conn.close()
        return events


class ScenarioFailed(Exception):
    pass


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = {}       # op -> {status: count}
        self.errors = {}    # op -> count
        self.samples = []   # first error details
        self.scenarios = {}
        self.scenario_failures = {}

    def record(self, op, status, ok=True, detail=None):
        with self.lock:
            self.ops.setdefault(op, {}).setdefault(status, 0)
            self.ops[op][status] += 1
            if not ok:
                self.errors[op] = self.errors.get(op, 0) + 1
                if len(self.samples) < 30:
                    self.samples.append("%s: %s" % (op, detail))

    def scenario(self, name, ok):
        with self.lock:
            self.scenarios[name] = self.scenarios.get(name, 0) + 1
            if not ok:
                self.scenario_failures[name] = self.scenario_failures.get(name, 0) + 1

    def requests(self):
        return sum(n for op, st in self.ops.items()
                   if not op.endswith(":check") and op != "reconnect" for n in st.values())

    def error_count(self):
        return sum(self.errors.values())


# ---------------------------------------------------------------------------
# scenarios: each takes (client, rng, owned) and returns normally or raises
# ScenarioFailed; sandboxes it creates go into `owned` (deleted if it fails)

def sb(sid, rest=""):
    return "/v1/sandboxes/%s%s" % (sid, rest)


def create(c, rng, owned, **fields):
    _, body = c.json("create", "POST", "/v1/sandboxes", fields, expect=(201,))
    owned.append(body["id"])
    return body


def random_limits(rng):
    f = {}
    if rng.random() < 0.6:
        f["memory"] = rng.choice(["64M", "128M", "256M", 512 * MIB])
    if rng.random() < 0.5:
        f["cpus"] = rng.choice([0.25, 0.5, "1", 1.5])
    if rng.random() < 0.5:
        f["pids"] = rng.choice([32, 64, 256, 1024])
    if rng.random() < 0.5:
        f["disk"] = rng.choice(["16M", "64M", "256M"])
    if rng.random() < 0.4:
        f["timeout"] = rng.choice(["2m", 600, "1h"])
    if rng.random() < 0.3:
        f["user"] = rng.choice(["user", "root"])
    if rng.random() < 0.5:
        f["env"] = {"SOAK": "1", "N%d" % rng.randrange(100): "v" * rng.randrange(1, 200)}
    f["metadata"] = {"soak": "1", "kind": rng.choice(["a", "b"])}
    return f


def delete(c, owned, sid, op="delete"):
    c.call(op, "DELETE", sb(sid), expect=(204,))
    owned.remove(sid)


def exec_(c, sid, op="exec", expect=(200,), **fields):
    _, body = c.json(op, "POST", sb(sid, "/exec"), fields, expect=expect)
    return body


def block_exec(c, rng, box):
    sid = box["id"]
    r = exec_(c, sid, argv=["echo", "hello", "soak"])
    c.check("exec", r["exit_code"] == 0 and r["stdout"] == "hello soak\n", r)
    r = exec_(c, sid, cmd="echo out; echo err >&2; exit 3", env={"X": "y"})
    c.check("exec", r["exit_code"] == 3 and r["stdout"] == "out\n" and r["stderr"] == "err\n", r)
    r = exec_(c, sid, argv=["no-such-command-soak"])
    c.check("exec", r["exit_code"] == 127 and r["pid"] is None, r)
    r = exec_(c, sid, cmd="pwd; echo $SOAK_V", cwd="/tmp", env={"SOAK_V": "v1"})
    c.check("exec", r["stdout"] == "/tmp\nv1\n", r)
    data = os.urandom(rng.randrange(1, 20000))
    r = exec_(c, sid, op="exec_stdin", argv=["sha256sum"], stdin_b64=base64.b64encode(data).decode())
    c.check("exec_stdin", r["stdout"].split()[0] == hashlib.sha256(data).hexdigest(), r)
    r = exec_(c, sid, op="exec_stdin", argv=["cat"], stdin="line 1\nline 2\n")
    c.check("exec_stdin", r["stdout"] == "line 1\nline 2\n", r)
    r = exec_(c, sid, op="exec_timeout", cmd="sleep 30", timeout="300ms")
    c.check("exec_timeout", r["timed_out"] and r["signal"] == "SIGKILL", r)
    r = exec_(c, sid, op="exec", cmd="head -c 3000000 /dev/zero", max_output="64k")
    c.check("exec", r["stdout_truncated"] and len(r["stdout"]) == 65536, {k: v for k, v in r.items()
                                                                           if k != "stdout"})


def block_stream(c, rng, box):
    sid = box["id"]
    ev = c.stream("stream", "POST", sb(sid, "/exec"),
                  {"cmd": "for i in 1 2 3; do echo line $i; sleep 0.05; done; echo e >&2",
                   "stream": True})
    c.check("stream", ev and ev[0]["type"] == "start" and ev[-1]["type"] == "exit"
            and ev[-1]["exit_code"] == 0, ev)
    out = "".join(e["data"] for e in ev if e["type"] == "stdout")
    c.check("stream", out == "line 1\nline 2\nline 3\n", out)
    ev = c.stream("stream", "POST", sb(sid, "/exec"),
                  {"cmd": "head -c 300000 /dev/urandom", "stream": True, "encoding": "base64"})
    n = sum(len(base64.b64decode(e["data"])) for e in ev if e["type"] == "stdout")
    c.check("stream", n == 300000 and ev[-1]["type"] == "exit", n)
    # Abandoned: a command that would go on; read a little, hang up.
    cmd = rng.choice(["while :; do echo tick; sleep 0.02; done",
                      "yes soak",                                  # a writer that blocks
                      "echo started; sleep 300"])
    ev = c.stream("stream_abandon", "POST", sb(sid, "/exec"),
                  {"cmd": cmd, "stream": True}, abandon_after=2)
    c.check("stream_abandon", ev and ev[0]["type"] == "start" and ev[0]["pid"], ev)
    pid = ev[0]["pid"]
    # Its process group is killed: the process leaves the list.
    deadline = time.monotonic() + 30
    while True:
        _, body = c.json("list_processes", "GET", sb(sid, "/processes"))
        if all(p["pid"] != pid for p in body["processes"]):
            break
        c.check("stream_abandon", time.monotonic() < deadline,
                "abandoned stream's process %d still listed after 30 s" % pid)
        time.sleep(0.1)


def block_background(c, rng, box):
    sid = box["id"]
    _, p = c.json("bg_start", "POST", sb(sid, "/processes"),
                  {"argv": ["sh", "-c", "cat; echo done >&2"], "stdin_open": True}, expect=(201,))
    c.check("bg_start", p["pid"] and p["running"] and p["background"], p)
    pid = p["pid"]
    path = sb(sid, "/processes/%d" % pid)
    c.call("bg_stdin", "POST", path + "/stdin", b"first\n", expect=(204,), raw=True)
    c.call("bg_stdin", "POST", path + "/stdin?eof=1", b"second\n", expect=(204,), raw=True)
    _, r = c.json("bg_wait", "GET", path + "/wait?timeout=30s")
    c.check("bg_wait", r.get("exit_code") == 0 and r["stdout"] == "first\nsecond\n"
            and r["stderr"] == "done\n", r)
    # Collected: gone.
    c.call("bg_get", "GET", path, expect=(404,))
    # A long one: attach, signal, wait.
    _, p = c.json("bg_start", "POST", sb(sid, "/processes"),
                  {"cmd": "echo up; exec sleep 300"}, expect=(201,))
    pid = p["pid"]
    path = sb(sid, "/processes/%d" % pid)
    ev = c.stream("bg_attach", "GET", path + "/attach", None, abandon_after=2)
    c.check("bg_attach", ev and ev[0]["type"] in ("start", "stdout"), ev)
    _, lst = c.json("list_processes", "GET", sb(sid, "/processes"))
    c.check("list_processes", any(x["pid"] == pid for x in lst["processes"]), lst)
    _, r = c.json("bg_wait", "GET", path + "/wait?timeout=0")
    c.check("bg_wait", r["running"], r)
    c.call("bg_signal", "POST", path + "/signal", {"signal": rng.choice(["TERM", "SIGKILL", 2])},
           expect=(204,))
    _, r = c.json("bg_wait", "GET", path + "/wait?timeout=30s")
    c.check("bg_wait", r.get("signal") in ("SIGTERM", "SIGKILL", "SIGINT"), r)
    c.call("bg_signal", "POST", path + "/signal", {}, expect=(404,))
    if rng.random() < 0.5:
        # Left running: the sandbox's kill takes it.
        c.json("bg_start", "POST", sb(sid, "/processes"), {"argv": ["sleep", "1000"]},
               expect=(201,))


def block_files(c, rng, box):
    sid = box["id"]
    small = os.urandom(rng.randrange(0, 4096))
    big = os.urandom(MIB + rng.randrange(0, 4096))
    base = "/tmp/soak-%d" % rng.randrange(1 << 30)
    c.call("mkdir", "POST", sb(sid, "/files/mkdir"), {"path": base + "/d/e", "parents": True},
           expect=(201,))
    _, st = c.json("upload", "PUT", sb(sid, "/files?" + q(path=base + "/small", mode="0640")),
                   small, raw=True, expect=(201,))
    c.check("upload", st["size"] == len(small) and st["mode"] == "0640", st)
    c.call("upload", "PUT", sb(sid, "/files?" + q(path=base + "/d/e/big")), big, raw=True,
           expect=(201,))
    _, data = c.call("download", "GET", sb(sid, "/files?" + q(path=base + "/small")))
    c.check("download", data == small, "small file differs")
    _, data = c.call("download", "GET", sb(sid, "/files?" + q(path=base + "/d/e/big")))
    c.check("download", data == big, "1 MiB file differs (%d bytes)" % len(data))
    _, st = c.json("stat", "GET", sb(sid, "/files/stat?" + q(path=base + "/d/e/big")))
    c.check("stat", st["size"] == len(big) and st["type"] == "file", st)
    _, ls = c.json("list_files", "GET", sb(sid, "/files/list?" + q(path=base, depth=3)))
    names = sorted(e["name"] for e in ls["entries"])
    c.check("list_files", names == ["big", "d", "e", "small"], names)
    # Across the two mounts of the disk (root inside may not write the
    # user's home: it has no CAP_DAC_OVERRIDE).
    moved = "/home/user/soak-small" if box["user"] == "user" else base + "/moved"
    c.call("move", "POST", sb(sid, "/files/move"),
           {"from": base + "/small", "to": moved, "overwrite": True})
    _, data = c.call("download", "GET", sb(sid, "/files?" + q(path=moved)))
    c.check("download", data == small, "moved file differs")
    c.call("upload", "PUT", sb(sid, "/files?" + q(path=base + "/d/e/big")), b"", raw=True,
           expect=(201,))
    c.call("delete_file", "DELETE", sb(sid, "/files?" + q(path=moved)), expect=(204,))
    c.call("delete_file", "DELETE", sb(sid, "/files?" + q(path=base)), expect=(409,))
    c.call("delete_file", "DELETE", sb(sid, "/files?" + q(path=base, recursive=1)), expect=(204,))
    c.call("stat", "GET", sb(sid, "/files/stat?" + q(path=base)), expect=(404,))
    c.call("download", "GET", sb(sid, "/files?" + q(path="/proc/1/environ")), expect=(403, 404))


def block_meta(c, rng, box):
    sid = box["id"]
    _, body = c.json("get", "GET", sb(sid))
    c.check("get", body["id"] == sid and body["state"] == "running", body)
    _, lst = c.json("list", "GET", "/v1/sandboxes?metadata.soak=1")
    c.check("list", any(x["id"] == sid for x in lst["sandboxes"]), "own sandbox not listed")
    _, m = c.json("metrics", "GET", sb(sid, "/metrics"))
    c.check("metrics", m["pids"] >= 1 and m["memory_limit"] > 0, m)
    t = rng.choice([120, "10m", 3600])
    _, body = c.json("set_timeout", "POST", sb(sid, "/timeout"), {"timeout": t})
    c.check("set_timeout", body["timeout"] in (120, 600, 3600), body)


BLOCKS = [block_exec, block_stream, block_background, block_files, block_meta]


def scenario_session(c, rng, owned):
    """A sandbox with random limits, a few blocks of work, deleted."""
    box = create(c, rng, owned, **random_limits(rng))
    for blk in rng.sample(BLOCKS, rng.randrange(1, 4)):
        blk(c, rng, box)
    delete(c, owned, box["id"])
    c.call("get", "GET", sb(box["id"]), expect=(404,))


def scenario_memory_hog(c, rng, owned):
    box = create(c, rng, owned, memory="32M", metadata={"soak": "1"})
    r = exec_(c, box["id"], op="limits_memory",
              argv=["/usr/bin/python3", "-c", "b = b'x' * (200 << 20)"])
    c.check("limits_memory", r["oom_killed"] and r["signal"] == "SIGKILL", r)
    r = exec_(c, box["id"], argv=["echo", "alive"])
    c.check("exec", r["stdout"] == "alive\n", r)
    delete(c, owned, box["id"])


def scenario_fork_bomb(c, rng, owned):
    box = create(c, rng, owned, pids=16, metadata={"soak": "1"})
    sid = box["id"]
    r = exec_(c, sid, op="limits_forkbomb", cmd="b(){ b | b & }; b; sleep 100", timeout="1s")
    c.check("limits_forkbomb", r["timed_out"], r)
    deadline = time.monotonic() + 30
    while True:
        _, m = c.json("metrics", "GET", sb(sid, "/metrics"))
        if m["pids"] == 1:
            break
        c.check("limits_forkbomb", time.monotonic() < deadline, "pids stay at %d" % m["pids"])
        time.sleep(0.1)
    r = exec_(c, sid, argv=["echo", "alive"])
    c.check("exec", r["stdout"] == "alive\n", r)
    delete(c, owned, sid)


def scenario_expire(c, rng, owned):
    """A short lifetime that runs out on its own, with a command running."""
    box = create(c, rng, owned, timeout="1s", metadata={"soak": "1"})
    sid = box["id"]
    # The command is cut by the expiry (200, "sandbox expired"), or the
    # sandbox is already gone when the exec arrives (404).
    st, r = c.json("limits_expire", "POST", sb(sid, "/exec"), {"cmd": "sleep 30"},
                   expect=(200, 404))
    if st == 200:
        c.check("limits_expire", r["exit_code"] is None, r)
    deadline = time.monotonic() + 30
    while True:
        st, _ = c.call("get", "GET", sb(sid), expect=(200, 404))
        if st == 404:
            break
        c.check("limits_expire", time.monotonic() < deadline, "still there 30 s after expiry")
        time.sleep(0.1)
    owned.remove(sid)


def scenario_kill_under_exec(c, rng, owned):
    """DELETE while a command runs (exec or stream) on another connection."""
    box = create(c, rng, owned, metadata={"soak": "1"})
    sid = box["id"]
    other = Client(c.d, c.stats, c.key, c.name + "-side")
    result = {}

    def run():
        try:
            if rng.random() < 0.5:
                result["st"] = other.request("POST", sb(sid, "/exec"), {"cmd": "echo x; sleep 300"})
            else:
                result["events"] = other.stream("kill_stream", "POST", sb(sid, "/exec"),
                                                {"cmd": "echo x; sleep 300", "stream": True})
        except Exception as e:
            result["exc"] = e
        finally:
            other.close()
    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while True:
        _, lst = c.json("list_processes", "GET", sb(sid, "/processes"))
        if lst["processes"] or not t.is_alive() or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    delete(c, owned, sid, op="kill_running")
    t.join(60)
    c.check("kill_running", not t.is_alive(), "the exec did not end after the kill")
    if "st" in result:
        st, data = result["st"]
        c.stats.record("kill_exec", st, ok=st in (200, 503),
                       detail="exec under kill -> %d %r" % (st, data[:200]))
        if st == 200:
            r = json.loads(data)
            c.check("kill_exec", r["exit_code"] is None and r["reason"], r)
    elif "events" in result:
        ev = result["events"]
        c.check("kill_stream", ev and ev[-1]["type"] == "exit" and ev[-1]["exit_code"] is None, ev)
    elif "exc" in result and not isinstance(result["exc"], ScenarioFailed):
        c.stats.record("kill_exec", "exc", ok=False, detail=repr(result["exc"]))


def scenario_bad_requests(c, rng, owned):
    ghost = "zzzzzzzzzzzzzzzzzzzz"
    c.call("bad", "POST", "/v1/sandboxes", b'{"memory": ', raw=True, expect=(400,))
    c.call("bad", "POST", "/v1/sandboxes", {"memroy": "1G"}, expect=(400,))
    c.call("bad", "POST", "/v1/sandboxes", {"pids": 3}, expect=(400,))
    c.call("bad", "GET", sb(ghost), expect=(404,))
    c.call("bad", "DELETE", sb(ghost), expect=(404,))
    c.call("bad", "POST", sb(ghost, "/exec"), {"argv": ["true"]}, expect=(404,))
    c.call("bad", "GET", sb(ghost, "/files?" + q(path="/etc/passwd")), expect=(404,))
    c.call("bad", "GET", "/v1/nothing-here", expect=(404,))
    c.call("bad", "PATCH", "/v1/sandboxes", {}, expect=(405,))
    box = create(c, rng, owned, metadata={"soak": "1"})
    sid = box["id"]
    c.call("bad", "POST", sb(sid, "/exec"), b"[1, 2", raw=True, expect=(400,))
    c.call("bad", "POST", sb(sid, "/exec"), {"argv": ["true"], "cmd": "true"}, expect=(400,))
    c.call("bad", "POST", sb(sid, "/exec"), {"argv": []}, expect=(400,))
    c.call("bad", "GET", sb(sid, "/processes/999999"), expect=(404,))
    c.call("bad", "GET", sb(sid, "/processes/abc"), expect=(400,))
    c.call("bad", "GET", sb(sid, "/files?" + q(path="/nonexistent")), expect=(404,))
    c.call("bad", "GET", sb(sid, "/files/list?" + q(path="/tmp", depth=99)), expect=(400,))
    c.call("bad", "PUT", sb(sid, "/files?" + q(path="/tmp/x/")), b"x", raw=True, expect=(400,))
    delete(c, owned, sid)
    if c.key:
        # TCP: no key, a wrong key, key management.
        saved = c.key
        try:
            c.key = "e2b_" + "0" * 40
            c.call("bad_auth", "GET", "/v1/sandboxes", expect=(401,))
        finally:
            c.key = saved
        c.call("bad_auth", "GET", "/v1/keys", expect=(403,))
    # A raw request with a broken request line, and a body cut short.
    _raw(c, b"BLAH\r\n\r\n")
    _raw(c, b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"me")


def _raw(c, data):
    conn = c.new_conn(30)
    try:
        conn.connect()
        conn.sock.sendall(data)
        conn.sock.shutdown(socket.SHUT_WR)
        while conn.sock.recv(65536):
            pass
        c.stats.record("bad_raw", "sent")
    except OSError:
        c.stats.record("bad_raw", "reset")
    finally:
        conn.close()


def scenario_keys(c, rng, owned):
    """An API key made, used over TCP, revoked (admin socket only)."""
    admin = c if not c.key else Client(c.d, c.stats, None, c.name + "-admin")
    try:
        _, k = admin.json("key_create", "POST", "/v1/keys", {"tenant": "soak-t%d" % rng.randrange(4)},
                          expect=(201,))
        tcp = Client(c.d, c.stats, k["key"], c.name + "-key")
        try:
            _, lst = tcp.json("list", "GET", "/v1/sandboxes")
            c.check("list", isinstance(lst["sandboxes"], list), lst)
            admin.json("key_list", "GET", "/v1/keys")
            admin.call("key_delete", "DELETE", "/v1/keys/" + k["id"], expect=(204,))
            tcp.close()
            tcp.call("key_revoked", "GET", "/v1/sandboxes", expect=(401,))
        finally:
            tcp.close()
    finally:
        if admin is not c:
            admin.close()


SCENARIOS = [
    (scenario_session, 60),
    (scenario_memory_hog, 4),
    (scenario_fork_bomb, 4),
    (scenario_expire, 4),
    (scenario_kill_under_exec, 8),
    (scenario_bad_requests, 8),
    (scenario_keys, 4),
]


def run_scenario(c, rng, fn, stats, cleanup):
    owned = []
    ok = True
    try:
        fn(c, rng, owned)
    except ScenarioFailed:
        ok = False
    except Exception:
        ok = False
        stats.record(fn.__name__, "exc", ok=False, detail=traceback.format_exc(limit=3))
    finally:
        for sid in owned:
            cleanup(sid)
    stats.scenario(fn.__name__.replace("scenario_", ""), ok)
    return ok


def client_main(d, stats, key, idx, deadline, seed, cleanup, stop):
    c = Client(d, stats, key, "c%d" % idx)
    rng = random.Random(seed * 1000 + idx)
    fns, weights = zip(*SCENARIOS)
    try:
        while time.monotonic() < deadline and not stop.is_set():
            fn = rng.choices(fns, weights)[0]
            run_scenario(c, rng, fn, stats, cleanup)
            if d.proc.poll() is not None:
                stop.set()
    finally:
        c.close()


# ---------------------------------------------------------------------------

def warm_up(d, stats, keys, cleanup, clients, seconds, seed):
    """Every scenario once from each transport (a broken build fails here,
    fast), then the full mix from every client for a while: the start
    sample then already includes what the daemon grows once and keeps
    (malloc arenas of its connection threads, SQLite's page cache)."""
    rng = random.Random(seed)
    for k in (None, keys[0]):
        c = Client(d, stats, k, "warm")
        for fn, _ in SCENARIOS:
            if not run_scenario(c, rng, fn, stats, cleanup):
                raise RuntimeError("warm-up scenario %s failed: %s" % (fn.__name__, stats.samples))
        c.close()
    run_clients(d, stats, keys, clients, seconds, seed + 1, cleanup, report=False)


def run_clients(d, stats, keys, clients, seconds, seed, cleanup, report=True):
    """`clients` threads running the mix for `seconds`; odd ones over TCP
    (two tenants' keys), even ones on the admin unix socket."""
    stop = threading.Event()
    t0 = time.monotonic()
    deadline = t0 + seconds
    threads = []
    for i in range(clients):
        key = keys[(i // 2) % len(keys)] if i % 2 else None
        t = threading.Thread(target=client_main,
                             args=(d, stats, key, i, deadline, seed, cleanup, stop))
        t.start()
        threads.append(t)
    next_report = t0 + 30
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(1)
        now = time.monotonic()
        if report and now >= next_report:
            next_report += 30
            try:
                s = sample(d)
                log("  %4.0f s: %d requests, %d errors; daemon rss %d KiB, fds %d, threads %d, "
                    "sandboxes %s" % (now - t0, stats.requests(), stats.error_count(),
                                      s["rss_kib"], s["fds"], s["threads"],
                                      info(d).get("sandboxes")))
            except (OSError, ValueError) as e:
                log("  sample failed: %r" % e)


def admin_delete(d):
    def cleanup(sid):
        try:
            r = d.api("DELETE", sb(sid), timeout=60)
            if r.status not in (204, 404):
                log("cleanup of %s: %r" % (sid, r))
        except OSError as e:
            log("cleanup of %s: %r" % (sid, e))
    return cleanup


def delete_all(d):
    r = d.api("GET", "/v1/sandboxes")
    ids = [x["id"] for x in r.json()["sandboxes"]]
    for sid in ids:
        d.api("DELETE", sb(sid), timeout=60)
    return ids


def print_stats(stats, seconds):
    log("\noperations (status: count):")
    for op in sorted(stats.ops):
        st = stats.ops[op]
        log("  %-18s %7d   %s%s" % (op, sum(st.values()),
                                    ", ".join("%s: %d" % (k, v) for k, v in sorted(st.items(), key=str)),
                                    "   ERRORS %d" % stats.errors[op] if op in stats.errors else ""))
    log("scenarios: " + ", ".join("%s %d%s" % (k, v, " (%d failed)" % stats.scenario_failures[k]
                                                if k in stats.scenario_failures else "")
                                   for k, v in sorted(stats.scenarios.items())))
    n = stats.requests()
    log("requests: %d in %.0f s = %.1f/s; errors: %d" % (n, seconds, n / seconds, stats.error_count()))
    for s in stats.samples[:15]:
        log("  error: " + s[:400])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 300)))
    ap.add_argument("--clients", type=int, default=int(os.environ.get("SOAK_CLIENTS", 8)))
    ap.add_argument("--pool", type=int, default=4)
    ap.add_argument("--phases", type=int, default=2,
                    help="split the soak into phases, each ending idle with a sample; RSS is "
                    "judged from the sample half way to the end (1: from the start)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds of full load before the start sample (default: a tenth, 5..30 s)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--build", default=os.environ.get("SBX_BUILD", "build"))
    ap.add_argument("--keep-log", action="store_true", help="keep the daemon's log")
    args = ap.parse_args()
    if args.warmup is None:
        args.warmup = min(30.0, max(5.0, args.seconds / 10))
    if os.geteuid() != 0:
        log("soak: needs root (the daemon creates namespaces and cgroups)")
        return 2
    build = os.path.join(harness.ROOT, args.build)
    harness.SBXD = os.path.join(build, "sbxd")

    d = Daemon(pool=args.pool, listen="127.0.0.1:%d" % free_port(),
               max_sandboxes=max(64, 4 * args.clients))
    log("soak: %s, %d clients for %.0f s, pool %d, seed %d, cgroup parent %s, uids [%#x, %#x)"
        % (harness.SBXD, args.clients, args.seconds, args.pool, args.seed, d.cgroup_parent,
           d.uid_base, d.uid_end))
    d.start()
    failures = []
    stats = Stats()
    cleanup = admin_delete(d)
    start = end = half = None
    t0 = t1 = time.monotonic()
    try:
        keys = [d.new_key("soak%d" % i) for i in range(2)]
        warm = Stats()
        warm_up(d, warm, keys, cleanup, args.clients, args.warmup, args.seed)
        if warm.error_count():
            failures.append("warm-up: %d failed operations: %r" % (warm.error_count(), warm.samples[:5]))
        left = delete_all(d)
        if left:
            failures.append("warm-up left sandboxes: %r" % left)
        start = settled_sample(d, args.pool)
        log("warm-up: %d requests; start: %d daemon processes, rss %d KiB, fds %d, threads %d; "
            "soaking..." % (warm.requests(), len(start["procs"]), start["rss_kib"], start["fds"],
                            start["threads"]))
        t0 = time.monotonic()
        busy = 0.0
        for phase in range(args.phases):
            p0 = time.monotonic()
            run_clients(d, stats, keys, args.clients, args.seconds / args.phases,
                        args.seed + 7 * phase, cleanup)
            busy += time.monotonic() - p0
            if d.proc.poll() is not None:
                failures.append("sbxd died during the soak (status %r)" % d.proc.returncode)
                break
            left = delete_all(d)
            if left:
                failures.append("the clients left %d sandboxes: %r" % (len(left), left[:5]))
            end = settled_sample(d, args.pool, like=start)
            if phase + 1 < args.phases:
                _, phase_failures, _, _ = compare(start, end)
                failures += ["after phase %d: %s" % (phase + 1, f) for f in phase_failures
                             if not f.startswith("total RSS")]
            if phase + 1 == args.phases // 2:
                half = end
            if args.phases > 1:
                log("  phase %d/%d idle: rss %d KiB (%+d), fds %d, threads %d, cgroups %s"
                    % (phase + 1, args.phases, end["rss_kib"], end["rss_kib"] - start["rss_kib"],
                       end["fds"], end["threads"], sum(end["cgroups"].values())))
        t1 = t0 + busy
    except Exception:
        failures.append("soak driver: " + traceback.format_exc())
    finally:
        if d.proc.poll() is None:
            try:
                delete_all(d)
            except Exception as e:
                failures.append("final delete: %r" % e)
        rc = d.stop()
        log_text = d.read_log()
        problems = d.cleanup()
        if rc != 0:
            failures.append("sbxd exited with status %r" % rc)
        failures += ["after the daemon stopped: " + p for p in problems]
        bad_log = [l for l in log_text.splitlines()
                   if "] error: " in l or "Sanitizer" in l or "runtime error" in l]
        warns = [l for l in log_text.splitlines() if "] warn: " in l]
        if warns:
            log("daemon log: %d warnings, e.g. %r" % (len(warns), warns[:3]))
        if bad_log:
            failures.append("daemon log has %d error lines, first: %r" % (len(bad_log), bad_log[:5]))
        if args.keep_log:
            with open("/tmp/soak-sbxd.log", "w") as f:
                f.write(log_text)
            log("daemon log: /tmp/soak-sbxd.log")

    if start and end:
        log("")
        rows, cmp_failures, allowed, growth = compare(start, end, half)
        print_table(rows, half is not None)
        log("RSS growth %s: %+d KiB, allowed %d KiB (max(8 MiB, 10%%))"
            % ("from the half-way idle sample to the end" if half else "from start to end",
               growth, allowed))
        failures += cmp_failures
    print_stats(stats, max(t1 - t0, 1e-9))
    if stats.error_count():
        failures.append("%d failed operations" % stats.error_count())
    if failures:
        log("\nSOAK FAILED:")
        for f in failures:
            log("  - " + f)
        return 1
    log("\nsoak passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
