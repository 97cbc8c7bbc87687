"""Credentials: secrets per tenant, rules that put them into request headers
on the way out, placeholders the proxy swaps (docs/egress.md, Credentials).

Upstream servers run on the host's 127.0.0.1; the sandbox names the ruled
one `localhost` (rules match names) and the other `127.0.0.1` (no rule), so
the daemon runs with --egress-allow-private. Checked:

- the secrets API: create, list (names, never values), delete; bad names,
  values (too long, CR/LF, NUL, control bytes), duplicates: 400/409, and
  nothing changes; the CLI reads a value from stdin or a file, never argv;
- bad rules (unknown secret, more than 10 domains, bad or reserved header
  names, bad ${...}) are 400 and change nothing; secrets are per tenant;
- the header arrives at the upstream with the real secret (plain HTTP);
  a client's header of the same name is replaced;
- a placeholder is swapped for the ruled host and sent verbatim to any
  other host;
- a deleted secret makes the ruled host a 502 naming it, never a request
  without the credential;
- the secret appears nowhere in the sandbox (environment of every
  process, its files, the memory of every process read from the host), in
  any API response, or in the audit log.
"""
import hashlib
import http.server
import json
import os
import re
import subprocess
import threading
import unittest

from harness import DaemonTest
from test_restart import RestartTest

def digest(v):
    return hashlib.sha256(v.encode("latin-1")).hexdigest()


SECRET = "sk-live-" + os.urandom(12).hex()
OTHER_SECRET = "tok-" + os.urandom(12).hex()

CLIENT = r'''
import json, socket, sys
url, host = sys.argv[1], sys.argv[2]
extra = sys.argv[3] if len(sys.argv) > 3 else ""
lines = "".join(l + "\r\n" for l in extra.split("|") if l)
req = "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (url, host, lines)
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(req.encode())
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
head, _, body = data.partition(b"\r\n\r\n")
print(json.dumps({"status": int(head.split(b" ")[1]), "body": body.decode("latin-1")}))
'''


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen = []

    def do_GET(self):
        # What arrived stays here; the sandbox learns only digests (an echo
        # of the secret would put it into the sandbox's memory).
        Upstream.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.dumps({"headers": {k.lower(): digest(v) for k, v in self.headers.items()}})
        body = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class CredsBase(DaemonTest):
    pool = 1
    listen = True
    extra_args = ("--egress-allow-private",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.up = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        cls.up.daemon_threads = True
        threading.Thread(target=cls.up.serve_forever, daemon=True).start()
        cls.port = cls.up.server_address[1]
        r = cls.d.api("POST", "/v1/secrets", {"name": "OPENAI", "value": SECRET,
                                               "description": "the test key"})
        assert r.status == 201, r

    @classmethod
    def tearDownClass(cls):
        cls.up.shutdown()
        cls.up.server_close()
        super().tearDownClass()

    def network(self, **extra):
        n = {"allow": ["localhost", "127.0.0.1"],
             "rules": {"localhost": [{"headers": {"Authorization": "Bearer ${secret:OPENAI}",
                                                  "X-Static": "yes"},
                                      "placeholders": ["OPENAI"]}]},
             "secrets_env": {"OPENAI_API_KEY": "OPENAI"}}
        n.update(extra)
        return n

    def box(self, network=None):
        r = self.d.api("POST", "/v1/sandboxes", {"network": network or self.network()})
        self.assertEqual(r.status, 201, r)
        self.assertNotIn(SECRET.encode(), r.body)
        sid = r.json()["id"]
        r = self.d.upload(sid, "/tmp/client.py", CLIENT.encode())
        self.assertEqual(r.status, 201, r)
        return sid, r

    def fetch(self, sid, host, extra=""):
        hostport = "%s:%d" % (host, self.port)
        r = self.d.exec(sid, argv=["python3", "/tmp/client.py", "http://%s/x" % hostport,
                                   hostport, extra], timeout="60s")
        self.assertEqual(r["exit_code"], 0, r)
        return json.loads(r["stdout"])


class TestSecretsAPI(CredsBase):
    def test_list_shows_names_never_values(self):
        r = self.d.api("GET", "/v1/secrets")
        self.assertEqual(r.status, 200, r)
        names = [s["name"] for s in r.json()["secrets"]]
        self.assertIn("OPENAI", names)
        self.assertNotIn(SECRET.encode(), r.body)
        s = [s for s in r.json()["secrets"] if s["name"] == "OPENAI"][0]
        self.assertEqual(set(s), {"name", "description", "created_at"})
        self.assertEqual(s["description"], "the test key")

    def test_bad_secrets_are_400_and_change_nothing(self):
        before = self.d.api("GET", "/v1/secrets").json()
        cases = [
            ({"name": "X1", "value": "a" * 4097}, "at most 4096"),
            ({"name": "X2", "value": "abc\r\nX-Evil: 1"}, "CR or LF"),
            ({"name": "X3", "value": "abc\ndef"}, "CR or LF"),
            ({"name": "X4", "value": "a\x01b"}, "control byte"),
            ({"name": "X5", "value": ""}, "empty"),
            ({"name": "bad-name", "value": "v"}, "not a secret name"),
            ({"name": "1ABC", "value": "v"}, "not a secret name"),
            ({"name": "A" * 65, "value": "v"}, "not a secret name"),
            ({"name": "X6"}, "value is required"),
            ({"value": "v"}, "name is required"),
            ({"name": "X7", "value": "v", "extra": 1}, "extra"),
        ]
        for body, text in cases:
            r = self.d.api("POST", "/v1/secrets", body)
            err = self.assertError(r, 400)
            self.assertIn(text, err["message"], (body, err))
        r = self.d.api("POST", "/v1/secrets", '{"name": "X8", "value": "a\\u0000b"}')
        self.assertError(r, 400)
        r = self.d.api("POST", "/v1/secrets", {"name": "OPENAI", "value": "other"})
        err = self.assertError(r, 409)
        self.assertIn("already exists", err["message"])
        self.assertEqual(self.d.api("GET", "/v1/secrets").json(), before)

    def test_delete(self):
        r = self.d.api("POST", "/v1/secrets", {"name": "TEMP", "value": "v1"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.d.api("DELETE", "/v1/secrets/TEMP").status, 204)
        self.assertError(self.d.api("DELETE", "/v1/secrets/TEMP"), 404)
        self.assertError(self.d.api("DELETE", "/v1/secrets/bad-name"), 400)

    def test_cli(self):
        p = self.d.sbx("secret", "create", "CLI_ONE", input=b"from-stdin\n")
        self.assertEqual(p.returncode, 0, p)
        path = os.path.join(self.d.state, "..", "creds-value-%d" % os.getpid())
        with open(path, "w") as f:
            f.write("from-file")
        try:
            p = self.d.sbx("secret", "create", "CLI_TWO", "--value-file", path,
                           "--description", "two")
            self.assertEqual(p.returncode, 0, p)
        finally:
            os.unlink(path)
        p = self.d.sbx("secret", "create", "CLI_THREE", "--value", "x")
        self.assertEqual(p.returncode, 2, p)
        self.assertIn(b"never from the command line", p.stderr)
        p = self.d.sbx("secret", "ls")
        self.assertEqual(p.returncode, 0, p)
        self.assertIn(b"CLI_ONE", p.stdout)
        self.assertIn(b"CLI_TWO", p.stdout)
        self.assertNotIn(b"from-stdin", p.stdout)
        self.assertNotIn(b"from-file", p.stdout)
        p = self.d.sbx("secret", "create", "CLI_ONE", input=b"again")
        self.assertEqual(p.returncode, 1, p)
        self.assertIn(b"already exists", p.stderr)
        self.assertEqual(self.d.sbx("secret", "rm", "CLI_ONE", "CLI_TWO").returncode, 0)
        p = self.d.sbx("secret", "ls", "--json")
        self.assertNotIn("CLI_ONE", [s["name"] for s in json.loads(p.stdout)])

    def test_secrets_are_per_tenant(self):
        key = self.d.new_key("other")
        r = self.d.tcp("GET", "/v1/secrets", key=key)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["secrets"], [])
        r = self.d.tcp("POST", "/v1/sandboxes", {"network": self.network()}, key=key)
        err = self.assertError(r, 400)
        self.assertIn("secret `OPENAI` does not exist", err["message"])
        self.assertError(self.d.tcp("DELETE", "/v1/secrets/OPENAI", key=key), 404)
        # Its own secret of the same name is another secret.
        r = self.d.tcp("POST", "/v1/secrets", {"name": "OPENAI", "value": OTHER_SECRET}, key=key)
        self.assertEqual(r.status, 201, r)
        self.assertIn("OPENAI", [s["name"] for s in self.d.api("GET", "/v1/secrets").json()["secrets"]])


class TestRules(CredsBase):
    def test_bad_rules_are_400_and_change_nothing(self):
        r = self.d.api("POST", "/v1/secrets", {"name": "BIG", "value": "b" * 4096})
        self.assertIn(r.status, (201, 409), r)
        sid, _ = self.box()
        before = self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]
        cases = [
            ({"rules": {"localhost": [{"headers": {"A": "${secret:NOPE}"}}]}}, "secret `NOPE` does not exist"),
            ({"rules": {"h%d.example.com" % i: [{"headers": {"A": "b"}}] for i in range(11)}}, "at most 10"),
            ({"rules": {"localhost": [{"headers": {"Bad Name": "b"}}]}}, "not a valid header name"),
            ({"rules": {"localhost": [{"headers": {"Host": "b"}}]}}, "may not set"),
            ({"rules": {"localhost": [{"headers": {"Content-Length": "1"}}]}}, "may not set"),
            ({"rules": {"localhost": [{"headers": {"A": "x\r\nB: y"}}]}}, "control byte"),
            ({"rules": {"localhost": [{"headers": {"A": "${env:HOME}"}}]}}, "${secret:NAME}"),
            ({"rules": {"localhost": [{"headers": {"A": "${secret:bad-name}"}}]}}, "not a secret name"),
            ({"rules": {"10.0.0.0/8": [{"headers": {"A": "b"}}]}}, "host name or *.domain"),
            ({"rules": {"localhost": [{"transform": {}}]}}, "unknown field"),
            ({"rules": {"localhost": []}}, "1 to 4 rules"),
            ({"rules": {"localhost": [{"placeholders": ["NOPE"]}]}}, "secret `NOPE` does not exist"),
            ({"secrets_env": {"K": "NOPE"}}, "secret `NOPE` does not exist"),
            ({"rules": {"localhost": [{"headers": {"H%d" % i: "${secret:BIG}" for i in range(9)}}]}},
             "at most 32768 are allowed"),
            ({"secrets_env": {"BAD-VAR": "OPENAI"}}, "not an environment variable name"),
        ]
        for extra, text in cases:
            r = self.d.api("PUT", "/v1/sandboxes/%s/network" % sid, self.network(**extra))
            err = self.assertError(r, 400)
            self.assertIn(text, err["message"], (extra, err))
            r = self.d.api("POST", "/v1/sandboxes", {"network": self.network(**extra)})
            self.assertError(r, 400)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"], before)

    def test_header_injected_and_placeholder_swapped_only_for_ruled_host(self):
        sid, _ = self.box()
        net = self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]
        ph = net["secrets_env"]["OPENAI_API_KEY"]["placeholder"]
        self.assertRegex(ph, r"^sbx_placeholder_[0-9a-f]{32}$")
        env = self.d.exec(sid, argv=["sh", "-c", "echo $OPENAI_API_KEY"])["stdout"].strip()
        self.assertEqual(env, ph)
        # The ruled host: the rule's headers (the client's Authorization
        # replaced), the placeholder swapped in another header.
        out = self.fetch(sid, "localhost", "Authorization: Bearer mine|X-Key: k=%s;" % ph)
        self.assertEqual(out["status"], 200, out)
        h = json.loads(out["body"])["headers"]
        self.assertEqual(h["authorization"], digest("Bearer " + SECRET))
        self.assertEqual(h["x-static"], digest("yes"))
        self.assertEqual(h["x-key"], digest("k=%s;" % SECRET))
        self.assertEqual(Upstream.seen[-1]["authorization"], "Bearer " + SECRET)
        # Another host: nothing injected, the placeholder verbatim.
        out = self.fetch(sid, "127.0.0.1", "X-Key: %s" % ph)
        self.assertEqual(out["status"], 200, out)
        h = json.loads(out["body"])["headers"]
        self.assertNotIn("authorization", h)
        self.assertEqual(h["x-key"], digest(ph))
        self.assertEqual(Upstream.seen[-1]["x-key"], ph)
        # A policy change keeps the placeholder of the same binding.
        r = self.d.api("PUT", "/v1/sandboxes/%s/network" % sid, self.network())
        self.assertEqual(r.status, 200, r)
        self.assertNotIn(SECRET.encode(), r.body)
        self.assertEqual(r.json()["network"]["secrets_env"]["OPENAI_API_KEY"]["placeholder"], ph)

    def test_cli_net_keeps_rules(self):
        sid, _ = self.box()
        before = self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]
        p = self.d.sbx("net", sid, "allow:localhost")
        self.assertEqual(p.returncode, 0, p)
        self.assertIn(b"rules for: localhost", p.stdout)
        self.assertIn(b"env OPENAI_API_KEY = placeholder of secret OPENAI", p.stdout)
        self.assertNotIn(SECRET.encode(), p.stdout)
        after = self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]
        self.assertEqual(after["allow"], ["localhost"])
        self.assertEqual(after["rules"], before["rules"])
        self.assertEqual(after["secrets_env"], before["secrets_env"])

    def test_e2b_network_rules(self):
        key = self.d.new_key()
        h = {"X-API-Key": key, "Content-Type": "application/json"}
        rules = {"localhost": [{"transform": {"headers": {"Authorization":
                                                          "Bearer ${secret:OPENAI}"}}}]}
        body = {"templateID": "base",
                "network": {"allowOut": ["localhost"], "denyOut": ["0.0.0.0/0"], "rules": rules}}
        r = self.d.tcp("POST", "/sandboxes", body, headers=h)
        self.assertEqual(r.status, 201, r)
        sid = r.json()["sandboxID"]
        info = self.d.tcp("GET", "/sandboxes/" + sid, headers=h)
        self.assertEqual(info.json()["network"]["rules"], rules)
        self.assertNotIn(SECRET.encode(), info.body)
        self.d.upload(sid, "/tmp/client.py", CLIENT.encode())
        out = self.fetch(sid, "localhost")
        self.assertEqual(json.loads(out["body"])["headers"]["authorization"],
                         digest("Bearer " + SECRET))
        # PUT replaces the whole configuration: without rules, none.
        r = self.d.tcp("PUT", "/sandboxes/%s/network" % sid,
                       {"allowOut": ["localhost"], "denyOut": ["0.0.0.0/0"]}, headers=h)
        self.assertEqual(r.status, 204, r)
        out = self.fetch(sid, "localhost")
        self.assertNotIn("authorization", json.loads(out["body"])["headers"])
        for bad, text in (
                ({"h%d.com" % i: rules["localhost"] for i in range(11)}, "at most 10"),
                ({"localhost": [{"transform": {"headers": {"A": "${secret:NOPE}"}}}]},
                 "secret `NOPE` does not exist"),
                ({"localhost": [{"transform": {"headers": {"Bad Name": "v"}}}]},
                 "not a valid header name"),
                ({"localhost": [{"other": 1}]}, "unknown field")):
            body["network"]["rules"] = bad
            r = self.d.tcp("POST", "/sandboxes", body, headers=h)
            self.assertEqual(r.status, 400, r)
            self.assertIn(text, r.json()["message"])
            r = self.d.tcp("PUT", "/sandboxes/%s/network" % sid, body["network"], headers=h)
            self.assertEqual(r.status, 400, r)

    def test_deleted_secret_is_a_502_not_a_bare_request(self):
        r = self.d.api("POST", "/v1/secrets", {"name": "SHORT", "value": "short-lived-value"})
        self.assertEqual(r.status, 201, r)
        net = self.network(rules={"localhost": [{"headers": {"X-Short": "${secret:SHORT}"}}]})
        sid, _ = self.box(net)
        out = self.fetch(sid, "localhost")
        self.assertEqual(json.loads(out["body"])["headers"]["x-short"], digest("short-lived-value"))
        self.assertEqual(self.d.api("DELETE", "/v1/secrets/SHORT").status, 204)
        n = len(Upstream.seen)
        out = self.fetch(sid, "localhost")
        self.assertEqual(out["status"], 502, out)
        self.assertIn("secret `SHORT`, which does not exist any more", out["body"])
        self.assertEqual(len(Upstream.seen), n)

    def test_secret_is_nowhere_in_the_sandbox_responses_or_audit(self):
        sid, _ = self.box()
        out = self.fetch(sid, "localhost")
        self.assertEqual(json.loads(out["body"])["headers"]["authorization"],
                         digest("Bearer " + SECRET))
        # Keep a process alive that made a request, then look everywhere.
        self.d.exec(sid, argv=["sh", "-c", "sleep 300 >/dev/null 2>&1 &"])
        probe = (
            "import os,sys\n"
            "s=sys.argv[1][::-1].encode(); hits=[]\n"
            "for p in os.listdir('/proc'):\n"
            "  if not p.isdigit(): continue\n"
            "  try: e=open('/proc/%s/environ'%p,'rb').read()\n"
            "  except OSError: continue\n"
            "  if s in e: hits.append('env:'+p)\n"
            "for root in ('/tmp','/home','/root','/etc','/run','/var'):\n"
            "  for d,_,fs in os.walk(root):\n"
            "    for f in fs:\n"
            "      try: b=open(os.path.join(d,f),'rb').read()\n"
            "      except OSError: continue\n"
            "      if s in b: hits.append(os.path.join(d,f))\n"
            "print(len(hits)); print(hits)\n")
        r = self.d.upload(sid, "/tmp/probe.py", probe.encode())
        self.assertEqual(r.status, 201)
        # Reversed: the probe's argv passes through init, whose memory is
        # searched next.
        r = self.d.exec(sid, argv=["python3", "/tmp/probe.py", SECRET[::-1]], user="root")
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(r["stdout"].splitlines()[0], "0", r)
        # The memory of every process of the sandbox, from the host.
        info = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertNotIn(SECRET, json.dumps(info))
        pids = sandbox_pids(self.d, sid)
        self.assertTrue(pids)
        for pid in pids:
            self.assertFalse(memory_contains(pid, SECRET.encode()), "secret in pid %d" % pid)
        # The search does find what is there: the placeholder, in the
        # environment of the sleeping command.
        ph = info["network"]["secrets_env"]["OPENAI_API_KEY"]["placeholder"]
        self.assertTrue(any(memory_contains(pid, ph.encode()) for pid in pids), pids)
        # Responses and the audit log.
        for path in ("/v1/sandboxes", "/v1/secrets", "/v1/sandboxes/%s" % sid, "/v1/audit?limit=1000"):
            self.assertNotIn(SECRET.encode(), self.d.api("GET", path).body, path)
        audit = b""
        for root, _, files in os.walk(os.path.join(self.d.state, "audit")):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    audit += fh.read()
        self.assertIn(b'"secret"', audit)
        self.assertIn(b'"OPENAI"', audit)
        self.assertNotIn(SECRET.encode(), audit)


def sandbox_pids(d, sid):
    """Pids (host view) of the sandbox's processes: those in its cgroup."""
    out = []
    for root, dirs, files in os.walk("/sys/fs/cgroup"):
        if sid in root and "cgroup.procs" in files:
            with open(os.path.join(root, "cgroup.procs")) as f:
                out += [int(x) for x in f.read().split()]
    return sorted(set(out))


def resident_runs(pagemap, lo, hi):
    """The [start, end) runs of pages of lo..hi present in memory, from
    /proc/PID/pagemap (bit 63: present). Reading a page that is not would
    fault it in: an ASan process's untouched shadow memory became ~280 MiB
    of RSS under such a search, and its sandbox's memory cgroup killed it."""
    page = os.sysconf("SC_PAGE_SIZE")
    pagemap.seek((lo // page) * 8)
    raw = pagemap.read(((hi - lo) // page) * 8)
    runs, start = [], None
    for i in range(len(raw) // 8):
        present = raw[i * 8 + 7] & 0x80
        addr = lo + i * page
        if present and start is None:
            start = addr
        elif not present and start is not None:
            runs.append((start, addr))
            start = None
    if start is not None:
        runs.append((start, lo + (len(raw) // 8) * page))
    return runs


def memory_contains(pid, needle):
    """Whether needle is in the resident memory of pid (read from the host,
    without faulting anything in)."""
    try:
        maps = open("/proc/%d/maps" % pid).read().splitlines()
        mem = open("/proc/%d/mem" % pid, "rb", 0)
        pagemap = open("/proc/%d/pagemap" % pid, "rb", 0)
    except OSError:
        return False
    try:
        for line in maps:
            addr, perms = line.split()[:2]
            if "r" not in perms:
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if hi - lo > 1 << 30:
                continue
            try:
                for start, end in resident_runs(pagemap, lo, hi):
                    mem.seek(start)
                    if needle in mem.read(end - start):
                        return True
            except (OSError, ValueError, OverflowError):
                continue
    finally:
        mem.close()
        pagemap.close()
    return False


def children_with(parent, marker):
    """Pids of parent's children whose command line has marker."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and marker.encode() in argv:
            out.append(int(pid))
    return out


def in_store_files(state, needle):
    """Whether needle is in the store's files (the database, its WAL)."""
    for name in ("sbx.db", "sbx.db-wal"):
        try:
            with open(os.path.join(state, name), "rb") as f:
                if needle in f.read():
                    return True
        except FileNotFoundError:
            pass
    return False


class TestSealedAtRest(CredsBase):
    """Secrets' values and the E2B data-plane tokens are sealed in the
    store with the parent's key (core/seal.h, priv/seal_key.h); a secret's
    request body leaves no copy in the front end's memory."""

    def test_secret_value_is_in_neither_the_store_nor_the_front_ends_memory(self):
        marker = "sk-sealed-" + os.urandom(16).hex()
        # Larger than the body buffer's first storage: what it grows
        # from is wiped too.
        # (The marker in the middle: a freed block's first bytes are the
        # allocator's, which would hide a copy left at its start.)
        value = "v" * 1000 + marker + "v" * 1000
        body = json.dumps({"name": "SEALED", "value": value, "description": "x" * 200})
        r = self.d.api("POST", "/v1/secrets", body)
        self.assertEqual(r.status, 201, r)
        self.assertFalse(in_store_files(self.d.state, marker.encode()))
        fronts = children_with(self.d.proc.pid, "--frontend")
        self.assertEqual(len(fronts), 1, fronts)
        self.assertFalse(memory_contains(fronts[0], marker.encode()))
        # Used through a rule, it is still the value.
        sid, _ = self.box(self.network(rules={"localhost": [
            {"headers": {"Authorization": "Bearer ${secret:SEALED}"}}]}))
        out = self.fetch(sid, "localhost")
        self.assertEqual(out["status"], 200, out)
        self.assertEqual(Upstream.seen[-1]["authorization"], "Bearer " + value)

    def test_the_key_is_roots_alone(self):
        d = os.path.join(self.d.state, "seal")
        st = os.stat(d)
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o7777), (0, 0, 0o700))
        st = os.stat(os.path.join(d, "key"))
        self.assertEqual((st.st_uid, st.st_mode & 0o7777, st.st_size), (0, 0o600, 32))
        # The front end (another account) cannot open it.
        fronts = children_with(self.d.proc.pid, "--frontend")
        with open("/proc/%d/status" % fronts[0]) as f:
            uid = int(re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1))
        self.assertNotEqual(uid, 0)
        p = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                            "cat", os.path.join(d, "key")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("Permission denied", p.stderr)


class SealedAcrossRestarts(RestartTest):
    def test_tokens_and_secrets_survive_a_restart_sealed(self):
        r = self.d.api("POST", "/sandboxes", {"templateID": "base"})
        self.assertEqual(r.status, 201, r)
        sid, token = r.json()["sandboxID"], r.json()["envdAccessToken"]
        self.assertRegex(token, r"^[0-9a-f]{40}$")
        value = "sk-restart-" + os.urandom(16).hex()
        r = self.d.api("POST", "/v1/secrets", {"name": "KEPT", "value": value})
        self.assertEqual(r.status, 201, r)
        self.assertFalse(in_store_files(self.d.state, token.encode()))
        self.assertFalse(in_store_files(self.d.state, value.encode()))
        self.kill9()
        self.restart()
        r = self.d.api("GET", "/sandboxes/" + sid)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["envdAccessToken"], token)
        self.assertFalse(in_store_files(self.d.state, token.encode()))


if __name__ == "__main__":
    unittest.main()


def make_ca(d, name):
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt, "-days", "2",
                    "-subj", "/CN=sbx test CA " + name,
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign"], check=True, capture_output=True)
    return key, crt


def make_leaf(d, ca_key, ca_crt, name, host):
    key, csr, crt = (os.path.join(d, name + ext) for ext in (".key", ".csr", ".crt"))
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n" % host)
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + host],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
                    "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext],
                   check=True, capture_output=True)
    return key, crt


def tls_server(key, crt):
    import ssl
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    s.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


# Inside the sandbox: an HTTPS request through the proxy the way ordinary
# code makes it (urllib: HTTPS_PROXY, SSL_CERT_FILE from the environment).
HTTPS_CLIENT = r'''
import json, sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer mine",
                                                   "X-Key": sys.argv[2]})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except urllib.error.URLError as e:
    print(json.dumps({"error": str(e)}))
'''

# A CONNECT by hand, then TLS without verification: which certificate does
# the client see, and what does the proxy say?
PEEK_CLIENT = r'''
import hashlib, json, socket, ssl, sys
target = sys.argv[1]
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
data = b""
while b"\r\n\r\n" not in data:
    c = s.recv(4096)
    if not c:
        break
    data += c
head, _, rest = data.partition(b"\r\n\r\n")
out = {"head": head.decode("latin-1")}
if head.startswith(b"HTTP/1.1 200"):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s, server_hostname=target.rsplit(":", 1)[0])
    out["cert_sha256"] = hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest()
else:
    while True:
        c = s.recv(4096)
        if not c:
            break
        rest += c
    out["body"] = rest.decode("latin-1")
print(json.dumps(out))
'''


# Bytes of the test's choosing inside TLS to a ruled host.
RAW_TLS_CLIENT = r'''
import json, socket, ssl, sys
target, raw = sys.argv[1], bytes.fromhex(sys.argv[2])
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % target).encode())
data = b""
while b"\r\n\r\n" not in data:
    data += s.recv(4096)
ctx = ssl.create_default_context(cafile="/etc/ssl/sbx-ca-bundle.crt")
t = ctx.wrap_socket(s, server_hostname=target.rsplit(":", 1)[0])
t.sendall(raw)
out = b""
while True:
    try:
        c = t.recv(65536)
    except (ssl.SSLError, OSError):
        break
    if not c:
        break
    out += c
print(json.dumps({"answer": out.decode("latin-1")}))
'''


class TestTLS(CredsBase):
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.tmp = tempfile.mkdtemp(prefix="sbx-creds-tls-")
        ca_key, ca_crt = make_ca(cls.tmp, "trusted")
        bad_key, bad_crt = make_ca(cls.tmp, "untrusted")
        key, crt = make_leaf(cls.tmp, ca_key, ca_crt, "good", "localhost")
        bkey, bcrt = make_leaf(cls.tmp, bad_key, bad_crt, "bad", "localhost")
        cls.good_der = subprocess.run(["openssl", "x509", "-in", crt, "-outform", "DER"],
                                      check=True, capture_output=True).stdout
        cls.extra_args = ("--egress-allow-private", "--egress-upstream-ca", ca_crt)
        super().setUpClass()
        cls.good = tls_server(key, crt)
        cls.bad = tls_server(bkey, bcrt)

    @classmethod
    def tearDownClass(cls):
        import shutil
        for s in (cls.good, cls.bad):
            s.shutdown()
            s.server_close()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def run_py(self, sid, script, *args):
        self.d.upload(sid, "/tmp/s.py", script.encode())
        # The upstreams are on localhost, which NO_PROXY exempts.
        r = self.d.exec(sid, argv=["python3", "/tmp/s.py"] + list(args), timeout="60s",
                        env={"NO_PROXY": "", "no_proxy": ""})
        self.assertEqual(r["exit_code"], 0, r)
        return json.loads(r["stdout"])

    def test_https_to_a_ruled_host_gets_the_secret(self):
        sid, _ = self.box()
        ph = self.d.api("GET", "/v1/sandboxes/" + sid).json()["network"]["secrets_env"][
            "OPENAI_API_KEY"]["placeholder"]
        env = self.d.exec(sid, argv=["sh", "-c", "echo $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS"])
        self.assertEqual(env["stdout"].split(), ["/etc/ssl/sbx-ca-bundle.crt", "/etc/ssl/sbx-ca.crt"])
        out = self.run_py(sid, HTTPS_CLIENT, "https://localhost:%d/x" % self.good.server_address[1],
                          ph)
        self.assertEqual(out.get("status"), 200, out)
        h = json.loads(out["body"])["headers"]
        self.assertEqual(h["authorization"], digest("Bearer " + SECRET))
        self.assertEqual(h["x-key"], digest(SECRET))
        self.assertEqual(Upstream.seen[-1]["authorization"], "Bearer " + SECRET)
        # The sandbox sees a leaf of sbx's CA, not the upstream's.
        out = self.run_py(sid, PEEK_CLIENT, "localhost:%d" % self.good.server_address[1])
        self.assertTrue(out["head"].startswith("HTTP/1.1 200"), out)
        self.assertNotEqual(out["cert_sha256"], hashlib.sha256(self.good_der).hexdigest())

    def test_host_without_rules_is_a_tunnel(self):
        sid, _ = self.box()
        out = self.run_py(sid, PEEK_CLIENT, "127.0.0.1:%d" % self.good.server_address[1])
        self.assertTrue(out["head"].startswith("HTTP/1.1 200"), out)
        self.assertEqual(out["cert_sha256"], hashlib.sha256(self.good_der).hexdigest())

    def test_untrusted_upstream_is_a_502(self):
        sid, _ = self.box()
        n = len(Upstream.seen)
        out = self.run_py(sid, PEEK_CLIENT, "localhost:%d" % self.bad.server_address[1])
        self.assertTrue(out["head"].startswith("HTTP/1.1 502"), out)
        self.assertIn("TLS to localhost:%d failed: its certificate is not trusted"
                      % self.bad.server_address[1], out["body"])
        self.assertEqual(len(Upstream.seen), n)

    def test_malformed_requests_inside_tls_are_400(self):
        sid, _ = self.box()
        n = len(Upstream.seen)
        target = "localhost:%d" % self.good.server_address[1]
        for raw in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nNo colon\r\n\r\n",
                    b"GET / HTTP/1.1\r\n Folded: x\r\n\r\n",
                    b"GET / HTTP/1.1\r\nA: \x01\r\n\r\n", b"GET / HTTP/1.1\r\nA: \x00\r\n\r\n",
                    b"x" * 20000):
            out = self.run_py(sid, RAW_TLS_CLIENT, target, raw.hex())
            self.assertTrue(out["answer"].startswith("HTTP/1.1 400 "), (raw[:40], out))
            self.assertIn("sbx: bad request inside TLS", out["answer"])
        self.assertEqual(len(Upstream.seen), n)
        # And the proxy still serves.
        out = self.run_py(sid, RAW_TLS_CLIENT, target,
                          b"GET /ok HTTP/1.1\r\nHost: localhost\r\n\r\n".hex())
        self.assertTrue(out["answer"].startswith("HTTP/1.0 200") or
                        out["answer"].startswith("HTTP/1.1 200"), out)
        self.assertEqual(Upstream.seen[-1]["authorization"], "Bearer " + SECRET)

    def test_ca_key_is_roots_and_not_in_the_sandbox(self):
        st = os.stat(os.path.join(self.d.state, "egress-ca", "ca.key"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        sid, _ = self.box()
        r = self.d.exec(sid, argv=["sh", "-c", "grep -c 'BEGIN CERTIFICATE' /etc/ssl/sbx-ca.crt;"
                                   " grep -rl 'PRIVATE KEY' /etc/ssl/ 2>/dev/null | wc -l"])
        self.assertEqual(r["stdout"].split(), ["1", "0"], r)
        with open(os.path.join(self.d.state, "egress-ca", "ca.crt"), "rb") as f:
            ca = f.read()
        # The host's trust store does not have it.
        for path in ("/etc/ssl/certs/ca-certificates.crt",):
            with open(path, "rb") as f:
                self.assertNotIn(ca.strip(), f.read())
