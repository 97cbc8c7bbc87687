"""Helpers shared by the test_hostile_*.py suites: code that tries to break
out of a sandbox, and the probe (tests/probe/probe.c) that reports exact
errnos from inside.

The probe is uploaded to /tmp (1777), where both `user` and `root` (which
has no CAP_DAC_OVERRIDE) may run it.
"""
import os
import socket
import struct
import time
import uuid

from harness import PROBE, cgroup_hierarchies, processes_with_uid_in
from sbx_helpers import wait_until  # noqa: F401 (the hostile suites import it from here)

PROBE_PATH = "/tmp/probe"

_probe_bytes = None


def probe_bytes():
    global _probe_bytes
    if _probe_bytes is None:
        with open(PROBE, "rb") as f:
            _probe_bytes = f.read()
    return _probe_bytes


def put_probe(d, sid, path=PROBE_PATH):
    r = d.upload(sid, path, probe_bytes(), mode="0755")
    assert r.status == 201, r
    return path


def run_probe(tc, sid, *args, user=None, path=PROBE_PATH, timeout=None):
    """Run the probe with argv (no shell); it must exit 0; returns its lines."""
    fields = {"argv": [path] + [str(a) for a in args]}
    if user:
        fields["user"] = user
    if timeout:
        fields["timeout"] = timeout
    res = tc.d.exec(sid, **fields)
    tc.assertEqual(res["exit_code"], 0, res)
    tc.assertFalse(res["stdout_truncated"], res)
    return res["stdout"].splitlines()


def probe_one(tc, sid, *args, user=None):
    """Run a single-result probe subcommand; returns its RESULT word."""
    lines = run_probe(tc, sid, *args, user=user)
    tc.assertEqual(len(lines), 1, lines)
    return lines[0].rsplit(" ", 1)[1]


def canary_name(prefix="sbx-canary"):
    return "%s-%s" % (prefix, uuid.uuid4().hex)


def sh_ok(tc, sid, cmd, **fields):
    """A shell command that must exit 0; returns stdout."""
    res = tc.d.sh(sid, cmd, **fields)
    tc.assertEqual(res["exit_code"], 0, res)
    return res["stdout"]


def py(tc, sid, code, user=None, **fields):
    """Python inside the sandbox (the host's /usr/bin/python3, read-only)."""
    if user:
        fields["user"] = user
    res = tc.d.exec(sid, argv=["/usr/bin/python3", "-c", code], **fields)
    tc.assertEqual(res["exit_code"], 0, res)
    return res["stdout"]


def metrics(d, sid):
    r = d.api("GET", "/v1/sandboxes/%s/metrics" % sid)
    assert r.status == 200, r
    return r.json()


def sandbox_host_pids(d, sid):
    """Host pids of every process in the sandbox's cgroup (pids controller
    on v1, the unified tree on v2)."""
    for h in cgroup_hierarchies():
        if h.endswith("/pids") or h == "/sys/fs/cgroup":
            path = os.path.join(h, d.cgroup_parent, sid, "cgroup.procs")
            try:
                with open(path) as f:
                    return [int(x) for x in f.read().split()]
            except FileNotFoundError:
                return []
    raise AssertionError("no pids cgroup hierarchy")


def leftover_processes(d):
    return processes_with_uid_in(d.uid_base, d.uid_end)


def kill_and_check_gone(tc, d, sid):
    """Kill a sandbox through the API; then none of its host processes may
    remain (pids taken from its cgroup before the kill) and its cgroup
    directories are gone (invariant 7)."""
    pids = set(sandbox_host_pids(d, sid))
    tc.assertTrue(pids, "sandbox %s has no processes in its cgroup" % sid)
    r = d.kill(sid)
    tc.assertEqual(r.status, 204, r)

    def gone():
        return not [p for p in leftover_processes(d) if p[0] in pids]
    try:
        wait_until(gone, timeout=10, what="sandbox processes to disappear")
    except AssertionError:
        tc.fail("processes of %s left on the host: %r"
                % (sid, [p for p in leftover_processes(d) if p[0] in pids]))
    for h in cgroup_hierarchies():
        tc.assertFalse(os.path.exists(os.path.join(h, d.cgroup_parent, sid)), h)
    return pids


def host_ipv4_addrs():
    """The host's non-loopback IPv4 addresses (SIOCGIFADDR per interface)."""
    import fcntl
    addrs = []
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            req = struct.pack("256s", name.encode()[:15])
            try:
                res = fcntl.ioctl(s.fileno(), 0x8915, req)  # SIOCGIFADDR
            except OSError:
                continue
            ip = socket.inet_ntoa(res[20:24])
            if not ip.startswith("127."):
                addrs.append(ip)
    finally:
        s.close()
    return addrs


def host_ipv6_addrs():
    """Global non-loopback IPv6 addresses (link-local needs a scope id)."""
    addrs = []
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                hexaddr, _, _, scope, _, name = line.split()
                if name == "lo" or scope != "00":
                    continue
                addrs.append(socket.inet_ntop(socket.AF_INET6, bytes.fromhex(hexaddr)))
    except FileNotFoundError:
        pass
    return addrs


def put_in_one_write(d, path, data):
    """PUT with headers and body sent in one write on the unix socket."""
    import http.client
    from harness import Response
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(d.socket_path)
    try:
        s.sendall(b"PUT %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % (path.encode(), len(data)) + data)
        resp = http.client.HTTPResponse(s)
        resp.begin()
        body = resp.read()
        return Response(resp.status, dict(resp.getheaders()), body)
    finally:
        s.close()
