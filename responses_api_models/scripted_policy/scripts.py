# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A row's recorded actions (prorl_gym/scripted.py), from its environment's scripted.py, found by
the row's task_id ("math/..." -> resources_servers/math/scripted.py): loaded by name, as ng_run
loads servers, so no environment is imported by the policy's code."""

from __future__ import annotations

import importlib

from prorl_gym.scripted import Step


def build_script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    env = row.get("task_id", "").split("/", 1)[0]
    try:
        module = importlib.import_module(f"resources_servers.{env}.scripted")
    except ModuleNotFoundError:
        raise ValueError(
            f"no recorded actions for task {row.get('task_id')!r}: resources_servers/{env}/scripted.py "
            "(a task_id starts with its environment's folder name)"
        ) from None
    return module.script(row, mode, tool_calls=tool_calls)
