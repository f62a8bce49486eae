# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Tool calls written without their tags, as a small model writes them (forms seen with
Qwen2.5-Coder-0.5B-Instruct through llama.cpp), read leniently and said to be."""

from __future__ import annotations

import json

import pytest

from prorl_gym.tokens.lenient import read_untagged


def calls(text: str) -> list[tuple[str, dict | str, str]]:
    def arguments(a):
        try:
            return json.loads(a)
        except ValueError:
            return a

    return [(c.name, arguments(c.arguments), c.form) for c in read_untagged(text)[1]]


def test_a_call_in_a_json_fence_with_the_text_before_it_as_content():
    text = 'Let me check.\n```json\n{"name": "bash", "arguments": {"command": "pwd"}}\n```'
    content, found = read_untagged(text)
    assert content == "Let me check.\n" and calls(text) == [("bash", {"command": "pwd"}, "fenced")]
    assert found[0].function() == {"name": "bash", "arguments": '{"command": "pwd"}'}


def test_a_fenced_call_without_its_braces_as_qwen25_coder_writes_it():
    text = '```json\n"name": "bash",\n"arguments": {\n  "command": "pwd"\n}\n```'
    assert calls(text) == [("bash", {"command": "pwd"}, "unbraced")]


def test_bare_calls_and_lists_of_calls_and_parameters_for_arguments():
    text = (
        'Run {"name": "python", "arguments": {"code": "1+1"}} then [{"name": "bash", "parameters": {"command": "ls"}}]'
    )
    assert calls(text) == [("python", {"code": "1+1"}, "bare"), ("bash", {"command": "ls"}, "bare")]


def test_arguments_given_as_a_string_are_passed_on_as_written():
    assert calls('{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}') == [("bash", {"command": "ls"}, "bare")]


def test_a_call_begun_but_not_json_is_a_malformed_call_not_an_answer():
    # seen: the arguments as a string that is not closed, a stray brace
    text = '{"name": "python", "arguments": "{\\"code\\": 58*m**2 - 39}\\n\\"}}'
    ((name, arguments, form),) = calls(text)
    assert (name, form) == ("python", "malformed")
    assert arguments == '"{\\"code\\": 58*m**2 - 39}\\n\\"}}'  # as written: never repaired into a call it was not
    with pytest.raises(ValueError):
        json.loads(arguments)


def test_answers_and_code_are_not_calls():
    for text in (
        "The answer is \\boxed{3}.",
        "```python\ndef f(x):\n    return {'a': x}\n```",
        '{"answer": 3}',
        '{"name": "x", "arguments": {}, "extra": 1}',
        "[1, 2, 3]",
        "",
    ):
        assert read_untagged(text) == (text, []), text
