#!/usr/bin/python3
# sbx: the code interpreter server. It runs INSIDE a sandbox, as the
# sandbox's user, on 127.0.0.1:49999 of the sandbox's own network namespace,
# and speaks the wire of E2B's code-interpreter server (POST /execute as
# newline-delimited JSON, /contexts), plus sbx's context fork. Everything
# here is in the sandbox's trust domain: the daemon treats every byte it
# sends as hostile (server/code.c).
#
# Processes:
#   server   this file's main: stdlib only, HTTP on a thread per request;
#            a child subreaper, so every context ends up its child.
#   zygote   forked at start; imports IPython, numpy, pandas and matplotlib
#            once and builds an InteractiveShell, then forks a context per
#            request (a warm start: no import is paid again).
#   context  one process per execution context, forked from the zygote (or
#            from another context: a fork copies its state, copy-on-write).
#            Server and context talk JSON lines over a socketpair; a new
#            context's socket is passed with SCM_RIGHTS.
import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("SBX_CODE_PORT", "49999"))
HOME = os.environ.get("HOME", "/home/user")
LINE_MAX = 64 << 20
PR_SET_CHILD_SUBREAPER = 36


def now_iso():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06dZ" % int((t % 1) * 1e6)


class Chan:
    """JSON lines over a stream socket, with file descriptors alongside."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.fds = []
        self.wlock = threading.Lock()

    def send(self, obj, fds=()):
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.wlock:
            if fds:
                n = socket.send_fds(self.sock, [data[:1]], list(fds))
                data = data[n:]
            self.sock.sendall(data)

    def recv(self, timeout=None):
        """The next object; None at end of file; raises TimeoutError."""
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 1]
                return json.loads(line)
            if len(self.buf) > LINE_MAX:
                return None
            if timeout is not None:
                r, _, _ = select.select([self.sock], [], [], max(timeout, 0))
                if not r:
                    raise TimeoutError()
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 18, 4)
            except InterruptedError:
                continue
            except OSError:
                return None
            self.fds.extend(fds)
            if not data:
                return None
            self.buf += data


# ---- the interpreter (zygote and contexts) -------------------------------

SHELL = None
CHAN = None  # the context's channel to the server
EXEC_ID = None  # the execution in progress
EMIT_LOCK = threading.Lock()

MIME = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",
    "e2b/chart": "chart",
}


def emit(obj):
    if EXEC_ID is None or CHAN is None:
        return
    obj["x"] = EXEC_ID
    with EMIT_LOCK:
        try:
            CHAN.send(obj)
        except OSError:
            pass


def jsonable(v):
    import base64

    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return str(v)


def result_obj(data, main):
    o = {"type": "result", "is_main_result": main}
    extra = {}
    for k, v in data.items():
        key = MIME.get(k)
        if key is None:
            extra[k] = jsonable(v)
            continue
        if k == "text/plain" and isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] == "'":
            v = v[1:-1]
        elif k in ("image/png", "image/jpeg") and isinstance(v, str):
            v = "".join(v.split())  # base64 without the line breaks some formatters add
        o[key] = jsonable(v)
    if extra:
        o["extra"] = extra
    return o


class OutStream:
    """sys.stdout / sys.stderr of a context: sent line by line."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, kind):
        self.kind = kind
        self.pending = []
        self.lock = threading.Lock()

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if s:
            with self.lock:
                self.pending.append(s)
                flush = "\n" in s or sum(map(len, self.pending)) > 8192
            if flush:
                self.flush()
        return len(s)

    def writelines(self, lines):
        for s in lines:
            self.write(s)

    def flush(self):
        with self.lock:
            text = "".join(self.pending)
            self.pending = []
        if text:
            emit({"type": self.kind, "text": text, "timestamp": now_iso()})

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False

    def fileno(self):
        return 1 if self.kind == "stdout" else 2


class FdCapture:
    """What the context's children and C code write to fds 1 and 2."""

    def __init__(self):
        self.pipes = []
        self.lock = threading.Lock()
        for fd, kind in ((1, "stdout"), (2, "stderr")):
            r, w = os.pipe2(os.O_CLOEXEC)
            os.dup2(w, fd)
            os.close(w)
            os.set_blocking(r, False)
            self.pipes.append((r, kind))
        threading.Thread(target=self.run, daemon=True).start()

    def read(self, r, kind):
        while True:
            try:
                data = os.read(r, 65536)
            except BlockingIOError:
                return
            if not data:
                return
            emit({"type": kind, "text": data.decode("utf-8", "replace"), "timestamp": now_iso()})

    def drain(self):
        with self.lock:
            for r, kind in self.pipes:
                self.read(r, kind)

    def run(self):
        fds = [r for r, _ in self.pipes]
        while True:
            select.select(fds, [], [])
            self.drain()
            time.sleep(0.01)


# ---- charts and data: E2B's e2b/chart and e2b/data ------------------------
#
# A matplotlib figure that a cell shows comes back as its PNG and, beside
# it, as E2B's chart object (e2b/chart: the type, titles, labels, units,
# scales, ticks and the plotted data); a pandas DataFrame as its table and
# as e2b/data. Both are read from the objects (never from pixels), bounded
# in size, and never fail a cell: an object they cannot read gets none.
CHART_POINTS_MAX = 100000  # more points in a figure: the PNG only
DATA_CELLS_MAX = 100000  # more cells in a DataFrame: the table only


def finite(v):
    """A JSON number, or None for what JSON cannot say (NaN, infinities)."""
    import math

    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def label_unit(text):
    """The unit in a label's last parentheses or brackets: "Time (s)" is s."""
    import re

    m = re.search(r"[(\[]([^()\[\]]+)[)\]]\s*$", text or "")
    return m.group(1).strip() if m else None


def public_label(artist):
    """An artist's label when the user gave one (matplotlib's own start with _)."""
    label = artist.get_label()
    return None if not isinstance(label, str) or label.startswith("_") else label


def axis_scale(axis):
    import matplotlib.category
    import matplotlib.dates

    if isinstance(axis.converter, matplotlib.dates.DateConverter) or isinstance(
            axis.get_major_locator(), matplotlib.dates.DateLocator):
        return "datetime"
    if isinstance(axis.units, matplotlib.category.UnitData):
        return "categorical"
    return axis.get_scale()


def axis_value(scale):
    """How a value on an axis of that scale is said: a date as ISO 8601 text."""
    if scale == "datetime":
        import matplotlib.dates

        return lambda v: matplotlib.dates.num2date(v).isoformat()
    return finite


def tick_labels(ax, labels):
    import re

    texts = [t.get_text() for t in labels]
    if texts and not any(texts):
        ax.figure.canvas.draw()  # tick labels are set when the figure is drawn
        texts = [t.get_text() for t in labels]
    # matplotlib's mathtext wrapper of log ticks, $\mathdefault{10^{3}}$
    return [re.sub(r"^\$\\mathdefault\{(.*)\}\$$", r"\1", t) for t in texts]


def chart_2d(ax, kind):
    xlabel, ylabel = ax.get_xlabel(), ax.get_ylabel()
    return {"type": kind, "title": ax.get_title() or None, "x_label": xlabel or None,
            "y_label": ylabel or None, "x_unit": label_unit(xlabel), "y_unit": label_unit(ylabel)}


def point_chart(ax, kind, series):
    chart = chart_2d(ax, kind)
    xs, ys = axis_scale(ax.xaxis), axis_scale(ax.yaxis)
    xv, yv = axis_value(xs), axis_value(ys)
    chart.update({
        "x_scale": xs, "y_scale": ys,
        "x_ticks": [xv(t) for t in ax.get_xticks()], "y_ticks": [yv(t) for t in ax.get_yticks()],
        "x_tick_labels": tick_labels(ax, ax.get_xticklabels()),
        "y_tick_labels": tick_labels(ax, ax.get_yticklabels()),
    })
    elements = []
    for label, points in series:
        # a categorical axis's values are its categories, as plotted
        elements.append({"label": label, "points": [
            [x if xs == "categorical" and isinstance(x, str) else xv(x),
             y if ys == "categorical" and isinstance(y, str) else yv(y)] for x, y in points]})
    chart["elements"] = elements
    return chart


def bar_chart(ax, containers):
    chart = chart_2d(ax, "bar")
    elements = []
    for c in containers:
        horizontal = getattr(c, "orientation", "vertical") == "horizontal"
        ticks = ax.get_yticks() if horizontal else ax.get_xticks()
        texts = tick_labels(ax, ax.get_yticklabels() if horizontal else ax.get_xticklabels())
        for rect in c.patches:
            at = rect.get_y() + rect.get_height() / 2 if horizontal else rect.get_x() + rect.get_width() / 2
            label = None
            if len(ticks) and len(texts) == len(ticks):
                i = min(range(len(ticks)), key=lambda k: abs(ticks[k] - at))
                label = texts[i]
            elements.append({"label": label if label is not None else str(finite(at)),
                             "value": finite(rect.get_width() if horizontal else rect.get_height()),
                             "group": public_label(c)})
    chart["elements"] = elements
    return chart


def box_chart(ax, stats):
    chart = chart_2d(ax, "box_and_whisker")
    chart["elements"] = [{"label": str(s.get("label", i + 1)), "min": finite(s["whislo"]),
                          "first_quartile": finite(s["q1"]), "median": finite(s["med"]),
                          "third_quartile": finite(s["q3"]), "max": finite(s["whishi"]),
                          "outliers": [finite(v) for v in s.get("fliers", [])]} for i, s in enumerate(stats)]
    return chart


def pie_chart(ax, wedges):
    return {"type": "pie", "title": ax.get_title() or None,
            "elements": [{"label": public_label(w) or "", "angle": finite(round(w.theta2 - w.theta1, 3)),
                          "radius": finite(w.r)} for w in wedges]}


def axes_chart(ax):
    import matplotlib.collections
    import matplotlib.container
    import matplotlib.patches

    wedges = [p for p in ax.patches if isinstance(p, matplotlib.patches.Wedge)]
    if wedges:
        return pie_chart(ax, wedges)
    stats = getattr(ax, "_sbx_box_stats", None)
    if stats:
        return box_chart(ax, stats)
    bars = [c for c in ax.containers if isinstance(c, matplotlib.container.BarContainer)]
    if bars:
        return bar_chart(ax, bars)
    lines = [ln for ln in ax.get_lines() if ln.get_visible()]
    dots = [c for c in ax.collections if isinstance(c, matplotlib.collections.PathCollection)]
    if lines and not dots:
        return point_chart(ax, "line", [(public_label(ln), zip(ln.get_xdata(orig=axis_scale(ax.xaxis) == "categorical"),
                                                                ln.get_ydata(orig=axis_scale(ax.yaxis) == "categorical")))
                                        for ln in lines])
    if dots and not lines:
        return point_chart(ax, "scatter", [(public_label(c), c.get_offsets().tolist()) for c in dots])
    return {"type": "unknown", "title": ax.get_title() or None, "elements": []}


def figure_points(fig):
    n = 0
    for ax in fig.get_axes():
        n += sum(len(ln.get_xdata()) for ln in ax.get_lines())
        n += sum(len(c.get_offsets()) for c in ax.collections)
        n += len(ax.patches)
    return n


def figure_chart(fig):
    """The e2b/chart of a matplotlib figure, or None."""
    try:
        axes = [ax for ax in fig.get_axes() if ax.get_visible()]
        if not axes or figure_points(fig) > CHART_POINTS_MAX:
            return None
        if len(axes) == 1:
            chart = axes_chart(axes[0])
            if chart.get("title") is None and fig._suptitle is not None:
                chart["title"] = fig._suptitle.get_text() or None
            return chart
        return {"type": "superchart", "title": fig._suptitle.get_text() if fig._suptitle is not None else None,
                "elements": [axes_chart(ax) for ax in axes]}
    except Exception:  # a figure this cannot read has no chart; never the cell's error
        return None


def frame_data(df):
    """The e2b/data of a pandas DataFrame: columns, index and rows, or None."""
    try:
        if df.size > DATA_CELLS_MAX:
            return None
        return json.loads(df.to_json(orient="split", date_format="iso", default_handler=str))
    except Exception:  # a frame this cannot say has no e2b/data; its table stays
        return None


def install_charts(shell):
    """Formatters for e2b/chart and e2b/data, boxplots' statistics kept on
    their axes, and a PIL image a cell saves shown as E2B shows it."""
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode
    import matplotlib.axes
    import matplotlib.figure
    import pandas

    class ChartFormatter(BaseFormatter):
        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = dict

    class DataFormatter(BaseFormatter):
        format_type = Unicode("e2b/data")
        print_method = ObjectName("_repr_e2b_data_")
        _return_type = dict

    formatters = shell.display_formatter.formatters
    formatters["e2b/chart"] = ChartFormatter(parent=shell.display_formatter)
    formatters["e2b/chart"].for_type(matplotlib.figure.Figure, figure_chart)
    formatters["e2b/data"] = DataFormatter(parent=shell.display_formatter)
    formatters["e2b/data"].for_type(pandas.DataFrame, frame_data)

    bxp = matplotlib.axes.Axes.bxp

    def kept_bxp(self, bxpstats, *args, **kwargs):
        out = bxp(self, bxpstats, *args, **kwargs)
        self._sbx_box_stats = list(getattr(self, "_sbx_box_stats", [])) + [dict(s) for s in bxpstats]
        return out

    matplotlib.axes.Axes.bxp = kept_bxp

    try:
        from PIL import Image, ImageShow
    except ImportError:
        return
    # Image.show() displays the image as a result, before any desktop
    # viewer PIL finds on the host's PATH (xdg-open, display...), which a
    # sandbox has no screen for
    if hasattr(ImageShow, "IPythonViewer"):
        ImageShow.register(ImageShow.IPythonViewer(), 0)
    save = Image.Image.save

    def shown_save(self, fp, *args, **kwargs):
        out = save(self, fp, *args, **kwargs)
        # a cell's own save to a file, not matplotlib's (it renders figures
        # through PIL) nor one to a buffer
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if EXEC_ID is not None and isinstance(fp, (str, os.PathLike)) and not caller.startswith(("matplotlib", "PIL")):
            try:
                from IPython.display import display

                display(self)
            except Exception:  # showing it is a courtesy; the save happened
                pass
        return out

    Image.Image.save = shown_save


def make_shell():
    global SHELL
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/.sbx-code/matplotlib")
    os.environ.setdefault("IPYTHONDIR", "/tmp/.sbx-code/ipython")
    # Debian keeps matplotlib's defaults in /etc/matplotlibrc, which the
    # sandbox's generated /etc does not have; the same file ships in /usr.
    for rc in ("/etc/matplotlibrc", "/usr/share/matplotlib/mpl-data/matplotlibrc"):
        if "MATPLOTLIBRC" not in os.environ and os.path.exists(rc):
            os.environ["MATPLOTLIBRC"] = rc
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    import numpy  # noqa: F401  (warm: imported once, in the zygote)
    import pandas  # noqa: F401
    import matplotlib

    matplotlib.use("module://matplotlib_inline.backend_inline")
    import matplotlib.pyplot  # noqa: F401

    class Hook(DisplayHook):
        def start_displayhook(self):
            pass

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            sys.stdout.flush()
            emit(result_obj(format_dict, True))

        def finish_displayhook(self):
            sys.stdout.flush()
            sys.stderr.flush()

    class Pub(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
            sys.stdout.flush()
            sys.stderr.flush()
            emit(result_obj(data, False))

        def clear_output(self, wait=False):
            pass

    class Shell(InteractiveShell):
        displayhook_class = Hook
        display_pub_class = Pub

        def _showtraceback(self, etype, evalue, stb):
            sys.stdout.flush()
            sys.stderr.flush()
            emit(
                {
                    "type": "error",
                    "name": getattr(etype, "__name__", str(etype)),
                    "value": str(evalue),
                    "traceback": "\n".join(stb) if isinstance(stb, list) else str(stb),
                }
            )

        def enable_gui(self, gui=None):
            pass

    c = Config()
    c.HistoryManager.enabled = False
    c.InteractiveShell.colors = "NoColor"
    c.InteractiveShell.xmode = "Context"
    SHELL = Shell.instance(config=c)
    SHELL.enable_matplotlib("inline")
    install_charts(SHELL)
    # The first cell pays for compiling IPython's own machinery: pay it here.
    SHELL.run_cell("pass", store_history=False, silent=True)
    return SHELL



# A bash context: one bash process, started at its first run, keeps the
# state (variables, functions, the directory) from run to run. Its fds 1
# and 2 are the context's (FdCapture sends what it writes); each run's
# status comes back on a pipe of its own.
BASH = None  # (Popen, status pipe's read end, its number in bash)
BASH_RUNS = 0


def bash_quote(v):
    return "'" + v.replace("'", "'\\''") + "'"


def bash_start():
    import subprocess

    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        # a process group of its own: an interrupt reaches the running
        # command as well as the shell
        p = subprocess.Popen(["/bin/bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                             pass_fds=(w,), env=dict(os.environ), cwd=os.getcwd(),
                             process_group=0)
    except OSError:
        os.close(r)
        raise
    finally:
        os.close(w)
    return (p, r, w)


def bash_script(code, env, base_env, status_fd):
    """The text bash runs for one cell: the sandbox's env for good, the
    run's own for this run only (then as it was), the cell by eval of a
    quoted here-document (a syntax error is the cell's, not the
    wrapper's), then the status on the status pipe."""
    import secrets

    lines = []
    for k, v in (base_env or {}).items():
        lines.append("export %s=%s" % (k, bash_quote(v)))
    restore = []
    for i, (k, v) in enumerate((env or {}).items()):
        lines.append('if [ "${%s+set}" = set ]; then __sbx_o%d=$%s; __sbx_h%d=1; else __sbx_h%d=0; fi'
                     % (k, i, k, i, i))
        lines.append("export %s=%s" % (k, bash_quote(v)))
        restore.append('if [ $__sbx_h%d = 1 ]; then export %s="$__sbx_o%d"; else unset %s; fi; '
                       'unset __sbx_o%d __sbx_h%d' % (i, k, i, k, i, i))
    delim = "__SBX_CELL_" + secrets.token_hex(8)
    while delim in code:
        delim = "__SBX_CELL_" + secrets.token_hex(8)
    # In a function, so that an interrupt (SIGINT to the shell's process
    # group) ends the cell, not the shell, as ^C at a prompt does: the trap
    # returns from it with 130 once the running command has died of it.
    # Assignments and `cd` stay the shell's (bash functions run in it). The
    # cell's stdin is /dev/null: bash's own is where this text comes from.
    lines.append("trap 'return 130 2>/dev/null' INT")
    lines.append('__sbx_cell () {\neval "$(cat <<\'%s\'\n%s\n%s\n)"\n}' % (delim, code, delim))
    lines.append("__sbx_cell </dev/null")
    lines.append("__sbx_rc=$?")
    lines.extend(restore)
    lines.append("printf '%%s\\n' \"$__sbx_rc\" >&%d" % status_fd)
    return "\n".join(lines) + "\n"


def run_bash(msg):
    """One cell of a bash context: its output streams as the process writes
    it; a non-zero status is the result's error (BashError, "exit status
    N"), and a shell that exits is started again at the next run."""
    global BASH, BASH_RUNS
    import re

    for k in (msg.get("env") or {}):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            emit({"type": "error", "name": "ValueError",
                  "value": "environment variable name %r is not a shell name" % k, "traceback": ""})
            return
    # the sandbox's env, as for Python: in this process for a shell started
    # later, and exported in the running one (names a shell cannot have
    # stay in the process environment only)
    base = {}
    for k, v in (msg.get("base_env") or {}).items():
        os.environ[k] = v
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            base[k] = v
    BASH_RUNS += 1
    emit({"type": "number_of_executions", "execution_count": BASH_RUNS})
    if BASH is None or BASH[0].poll() is not None:
        BASH = bash_start()
    p, r, w = BASH
    try:
        p.stdin.write(bash_script(msg.get("code", ""), msg.get("env"), base, w).encode())
        p.stdin.flush()
    except OSError:
        pass
    status = b""
    while not status.endswith(b"\n"):
        try:
            chunk = os.read(r, 64)
        except KeyboardInterrupt:
            # the server's interrupt: the running command's, as at a prompt
            try:
                os.killpg(p.pid, signal.SIGINT)
            except OSError:
                pass
            continue
        if not chunk:
            break
        status += chunk
    if FDCAP is not None:
        time.sleep(0.01)
        FDCAP.drain()
    if not status.endswith(b"\n"):
        rc = p.wait()
        os.close(r)
        BASH = None
        emit({"type": "error", "name": "BashError",
              "value": "bash exited with status %d; the next run starts a new one" % rc,
              "traceback": ""})
        return
    rc = int(status.strip() or b"0")
    if rc != 0:
        emit({"type": "error", "name": "BashError", "value": "exit status %d" % rc, "traceback": ""})


# Languages run by an interpreter process of their own (JavaScript and
# TypeScript by Node.js, R by Rscript, Java by the JDK's jshell): one process per context, started at
# its first run, keeps the state from run to run. Cells go to it on a pipe
# and its replies come back on another as JSON lines, {"n": the cell's
# number, "type": "result" (with "text") | "error" (name, value, traceback)
# | "done"}; its fds 1 and 2 are the context's, as bash's are.
NODE = "/usr/bin/node"
TYPESCRIPT_DIRS = ["/usr/share/nodejs/typescript", "/usr/lib/nodejs/typescript", "/usr/lib/node_modules/typescript"]
RSCRIPT = "/usr/bin/Rscript"
CHILD = None  # (Popen, cell pipe's write end, reply pipe's read end)
CHILD_RUNS = 0
PR_SET_PDEATHSIG = 1

# JavaScript: cells as JSON lines. TypeScript is compiled to JavaScript
# cell by cell (types are stripped, not checked).

JS_DRIVER = r'''// sbx: the JavaScript/TypeScript context's interpreter, run as
// `node -e DRIVER CELL_FD REPLY_FD` by the context process. Cells come as
// JSON lines on CELL_FD, replies go as JSON lines on REPLY_FD; what the
// cell prints goes to fds 1 and 2, which the context captures.
// In a function: the driver's own names stay out of the cells' global scope.
(() => {
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');
const path = require('path');
const Module = require('module');

const cellFd = Number(process.argv[1]);
const replyFd = Number(process.argv[2]);
const TS_DIRS = JSON.parse(process.argv[3] || '[]');

let cellNumber = 0;  // the cell being run: every reply carries it
function reply(obj) {
  obj.n = cellNumber;
  const buf = Buffer.from(JSON.stringify(obj) + '\n');
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(replyFd, buf, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') process.exit(70);  // the context is gone
    }
  }
}

let ts = null;
function typescript() {
  if (ts === null) {
    for (const dir of TS_DIRS) {
      try { ts = require(dir); break; } catch (e) { /* the next */ }
    }
    if (ts === null) throw new Error('TypeScript is not installed (Debian package node-typescript)');
  }
  return ts;
}

// Names a cell declares at its top level become globals (`var`), so that
// the next cell sees them and running a cell again may declare them again,
// as at a notebook's prompt; a cell with a top-level await runs in an async
// function, which returns the value of its last expression statement.
function bindingNames(t, name, out) {
  if (t.isIdentifier(name)) out.push(name.text);
  else for (const el of name.elements) if (!t.isOmittedExpression(el)) bindingNames(t, el.name, out);
}

function hasTopLevelAwait(t, sf) {
  let found = false;
  const visit = (node) => {
    if (found) return;
    if (t.isFunctionLike(node) || t.isClassLike(node)) return;
    if (t.isAwaitExpression(node) || (t.isForOfStatement(node) && node.awaitModifier)) { found = true; return; }
    t.forEachChild(node, visit);
  };
  t.forEachChild(sf, visit);
  return found;
}

function rewrite(code, isTs) {
  const t = typescript();
  if (isTs) {
    code = t.transpileModule(code, {
      compilerOptions: { target: t.ScriptTarget.ES2022, module: t.ModuleKind.ESNext,
                         esModuleInterop: true, preserveValueImports: true },
      reportDiagnostics: false,
    }).outputText;
  }
  const sf = t.createSourceFile('cell.js', code, t.ScriptTarget.ES2022, true, t.ScriptKind.JS);
  const wrap = hasTopLevelAwait(t, sf);
  const src = (n) => code.slice(n.getStart(sf), n.end);
  const edits = [];  // [start, end, text]
  const globals = [];
  const hoisted = [];  // function declarations' names, in the async wrapper
  const stmts = sf.statements;
  const requireOf = (spec) => 'require(' + JSON.stringify(spec.text) + ')';
  stmts.forEach((st, i) => {
    const start = st.getStart(sf);
    const mods = t.canHaveModifiers && t.canHaveModifiers(st) ? (t.getModifiers(st) || []) : (st.modifiers || []);
    const exported = mods.filter((m) => m.kind === t.SyntaxKind.ExportKeyword || m.kind === t.SyntaxKind.DefaultKeyword);
    if (t.isImportDeclaration(st)) {
      const c = st.importClause;
      const req = requireOf(st.moduleSpecifier);
      if (!c) { edits.push([start, st.end, req + ';']); return; }
      const parts = [];
      if (c.name) { globals.push(c.name.text); parts.push(c.name.text + ' = __sbxDefault(' + req + ')'); }
      const nb = c.namedBindings;
      if (nb && t.isNamespaceImport(nb)) { globals.push(nb.name.text); parts.push(nb.name.text + ' = ' + req); }
      if (nb && t.isNamedImports(nb)) {
        for (const el of nb.elements) {
          globals.push(el.name.text);
          parts.push(el.name.text + ' = ' + req + '[' + JSON.stringify((el.propertyName || el.name).text) + ']');
        }
      }
      const bind = wrap ? '(' + parts.join(', ') + ');' : 'var ' + parts.join(', ') + ';';
      edits.push([start, st.end, parts.length ? bind : req + ';']);
      return;
    }
    if (t.isExportDeclaration(st)) { edits.push([start, st.end, st.moduleSpecifier ? requireOf(st.moduleSpecifier) + ';' : '']); return; }
    if (t.isExportAssignment(st)) { edits.push([start, st.expression.getStart(sf), '']); return; }
    let from = start;
    if (exported.length) from = exported[exported.length - 1].end;
    if (t.isVariableStatement(st)) {
      const decls = st.declarationList.declarations;
      for (const d of decls) bindingNames(t, d.name, globals);
      if (!wrap) {
        // `var` keeps a script's completion value (the cell's result) as
        // a declaration does: `const z = 1` shows nothing
        edits.push([start, decls.length ? decls[0].getStart(sf) : st.end, 'var ']);
        return;
      }
      const parts = decls.map((d) => src(d.name) + ' = ' + (d.initializer ? src(d.initializer) : 'undefined'));
      edits.push([start, st.end, '(' + parts.join(', ') + ');']);
      return;
    }
    if (t.isClassDeclaration(st) && st.name) {
      globals.push(st.name.text);
      const cls = code.slice(from, st.end).trimStart();
      edits.push([start, st.end, (wrap ? '' : 'var ') + st.name.text + ' = ' + cls + ';']);
      return;
    }
    if (t.isFunctionDeclaration(st) && st.name) {
      if (wrap) hoisted.push(st.name.text);
      if (from !== start) edits.push([start, from, '']);
      return;
    }
    if (from !== start) edits.push([start, from, '']);
    if (wrap && i === stmts.length - 1 && t.isExpressionStatement(st)) {
      edits.push([st.expression.getStart(sf), st.expression.getStart(sf), 'return (']);
      edits.push([st.expression.end, st.expression.end, ')']);
    }
  });
  let body = code;
  edits.sort((a, b) => b[0] - a[0] || b[1] - a[1]);
  for (const [s, e, text] of edits) body = body.slice(0, s) + text + body.slice(e);
  const names = [...new Set(globals.concat(hoisted))];
  const head = names.length ? 'var ' + names.join(', ') + ';\n' : '';
  if (!wrap) return { code: head + body, wrapped: false };
  const lift = hoisted.map((n) => 'globalThis[' + JSON.stringify(n) + '] = ' + n + ';').join(' ');
  return { code: head + '(async () => {' + lift + '\n' + body + '\n})()', wrapped: true };
}

globalThis.__sbxDefault = (m) => (m && m.__esModule ? m.default : m);

function prepare(code, language) {
  const isTs = language === 'typescript';
  // The fast path: plain script text that declares nothing at its top
  // level runs as it is (no parser is loaded for console.log(1)).
  if (!isTs && !/\b(let|const|class|import|export|await)\b/.test(code)) {
    return { code, wrapped: false };
  }
  return rewrite(code, isTs);
}

function show(value) {
  if (typeof value === 'string') return value;
  return util.inspect(value, { depth: 4, colors: false });
}

function errorReply(e) {
  if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
    return { type: 'error', name: 'KeyboardInterrupt', value: 'the execution was interrupted', traceback: '' };
  }
  if (e instanceof Error || (e && typeof e === 'object' && 'message' in e)) {
    // the stack down to the cell's own frames, not the driver's under them
    const stack = String(e.stack || '').split('\n').filter((l) => !/\((node:|\[eval\])|at (node:|\[eval\])/.test(l) && !/ at sigintHandlersWrap /.test(l));
    return { type: 'error', name: String(e.name || 'Error'), value: String(e.message), traceback: stack.join('\n') };
  }
  return { type: 'error', name: 'Error', value: show(e), traceback: '' };
}

// What user code throws or rejects outside a cell's own flow (a timer's
// callback, a promise nobody awaits) is the user's: shown, not fatal.
process.on('uncaughtException', (e) => { process.stderr.write(String((e && e.stack) || e) + '\n'); });
process.on('unhandledRejection', (e) => { process.stderr.write('Unhandled rejection: ' + String((e && e.stack) || e) + '\n'); });

let pending = null;  // the running cell's reject, while it awaits
process.on('SIGINT', () => {
  if (pending) {
    const e = new Error('the execution was interrupted');
    e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
    pending(e);
  }
});

async function runCell(msg) {
  for (const [k, v] of Object.entries(msg.base_env || {})) process.env[k] = v;
  const saved = {};
  for (const [k, v] of Object.entries(msg.env || {})) { saved[k] = process.env[k]; process.env[k] = v; }
  try {
    globalThis.require = Module.createRequire(path.join(process.cwd(), '[cell]'));
    const cell = prepare(String(msg.code || ''), msg.language);
    let value = vm.runInThisContext(cell.code, { filename: 'cell', breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function' && cell.wrapped) {
      value = await new Promise((resolve, reject) => { pending = reject; value.then(resolve, reject); });
    }
    if (value !== undefined) reply({ type: 'result', text: show(value) });
  } catch (e) {
    reply(errorReply(e));
  } finally {
    pending = null;
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
  }
}

// Cells one at a time, in order; the end of the cell pipe is the end.
let buffered = '';
const queue = [];
let running = false;
async function drain() {
  if (running) return;
  running = true;
  while (queue.length) {
    const msg = queue.shift();
    cellNumber = msg.n;
    await runCell(msg);
    reply({ type: 'done' });
  }
  running = false;
}
const input = fs.createReadStream(null, { fd: cellFd, highWaterMark: 1 << 16 });
input.setEncoding('utf8');
input.on('data', (chunk) => {
  buffered += chunk;
  let i;
  while ((i = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, i);
    buffered = buffered.slice(i + 1);
    try { queue.push(JSON.parse(line)); } catch (e) { process.exit(65); }
  }
  drain();
});
input.on('end', () => process.exit(0));
input.on('error', () => process.exit(0));
})();
'''


R_DRIVER = r'''# sbx: the R context's interpreter, run as `Rscript --vanilla -e DRIVER
# CELL_FD REPLY_FD` by the context process. A cell comes on CELL_FD as a
# header line "N CODE_BYTES ENV_COUNT BASE_COUNT" and then the code and each
# variable as "KEY_BYTES VALUE_BYTES" lines with their bytes; replies go
# as JSON lines on REPLY_FD. What the cell prints goes to fds 1 and 2,
# which the context captures.
local({
  args <- commandArgs(trailingOnly = TRUE)
  cells <- file(sprintf("/proc/self/fd/%s", args[1]), "rb", raw = TRUE)
  replies <- file(sprintf("/proc/self/fd/%s", args[2]), "wb", raw = TRUE)
  cell_number <- "0"

  json_str <- function(s) {
    s <- iconv(enc2utf8(as.character(s)), "UTF-8", "UTF-8", sub = "?")
    s <- gsub("\\", "\\\\", s, fixed = TRUE)
    s <- gsub("\"", "\\\"", s, fixed = TRUE)
    s <- gsub("\n", "\\n", s, fixed = TRUE)
    s <- gsub("\r", "\\r", s, fixed = TRUE)
    s <- gsub("\t", "\\t", s, fixed = TRUE)
    # the other control characters, as \u00XX
    chars <- utf8ToInt(s)
    if (any(chars < 32L)) {
      s <- paste(vapply(chars, function(ch) if (ch < 32L) sprintf("\\u%04x", ch) else intToUtf8(ch),
                        ""), collapse = "")
    }
    paste0("\"", s, "\"")
  }
  reply <- function(fields) {
    flush(stdout()); flush(stderr())  # what the cell printed goes first
    parts <- c(sprintf("\"n\":%s", cell_number),
               sprintf("%s:%s", vapply(names(fields), json_str, ""), vapply(fields, json_str, "")))
    writeBin(charToRaw(paste0("{", paste(parts, collapse = ","), "}\n")), replies)
    flush(replies)
  }
  read_bytes <- function(n) if (n == 0) "" else rawToChar(readBin(cells, "raw", n))
  read_pairs <- function(count) {
    out <- character(0)
    for (i in seq_len(count)) {
      len <- as.integer(strsplit(readLines(cells, n = 1), " ", fixed = TRUE)[[1]])
      key <- read_bytes(len[1])
      out[key] <- read_bytes(len[2])
    }
    out
  }
  show <- function(value) paste(utils::capture.output(print(value)), collapse = "\n")
  error_reply <- function(e) {
    call <- conditionCall(e)
    # the call that failed; none for a stop() at the cell's top level
    # (its call is the driver's eval)
    where <- if (is.null(call)) "" else paste(deparse(call), collapse = "\n")
    if (startsWith(where, "eval(exprs[[i]]")) where <- ""
    reply(list(type = "error", name = class(e)[1], value = conditionMessage(e), traceback = where))
  }

  run_cell <- function(code) {
    exprs <- tryCatch(parse(text = code, keep.source = FALSE), error = function(e) e)
    if (inherits(exprs, "error")) {
      reply(list(type = "error", name = "SyntaxError", value = conditionMessage(exprs), traceback = ""))
      return(invisible())
    }
    n <- length(exprs)
    for (i in seq_len(n)) {
      ok <- tryCatch(
        withCallingHandlers({
          res <- withVisible(eval(exprs[[i]], envir = globalenv()))
          # a visible value: the last is the cell's result, the others
          # are printed, as at R's prompt
          if (res$visible) {
            if (i == n) reply(list(type = "result", text = show(res$value)))
            else print(res$value)
          }
          TRUE
        }, warning = function(w) {
          message("Warning message:\n", conditionMessage(w))
          invokeRestart("muffleWarning")
        }),
        interrupt = function(e) {
          reply(list(type = "error", name = "KeyboardInterrupt", value = "the execution was interrupted",
                     traceback = ""))
          FALSE
        },
        error = function(e) { error_reply(e); FALSE })
      if (!isTRUE(ok)) break
    }
    invisible()
  }

  repeat {
    header <- readLines(cells, n = 1)
    if (length(header) == 0) quit(save = "no", status = 0)
    h <- strsplit(header, " ", fixed = TRUE)[[1]]
    cell_number <- h[1]
    code <- read_bytes(as.integer(h[2]))
    env <- read_pairs(as.integer(h[3]))
    base <- read_pairs(as.integer(h[4]))
    if (length(base)) do.call(Sys.setenv, as.list(base))
    saved <- Sys.getenv(names(env), unset = NA, names = TRUE)
    if (length(env)) do.call(Sys.setenv, as.list(env))
    tryCatch(run_cell(code), interrupt = function(e) NULL)
    for (k in names(saved)) {
      if (is.na(saved[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, stats::setNames(list(saved[[k]]), k))
    }
    tryCatch(reply(list(type = "done")), interrupt = function(e) reply(list(type = "done")))
  }
})
'''


def js_command(cell_fd, reply_fd):
    return [NODE, "--stack-size=4000", "-e", JS_DRIVER, str(cell_fd), str(reply_fd), json.dumps(TYPESCRIPT_DIRS)], ()


def js_cell(n, msg):
    cell = {"n": n, "code": msg.get("code", ""), "language": msg.get("language"), "env": msg.get("env") or {},
            "base_env": msg.get("base_env") or {}}
    return (json.dumps(cell) + "\n").encode()


def r_command(cell_fd, reply_fd):
    return [RSCRIPT, "--vanilla", "-e", R_DRIVER, str(cell_fd), str(reply_fd)], ()


def r_cell(n, msg):
    """R's framing (R has no JSON reader): a header line, then the bytes."""
    def pairs(d):
        out = b""
        for k, v in (d or {}).items():
            k, v = k.encode(), v.encode()
            out += b"%d %d\n" % (len(k), len(v)) + k + v
        return out

    code = msg.get("code", "").encode()
    env, base = msg.get("env") or {}, msg.get("base_env") or {}
    return b"%d %d %d %d\n" % (n, len(code), len(env), len(base)) + code + pairs(env) + pairs(base)


# Java: the JDK's jshell, its local engine in the driver's JVM; cells as
# length-prefixed fields (Java has no JSON reader). A run's env and the
# sandbox's are system properties, as E2B's Java kernel takes them.
JAVA = "/usr/bin/java"
JAVA_FLAGS = [
    "--add-modules", "jdk.jshell",
    # an interactive JVM: the client compiler only (javac's and jshell's
    # code needs no more), a serial GC, the JDK's class data archive
    "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-UsePerfData", "-Xss8m",
    # the JVM's own warnings to stderr, not amid the cell's stdout
    "-Xlog:disable", "-Xlog:all=warning:stderr",
    "-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8",
]
JAVA_SOURCE = None  # the driver's source in a memfd, made once

JAVA_DRIVER = r'''// sbx: the Java context's interpreter, run as `java --add-modules
// jdk.jshell --source 17 /proc/self/fd/SOURCE CELL_FD REPLY_FD` by the
// context process (this source in a memfd: no file is left anywhere). A cell is a frame on CELL_FD (a 4-byte big-endian
// length, then as many fields, each a 4-byte length and its UTF-8 bytes:
// the cell's number, its code, then the sandbox's env and the run's own as
// a count and that many name/value pairs); replies go as JSON lines on
// REPLY_FD, each with the cell's number. What the cell prints goes to fds
// 1 and 2, which the context captures.
import java.io.*;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.*;
import jdk.jshell.*;
import jdk.jshell.execution.DirectExecutionControl;
import jdk.jshell.spi.ExecutionControl;
import jdk.jshell.spi.ExecutionControlProvider;
import jdk.jshell.spi.ExecutionEnv;

public class SbxJava {
    // The local execution engine (jdk.jshell's LocalExecutionControl, in
    // the driver's JVM) that keeps what each run returns as the object it
    // is: a String is the cell's result as it is, not as jshell quotes it.
    static final class Control extends DirectExecutionControl {
        final Object lock = new Object();
        ThreadGroup group;  // the running snippet's, while it runs
        boolean interrupted;  // this cell's: its snippets do not run
        Object value;
        boolean ran;

        @Override
        protected String invoke(Method doit) throws Exception {
            ThreadGroup g = new ThreadGroup("jshell");
            Object[] res = new Object[1];
            Throwable[] thrown = new Throwable[1];
            boolean[] stopped = new boolean[1];
            Thread t = new Thread(g, () -> {
                try {
                    res[0] = doit.invoke(null);
                } catch (InvocationTargetException e) {
                    if (e.getCause() instanceof ThreadDeath) stopped[0] = true;
                    else thrown[0] = e;
                } catch (ThreadDeath e) {
                    stopped[0] = true;
                } catch (Throwable e) {
                    thrown[0] = e;
                }
            }, "main");
            t.setContextClassLoader(doit.getDeclaringClass().getClassLoader());
            synchronized (lock) {
                if (interrupted) throw new ExecutionControl.StoppedException();
                group = g;
                t.start();
            }
            try {
                t.join();
            } finally {
                synchronized (lock) { group = null; }
            }
            if (stopped[0]) throw new ExecutionControl.StoppedException();
            if (thrown[0] instanceof Exception) throw (Exception) thrown[0];
            if (thrown[0] != null) throw new InvocationTargetException(thrown[0]);
            value = res[0];
            ran = true;
            return valueString(res[0]);
        }

        @Override
        public void stop() {
            synchronized (lock) {
                interrupted = true;
                if (group == null) return;
                try {
                    // ThreadGroup.stop, which JDK 20 and later no longer have:
                    // there the cell's threads are interrupted only
                    ThreadGroup.class.getMethod("stop").invoke(group);
                } catch (ReflectiveOperationException | RuntimeException e) {
                    group.interrupt();
                }
            }
        }
    }

    static final Control CONTROL = new Control();
    static JShell shell;
    static OutputStream replyOut;
    static int cellNumber;
    static volatile boolean inCell;

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c >= 0x20 && c < 0x7f) b.append(c);
            else b.append(String.format("\\u%04x", (int) c));  // ASCII only: no lone surrogate is lost
        }
        b.append('"');
    }

    static void reply(String... kv) {
        StringBuilder b = new StringBuilder("{\"n\":").append(cellNumber);
        for (int i = 0; i < kv.length; i += 2) {
            b.append(',');
            quote(b, kv[i]);
            b.append(':');
            quote(b, kv[i + 1] == null ? "" : kv[i + 1]);
        }
        b.append("}\n");
        try {
            synchronized (SbxJava.class) {
                replyOut.write(b.toString().getBytes(StandardCharsets.US_ASCII));
                replyOut.flush();
            }
        } catch (IOException e) {
            Runtime.getRuntime().halt(70);  // the context is gone
        }
    }

    static void error(String name, String value, String traceback) {
        reply("type", "error", "name", name, "value", value, "traceback", traceback);
    }

    // A class the cells declared is REPL.$JShell$12$Boom: shown as Boom.
    static String className(String name) {
        if (name == null) return "Error";
        if (name.startsWith("REPL.$JShell$")) {
            int i = name.indexOf('$', "REPL.$JShell$".length());
            return i >= 0 ? name.substring(i + 1) : name.substring("REPL.".length());
        }
        return name;
    }

    static String frames(Throwable e) {
        StringBuilder b = new StringBuilder();
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable t = e; t != null && seen.add(t); t = t.getCause()) {
            String name = t instanceof EvalException ? ((EvalException) t).getExceptionClassName() : t.getClass().getName();
            if (t != e) b.append("Caused by: ");
            b.append(className(name));
            if (t.getMessage() != null) b.append(": ").append(t.getMessage());
            b.append('\n');
            StackTraceElement[] st = t.getStackTrace();
            int last = st.length - 1;  // down to the cell's own frames, not the driver's under them
            while (last >= 0 && !st[last].getClassName().isEmpty() && !st[last].getClassName().startsWith("REPL.")) last--;
            if (last < 0) last = st.length - 1;
            for (int i = 0; i <= last; i++) {
                StackTraceElement f = st[i];
                if (f.getClassName().isEmpty() || f.getClassName().startsWith("REPL.")) {
                    // as jshell shows them: `at f (#12:1)`, #12 the snippet
                    String c = f.getClassName().replaceFirst("^REPL\\.", "").replaceFirst("^\\$JShell\\$\\d+\\$?", "").replaceAll("^\\.+|\\.+$", "");
                    String m = f.getMethodName().equals("do_it$") ? "" : f.getMethodName();
                    String where = (c.isEmpty() || m.isEmpty() ? c : c + ".") + m;
                    b.append("\tat ").append(where).append(where.isEmpty() ? "" : " ").append('(')
                     .append(f.getFileName() == null ? "" : f.getFileName()).append(':').append(f.getLineNumber()).append(")\n");
                } else {
                    b.append("\tat ").append(f).append('\n');
                }
            }
        }
        return b.toString();
    }

    static String diagnostics(Snippet sn) {
        StringBuilder b = new StringBuilder();
        String src = sn.source();
        for (Diag d : (Iterable<Diag>) shell.diagnostics(sn)::iterator) {
            b.append(d.isError() ? "error: " : "warning: ");
            for (String line : d.getMessage(Locale.ROOT).split("\n")) {
                if (!line.trim().startsWith("location:")) b.append(line).append('\n');  // the wrapper class's
            }
            long p = d.getPosition();
            if (p >= 0 && p <= src.length()) {
                int s = src.lastIndexOf('\n', (int) Math.max(p - 1, 0));
                s = (p == 0) ? 0 : s + 1;
                int e = src.indexOf('\n', (int) p);
                if (e < 0) e = src.length();
                b.append(src, s, e).append('\n');
                for (int i = s; i < p; i++) b.append(src.charAt(i) == '\t' ? '\t' : ' ');
                b.append("^\n");
            }
        }
        return b.toString();
    }

    static String firstError(Snippet sn) {
        for (Diag d : (Iterable<Diag>) shell.diagnostics(sn)::iterator) {
            if (d.isError()) return d.getMessage(Locale.ROOT).split("\n", 2)[0];
        }
        return "the snippet was rejected";
    }

    static void flushStreams() {
        System.out.flush();
        System.err.flush();
    }

    // One snippet: false when the cell stops at it (an error was sent).
    static boolean snippet(String src, String[] result) {
        CONTROL.ran = false;
        CONTROL.value = null;
        List<SnippetEvent> events = shell.eval(src);
        flushStreams();
        boolean ran = CONTROL.ran;
        Object raw = CONTROL.value;
        if (CONTROL.interrupted) {
            error("KeyboardInterrupt", "the execution was interrupted", "");
            return false;
        }
        for (SnippetEvent ev : events) {
            if (ev.causeSnippet() != null) continue;  // an update of an earlier snippet
            Snippet sn = ev.snippet();
            if (ev.status() == Snippet.Status.REJECTED) {
                error("CompilationError", firstError(sn), diagnostics(sn));
                return false;
            }
            JShellException ex = ev.exception();
            if (ex instanceof EvalException) {
                EvalException ee = (EvalException) ex;
                error(className(ee.getExceptionClassName()), ee.getMessage() == null ? "" : ee.getMessage(), frames(ee));
                return false;
            }
            if (ex instanceof UnresolvedReferenceException) {
                DeclarationSnippet d = ((UnresolvedReferenceException) ex).getSnippet();
                String deps = String.join(", ", (Iterable<String>) shell.unresolvedDependencies(d)::iterator);
                error("UnresolvedReferenceException", "attempted to use " + d.kind().toString().toLowerCase(Locale.ROOT)
                      + " " + d.name() + ", which cannot be used until this is declared: " + deps, "");
                return false;
            }
            if (ex != null) {
                error(ex.getClass().getSimpleName(), String.valueOf(ex.getMessage()), frames(ex));
                return false;
            }
            if (ev.status() == Snippet.Status.RECOVERABLE_NOT_DEFINED && sn instanceof DeclarationSnippet) {
                String deps = String.join(", ", (Iterable<String>) shell.unresolvedDependencies((DeclarationSnippet) sn)::iterator);
                error("CompilationError", "cannot find symbol: " + deps, diagnostics(sn));
                return false;
            }
            switch (sn.subKind()) {
                case VAR_VALUE_SUBKIND:
                case OTHER_EXPRESSION_SUBKIND:
                case TEMP_VAR_EXPRESSION_SUBKIND:
                    String type = sn instanceof ExpressionSnippet ? ((ExpressionSnippet) sn).typeName()
                                : sn instanceof VarSnippet ? ((VarSnippet) sn).typeName() : "";
                    if ("void".equals(type) || (ran && raw == null)) result[0] = null;
                    else if (ran && raw instanceof String) result[0] = (String) raw;
                    else result[0] = ev.value();
                    break;
                default:
                    result[0] = null;
            }
        }
        return true;
    }

    static void runCell(String code) {
        String[] result = new String[1];
        SourceCodeAnalysis sca = shell.sourceCodeAnalysis();
        String rest = code;
        while (true) {
            if (CONTROL.interrupted) {
                error("KeyboardInterrupt", "the execution was interrupted", "");
                return;
            }
            SourceCodeAnalysis.CompletionInfo info = sca.analyzeCompletion(rest);
            SourceCodeAnalysis.Completeness c = info.completeness();
            if (c == SourceCodeAnalysis.Completeness.EMPTY) break;
            // an incomplete rest goes to jshell as it is: its diagnostics say what is missing
            String src = c.isComplete() ? info.source() : rest;
            if (!snippet(src, result)) return;
            if (!c.isComplete()) {
                result[0] = null;
                break;
            }
            rest = info.remaining();
        }
        if (result[0] != null) reply("type", "result", "text", result[0]);
    }

    static String field(DataInputStream in) throws IOException {
        byte[] b = new byte[in.readInt()];
        in.readFully(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    static Map<String, String> pairs(DataInputStream in) throws IOException {
        Map<String, String> m = new LinkedHashMap<>();
        for (int k = Integer.parseInt(field(in)); k > 0; k--) m.put(field(in), field(in));
        return m;
    }

    public static void main(String[] args) throws Exception {
        DataInputStream cells = new DataInputStream(new BufferedInputStream(new FileInputStream("/dev/fd/" + args[0]), 1 << 16));
        replyOut = new FileOutputStream("/dev/fd/" + args[1]);
        ExecutionControlProvider local = new ExecutionControlProvider() {
            public String name() { return "sbx"; }
            public ExecutionControl generate(ExecutionEnv env, Map<String, String> params) { return CONTROL; }
        };
        shell = JShell.builder().executionEngine(local, Map.of()).build();
        // the jshell tool's default imports
        for (String p : new String[] {"java.io", "java.math", "java.net", "java.nio.file", "java.util",
                "java.util.concurrent", "java.util.function", "java.util.prefs", "java.util.regex", "java.util.stream"}) {
            shell.eval("import " + p + ".*;");
        }
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> {
            if (inCell) shell.stop();  // the running cell's, as ^C at jshell's prompt
        });
        while (true) {
            int len;
            try {
                len = cells.readInt();
            } catch (EOFException e) {
                System.exit(0);  // the context is gone
                return;
            }
            byte[] frame = new byte[len];
            cells.readFully(frame);
            DataInputStream in = new DataInputStream(new ByteArrayInputStream(frame));
            int n = Integer.parseInt(field(in));
            String code = field(in);
            Map<String, String> base = pairs(in);
            Map<String, String> env = pairs(in);
            synchronized (CONTROL.lock) { CONTROL.interrupted = false; }
            cellNumber = n;
            inCell = true;
            Map<String, String> saved = new LinkedHashMap<>();
            try {
                base.forEach(System::setProperty);
                for (Map.Entry<String, String> e : env.entrySet()) {
                    saved.put(e.getKey(), System.getProperty(e.getKey()));
                    System.setProperty(e.getKey(), e.getValue());
                }
                runCell(code);
            } catch (Throwable e) {
                error(className(e.getClass().getName()), String.valueOf(e.getMessage()), frames(e));
            } finally {
                inCell = false;
                flushStreams();
                saved.forEach((k, v) -> {
                    if (v == null) System.clearProperty(k);
                    else System.setProperty(k, v);
                });
                reply("type", "done");
            }
        }
    }
}
'''


def java_command(cell_fd, reply_fd):
    global JAVA_SOURCE
    if JAVA_SOURCE is None:
        fd = os.memfd_create("SbxJava.java", os.MFD_CLOEXEC)
        os.write(fd, JAVA_DRIVER.encode())
        JAVA_SOURCE = fd
    argv = [JAVA] + JAVA_FLAGS + ["--source", "17", "/proc/self/fd/%d" % JAVA_SOURCE, str(cell_fd), str(reply_fd)]
    return argv, (JAVA_SOURCE,)


def java_cell(n, msg):
    """A 4-byte big-endian length, then fields, each a length and its UTF-8
    bytes: the cell's number, its code, the sandbox's env and the run's own
    (a count, then names and values)."""
    import struct

    fields = [str(n), msg.get("code", "")]
    for env in (msg.get("base_env") or {}, msg.get("env") or {}):
        fields.append(str(len(env)))
        for k, v in env.items():
            fields += [str(k), str(v)]
    body = b"".join(struct.pack(">I", len(b)) + b for b in (f.encode("utf-8", "replace") for f in fields))
    return struct.pack(">I", len(body)) + body


def java_installed():
    """None when a JDK with jshell is here, else what is missing."""
    if not os.access(JAVA, os.X_OK):
        return "Java (%s) is not installed in this sandbox's template" % JAVA
    home = os.path.dirname(os.path.dirname(os.path.realpath(JAVA)))
    # the JDK's jshell module (and javac's, which it needs), not a JRE
    if not all(os.access(os.path.join(home, "bin", b), os.X_OK) for b in ("jshell", "javac")):
        return "the JDK's jshell (Debian package openjdk-17-jdk-headless) is not installed in this sandbox's template"
    return None


# language -> (the interpreter's name in messages, its command (argv and
# the descriptors it needs besides the two pipes), a cell's bytes)
CHILD_LANGUAGES = {
    "javascript": ("Node.js", js_command, js_cell),
    "typescript": ("Node.js", js_command, js_cell),
    "r": ("R", r_command, r_cell),
    "java": ("Java", java_command, java_cell),
}


def die_with_parent():
    # The interpreter dies with its context even when the context is killed
    # while a cell spins (an interrupt it never reads): no orphan runs on.
    import ctypes

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def child_start(command):
    import subprocess

    cr, cw = os.pipe2(os.O_CLOEXEC)
    rr, rw = os.pipe2(os.O_CLOEXEC)
    try:
        # a process group of its own: an interrupt reaches what it started too
        argv, fds = command(cr, rw)
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, pass_fds=(cr, rw) + tuple(fds), env=dict(os.environ),
                             cwd=os.getcwd(), process_group=0, preexec_fn=die_with_parent)
    except OSError:
        os.close(cw)
        os.close(rr)
        raise
    finally:
        os.close(cr)
        os.close(rw)
    return (p, cw, rr)


def child_stop():
    """Forget this process's interpreter (closed pipes end it when it is ours)."""
    global CHILD
    if CHILD is not None:
        os.close(CHILD[1])
        os.close(CHILD[2])
        CHILD = None


def child_relay(m):
    """One reply of the interpreter, as the context's message: what the cell
    printed before it goes first."""
    if FDCAP is not None:
        FDCAP.drain()
    kind = m.get("type")
    if kind == "result" and isinstance(m.get("text"), str):
        emit({"type": "result", "is_main_result": True, "text": m["text"]})
    elif kind == "error":
        emit({"type": "error", "name": str(m.get("name", "Error")), "value": str(m.get("value", "")),
              "traceback": str(m.get("traceback", ""))})


def run_child(msg):
    global CHILD, CHILD_RUNS
    title, command, encode = CHILD_LANGUAGES[msg.get("language")]
    CHILD_RUNS += 1
    emit({"type": "number_of_executions", "execution_count": CHILD_RUNS})
    for k, v in (msg.get("base_env") or {}).items():
        os.environ[k] = v  # for an interpreter started later as well
    if CHILD is not None and CHILD[0].poll() is not None:
        child_stop()
    if CHILD is None:
        try:
            CHILD = child_start(command)
        except OSError as e:
            emit({"type": "error", "name": "RuntimeError", "value": "could not start %s: %s" % (title, e),
                  "traceback": ""})
            return
    p, cw, rr = CHILD
    try:
        data = encode(CHILD_RUNS, msg)
        while data:
            data = data[os.write(cw, data):]
    except OSError:
        pass  # it is gone: the reads below say so
    buf = b""
    while True:
        try:
            # The interpreter's own children may hold the reply pipe open
            # after it exits: its exit is watched, not only the pipe's end.
            ready, _, _ = select.select([rr], [], [], 0.2)
            chunk = os.read(rr, 65536) if ready else None
            if chunk is None:
                if p.poll() is None:
                    continue
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    m = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(m, dict) or m.get("n") != CHILD_RUNS:
                    continue  # an earlier cell's, which an interrupt left behind
                if m.get("type") == "done":
                    if FDCAP is not None:
                        time.sleep(0.01)
                        FDCAP.drain()
                    return
                child_relay(m)
        except KeyboardInterrupt:
            # the server's interrupt: the interpreter's, as ^C at its prompt
            try:
                os.killpg(p.pid, signal.SIGINT)
            except OSError:
                pass
    rc = p.wait()
    child_stop()
    if FDCAP is not None:
        time.sleep(0.01)
        FDCAP.drain()
    emit({"type": "error", "name": "ExitError",
          "value": "%s exited with status %d; the next run starts a new one" % (title, rc), "traceback": ""})


def run_cell(msg):
    global EXEC_ID
    shell = SHELL
    EXEC_ID = msg.get("x")
    if msg.get("language") == "bash" or msg.get("language") in CHILD_LANGUAGES:
        try:
            (run_bash if msg.get("language") == "bash" else run_child)(msg)
        finally:
            emit({"type": "done"})
            EXEC_ID = None
        return
    saved = {}
    for k, v in (msg.get("base_env") or {}).items():
        os.environ[k] = v
    for k, v in (msg.get("env") or {}).items():
        saved[k] = os.environ.get(k)
        os.environ[k] = v
    try:
        emit({"type": "number_of_executions", "execution_count": shell.execution_count})
        try:
            shell.run_cell(msg.get("code", ""), store_history=True)
        except KeyboardInterrupt:
            emit({"type": "error", "name": "KeyboardInterrupt", "value": "", "traceback": "KeyboardInterrupt"})
        sys.stdout.flush()
        sys.stderr.flush()
        if FDCAP is not None:
            FDCAP.drain()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        emit({"type": "done"})
        EXEC_ID = None


FDCAP = None


def become_context(sock, cwd):
    """Make this process a context speaking on sock (fresh, or forked)."""
    global CHAN, FDCAP, BASH
    CHAN = Chan(sock)
    if BASH is not None:
        # a fork's copy of a bash context: the shell is its parent's, not
        # this one's (a new one starts at the first run; its state is not
        # carried)
        BASH[0].stdin.close()
        os.close(BASH[1])
        BASH = None
    # likewise a copy of another language's interpreter pipes
    child_stop()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if cwd is not None:
        try:
            os.chdir(cwd)
        except OSError:
            os.chdir(HOME)
    if FDCAP is None:
        FDCAP = FdCapture()
    sys.stdout = OutStream("stdout")
    sys.stderr = OutStream("stderr")
    CHAN.send({"type": "ready", "pid": os.getpid()})


# A process that makes contexts (the zygote, or a context being forked)
# forks once; it stays the parent, and a thread of it waits for that pid
# only (never -1: the user's own subprocesses keep their statuses), then
# tells the server how the child ended through the child's own channel.
# Should the parent go first, the child is the server's (a subreaper).
#
# Forking a process of ~110 MB takes tens of ms on a small VM (page tables,
# then the child's first copy-on-write faults), so the zygote keeps a spare:
# a copy forked ahead of time that waits, idle, for the channel it will
# speak on. A context that has been forked once keeps one too, made when it
# has been idle for SPARE_IDLE_S after a run (so back-to-back runs never pay
# for it) and dropped by its next run (its state would be stale).
CHILD_CHAN = {}  # pid -> a copy of the child's channel end, once it has one
SPARE = None  # (pid, socket): the spare and its activation socket
FORK_HOT = False  # this context was forked: keep a spare of it
SPARE_IDLE_S = 0.05


def fork_child(chan_fd=None):
    """os.fork() with the bookkeeping above: 0 in the child, else its pid."""
    global SPARE, FDCAP
    keep = os.dup(chan_fd) if chan_fd is not None else None
    try:
        pid = os.fork()
    except OSError:
        if keep is not None:
            os.close(keep)
        raise
    if pid == 0:
        for fd in CHILD_CHAN.values():
            os.close(fd)
        CHILD_CHAN.clear()
        if keep is not None:
            os.close(keep)
        if SPARE is not None:
            SPARE[1].close()
            SPARE = None
        if FDCAP is not None:
            # Its thread stayed with the parent: the child makes its own.
            for r, _ in FDCAP.pipes:
                os.close(r)
            FDCAP = None
        return 0
    if keep is not None:
        CHILD_CHAN[pid] = keep
    threading.Thread(target=wait_child, args=(pid,), daemon=True).start()
    return pid


def wait_child(pid):
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = None
    keep = CHILD_CHAN.pop(pid, None)
    if keep is None:
        return  # a spare that was never used
    try:
        os.write(keep, (json.dumps({"type": "exited", "pid": pid, "status": status}) + "\n").encode())
    except OSError:
        pass
    os.close(keep)


def make_spare(frozen):
    """Fork the spare: 0 in it (once activated it is a context: the caller
    goes on as one), its pid in the parent, -1 when it could not be made."""
    global SPARE
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if not frozen:
        # Frozen objects are never scanned by the collector: a collection
        # in the copy would otherwise touch every object and copy every
        # page, undoing copy-on-write. The parent thaws at once.
        gc.freeze()
    try:
        pid = fork_child()
    except OSError:
        pid = -1
    if pid != 0 and not frozen:
        gc.unfreeze()
    if pid < 0:
        a.close()
        b.close()
        return -1
    if pid == 0:
        a.close()
        SPARE_SOCK[0] = b
        return 0
    b.close()
    SPARE = (pid, a)
    return pid


SPARE_SOCK = [None]  # in a spare: its activation socket


def spare_wait(sock):
    """In a spare: wait to be activated, then become the context."""
    global FDCAP
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    FDCAP = FdCapture()  # ready before it is asked for: not on the path
    ch = Chan(sock)
    msg = ch.recv()
    if msg is None or not ch.fds:
        os._exit(0)
    fd = ch.fds.pop(0)
    sock.close()
    become_context(socket.socket(fileno=fd), msg.get("cwd"))


def activate_spare(fd, cwd):
    """Hand fd to the spare: True when it took it."""
    global SPARE
    if SPARE is None:
        return False
    pid, sock = SPARE
    SPARE = None
    CHILD_CHAN[pid] = os.dup(fd)
    try:
        socket.send_fds(sock, [(json.dumps({"cwd": cwd}) + "\n").encode()], [fd])
    except OSError:
        os.close(CHILD_CHAN.pop(pid))
        sock.close()
        return False
    sock.close()
    return True


def drop_spare():
    global SPARE
    if SPARE is not None:
        pid, sock = SPARE
        SPARE = None
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        sock.close()


def context_loop():
    """A context: runs, forks. Returns never (exits at end of its channel)."""
    global FORK_HOT
    while True:
        try:
            wait = SPARE_IDLE_S if FORK_HOT and SPARE is None else None
            try:
                msg = CHAN.recv(timeout=wait)
            except TimeoutError:
                if make_spare(False) == 0:
                    spare_sock = SPARE_SOCK[0]
                    CHAN.sock.close()
                    FORK_HOT = False
                    spare_wait(spare_sock)
                continue
            if msg is None:
                os._exit(0)
            op = msg.get("op")
            if op == "execute":
                drop_spare()  # its state is about to be stale
                run_cell(msg)
            elif op == "warm":
                # A silent cell: the copy-on-write faults of a first run are
                # taken now, in the pool, not by the user's first cell.
                SHELL.run_cell("pass", store_history=False, silent=True)
                CHAN.send({"type": "warmed"})
            elif op == "fork":
                fd = CHAN.fds.pop(0)
                FORK_HOT = True
                if activate_spare(fd, None):
                    os.close(fd)
                    CHAN.send({"type": "forked"})
                    continue
                gc.freeze()
                try:
                    pid = fork_child(fd)
                except OSError as e:
                    gc.unfreeze()
                    CHAN.send({"type": "forked", "error": str(e)})
                    os.close(fd)
                    continue
                if pid == 0:
                    CHAN.sock.close()
                    FORK_HOT = False
                    become_context(socket.socket(fileno=fd), None)
                    continue
                gc.unfreeze()  # the parent collects as before
                os.close(fd)
                CHAN.send({"type": "forked"})
        except KeyboardInterrupt:
            pass


def zygote_main(sock):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    chan = Chan(sock)
    make_shell()
    # Every context starts from these objects: never scanned by the
    # collector, so no collection in a context copies their pages.
    gc.collect()
    gc.freeze()
    chan.send({"type": "ready", "pid": os.getpid()})
    while True:
        if SPARE is None and make_spare(True) == 0:
            spare_sock = SPARE_SOCK[0]
            chan.sock.close()
            spare_wait(spare_sock)
            context_loop()
        msg = chan.recv()
        if msg is None:
            os._exit(0)
        if msg.get("op") != "spawn" or not chan.fds:
            continue
        fd = chan.fds.pop(0)
        if activate_spare(fd, msg.get("cwd")):
            os.close(fd)
            chan.send({"type": "spawned"})
            continue
        try:
            pid = fork_child(fd)
        except OSError as e:
            chan.send({"type": "spawned", "error": str(e)})
            os.close(fd)
            continue
        if pid == 0:
            chan.sock.close()
            become_context(socket.socket(fileno=fd), msg.get("cwd"))
            context_loop()
        os.close(fd)
        chan.send({"type": "spawned"})


def cold_main(fd, cwd):
    """A context started from nothing (POST /contexts {"warm": false})."""
    make_shell()
    become_context(socket.socket(fileno=fd), cwd)
    context_loop()


# ---- the server -----------------------------------------------------------


class HttpError(Exception):
    def __init__(self, status, msg):
        super().__init__(msg)
        self.status = status
        self.msg = msg


class Context:
    def __init__(self, cid, language, cwd):
        self.id = cid
        self.language = language
        self.cwd = cwd
        self.chan = None
        self.pid = 0
        self.dead = None  # why it is gone, when it is
        self.started = False  # a listed default starts at its first use
        self.lock = threading.Lock()  # one execution at a time

    def json(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}


class Server:
    def __init__(self):
        self.lock = threading.Lock()
        self.contexts = {}
        self.defaults = {}
        self.zlock = threading.Lock()
        self.zchan = None
        self.ready = threading.Event()
        # The sandbox's environment (its create's env, POST /env by the
        # daemon once it has one: this server may be a pool's, started
        # before): set in every context at its next execution, for good.
        self.sandbox_env = {}
        self.exited = {}
        self.exited_cond = threading.Condition()
        self.seq = 0

    # -- processes

    def reaper(self):
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.05)
                continue
            except InterruptedError:
                continue
            with self.exited_cond:
                self.exited[pid] = status
                self.exited_cond.notify_all()

    def wait_status(self, pid, timeout=2.0):
        end = time.monotonic() + timeout
        with self.exited_cond:
            while pid not in self.exited:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.exited_cond.wait(left)
            return self.exited.pop(pid)

    def start_zygote(self, listener):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            listener.close()
            a.close()
            try:
                zygote_main(b)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(1)
        b.close()
        self.zchan = Chan(a)
        msg = self.zchan.recv()
        if msg is None or msg.get("type") != "ready":
            raise RuntimeError("the zygote did not start")

    def attach(self, ctx, sock):
        ctx.chan = Chan(sock)
        try:
            msg = ctx.chan.recv(timeout=120)
        except TimeoutError:
            msg = None
        if msg is None or msg.get("type") != "ready":
            raise HttpError(500, "the context did not start")
        ctx.pid = int(msg["pid"])
        ctx.dead = None
        ctx.started = True

    def start_listed(self, ctx):
        """Start a context listed but not started yet (ctx.lock held)."""
        if ctx.started or ctx.dead is not None:
            return
        try:
            self.spawn(ctx)
        except HttpError as e:
            ctx.dead = "could not start: %s" % e.msg

    def spawn(self, ctx, warm=True):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if warm and self.zchan is not None:
                with self.zlock:
                    self.zchan.send({"op": "spawn", "cwd": ctx.cwd}, [b.fileno()])
                    b.close()
                    msg = self.zchan.recv()
                if msg is None or "error" in msg:
                    raise HttpError(500, "could not start a context: %s" % (msg or {}).get("error", "zygote gone"))
            else:
                import subprocess

                subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--context", str(b.fileno()), ctx.cwd],
                    pass_fds=[b.fileno()],
                    close_fds=True,
                )
                b.close()
            self.attach(ctx, a)
        except BaseException:
            a.close()
            b.close()
            raise

    def kill(self, ctx):
        # Its parent reaps it (fork_context); nothing here waits for that.
        if ctx.pid and ctx.dead is None:
            try:
                os.kill(ctx.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if ctx.chan is not None:
            ctx.chan.sock.close()
            ctx.chan = None
        ctx.dead = "deleted"

    # -- contexts

    def new_context(self, language="python", cwd=HOME, warm=True):
        language = normalize_language(language)
        with self.lock:
            self.seq += 1
        ctx = Context(str(uuid.uuid4()), language, cwd)
        self.spawn(ctx, warm)
        with self.lock:
            self.contexts[ctx.id] = ctx
        return ctx

    def get(self, cid):
        with self.lock:
            ctx = self.contexts.get(cid)
        if ctx is None:
            raise HttpError(404, "Context %s not found" % cid)
        return ctx

    def list_default(self, language):
        """List a default context for language, started at its first use
        (E2B lists one per language from the start)."""
        ctx = Context(str(uuid.uuid4()), language, HOME)
        with self.lock:
            if language in self.defaults:
                return
            self.contexts[ctx.id] = ctx
            self.defaults[language] = ctx.id

    def default(self, language):
        language = normalize_language(language)
        with self.lock:
            cid = self.defaults.get(language)
        if cid is None:
            ctx = self.new_context(language)
            with self.lock:
                if language in self.defaults:
                    old = ctx
                    ctx = self.contexts[self.defaults[language]]
                    self.contexts.pop(old.id, None)
                    self.kill(old)
                else:
                    self.defaults[language] = ctx.id
            return ctx
        return self.get(cid)

    def delete(self, cid):
        ctx = self.get(cid)
        with self.lock:
            self.contexts.pop(cid, None)
            for k, v in list(self.defaults.items()):
                if v == cid:
                    del self.defaults[k]
        with ctx.lock:
            self.kill(ctx)

    def restart(self, cid):
        ctx = self.get(cid)
        with ctx.lock:
            self.kill(ctx)
            self.spawn(ctx)
        return ctx

    def fork(self, cid):
        ctx = self.get(cid)
        new = Context(str(uuid.uuid4()), ctx.language, ctx.cwd)
        with ctx.lock:
            self.start_listed(ctx)
            if ctx.dead is not None or ctx.chan is None:
                raise HttpError(409, "context %s is not running (%s); restart it" % (cid, ctx.dead))
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                ctx.chan.send({"op": "fork"}, [b.fileno()])
                b.close()
                msg = ctx.chan.recv(timeout=30)
                if msg is None or msg.get("type") != "forked" or "error" in msg:
                    raise HttpError(500, "could not fork the context")
                self.attach(new, a)
            except BaseException:
                a.close()
                b.close()
                raise
        with self.lock:
            self.contexts[new.id] = new
        return new

    # -- execution

    def execute(self, ctx, code, env, timeout, out):
        """Run code in ctx; out(obj) sends a line (raises OSError when the
        client is gone). Returns when the context is idle again."""
        with ctx.lock:
            self.start_listed(ctx)
            if ctx.dead is not None or ctx.chan is None:
                out(
                    {
                        "type": "error",
                        "name": "ContextDied",
                        "value": "the context is not running (%s); restart it" % ctx.dead,
                        "traceback": "",
                    }
                )
                return
            with self.lock:
                self.seq += 1
                xid = self.seq
            try:
                ctx.chan.send({"op": "execute", "x": xid, "code": code, "env": env,
                               "base_env": self.sandbox_env, "language": ctx.language})
            except OSError:
                pass  # it died while idle: the reads below say how
            start = time.monotonic()
            deadline = start + timeout if timeout else None
            interrupted = 0
            client = True
            last = time.monotonic()
            while True:
                wait = 5.0
                if deadline is not None:
                    wait = min(wait, max(deadline - time.monotonic(), 0))
                try:
                    msg = ctx.chan.recv(timeout=wait)
                except TimeoutError:
                    t = time.monotonic()
                    if deadline is not None and t >= deadline:
                        if interrupted == 0:
                            interrupted = 1
                            os.kill(ctx.pid, signal.SIGINT)
                            deadline = t + 3
                            continue
                        self.kill(ctx)
                        ctx.dead = "killed: it did not stop after an interrupt"
                        msg = {
                            "type": "error",
                            "name": "TimeoutError",
                            "value": "the execution did not stop after an interrupt: the context was killed; restart it",
                            "traceback": "",
                        }
                        if client:
                            out(msg)
                        return
                    if client and t - last >= 5:
                        try:
                            out({"type": "keepalive"})
                        except OSError:
                            client = False
                            if interrupted == 0:
                                interrupted = 1
                                os.kill(ctx.pid, signal.SIGINT)
                                deadline = t + 3
                        last = t
                    continue
                if msg is None or msg.get("type") == "exited":
                    # Its parent's word on how it ended; at a bare end of
                    # file, its parent went first and the server reaps it.
                    status = msg.get("status") if msg else self.wait_status(ctx.pid)
                    ctx.dead = describe_status(status)
                    if ctx.chan is not None:
                        ctx.chan.sock.close()
                        ctx.chan = None
                    if client:
                        out(
                            {
                                "type": "error",
                                "name": "ContextDied",
                                "value": "the interpreter %s; restart the context" % ctx.dead,
                                "traceback": "",
                            }
                        )
                    return
                if msg.get("x") != xid:
                    continue
                msg.pop("x", None)
                if msg.get("type") == "done":
                    if interrupted and deadline is not None and timeout:
                        pass
                    return
                if client:
                    try:
                        out(msg)
                        last = time.monotonic()
                    except OSError:
                        client = False
                        if interrupted == 0:
                            interrupted = 1
                            os.kill(ctx.pid, signal.SIGINT)
                            deadline = time.monotonic() + 3


def describe_status(status):
    if status is None:
        return "died"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return "was killed by signal %d (%s)" % (sig, name)
    return "exited with status %d" % os.WEXITSTATUS(status)


LANGUAGE_NAMES = {
    "python": "python", "python3": "python", "py": "python",
    "bash": "bash", "sh": "bash", "shell": "bash",
    "javascript": "javascript", "js": "javascript", "node": "javascript", "nodejs": "javascript",
    "typescript": "typescript", "ts": "typescript",
    "r": "r",
    "java": "java",
}


def language_installed(lang):
    """None when lang's interpreter is here, else what is missing."""
    if lang in ("javascript", "typescript") and not os.access(NODE, os.X_OK):
        return "Node.js (%s) is not installed in this sandbox's template" % NODE
    if lang == "typescript" and not any(os.path.isdir(d) for d in TYPESCRIPT_DIRS):
        return "TypeScript (Debian package node-typescript) is not installed in this sandbox's template"
    if lang == "java":
        return java_installed()
    if lang == "r" and not os.access(RSCRIPT, os.X_OK):
        return "R (%s, Debian package r-base-core) is not installed in this sandbox's template" % RSCRIPT
    return None


def normalize_language(lang):
    name = LANGUAGE_NAMES.get((lang or "python").lower()) if isinstance(lang, (str, type(None))) else None
    if name is None:
        raise HttpError(400, "language %r is not supported (python, bash, javascript, typescript, r and java are)" % (lang,))
    missing = language_installed(name)
    if missing is not None:
        raise HttpError(400, "language %s: %s" % (name, missing))
    return name


SERVER = Server()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sbx-code/1"

    def log_message(self, fmt, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > (64 << 20):
            raise HttpError(413, "body too large")
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        try:
            v = json.loads(raw)
        except ValueError:
            raise HttpError(400, "the body is not JSON")
        if not isinstance(v, dict):
            raise HttpError(400, "the body must be a JSON object")
        return v

    def reply(self, status, obj, ctype="application/json"):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self, method):
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        try:
            if not SERVER.ready.wait(120):
                raise HttpError(503, "the code interpreter is still starting")
            if method == "GET" and parts == ["health"]:
                return self.reply(200, "OK")
            if method == "POST" and parts == ["execute"]:
                return self.execute(self.body())
            if method == "POST" and parts == ["env"]:
                env = self.body().get("env")
                if not isinstance(env, dict) or not all(
                        isinstance(k, str) and isinstance(v, str) and k and "=" not in k
                        and "\0" not in k + v for k, v in env.items()):
                    raise HttpError(400, "env must be an object of strings")
                SERVER.sandbox_env = dict(env)
                return self.reply(200, None)
            if parts[:1] == ["contexts"]:
                if method == "GET" and len(parts) == 1:
                    with SERVER.lock:
                        return self.reply(200, [c.json() for c in SERVER.contexts.values()])
                if method == "POST" and len(parts) == 1:
                    b = self.body()
                    cwd = b.get("cwd") or HOME
                    if not isinstance(cwd, str):
                        raise HttpError(400, "cwd must be a string")
                    ctx = SERVER.new_context(b.get("language"), cwd, b.get("warm", True) is not False)
                    return self.reply(200, ctx.json())
                if method == "DELETE" and len(parts) == 2:
                    SERVER.delete(parts[1])
                    return self.reply(200, None)
                if method == "POST" and len(parts) == 3 and parts[2] == "restart":
                    SERVER.restart(parts[1])
                    return self.reply(200, None)
                if method == "POST" and len(parts) == 3 and parts[2] == "fork":
                    return self.reply(200, SERVER.fork(parts[1]).json())
            raise HttpError(404, "no route %s %s" % (method, path))
        except HttpError as e:
            self.reply(e.status, e.msg.encode(), "text/plain")

    def execute(self, b):
        code = b.get("code")
        if not isinstance(code, str):
            raise HttpError(400, "code must be a string")
        if b.get("context_id") and b.get("language"):
            raise HttpError(400, "You can only specify either context_id or language, not both.")
        env = b.get("env_vars") or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise HttpError(400, "env_vars must be an object of strings")
        timeout = b.get("timeout") or 0
        if not isinstance(timeout, (int, float)) or timeout < 0:
            raise HttpError(400, "timeout must be a number of seconds")
        ctx = SERVER.get(b["context_id"]) if b.get("context_id") else SERVER.default(b.get("language"))
        chunked = self.request_version == "HTTP/1.1"
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()

        def out(obj):
            data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
            if chunked:
                data = b"%x\r\n%s\r\n" % (len(data), data)
            self.wfile.write(data)
            self.wfile.flush()

        try:
            SERVER.execute(ctx, code, env, timeout, out)
            out({"type": "end_of_execution"})
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except OSError:
            self.close_connection = True

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def main():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.chdir(HOME)
    httpd = HTTPServer(("127.0.0.1", PORT), Handler)
    SERVER.start_zygote(httpd.socket)
    threading.Thread(target=SERVER.reaper, daemon=True).start()

    def warm():
        try:
            ctx = SERVER.default("python")
            with ctx.lock:
                ctx.chan.send({"op": "warm"})
                ctx.chan.recv(timeout=60)
        except (OSError, TimeoutError, HttpError):
            pass
        finally:
            SERVER.ready.set()

    if language_installed("javascript") is None:
        SERVER.list_default("javascript")
    threading.Thread(target=warm, daemon=True).start()
    print("sbx code interpreter listening on 127.0.0.1:%d" % PORT, flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--context":
        cold_main(int(sys.argv[2]), sys.argv[3])
    else:
        main()
