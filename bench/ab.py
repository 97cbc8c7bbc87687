#!/usr/bin/python3
"""A/B of two sbxd builds in one run: both daemons up at once, requests
alternating between them, so machine noise hits both alike. Reports the
median exec round trip and create+delete cycle of each, and the ratio.

    /usr/bin/python3 bench/ab.py OLD/build/sbxd build/sbxd

(docs/benchmarks.md: the cost of privilege separation was measured with
OLD = commit 32226e8, the last single-process daemon.)"""
import json, os, socket, statistics, subprocess, sys, tempfile, time, http.client

class UConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60); self.path_ = path
    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(self.path_); self.sock = s

def start(binary, tag, uid_base, extra=()):
    top = tempfile.mkdtemp(prefix="sbx-ab-"); os.chmod(top, 0o711)
    state = os.path.join(top, "state")
    p = subprocess.Popen([binary, "--state", state, "--pool", "4", "--cgroup-parent", tag,
                          "--uid-base", str(uid_base), "--max-sandboxes", "64"] + list(extra),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = os.path.join(state, "sbx.sock")
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    time.sleep(1.5)
    return p, UConn(sock), top

def call(c, method, path, body=None):
    c.request(method, path, json.dumps(body) if body is not None else None,
              {"Content-Type": "application/json"})
    r = c.getresponse(); data = r.read()
    return r.status, data

def main():
    old_bin, new_bin = sys.argv[1], sys.argv[2]
    # --kill-on-exit only where the build knows it (daemons before the
    # restart work reject it, and kill on exit anyway).
    flag = lambda b: ("--kill-on-exit",) if b"kill-on-exit" in subprocess.run(
        [b, "--help"], capture_output=True).stdout else ()
    old = start(old_bin, "sbx-ab-old", 0xC8000000, flag(old_bin))
    new = start(new_bin, "sbx-ab-new", 0xD0000000, flag(new_bin))
    res = {"old": {"exec": [], "cycle": []}, "new": {"exec": [], "cycle": []}}
    try:
        sids = {}
        for name, (p, c, _) in (("old", old), ("new", new)):
            st, d = call(c, "POST", "/v1/sandboxes", {})
            sids[name] = json.loads(d)["id"]
        for i in range(400):
            for name, (p, c, _) in (("old", old), ("new", new)) if i % 2 else (("new", new), ("old", old)):
                t = time.perf_counter()
                st, _ = call(c, "POST", "/v1/sandboxes/%s/exec" % sids[name], {"argv": ["/bin/true"]})
                res[name]["exec"].append((time.perf_counter() - t) * 1000)
                assert st == 200
        for i in range(60):
            for name, (p, c, _) in (("old", old), ("new", new)) if i % 2 else (("new", new), ("old", old)):
                t = time.perf_counter()
                st, d = call(c, "POST", "/v1/sandboxes", {})
                sid = json.loads(d)["id"]
                st2, _ = call(c, "DELETE", "/v1/sandboxes/" + sid)
                res[name]["cycle"].append((time.perf_counter() - t) * 1000)
                time.sleep(0.05)  # let the pool refill
        for name, (p, c, _) in (("old", old), ("new", new)):
            call(c, "DELETE", "/v1/sandboxes/" + sids[name])
    finally:
        for p, c, top in (old, new):
            p.terminate(); p.wait(30)
            subprocess.run(["rm", "-rf", top])
    for k in ("exec", "cycle"):
        o = statistics.median(res["old"][k]); n = statistics.median(res["new"][k])
        print("%-6s median ms: old %.2f, new %.2f, ratio %.2f (n=%d)"
              % (k, o, n, n / o, len(res["new"][k])))

main()
