"""Smoke: the daemon answers, a sandbox runs a command, the CLI works."""
from harness import DaemonTest

ASAN_SUBSET = True


class Smoke(DaemonTest):
    def test_healthz(self):
        r = self.d.api("GET", "/healthz")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json(), {"status": "ok"})

    def test_exec_roundtrip(self):
        sid = self.d.create()
        res = self.d.sh(sid, "echo out; echo err >&2; exit 3")
        self.assertEqual(res["exit_code"], 3)
        self.assertEqual(res["stdout"], "out\n")
        self.assertEqual(res["stderr"], "err\n")
        self.assertIsNone(res["reason"])
        self.assertEqual(self.d.kill(sid).status, 204)
        self.assertEqual(self.d.api("GET", "/v1/sandboxes/" + sid).status, 404)

    def test_cli_run(self):
        p = self.d.sbx("run", "--", "sh", "-c", "echo hi; exit 5")
        self.assertEqual(p.returncode, 5, p)
        self.assertEqual(p.stdout, b"hi\n")


if __name__ == "__main__":
    import unittest
    unittest.main()
