#!/usr/bin/python3
"""Egress from a microVM sandbox beside a namespace sandbox (docs/vm.md
"Egress", docs/benchmarks.md).

One daemon (--egress-allow-private: the upstream is an HTTP server on the
host's 127.0.0.1), one sandbox of each engine with `allow: 127.0.0.1`. The
same client in both, busybox's wget through the proxy (http_proxy): in the
namespace sandbox the host's /usr/bin/busybox, in the VM the initramfs's.
Times are taken on the host around one exec (a guest's clock under TCG
follows its instructions, not the wall):

  - per request: one exec of `wget -q -O /dev/null URL URL ...` (one
    process, N requests in turn, a connection each), minus one exec of the
    same with one URL, / (N - 1);
  - throughput: one exec of `wget -O /dev/null` of an M MiB body, minus an
    exec of `true`;
  - for scale, the same engine's stdout: one exec of `head -c 16 MiB
    /dev/zero` whose output comes back to the host (for a VM, over the same
    virtio-serial port as the streams), minus an exec of `true`.

    SBX_BUILD=build /usr/bin/python3 bench/vm_net.py [N] [M]
"""
import http.server
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Daemon  # noqa: E402

BLOCK = b"x" * (1 << 20)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/big/"):
            mb = int(self.path.split("/")[2])
            self.send_response(200)
            self.send_header("Content-Length", str(mb << 20))
            self.end_headers()
            for _ in range(mb):
                self.wfile.write(BLOCK)
            return
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def timed(d, sid, cmd):
    t = time.monotonic()
    res = d.sh(sid, cmd, timeout="600s")
    dt = time.monotonic() - t
    assert res["exit_code"] == 0, res
    return dt


def measure(d, sid, port, n, mb, rounds=3):
    url = "http://127.0.0.1:%d" % port
    per, tput, stdout = [], [], []
    for _ in range(rounds):
        many = timed(d, sid, "busybox wget -q -O /dev/null " + " ".join([url + "/small"] * n))
        one = timed(d, sid, "busybox wget -q -O /dev/null %s/small" % url)
        per.append((many - one) / (n - 1) * 1000)
        big = timed(d, sid, "busybox wget -q -O /dev/null %s/big/%d" % (url, mb))
        base = timed(d, sid, "true")
        tput.append(mb / max(big - base, 1e-6))
        out = timed(d, sid, "head -c 16777216 /dev/zero")
        stdout.append(16 / max(out - base, 1e-6))
    return (statistics.median(per), min(per), max(per), statistics.median(tput),
            statistics.median(stdout))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    mb = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    d = Daemon(pool=0, extra=("--egress-allow-private",)).start()
    rows = []
    try:
        for name, iso in (("namespace", None), ("vm (TCG)", "vm")):
            body = {"memory": "256M", "disk": "64M", "network": {"allow": ["127.0.0.1"]}}
            if iso:
                body["isolation"] = iso
            r = d.api("POST", "/v1/sandboxes", body)
            assert r.status == 201, r
            sid = r.json()["id"]
            rows.append((name,) + measure(d, sid, port, n, mb))
            d.kill(sid)
    finally:
        d.stop()
        d.cleanup()
        server.shutdown()
        server.server_close()
    print("engine      per request through the proxy ms (median, min..max)   %d MiB download MiB/s"
          "   16 MiB of stdout MiB/s" % mb)
    for name, med, lo, hi, mbs, out in rows:
        print("%-10s  %7.2f (%.2f .. %.2f)                                %8.1f             %8.1f"
              % (name, med, lo, hi, mbs, out))


if __name__ == "__main__":
    main()
