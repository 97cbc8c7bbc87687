"""The VM root image cache is pruned (docs/vm.md "The root filesystem"):
after a template's or a snapshot's removal and at start, an image goes once
no VM, snapshot or template needs it, and never before.

A tiny directory template's image (cheap to build) stands for any image;
base's is never built here.
"""
import hashlib
import os

from harness import DaemonTest
from sbx_helpers import q
from test_templates import tar_bytes, userland


class VMPrune(DaemonTest):
    pool = 0

    def images(self):
        d = os.path.join(self.d.state, "vm-images")
        return sorted(n for n in os.listdir(d) if not n.startswith("."))

    def plant(self, tag):
        """An image nothing refers to (as an upgrade leaves behind)."""
        data = os.urandom(1 << 20)
        key = hashlib.sha256(tag.encode()).hexdigest()
        d = os.path.join(self.d.state, "vm-images")
        with open(os.path.join(d, key + ".img"), "wb") as f:
            f.write(data)
        with open(os.path.join(d, key + ".sum"), "w") as f:
            f.write(hashlib.sha256(data).hexdigest() + "\n")
        return key

    def sh(self, sid, cmd):
        return self.d.exec(sid, argv=["/bin/sh", "-c", cmd])  # busybox: no bash

    def vm(self, **fields):
        r = self.d.api("POST", "/v1/sandboxes", dict({"timeout": "5m"}, **fields))
        self.assertEqual(r.status, 201, r)
        return r.json()["id"]

    def test_in_use_images_survive_unused_ones_go(self):
        body = tar_bytes(userland() + [("srv", "dir"), ("srv/hi", "file", b"hi\n")])
        r = self.d.api("POST", "/v1/templates?" + q(name="prn", format="dir"), body, raw=True,
                       timeout=300)
        self.assertEqual(r.status, 201, r)
        a = self.vm(isolation="vm", template="prn", memory="256M")
        self.assertEqual(self.sh(a, "echo saved > /home/user/s")["exit_code"], 0)
        imgs = self.images()
        self.assertEqual(len(imgs), 2, imgs)  # the template's .img and .sum: no base image
        key = imgs[0][:64]
        r = self.d.api("POST", "/v1/sandboxes/%s/snapshots" % a, {"name": "prn1"})
        self.assertEqual(r.status, 201, r)
        # The template's tree changes (as base's does with a package
        # upgrade): its current key is another, its old image is needed only
        # by what ran on it.
        layers = os.path.join(self.d.state, "templates", "layers")
        hits = [os.path.join(dp, "hi") for dp, _, fs in os.walk(layers)
                if "hi" in fs and dp.endswith("/srv")]
        self.assertEqual(len(hits), 1, hits)
        os.utime(hits[0], (1700000001, 1700000001))

        # A snapshot goes: the running VM alone keeps the image; an image
        # no one needs goes with the same prune.
        stale = self.plant("stale-1")
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/prn1").status, 204)
        self.assertEqual(self.images(), [key + ".img", key + ".sum"])
        self.assertIn("removed VM root image %s" % stale, self.d.read_log())
        self.assertEqual(self.sh(a, "cat /srv/hi /home/user/s")["stdout"], "hi\nsaved\n")

        # No VM: a snapshot alone keeps it (the prune at start), and its
        # restore works (the image is the very one it ran on).
        r = self.d.api("POST", "/v1/sandboxes/%s/snapshots" % a, {"name": "prn2"})
        self.assertEqual(r.status, 201, r)
        self.d.kill(a)
        stale = self.plant("stale-2")
        self.d.stop()
        self.d.start()
        self.assertEqual(self.images(), [key + ".img", key + ".sum"])
        self.assertIn("removed VM root image %s" % stale, self.d.read_log())
        d = self.vm(snapshot="prn2")
        self.assertEqual(self.sh(d, "cat /home/user/s")["stdout"], "saved\n")
        self.d.kill(d)

        # Nothing needs it any more: it goes.
        self.assertEqual(self.d.api("DELETE", "/v1/snapshots/prn2").status, 204)
        self.assertEqual(self.images(), [])
        self.assertIn("removed VM root image %s" % key, self.d.read_log())
        self.assertEqual(self.d.api("DELETE", "/v1/templates/prn").status, 204)
