#!/usr/bin/python3
"""HTTPS with credential rules from a microVM sandbox beside a namespace
sandbox (docs/vm.md "Egress", docs/benchmarks.md).

One daemon (--egress-allow-private, --egress-upstream-ca: the upstream is
an HTTPS server on the host's 127.0.0.1 with a certificate for localhost
from a CA made here), a secret, one sandbox of each engine with the same
policy: `localhost` ruled (a header with the secret: the proxy terminates
TLS with sbx's CA, which the client trusts through CURL_CA_BUNDLE), and
`127.0.0.1` without rules (a CONNECT tunnel; the client is given the
upstream's CA); and the ruled host again with curl given sbx's certificate
alone (--cacert), which shows what the bundle costs. The client is curl, a new process, connection and
handshake per request. Times are taken on the host around one exec (a
guest's clock under TCG follows its instructions, not the wall): a shell
loop of N curls over HTTPS, minus the same loop of N curls of a file:// URL
(process start, the same in both), / N.

    SBX_BUILD=build /usr/bin/python3 bench/vm_creds.py [N] [ROUNDS]
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Daemon  # noqa: E402
from test_credentials import make_ca, make_leaf, tls_server  # noqa: E402

NO_PROXY_ENV = {"NO_PROXY": "", "no_proxy": ""}  # localhost goes through the proxy too


def timed(d, sid, cmd):
    t = time.monotonic()
    res = d.sh(sid, cmd, timeout="600s", env=NO_PROXY_ENV)
    dt = time.monotonic() - t
    assert res["exit_code"] == 0, res
    return dt


def loop(n, curl):
    return "for i in $(seq %d); do %s -o /dev/null || exit 1; done" % (n, curl)


def measure(d, sid, port, n, rounds):
    ruled = "curl -sSf https://localhost:%d/x" % port
    tunnel = "curl -sSf --cacert /tmp/up.crt https://127.0.0.1:%d/x" % port
    # The same ruled request trusting sbx's certificate alone: what parsing
    # the bundle (the image's 140-odd roots) costs each new process.
    ca_only = "curl -sSf --cacert /etc/ssl/sbx-ca.crt https://localhost:%d/x" % port
    base = "curl -sSf file:///etc/hostname"
    out = {"rules": [], "ca_only": [], "tunnel": []}
    for _ in range(rounds):
        b = timed(d, sid, loop(n, base))
        out["rules"].append((timed(d, sid, loop(n, ruled)) - b) / n * 1000)
        out["ca_only"].append((timed(d, sid, loop(n, ca_only)) - b) / n * 1000)
        out["tunnel"].append((timed(d, sid, loop(n, tunnel)) - b) / n * 1000)
    return {k: (statistics.median(v), min(v), max(v)) for k, v in out.items()}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    tmp = tempfile.mkdtemp(prefix="sbx-bench-creds-")
    ca_key, ca_crt = make_ca(tmp, "up")
    key, crt = make_leaf(tmp, ca_key, ca_crt, "leaf", "localhost")
    server = tls_server(key, crt)
    port = server.server_address[1]
    d = Daemon(pool=0, extra=("--egress-allow-private", "--egress-upstream-ca", ca_crt)).start()
    rows = []
    try:
        r = d.api("POST", "/v1/secrets", {"name": "TOKEN", "value": "bench-" + os.urandom(8).hex()})
        assert r.status == 201, r
        net = {"allow": ["localhost", "127.0.0.1"],
               "rules": {"localhost": [{"headers": {"Authorization": "Bearer ${secret:TOKEN}"}}]}}
        for name, iso in (("namespace", None), ("vm (TCG)", "vm")):
            body = {"memory": "256M", "disk": "64M", "network": net}
            if iso:
                body["isolation"] = iso
            r = d.api("POST", "/v1/sandboxes", body)
            assert r.status == 201, r
            sid = r.json()["id"]
            with open(ca_crt, "rb") as f:
                assert d.upload(sid, "/tmp/up.crt", f.read()).status == 201
            rows.append((name, measure(d, sid, port, n, rounds)))
            d.kill(sid)
    finally:
        d.stop()
        d.cleanup()
        server.shutdown()
        server.server_close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("engine      HTTPS request, curl, ms per request (median, min..max of %d rounds of %d)"
          % (rounds, n))
    print("            ruled host (TLS terminated)   the same, --cacert sbx-ca.crt   no rules (tunnel)")
    for name, m in rows:
        print("%-10s  %7.1f (%.1f .. %.1f)        %7.1f (%.1f .. %.1f)          %7.1f (%.1f .. %.1f)"
              % ((name,) + m["rules"] + m["ca_only"] + m["tunnel"]))


if __name__ == "__main__":
    main()
