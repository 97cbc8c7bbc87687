"""Directory watches: GET /v1/sandboxes/{id}/files/watch streams inotify
events of a directory, watched by a helper inside the sandbox as the
sandbox's user. Event types and names, recursion, errors, paths that try to
leave the sandbox, limits, hang-ups and floods."""
import errno
import json
import os
import socket
import threading
import time

from harness import DaemonTest, UnixHTTPConnection
from sbx_helpers import q, wait_until
from test_restart import RestartTest, cgroup_pids


class Watch:
    """One watch stream; a thread collects its events (keepalives aside)."""

    def __init__(self, d, sid, path, read=True, **params):
        self.conn = UnixHTTPConnection(d.socket_path, timeout=300)
        self.conn.request("GET", "/v1/sandboxes/%s/files/watch?%s" % (sid, q(path=path, **params)))
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.events = []
        self.keepalives = 0
        self.ended = False
        self.lock = threading.Lock()
        self.thread = None
        if self.status != 200:
            self.body = json.loads(self.resp.read())
            self.conn.close()
            self.ended = True
        elif read:
            self.start_reading()

    def start_reading(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                ev = json.loads(line)
                with self.lock:
                    if ev["type"] == "keepalive":
                        self.keepalives += 1
                    else:
                        self.events.append(ev)
        except (OSError, ValueError, AttributeError):
            # A hang-up of ours (close) while reading; http.client may say
            # so with an AttributeError.
            pass
        finally:
            self.ended = True

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def pairs(self):
        return [(e["type"], e.get("name")) for e in self.snapshot()]

    def wait_for(self, pred, timeout=30, what="events"):
        return wait_until(lambda: pred(self.pairs()), timeout=timeout, what=what)

    def wait_seen(self, pair, timeout=30):
        return self.wait_for(lambda ps: pair in ps, timeout, "the event %r" % (pair,))

    def close(self):
        """Hang up (the daemon sees the connection go)."""
        if self.status == 200 and self.conn.sock is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.conn.close()
        if self.thread:
            self.thread.join(10)


class WatchTest(DaemonTest):
    def setUp(self):
        self.watches = []

    def tearDown(self):
        for w in self.watches:
            w.close()
        super().tearDown()

    def watch(self, sid, path, expect=200, **params):
        w = Watch(self.d, sid, path, **params)
        self.watches.append(w)
        self.assertEqual(w.status, expect, getattr(w, "body", None))
        return w

    def sh(self, sid, cmd, **fields):
        res = self.d.sh(sid, cmd, **fields)
        self.assertEqual(res["exit_code"], 0, res)
        return res["stdout"]

    def helpers(self, sid):
        """The watch helpers running in the sandbox, as ps sees them."""
        out = self.sh(sid, "ps -eo comm=", user="root")
        return [l for l in out.split() if l == "sbx-watch"]

    def marker(self, sid, w, path, name):
        """Touch path/name and wait for its create event: every event made
        before it has arrived."""
        self.sh(sid, "touch %s/%s" % (path, name))
        w.wait_seen(("create", name))


class Events(WatchTest):
    def test_each_type_with_its_name(self):
        sid = self.d.create()
        self.sh(sid, "mkdir /home/user/w")
        w = self.watch(sid, "/home/user/w")
        self.sh(sid, "cd /home/user/w && echo hi > a.txt")
        self.sh(sid, "cd /home/user/w && chmod 600 a.txt")
        self.sh(sid, "cd /home/user/w && mv a.txt b.txt")
        self.sh(sid, "cd /home/user/w && rm b.txt")
        self.sh(sid, "chmod 700 /home/user/w")
        w.wait_seen(("chmod", ""))
        self.assertEqual(w.pairs(), [
            ("create", "a.txt"), ("write", "a.txt"), ("chmod", "a.txt"),
            ("rename", "a.txt"), ("create", "b.txt"), ("remove", "b.txt"),
            ("chmod", ""),
        ])
        for e in w.snapshot():
            self.assertEqual(set(e), {"type", "name"}, e)

    def test_files_api_changes_are_seen(self):
        sid = self.d.create()
        self.sh(sid, "mkdir /home/user/w")
        w = self.watch(sid, "/home/user/w")
        r = self.d.upload(sid, "/home/user/w/up.bin", b"x" * 1000)
        self.assertEqual(r.status, 201, r)
        w.wait_for(lambda ps: any(n == "up.bin" for t, n in ps), what="up.bin")

    def test_relative_path_is_under_home(self):
        sid = self.d.create()
        self.sh(sid, "mkdir /home/user/rel")
        w = self.watch(sid, "rel")
        self.marker(sid, w, "/home/user/rel", "m")

    def test_odd_names(self):
        sid = self.d.create()
        self.sh(sid, "mkdir /home/user/w")
        w = self.watch(sid, "/home/user/w")
        # A quote, a backslash, a newline, and bytes that are not UTF-8.
        self.sh(sid, "cd /home/user/w && touch 'q\"b\\s' \"$(printf 'nl\\nx')\" "
                "\"$(printf 'bad\\377')\" 'sp ace'")
        want = {"q\"b\\s", "nl\nx", "bad\ufffd", "sp ace"}
        w.wait_for(lambda ps: want <= {n for t, n in ps if t == "create"}, what=repr(want))

    def test_removing_the_directory_ends_the_stream(self):
        sid = self.d.create()
        self.sh(sid, "mkdir -p /home/user/w/sub && touch /home/user/w/sub/f")
        w = self.watch(sid, "/home/user/w", recursive="true")
        self.sh(sid, "rm -rf /home/user/w")
        wait_until(lambda: w.ended, what="the end of the stream")
        ps = w.pairs()
        self.assertEqual(ps[-1], ("remove", ""), ps)
        for p in [("remove", "sub/f"), ("remove", "sub")]:
            self.assertIn(p, ps)
        wait_until(lambda: not self.helpers(sid), what="no helper left")

    def test_killing_the_sandbox_ends_the_stream(self):
        sid = self.d.create()
        w = self.watch(sid, "/tmp")
        self.assertEqual(self.d.kill(sid).status, 204)
        wait_until(lambda: w.ended, what="the end of the stream")

    def test_keepalive(self):
        sid = self.d.create()
        w = self.watch(sid, "/tmp")
        wait_until(lambda: w.keepalives >= 1, timeout=30, what="a keepalive line")
        self.assertEqual(w.pairs(), [])


class Recursion(WatchTest):
    def test_recursive_sees_nested_and_new_directories(self):
        sid = self.d.create()
        self.sh(sid, "mkdir -p /home/user/w/a/b")
        w = self.watch(sid, "/home/user/w", recursive="true")
        self.sh(sid, "touch /home/user/w/a/b/deep.txt")
        w.wait_seen(("create", "a/b/deep.txt"))
        # A directory made after the start is watched from then on.
        self.sh(sid, "mkdir /home/user/w/new")
        w.wait_seen(("create", "new"))
        self.sh(sid, "echo x > /home/user/w/new/f")
        w.wait_seen(("write", "new/f"))
        # A whole tree at once: what was inside before its watch was in
        # place is reported too.
        self.sh(sid, "mkdir -p /home/user/w/x/y/z && touch /home/user/w/x/y/z/early")
        for p in [("create", "x"), ("create", "x/y"), ("create", "x/y/z"),
                  ("create", "x/y/z/early")]:
            w.wait_seen(p)
        self.sh(sid, "touch /home/user/w/x/y/z/late")
        w.wait_seen(("create", "x/y/z/late"))

    def test_moved_directories_keep_their_names(self):
        sid = self.d.create()
        self.sh(sid, "mkdir -p /home/user/w/d1/in /home/user/out")
        w = self.watch(sid, "/home/user/w", recursive="true")
        self.sh(sid, "mv /home/user/w/d1 /home/user/w/d2")
        w.wait_seen(("create", "d2"))
        self.assertIn(("rename", "d1"), w.pairs())
        self.sh(sid, "touch /home/user/w/d2/in/f")
        w.wait_seen(("create", "d2/in/f"))
        # Moved out of the tree: no longer watched.
        self.sh(sid, "mv /home/user/w/d2 /home/user/out/d2 && touch /home/user/out/d2/in/g")
        w.wait_seen(("rename", "d2"))
        self.marker(sid, w, "/home/user/w", "m")
        self.assertFalse([p for p in w.pairs() if p[1] and p[1].endswith("g")], w.pairs())
        # Moved in: watched, and what it holds is announced.
        self.sh(sid, "mkdir -p /home/user/out/t/u && mv /home/user/out/t /home/user/w/t")
        w.wait_seen(("create", "t/u"))
        self.sh(sid, "touch /home/user/w/t/u/h")
        w.wait_seen(("create", "t/u/h"))

    def test_not_recursive_sees_only_the_top(self):
        sid = self.d.create()
        self.sh(sid, "mkdir -p /home/user/w/sub")
        w = self.watch(sid, "/home/user/w")
        self.sh(sid, "touch /home/user/w/sub/inner && mkdir /home/user/w/sub2 && "
                "touch /home/user/w/sub2/inner2 && touch /home/user/w/top")
        self.marker(sid, w, "/home/user/w", "m")
        names = [n for t, n in w.pairs()]
        self.assertIn("top", names)
        self.assertIn("sub2", names)
        self.assertFalse([n for n in names if "/" in n], names)

    def test_too_many_directories(self):
        sid = self.d.create()
        self.sh(sid, "mkdir /tmp/many && cd /tmp/many && seq 4100 | xargs mkdir")
        w = self.watch(sid, "/tmp/many", expect=429, recursive="true")
        self.assertEqual(w.body["error"], "resource_exhausted", w.body)
        self.assertIn("4096", w.body["message"])
        wait_until(lambda: not self.helpers(sid), what="no helper left")
        # Not recursive: one directory.
        w = self.watch(sid, "/tmp/many")
        self.marker(sid, w, "/tmp/many", "m")

    def test_new_directories_past_the_limit_are_an_overflow(self):
        sid = self.d.create()
        self.sh(sid, "mkdir /tmp/many && cd /tmp/many && seq 4090 | xargs mkdir")
        w = self.watch(sid, "/tmp/many", recursive="true")
        self.sh(sid, "cd /tmp/many && seq 5000 5020 | xargs mkdir")
        w.wait_seen(("overflow", None))
        # It goes on watching what it has.
        self.sh(sid, "touch /tmp/many/1/inside")
        w.wait_seen(("create", "1/inside"))

    def test_recursion_stays_on_its_mount(self):
        sid = self.d.create()
        # / is the read-only skeleton; /home/user, /tmp, /proc, /usr are other
        # mounts: a recursive watch of / covers the skeleton only.
        w = self.watch(sid, "/", recursive="true", user="root")
        self.sh(sid, "touch /tmp/not-seen /home/user/not-seen")
        time.sleep(1)
        self.assertEqual(w.pairs(), [])
        self.assertFalse(w.ended)


class Errors(WatchTest):
    def test_missing_file_and_forbidden(self):
        sid = self.d.create()
        self.sh(sid, "touch /home/user/file")
        self.sh(sid, "mkdir /tmp/priv && chmod 700 /tmp/priv", user="root")
        for path in ["/home/user/nope", "/home/user/file/x", "/nope/at/all"]:
            w = self.watch(sid, path, expect=404)
            self.assertEqual(w.body["error"], "not_found", w.body)
        w = self.watch(sid, "/home/user/file", expect=400)
        self.assertEqual(w.body["error"], "invalid_argument", w.body)
        self.assertIn("not a directory", w.body["message"])
        w = self.watch(sid, "/tmp/priv", expect=403)
        self.assertEqual(w.body["error"], "forbidden", w.body)
        w = self.watch(sid, "/tmp/priv/inner", expect=403)
        # Root inside may.
        w = self.watch(sid, "/tmp/priv", user="root")
        self.sh(sid, "touch /tmp/priv/r", user="root")
        w.wait_seen(("create", "r"))
        wait_until(lambda: self.helpers(sid) == ["sbx-watch"], what="only the root watch")

    def test_bad_parameters(self):
        sid = self.d.create()
        base = "/v1/sandboxes/%s/files/watch" % sid
        for query, status in [("", 400), ("?path=", 400), ("?path=/tmp&recursive=maybe", 400),
                              ("?path=/tmp&user=nobody", 400), ("?path=/tmp%00x", 400),
                              ("?path=/" + "a" * 5000, 400)]:
            r = self.d.api("GET", base + query)
            self.assertError(r, status)
        r = self.d.api("GET", "/v1/sandboxes/nosuchsandbox0000000/files/watch?path=/tmp")
        self.assertError(r, 404, "not_found")
        r = self.d.api("POST", base + "?path=/tmp")
        self.assertError(r, 405)

    def test_symlinks_stay_inside(self):
        sid = self.d.create()
        canary = "/etc/sbx-watch-canary-%d" % os.getpid()
        self.sh(sid, "mkdir /home/user/real && ln -s /home/user/real /tmp/in")
        # Root's own links: root may not follow another user's link in a
        # sticky directory where fs.protected_symlinks is 1 (Debian's
        # default; 403 here), which is the kernel's rule, not this test's.
        self.sh(sid, "ln -s /etc /tmp/x && ln -s ../../../../../../../../etc /tmp/y", user="root")
        # A link to a directory of the sandbox is followed, inside it.
        w = self.watch(sid, "/tmp/in")
        self.sh(sid, "touch /home/user/real/f")
        w.wait_seen(("create", "f"))
        # A link to /etc is the sandbox's own /etc (the read-only skeleton),
        # whatever the host's /etc does.
        wx = self.watch(sid, "/tmp/x", user="root")
        wy = self.watch(sid, "/tmp/y", recursive="true", user="root")
        # (The host's /etc is read-only in the kernel guests, where this
        # part is left to the host's run.)
        try:
            with open(canary, "w") as f:
                f.write("host")
            os.chmod(canary, 0o600)
            os.unlink(canary)
        except OSError as e:
            if e.errno != errno.EROFS:
                raise
        finally:
            if os.path.exists(canary):
                os.unlink(canary)
        time.sleep(1.5)
        self.assertEqual(wx.pairs(), [])
        self.assertEqual(wy.pairs(), [])
        self.assertFalse(wx.ended or wy.ended)
        # And the helper of that watch is in the sandbox, as root inside,
        # which is no host root.
        self.assertEqual(len(self.helpers(sid)), 3)


class Limits(WatchTest):
    def test_watches_per_sandbox(self):
        sid = self.d.create()
        other = self.d.create()
        ws = [self.watch(sid, "/tmp") for _ in range(64)]
        w = self.watch(sid, "/tmp", expect=429)
        self.assertEqual(w.body["error"], "resource_exhausted", w.body)
        # Per sandbox: another one has its own.
        self.watch(other, "/tmp")
        # One hung up: its place is free once its helper is gone.
        ws[0].close()

        def again():
            w = Watch(self.d, sid, "/tmp")
            self.watches.append(w)
            return w.status == 200

        wait_until(again, timeout=15, interval=0.5, what="a free place")
        self.assertEqual(len(self.helpers(sid)), 64)

    def test_hangup_leaves_no_helper(self):
        sid = self.d.create()
        w = self.watch(sid, "/home/user", recursive="true")
        self.assertEqual(self.helpers(sid), ["sbx-watch"])
        w.close()
        wait_until(lambda: not self.helpers(sid), timeout=15, what="the helper gone")

    def test_helper_killed_inside_ends_the_stream(self):
        sid = self.d.create()
        w = self.watch(sid, "/home/user")
        # Same uid as the sandbox's code, but not dumpable: its pipe cannot
        # be reached through /proc to forge events.
        res = self.d.sh(sid, "p=$(pgrep -x sbx-watch); echo forged > /proc/$p/fd/1")
        self.assertNotEqual(res["exit_code"], 0, res)
        self.assertIn("Permission denied", res["stderr"])
        self.sh(sid, "pkill -KILL -x sbx-watch")
        wait_until(lambda: w.ended, what="the end of the stream")
        self.assertEqual(w.pairs(), [])
        # The daemon and the sandbox are fine.
        w2 = self.watch(sid, "/home/user")
        self.marker(sid, w2, "/home/user", "after")

    def test_flood_overflows_and_stalls_nobody(self):
        sid = self.d.create()
        other = self.d.create()
        self.sh(sid, "mkdir /tmp/flood")
        # Nobody reads this stream while the flood runs.
        w = self.watch(sid, "/tmp/flood", read=False)
        flood_done = threading.Event()
        flood_res = {}

        def flood():
            flood_res["r"] = self.d.sh(sid, "cd /tmp/flood && seq 100000 | xargs touch", timeout=300)
            flood_done.set()

        t = threading.Thread(target=flood)
        t.start()
        # Another sandbox's commands go on meanwhile.
        slowest, n = 0.0, 0
        while not flood_done.is_set() or n < 10:
            t0 = time.monotonic()
            res = self.d.sh(other, "echo ok")
            self.assertEqual(res["stdout"], "ok\n")
            slowest = max(slowest, time.monotonic() - t0)
            n += 1
        t.join()
        self.assertEqual(flood_res["r"]["exit_code"], 0, flood_res["r"])
        self.assertLess(slowest, 10.0)
        w.start_reading()
        w.wait_seen(("overflow", None), timeout=60)
        # After the overflow the watch goes on.
        self.sh(sid, "touch /tmp/flood/after-the-flood")
        w.wait_seen(("create", "after-the-flood"), timeout=60)
        # Bounded: the daemon kept no more than its queue.
        self.assertLess(len(w.snapshot()), 100000)


class AcrossRestart(RestartTest):
    """A daemon that dies takes its watch streams with it; the helpers end
    by themselves (their reader is gone), and the next daemon's watches
    work."""

    def test_watch_helpers_end_with_the_daemon(self):
        sid = self.d.create()
        self.d.sh(sid, "mkdir /home/user/w")
        w = Watch(self.d, sid, "/home/user/w", recursive="true")
        self.assertEqual(w.status, 200)

        def helpers_from_host():
            names = []
            for pid in cgroup_pids(self.d, sid):
                try:
                    with open("/proc/%d/comm" % pid) as f:
                        names.append(f.read().strip())
                except OSError:
                    pass
            return [n for n in names if n == "sbx-watch"]

        self.assertEqual(helpers_from_host(), ["sbx-watch"])
        self.kill9()
        wait_until(lambda: w.ended, what="the stream's end")
        w.close()
        # No daemon runs: the helper sees its pipe's reader gone and exits.
        wait_until(lambda: not helpers_from_host(), timeout=15, what="the helper gone")
        self.restart()
        w2 = Watch(self.d, sid, "/home/user/w")
        try:
            self.assertEqual(w2.status, 200)
            self.d.sh(sid, "touch /home/user/w/after")
            w2.wait_seen(("create", "after"))
        finally:
            w2.close()
