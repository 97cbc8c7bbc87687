#!/usr/bin/python3
"""Egress benchmark, HTTPS: direct, through the proxy's byte tunnel (a host
without credential rules), and through its TLS-terminating path (a host
with rules: the proxy ends the client's TLS, adds the rule's header with a
secret, and opens its own verified TLS connection upstream).

Side by side on loopback: an HTTPS server on the host's 127.0.0.1 with a
certificate for `localhost` from a CA made here; the same Python client
(urllib, a new connection and TLS handshake per request) fetches from the
host directly, and from inside a sandbox through its proxy. The daemon runs
with --egress-allow-private and --egress-upstream-ca (the test CA).

    SBX_BUILD=build /usr/bin/python3 bench/egress_tls.py [--small N] [--mb M]
"""
import argparse
import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from harness import Daemon  # noqa: E402
from test_credentials import make_ca, make_leaf  # noqa: E402

BLOCK = b"x" * (1 << 20)

CLIENT = r'''
import json, ssl, sys, time, urllib.request
url, small, mb, cafile = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
proxy = sys.argv[5] if len(sys.argv) > 5 else None
ctx = ssl.create_default_context(cafile=cafile)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": proxy} if proxy else {}),
                                     urllib.request.HTTPSHandler(context=ctx))
lat = []
for _ in range(small):
    t = time.perf_counter()
    body = opener.open(url + "/small").read()
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
                  "mb_per_s": n / dt / (1 << 20), "bytes": n, "last": body.decode()}))
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
        # Whether the rule's header came (not its value).
        body = b"header" if self.headers.get("X-Bench") else b"plain"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=200)
    ap.add_argument("--mb", type=int, default=128)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-tls-")
    ca_key, ca_crt = make_ca(tmp, "bench")
    key, crt = make_leaf(tmp, ca_key, ca_crt, "leaf", "localhost")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = "https://localhost:%d" % srv.server_address[1]
    d = Daemon(pool=1, extra=("--egress-allow-private", "--egress-upstream-ca", ca_crt)).start()
    results = []
    try:
        direct = json.loads(subprocess.run(
            [sys.executable, "-c", CLIENT, url, str(a.small), str(a.mb), ca_crt],
            capture_output=True, check=True, text=True).stdout)
        results.append(("direct (host)", direct))
        r = d.api("POST", "/v1/secrets", {"name": "BENCH", "value": "bench-" + os.urandom(8).hex()})
        assert r.status == 201, r
        with open(ca_crt, "rb") as f:
            test_ca = f.read()
        for name, net, cafile in (
                ("proxy, tunnel (no rules)", {"allow": ["localhost"]}, "/tmp/ca.crt"),
                ("proxy, TLS terminated", {"allow": ["localhost"], "rules": {"localhost": [
                    {"headers": {"X-Bench": "${secret:BENCH}"}}]}}, "/etc/ssl/sbx-ca-bundle.crt")):
            sid = d.create(network=net, cpus=2, memory="1G")
            d.upload(sid, "/tmp/ca.crt", test_ca)
            r = d.exec(sid, argv=["python3", "-c", CLIENT, url, str(a.small), str(a.mb), cafile,
                                  "http://127.0.0.1:3128"], timeout="300s",
                       env={"NO_PROXY": "", "no_proxy": ""})
            if r["exit_code"] != 0:
                raise SystemExit(r)
            results.append((name, json.loads(r["stdout"])))
            d.kill(sid)
        print("%-28s %10s %10s %12s  %s" % ("", "p50 ms", "p90 ms", "MiB/s", "upstream saw"))
        for name, v in results:
            print("%-28s %10.3f %10.3f %12.1f  %s" % (name, v["p50_ms"], v["p90_ms"],
                                                    v["mb_per_s"], v["last"]))
        base = results[0][1]["p50_ms"]
        for name, v in results[1:]:
            print("added latency (p50) %-24s %.3f ms" % (name + ":", v["p50_ms"] - base))
    finally:
        d.stop()
        problems = d.cleanup()
        srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
        if problems:
            raise SystemExit(problems)


if __name__ == "__main__":
    main()
