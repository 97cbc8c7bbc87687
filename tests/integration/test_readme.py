"""The README's examples, run as written (issue 21): every ```sh block of
"The CLI" and "The API" (and "E2B SDKs, unchanged": test_readme_e2b,
which `make test-e2b` runs after npm ci) is one bash script with
`set -euo pipefail`, against a daemon of its own, so README.md cannot drift
from what sbx does.

What the test changes, and only this: `sbx` on PATH is the build's; the
daemon's state is the test's (SBX_STATE, and `/var/lib/sbx/sbx.sock` in
curl's lines becomes its socket); `127.0.0.1:8080` becomes its TCP
listener; node finds `e2b` in tests/e2b/node_modules (the README says
`npm install e2b`). The files the examples name (job.sh, model.py,
data.csv, analysis.py, key.txt, in.txt, python.tar, rootfs/) are made in
the script's working directory first; python.tar is an OCI archive of the
host's python3 and the libraries it links, as `docker save` of a Python
image would hold one.
"""
import os
import re
import shutil
import subprocess
import tarfile
import io
import tempfile

from harness import SBX, DaemonTest
from test_templates import oci_archive

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(REPO, "README.md")
CACHE = "/var/tmp/sbx-recipe-cache"  # shared with test_templates_recipe
NODE_MODULES = os.path.join(REPO, "tests", "e2b", "node_modules")


def blocks(section):
    """The ```sh blocks under the README heading `section` (to the next
    heading)."""
    with open(README) as f:
        text = f.read()
    m = re.search(r"^#+ %s\n" % re.escape(section), text, re.M)
    assert m, "README has no section %r" % section
    rest = text[m.end():]
    end = re.search(r"^#+ ", rest, re.M)  # the section's own text, not its subsections
    body = rest[:end.start()] if end else rest
    found = re.findall(r"^```sh\n(.*?)^```\n", body, re.M | re.S)
    assert found, "no sh block in README section %r" % section
    return found


def python_layer():
    """A layer tar with the host's python3, its libraries and the loader."""
    buf = io.BytesIO()
    out = subprocess.run(["ldd", "/usr/bin/python3.11"], capture_output=True, text=True,
                         check=True).stdout
    libs = re.findall(r"=> (/\S+)", out)
    loader = re.search(r"^\s*(/\S*ld-linux\S*)", out, re.M).group(1)
    with tarfile.open(fileobj=buf, mode="w") as t:
        def add(real, inside):
            info = t.gettarinfo(os.path.realpath(real), arcname=inside)
            with open(os.path.realpath(real), "rb") as f:
                t.addfile(info, f)
        def symlink(name, target):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            t.addfile(link)
        # merged /usr, as Debian's images have it
        for top in ("bin", "lib", "lib64"):
            symlink(top, "usr/" + top)
        add("/usr/bin/python3.11", "usr/bin/python3.11")
        symlink("usr/bin/python3", "python3.11")
        for lib in libs:
            add(lib, "usr/lib/x86_64-linux-gnu/" + os.path.basename(lib))
        add(loader, "usr/lib64/" + os.path.basename(loader))
    return buf.getvalue()


def make_files(cwd):
    def write(name, text, mode=0o644):
        path = os.path.join(cwd, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
    write("job.sh", "#!/bin/sh\necho job done in $(pwd)\n", 0o755)
    write("model.py", "print('model', sum(range(10)))\n")
    write("data.csv", "a,b\n1,2\n3,4\n")
    write("analysis.py", "print('analysis', df.a.sum() * 10)\n")
    write("key.txt", "sk-test-not-a-real-key\n")
    write("in.txt", "input for the files API\n")
    os.makedirs(os.path.join(cwd, "rootfs", "usr", "share", "tools"))
    write("rootfs/usr/share/tools/README", "a directory template\n")
    with open(os.path.join(cwd, "python.tar"), "wb") as f:
        f.write(oci_archive([python_layer()], config={"Env": ["PATH=/usr/bin:/bin"]}))


class ReadmeScript:
    """Running a README block as a script against the class's daemon
    (cls.d), in a scratch directory with the examples' files."""
    listen = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cwd = tempfile.mkdtemp(prefix="sbx-test-readme-")
        cls.bin = os.path.join(cls.cwd, ".bin")
        os.mkdir(cls.bin)
        os.symlink(os.path.abspath(SBX), os.path.join(cls.bin, "sbx"))
        make_files(cls.cwd)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.cwd, ignore_errors=True)
        super().tearDownClass()

    def run_block(self, script, timeout):
        env = {"PATH": self.bin + ":/usr/bin:/bin", "HOME": self.cwd, "SBX_STATE": self.d.state,
               "NODE_PATH": NODE_MODULES, "LANG": "C.UTF-8"}
        script = script.replace("/var/lib/sbx/sbx.sock", self.d.socket_path)
        script = script.replace("127.0.0.1:8080", self.d.listen)
        p = subprocess.run(["bash", "-c", "set -euo pipefail -x\n" + script + "\necho README-OK\n"],
                           cwd=self.cwd, env=env, capture_output=True, text=True,
                           timeout=timeout)
        self.assertEqual(p.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (p.stdout, p.stderr[-6000:]))
        self.assertTrue(p.stdout.endswith("README-OK\n"), p.stdout)
        return p.stdout


class ReadmeTest(ReadmeScript, DaemonTest):
    pool = 1
    extra_args = ("--template-cache", CACHE)

    def test_cli(self):
        (script,) = blocks("The CLI")
        # debootstrap on a fresh cache, then apt: a bound, not a timing
        out = self.run_block(script, timeout=2400)
        lines = out.splitlines()
        for want in (str(2 ** 100), "job done in /home/user", "model 45", "HELLO", "3",
                     "analysis 30"):
            self.assertIn(want, lines, out)
        # The image's python3 is the host's: Debian 12's 3.11.N.
        self.assertTrue(any(re.fullmatch(r"Python 3\.11\.\d+", l) for l in lines), out)
        with open(os.path.join(self.cwd, "lines.txt")) as f:
            self.assertEqual(f.read(), "3\n")
        # the recipe's build command ran: jq is in the template
        sid = self.d.create(template="deb")
        res = self.d.exec(sid, argv=["jq", "-n", "1+1"])
        self.assertEqual((res["exit_code"], res["stdout"]), (0, "2\n"), res)
        self.d.kill(sid)
        for name in ("deb", "tools"):
            self.assertEqual(self.d.api("DELETE", "/v1/templates/" + name).status, 204)

    def test_api(self):
        # The API's, then Prometheus' scrape of /metrics, in one script.
        script = "\n".join(blocks("The API"))
        out = self.run_block(script, timeout=600)
        self.assertRegex(out, r'(?m)^sbx_sandbox_creates_total\{isolation="namespace"\} [1-9]')
        self.assertRegex(out, r'"stdout": ?"hi\\n')
        self.assertIn('{"type":"stdout","data":"3\\n"}', out.replace(" ", ""))
        self.assertIn("input for the files API\n", out)
