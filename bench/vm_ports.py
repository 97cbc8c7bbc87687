#!/usr/bin/python3
"""The port proxy into a microVM sandbox beside a namespace sandbox
(docs/vm.md "Port proxy", docs/benchmarks.md).

One daemon, one sandbox of each engine, the same server in both
(tests/integration/test_ports.py's, python3 as the sandbox's user on
127.0.0.1:8100). The client is on the host: `GET /v1/sandboxes/ID/ports/
8100/` over the daemon's unix socket, a new connection each (so each
request is one CONNECT to the sandbox: init's connect, or the relay's
stream to the agent). Figures:

  - per request: N requests in turn, each timed, median (min .. p90);
  - throughput: an M MiB answer (`/big?n=`), the best of three.

    SBX_BUILD=build /usr/bin/python3 bench/vm_ports.py [N] [M]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import test_ports as tp  # noqa: E402
from harness import Daemon, UnixHTTPConnection  # noqa: E402


def get(d, sid, rest):
    c = UnixHTTPConnection(d.socket_path, timeout=120)
    try:
        c.request("GET", "/v1/sandboxes/%s/ports/%d%s" % (sid, tp.ECHO, rest))
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, (r.status, body[:200])
        return body
    finally:
        c.close()


def measure(d, sid, n, mb):
    for _ in range(5):
        get(d, sid, "/warm")
    per = []
    for _ in range(n):
        t = time.monotonic()
        get(d, sid, "/small")
        per.append((time.monotonic() - t) * 1000)
    per.sort()
    tput = []
    for _ in range(3):
        t = time.monotonic()
        body = get(d, sid, "/big?n=%d" % (mb << 20))
        tput.append(mb / (time.monotonic() - t))
        assert len(body) == mb << 20
    return statistics.median(per), per[0], per[int(len(per) * 0.9)], max(tput)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    mb = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    d = Daemon(pool=0).start()
    rows = []
    try:
        for name, iso in (("namespace", None), ("vm (TCG)", "vm")):
            body = {"memory": "256M", "disk": "64M"}
            if iso:
                body["isolation"] = iso
            r = d.api("POST", "/v1/sandboxes", body)
            assert r.status == 201, r
            sid = r.json()["id"]
            tp.start_servers(d, sid, [("echo", tp.ECHO)])
            rows.append((name,) + measure(d, sid, n, mb))
            d.kill(sid)
    finally:
        d.stop()
        d.cleanup()
    print("engine      per request through the port proxy ms (median, min .. p90)   "
          "%d MiB answer MiB/s" % mb)
    for name, med, lo, p90, mbs in rows:
        print("%-10s  %7.2f (%.2f .. %.2f)                                   %8.1f"
              % (name, med, lo, p90, mbs))


if __name__ == "__main__":
    main()
