# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Recorded actions of the STEM environment for the scripted policy (a stand-in for a GPU model).

gold: search (the row's reference query), compute in Python (the reference code, which
prints the answer), then the answer boxed; wrong: the same, then a wrong answer;
malformed: three broken tool calls (invalid JSON, unknown tool, wrong argument), then the
right answer. Rows without a reference (converted datasets) search for the question and
print the gold answer.
"""

from __future__ import annotations

from typing import Any

from prorl_gym.scripted import Step, call


def gold_answer(spec: dict[str, Any]) -> str:
    """The answer text a correct solver would box."""
    if spec["kind"] == "numeric":
        return f"{spec['value']:.6g} {spec.get('unit') or ''}".strip()
    if spec["kind"] == "choice":
        return spec["correct"]
    return spec["expression"]


def wrong_answer(spec: dict[str, Any]) -> str:
    """A well-formed answer outside the spec: the value tripled (or moved off zero), another
    option, the expression plus one."""
    if spec["kind"] == "numeric":
        value = spec["value"] * 3 if spec["value"] else 1 + 10 * spec.get("abs_tol", 0)
        return f"{value:.6g} {spec.get('unit') or ''}".strip()
    if spec["kind"] == "choice":
        options = spec["options"]
        return options[(options.index(spec["correct"]) + 1) % len(options)]
    return f"{spec['expression']} + 1"


def script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    spec = row["answer"]
    reference = row.get("reference") or {}
    question = row["responses_create_params"]["input"][-1]["content"]
    query = reference.get("search") or question[:200]
    code = reference.get("python") or f"print({gold_answer(spec)!r})"
    steps = [Step(tool_calls=[call("search", {"query": query})])]
    steps += [Step(tool_calls=[call("python", {"code": code})]) for _ in range(tool_calls)]
    if mode == "malformed":
        steps = [
            Step(tool_calls=[call("search", '{"query": "ideal gas"')]),  # invalid JSON
            Step(tool_calls=[call("calculator", {"expression": "1+1"})]),  # unknown tool
            Step(tool_calls=[call("search", {"q": "ideal gas"})]),  # wrong argument name
        ]
    answer = wrong_answer(spec) if mode == "wrong" else gold_answer(spec)
    return steps + [Step(content=f"The answer is \\boxed{{{answer}}}.")]
