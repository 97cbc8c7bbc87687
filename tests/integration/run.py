#!/usr/bin/python3
"""Run the sbx integration suites (test_*.py here), each module in order.

    SBX_BUILD=build /usr/bin/python3 tests/integration/run.py [PATTERN...]

SBX_TEST_SUBSET=asan runs only the modules marked ASAN_SUBSET = True (the
sanitizer daemon is slower); SBX_TEST_ENGINE=namespace only the modules
that need no microVM (the kernel guests' run, tests/kernel), =vm only those
that do;
SBX_TEST_EXCLUDE=a,b leaves modules out (the guests: the recipe builds,
which need the Debian mirror). Exit status 0 when everything passed.
"""
import importlib
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class TimedResult(unittest.TextTestResult):
    """Verbose results with each test's seconds ("ok (2.1 s)"), and the
    slowest listed at the end: where a run's time goes."""

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _took(self, test):
        took = time.monotonic() - getattr(self, "_started", time.monotonic())
        self.times = getattr(self, "times", [])
        self.times.append((took, str(test)))
        return took

    def addSuccess(self, test):
        took = self._took(test)
        if self.showAll:
            self.stream.write("(%.1f s) " % took)
        super().addSuccess(test)

    def addFailure(self, test, err):
        self._took(test)
        super().addFailure(test, err)

    def addError(self, test, err):
        self._took(test)
        super().addError(test, err)

    def printErrors(self):
        super().printErrors()
        slow = sorted(getattr(self, "times", []), reverse=True)[:10]
        if slow:
            self.stream.writeln("slowest: " + "; ".join("%.0f s %s" % (t, n.split(" ")[0])
                                                       for t, n in slow))


def main():
    if os.geteuid() != 0:
        print("the integration tests need root (the daemon creates namespaces and cgroups)")
        return 2
    patterns = sys.argv[1:]
    subset = os.environ.get("SBX_TEST_SUBSET")
    engine = os.environ.get("SBX_TEST_ENGINE")
    excluded = set(filter(None, os.environ.get("SBX_TEST_EXCLUDE", "").split(",")))
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py")):
        if patterns and not any(p in name for p in patterns):
            continue
        if engine and (engine == "vm") != name.startswith("test_vm"):
            continue
        if name in excluded:
            print("%s: left out (SBX_TEST_EXCLUDE)" % name, file=sys.stderr)
            continue
        mod = importlib.import_module(name)
        if subset == "asan" and not getattr(mod, "ASAN_SUBSET", False):
            continue
        suite.addTests(loader.loadTestsFromModule(mod))
    result = unittest.TextTestRunner(verbosity=2, failfast=False,
                                     resultclass=TimedResult).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
