# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Reasoning parsers: think (ours), qwen3 and deepseek_r1 as vLLM's (vllm/reasoning/)."""

from __future__ import annotations

from prorl_gym.tokens.parsers import parse


def split(text, parser):
    turn = parse(text, "none", parser)
    return turn.reasoning, turn.content


def test_think_strips_edge_newlines():
    assert split("<think>\nLook.\n</think>\n\nAnswer", "think") == ("Look.", "Answer")
    assert split("Look.\n</think>\n\nAnswer", "think") == ("Look.", "Answer")
    assert split("Answer", "think") == (None, "Answer")


def test_qwen3_needs_both_tags():
    assert split("<think>\nLook.\n</think>\n\nAnswer", "qwen3") == ("\nLook.\n", "\n\nAnswer")
    assert split("Look.</think>Answer", "qwen3") == (None, "Look.</think>Answer")


def test_deepseek_r1_reads_an_unclosed_block_as_reasoning():
    assert split("Look.</think>Answer", "deepseek_r1") == ("Look.", "Answer")
    assert split("<think>Still thinking", "deepseek_r1") == ("Still thinking", "")
