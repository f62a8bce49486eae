# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Recorded actions per task: what the scripted policy says at each turn.

A script is a list of steps; step k is the assistant's k-th turn. Modes:
  gold       the reference actions and the correct answer
  wrong      the same actions, then a wrong answer
  malformed  broken tool calls first (invalid JSON, unknown tool, bad arguments), then the
             correct answer: exercises the agent's recovery path
  stateful   the gold actions spread over turns that use what earlier turns left in the sandbox
             (environments without such a script play gold): exercises snapshots and branches
Each environment records its own actions in `resources_servers/<env>/scripted.py`
(`script(row, mode, tool_calls) -> list[Step]`), chosen by the row's task_id prefix
("math/..."): one home per environment.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field

MODES = ("gold", "wrong", "malformed", "stateful")


@dataclass
class Step:
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"name", "arguments": raw string}


def call(name: str, arguments: dict | str) -> dict:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


def wrong_answer(expected: str) -> str:
    return "0" if expected.strip() not in ("0", "0.0") else "1"


def build_script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    env = row.get("task_id", "").split("/", 1)[0]
    try:
        module = importlib.import_module(f"resources_servers.{env}.scripted")
    except ModuleNotFoundError:
        raise ValueError(
            f"no recorded actions for task {row.get('task_id')!r}: resources_servers/{env}/scripted.py"
        ) from None
    return module.script(row, mode, tool_calls=tool_calls)
