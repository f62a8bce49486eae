# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Answer extraction from model text. Pure functions, no heavy imports."""

from __future__ import annotations

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


def final_boxed_answer(text: str) -> tuple[str | None, str | None]:
    """(answer, problem): the single boxed answer, or None and why there is none.

    Several *different* boxed answers count as no answer: hedging must not be rewarded
    (math-verify would read them as a set that never equals the gold answer anyway).
    """
    boxed = extract_boxed(text)
    if not boxed:
        return None, "no_boxed_answer"
    distinct = list(dict.fromkeys(boxed))
    if len(distinct) > 1:
        return None, "multiple_boxed_answers"
    if not distinct[0]:
        return None, "empty_boxed_answer"
    return distinct[0], None
