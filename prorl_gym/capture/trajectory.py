# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The policy calls of one rollout driven by a harness, as captured: what a trainer needs of them.

A harness sends its whole history every call and never the token ids (it does not know them). A
call whose messages are an earlier call's messages, then that call's reply as the harness got it,
then new messages (tool results, a user turn) *extends* that call: the reply's ids are put back on
its assistant message before the call is forwarded, so the model server's token-in/token-out mode
builds the prompt from those exact ids (prorl_gym/tokens/prompt.py) instead of re-rendering text. A
call that extends nothing (the first, or a harness that summarised or truncated its history) is
rendered whole and starts a new segment; so does one that extends a call another call already
extended (a retry, a branch). The record keeps every call as sent, and each segment as NeMo RL
output items (every generation with prompt_token_ids, generation_token_ids, generation_log_probs).

Pure bookkeeping: no I/O. gateway.py serves it over HTTP.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.responses_converter import ResponsesConverter
from pydantic import BaseModel, ConfigDict, Field

from prorl_gym.errors import ProrlError
from prorl_gym.pipeline.tokens import token_ids_contiguous
from prorl_gym.tokens.template import text_of

ID_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)  # a reasoning model's thinking, leading its text


class CaptureLimits(BaseModel):
    """Enforced whatever the harness does; a call past one is refused and ends the capture."""

    model_config = ConfigDict(extra="forbid")

    max_calls: int = Field(100, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)  # summed over calls
    max_wall_s: float | None = Field(None, gt=0)  # from the capture's start


class CaptureRefused(ProrlError):
    """A call the capture does not forward: it ended, or a limit is reached. `status` to answer."""

    def __init__(self, reason: str, status: int):
        super().__init__(reason)
        self.reason, self.status = reason, status


class CapturedCall(BaseModel):
    index: int
    segment: int
    extends: int | None  # the call whose reply this call's history continues, ids re-attached
    protocol: str = "chat_completions"  # what the harness spoke (capture/protocols.py)
    messages: list[dict[str, Any]]  # as the harness sent them (as chat messages, whatever it spoke)
    params: dict[str, Any]  # the rest of its request: sampling parameters, tools, ...
    reply: dict[str, Any]  # the assistant message the model server answered, ids included
    finish_reason: str | None = None
    latency_s: float
    policy_version: int | None = None  # the weights that answered it (pipeline/policy.py), if the agent knows


class Segment(BaseModel):
    calls: list[int]  # indices into the capture's calls, each extending the one before
    input: list[dict[str, Any]]  # the messages of its first call: the harness's prompt, as sent
    # NeMo RL output items of everything after them, up to the last call's reply: each generation
    # (with its ids), tool results, later user turns
    output: list[dict[str, Any]]
    token_ids_contiguous: bool | None


class CaptureRecord(BaseModel):
    calls: list[CapturedCall]
    segments: list[Segment]
    stopped: str | None = None  # why the capture refused a call (a limit), if it did
    policy_errors: list[str] = Field(default_factory=list)  # calls the model server failed (not recorded above)
    output_tokens: int = 0
    wall_s: float = 0.0
    harness_output: str = ""  # what a harness run inside the sandbox printed (the tail), set by the RUN stage


def _tool_call_key(call: dict) -> tuple:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    try:  # as a value: a protocol that carries them as an object (Anthropic's tool_use input) re-serialises them
        arguments = json.dumps(json.loads(arguments), sort_keys=True)
    except (TypeError, ValueError):
        pass
    return (call.get("id"), function.get("name"), arguments)


def message_key(message: dict) -> str:
    """A message as far as the conversation goes: role, text, tool calls, the call it answers. Not its
    reasoning: clients move it out of the text (litellm: `reasoning_content`) or drop it when they send
    a reply back, and a reply's ids hold it whatever the harness did with it; nor the text's outer
    whitespace, which some strip."""
    key = {
        "role": message.get("role"),
        "content": THINK.sub("", text_of(message.get("content"))).strip(),
        "tool_calls": [_tool_call_key(c) for c in message.get("tool_calls") or []],
        "tool_call_id": message.get("tool_call_id"),
    }
    return json.dumps(key, sort_keys=True)


@dataclass
class _Call:
    record: CapturedCall
    keys: list[str]  # message_key of each message it sent
    reply_key: str
    extended_by: int | None = None


@dataclass
class Trajectory:
    """The calls of one capture (one rollout), in order, and the limits it enforces."""

    limits: CaptureLimits = field(default_factory=CaptureLimits)
    metadata: dict[str, str] | None = None  # the rollout's request metadata: sent with every call that has none
    started: float = field(default_factory=time.monotonic)
    output_tokens: int = 0
    stopped: str | None = None  # a limit was reached (the reason)
    ended: bool = False  # the rollout ended: no more calls
    policy_errors: list[str] = field(default_factory=list)
    _calls: list[_Call] = field(default_factory=list)
    _segments: list[list[int]] = field(default_factory=list)

    def admit(self) -> None:
        """Raise CaptureRefused if no further call may be forwarded (and say why from now on)."""
        if self.ended:
            raise CaptureRefused("this rollout has ended: its capture takes no more calls", 410)
        if self.stopped is None:
            if len(self._calls) >= self.limits.max_calls:
                self.stopped = f"the rollout made {len(self._calls)} policy calls, its limit"
            elif self.limits.max_output_tokens and self.output_tokens >= self.limits.max_output_tokens:
                self.stopped = f"the rollout generated {self.output_tokens} tokens, its limit"
            elif self.limits.max_wall_s and time.monotonic() - self.started >= self.limits.max_wall_s:
                self.stopped = f"the rollout ran past its {self.limits.max_wall_s:g}s wall-time limit"
        if self.stopped is not None:
            raise CaptureRefused(self.stopped, 403)  # 403, not 429: a harness must not retry it

    def prepare(self, body: dict) -> tuple[dict, int | None]:
        """The request to forward (the extended call's reply carrying its ids again) and which call
        it extends (None: rendered whole)."""
        messages = list(body.get("messages") or [])
        keys = [message_key(m) for m in messages]
        for call in reversed(self._calls):
            n = len(call.keys)
            if len(keys) > n and keys[:n] == call.keys and keys[n] == call.reply_key:
                messages = [_without_ids(m) for m in messages]  # only ids the model produced, and only here
                messages[n] |= _ids(call.record.reply)
                return self._forwarded({**body, "messages": messages}), call.record.index
        return self._forwarded({**body, "messages": [_without_ids(m) for m in messages]}), None

    def _forwarded(self, body: dict) -> dict:
        """The rollout's metadata on a call that has none; a call's output capped at what is left of
        max_output_tokens (a harness asking for more than that, or for its model's whole context, is
        cut there rather than refused after)."""
        if self.metadata and not body.get("metadata"):
            body = {**body, "metadata": self.metadata}
        if self.limits.max_output_tokens:
            left = self.limits.max_output_tokens - self.output_tokens
            asked = body.pop("max_completion_tokens", None) or body.get("max_tokens") or left
            body["max_tokens"] = min(left, asked)
        return body

    def add(
        self,
        body: dict,
        extends: int | None,
        completion: dict,
        latency_s: float,
        protocol: str = "chat_completions",
        policy_version: int | None = None,
    ) -> dict:
        """Record a forwarded call and its completion; the completion as the harness gets it (no ids)."""
        choice = (completion.get("choices") or [{}])[0]
        reply = dict(choice.get("message") or {})
        index = len(self._calls)
        parent = self._calls[extends] if extends is not None else None
        if parent is not None and parent.extended_by is None:
            segment = parent.record.segment
            self._segments[segment].append(index)
        else:  # first of a segment: nothing to extend, or its call was extended already (a retry, a branch)
            segment = len(self._segments)
            self._segments.append([index])
        if parent is not None:
            parent.extended_by = index
        messages = [_without_ids(m) for m in body.get("messages") or []]
        params = {k: v for k, v in body.items() if k != "messages"}
        record = CapturedCall(
            index=index,
            segment=segment,
            extends=extends,
            protocol=protocol,
            messages=messages,
            params=params,
            reply=reply,
            finish_reason=choice.get("finish_reason"),
            latency_s=latency_s,
            policy_version=policy_version,
        )
        self._calls.append(_Call(record, [message_key(m) for m in messages], message_key(reply)))
        self.output_tokens += len(reply.get("generation_token_ids") or [])
        harness_choice = {**choice, "message": _without_ids(reply)}
        return {**completion, "choices": [harness_choice, *(completion.get("choices") or [])[1:]]}

    def record(self) -> CaptureRecord:
        converter = ResponsesConverter(return_token_id_information=True)
        segments = []
        for indices in self._segments:
            last = self._calls[indices[-1]].record
            messages = [dict(m) for m in last.messages]
            for i in indices[:-1]:  # each earlier call's reply sits where the next call's history extends it
                call = self._calls[i]
                messages[len(call.keys)] |= _ids(call.record.reply)
            messages.append(last.reply)
            first = len(self._calls[indices[0]].keys)
            items = [i.model_dump() for i in converter.chat_completions_messages_to_responses_items(messages[first:])]
            segments.append(
                Segment(
                    calls=indices,
                    input=[dict(m) for m in messages[:first]],
                    output=items,
                    token_ids_contiguous=token_ids_contiguous(items),
                )
            )
        return CaptureRecord(
            calls=[c.record for c in self._calls],
            segments=segments,
            stopped=self.stopped,
            policy_errors=list(self.policy_errors),
            output_tokens=self.output_tokens,
            wall_s=time.monotonic() - self.started,
        )


def _ids(reply: dict) -> dict:
    """The reply's token ids (none from a model server not in token-in/token-out mode)."""
    return {k: reply[k] for k in ID_FIELDS if reply.get(k) is not None}


def _without_ids(message: dict) -> dict:
    return {k: v for k, v in message.items() if k not in ID_FIELDS}
