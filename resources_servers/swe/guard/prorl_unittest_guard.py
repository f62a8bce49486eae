# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The standard library's unittest runner, watched on behalf of the grader (SWE EVAL, in the sandbox).

    python prorl_unittest_guard.py <test id> ...     (dotted ids: package.module.Class.test_method)

Runs the tests like `python -m unittest -v <ids>` (the same verbose lines on stderr), after
remembering the runner's own functions (how a test runs, how its outcome is recorded); checks
they are still the same ones after the tests are loaded and at the end; records each outcome
itself; writes what it saw to a report signed with a key read from an inherited fd and closed
before any code of the repository ran. Stdlib only: it runs on the sandbox's Python.
"""

import builtins
import hashlib
import hmac
import json
import os
import sys
import unittest
import unittest.case
import unittest.result
import unittest.runner


def _static(owner, name):
    return owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)


WATCHED = [
    (owner, name, _static(owner, name))
    for owner, name in (
        (unittest.case.TestCase, "run"),
        (unittest.case.TestCase, "__call__"),
        (unittest.case.TestCase, "_callTestMethod"),
        (unittest.case._Outcome, "testPartExecutor"),
        (unittest.result.TestResult, "addSuccess"),
        (unittest.result.TestResult, "addFailure"),
        (unittest.result.TestResult, "addError"),
        (unittest.result.TestResult, "addSubTest"),
        (unittest.result.TestResult, "wasSuccessful"),
        (unittest.runner.TextTestResult, "addSuccess"),
        (unittest.runner.TextTestRunner, "run"),
        (unittest.suite.TestSuite, "run"),
        (builtins, "AssertionError"),
        (os, "_exit"),
    )
]
problems: list[str] = []
outcomes: dict[str, str] = {}


def check(where: str) -> None:
    for owner, name, original in WATCHED:
        if _static(owner, name) is not original:
            text = f"{getattr(owner, '__name__', owner)}.{name} was replaced ({where})"
            if text not in problems:
                problems.append(text)


def _id(test) -> str:
    return test.id()


class GuardResult(unittest.runner.TextTestResult):
    def _note(self, test, outcome: str) -> None:
        check(f"reporting {_id(test)}")
        # A failure of any part (a subtest, the test itself) is the test's failure.
        if outcomes.get(_id(test)) not in ("failed", "error"):
            outcomes[_id(test)] = outcome

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, "failed")

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note(test, "skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note(test, "failed")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._note(test, "failed")


OWN = [
    (GuardResult, name, GuardResult.__dict__[name]) for name in vars(GuardResult) if name.startswith(("add", "_note"))
]
WATCHED += OWN


def main(ids: list[str]) -> None:
    fd = int(os.environ.pop("PRORL_GUARD_KEY_FD"))
    key = os.read(fd, 128).strip()
    os.close(fd)
    path = os.environ.pop("PRORL_GUARD_REPORT")
    sys.path.insert(0, os.getcwd())  # as `python -m unittest` does
    suite = unittest.defaultTestLoader.loadTestsFromNames(ids)  # the repository's code is imported here
    check("after loading the tests")
    unittest.runner.TextTestRunner(verbosity=2, resultclass=GuardResult).run(suite)
    check("at the end")
    payload = json.dumps({"finished": True, "problems": problems, "outcomes": outcomes}, sort_keys=True)
    signature = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    with open(path, "w") as f:
        f.write(json.dumps({"payload": payload, "signature": signature}))


if __name__ == "__main__":
    main(sys.argv[1:])
