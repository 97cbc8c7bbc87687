"""Every blocked syscall, from inside a real sandbox (the table in
tests/probe/probe.c, checked line by line against the probe's own
expectations), for `user` and for root inside.

int 0x80 (the i386 entry point): the filter kills foreign-architecture
syscalls (SCMP_ACT_KILL_PROCESS -> SIGSYS), but a kernel built without
IA32 emulation, or booted with it disabled, faults the instruction with
SIGSEGV before seccomp ever runs. This machine's kernel does the latter.
Either death is accepted; a returned pid (the call succeeding) never is.
"""
import unittest

from harness import DaemonTest
from hostile_util import put_probe, run_probe

ASAN_SUBSET = False


class BlockedSyscalls(DaemonTest):

    def setUp(self):
        # (The harness kills every sandbox after each test.)
        self.sid = self.d.create()
        put_probe(self.d, self.sid)

    def test_every_probe_matches(self):
        expected = run_probe(self, self.sid, "expected")
        self.assertGreater(len(expected), 90)
        for user in ("user", "root"):
            got = run_probe(self, self.sid, "syscalls", user=user)
            self.assertEqual(len(got), len(expected), user)
            for want, have in zip(expected, got):
                self.assertEqual(have, want, user)

    def test_through_a_shell_and_in_a_child(self):
        # The filter is inherited across exec and fork: the probes run in
        # forked children of a shell-started probe.
        res = self.d.sh(self.sid, "/tmp/probe syscalls | md5sum; /tmp/probe expected | md5sum")
        self.assertEqual(res["exit_code"], 0, res)
        a, b = res["stdout"].splitlines()
        self.assertEqual(a, b)

    def test_int80(self):
        for user in ("user", "root"):
            res = self.d.exec(self.sid, argv=["/tmp/probe", "int80"], user=user)
            self.assertIn(res["signal"], ("SIGSYS", "SIGSEGV"), res)
            self.assertIsNone(res["exit_code"], res)
            self.assertEqual(res["stdout"], "", res)
            self.assertEqual(res["reason"], "killed by " + res["signal"])

    def test_x32(self):
        self.assertEqual(run_probe(self, self.sid, "syscall", "x32(getpid)"),
                         ["x32(getpid) SIGSYS"])


if __name__ == "__main__":
    unittest.main()
