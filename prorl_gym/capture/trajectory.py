# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The policy calls of one rollout driven by a harness, as captured: what a trainer needs of them.

A harness sends its whole history every call and never the token ids (it does not know them). A
call whose messages are an earlier call's messages, then that call's reply as the harness got it,
then new messages (tool results, a user turn), made under the same context (lineage.py: the same
tools, template options, model), *extends* that call: the reply's ids are put back on its assistant
message before the call is forwarded, so the model server's token-in/token-out mode builds the
prompt from those exact ids (prorl_gym/tokens/prompt.py) instead of re-rendering text. Any other call
(the first, a retry, a harness that summarised, truncated or edited its history, a subagent) is
rendered whole.

Whatever a call extends, its prompt ids, then its generated ids, go into the capture's token tree
(tree.py): matched by ids to the longest prefix captured before, so a history edit or a retry is a
branch sharing what it shares, a compaction or a subagent a root of its own (linked to the call that
spawned it or wrote its summary, lineage.py), and every generated token is in the tree once, with
its log-prob. The record keeps every call as sent (ids only in the tree) and the tree; export.py
makes a trainer's branches of it, and `transcript` the rollout's response: the branch of the last
call, as NeMo RL output items.

Pure bookkeeping: no I/O. gateway.py serves it over HTTP.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.responses_converter import ResponsesConverter
from pydantic import BaseModel, Field

from prorl_gym.capture.lineage import RootLink, context_key, root_link
from prorl_gym.capture.tree import TokenTree, TreeNode
from prorl_gym.config import StrictConfig
from prorl_gym.errors import ProrlError
from prorl_gym.tokens.template import text_of
from prorl_gym.wire.items import TRAINING_FIELDS, chat_message_fields

THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)  # a reasoning model's thinking, leading its text


class CaptureLimits(StrictConfig):
    """Enforced whatever the harness does; a call past one is refused and ends the capture."""

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
    extends: int | None  # the call whose reply this call's history continues, ids re-attached
    protocol: str = "chat_completions"  # what the harness spoke (capture/protocols.py)
    messages: list[dict[str, Any]]  # as the harness sent them (as chat messages, whatever it spoke)
    params: dict[str, Any]  # the rest of its request: sampling parameters, tools, ...
    context: str = ""  # lineage.context_key of params: what rendered its prompt besides the messages
    reply: dict[str, Any]  # the assistant message the model server answered (its ids are in the tree)
    finish_reason: str | None = None
    latency_s: float
    policy_version: int | None = None  # the weights that answered it (pipeline/policy.py), if the agent knows
    # In the token tree (none of these without ids: a model server not in token-in/token-out mode):
    node: int | None = None  # the tree node its generation ends at
    prompt_tokens: int = 0
    generated_tokens: int = 0
    shared_tokens: int = 0  # leading prompt tokens captured before it (by an earlier call's prompt or generation)
    parent: int | None = None  # the call that sampled the last generated token it shares (None: a root)
    link: RootLink | None = None  # a root's origin: the call that spawned it (subagent) or summarised for it


class CaptureRecord(BaseModel):
    calls: list[CapturedCall]
    tree: list[TreeNode] = Field(default_factory=list)  # every call's tokens, each generated one once
    stopped: str | None = None  # why the capture refused a call (a limit), if it did
    policy_errors: list[str] = Field(default_factory=list)  # calls the model server failed (not recorded above)
    output_tokens: int = 0
    wall_s: float = 0.0
    harness_output: str = ""  # what a harness run inside the sandbox printed (the tail), set by the RUN stage

    def generation(self, call: int) -> tuple[list[int], list[float]]:
        """What a call sampled: its generated ids and their log-probs, from the tree."""
        node, ids, log_probs = self.calls[call].node, [], []
        while node is not None and self.tree[node].call == call:  # its nodes: the last ones on its path
            ids[:0], log_probs[:0] = self.tree[node].tokens, self.tree[node].log_probs or []
            node = self.tree[node].parent
        return ids, log_probs

    def transcript(self) -> tuple[list[dict], list[dict]]:
        """The branch of the last call as its conversation: (its prompt messages, NeMo RL output items of
        the rest). Each earlier reply whose whole generation lies on the branch carries its ids, its
        prompt ids read from the tree, so the items are contiguous whatever the harness rewrote; a reply
        the branch holds only in part (edited later) or not at all is text, its tokens in the next prompt."""
        if not self.calls:
            return [], []
        last = self.calls[-1]
        messages = [dict(m) for m in last.messages] + [dict(last.reply)]
        if last.node is not None:
            spans = _generated_spans(self.tree, last.node)
            *earlier, (_, start, end, sequence, log_probs) = spans
            at = 0
            for call, s, e, _, _ in earlier:
                if e - s != self.calls[call].generated_tokens:
                    continue
                key = message_key(self.calls[call].reply)
                found = next((i for i in range(at, len(messages) - 1) if message_key(messages[i]) == key), None)
                if found is not None:
                    messages[found] |= _span_ids(sequence, log_probs, s, e)
                    at = found + 1
            messages[-1] |= _span_ids(sequence, log_probs, start, end)
        first = next(i for i, m in enumerate(messages) if m.get("role") == "assistant")
        converter = ResponsesConverter(return_token_id_information=True)
        items = [i.model_dump() for i in converter.chat_completions_messages_to_responses_items(messages[first:])]
        return messages[:first], items


def _generated_spans(tree: list[TreeNode], end: int) -> list[tuple[int, int, int, list[int], list[float]]]:
    """The generated runs on the path to `end`, one per call: (call, start, end, the path's tokens, its
    log-probs by position) - the last two shared by every run."""
    path = []
    at: int | None = end
    while at is not None:
        path.append(at)
        at = tree[at].parent
    sequence: list[int] = []
    log_probs: list[float] = []
    spans: list = []
    for index in reversed(path):
        node = tree[index]
        if node.call is not None:
            if spans and spans[-1][0] == node.call and spans[-1][2] == len(sequence):
                spans[-1][2] += len(node.tokens)
            else:
                spans.append([node.call, len(sequence), len(sequence) + len(node.tokens)])
        sequence += node.tokens
        log_probs += node.log_probs or [0.0] * len(node.tokens)
    return [(c, s, e, sequence, log_probs) for c, s, e in spans]


def _span_ids(sequence: list[int], log_probs: list[float], start: int, end: int) -> dict:
    return {
        "prompt_token_ids": sequence[:start],
        "generation_token_ids": sequence[start:end],
        "generation_log_probs": log_probs[start:end],
    }


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
    ids: dict  # the reply's ids as the model server gave them (put back on it when a call extends it)


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
    _tree: TokenTree = field(default_factory=TokenTree)

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
        context = context_key(body)
        for call in reversed(self._calls):
            n = len(call.keys)
            if len(keys) > n and keys[n] == call.reply_key and keys[:n] == call.keys:
                if call.record.context != context:  # other tools or template options: the old ids are not this prompt
                    break
                messages = [chat_message_fields(m) for m in messages]  # only ids the model produced, only here
                messages[n] |= call.ids
                return self._forwarded({**body, "messages": messages}), call.record.index
        return self._forwarded({**body, "messages": [chat_message_fields(m) for m in messages]}), None

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
        ids = _ids(reply)
        index = len(self._calls)
        messages = [_without_ids(m) for m in body.get("messages") or []]
        params = {k: v for k, v in body.items() if k != "messages"}
        record = CapturedCall(
            index=index,
            extends=extends,
            protocol=protocol,
            messages=messages,
            params=params,
            context=context_key(params),
            reply=_without_ids(reply),
            finish_reason=choice.get("finish_reason"),
            latency_s=latency_s,
            policy_version=policy_version,
        )
        prompt, generated = ids.get("prompt_token_ids"), ids.get("generation_token_ids")
        log_probs = ids.get("generation_log_probs") or []
        if prompt and generated and len(log_probs) == len(generated):  # else not trainable: not in the tree
            placed = self._tree.insert(index, prompt, generated, log_probs, extends)
            record.node, record.shared_tokens, record.parent = placed.node, placed.shared, placed.parent
            record.prompt_tokens, record.generated_tokens = len(prompt), len(generated)
            if placed.parent is None and index:
                record.link = root_link(messages, [(c.record.index, c.record.reply) for c in self._calls])
        self._calls.append(_Call(record, [message_key(m) for m in messages], message_key(reply), ids))
        self.output_tokens += len(generated or [])
        harness_choice = {**choice, "message": _without_ids(reply)}
        return {**completion, "choices": [harness_choice, *(completion.get("choices") or [])[1:]]}

    def record(self) -> CaptureRecord:
        return CaptureRecord(
            # a call's generation may end at another node now: a later call's prompt split it
            calls=[c.record.model_copy(update={"node": self._tree.end_of(c.record.index)}) for c in self._calls],
            tree=self._tree.nodes(),
            stopped=self.stopped,
            policy_errors=list(self.policy_errors),
            output_tokens=self.output_tokens,
            wall_s=time.monotonic() - self.started,
        )


def _ids(reply: dict) -> dict:
    """The reply's token ids (none from a model server not in token-in/token-out mode)."""
    return {k: reply[k] for k in TRAINING_FIELDS if reply.get(k) is not None}


def _without_ids(message: dict) -> dict:
    return {k: v for k, v in message.items() if k not in TRAINING_FIELDS}
