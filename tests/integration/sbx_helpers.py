"""Helpers shared by the API and CLI suites (not a test module).

Raw HTTP for what http.client cannot do (a body the daemon refuses before
reading it, a client that hangs up mid-request), NDJSON streams read line
by line, and polling with generous deadlines (never a timing assertion).
"""
import json
import os
import socket
import time
from urllib.parse import quote, urlencode

from harness import SLOW, UnixHTTPConnection

MIB = 1024 * 1024


def wait_until(pred, timeout=30.0, interval=0.05, what="condition"):
    """Poll pred() until it returns something truthy (a generous bound, never
    a timing assertion); returns its value or raises AssertionError. In an
    emulated guest the bound is SLOW times longer."""
    timeout *= SLOW
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def q(**params):
    return urlencode(params, quote_via=quote)


def sandbox_ids(d):
    r = d.api("GET", "/v1/sandboxes")
    assert r.status == 200, r
    return [sb["id"] for sb in r.json()["sandboxes"]]


def raw_unix(d, head, body=b"", timeout=30, strict=False, tcp=False):
    """Send head (bytes, the request line and headers), then body, over the
    unix socket (or the TCP listener); return (status, headers, body).
    Unless strict, tolerates the daemon closing the connection before it
    has read the whole body (as it may for a body over its limit)."""
    if tcp:
        host, port = d.listen.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=timeout)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(d.socket_path)
    return _raw_exchange(s, head, body, strict)


def _raw_exchange(s, head, body, strict):
    data = b""
    try:
        s.sendall(head)
        try:
            for i in range(0, len(body), 65536):
                s.sendall(body[i:i + 65536])
        except (BrokenPipeError, ConnectionResetError):
            if strict:
                raise
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if _complete(data):
                    break
        except ConnectionResetError:
            if strict:
                raise
    finally:
        s.close()
    return _parse_response(data)


def _complete(data):
    if b"\r\n\r\n" not in data:
        return False
    head, rest = data.split(b"\r\n\r\n", 1)
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(rest) >= int(v.strip())
    return False


def _parse_response(data):
    if b"\r\n\r\n" not in data:
        raise AssertionError("no complete HTTP response: %r" % data[:200])
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = body[:int(headers["content-length"])]
    return status, headers, body


def open_stream(d, method, path, body=None, timeout=60):
    """Start a request and return (conn, resp) with the headers read; the
    caller reads resp line by line (NDJSON) and closes conn."""
    conn = UnixHTTPConnection(d.socket_path, timeout=timeout)
    conn.request(method, path, body=json.dumps(body) if body is not None else None)
    resp = conn.getresponse()
    return conn, resp


def read_event(resp):
    """The next NDJSON event of a streaming response, or None at the end."""
    line = resp.readline()
    if not line:
        return None
    return json.loads(line)


def parse_ndjson(body):
    return [json.loads(l) for l in body.decode().splitlines() if l.strip()]


def error_body_ok(testcase, resp, status, kind=None):
    """assertError for a (status, headers, body) triple from raw_unix."""
    st, headers, body = resp
    testcase.assertEqual(st, status, resp)
    obj = json.loads(body)
    testcase.assertEqual(obj["code"], status, obj)
    testcase.assertTrue(obj["message"])
    if kind:
        testcase.assertEqual(obj["error"], kind, obj)
    return obj


def children_of(pid):
    """(pid, state, cmdline) of every process whose parent is pid: state is
    /proc's one letter ("Z" for a zombie), cmdline the raw NUL-separated
    bytes. A process that ends while it is read is left out."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append((int(p), fields[0], cmd))
    return out


def run_with_tty_stderr(argv, env, timeout=600):
    """Run argv with stderr on a terminal (a pty) and stdout a pipe, as a
    user at a terminal would (what sbx shows only there). Returns the
    exit status, stdout, and what the terminal showed."""
    import pty
    import subprocess
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, env=env)
    finally:
        os.close(slave)
    try:
        out, _ = p.communicate(timeout=timeout)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    return p.returncode, out, shown

