# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The test runners SWE grading understands: pytest (the default) and the standard library's unittest.

A row names its runner (`test_runner`); its test ids are in that runner's own form (pytest node ids
`tests/test_x.py::TestX::test_y[p]`; unittest dotted ids `tests.test_x.TestX.test_y`). Each runner
knows how its ids map to files and functions (for the canaries), the command that runs ids under
its guard (guard/: a wrapper that starts the runner in an isolated interpreter and streams what
happens to the grader), and its own log format, parsed by the rules of the swebench package for
that runner as a second opinion on each outcome.

Django's and SymPy's own runners are not graded (their rows need an image with their runner).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Protocol

from resources_servers.swe.canaries import TestId

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


class Pytest:
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


class Unittest:
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


RUNNERS: dict[str, TestRunner] = {runner.name: runner for runner in (Pytest(), Unittest())}


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
