"""Hostile code vs. the daemon itself: output floods and many sandboxes at
once (DESIGN.md "Concurrency": a slow reader gets its own bounded buffer,
never a stall of the loop).

- One-result mode: `yes | head -c 1G` keeps max_output (1 MiB) and counts
  the rest; the daemon's RSS stays within +100 MiB of where it started; a
  quick exec in another sandbox answers meanwhile.
- Stream mode, client reading slowly: the daemon stops reading the pipe, so
  the writer in the sandbox blocks in pipe_write (seen in its
  /proc/PID/wchan), the daemon's RSS stays bounded, and when the client
  reads again every byte arrives (lossless).
- 20 sandboxes created and exercised at the same time all give the right
  answers, each seeing only its own files.
"""
import hashlib
import json
import threading
import unittest

from harness import DaemonTest, UnixHTTPConnection
from hostile_util import metrics, sh_ok, wait_until

ASAN_SUBSET = False

RSS_BOUND = 100 << 20


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.base = rss(pid)
        self.peak = self.base
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            self.peak = max(self.peak, rss(self.pid))
            self.halt.wait(0.01)

    def stop(self):
        self.halt.set()
        self.join()
        self.peak = max(self.peak, rss(self.pid))
        return self.peak - self.base


class OutputFlood(DaemonTest):

    def test_one_result_flood(self):
        a = self.d.create()
        b = self.d.create()
        sampler = RssSampler(self.d.proc.pid)
        sampler.start()
        result = {}
        t = threading.Thread(target=lambda: result.update(
            self.d.exec(a, cmd="yes | head -c 1G; echo done >&2")))
        t.start()
        try:
            # While it floods: wait until the flood is under way, then a
            # quick command elsewhere still gets its answer.
            wait_until(lambda: metrics(self.d, a)["pids"] >= 3, what="the flood to start")
            quick = self.d.exec(b, argv=["echo", "quick"], timeout=60)
            self.assertEqual(quick["stdout"], "quick\n")
            self.assertTrue(t.is_alive(), "the flood ended before the quick exec was checked")
        finally:
            t.join(300)
        growth = sampler.stop()
        self.assertFalse(t.is_alive())
        self.assertEqual(result["exit_code"], 0, {k: v for k, v in result.items() if k != "stdout"})
        self.assertTrue(result["stdout_truncated"])
        self.assertEqual(len(result["stdout"]), 1 << 20)
        self.assertEqual(result["stdout"], "y\n" * (1 << 19))
        self.assertEqual(result["stderr"], "done\n")
        self.assertFalse(result["stderr_truncated"])
        self.assertLess(growth, RSS_BOUND, growth)

    def test_stream_slow_reader(self):
        sid = self.d.create()
        size = 64 << 20
        sampler = RssSampler(self.d.proc.pid)
        sampler.start()
        conn = UnixHTTPConnection(self.d.socket_path, timeout=300)
        conn.request("POST", "/v1/sandboxes/%s/exec" % sid,
                     body=json.dumps({"cmd": "yes | head -c %d" % size, "stream": True}))
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.getheader("Content-Type"), "application/x-ndjson")
        total = 0
        start = json.loads(resp.readline())
        self.assertEqual(start["type"], "start")
        # Read a little, then stop reading: the command must block on its
        # full pipe rather than the daemon buffering everything.
        for _ in range(4):
            ev = json.loads(resp.readline())
            if ev["type"] == "stdout":
                total += len(ev["data"])

        def blocked():
            out = self.d.sh(sid, "for p in $(pgrep -x head); do cat /proc/$p/wchan; echo; done")
            return out["stdout"].strip() in ("pipe_write", "anon_pipe_write")
        wait_until(blocked, timeout=60, interval=0.1, what="the writer to block on its pipe")
        self.assertLess(rss(self.d.proc.pid) - sampler.base, RSS_BOUND)
        self.assertLess(total, size)
        # Now read it all: nothing was lost.
        exit_ev = None
        for line in resp:
            ev = json.loads(line)
            if ev["type"] == "stdout":
                total += len(ev["data"])
            elif ev["type"] == "exit":
                exit_ev = ev
            else:
                self.assertIn(ev["type"], ("keepalive",), ev)
        conn.close()
        growth = sampler.stop()
        self.assertEqual(total, size)
        self.assertIsNotNone(exit_ev)
        self.assertEqual(exit_ev["exit_code"], 0, exit_ev)
        self.assertLess(growth, RSS_BOUND, growth)

    def test_stream_client_disconnects(self):
        # A client that goes away mid-flood: the command's group is killed
        # and the sandbox is clean again.
        sid = self.d.create()
        conn = UnixHTTPConnection(self.d.socket_path, timeout=60)
        conn.request("POST", "/v1/sandboxes/%s/exec" % sid,
                     body=json.dumps({"cmd": "yes", "stream": True}))
        resp = conn.getresponse()
        self.assertEqual(json.loads(resp.readline())["type"], "start")
        resp.readline()
        conn.close()
        wait_until(lambda: metrics(self.d, sid)["pids"] == 1, what="yes to be killed")
        self.assertEqual(sh_ok(self, sid, "echo ok"), "ok\n")


class ManyAtOnce(DaemonTest):

    N = 20

    def test_twenty_concurrent_sandboxes(self):
        barrier = threading.Barrier(self.N)
        errors = []
        sids = []

        def worker(i):
            try:
                sid = self.d.create(metadata={"worker": str(i)})
                sids.append(sid)
                payload = ("worker %d " % i).encode() * 1000
                r = self.d.upload(sid, "/home/user/in.bin", payload)
                assert r.status == 201, r
                barrier.wait(120)
                # All at once: a computation over the uploaded file, a
                # few processes, and a look at what is visible.
                res = self.d.exec(sid, cmd=(
                    "python3 -c \"import hashlib; print(hashlib.sha256(open('in.bin','rb')"
                    ".read()).hexdigest())\"; seq 1 %d | awk '{s += $1} END {print s}'; "
                    "ps -eo comm=; ls /home/user" % (1000 + i)), timeout=120)
                want = "%s\n%d\nmemfd:sbx-init\nbash\nps\nin.bin\n" % (
                    hashlib.sha256(payload).hexdigest(), (1000 + i) * (1001 + i) // 2)
                assert res["exit_code"] == 0 and res["stdout"] == want, (i, res, want)
                r = self.d.api("GET", "/v1/sandboxes/%s/files?path=/home/user/in.bin" % sid)
                assert r.status == 200 and r.body == payload, (i, r.status)
            except Exception as e:  # collected, reported below
                errors.append(repr(e)[:2000])
                try:
                    barrier.abort()
                except threading.BrokenBarrierError:
                    pass

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(self.N)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(errors, [])
        self.assertEqual(len(set(sids)), self.N)
        listed = self.d.api("GET", "/v1/sandboxes").json()["sandboxes"]
        self.assertEqual(sorted(s["id"] for s in listed), sorted(sids))
        for sb in listed:
            self.assertEqual(sb["state"], "running")


if __name__ == "__main__":
    unittest.main()
