"""Sandboxes API: create with every field, get, list and its metadata
filters, lifetime (extend, shorten, expiry), kill, metrics, info, health."""
import calendar
import os
import re
import shutil
import subprocess
import tempfile
import time

from harness import SBXD, DaemonTest
from sbx_helpers import MIB, q, sandbox_ids, wait_until

GIB = 1024 * MIB
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def epoch(ts):
    """Seconds, with the milliseconds sbx gives."""
    whole, frac = ts.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + int(frac) / 1000


class SandboxCreate(DaemonTest):
    def get(self, sid):
        r = self.d.api("GET", "/v1/sandboxes/" + sid)
        self.assertEqual(r.status, 200, r)
        return r.json()

    def test_defaults(self):
        r = self.d.api("POST", "/v1/sandboxes", {})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.headers.get("Content-Type"), "application/json")
        sb = r.json()
        self.assertEqual(set(sb), {"id", "tenant", "template", "state", "user", "created_at",
                                   "expires_at", "timeout", "limits", "env", "metadata",
                                   "network", "lifecycle", "isolation"})
        self.assertEqual(sb["lifecycle"], {"on_timeout": "kill", "auto_resume": False,
                                           "keep_memory": True})
        self.assertEqual(sb["network"], {"allow": [], "deny": []})  # no network by default
        self.assertEqual(sb["isolation"], "namespace")  # the default engine
        self.assertRegex(sb["id"], r"^[a-z0-9]{20}$")
        self.assertEqual(sb["tenant"], "default")
        self.assertEqual(sb["template"], "base")
        self.assertEqual(sb["state"], "running")
        self.assertEqual(sb["user"], "user")
        self.assertEqual(sb["timeout"], 300)
        self.assertEqual(sb["limits"], {"memory": 512 * MIB, "cpus": 1, "pids": 256, "disk": GIB})
        self.assertEqual(sb["env"], {})
        self.assertEqual(sb["metadata"], {})
        self.assertRegex(sb["created_at"], RFC3339)
        self.assertRegex(sb["expires_at"], RFC3339)
        self.assertLessEqual(abs(epoch(sb["created_at"]) - time.time()), 120)
        self.assertIn(epoch(sb["expires_at"]) - epoch(sb["created_at"]), (299, 300, 301))
        # An empty body means the same as {}.
        r = self.d.api("POST", "/v1/sandboxes")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["limits"], sb["limits"])
        # GET gives the very object create answered.
        self.assertEqual(self.get(sb["id"]), sb)
        # An optional field set to null counts as absent.
        r = self.d.api("POST", "/v1/sandboxes", {k: None for k in (
            "template", "timeout", "memory", "cpus", "pids", "disk", "env", "metadata", "user")})
        self.assertEqual(r.status, 201, r)
        nulls = r.json()
        self.assertEqual((nulls["limits"], nulls["timeout"], nulls["user"], nulls["env"]),
                         (sb["limits"], 300, "user", {}))

    def test_every_field(self):
        body = {"template": "base", "timeout": 90, "memory": "256M", "disk": 64 * MIB,
                "cpus": "0.5", "pids": 64, "env": {"FOO": "bar", "EMPTY": ""},
                "metadata": {"owner": "agent-7", "run": "42"}, "user": "root"}
        r = self.d.api("POST", "/v1/sandboxes", body)
        self.assertEqual(r.status, 201, r)
        sb = r.json()
        self.assertEqual(sb["template"], "base")
        self.assertEqual(sb["timeout"], 90)
        self.assertEqual(epoch(sb["expires_at"]) - epoch(sb["created_at"]), 90)
        self.assertEqual(sb["limits"], {"memory": 256 * MIB, "cpus": 0.5, "pids": 64,
                                        "disk": 64 * MIB})
        self.assertEqual(sb["env"], {"FOO": "bar", "EMPTY": ""})
        self.assertEqual(sb["metadata"], {"owner": "agent-7", "run": "42"})
        self.assertEqual(sb["user"], "root")
        self.assertEqual(self.get(sb["id"]), sb)
        # The settings are real, not just recorded.
        res = self.d.sh(sb["id"], 'id -u; echo "$FOO"; df -k /home/user | tail -1')
        lines = res["stdout"].splitlines()
        self.assertEqual(lines[0], "0")
        self.assertEqual(lines[1], "bar")
        self.assertEqual(int(lines[2].split()[1]), 64 * 1024)  # tmpfs size in KiB
        m = self.d.api("GET", "/v1/sandboxes/%s/metrics" % sb["id"]).json()
        self.assertEqual(m["memory_limit"], 256 * MIB)
        self.assertEqual(m["pids_limit"], 64)
        self.assertEqual(m["disk_limit"], 64 * MIB)

    def test_spellings(self):
        """Sizes as integers or strings with units, durations as numbers
        (fractions too) or strings, CPUs as numbers or strings."""
        cases = [
            ({"timeout": "2m"}, "timeout", 120),
            ({"timeout": 1.5}, "timeout", 1.5),
            ({"timeout": "1500ms"}, "timeout", 1.5),
            ({"timeout": "1h"}, "timeout", 3600),
            ({"memory": 268435456}, ("limits", "memory"), 256 * MIB),
            ({"memory": "1G"}, ("limits", "memory"), GIB),
            ({"memory": "65536k"}, ("limits", "memory"), 64 * MIB),
            ({"disk": "64M"}, ("limits", "disk"), 64 * MIB),
            ({"disk": 2 * GIB}, ("limits", "disk"), 2 * GIB),
            ({"cpus": 0.25}, ("limits", "cpus"), 0.25),
            ({"cpus": "2"}, ("limits", "cpus"), 2),
            ({"cpus": 1}, ("limits", "cpus"), 1),
            ({"pids": 16}, ("limits", "pids"), 16),
            ({"pids": 65536}, ("limits", "pids"), 65536),
            ({"user": "user"}, "user", "user"),
        ]
        for body, key, want in cases:
            with self.subTest(body=body):
                r = self.d.api("POST", "/v1/sandboxes", body)
                self.assertEqual(r.status, 201, r)
                sb = r.json()
                got = sb[key[0]][key[1]] if isinstance(key, tuple) else sb[key]
                self.assertEqual(got, want)
                self.assertEqual(self.d.kill(sb["id"]).status, 204)

    def test_list_sorted_and_filtered(self):
        specs = [{"team": "a", "env": "x"}, {"team": "a", "env": "y"}, {"team": "b"},
                 {"odd": "a b&c=d"}]
        ids = []
        for md in specs:
            ids.append(self.d.create(metadata=md))
        r = self.d.api("GET", "/v1/sandboxes")
        self.assertEqual(r.status, 200, r)
        listed = r.json()["sandboxes"]
        self.assertEqual([sb["id"] for sb in listed], ids)  # creation order
        self.assertEqual([sb["metadata"] for sb in listed], specs)

        def ids_for(**filters):
            query = q(**{"metadata." + k: v for k, v in filters.items()})
            r = self.d.api("GET", "/v1/sandboxes?" + query)
            self.assertEqual(r.status, 200, r)
            return [sb["id"] for sb in r.json()["sandboxes"]]

        self.assertEqual(ids_for(team="a"), ids[:2])
        self.assertEqual(ids_for(team="a", env="y"), [ids[1]])
        self.assertEqual(ids_for(team="b"), [ids[2]])
        self.assertEqual(ids_for(odd="a b&c=d"), [ids[3]])
        self.assertEqual(ids_for(team="c"), [])
        self.assertEqual(ids_for(team="b", env="x"), [])
        self.assertEqual(ids_for(nokey="a"), [])
        # A filter must not match by prefix or case.
        self.assertEqual(ids_for(team="A"), [])
        self.assertEqual(ids_for(tea="a"), [])
        # Other query parameters are not filters.
        r = self.d.api("GET", "/v1/sandboxes?limit=1")
        self.assertEqual(len(r.json()["sandboxes"]), 4)
        # A killed sandbox leaves the list.
        self.d.kill(ids[0])
        self.assertEqual(sandbox_ids(self.d), ids[1:])


class SandboxLifetime(DaemonTest):
    def test_set_timeout_extend_and_shorten(self):
        sid = self.d.create(timeout=60)
        path = "/v1/sandboxes/%s/timeout" % sid
        for value, seconds in ((600, 600), ("10m", 600), (30, 30), ("2h", 7200), (90.5, 90.5)):
            before = time.time()
            r = self.d.api("POST", path, {"timeout": value})
            self.assertEqual(r.status, 200, r)
            sb = r.json()
            self.assertEqual(sb["id"], sid)
            self.assertEqual(sb["timeout"], seconds)
            # Counted from this request, not from creation.
            left = epoch(sb["expires_at"]) - before
            self.assertGreaterEqual(left, seconds - 5)
            self.assertLessEqual(left, seconds + 5)
            self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["expires_at"],
                             sb["expires_at"])
        # Still alive after all this.
        self.assertEqual(self.d.sh(sid, "echo ok")["stdout"], "ok\n")

    def test_expiry_kills_the_sandbox(self):
        sid = self.d.create(timeout=2)
        self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": ["sleep", "100"]})
        # Alive now ...
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).status, 200)
        # ... and gone, with everything in it, some time after 2 s.
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/" + sid).status == 404,
                   timeout=30, interval=0.2, what="the sandbox to expire")
        self.assertNotIn(sid, sandbox_ids(self.d))
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid).status, 404)
        self.assertEqual(self.d.kill(sid).status, 404)

    def test_shortened_lifetime_expires(self):
        sid = self.d.create(timeout=300)
        r = self.d.api("POST", "/v1/sandboxes/%s/timeout" % sid, {"timeout": "1s"})
        self.assertEqual(r.status, 200, r)
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/" + sid).status == 404,
                   timeout=30, interval=0.2, what="the shortened sandbox to expire")

    def test_extended_lifetime_outlives_the_first(self):
        sid = self.d.create(timeout=2)
        r = self.d.api("POST", "/v1/sandboxes/%s/timeout" % sid, {"timeout": 120})
        self.assertEqual(r.status, 200, r)
        # Outlive the original deadline by a wide margin, then check.
        other = self.d.create(timeout=2)
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/" + other).status == 404,
                   timeout=30, interval=0.2, what="the reference sandbox to expire")
        time.sleep(1)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).status, 200)

    def test_kill(self):
        sid = self.d.create()
        self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": ["sleep", "100"]})
        r = self.d.kill(sid)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        self.assertError(self.d.api("GET", "/v1/sandboxes/" + sid), 404, "not_found")
        # Idempotence: a second kill is a 404, not a success nor a 500.
        body = self.assertError(self.d.kill(sid), 404, "not_found")
        self.assertIn(sid, body["message"])
        for method, suffix, payload in (("POST", "/exec", {"argv": ["true"]}),
                                        ("GET", "/metrics", None),
                                        ("POST", "/timeout", {"timeout": 60}),
                                        ("GET", "/processes", None),
                                        ("GET", "/files/stat?path=/tmp", None)):
            with self.subTest(route=suffix):
                self.assertError(self.d.api(method, "/v1/sandboxes/" + sid + suffix, payload),
                                 404, "not_found")
        self.assertNotIn(sid, sandbox_ids(self.d))


class SandboxMetrics(DaemonTest):
    def metrics(self, sid):
        r = self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid)
        self.assertEqual(r.status, 200, r)
        return r.json()

    def test_fields_and_plausibility(self):
        sid = self.d.create(memory="128M", pids=100, disk="32M")
        m = self.metrics(sid)
        for k in ("cpu_seconds", "memory_bytes", "memory_limit", "oom_kills", "pids",
                  "pids_limit", "disk_bytes", "disk_limit"):
            self.assertIn(k, m)
            self.assertIsInstance(m[k], (int, float), k)
            self.assertGreaterEqual(m[k], 0, k)
        self.assertEqual(m["memory_limit"], 128 * MIB)
        self.assertEqual(m["pids_limit"], 100)
        self.assertEqual(m["disk_limit"], 32 * MIB)
        self.assertGreater(m["memory_bytes"], 0)
        self.assertLess(m["memory_bytes"], 128 * MIB)
        self.assertGreaterEqual(m["pids"], 1)
        self.assertEqual(m["oom_kills"], 0)

    def test_values_follow_the_sandbox(self):
        sid = self.d.create()
        before = self.metrics(sid)
        # Disk: a 1 MiB file shows up.
        self.d.sh(sid, "head -c 1048576 /dev/urandom > /home/user/blob")
        after = self.metrics(sid)
        self.assertGreaterEqual(after["disk_bytes"] - before["disk_bytes"], MIB)
        # Pids: two sleeping processes are counted.
        for _ in range(2):
            r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": ["sleep", "60"]})
            self.assertEqual(r.status, 201, r)
        self.assertGreaterEqual(self.metrics(sid)["pids"], before["pids"] + 2)
        # CPU time: a busy loop is accounted.
        cpu0 = self.metrics(sid)["cpu_seconds"]
        self.d.exec(sid, argv=["python3", "-c", "sum(range(20000000))"])
        self.assertGreater(self.metrics(sid)["cpu_seconds"], cpu0 + 0.05)

    def test_oom_kills_are_counted(self):
        sid = self.d.create(memory="32M")
        res = self.d.exec(sid, argv=["python3", "-c", "b = bytearray(256 * 1024 * 1024)"])
        self.assertTrue(res["oom_killed"], res)
        self.assertGreaterEqual(self.metrics(sid)["oom_kills"], 1)


class SandboxMetricsHistory(DaemonTest):
    """Samples kept every --metrics-interval (1 s here) while a sandbox runs:
    natively (metrics/history) and as E2B's getMetrics({start, end})."""
    extra_args = ("--metrics-interval", "1s")

    def history(self, sid, query=""):
        r = self.d.api("GET", "/v1/sandboxes/%s/metrics/history%s" % (sid, query))
        self.assertEqual(r.status, 200, r)
        return r.json()

    def test_kept_in_order_in_range_and_not_while_paused(self):
        t0 = int(time.time())
        sid = self.d.create(memory="256M", disk="64M")
        # Busy for longer than two intervals: some interval saw it work.
        self.d.exec(sid, argv=["timeout", "3", "sh", "-c", "while :; do :; done"])
        wait_until(lambda: len(self.history(sid)["samples"]) >= 4, what="four samples")
        h = self.history(sid)
        self.assertEqual((h["interval"], h["max_samples"]), (1, 720))
        samples = h["samples"]
        times = [x["time"] for x in samples]
        self.assertEqual(times, sorted(times))
        self.assertEqual(len(set(times)), len(times))
        for x in samples:
            self.assertEqual((x["memory_limit"], x["disk_limit"] <= 64 * MIB, x["cpus"]),
                             (256 * MIB, True, 1.0))
            self.assertGreater(x["memory_bytes"], 0)
            self.assertGreaterEqual(x["cpu_used_pct"], 0)
            self.assertLessEqual(x["cpu_used_pct"], 100)
        cpu = [x["cpu_seconds"] for x in samples]
        self.assertEqual(cpu, sorted(cpu))
        self.assertTrue(any(x["cpu_used_pct"] > 10 for x in samples), samples)
        # A range before it was made has nothing; bad ranges are 400s.
        self.assertEqual(self.history(sid, "?start=1000&end=2000")["samples"], [])
        for q in ("?start=5&end=3", "?start=x", "?end=-1", "?end=99999999999999999999"):
            r = self.d.api("GET", "/v1/sandboxes/%s/metrics/history%s" % (sid, q))
            self.assertEqual(r.status, 400, (q, r))
        # E2B's: the kept samples of the range, and one of now.
        t1 = int(time.time())
        r = self.d.api("GET", "/sandboxes/%s/metrics?start=%d&end=%d" % (sid, t0, t1))
        self.assertEqual(r.status, 200, r)
        got = r.json()
        self.assertGreaterEqual(len(got), 4)
        for x in got:
            self.assertGreaterEqual(x["timestampUnix"], t0 - 10)
            self.assertLessEqual(x["timestampUnix"], t1 + 10)
            self.assertEqual(set(x), {"timestamp", "timestampUnix", "cpuCount", "cpuUsedPct",
                                      "memUsed", "memTotal", "memCache", "diskUsed",
                                      "diskTotal"})
        self.assertEqual(self.d.api("GET", "/sandboxes/%s/metrics?start=1000&end=2000"
                                    % sid).json(), [])
        # Paused: nothing is sampled (it runs nothing); what was kept stays.
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {}).status, 200)
        kept = len(self.history(sid)["samples"])
        time.sleep(2.5)
        self.assertEqual(len(self.history(sid)["samples"]), kept)
        self.assertError(self.d.api("GET", "/v1/sandboxes/nosuchsandbox0000000/metrics/history"),
                         404)


class InfoAndHealth(DaemonTest):
    listen = True

    def test_healthz_on_both_listeners(self):
        r = self.d.api("GET", "/healthz")
        self.assertEqual((r.status, r.json()), (200, {"status": "ok"}))
        r = self.d.tcp("GET", "/healthz")  # no key needed
        self.assertEqual((r.status, r.json()), (200, {"status": "ok"}))
        r = self.d.tcp("GET", "/healthz", key="e2b_" + "0" * 40)  # nor checked
        self.assertEqual(r.status, 200)

    def test_info(self):
        r = self.d.api("GET", "/v1/info")
        self.assertEqual(r.status, 200, r)
        info = r.json()
        self.assertIsInstance(info["version"], str)
        self.assertTrue(info["version"])
        self.assertIn(info["cgroup"], ("v1", "v2"))
        self.assertIsInstance(info["landlock_abi"], int)
        self.assertIsInstance(info["pool"], int)
        self.assertEqual(info["sandboxes"], 0)
        ids = [self.d.create() for _ in range(2)]
        self.assertEqual(self.d.api("GET", "/v1/info").json()["sandboxes"], 2)
        # Over TCP, a tenant counts only its own.
        key = self.d.new_key("infotenant")
        r = self.d.tcp("GET", "/v1/info", key=key)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["sandboxes"], 0)
        r = self.d.tcp("POST", "/v1/sandboxes", {}, key=key)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["tenant"], "infotenant")
        self.assertEqual(self.d.tcp("GET", "/v1/info", key=key).json()["sandboxes"], 1)
        self.assertEqual(self.d.api("GET", "/v1/info").json()["sandboxes"], 3)
        self.d.kill(ids[0])
        self.assertEqual(self.d.api("GET", "/v1/info").json()["sandboxes"], 2)

    def test_kernel_settings_are_reported(self):
        # docs/security.md's second wall, read as the daemon must: this
        # host's values, each judged by the recommendation.
        want = []
        for name, rec, higher, absent_fine in KERNEL_SETTINGS:
            try:
                with open("/proc/sys/" + name.replace(".", "/")) as f:
                    value = int(f.read())
            except (OSError, ValueError):
                value = None
            weak = (not absent_fine) if value is None else \
                (value < rec if higher else value > rec)
            want.append({"name": name, "value": value, "recommended": rec,
                         "stronger": "higher" if higher else "lower", "weak": weak})
        info = self.d.api("GET", "/v1/info").json()
        self.assertEqual(info["kernel"]["settings"], want)
        # A tenant is not told the host's weak points.
        key = self.d.new_key("settingstenant")
        self.assertNotIn("kernel", self.d.tcp("GET", "/v1/info", key=key).json())
        weak = [w["name"] for w in want if w["weak"]]
        log = self.d.read_log()
        for w in want:
            line = "host: %s is %s (%d or %s recommended" % (
                w["name"], "absent" if w["value"] is None else w["value"], w["recommended"],
                "more" if w["stronger"] == "higher" else "less")
            self.assertEqual(line in log, w["weak"], (line, log[-3000:]))
        # --require-hardened-host: refused in one line, nothing made.
        state = tempfile.mkdtemp(prefix="sbx-test-hardened-")
        os.rmdir(state)
        try:
            p = subprocess.run([SBXD, "--state", state, "--cgroup-parent", "sbx-test-hardened",
                                "--require-hardened-host"], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
            if weak:
                self.assertEqual((p.returncode, p.stderr),
                                 (1, "sbx serve: weak kernel settings (--require-hardened-host):"
                                     " %s; see docs/security.md, Deploying\n" % ", ".join(weak)))
                self.assertFalse(os.path.exists(state))
            else:
                self.skipTest("this host's kernel settings are all as recommended")
        finally:
            shutil.rmtree(state, ignore_errors=True)


# name, recommended, higher is stronger, absent is fine (iso/kernel_settings.c)
KERNEL_SETTINGS = [
    ("kernel.io_uring_disabled", 2, True, True),
    ("kernel.unprivileged_bpf_disabled", 1, True, False),
    ("vm.unprivileged_userfaultfd", 0, False, False),
    ("kernel.perf_event_paranoid", 2, True, False),
    ("kernel.dmesg_restrict", 1, True, False),
    ("kernel.kptr_restrict", 2, True, False),
    ("dev.tty.legacy_tiocsti", 0, False, True),
    ("fs.protected_hardlinks", 1, True, False),
    ("fs.protected_symlinks", 1, True, False),
]


if __name__ == "__main__":
    import unittest
    unittest.main()
