# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Reasoning between `<think>` tags: think (ours), qwen3 and deepseek_r1 (as vLLM's parsers of those names)."""

from __future__ import annotations

START, END = "<think>", "</think>"


def split(text: str, parser: str) -> tuple[str | None, str]:
    """(reasoning or None, the rest of the text)."""
    if parser == "think":  # what precedes </think> (an opening <think> dropped), edge newlines stripped
        if END not in text:
            return None, text
        before, _, after = text.partition(END)
        return before.split(START, 1)[-1].strip("\n"), after.lstrip("\n")
    if parser == "qwen3":  # both tags, or no reasoning at all
        if START not in text or END not in text:
            return None, text
        reasoning, _, content = text.partition(START)[2].partition(END)
        return reasoning, content
    if parser == "deepseek_r1":  # the block may open in the prompt: an unclosed block is all reasoning
        head, tag, tail = text.partition(START)
        text = tail if tag else head
        if END not in text:
            return text, ""
        reasoning, _, content = text.partition(END)
        return reasoning, content
    return None, text
