# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""gpt-oss's harmony output read as vLLM's `openai` tool parser and gpt-oss reasoning parser read it
(vllm/tool_parsers/openai_tool_parser.py, vllm/entrypoints/openai/parser/harmony_utils.py), with the
openai-harmony package on the o200k vocabulary make setup lays out."""

from __future__ import annotations

import pytest

from prorl_gym.paths import TOKEN_CACHE
from prorl_gym.tokens.parsers import parse
from prorl_gym.tokens.parsers.harmony import encoding

if not (TOKEN_CACHE / "tiktoken" / "o200k_base.tiktoken").is_file():
    pytest.skip("gpt-oss's vocabulary comes from make setup (.venvs/tokens/tiktoken)", allow_module_level=True)

ANALYSIS = "<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant"
CALL = '<|channel|>commentary to=functions.python <|constrain|>json<|message|>{"code": "print(\'é\')"}<|call|>'


def harmony(text):
    ids = encoding().encode(text, allowed_special="all")
    return parse(text, "openai", "openai", token_ids=ids)


def test_a_call_after_analysis():
    turn = harmony(ANALYSIS + CALL)
    assert turn.reasoning == "Need the tool."
    assert turn.tool_calls == [{"name": "python", "arguments": '{"code": "print(\'\\u00e9\')"}'}]  # ensure_ascii
    assert turn.content == ""


def test_parallel_calls_a_preamble_and_a_final_answer():
    preamble = "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant"
    second = (
        '<|start|>assistant<|channel|>commentary to=functions.bash <|constrain|>json<|message|>{"cmd": "ls"}<|call|>'
    )
    turn = harmony(preamble + CALL.removesuffix("<|call|>") + "<|end|>" + second)
    assert [c["name"] for c in turn.tool_calls] == ["python", "bash"] and turn.content == "Checking both."
    final = harmony(ANALYSIS + "<|channel|>final<|message|>The answer is 4.<|return|>")
    assert (final.reasoning, final.content, final.tool_calls) == ("Need the tool.", "The answer is 4.", [])


def test_a_cut_final_message_and_text_without_a_channel():
    cut = harmony(ANALYSIS + "<|channel|>final<|message|>The answer")
    assert cut.content == "The answer"
    plain = harmony("just text")  # vLLM: no message, no content
    assert plain.content == "" and plain.tool_calls == []
