#!/usr/bin/python3
"""The microVM engine beside the namespace engine, in one run, one daemon
(docs/benchmarks.md, docs/vm.md):

  - boot to first command: POST /v1/sandboxes then the first exec answered
    (the namespace engine without its pool, so both build from nothing);
  - exec round trip: `true`, median of N;
  - host memory per idle sandbox: resident and proportional (PSS) memory of
    every host process in the sandbox's cgroup (for a VM: QEMU and the relay).

    SBX_BUILD=build /usr/bin/python3 bench/vm.py [BOOTS] [EXECS]

Under TCG on this machine; KVM figures are QEMU's own, in docs/benchmarks.md.
"""
import glob
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Daemon  # noqa: E402


def cgroup_pids(sid):
    for path in glob.glob("/sys/fs/cgroup/pids/**/%s/cgroup.procs" % sid, recursive=True) + \
            glob.glob("/sys/fs/cgroup/**/%s/cgroup.procs" % sid, recursive=True):
        with open(path) as f:
            pids = [int(x) for x in f.read().split()]
        if pids:
            return pids
    return []


def memory(pids):
    rss = pss = 0
    for pid in pids:
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return rss / 1024.0, pss / 1024.0


def run(d, isolation, boots, execs):
    body = {"memory": "256M", "disk": "64M"}
    if isolation:
        body["isolation"] = isolation
    boot, rtt, mem = [], [], []
    for i in range(boots):
        t0 = time.monotonic()
        r = d.api("POST", "/v1/sandboxes", body)
        assert r.status == 201, r
        sid = r.json()["id"]
        res = d.exec(sid, argv=["true"])
        assert res["exit_code"] == 0, res
        boot.append(time.monotonic() - t0)
        if i == 0:
            for _ in range(execs):
                t = time.monotonic()
                d.exec(sid, argv=["true"])
                rtt.append(time.monotonic() - t)
        time.sleep(2)  # idle
        mem.append(memory(cgroup_pids(sid)))
        d.kill(sid)
    return boot, rtt, mem


def main():
    boots = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    execs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    d = Daemon(pool=0).start()
    try:
        rows = []
        for name, iso in (("namespace", None), ("vm (TCG)", "vm")):
            boot, rtt, mem = run(d, iso, boots, execs)
            rows.append((name, statistics.median(boot), min(boot), max(boot),
                         statistics.median(rtt) * 1000,
                         statistics.median(m[0] for m in mem),
                         statistics.median(m[1] for m in mem)))
    finally:
        d.stop()
        d.cleanup()
    print("engine      boot+first exec s (median, min..max)   exec rtt ms   idle RSS MiB   idle PSS MiB")
    for name, med, lo, hi, rtt, rss, pss in rows:
        print("%-10s  %6.3f (%.3f .. %.3f)                 %8.2f      %8.1f       %8.1f"
              % (name, med, lo, hi, rtt, rss, pss))


if __name__ == "__main__":
    main()
