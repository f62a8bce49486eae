# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Recorded actions of the SWE environment for the scripted policy (a stand-in for a GPU model).

gold: run a failing test, apply the gold patch, run the tests again, submit.
wrong: run a failing test, submit without changing anything (an empty patch scores 0).
malformed: broken tool calls first (invalid JSON, unknown tool, wrong argument), then gold.
"""

from __future__ import annotations

import shlex

from prorl_gym.scripted import Step, call
from resources_servers.swe.official import runner_of, test_directives
from resources_servers.swe.repos import repo_env


def _repo(row: dict) -> str:
    return shlex.quote(repo_env(row).repo_path)  # /workspace, or the image's /testbed


def _pytest(row: dict) -> str:
    """Run the failing tests the way the project runs them (SWE-bench's specs for Django and SymPy)."""
    runner, _ = runner_of(row.get("test_runner"), row.get("repo", ""), row.get("version"))
    if runner in ("django", "sympy"):
        targets = row.get("test_directives") or test_directives(row["repo"], row.get("test_patch", ""))
        files = " ".join(shlex.quote(t) for t in targets[:3])
        if runner == "django":
            return f"cd {_repo(row)} && python tests/runtests.py --settings=test_sqlite --parallel 1 {files} 2>&1 | tail -15"
        run = "import sys, sympy.testing.runtests as r; r._test(*sys.argv[1:], verbose=True)"
        return f"cd {_repo(row)} && python -c {shlex.quote(run)} {files} 2>&1 | tail -15"
    tests = " ".join(shlex.quote(t) for t in row["FAIL_TO_PASS"][:3])
    return f"cd {_repo(row)} && python -m pytest -q -p no:cacheprovider -o addopts= {tests} 2>&1 | tail -15"


def script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    look = Step(content="Let me reproduce the failure first.", tool_calls=[call("bash", {"command": _pytest(row)})])
    if mode == "wrong":
        return [look, Step(tool_calls=[call("submit", {"note": "no change"})])]
    fix = Step(
        content="Applying the fix.",
        tool_calls=[
            call("bash", {"command": f"cd {_repo(row)} && git apply <<'PRORL_PATCH'\n{row['patch']}PRORL_PATCH"})
        ],
    )
    steps = [
        look,
        fix,
        Step(tool_calls=[call("bash", {"command": _pytest(row)})]),
        Step(tool_calls=[call("submit", {})]),
    ]
    if mode == "malformed":
        steps = [
            Step(tool_calls=[call("bash", '{"command": "ls"')]),  # invalid JSON
            Step(tool_calls=[call("grep", {"pattern": "def"})]),  # unknown tool
            Step(tool_calls=[call("editor", {"command": "view"})]),  # missing argument
        ] + steps
    return steps
