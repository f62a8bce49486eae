# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What ties one call of a harness to another beyond its messages.

- The context key: what renders a prompt besides its messages (the tools, how they may be called,
  the template's options, the model named). A call may reuse an earlier reply's ids (trajectory.py)
  only under the same key: token-in/token-out builds an extended prompt from the earlier ids and
  renders only the new messages, so offered a different set of tools the model would still see the
  old ones. The system prompt and instructions are messages already (protocols.py puts them first).
  Sampling settings are not in the key: they change what is sampled, never the prompt's ids; each
  call keeps its own (`params`), so every generated span says how it was sampled.
- Root links: a call that shares no generated token with any earlier one starts a conversation of
  its own (tree.py). Where its messages tell where it came from, it is linked: a subagent (its first
  user message holds a text argument of an earlier reply's tool call: the spawning call) or a
  compaction (its messages hold a line of an earlier reply's text: the summary that call wrote; that
  call's branch is what was summarised). The protocols carry no explicit link, so this reads content,
  and says nothing when it finds none.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel

from prorl_gym.tokens.template import text_of

CONTEXT_KEYS = ("model", "tools", "tool_choice", "chat_template_kwargs", "response_format")
MIN_TASK_CHARS = 16  # a tool-call argument shorter than this says too little to name a subagent's task
MIN_SUMMARY_LINE_CHARS = 24  # nor a line shorter than this a summary


def context_key(params: dict) -> str:
    """A digest of what renders a prompt besides its messages."""
    context = {k: params.get(k) for k in CONTEXT_KEYS if params.get(k) not in (None, [], {})}
    return hashlib.sha256(json.dumps(context, sort_keys=True, default=str).encode()).hexdigest()[:16]


class RootLink(BaseModel):
    kind: Literal["subagent", "compaction"]
    call: int  # the call that spawned it (its reply's tool call) or wrote its summary
    tool_call_id: str | None = None  # a subagent's: the tool call whose task it was given


def root_link(messages: list[dict], earlier: list[tuple[int, dict]]) -> RootLink | None:
    """How a new root came about, from its messages and the earlier calls' replies ((index, reply),
    oldest first): the newest call that explains it."""
    first_user = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    texts = "\n".join(text_of(m.get("content")) for m in messages if m.get("role") in ("system", "user", "developer"))
    for index, reply in reversed(earlier):
        for call in reply.get("tool_calls") or []:
            if any(len(s) >= MIN_TASK_CHARS and s in first_user for s in _strings(call)):
                return RootLink(kind="subagent", call=index, tool_call_id=call.get("id"))
    for index, reply in reversed(earlier):
        lines = (line.strip() for line in _visible(text_of(reply.get("content"))).splitlines())
        if any(len(line) >= MIN_SUMMARY_LINE_CHARS and line in texts for line in lines):
            return RootLink(kind="compaction", call=index)
    return None


def _strings(tool_call: dict) -> list[str]:
    """The text values of a tool call's arguments (JSON, or one raw string)."""
    raw = (tool_call.get("function") or {}).get("arguments")
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return [raw.strip()]
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item.strip())
        elif isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return found


def _visible(text: str) -> str:
    """A reply's text without its reasoning (a `<think>` block leading it)."""
    head, sep, tail = text.partition("</think>")
    return tail if sep and "<think>" in head else text
