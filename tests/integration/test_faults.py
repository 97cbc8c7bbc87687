"""Faults injected for real against a real daemon: a full state directory,
a locked or corrupt database, cgroup writes failing, no fds left,
allocations failing, clients hanging up mid-stream, a sandbox's PID 1
killed from the host, the host short of memory for sandboxes.

Each test checks that the fault gives a clear answer (exact status and
error kind, or exit status and message at start-up), that a sandbox made
before the fault still runs commands and keeps its files, and that nothing
leaks: the harness's leftovers() check when the daemon stops, and the
daemon's open fds and threads back to what they were.

Observed outcomes worth knowing:

- A full state directory or a locked database fails only what writes the
  database (create, API keys, lifetime changes) with 429
  resource_exhausted; reads (listing keys, checking a key on the TCP
  listener) go on, since SQLite runs in WAL mode. A kill still works: the
  sandbox goes, only its record is not updated (the log says so). SQLite
  gives up on a lock after its 5 s busy timeout.
- A damaged database is refused at start (exit 1, one line naming the
  file), left exactly as it was; the daemon checks every page at start
  (PRAGMA quick_check), so damage anywhere is found there and not by some
  later request. Damage while running fails each database request with
  500 internal; the daemon and its sandboxes go on.
- cgroup writes failing (the parent bind-mounted read-only in the daemon's
  own mount namespace) fail creates with 500 internal naming the cgroup
  file. A pooled sandbox whose limits cannot be changed is discarded; its
  cgroup directory, which cannot be removed while the fault lasts, is
  removed by the next create or kill after it.
- With no fd to spare, every create, exec and files request answers 429
  "Too many open files", at every point of a create (cgroups, socketpair,
  the new init's pidfd from the zygote, its READY): the daemon kills and
  reaps an init whose pidfd it could not receive, and keeps its zygote.
- Allocation failures (failalloc.so) give 503 "out of memory" or a closed
  connection (libmicrohttpd drops a connection it has no memory for);
  SQLite answers SQLITE_NOMEM (503 too). The daemon never aborts.
- A streaming exec whose client hangs up is killed, and its output is
  drained and discarded even when its buffer was full.
- PID 1 of a sandbox killed from the host: the sandbox ends, with "sandbox
  init died (killed by SIGKILL)" as the reason of every command it had
  (and in its record, state `died`).
- Memory for all sandboxes short (a limit on their cgroup parent): the OOM
  killer takes the biggest processes inside sandboxes, whose results say
  oom_killed and "out of memory on the host (below the limit of ...)";
  every sandbox's init survives.
"""
import http.client
import json
import mmap
import os
import pwd
import resource
import shlex
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import tempfile
import threading
import unittest

from harness import (BUILD, HARNESS_SLOTS, SBXD, Daemon, cgroup_hierarchies, cgroup_version,
                     free_port, leftovers, processes_with_uid_in)
from sbx_helpers import MIB, children_of, open_stream, q, read_event, sandbox_ids, wait_until

ASAN_SUBSET = True

FAILALLOC = os.path.join(BUILD, "failalloc.so")


# ---- the daemon's process ------------------------------------------------

def frontend_pid(d):
    """The daemon's front end: the child of the privileged parent that runs
    as the front end's user (`sbx`), or None while there is not exactly one."""
    uid = pwd.getpwnam("sbx").pw_uid
    found = []
    for p, state, _ in children_of(d.proc.pid):
        try:
            with open("/proc/%d/status" % p) as f:
                uids = [line.split()[1] for line in f if line.startswith("Uid:")]
        except OSError:
            continue
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                role = f.read().split(b"\0")[1:2]
        except OSError:
            continue
        # (The egress proxy, `--egress`, runs as that user too.)
        if uids == [str(uid)] and state != "Z" and role == [b"--frontend"]:
            found.append(p)
    return found[0] if len(found) == 1 else None


def http_pid(d):
    """The pid of the daemon process that serves HTTP and so holds the fds
    and threads of requests: the unprivileged front end (sbxd is a
    privileged parent and a front end it fork+execs)."""
    return wait_until(lambda: frontend_pid(d), what="the front end")


def parent_pid(d):
    """The pid of the daemon process whose children are the zygote and the
    sandboxes' inits (and the front end): the privileged parent, the
    process the harness started."""
    return d.proc.pid


def prlimit_nofile(pid, limits=None):
    """resource.prlimit(pid, RLIMIT_NOFILE[, limits]), for the front end
    too: the tests run without CAP_SYS_RESOURCE, so only a process with the
    target's uids and gids may read or set its limits; for the front end
    that is a helper running as its user."""
    with open("/proc/%d/status" % pid) as f:
        ids = {line.split(":")[0]: line.split()[1:] for line in f
               if line.startswith(("Uid:", "Gid:"))}
    uid, gid = int(ids["Uid"][0]), int(ids["Gid"][0])
    if uid == os.geteuid():
        return resource.prlimit(pid, resource.RLIMIT_NOFILE, *([limits] if limits else []))
    code = ("import resource, sys\n"
            "print(*resource.prlimit(%d, resource.RLIMIT_NOFILE%s))\n"
            % (pid, ", (%d, %d)" % tuple(limits) if limits else ""))
    out = subprocess.run(["/usr/bin/python3", "-c", code], user=uid, group=gid, extra_groups=[],
                         check=True, capture_output=True).stdout.split()
    return int(out[0]), int(out[1])


def socket_inodes(pid):
    out = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def channels(pid):
    """The front end's channels to the privileged parent: its unix sockets
    whose peer the parent holds. The front end keeps those it opened for
    concurrent requests, for reuse (at most 64): they are no leak."""
    st = stat_of(pid)
    if st is None:
        return set()
    try:
        with open("/proc/%d/status" % pid) as f:
            if [line.split()[1] for line in f if line.startswith("Uid:")] == ["0"]:
                return set()  # the parent itself
        theirs = socket_inodes(st[1])
    except OSError:
        return set()
    peers = {}
    for line in subprocess.run(["ss", "-xaHn"], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        cols = line.split()
        if len(cols) >= 8 and cols[0] == "u_seq":
            peers[cols[5]] = cols[7]
    return set(i for i in socket_inodes(pid) if peers.get(i) in theirs)


def fd_count(pid):
    """The fds a process holds, the front end's pooled channels to the
    parent apart (their number follows the peak of concurrent requests)."""
    n = len(os.listdir("/proc/%d/fd" % pid))
    chans = channels(pid)
    assert len(chans) <= 64 + 1, chans  # the pool and the first channel
    return n - len(chans)


def task_count(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def stat_of(pid):
    """(state, ppid) from /proc/PID/stat, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def no_zombie_children(tc, d, fe=None):
    """The privileged parent's children other than its front end are its
    zygote and sandbox inits: all alive, none a zombie it forgot to reap.
    The front end must be there too, and (given `fe`) still be that one: a
    fault must not have crashed it into a restart."""
    # The egress proxy may have died of the failures (glibc's resolver
    # aborts on some): the parent starts it again within its backoff (at
    # most 30 s), which on a slow machine can still be under way.
    wait_until(lambda: [k for k in children_of(parent_pid(d)) if _role(k[0]) == b"--egress"],
               timeout=90, what="the egress proxy (restarted after its backoff)")
    kids = children_of(parent_pid(d))
    tc.assertFalse([k for k in kids if k[1] == "Z"], kids)
    now = frontend_pid(d)
    tc.assertIsNotNone(now, kids)
    if fe is not None:
        tc.assertEqual(now, fe, "the front end was restarted")
    # The egress proxy is the parent's child too: one, alive, not counted.
    egress = [k for k in kids if _role(k[0]) == b"--egress"]
    tc.assertEqual(len(egress), 1, kids)
    return [k for k in kids if k[0] != now and k not in egress]


def _role(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    return argv[1] if len(argv) > 1 else None


def settle(pid, what, count):
    """Wait for the daemon's fd count or thread count to be `count`
    (connections and their threads go away a moment after the answer)."""
    fn = fd_count if what == "fds" else task_count
    try:
        wait_until(lambda: fn(pid) == count, timeout=30, what="%s back to %d" % (what, count))
    except AssertionError:
        raise AssertionError("the daemon's %s: %d, expected %d%s" % (
            what, fn(pid), count,
            ": " + repr(sorted(os.readlink("/proc/%d/fd/%s" % (pid, f))
                               for f in os.listdir("/proc/%d/fd" % pid))) if what == "fds" else ""))


def connection_threads(pid):
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                n += f.read().strip() == "MHD-connection"
        except OSError:
            pass
    return n


def connection_sockets(d):
    """Inodes of the sockets of client connections on the daemon's side
    (its listeners excepted): a connection's socket may outlive its thread
    a little, until libmicrohttpd's listening thread cleans it up."""
    found = set()
    with open("/proc/net/unix") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            # Accepted sockets carry the listener's path; the listener alone
            # has __SO_ACCEPTCON (flags 00010000).
            if len(cols) >= 8 and cols[7] == d.socket_path and cols[3] != "00010000":
                found.add(cols[6])
    if d.listen:
        port = "%04X" % int(d.listen.rsplit(":", 1)[1])
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if cols[1].endswith(":" + port) and cols[3] != "0A":  # not LISTEN
                        found.add(cols[9])
    return found


def open_connections(d):
    conns = connection_sockets(d)
    pid = http_pid(d)
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in conns:
            n += 1
    return n + connection_threads(pid)


def baseline(d):
    """fds and threads of a quiet daemon: no connection open."""
    pid = http_pid(d)
    wait_until(lambda: open_connections(d) == 0, timeout=30, what="connections to close")
    return fd_count(pid), task_count(pid)


# ---- cgroups and sandboxes ----------------------------------------------

def sandbox_cgroups(d):
    """{hierarchy: set of sandbox cgroup names} under the daemon's parent."""
    found = {}
    for h in cgroup_hierarchies():
        parent = os.path.join(h, d.cgroup_parent)
        found[h] = set(n for n in os.listdir(parent)
                       if os.path.isdir(os.path.join(parent, n))) if os.path.isdir(parent) else set()
    return found


def cgroup_names(d):
    """The sandbox cgroups, which every hierarchy must agree on."""
    sets = list(sandbox_cgroups(d).values())
    return sets[0] if all(s == sets[0] for s in sets) else None


def procs_file(d, sid):
    for h in cgroup_hierarchies():
        if h.endswith("/pids") or h == "/sys/fs/cgroup":
            return os.path.join(h, d.cgroup_parent, sid, "cgroup.procs")
    raise AssertionError("no pids hierarchy")


def sandbox_pids(d, sid):
    try:
        with open(procs_file(d, sid)) as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def init_pid(d, sid):
    """The sandbox's PID 1 on the host: the process of its cgroup whose
    parent is not in it."""
    pids = sandbox_pids(d, sid)
    inits = [p for p in pids if stat_of(p) and stat_of(p)[1] not in pids]
    assert len(inits) == 1, (pids, inits)
    return inits[0]


def info(d):
    r = d.api("GET", "/v1/info")
    assert r.status == 200, r
    return r.json()


def kill_all(d):
    """Delete every sandbox through the API. Tests do this before stopping
    a daemon: a stopped daemon may leave its sandboxes running."""
    try:
        for sid in sandbox_ids(d):
            d.kill(sid)
    except (OSError, AssertionError, http.client.HTTPException):
        pass


def run_sbxd(args, timeout=60, d=None):
    """Run a daemon that is expected to refuse to start: (rc, stderr), in
    d's delegated cgroup when there is one. One that starts after all is
    stopped, and the test fails."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, **(d.popen_kwargs() if d else {}))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate()
        raise AssertionError("sbxd started: %r" % err)
    return p.returncode, err.decode()


def raw_request(d, head, timeout=60):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(d.socket_path)
    s.sendall(head)
    return s


# ---- the suite -----------------------------------------------------------

class FaultTest(unittest.TestCase):
    """Each test starts its own daemons; tearDown deletes their sandboxes,
    stops them and checks that nothing of them is left."""

    def setUp(self):
        self.daemons = []
        self.before_cleanup = []

    def tearDown(self):
        problems = []
        for d in self.daemons:
            if d.proc and d.proc.poll() is None:
                kill_all(d)
                d.stop()
            if d.proc and d.proc.returncode != 0:
                d.log.close()
                problems.append("sbxd exited with %r: %s" % (d.proc.returncode,
                                                              d.read_log()[-3000:]))
        for fn in self.before_cleanup:
            fn()
        for d in self.daemons:
            if os.path.isdir(d.state):
                problems += d.cleanup()
            elif os.path.exists(d.log_path):
                os.unlink(d.log_path)
        self.assertEqual(problems, [])

    def daemon(self, **kw):
        d = Daemon(**kw)
        # A uid range nobody's processes are in: sandboxes of another
        # session's daemon may outlive it (and its lock on the range), and
        # leftovers() would count them as ours.
        span = d.uid_end - d.uid_base
        for _ in range(HARNESS_SLOTS):
            if not processes_with_uid_in(d.uid_base, d.uid_end):
                break
            slot = (d.uid_base - 0x80000000) // (1 << 23)
            d.uid_base = 0x80000000 + ((slot + 1) % HARNESS_SLOTS) * (1 << 23)
            d.uid_end = d.uid_base + span
            d.args[d.args.index("--uid-base") + 1] = str(d.uid_base)
        self.daemons.append(d)
        return d

    def assertError(self, resp, status, kind, text=None):
        self.assertEqual(resp.status, status, resp)
        body = resp.json()
        self.assertEqual((body["code"], body["error"]), (status, kind), body)
        self.assertTrue(body["message"])
        if text:
            self.assertIn(text, body["message"])
        return body

    def alive(self, d):
        self.assertIsNone(d.proc.poll(), "sbxd died:\n" + d.read_log()[-3000:])
        self.assertEqual(d.api("GET", "/healthz").status, 200)

    def untouched(self, d, sid, content=b"kept"):
        """A sandbox from before the fault still runs commands and has its files."""
        res = d.exec(sid, argv=["cat", "/tmp/kept"])
        self.assertEqual((res["exit_code"], res["stdout"]), (0, content.decode()), res)

    def keep_file(self, d, sid, content=b"kept"):
        self.assertEqual(d.upload(sid, "/tmp/kept", content).status, 201)


class StateDirFull(FaultTest):
    """--state on a small tmpfs the test fills up while the daemon runs."""

    def test_state_dir_full(self):
        d = self.daemon(pool=0)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "sbx-faults", d.state],
                       check=True)
        self.before_cleanup.append(lambda: subprocess.run(["umount", d.state], check=True))
        d.start()
        pid = http_pid(d)
        a = d.create()
        self.keep_file(d, a)
        base = baseline(d)
        b = d.create()
        filler = os.path.join(d.state, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 65536)
        except OSError as e:
            self.assertEqual(e.errno, 28)  # ENOSPC
        finally:
            os.close(fd)

        # Refused by the database (disk full), or, once the audit log has
        # failed to take a record, by the audit log (docs/audit.md): both
        # say why, and neither changes anything.
        def refused(r):
            body = r.json()
            if r.status == 503:
                self.assertIn("audit log cannot be written", body["message"])
            else:
                self.assertError(r, 429, "resource_exhausted", "database or disk is full")
        refused(d.api("POST", "/v1/sandboxes", {}))
        refused(d.api("POST", "/v1/keys", {}))
        refused(d.api("POST", "/v1/sandboxes/%s/timeout" % a, {"timeout": 60}))
        # A request that fails changes nothing.
        self.assertEqual(d.api("GET", "/v1/sandboxes/" + a).json()["timeout"], 300.0)
        self.assertEqual(sorted(sandbox_ids(d)), sorted([a, b]))
        self.assertEqual(d.api("GET", "/v1/keys").status, 200)
        # A kill does not need the database: only the record is stale.
        self.assertEqual(d.kill(b).status, 204)
        self.assertEqual(d.api("GET", "/v1/sandboxes/" + b).status, 404)
        self.assertEqual(cgroup_names(d), {a})
        self.assertIn("recording the end of sandbox %s" % b, d.read_log())
        self.untouched(d, a)
        self.alive(d)

        os.unlink(filler)
        # The audit log retries every second once there is room again.
        wait_until(lambda: d.api("GET", "/v1/info").json()["audit"]["healthy"],
                   what="the audit log to recover")
        c = d.create()
        d.new_key()
        r = d.api("POST", "/v1/sandboxes/%s/timeout" % a, {"timeout": 60})
        self.assertEqual((r.status, r.json()["timeout"]), (200, 60.0))
        self.untouched(d, a)
        self.assertEqual(d.kill(c).status, 204)
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])


class SqliteBusy(FaultTest):
    """Another process holds the database's write lock."""

    def test_write_lock_held(self):
        d = self.daemon(pool=0, listen="127.0.0.1:%d" % free_port())
        d.start()
        pid = http_pid(d)
        a = d.create()
        self.keep_file(d, a)
        key = d.new_key("acme")
        base = baseline(d)
        b = d.create()
        db = sqlite3.connect(os.path.join(d.state, "sbx.db"), isolation_level=None, timeout=30)
        try:
            db.execute("BEGIN EXCLUSIVE")
            db.execute("INSERT INTO api_keys (id, tenant, hash, prefix, created_ms)"
                       " VALUES ('klocked', 'x', x'00', 'x', 0)")
            # Writes give up after SQLite's busy timeout: the request returns
            # (the HTTP timeout is the bound on "does not hang").
            locked = "database is locked"
            self.assertError(d.api("POST", "/v1/sandboxes", {}, timeout=60), 429,
                             "resource_exhausted", locked)
            self.assertError(d.api("POST", "/v1/keys", {}, timeout=60), 429,
                             "resource_exhausted", locked)
            self.assertError(d.api("POST", "/v1/sandboxes/%s/timeout" % a, {"timeout": 60},
                                   timeout=60), 429, "resource_exhausted", locked)
            # Reads go on (WAL): listing keys, and checking a key over TCP.
            r = d.api("GET", "/v1/keys")
            self.assertEqual(r.status, 200, r)
            self.assertEqual([k["tenant"] for k in r.json()["keys"]], ["acme"])
            r = d.tcp("GET", "/v1/sandboxes", key=key)
            self.assertEqual((r.status, r.json()), (200, {"sandboxes": []}))
            # Killing does not wait for the database.
            self.assertEqual(d.kill(b).status, 204)
            self.assertEqual(sandbox_ids(d), [a])
            self.untouched(d, a)
            self.alive(d)
        finally:
            db.execute("ROLLBACK")
            db.close()
        c = d.create()
        d.new_key()
        self.assertEqual(d.api("POST", "/v1/sandboxes/%s/timeout" % a, {"timeout": 60}).status,
                         200)
        with sqlite3.connect(os.path.join(d.state, "sbx.db")) as db:
            rows = db.execute("SELECT id, state FROM sandboxes").fetchall()
        self.assertIn((c, "running"), rows)
        self.assertEqual(d.kill(c).status, 204)
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])


def checkpoint(path):
    """Everything in the main database file, the WAL empty."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    finally:
        db.close()


class SqliteCorrupt(FaultTest):

    def test_refuses_to_start_and_keeps_the_file(self):
        d = self.daemon(pool=0)
        d.start()
        sid = d.create()
        self.assertEqual(d.kill(sid).status, 204)
        self.assertEqual(d.stop(), 0)
        path = os.path.join(d.state, "sbx.db")
        checkpoint(path)
        with open(path, "rb") as f:
            good = f.read()
        self.assertGreater(len(good), 3 * 4096)
        damaged = {
            "garbage over the header": b"\xa5" * 100 + good[100:],
            "truncated mid-page": good[:4096 + 1000],
            # The header is intact: only reading every page finds this.
            "a damaged b-tree page": good[:4096 + 8] + b"\xa5" * (4096 - 8) + good[8192:],
        }
        for what, data in damaged.items():
            with self.subTest(what):
                with open(path, "wb") as f:
                    f.write(data)
                for extra in ("-wal", "-shm"):
                    if os.path.exists(path + extra):
                        os.unlink(path + extra)
                rc, err = run_sbxd(d.args, d=d)
                self.assertEqual(rc, 1, err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertTrue(err.startswith("sbx serve: database `%s`" % path), err)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), data)  # left as it was, for the operator
                self.assertEqual(leftovers(d.uid_base, d.uid_end, d.cgroup_parent, d.state), [])
        # Put back, it works again (on the same state, cgroup parent, uids).
        with open(path, "wb") as f:
            f.write(good)
        d2 = self.same_state(d)
        self.assertEqual(sandbox_ids(d2), [])
        d2.exec(d2.create(), argv=["true"])

    def same_state(self, d):
        d2 = Daemon(pool=0)
        shutil.rmtree(d2.state)
        d2.state, d2.cgroup_parent, d2.uid_base, d2.uid_end = (d.state, d.cgroup_parent,
                                                               d.uid_base, d.uid_end)
        d2.args = list(d.args)
        self.daemons.append(d2)
        return d2.start()

    def test_corrupt_while_running(self):
        d = self.daemon(pool=0, listen="127.0.0.1:%d" % free_port())
        d.start()
        pid = http_pid(d)
        base = baseline(d)
        a = d.create()
        self.keep_file(d, a)
        key = d.new_key()
        path = os.path.join(d.state, "sbx.db")
        checkpoint(path)
        with open(path, "rb") as f:
            good = f.read()
        with open(path, "r+b") as f:
            f.write(b"\xa5" * len(good))

        bad = "file is not a database"
        self.assertError(d.api("POST", "/v1/sandboxes", {}), 500, "internal", bad)
        self.assertError(d.api("POST", "/v1/keys", {}), 500, "internal", bad)
        self.assertError(d.api("GET", "/v1/keys"), 500, "internal", bad)
        self.assertError(d.tcp("GET", "/v1/sandboxes", key=key), 500, "internal", bad)
        self.assertEqual(sandbox_ids(d), [a])
        self.untouched(d, a)
        self.assertIn("POST /v1/keys: database write: " + bad, d.read_log())
        self.assertEqual(d.kill(a).status, 204)
        self.alive(d)
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])
        self.assertEqual(d.stop(), 0)
        # Found at the next start, which refuses.
        rc, err = run_sbxd(d.args, d=d)
        self.assertEqual(rc, 1, err)
        self.assertIn("database `%s`" % path, err)
        # The operator restores it: the daemon starts, and the sandbox whose
        # end could not be recorded is marked lost. (Since sandboxes survive
        # restarts, the new daemon tries to re-adopt every running record;
        # the reason is why it could not: the sandbox's cgroup is gone.)
        with open(path, "wb") as f:
            f.write(good)
        for extra in ("-wal", "-shm"):
            if os.path.exists(path + extra):
                os.unlink(path + extra)
        self.same_state(d)
        with sqlite3.connect(path) as db:
            rows = db.execute("SELECT id, state, end_reason FROM sandboxes").fetchall()
        self.assertIn((a, "lost", "open cgroup `%s`: No such file or directory" % a), rows)


class CgroupWritesFail(FaultTest):
    """The daemon runs in a mount namespace of its own, where its cgroup
    parent directories are bind mounts of themselves; the test remounts one
    read-only there (root ignores file modes, not a read-only mount). On
    cgroup v1 that is the parent in the pids hierarchy, so a create has
    already made its memory cgroup when the fault hits, and must remove it."""

    def test_cgroup_parent_read_only(self):
        d = self.daemon(pool=1)
        parents = [os.path.join(h, d.cgroup_parent) for h in cgroup_hierarchies()]
        for p in parents:
            os.makedirs(p, exist_ok=True)
        ro = os.path.join("/sys/fs/cgroup/pids" if cgroup_version() == 1 else "/sys/fs/cgroup",
                          d.cgroup_parent)
        script = "set -e; %s; exec \"$@\"" % "; ".join(
            "mount --bind %s %s" % (shlex.quote(p), shlex.quote(p)) for p in parents)
        d.args = ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script,
                  "sbxd"] + d.args
        d.start()
        pid = http_pid(d)
        # The cgroups are written by the privileged parent: the read-only
        # mount must be in its namespace (the front end shares it).
        engine = parent_pid(d)
        self.assertEqual(os.readlink("/proc/%d/exe" % engine), os.path.realpath(SBXD))

        def remount(mode):
            subprocess.run(["nsenter", "--target", str(engine), "--mount", "mount", "-o",
                            "remount,bind," + mode, ro], check=True)

        a = d.create()
        self.keep_file(d, a)
        wait_until(lambda: info(d)["pool"] == 1, timeout=60, what="the pool to fill")
        base = baseline(d)
        remount("ro")
        try:
            # A pooled sandbox fitted to other limits: its limits cannot be
            # written. It is discarded, not handed out with the old ones.
            body = self.assertError(d.api("POST", "/v1/sandboxes", {"memory": "256M", "pids": 64}),
                                    500, "internal", "Read-only file system")
            self.assertIn("cgroup file", body["message"])
            # Building one: its cgroup cannot be made.
            body = self.assertError(d.api("POST", "/v1/sandboxes", {}), 500, "internal",
                                    "Read-only file system")
            self.assertIn("mkdir cgroup", body["message"])
            self.assertEqual(sandbox_ids(d), [a])
            # No half-made sandbox: no process but a's in the uid range, the
            # daemon's only children its zygote and a's init.
            self.assertEqual(sorted(p for p, _, _ in processes_with_uid_in(d.uid_base, d.uid_end)),
                             sorted(sandbox_pids(d, a)))
            self.assertEqual(len(no_zombie_children(self, d, pid)), 2)
            self.untouched(d, a)
            self.alive(d)
        finally:
            remount("rw")
        # The pool recovers, and the cgroup of the discarded sandbox (which
        # could not be removed while read-only) goes.
        wait_until(lambda: info(d)["pool"] == 1, timeout=60, what="the pool to refill")
        wait_until(lambda: cgroup_names(d) is not None and len(cgroup_names(d)) == 2
                   and a in cgroup_names(d), timeout=30, what="only a's and the pool's cgroups")
        b = d.create(memory="256M")
        self.assertEqual(d.exec(b, argv=["echo", "ok"])["stdout"], "ok\n")
        self.assertEqual(d.kill(b).status, 204)
        self.untouched(d, a)
        wait_until(lambda: info(d)["pool"] == 1, timeout=60, what="the pool to refill")
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])


class OutOfFds(FaultTest):
    """The daemon's RLIMIT_NOFILE lowered while it runs (prlimit). Two
    processes open fds: the front end (connections, commands' pipes, the
    channels to the parent, the fds the parent hands it) and the privileged
    parent (cgroups, the new init's socket and pidfd, files opened in a
    sandbox's root, metrics). Each is starved in turn, the other left alone."""

    def limit(self, pid, spare):
        """Lower pid's limit so that exactly `spare` fd numbers are free
        (once the last request's connection is closed); the other
        process's limit back to what it was."""
        for p in self.pids:
            prlimit_nofile(p, self.limits[p])
        wait_until(lambda: open_connections(self.d) == 0, what="connections to close")
        used = set(int(x) for x in os.listdir("/proc/%d/fd" % pid))
        n, free = 0, 0
        while free < spare:
            if n not in used:
                free += 1
            n += 1
        prlimit_nofile(pid, (n, self.limits[pid][1]))

    def starved(self, d, a, emfile):
        """Every request that needs an fd of the starved process: 429."""
        self.assertEqual(d.api("GET", "/healthz").status, 200)
        self.assertEqual(d.api("GET", "/v1/sandboxes/" + a).status, 200)
        self.assertError(d.api("POST", "/v1/sandboxes", {}), 429, "resource_exhausted", emfile)
        self.assertError(d.upload(a, "/tmp/new", b"x" * 100000), 429, "resource_exhausted",
                         emfile)
        self.assertError(d.api("GET", "/v1/sandboxes/%s/files?%s" % (a, q(path="/tmp/kept"))),
                         429, "resource_exhausted", emfile)
        self.assertError(d.api("GET", "/v1/sandboxes/%s/files/list?path=/tmp" % a), 429,
                         "resource_exhausted", emfile)

    def test_no_fds_left(self):
        d = self.d = self.daemon(pool=0)
        d.start()
        pid = http_pid(d)
        engine = parent_pid(d)
        self.pids = (pid, engine)
        a = d.create()
        self.keep_file(d, a)
        # Something that keeps working inside, whatever the daemon lacks.
        r = d.api("POST", "/v1/sandboxes/%s/processes" % a,
                  {"cmd": "while true; do echo tick >> /tmp/ticks; sleep 0.05; done"})
        self.assertEqual(r.status, 201, r)
        base = baseline(d)
        self.limits = {p: prlimit_nofile(p) for p in self.pids}
        emfile = "Too many open files"
        try:
            # The front end with one fd: the connection's.
            self.limit(pid, 1)
            self.starved(d, a, emfile)
            self.assertError(d.api("POST", "/v1/sandboxes/%s/exec" % a, {"argv": ["true"]}), 429,
                             "resource_exhausted", emfile)
            # Metrics it cannot read are an error, not zeros.
            self.assertError(d.api("GET", "/v1/sandboxes/%s/metrics" % a), 429,
                             "resource_exhausted", emfile)
            # The parent with none: what it must open fails the same way
            # (a command runs without it: the front end talks to init).
            self.limit(engine, 0)
            self.starved(d, a, emfile)
            self.assertError(d.api("GET", "/v1/sandboxes/%s/metrics" % a), 429,
                             "resource_exhausted", emfile)
            # A create with each fd budget in turn, of each process, fails at
            # each of its steps, always cleanly, until it has enough.
            for starve in (engine, pid):
                made = None
                for spare in range(0 if starve == engine else 1, 40):
                    self.limit(starve, spare)
                    r = d.api("POST", "/v1/sandboxes", {})
                    if r.status == 201:
                        made = r.json()["id"]
                        break
                    self.assertError(r, 429, "resource_exhausted", emfile)
                    self.assertEqual(sandbox_ids(d), [a])
                    self.assertEqual(len(no_zombie_children(self, d, pid)), 2)  # zygote, a's init
                    self.assertEqual(cgroup_names(d), {a})
                self.assertIsNotNone(made, "no create succeeded with up to 40 fds to spare")
                self.assertEqual(d.kill(made).status, 204)
            self.alive(d)
        finally:
            for p in self.pids:
                prlimit_nofile(p, self.limits[p])
        self.untouched(d, a)
        ticks = d.exec(a, cmd="wc -l < /tmp/ticks")["stdout"]
        wait_until(lambda: d.exec(a, cmd="wc -l < /tmp/ticks")["stdout"] != ticks,
                   what="the background command to go on")
        b = d.create()
        self.assertEqual(d.exec(b, argv=["echo", "ok"])["stdout"], "ok\n")
        self.assertEqual(d.upload(b, "/tmp/new", b"x" * 100000).status, 201)
        self.assertEqual(d.kill(b).status, 204)
        self.assertEqual(len(no_zombie_children(self, d, pid)), 2)
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])


class Closed(Exception):
    """The daemon ended an answer early."""


def sanitized(binary):
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


class FailAlloc:
    """The control words of tests/fault/failalloc.c, in a file it maps."""

    EVERY, CALLS, FAILED = 0, 1, 2

    def __init__(self, path):
        self.path = path
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
        self.f = open(path, "r+b")
        self.m = mmap.mmap(self.f.fileno(), 4096)

    def __getitem__(self, i):
        return struct.unpack_from("=Q", self.m, 8 * i)[0]

    def __setitem__(self, i, v):
        struct.pack_into("=Q", self.m, 8 * i, v)

    def close(self):
        self.m.close()
        self.f.close()
        os.unlink(self.path)


@unittest.skipIf(sanitized(SBXD), "failalloc.so needs the plain build (ASan has its own allocator)")
@unittest.skipUnless(os.path.exists(FAILALLOC), "build/failalloc.so not built")
class AllocationFailures(FaultTest):
    """failalloc.so LD_PRELOADed into the daemon makes every Nth allocation
    fail (malloc, calloc, realloc, aligned ones; glibc's internal ones too)
    while the test drives a mix of requests. Whatever is asked during the
    window may fail; the daemon may not crash, hang or leak, and after the
    window everything works."""

    def request(self, fn):
        """One request of the mix: its status, or "closed" when the
        daemon hung up (libmicrohttpd does that without memory; a stream
        without memory for its next lines ends cut short)."""
        try:
            r = fn()
        except (ConnectionError, http.client.RemoteDisconnected, http.client.IncompleteRead,
                http.client.BadStatusLine, Closed) as e:
            return "closed", repr(e)
        if r.status in (200, 201, 204):
            return r.status, None
        body = r.json()
        self.assertEqual(body["code"], r.status, body)
        self.assertTrue(body["message"], body)
        # Out of memory (503), or ENOMEM from the kernel (429).
        self.assertIn((r.status, body["error"]), ((503, "unavailable"),
                                                   (429, "resource_exhausted")), body)
        return r.status, body["message"]

    def mix(self, d, a, kind):
        if kind == "create":
            r = d.api("POST", "/v1/sandboxes", {"metadata": {"k": "v"}, "env": {"A": "b"}})
            if r.status == 201:
                k = d.kill(r.json()["id"])
                self.assertEqual(k.status, 204, k)
            return r
        if kind == "exec":
            r = d.api("POST", "/v1/sandboxes/%s/exec" % a, {"cmd": "seq 1 1000; echo err >&2"})
            if r.status == 200:
                res, want = r.json(), "".join("%d\n" % i for i in range(1, 1001))
                # Output the daemon had no memory to keep is reported truncated.
                self.assertTrue(want.startswith(res["stdout"]), res)
                if not res["stdout_truncated"]:
                    self.assertEqual(res["stdout"], want)
            return r
        if kind == "files":
            r = d.upload(a, "/tmp/f", b"x" * 300000)
            if r.status == 201:
                r = d.api("GET", "/v1/sandboxes/%s/files?path=/tmp/f" % a)
                if r.status == 200:
                    self.assertEqual(r.body, b"x" * 300000)
            return r
        if kind == "misc":
            for path in ("/v1/sandboxes", "/v1/sandboxes/%s/metrics" % a, "/v1/keys",
                         "/v1/sandboxes/%s/files/list?path=/tmp" % a):
                r = d.api("GET", path)
                if r.status != 200:
                    return r
            return d.api("POST", "/v1/keys", {})
        if kind == "stream":
            conn, resp = open_stream(d, "POST", "/v1/sandboxes/%s/exec" % a,
                                     {"cmd": "seq 1 3000", "stream": True})
            try:
                if resp.status != 200:
                    return http_response(resp)
                out, end = [], None
                while True:
                    try:
                        line = resp.readline()
                        ev = json.loads(line) if line else None
                    except ValueError:
                        raise Closed("a stream cut in the middle of a line")
                    if ev is None:
                        break
                    if ev["type"] == "stdout":
                        out.append(ev["data"])
                    end = ev
                if end is None or end["type"] != "exit":
                    raise Closed("a stream cut short")
                # Lossless: whole, in order.
                self.assertEqual("".join(out), "".join("%d\n" % i for i in range(1, 3001)))
                return http_response(resp, 200)
            finally:
                conn.close()
        raise AssertionError(kind)

    def test_allocations_fail(self):
        d = self.daemon(pool=1)
        ctl = FailAlloc(os.path.join(tempfile.gettempdir(), d.tag + ".failalloc"))
        self.before_cleanup.append(ctl.close)
        os.environ["LD_PRELOAD"], os.environ["FAILALLOC_CTL"] = FAILALLOC, ctl.path
        try:
            d.start()
        finally:
            del os.environ["LD_PRELOAD"], os.environ["FAILALLOC_CTL"]
        pid = http_pid(d)
        a = d.create()
        self.keep_file(d, a)
        wait_until(lambda: info(d)["pool"] == 1, timeout=60, what="the pool to fill")
        base = baseline(d)
        for every in (3, 17, 97, 600):
            with self.subTest(every=every):
                outcomes = []
                errors = []

                def worker(kind):
                    try:
                        for _ in range(20):
                            outcomes.append((kind,) + self.request(lambda: self.mix(d, a, kind)))
                    except Exception as e:  # noqa: B902 (reported below)
                        errors.append((kind, e))
                failed_before = ctl[FailAlloc.FAILED]
                ctl[FailAlloc.EVERY] = every
                threads = [threading.Thread(target=worker, args=(k,))
                           for k in ("create", "exec", "files", "misc", "stream")]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(300)
                ctl[FailAlloc.EVERY] = 0
                self.assertFalse([t for t in threads if t.is_alive()], "requests hang")
                self.assertEqual(errors, [])
                self.assertGreater(ctl[FailAlloc.FAILED], failed_before)
                self.alive(d)
                # A create answered 503 left nothing; one whose connection
                # the daemon dropped may have made a sandbox nobody heard of
                # (it shows in the list, as for any client that hangs up).
                closed = len([o for o in outcomes if o[:2] == ("create", "closed")])
                extra = set(sandbox_ids(d)) - {a}
                self.assertLessEqual(len(extra), closed, outcomes)
                for sid in extra:
                    self.assertEqual(d.kill(sid).status, 204)
                # After the window: everything works, nothing is left over.
                self.untouched(d, a)
                b = d.create()
                self.assertEqual(d.exec(b, argv=["echo", "ok"])["stdout"], "ok\n")
                self.assertEqual(d.kill(b).status, 204)
                self.assertEqual(sandbox_ids(d), [a])
                wait_until(lambda: info(d)["pool"] == 1, timeout=60, what="the pool to refill")
                wait_until(lambda: cgroup_names(d) is not None and len(cgroup_names(d)) == 2,
                           timeout=30, what="only a's and the pool's cgroups")
                self.assertEqual(len(no_zombie_children(self, d, pid)), 3)
                settle(pid, "fds", base[0])
                settle(pid, "threads", base[1])
        self.assertNotIn("sbx: out of memory", d.read_log())


class _Status:
    def __init__(self, status, body):
        self.status, self.body = status, body

    def json(self):
        return json.loads(self.body)


def http_response(resp, status=None):
    return _Status(status or resp.status, b"" if status else resp.read())


class ClientDisconnects(FaultTest):
    """Clients that close their socket in the middle of a stream, a large
    download and a large upload."""

    def test_hang_ups(self):
        d = self.daemon(pool=0)
        d.start()
        pid = http_pid(d)
        a = d.create(memory="1G", disk="400M")
        b = d.create()
        self.keep_file(d, a)
        res = d.exec(a, cmd="head -c 200M /dev/zero > /tmp/big && echo ok")
        self.assertEqual(res["stdout"], "ok\n", res)
        base = baseline(d)

        # Another stream, which must not notice anything.
        oconn, oresp = open_stream(d, "POST", "/v1/sandboxes/%s/exec" % b,
                                   {"cmd": "for i in $(seq 1 40); do echo $i; sleep 0.05; done",
                                    "stream": True})

        # 1. A stream exec with endless output: the client reads 1 MiB, then
        # stops reading until everything between them is full (the socket,
        # the daemon's buffer, the pipe: the command no longer gets to
        # write), and hangs up.
        body = json.dumps({"cmd": "while :; do head -c 65536 /dev/zero; echo >> /tmp/progress;"
                                  " done", "stream": True}).encode()
        s = raw_request(d, b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (a.encode(), len(body), body))
        got = 0
        while got < MIB:
            got += len(s.recv(65536))
        progress = []

        def blocked():
            progress.append(d.exec(a, cmd="wc -l < /tmp/progress")["stdout"])
            return len(progress) >= 5 and len(set(progress[-5:])) == 1
        wait_until(blocked, timeout=60, interval=0.2, what="the command to block")
        s.close()
        # As documented: the command is killed, its process ends and leaves
        # the list (its full buffer is drained and thrown away).
        wait_until(lambda: d.api("GET", "/v1/sandboxes/%s/processes" % a).json()["processes"]
                   == [], timeout=30, what="the command to end")
        # Nothing of it left inside: init and this ps only.
        self.assertEqual(d.exec(a, argv=["ps", "-e", "-o", "pid="])["stdout"].split()[0], "1")
        self.assertEqual(len(d.exec(a, argv=["ps", "-e", "-o", "pid="])["stdout"].split()), 2)

        # 2. A download of 200 MB, cut after 1 MiB.
        s = raw_request(d, b"GET /v1/sandboxes/%s/files?path=/tmp/big HTTP/1.1\r\nHost: x\r\n\r\n"
                        % a.encode())
        got = 0
        while got < MIB:
            got += len(s.recv(65536))
        s.close()

        # 3. An upload announcing 100 MiB, cut after 1 MiB: nothing is left
        # of it (the hidden temporary file is removed).
        s = raw_request(d, b"PUT /v1/sandboxes/%s/files?path=/tmp/up HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: %d\r\n\r\n" % (a.encode(), 100 * MIB))
        for _ in range(16):
            s.sendall(b"u" * 65536)
        s.close()
        wait_until(lambda: sorted(e["name"] for e in d.api(
            "GET", "/v1/sandboxes/%s/files/list?path=/tmp" % a).json()["entries"])
            == ["big", "kept", "progress"], timeout=30, what="no trace of the upload")

        # The other stream ran to its end, whole.
        events = []
        while True:
            ev = read_event(oresp)
            if ev is None:
                break
            events.append(ev)
        oconn.close()
        self.assertEqual("".join(e["data"] for e in events if e["type"] == "stdout"),
                         "".join("%d\n" % i for i in range(1, 41)))
        self.assertEqual((events[-1]["type"], events[-1]["exit_code"]), ("exit", 0))

        self.untouched(d, a)
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])


class InitKilled(FaultTest):
    """kill -9 of a sandbox's PID 1 from the host."""

    def test_pid1_killed(self):
        d = self.daemon(pool=0)
        d.start()
        pid = http_pid(d)
        b = d.create()
        self.keep_file(d, b)
        base = baseline(d)
        a = d.create()
        r = d.api("POST", "/v1/sandboxes/%s/processes" % a, {"argv": ["sleep", "1000"]})
        self.assertEqual(r.status, 201, r)
        bg = r.json()["pid"]
        answers = {}

        def ask(name, method, path, body=None):
            answers[name] = d.api(method, path, body)
        waiting = [threading.Thread(target=ask, args=args) for args in (
            ("exec", "POST", "/v1/sandboxes/%s/exec" % a, {"argv": ["sleep", "1000"]}),
            ("wait", "GET", "/v1/sandboxes/%s/processes/%d/wait" % (a, bg)))]
        for t in waiting:
            t.start()
        conn, resp = open_stream(d, "POST", "/v1/sandboxes/%s/exec" % a,
                                 {"cmd": "echo started; sleep 1000", "stream": True})
        self.assertEqual(read_event(resp)["type"], "start")
        self.assertEqual(read_event(resp)["data"], "started\n")
        wait_until(lambda: len(d.api("GET", "/v1/sandboxes/%s/processes" % a)
                               .json()["processes"]) == 3, what="the commands to start")
        pids = sandbox_pids(d, a)
        os.kill(init_pid(d, a), signal.SIGKILL)

        reason = "sandbox init died (killed by SIGKILL)"
        events = []
        while True:
            ev = read_event(resp)
            if ev is None:
                break
            events.append(ev)
        conn.close()
        self.assertEqual(events[-1]["type"], "exit", events)
        self.assertEqual((events[-1]["signal"], events[-1]["reason"]), ("SIGKILL", reason))
        for t in waiting:
            t.join(60)
        for name in ("exec", "wait"):
            r = answers[name]
            self.assertEqual(r.status, 200, (name, r))
            res = r.json()
            self.assertEqual((res["exit_code"], res["signal"], res["reason"], res["oom_killed"]),
                             (None, "SIGKILL", reason, False), name)
        wait_until(lambda: d.api("GET", "/v1/sandboxes/" + a).status == 404,
                   what="the sandbox to be gone")
        wait_until(lambda: cgroup_names(d) == {b}, what="its cgroups to be removed")
        self.assertFalse([p for p, _, _ in processes_with_uid_in(d.uid_base, d.uid_end)
                          if p in pids])
        with sqlite3.connect(os.path.join(d.state, "sbx.db")) as db:
            row = db.execute("SELECT state, end_reason FROM sandboxes WHERE id = ?",
                             (a,)).fetchone()
        self.assertEqual(row, ("died", reason))
        self.untouched(d, b)
        self.assertEqual(sandbox_ids(d), [b])
        self.alive(d)
        self.assertEqual(len(no_zombie_children(self, d, pid)), 2)
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])


class MemoryPressure(FaultTest):
    """The sandboxes' cgroup parent gets a memory limit below what three
    sandboxes, each well within its own limit, want together."""

    HOG = ("import sys, time\n"
           "b = b'x' * (300 << 20)\n"
           "print('holding', flush=True)\n"
           "time.sleep(600)\n")

    def test_host_short_of_memory(self):
        d = self.daemon(pool=1)
        d.start()
        bystander = d.create(memory="64M")
        self.keep_file(d, bystander)
        hogs = [d.create(memory="400M") for _ in range(3)]
        pid = http_pid(d)
        wait_until(lambda: info(d)["pool"] == 1, timeout=60, what="the pool to fill")
        base = baseline(d)
        if cgroup_version() == 1:
            limit_file = os.path.join("/sys/fs/cgroup/memory", d.cgroup_parent,
                                      "memory.limit_in_bytes")
            unlimited = "-1"
        else:
            limit_file = os.path.join("/sys/fs/cgroup", d.cgroup_parent, "memory.max")
            unlimited = "max"
        with open(limit_file, "w") as f:
            f.write(str(512 << 20))
        try:
            started = {}
            for h in hogs:
                r = d.api("POST", "/v1/sandboxes/%s/processes" % h,
                          {"argv": ["/usr/bin/python3", "-c", self.HOG]})
                self.assertEqual(r.status, 201, r)
                started[h] = r.json()["pid"]

            def state(h):
                r = d.api("GET", "/v1/sandboxes/%s/processes/%d" % (h, started[h]))
                self.assertEqual(r.status, 200, r)
                p = r.json()
                if not p["running"]:
                    return "ended"
                m = d.api("GET", "/v1/sandboxes/%s/metrics" % h).json()
                return "holding" if m["memory_bytes"] >= 300 << 20 else "growing"
            # 3 x 300M cannot fit in 512M: until each hog holds its memory
            # or is dead.
            wait_until(lambda: all(state(h) != "growing" for h in hogs), timeout=120,
                       what="the hogs to hold their memory or be killed")
            results = {}
            for h in hogs:
                if state(h) == "holding":
                    r = d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (h, started[h]),
                              {"signal": "SIGTERM"})
                    self.assertEqual(r.status, 204, r)
                r = d.api("GET", "/v1/sandboxes/%s/processes/%d/wait" % (h, started[h]))
                self.assertEqual(r.status, 200, r)
                results[h] = r.json()
        finally:
            with open(limit_file, "w") as f:
                f.write(unlimited)
        killed = [h for h in hogs if results[h]["oom_killed"]]
        self.assertTrue(killed, results)
        for h in killed:
            res = results[h]
            self.assertEqual((res["exit_code"], res["signal"], res["timed_out"]),
                             (None, "SIGKILL", False), res)
            self.assertEqual(res["reason"],
                             "killed: out of memory on the host (below the limit of 400M)")
            self.assertGreaterEqual(d.api("GET", "/v1/sandboxes/%s/metrics" % h)
                                    .json()["oom_kills"], 1)
        for h in set(hogs) - set(killed):
            self.assertEqual(results[h]["signal"], "SIGTERM", results[h])
        # The OOM killer stayed inside: every sandbox and its init lives.
        self.assertEqual(sorted(sandbox_ids(d)), sorted(hogs + [bystander]))
        for h in hogs:
            self.assertEqual(d.exec(h, argv=["echo", "alive"])["stdout"], "alive\n")
        self.untouched(d, bystander)
        self.alive(d)
        self.assertEqual(len(no_zombie_children(self, d, pid)), 1 + 4 + info(d)["pool"])
        settle(pid, "fds", base[0])
        settle(pid, "threads", base[1])


if __name__ == "__main__":
    unittest.main()
