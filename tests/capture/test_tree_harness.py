# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A harness of our own that rewrites its history the ways real ones do, through the capture endpoint
in each protocol (the real SDKs, the model server in token-in/token-out mode with Qwen3's tokenizer,
the scripted policy): it hands its first tool call to a subagent (a conversation of its own, whose
task holds that call's arguments), takes the subagent's answer as the tool's result, then compacts
(asks for a summary, starts over from it). The record is one tree: three conversations, linked to
where they came from; every generated id in it once, as sampled; every branch contiguous; the export
rebuilds the tree."""

from __future__ import annotations

import json

import pytest
from openai import AsyncOpenAI

from prorl_gym.capture import export, tree_from_export
from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3
from tests.support.capture_servers import TOOLS, open_capture, row_for, sampled

try:
    qwen3()
except TokenizerNotFound as exc:  # make setup installs it; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)

pytestmark = pytest.mark.asyncio(loop_scope="package")


class Chat:
    """One conversation in OpenAI chat completions: its history as the SDK hands replies back."""

    def __init__(self, client: AsyncOpenAI, system: str, user: str):
        self.client, self.messages = client, [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def ask(self) -> tuple[str, list[tuple[str, dict]]]:
        completion = await self.client.chat.completions.create(model="policy", messages=self.messages, tools=TOOLS)
        reply = completion.choices[0].message.model_dump(exclude_none=True)
        self.messages.append(reply)
        calls = [(c["id"], json.loads(c["function"]["arguments"])) for c in reply.get("tool_calls") or []]
        return reply.get("content") or "", calls

    def answer(self, call_id: str, text: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def say(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})


class Responses(Chat):
    """In the Responses API, stateless (its whole input every call)."""

    def __init__(self, client: AsyncOpenAI, system: str, user: str):
        self.client, self.instructions, self.items = client, system, [{"role": "user", "content": user}]

    async def ask(self) -> tuple[str, list[tuple[str, dict]]]:
        tools = [{"type": "function", **TOOLS[0]["function"]}]
        response = await self.client.responses.create(
            model="policy", instructions=self.instructions, input=self.items, tools=tools, store=False
        )
        output = [o.model_dump(exclude_none=True) for o in response.output]
        self.items += output
        calls = [(o["call_id"], json.loads(o["arguments"])) for o in output if o["type"] == "function_call"]
        return response.output_text, calls

    def answer(self, call_id: str, text: str) -> None:
        self.items.append({"type": "function_call_output", "call_id": call_id, "output": text})

    def say(self, text: str) -> None:
        self.items.append({"role": "user", "content": text})


class Messages(Chat):
    """In Anthropic Messages (as Claude Code speaks it)."""

    def __init__(self, client, system: str, user: str):
        self.client, self.system, self.messages = client, system, [{"role": "user", "content": user}]

    async def ask(self) -> tuple[str, list[tuple[str, dict]]]:
        tools = [{"name": "python", "description": "run code", "input_schema": TOOLS[0]["function"]["parameters"]}]
        message = await self.client.messages.create(
            model="policy", max_tokens=2048, system=self.system, messages=self.messages, tools=tools
        )
        content = [b.model_dump(exclude_none=True) for b in message.content]
        self.messages.append({"role": "assistant", "content": content})
        text = "".join(b["text"] for b in content if b["type"] == "text")
        return text, [(b["id"], b["input"]) for b in content if b["type"] == "tool_use"]

    def answer(self, call_id: str, text: str) -> None:
        self.messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]}
        )

    def say(self, text: str) -> None:
        if self.messages[-1]["role"] == "user":  # one user turn after a tool result: roles alternate
            self.messages[-1]["content"].append({"type": "text", "text": text})
        else:
            self.messages.append({"role": "user", "content": text})


async def run_harness(conversation) -> None:
    """The harness: main task (row 0); its first tool call goes to a subagent (row 1's task, with the
    call's code); then a summary, and a fresh conversation from it."""
    main_task, sub_task = row_for(None, 0), row_for(None, 1)
    system = main_task["responses_create_params"]["input"][0]["content"]
    task = main_task["responses_create_params"]["input"][1]["content"]
    main = conversation(system, task)
    _, ((call_id, arguments),) = await main.ask()
    sub = conversation(
        "You are a subagent.",
        f"{sub_task['responses_create_params']['input'][1]['content']}\n\nWhile at it, run this:\n{arguments['code']}",
    )
    _, ((sub_call, _),) = await sub.ask()
    sub.answer(sub_call, "0.82")
    found, _ = await sub.ask()
    main.answer(call_id, found)
    await main.ask()
    main.say("Summarise the work so far.")
    summary, _ = await main.ask()
    fresh = conversation(system, f"{task}\n\nSummary of the work so far:\n{summary}")
    _, ((fresh_call, _),) = await fresh.ask()
    fresh.answer(fresh_call, "-553883")
    await fresh.ask()


@pytest.mark.parametrize("protocol", ["chat_completions", "responses", "anthropic_messages"])
async def test_subagents_and_compaction_are_linked_roots_of_one_tree_with_every_generated_id_once(stack, protocol):
    from anthropic import AsyncAnthropic

    gateway, url, policy = stack
    key, client = await open_capture(url)
    if protocol == "chat_completions":
        await run_harness(lambda system, user: Chat(client, system, user))
    elif protocol == "responses":
        await run_harness(lambda system, user: Responses(client, system, user))
    else:
        anthropic = AsyncAnthropic(base_url=f"{url}/capture/{key}", api_key="unused", max_retries=0)
        await run_harness(lambda system, user: Messages(anthropic, system, user))
    record = gateway.end(key)
    calls = record.calls
    assert {c.protocol for c in calls} == {protocol} and len(calls) == 7
    # main 0, subagent 1-2, main 3-4 (4 writes the summary), after the compaction 5-6
    assert [c.extends for c in calls] == [None, None, 1, 0, 3, None, 5]  # ids re-attached where it sent a reply back
    assert [c.parent for c in calls] == [None, None, 1, 0, 3, None, 5]  # and the tree agrees, by ids
    links = [c.link and (c.link.kind, c.link.call, c.link.tool_call_id) for c in calls]
    assert links == [
        None,
        ("subagent", 0, calls[0].reply["tool_calls"][0]["id"]),
        None,
        None,
        None,
        ("compaction", 4, None),
        None,
    ]

    # every generated id once, exactly as the policy sampled it, with its log-prob
    generated = [record.generation(c.index) for c in calls]
    assert [ids for ids, _ in generated] == (await sampled(policy))[-7:]
    assert all(len(ids) == len(lps) == c.generated_tokens > 0 for (ids, lps), c in zip(generated, calls))
    assert sum(len(n.tokens) for n in record.tree if n.call is not None) == record.output_tokens

    exported = export(record.tree, "tree")
    assert len(exported.branches) == 3  # the three conversations, none rewritten
    trained = [o["generation_token_ids"] for b in exported.branches for o in b.output]
    assert sorted(map(tuple, trained)) == sorted(tuple(ids) for ids, _ in generated)  # each trained once
    assert all(token_ids_contiguous(b.output) is True for b in exported.branches)
    assert tree_from_export(exported) == record.tree
    # the record's transcript: the last conversation, the one the harness ended in
    given, output = record.transcript()
    assert "Summary of the work so far" in json.dumps(given)
    assert [o["generation_token_ids"] for o in output if "generation_token_ids" in o] == [
        ids for ids, _ in generated[5:]
    ]
