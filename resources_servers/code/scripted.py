# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Recorded actions of the code environment for the scripted policy (a stand-in for a GPU model).

gold: write the canonical solution to a file with the editor, run it with bash (stdio:
on the first case's input), then answer with it in one fenced ```python block (or, for a
row with `answer_file`, leave it in that file); wrong: the same with a plausible but wrong
solution (`return None`; for stdio, print the number of input tokens); malformed: three
broken tool calls (invalid JSON, unknown tool, wrong argument), then the gold answer.
`tool_calls` > 2 repeats the run.
"""

from __future__ import annotations

import shlex

from prorl_gym.scripted import Step, call

WRONG_STDIO = "import sys\n\nprint(len(sys.stdin.read().split()))\n"


def wrong_solution(row: dict) -> str:
    tests = row["tests"]
    if tests["kind"] == "stdio":
        return WRONG_STDIO
    entry = tests["entry_point"]
    if "()." in entry:
        cls, method = entry.split("().", 1)
        return f"class {cls}:\n    def {method}(self, *args, **kwargs):\n        return None\n"
    starter = row.get("starter_code") or ""
    if f"def {entry}(" in starter:  # the signature and docstring as given, an empty body
        return starter.rstrip() + "\n    return None\n"
    return f"def {entry}(*args, **kwargs):\n    return None\n"


def run_command(row: dict, path: str) -> str:
    tests = row["tests"]
    if tests["kind"] == "stdio":
        return f"printf %s {shlex.quote(tests['cases'][0]['input'])} | python {shlex.quote(path)}"
    return f"python {shlex.quote(path)} && echo loaded"


def script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    gold = row.get("canonical_solution")
    if not gold:
        raise ValueError(f"task {row.get('task_id')!r} has no canonical_solution to play")
    solution = wrong_solution(row) if mode == "wrong" else gold
    path = row.get("answer_file") or "solution.py"
    if row.get("answer_file") and row.get("starter_code"):  # staged at INIT: overwrite, not create
        write = call("python", {"code": f"open({path!r}, 'w').write({solution!r})"})
    else:
        write = call("editor", {"command": "create", "path": path, "file_text": solution})
    steps = [Step(tool_calls=[write])]
    steps += [
        Step(tool_calls=[call("bash", {"command": run_command(row, path)})]) for _ in range(max(1, tool_calls - 1))
    ]
    if mode == "malformed":
        steps = [
            Step(tool_calls=[call("editor", '{"command": "create", "path": "a.py"')]),  # invalid JSON
            Step(tool_calls=[call("run_tests", {"path": "a.py"})]),  # unknown tool
            Step(tool_calls=[call("bash", {"cmd": "python a.py"})]),  # wrong argument name
        ] + (steps if row.get("answer_file") else [])
    if row.get("answer_file"):
        return steps + [Step(content=f"My solution is saved in `{path}`.")]
    return steps + [Step(content=f"Here is my solution.\n\n```python\n{solution.rstrip()}\n```")]
