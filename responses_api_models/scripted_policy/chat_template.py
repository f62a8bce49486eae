# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A deterministic chat template and byte-level tokenizer.

Token ids are the UTF-8 bytes of the rendered conversation. An assistant turn renders
exactly as it was generated, so every turn's prompt extends the tokens seen before
(NeMo RL's contiguity rule) without any prefix-replacement tricks.
"""

from __future__ import annotations

import json
from typing import Any

END = "<|end|>\n"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def render_assistant(content: str | None, tool_calls: list[dict] | None) -> str:
    """The generated part of an assistant turn (what follows the generation prompt)."""
    body = _text(content)
    for call in tool_calls or []:
        function = call.get("function", call)
        body += f"<tool_call>{json.dumps({'name': function['name'], 'arguments': function['arguments']})}</tool_call>"
    return body + END


def render(messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True) -> str:
    parts = []
    if tools:
        parts.append(f"<|tools|>\n{json.dumps(tools, sort_keys=True)}{END}")
    for message in messages:
        role = message["role"]
        parts.append(f"<|{role}|>\n")
        if role == "assistant":
            parts.append(render_assistant(message.get("content"), message.get("tool_calls")))
        else:
            parts.append(_text(message.get("content")) + END)
    if add_generation_prompt:
        parts.append("<|assistant|>\n")
    return "".join(parts)


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")
