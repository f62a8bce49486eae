# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The STEM task's prompt and row shape: one home, used by the data script, scripts and tests."""

from __future__ import annotations

from functools import cache
from typing import Any

from prorl_gym.environments import tools_sentence
from resources_servers.stem.search import SEARCH


@cache
def system_prompt() -> str:
    return (
        f"You are answering a science or engineering question. {tools_sentence('stem', (SEARCH,))} Python has "
        "numpy, scipy and sympy. Look up what you need, compute with Python, and when you are done reply without "
        "calling a tool and put the final answer, and only the final answer, in \\boxed{} in that last message: "
        "a number with its unit (e.g. \\boxed{9.81 m/s^2}), an option letter (e.g. \\boxed{B}), or an expression "
        "(e.g. \\boxed{x^2+1})."
    )


FORMAT_HINTS = {
    "numeric": "Give the final answer as a number with its unit in \\boxed{}.",
    "numeric_unitless": "Give the final answer as a number in \\boxed{}.",
    "choice": "Answer with the letter of the correct option in \\boxed{}.",
    "symbolic": "Give the final answer as an expression in \\boxed{}.",
}


def user_message(question: str, answer: dict[str, Any], choices: dict[str, str] | None = None) -> str:
    """The question, its options (for multiple choice) and how to give the answer."""
    parts = [question.strip()]
    if choices:
        parts.append("\n".join(f"({letter}) {text}" for letter, text in choices.items()))
    kind = answer.get("kind")
    hint = "numeric_unitless" if kind == "numeric" and not answer.get("unit") else kind
    parts.append(FORMAT_HINTS.get(hint, ""))
    return "\n\n".join(p for p in parts if p)


def build_row(
    task_id: str,
    question: str,
    answer: dict[str, Any],
    subject: str,
    origin: str,
    choices: dict[str, str] | None = None,
    reference: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A NeMo Gym row: the prompt, the answer spec EVAL checks, and (hand-checked rows only)
    `reference`: the search query, source document and Python the gold script plays."""
    row: dict[str, Any] = {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": system_prompt()},
                {"role": "user", "content": user_message(question, answer, choices)},
            ],
        },
        "task_id": task_id,
        "answer": answer,
        "subject": subject,
        "origin": origin,  # not "source": NeMo Gym's dataset metrics use that key
    }
    if reference:
        row["reference"] = reference
    return row
