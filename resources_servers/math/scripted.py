# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Recorded actions of the math environment for the scripted policy (a stand-in for a GPU model).

gold: compute in Python, then the answer boxed; wrong: the same, then a wrong answer;
malformed: three broken tool calls (invalid JSON, unknown tool, wrong argument), then the
right answer; stateful: a variable set in Python and a file written in bash from /tmp, read
back in later turns (the variable, then the file from the shell's working directory), then
the right answer.
"""

from __future__ import annotations

from prorl_gym.scripted import Step, call, wrong_answer


def script(row: dict, mode: str, tool_calls: int = 1) -> list[Step]:
    expected = row["expected_answer"]
    steps = [
        Step(tool_calls=[call("python", {"code": f"answer = {expected!r}\nprint(answer)"})]) for _ in range(tool_calls)
    ]
    if mode == "malformed":
        steps = [
            Step(tool_calls=[call("python", '{"code": "print(1)"')]),  # invalid JSON
            Step(tool_calls=[call("calculator", {"expression": "1+1"})]),  # unknown tool
            Step(tool_calls=[call("python", {"source": "print(1)"})]),  # wrong argument name
        ]
    if mode == "stateful":
        steps = [
            Step(tool_calls=[call("python", {"code": f"answer = {expected!r}"})]),
            Step(tool_calls=[call("bash", {"command": "cd /tmp && echo kept > note"})]),
            Step(tool_calls=[call("python", {"code": "print(answer)"})]),
            Step(tool_calls=[call("bash", {"command": "cat note"})]),  # where the shell was: /tmp
        ]
    answer = wrong_answer(expected) if mode == "wrong" else expected
    return steps + [Step(content=f"The answer is \\boxed{{{answer}}}.")]
