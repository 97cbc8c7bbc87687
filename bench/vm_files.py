"""The files API on a VM sandbox against a namespace sandbox, side by side
(docs/benchmarks.md, "The files API on a VM"): medians of stat, list of
100 entries, mkdir + delete, and a 1 MiB upload and download.

    SBX_BUILD=build /usr/bin/python3 bench/vm_files.py
"""
import sys, time, statistics
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import Daemon
d = Daemon(pool=0).start()
try:
    vm = d.create(isolation="vm", timeout="5m")
    ns = d.create(isolation="namespace", timeout="5m")
    for sid in (vm, ns):
        d.sh(sid, "mkdir -p /home/user/d; i=0; while [ $i -lt 100 ]; do : > /home/user/d/f$i; i=$((i+1)); done")
    data = b"x" * (1 << 20)
    def t(fn, n=20):
        xs = []
        for _ in range(n):
            a = time.monotonic(); fn(); xs.append((time.monotonic() - a) * 1000)
        return statistics.median(xs)
    for name, sid in (("namespace", ns), ("vm", vm)):
        base = "/v1/sandboxes/%s/" % sid
        r = {
          "stat": t(lambda: d.api("GET", base + "files/stat?path=/home/user/d/f1")),
          "list100": t(lambda: d.api("GET", base + "files/list?path=/home/user/d")),
          "mkdir+delete": t(lambda: (d.api("POST", base + "files/mkdir", {"path": "/home/user/m"}), d.api("DELETE", base + "files?path=/home/user/m"))),
          "upload 1MiB": t(lambda: d.api("PUT", base + "files?path=/home/user/u", data, raw=True), 10),
          "download 1MiB": t(lambda: d.api("GET", base + "files?path=/home/user/u"), 10),
        }
        print(name, {k: round(v, 1) for k, v in r.items()})
finally:
    d.stop(); d.cleanup()
