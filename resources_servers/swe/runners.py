# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The test runners SWE grading understands, each run under a guard, with canaries.

A row names its runner (`test_runner`: pytest, the default, or unittest); its test ids are in
that runner's own form (pytest node ids `tests/test_x.py::TestX::test_y`; unittest dotted ids
`tests.test_x.TestX.test_y`). Each runner knows:

- its command: the runner started under its guard (guard/): a pytest plugin loaded before the
  repository's code, or a wrapper around unittest, that checks the runner's own functions are
  untouched, derives outcomes itself and writes a report signed with a key the repository's code
  never sees (read from an fd that is closed before that code is imported; its file is deleted
  before the runner starts);
- its log format, parsed by the rules of the swebench package for that runner (pytest's -rA
  short summary; unittest's verbose `test (id) ... ok` lines): a second, independent opinion;
- its canaries: two tests with unguessable names added at EVAL, one that must pass (and checks
  that a failing assert still fails) and one that must fail. A runner talked into reporting
  passes is caught by the failing canary; a test's outcome counts only if the guard's report and
  the runner's own output agree on it.

Django's and SymPy's own runners are not graded (their rows need an image with their runner).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

GUARD_SOURCES = Path(__file__).resolve().parent / "guard"
# No cache dir; the project's addopts dropped (e.g. --cov needs a plugin we do not have); -rA: a summary line per test.
PYTEST_ARGS = "-p no:cacheprovider -o addopts= -rA --tb=short"
PASSING = {"PASSED", "XFAIL"}
FAILING = {"FAILED", "ERROR", "XPASS", "SKIPPED", "SUBFAILED"}
SUMMARY = re.compile(r"^=+ short test summary info =+$", re.M)
UNITTEST_LINE = re.compile(r"^(\w+) \(([\w.]+)\)")
UNITTEST_STATUS = re.compile(r" \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")


@dataclass(frozen=True)
class Canaries:
    files: dict[str, str]  # path relative to the repository -> content
    must_pass: str  # test id
    must_fail: str


class TestRunner(Protocol):
    name: str
    guard: str  # the guard's file name in GUARD_SOURCES

    def environment(self, guard_dir: str) -> str:
        """Shell exports the runner needs (e.g. its guard on PYTHONPATH)."""
        ...

    def command(self, ids: list[str], guard_dir: str) -> str:
        """The program (run in the repository, after environment()) that runs `ids` under the guard."""
        ...

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        """'passed' / 'failed' per id found in the runner's own output."""
        ...

    def canaries(self) -> Canaries: ...

    def guard_statuses(self, outcomes: dict) -> dict[str, str]:
        """'passed' / 'failed' per test id from what the guard recorded."""
        ...


def _canary_names() -> tuple[str, str, str, str]:
    return tuple(f"{prefix}{secrets.token_hex(6)}" for prefix in ("test_", "Test", "test_", "test_"))


def _canary_body(indent: str, pass_name: str, fail_name: str) -> str:
    a, b = secrets.token_hex(8), secrets.token_hex(8)
    return (
        f"{indent}def {pass_name}(self=None):\n"
        f"{indent}    try:\n{indent}        assert {a!r} == {b!r}\n"
        f"{indent}    except AssertionError:\n{indent}        return\n"
        f"{indent}    raise RuntimeError('a failing assert did not fail')\n\n"
        f"{indent}def {fail_name}(self=None):\n{indent}    assert {a!r} == {b!r}\n"
    )


class Pytest:
    name = "pytest"
    guard = "prorl_pytest_guard.py"

    def environment(self, guard_dir: str) -> str:
        return f'export PYTHONPATH="{guard_dir}${{PYTHONPATH:+:$PYTHONPATH}}"'  # the guard first on sys.path

    def command(self, ids: list[str], guard_dir: str) -> str:
        return f"python -m pytest -p prorl_pytest_guard {PYTEST_ARGS} {' '.join(_quote(t) for t in ids)}"

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        return parse_pytest(log, ids)

    def guard_statuses(self, outcomes: dict) -> dict[str, str]:
        """A test passed if its call passed (or failed as expected) and no phase of it failed."""
        return {
            nodeid: "passed"
            if phases.get("call") in ("passed", "xfail") and "failed" not in phases.values()
            else "failed"
            for nodeid, phases in outcomes.items()
        }

    def canaries(self) -> Canaries:
        module, _, pass_name, fail_name = _canary_names()
        return Canaries(
            {f"{module}.py": _canary_body("", pass_name, fail_name)},
            f"{module}.py::{pass_name}",
            f"{module}.py::{fail_name}",
        )


class Unittest:
    name = "unittest"
    guard = "prorl_unittest_guard.py"

    def environment(self, guard_dir: str) -> str:
        return "true"

    def command(self, ids: list[str], guard_dir: str) -> str:
        return f"python {guard_dir}/{self.guard} {' '.join(_quote(t) for t in ids)}"

    def parse(self, log: str, ids: list[str]) -> dict[str, str]:
        return parse_unittest(log, ids)

    def guard_statuses(self, outcomes: dict) -> dict[str, str]:
        return {test: "passed" if outcome in ("passed", "xfail") else "failed" for test, outcome in outcomes.items()}

    def canaries(self) -> Canaries:
        module, cls, pass_name, fail_name = _canary_names()
        source = f"import unittest\n\n\nclass {cls}(unittest.TestCase):\n" + _canary_body("    ", pass_name, fail_name)
        return Canaries({f"{module}.py": source}, f"{module}.{cls}.{pass_name}", f"{module}.{cls}.{fail_name}")


RUNNERS: dict[str, TestRunner] = {runner.name: runner for runner in (Pytest(), Unittest())}


def runner_for(name: str | None) -> TestRunner:
    try:
        return RUNNERS[name or "pytest"]
    except KeyError:
        raise ValueError(f"unknown test runner {name!r}; graded runners: {sorted(RUNNERS)}") from None


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# ---------------------------------------------------------------------- the runners' own output


def parse_pytest(log: str, ids: list[str]) -> dict[str, str]:
    """pytest -rA: 'passed' / 'failed' for each requested id in the last short test summary
    (swebench's parse_log_pytest rules, matched against the requested ids so ids with spaces work;
    pytest 9's SUBFAILED lines fail their parent test)."""
    wanted, found = set(ids), {}
    headers = list(SUMMARY.finditer(log))
    for line in log[headers[-1].end() :].splitlines() if headers else []:
        status = line.split(" ", 1)[0].split("(", 1)[0]
        if status.startswith("SUB") and status != "SUBFAILED" or status not in PASSING | FAILING:
            continue
        test = _match_id(line[len(line.split(" ", 1)[0]) :], wanted)
        if test:
            found[test] = "failed" if status in FAILING or found.get(test) == "failed" else "passed"
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
    ok and expected failure pass; FAIL, ERROR, skipped and unexpected success do not."""
    wanted, found, current = set(ids), {}, None
    for line in log.splitlines():
        if match := UNITTEST_LINE.match(line):
            name, where = match.groups()
            current = where if where.endswith(f".{name}") else f"{where}.{name}"
        status = UNITTEST_STATUS.search(line)
        if status and current in wanted:
            passed = status.group(1) in ("ok", "expected failure")
            found[current] = "failed" if not passed or found.get(current) == "failed" else "passed"
            current = None
    return found


# ---------------------------------------------------------------------- the verdict


@dataclass
class Verdict:
    statuses: dict[str, str]  # requested id -> passed / failed, where the guard and the runner agree
    complete: bool  # the guard reported the end of the run
    evidence: list[str]  # why the run cannot be trusted (empty: it can)


def judge(runner: TestRunner, ids: list[str], canaries: Canaries, log: str, report: str | None, key: str) -> Verdict:
    """Combine the runner's own output, the guard's signed report and the canaries."""
    if report is None:
        return Verdict({}, False, [])
    evidence: list[str] = []
    try:
        envelope = json.loads(report)
        payload = envelope["payload"]
        signed = hmac.compare_digest(
            envelope["signature"], hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()
        )
        seen = json.loads(payload)
    except (ValueError, KeyError, TypeError, AttributeError):
        return Verdict({}, True, ["the guard's report is malformed"])
    if not signed:
        return Verdict({}, True, ["the guard's report is not signed with the grader's key"])
    evidence += seen.get("problems") or []
    guard = runner.guard_statuses(seen.get("outcomes") or {})
    own = runner.parse(log, [*ids, canaries.must_pass, canaries.must_fail])
    for canary, expected in ((canaries.must_pass, "passed"), (canaries.must_fail, "failed")):
        for who, statuses in (("the guard", guard), ("the runner's output", own)):
            if statuses.get(canary) != expected:
                evidence.append(f"a canary test that must be {expected} is {statuses.get(canary, 'missing')} in {who}")
    statuses = {t: "passed" if own.get(t) == "passed" and guard.get(t) == "passed" else "failed" for t in ids}
    return Verdict(statuses, True, evidence)
