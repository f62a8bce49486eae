# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Tool calls written as JSON objects: hermes, llama3_json, mistral (as vLLM's parsers of those names)."""

from __future__ import annotations

import json
import re

from prorl_gym.tokens.parsers.base import Extracted, as_written, failed

HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
PYTHON_TAG = "<|python_tag|>"
TOOL_CALLS = "[TOOL_CALLS]"
MISTRAL_LIST = re.compile(r"\[{.*}\]", re.DOTALL)


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def hermes(text: str, schemas: dict) -> Extracted:
    """Every `<tool_call>` block (the last may be unclosed) is JSON with "name" and "arguments"; content is
    the text before the first block, whitespace kept. One block that does not parse: all is content."""
    if "<tool_call>" not in text:
        return Extracted(text)
    calls, written, broken = [], [], False
    for closed, unclosed in HERMES_BLOCK.findall(text):
        block = closed or unclosed
        try:
            call = json.loads(block)
            call = {"name": call["name"], "arguments": _dumps(call["arguments"])}
            if not isinstance(call["name"], str):
                raise TypeError("name is not a string")
        except (ValueError, KeyError, TypeError):
            broken = True
            written.append(as_written(block))
            continue
        calls.append(call)
        written.append(call)
    if broken:
        return failed(text, written, "<tool_call>")
    return Extracted(text[: text.index("<tool_call>")], calls)


def llama3_json(text: str, schemas: dict) -> Extracted:
    """Each `{` outside an object already read starts a JSON object with "name" and "parameters" (or
    "arguments"); the text around them is dropped. One that does not decode or lacks a key: all is content."""
    if PYTHON_TAG not in text and "{" not in text:
        return Extracted(text)
    decoder, end, calls = json.JSONDecoder(), -1, []
    for match in re.finditer(r"\{", text):
        start = match.start()
        if start <= end:
            continue
        try:
            obj, length = decoder.raw_decode(text[start:])
            end = start + length
            arguments = obj["arguments"] if "arguments" in obj else obj["parameters"]
            if not isinstance(obj["name"], str):
                raise TypeError("name is not a string")
            calls.append({"name": obj["name"], "arguments": _dumps(arguments)})
        except (ValueError, KeyError, TypeError):
            if PYTHON_TAG not in text and not calls and not text.lstrip().startswith("{"):
                return Extracted(text)  # prose with a brace: an answer, not a call
            return failed(text, [*calls, as_written(text[start:])], PYTHON_TAG if PYTHON_TAG in text else "{")
    return Extracted("", calls) if calls else Extracted(text)


def mistral(text: str, schemas: dict) -> Extracted:
    """`content[TOOL_CALLS] [{"name", "arguments"}, ...]` (a Hugging Face tokenizer: vLLM's pre-v11 format)."""
    if TOOL_CALLS not in text:
        return Extracted(text)
    content, *raw = text.split(TOOL_CALLS)
    if len(raw) != 1:  # vLLM raises here (a 500): several [TOOL_CALLS] in one turn
        return failed(text, [as_written(r) for r in raw], TOOL_CALLS)
    listed = raw[0].strip()
    try:
        calls = json.loads(listed)
    except ValueError:
        found = MISTRAL_LIST.findall(listed)
        try:
            calls = json.loads(found[0]) if found else None
        except ValueError:
            calls = None
        if calls is None:
            return Extracted(listed, written=[as_written(listed)], before=content)  # vLLM: the calls' text as content
    try:
        calls = [{"name": c["name"], "arguments": _dumps(c["arguments"])} for c in calls]
    except (KeyError, TypeError):
        return failed(text, [as_written(listed)], TOOL_CALLS)
    return Extracted(content, calls)
