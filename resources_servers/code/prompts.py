# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The code task's prompts and row shape: one home, used by the converters, data script and tests."""

from __future__ import annotations

from functools import cache
from typing import Any

from prorl_gym.environments import tools_sentence


@cache
def tools_text() -> str:
    return (
        "You are solving a programming problem in a sandbox with Python 3 (numpy, sympy and scipy are "
        f"installed). {tools_sentence('code')} Use them to write your code and test it on examples before "
        "you answer."
    )


def system_prompt() -> str:
    return tools_text() + (
        " When you are done, reply without calling a tool and end that last message with ONE fenced "
        "```python code block holding your complete solution (all imports and helper functions it needs). "
        "Only that block is graded; do not put any other Python code block in that message."
    )


def system_prompt_file() -> str:
    return tools_text() + (
        " When you are done, make sure your complete solution is saved in the file the task names, then "
        "reply without calling a tool. Only that file is graded."
    )


STDIO_TEXT = "Your program must read the input from standard input and print the answer to standard output."


def user_prompt(problem: str, tests: dict, starter_code: str | None) -> str:
    parts = [problem.strip()]
    if tests["kind"] == "stdio":
        parts.append(STDIO_TEXT)
    else:
        entry = tests["entry_point"]
        name = entry.split("().", 1)[1] if "()." in entry else entry
        parts.append(f"Implement `{name}`" + (" in the starter code below." if starter_code else "."))
    if starter_code:
        parts.append(f"```python\n{starter_code.rstrip()}\n```")
    return "\n\n".join(parts)


def file_answer(row: dict, answer_file: str) -> dict:
    """The same task, graded from a file the agent saves instead of its final message."""
    system, user = (dict(m) for m in row["responses_create_params"]["input"])
    system["content"] = system_prompt_file()
    user["content"] += (
        f"\n\nSave your complete solution in `{answer_file}` (in the working directory): that file is graded."
    )
    return row | {"responses_create_params": {"input": [system, user]}, "answer_file": answer_file}


def build_row(
    task_id: str,
    problem: str,
    tests: dict,
    source: str,
    starter_code: str | None = None,
    canonical_solution: str | None = None,
    limits: dict[str, Any] | None = None,
) -> dict:
    """A row of the code environment (schema: resources_servers/code/README.md)."""
    row: dict[str, Any] = {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": system_prompt()},
                {"role": "user", "content": user_prompt(problem, tests, starter_code)},
            ],
        },
        "task_id": task_id,
        "data_source": source,  # not "source": NeMo Gym's dataset metrics use that key
        "tests": tests,
        "starter_code": starter_code,
        "canonical_solution": canonical_solution,
    }
    if limits:
        row["limits"] = limits
    return row
