#!/usr/bin/python3
"""Pause/resume, fork and snapshot figures (docs/benchmarks.md "Lifecycle").

    /usr/bin/python3 bench/lifecycle.py [build/sbxd]

Starts its own daemon (private state, cgroup parent sbx-bench-life, uid
base 0xB8000000) and measures, over the API on the unix socket:
  - pause and resume latency of a sandbox running a busy loop;
  - snapshot time against the size written (1, 10, 100 MB);
  - fork of 10 (one call), with 10 MB in the source;
  - create from a snapshot (10 MB, 100 MB) against a plain create from
    base, and the disk a sandbox on a 100 MB snapshot uses.
Medians of N rounds; prints a table and writes build/bench-lifecycle.json."""
import json, os, shutil, socket, statistics, subprocess, sys, tempfile, time, http.client


class UConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=300)
        self.path_ = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path_)
        self.sock = s


def call(c, method, path, body=None):
    c.request(method, path, json.dumps(body) if body is not None else None,
              {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status >= 300:
        raise RuntimeError("%s %s: %d %s" % (method, path, r.status, data[:200]))
    return json.loads(data) if data else None


def timed(fn):
    t = time.perf_counter()
    v = fn()
    return (time.perf_counter() - t) * 1000, v


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/sbxd"
    top = tempfile.mkdtemp(prefix="sbx-bench-life-")
    os.chmod(top, 0o711)
    state = os.path.join(top, "state")
    p = subprocess.Popen([binary, "--state", state, "--pool", "4", "--cgroup-parent",
                          "sbx-bench-life", "--uid-base", str(0xB8000000), "--max-sandboxes", "64",
                          "--kill-on-exit"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = os.path.join(state, "sbx.sock")
    for _ in range(400):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    time.sleep(1.5)
    c = UConn(sock)
    out = {}
    try:
        sid = call(c, "POST", "/v1/sandboxes", {"timeout": 3600})["id"]
        call(c, "POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "while :; do :; done"})
        pause, resume = [], []
        for _ in range(50):
            pause.append(timed(lambda: call(c, "POST", "/v1/sandboxes/%s/pause" % sid, {}))[0])
            resume.append(timed(lambda: call(c, "POST", "/v1/sandboxes/%s/resume" % sid, {}))[0])
        out["pause_ms"] = statistics.median(pause)
        out["resume_ms"] = statistics.median(resume)
        call(c, "DELETE", "/v1/sandboxes/%s" % sid)

        for mb in (1, 10, 100):
            times = []
            for i in range(5):
                s = call(c, "POST", "/v1/sandboxes", {"disk": "512M", "memory": "1G"})["id"]
                call(c, "POST", "/v1/sandboxes/%s/exec" % s,
                     {"cmd": "head -c %d /dev/urandom > data" % (mb << 20)})
                name = "b%d-%d" % (mb, i)
                times.append(timed(lambda: call(c, "POST", "/v1/sandboxes/%s/snapshots" % s,
                                                {"name": name}))[0])
                call(c, "DELETE", "/v1/sandboxes/%s" % s)
                if not (mb in (10, 100) and i == 0):
                    call(c, "DELETE", "/v1/snapshots/%s" % name)
            out["snapshot_%dmb_ms" % mb] = statistics.median(times)

        src = call(c, "POST", "/v1/sandboxes", {"disk": "512M"})["id"]
        call(c, "POST", "/v1/sandboxes/%s/exec" % src, {"cmd": "head -c 10485760 /dev/urandom > data"})
        forks = []
        for _ in range(3):
            ms, body = timed(lambda: call(c, "POST", "/v1/sandboxes/%s/fork" % src, {"count": 10}))
            forks.append(ms)
            for k in body["sandboxes"]:
                call(c, "DELETE", "/v1/sandboxes/%s" % k["id"])
        out["fork10_10mb_ms"] = statistics.median(forks)
        empty = call(c, "POST", "/v1/sandboxes", {})["id"]
        forks = []
        for _ in range(3):
            ms, body = timed(lambda: call(c, "POST", "/v1/sandboxes/%s/fork" % empty, {"count": 10}))
            forks.append(ms)
            for k in body["sandboxes"]:
                call(c, "DELETE", "/v1/sandboxes/%s" % k["id"])
        out["fork10_empty_ms"] = statistics.median(forks)
        call(c, "DELETE", "/v1/sandboxes/%s" % src)
        call(c, "DELETE", "/v1/sandboxes/%s" % empty)

        plain, snap = [], []
        for i in range(20):
            for kind in (("plain", "snap") if i % 2 else ("snap", "plain")):
                body = {} if kind == "plain" else {"snapshot": "b10-0"}
                ms, sb = timed(lambda: call(c, "POST", "/v1/sandboxes", body))
                (plain if kind == "plain" else snap).append(ms)
                call(c, "DELETE", "/v1/sandboxes/%s" % sb["id"])
                time.sleep(0.3)  # let the pool refill: both draw from it
        out["create_base_ms"] = statistics.median(plain)
        out["create_from_snapshot_10mb_ms"] = statistics.median(snap)
        big, used = [], []
        for i in range(10):
            ms, sb = timed(lambda: call(c, "POST", "/v1/sandboxes", {"snapshot": "b100-0"}))
            big.append(ms)
            used.append(call(c, "GET", "/v1/sandboxes/%s/metrics" % sb["id"])["disk_bytes"])
            call(c, "DELETE", "/v1/sandboxes/%s" % sb["id"])
        out["create_from_snapshot_100mb_ms"] = statistics.median(big)
        out["disk_bytes_of_a_sandbox_on_100mb_snapshot"] = statistics.median(used)
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(top, ignore_errors=True)
    for k, v in out.items():
        print("%-32s %8.2f" % (k, v))
    os.makedirs("build", exist_ok=True)
    with open("build/bench-lifecycle.json", "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
