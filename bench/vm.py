#!/usr/bin/python3
"""The microVM engine beside the namespace engine, in one run, one daemon
(docs/benchmarks.md, docs/vm.md):

  - boot to first command: POST /v1/sandboxes then the first exec answered
    (the namespace engine without its pool, so both build from nothing);
  - exec round trip: `true`, median of N;
  - host memory per idle sandbox: resident and proportional (PSS) memory of
    every host process in the sandbox's cgroup (for a VM: QEMU and the relay);
  - snapshot: POST .../snapshots of a sandbox with a 10 MB file on its disk
    and a running process (a VM: its memory, disk included; the namespace
    engine: its disk), and restore: POST /v1/sandboxes {"snapshot"} until
    the first exec in the copy answers; the snapshot's size.

  - fork and hibernate (`lifecycle`): POST .../fork {"count": N} of a
    sandbox with a 10 MB file and a running process, until the first exec
    in every copy answered (a VM: one save of its memory, N restores; the
    namespace engine: N creates and copies of its disk); a VM's pause to
    disk (its memory saved, QEMU ended) with the host memory of its
    cgroup before and after, and its resume until the first exec answers
    (the namespace engine: its freezer pause and resume, for scale).

    SBX_BUILD=build /usr/bin/python3 bench/vm.py [BOOTS] [EXECS] [SNAPS]
    SBX_BUILD=build /usr/bin/python3 bench/vm.py lifecycle [ROUNDS]

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


def snapshots(d, isolation, n):
    body = {"memory": "256M", "disk": "64M"}
    if isolation:
        body["isolation"] = isolation
    r = d.api("POST", "/v1/sandboxes", body)
    assert r.status == 201, r
    sid = r.json()["id"]
    assert d.sh(sid, "head -c 10000000 /dev/urandom > /home/user/blob")["exit_code"] == 0
    d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "sleep 1000"})
    save, restore, size = [], [], []
    for i in range(n):
        name = "bench%d" % i
        t = time.monotonic()
        r = d.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": name})
        assert r.status == 201, r
        save.append(time.monotonic() - t)
        size.append(r.json()["bytes"] / 1048576.0)
        t = time.monotonic()
        r = d.api("POST", "/v1/sandboxes", {"snapshot": name})
        assert r.status == 201, r
        cid = r.json()["id"]
        res = d.exec(cid, argv=["true"])
        assert res["exit_code"] == 0, res
        restore.append(time.monotonic() - t)
        d.kill(cid)
        d.api("DELETE", "/v1/snapshots/" + name)
    d.kill(sid)
    return save, restore, size


def lifecycle(d, isolation, rounds):
    body = {"memory": "256M", "disk": "64M"}
    if isolation:
        body["isolation"] = isolation
    r = d.api("POST", "/v1/sandboxes", body)
    assert r.status == 201, r
    sid = r.json()["id"]
    assert d.sh(sid, "head -c 10000000 /dev/urandom > /home/user/blob")["exit_code"] == 0
    d.api("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "sleep 1000"})
    out = {"fork1": [], "fork3": [], "pause": [], "resume": [], "rss_before": [],
           "rss_after": []}
    for _ in range(rounds):
        for count, key in ((1, "fork1"), (3, "fork3")):
            t = time.monotonic()
            r = d.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": count})
            assert r.status == 201, r
            copies = [sb["id"] for sb in r.json()["sandboxes"]]
            for c in copies:
                assert d.exec(c, argv=["true"])["exit_code"] == 0
            out[key].append(time.monotonic() - t)
            for c in copies:
                d.kill(c)
        time.sleep(1)
        out["rss_before"].append(memory(cgroup_pids(sid))[0])
        t = time.monotonic()
        r = d.api("POST", "/v1/sandboxes/%s/pause" % sid, {"to_disk": True} if isolation else {})
        assert r.status == 200, r
        out["pause"].append(time.monotonic() - t)
        out["rss_after"].append(memory(cgroup_pids(sid))[0])
        t = time.monotonic()
        r = d.api("POST", "/v1/sandboxes/%s/resume" % sid, {})
        assert r.status == 200, r
        assert d.exec(sid, argv=["true"])["exit_code"] == 0
        out["resume"].append(time.monotonic() - t)
    d.kill(sid)
    return out


def main_lifecycle(rounds):
    d = Daemon(pool=0).start()
    try:
        res = [(name, lifecycle(d, iso, rounds)) for name, iso in
               (("namespace", None), ("vm (TCG)", "vm"))]
    finally:
        d.stop()
        d.cleanup()

    def fmt(v):
        return "%.3f s (%.3f .. %.3f)" % (statistics.median(v), min(v), max(v))
    print("figure, median (min .. max) of %d        namespace                    vm (TCG)"
          % rounds)
    for key, label in (("fork1", "fork count 1 + first exec"), ("fork3", "fork count 3 + exec each"),
                       ("pause", "pause (vm: to disk)"), ("resume", "resume + first exec")):
        print("%-36s %-28s %s" % (label, fmt(res[0][1][key]), fmt(res[1][1][key])))
    for key, label in (("rss_before", "host RSS before the pause, MiB"),
                       ("rss_after", "host RSS while paused, MiB")):
        print("%-36s %-28.1f %.1f" % (label, statistics.median(res[0][1][key]),
                                      statistics.median(res[1][1][key])))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "lifecycle":
        return main_lifecycle(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
    boots = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    execs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    snaps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    d = Daemon(pool=0).start()
    try:
        rows, srows = [], []
        for name, iso in (("namespace", None), ("vm (TCG)", "vm")):
            save, restore, size = snapshots(d, iso, snaps)
            srows.append((name, statistics.median(save), min(save), max(save),
                          statistics.median(restore), min(restore), max(restore),
                          statistics.median(size)))
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
    print()
    print("engine      snapshot s (median, min..max)   restore+first exec s (median, min..max)"
          "   snapshot MiB")
    for name, s, slo, shi, r, rlo, rhi, mib in srows:
        print("%-10s  %6.3f (%.3f .. %.3f)          %6.3f (%.3f .. %.3f)                   %8.1f"
              % (name, s, slo, shi, r, rlo, rhi, mib))


if __name__ == "__main__":
    main()
