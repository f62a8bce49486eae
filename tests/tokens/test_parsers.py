# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A raw generation read back as vLLM's parsers would on its chat route."""

from __future__ import annotations

import json

from prorl_gym.tokens.parsers import parse


def test_reasoning_and_hermes_calls():
    text = '<think>\nLook first.\n</think>\n\nLet me run it.\n\n<tool_call>\n{"name": "python", "arguments": {"code": "1+1"}}\n</tool_call>'
    turn = parse(text)
    assert turn.reasoning == "Look first." and turn.content == "Let me run it.\n\n"  # whitespace kept, as vLLM
    assert turn.tool_calls == [{"name": "python", "arguments": '{"code": "1+1"}'}]
    two = parse(
        '<tool_call>\n{"name":"a","arguments":{}}\n</tool_call>\n<tool_call>\n{"name":"b","arguments":{"x":"é"}}\n</tool_call>'
    )
    assert [c["name"] for c in two.tool_calls] == ["a", "b"] and json.loads(two.tool_calls[1]["arguments"]) == {
        "x": "é"
    }


def test_a_reasoning_without_its_opening_tag_and_none_at_all():
    assert parse("thought\n</think>\n\nanswer").reasoning == "thought"
    assert parse("just an answer").reasoning is None


def test_a_malformed_call_goes_back_to_the_policy_or_stays_content():
    text = '<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"\n</tool_call>'
    call = parse(text).tool_calls[0]
    assert call["name"] == "python" and call["arguments"] == '{"code": "print(1)"'  # the agent says it is not JSON
    as_vllm = parse(text, malformed="content")
    assert as_vllm.tool_calls == [] and as_vllm.content == text


def test_qwen3_coder_xml_calls():
    text = "Sure.\n<tool_call>\n<function=bash>\n<parameter=command>\nls -la\n</parameter>\n<parameter=limit>\n3\n</parameter>\n</function>\n</tool_call>"
    turn = parse(text, "qwen3_coder", "none")
    assert turn.content == "Sure.\n"
    assert turn.tool_calls == [{"name": "bash", "arguments": '{"command": "ls -la", "limit": "3"}'}]  # no schema
    schema = {"bash": {"type": "object", "properties": {"limit": {"type": "integer"}}}}
    typed = parse(text, "qwen3_coder", "none", tool_schemas=schema)
    assert typed.tool_calls == [{"name": "bash", "arguments": '{"command": "ls -la", "limit": 3}'}]


def test_no_parser():
    text = "<tool_call>\n{}\n</tool_call>"
    assert parse(text, "none", "none").content == text
