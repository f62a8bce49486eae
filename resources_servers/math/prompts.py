# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The math task's prompt and row shape: one home, used by the data script and tests."""

from __future__ import annotations

from functools import cache

from prorl_gym.environments import tools_sentence


@cache
def system_prompt() -> str:
    return (
        f"You are solving a math problem. {tools_sentence('math')} Python has numpy and sympy. Use the tools "
        "to compute and check your work. When you are done, reply without calling a tool and put the final "
        "answer, and only the final answer, in \\boxed{} in that last message."
    )


def build_row(
    task_id: str, question: str, expected_answer: str, checker: dict, generator: str, answer_source: str | None = None
) -> dict:
    """answer_source: the generator's own text of the answer, where expected_answer rewrites it (data/golds.py)."""
    row = {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": system_prompt()},
                {"role": "user", "content": question},
            ],
        },
        "task_id": task_id,
        "expected_answer": expected_answer,
        "checker": checker,
        "generator": generator,
    }
    if answer_source is not None:
        row["answer_source"] = answer_source
    return row
