# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Django's own test runner as SWE grading runs it, narrating what happens to the grader.

    python -I -B -u prorl_django_guard.py --events-fd 3 [--path DIR]... [--env-path DIR]... [--changed FILE]...
        -- <runtests.py argument>... <test label>...

Runs `tests/runtests.py` of the repository (the command of SWE-bench's specs, e.g. `--verbosity 2
--settings=test_sqlite --parallel 1 <labels>`) in this isolated interpreter: the task's environment
and the repository's import roots are appended to sys.path after the interpreter's own directories,
then the tests directory (where `python tests/runtests.py` would have it first: its apps and settings
are imported by name), so nothing in the repository can stand in for `unittest` or any other module
the runner imports. Django's DiscoverRunner runs its suite with unittest's TextTestRunner: this guard
gives it its own result class, whose verbose lines name every test as `test_x (module.Class.test_x)`
(no docstring line: the grader resolves SWE-bench's docstring-named ids from the source), and says,
on fd 3 as they happen (`@prorl {json}`): the tests of the suite (with the file each one's code comes
from), each outcome (by the test's dotted id), the runner's own functions replaced, the end. The
grader outside decides; nothing here is secret (see prorl_pytest_guard.py). --changed is accepted
for the runners' common command line.

Standard library only, until the repository's Django is imported by runtests.py.
"""

import builtins
import inspect
import json
import os
import runpy
import sys


def _args(argv):
    opts = {"--events-fd": [], "--path": [], "--env-path": [], "--changed": []}
    i = 0
    while i < len(argv) and argv[i] != "--":
        opts[argv[i]].append(argv[i + 1])
        i += 2
    return int(opts["--events-fd"][0]), opts["--path"], opts["--env-path"], argv[i + 1 :]


EVENTS_FD, REPO_PATHS, ENV_PATHS, ARGS = _args(sys.argv[1:])
os.set_inheritable(EVENTS_FD, False)
RUNTESTS = os.path.join(REPO_PATHS[0] if REPO_PATHS else os.getcwd(), "tests", "runtests.py")


def emit(**event):
    try:
        os.write(EVENTS_FD, ("@prorl " + json.dumps(event, sort_keys=True) + "\n").encode())
    except (OSError, TypeError, ValueError):
        pass


def _real(path):
    return os.path.realpath(path) if path else None


emit(e="start", runner="django", trusted=sorted({_real(p) for p in [sys.prefix, sys.base_prefix, *ENV_PATHS]}))

import unittest  # noqa: E402
import unittest.case  # noqa: E402
import unittest.result  # noqa: E402
import unittest.runner  # noqa: E402
import unittest.suite  # noqa: E402


def _static(owner, name):
    return owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)


def _tests(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _tests(test)
        else:
            yield test


def _item(test):
    method = getattr(test, getattr(test, "_testMethodName", ""), None)
    module = getattr(sys.modules.get(type(test).__module__), "__file__", None)
    code = None
    try:
        code = inspect.unwrap(method).__code__.co_filename
    except (AttributeError, TypeError, ValueError):
        pass
    emit(e="item", id=test.id(), module=_real(module), code=_real(code))


class GuardResult(unittest.runner.TextTestResult):
    """TextTestResult, naming each test by str(test) alone, reporting each outcome on fd 3."""

    def getDescription(self, test):
        return str(test)

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
        if err is not None:  # a failed subtest fails its test (which reports no outcome of its own then)
            check(f"reporting {test.id()}")
            emit(e="report", id=test.id(), when="call", outcome="failed", xfail=False, sub=True)


_run = unittest.runner.TextTestRunner.run


def _guarded_run(self, test):
    """Every suite Django runs goes through here: its tests are said before any of them runs."""
    check("before the tests ran")
    for one in _tests(test):
        _item(one)
    return _run(self, test)


# Every TextTestRunner Django makes reports through GuardResult (DiscoverRunner passes resultclass=None
# unless --pdb, --timing or --debug-sql, which the command never has).
unittest.runner.TextTestRunner.resultclass = GuardResult
unittest.runner.TextTestRunner.run = _guarded_run

CASE_MACHINERY = ("run", "__call__", "debug", "_callTestMethod", "_callSetUp", "_callTearDown", "_callCleanup")
WATCHED = [
    (owner, name, _static(owner, name))
    for owner, name in (
        *((unittest.case.TestCase, name) for name in CASE_MACHINERY),
        (unittest.case.TestCase, "doCleanups"),
        (unittest.case.TestCase, "id"),
        (unittest.case.TestCase, "__str__"),
        (unittest.case, "_addSkip"),
        (unittest.case._Outcome, "testPartExecutor"),
        (unittest.result.TestResult, "addSuccess"),
        (unittest.result.TestResult, "addFailure"),
        (unittest.result.TestResult, "addError"),
        (unittest.result.TestResult, "addSubTest"),
        (unittest.runner.TextTestResult, "addSuccess"),
        (unittest.runner.TextTestRunner, "run"),
        (unittest.runner.TextTestRunner, "resultclass"),
        (unittest.suite.TestSuite, "run"),
        (builtins, "AssertionError"),
        (os, "_exit"),
        (sys.modules[__name__], "emit"),
    )
    if name in getattr(owner, "__dict__", {}) or (not isinstance(owner, type) and hasattr(owner, name))
]
WATCHED += [(GuardResult, name, value) for name, value in vars(GuardResult).items() if callable(value)]
_reported = set()


def check(where):
    for owner, name, original in WATCHED:
        if _static(owner, name) is not original:
            text = "{}.{} was replaced ({})".format(getattr(owner, "__name__", owner), name, where)
            if text not in _reported:
                _reported.add(text)
                emit(e="problem", text=text)


def main():
    sys.path.extend(ENV_PATHS)
    sys.path[len(sys.path) - len(ENV_PATHS) : len(sys.path) - len(ENV_PATHS)] = REPO_PATHS
    sys.path.append(os.path.dirname(RUNTESTS))  # runtests.py's own directory: its apps and settings
    sys.argv = [RUNTESTS, *ARGS]
    status = 0
    try:
        runpy.run_path(RUNTESTS, run_name="__main__")  # the repository's code is imported here
    except SystemExit as exc:  # runtests.py ends with sys.exit(bool(failures))
        status = exc.code if isinstance(exc.code, int) else 1
    check("at the end")
    emit(e="end", status=status)
    return 0


if __name__ == "__main__":
    sys.exit(main())
