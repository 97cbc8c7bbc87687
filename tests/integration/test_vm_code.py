"""Template code-interpreter-v1 on a microVM (docs/vm.md "Code
interpreter"). Its root image is base's plus the host's Python packages
the server imports and the server itself (iso/vm_image_code.c); the core
starts the server in the guest as the user when the VM is built and talks
to it through the port proxy's streams, as to a namespace sandbox's.

One VM and one namespace sandbox of the template for the class: the same
cells run in both and their events must have the same shape (types, keys,
texts): the namespace engine is the reference. Then the VM's interpreter
state must survive a fork (its memory is carried) and a hibernate/resume.
Timings go to stderr (never asserted).
"""
import json
import os
import sys
import time

from harness import DaemonTest
from test_code import CHART_AND_TABLE, check_chart_and_table, check_stdout_streams

QEMU = "/usr/bin/qemu-system-x86_64"
TEMPLATE = "code-interpreter-v1"


def shape(events):
    """What must match across engines: the results and errors in order
    (type, keys, text), the whole stdout and stderr, the other events'
    types and keys. Not: keepalives (sent on a timer), how output is cut
    into events or interleaved with results (a child process's output
    races the result), counts, timestamps, png bytes."""
    out, streams = [], {"stdout": "", "stderr": ""}
    for e in events:
        if e["type"] == "keepalive":
            continue
        if e["type"] == "result":
            out.append(("result", tuple(sorted(e)), e.get("text"), e.get("is_main_result")))
        elif e["type"] == "error":
            # The value names the cell (<ipython-input-N-...>): N differs.
            out.append(("error", e["name"], tuple(sorted(e))))
        elif e["type"] in streams:
            streams[e["type"]] += e["text"]
        else:
            out.append((e["type"], tuple(sorted(e))))
    return out, streams


class VMCode(DaemonTest):
    pool = 0

    @classmethod
    def setUpClass(cls):
        assert os.access(QEMU, os.X_OK), "qemu-system-x86 is not installed (scripts/install-deps.sh)"
        super().setUpClass()
        cls.extra = []
        t0 = time.monotonic()
        r = cls.d.api("POST", "/v1/sandboxes", {"isolation": "vm", "template": TEMPLATE,
                                                "timeout": "20m"}, timeout=600)
        assert r.status == 201, r
        cls.sid = r.json()["id"]
        t1 = time.monotonic()
        cls.first_cell(cls.sid)
        t2 = time.monotonic()
        r = cls.d.api("POST", "/v1/sandboxes", {"template": TEMPLATE, "timeout": "20m"})
        assert r.status == 201, r
        cls.ns = r.json()["id"]
        t3 = time.monotonic()
        cls.first_cell(cls.ns)
        t4 = time.monotonic()
        with open(cls.d.log_path, "rb") as f:
            for line in f.read().decode(errors="replace").splitlines():
                if "built VM root image" in line or "code interpreter is ready" in line:
                    sys.stderr.write("\n[vm_code] daemon: " + line.split(" info: ", 1)[-1])
        sys.stderr.write("\n[vm_code] create->ready: vm %.1f s, namespace %.1f s; first cell: "
                         "vm %.2f s, namespace %.2f s\n" % (t1 - t0, t3 - t2, t2 - t1, t4 - t3))

    @classmethod
    def first_cell(cls, sid):
        r = cls.d.api("POST", "/v1/sandboxes/%s/code" % sid, {"code": "1"}, timeout=300)
        assert r.status == 200, r

    @classmethod
    def tearDownClass(cls):
        try:
            for sid in [cls.sid, cls.ns] + cls.extra:
                cls.d.kill(sid)
        finally:
            super().tearDownClass()

    def tearDown(self):
        pass  # the class's sandboxes live until tearDownClass

    def run_code(self, sid, code, **fields):
        fields["code"] = code
        r = self.d.api("POST", "/v1/sandboxes/%s/code" % sid, fields, timeout=300)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("Content-Type"), "application/x-ndjson")
        events = [json.loads(line) for line in r.body.decode().splitlines()]
        self.assertEqual(events[-1], {"type": "end_of_execution"}, events)
        return events

    def both(self, code, **fields):
        """The events of one cell in the VM and in the namespace sandbox,
        asserted to have the same shape; the VM's."""
        ev = self.run_code(self.sid, code, **fields)
        ref = self.run_code(self.ns, code, **fields)
        self.assertEqual(shape(ev[1:]), shape(ref[1:]), (ev, ref))
        return ev

    def main_text(self, events):
        mains = [e for e in events if e["type"] == "result" and e["is_main_result"]]
        self.assertEqual(len(mains), 1, events)
        return mains[0]["text"]

    def text(self, events, kind="stdout"):
        return "".join(e["text"] for e in events if e["type"] == kind)

    # ----

    def test_state_persists_between_cells(self):
        ev = self.both("a = 20\nb = 22")
        self.assertEqual([e["type"] for e in ev], ["number_of_executions", "end_of_execution"])
        first = ev[0]["execution_count"]
        ev = self.both("print('sum is', a + b)\na + b")
        self.assertEqual(ev[0], {"type": "number_of_executions", "execution_count": first + 1})
        self.assertEqual(self.text(ev), "sum is 42\n")
        self.assertEqual(self.main_text(ev), "42")
        ev = self.both("import sys; print('e', file=sys.stderr); 'text'")
        self.assertEqual(self.text(ev, "stderr"), "e\n")
        self.assertEqual(self.main_text(ev), "text")
        ev = self.both("import os; os.system('echo from-shell; echo e2 >&2')")
        self.assertIn("from-shell\n", self.text(ev))
        self.assertIn("e2\n", self.text(ev, "stderr"))
        ev = self.both("import os; os.getuid(), os.getcwd(), os.environ.get('K')", env={"K": "v1"})
        self.assertEqual(self.main_text(ev), "(1000, '/home/user', 'v1')")

    def test_stdout_streams_while_the_code_runs(self):
        check_stdout_streams(self, self.d, self.sid, wait_s=60)

    def test_errors_have_the_namespace_shape(self):
        ev = self.both("def f():\n    return 1 / 0\nf()")
        err = [e for e in ev if e["type"] == "error"]
        self.assertEqual(len(err), 1, ev)
        self.assertEqual(sorted(err[0]), ["name", "traceback", "type", "value"])
        self.assertEqual((err[0]["name"], err[0]["value"]), ("ZeroDivisionError", "division by zero"))
        self.assertIn("return 1 / 0", err[0]["traceback"])
        ev = self.both("x = (1 +")
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["SyntaxError"])
        ev = self.both("print('before')\nraise ValueError('bad value')")
        self.assertEqual(self.text(ev), "before\n")
        self.assertEqual([e["value"] for e in ev if e["type"] == "error"], ["bad value"])

    def test_chart_and_dataframe_results(self):
        check_chart_and_table(self, self.both(CHART_AND_TABLE))

    def test_trivial_cell_round_trip(self):
        # A figure for docs/vm.md; only the answers are asserted.
        for sid, name in ((self.sid, "vm"), (self.ns, "namespace")):
            self.run_code(sid, "1")
            t0 = time.monotonic()
            for _ in range(5):
                self.assertEqual(self.main_text(self.run_code(sid, "6 * 7")), "42")
            sys.stderr.write("[vm_code] trivial cell, %s: %.0f ms\n"
                             % (name, (time.monotonic() - t0) / 5 * 1000))

    def test_state_survives_fork_and_hibernate(self):
        ctx = self.d.api("POST", "/v1/sandboxes/%s/contexts" % self.sid, {})
        self.assertEqual(ctx.status, 201, ctx)
        ctx = ctx.json()["id"]
        self.run_code(self.sid, "import numpy as np\nkept = np.arange(10)\nkept[3] = 99", context=ctx)
        t0 = time.monotonic()
        r = self.d.api("POST", "/v1/sandboxes/%s/fork" % self.sid, {"count": 1}, timeout=600)
        self.assertEqual(r.status, 201, r)
        copy = r.json()["sandboxes"][0]["id"]
        self.extra.append(copy)
        t1 = time.monotonic()
        self.assertEqual(self.main_text(self.run_code(copy, "int(kept.sum())", context=ctx)), "141")
        t2 = time.monotonic()
        # The copy diverges; the source keeps its own.
        self.run_code(copy, "kept[0] = 1000", context=ctx)
        self.assertEqual(self.main_text(self.run_code(self.sid, "int(kept.sum())", context=ctx)), "141")
        self.assertEqual(self.main_text(self.run_code(copy, "int(kept.sum())", context=ctx)), "1141")
        self.assertEqual(self.d.kill(copy).status, 204)
        self.extra.remove(copy)
        # A snapshot: a new VM from it has the interpreter, state included
        # (the create starts no second server: the port is the carried one's).
        r = self.d.api("POST", "/v1/sandboxes/%s/snapshots" % self.sid, {"name": "code"},
                       timeout=600)
        self.assertEqual(r.status, 201, r)
        r = self.d.api("POST", "/v1/sandboxes", {"snapshot": "code", "timeout": "5m"}, timeout=600)
        self.assertEqual(r.status, 201, r)
        restored = r.json()["id"]
        self.extra.append(restored)
        self.assertEqual(r.json()["template"], TEMPLATE)
        self.assertEqual(self.main_text(self.run_code(restored, "int(kept.sum())", context=ctx)), "141")
        self.assertEqual(self.d.kill(restored).status, 204)
        self.extra.remove(restored)
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/code").status, 204)
        # Hibernate the source (its memory to a file, QEMU ended), resume.
        r = self.d.api("POST", "/v1/sandboxes/%s/pause" % self.sid, {"to_disk": True}, timeout=600)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["hibernated"], True)
        t3 = time.monotonic()
        r = self.d.api("POST", "/v1/sandboxes/%s/resume" % self.sid, {}, timeout=600)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.main_text(self.run_code(self.sid, "int(kept.sum())", context=ctx)), "141")
        t4 = time.monotonic()
        sys.stderr.write("[vm_code] fork %.1f s, fork's first cell %.2f s; resume to a cell %.1f s\n"
                         % (t1 - t0, t2 - t1, t4 - t3))
