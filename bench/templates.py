#!/usr/bin/python3
"""Template figures (docs/benchmarks.md, "Templates"):

  - build time of a template from a ~50 MB OCI image archive (2 layers,
    gzip), made here from host files;
  - create (+ one exec of /bin/true + delete) from that template against
    `base`, both without the pool (the pool holds base sandboxes only);
  - disk used on the host by N sandboxes of one template.

    SBX_BUILD=build /usr/bin/python3 bench/templates.py [N]
"""
import gzip
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from harness import Daemon  # noqa: E402
from test_templates import oci_archive, tar_bytes, userland  # noqa: E402


def du(path):
    out = subprocess.run(["du", "-sB1", path], capture_output=True, text=True).stdout
    return int(out.split()[0])


def payload_layer(limit=140 * 1024 * 1024):
    """Real files of the host's /usr/lib (~limit bytes), as one layer."""
    ents, total = [], 0
    for root, dirs, files in os.walk("/usr/lib/x86_64-linux-gnu"):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > 4 << 20:
                continue
            with open(p, "rb") as fh:
                data = fh.read()
            ents.append(("payload/" + os.path.relpath(p, "/usr/lib"), "file", data))
            total += len(data)
            if total >= limit:
                return ents, total
    return ents, total


def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    ents, raw = payload_layer()
    l1 = tar_bytes(userland(), gz=True)
    l2 = gzip.compress(tar_bytes(ents), compresslevel=1)
    archive = oci_archive([l1, l2], {"Env": ["PATH=/bin"]})
    print("archive: %.1f MB (%.1f MB of files, %d files)" % (len(archive) / 1e6, raw / 1e6,
                                                            len(ents)))
    d = Daemon(pool=0, max_sandboxes=max(64, n + 8)).start()
    try:
        builds = []
        for i in range(3):
            t = time.perf_counter()
            r = d.api("POST", "/v1/templates?name=bench%d&format=oci" % i, archive, raw=True,
                      timeout=600)
            builds.append(time.perf_counter() - t)
            assert r.status == 201, r
        print("build from the OCI archive: %s s (median %.2f s)"
              % (" / ".join("%.2f" % b for b in builds), statistics.median(builds)))
        layers = os.path.join(d.state, "templates", "layers")
        print("store after 3 builds of the same image: %.1f MB (one copy)" % (du(layers) / 1e6))

        def cycle(template):
            def go():
                sid = d.create(template=template)
                d.exec(sid, argv=["/bin/true"])
                d.kill(sid)
            return go
        for t in ("base", "bench0"):
            cycle(t)()
        res = {}
        for _ in range(2):  # interleaved
            for t in ("base", "bench0"):
                res.setdefault(t, []).extend(timed(cycle(t), 20))
        for t, v in res.items():
            v.sort()
            print("create+exec true+delete, %-6s (no pool): median %.1f ms, p90 %.1f ms"
                  % (t, statistics.median(v), v[int(len(v) * 0.9)]))

        tdir = os.path.join(d.state, "templates")
        before, sbefore = du(tdir), du(d.state)
        sids = [d.create(template="bench0") for _ in range(n)]
        for sid in sids:
            d.exec(sid, argv=["/bin/sh", "-c", "cat /payload/*/* >/dev/null 2>&1; true"])
        after, safter = du(tdir), du(d.state)
        print("%d sandboxes of one template (each read every file): template store %.1f MB "
              "before, %.1f MB with them (+%d bytes); whole state dir +%d bytes (database, "
              "audit log)" % (n, before / 1e6, after / 1e6, after - before, safter - sbefore))
        for sid in sids:
            d.kill(sid)
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
