#!/usr/bin/python3
"""sbx on the kernels users run, each in a QEMU guest (tests/kernel/guest.py).

    run.py [--build DIR] [--lanes N] [NAME...]   (make test-kernels; part of make test)

NAME picks runs by name (default: the CI set, every run but the 6.1-full
ones; "full" picks those two):

  6.1-core-a   Debian 12's kernel, pure cgroup v2 with a delegated service:
  6.1-core-b   the integration modules whose code paths differ by kernel
               (CORE: mounts and layers, cgroups, namespaces, seccomp,
               Landlock, the egress's nftables, inotify), in two halves,
               one guest each
  6.1-systemd  the same kernel under Debian's systemd 252: the shipped units
               (tests/kernel/systemd_check.py)
  6.12-smoke   Debian 12's 6.12 (Debian 13's kernel line): the suites whose
               code paths differ by kernel (mounts, layers, cgroups)
  5.10-refuse  bullseye's 5.10, below the floor: a one-line refusal, exit 1,
               nothing left on the host (tests/kernel/refusal_check.py)
  6.1-full-a   the namespace engine's whole integration suite on 6.1 (but
  6.1-full-b   the recipe builds, which need the Debian mirror), in two
               halves: about 70 minutes of software emulation, too long for
               CI's hour beside the host's suites (make test-kernels-full)

The runs go in LANES guests at a time (2 by default: software emulation
keeps a guest's work on about one core, so two make use of this machine's
two), each run's console kept in BUILD/kernel-NAME.log and printed whole
when it ends. Then a table: run, kernel, result, minutes. Exit status 0
when every run passed.
"""
import argparse
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

# The recipe builds (and the README's CLI example, which builds one) run
# debootstrap against the Debian mirror, which the guests cannot reach
# (they have no network but their own); the README's E2B example needs
# the SDK from npm.
LEFT_OUT = {"test_templates_recipe", "test_readme", "test_readme_e2b"}

# Where the code paths differ by kernel: mounts and layers, cgroups, the
# freezer.
SMOKE = ["test_smoke", "test_lifecycle", "test_snapshot", "test_templates", "test_pause"]

# What 6.1 runs in CI: the modules whose code paths differ by kernel or
# cgroup layout. Mounts, layers and path resolution (the rootfs, overlay
# and idmap fallbacks, openat2); cgroups (limits, the freezer, kill,
# adoption across a restart); namespaces, seccomp, Landlock and the
# egress's nftables; inotify. The rest (the API's parsing and errors, the
# E2B wire, the CLI, audit, PTYs, ports, the code server, faults, floods)
# is the same code on any kernel: it runs on the host's, plain and ASan.
CORE = SMOKE + ["test_hostile_fs", "test_hostile_files_api", "test_hostile_bombs",
                "test_restart", "test_hostile_procs", "test_hostile_seccomp", "test_hostile_env",
                "test_hostile_net", "test_privsep", "test_egress", "test_watch", "test_sudo"]

# The half of the suite's modules a run takes ("a" or "b"): by the minutes
# each took in the 6.1 guest (measured, the tests' own time; unknown ones
# count 2), the heaviest
# first, each to the lighter half.
MINUTES = {
    "test_restart": 5.4, "test_egress": 4.1, "test_e2b_wire": 3.9, "test_hostile_flood": 3.1,
    "test_hostile_fs": 2.3, "test_credentials": 2.2, "test_faults": 2.1,
    "test_hostile_files_api": 1.9, "test_watch": 1.7, "test_cli": 1.6, "test_api_files": 1.2,
    "test_lifecycle": 1.1, "test_api_exec": 1.1, "test_pty": 1.1, "test_hostile_bombs": 1.0,
    "test_hostile_procs": 0.9, "test_snapshot": 0.8, "test_ports": 0.8, "test_templates": 0.8,
    "test_audit": 0.7, "test_api_errors": 0.7, "test_hostile_env": 0.6, "test_pause": 0.5,
    "test_api_sandboxes": 0.5, "test_hostile_net": 0.4, "test_privsep": 0.2,
    "test_hostile_seccomp": 0.1, "test_smoke": 0.1, "test_code": 4,
}


def namespace_modules():
    here = os.path.join(ROOT, "tests", "integration")
    return sorted(f[:-3] for f in os.listdir(here)
                  if f.startswith("test_") and f.endswith(".py") and not f.startswith("test_vm")
                  and f[:-3] not in LEFT_OUT)


def half(modules, which):
    halves = {"a": [], "b": []}
    load = {"a": 0, "b": 0}
    for m in sorted(modules, key=lambda m: -MINUTES.get(m, 2)):
        h = "a" if load["a"] <= load["b"] else "b"
        halves[h].append(m)
        load[h] += MINUTES.get(m, 2)
    return sorted(halves[which])


def suite(modules):
    # SBX_TEST_ENGINE is a second guard: no microVM module in a guest.
    # (SBX_TEST_EXCLUDE too: run.py takes module names as substrings, and
    # test_templates is one of test_templates_recipe.)
    return lambda b: ["env", "SBX_TEST_ENGINE=namespace",
                      "SBX_TEST_EXCLUDE=" + ",".join(sorted(LEFT_OUT)), "SBX_BUILD=" + b, PY,
                      "tests/integration/run.py"] + modules


RUNS = [
    ("6.1-core-a", "linux-image-6.1.0-N-amd64", None, [], 6144, suite(half(CORE, "a"))),
    ("6.1-core-b", "linux-image-6.1.0-N-amd64", None, [], 6144, suite(half(CORE, "b"))),
    ("6.1-systemd", "linux-image-6.1.0-N-amd64", None, ["--systemd"], 3072,
     lambda b: [PY, "tests/kernel/systemd_check.py", b]),
    ("6.12-smoke", "linux-image-6.12.N+deb12-amd64", None, [], 4096, suite(SMOKE)),
    ("5.10-refuse", "linux-image-5.10.0-N-amd64", "bullseye", [], 1024,
     lambda b: [PY, "tests/kernel/refusal_check.py", b]),
    ("6.1-full-a", "linux-image-6.1.0-N-amd64", None, [], 6144,
     lambda b: suite(half(namespace_modules(), "a"))(b)),
    ("6.1-full-b", "linux-image-6.1.0-N-amd64", None, [], 6144,
     lambda b: suite(half(namespace_modules(), "b"))(b)),
]
FULL = {"6.1-full-a", "6.1-full-b"}


def run_one(run, build, results, lock):
    name, kernel, suite_name, extra, mem, command = run
    log_path = os.path.join(ROOT, build, "kernel-%s.log" % name)
    argv = [PY, os.path.join(HERE, "guest.py"), "--kernel", kernel, "--mem", str(mem)] + extra
    if suite_name:
        argv += ["--suite", suite_name]
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        rc = subprocess.run(argv + ["--"] + command(build), cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    took = time.monotonic() - t0
    with lock:
        print("==== %s: %s (%s), %s in %.1f min ====" % (
            name, kernel, log_path, "passed" if rc == 0 else "FAILED (%d)" % rc, took / 60),
            flush=True)
        with open(log_path, "rb") as f:
            sys.stdout.buffer.write(f.read().replace(b"\r\n", b"\n"))
        sys.stdout.flush()
        results.append((name, kernel, rc, took))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("SBX_BUILD", "build"))
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    if a.names == ["full"]:
        a.names = sorted(FULL)
    unknown = set(a.names) - {r[0] for r in RUNS}
    if unknown:
        ap.error("unknown runs: %s" % ", ".join(sorted(unknown)))
    if os.geteuid() != 0:
        print("the kernel guests need root (QEMU's 9p server reads the host's trees as root)")
        return 2
    todo = [r for r in RUNS if r[0] in a.names or (not a.names and r[0] not in FULL)]
    print("kernel guests: %s; %s left out of the suite (%s)" % (
        ", ".join(r[0] for r in todo), ", ".join(sorted(LEFT_OUT)),
        "debootstrap needs the Debian mirror, which the guests cannot reach"), flush=True)
    results, lock = [], threading.Lock()
    queue = list(todo)

    def lane():
        while True:
            with lock:
                if not queue:
                    return
                run = queue.pop(0)
            run_one(run, a.build, results, lock)
    lanes = [threading.Thread(target=lane) for _ in range(max(1, a.lanes))]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    print("\nkernel guests:")
    for name, kernel, rc, took in sorted(results, key=lambda r: [x[0] for x in RUNS].index(r[0])):
        print("  %-12s %-32s %-8s %5.1f min" % (name, kernel, "ok" if rc == 0 else "FAILED",
                                                took / 60))
    return 0 if len(results) == len(todo) and all(r[2] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
