# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A lenient reading of tool calls a model wrote without their tags.

Small models asked for hermes calls (`<tool_call>{"name": ..., "arguments": ...}</tool_call>`) often
write the call's JSON without the tags: in a ```json fence, bare in the text, or even without the
object's braces (Qwen2.5-Coder-0.5B, seen here: "```json\\n"name": "bash",\\n"arguments": {...}\\n```").
vLLM's hermes parser leaves all of these as content; this reads them as calls, and says which form
each came in, so a record can tell a tagged call from one read leniently. It runs only where the
model server is configured for it (`lenient_tool_calls`) and only on a generation with no tagged call.

A JSON object counts as a call when its keys are `name` (a string) and `arguments` (or `parameters`)
and nothing else; its arguments are passed on as written (an object re-serialised, a string as is),
so a wrong call still reaches the agent and goes back to the policy as a malformed call. Text that
starts a call (`{"name": "...", "arguments":`) but is not JSON is a call too (form `malformed`: its
name, and the rest as its arguments), as a tagged block that does not parse is: the policy is told its
call did not parse instead of the turn passing for an answer. The text before the first call is the
turn's content, as for a tagged call. The token ids are never touched.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

LenientForm = Literal["fenced", "unbraced", "bare", "malformed"]
FENCE = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n?(.*?)```", re.DOTALL)
ATTEMPT = re.compile(r'\{\s*"name"\s*:\s*"([^"\n]*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*(.*)', re.DOTALL)
CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"})
_decoder = json.JSONDecoder()


@dataclass
class LenientCall:
    name: str
    arguments: str  # JSON text
    form: LenientForm
    start: int  # where it begins in the text

    def function(self) -> dict:
        return {"name": self.name, "arguments": self.arguments}


def read_untagged(text: str) -> tuple[str, list[LenientCall]]:
    """(content, calls) of a generation whose calls were written without tags; no calls: (text, [])."""
    calls = _fenced(text) or _bare(text, 0, len(text), "bare") or _attempt(text)
    if not calls:
        return text, []
    return text[: calls[0].start].rstrip(" \t"), calls


def _fenced(text: str) -> list[LenientCall]:
    calls = []
    for fence in FENCE.finditer(text):
        body, start = fence.group(2), fence.start()
        found = _bare(body, 0, len(body), "fenced")
        if not found:
            unbraced = _as_call(_loads("{" + body.strip().rstrip(",") + "}"))
            found = [LenientCall(*unbraced, "unbraced", 0)] if unbraced else []
        calls += [LenientCall(c.name, c.arguments, c.form, start) for c in found]
    return calls


def _bare(text: str, begin: int, end: int, form: LenientForm) -> list[LenientCall]:
    """Every JSON value in text[begin:end] that is a call (an object, or a list of objects)."""
    calls, at = [], begin
    while (at := _next_open(text, at, end)) >= 0:
        try:
            value, stop = _decoder.raw_decode(text, at)
        except ValueError:
            at += 1
            continue
        found = [_as_call(v) for v in (value if isinstance(value, list) else [value])]
        if found and all(found):
            calls += [LenientCall(name, arguments, form, at) for name, arguments in found]
            at = stop
        else:
            at += 1
    return calls


def _attempt(text: str) -> list[LenientCall]:
    """A call begun but not written as JSON: its name, and everything after `"arguments":` as written."""
    found = ATTEMPT.search(text)
    if found is None:
        return []
    try:  # JSON after all (a call with other keys too): not a call
        _decoder.raw_decode(text, found.start())
        return []
    except ValueError:
        pass
    arguments = found.group(2).strip().removesuffix("```").strip()
    return [LenientCall(found.group(1), arguments, "malformed", found.start())]


def _next_open(text: str, at: int, end: int) -> int:
    positions = [p for p in (text.find("{", at, end), text.find("[", at, end)) if p >= 0]
    return min(positions) if positions else -1


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _as_call(value) -> tuple[str, str] | None:
    if not isinstance(value, dict) or set(value) not in CALL_KEYS or not isinstance(value["name"], str):
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return value["name"], arguments
