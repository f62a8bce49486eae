# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The test runners SWE grading understands: pytest (the default), the standard library's unittest, and
the two project runners of SWE-bench's largest repositories, Django's `tests/runtests.py` and SymPy's
`sympy.testing.runtests` (grading.py says which a row gets).

Each runner knows its ids (pytest node ids `tests/test_x.py::TestX::test_y[p]`; unittest dotted ids
`tests.test_x.TestX.test_y`; Django's and SymPy's as SWE-bench names them, resolved to the tests they
name), how they map to files and functions (for the canaries), the command that runs them under its
guard (guard/: a wrapper that starts the runner in an isolated interpreter and streams what happens to
the grader), and its own log format, read as a second opinion on each outcome (Django's and SymPy's by
SWE-bench's own rules: official.py). pytest and unittest run the graded ids; Django and SymPy run whole
test modules, as SWE-bench's harness does.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Protocol

from resources_servers.swe.graded_sources import TestId
from resources_servers.swe.official import read_log

GUARD_SOURCES = Path(__file__).resolve().parent / "guard"
# No cache provider (its lastfailed file could deselect tests); the project's addopts dropped (e.g. --cov
# needs a plugin we do not have); -rA: a summary line per test.
PYTEST_ARGS = "-p no:cacheprovider -o addopts= -rA --tb=short"
SUMMARY = re.compile(r"^=+ short test summary info =+$", re.M)
PYTEST_STATUSES = {"PASSED", "FAILED", "ERROR", "XPASS", "XFAIL", "SKIPPED", "SUBFAILED"}
UNITTEST_LINE = re.compile(r"^(\w+) \(([\w.]+)\)")
UNITTEST_STATUS = re.compile(r" \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")


class TestRunner(Protocol):
    name: str
    guard: str  # the guard's file name in GUARD_SOURCES

    def command(
        self, guard_path: str, ids: list[str], repo_paths: list[str], env_paths: list[str], changed: list[str]
    ) -> str:
        """The shell command (run in the repository, under the seal: guard/prorl_seal.py) that runs `ids`
        under the guard at guard_path, with the task's environment and the repository's import roots on
        sys.path after the interpreter's own; `changed`: the files of the code under test the patch
        changed (absolute paths), for the guard to report runner hooks implemented there. It writes its
        events to fd 3 (`@prorl {json}` lines: start, item, report, problem, note, end; monitor.py) and
        its own log to stdout; stdin is /dev/null, and nothing but the scratch space is writable."""
        ...

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        """'passed' / 'xfail' / 'failed' per id found in the runner's own output."""
        ...

    def parse_id(self, test_id: str) -> TestId | None: ...

    def format_id(self, test: TestId) -> str: ...

    # A runner of whole test modules (Django's, SymPy's, as SWE-bench runs them) is given the modules or files
    # (`files` says which files they are), and resolves a row's ids to the tests they name from the sources.
    takes_modules: bool

    def files(self, targets: list[str]) -> list[str]: ...

    def resolve(self, ids: list[str], sources: dict[str, str]) -> dict[str, list[str]]: ...


class _RunsIds:
    """pytest and unittest run the ids they are given: a row's ids are the tests."""

    takes_modules = False

    def files(self, targets: list[str]) -> list[str]:
        return []

    def resolve(self, ids: list[str], sources: dict[str, str]) -> dict[str, list[str]]:
        return {t: [t] for t in ids}


def _guard_command(
    guard_path: str, ids: list[str], repo_paths: list[str], env_paths: list[str], changed: list[str]
) -> str:
    # -I: neither the repository, the script's directory, PYTHON* variables nor user site-packages get on
    # sys.path or into the interpreter: what the repository provides is added after the interpreter's own.
    args = " ".join(
        [
            *(f"--path {shlex.quote(p)}" for p in repo_paths),
            *(f"--env-path {shlex.quote(p)}" for p in env_paths),
            *(f"--changed {shlex.quote(p)}" for p in changed),
        ]
    )
    return f"python -I -B -u {guard_path} --events-fd 3 {args} -- {' '.join(shlex.quote(t) for t in ids)}"


class Pytest(_RunsIds):
    name = "pytest"
    guard = "prorl_pytest_guard.py"

    def command(
        self, guard_path: str, ids: list[str], repo_paths: list[str], env_paths: list[str], changed: list[str]
    ) -> str:
        return _guard_command(guard_path, ids, repo_paths, env_paths, changed)

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        return parse_pytest(log, ids)

    def parse_id(self, test_id: str) -> TestId | None:
        head, bracket, params = test_id.partition("[")  # parameters may hold anything, "::" included
        path, _, rest = head.partition("::")
        if not rest or not path.endswith(".py"):
            return None  # a doctest or another kind of item: not a function to rename
        *owners, name = rest.split("::")
        return TestId(path, tuple(owners), name, bracket + params)

    def format_id(self, test: TestId) -> str:
        return "::".join([test.file, *test.owners, test.name]) + test.params


class Unittest(_RunsIds):
    name = "unittest"
    guard = "prorl_unittest_guard.py"

    def command(
        self, guard_path: str, ids: list[str], repo_paths: list[str], env_paths: list[str], changed: list[str]
    ) -> str:
        return _guard_command(guard_path, ids, repo_paths, env_paths, changed)

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        return parse_unittest(log, ids)

    def parse_id(self, test_id: str) -> TestId | None:
        *module, cls, name = test_id.split(".")
        return TestId("/".join(module) + ".py", (cls,), name) if module else None

    def format_id(self, test: TestId) -> str:
        return ".".join([test.file.removesuffix(".py").replace("/", "."), *test.owners, test.name])


class Django:
    """Django's own runner, `tests/runtests.py` (SWE-bench's command for django/django), under its guard.

    A row's ids are SWE-bench's: `test_x (module.Class.test_x)` (`test_x (module.Class)` before Python
    3.11), or for a test with a docstring that docstring's first line, as unittest's verbose description
    ends with it. `resolve` turns them into unittest's dotted ids (`module.Class.test_x`, the label of a
    module under tests/), which the run and its events use: the guard's log names every test by
    str(test), never by a docstring. The run takes test modules (labels), as the harness's does."""

    name = "django"
    guard = "prorl_django_guard.py"
    takes_modules = True

    def __init__(self, args: str = "--verbosity 2 --settings=test_sqlite --parallel 1"):
        self.args = args  # runtests.py's arguments in the row's spec (official.py), before the labels

    def command(
        self, guard_path: str, ids: list[str], repo_paths: list[str], env_paths: list[str], changed: list[str]
    ) -> str:
        return _guard_command(guard_path, [*shlex.split(self.args), *ids], repo_paths, env_paths, changed)

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        """Read by SWE-bench's Django rule; each name (`test_x (module.Class[.test_x])`) as a dotted id."""
        found = {}
        for key, status in read_log("parse_log_django", log).items():
            dotted = django_dotted(key)
            if dotted is not None:
                outcome = {"PASSED": "passed", "XFAIL": "xfail"}.get(status, "failed")
                found[dotted] = "failed" if found.get(dotted) == "failed" else outcome
        return {t: found[t] for t in ids if t in found}

    def parse_id(self, test_id: str) -> TestId | None:
        *module, cls, name = test_id.split(".")
        return TestId("tests/" + "/".join(module) + ".py", (cls,), name) if module else None

    def format_id(self, test: TestId) -> str:
        module = test.file.removeprefix("tests/").removesuffix(".py").replace("/", ".")
        return ".".join([module, *test.owners, test.name])

    def files(self, targets: list[str]) -> list[str]:
        """The test modules' files of labels (`a.b` -> tests/a/b.py)."""
        return ["tests/" + t.replace(".", "/") + ".py" for t in targets]

    def resolve(self, ids: list[str], sources: dict[str, str]) -> dict[str, list[str]]:
        """Each SWE-bench id -> the dotted ids of the tests it names (a docstring's line may name several,
        inherited or copied: all of them are graded; none found: the id is kept, and fails)."""
        documented: dict[str, list[str]] = {}
        for path, text in sources.items():
            for owners, node in _test_defs(text):
                doc = ast.get_docstring(node, clean=False)
                if doc and doc.strip() and owners:
                    line = doc.strip().split("\n")[0].strip()
                    module = path.removeprefix("tests/").removesuffix(".py").replace("/", ".")
                    documented.setdefault(line, []).append(".".join([module, *owners, node.name]))
        return {t: [d] if (d := django_dotted(t)) else documented.get(t, [t]) for t in ids}


class Sympy:
    """SymPy's own runner, `sympy.testing.runtests` as `bin/test -C --verbose <files>` runs it (SWE-bench's
    command for sympy/sympy), under its guard. A row's ids are test function names, as SWE-bench's SymPy
    rule reads them; `resolve` finds each in the row's test files (`file::name`, the ids the run and its
    events use). The run takes test files, as the harness's does."""

    name = "sympy"
    guard = "prorl_sympy_guard.py"
    takes_modules = True

    def command(
        self, guard_path: str, ids: list[str], repo_paths: list[str], env_paths: list[str], changed: list[str]
    ) -> str:
        return _guard_command(guard_path, ids, repo_paths, env_paths, changed)

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        """Read by SWE-bench's SymPy rule (by function name, whatever its file), and where that rule reads
        nothing, the last test of each file, whose line the runner ends with `[OK]` or `[FAIL]`."""
        statuses = read_log("parse_log_sympy", log)
        for line in log.split("\n"):
            words = line.split()
            if len(words) == 3 and words[0].startswith("test_") and words[2] in ("[OK]", "[FAIL]"):
                status = {"ok": "PASSED", "F": "FAILED", "E": "ERROR"}.get(words[1])
                if status is not None:
                    statuses.setdefault(words[0], status)
        found = {}
        for t in ids:
            status = statuses.get(t.rpartition("::")[2])
            if status is not None:
                found[t] = {"PASSED": "passed", "XFAIL": "xfail"}.get(status, "failed")
        return found

    def parse_id(self, test_id: str) -> TestId | None:
        path, sep, name = test_id.partition("::")
        return TestId(path, (), name) if sep and path.endswith(".py") else None

    def format_id(self, test: TestId) -> str:
        return f"{test.file}::{test.name}"

    def files(self, targets: list[str]) -> list[str]:
        return list(targets)

    def resolve(self, ids: list[str], sources: dict[str, str]) -> dict[str, list[str]]:
        """Each name -> `file::name` in every test file that defines it at module level."""
        defined: dict[str, list[str]] = {}
        for path, text in sorted(sources.items()):
            for owners, node in _test_defs(text):
                if not owners:
                    defined.setdefault(node.name, []).append(f"{path}::{node.name}")
        return {t: defined.get(t, [t]) for t in ids}


def django_dotted(key: str) -> str | None:
    """`test_x (module.Class.test_x)` or `test_x (module.Class)` -> `module.Class.test_x` (None: not that shape)."""
    match = re.fullmatch(r"(\w+) \(([\w.]+)\)", key)
    if not match:
        return None
    name, where = match.groups()
    return where if where.endswith(f".{name}") else f"{where}.{name}"


def _test_defs(text: str):
    """(enclosing classes, def) of every function of a module's top level and its classes."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return

    def walk(body, owners):
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from walk(node.body, (*owners, node.name))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield owners, node

    yield from walk(tree.body, ())


RUNNERS: dict[str, TestRunner] = {runner.name: runner for runner in (Pytest(), Unittest(), Django(), Sympy())}


def runner_for(name: str | None) -> TestRunner:
    try:
        return RUNNERS[name or "pytest"]
    except KeyError:
        raise ValueError(f"unknown test runner {name!r}; graded runners: {sorted(RUNNERS)}") from None


# ---------------------------------------------------------------------- the runners' own output


def parse_pytest(log: str, ids: list[str]) -> dict[str, str]:
    """pytest -rA: 'passed' / 'xfail' / 'failed' for each requested id in the last short test summary
    (swebench's parse_log_pytest rules, matched against the requested ids so ids with spaces work;
    pytest 9's SUBFAILED lines fail their parent test; SKIPPED and XPASS are not passes)."""
    wanted, found = set(ids), {}
    headers = list(SUMMARY.finditer(log))
    for line in log[headers[-1].end() :].splitlines() if headers else []:
        status = line.split(" ", 1)[0].split("(", 1)[0]
        if status.startswith("SUB") and status != "SUBFAILED" or status not in PYTEST_STATUSES:
            continue
        test = _match_id(line[len(line.split(" ", 1)[0]) :], wanted)
        if test:
            outcome = {"PASSED": "passed", "XFAIL": "xfail"}.get(status, "failed")
            found[test] = "failed" if found.get(test) == "failed" else outcome
    return found


def _match_id(text: str, wanted: set[str]) -> str | None:
    starts = [i + 1 for i, c in enumerate(text) if c == " "]
    ends = [len(text)] + [m.start() for m in re.finditer(" - ", text)]
    for start in starts:
        for end in ends:
            if end > start and text[start:end] in wanted:
                return text[start:end]
    return None


def parse_unittest(log: str, ids: list[str]) -> dict[str, str]:
    """unittest -v: `test_y (pkg.mod.TestX.test_y) ... ok` (Python 3.11+; older ones print the class
    only), the status possibly on a later line after a docstring (swebench's parse_log_django rules).
    ok passes, expected failure is 'xfail'; FAIL, ERROR, skipped and unexpected success fail."""
    wanted, found, current = set(ids), {}, None
    for line in log.splitlines():
        if match := UNITTEST_LINE.match(line):
            name, where = match.groups()
            current = where if where.endswith(f".{name}") else f"{where}.{name}"
        status = UNITTEST_STATUS.search(line)
        if status and current in wanted:
            outcome = {"ok": "passed", "expected failure": "xfail"}.get(status.group(1), "failed")
            found[current] = "failed" if found.get(current) == "failed" else outcome
            current = None
    return found
