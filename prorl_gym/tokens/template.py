# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A model's chat template (Jinja), rendered as transformers' apply_chat_template and vLLM's chat route do.

A sandboxed Jinja environment with trim_blocks and lstrip_blocks, loop controls, a `tojson` that keeps
non-ASCII text as it is, `raise_exception` and `strftime_now`. Messages are normalised as vLLM does
before rendering: content parts joined into text, tool-call arguments given as JSON objects (vLLM
parses the arguments string; templates then print them with `tojson`).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cached_property
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message: str):
    raise TemplateError(message)


class ChatTemplate:
    def __init__(self, source: str, special_tokens: dict[str, str | None] | None = None):
        self.source = source
        self.special_tokens = {k: v for k, v in (special_tokens or {}).items() if v is not None}

    @cached_property
    def _compiled(self):
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        return env.from_string(self.source)

    def render(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        """The conversation as the model reads it; `kwargs` are the chat_template_kwargs (enable_thinking, ...)."""
        return self._compiled.render(
            messages=[normalized(m) for m in messages],
            tools=[tool_schema(t) for t in tools] if tools else None,
            add_generation_prompt=add_generation_prompt,
            **self.special_tokens,
            **kwargs,
        )


def text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def normalized(message: dict) -> dict:
    """A chat message as vLLM hands it to the template."""
    out = dict(message)
    if out.get("role") != "assistant" or out.get("content") is not None:
        out["content"] = text_of(out.get("content"))
    calls = []
    for call in out.get("tool_calls") or []:
        function = dict(call.get("function", call))
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                function["arguments"] = json.loads(arguments)
            except ValueError:
                pass  # not JSON: rendered as the string it is
        calls.append({**call, "function": function})
    if calls:
        out["tool_calls"] = calls
    if out.get("role") == "assistant" and out.get("content") is None:
        out["content"] = ""
    return out


def tool_schema(tool: dict) -> dict:
    """OpenAI chat tools ({"type": "function", "function": {...}}) as templates expect them."""
    return tool if "function" in tool else {"type": "function", "function": tool}
