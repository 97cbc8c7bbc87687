"""The audit log (docs/audit.md): what is recorded (API calls native and
E2B, commands, file writes with their SHA-256, sandbox lifecycles), what
never is (API keys, access tokens, file contents), and that `sbx audit
verify` proves the chain and finds any edit, deletion, reordering or cut,
across rotations and daemon restarts. `sbx audit tail` filters and follows.
"""
import hashlib
import http.client
import json
import os
import shutil
import signal
import struct
import subprocess
import time
import unittest

from harness import SBX, Daemon, DaemonTest, free_port
from sbx_helpers import wait_until
from test_restart import RestartTest

ENVD = "49983"


def audit_dir(d):
    return os.path.join(d.state, "audit")


def records(d, name="audit.log"):
    with open(os.path.join(audit_dir(d), name), "rb") as f:
        return [json.loads(line) for line in f.read().splitlines()]


def all_records(d):
    names = sorted((n for n in os.listdir(audit_dir(d)) if n.startswith("audit.log.")),
                   key=lambda n: int(n.rsplit(".", 1)[1]))
    out = []
    for n in names + ["audit.log"]:
        if os.path.exists(os.path.join(audit_dir(d), n)):
            out += records(d, n)
    return out


def find(d, pred, what):
    """The first record matching pred, waiting for the writer."""
    return wait_until(lambda: next((r for r in all_records(d) if pred(r)), None), what=what)


def verify(state):
    return subprocess.run([SBX, "audit", "verify", "--state", state], capture_output=True,
                          text=True, timeout=120)


class AuditRecords(DaemonTest):
    listen = True
    extra_args = ("--domain", "sbx.test")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.key = cls.d.new_key("acme")

    def tcp(self, method, path, body=None, headers=None):
        host, port = self.d.listen.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def test_api_command_file_lifecycle(self):
        d = self.d
        st, body = self.tcp("POST", "/v1/sandboxes", json.dumps({"timeout": "60s"}),
                            {"Authorization": "Bearer " + self.key})
        self.assertEqual(st, 201, body)
        sid = json.loads(body)["id"]
        created = find(d, lambda r: r["kind"] == "sandbox" and r["event"] == "created"
                       and r["sandbox"] == sid, "the created record")
        self.assertEqual(created["tenant"], "acme")
        api = find(d, lambda r: r["kind"] == "api" and r["action"] == "POST /v1/sandboxes"
                   and r.get("sandbox") == sid, "the create call's record")
        self.assertEqual(api["tenant"], "acme")
        self.assertEqual(api["status"], 201)
        self.assertTrue(api["completed"])

        # A command: argv, user, cwd, exit code, duration.
        st, body = self.tcp("POST", "/v1/sandboxes/%s/exec" % sid,
                            json.dumps({"argv": ["sh", "-c", "sleep 0.2; exit 3"],
                                        "cwd": "/tmp"}),
                            {"Authorization": "Bearer " + self.key})
        self.assertEqual(st, 200, body)
        cmd = find(d, lambda r: r["kind"] == "command" and r["sandbox"] == sid,
                   "the command record")
        self.assertEqual(cmd["argv"], ["sh", "-c", "sleep 0.2; exit 3"])
        self.assertEqual(cmd["cwd"], "/tmp")
        self.assertEqual(cmd["user"], "user")
        self.assertEqual(cmd["exit_code"], 3)
        self.assertIsNone(cmd["signal"])
        self.assertGreaterEqual(cmd["duration_ms"], 150)
        # Killed by a signal.
        d.exec(sid, argv=["sh", "-c", "kill -9 $$"])
        cmd = find(d, lambda r: r["kind"] == "command" and r["sandbox"] == sid
                   and r["signal"] is not None, "the signal record")
        self.assertEqual(cmd["signal"], "SIGKILL")
        self.assertIsNone(cmd["exit_code"])

        # A file through the native API: size and SHA-256 of the content.
        content = os.urandom(300 * 1024) + b"SECRET-CONTENT-MARKER-1"
        r = d.upload(sid, "/home/user/data.bin", content)
        self.assertEqual(r.status, 201, r)
        fw = find(d, lambda r: r["kind"] == "file_write" and r["sandbox"] == sid,
                  "the file record")
        self.assertEqual(fw["path"], "/home/user/data.bin")
        self.assertEqual(fw["size"], len(content))
        self.assertEqual(fw["sha256"], hashlib.sha256(content).hexdigest())
        self.assertEqual(fw["via"], "native")
        # The call itself, and the route as a pattern (no query).
        api = find(d, lambda r: r["kind"] == "api"
                   and r["action"] == "PUT /v1/sandboxes/*/files", "the upload call")
        self.assertEqual(api["sandbox"], sid)
        self.assertEqual(api["status"], 201)
        self.assertEqual(api["tenant"], "admin")

        # A refused call is recorded too.
        st, _ = self.tcp("GET", "/v1/sandboxes", None, {"Authorization": "Bearer wrong-key"})
        self.assertEqual(st, 401)
        find(d, lambda r: r["kind"] == "api" and r["status"] == 401 and r["tenant"] is None,
             "the refused call")

        # Killed.
        self.assertEqual(d.kill(sid).status, 204)
        killed = find(d, lambda r: r["kind"] == "sandbox" and r["event"] == "killed"
                      and r["sandbox"] == sid, "the killed record")
        self.assertEqual(killed["tenant"], "acme")

    def test_expired(self):
        sid = self.d.create(timeout="1s")
        find(self.d, lambda r: r["kind"] == "sandbox" and r["event"] == "expired"
             and r["sandbox"] == sid, "the expired record")

    def test_e2b_routes_and_files(self):
        d = self.d
        st, body = self.tcp("POST", "/v2/sandboxes", json.dumps({"templateID": "base"}),
                            {"X-API-Key": self.key, "Content-Type": "application/json"})
        self.assertEqual(st, 201, body)
        sb = json.loads(body)
        sid, token = sb["sandboxID"], sb["envdAccessToken"]
        api = find(d, lambda r: r["kind"] == "api" and r["action"] == "POST /v2/sandboxes",
                   "the E2B create")
        self.assertEqual(api["sandbox"], sid)
        self.assertEqual(api["tenant"], "acme")
        h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": ENVD, "X-Access-Token": token,
             "Content-Type": "multipart/form-data; boundary=XyZ"}
        content = b"E2B-SECRET-CONTENT-MARKER-2 " * 100
        mp = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/e.txt\"\r\n"
              b"Content-Type: application/octet-stream\r\n\r\n" + content + b"\r\n--XyZ--\r\n")
        st, body = self.tcp("POST", "/files", mp, h)
        self.assertEqual(st, 200, body)
        fw = find(d, lambda r: r["kind"] == "file_write" and r["sandbox"] == sid,
                  "the E2B file record")
        self.assertEqual(fw["path"], "/tmp/e.txt")
        self.assertEqual(fw["size"], len(content))
        self.assertEqual(fw["sha256"], hashlib.sha256(content).hexdigest())
        self.assertEqual(fw["via"], "e2b")
        api = find(d, lambda r: r["kind"] == "api" and r["action"] == "POST /files"
                   and r["sandbox"] == sid, "the envd call")
        self.assertEqual(api["status"], 200)
        self.assertEqual(api["tenant"], "acme")
        # A raw upload.
        h2 = dict(h, **{"Content-Type": "application/octet-stream"})
        st, body = self.tcp("POST", "/files?path=/tmp/raw.bin", b"", h2)
        self.assertEqual(st, 200, body)
        fw = find(d, lambda r: r["kind"] == "file_write" and r["path"] == "/tmp/raw.bin",
                  "the raw upload record")
        self.assertEqual(fw["size"], 0)
        self.assertEqual(fw["sha256"], hashlib.sha256(b"").hexdigest())
        # A command through Connect.
        msg = json.dumps({"process": {"cmd": "/bin/echo", "args": ["hi"]}}).encode()
        st, body = self.tcp("POST", "/process.Process/Start",
                            struct.pack(">BI", 0, len(msg)) + msg,
                            dict(h, **{"Content-Type": "application/connect+json",
                                       "Connect-Protocol-Version": "1"}))
        self.assertEqual(st, 200, body)
        find(d, lambda r: r["kind"] == "command" and r["sandbox"] == sid
             and "/bin/echo" in " ".join(r["argv"]), "the E2B command record")
        st, _ = self.tcp("DELETE", "/sandboxes/" + sid, None, {"X-API-Key": self.key})
        self.assertEqual(st, 204)
        find(d, lambda r: r["kind"] == "api" and r["action"] == "DELETE /sandboxes/*"
             and r["sandbox"] == sid and r["status"] == 204, "the E2B kill")

        # No secret ever: API keys, access tokens, file contents.
        time.sleep(0.3)
        raw = b""
        for n in os.listdir(audit_dir(d)):
            with open(os.path.join(audit_dir(d), n), "rb") as f:
                raw += f.read()
        for secret in (self.key.encode(), token.encode(), sb.get("trafficAccessToken", "x" * 40).encode(),
                       b"SECRET-CONTENT-MARKER", b"E2B-SECRET-CONTENT-MARKER"):
            self.assertNotIn(secret, raw)

    def test_info_and_verify(self):
        d = self.d
        d.create()
        r = d.api("GET", "/v1/info")
        audit = r.json()["audit"]
        self.assertTrue(audit["enabled"])
        self.assertTrue(audit["healthy"])
        self.assertIsNone(audit["error"])
        st, body = self.tcp("GET", "/v1/info", None, {"Authorization": "Bearer " + self.key})
        self.assertEqual(json.loads(body)["audit"], {"healthy": True})
        time.sleep(0.3)
        p = verify(d.state)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"^ok: \d+ records, last seq \d+\n$")
        # Every line is canonical: compact, sorted keys; prev chains.
        with open(os.path.join(audit_dir(d), "audit.log"), "rb") as f:
            lines = f.read().splitlines()
        prev = "0" * 64
        for i, line in enumerate(lines):
            o = json.loads(line)
            self.assertEqual(line, json.dumps(o, separators=(",", ":"), sort_keys=True,
                                              ensure_ascii=False).encode())
            self.assertEqual(o["seq"], i + 1)
            self.assertEqual(o["prev"], prev)
            self.assertRegex(o["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            prev = hashlib.sha256(line).hexdigest()
        self.assertEqual(json.loads(lines[0])["kind"], "daemon_started")

    def test_api_route(self):
        d = self.d
        sid = d.create()
        d.sh(sid, "echo via-api")
        find(d, lambda r: r["kind"] == "command" and r["sandbox"] == sid, "the command")
        r = d.api("GET", "/v1/audit?sandbox=%s&limit=1000" % sid)
        self.assertEqual(r.status, 200, r)
        recs = r.json()["records"]
        self.assertFalse(r.json()["more"])
        self.assertTrue(all(x["sandbox"] == sid for x in recs), recs)
        self.assertIn("command", [x["kind"] for x in recs])
        # Paging: after_seq and limit.
        r = d.api("GET", "/v1/audit?after_seq=%d&limit=2" % recs[0]["seq"])
        page = r.json()
        self.assertEqual([x["seq"] for x in page["records"]],
                         [recs[0]["seq"] + 1, recs[0]["seq"] + 2])
        self.assertTrue(page["more"])
        for bad in ("limit=0", "limit=1001", "after_seq=-1", "after_seq=x", "sandbox="):
            self.assertError(d.api("GET", "/v1/audit?" + bad), 400, "invalid_argument")
        # A tenant's key cannot read it.
        st, body = self.tcp("GET", "/v1/audit", None, {"Authorization": "Bearer " + self.key})
        self.assertEqual(st, 403, body)

    def test_tail(self):
        d = self.d
        a, b = d.create(), d.create()
        d.sh(a, "true")
        d.sh(b, "true")
        find(d, lambda r: r["kind"] == "command" and r["sandbox"] == b, "b's command")
        p = subprocess.run([SBX, "audit", "tail", "--state", d.state, "--sandbox", a, "-n", "0"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertTrue(recs)
        self.assertTrue(all(r["sandbox"] == a for r in recs), recs)
        self.assertIn("command", [r["kind"] for r in recs])
        p = subprocess.run([SBX, "audit", "tail", "--state", d.state, "-n", "3"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(len(p.stdout.splitlines()), 3, p.stdout)

        # --follow prints a record written after it started.
        f = subprocess.Popen([SBX, "audit", "tail", "--state", d.state, "--sandbox", b, "-n", "0",
                              "--follow"], stdout=subprocess.PIPE, text=True)
        try:
            seen = []
            # What is there already, then the new one.
            d.sh(b, "echo follow-me")
            deadline = time.time() + 30
            while time.time() < deadline:
                line = f.stdout.readline()
                self.assertTrue(line, "tail --follow ended")
                r = json.loads(line)
                seen.append(r)
                if r["kind"] == "command" and "echo follow-me" in r["argv"]:
                    break
            else:
                self.fail("no new record: %r" % seen)
        finally:
            f.kill()
            f.wait()


class AuditTamper(unittest.TestCase):
    """A real log, copied and broken on purpose, one way at a time."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pool=1).start()
        sid = cls.d.create()
        for i in range(4):
            cls.d.sh(sid, "echo %d" % i)
        cls.d.kill(sid)
        time.sleep(0.3)
        rc = cls.d.stop()
        assert rc == 0, rc
        cls.path = os.path.join(cls.d.state, "audit", "audit.log")
        with open(cls.path, "rb") as f:
            cls.good = f.read()
        assert len(cls.good.splitlines()) >= 12

    @classmethod
    def tearDownClass(cls):
        problems = cls.d.cleanup()
        if problems:
            raise AssertionError("; ".join(problems))

    def write(self, data):
        with open(self.path, "wb") as f:
            f.write(data)

    def tearDown(self):
        self.write(self.good)

    def check(self, want):
        p = verify(self.d.state)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(want, p.stdout)
        return p.stdout

    def test_good(self):
        p = verify(self.d.state)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        n = len(self.good.splitlines())
        self.assertEqual(p.stdout, "ok: %d records, last seq %d\n" % (n, n))

    def test_one_byte_edit(self):
        lines = self.good.splitlines(keepends=True)
        # Line 5: a value changed, the JSON still valid and canonical.
        i = lines[4].index(b'"time":"') + len(b'"time":"2')
        digit = lines[4][i:i + 1]
        lines[4] = lines[4][:i] + (b"1" if digit != b"1" else b"2") + lines[4][i + 1:]
        self.write(b"".join(lines))
        out = self.check("record at audit.log:6 (seq 6): prev hash does not match the previous"
                         " record — edited, deleted or reordered")
        # A byte that breaks the JSON is found on its own line.
        lines = self.good.splitlines(keepends=True)
        lines[4] = lines[4].replace(b"{", b"[", 1)
        self.write(b"".join(lines))
        self.check("record at audit.log:5: not an audit record")
        # Re-spelled JSON of the same value (a space) is an edit too.
        lines = self.good.splitlines(keepends=True)
        lines[4] = lines[4].replace(b'":', b'": ', 1)
        self.write(b"".join(lines))
        self.check("record at audit.log:5 (seq 5): not in the form sbx writes")

    def test_deleted_line(self):
        lines = self.good.splitlines(keepends=True)
        del lines[6]
        self.write(b"".join(lines))
        self.check("record at audit.log:7 (seq 8): prev hash does not match")

    def test_deleted_first_line(self):
        lines = self.good.splitlines(keepends=True)
        self.write(b"".join(lines[1:]))
        self.check("record at audit.log:1 (seq 2): the first record must have seq 1")

    def test_swapped_lines(self):
        lines = self.good.splitlines(keepends=True)
        lines[3], lines[4] = lines[4], lines[3]
        self.write(b"".join(lines))
        self.check("record at audit.log:4 (seq 5): prev hash does not match")

    def test_truncated_last_line(self):
        self.write(self.good[:-10])
        n = len(self.good.splitlines())
        self.check("record at audit.log:%d: truncated" % n)

    # The anchor (priv/audit_anchor.h): the parent's record of the last
    # synced seq and hash, which the front end cannot write.

    def anchor(self):
        with open(os.path.join(self.d.state, "audit-anchor", "head")) as f:
            text = f.read()
        lines = text.splitlines()
        self.assertEqual(lines[0], "sbx audit anchor 1", text)
        return int(lines[1].split()[1]), lines[2].split()[1]

    def test_cut_tail_is_found(self):
        seq, digest = self.anchor()
        lines = self.good.splitlines(keepends=True)
        self.assertGreaterEqual(seq, 10)
        self.assertEqual(hashlib.sha256(lines[seq - 1].rstrip(b"\n")).hexdigest(), digest)
        # A valid chain, its last records gone: only the anchor shows it.
        self.write(b"".join(lines[:seq - 2]))
        self.check("records were cut from the log's end: it ends at seq %d, the daemon had"
                   " written seq %d" % (seq - 2, seq))

    def test_rewritten_tail_is_found(self):
        seq, _ = self.anchor()
        lines = self.good.splitlines(keepends=True)[:seq]
        # Record seq replaced by another, chained and canonical.
        forged = json.loads(lines[seq - 1])
        forged["kind"] = "api"
        forged["action"] = "GET /healthz"
        text = json.dumps(forged, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        lines[seq - 1] = text.encode() + b"\n"
        self.write(b"".join(lines))
        self.check("record seq %d is not the one the daemon wrote (its hash differs from the"
                   " anchor's) — the log's end was rewritten" % seq)

    def test_anchor_moved_or_replaced_is_found(self):
        adir = os.path.join(self.d.state, "audit-anchor")
        head = os.path.join(adir, "head")
        st = os.stat(adir)
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o755))
        st = os.stat(head)
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o644))
        # The front end's account (the state directory's owner) cannot
        # write there.
        uid = os.stat(self.d.state).st_uid
        self.assertNotEqual(uid, 0)
        p = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                            "sh", "-c", "echo x > %s; touch %s/other" % (head, adir)],
                           capture_output=True, text=True)
        self.assertEqual(p.stderr.count("Permission denied"), 2, p)
        try:
            os.chown(head, uid, uid)
            self.check("the log's anchor `%s` is not root's" % head)
        finally:
            os.chown(head, 0, 0)
        os.rename(adir, adir + ".moved")
        try:
            self.check("the log's anchor `%s` is missing: moved or removed" % head)
        finally:
            os.rename(adir + ".moved", adir)
        self.assertEqual(verify(self.d.state).returncode, 0)


class AuditAnchorRemade(RestartTest):
    """An anchor missing at start is remade from the log as it is, and
    says so for good: in the anchor, in verify's answer, in the log."""

    def test_remade_and_said(self):
        sid = self.d.create()
        self.d.sh(sid, "true")
        adir = os.path.join(self.d.state, "audit-anchor")
        wait_until(lambda: int(open(os.path.join(adir, "head")).read().split()[5]) > 0,
                   what="the anchor")
        self.kill9()
        shutil.rmtree(adir)
        self.restart()
        find(self.d, lambda r: r["kind"] == "audit" and r.get("event") == "anchor_remade",
             "the remade record")
        wait_until(lambda: "remade " in open(os.path.join(adir, "head")).read(),
                   what="the remade line")
        p = verify(self.d.state)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("; the anchor was remade (seq and time: ", p.stdout)


class AuditRotationRestart(unittest.TestCase):
    """Small files: the chain goes on across rotations and restarts."""

    def test_rotation_and_restart(self):
        # No pool: a new pool sandbox could take the lost one's id range.
        d = Daemon(pool=0, extra=("--audit-max-size", "4K"), kill_on_exit=False)
        d2 = None
        try:
            d.start()
            sid = d.create(timeout="120s")
            for i in range(15):
                d.sh(sid, "echo %d" % i)
            wait_until(lambda: len([n for n in os.listdir(audit_dir(d))
                                    if n.startswith("audit.log.")]) >= 2, what="rotations")
            time.sleep(0.3)
            for n in os.listdir(audit_dir(d)):
                self.assertLessEqual(os.path.getsize(os.path.join(audit_dir(d), n)), 4096, n)
            first = records(d, "audit.log.2")[0]
            self.assertEqual(first["kind"], "rotated")
            self.assertEqual(first["previous"], "audit.log.1")
            with open(os.path.join(audit_dir(d), "audit.log.1"), "rb") as f:
                last = f.read().splitlines()[-1]
            self.assertEqual(first["prev"], hashlib.sha256(last).hexdigest())
            p = verify(d.state)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

            dead = d.create(timeout="120s")
            time.sleep(0.3)
            before = all_records(d)[-1]["seq"]

            # kill -9 of the whole daemon, then a new one on the same state;
            # meanwhile one sandbox dies (everything in its cgroup killed).
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            d.log.close()
            for pid in _cgroup_pids(d, dead):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            wait_until(lambda: not _cgroup_pids(d, dead), what="the dead sandbox to empty")
            d.start()
            find(d, lambda r: r["kind"] == "sandbox" and r["event"] == "adopted"
                 and r["sandbox"] == sid, "the adopted record")
            lost = find(d, lambda r: r["kind"] == "sandbox" and r["event"] == "lost"
                        and r["sandbox"] == dead, "the lost record")
            self.assertTrue(lost["reason"])
            started = [r for r in all_records(d) if r["kind"] == "daemon_started"]
            self.assertGreaterEqual(len(started), 2)
            self.assertGreater(started[-1]["seq"], before)
            d.sh(sid, "echo after")
            find(d, lambda r: r["kind"] == "command" and r["argv"][-1] == "echo after",
                 "a command after the restart")
            time.sleep(0.3)
            p = verify(d.state)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            seqs = [r["seq"] for r in all_records(d)]
            self.assertEqual(seqs, list(range(1, len(seqs) + 1)))

            # The front end alone dies: the parent restarts it; the chain goes on.
            fe = [int(p) for p in os.listdir("/proc") if p.isdigit()
                  and _cmdline(p).startswith(b"%s\0--frontend" % d.args[0].encode())
                  and _ppid(p) == d.proc.pid]
            self.assertEqual(len(fe), 1, fe)
            os.kill(fe[0], signal.SIGKILL)
            wait_until(lambda: len([r for r in all_records(d) if r["kind"] == "daemon_started"])
                       >= 3, what="the front end's restart")
            wait_until(lambda: d.api("GET", "/healthz").status == 200, what="health")
            d.kill(sid)
            time.sleep(0.3)
            p = verify(d.state)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

            # Deleting a whole rotated file in the middle breaks the chain,
            # at the first record of the file after it.
            names = sorted((n for n in os.listdir(audit_dir(d)) if n.startswith("audit.log.")),
                           key=lambda n: int(n.rsplit(".", 1)[1])) + ["audit.log"]
            gone, after = names[-2], names[-1]
            os.rename(os.path.join(audit_dir(d), gone), os.path.join(d.state, "away"))
            p = verify(d.state)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn("record at %s:1 " % after, p.stdout)
            self.assertIn("prev hash does not match", p.stdout)
            os.rename(os.path.join(d.state, "away"), os.path.join(audit_dir(d), gone))
        finally:
            d.stop()
            # Without --kill-on-exit: a last daemon with it ends what is left.
            d2 = Daemon(pool=1)
            shutil.rmtree(d2.state, ignore_errors=True)
            d2.state, d2.cgroup_parent, d2.uid_base, d2.uid_end = (
                d.state, d.cgroup_parent, d.uid_base, d.uid_end)
            d2.args = list(d.args) + ["--kill-on-exit"]
            d2.start()
            d2.stop()
            problems = d.cleanup()
            try:
                os.unlink(d2.log_path)
            except OSError:
                pass
            self.assertEqual(problems, [])


class AuditUnwritable(unittest.TestCase):
    """While the log cannot be written, changes are refused (503) and
    /v1/info says why; once it can, the queued records are written in
    order and the chain holds."""

    def test_refuse_then_recover(self):
        d = Daemon(pool=1, extra=("--audit-max-size", "4K"))
        blocker = None
        try:
            d.start()
            # The next rotation's name taken by a directory: the rename fails.
            blocker = os.path.join(audit_dir(d), "audit.log.1")
            os.mkdir(blocker)
            sid = d.create()
            wait_until(lambda: not d.api("GET", "/v1/info").json()["audit"]["healthy"]
                       or d.api("POST", "/v1/sandboxes/%s/exec" % sid,
                                {"cmd": "true"}).status < 0, what="the log to fill")
            info = d.api("GET", "/v1/info").json()["audit"]
            self.assertFalse(info["healthy"])
            self.assertIn("rename", info["error"])
            r = d.api("POST", "/v1/sandboxes", {})
            self.assertEqual(r.status, 503, r)
            self.assertIn("audit log", r.json()["message"])
            r = d.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true"})
            self.assertEqual(r.status, 503, r)
            # Reads go on.
            self.assertEqual(d.api("GET", "/v1/sandboxes/" + sid).status, 200)
            self.assertIn("audit log: ", d.read_log())
            os.rmdir(blocker)
            blocker = None
            wait_until(lambda: d.api("GET", "/v1/info").json()["audit"]["healthy"],
                       what="the log to be writable again")
            d.sh(sid, "echo back")
            find(d, lambda r: r["kind"] == "command" and r["argv"][-1] == "echo back",
                 "a record after the recovery")
            self.assertTrue(any(r["kind"] == "api" and r["status"] == 503
                                for r in all_records(d)))
            d.kill(sid)
            time.sleep(0.3)
            p = verify(d.state)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        finally:
            if blocker:
                os.rmdir(blocker)
            d.stop()
            self.assertEqual(d.cleanup(), [])


def _cgroup_pids(d, sid):
    from harness import cgroup_version
    if cgroup_version() == 2:
        path = os.path.join("/sys/fs/cgroup", d.cgroup_parent, sid, "cgroup.procs")
    else:
        path = os.path.join("/sys/fs/cgroup", "pids", d.cgroup_parent, sid, "cgroup.procs")
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _ppid(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


if __name__ == "__main__":
    unittest.main()
