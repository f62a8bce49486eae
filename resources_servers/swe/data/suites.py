# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""How data/prepare.py runs a project's own suite, per runner: the command, the tests' ids, coverage.

pytest and unittest as before; Django's and SymPy's own runners as SWE-bench's harness runs them
(official.py: `./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 <labels>`;
SymPy's runner as `bin/test -C --verbose <files>` calls it, `sympy.testing.runtests._test`, which
SymPy 1.14's sdist ships while its `bin/test` is not in it, and whose `sympy.test` runs pytest unless
told to use the SymPy runner). Their ids are what SWE-bench's log parser reads from the log: for
Django `test_x (module.Class.test_x)` or, for a test with a docstring, the docstring's first line;
for SymPy the test function's name. Each run under coverage also records which test each id
names (`keys`: id -> the runner's own name of the test: a unittest id, or `file::function`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from resources_servers.swe.official import read_log, status_of
from resources_servers.swe.runners import PYTEST_ARGS, runner_for

DJANGO_COMMAND = "tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
SYMPY_ENV = "env SYMPY_USE_CACHE=no PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning'"  # `bin/test -C`
SYMPY_RUN = (
    "import sys, sympy.testing.runtests as r; sys.exit(r._test(*sys.argv[2:], verbose=True, kw=sys.argv[1].split()))"
)
LIST_UNITTEST = (
    "import sys, unittest\n"
    "def walk(s):\n"
    "    for t in s:\n"
    "        yield from walk(t) if isinstance(t, unittest.TestSuite) else [t.id()]\n"
    "print('\\n'.join(walk(unittest.defaultTestLoader.discover(sys.argv[1], top_level_dir='.'))))\n"
)
# The suite under coverage, one context per test named by the runner's own name of it (switched at each
# test's start: much cheaper than coverage's dynamic_context, which inspects every new frame). Django and
# SymPy runs also write which of SWE-bench's ids names which test (/tmp/keys.json).
COVER = """import json, os, runpy, sys, coverage
cov = coverage.Coverage(config_file="/tmp/coverage.rc")
keys = {}
cov.start()
if sys.argv[1] == "pytest":
    import pytest
    class Switch:
        def pytest_runtest_setup(self, item):
            cov.switch_context(item.nodeid)
    pytest.main(sys.argv[2:], plugins=[Switch()])
elif sys.argv[1] in ("unittest", "django"):
    import unittest
    start = unittest.TestResult.startTest
    def switch(self, test):
        cov.switch_context(test.id())
        doc = test.shortDescription()  # the line Django's verbose runner ends with ` ... ok`
        keys.setdefault(doc or str(test), []).append(test.id())
        start(self, test)
    unittest.TestResult.startTest = switch
    if sys.argv[1] == "unittest":
        runner = unittest.TextTestRunner(verbosity=2)
        unittest.main(module=None, argv=["python -m unittest", *sys.argv[2:]], testRunner=runner, exit=False)
    else:
        sys.argv = sys.argv[2:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
        except SystemExit:
            pass
else:
    import sympy.testing.runtests as r
    entering = r.PyTestReporter.entering_test
    def switch(self, f):
        name = os.path.relpath(self._active_file, self._root_dir) + "::" + f.__name__
        cov.switch_context(name)
        keys.setdefault(f.__name__, []).append(name)
        entering(self, f)
    r.PyTestReporter.entering_test = switch
    r._test(*sys.argv[3:], verbose=True, kw=sys.argv[2].split())
cov.stop()
cov.save()
with open("/tmp/keys.json", "w") as f:
    json.dump(keys, f)
"""


@dataclass(frozen=True)
class Suite:
    """A project's suite as preparation runs it: `tests` are its arguments (paths, labels, files)."""

    runner: str  # pytest, unittest, django, sympy
    tests: str

    @property
    def official(self) -> str | None:
        """The swebench log rule its ids follow (None: pytest node ids / unittest ids, our own runners)."""
        return {"django": "parse_log_django", "sympy": "parse_log_sympy"}.get(self.runner)

    def collect(self) -> str | None:
        """The shell command listing the suite's ids (None: the ids come from a run's log)."""
        if self.runner == "unittest":
            return f"python /tmp/list_tests.py {shlex.quote(self.tests)}"
        if self.runner == "pytest":
            return f"python -m pytest -p no:cacheprovider -o addopts= --collect-only -q {self.tests}"
        return None

    def ids_from_collect(self, output: str) -> list[str]:
        lines = output.splitlines()
        if self.runner == "unittest":
            return [line for line in lines if line and not line.startswith(("unittest.loader", " "))]
        return [line for line in lines if "::" in line and not line.startswith(("=", " "))]

    def command(self, only: list[str] | None, names: dict[str, list[str]], coverage: bool = False) -> str:
        """The shell command (run in the repository) running the suite, or `only` those ids (`names`: id ->
        the runner's names of its tests, from a coverage run)."""
        prefix = "python /tmp/cover.py " if coverage else "python "
        if self.runner == "django":
            labels = sorted({n for t in only for n in names.get(t, [])}) if only else self.tests.split()
            return f"{prefix}{'django ' if coverage else ''}{DJANGO_COMMAND} {' '.join(map(shlex.quote, labels))}"
        if self.runner == "sympy":
            files = self.tests.split()
            if only:
                picked = [n for t in only for n in names.get(t, [])]
                files = sorted({n.split("::")[0] for n in picked})
            kw = shlex.quote(" ".join(sorted(set(only or []))))
            if coverage:
                return f"{SYMPY_ENV} {prefix}sympy {kw} {' '.join(files)}"
            return f"{SYMPY_ENV} python -c {shlex.quote(SYMPY_RUN)} {kw} {' '.join(files)}"
        if self.runner == "unittest":
            what = "-m unittest -v " + " ".join(map(shlex.quote, only)) if only else None
            what = what or f"-m unittest discover -v -t . -s {self.tests}"
        else:
            what = f"-m pytest {PYTEST_ARGS} {' '.join(map(shlex.quote, only)) if only else self.tests}"
        return prefix + (what.removeprefix("-m ") if coverage else what)

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        """'passed' / 'xfail' / 'failed' per id found in the log."""
        if self.official is None:
            return runner_for(self.runner).parse(log, ids)
        statuses = read_log(self.official, log)
        found = {}
        for test in ids:
            status = status_of(test, statuses)
            if status is not None:
                found[test] = {"PASSED": "passed", "XFAIL": "xfail"}.get(status, "failed")
        return found

    def ids_from_log(self, log: str) -> list[str]:
        """Every test id the runner's log names (Django's and SymPy's suites are listed by a run)."""
        statuses = read_log(self.official, log) if self.official else {}
        return sorted(t for t in statuses if self.runner != "sympy" or ".py:" not in t)
