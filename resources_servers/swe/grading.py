# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What is graded for a row, before any sandbox: its runner, its tests, the files the grader keeps.

A row names its runner (`test_runner`: our tasks do), or its runner is what SWE-bench's harness would run
for it (official.py: its 5.x `eval_script`, else its spec's test command): Django's `tests/runtests.py`
(with the spec's arguments), SymPy's `bin/test`, otherwise pytest. Django's and SymPy's runners take
whole test modules, as the harness's command does: the row's `test_directives`, else test_patch's files
(official.test_directives). Their ids are SWE-bench's (a Django docstring's first line, a SymPy function
name): once the graded base's test sources are read, `resolve` turns each into the tests it names, which
the run, the canaries and the verdict use; F2P and P2P are counted per row id (all its tests must pass).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from prorl_gym.verify.pool import VerifierError
from resources_servers.swe import official
from resources_servers.swe.patches import is_protected, patch_files
from resources_servers.swe.repos import RepoEnv
from resources_servers.swe.repos import field as row_field
from resources_servers.swe.runners import Django, TestRunner, runner_for


def test_ids(row: Any, name: str) -> list[str]:
    value = row_field(row, name) or []
    return json.loads(value) if isinstance(value, str) else list(value)  # SWE-bench stores JSON strings


@dataclass
class Grading:
    """What is graded for a row, before any sandbox."""

    runner: TestRunner
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    test_patch: str
    task_files: set[str]  # files of the tests: never the agent's to change
    roots: tuple[str, ...]  # the repository's import roots, relative to it ("" and e.g. "src")
    directives: list[str] = field(default_factory=list)  # what a runner of test modules runs (Django, SymPy)
    names: dict[str, list[str]] = field(default_factory=dict)  # a row's id -> the tests it names, once resolved

    def __post_init__(self) -> None:
        self.row_f2p, self.row_p2p = list(self.fail_to_pass), list(self.pass_to_pass)  # as the row names them

    @property
    def test_ids(self) -> list[str]:
        return list(dict.fromkeys(self.fail_to_pass + self.pass_to_pass))

    @property
    def test_files(self) -> list[str]:
        if self.directives:
            return sorted(self.runner.files(self.directives))
        parsed = (self.runner.parse_id(t) for t in self.test_ids)
        return sorted({tid.file for tid in parsed if tid is not None})

    def protected(self, path: str) -> bool:
        return is_protected(path, self.task_files)

    def resolve(self, sources: dict[str, str]) -> None:
        """The row's ids as the tests they name, from the graded base's test sources (Django, SymPy)."""
        if self.directives:
            self.names = self.runner.resolve(self.row_f2p + self.row_p2p, sources)
            self.fail_to_pass = [n for t in self.row_f2p for n in self.names[t]]
            self.pass_to_pass = [n for t in self.row_p2p for n in self.names[t]]

    def passed(self, row_ids: list[str], statuses: dict[str, str]) -> int:
        """How many of the row's ids passed: every test each one names."""
        return sum(all(statuses.get(n) == "passed" for n in self.names.get(t, [t])) for t in row_ids)


def plan_grading(row: Any, env: RepoEnv) -> Grading:
    name, args = official.runner_of(
        row_field(row, "test_runner"),
        row_field(row, "repo") or "",
        row_field(row, "version"),
        row_field(row, "eval_script") or "",
    )
    runner = Django(args) if name == "django" and args else runner_for(name)
    f2p, p2p = test_ids(row, "FAIL_TO_PASS"), test_ids(row, "PASS_TO_PASS")
    test_patch = row_field(row, "test_patch") or ""
    directives: list[str] = []
    if runner.takes_modules:
        directives = test_ids(row, "test_directives") or official.test_directives(row_field(row, "repo"), test_patch)
        if not directives:
            raise VerifierError(f"task {row_field(row, 'instance_id')}: {name} runs test modules; the row names none")
        files = set(runner.files(directives))
    else:
        files = {tid.file for tid in map(runner.parse_id, f2p + p2p) if tid is not None}
        files |= {t.split("::")[0] for t in f2p + p2p if "::" in t}  # doctest items: their file too
    root = env.pythonpath.strip("./")
    roots = ("", root) if root else ("",)
    return Grading(runner, f2p, p2p, test_patch, patch_files(test_patch) | files, roots, directives)
