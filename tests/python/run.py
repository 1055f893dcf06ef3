#!/usr/bin/env python3
"""run.py: runs the Python binding's test suite and ends with the summary line that
tests/run.sh counts, in Check's format: "N%: Checks: N, Failures: N, Errors: N".

From the tree, after `make all`:
    tests/python/run.py                      (uses $BUILD or build/, the tree's package)
    SBX_BUILD=build/h7 tests/python/run.py
Environment: SBX_BUILD (default $BUILD, else "build"), SBX_LIBSBX (default
$SBX_BUILD/libsbx.so), SBX_PYTHON_INSTALLED=1 to test the installed package instead of
client/python. Extra arguments select tests (e.g. SandboxTest.test_files).
Exits non-zero when a test fails or errs, or when none ran.
"""

import os
import sys
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))


def main() -> int:
    build = os.environ.get("SBX_BUILD") or os.environ.get("BUILD") or "build"
    os.environ["SBX_BUILD"] = build
    os.environ.setdefault("SBX_LIBSBX", os.path.join(ROOT, build, "libsbx.so"))
    if os.environ.get("SBX_PYTHON_INSTALLED") != "1":
        pydir = os.path.join(ROOT, "client", "python")
        sys.path.insert(0, pydir)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (pydir, os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, HERE)
    loader = unittest.TestLoader()
    try:
        if len(sys.argv) > 1:
            suite = loader.loadTestsFromNames(sys.argv[1:], __import__("test_sbx"))
        else:
            suite = loader.loadTestsFromName("test_sbx")
    except Exception:  # noqa: BLE001 - reported as one error in the summary
        traceback.print_exc(file=sys.stdout)
        print("0%: Checks: 1, Failures: 0, Errors: 1")
        return 1
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    checks = result.testsRun
    failures = len(result.failures) + len(result.unexpectedSuccesses)
    errors = len(result.errors)
    if result.skipped:
        print(f"SKIPPED: {len(result.skipped)} test(s), counted as failures:")
        for test, why in result.skipped:
            print(f"  {test}: {why}")
        failures += len(result.skipped)
    passed = checks - failures - errors
    pct = passed * 100 // checks if checks else 0
    sys.stdout.flush()
    print(f"{pct}%: Checks: {checks}, Failures: {failures}, Errors: {errors}")
    return 0 if checks and not failures and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
