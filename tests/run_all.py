#!/usr/bin/python3
"""`make test`: every suite, the kernel guests beside the host's.

    run_all.py [--build DIR] [--no-kernels]

Two chains run at once, since neither fills this machine's two cores and
they share nothing (the guests have kernels, cgroups and uid ranges of
their own):
  host:    unit tests (plain, then ASan+UBSan), the fuzz regressions, the
           integration suites (but the modules the 6.1 guests run: CORE in
           tests/kernel/run.py), the E2B SDK scenarios, the integration
           suites and the E2B scenarios again, all of them, against an
           ASan+UBSan daemon, the valgrind smoke;
  kernels: tests/kernel/run.py (Debian 12's 6.1 with pure cgroup v2 and
           under systemd, 6.12, bullseye's 5.10 refused), its output kept
           in BUILD/test-kernels.log and printed when the host chain ends.
Each namespace test so runs twice: plain once (the kernel-dependent ones
on 6.1, the rest here) and under ASan here. With --no-kernels,
everything runs here, plain and ASan. A failed stage does not stop the
others. At the end: each stage's result and minutes, and the total. Exit
status 0 when everything passed.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "kernel"))
import run as kernel_runs  # noqa: E402 (CORE: what the 6.1 guests run)


def make(*args):
    return ["make", "--no-print-directory"] + list(args)


def stop_group(proc):
    """SIGTERM to proc's process group, SIGKILL 30 s later if it lingers."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_bounded(argv, minutes, **kw):
    """argv in a process group of its own, killed whole past `minutes`
    (a hang fails its stage by name instead of eating CI's 90 minutes).
    Returns the exit status, 124 when the bound was hit."""
    proc = subprocess.Popen(argv, cwd=ROOT, start_new_session=True, **kw)
    try:
        return proc.wait(timeout=minutes * 60)
    except subprocess.TimeoutExpired:
        print("run_all: %s passed its bound of %.0f minutes: killed" % (" ".join(argv), minutes),
              flush=True)
        stop_group(proc)
        return 124


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--no-kernels", action="store_true",
                    help="leave out the kernel guests (they need QEMU and about 40 minutes)")
    a = ap.parse_args()
    b = a.build
    # With the guests, the plain build's kernel-dependent modules run there
    # (on Debian 12's kernel, pure cgroup v2) and the rest here; the ASan
    # pass runs everything here (this kernel, hybrid cgroups).
    plain = "integration" if a.no_kernels else "integration (but 6.1's modules)"
    env = [] if a.no_kernels else ["SBX_TEST_EXCLUDE=" + ",".join(sorted(kernel_runs.CORE))]
    # Each stage with a bound in minutes, about three times what it takes
    # on this machine kind (the last times are in the table printed at the
    # end).
    host = [
        ("unit tests", make("BUILD=" + b, "test-unit"), 8),
        ("unit tests, ASan+UBSan", make("BUILD=build-asan", "SAN=1", "test-unit"), 12),
        ("fuzz regressions", make("fuzz-ci"), 12),
        (plain, ["env"] + env + make("BUILD=" + b, "test-integration"), 35),
        ("E2B SDK", make("BUILD=" + b, "test-e2b"), 10),
        ("integration + E2B, ASan+UBSan", make("test-asan"), 45),
        ("valgrind smoke", make("BUILD=" + b, "valgrind"), 5),
    ]
    kernel_bound = 55
    # CI gives 90 minutes: past 80 the stages left are cut short, so a
    # hang still ends in this table rather than in CI's timeout.
    deadline = 80
    t_all = time.monotonic()
    results = []
    kernels = None
    log_path = os.path.join(ROOT, b, "test-kernels.log")
    if not a.no_kernels:
        log = open(log_path, "wb")
        kernels = (subprocess.Popen(make("BUILD=" + b, "test-kernels"), cwd=ROOT, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True),
                   time.monotonic(), log)
        print("run_all: kernel guests started (output: %s)" % log_path, flush=True)
    for name, argv, bound in host:
        print("\n==== %s ====" % name, flush=True)
        t0 = time.monotonic()
        left = deadline - (time.monotonic() - t_all) / 60
        rc = run_bounded(argv, max(1, min(bound, left)))
        results.append((name, rc, time.monotonic() - t0))
    if kernels:
        proc, t0, log = kernels
        left = max(60, kernel_bound * 60 - (time.monotonic() - t0))
        try:
            rc = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            print("run_all: the kernel guests passed their bound of %d minutes: killed"
                  % kernel_bound, flush=True)
            stop_group(proc)
            rc = 124
        log.close()
        results.append(("kernel guests", rc, time.monotonic() - t0))
        print("\n==== kernel guests (%s) ====" % log_path, flush=True)
        with open(log_path, "rb") as f:
            sys.stdout.buffer.write(f.read())
        sys.stdout.flush()
    print("\nmake test:")
    for name, rc, took in results:
        print("  %-32s %-8s %5.1f min" % (name, "ok" if rc == 0 else "FAILED", took / 60))
    print("  %-32s %-8s %5.1f min" % ("total", "", (time.monotonic() - t_all) / 60))
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
