# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What a tool parser gives: vLLM's answer, and the calls as written where vLLM's falls back to text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')
ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*?)\}?\s*$', re.DOTALL)


@dataclass
class ParsedTurn:
    content: str
    reasoning: str | None = None
    tool_calls: list[dict] = field(default_factory=list)  # {"name", "arguments": JSON string}


@dataclass
class Extracted:
    content: str  # vLLM's content ("" for its None)
    calls: list[dict] = field(default_factory=list)  # {"name", "arguments": str}
    # vLLM fell back to the whole text as content because a call did not parse: the calls as the policy
    # wrote them (those that parse, and the others with the name they give and their arguments as written)
    written: list[dict] | None = None
    before: str = ""  # with `written`: the text before the calls (the content in that case)


def as_written(block: str, name: str | None = None) -> dict:
    if name is None:
        found = NAME.search(block)
        name = found.group(1) if found else ""
    arguments = ARGUMENTS.search(block)
    return {"name": name.strip(), "arguments": arguments.group(1) if arguments else block.strip()}


def failed(text: str, written: list[dict], marker: str) -> Extracted:
    """vLLM's answer to a call that did not parse (the whole text as content), with the calls as written
    and the text before the first `marker`."""
    at = text.find(marker)
    return Extracted(text, written=written, before=text[:at] if at >= 0 else "")
