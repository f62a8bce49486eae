# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The tool-call grammar's shape (what llama.cpp makes of it is tested against the real server in
tests/test_real_model.py: every environment's tools, parsed and sampled)."""

from __future__ import annotations

import pytest

from prorl_gym.resources.tools import TOOLS
from prorl_gym.tokens.grammar import GrammarError, tool_call_grammar

BASH = {"type": "function", "function": TOOLS["bash"].schema()}


def rules(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())


def test_a_call_in_the_hermes_format_with_the_tags_as_tokens_and_json_as_the_template_writes_it():
    g = rules(tool_call_grammar([BASH], parallel=False))
    assert g["root"] == "call"
    assert g["call"] == '<tool_call> "\\n" (call-bash) "\\n" </tool_call>'
    assert g["call-bash"].startswith('"{\\"name\\": " "\\"bash\\"" ", \\"arguments\\": " "{" "\\"command\\": " string')
    assert {"string", "char"} <= g.keys() and "value" not in g  # only what is used
    tagged_as_text = rules(tool_call_grammar([BASH], tag_tokens=False))
    assert tagged_as_text["call"].startswith('"<tool_call>" "\\n"')
    assert tagged_as_text["root"] == 'call ( "\\n" call )*'


def test_every_tool_of_every_environment_has_a_grammar():
    tools = [{"type": "function", "function": tool.schema()} for tool in TOOLS.values()]
    g = rules(tool_call_grammar(tools))
    assert all(f"call-{tool.name}" in g for tool in TOOLS.values())
    editor = g["call-editor"]  # enum, required then optional properties, nullable arrays
    assert '("\\"view\\"" | ' in editor and '"\\"path\\": " string' in editor
    assert '"\\"view_range\\": " ("[" ( integer ( ", " integer )* )? "]" | null)' in editor


def test_optional_properties_may_be_left_out_whatever_comes_first():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}}
    g = rules(tool_call_grammar([{"name": "f", "parameters": schema}]))
    assert g["call-f"].endswith(
        '"{" ( "\\"a\\": " integer ( ", " "\\"b\\": " boolean )? | ( "\\"b\\": " boolean )? ) "}" "}"'
    )


def test_a_named_tool_alone_and_refusals():
    both = [BASH, {"type": "function", "function": TOOLS["python"].schema()}]
    assert "call-python" not in rules(tool_call_grammar(both, only="bash"))
    with pytest.raises(GrammarError, match="not among"):
        tool_call_grammar(both, only="submit")
    with pytest.raises(GrammarError, match="no tools"):
        tool_call_grammar([])


def test_refs_resolve_and_free_form_objects_take_any_json():
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/P"}, "meta": {"type": "object"}},
        "required": ["p", "meta"],
        "$defs": {"P": {"type": "object", "properties": {"x": {"const": "y"}}, "required": ["x"]}},
    }
    g = rules(tool_call_grammar([{"name": "f", "parameters": schema}]))
    assert '"\\"p\\": " "{" "\\"x\\": " "\\"y\\"" "}"' in g["call-f"] and '"\\"meta\\": " object' in g["call-f"]
    assert {"value", "object", "array", "number"} <= g.keys()
