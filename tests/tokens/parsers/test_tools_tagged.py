# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""qwen3_coder, deepseek_v3 and deepseek_v31 give what vLLM's parsers of those names give (expectations
from vLLM's tests/tool_parsers/test_qwen3coder_tool_parser.py, test_deepseekv31_tool_parser.py and the code)."""

from __future__ import annotations

import json

from prorl_gym.tokens.parsers import parse

SCHEMAS = {
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "ratio": {"type": "number"},
            "exact": {"type": "boolean"},
            "filters": {"type": "object"},
            "tags": {"type": "array"},
        },
    },
    "write": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}},
}


def coder(text, malformed="content"):
    turn = parse(text, "qwen3_coder", "none", malformed, tool_schemas=SCHEMAS)
    return turn.content, [(c["name"], json.loads(c["arguments"])) for c in turn.tool_calls]


def test_values_typed_by_the_schema():
    text = (
        "<tool_call>\n<function=search>\n<parameter=query>\n2024\n</parameter>\n<parameter=limit>\n5\n</parameter>\n"
        "<parameter=ratio>\n2.0\n</parameter>\n<parameter=exact>\nTrue\n</parameter>\n"
        '<parameter=filters>\n{"a": 1}\n</parameter>\n<parameter=tags>\n["x"]\n</parameter>\n'
        "<parameter=extra>\n7\n</parameter>\n</function>\n</tool_call>"
    )
    assert coder(text)[1] == [
        (
            "search",
            {"query": "2024", "limit": 5, "ratio": 2, "exact": True, "filters": {"a": 1}, "tags": ["x"], "extra": "7"},
        )
    ]
    odd = "<tool_call>\n<function=search>\n<parameter=limit>\nfive\n</parameter>\n<parameter=query>\nnull\n</parameter>\n</function>\n</tool_call>"
    assert coder(odd)[1] == [("search", {"limit": "five", "query": None})]


def test_one_newline_stripped_each_side_and_strings_stay_strings():
    text = '<tool_call>\n<function=write>\n<parameter=content>\n\nx = 1\n\n</parameter>\n<parameter=path>\n{"a": 1}\n</parameter>\n</function>\n</tool_call>'
    assert coder(text)[1] == [("write", {"content": "\nx = 1\n", "path": '{"a": 1}'})]


def test_bare_function_unclosed_parameter_and_content():
    bare = "Sure.\n<function=write>\n<parameter=path>\na.py\n<parameter=content>\nprint(1)\n</parameter>\n</function>"
    assert coder(bare) == ("Sure.\n", [("write", {"path": "a.py", "content": "print(1)"})])
    parallel = "<tool_call>\n<function=write>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=write>\n<parameter=path>\nb\n</parameter>\n</function>\n</tool_call>"
    assert coder(parallel) == ("", [("write", {"path": "a"}), ("write", {"path": "b"})])
    cut = "<tool_call>\n<function=write>\n<parameter=content>\nprint(6*"
    assert coder(cut) == ("", [("write", {"content": "print(6*"})])  # vLLM reads a cut call as a call


def test_without_a_function_it_is_content():
    assert coder("<tool_call>\n</tool_call>") == ("<tool_call>\n</tool_call>", [])


V3 = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Tokyo"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'


def test_deepseek_v3_calls_arguments_as_written():
    turn = parse("Checking." + V3, "deepseek_v3", "none", "content")
    assert turn.content == "Checking."
    assert turn.tool_calls == [
        {"name": "get_weather", "arguments": '{"city": "Tokyo"}'},
        {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    ]
    multiline = V3.replace('{"city": "Tokyo"}', '{\n"city": "Tokyo"\n}')  # no DOTALL in vLLM: not matched
    assert [c["arguments"] for c in parse(multiline, "deepseek_v3", "none", "content").tool_calls] == [
        '{"city": "Paris"}'
    ]


def test_deepseek_v31_calls():
    text = 'Let me.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{"x":1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>bar<｜tool▁sep｜>{"y":2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    turn = parse(text, "deepseek_v31", "none", "content")
    assert turn.content == "Let me."
    assert turn.tool_calls == [{"name": "foo", "arguments": '{"x":1}'}, {"name": "bar", "arguments": '{"y":2}'}]
    cut = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>python<｜tool▁sep｜>{"code": "print(6*'
    assert parse(cut, "deepseek_v31", "none", "content").tool_calls == []  # vLLM: tools_called, no call
    assert parse(cut, "deepseek_v31", "none", "call").tool_calls[0]["name"] == "python"
