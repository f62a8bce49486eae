# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Tool calls between special tags: qwen3_coder (XML-like), deepseek_v3 and deepseek_v31 (as vLLM's)."""

from __future__ import annotations

import ast
import json
import re

from prorl_gym.tokens.parsers.base import Extracted, as_written, failed

CODER_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$", re.DOTALL)
CODER_FUNCTION = re.compile(r"<function=(.*?)</function>|<function=(.*)$", re.DOTALL)
# A parameter ends at its closing tag, or where the next parameter or the function's end begins.
CODER_PARAMETER = re.compile(r"<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$)", re.DOTALL)
CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
# No DOTALL, as vLLM's: a call whose arguments span lines is not matched (and silently not a call).
V3_CALL = re.compile(
    r"<｜tool▁call▁begin｜>(?P<type>.*)<｜tool▁sep｜>(?P<name>.*)\n```json\n(?P<arguments>.*)\n```<｜tool▁call▁end｜>"
)
V31_CALL = re.compile(r"<｜tool▁call▁begin｜>(?P<name>.*?)<｜tool▁sep｜>(?P<arguments>.*?)<｜tool▁call▁end｜>")
STRING_TYPES = ("string", "str", "text", "varchar", "char", "enum")
INT_PREFIXES = ("int", "uint", "long", "short", "unsigned")


def qwen3_coder(text: str, schemas: dict) -> Extracted:
    """`<tool_call><function=NAME><parameter=P>\\nVALUE\\n</parameter></function></tool_call>`; a bare
    `<function=...>` without `<tool_call>` too. Values typed by the tool's JSON schema; content is the text
    before the first `<tool_call>` (or `<function=`)."""
    if "<function=" not in text:
        return Extracted(text)
    blocks = [closed or unclosed for closed, unclosed in CODER_BLOCK.findall(text)] or [text]
    functions = [closed or unclosed for block in blocks for closed, unclosed in CODER_FUNCTION.findall(block)]
    if not functions:
        return Extracted(text)
    calls = []
    for function in functions:
        if ">" not in function:  # vLLM's index(">") raises: all is content
            return failed(text, [*calls, as_written(function, function.split("\n", 1)[0])], _coder_start(text))
        name, _, body = function.partition(">")
        properties = _properties(schemas.get(name))
        arguments = {}
        for match in CODER_PARAMETER.findall(body):
            if ">" not in match:
                return failed(text, [*calls, as_written(function, name)], _coder_start(text))
            key, _, value = match.partition(">")
            value = value.removeprefix("\n").removesuffix("\n")
            arguments[key] = _typed(value, key, properties)
        calls.append({"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)})
    return Extracted(text[: text.find(_coder_start(text))], calls)


def _coder_start(text: str) -> str:
    return "<tool_call>" if "<tool_call>" in text else "<function="


def _properties(parameters) -> dict:
    if not isinstance(parameters, dict):
        return {}
    return parameters.get("properties", parameters)


def _typed(value: str, key: str, properties: dict):
    """A parameter's text as the type its schema gives (vLLM's _convert_param_value)."""
    if value.lower() == "null":
        return None
    if key not in properties:
        return value
    spec = properties[key]
    kind = str(spec["type"]).strip().lower() if isinstance(spec, dict) and "type" in spec else "string"
    if kind in STRING_TYPES:
        return value
    if kind.startswith(INT_PREFIXES):
        try:
            return int(value)
        except ValueError:
            return value
    if kind.startswith(("num", "float")):
        try:
            number = float(value)
        except ValueError:
            return value
        return number if number - int(number) != 0 else int(number)
    if kind in ("boolean", "bool", "binary"):
        return value.lower() == "true"
    if kind in ("object", "array", "arr") or kind.startswith(("dict", "list")):
        try:
            return json.loads(value)
        except ValueError:
            pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def deepseek_v3(text: str, schemas: dict) -> Extracted:
    """`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>...`;
    arguments as written; content the text before the calls."""
    return _deepseek(text, V3_CALL, v3=True)


def deepseek_v31(text: str, schemas: dict) -> Extracted:
    """`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...`."""
    return _deepseek(text, V31_CALL, v3=False)


def _deepseek(text: str, pattern: re.Pattern, v3: bool) -> Extracted:
    if CALLS_BEGIN not in text:
        return Extracted(text)
    calls = []
    for match in pattern.finditer(text):
        if v3 and match.group("type") != "function":  # vLLM: not a valid ToolCall type, all is content
            return failed(text, [*calls, as_written(match.group("arguments"), match.group("name"))], CALLS_BEGIN)
        calls.append({"name": match.group("name"), "arguments": match.group("arguments")})
    content = text[: text.find(CALLS_BEGIN)]
    if not calls:  # vLLM says tools_called with no call; the turn then reads as its content
        rest = text[len(content) :]
        return Extracted(content, written=[_unmatched(rest, v3)], before=content)
    return Extracted(content, calls)


def _unmatched(rest: str, v3: bool) -> dict:
    """A call the pattern does not match (cut, or arguments over several lines), as written."""
    call = rest.split("<｜tool▁call▁begin｜>", 1)[-1].split("<｜tool▁call▁end｜>", 1)[0]
    head, _, tail = call.partition("<｜tool▁sep｜>")
    if v3:  # function<｜tool▁sep｜>NAME\n```json\nARGS
        head, _, tail = tail.partition("\n")
        tail = tail.removeprefix("```json\n").removesuffix("\n```")
    return {"name": head.strip(), "arguments": tail}
