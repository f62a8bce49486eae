# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""hermes, llama3_json and mistral give what vLLM's parsers of those names give (expectations from vLLM's
tests/tool_parsers/test_llama3_json_tool_parser.py, test_mistral_tool_parser.py and the parsers' code)."""

from __future__ import annotations

import json

from prorl_gym.tokens.parsers import parse


def calls(text, parser, malformed="content"):
    turn = parse(text, parser, "none", malformed)
    return turn.content, [(c["name"], json.loads(c["arguments"])) for c in turn.tool_calls]


def test_hermes_content_before_the_calls_and_every_block():
    text = 'Let me run it.\n\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {"x": "é"}}\n</tool_call>'
    assert calls(text, "hermes") == ("Let me run it.\n\n", [("a", {}), ("b", {"x": "é"})])
    assert parse(text, "hermes", "none").tool_calls[1]["arguments"] == '{"x": "é"}'  # ensure_ascii=False


def test_hermes_needs_arguments_and_one_bad_block_makes_all_content():
    no_arguments = '<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>'
    assert calls(no_arguments, "hermes") == (no_arguments, [])
    bad = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {</tool_call>'
    assert calls(bad, "hermes") == (bad, [])
    written = parse(bad, "hermes", "none", "call").tool_calls  # the policy is told which did not parse
    assert written == [{"name": "a", "arguments": "{}"}, {"name": "b", "arguments": "{"}]


def test_llama3_json_simple_with_text_around():
    text = 'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} Would you like to know more?'
    assert calls(text, "llama3_json") == ("", [("getOpenIncidentsTool", {})])  # vLLM: content None


def test_llama3_json_python_tag_and_several_calls():
    text = '<|python_tag|>{"name": "searchTool", "parameters": {"query": "test1"}}; {"name": "getOpenIncidentsTool", "parameters": {}} ; {"name": "searchTool", "arguments": {"query": "test2"}}'
    assert calls(text, "llama3_json")[1] == [
        ("searchTool", {"query": "test1"}),
        ("getOpenIncidentsTool", {}),
        ("searchTool", {"query": "test2"}),
    ]


def test_llama3_json_nesting_braces_in_strings_and_escapes():
    deep = '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": {"value": "deep"}}}}}'
    assert calls(deep, "llama3_json")[1] == [("complexTool", {"level1": {"level2": {"level3": {"value": "deep"}}}})]
    quoted = '{"name": "parserTool", "parameters": {"text": "He said \\"Hello {world}\\""}}'
    assert calls(quoted, "llama3_json")[1] == [("parserTool", {"text": 'He said "Hello {world}"'})]


def test_llama3_json_what_stays_content():
    for text in (
        "This is just some text without any tool calls",
        '{"name": "invalidTool", "parameters": {invalid json}',
        '{"parameters": {}}',  # no name
        '{"name": "toolWithoutParams"}',  # neither parameters nor arguments
        "The answer is \\boxed{5}.",
    ):
        assert calls(text, "llama3_json") == (text, []), text
    assert parse("The answer is \\boxed{5}.", "llama3_json", "none", "call").tool_calls == []  # prose, not a call
    cut = '<|python_tag|>{"name": "python", "parameters": {"code": "print(6*'
    assert parse(cut, "llama3_json", "none", "call").tool_calls == [
        {"name": "python", "arguments": '{"code": "print(6*'}
    ]


def test_mistral_pre_v11_list():
    text = 'Let me check.[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": "get_weather", "arguments": {"city": "San Francisco", "unit": "celsius"}}]'
    assert calls(text, "mistral") == (
        "Let me check.",
        [("add", {"a": 3.5, "b": 4}), ("get_weather", {"city": "San Francisco", "unit": "celsius"})],
    )
    assert calls('[TOOL_CALLS] [{"name": "a", "arguments": {}}]', "mistral") == ("", [("a", {})])


def test_mistral_regex_fallback_and_unreadable_calls():
    trailing = '[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}] trailing'
    assert calls(trailing, "mistral")[1] == [("a", {"x": 1})]
    broken = '[TOOL_CALLS] [{"name": "a", "arguments": {"x": '
    assert calls(broken, "mistral") == ('[{"name": "a", "arguments": {"x":', [])  # vLLM: the calls' text alone
