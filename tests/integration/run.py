#!/usr/bin/python3
"""Run the sbx integration suites (test_*.py here), each module in order.

    SBX_BUILD=build /usr/bin/python3 tests/integration/run.py [PATTERN...]

SBX_TEST_SUBSET=asan runs only the modules marked ASAN_SUBSET = True (the
sanitizer daemon is slower). Exit status 0 when everything passed.
"""
import importlib
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    if os.geteuid() != 0:
        print("the integration tests need root (the daemon creates namespaces and cgroups)")
        return 2
    patterns = sys.argv[1:]
    subset = os.environ.get("SBX_TEST_SUBSET")
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py")):
        if patterns and not any(p in name for p in patterns):
            continue
        mod = importlib.import_module(name)
        if subset == "asan" and not getattr(mod, "ASAN_SUBSET", False):
            continue
        suite.addTests(loader.loadTestsFromModule(mod))
    result = unittest.TextTestRunner(verbosity=2, failfast=False).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
