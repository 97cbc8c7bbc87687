"""Terminals (`pty`) on a microVM sandbox beside a namespace sandbox
(docs/vm.md "Terminals", docs/benchmarks.md).

One daemon, one sandbox of each engine. Figures, each over N rounds,
median (min .. p90):

  - create to first output: POST .../processes with a terminal running
    `echo`, then GET .../attach until its line arrives (the terminal is
    made, the command starts, its output comes back through the master);
  - input round trip: a `cat` on a terminal, one line written through the
    stdin route until its copy is read back on an attach stream that stays
    open (the terminal's echo and cat's own copy).

    SBX_BUILD=build /usr/bin/python3 bench/vm_pty.py [N]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Daemon  # noqa: E402
from sbx_helpers import open_stream, read_event  # noqa: E402


def start(d, sid, argv):
    r = d.api("POST", "/v1/sandboxes/%s/processes" % sid,
              {"argv": argv, "pty": {"cols": 80, "rows": 24}})
    assert r.status == 201, r
    return r.json()["pid"]


def read_until(resp, want):
    text = ""
    while want not in text:
        ev = read_event(resp)
        assert ev is not None, text
        if ev["type"] == "stdout":
            text += ev["data"]
    return text


def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[0], xs[int(len(xs) * 0.9)]


def measure(d, sid, n):
    first = []
    for i in range(n + 2):
        t = time.monotonic()
        pid = start(d, sid, ["echo", "out-%d" % i])
        conn, resp = open_stream(d, "GET", "/v1/sandboxes/%s/processes/%d/attach" % (sid, pid))
        try:
            read_until(resp, "out-%d" % i)
        finally:
            conn.close()
        if i >= 2:  # two to warm up
            first.append((time.monotonic() - t) * 1000)
    pid = start(d, sid, ["cat"])
    conn, resp = open_stream(d, "GET", "/v1/sandboxes/%s/processes/%d/attach" % (sid, pid))
    rtt = []
    try:
        for i in range(n + 2):
            line = "line-%d\n" % i
            t = time.monotonic()
            r = d.api("POST", "/v1/sandboxes/%s/processes/%d/stdin" % (sid, pid),
                      line.encode(), raw=True)
            assert r.status == 204, r
            read_until(resp, "line-%d\r\nline-%d\r\n" % (i, i))
            if i >= 2:
                rtt.append((time.monotonic() - t) * 1000)
    finally:
        conn.close()
    d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, pid), {"signal": "SIGKILL"})
    return stats(first), stats(rtt)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
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
            rows.append((name,) + measure(d, sid, n))
            d.kill(sid)
    finally:
        d.stop()
        d.cleanup()
    print("engine      pty create to first output ms        input round trip ms   (median, min .. p90; N=%d)" % n)
    for name, (a, al, ap), (b, bl, bp) in rows:
        print("%-10s  %7.1f (%.1f .. %.1f)            %7.1f (%.1f .. %.1f)" % (name, a, al, ap, b, bl, bp))


if __name__ == "__main__":
    main()
