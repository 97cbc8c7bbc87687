#!/usr/bin/python3
"""sbxd under valgrind memcheck: a short smoke run of every API path.

    make valgrind                                     # builds build/sbxd-vg, runs this
    /usr/bin/python3 tests/valgrind/smoke.py [--build build]

Runs build/sbxd-vg (the plain daemon plus tests/valgrind/shim.c, for the
system calls valgrind does not know) under memcheck through the
integration harness (private state dir, cgroup parent and uid range),
with a TCP listener. Forked children are followed, and so are programs
they exec, except sbx-init (the zygote, run from a memfd, which becomes
every sandbox). One client on each listener runs the soak's scenarios once
each (tests/soak/soak.py): a sandbox with every block of work (commands,
stdin, streams kept and abandoned, background processes, uploads and
downloads, listing, lifetimes), limits hit, a kill under a running
command, bad requests, API keys; then E2B's control plane and envd
(e2b_paths). Every sandbox is then deleted and the
daemon stopped with SIGTERM: it must exit 0 with no memcheck error and
no definitely lost block in any process (its forked children included).
Suppressions, each with its reason, are in tests/valgrind.supp.

Stdlib only; root; Debian's /usr/bin/python3. Takes about a minute.
"""
import argparse
import glob
import os
import random
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTS, "integration"))
sys.path.insert(0, os.path.join(TESTS, "soak"))
import harness  # noqa: E402
import soak  # noqa: E402
from harness import Daemon, free_port  # noqa: E402

SUPP = os.path.join(TESTS, "valgrind.supp")


def scenario_every_block(c, rng, owned):
    """One sandbox, every block of the soak's sessions in turn."""
    box = soak.create(c, rng, owned, memory="256M", pids=128, metadata={"soak": "1"})
    for blk in soak.BLOCKS:
        blk(c, rng, box)
    soak.delete(c, owned, box["id"])


SCENARIOS = [scenario_every_block, soak.scenario_kill_under_exec, soak.scenario_bad_requests,
             soak.scenario_keys, soak.scenario_memory_hog, soak.scenario_fork_bomb,
             soak.scenario_expire]


def e2b_paths(d, key):
    """E2B's control plane and envd once each, good and bad input (the
    paths of server/e2b_*.c). Returns a list of problems."""
    import base64
    import http.client
    import json
    host, port = d.listen.rsplit(":", 1)
    problems = []

    def req(method, path, body=b"", headers=None):
        c = http.client.HTTPConnection(host, int(port), timeout=120)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def env(obj, flags=0):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        return bytes([flags]) + len(data).to_bytes(4, "big") + data

    def expect(what, got, want):
        if got[0] != want:
            problems.append("e2b %s: %r (wanted %d)" % (what, got, want))
        return got

    api = {"X-API-Key": key, "Content-Type": "application/json"}
    st, body = expect("create", req("POST", "/v2/sandboxes", b'{"templateID":"base","metadata":'
                                    b'{"vg":"1"},"envVars":{"A":"b"},"timeout":120}', api), 201)
    if st != 201:
        return problems
    sb = json.loads(body)
    sid = sb["sandboxID"]
    envd = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
            "X-Access-Token": sb["envdAccessToken"]}
    unary = dict(envd, **{"Content-Type": "application/json"})
    stream = dict(envd, **{"Content-Type": "application/connect+json"})
    expect("get", req("GET", "/sandboxes/" + sid, headers=api), 200)
    expect("list", req("GET", "/v2/sandboxes?metadata=vg%3D1&limit=1&state=running&template=base", headers=api), 200)
    expect("timeout", req("POST", "/sandboxes/%s/timeout" % sid, b'{"timeout":100}', api), 204)
    expect("connect", req("POST", "/v2/sandboxes/%s/connect" % sid, b'{"timeout":200}', api), 200)
    expect("metrics", req("GET", "/sandboxes/%s/metrics" % sid, headers=api), 200)
    expect("pause", req("POST", "/sandboxes/%s/pause" % sid, b"{}", api), 204)
    expect("pause again", req("POST", "/sandboxes/%s/pause" % sid, b"{}", api), 409)
    expect("connect resumes", req("POST", "/v2/sandboxes/%s/connect" % sid, b'{"timeout":200}', api), 201)
    expect("bad create", req("POST", "/v2/sandboxes", b'{"templateID":1}', api), 400)
    expect("health", req("GET", "/health", headers=envd), 204)
    expect("envs", req("GET", "/envs", headers=envd), 200)
    expect("start", req("POST", "/process.Process/Start", env(
        {"process": {"cmd": "/bin/bash", "args": ["-c", "echo out; echo err >&2"]}, "stdin": False}),
        stream), 200)
    expect("start pty", req("POST", "/process.Process/Start", env(
        {"process": {"cmd": "/bin/bash", "args": ["-c", "stty size"]},
         "pty": {"size": {"cols": 80, "rows": 24}}}), stream), 200)
    expect("start deadline", req("POST", "/process.Process/Start", env(
        {"process": {"cmd": "/bin/sleep", "args": ["5"]}, "stdin": False}),
        dict(stream, **{"Connect-Timeout-Ms": "300"})), 200)
    expect("bad envelope", req("POST", "/process.Process/Start", env({"x": 1}, flags=1), stream), 200)
    expect("list", req("POST", "/process.Process/List", b"{}", unary), 200)
    expect("bad unary", req("POST", "/process.Process/List", b"[", unary), 400)
    expect("unknown rpc", req("POST", "/process.Process/Nope", b"{}", unary), 501)
    expect("no token", req("POST", "/process.Process/List", b"{}",
                           {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}), 401)
    expect("signal unknown", req("POST", "/process.Process/SendSignal",
                                 b'{"process":{"pid":99999},"signal":"SIGNAL_SIGKILL"}', unary), 404)
    mp = (b"--XvgX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/vg/a\"\r\n\r\n"
          b"aaa\r\n--XvgX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b\"\r\n\r\n"
          b"bb\r\n--XvgX--\r\n")
    expect("upload", req("POST", "/files", mp,
                         dict(envd, **{"Content-Type": "multipart/form-data; boundary=XvgX"})), 200)
    expect("upload raw", req("POST", "/files?path=/tmp/vg/raw", b"raw",
                             dict(envd, **{"Content-Type": "application/octet-stream"})), 200)
    expect("download", req("GET", "/files?path=/tmp/vg/a", headers=envd), 200)
    expect("download dir", req("GET", "/files?path=/tmp", headers=envd), 400)
    for rpc, msg, want in (("Stat", {"path": "/tmp/vg/a"}, 200),
                           ("ListDir", {"path": "/tmp", "depth": 2}, 200),
                           ("MakeDir", {"path": "/tmp/vg/d"}, 200),
                           ("MakeDir", {"path": "/tmp/vg/d"}, 409),
                           ("Move", {"source": "/tmp/vg/raw", "destination": "/tmp/vg/d/r"}, 200),
                           ("Remove", {"path": "/tmp/vg/d"}, 200),
                           ("Stat", {"path": "/nope"}, 404)):
        expect(rpc, req("POST", "/filesystem.Filesystem/" + rpc, json.dumps(msg).encode(), unary), want)
    st, body = expect("watcher", req("POST", "/filesystem.Filesystem/CreateWatcher",
                                     b'{"path":"/tmp/vg","recursive":true}', unary), 200)
    if st == 200:
        wid = json.loads(body)["watcherId"]
        req("POST", "/files?path=/tmp/vg/w", b"w", dict(envd, **{"Content-Type": "application/octet-stream"}))
        expect("watcher events", req("POST", "/filesystem.Filesystem/GetWatcherEvents",
                                     json.dumps({"watcherId": wid}).encode(), unary), 200)
        expect("remove watcher", req("POST", "/filesystem.Filesystem/RemoveWatcher",
                                     json.dumps({"watcherId": wid}).encode(), unary), 200)
    # A watch stream that the client leaves.
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    c.request("POST", "/filesystem.Filesystem/WatchDir", body=env({"path": "/tmp"}), headers=stream)
    r = c.getresponse()
    r.read(5)
    c.close()
    # A port nothing listens on, with the traffic token; and without.
    expect("port", req("GET", "/x", headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "8000",
                                             "E2b-Traffic-Access-Token": sb["trafficAccessToken"]}), 502)
    expect("port no token", req("GET", "/x", headers={"E2b-Sandbox-Id": sid,
                                                       "E2b-Sandbox-Port": "8000"}), 401)
    # A base sandbox runs no code interpreter: nothing listens on 49999.
    expect("code plane", req("POST", "/execute", b"{}", dict(envd, **{"E2b-Sandbox-Port": "49999"})), 502)
    expect("kill", req("DELETE", "/sandboxes/" + sid, headers=api), 204)
    expect("gone", req("GET", "/health", headers=envd), 502)
    return problems


def check_logs(logdir, main_pid):
    """Problems found in valgrind's logs (one per process: %p)."""
    problems = []
    main = os.path.join(logdir, "vg.%d.log" % main_pid)
    if not os.path.exists(main):
        return ["no valgrind log for the daemon (%s)" % main]
    for path in sorted(glob.glob(os.path.join(logdir, "vg.*.log"))):
        with open(path, errors="replace") as f:
            text = f.read()
        pid = path.rsplit(".", 2)[1]
        if path == main and "HEAP SUMMARY" not in text:
            problems.append("the daemon's log has no leak summary: it did not exit normally")
        m = re.search(r"ERROR SUMMARY: (\d+) errors", text)
        lost = re.search(r"definitely lost: ([\d,]+) bytes", text)
        if m and int(m.group(1)):
            problems.append("process %s: %s memcheck errors:\n%s" % (pid, m.group(1), _excerpt(text)))
        elif lost and lost.group(1) != "0":
            problems.append("process %s: definitely lost %s bytes:\n%s" % (pid, lost.group(1),
                                                                           _excerpt(text)))
        for line in text.splitlines():
            if "unhandled amd64-linux syscall" in line:
                problems.append("process %s: %s" % (pid, line.strip("-= ")))
    return problems


def _excerpt(text, limit=6000):
    keep = [l for l in text.splitlines() if not re.match(r"==\d+== *$", l)
            and "Copyright" not in l and "rerun with" not in l]
    return "\n".join(keep)[-limit:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("SBX_BUILD", "build"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep-logs", action="store_true", help="keep valgrind's logs")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("valgrind smoke: needs root (the daemon creates namespaces and cgroups)")
        return 2
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind smoke: valgrind is not installed (scripts/install-deps.sh)")
        return 2
    binary = os.path.join(harness.ROOT, args.build, "sbxd-vg")
    if not os.path.exists(binary):
        print("valgrind smoke: %s is missing (make valgrind builds it)" % binary)
        return 2
    logdir = tempfile.mkdtemp(prefix="sbx-valgrind-")
    t0 = time.monotonic()
    d = Daemon(pool=1, listen="127.0.0.1:%d" % free_port(), max_sandboxes=16)
    d.args = [valgrind, "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=definite",
              "--errors-for-leak-kinds=definite", "--error-exitcode=99", "--track-origins=yes",
              "--num-callers=30", "--child-silent-after-fork=no",
              # No gdbserver: its FIFOs would be left in /tmp for each process.
              "--vgdb=no",
              # Exec'd children are traced (a front end the daemon would exec
              # of itself), but not sbx-init (argv[0] of the zygote): static,
              # from a memfd, and it becomes every sandbox.
              "--trace-children=yes", "--trace-children-skip-by-arg=sbx-init",
              "--suppressions=" + SUPP, "--log-file=" + os.path.join(logdir, "vg.%p.log"),
              binary] + d.args[1:]
    failures = []
    stats = soak.Stats()
    print("valgrind smoke: %s under memcheck, logs in %s" % (binary, logdir), flush=True)
    d.start()
    try:
        rng = random.Random(args.seed)
        key = d.new_key("vg")
        cleanup = soak.admin_delete(d)
        for k in (None, key):
            c = soak.Client(d, stats, k, "vg")
            for fn in SCENARIOS:
                if not soak.run_scenario(c, rng, fn, stats, cleanup):
                    failures.append("%s over %s failed" % (fn.__name__, c.transport))
            c.close()
        failures += e2b_paths(d, key)
        left = soak.delete_all(d)
        if left:
            failures.append("sandboxes left by the scenarios: %r" % left)
        soak.wait_idle(d, 1)
    except Exception as e:
        failures.append("smoke driver: %r" % e)
    finally:
        try:
            soak.delete_all(d)
        except Exception as e:
            failures.append("final delete: %r" % e)
        rc = d.stop(timeout=180)
        daemon_log = d.read_log()
        problems = d.cleanup()
    elapsed = time.monotonic() - t0
    if rc != 0:
        failures.append("sbxd under valgrind exited with %r (99: memcheck errors)" % rc)
    failures += ["after the daemon stopped: " + p for p in problems]
    failures += check_logs(logdir, d.proc.pid)
    soak.print_stats(stats, elapsed)
    if stats.error_count():
        failures.append("%d failed operations" % stats.error_count())
    print("valgrind smoke: %.0f s" % elapsed)
    if failures:
        print("\nVALGRIND SMOKE FAILED:")
        for f in failures:
            print("  - " + f)
        print("daemon log (tail):\n" + "\n".join(daemon_log.splitlines()[-20:]))
        print("valgrind logs kept in " + logdir)
        return 1
    if args.keep_logs:
        print("valgrind logs kept in " + logdir)
    else:
        shutil.rmtree(logdir, ignore_errors=True)
    print("valgrind smoke passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
