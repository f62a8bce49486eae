# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The SWE task's prompt and row shape: one home, used by the data script and tests."""

from __future__ import annotations

from functools import cache
from typing import Any

from prorl_gym.environments import tools_sentence


@cache
def system_prompt(repo_path: str) -> str:
    return (
        "You are a software engineer fixing an issue in a Python repository. The repository is checked out at "
        f"{repo_path} (your working directory) at its base commit, with git. {tools_sentence('swe')} The shell "
        "has no network. Work like this: read the issue, find the relevant code, reproduce the problem (e.g. with "
        "a small script, or the project's tests: `python -m pytest -q <test>`, or `python -m unittest <test>` where the "
        "project uses unittest), fix it with a minimal change to the non-test source files, and run the relevant "
        "tests again. Changes to test files and test configuration are "
        "discarded before grading; your change is graded by the project's own tests. Call `submit` when you are "
        "done: what is graded is the state of the repository at that moment (its diff against the base commit)."
    )


USER_TEMPLATE = (
    "Resolve the following issue in the repository at {repo_path}.\n\n<issue>\n{problem_statement}\n</issue>"
)
# The SWE-bench / SWE-Gym fields a row carries, in this order (the rest is ours).
TASK_FIELDS = (
    "instance_id",
    "repo",
    "version",
    "base_commit",
    "problem_statement",
    "hints_text",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "patch",
    "test_patch",
    "environment",
)


def build_row(task: dict[str, Any], repo_path: str = "/workspace") -> dict[str, Any]:
    """A dataset row from a SWE task in the SWE-bench schema (plus `environment`)."""
    messages = [
        {"role": "system", "content": system_prompt(repo_path)},
        {
            "role": "user",
            "content": USER_TEMPLATE.format(repo_path=repo_path, problem_statement=task["problem_statement"].strip()),
        },
    ]
    row: dict[str, Any] = {"responses_create_params": {"input": messages}, "task_id": f"swe/{task['instance_id']}"}
    row |= {key: task[key] for key in TASK_FIELDS if key in task}
    return row | {key: value for key, value in task.items() if key not in row}
