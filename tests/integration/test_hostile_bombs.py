"""Hostile code vs. the limits: fork, memory, disk and inode bombs, endless
loops, CPU hogs and processes that try to outlive their command.

Each bomb must be bounded by its limit, be reported exactly in the exec
result, leave the sandbox usable (or killable), leave the host and other
sandboxes unaffected, and leave nothing behind.

Observed outcomes worth knowing:

- A disk bomb on an *empty* disk is stopped by RLIMIT_FSIZE, not ENOSPC:
  the daemon sets RLIMIT_FSIZE to the disk size, and a tmpfs of N bytes can
  hold exactly one file of N bytes, so the write past it raises SIGXFSZ
  (dd dies by the signal, exit status 153 in a shell). With anything else
  on the disk, the same write fails earlier with ENOSPC (dd exits 1).
- A bash fork bomb's processes all stay in the command's process group
  (no job control), so the exec timeout's group SIGKILL ends every one of
  them: the pids count goes back to what it was before.
"""
import os
import subprocess
import threading
import time
import unittest

from harness import PROBE, SLOW, DaemonTest, cgroup_hierarchies
from hostile_util import (kill_and_check_gone, leftover_processes, metrics, put_probe,
                          run_probe, sandbox_host_pids, sh_ok, wait_until)

ASAN_SUBSET = False


class ForkBomb(DaemonTest):

    def test_counted_fork_bomb(self):
        sid = self.d.create(pids=32)
        put_probe(self.d, sid)
        self.assertEqual(metrics(self.d, sid)["pids"], 1)
        lines = run_probe(self, sid, "forkbomb")
        self.assertEqual(len(lines), 1, lines)
        word, err, count = lines[0].split()
        self.assertEqual(err, "EAGAIN")
        # init + the probe + its children never exceed pids.max.
        self.assertLessEqual(int(count) + 2, 32)
        self.assertGreater(int(count), 16)
        wait_until(lambda: metrics(self.d, sid)["pids"] == 1, what="pids back to 1")

    def test_shell_fork_bomb(self):
        sid = self.d.create(pids=64)
        other = self.d.create()
        results = {}

        def bomb():
            # The timeout must let the bomb grow first: in an emulated,
            # loaded guest 3 s ended it below 32 processes (a CI run).
            results["bomb"] = self.d.exec(sid, cmd="bomb(){ bomb | bomb & }; bomb; sleep 1000",
                                          timeout=3 * SLOW * SLOW)
        t = threading.Thread(target=bomb)
        t.start()
        try:
            # While it rages: the pids limit holds, another sandbox answers,
            # and the host can still fork.
            wait_until(lambda: metrics(self.d, sid)["pids"] >= 32, what="the bomb to grow")
            for _ in range(5):
                self.assertLessEqual(metrics(self.d, sid)["pids"], 64)
                res = self.d.exec(other, argv=["echo", "still here"])
                self.assertEqual(res["stdout"], "still here\n")
                self.assertEqual(subprocess.run(["/bin/true"]).returncode, 0)
        finally:
            t.join(60)
        self.assertFalse(t.is_alive())
        res = results["bomb"]
        self.assertTrue(res["timed_out"], res)
        self.assertIsNone(res["exit_code"], res)
        self.assertEqual(res["signal"], "SIGKILL", res)
        self.assertTrue(res["reason"].startswith("timed out after "), res)
        # Every bomb process was in the command's process group: all gone.
        wait_until(lambda: metrics(self.d, sid)["pids"] == 1, what="pids back to 1")
        self.assertEqual(sh_ok(self, sid, "echo alive"), "alive\n")
        kill_and_check_gone(self, self.d, sid)

    def test_orphaned_bomb_is_killable(self):
        # A bomb that detaches from the command (setsid in every child) and
        # fills the pids limit for good: the sandbox is still killable and
        # nothing survives it on the host.
        sid = self.d.create(pids=32)
        res = self.d.exec(sid, cmd="setsid bash -c 'b(){ setsid bash -c \"$(declare -f b); b\" & "
                                   "setsid bash -c \"$(declare -f b); b\" & sleep 1000; }; b' "
                                   ">/dev/null 2>&1 &")
        self.assertEqual(res["exit_code"], 0, res)
        wait_until(lambda: metrics(self.d, sid)["pids"] >= 28, what="the bomb to fill pids")
        self.assertLessEqual(metrics(self.d, sid)["pids"], 32)
        kill_and_check_gone(self, self.d, sid)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).status, 404)


class MemoryBomb(DaemonTest):

    def test_cli_memory_bomb(self):
        p = self.d.sbx("run", "--memory", "64M", "--file", "%s:/tmp/probe" % PROBE,
                       "--", "/tmp/probe", "memhog", "256")
        self.assertEqual(p.returncode, 137, p)
        self.assertEqual(p.stderr, b"sbx: killed: out of memory (limit 64M)\n")
        self.assertNotIn(b"memhog done", p.stdout)

    def test_api_memory_bomb(self):
        sid = self.d.create(memory="64M")
        put_probe(self.d, sid)
        res = self.d.exec(sid, argv=["/tmp/probe", "memhog", "256"])
        self.assertTrue(res["oom_killed"], res)
        self.assertIsNone(res["exit_code"])
        self.assertEqual(res["signal"], "SIGKILL")
        self.assertFalse(res["timed_out"])
        self.assertEqual(res["reason"], "killed: out of memory (limit 64M)")
        self.assertNotIn("memhog done", res["stdout"])
        m = metrics(self.d, sid)
        self.assertGreaterEqual(m["oom_kills"], 1)
        self.assertEqual(m["memory_limit"], 64 << 20)
        # The sandbox survives and a command that fits still runs.
        res = self.d.exec(sid, argv=["/tmp/probe", "memhog", "16"])
        self.assertEqual(res["exit_code"], 0, res)
        self.assertFalse(res["oom_killed"])
        self.assertTrue(res["stdout"].endswith("memhog done 16\n"))

    def test_python_memory_bomb(self):
        sid = self.d.create(memory="64M")
        res = self.d.exec(sid, argv=["python3", "-c", "x = []\nwhile True: x.append(b'x' * (1 << 20))"])
        self.assertTrue(res["oom_killed"], res)
        self.assertEqual(res["signal"], "SIGKILL")


class DiskBomb(DaemonTest):

    def test_disk_bomb_empty_disk(self):
        sid = self.d.create(disk="16M")
        # RLIMIT_FSIZE == disk size (in 1 KiB blocks here), a second wall
        self.assertEqual(sh_ok(self, sid, "ulimit -f"), "%d\n" % (16 << 10))
        # The skeleton ("/", root's to write) is on the disk: a few KiB of
        # it are used before anything is written.
        used = metrics(self.d, sid)["disk_bytes"]
        self.assertTrue(0 < used < 256 << 10, used)
        res = self.d.exec(sid, argv=["dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=100"])
        self.assertEqual(res["exit_code"], 1, res)
        self.assertIn("No space left on device", res["stderr"])
        self.assertEqual(sh_ok(self, sid, "stat -c %s /tmp/big"), "%d\n" % ((16 << 20) - used))
        m = metrics(self.d, sid)
        self.assertEqual((m["disk_bytes"], m["disk_limit"]), (16 << 20, 16 << 20))
        # Full: every writer gets ENOSPC, in each of the three places.
        for path in ("/tmp/more", "/home/user/more", "/dev/shm/more"):
            res = self.d.exec(sid, argv=["dd", "if=/dev/zero", "of=" + path, "bs=4k", "count=1"])
            self.assertEqual(res["exit_code"], 1, res)
            self.assertIn("No space left on device", res["stderr"])
        res = self.d.exec(sid, argv=["python3", "-c",
                                     "import errno\ntry: open('/home/user/p','wb').write(b'x'*65536)\n"
                                     "except OSError as e: print(errno.errorcode[e.errno])"])
        self.assertEqual(res["stdout"], "ENOSPC\n", res)
        # The files API says so too, and changes nothing.
        r = self.d.upload(sid, "/home/user/up", b"x" * 100000)
        self.assertError(r, 413, "too_large")
        # (dd and python created their files, empty; the upload left nothing.)
        self.assertEqual(sh_ok(self, sid, "ls -A /home/user"), "more\np\n")
        # Freeing space makes it usable again.
        sh_ok(self, sid, "rm -f /tmp/big /tmp/more /home/user/* /dev/shm/more")
        self.assertEqual(metrics(self.d, sid)["disk_bytes"], used)
        self.assertEqual(self.d.upload(sid, "/home/user/up", b"x" * 100000).status, 201)

    def test_cli_disk_bomb(self):
        p = self.d.sbx("run", "--disk", "16M", "--", "sh", "-c",
                       "head -c 1M /dev/zero > /home/user/first && "
                       "dd if=/dev/zero of=/tmp/big bs=1M count=100 2>/dev/null; echo dd=$?; "
                       "python3 -c \"open('/dev/shm/x','wb').write(b'x' * (64 << 20))\"")
        self.assertEqual(p.returncode, 1, p)
        self.assertEqual(p.stdout, b"dd=1\n")
        self.assertTrue(p.stderr.endswith(b"OSError: [Errno 28] No space left on device\n"), p.stderr)

    def test_disk_bomb_enospc(self):
        sid = self.d.create(disk="16M")
        sh_ok(self, sid, "head -c 1M /dev/zero > /home/user/first")
        res = self.d.exec(sid, argv=["dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=100"])
        self.assertEqual(res["exit_code"], 1, res)
        self.assertIn("No space left on device", res["stderr"])
        size = int(sh_ok(self, sid, "stat -c %s /tmp/big"))
        self.assertLess(size, 16 << 20)
        self.assertGreater(size, 8 << 20)

    def test_disk_bomb_above_memory_limit(self):
        # The disk is a tmpfs: its pages count against the memory limit and
        # belong to no process. Were it allowed to fill the memory limit,
        # the OOM killer would find only small processes after the writer
        # died and take init, losing the sandbox. So the disk holds at most
        # memory - 16M: a disk bomb bigger than memory ends in ENOSPC (or
        # SIGXFSZ: RLIMIT_FSIZE is the disk size), never in the OOM killer,
        # and the sandbox stays usable. Checked for a big writer (dd) and a
        # tiny one (the static probe).
        other = self.d.create()
        for writer in (["dd", "if=/dev/zero", "of=/tmp/big", "bs=1M"],
                       ["/tmp/probe", "fill", "/tmp/big"]):
            sid = self.d.create(memory="64M", disk="256M")
            put_probe(self.d, sid)
            m = metrics(self.d, sid)
            self.assertEqual(m["disk_limit"], 48 << 20, m)
            baseline = m["disk_bytes"]  # the probe itself
            res = self.d.exec(sid, argv=writer)
            self.assertFalse(res["oom_killed"], res)
            if res["signal"] is not None:
                self.assertEqual(res["signal"], "SIGXFSZ", res)
            elif writer[0] == "dd":
                self.assertEqual(res["exit_code"], 1, res)
                self.assertIn("No space left on device", res["stderr"], res)
            else:
                self.assertTrue(res["stdout"].startswith("fill ENOSPC "), res)
            m = metrics(self.d, sid)
            self.assertGreater(m["disk_bytes"], 40 << 20, m)
            self.assertEqual(m["oom_kills"], 0, m)
            self.assertEqual(m["pids"], 1, m)
            # Full, yet commands still run and the space can be freed.
            self.assertEqual(sh_ok(self, sid, "echo alive; rm /tmp/big"), "alive\n")
            self.assertEqual(metrics(self.d, sid)["disk_bytes"], baseline)
            kill_and_check_gone(self, self.d, sid)
        # Other sandboxes never noticed.
        self.assertEqual(sh_ok(self, other, "echo fine"), "fine\n")

    def test_inode_bomb(self):
        sid = self.d.create(disk="16M")  # 16M / 4 KiB = 4096 inodes
        res = self.d.exec(sid, argv=["python3", "-c",
                                     "import errno\nn=0\ntry:\n while True:\n"
                                     "  open('/tmp/f%d' % n, 'w').close(); n += 1\n"
                                     "except OSError as e: print(n, errno.errorcode[e.errno])"])
        self.assertEqual(res["exit_code"], 0, res)
        n, err = res["stdout"].split()
        self.assertEqual(err, "ENOSPC")
        self.assertLessEqual(int(n), 4096)
        self.assertGreater(int(n), 4000)
        # Directories and symlinks are refused the same way.
        res = self.d.sh(sid, "mkdir /home/user/d")
        self.assertEqual(res["exit_code"], 1, res)
        self.assertIn("No space left on device", res["stderr"])
        self.assertError(self.d.upload(sid, "/home/user/x", b"x"), 413, "too_large")
        sh_ok(self, sid, "rm -f /tmp/f*")
        self.assertEqual(sh_ok(self, sid, "mkdir /home/user/d && echo ok"), "ok\n")


class TimeAndCpu(DaemonTest):

    def test_cli_endless_loop(self):
        p = self.d.sbx("run", "--timeout", "1s", "--", "sh", "-c", "while :; do :; done")
        self.assertEqual(p.returncode, 124, p)
        # (The reason gives the elapsed time: "1s", "1.01s"...)
        self.assertRegex(p.stderr, rb"^sbx: timed out after 1(\.\d+)?s\n$")

    def test_api_endless_loop(self):
        sid = self.d.create()
        res = self.d.exec(sid, cmd="while :; do :; done", timeout=1)
        self.assertTrue(res["timed_out"], res)
        self.assertIsNone(res["exit_code"])
        self.assertEqual(res["signal"], "SIGKILL")
        self.assertTrue(res["reason"].startswith("timed out after "), res)
        # Ignoring SIGTERM does not help: the timeout sends SIGKILL.
        res = self.d.exec(sid, cmd="trap '' TERM INT HUP; while :; do :; done", timeout=1)
        self.assertTrue(res["timed_out"], res)
        self.assertEqual(res["signal"], "SIGKILL")
        wait_until(lambda: metrics(self.d, sid)["pids"] == 1, what="the loop to be gone")

    def test_cpu_limit(self):
        # Two busy loops (two cores' worth) in a sandbox limited to half a
        # CPU use about half a CPU in all. Bounds are loose on purpose.
        sid = self.d.create(cpus=0.5)
        for _ in range(2):
            r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                           {"cmd": "while :; do :; done"})
            self.assertEqual(r.status, 201, r)
        wait_until(lambda: metrics(self.d, sid)["pids"] == 3, what="the loops")
        m0, t0 = metrics(self.d, sid)["cpu_seconds"], time.monotonic()
        time.sleep(2.0)
        m1, t1 = metrics(self.d, sid)["cpu_seconds"], time.monotonic()
        rate = (m1 - m0) / (t1 - t0)
        self.assertGreater(rate, 0.2, rate)
        self.assertLess(rate, 0.8, rate)
        self.assertEqual(metrics(self.d, sid)["cpus"], 0.5)


class Orphans(DaemonTest):

    def test_background_sleep_returns_promptly(self):
        sid = self.d.create()
        res = self.d.exec(sid, cmd="sh -c 'sleep 1000 &'", timeout=60)
        # Returns with the shell's status, not after the sleep (and not by
        # the timeout): the daemon stops reading once the command exited.
        self.assertEqual(res["exit_code"], 0, res)
        self.assertFalse(res["timed_out"], res)
        # The orphan lives on, re-parented to sbx-init: init + sleep.
        wait_until(lambda: len(sandbox_host_pids(self.d, sid)) == 2, what="sh to be reaped")
        wait_until(lambda: sh_ok(self, sid, "ps -eo ppid=,comm= | grep sleep || true").split()
                   == ["1", "sleep"], what="the orphaned sleep")
        kill_and_check_gone(self, self.d, sid)

    def test_output_holding_grandchild(self):
        # The orphan keeps the stdout pipe open and keeps writing.
        sid = self.d.create()
        res = self.d.exec(sid, cmd="(while :; do echo spam; sleep 0.01; done) & echo started",
                          timeout=60)
        self.assertEqual(res["exit_code"], 0, res)
        # What the grandchild wrote before the command exited may be there
        # too, in any order; nothing after that is waited for.
        self.assertIn("started", res["stdout"].splitlines(), res)
        self.assertLessEqual(set(res["stdout"].splitlines()), {"started", "spam"}, res)
        kill_and_check_gone(self, self.d, sid)

    def test_daemonized_double_fork(self):
        sid = self.d.create()
        code = ("import os, sys, time\n"
                "if os.fork(): os._exit(0)\n"
                "os.setsid()\n"
                "if os.fork(): os._exit(0)\n"
                "for fd in range(3): os.close(fd)\n"
                "time.sleep(1000)\n")
        res = self.d.exec(sid, argv=["python3", "-c", code], timeout=60)
        self.assertEqual(res["exit_code"], 0, res)
        self.assertFalse(res["timed_out"])
        wait_until(lambda: len(sandbox_host_pids(self.d, sid)) == 2, what="the daemon's parents")
        ps = sh_ok(self, sid, "ps -eo ppid=,sid=,comm= | grep python3")
        ppid, session, _ = ps.split()
        self.assertEqual(ppid, "1")
        self.assertNotEqual(session, "0")
        pids = kill_and_check_gone(self, self.d, sid)
        self.assertEqual(len(pids), 2)

    def test_daemon_stop_leaves_nothing(self):
        # Processes in several sandboxes while the test's daemon keeps
        # running: killing each sandbox removes everything of it. (The
        # harness checks the rest when the daemon stops.)
        sids = [self.d.create() for _ in range(3)]
        for sid in sids:
            self.d.exec(sid, cmd="nohup sleep 1000 >/dev/null 2>&1 & setsid sleep 1000 &")
        for sid in sids:
            wait_until(lambda: len(sandbox_host_pids(self.d, sid)) == 3, what="init + 2 sleeps")
            kill_and_check_gone(self, self.d, sid)


if __name__ == "__main__":
    unittest.main()


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


class DaemonCrash(unittest.TestCase):
    """Invariant 7 when the daemon itself dies (SIGKILL): sandboxes handed
    out keep running, escapees included (setsid, nohup: they are still in
    the sandbox's pid namespace and cgroup), and a daemon restarted on the
    same state re-adopts them; killing them then leaves nothing. A pool
    sandbox, nobody's yet, ends with the daemon."""

    def test_sigkill_daemon(self):
        import signal
        from harness import Daemon
        d = Daemon(pool=1, kill_on_exit=False).start()
        restarted = None
        try:
            sids = [d.create() for _ in range(2)]
            for sid in sids:
                r = d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "exec sleep 1000"})
                self.assertEqual(r.status, 201, r)
                d.exec(sid, cmd="setsid sh -c 'sleep 1000 &'; nohup sleep 999 >/dev/null 2>&1 &")
            wait_until(lambda: d.api("GET", "/v1/info").json()["pool"] == 1, timeout=60,
                       what="the pool to fill")
            running = leftover_processes(d)
            # two inits with three sleeps each, and the pool's init
            self.assertGreaterEqual(len(running), 2 * (1 + 3) + 1)
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()

            def alive():
                return [p for p in leftover_processes(d) if _state(p[0]) not in (None, "Z")]
            # The pool's init goes (its control socket closed); the rest stays.
            wait_until(lambda: len(alive()) == 2 * (1 + 3), timeout=20,
                       what="the pool sandbox to end")
            restarted = Daemon(pool=0, kill_on_exit=False)
            os.rmdir(restarted.state)  # it reuses the dead daemon's instead
            for attr in ("state", "cgroup_parent", "uid_base", "uid_end", "args", "log_path"):
                setattr(restarted, attr, getattr(d, attr))
            # No pool this time: every process left in the range is one of
            # the re-adopted sandboxes'.
            restarted.args = list(d.args)
            restarted.args[restarted.args.index("--pool") + 1] = "0"
            restarted.start()
            listed = [s["id"] for s in restarted.api("GET", "/v1/sandboxes").json()["sandboxes"]]
            self.assertEqual(sorted(listed), sorted(sids))
            for sid in sids:
                self.assertEqual(restarted.kill(sid).status, 204)
            wait_until(lambda: not alive(), timeout=20, what="every sandbox process to end")
            for h in cgroup_hierarchies():
                parent = os.path.join(h, d.cgroup_parent)
                for sid in sids:
                    self.assertFalse(os.path.exists(os.path.join(parent, sid)), (h, sid))
        finally:
            if restarted is not None:
                restarted.stop()
                # Zombies of the killed daemon's inits are the host PID 1's
                # to reap; give it a moment, then they must be gone too.
                try:
                    wait_until(lambda: not [p for p in leftover_processes(d)
                                            if _state(p[0]) not in (None, "Z")] and
                               len([p for p in leftover_processes(d)]) <= 2, timeout=10)
                except AssertionError:
                    pass
                problems = [p for p in restarted.cleanup() if "processes left" not in p]
                self.assertEqual(problems, [])
            else:
                d.stop()
                d.cleanup()
