"""The `sbx` CLI against a real daemon: every point of its contract.

run/exec statuses: the command's own; 124 on --timeout; 137 when killed
(OOM or signal) with a one-line reason on stderr; 127/126 when the command
cannot start; 125 when sbx itself failed (daemon unreachable, API refusal,
usage). Errors are one line on stderr. Output is streamed as produced and
byte exact."""
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time

from harness import SBX, SBXD, DaemonTest
from sbx_helpers import sandbox_ids, wait_until

ID_RE = re.compile(r"^[a-z0-9]{20}$")
KEY_RE = re.compile(r"^e2b_[0-9a-f]{40}$")


class CliTest(DaemonTest):
    def env(self, **extra):
        e = {"PATH": "/usr/bin:/bin", "SBX_STATE": self.d.state}
        e.update(extra)
        return e

    def run_ok(self, *args, **kw):
        p = self.d.sbx(*args, **kw)
        self.assertEqual(p.returncode, 0, p)
        return p

    def assertOneLine(self, p, *words):
        """stderr is exactly one line, starting with "sbx: " and naming words."""
        err = p.stderr.decode(errors="replace")
        self.assertEqual(len(err.splitlines()), 1, "stderr: %r" % err)
        self.assertTrue(err.endswith("\n"), err)
        self.assertTrue(err.startswith("sbx: "), err)
        for w in words:
            self.assertIn(w, err)
        return err

    def popen(self, *args, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen([SBX] + list(args), env=kw.pop("env", self.env()), **kw)

    def readline(self, f, timeout=60):
        """One line from a pipe, failing (not hanging) after timeout."""
        line = b""
        deadline = time.time() + timeout
        fd = f.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.time()
            self.assertGreater(left, 0, "no full line within %ds (got %r)" % (timeout, line))
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                c = os.read(fd, 1)
                if not c:
                    break
                line += c
        return line

    def tmpfile(self, data, mode=0o644):
        fd, path = tempfile.mkstemp(prefix="sbx-cli-test-")
        os.write(fd, data)
        os.close(fd)
        os.chmod(path, mode)
        self.addCleanup(os.unlink, path)
        return path


class CliRun(CliTest):
    def test_output_and_status(self):
        p = self.d.sbx("run", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (3, b"out\n", b"err\n"))
        for code in (0, 1, 42, 126, 127, 255):
            with self.subTest(code=code):
                p = self.d.sbx("run", "sh", "-c", "exit %d" % code)
                self.assertEqual((p.returncode, p.stdout, p.stderr), (code, b"", b""))
        p = self.d.sbx("run", "sh", "-c", "exit 300")  # like a shell: 300 & 0xff
        self.assertEqual(p.returncode, 44)
        # Arguments reach the command as they are: no shell in between.
        p = self.run_ok("run", "printf", "%s|", "a b", "$HOME", "*", "-e", "--", "")
        self.assertEqual(p.stdout, b"a b|$HOME|*|-e|--||")
        self.assertEqual(sandbox_ids(self.d), [])  # run cleans up after itself

    def test_streams_as_produced(self):
        """The first line arrives while the command still runs: it waits for
        a file that the test only creates after reading that line."""
        proc = self.popen("run", "--", "sh", "-c",
                          "echo first; echo first-err >&2; "
                          "while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second")
        try:
            self.assertEqual(self.readline(proc.stdout), b"first\n")
            self.assertEqual(self.readline(proc.stderr), b"first-err\n")
            self.assertIsNone(proc.poll())
            sid = wait_until(lambda: sandbox_ids(self.d), what="the run's sandbox")[0]
            self.assertEqual(self.d.upload(sid, "/tmp/go", b"").status, 201)
            self.assertEqual(self.readline(proc.stdout), b"second\n")
            self.assertEqual(proc.wait(60), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        # And the plain case from the contract: print, sleep, print.
        proc = self.popen("run", "--", "sh", "-c", "echo one; sleep 2; echo two")
        try:
            self.assertEqual(self.readline(proc.stdout), b"one\n")
            still_running = proc.poll() is None
            self.assertEqual(self.readline(proc.stdout), b"two\n")
            self.assertEqual(proc.wait(60), 0)
        finally:
            proc.stdout.close()
            proc.stderr.close()
        self.assertTrue(still_running, "the first line came only at the end")

    def run_and_inspect(self, *opts):
        """Start `sbx run OPTS -- CMD` with a command that waits for a file,
        and return the run's sandbox object as the API shows it."""
        proc = self.popen("run", *opts, "--", "sh", "-c",
                          "echo ready; while [ ! -e /tmp/go ]; do sleep 0.05; done")
        try:
            self.assertEqual(self.readline(proc.stdout), b"ready\n")
            sid = sandbox_ids(self.d)[0]
            sb = self.d.api("GET", "/v1/sandboxes/" + sid).json()
            self.d.upload(sid, "/tmp/go", b"")
            self.assertEqual(proc.wait(60), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        return sb

    def test_options_reach_the_sandbox(self):
        sb = self.run_and_inspect()
        self.assertEqual(sb["limits"], {"memory": 512 << 20, "cpus": 1, "pids": 256,
                                        "disk": 1 << 30})
        self.assertEqual((sb["timeout"], sb["template"], sb["user"]), (300, "base", "user"))
        sb = self.run_and_inspect("--memory", "256M", "--cpus", "0.5", "--pids", "64",
                                  "--disk", "64M", "--template", "base", "--timeout", "60",
                                  "-e", "K=V")
        self.assertEqual(sb["limits"], {"memory": 256 << 20, "cpus": 0.5, "pids": 64,
                                        "disk": 64 << 20})
        # The sandbox outlives the command's own timeout, so that 124 wins.
        self.assertGreaterEqual(sb["timeout"], 60)
        self.assertEqual(sandbox_ids(self.d), [])

    def test_binary_output_is_exact(self):
        blob = bytes(range(256)) * 16 + os.urandom(2 << 20)
        path = self.tmpfile(blob)
        p = self.run_ok("run", "--file", path + ":/tmp/blob", "--", "cat", "/tmp/blob")
        self.assertEqual(p.stdout, blob)
        p = self.run_ok("run", "--file", path + ":/tmp/blob", "--", "sh", "-c",
                        "cat /tmp/blob >&2")
        self.assertEqual((p.stdout, p.stderr), (b"", blob))
        # Random bytes made inside, checked against the hash made inside.
        p = self.run_ok("run", "--", "sh", "-c",
                        "head -c 3000000 /dev/urandom > /tmp/r; sha256sum < /tmp/r >&2; cat /tmp/r")
        self.assertEqual(len(p.stdout), 3000000)
        self.assertEqual(p.stderr.split()[0].decode(), hashlib.sha256(p.stdout).hexdigest())

    def test_stdin(self):
        data = os.urandom(5 << 20)
        p = self.run_ok("run", "-i", "--", "sha256sum", input=data)
        self.assertEqual(p.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())
        p = self.run_ok("run", "--interactive", "--", "cat", input=data[:3 << 20])
        self.assertTrue(p.stdout == data[:3 << 20], "cat -i did not round-trip byte exact")
        p = self.run_ok("run", "-i", "--", "wc", "-c", input=b"")
        self.assertEqual(p.stdout.strip(), b"0")
        # Without -i the command's stdin is empty, whatever ours holds.
        p = self.run_ok("run", "--", "cat", input=b"not forwarded")
        self.assertEqual(p.stdout, b"")

    def test_file_option(self):
        script = self.tmpfile(b"#!/bin/sh\necho \"script $1\"\n", mode=0o751)
        data = self.tmpfile(b"payload\n", mode=0o600)
        p = self.run_ok("run", "--file", script + ":/home/user/bin/tool",
                        "--file", data + ":/tmp/", "--", "sh", "-c",
                        "stat -c '%a %U' /home/user/bin/tool /tmp/" + os.path.basename(data) +
                        "; /home/user/bin/tool x; cat /tmp/" + os.path.basename(data))
        self.assertEqual(p.stdout, b"751 user\n600 user\nscript x\npayload\n")
        # Without REMOTE: the local name in the home directory.
        p = self.run_ok("run", "--file", data, "--", "cat", os.path.basename(data))
        self.assertEqual(p.stdout, b"payload\n")
        # A missing local file fails before any sandbox exists.
        p = self.d.sbx("run", "--file", "/nonexistent/file:/tmp/x", "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertOneLine(p, "/nonexistent/file")
        self.assertEqual(sandbox_ids(self.d), [])

    def test_env_workdir_user(self):
        p = self.run_ok("run", "-e", "A=1", "--env", "B=x=y", "-e", "EMPTY=", "-w", "/tmp",
                        "--", "sh", "-c", 'echo "$A|$B|${EMPTY-unset}|$(pwd)|$(id -u)|$HOME"')
        self.assertEqual(p.stdout, b"1|x=y||/tmp|1000|/home/user\n")
        p = self.run_ok("run", "-u", "root", "--workdir", "/root", "--", "sh", "-c",
                        'echo "$(id -u)|$(pwd)|$HOME|$USER"')
        self.assertEqual(p.stdout, b"0|/root|/root|root\n")
        p = self.run_ok("run", "--user", "user", "--", "id", "-un")
        self.assertEqual(p.stdout, b"user\n")
        p = self.d.sbx("run", "-w", "/nonexistent", "--", "pwd")
        self.assertEqual(p.returncode, 126)
        self.assertOneLine(p, "/nonexistent")
        p = self.d.sbx("run", "-u", "nobody", "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertOneLine(p, "nobody")

    def test_timeout(self):
        for spelling in ("1", "500ms", "2s", "0.5", "--timeout=1"):
            with self.subTest(timeout=spelling):
                opt = [spelling] if spelling.startswith("--") else ["--timeout", spelling]
                p = self.d.sbx("run", *opt, "--", "sh", "-c", "echo before; sleep 60; echo after")
                self.assertEqual(p.returncode, 124, p)
                self.assertEqual(p.stdout, b"before\n")
                self.assertOneLine(p, "timed out")
        p = self.run_ok("run", "--timeout", "5m", "--", "echo", "in time")
        self.assertEqual((p.stdout, p.stderr), (b"in time\n", b""))
        for bad in ("soon", "10d", "-1", ""):
            with self.subTest(bad=bad):
                p = self.d.sbx("run", "--timeout", bad, "--", "true")
                self.assertEqual(p.returncode, 125, p)
                self.assertOneLine(p)
        self.assertEqual(sandbox_ids(self.d), [])

    def test_killed(self):
        p = self.d.sbx("run", "--memory", "32M", "--", "python3", "-c",
                       "b = bytearray(256 * 1024 * 1024)")
        self.assertEqual(p.returncode, 137, p)
        self.assertOneLine(p, "out of memory")
        for sig in ("KILL", "TERM", "SEGV"):
            with self.subTest(signal=sig):
                p = self.d.sbx("run", "--", "sh", "-c", "echo x; kill -%s $$" % sig)
                self.assertEqual((p.returncode, p.stdout), (137, b"x\n"))
                self.assertOneLine(p, "SIG" + sig)

    def test_cannot_start(self):
        p = self.d.sbx("run", "--", "no-such-command", "arg")
        self.assertEqual((p.returncode, p.stdout), (127, b""))
        self.assertOneLine(p, "no-such-command")
        p = self.d.sbx("run", "--", "/etc/passwd")
        self.assertEqual((p.returncode, p.stdout), (126, b""))
        self.assertOneLine(p, "/etc/passwd")

    def test_daemon_unreachable(self):
        empty = tempfile.mkdtemp(prefix="sbx-cli-empty-")
        self.addCleanup(os.rmdir, empty)
        env = {"SBX_STATE": empty}
        for args in (("run", "--", "true"), ("exec", "aaaaaaaaaaaaaaaaaaaa", "--", "true"),
                     ("create",), ("ls",), ("ls", "--json"), ("kill", "aaaaaaaaaaaaaaaaaaaa"),
                     ("cp", "aaaaaaaaaaaaaaaaaaaa:/tmp/x", "-"), ("key", "create"),
                     ("key", "ls"), ("key", "rm", "k123")):
            with self.subTest(args=args):
                p = self.d.sbx(*args, env=env)
                self.assertEqual((p.returncode, p.stdout), (125, b""), p)
                self.assertOneLine(p, empty)
        # The same over TCP, to a port nobody listens on.
        from harness import free_port
        url = "http://127.0.0.1:%d" % free_port()
        p = self.d.sbx("run", "--", "true", env={"SBX_URL": url, "SBX_API_KEY": "k"})
        self.assertEqual(p.returncode, 125, p)
        self.assertOneLine(p, url)
        for bad in ("ftp://host:1", "https://127.0.0.1:1", "http://", "http://h:99999"):
            with self.subTest(url=bad):
                p = self.d.sbx("ls", env={"SBX_URL": bad})
                self.assertEqual(p.returncode, 125, p)
                self.assertOneLine(p)

    def test_api_refusal(self):
        for opts, words in ((("--memory", "1T"), ("memory",)), (("--memory", "1P"), ("memory",)),
                            (("--memory", "1K"), ("memory",)), (("--cpus", "1000"), ("cpus",)),
                            (("--cpus", "0"), ("cpus",)), (("--pids", "1"), ("pids",)),
                            (("--pids", "many"), ("pids",)), (("--disk", "300G"), ("disk",)),
                            (("--timeout", "25h"), ("timeout",)), (("--template", "nope"),
                                                                   ("nope",)),
                            (("-e", "=x"), ("env",))):
            with self.subTest(opts=opts):
                p = self.d.sbx("run", *opts, "--", "touch", "/tmp/ran")
                self.assertEqual((p.returncode, p.stdout), (125, b""), p)
                self.assertOneLine(p, *words)
        self.assertEqual(sandbox_ids(self.d), [])

    def test_usage_errors(self):
        for args in (("run",), ("run", "--"), ("run", "--bogus", "--", "true"),
                     ("run", "--memory"), ("run", "-x", "true")):
            with self.subTest(args=args):
                p = self.d.sbx(*args)
                self.assertEqual((p.returncode, p.stdout), (125, b""), p)
                self.assertOneLine(p)
        self.assertEqual(sandbox_ids(self.d), [])

    def test_bad_sandbox_ids(self):
        # An unset "$id" and ids no sandbox can have are the CLI's usage
        # errors, naming the command, before any request: the daemon never
        # sees /v1/sandboxes//pause. exec's is 125, as docker exec's.
        for bad, words in (("", ("the sandbox ID is empty",)),
                           ("../keys", ("`../keys` is not a sandbox ID", "sbx ls")),
                           ("ABCDEFGHIJKLMNOPQRST", ("is not a sandbox ID",))):
            for args, rc in ((("pause", bad), 2), (("resume", bad), 2), (("kill", bad), 2),
                             (("pause", "--to-disk", bad), 2), (("fork", bad), 2),
                             (("net", bad), 2), (("snapshot", "create", bad, "s"), 2),
                             (("code", bad, "1"), 2), (("exec", bad, "--", "true"), 125)):
                with self.subTest(args=args):
                    p = self.d.sbx(*args)
                    self.assertEqual((p.returncode, p.stdout), (rc, b""), p)
                    err = self.assertOneLine(p, "snapshot create" if args[0] == "snapshot"
                                             else args[0], *words)
                    self.assertNotIn("not allowed", err)
        p = self.d.sbx("cp", "/etc/hostname", "ABC:/tmp/")
        self.assertEqual(p.returncode, 2, p)
        self.assertOneLine(p, "cp: `ABC` is not a sandbox ID")

    def interrupt(self, sig):
        proc = self.popen("run", "--", "sh", "-c", "echo ready; exec sleep 100")
        try:
            self.assertEqual(self.readline(proc.stdout), b"ready\n")
            self.assertEqual(len(sandbox_ids(self.d)), 1)
            proc.send_signal(sig)
            rc = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            err = proc.stderr.read()
            proc.stderr.close()
        # The sandbox is gone by the time sbx has exited.
        self.assertEqual(sandbox_ids(self.d), [])
        return rc, err

    def test_ctrl_c_kills_the_sandbox(self):
        rc, err = self.interrupt(signal.SIGINT)
        self.assertEqual(rc, 128 + signal.SIGINT)
        self.assertNotIn(b"Traceback", err)

    def test_sigterm_kills_the_sandbox(self):
        rc, _ = self.interrupt(signal.SIGTERM)
        self.assertEqual(rc, 128 + signal.SIGTERM)

    def test_closed_stdout(self):
        """`sbx run -- yes | head -1`: sbx stops and removes the sandbox."""
        proc = self.popen("run", "--", "yes")
        try:
            self.assertEqual(self.readline(proc.stdout), b"y\n")
            proc.stdout.close()
            rc = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()
        self.assertEqual(rc, 128 + signal.SIGPIPE)
        self.assertEqual(sandbox_ids(self.d), [])


class CliSandboxes(CliTest):
    listen = True

    def create(self, *args):
        p = self.run_ok("create", *args)
        sid = p.stdout.decode().splitlines()[-1]
        self.assertRegex(sid, ID_RE)
        return sid

    def test_refusals_name_the_bound(self):
        """A value out of range says which bound it crossed, as a value the
        user may type, then the range; `sbx create` refuses with 125 as
        docker create does, and makes nothing."""
        cases = [
            (("--memory", "1"), r"^sbx: memory 1 is too small: at least 16M \(16M \.\. [0-9.]+[KMGT]\)$"),
            (("--memory", "100T"), r"^sbx: memory 100T is too large: at most [0-9.]+[MGT] \(16M \.\. "),
            (("--timeout", "1000h"), r"^sbx: timeout 1000h is too long: at most 24h \(1s \.\. 24h\)$"),
            (("--timeout", "500ms"), r"^sbx: timeout 500ms is too short: at least 1s \(1s \.\. 24h\)$"),
            (("--pids", "0"), r"^sbx: pids 0 is too few: at least \d+ \(\d+ \.\. \d+\)$"),
            (("--cpus", "1000"), r"^sbx: cpus 1000 is too many: at most [0-9.]+ \([0-9.]+ \.\. [0-9.]+\)$"),
            (("--template", "nope"), r"^sbx: unknown template `nope` \(built in: base; `sbx template ls`"),
        ]
        for args, want in cases:
            with self.subTest(args=args):
                p = self.d.sbx("create", *args)
                self.assertEqual((p.returncode, p.stdout), (125, b""), p)
                self.assertRegex(p.stderr.decode().strip(), want)
        # the bound shown is one the daemon takes
        p = self.d.sbx("create", "--memory", "100T")
        at_most = re.search(r"at most (\S+)", p.stderr.decode()).group(1)
        sid = self.create("--memory", at_most)  # fails the test if refused
        self.d.kill(sid)
        # durations as docker and Go write them
        sid = self.create("--timeout", "1m30s")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).json()["timeout"], 90)
        self.d.kill(sid)
        p = self.d.sbx("create", "--timeout", "30s1m")
        self.assertEqual(p.returncode, 125, p)
        self.assertIn(b"largest first: 1m30s", p.stderr)
        # a usage error of create is 125 too; help about help is help
        p = self.d.sbx("create", "--bogus")
        self.assertEqual(p.returncode, 125, p)
        p = self.d.sbx("help", "--help")
        self.assertEqual(p.returncode, 0, p)
        self.assertIn(b"usage: sbx COMMAND", p.stdout)
        # a bad template name before any upload; a missing directory in one line
        p = self.d.sbx("template", "build", "Bad/Name", "--from-dir", "/")
        self.assertEqual(p.returncode, 2, p)
        self.assertNotIn(b"uploading", p.stderr)
        self.assertOneLine(p, "not a template name")
        p = self.d.sbx("template", "build", "good", "--from-dir", "/nonexistent")
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p, "--from-dir `/nonexistent`: No such file or directory")
        self.assertEqual(sandbox_ids(self.d), [])

    def test_every_list_is_one_json_shape(self):
        """Every `ls --json` prints a JSON list of objects, and every time in
        them is RFC 3339 (UTC, milliseconds); `template inspect --json`
        works as the others' --json."""
        sid = self.create()
        self.run_ok("snapshot", "create", sid, "shape-snap")
        tree = tempfile.mkdtemp(prefix="sbx-test-shape-")
        self.addCleanup(shutil.rmtree, tree, True)
        with open(os.path.join(tree, "hello"), "w") as f:
            f.write("hello\n")
        self.run_ok("template", "build", "shape-tmpl", "--from-dir", tree)
        self.run_ok("key", "create", "--tenant", "shape")
        self.run_ok("secret", "create", "SHAPE", input=b"value")
        rfc3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"

        def times(o):
            for k, v in o.items():
                if k.endswith("_at") and v is not None:
                    yield k, v
        for cmd in (("ls",), ("snapshot", "ls"), ("template", "ls"), ("key", "ls"),
                    ("secret", "ls")):
            with self.subTest(cmd=cmd):
                listed = json.loads(self.run_ok(*cmd, "--json").stdout)
                self.assertIsInstance(listed, list)
                self.assertTrue(listed)
                for o in listed:
                    self.assertIsInstance(o, dict)
                    for k, v in times(o):
                        self.assertRegex(v, rfc3339, (cmd, k))
        for args in (("template", "inspect", "--json", "shape-tmpl"),
                     ("template", "inspect", "shape-tmpl", "--json")):
            t = json.loads(self.run_ok(*args).stdout)
            self.assertEqual(t["name"], "shape-tmpl")
            self.assertRegex(t["created_at"], rfc3339)
        p = self.d.sbx("template", "inspect", "--json")
        self.assertEqual(p.returncode, 2, p)
        self.run_ok("snapshot", "rm", "shape-snap")
        self.run_ok("template", "rm", "shape-tmpl")
        self.run_ok("secret", "rm", "SHAPE")
        for k in json.loads(self.run_ok("key", "ls", "--json").stdout):
            if k["tenant"] == "shape":
                self.run_ok("key", "rm", k["id"])
        self.d.kill(sid)

    def test_ls_columns_quiet_format_filters_and_inspect(self):
        r = self.d.api("POST", "/v1/sandboxes", {"metadata": {"team": "red", "run": "7"}})
        self.assertEqual(r.status, 201, r)
        red = r.json()["id"]
        blue = self.create("--memory", "256M")
        self.run_ok("pause", blue)
        table = self.run_ok("ls").stdout.decode().splitlines()
        self.assertEqual(table[0].split(), ["ID", "STATE", "ISOLATION", "TEMPLATE", "MEMORY",
                                            "CPUS", "PIDS", "DISK", "AGE", "EXPIRES", "IN"])
        rows = {l.split()[0]: l.split() for l in table[1:]}
        self.assertEqual(rows[red][1:4], ["running", "namespace", "base"])
        self.assertEqual(rows[blue][1:5], ["paused", "namespace", "base", "256M"])
        self.assertEqual(rows[blue][-1], "paused")
        self.assertEqual(sorted(self.run_ok("ls", "-q").stdout.decode().split()), sorted([red, blue]))
        self.assertEqual(self.run_ok("ls", "-q", "--filter", "state=paused").stdout.decode(), blue + "\n")
        self.assertEqual(self.run_ok("ls", "-q", "-f", "metadata.team=red").stdout.decode(), red + "\n")
        self.assertEqual(self.run_ok("ls", "-q", "-f", "label=team").stdout.decode(), red + "\n")
        self.assertEqual(self.run_ok("ls", "-q", "-f", "label=team=blue").stdout, b"")
        # filters of several keys all hold
        self.assertEqual(self.run_ok("ls", "-q", "-f", "label=team", "-f", "state=paused").stdout, b"")
        self.assertEqual(self.run_ok("ls", "-q", "-f", "id=" + blue[:6]).stdout.decode(), blue + "\n")
        out = self.run_ok("ls", "-f", "state=running", "--format",
                          "{{.ID}}\\t{{.metadata.team}}\\t{{.limits.memory}}\\t{{.nope}}").stdout
        self.assertEqual(out.decode(), "%s\tred\t%d\t<no value>\n" % (red, 512 << 20))
        listed = json.loads(self.run_ok("ls", "--format", "json", "-f", "state=paused").stdout)
        self.assertEqual([o["id"] for o in listed], [blue])
        for bad in (("--filter", "bogus=1"), ("--format", "{{.id"), ("--format", "{{id}}"),
                    ("-q", "--json"), ("--filter",)):
            with self.subTest(bad=bad):
                p = self.d.sbx("ls", *bad)
                self.assertEqual((p.returncode, p.stdout), (2, b""), p)
                self.assertOneLine(p)
        # inspect: docker's JSON list, or a template for each; 1 if any is unknown
        got = json.loads(self.run_ok("inspect", red, blue).stdout)
        self.assertEqual([o["id"] for o in got], [red, blue])
        self.assertEqual(got[0], self.d.api("GET", "/v1/sandboxes/" + red).json())
        p = self.d.sbx("inspect", "--format", "{{.id}} {{.state}}", red, "nosuchsandbox0000000", blue)
        self.assertEqual(p.returncode, 1, p)
        self.assertEqual(p.stdout.decode(), "%s running\n%s paused\n" % (red, blue))
        self.assertOneLine(p, "nosuchsandbox0000000")
        self.assertEqual(self.d.sbx("inspect").returncode, 2)
        # stop and rm are kill, as docker users type it
        self.run_ok("stop", red)
        self.run_ok("rm", blue)
        self.assertEqual(sandbox_ids(self.d), [])

    def test_exec_it_is_a_terminal(self):
        """sbx exec -it as docker's: the command on a terminal the size of
        ours with our TERM, every key (Ctrl-C too) sent to it, our resizes
        followed, its exit status ours, and our terminal as it was after."""
        import fcntl
        import pty
        import struct
        import termios
        sid = self.create()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        before = termios.tcgetattr(slave)
        env = {"PATH": "/usr/bin:/bin", "SBX_STATE": self.d.state, "TERM": "xterm-256color"}
        p = subprocess.Popen([SBX, "exec", "-it", sid, "sh"], stdin=slave, stdout=slave,
                             stderr=slave, env=env, start_new_session=True,
                             preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        got = b""

        def until(want, limit=60, times=1):
            nonlocal got
            end = time.monotonic() + limit  # a bound for a hung test, not a timing
            while got.count(want) < times and time.monotonic() < end:
                r, _, _ = select.select([master], [], [], 0.5)
                if r:
                    try:
                        got += os.read(master, 65536)
                    except OSError:
                        break
            self.assertGreaterEqual(got.count(want), times, got)

        try:
            until(b"$ ")
            # raw: what we type is the sandbox terminal's to echo, once
            os.write(master, b"stty size; echo T=$TERM; tty\r")
            until(b"/dev/pts/")
            self.assertIn(b"\r\n30 100\r\nT=xterm-256color\r\n", got)
            self.assertEqual(got.count(b"stty size; echo"), 1, got)
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            for n in range(50):  # the resize is asynchronous: ask until it is seen
                got = b""
                os.write(master, b"stty size; echo mark-%d\r" % n)
                until(b"\nmark-%d\r\n" % n)  # the output, not the echo of the line
                if b"\r\n40 120\r\n" in got:
                    break
            self.assertIn(b"\r\n40 120\r\n", got)
            # Ctrl-C reaches the command's foreground job, not sbx
            got = b""
            os.write(master, b"sleep 1000; echo not-interrupted\r")
            until(b"sleep 1000; echo not-interrupted\r\n")
            time.sleep(0.5)
            os.write(master, b"\x03")
            os.write(master, b"echo still-here\r")
            until(b"still-here\r\n", times=2)  # the line's echo, then its output
            self.assertIn(b"^C", got)
            self.assertEqual(got.count(b"not-interrupted\r\n"), 1, got)  # the echo only
            os.write(master, b"exit 3\r")
            self.assertEqual(p.wait(timeout=60), 3)
            # our terminal is as it was
            after = termios.tcgetattr(master)
            self.assertEqual(after[3] & (termios.ICANON | termios.ECHO | termios.ISIG),
                             before[3] & (termios.ICANON | termios.ECHO | termios.ISIG))
            self.assertEqual(after[1], before[1])
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(master)
        # the sandbox lives on, and -it without a terminal is refused
        p = self.d.sbx("exec", "-it", sid, "--", "true")
        self.assertEqual(p.returncode, 125, p)
        self.assertOneLine(p, "not a terminal")
        res = self.d.sh(sid, "echo ok")
        self.assertEqual(res["stdout"], "ok\n")
        # -t alone: a terminal with no input, output as a terminal gives it
        p = self.d.sbx("exec", "-t", sid, "--", "sh", "-c", "test -t 1 && stty size")
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(p.stdout, b"24 80\r\n")
        self.d.kill(sid)

    def test_cp_directory_trees(self):
        """sbx cp of a directory, both ways, as docker cp: the tree with its
        modes, into an existing directory or as a new name, links and
        special files left out and counted; never writing through a link
        on our side."""
        sid = self.create()
        work = tempfile.mkdtemp(prefix="sbx-test-cptree-")
        self.addCleanup(shutil.rmtree, work, True)
        src = os.path.join(work, "src")
        os.makedirs(os.path.join(src, "a", "b"))
        with open(os.path.join(src, "top.txt"), "w") as f:
            f.write("top\n")
        with open(os.path.join(src, "a", "b", "deep.sh"), "w") as f:
            f.write("echo deep\n")
        os.chmod(os.path.join(src, "a", "b", "deep.sh"), 0o750)
        big = os.urandom(3 << 20)
        with open(os.path.join(src, "a", "big.bin"), "wb") as f:
            f.write(big)
        os.symlink("/etc/passwd", os.path.join(src, "a", "link"))
        os.mkfifo(os.path.join(src, "fifo"))
        # in: into an existing directory, keeping the name
        p = self.run_ok("cp", "-r", src, sid + ":/tmp")
        self.assertIn(b"copied 3 files", p.stderr)
        self.assertIn(b"left out 2 links or special files", p.stderr)
        res = self.d.sh(sid, "cd /tmp/src && find . | sort && stat -c '%a' a/b/deep.sh "
                        "&& sh a/b/deep.sh && sha256sum a/big.bin")
        self.assertEqual(res["stdout"].split("\n")[:7],
                         [".", "./a", "./a/b", "./a/b/deep.sh", "./a/big.bin", "./top.txt", "750"])
        self.assertIn("deep\n", res["stdout"])
        self.assertIn(hashlib.sha256(big).hexdigest(), res["stdout"])
        # in again, as a new name (no -r needed), merged when it exists
        self.run_ok("cp", src, sid + ":/tmp/renamed")
        self.run_ok("cp", src, sid + ":/tmp/renamed")
        self.assertEqual(self.d.sh(sid, "cat /tmp/renamed/top.txt")["stdout"], "top\n")
        # out: as a new name, then into an existing directory
        self.d.sh(sid, "ln -s /etc /tmp/src/a/etc-link")
        out = os.path.join(work, "out")
        p = self.run_ok("cp", sid + ":/tmp/src", out)
        self.assertIn(b"left out 1 link or special file", p.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["a", "top.txt"])
        self.assertEqual(sorted(os.listdir(os.path.join(out, "a"))), ["b", "big.bin"])
        with open(os.path.join(out, "a", "big.bin"), "rb") as f:
            self.assertEqual(f.read(), big)
        self.assertEqual(os.stat(os.path.join(out, "a", "b", "deep.sh")).st_mode & 0o777, 0o750)
        into = os.path.join(work, "into")
        os.mkdir(into)
        self.run_ok("cp", sid + ":/tmp/src/a", into + "/")
        self.assertTrue(os.path.isfile(os.path.join(into, "a", "b", "deep.sh")))
        # a link already on our side is never written through: the copy
        # stops with an error and the link's target is untouched
        victim = os.path.join(work, "victim")
        with open(victim, "w") as f:
            f.write("keep\n")
        trap = os.path.join(work, "trap")
        os.mkdir(trap)
        os.symlink(victim, os.path.join(trap, "top.txt"))
        p = self.d.sbx("cp", sid + ":/tmp/src/.", trap)  # what it holds, into trap itself
        self.assertEqual(p.returncode, 1, p)
        self.assertIn(b"top.txt", p.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "keep\n")
        trap2 = os.path.join(work, "trap2")
        os.mkdir(trap2)
        os.symlink(work, os.path.join(trap2, "a"))  # a linked directory: not entered either
        p = self.d.sbx("cp", sid + ":/tmp/src/.", trap2)
        self.assertEqual(p.returncode, 1, p)
        self.assertFalse(os.path.exists(os.path.join(work, "b")))
        self.d.kill(sid)

    def test_stats(self):
        a = self.create()
        b = self.create("--memory", "256M", "--pids", "64")
        self.run_ok("exec", b, "--", "sh", "-c", "sleep 1000 & sleep 1000 &")
        table = self.run_ok("stats").stdout.decode().splitlines()
        self.assertEqual(re.split(r"\s{3,}", table[0].strip()),
                         ["ID", "CPU %", "MEM USAGE / LIMIT", "MEM %", "PIDS", "DISK / LIMIT",
                          "OOM KILLS"])
        rows = {l.split()[0]: l for l in table[1:]}
        self.assertEqual(sorted(rows), sorted([a, b]))
        self.assertRegex(rows[b], r"^%s\s+\d+\.\d%%\s+\S+ / 256M\s+\d+\.\d%%\s+3 / 64\s+" % b)
        self.assertRegex(rows[a], r"\s1 / 256\s")
        listed = json.loads(self.run_ok("stats", "--json", b).stdout)
        self.assertEqual([o["id"] for o in listed], [b])
        self.assertEqual((listed[0]["memory_limit"], listed[0]["pids"], listed[0]["pids_limit"]),
                         (256 << 20, 3, 64))
        self.assertGreaterEqual(listed[0]["cpu_percent"], 0.0)
        # an unknown ID: said, and the others still shown
        p = self.d.sbx("stats", "nosuchsandbox0000000", a)
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p, "nosuchsandbox0000000")
        self.assertIn(a.encode(), p.stdout)
        # -f: a table each second until interrupted
        env = {"PATH": "/usr/bin:/bin", "SBX_STATE": self.d.state}
        f = subprocess.Popen([SBX, "stats", "-f", a], stdout=subprocess.PIPE, env=env)
        seen = b""
        while seen.count(b"CPU %") < 2:
            chunk = f.stdout.read1(4096)
            if not chunk:
                break
            seen += chunk
        f.send_signal(signal.SIGINT)
        self.assertEqual(f.wait(timeout=30), -signal.SIGINT)
        f.stdout.close()
        self.assertGreaterEqual(seen.count(a.encode()), 2, seen)
        for sid in (a, b):
            self.d.kill(sid)

    def test_manual_and_completion_come_from_help(self):
        """sbx help --man and sbx completion are made from the help texts:
        every command of the overview has a section and completes; options
        and subcommands complete; IDs complete where a command takes one."""
        overview = self.run_ok("help").stdout.decode()
        commands = re.findall(r"(?m)^  ([a-z]+)[ \[]", overview.split("Commands:")[1].split("\n\n")[0])
        self.assertIn("stats", commands)
        man = self.run_ok("help", "--man").stdout.decode()
        self.assertTrue(man.startswith(".TH SBX 1 "), man[:80])
        for c in commands:
            if c not in ("help", "version"):
                self.assertIn("\n.SS sbx %s\n" % c, man)
        if shutil.which("man"):
            with tempfile.NamedTemporaryFile("w", suffix=".1") as f:
                f.write(man)
                f.flush()
                shown = subprocess.run(["man", "-l", f.name], capture_output=True, text=True,
                                       env={"PATH": "/usr/bin:/bin", "MANPAGER": "cat",
                                            "COLUMNS": "100"})
            self.assertEqual(shown.returncode, 0, shown.stderr)
            self.assertIn("sbx stats", shown.stdout)
            self.assertNotIn("warning", shown.stderr)
        sid = self.create()
        script = self.run_ok("completion", "bash").stdout.decode()

        def complete(*words):
            prog = script + "\nCOMP_WORDS=(%s); COMP_CWORD=%d; _sbx; printf '%%s\\n' \"${COMPREPLY[@]}\"\n" % (
                " ".join("'%s'" % w for w in words), len(words) - 1)
            p = subprocess.run(["bash", "-c", prog], capture_output=True, text=True,
                               env={"PATH": os.path.dirname(SBX) + ":/usr/bin:/bin",
                                    "SBX_STATE": self.d.state})
            self.assertEqual(p.returncode, 0, p.stderr)
            return sorted(p.stdout.split())

        self.assertEqual(complete("sbx", "sta"), ["stats"])
        self.assertTrue(set(commands) <= set(complete("sbx", "")), commands)
        self.assertEqual(complete("sbx", "template", "pr"), ["prune"])
        self.assertEqual(complete("sbx", "exec", "--t"), ["--timeout", "--tty"])
        self.assertEqual(complete("sbx", "kill", sid[:4]), [sid])
        self.assertEqual(complete("sbx", "ls", "--f"), ["--filter", "--format"])
        p = self.d.sbx("completion", "fish")
        self.assertEqual(p.returncode, 2, p)
        zsh = self.run_ok("completion", "zsh").stdout.decode()
        self.assertTrue(zsh.startswith("#compdef sbx\n"))
        self.d.kill(sid)

    def test_logs(self):
        sid = self.create()
        p = self.run_ok("logs", sid)
        self.assertEqual(p.stdout, b"")
        self.assertIn(b"no process whose output is kept", p.stderr)
        first = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                           {"cmd": "echo one; echo err >&2; exec sleep 1000"}).json()["pid"]
        self.d.sh(sid, "true")  # an exec between: not kept once it ended
        # the second ends when its input does: -f below follows it to its end
        second = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                            {"cmd": "echo two; read line; echo got-$line", "stdin_open": True}
                            ).json()["pid"]
        # until each has printed (the processes run on their own), on both
        # streams: the daemon reads the two pipes apart
        for pid, want in ((first, (b"one\n", b"err\n")), (second, (b"two\n", b""))):
            for _ in range(100):
                p = self.run_ok("logs", sid, str(pid))
                if (p.stdout, p.stderr) == want:
                    break
                time.sleep(0.1)
        p = self.run_ok("logs", sid)
        self.assertEqual(p.stdout, b"one\ntwo\n")
        self.assertEqual(p.stderr.decode().splitlines(), [
            "==> pid %d: /bin/bash -c echo one; echo err >&2; exec sleep 1000 <==" % first, "err",
            "==> pid %d: /bin/bash -c echo two; read line; echo got-$line <==" % second])
        p = self.run_ok("logs", sid, str(first))
        self.assertEqual((p.stdout, p.stderr), (b"one\n", b"err\n"))
        # -f: the newest, as it prints, until it ends
        env = {"PATH": "/usr/bin:/bin", "SBX_STATE": self.d.state}
        f = subprocess.Popen([SBX, "logs", "-f", sid, str(second)], stdout=subprocess.PIPE,
                             env=env)
        self.assertEqual(f.stdout.readline(), b"two\n")
        r = self.d.api("POST", "/v1/sandboxes/%s/processes/%d/stdin?eof=1" % (sid, second),
                       b"x\n", raw=True)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(f.stdout.readline(), b"got-x\n")
        self.assertEqual(f.wait(timeout=60), 0)
        f.stdout.close()
        p = self.d.sbx("logs", sid, "999")
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p, "999")
        self.assertEqual(self.d.sbx("logs", sid, "x").returncode, 2)
        self.d.kill(sid)

    def test_create(self):
        sid = self.create()
        sb = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual((sb["user"], sb["timeout"], sb["limits"]["memory"], sb["limits"]["cpus"],
                          sb["limits"]["pids"], sb["limits"]["disk"]),
                         ("user", 300, 512 << 20, 1, 256, 1 << 30))
        data = self.tmpfile(b"seeded", mode=0o640)
        sid = self.create("--memory", "256M", "--cpus", "0.5", "--pids", "64", "--disk", "64M",
                          "--timeout", "90", "-e", "K=V", "-u", "root", "--template", "base",
                          "--file", data + ":/tmp/seed")
        sb = self.d.api("GET", "/v1/sandboxes/" + sid).json()
        self.assertEqual((sb["user"], sb["timeout"], sb["env"], sb["template"]),
                         ("root", 90, {"K": "V"}, "base"))
        self.assertEqual(sb["limits"], {"memory": 256 << 20, "cpus": 0.5, "pids": 64,
                                        "disk": 64 << 20})
        res = self.d.sh(sid, "cat /tmp/seed; stat -c ' %a' /tmp/seed; echo $K")
        self.assertEqual(res["stdout"], "seeded 640\nV\n")
        # Refused: nothing created, one line.
        before = sandbox_ids(self.d)
        for args in (("--memory", "1T"), ("--bogus",), ("extra-arg",),
                     ("--file", "/nonexistent:/tmp/x")):
            with self.subTest(args=args):
                p = self.d.sbx("create", *args)
                self.assertNotEqual(p.returncode, 0)
                self.assertEqual(p.stdout, b"")
                self.assertOneLine(p)
        self.assertEqual(sandbox_ids(self.d), before)

    def test_exec(self):
        sid = self.create("-e", "S=sandbox")
        p = self.d.sbx("exec", sid, "--", "sh", "-c", "echo $S; echo e >&2; exit 4")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (4, b"sandbox\n", b"e\n"))
        p = self.run_ok("exec", "-e", "S=exec", "-w", "/tmp", "-u", "root", sid, "--", "sh", "-c",
                        'echo "$S $(pwd) $(id -u)"')
        self.assertEqual(p.stdout, b"exec /tmp 0\n")
        p = self.run_ok("exec", sid, "pwd")  # the "--" is optional
        self.assertEqual(p.stdout, b"/home/user\n")
        p = self.d.sbx("exec", "--timeout", "500ms", sid, "--", "sleep", "60")
        self.assertEqual(p.returncode, 124)
        self.assertOneLine(p, "timed out")
        p = self.d.sbx("exec", sid, "--", "no-such-command")
        self.assertEqual(p.returncode, 127)
        self.assertOneLine(p, "no-such-command")
        p = self.d.sbx("exec", sid, "--", "sh", "-c", "kill -KILL $$")
        self.assertEqual(p.returncode, 137)
        self.assertOneLine(p, "SIGKILL")
        data = os.urandom(1 << 20)
        p = self.run_ok("exec", "-i", sid, "--", "sha256sum", input=data)
        self.assertEqual(p.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())
        # State persists between execs: it is one sandbox.
        self.run_ok("exec", sid, "--", "sh", "-c", "echo kept > /tmp/state")
        self.assertEqual(self.run_ok("exec", sid, "cat", "/tmp/state").stdout, b"kept\n")
        # Unknown sandbox: 125, one line naming it.
        p = self.d.sbx("exec", "zzzzzzzzzzzzzzzzzzzz", "--", "true")
        self.assertEqual((p.returncode, p.stdout), (125, b""))
        self.assertOneLine(p, "zzzzzzzzzzzzzzzzzzzz")
        p = self.d.sbx("exec", sid)
        self.assertEqual(p.returncode, 125)
        self.assertOneLine(p)
        self.assertEqual(sandbox_ids(self.d), [sid])

    def test_cp(self):
        sid = self.create()
        blob = os.urandom(4 << 20) + bytes(range(256))
        src = self.tmpfile(blob, mode=0o750)
        # In: to a path, keeping the mode.
        self.run_ok("cp", src, sid + ":/tmp/in.bin")
        st = self.d.api("GET", "/v1/sandboxes/%s/files/stat?path=/tmp/in.bin" % sid).json()
        self.assertEqual((st["size"], st["mode"], st["uid"]), (len(blob), "0750", 1000))
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/files?path=/tmp/in.bin" % sid).body,
                         blob)
        # In: into a directory, keeping the name.
        self.run_ok("cp", src, sid + ":/tmp")
        self.run_ok("cp", src, sid + ":/home/user/")
        names = self.d.api("GET", "/v1/sandboxes/%s/files/list?path=/tmp" % sid).json()["entries"]
        self.assertIn(os.path.basename(src), [e["name"] for e in names])
        # In: from stdin.
        self.run_ok("cp", "-", sid + ":/tmp/from-stdin", input=b"piped\x00bytes")
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/%s/files?path=/tmp/from-stdin"
                                    % sid).body, b"piped\x00bytes")
        # Out: to stdout, byte exact.
        p = self.run_ok("cp", sid + ":/tmp/in.bin", "-")
        self.assertEqual(hashlib.sha256(p.stdout).digest(), hashlib.sha256(blob).digest())
        # Out: to a file, with the mode; to a directory, with the name.
        out_dir = tempfile.mkdtemp(prefix="sbx-cli-out-")
        self.addCleanup(shutil.rmtree, out_dir, True)
        self.run_ok("cp", sid + ":/tmp/in.bin", os.path.join(out_dir, "copy"))
        with open(os.path.join(out_dir, "copy"), "rb") as f:
            self.assertEqual(f.read(), blob)
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(os.stat(os.path.join(out_dir, "copy")).st_mode & 0o777, 0o750 & ~umask)
        self.run_ok("cp", sid + ":/tmp/from-stdin", out_dir)
        self.assertTrue(os.path.exists(os.path.join(out_dir, "from-stdin")))
        # Failures: one line, no local file left behind.
        p = self.d.sbx("cp", sid + ":/tmp/missing", os.path.join(out_dir, "missing"))
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p, "/tmp/missing")
        self.assertFalse(os.path.exists(os.path.join(out_dir, "missing")))
        p = self.d.sbx("cp", src, sid + ":/etc/x")
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p)
        p = self.d.sbx("cp", "/nonexistent", sid + ":/tmp/x")
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p, "/nonexistent")
        for args in (("cp", src, "/tmp/local"), ("cp", sid + ":/a", sid + ":/b"), ("cp", src)):
            with self.subTest(args=args):
                p = self.d.sbx(*args)
                self.assertEqual(p.returncode, 2, p)
                self.assertOneLine(p)

    def test_ls(self):
        p = self.run_ok("ls")
        lines = p.stdout.decode().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("ID"), lines)
        self.assertEqual(json.loads(self.run_ok("ls", "--json").stdout), [])
        ids = [self.create("--memory", "256M"), self.create("-u", "root")]
        lines = self.run_ok("ls").stdout.decode().splitlines()
        self.assertEqual(len(lines), 3)
        self.assertEqual([l.split()[0] for l in lines[1:]], ids)
        self.assertIn("256M", lines[1])
        users = self.run_ok("ls", "--format", "{{.user}}").stdout.decode().split()
        self.assertEqual(users, ["user", "root"])
        listed = json.loads(self.run_ok("ls", "--json").stdout)
        self.assertEqual([sb["id"] for sb in listed], ids)
        self.assertEqual(listed, self.d.api("GET", "/v1/sandboxes").json()["sandboxes"])
        p = self.d.sbx("ls", "--bogus")
        self.assertEqual(p.returncode, 2)
        self.assertOneLine(p)

    def test_kill(self):
        ids = [self.create() for _ in range(3)]
        p = self.run_ok("kill", ids[0], ids[1])
        self.assertEqual((p.stdout, p.stderr), (b"", b""))
        self.assertEqual(sandbox_ids(self.d), [ids[2]])
        p = self.d.sbx("kill", ids[0])
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p, ids[0])
        # An unknown id among good ones: the good ones still go.
        p = self.d.sbx("kill", "zzzzzzzzzzzzzzzzzzzz", ids[2])
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p, "zzzzzzzzzzzzzzzzzzzz")
        self.assertEqual(sandbox_ids(self.d), [])
        p = self.d.sbx("kill")
        self.assertEqual(p.returncode, 2)
        self.assertOneLine(p)

    def test_keys(self):
        p = self.run_ok("key", "create", "--tenant", "acme")
        key = p.stdout.decode().splitlines()[-1]
        self.assertRegex(key, KEY_RE)
        p = self.run_ok("key", "create")
        other = p.stdout.decode().splitlines()[-1]
        self.assertRegex(other, KEY_RE)
        keys = self.d.api("GET", "/v1/keys").json()["keys"]
        mine = [k for k in keys if k["prefix"] == key[:8]][0]
        self.assertEqual(mine["tenant"], "acme")
        self.assertEqual([k["tenant"] for k in keys if k["prefix"] == other[:8]], ["default"])
        listing = self.run_ok("key", "ls").stdout.decode()
        self.assertIn(mine["id"], listing)
        self.assertIn("acme", listing)
        self.assertNotIn(key, listing)  # shown once, never listed
        self.assertNotIn(key[8:], listing)
        # The key works over TCP until removed.
        tcp = {"SBX_URL": "http://" + self.d.listen, "SBX_API_KEY": key}
        self.assertEqual(self.d.sbx("run", "--", "true", env=tcp).returncode, 0)
        p = self.run_ok("key", "rm", mine["id"])
        self.assertEqual(p.stdout, b"")
        self.assertNotIn(mine["id"], self.run_ok("key", "ls").stdout.decode())
        p = self.d.sbx("run", "--", "true", env=tcp)
        self.assertEqual(p.returncode, 125, p)
        self.assertOneLine(p)
        self.assertError(self.d.tcp("GET", "/v1/sandboxes", key=key), 401, "unauthorized")
        p = self.d.sbx("key", "rm", mine["id"])
        self.assertEqual(p.returncode, 1)
        self.assertOneLine(p, mine["id"])
        p = self.d.sbx("key", "create", "--tenant", "bad name")
        self.assertEqual(p.returncode, 1)
        self.assertOneLine(p)
        # Over TCP, key management is refused.
        p = self.d.sbx("key", "ls", env={"SBX_URL": "http://" + self.d.listen,
                                         "SBX_API_KEY": other})
        self.assertEqual(p.returncode, 1, p)
        self.assertOneLine(p)

    def test_tcp(self):
        key = self.run_ok("key", "create", "--tenant", "remote").stdout.decode().splitlines()[-1]
        tcp = {"SBX_URL": "http://" + self.d.listen, "SBX_API_KEY": key,
               "SBX_STATE": "/nonexistent"}
        p = self.d.sbx("run", "--", "sh", "-c", "echo over tcp; exit 6", env=tcp)
        self.assertEqual((p.returncode, p.stdout), (6, b"over tcp\n"))
        data = os.urandom(1 << 20)
        p = self.d.sbx("run", "-i", "--", "sha256sum", input=data, env=tcp)
        self.assertEqual(p.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())
        local = self.create()
        p = self.d.sbx("create", env=tcp)
        self.assertEqual(p.returncode, 0, p)
        remote = p.stdout.decode().splitlines()[-1]
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + remote).json()["tenant"], "remote")
        # The tenant sees only its own sandbox.
        listed = json.loads(self.d.sbx("ls", "--json", env=tcp).stdout)
        self.assertEqual([sb["id"] for sb in listed], [remote])
        p = self.d.sbx("exec", local, "--", "true", env=tcp)
        self.assertEqual(p.returncode, 125)
        self.assertOneLine(p, "not found")
        self.assertEqual(self.d.sbx("exec", remote, "--", "true", env=tcp).returncode, 0)
        self.run_ok("cp", "-", remote + ":/tmp/x", input=b"tcp file", env=tcp)
        self.assertEqual(self.run_ok("cp", remote + ":/tmp/x", "-", env=tcp).stdout, b"tcp file")
        p = self.d.sbx("kill", local, env=tcp)
        self.assertEqual(p.returncode, 1)
        self.assertIn(local, sandbox_ids(self.d))
        self.run_ok("kill", remote, env=tcp)
        self.assertEqual(sandbox_ids(self.d), [local])
        # Missing or wrong key: 125 for run, one line.
        for env in ({"SBX_URL": "http://" + self.d.listen},
                    {"SBX_URL": "http://" + self.d.listen, "SBX_API_KEY": "e2b_" + "0" * 40}):
            p = self.d.sbx("run", "--", "true", env=env)
            self.assertEqual(p.returncode, 125, p)
            self.assertOneLine(p)


if __name__ == "__main__":
    import unittest
    unittest.main()


class CliSocketGroup(CliTest):
    """--socket-group: the socket is root:GROUP 0660, so the group's members
    use the CLI as root does (they are the administrator); anyone else is
    refused by the kernel; off by default (root:root 0600)."""
    group = "sbx-test-sock-%d" % os.getpid()

    @classmethod
    def setUpClass(cls):
        subprocess.run(["groupadd", cls.group], check=True)
        cls.addClassCleanup(subprocess.run, ["groupdel", cls.group])
        import grp
        cls.gid = grp.getgrnam(cls.group).gr_gid
        cls.extra_args = ("--socket-group", cls.group)
        super().setUpClass()

    def as_uid(self, groups, *args):
        # an account nobody has, in the group or not
        def become():
            os.setgroups(groups)
            os.setgid(61234)
            os.setuid(61234)
        return subprocess.run([SBX] + list(args), capture_output=True, env=self.env(),
                              preexec_fn=become, timeout=120)

    def test_members_use_the_socket_others_are_refused(self):
        st = os.stat(self.d.socket_path)
        self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o777), (0, self.gid, 0o660))
        os.chmod(self.d.state, 0o711)  # the group reaches the socket through it
        p = self.as_uid([self.gid], "create")
        self.assertEqual(p.returncode, 0, p)
        sid = p.stdout.decode().split()[-1]
        self.assertEqual(self.as_uid([self.gid], "ls", "-q").stdout.decode(), sid + "\n")
        p = self.as_uid([], "ls")
        self.assertEqual(p.returncode, 125, p)
        self.assertIn(b"Permission denied", p.stderr)
        self.assertEqual(self.as_uid([self.gid], "kill", sid).returncode, 0)

    def test_a_group_nobody_has_is_refused(self):
        state = tempfile.mkdtemp(prefix="sbx-test-sockgrp-")
        self.addCleanup(shutil.rmtree, state, True)
        p = subprocess.run([SBXD, "--state", state, "--socket-group", "no-such-group-here"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2, p)
        self.assertIn(b"--socket-group `no-such-group-here`: no such group", p.stderr)
        self.assertEqual(os.listdir(state), [])

