"""Recorded actions per task: what the scripted policy says at each turn.

A script is a list of steps; step k is the assistant's k-th turn. Modes:
  gold       the reference actions and the correct answer
  wrong      the same actions, then a wrong answer
  malformed  broken tool calls first (invalid JSON, unknown tool, bad arguments), then the
             correct answer: exercises the agent's recovery path
Builders are chosen by the row's task_id prefix ("math/...").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

MODES = ("gold", "wrong", "malformed")


@dataclass
class Step:
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"name", "arguments": raw string}


def call(name: str, arguments: dict | str) -> dict:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


def wrong_answer(expected: str) -> str:
    return "0" if expected.strip() not in ("0", "0.0") else "1"


def math_script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    expected = row["expected_answer"]
    steps = [
        Step(tool_calls=[call("python", {"code": f"answer = {expected!r}\nprint(answer)"})])
        for _ in range(tool_calls)
    ]
    if mode == "malformed":
        steps = [
            Step(tool_calls=[call("python", '{"code": "print(1)"')]),  # invalid JSON
            Step(tool_calls=[call("calculator", {"expression": "1+1"})]),  # unknown tool
            Step(tool_calls=[call("python", {"source": "print(1)"})]),  # wrong argument name
        ]
    answer = wrong_answer(expected) if mode == "wrong" else expected
    return steps + [Step(content=f"The answer is \\boxed{{{answer}}}.")]


BUILDERS: dict[str, Callable[..., list[Step]]] = {"math": math_script}


def build_script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    env = row.get("task_id", "").split("/", 1)[0]
    try:
        builder = BUILDERS[env]
    except KeyError:
        raise ValueError(f"no script builder for task {row.get('task_id')!r}; known envs: {sorted(BUILDERS)}") from None
    return builder(row, mode, tool_calls=tool_calls)
