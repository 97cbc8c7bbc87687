"""The README's "E2B SDKs, unchanged" example, run as written against a
daemon of its own (see test_readme for what the run changes). It needs
the published SDK in tests/e2b/node_modules: `make test-e2b` runs this
module after its `npm ci`; a run without the SDK skips it and says so.
"""
import os
import unittest

from harness import DaemonTest
import test_readme


class ReadmeE2B(test_readme.ReadmeScript, DaemonTest):
    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(os.path.join(test_readme.NODE_MODULES, "e2b")):
            raise unittest.SkipTest("the E2B SDK is not installed (%s; `make test-e2b` runs "
                                    "npm ci first)" % test_readme.NODE_MODULES)
        super().setUpClass()

    def test_e2b(self):
        (script,) = test_readme.blocks("E2B SDKs, unchanged")
        out = self.run_block(script, timeout=600)
        # the SDK's command ran in the sandbox and printed its kernel
        self.assertRegex(out, r"(?m)^Linux ")


if __name__ == "__main__":
    unittest.main()
