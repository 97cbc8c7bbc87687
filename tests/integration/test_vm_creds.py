"""Egress credential rules from a microVM sandbox (docs/vm.md "Egress",
docs/egress.md "Credentials", docs/security.md 2.23).

The proxy terminates TLS for a ruled host with sbx's per-daemon CA; a
namespace sandbox trusts it through the files bound at /etc/ssl/sbx-ca*.
A guest gets the certificate at boot in SETUP, and its agent puts it and
the bundle (the image's roots + it) on a read-only tmpfs over /etc/ssl.
One VM for the class, made with a policy without rules (as a pooled VM
would be), then given rules by PUT .../network. Checked:

- curl and Python's urllib in the guest reach an HTTPS upstream on the
  host's loopback (its own test CA, --egress-upstream-ca) through the
  proxy; the upstream gets the rule's header with the secret, and the
  placeholder swapped in another header; a host without rules gets the
  placeholder verbatim through a plain tunnel;
- the files SSL_CERT_FILE and NODE_EXTRA_CA_CERTS name are sbx's
  certificate and the bundle, root's, 0444; neither the user nor the
  guest's root (no capabilities) can write, replace, rename or unlink
  them, make files beside them, or remount them (exact errnos);
- the secret is nowhere in the guest (every process's environment, every
  file, root's search), nor in the memory of the relay and QEMU (the
  guest's RAM) read from the host.
"""
import json
import os
import shutil
import tempfile

from harness import DaemonTest
from test_credentials import (HTTPS_CLIENT, SECRET, Upstream, digest, make_ca, make_leaf,
                              memory_contains, sandbox_pids, tls_server)

QEMU = "/usr/bin/qemu-system-x86_64"

# As uid 1000 and as the guest's root: every way to put another file where
# SSL_CERT_FILE points, each with the errno it got ("ok" if it worked).
REPLACE = r'''
import errno, json, os
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
B = "/etc/ssl/sbx-ca-bundle.crt"
C = "/etc/ssl/sbx-ca.crt"
attempt("write", lambda: open(B, "a").write("x"))
attempt("truncate", lambda: os.truncate(B, 0))
attempt("chmod", lambda: os.chmod(B, 0o666))
attempt("unlink", lambda: os.unlink(B))
attempt("rename_away", lambda: os.rename(B, "/etc/ssl/old"))
attempt("create_beside", lambda: open("/etc/ssl/evil.crt", "w"))
EVIL = "/tmp/evil-%d.crt" % os.getuid()  # /tmp is sticky: one each
attempt("rename_over", lambda: (open(EVIL, "w").write("evil"), os.rename(EVIL, B)))
attempt("link_over", lambda: os.symlink(EVIL, "/etc/ssl/sbx-ca.crt.new"))
attempt("cert_write", lambda: open(C, "w"))
attempt("cert_unlink", lambda: os.unlink(C))
attempt("certs_write", lambda: open("/etc/ssl/certs/evil.pem", "w"))
st = os.stat(B)
out["bundle_mode"] = "%o %d" % (st.st_mode & 0o7777, st.st_uid)
st = os.stat("/etc/ssl")
out["dir_mode"] = "%o %d" % (st.st_mode & 0o7777, st.st_uid)
print(json.dumps(out))
'''

# Root's search of the guest for the secret (reversed in argv, so that the
# probe's own command line is no hit).
PROBE = r'''
import os, sys
s = sys.argv[1][::-1].encode(); hits = []; files = 0
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        e = open("/proc/%s/environ" % p, "rb").read()
    except OSError:
        continue
    if s in e:
        hits.append("env:" + p)
for root in ("/tmp", "/home", "/root", "/etc", "/run", "/var", "/dev/shm", "/disk"):
    for d, _, fs in os.walk(root):
        for f in fs:
            try:
                b = open(os.path.join(d, f), "rb").read()
            except OSError:
                continue
            files += 1
            if s in b:
                hits.append(os.path.join(d, f))
print(len(hits)); print(files); print(hits)
'''


class VMCreds(DaemonTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        assert os.access(QEMU, os.X_OK), "qemu-system-x86 is not installed (scripts/install-deps.sh)"
        cls.tmp = tempfile.mkdtemp(prefix="sbx-vm-creds-")
        # Gone even when this setup fails (tearDownClass then does not run).
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        ca_key, cls.up_ca = make_ca(cls.tmp, "trusted")
        key, crt = make_leaf(cls.tmp, ca_key, cls.up_ca, "good", "localhost")
        cls.extra_args = ("--egress-allow-private", "--egress-upstream-ca", cls.up_ca)
        super().setUpClass()
        cls.up = tls_server(key, crt)
        cls.port = cls.up.server_address[1]
        r = cls.d.api("POST", "/v1/secrets", {"name": "OPENAI", "value": SECRET})
        assert r.status == 201, r
        # No rules yet: the guest gets the CA at boot whatever the policy.
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "memory": "256M",
                                                "disk": "64M", "timeout": "10m",
                                                "network": {"allow": ["localhost"]}})
        assert r.status == 201, r
        cls.sid = r.json()["id"]
        r = cls.d.api("PUT", "/v1/sandboxes/%s/network" % cls.sid, {
            "allow": ["localhost", "127.0.0.1"],
            "rules": {"localhost": [{"headers": {"Authorization": "Bearer ${secret:OPENAI}"},
                                     "placeholders": ["OPENAI"]}]},
            "secrets_env": {"OPENAI_API_KEY": "OPENAI"}})
        assert r.status == 200, r
        assert SECRET.encode() not in r.body
        cls.ph = r.json()["network"]["secrets_env"]["OPENAI_API_KEY"]["placeholder"]

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.api("DELETE", "/v1/sandboxes/" + cls.sid)
        finally:
            cls.up.shutdown()
            cls.up.server_close()
            shutil.rmtree(cls.tmp, ignore_errors=True)
            super().tearDownClass()

    def tearDown(self):
        pass  # the class's VM lives until tearDownClass

    def sh(self, cmd, **kw):
        kw.setdefault("timeout", "60s")
        # The upstream is on localhost, which NO_PROXY exempts.
        kw.setdefault("env", {"NO_PROXY": "", "no_proxy": ""})
        return self.d.sh(self.sid, cmd, **kw)

    def test_a_curl_https_gets_the_secret_placeholder_only_for_the_ruled_host(self):
        env = self.sh("echo $SSL_CERT_FILE $CURL_CA_BUNDLE $REQUESTS_CA_BUNDLE "
                      "$NODE_EXTRA_CA_CERTS $OPENAI_API_KEY")
        self.assertEqual(env["stdout"].split(),
                         ["/etc/ssl/sbx-ca-bundle.crt"] * 3 + ["/etc/ssl/sbx-ca.crt", self.ph])
        # curl as it comes (HTTPS_PROXY, CURL_CA_BUNDLE from the environment).
        res = self.sh("curl -sS --max-time 30 -H 'Authorization: Bearer mine'"
                      " -H \"X-Key: k=$OPENAI_API_KEY;\" https://localhost:%d/curl" % self.port)
        self.assertEqual(res["exit_code"], 0, res)
        h = json.loads(res["stdout"])["headers"]
        self.assertEqual(h["authorization"], digest("Bearer " + SECRET))
        self.assertEqual(h["x-key"], digest("k=%s;" % SECRET))
        self.assertEqual(Upstream.seen[-1]["authorization"], "Bearer " + SECRET)
        # Python's urllib (SSL_CERT_FILE).
        self.assertEqual(self.d.upload(self.sid, "/tmp/c.py", HTTPS_CLIENT.encode()).status, 201)
        res = self.sh("python3 /tmp/c.py https://localhost:%d/py \"$OPENAI_API_KEY\"" % self.port)
        self.assertEqual(res["exit_code"], 0, res)
        out = json.loads(res["stdout"])
        self.assertEqual(out.get("status"), 200, out)
        self.assertEqual(json.loads(out["body"])["headers"]["x-key"], digest(SECRET))
        # A host without rules: a tunnel to the upstream's own certificate
        # (its CA given to curl), the placeholder verbatim, nothing added.
        with open(self.up_ca, "rb") as f:
            self.assertEqual(self.d.upload(self.sid, "/tmp/up.crt", f.read()).status, 201)
        res = self.sh("curl -sS --max-time 30 --cacert /tmp/up.crt"
                      " -H \"X-Key: $OPENAI_API_KEY\" https://127.0.0.1:%d/tunnel" % self.port)
        self.assertEqual(res["exit_code"], 0, res)
        h = json.loads(res["stdout"])["headers"]
        self.assertNotIn("authorization", h)
        self.assertEqual(h["x-key"], digest(self.ph))
        self.assertEqual(Upstream.seen[-1]["x-key"], self.ph)

    def test_ca_files_are_sbxs_and_the_images_roots(self):
        with open(os.path.join(self.d.state, "egress-ca", "ca.crt")) as f:
            ca = f.read()
        res = self.sh("cat /etc/ssl/sbx-ca.crt")
        self.assertEqual(res["stdout"], ca)
        res = self.sh("tail -c %d /etc/ssl/sbx-ca-bundle.crt; echo; "
                      "grep -c 'BEGIN CERTIFICATE' /etc/ssl/sbx-ca-bundle.crt "
                      "/etc/ssl/certs/ca-certificates.crt; grep -rl 'PRIVATE KEY' /etc/ssl | wc -l"
                      % len(ca))
        lines = res["stdout"].split("\n")
        self.assertEqual("\n".join(lines[:ca.count("\n")]) + "\n", ca, res)
        counts = dict(l.rsplit(":", 1) for l in lines if l.startswith("/etc/ssl/"))
        self.assertGreater(int(counts["/etc/ssl/certs/ca-certificates.crt"]), 10, res)
        self.assertEqual(int(counts["/etc/ssl/sbx-ca-bundle.crt"]),
                         int(counts["/etc/ssl/certs/ca-certificates.crt"]) + 1, res)
        self.assertEqual(lines[-2], "0", res)

    def test_nobody_in_the_guest_can_replace_the_ca_files(self):
        self.assertEqual(self.d.upload(self.sid, "/tmp/r.py", REPLACE.encode()).status, 201)
        for user in ("user", "root"):
            res = self.sh("python3 /tmp/r.py", user=user)
            self.assertEqual(res["exit_code"], 0, res)
            out = json.loads(res["stdout"])
            self.assertEqual(out.pop("bundle_mode"), "444 0", user)
            self.assertEqual(out.pop("dir_mode"), "755 0", user)
            # From the user's /tmp: another mount (EXDEV); every other
            # change: a read-only file system.
            want = {k: "EROFS" for k in out}
            want["rename_over"] = "EXDEV"
            self.assertEqual(out, want, user)
            self.assertEqual(len(out), 11)
        # Nor remount it, or mount over it (no capabilities, even as root).
        res = self.sh("mount -o remount,rw /etc/ssl; echo rc=$?; "
                      "mount -t tmpfs x /etc/ssl; echo rc=$?; grep ' /etc/ssl' /proc/mounts",
                      user="root")
        self.assertEqual(res["stdout"].count("rc=1") + res["stdout"].count("rc=32"), 2, res)
        mounts = [l.split() for l in res["stdout"].splitlines() if l.startswith("sbx-ssl")]
        self.assertEqual(len(mounts), 1, res)
        self.assertTrue(mounts[0][3].startswith("ro,"), mounts)
        # And the file is still sbx's: a request still verifies.
        res = self.sh("curl -sS -o /dev/null -w '%%{http_code}' --max-time 30 "
                      "https://localhost:%d/after" % self.port)
        self.assertEqual(res["stdout"], "200", res)

    def test_secret_is_nowhere_in_the_guest_the_relay_or_qemu(self):
        res = self.sh("curl -sS --max-time 30 https://localhost:%d/s" % self.port)
        self.assertEqual(json.loads(res["stdout"])["headers"]["authorization"],
                         digest("Bearer " + SECRET))
        # What the guest does hold: the placeholder, in a running process's
        # environment and (certainly resident: tmpfs pages) in a file.
        self.d.exec(self.sid, argv=["sh", "-c", 'printf %s "$OPENAI_API_KEY" > /tmp/ph-copy; '
                                                "sleep 300 >/dev/null 2>&1 &"])
        self.assertEqual(self.d.upload(self.sid, "/tmp/probe.py", PROBE.encode()).status, 201)
        r = self.d.exec(self.sid, argv=["python3", "/tmp/probe.py", SECRET[::-1]], user="root",
                        timeout="60s")
        self.assertEqual(r["exit_code"], 0, r)
        lines = r["stdout"].splitlines()
        self.assertEqual(lines[0], "0", r)
        self.assertGreater(int(lines[1]), 100, r)  # it did read the guest's files
        info = self.d.api("GET", "/v1/sandboxes/" + self.sid)
        self.assertNotIn(SECRET.encode(), info.body)
        # From the host: the relay and QEMU (whose memory is the guest's RAM)
        # only ever carry TLS to sbx's leaf, never the secret.
        pids = sandbox_pids(self.d, self.sid)
        self.assertGreaterEqual(len(pids), 2, pids)
        for pid in pids:
            self.assertFalse(memory_contains(pid, SECRET.encode()), "secret in pid %d" % pid)
        # The search does find what is there: the placeholder, in the guest.
        self.assertTrue(any(memory_contains(pid, self.ph.encode()) for pid in pids), pids)
        # And the VM was alive through it all (an ASan relay once was
        # OOM-killed before the search, which then passed on a corpse).
        self.assertEqual(sandbox_pids(self.d, self.sid), pids)
        self.assertEqual(self.d.exec(self.sid, argv=["true"])["exit_code"], 0)
