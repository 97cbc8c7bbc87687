"""The code interpreter: template code-interpreter-v1, whose server
(share/sbx/code_server.py, IPython) runs inside the sandbox as its user;
the native routes POST /v1/sandboxes/ID/code (NDJSON) and .../contexts;
`sbx code`. Checked here:

- state persists across runs; the last expression is the main result;
  stdout streams (the test answers a line the code printed while the code
  waits for that answer); per-run env; execution counts;
- rich results: a matplotlib figure is a PNG that decodes to its size; a
  DataFrame is an HTML table; display() of Markdown, JSON, SVG, LaTeX;
- errors: name, value, traceback; syntax errors;
- contexts: isolated, created with a cwd, listed, deleted, restarted;
  a fork has its parent's variables and diverges afterwards; cold contexts;
- timeouts interrupt (KeyboardInterrupt) and keep the state; code that
  ignores the interrupt is killed, reported, and restartable;
- os._exit and a segfault are reported and the context restarts;
- from Python inside a context: no /etc/shadow, /usr read-only (EROFS), no
  network (ENETUNREACH), ptrace and mount refused (EPERM), uid 1000;
- a hostile server in the sandbox (garbage, non-events, huge lines, early
  end) gets a clear error event and the daemon goes on serving;
- errors of the API: unknown context, bad ids, other languages, a base
  sandbox (no interpreter), unknown fields;
- the CLI: inline code, -f FILE, stdin, --json, --context, exit status 1
  and the traceback on an error; `sbx run --template code-interpreter-v1`.
"""
import base64
import json
import os
import struct
import tempfile
import zlib

from harness import DaemonTest, UnixHTTPConnection

ASAN_SUBSET = True  # the daemon parses a hostile server's answers here

TEMPLATE = "code-interpreter-v1"


def decode_png(data):
    """Signature, IHDR, and IDAT inflating to exactly height rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    off, idat, width, height, bpp = 8, b"", 0, 0, 0
    while off < len(data):
        (n,) = struct.unpack(">I", data[off:off + 4])
        kind, body = data[off + 4:off + 8], data[off + 8:off + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8, depth
            bpp = {2: 3, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        off += 12 + n
        if kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + width * bpp), (len(raw), width, height)
    return width, height


CHART_AND_TABLE = ("import matplotlib.pyplot as plt\n"
                   "plt.plot([1, 2, 3], [3, 1, 2])\n"
                   "import pandas as pd\n"
                   "pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")


def check_chart_and_table(test, ev):
    """The events of CHART_AND_TABLE: the DataFrame as the main result
    (HTML and text), the figure as one PNG beside it. Shared with
    test_vm_code."""
    main = [e for e in ev if e["type"] == "result" and e["is_main_result"]][0]
    test.assertIn("<table", main["html"])
    test.assertIn("<th>a</th>", main["html"])
    test.assertEqual(main["text"], "   a  b\n0  1  x\n1  2  y")
    # E2B's e2b/data of the frame, and e2b/chart of the figure beside its PNG
    test.assertEqual(main["data"], {"columns": ["a", "b"], "index": [0, 1], "data": [[1, "x"], [2, "y"]]})
    pngs = [e for e in ev if e["type"] == "result" and "png" in e]
    test.assertEqual(len(pngs), 1, ev)
    test.assertFalse(pngs[0]["is_main_result"])
    chart = pngs[0]["chart"]
    test.assertEqual((chart["type"], chart["x_scale"], chart["elements"]),
                     ("line", "linear", [{"label": None, "points": [[1, 3], [2, 1], [3, 2]]}]))
    w, h = decode_png(base64.b64decode(pngs[0]["png"], validate=True))
    # 6.4 x 4.8 in at 100 dpi, cropped to the drawing (bbox_inches="tight").
    test.assertTrue(300 < w <= 640 and 200 < h <= 480, (w, h))


def check_stdout_streams(test, d, sid, wait_s):
    """A cell's stdout reaches the client while the cell runs: the code
    prints, then waits (up to wait_s) for a file that the test writes only
    after it has read that line from the stream. Shared with test_vm_code."""
    code = ("import os, time\nprint('waiting', flush=True)\n"
            "for _ in range(%d):\n"
            "    if os.path.exists('/tmp/go'): break\n"
            "    time.sleep(0.05)\n"
            "open('/tmp/go').read()" % (wait_s * 20))
    conn = UnixHTTPConnection(d.socket_path, timeout=wait_s * 2)
    try:
        conn.request("POST", "/v1/sandboxes/%s/code" % sid, body=json.dumps({"code": code}))
        resp = conn.getresponse()
        test.assertEqual(resp.status, 200)
        seen = []
        while True:
            ev = json.loads(resp.readline())
            seen.append(ev)
            if ev["type"] == "stdout":
                break
        test.assertEqual(seen[-1]["text"], "waiting\n")
        r = d.upload(sid, "/tmp/go", b"went")
        test.assertEqual(r.status, 201, r)
        rest = [json.loads(line) for line in resp.read().decode().splitlines()]
    finally:
        conn.close()
    test.assertEqual([e["text"] for e in rest if e.get("is_main_result")], ["went"])
    test.assertEqual(rest[-1], {"type": "end_of_execution"})


class CodeTest(DaemonTest):
    pool = 1
    sid = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.sid = cls.d.create(template=TEMPLATE, timeout="30m")

    def tearDown(self):
        # The shared sandbox stays; anything else a test made goes.
        r = self.d.api("GET", "/v1/sandboxes")
        for sb in r.json().get("sandboxes", []):
            if sb["id"] != self.sid:
                self.d.kill(sb["id"])

    # ---- helpers

    def run_code(self, code, sid=None, **fields):
        """The events of one run (a 200 stream that ends with end_of_execution)."""
        fields["code"] = code
        r = self.d.api("POST", "/v1/sandboxes/%s/code" % (sid or self.sid), fields)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("Content-Type"), "application/x-ndjson")
        # Keepalives are the protocol's (one per 5 s of a cell's silence,
        # docs/api.md): how many a cell gets is the machine's speed, not the
        # cell's result.
        events = [json.loads(line) for line in r.body.decode().splitlines()]
        events = [e for e in events if e["type"] != "keepalive"]
        self.assertEqual(events[-1], {"type": "end_of_execution"}, events)
        return events

    def main_text(self, events):
        mains = [e for e in events if e["type"] == "result" and e["is_main_result"]]
        self.assertEqual(len(mains), 1, events)
        return mains[0]["text"]

    def error(self, events):
        errs = [e for e in events if e["type"] == "error"]
        self.assertEqual(len(errs), 1, events)
        return errs[0]

    def stdout(self, events, kind="stdout"):
        return "".join(e["text"] for e in events if e["type"] == kind)

    def context(self, sid=None, **fields):
        r = self.d.api("POST", "/v1/sandboxes/%s/contexts" % (sid or self.sid), fields)
        self.assertEqual(r.status, 201, r)
        ctx = r.json()
        self.assertEqual(sorted(ctx), ["cwd", "id", "language"])
        # Gone with the test: the sandbox is shared, and a JVM, Node.js or
        # R left running would take the memory the next tests need.
        self.addCleanup(self.d.api, "DELETE", "/v1/sandboxes/%s/contexts/%s" % (sid or self.sid, ctx["id"]))
        return ctx["id"]

    # ---- runs and results

    def test_state_persists_and_last_expression_is_the_main_result(self):
        ctx = self.context()
        ev = self.run_code("a = 20\nb = 22", context=ctx)
        self.assertEqual([e["type"] for e in ev], ["number_of_executions", "end_of_execution"])
        first = ev[0]["execution_count"]
        ev = self.run_code("print('sum is', a + b)\na + b", context=ctx)
        self.assertEqual(ev[0], {"type": "number_of_executions", "execution_count": first + 1})
        self.assertEqual(self.stdout(ev), "sum is 42\n")
        self.assertEqual(self.main_text(ev), "42")
        ev = self.run_code("import sys; print('e', file=sys.stderr); 'text'", context=ctx)
        self.assertEqual(self.stdout(ev, "stderr"), "e\n")
        self.assertEqual(self.main_text(ev), "text")  # quotes dropped, as E2B does
        # Output of child processes and C code (fds 1 and 2) too.
        ev = self.run_code("import os; os.system('echo from-shell; echo e2 >&2')", context=ctx)
        self.assertIn("from-shell\n", self.stdout(ev))
        self.assertIn("e2\n", self.stdout(ev, "stderr"))
        # Per-run variables, the sandbox's own, and nothing left afterwards.
        ev = self.run_code("import os; os.environ['K']", context=ctx, env={"K": "v1"})
        self.assertEqual(self.main_text(ev), "v1")
        ev = self.run_code("import os; os.environ.get('K', 'unset')", context=ctx)
        self.assertEqual(self.main_text(ev), "unset")
        ev = self.run_code("import os; os.getuid(), os.getcwd()", context=ctx)
        self.assertEqual(self.main_text(ev), "(1000, '/home/user')")

    def test_stdout_streams_while_the_code_runs(self):
        check_stdout_streams(self, self.d, self.sid, wait_s=30)

    def test_rich_results(self):
        check_chart_and_table(self, self.run_code(CHART_AND_TABLE))
        ev = self.run_code(
            "from IPython.display import display, Markdown, JSON, SVG, Latex\n"
            "display(Markdown('**b**'))\n"
            "display(JSON({'k': [1, 2]}))\n"
            "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>'))\n"
            "display(Latex('$x^2$'))")
        results = [e for e in ev if e["type"] == "result"]
        self.assertEqual(results[0]["markdown"], "**b**")
        self.assertEqual(results[1]["json"], {"k": [1, 2]})
        self.assertTrue(results[2]["svg"].startswith("<svg"), results[2])
        self.assertEqual(results[3]["latex"], "$x^2$")
        self.assertFalse(any(r["is_main_result"] for r in results))

    def chart(self, code):
        ev = self.run_code("import matplotlib.pyplot as plt\nimport numpy as np\n" + code + "\nplt.show()")
        charts = [e["chart"] for e in ev if e["type"] == "result" and "chart" in e]
        self.assertEqual(len(charts), 1, ev)
        self.assertEqual([e["type"] for e in ev if e["type"] == "error"], [], ev)
        return charts[0]

    def test_charts_are_e2b_chart_objects(self):
        c = self.chart("import datetime\nd = [datetime.date(2023, 9, 1) + datetime.timedelta(days=i) for i in range(10)]\n"
                       "plt.plot(d, np.arange(10), label='n'); plt.plot(d, np.arange(10) ** 2, label='sq')\n"
                       "plt.xlabel('Time (s)'); plt.ylabel('Amplitude [Hz]'); plt.title('T')")
        self.assertEqual((c["type"], c["title"], c["x_label"], c["x_unit"], c["y_unit"], c["x_scale"], c["y_scale"]),
                         ("line", "T", "Time (s)", "s", "Hz", "datetime", "linear"))
        self.assertEqual([(e["label"], len(e["points"])) for e in c["elements"]], [("n", 10), ("sq", 10)])
        self.assertEqual(c["elements"][1]["points"][3], ["2023-09-04T00:00:00+00:00", 9])
        self.assertTrue(all(isinstance(t, str) for t in c["x_ticks"] + c["x_tick_labels"] + c["y_tick_labels"]), c)
        c = self.chart("plt.bar(['a', 'b'], [3, 4.5], label='g'); plt.ylabel('n')")
        self.assertEqual((c["type"], c["y_label"], c["elements"]), ("bar", "n", [
            {"label": "a", "value": 3, "group": "g"}, {"label": "b", "value": 4.5, "group": "g"}]))
        c = self.chart("plt.boxplot([[85, 90, 78, 92, 88], [95, 89, 76, 91, 84, 87]], labels=['A', 'B'])")
        self.assertEqual((c["type"], c["elements"][1]), ("box_and_whisker", {
            "label": "B", "min": 84, "first_quartile": 84.75, "median": 88, "third_quartile": 90.5, "max": 95,
            "outliers": [76]}))
        c = self.chart("plt.pie([90, 10], labels=['no', 'yes'], startangle=90); plt.title('P')")
        self.assertEqual(c, {"type": "pie", "title": "P", "elements": [
            {"label": "no", "angle": 324, "radius": 1}, {"label": "yes", "angle": 36, "radius": 1}]})
        c = self.chart("plt.scatter([1, 2], [3, 4], label='s'); plt.yscale('log')")
        self.assertEqual((c["type"], c["y_scale"], c["elements"]), ("scatter", "log", [{"label": "s", "points": [[1, 3], [2, 4]]}]))
        c = self.chart("plt.plot([1, 2, 3], ['x', 'y', 'z'])")
        self.assertEqual((c["y_scale"], c["elements"][0]["points"]), ("categorical", [[1, "x"], [2, "y"], [3, "z"]]))
        c = self.chart("fig, axs = plt.subplots(1, 2); fig.suptitle('S'); axs[0].plot([1, 2]); axs[0].set_title('a')\n"
                       "axs[1].scatter([1], [2]); axs[1].set_title('b')")
        self.assertEqual((c["type"], c["title"], [(e["type"], e["title"]) for e in c["elements"]]),
                         ("superchart", "S", [("line", "a"), ("scatter", "b")]))
        c = self.chart("plt.gca().add_artist(plt.Circle((0, 0), 1)); plt.title('C')")
        self.assertEqual(c, {"type": "unknown", "title": "C", "elements": []})
        # what JSON cannot say is null, not an invalid line
        c = self.chart("plt.plot([1, float('nan'), float('inf')])")
        self.assertEqual(c["elements"][0]["points"], [[0, 1], [1, None], [2, None]])
        # too many points: the PNG only
        ev = self.run_code("import matplotlib.pyplot as plt\nplt.plot(range(200000))\nplt.show()")
        self.assertEqual([("png" in e, "chart" in e) for e in ev if e["type"] == "result"], [(True, False)])

    def test_pil_image_shown(self):
        # show() is a result even where the host has a desktop viewer
        # (xdg-open comes with r-base-core)
        ev = self.run_code("from PIL import Image\nImage.new('RGB', (5, 2)).show()\nprint('done')")
        pngs = [e for e in ev if e["type"] == "result" and "png" in e]
        self.assertEqual([decode_png(base64.b64decode(p["png"])) for p in pngs], [(5, 2)], ev)

    def test_pil_image_saved_is_shown(self):
        ev = self.run_code("from PIL import Image\nImage.new('RGB', (4, 3)).save('/tmp/pil.png')\n"
                           "import matplotlib.pyplot as plt\nplt.plot([1]); plt.savefig('/tmp/fig.png'); plt.close()")
        pngs = [e for e in ev if e["type"] == "result" and "png" in e]
        # the image the cell saved, not matplotlib's own save through PIL
        self.assertEqual(len(pngs), 1, ev)
        self.assertEqual(decode_png(base64.b64decode(pngs[0]["png"])), (4, 3))

    def test_errors_are_typed(self):
        err = self.error(self.run_code("def f():\n    return 1 / 0\nf()"))
        self.assertEqual(err["name"], "ZeroDivisionError")
        self.assertEqual(err["value"], "division by zero")
        self.assertIn("return 1 / 0", err["traceback"])
        err = self.error(self.run_code("x = (1 +"))
        self.assertEqual(err["name"], "SyntaxError")
        ev = self.run_code("print('before')\nraise ValueError('bad value')")
        self.assertEqual(self.stdout(ev), "before\n")
        self.assertEqual(self.error(ev)["value"], "bad value")

    # ---- contexts

    def test_contexts_are_isolated_listed_and_deleted(self):
        a, b = self.context(), self.context(cwd="/tmp")
        self.run_code("secret = 'a'", context=a)
        self.assertEqual(self.error(self.run_code("secret", context=b))["name"], "NameError")
        self.assertEqual(self.error(self.run_code("secret"))["name"], "NameError")
        self.assertEqual(self.main_text(self.run_code("import os; os.getcwd()", context=b)), "/tmp")
        r = self.d.api("GET", "/v1/sandboxes/%s/contexts" % self.sid)
        self.assertEqual(r.status, 200)
        ids = [c["id"] for c in r.json()]
        self.assertIn(a, ids)
        self.assertIn(b, ids)
        self.assertEqual(self.d.api("DELETE", "/v1/sandboxes/%s/contexts/%s" % (self.sid, a)).status, 204)
        r = self.d.api("POST", "/v1/sandboxes/%s/code" % self.sid, {"code": "1", "context": a})
        self.assertError(r, 404, "not_found")
        r = self.d.api("DELETE", "/v1/sandboxes/%s/contexts/%s" % (self.sid, a))
        self.assertError(r, 404, "not_found")
        ids = [c["id"] for c in self.d.api("GET", "/v1/sandboxes/%s/contexts" % self.sid).json()]
        self.assertNotIn(a, ids)

    def test_fork_copies_the_state_and_diverges(self):
        parent = self.context()
        self.run_code("import numpy as np\nstate = [1, 2]\narr = np.arange(5)", context=parent)
        r = self.d.api("POST", "/v1/sandboxes/%s/contexts/%s/fork" % (self.sid, parent))
        self.assertEqual(r.status, 201, r)
        child = r.json()["id"]
        self.assertNotEqual(child, parent)
        self.assertEqual(self.main_text(self.run_code("state, int(arr.sum())", context=child)),
                         "([1, 2], 10)")
        self.run_code("state.append('child')", context=child)
        self.run_code("state.append('parent')", context=parent)
        self.assertEqual(self.main_text(self.run_code("state", context=child)), "[1, 2, 'child']")
        self.assertEqual(self.main_text(self.run_code("state", context=parent)), "[1, 2, 'parent']")
        # Separate processes: the child's pid is its own.
        p1 = self.main_text(self.run_code("import os; os.getpid()", context=parent))
        p2 = self.main_text(self.run_code("import os; os.getpid()", context=child))
        self.assertNotEqual(p1, p2)
        r = self.d.api("POST", "/v1/sandboxes/%s/contexts/nope/fork" % self.sid)
        self.assertError(r, 404, "not_found")

    def test_sandbox_fork_of_a_code_interpreter(self):
        """A fork of the sandbox (not of a context): its children's own
        servers wrote ~/.cache before the copy came; the source's files win
        there, the children's other files stay, and each child runs code."""
        self.d.sh(self.sid, "mkdir -p ~/.cache && echo source > ~/.cache/mark")
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % self.sid, {"count": 2}, timeout=300)
        self.assertEqual(r.status, 201, r)
        kids = [sb["id"] for sb in r.json()["sandboxes"]]
        self.assertEqual(len(kids), 2)
        for kid in kids:
            self.assertEqual(self.d.sh(kid, "cat ~/.cache/mark")["stdout"], "source\n")
            self.assertEqual(self.main_text(self.run_code("6 * 7", sid=kid)), "42")
            self.assertEqual(self.d.kill(kid).status, 204)

    def test_cold_context(self):
        ctx = self.context(warm=False)
        self.assertEqual(self.main_text(self.run_code("import pandas; 6 * 7", context=ctx)), "42")

    def test_restart_drops_the_state(self):
        ctx = self.context()
        self.run_code("v = 1", context=ctx)
        r = self.d.api("POST", "/v1/sandboxes/%s/contexts/%s/restart" % (self.sid, ctx))
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.error(self.run_code("v", context=ctx))["name"], "NameError")

    # ---- timeouts and crashes

    def test_timeout_interrupts_and_keeps_the_state(self):
        ctx = self.context()
        self.run_code("kept = 'yes'", context=ctx)
        ev = self.run_code("while True:\n    pass", context=ctx, timeout="1s")
        self.assertEqual(self.error(ev)["name"], "KeyboardInterrupt")
        self.assertEqual(self.main_text(self.run_code("kept", context=ctx)), "yes")

    def test_bash_context_keeps_its_shell(self):
        ctx = self.context(language="bash", cwd="/tmp")
        ev = self.run_code("n=$((6 * 7)); cd /home/user", context=ctx)
        self.assertEqual([e["type"] for e in ev], ["number_of_executions", "end_of_execution"])
        self.assertEqual(self.stdout(self.run_code('echo "$n $PWD"', context=ctx)),
                         "42 /home/user\n")
        # the timeout interrupts the running command, as ^C at a prompt: the
        # cell fails with its status, the shell and its state stay
        ev = self.run_code("sleep 30; echo never", context=ctx, timeout="1s")
        err = self.error(ev)
        self.assertEqual((err["name"], err["value"]), ("BashError", "exit status 130"), ev)
        self.assertEqual(self.stdout(ev), "")
        self.assertEqual(self.stdout(self.run_code('echo "$n"', context=ctx)), "42\n")
        # the run as the sandbox's user, in its own sandbox
        self.assertRegex(self.stdout(self.run_code("id -un; cat /proc/1/comm", context=ctx)),
                         r"^user\n(memfd:)?sbx-init\n$")
        self.assertError(self.d.api("POST", "/v1/sandboxes/%s/contexts" % self.sid,
                                    {"language": "ruby"}), 400, "invalid_argument")

    def test_javascript_context_keeps_its_state(self):
        ctx = self.context(language="javascript", cwd="/tmp")
        ev = self.run_code("const z = 20; let w = 22; function add(a, b) { return a + b }", context=ctx)
        self.assertEqual([e["type"] for e in ev], ["number_of_executions", "end_of_execution"])
        ev = self.run_code('console.log("sum", add(z, w)); console.error("e"); add(z, w)', context=ctx)
        self.assertEqual((self.stdout(ev), self.stdout(ev, "stderr"), self.main_text(ev)), ("sum 42\n", "e\n", "42"))
        # a cell may declare again what an earlier one did, as at a prompt
        self.assertEqual(self.main_text(self.run_code("const z = 1; z + w", context=ctx)), "23")
        # strings as they are, other values as Node.js shows them
        self.assertEqual(self.main_text(self.run_code("'text'", context=ctx)), "text")
        self.assertEqual(self.main_text(self.run_code("({a: [1, 2]})", context=ctx)), "{ a: [ 1, 2 ] }")
        # top-level await, and what it declares stays
        ev = self.run_code("const v = await new Promise((r) => setTimeout(() => r(6), 10)); v * 7", context=ctx)
        self.assertEqual(self.main_text(ev), "42")
        self.assertEqual(self.main_text(self.run_code("v", context=ctx)), "6")
        # modules, as require or import, relative to the context's directory
        ev = self.run_code("import {join} from 'path'\nimport * as os from 'os'\nconst fs = require('fs')", context=ctx)
        self.assertEqual([e["type"] for e in ev], ["number_of_executions", "end_of_execution"], ev)
        self.assertEqual(self.main_text(self.run_code(
            "[join('a', 'b'), typeof os.cpus, typeof fs.readFileSync, process.cwd(), process.getuid()].join(' ')",
            context=ctx)), "a/b function function /tmp 1000")
        # per-run variables for the run only
        self.assertEqual(self.main_text(self.run_code("process.env.K", context=ctx, env={"K": "v1"})), "v1")
        self.assertEqual(self.main_text(self.run_code("process.env.K || 'unset'", context=ctx)), "unset")
        # errors are typed; the traceback is the cell's, not the driver's
        err = self.error(self.run_code("null.x", context=ctx))
        self.assertEqual(err["name"], "TypeError")
        self.assertIn("Cannot read properties of null", err["value"])
        self.assertNotIn("[eval]", err["traceback"])
        self.assertEqual(self.error(self.run_code("const = 1", context=ctx))["name"], "SyntaxError")
        # a callback's throw or a rejection nobody awaits is shown, not fatal
        ev = self.run_code("Promise.reject(new Error('nobody')); setTimeout(() => { throw new Error('late') }, 1);"
                           "await new Promise((r) => setTimeout(r, 50)); 'alive'", context=ctx)
        self.assertEqual(self.main_text(ev), "alive")
        self.assertIn("nobody", self.stdout(ev, "stderr"))
        self.assertIn("late", self.stdout(ev, "stderr"))
        # the timeout interrupts a spinning loop or a wait; the state stays
        for cell in ("while (true) {}", "await new Promise(() => {})"):
            ev = self.run_code(cell, context=ctx, timeout="1s")
            err = self.error(ev)
            self.assertEqual((err["name"], err["value"]), ("KeyboardInterrupt", "the execution was interrupted"), ev)
            self.assertEqual(self.main_text(self.run_code("z", context=ctx)), "1")
        # an exit ends Node.js: told, and the next run starts a new one
        err = self.error(self.run_code("process.exit(3)", context=ctx))
        self.assertEqual((err["name"], err["value"]),
                         ("ExitError", "Node.js exited with status 3; the next run starts a new one"))
        self.assertEqual(self.main_text(self.run_code("typeof z", context=ctx)), "undefined")
        # a fork is a new Node.js: the state of a JavaScript context is not copied
        self.run_code("globalThis.kept = 1", context=ctx)
        r = self.d.api("POST", "/v1/sandboxes/%s/contexts/%s/fork" % (self.sid, ctx))
        self.assertEqual(r.status, 201, r)
        child = r.json()["id"]
        self.addCleanup(self.d.api, "DELETE", "/v1/sandboxes/%s/contexts/%s" % (self.sid, child))
        self.assertEqual(self.main_text(self.run_code("typeof kept", context=child)), "undefined")
        self.assertEqual(self.main_text(self.run_code("kept", context=ctx)), "1")
        # the listed default, and the language's other names
        r = self.d.api("GET", "/v1/sandboxes/%s/contexts" % self.sid)
        self.assertIn("javascript", [c["language"] for c in r.json()])
        self.assertEqual(self.main_text(self.run_code("1 + 1", language="js")), "2")

    def test_typescript_context(self):
        ctx = self.context(language="typescript")
        ev = self.run_code("interface P { x: number }\nfunction sub(a: number, b: number): number { return a - b }\n"
                           "const p: P = { x: 3 }\nsub(1, p.x)", context=ctx)
        self.assertEqual(self.main_text(ev), "-2")
        self.assertEqual(self.main_text(self.run_code("const q: number = await Promise.resolve(p.x); q", context=ctx)), "3")
        # the default TypeScript context is another one
        self.assertEqual(self.main_text(self.run_code("typeof sub", language="ts")), "undefined")
        self.assertEqual(self.main_text(self.run_code("const n: number = 6; n", language="ts")), "6")

    def test_r_context(self):
        ctx = self.context(language="r", cwd="/tmp")
        ev = self.run_code("x <- 41\nsq <- function(v) v * v", context=ctx)
        self.assertEqual([e["type"] for e in ev], ["number_of_executions", "end_of_execution"])
        # the last visible value, as R prints it; the others printed, as at R's prompt
        ev = self.run_code('cat("out\\n"); message("err"); print("shown"); x + 1', context=ctx)
        self.assertEqual((self.stdout(ev), self.stdout(ev, "stderr"), self.main_text(ev)),
                         ('out\n[1] "shown"\n', "err\n", "[1] 42"))
        self.assertEqual(self.main_text(self.run_code("getwd()", context=ctx)), '[1] "/tmp"')
        self.assertEqual(self.main_text(self.run_code("sq(1:3)", context=ctx)), "[1] 1 4 9")
        self.assertEqual([e["type"] for e in self.run_code("invisible(7)", context=ctx)],
                         ["number_of_executions", "end_of_execution"])
        # per-run variables for the run only
        self.assertEqual(self.main_text(self.run_code('Sys.getenv("K")', context=ctx, env={"K": "v1"})), '[1] "v1"')
        self.assertEqual(self.main_text(self.run_code('Sys.getenv("K", unset = "unset")', context=ctx)),
                         '[1] "unset"')
        err = self.error(self.run_code("stop('bad thing')", context=ctx))
        self.assertEqual((err["name"], err["value"], err["traceback"]), ("simpleError", "bad thing", ""))
        self.assertEqual(self.error(self.run_code("x +* 2", context=ctx))["name"], "SyntaxError")
        # a warning is shown, not an error
        ev = self.run_code("as.integer('a')", context=ctx)
        self.assertEqual(self.main_text(ev), "[1] NA")
        self.assertIn("NAs introduced by coercion", self.stdout(ev, "stderr"))
        # the timeout interrupts; the state stays
        for cell in ("repeat {}", "Sys.sleep(60)"):
            err = self.error(self.run_code(cell, context=ctx, timeout="1s"))
            self.assertEqual((err["name"], err["value"]), ("KeyboardInterrupt", "the execution was interrupted"))
            self.assertEqual(self.main_text(self.run_code("x", context=ctx)), "[1] 41")
        err = self.error(self.run_code("q(status = 3)", context=ctx))
        self.assertEqual((err["name"], err["value"]), ("ExitError", "R exited with status 3; the next run starts a new one"))
        self.assertEqual(self.main_text(self.run_code("exists('x')", context=ctx)), "[1] FALSE")
        self.assertEqual(self.main_text(self.run_code("1 + 1", language="r")), "[1] 2")

    def test_java_context(self):
        ctx = self.context(language="java", cwd="/tmp")
        ev = self.run_code("int x = 41;\nint twice(int v) { return 2 * v; }", context=ctx)
        self.assertEqual([e["type"] for e in ev], ["number_of_executions", "end_of_execution"], ev)
        ev = self.run_code('System.out.println("out"); System.err.println("err"); twice(x) - 40', context=ctx)
        self.assertEqual((self.stdout(ev), self.stdout(ev, "stderr"), self.main_text(ev)), ("out\n", "err\n", "42"))
        # a String as it is; the working directory is the context's
        self.assertEqual(self.main_text(self.run_code('System.getProperty("user.dir")', context=ctx)), "/tmp")
        self.assertEqual(self.main_text(self.run_code("List.of(1, 2)", context=ctx)), "[1, 2]")
        # a run's env as system properties (E2B's Java kernel), for that run only
        self.assertEqual(self.main_text(self.run_code('System.getProperty("K")', context=ctx, env={"K": "v1"})), "v1")
        self.assertEqual(self.main_text(self.run_code('System.getProperty("K", "unset")', context=ctx)), "unset")
        err = self.error(self.run_code('throw new IllegalStateException("bad")', context=ctx))
        self.assertEqual((err["name"], err["value"]), ("java.lang.IllegalStateException", "bad"))
        self.assertEqual(self.error(self.run_code("int y = ;", context=ctx))["name"], "CompilationError")
        for cell in ("while (true) {}", "Thread.sleep(60000);"):
            err = self.error(self.run_code(cell, context=ctx, timeout="2s"))
            self.assertEqual((err["name"], err["value"]), ("KeyboardInterrupt", "the execution was interrupted"))
            self.assertEqual(self.main_text(self.run_code("x", context=ctx)), "41")
        err = self.error(self.run_code("System.exit(3);", context=ctx))
        self.assertEqual((err["name"], err["value"]), ("ExitError", "Java exited with status 3; the next run starts a new one"))
        self.assertEqual(self.error(self.run_code("x", context=ctx))["name"], "CompilationError")

    def test_code_that_ignores_the_interrupt_is_killed(self):
        ctx = self.context()
        # The interrupt is ignored from a cell before the timed one: caught
        # in a try inside the timed cell, an interrupt that came before the
        # cell reached its try (a loaded host: a CI flake) was not ignored.
        self.assertEqual(self.main_text(self.run_code(
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n1",
            context=ctx)), "1")
        code = "while True:\n    time.sleep(1)"
        err = self.error(self.run_code(code, context=ctx, timeout="500ms"))
        self.assertEqual(err["name"], "TimeoutError")
        self.assertIn("killed", err["value"])
        self.assertEqual(self.error(self.run_code("1", context=ctx))["name"], "ContextDied")
        self.d.api("POST", "/v1/sandboxes/%s/contexts/%s/restart" % (self.sid, ctx))
        self.assertEqual(self.main_text(self.run_code("3", context=ctx)), "3")

    def test_crashes_are_reported_and_restartable(self):
        for code, why in (("import os; os._exit(3)", "exited with status 3"),
                          ("import ctypes; ctypes.string_at(0)", "killed by signal 11 (SIGSEGV)")):
            ctx = self.context()
            err = self.error(self.run_code(code, context=ctx))
            self.assertEqual(err["name"], "ContextDied")
            self.assertIn(why, err["value"])
            r = self.d.api("POST", "/v1/sandboxes/%s/contexts/%s/fork" % (self.sid, ctx))
            self.assertError(r, 409, "conflict")
            r = self.d.api("POST", "/v1/sandboxes/%s/contexts/%s/restart" % (self.sid, ctx))
            self.assertEqual(r.status, 204, r)
            self.assertEqual(self.main_text(self.run_code("1 + 1", context=ctx)), "2")

    # ---- hostile code inside a context

    def test_python_cannot_escape(self):
        ctx = self.context()
        probes = (
            "import errno, os, socket, ctypes\n"
            "out = {}\n"
            "out['shadow'] = os.path.exists('/etc/shadow')\n"
            "try:\n    open('/usr/sbx-escape', 'w')\nexcept OSError as e:\n    out['usr'] = e.errno\n"
            "s = socket.socket()\n"
            "try:\n    s.connect(('1.1.1.1', 80)); out['net'] = 0\nexcept OSError as e:\n    out['net'] = e.errno\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.ptrace(16, 1, 0, 0); out['ptrace'] = ctypes.get_errno()\n"
            "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None); out['mount'] = ctypes.get_errno()\n"
            "out['uid'] = os.getuid()\n"
            "out")
        res = eval(self.main_text(self.run_code(probes, context=ctx)))
        self.assertEqual(res, {"shadow": False, "usr": 30, "net": 101, "ptrace": 1, "mount": 1,
                               "uid": 1000})
        self.assertFalse(os.path.exists("/usr/sbx-escape"))

    def test_hostile_server_is_contained(self):
        sid = self.d.create(template=TEMPLATE)
        # Replace the sandbox's server with one that lies.
        fake = r'''
import socket, sys
mode = sys.argv[1]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 49999)); s.listen(8)
bodies = {
  "garbage": b"not json\n",
  "notevent": b'{"type":"result","is_main_result":"yes"}\n',
  "huge": b'{"type":"stdout","text":"' + b"a" * (17 << 20),
  "early": b'{"type":"stdout","text":"x"}\n',
  "status": None,
}
while True:
    c, _ = s.accept()
    try:  # the test's readiness probe connects and leaves at once
        if not c.recv(65536):
            continue
        if mode == "status":
            c.sendall(b"HTTP/1.0 418 teapot\r\n\r\n\x1b[31mred\x00" + b"z" * 100000)
        else:
            c.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + bodies[mode])
    except OSError:
        pass
    finally:
        c.close()
'''
        self.d.upload(sid, "/tmp/fake.py", fake.encode())
        self.d.sh(sid, "pkill -f 'opt/sbx/[c]ode_server'; while pgrep -f 'opt/sbx/[c]ode_server' >/dev/null; do sleep 0.05; done")
        for mode, want in (("garbage", "not an event"), ("notevent", "not an event"),
                           ("huge", "over 16 MiB"), ("early", "ended the stream early")):
            r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                           {"argv": ["python3", "/tmp/fake.py", mode]})
            self.assertEqual(r.status, 201, r)
            pid = r.json()["pid"]
            self.d.sh(sid, "for i in $(seq 200); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 49999))' 2>/dev/null && break; sleep 0.05; done")
            r = self.d.api("POST", "/v1/sandboxes/%s/code" % sid, {"code": "1"})
            self.assertEqual(r.status, 200, (mode, r))
            events = [json.loads(line) for line in r.body.decode().splitlines()]
            self.assertEqual(events[-2]["type"], "error", events)
            self.assertEqual(events[-2]["name"], "SandboxError")
            self.assertIn(want, events[-2]["value"])
            self.assertEqual(events[-1], {"type": "end_of_execution"})
            self.assertTrue(all(e["type"] in ("stdout", "error", "end_of_execution") for e in events))
            self.d.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, pid), {"signal": "SIGKILL"})
            self.d.api("GET", "/v1/sandboxes/%s/processes/%d/wait" % (sid, pid))
        r = self.d.api("POST", "/v1/sandboxes/%s/processes" % sid,
                       {"argv": ["python3", "/tmp/fake.py", "status"]})
        self.d.sh(sid, "for i in $(seq 200); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 49999))' 2>/dev/null && break; sleep 0.05; done")
        r = self.d.api("GET", "/v1/sandboxes/%s/contexts" % sid)
        body = self.assertError(r, 502, "bad_gateway")
        msg = body["message"]
        self.assertTrue(msg.startswith("the code interpreter answered 418: [31mredzzz"), msg)
        self.assertTrue(len(msg) < 300 and msg.isprintable(), msg)
        # The daemon still serves, and other sandboxes' interpreters too.
        self.assertEqual(self.main_text(self.run_code("'fine'")), "fine")

    # ---- the API's own errors

    def test_request_errors(self):
        base = self.d.create()
        r = self.d.api("POST", "/v1/sandboxes/%s/code" % base, {"code": "1"})
        body = self.assertError(r, 502, "bad_gateway")
        self.assertIn("code-interpreter-v1", body["message"])
        path = "/v1/sandboxes/%s/code" % self.sid
        self.assertError(self.d.api("POST", path, {}), 400, "invalid_argument")
        self.assertError(self.d.api("POST", path, {"code": 1}), 400, "invalid_argument")
        self.assertError(self.d.api("POST", path, {"code": "1", "nope": 1}), 400, "invalid_argument")
        # a name the server does not run is its 400, relayed; a name of
        # another shape never reaches it
        body = self.assertError(self.d.api("POST", path, {"code": "1", "language": "cobol"}), 400, "invalid_argument")
        self.assertIn("'cobol' is not supported", body["message"])
        self.assertError(self.d.api("POST", path, {"code": "1", "language": "../py"}), 400, "invalid_argument")
        self.assertError(self.d.api("POST", path, {"code": "1", "context": "../x"}), 400, "invalid_argument")
        self.assertError(self.d.api("POST", path, {"code": "1", "context": "a", "language": "python"}),
                         400, "invalid_argument")
        self.assertError(self.d.api("POST", path, {"code": "1", "context": "nope"}), 404, "not_found")
        self.assertError(self.d.api("POST", "/v1/sandboxes/nope/code", {"code": "1"}), 404, "not_found")
        r = self.d.api("POST", "/v1/sandboxes", {"template": TEMPLATE, "memory": "128M"})
        body = self.assertError(r, 400, "invalid_argument")
        self.assertIn("at least 256 MiB", body["message"])
        r = self.d.api("POST", "/v1/sandboxes/%s/contexts" % self.sid, {"cwd": "relative"})
        self.assertError(r, 400, "invalid_argument")
        r = self.d.api("DELETE", "/v1/sandboxes/%s/contexts/%s" % (self.sid, "x" * 65))
        self.assertError(r, 404, "not_found")

    # ---- the CLI

    def test_cli(self):
        ctx = self.context()
        r = self.d.sbx("code", self.sid, "--context", ctx, "x = 41")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
        r = self.d.sbx("code", self.sid, "--context", ctx, "print('p'); x + 1")
        self.assertEqual((r.returncode, r.stdout), (0, b"p\n42\n"), r)
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("y = x * 2\ny\n")
            f.flush()
            r = self.d.sbx("code", self.sid, "--context", ctx, "-f", f.name)
        self.assertEqual((r.returncode, r.stdout), (0, b"82\n"), r)
        r = self.d.sbx("code", self.sid, "--context", ctx, "-", input=b"y + 1\n")
        self.assertEqual((r.returncode, r.stdout), (0, b"83\n"), r)
        r = self.d.sbx("code", self.sid, "--context", ctx, "undefined_thing")
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"NameError", r.stderr)
        self.assertIn(b"undefined_thing", r.stderr)
        r = self.d.sbx("code", self.sid, "--json", "--context", ctx, "-e", "K=V",
                       "import os; os.environ['K']")
        self.assertEqual(r.returncode, 0, r)
        events = [json.loads(line) for line in r.stdout.decode().splitlines()]
        self.assertEqual([e["type"] for e in events],
                         ["number_of_executions", "result", "end_of_execution"])
        self.assertEqual(events[1]["text"], "V")
        r = self.d.sbx("code", self.sid, "--context", "nope", "1")
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"not found", r.stderr)
        r = self.d.sbx("code", self.sid)
        self.assertEqual(r.returncode, 2)

    def test_cli_run_with_the_template(self):
        r = self.d.sbx("run", "--template", TEMPLATE, "--", "python3", "-c",
                       "import urllib.request, json; print(urllib.request.urlopen("
                       "'http://127.0.0.1:49999/health').read().decode())")
        self.assertEqual((r.returncode, r.stdout), (0, b'"OK"\n'), r)
