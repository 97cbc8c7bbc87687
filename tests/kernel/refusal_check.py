#!/usr/bin/python3
"""Below the floor (a guest of tests/kernel/run.py on bullseye's 5.10): the
daemon refuses in one line that names the missing feature, the release
that brought it and this kernel's, exits 1, and leaves nothing on the host:
no state directory, no published CA, no cgroup, no socket.

    refusal_check.py BUILD_DIR
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, sys.argv[1] if len(sys.argv) > 1 else "build")
STATE = "/var/lib/sbx-refusal"
CG = "/sys/fs/cgroup"


def snapshot():
    cgroups = sorted(os.path.relpath(d, CG) for d, _, _ in os.walk(CG))
    run = sorted(os.listdir("/run"))
    return cgroups, run


def main():
    failures = []
    release = os.uname().release
    before = snapshot()
    p = subprocess.run([os.path.join(BUILD, "sbxd"), "--state", STATE], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=60)
    lines = p.stderr.splitlines()
    checks = [
        ("exit status 1", p.returncode == 1, p.returncode),
        ("one line", len(lines) == 1 and p.stdout == "", p.stdout + p.stderr),
        ("it names this kernel's release", release in p.stderr, p.stderr),
        ("it names the missing feature and its release",
         "lacks mount_setattr (Linux 5.12)" in p.stderr, p.stderr),
        ("it names the floor", "Linux 5.15 or newer" in p.stderr, p.stderr),
        ("no state directory", not os.path.exists(STATE), STATE),
        ("nothing else on the host", snapshot() == before, (before, snapshot())),
    ]
    for what, ok, detail in checks:
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else ": %r" % (detail,)))
        if not ok:
            failures.append(what)
    print("refusal check on %s: %d failed" % (release, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
