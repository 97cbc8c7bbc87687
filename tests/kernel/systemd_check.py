#!/usr/bin/python3
"""The shipped systemd units on a pure cgroup v2 host, under Debian's own
systemd (run by tests/kernel/run.py in a guest booted with --systemd).

    systemd_check.py BUILD_DIR

Installs share/systemd/sbx-sandboxes.service and sbx.service as setup.sh
does (into /run/systemd/system, with a prefix that points at BUILD_DIR),
starts them, and checks what an operator relies on: sandboxes run in the
holder unit's delegated subtree, the daemon's unit restarts (a crash, a
`systemctl restart`) while they run and re-adopts them, a unit without the
holder is refused in one line instead of breaking its own next start, and
stopping the holder unit ends every sandbox and leaves no cgroup behind.
Prints one line per check; exit status 0 when all passed.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, sys.argv[1] if len(sys.argv) > 1 else "build")
PREFIX = "/run/sbx-prefix"
STATE = "/var/lib/sbx"
CG = "/sys/fs/cgroup"
HOLDER_CG = CG + "/system.slice/sbx-sandboxes.service"
UNITS = "/run/systemd/system"
failures = []


def check(what, ok, detail=""):
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if detail and not ok else ""),
          flush=True)
    if not ok:
        failures.append(what)


def sh(*argv, check_rc=True, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if check_rc and p.returncode != 0:
        raise RuntimeError("%s: %d %s %s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def sbx(*args):
    return subprocess.run([PREFIX + "/bin/sbx"] + list(args), capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "SBX_STATE": STATE})


def api(method, path, body=None):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(STATE + "/sbx.sock")
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
               % (method, path, len(data))).encode() + data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if b"chunked" in head.lower():
        dechunked, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            dechunked, rest = dechunked + rest[:n], rest[n + 2:]
        body = dechunked
    return status, (json.loads(body) if body.strip() else None)


def wait_for(what, fn, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (OSError, ValueError, RuntimeError):
            pass
        time.sleep(0.2)
    raise RuntimeError("timed out waiting for " + what)


def main_pid(unit):
    return int(sh("systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip() or 0)


def cgroup_of(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        return f.read().strip().split("::", 1)[1]


def install(unit_text_from, name, extra_args=""):
    with open(os.path.join(ROOT, "share", "systemd", unit_text_from)) as f:
        text = f.read()
    text = text.replace("@PREFIX@", PREFIX).replace("@STATE@", STATE).replace("@ARGS@", extra_args)
    text = text.replace("@KILLMODE@", "mixed")  # as setup.sh does on cgroup v2
    with open(os.path.join(UNITS, name), "w") as f:
        f.write(text)


def daemon_up():
    return api("GET", "/healthz")[0] == 200


def main():
    os.makedirs(PREFIX + "/bin", exist_ok=True)
    for b in ("sbx", "sbxd"):
        if not os.path.exists(PREFIX + "/bin/" + b):
            os.symlink(os.path.join(BUILD, b), PREFIX + "/bin/" + b)
    install("sbx-sandboxes.service", "sbx-sandboxes.service")
    install("sbx.service", "sbx.service", "--pool 1")
    sh("systemctl", "daemon-reload")
    sh("systemctl", "start", "sbx-sandboxes.service", "sbx.service")
    wait_for("the daemon", daemon_up)

    holder = main_pid("sbx-sandboxes.service")
    check("the holder moved into its leaf",
          cgroup_of(holder) == "/system.slice/sbx-sandboxes.service/daemon", cgroup_of(holder))
    with open(HOLDER_CG + "/cgroup.subtree_control") as f:
        ctl = f.read().split()
    check("the holder's cgroup gives memory, pids and cpu", {"memory", "pids", "cpu"} <= set(ctl),
          repr(ctl))
    daemon = main_pid("sbx.service")
    check("the daemon runs in its own unit", cgroup_of(daemon) == "/system.slice/sbx.service",
          cgroup_of(daemon))
    p = sbx("run", "--", "echo", "hello")
    check("sbx run -- echo hello", p.returncode == 0 and p.stdout == "hello\n", p.stdout + p.stderr)
    _, info = api("GET", "/v1/info")
    check("/v1/info names the parent",
          info.get("cgroup_parent") == "/system.slice/sbx-sandboxes.service/sbx", repr(info))

    status, sb = api("POST", "/v1/sandboxes", {"memory": "64M", "pids": 32})
    sid = sb["id"]
    check("a sandbox's cgroup is in the holder's subtree",
          os.path.isdir(HOLDER_CG + "/sbx/" + sid), sid)
    with open(HOLDER_CG + "/sbx/" + sid + "/memory.max") as f:
        check("its memory limit is set", f.read().strip() == str(64 << 20))
    api("POST", "/v1/sandboxes/%s/exec" % sid,
        {"cmd": "sleep 1000 & echo started", "timeout": "10s"})
    status, r = api("POST", "/v1/sandboxes/%s/exec" % sid,
                    {"cmd": "python3 -c 'b = bytearray(200 << 20)'", "timeout": "30s"})
    check("out of memory is reported", r and r.get("oom_killed") is True
          and r.get("signal") == "SIGKILL" and "out of memory" in r.get("reason", ""), repr(r))

    for how in ("kill -9 of the daemon", "systemctl restart sbx"):
        before = main_pid("sbx.service")
        if how.startswith("kill"):
            os.kill(before, signal.SIGKILL)
        else:
            sh("systemctl", "restart", "sbx.service")
        wait_for("a new daemon", lambda: main_pid("sbx.service") not in (0, before), 60)
        wait_for("the daemon", daemon_up)
        st = sh("systemctl", "show", "-p", "ActiveState", "--value", "sbx.service").stdout.strip()
        check("after %s the unit is active again" % how, st == "active", st)
        status, got = api("GET", "/v1/sandboxes/" + sid)
        check("after %s the sandbox is re-adopted" % how, status == 200, repr(got))
        status, r = api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "pgrep -c sleep"})
        check("after %s its processes live on" % how, status == 200 and r.get("stdout") == "1\n",
              repr(r))

    # A unit of the old shape (the daemon at the root of a delegated
    # service cgroup, no holder): refused in one line, nothing broken.
    with open(os.path.join(UNITS, "sbx-single.service"), "w") as f:
        f.write("[Service]\nType=simple\nDelegate=yes\nKillMode=process\n"
                "ExecStart=%s/bin/sbx serve --state /var/lib/sbx-single --uid-base 3221225472\n"
                % PREFIX)
    sh("systemctl", "daemon-reload")
    sh("systemctl", "start", "sbx-single.service", check_rc=False)
    wait_for("the refusal", lambda: sh("systemctl", "show", "-p", "ActiveState", "--value",
                                        "sbx-single.service").stdout.strip() in ("failed", "inactive"))
    log = sh("journalctl", "-u", "sbx-single.service", "--no-pager", check_rc=False).stdout
    single_cg = CG + "/system.slice/sbx-single.service"
    check("a daemon at a delegated unit's root is refused",
          not os.path.exists("/var/lib/sbx-single/sbx.sock"), log[-500:])
    check("and leaves nothing behind", not os.path.exists("/var/lib/sbx-single")
          and not os.path.isdir(single_cg + "/sbx"), repr(os.listdir("/var/lib")))

    sh("systemctl", "stop", "sbx-sandboxes.service")
    wait_for("the units to stop", lambda: main_pid("sbx.service") == 0)
    check("stopping the holder ends every sandbox", not os.path.exists(HOLDER_CG),
          repr(os.listdir(CG + "/system.slice")))
    left = [d for d in os.listdir(CG + "/system.slice")
            if d in ("sbx.service", "sbx-sandboxes.service", "sbx-single.service")]
    check("no cgroup is left", left == [], repr(left))
    shutil.rmtree(PREFIX, ignore_errors=True)
    print("systemd check: %d failed" % len(failures), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the failure, then the units' logs
        print("FAIL systemd check: %s" % e, flush=True)
        print(sh("journalctl", "-u", "sbx.service", "-u", "sbx-sandboxes.service", "--no-pager",
                 check_rc=False).stdout[-4000:], flush=True)
        sys.exit(1)
