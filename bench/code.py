#!/usr/bin/python3
"""Code interpreter benchmark (docs/benchmarks.md, issue 6): through sbx's
native API (unix socket, one request each) and, when Node and the SDK are
installed (tests/e2b), through @e2b/code-interpreter unchanged.

- first result on a new sandbox: create code-interpreter-v1 + run `1+1`
  until its result, the pool holding a warm one (the pool refills between
  rounds), and once without (a build and a server start);
- a new context, warm (forked from the zygote that imported numpy, pandas,
  matplotlib) and cold (a fresh interpreter importing them);
- a fork of a context that holds numpy and pandas state;
- the round trip of `1+1` in a context.

    SBX_BUILD=build /usr/bin/python3 bench/code.py [--rounds N] [--trips N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from harness import Daemon, free_port  # noqa: E402

TEMPLATE = "code-interpreter-v1"
# Between creates and forks: the time the spare takes to be forked again
# (tens of ms here). What is measured is the latency an agent sees, not a
# back-to-back rate (that is bounded by fork(2) of a ~110 MB process).
PAUSE = 0.3


def ms(xs):
    xs = sorted(xs)
    return {"median": round(statistics.median(xs) * 1000, 2),
            "p99": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1000, 2), "n": len(xs)}


def run(d, sid, code, **f):
    f["code"] = code
    r = d.api("POST", "/v1/sandboxes/%s/code" % sid, f)
    assert r.status == 200, r
    ev = [json.loads(x) for x in r.body.decode().splitlines()]
    assert ev[-1]["type"] == "end_of_execution", ev
    assert not any(e["type"] == "error" for e in ev), ev
    return ev


def wait_pool(d, n):
    for _ in range(1200):
        if d.api("GET", "/v1/info").json()["pool"] >= n:
            return
        time.sleep(0.05)
    raise RuntimeError("the pool did not refill")


def native(d, rounds, trips):
    out = {}
    # Once without a warm sandbox: the first code-interpreter create builds
    # one and starts its server (and tells the pool to keep one from then on).
    t = time.perf_counter()
    sid = d.create(template=TEMPLATE)
    run(d, sid, "1+1")
    out["first_result_unpooled_ms"] = round((time.perf_counter() - t) * 1000, 1)
    d.kill(sid)
    firsts = []
    for _ in range(rounds):
        wait_pool(d, 2)  # one base, one code-interpreter
        time.sleep(0.5)  # let the refill's own work settle
        t = time.perf_counter()
        sid = d.create(template=TEMPLATE)
        run(d, sid, "1+1")
        firsts.append(time.perf_counter() - t)
        d.kill(sid)
    out["first_result_new_sandbox"] = ms(firsts)
    wait_pool(d, 2)
    sid = d.create(template=TEMPLATE, timeout="30m")
    warm, cold, forks, trip = [], [], [], []
    for _ in range(max(rounds, 20)):
        time.sleep(PAUSE)
        t = time.perf_counter()
        r = d.api("POST", "/v1/sandboxes/%s/contexts" % sid, {})
        warm.append(time.perf_counter() - t)
        assert r.status == 201, r
        d.api("DELETE", "/v1/sandboxes/%s/contexts/%s" % (sid, r.json()["id"]))
    for _ in range(3):
        t = time.perf_counter()
        r = d.api("POST", "/v1/sandboxes/%s/contexts" % sid, {"warm": False})
        cold.append(time.perf_counter() - t)
        assert r.status == 201, r
        d.api("DELETE", "/v1/sandboxes/%s/contexts/%s" % (sid, r.json()["id"]))
    parent = d.api("POST", "/v1/sandboxes/%s/contexts" % sid, {}).json()["id"]
    run(d, sid, "import numpy as np, pandas as pd\narr = np.arange(1_000_000)\n"
        "df = pd.DataFrame({'a': range(10000)})", context=parent)
    first_fork = None
    for _ in range(max(rounds, 20)):
        time.sleep(PAUSE)
        t = time.perf_counter()
        r = d.api("POST", "/v1/sandboxes/%s/contexts/%s/fork" % (sid, parent))
        if first_fork is None:
            # The first fork of a context forks it then and there; from then
            # on it keeps a spare.
            first_fork = round((time.perf_counter() - t) * 1000, 1)
        forks.append(time.perf_counter() - t)
        assert r.status == 201, r
        d.api("DELETE", "/v1/sandboxes/%s/contexts/%s" % (sid, r.json()["id"]))
    for _ in range(10):
        run(d, sid, "1+1", context=parent)
    for _ in range(trips):
        t = time.perf_counter()
        run(d, sid, "1+1", context=parent)
        trip.append(time.perf_counter() - t)
    out.update(new_context_warm=ms(warm), new_context_cold=ms(cold), first_fork_ms=first_fork,
               fork=ms(forks),
               round_trip_1plus1=ms(trip))
    d.kill(sid)
    return out


def sdk(d, port, rounds, trips):
    node = shutil.which("node")
    if node is None or not os.path.isdir(os.path.join(ROOT, "tests", "e2b", "node_modules", "@e2b")):
        return None
    key = d.new_key("bench")
    env = dict(os.environ, E2B_API_URL="http://127.0.0.1:%d" % port,
               E2B_SANDBOX_URL="http://127.0.0.1:%d" % port, E2B_API_KEY=key)
    for k in ("E2B_DOMAIN", "E2B_DEBUG", "E2B_ACCESS_TOKEN"):
        env.pop(k, None)
    wait_pool(d, 2)
    r = subprocess.run([node, "bench_code.mjs", "first", str(rounds)],
                       cwd=os.path.join(ROOT, "tests", "e2b"), env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    firsts = [x / 1000 for x in json.loads(r.stdout.strip().splitlines()[-1])["first"]]
    wait_pool(d, 2)
    r = subprocess.run([node, "bench_code.mjs", "rest", str(trips)],
                       cwd=os.path.join(ROOT, "tests", "e2b"), env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["first_result_new_sandbox"] = ms(firsts)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--trips", type=int, default=300)
    args = ap.parse_args()
    port = free_port()
    d = Daemon(pool=1, listen="127.0.0.1:%d" % port).start()
    try:
        res = {"native": native(d, args.rounds, args.trips)}
        res["sdk"] = sdk(d, port, args.rounds, args.trips)
    finally:
        d.stop()
        problems = d.cleanup()
        if problems:
            print("leftovers:", problems, file=sys.stderr)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
