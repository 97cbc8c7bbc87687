#!/usr/bin/python3
"""Egress proxy benchmark: a request through the proxy against a direct one.

Side by side on loopback: an HTTP server on the host's 127.0.0.1; the same
Python client (urllib, one connection per request, as the proxy does)
fetches from the host directly, and from inside a sandbox through its
proxy (127.0.0.1:3128 -> init -> front end -> egress process -> upstream).
The daemon runs with --egress-allow-private (the upstream is loopback).
Reports the median latency of a small request and the throughput of a
large download, each way.

    SBX_BUILD=build /usr/bin/python3 bench/egress.py [--small N] [--mb M]
"""
import argparse
import http.server
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from harness import Daemon  # noqa: E402

BLOCK = b"x" * (1 << 20)

CLIENT = r'''
import json, sys, time, urllib.request
url, small, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proxy = sys.argv[4] if len(sys.argv) > 4 else None
handlers = [urllib.request.ProxyHandler({"http": proxy} if proxy else {})]
opener = urllib.request.build_opener(*handlers)
lat = []
for _ in range(small):
    t = time.perf_counter()
    opener.open(url + "/small").read()
    lat.append(time.perf_counter() - t)
t = time.perf_counter()
n = 0
with opener.open(url + "/big/%d" % mb) as r:
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
dt = time.perf_counter() - t
lat.sort()
print(json.dumps({"p50_ms": lat[len(lat) // 2] * 1000, "p90_ms": lat[int(len(lat) * 0.9)] * 1000,
                  "mb_per_s": n / dt / (1 << 20), "bytes": n}))
'''


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=200)
    ap.add_argument("--mb", type=int, default=256)
    a = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % srv.server_address[1]
    d = Daemon(pool=1, extra=("--egress-allow-private",)).start()
    try:
        import subprocess
        direct = json.loads(subprocess.run(
            [sys.executable, "-c", CLIENT, url, str(a.small), str(a.mb)],
            capture_output=True, check=True, text=True).stdout)
        sid = d.create(network={"allow": ["127.0.0.1"]}, cpus=2, memory="1G")
        r = d.exec(sid, argv=["python3", "-c", CLIENT, url, str(a.small), str(a.mb),
                              "http://127.0.0.1:3128"], timeout="300s",
                   # NO_PROXY names 127.0.0.1, the upstream here.
                   env={"NO_PROXY": "", "no_proxy": ""})
        if r["exit_code"] != 0:
            raise SystemExit(r)
        proxied = json.loads(r["stdout"])
        print("%-28s %10s %10s %12s" % ("", "p50 ms", "p90 ms", "MiB/s"))
        for name, v in (("direct (host)", direct), ("through the proxy (sandbox)", proxied)):
            print("%-28s %10.3f %10.3f %12.1f" % (name, v["p50_ms"], v["p90_ms"], v["mb_per_s"]))
        print("added latency (p50): %.3f ms; throughput ratio: %.2f"
              % (proxied["p50_ms"] - direct["p50_ms"], proxied["mb_per_s"] / direct["mb_per_s"]))
        d.kill(sid)
    finally:
        d.stop()
        problems = d.cleanup()
        srv.shutdown()
        if problems:
            raise SystemExit(problems)


if __name__ == "__main__":
    main()
