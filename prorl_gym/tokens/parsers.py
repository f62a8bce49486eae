# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A raw generation read back into reasoning, content and tool calls, per model family.

A completion route (token ids in, token ids out) runs no tool-call or reasoning parser: this does what
vLLM's would on its chat route, so the agent sees the same messages either way. The ids are never
derived from what is parsed here.

- reasoning "think" (Qwen3, DeepSeek-R1 style): what precedes `</think>` (an opening `<think>`
  dropped) is reasoning, what follows it (leading newlines dropped) the answer;
- tools "hermes" (Qwen2.5, Qwen3, Hermes): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
  blocks, content the text before the first one (whitespace kept, as vLLM's hermes parser does). A
  block that is not JSON: with malformed="call" (token-in/token-out), a call with the name it gives
  (if any) and its arguments as written, so the policy is told its call did not parse, as for any
  malformed call; with malformed="content" (what vLLM's chat route does), the whole text is content;
- tools "qwen3_coder" (Qwen3-Coder): `<tool_call><function=NAME><parameter=P>VALUE</parameter>...
  </function></tool_call>`, values read as JSON where they are JSON, else kept as text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

ToolParser = Literal["hermes", "qwen3_coder", "none"]
ReasoningParser = Literal["think", "none"]
TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|$)", re.DOTALL)
PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)(?:</parameter>|$)", re.DOTALL)


@dataclass
class ParsedTurn:
    content: str
    reasoning: str | None = None
    tool_calls: list[dict] = field(default_factory=list)  # {"name", "arguments": JSON string}


def parse(
    text: str,
    tools: ToolParser = "hermes",
    reasoning: ReasoningParser = "think",
    malformed: Literal["call", "content"] = "call",
) -> ParsedTurn:
    thought = None
    if reasoning == "think" and "</think>" in text:
        before, _, text = text.partition("</think>")
        thought = before.split("<think>", 1)[-1].strip("\n")
        text = text.lstrip("\n")
    content, calls = _tool_calls(text, tools, malformed)
    return ParsedTurn(content=content, reasoning=thought, tool_calls=calls)


def _tool_calls(text: str, tools: ToolParser, malformed: str) -> tuple[str, list[dict]]:
    if tools == "none" or "<tool_call>" not in text:
        return text, []
    content = text[: text.index("<tool_call>")]
    calls = []
    for block in TOOL_CALL.findall(text):
        call = _hermes(block) if tools == "hermes" else _qwen3_coder(block)
        if call is None and malformed == "content":
            return text, []
        calls.append(call or _as_written(block))
    return content, calls


def _as_written(block: str) -> dict:
    """A call that did not parse: the name it gives, if any, and its arguments as written."""
    name = re.search(r'"name"\s*:\s*"([^"]*)"', block) or re.search(r"<function=([^>\n]+)>", block)
    arguments = re.search(r'"arguments"\s*:\s*(.*?)\}?\s*$', block, re.DOTALL)
    return {"name": name.group(1) if name else "", "arguments": arguments.group(1) if arguments else block.strip()}


def _hermes(block: str) -> dict | None:
    try:
        call = json.loads(block.strip())
        name, arguments = call["name"], call.get("arguments", call.get("parameters", {}))
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(name, str):
        return None
    return {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}


def _qwen3_coder(block: str) -> dict | None:
    function = FUNCTION.search(block)
    if function is None:
        return None
    arguments = {}
    for name, value in PARAMETER.findall(function.group(2)):
        value = value.strip("\n")
        try:
            arguments[name.strip()] = json.loads(value)
        except ValueError:
            arguments[name.strip()] = value
    return {"name": function.group(1).strip(), "arguments": json.dumps(arguments, ensure_ascii=False)}
