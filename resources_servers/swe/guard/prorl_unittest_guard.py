# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The standard library's unittest as SWE grading runs it, narrating what happens to the grader.

    python -I -B -u prorl_unittest_guard.py --events-fd 3 [--path DIR]... [--env-path DIR]... [--changed FILE]...
        -- <dotted id>...

Runs the tests like `python -m unittest -v <ids>` (the same verbose lines on stderr) in an isolated
interpreter: the repository's import roots are appended to sys.path after the interpreter's own
directories and the task's environment, so nothing in the repository can stand in for `unittest` or
any other module the runner imports. Each event goes to fd 3 as it happens (`@prorl {json}`): the
tests loaded (with the file each one's code comes from), each outcome, the runner's own functions
replaced (TestCase's own machinery, this guard's result class and emitter), the end. The grader outside
decides; nothing here is secret (see prorl_pytest_guard.py). --changed is accepted for the runners'
common command line (see prorl_pytest_guard.py).

Standard library only (it runs on the sandbox's Python).
"""

import builtins
import inspect
import json
import os
import sys


def _args(argv):
    opts = {"--events-fd": [], "--path": [], "--env-path": [], "--changed": []}
    i = 0
    while i < len(argv) and argv[i] != "--":
        opts[argv[i]].append(argv[i + 1])
        i += 2
    return int(opts["--events-fd"][0]), opts["--path"], opts["--env-path"], argv[i + 1 :]


EVENTS_FD, REPO_PATHS, ENV_PATHS, IDS = _args(sys.argv[1:])
os.set_inheritable(EVENTS_FD, False)


def emit(**event):
    try:
        os.write(EVENTS_FD, ("@prorl " + json.dumps(event, sort_keys=True) + "\n").encode())
    except (OSError, TypeError, ValueError):
        pass


def _real(path):
    return os.path.realpath(path) if path else None


emit(e="start", runner="unittest", trusted=sorted({_real(p) for p in [sys.prefix, sys.base_prefix, *ENV_PATHS]}))

import unittest  # noqa: E402
import unittest.case  # noqa: E402
import unittest.result  # noqa: E402
import unittest.runner  # noqa: E402
import unittest.suite  # noqa: E402


def _static(owner, name):
    return owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)


CASE_MACHINERY = ("run", "__call__", "debug", "_callTestMethod", "_callSetUp", "_callTearDown", "_callCleanup")
WATCHED = [
    (owner, name, _static(owner, name))
    for owner, name in (
        *((unittest.case.TestCase, name) for name in CASE_MACHINERY),
        (unittest.case.TestCase, "doCleanups"),
        (unittest.case, "_addSkip"),
        (unittest.case._Outcome, "testPartExecutor"),
        (unittest.result.TestResult, "addSuccess"),
        (unittest.result.TestResult, "addFailure"),
        (unittest.result.TestResult, "addError"),
        (unittest.result.TestResult, "addSubTest"),
        (unittest.runner.TextTestResult, "addSuccess"),
        (unittest.runner.TextTestRunner, "run"),
        (unittest.suite.TestSuite, "run"),
        (builtins, "AssertionError"),
        (os, "_exit"),
        (sys.modules[__name__], "emit"),
    )
    if name in getattr(owner, "__dict__", {}) or (not isinstance(owner, type) and hasattr(owner, name))
]
_reported = set()


def check(where):
    for owner, name, original in WATCHED:
        if _static(owner, name) is not original:
            text = "{}.{} was replaced ({})".format(getattr(owner, "__name__", owner), name, where)
            if text not in _reported:
                _reported.add(text)
                emit(e="problem", text=text)


class GuardResult(unittest.runner.TextTestResult):
    def _report(self, test, outcome, xfail=False):
        check(f"reporting {test.id()}")
        emit(e="report", id=test.id(), when="call", outcome=outcome, xfail=xfail)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._report(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._report(test, "failed")

    def addError(self, test, err):
        super().addError(test, err)
        self._report(test, "failed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._report(test, "skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._report(test, "skipped", xfail=True)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._report(test, "failed")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:  # a failed subtest fails its test
            self._report(test, "failed")


# This guard's own reporting, watched like the runner's: a result class rewritten in place reports nothing.
WATCHED += [(GuardResult, name, value) for name, value in vars(GuardResult).items() if callable(value)]
WATCHED += [(unittest.case.TestCase, name, _static(unittest.case.TestCase, name)) for name in ("id", "__str__")]


def _tests(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _tests(test)
        else:
            yield test


def main():
    sys.path.extend(ENV_PATHS)
    sys.path[len(sys.path) - len(ENV_PATHS) : len(sys.path) - len(ENV_PATHS)] = REPO_PATHS
    suite = unittest.defaultTestLoader.loadTestsFromNames(IDS)  # the repository's code is imported here
    check("after loading the tests")
    for test in _tests(suite):
        method = getattr(test, getattr(test, "_testMethodName", ""), None)
        module = getattr(sys.modules.get(type(test).__module__), "__file__", None)
        code = None
        try:
            code = inspect.unwrap(method).__code__.co_filename
        except (AttributeError, TypeError, ValueError):
            pass
        emit(e="item", id=test.id(), module=_real(module), code=_real(code))
    unittest.runner.TextTestRunner(verbosity=2, resultclass=GuardResult).run(suite)
    check("at the end")
    emit(e="end", status=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
