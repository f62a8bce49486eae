# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Recorded actions: what the scripted policy (the stand-in for a GPU model) says at each turn.

A script is a list of steps; step k is the assistant's k-th turn. Modes:
  gold       the reference actions and the correct answer
  wrong      the same actions, then a wrong answer
  malformed  broken tool calls first (invalid JSON, unknown tool, bad arguments), then the
             correct answer: exercises the agent's recovery path
  stateful   the gold actions spread over turns that use what earlier turns left in the sandbox
             (environments without such a script play gold): exercises snapshots and branches
Each environment records its own actions in `resources_servers/<env>/scripted.py`
(`script(row, mode, tool_calls) -> list[Step]`) with this vocabulary; the scripted policy finds
that module by the row's task_id, which starts with the environment's folder name ("math/...").
"""

from __future__ import annotations

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
