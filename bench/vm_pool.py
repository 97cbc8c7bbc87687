#!/usr/bin/python3
"""A create that takes the pool's booted VM, beside a VM boot and the
namespace engine's pooled create, in one run, one daemon (--pool 1, so the
pool keeps one namespace sandbox and, once a VM was asked for, one VM with
the default limits; docs/vm.md "Pool"):

  - create + first command answered: a VM booted for the create (limits
    other than the pool's), a pooled VM, a pooled namespace sandbox;
  - what a pooled idle VM costs the host: CPU time of its cgroup's
    processes over 10 s, and their resident memory.

    SBX_BUILD=build /usr/bin/python3 bench/vm_pool.py [ROUNDS]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Daemon  # noqa: E402
from vm import cgroup_pids, memory  # noqa: E402


def wait_pool(d, n, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if d.api("GET", "/v1/info").json()["pool"] >= n:
            return
        time.sleep(0.1)
    raise SystemExit("the pool never reached %d" % n)


def create_first(d, body):
    t0 = time.monotonic()
    r = d.api("POST", "/v1/sandboxes", body)
    assert r.status == 201, r
    sid = r.json()["id"]
    res = d.sh(sid, "true")
    assert res["exit_code"] == 0, res
    return sid, time.monotonic() - t0


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def fmt(v):
    return "%.3f s (%.3f .. %.3f)" % (statistics.median(v), min(v), max(v))


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    d = Daemon(pool=1).start()
    try:
        booted, pooled, ns = [], [], []
        wait_pool(d, 1)
        for _ in range(rounds):
            sid, t = create_first(d, {"isolation": "vm", "memory": "256M"})
            booted.append(t)
            d.kill(sid)
            wait_pool(d, 2)
            sid, t = create_first(d, {"isolation": "vm"})
            pooled.append(t)
            d.kill(sid)
            wait_pool(d, 2)
            sid, t = create_first(d, {})
            ns.append(t)
            d.kill(sid)
            wait_pool(d, 2)
        # The pool's VM, idle: its cgroup is named after its id, which the
        # API does not show for a pooled sandbox; take it, then measure.
        sid, _ = create_first(d, {"isolation": "vm"})
        time.sleep(2)
        pids = cgroup_pids(sid)
        a = cpu_ticks(pids)
        time.sleep(10)
        idle_cpu = (cpu_ticks(pids) - a) / os.sysconf("SC_CLK_TCK") / 10.0
        rss, _ = memory(pids)
        d.kill(sid)
        load = os.getloadavg()[0]
        print("| figure (load %.1f, %d rounds) | median (min .. max) |" % (load, rounds))
        print("|---|---|")
        print("| vm, booted for the create (256M) | %s |" % fmt(booted))
        print("| vm, from the pool (default limits) | %s |" % fmt(pooled))
        print("| namespace, from the pool | %s |" % fmt(ns))
        print("| idle VM: CPU | %.1f %% of one CPU |" % (idle_cpu * 100))
        print("| idle VM: RSS (QEMU + relay) | %.0f MiB |" % rss)
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
