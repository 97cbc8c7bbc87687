"""Pause and resume: a paused sandbox's processes are frozen (cgroup freezer),
its memory kept and its lifetime clock stopped; resume continues where it
stopped. Also: on_timeout "pause" (its lifetime ends in a pause), auto_resume,
kill while paused, a restart while paused, the CLI and E2B's routes.

What is checked is what the kernel shows: the counting loop's file on the
host side (/proc/<init>/root) and the cgroup's CPU counter, which must not
move while paused (a frozen task cannot run); nothing is timed.
"""
import json
import os
import signal
import time
import unittest

from harness import EMULATED, SLOW, Daemon, DaemonTest, cgroup_version, processes_with_uid_in
from sbx_helpers import parse_ndjson, wait_until
from test_restart import (RestartTest, cgroup_dir, cgroup_gone, cgroup_pids, db_row, find_init,
                          in_sandbox)

# One line per step, appended: a lost or repeated step shows as a gap.
COUNTER = 'i=0; while :; do i=$((i+1)); echo "$i" >> /home/user/count; sleep 0.02; done'


def counts(init):
    with open(in_sandbox(init, "/home/user/count")) as f:
        return [int(x) for x in f.read().split()]


def cpu_usage(d, sid):
    """The cgroup's CPU time as the kernel counts it (ns or us)."""
    if cgroup_version() == 2:
        with open(os.path.join(cgroup_dir(d, sid, "cpu"), "cpu.stat")) as f:
            for line in f:
                k, v = line.split()
                if k == "usage_usec":
                    return int(v)
        raise AssertionError("no usage_usec")
    with open(os.path.join(cgroup_dir(d, sid, "cpuacct"), "cpuacct.usage")) as f:
        return int(f.read())


def frozen_on_host(d, sid):
    if cgroup_version() == 2:
        with open(os.path.join(cgroup_dir(d, sid, "cpu"), "cgroup.events")) as f:
            return "frozen 1" in f.read()
    with open(os.path.join(cgroup_dir(d, sid, "freezer"), "freezer.state")) as f:
        return f.read().strip() == "FROZEN"


def start_counter(d, sid):
    r = d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": COUNTER})
    assert r.status == 201, r
    init = find_init(d, sid)
    wait_until(lambda: os.path.exists(in_sandbox(init, "/home/user/count"))
               and len(counts(init)) >= 5, what="the counter to count")
    return init


def consecutive_from_one(nums):
    return nums == list(range(1, len(nums) + 1))


class Pause(DaemonTest):
    def pause(self, sid):
        return self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {})

    def resume(self, sid, body=None):
        return self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, body or {})

    def test_pause_stops_cpu_and_output_and_resume_continues(self):
        sid = self.d.create()
        init = start_counter(self.d, sid)
        r = self.pause(sid)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "paused")
        self.assertTrue(frozen_on_host(self.d, sid))
        before, cpu_before = counts(init), cpu_usage(self.d, sid)
        metrics_before = self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid).json()
        time.sleep(0.5)  # long enough for 25 steps, were it running
        self.assertEqual(counts(init), before)
        self.assertEqual(cpu_usage(self.d, sid), cpu_before)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid).json()["cpu_seconds"],
                         metrics_before["cpu_seconds"])
        # Listed as paused; memory still charged (resident).
        listed = {s["id"]: s for s in self.d.api("GET", "/v1/sandboxes").json()["sandboxes"]}
        self.assertEqual(listed[sid]["state"], "paused")
        self.assertGreater(metrics_before["memory_bytes"], 0)
        # Work in it is refused with a clear 409.
        r = self.d.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true"})
        body = self.assertError(r, 409, "conflict")
        self.assertIn("is paused", body["message"])
        r = self.d.api("GET", "/v1/sandboxes/%s/files?path=/home/user/count" % sid)
        self.assertError(r, 409, "conflict")
        # Resume: it goes on from where it stopped, no step lost.
        r = self.resume(sid)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "running")
        self.assertFalse(frozen_on_host(self.d, sid))
        wait_until(lambda: len(counts(init)) >= len(before) + 5, what="counting again")
        nums = counts(init)
        self.assertTrue(consecutive_from_one(nums), nums)
        self.assertEqual(self.d.sh(sid, "echo ok")["stdout"], "ok\n")

    def test_lifetime_clock_stops_while_paused(self):
        sid = self.d.create(timeout=4)
        self.assertEqual(self.pause(sid).status, 200)
        # Past its lifetime while paused: still there, still paused.
        time.sleep(5)
        r = self.d.api("GET", "/v1/sandboxes/%s" % sid)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "paused")
        self.assertLessEqual(r.json()["remaining"], 4.0)
        self.assertGreater(r.json()["remaining"], 1.0)
        r = self.resume(sid, {"timeout": 60})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.d.sh(sid, "echo alive")["stdout"], "alive\n")

    def test_conflicts_and_bad_input(self):
        sid = self.d.create()
        self.assertError(self.resume(sid), 409, "conflict")
        self.assertEqual(self.pause(sid).status, 200)
        body = self.assertError(self.pause(sid), 409, "conflict")
        self.assertIn("already paused", body["message"])
        self.assertError(self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {"x": 1}), 400)
        self.assertError(self.resume(sid, {"timeout": "soon"}), 400)
        self.assertError(self.resume(sid, {"timeout": 10 ** 9}), 400)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "paused")
        self.assertError(self.d.api("POST", "/v1/sandboxes/sbx_nosuchsandbox00/pause", {}), 404)
        self.assertError(self.d.api("POST", "/v1/sandboxes/../resume", {}), 404)
        r = self.d.api("POST", "/v1/sandboxes", {"on_timeout": "sleep"})
        self.assertError(r, 400, "invalid_argument")
        r = self.d.api("POST", "/v1/sandboxes", {"auto_resume": "yes"})
        self.assertError(r, 400, "invalid_argument")

    def test_kill_while_paused_leaves_nothing(self):
        sid = self.d.create()
        init = start_counter(self.d, sid)
        info = self.d.api("GET", "/v1/sandboxes/%s" % sid).json()
        self.assertEqual(self.pause(sid).status, 200)
        self.assertEqual(self.d.kill(sid).status, 204)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).status, 404)
        wait_until(lambda: not os.path.exists("/proc/%d" % init), what="init gone")
        self.assertEqual(cgroup_pids(self.d, sid), [])
        self.assertTrue(cgroup_gone(self.d, sid))
        self.assertEqual(info["state"], "running")

    def test_on_timeout_pause_then_resume_with_a_new_lifetime(self):
        r = self.d.api("POST", "/v1/sandboxes", {"timeout": 1, "on_timeout": "pause"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["lifecycle"], {"on_timeout": "pause", "auto_resume": False,
                                                 "keep_memory": True})
        sid = r.json()["id"]
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"] == "paused",
                   what="paused at the end of its lifetime")
        self.assertTrue(frozen_on_host(self.d, sid))
        self.assertTrue(cgroup_pids(self.d, sid))  # not dead
        self.assertError(self.d.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true"}), 409)
        r = self.resume(sid, {"timeout": 60})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "running")
        self.assertEqual(self.d.sh(sid, "echo back")["stdout"], "back\n")

    def test_auto_resume(self):
        # The lifetime the resume gives again must outlast the command: an
        # emulated guest took longer than 1 s to run it, the sandbox was
        # paused again under it, and the exec waited for good (a CI run).
        r = self.d.api("POST", "/v1/sandboxes",
                       {"timeout": SLOW * SLOW, "on_timeout": "pause", "auto_resume": True})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"] == "paused",
                   what="paused at the end of its lifetime")
        # A command resumes it (with its whole lifetime again, so the
        # answer may find it paused again, but the command ran).
        res = self.d.sh(sid, "echo resumed")
        self.assertEqual(res["stdout"], "resumed\n")

    def test_cli(self):
        sid = self.d.create()
        p = self.d.sbx("pause", sid)
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "paused")
        p = self.d.sbx("pause", sid)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn(b"already paused", p.stderr)
        p = self.d.sbx("resume", "--timeout", "2m", sid)
        self.assertEqual(p.returncode, 0, p)
        sb = self.d.api("GET", "/v1/sandboxes/%s" % sid).json()
        self.assertEqual(sb["state"], "running")
        self.assertEqual(sb["timeout"], 120)
        p = self.d.sbx("pause", "--no-memory", sid)
        self.assertEqual(p.returncode, 0, p)
        sb = self.d.api("GET", "/v1/sandboxes/%s" % sid).json()
        self.assertEqual((sb["state"], sb.get("memory_kept")), ("paused", False))
        self.assertEqual(self.d.sbx("resume", sid).returncode, 0)
        self.assertEqual(self.d.sh(sid, "echo up")["stdout"], "up\n")
        p = self.d.sbx("pause")
        self.assertEqual(p.returncode, 2, p)
        # A well-formed ID nobody has is the daemon's 404 (1); a malformed
        # one is a usage error (2) refused before any request.
        p = self.d.sbx("resume", "nosuchsandbox0000000")
        self.assertEqual(p.returncode, 1, p)
        self.assertIn(b"nosuchsandbox0000000", p.stderr)
        p = self.d.sbx("resume", "sbx_nosuchsandbox00")
        self.assertEqual(p.returncode, 2, p)
        self.assertIn(b"is not a sandbox ID", p.stderr)

    def test_e2b_pause_connect_list(self):
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base"})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/pause" % sid, {}).status, 204)
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/pause" % sid, {}).status, 409)
        self.assertEqual(self.d.api("GET", "/sandboxes/%s" % sid).json()["state"], "paused")
        paused = self.d.api("GET", "/v2/sandboxes?state=paused").json()
        running = self.d.api("GET", "/v2/sandboxes?state=running").json()
        self.assertIn(sid, [s["sandboxID"] for s in paused])
        self.assertNotIn(sid, [s["sandboxID"] for s in running])
        # connect resumes (201), then finds it running (200).
        r = self.d.api("POST", "/sandboxes/%s/connect" % sid, {"timeout": 60})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.d.api("GET", "/sandboxes/%s" % sid).json()["state"], "running")
        r = self.d.api("POST", "/sandboxes/%s/connect" % sid, {"timeout": 60})
        self.assertEqual(r.status, 200, r)
        # The deprecated resume: 409 when running, 201 when paused.
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/resume" % sid, {}).status, 409)
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/pause" % sid, {}).status, 204)
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/resume" % sid, {}).status, 201)

    def test_e2b_lifecycle_on_create(self):
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base", "autoPause": True,
                                                  "autoResume": {"enabled": True}})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        info = self.d.api("GET", "/sandboxes/%s" % sid).json()
        self.assertEqual(info["lifecycle"], {"onTimeout": "pause", "autoResume": True})
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base",
                                                  "autoResume": {"enabled": True}})
        self.assertEqual(r.status, 400, r)
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base", "autoPause": "yes"})
        self.assertEqual(r.status, 400, r)
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base", "autoPause": True,
                                                  "autoResume": {"enabled": True, "x": 1}})
        self.assertEqual(r.status, 400, r)


BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


def hibernation_files(d, sid):
    """The daemon's saved files of sid in its snapshot store, if any."""
    found = []
    for root, dirs, _ in os.walk(os.path.join(d.state, "snapshots")):
        found += [os.path.join(root, x) for x in dirs if x == ".sbx-hib-" + sid]
        if root.count(os.sep) - d.state.count(os.sep) >= 2:
            dirs[:] = []
    return found


class PauseWithoutMemory(DaemonTest):
    """keep_memory false (E2B's pause({keepMemory: false})): the files are
    kept, every process ends and the memory is freed; the resume boots the
    sandbox again from its template with those files."""

    def pause(self, sid, body=None):
        return self.d.api("POST", "/v1/sandboxes/%s/pause" % sid,
                          body if body is not None else {"keep_memory": False})

    def test_files_kept_processes_end_and_the_resume_boots_again(self):
        sid = self.d.create()
        self.d.sh(sid, "echo home > /home/user/a; echo tmp > /tmp/b; echo shm > /dev/shm/c;"
                       " mkdir -p /home/user/d/e; ln -s ../a /home/user/d/link")
        boot = self.d.sh(sid, BOOT_ID)["stdout"]
        bg = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "exec sleep 1000"})
        self.assertEqual(bg.status, 201, bg)
        init = find_init(self.d, sid)
        r = self.pause(sid)
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["state"], r.json()["hibernated"], r.json()["memory_kept"]),
                         ("paused", True, False))
        # Nothing of it runs on the host: its init, its cgroup, its memory.
        wait_until(lambda: not os.path.exists("/proc/%d" % init), what="its init to end")
        self.assertTrue(cgroup_gone(self.d, sid))
        self.assertEqual(len(hibernation_files(self.d, sid)), 1)
        # Paused as any: work is refused, and so is what needs its files live.
        self.assertError(self.d.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true"}), 409)
        self.assertError(self.d.api("GET", "/v1/sandboxes/%s/files?path=/home/user/a" % sid), 409)
        body = self.assertError(self.d.api("POST", "/v1/sandboxes/%s/snapshots" % sid,
                                           {"name": "while-cold"}), 409)
        self.assertIn("without its memory", body["message"])
        body = self.assertError(self.d.api("POST", "/v1/sandboxes/%s/fork" % sid, {}), 409)
        self.assertIn("without its memory", body["message"])
        self.assertError(self.pause(sid), 409, "conflict")
        self.assertError(self.d.api("GET", "/v1/sandboxes/%s/metrics" % sid), 409)
        # The resume: a new init, its files back, a new boot, no process of before.
        r = self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, {})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "running")
        self.assertNotIn("memory_kept", r.json())
        self.assertNotEqual(find_init(self.d, sid), init)
        self.assertEqual(self.d.sh(sid, "cat /home/user/a /tmp/b /dev/shm/c;"
                                        " readlink /home/user/d/link; stat -c %U /home/user/a")
                         ["stdout"], "home\ntmp\nshm\n../a\nuser\n")
        self.assertNotEqual(self.d.sh(sid, BOOT_ID)["stdout"], boot)
        self.assertEqual(self.d.sh(sid, "pgrep -x sleep || echo none")["stdout"], "none\n")
        r = self.d.api("GET", "/v1/sandboxes/%s/processes/%d" % (sid, bg.json()["pid"]))
        self.assertTrue(r.status == 404 or not r.json()["running"], r)
        self.assertEqual(hibernation_files(self.d, sid), [])
        # Paused and resumed again, as often as it likes.
        self.assertEqual(self.pause(sid).status, 200)
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, {}).status, 200)
        self.assertEqual(self.d.sh(sid, "cat /home/user/a")["stdout"], "home\n")

    def test_kill_while_paused_leaves_nothing(self):
        sid = self.d.create()
        self.d.sh(sid, "head -c 100000 /dev/urandom > /home/user/blob")
        self.assertEqual(self.pause(sid).status, 200)
        self.assertEqual(len(hibernation_files(self.d, sid)), 1)
        self.assertEqual(self.d.kill(sid).status, 204)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).status, 404)
        self.assertEqual(hibernation_files(self.d, sid), [])
        self.assertTrue(cgroup_gone(self.d, sid))

    def test_on_timeout_pause_without_memory(self):
        r = self.d.api("POST", "/v1/sandboxes",
                       {"timeout": 1, "on_timeout": "pause", "keep_memory": False})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["lifecycle"], {"on_timeout": "pause", "auto_resume": False,
                                                 "keep_memory": False})
        sid = r.json()["id"]
        self.d.sh(sid, "echo kept > /home/user/f")
        wait_until(lambda: self.d.api("GET", "/v1/sandboxes/%s" % sid).json().get("memory_kept")
                   is False, what="paused without its memory at the end of its lifetime")
        self.assertTrue(cgroup_gone(self.d, sid))
        r = self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, {"timeout": 60})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.d.sh(sid, "cat /home/user/f")["stdout"], "kept\n")

    def test_bad_input_changes_nothing(self):
        for body in ({"keep_memory": False}, {"keep_memory": False, "on_timeout": "kill"},
                     {"keep_memory": False, "on_timeout": "pause", "auto_resume": True},
                     {"keep_memory": "no", "on_timeout": "pause"}):
            self.assertError(self.d.api("POST", "/v1/sandboxes", body), 400, "invalid_argument")
        sid = self.d.create()
        for body in ({"keep_memory": False, "to_disk": True}, {"keep_memory": 0}):
            self.assertError(self.pause(sid, body), 400, "invalid_argument")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "running")
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base", "autoPause": True,
                                                  "autoPauseMemory": False,
                                                  "autoResume": {"enabled": True}})
        body = self.assertError(r, 400)
        self.assertIn("autoPauseMemory", body["message"])

    def test_not_resumed_by_a_request(self):
        """auto_resume resumes a frozen sandbox on a request, not one paused
        without its memory: its owner boots it (E2B's rule)."""
        r = self.d.api("POST", "/v1/sandboxes", {"on_timeout": "pause", "auto_resume": True})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        self.assertEqual(self.pause(sid).status, 200)
        body = self.assertError(self.d.api("POST", "/v1/sandboxes/%s/exec" % sid,
                                           {"cmd": "true"}), 409)
        self.assertIn("without its memory", body["message"])
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "paused")
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, {}).status, 200)
        self.assertEqual(self.d.sh(sid, "echo up")["stdout"], "up\n")

    def test_a_snapshots_files_that_would_not_fit_are_refused(self):
        """On a snapshot's layer, the save holds the snapshot's files too:
        more than its own disk holds, the pause is a 413 and changes nothing."""
        src = self.d.create(disk="64M", memory="128M")
        self.d.sh(src, "head -c 20000000 /dev/urandom > /home/user/big")
        r = self.d.api("POST", "/v1/sandboxes/%s/snapshots" % src, {"name": "too-big-for-8m"})
        self.assertEqual(r.status, 201, r)
        r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "too-big-for-8m", "disk": "8M"})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]
        if r.json().get("snapshot", {}).get("as") != "layer":
            self.d.kill(sid)
            self.d.kill(src)
            self.d.api("DELETE", "/v1/snapshots/too-big-for-8m")
            self.skipTest("snapshots are copies on this kernel: a copy fits its disk by construction")
        body = self.assertError(self.pause(sid), 413, "too_large")
        self.assertIn("would not fit", body["message"])
        self.assertEqual(hibernation_files(self.d, sid), [])
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s" % sid).json()["state"], "running")
        self.assertEqual(self.d.sh(sid, "wc -c < /home/user/big")["stdout"], "20000000\n")
        for x in (sid, src):
            self.d.kill(x)
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/too-big-for-8m").status, 204)

    @unittest.skipIf(EMULATED, "the code interpreter takes minutes to start under emulation;"
                               " its restart is the same code on every kernel (run on the host)")
    def test_code_interpreter_starts_again_with_its_env(self):
        r = self.d.api("POST", "/v1/sandboxes", {"template": "code-interpreter-v1",
                                                  "env": {"GREETING": "hi"}})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["id"]

        def stdout(code):
            r = self.d.api("POST", "/v1/sandboxes/%s/code" % sid, {"code": code}, timeout=120)
            self.assertEqual(r.status, 200, r)
            events = parse_ndjson(r.body)
            self.assertEqual(events[-1], {"type": "end_of_execution"}, events)
            return "".join(e["text"] for e in events if e["type"] == "stdout")

        self.assertEqual(stdout("x = 41\nprint(x)"), "41\n")
        self.assertEqual(self.pause(sid).status, 200)
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, {}).status, 200)
        # A new interpreter (x is gone) that sees the sandbox's env as the
        # first one did.
        self.assertEqual(stdout("import os\nprint(os.getenv('GREETING'), 'x' in globals())"),
                         "hi False\n")

    def test_e2b_pause_without_memory_then_connect(self):
        r = self.d.api("POST", "/v2/sandboxes", {"templateID": "base"})
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        self.d.sh(sid, "echo e2b > /home/user/e")
        boot = self.d.sh(sid, BOOT_ID)["stdout"]
        self.assertEqual(self.d.api("POST", "/sandboxes/%s/pause" % sid, {"memory": False}).status,
                         204)
        self.assertEqual(self.d.api("GET", "/sandboxes/%s" % sid).json()["state"], "paused")
        self.assertTrue(cgroup_gone(self.d, sid))
        r = self.d.api("POST", "/sandboxes/%s/connect" % sid, {"timeout": 60})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.d.sh(sid, "cat /home/user/e")["stdout"], "e2b\n")
        self.assertNotEqual(self.d.sh(sid, BOOT_ID)["stdout"], boot)


class PauseRestart(RestartTest):
    def test_paused_sandbox_stays_paused_across_a_restart(self):
        sid = self.d.create()
        init = start_counter(self.d, sid)
        r = self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(db_row(self.d, sid)["state"], "paused")
        self.kill9()
        # No daemon: still frozen (init is frozen too: its own deadline
        # cannot end it).
        self.assertTrue(frozen_on_host(self.d, sid))
        frozen = counts(init)
        self.restart()
        r = self.d.api("GET", "/v1/sandboxes/%s" % sid)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "paused")
        self.assertTrue(frozen_on_host(self.d, sid))
        # Adoption thawed it for a moment (init answers ATTACH): at most a
        # step or two, never a gap.
        after = counts(init)
        self.assertLessEqual(len(after) - len(frozen), 2)
        time.sleep(0.3)
        self.assertEqual(counts(init), after)
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, {}).status, 200)
        wait_until(lambda: len(counts(init)) >= len(after) + 5, what="counting again")
        self.assertTrue(consecutive_from_one(counts(init)))
        self.assertEqual(db_row(self.d, sid)["state"], "running")

    def test_paused_without_memory_across_restarts(self):
        """Its files wait in the store while no daemon runs; the next one
        boots it on resume, and the one after adopts what that booted."""
        sid = self.d.create()
        self.d.sh(sid, "echo across > /home/user/f")
        r = self.d.api("POST", "/v1/sandboxes/%s/pause" % sid, {"keep_memory": False})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((db_row(self.d, sid)["state"], db_row(self.d, sid)["hibernated"]),
                         ("paused", 2))
        self.kill9()
        self.assertTrue(cgroup_gone(self.d, sid))
        self.restart()
        r = self.d.api("GET", "/v1/sandboxes/%s" % sid)
        self.assertEqual((r.json()["state"], r.json().get("memory_kept")), ("paused", False))
        self.assertEqual(self.d.api("POST", "/v1/sandboxes/%s/resume" % sid, {}).status, 200)
        init = find_init(self.d, sid)
        self.assertEqual((db_row(self.d, sid)["hibernated"], db_row(self.d, sid)["init_pid"]),
                         (0, init))
        self.kill9()
        self.restart()
        self.assertEqual(find_init(self.d, sid), init)
        self.assertEqual(self.d.sh(sid, "cat /home/user/f")["stdout"], "across\n")


if __name__ == "__main__":
    unittest.main()
