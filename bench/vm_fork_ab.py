#!/usr/bin/python3
"""A/B of a VM's fork (docs/benchmarks.md "Fork and hibernate"): two daemons
of two builds up at once, each with a VM source (256 MiB, a 10 MB file on
its disk); rounds alternated between them (the load drifts alike for both)
of a fork of 1 and of 3: the POST alone, then until an exec answered in
every copy.

    /usr/bin/python3 bench/vm_fork_ab.py ROUNDS BEFORE_BUILD AFTER_BUILD
    e.g. git stash; make BUILD=build-before -j2 all; git stash pop
         /usr/bin/python3 bench/vm_fork_ab.py 8 build-before build
"""
import os
import statistics
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import Daemon  # noqa: E402

rounds = int(sys.argv[1])
builds = (("before", sys.argv[2]), ("after", sys.argv[3]))
ds = {}
try:
    for name, build in builds:
        d = Daemon(pool=0)
        d.args[0] = os.path.join(ROOT, build, "sbxd")
        d.start()
        ds[name] = d
    src = {}
    for name, d in ds.items():
        r = d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M", "disk": "64M",
                                            "timeout": "30m"})
        assert r.status == 201, r
        src[name] = r.json()["id"]
        assert d.sh(src[name], "head -c 10000000 /dev/urandom > /home/user/blob")["exit_code"] == 0
    out = {n: {"post1": [], "all1": [], "post3": [], "all3": []} for n in ds}
    for i in range(rounds):
        order = list(ds) if i % 2 == 0 else list(ds)[::-1]
        for name in order:
            d = ds[name]
            for count in (1, 3):
                t = time.monotonic()
                r = d.api("POST", "/v1/sandboxes/%s/fork" % src[name], {"count": count})
                assert r.status == 201, r
                tp = time.monotonic() - t
                copies = [sb["id"] for sb in r.json()["sandboxes"]]
                for c in copies:
                    assert d.exec(c, argv=["true"])["exit_code"] == 0
                out[name]["post%d" % count].append(tp)
                out[name]["all%d" % count].append(time.monotonic() - t)
                for c in copies:
                    d.kill(c)
    for k in ("post1", "all1", "post3", "all3"):
        print("%-6s" % k, "  ".join("%s %.2f s (%.2f .. %.2f)"
                                    % (n, statistics.median(v[k]), min(v[k]), max(v[k]))
                                    for n, v in out.items()))
finally:
    for d in ds.values():
        d.stop()
        d.cleanup()
