# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Answer extraction from model text. Pure functions, no heavy imports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from prorl_gym.verify.transcript import final_assistant_text

if TYPE_CHECKING:
    from nemo_gym.openai_utils import NeMoGymResponse

_BOXED = ("\\boxed{", "\\fbox{")


def extract_boxed(text: str) -> list[str]:
    """Contents of every \\boxed{...} (balanced braces), in order of appearance."""
    found: list[str] = []
    i = 0
    while True:
        starts = [(text.find(tag, i), tag) for tag in _BOXED]
        starts = [(pos, tag) for pos, tag in starts if pos >= 0]
        if not starts:
            return found
        pos, tag = min(starts)
        depth, j = 1, pos + len(tag)
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth:  # unbalanced: the rest of the text is not a complete answer
            return found
        found.append(text[pos + len(tag) : j - 1].strip())
        i = j


BoxedPolicy = Literal["one", "last"]


def final_boxed_answer(text: str, several: BoxedPolicy = "one") -> tuple[str | None, str | None]:
    """(answer, problem): the boxed answer, or None and why there is none.

    several="one" (the default): several *different* boxed answers count as no answer, so
    hedging is not rewarded (math-verify would read them as a set that never equals the gold
    answer anyway). several="last": the last boxed answer counts, as most RL math pipelines do.
    """
    boxed = extract_boxed(text)
    if not boxed:
        return None, "no_boxed_answer"
    distinct = list(dict.fromkeys(boxed))
    if len(distinct) > 1 and several == "one":
        return None, "multiple_boxed_answers"
    answer = boxed[-1]
    if not answer:
        return None, "empty_boxed_answer"
    return answer, None


def boxed_answer_of(response: NeMoGymResponse, several: BoxedPolicy = "one") -> tuple[str | None, str | None]:
    """final_boxed_answer of the rollout's final assistant message."""
    return final_boxed_answer(final_assistant_text(response), several)
