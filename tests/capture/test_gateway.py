# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The capture endpoint with real parts: a harness speaking the OpenAI SDK to the gateway over HTTP,
the model server in token-in/token-out mode with Qwen3's real tokenizer and chat template, and the
scripted policy answering as vLLM serving Qwen3 would (the only stand-in: no GPU). The ids captured
are the ids the policy sampled, and contiguous, also in the cases where re-rendering the history as
text drifts (real_tokens.py's DRIFT_CASES)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from openai import AsyncOpenAI, PermissionDeniedError

from prorl_gym.capture import export, tree_from_export
from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3
from responses_api_models.scripted_policy.real_tokens import DRIFT_CASES
from tests.support.capture_servers import TOOLS, open_capture, row_for, sampled

try:
    qwen3()
except TokenizerNotFound as exc:  # make setup installs it; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)

pytestmark = pytest.mark.asyncio(loop_scope="package")


async def harness(client: AsyncOpenAI, row: dict, rewrite_history: bool = False, stream: bool = False) -> list[dict]:
    """A harness's loop as any OpenAI-SDK agent writes it: the replies go back into its own history
    (as the SDK returns them), a tool result after each call, until an answer. `stream`: it reads each
    reply from its chunks (as OpenCode does)."""
    messages = [dict(m) for m in row["responses_create_params"]["input"]]
    for _ in range(4):
        if stream:
            reply = await streamed_reply(client, messages)
        else:
            completion = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
            reply = completion.choices[0].message.model_dump(exclude_none=True)
        assert not {"prompt_token_ids", "generation_token_ids"} & set(reply)  # the harness never sees ids
        if not reply.get("tool_calls"):
            return messages + [reply]
        messages.append(reply)
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "42"} for c in reply["tool_calls"]]
        if rewrite_history:  # a harness that compacts its history: no longer what was generated
            messages = [
                m | {"content": "[earlier turn, compacted]"} if m["role"] == "assistant" else m for m in messages
            ]
    raise AssertionError("the scripted policy never answered")


async def streamed_reply(client: AsyncOpenAI, messages: list[dict]) -> dict:
    """The assistant message put together from its chunks, as a streaming client (OpenCode's AI SDK) does."""
    reply: dict = {"role": "assistant"}
    calls: dict[int, dict] = {}
    usage = None
    chunks = await client.chat.completions.create(
        model="policy", messages=messages, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    async for chunk in chunks:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            if choice.delta.content:
                reply["content"] = reply.get("content", "") + choice.delta.content
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"type": "function", "function": {"name": "", "arguments": ""}})
                call["id"] = delta.id or call.get("id")
                call["function"]["name"] += (delta.function and delta.function.name) or ""
                call["function"]["arguments"] += (delta.function and delta.function.arguments) or ""
    assert usage is not None and usage.completion_tokens > 0  # the usage chunk it asked for
    if calls:
        reply["tool_calls"] = [calls[i] for i in sorted(calls)]
    return reply


@pytest.mark.parametrize("case", [None, *DRIFT_CASES])
async def test_a_harness_extending_its_history_gets_one_exact_contiguous_trajectory(stack, case):
    gateway, url, policy = stack
    key, client = await open_capture(url)
    await harness(client, row_for(case))
    record = gateway.end(key)
    assert [c.extends for c in record.calls] == [None, 0] and [c.parent for c in record.calls] == [None, 0]
    (branch,) = export(record.tree).branches  # one conversation, every reply sent back as generated: one branch
    generated = [o["generation_token_ids"] for o in branch.output]
    assert generated == (await sampled(policy))[-2:], case  # what the policy sampled, never a re-encoding
    assert [record.generation(c.index)[0] for c in record.calls] == generated
    given, output = record.transcript()
    assert token_ids_contiguous(output) is True, case
    assert [o["generation_token_ids"] for o in output if "generation_token_ids" in o] == generated
    assert output[-1]["type"] == "message"
    assert given == row_for(case)["responses_create_params"]["input"]  # the prompt, kept out of output
    assert not [o for o in output if o.get("role") in ("system", "user")]
    assert {"function_call", "function_call_output"} <= {o["type"] for o in output}
    assert record.calls[0].messages[0] == row_for(case)["responses_create_params"]["input"][0]  # as sent


async def test_a_harness_that_rewrites_its_history_gets_a_branch_per_rewrite(stack):
    gateway, url, policy = stack
    key, client = await open_capture(url)
    await harness(client, row_for(None), rewrite_history=True)
    record = gateway.end(key)
    assert [c.extends for c in record.calls] == [None, None]  # its history is not what was generated: rendered whole
    # the second prompt leaves the tree where the rewritten reply starts: all of the first prompt is shared
    assert record.calls[1].shared_tokens == record.calls[0].prompt_tokens and record.calls[1].parent is None
    exported = export(record.tree)
    assert [[o["generation_token_ids"] for o in b.output] for b in exported.branches] == [
        [g] for g in (await sampled(policy))[-2:]
    ]
    assert all(token_ids_contiguous(b.output) for b in exported.branches)
    assert tree_from_export(exported) == record.tree


async def test_concurrent_rollouts_never_see_each_others_calls(stack):
    gateway, url, _ = stack
    opened = [await open_capture(url) for _ in range(4)]
    rows = [row_for(None, n % 2) for n in range(4)]
    await asyncio.gather(*(harness(client, row) for (_, client), row in zip(opened, rows)))
    for (key, _), row in zip(opened, rows):
        record = gateway.end(key)
        firsts = {json.dumps(c.messages[: len(row["responses_create_params"]["input"])]) for c in record.calls}
        assert firsts == {json.dumps(row["responses_create_params"]["input"])}
        assert len(record.calls) == 2 and token_ids_contiguous(record.transcript()[1]) is True


async def test_calls_after_the_rollout_ended_are_refused(stack):
    gateway, url, _ = stack
    key, client = await open_capture(url)
    gateway.end(key)
    with pytest.raises(Exception) as refused:
        await harness(client, row_for(None))
    assert getattr(refused.value, "status_code", None) == 410
    stranger = AsyncOpenAI(base_url=f"{url}/capture/not-a-key/v1", api_key="unused", max_retries=0)
    with pytest.raises(Exception) as unknown:
        await harness(stranger, row_for(None))
    assert getattr(unknown.value, "status_code", None) == 404


async def test_the_call_limit_stops_the_harness_and_the_record_says_why(stack):
    gateway, url, _ = stack
    key, client = await open_capture(url, max_calls=1)
    with pytest.raises(PermissionDeniedError, match="1 policy calls, its limit"):
        await harness(client, row_for(None))
    record = gateway.end(key)
    assert len(record.calls) == 1 and record.stopped.startswith("the rollout made 1 policy calls")


async def test_the_output_token_limit(stack):
    gateway, url, _ = stack
    key, client = await open_capture(url, max_output_tokens=1)
    messages = [dict(m) for m in row_for(None)["responses_create_params"]["input"]]
    first = await client.chat.completions.create(model="policy", messages=messages, max_tokens=1000)
    assert first.choices[0].finish_reason == "length"  # asked for 1000, cut at what the rollout had left
    with pytest.raises(PermissionDeniedError, match="1 tokens, its limit"):
        await client.chat.completions.create(model="policy", messages=messages)
    assert gateway.end(key).output_tokens == 1


RESPONSES_TOOLS = [{"type": "function", **TOOLS[0]["function"]}]
ANTHROPIC_TOOLS = [
    {"name": "python", "description": "run code", "input_schema": TOOLS[0]["function"]["parameters"]},
]


async def responses_harness(client: AsyncOpenAI, row: dict, stream: bool = False) -> list[dict]:
    """An OpenAI-SDK agent on the Responses API (stateless: it sends its whole input every call); `stream`:
    it reads each answer from its events (as the Codex CLI does)."""
    given = row["responses_create_params"]["input"]
    instructions = "\n".join(m["content"] for m in given if m["role"] == "system")
    items = [dict(m) for m in given if m["role"] != "system"]
    for _ in range(4):
        request = dict(model="policy", instructions=instructions, input=items, tools=RESPONSES_TOOLS, store=False)
        if stream:
            async with client.responses.stream(**request) as events:
                response = await events.get_final_response()
        else:
            response = await client.responses.create(**request)
        output = [o.model_dump(exclude_none=True) for o in response.output]
        assert not [o for o in output if "generation_token_ids" in o]  # the harness never sees ids
        items += output
        calls = [o for o in output if o["type"] == "function_call"]
        if not calls:
            return items
        items += [{"type": "function_call_output", "call_id": c["call_id"], "output": "42"} for c in calls]
    raise AssertionError("the scripted policy never answered")


async def anthropic_harness(url: str, key: str, row: dict, stream: bool = False) -> list[dict]:
    """An Anthropic-SDK agent on the Messages API (as Claude Code speaks it, streamed or not)."""
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(base_url=f"{url}/capture/{key}", api_key="unused", max_retries=0)
    given = row["responses_create_params"]["input"]
    system = "\n".join(m["content"] for m in given if m["role"] == "system")
    messages = [{"role": m["role"], "content": m["content"]} for m in given if m["role"] != "system"]
    for _ in range(4):
        request = dict(model="policy", max_tokens=2048, system=system, messages=messages, tools=ANTHROPIC_TOOLS)
        if stream:
            async with client.messages.stream(**request) as events:
                message = await events.get_final_message()
        else:
            message = await client.messages.create(**request)
        content = [b.model_dump(exclude_none=True) for b in message.content]
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            assert message.stop_reason == "end_turn"
            return messages
        assert message.stop_reason == "tool_use"
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": "42"} for b in uses],
            }
        )
    raise AssertionError("the scripted policy never answered")


@pytest.mark.parametrize(
    "protocol",
    [
        "chat_completions_streamed",
        "responses",
        "responses_streamed",
        "anthropic_messages",
        "anthropic_messages_streamed",
    ],
)
@pytest.mark.parametrize("case", [None, *DRIFT_CASES[:2]])
async def test_a_harness_on_another_protocol_gets_the_same_exact_trajectory(stack, protocol, case):
    gateway, url, policy = stack
    key, client = await open_capture(url)
    stream = protocol.endswith("streamed")
    if protocol.startswith("chat_completions"):
        await harness(client, row_for(case), stream=stream)
    elif protocol.startswith("responses"):
        await responses_harness(client, row_for(case), stream=stream)
    else:
        await anthropic_harness(url, key, row_for(case), stream=stream)
    record = gateway.end(key)
    assert [c.protocol for c in record.calls] == [protocol.removesuffix("_streamed")] * 2
    assert record.calls[0].messages[:2] == row_for(case)["responses_create_params"]["input"][:2]  # system, user
    assert [c.extends for c in record.calls] == [None, 0] and [c.parent for c in record.calls] == [None, 0]
    (branch,) = export(record.tree).branches
    assert token_ids_contiguous(branch.output) is True, (protocol, case)
    generated = [o["generation_token_ids"] for o in branch.output]
    assert generated == (await sampled(policy))[-2:]  # what the policy sampled, never a re-encoding


async def test_ids_a_harness_sends_never_reach_the_model(stack):
    gateway, url, policy = stack
    key, client = await open_capture(url)
    row = row_for(None)
    messages = [dict(m) for m in row["responses_create_params"]["input"]]
    first = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
    reply = first.choices[0].message.model_dump(exclude_none=True)
    forged = {"prompt_token_ids": [1, 2, 3], "generation_token_ids": [4], "generation_log_probs": [0.0]}
    messages += [reply | forged]  # the real reply, with forged ids
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": "42"} for c in reply["tool_calls"]]
    messages += [{"role": "assistant", "content": "an answer it never generated", **forged}]
    messages += [{"role": "user", "content": "go on"}]
    await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
    record = gateway.end(key)
    assert [c.extends for c in record.calls] == [None, 0]
    ids = [n.tokens for n in record.tree if n.call is not None]
    assert [4] not in ids and not [m for c in record.calls for m in c.messages if "prompt_token_ids" in m]
    first, second = record.calls
    assert second.shared_tokens >= first.prompt_tokens  # the real prompt; the forged ids are nowhere


async def test_a_malformed_call_in_any_protocol_is_a_4xx_with_the_reason(stack):
    gateway, url, _ = stack
    key, _ = await open_capture(url)
    async with aiohttp.ClientSession() as http:
        for path, body, status in [
            ("chat/completions", {"messages": []}, 422),
            ("responses", {"input": [{"type": "no_such_item"}]}, 422),
            ("responses", {"input": "hi", "previous_response_id": "resp_1"}, 400),
            ("messages", {"max_tokens": 5}, 422),
        ]:
            async with http.post(f"{url}/capture/{key}/v1/{path}", json=body) as r:
                assert r.status == status, (path, body, await r.text())
                error = (await r.json())["error"]
                assert error["message"] and ("type" in error)
    assert gateway.end(key).calls == []


async def test_the_codex_clis_streaming_dialect_is_answered_with_its_events(stack):
    """The Codex CLI's request, as it sends one (recorded from codex-cli 0.171: developer messages first, its
    <environment_context> before the task, bookkeeping fields, a reasoning summary, namespaced tools,
    `stream: true`): mapped onto a plain call, answered with the events it reads (response.created, each
    item done, response.completed), the call captured with its ids."""
    gateway, url, policy = stack
    key, _ = await open_capture(url)
    system, task = row_for(None)["responses_create_params"]["input"]
    namespace = {
        "type": "namespace",
        "name": "mcp",
        "description": "a server's tools",
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}],
    }
    body = {
        "model": "policy",
        "stream": True,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": system["content"]}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": task["content"]}]},
        ],
        "tools": [RESPONSES_TOOLS[0] | {"strict": False}, namespace],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "thread-1",
        "client_metadata": {"turn_id": "t-1"},
    }
    async with aiohttp.ClientSession() as http, http.post(f"{url}/capture/{key}/v1/responses", json=body) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in (await r.text()).splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert set(kinds[1:-1]) == {"response.output_item.done"}
    items = [e["item"] for e in events[1:-1]]
    assert items == events[-1]["response"]["output"] and [
        i["name"] for i in items if i["type"] == "function_call"
    ] == ["python"]
    record = gateway.end(key)
    (call,) = record.calls
    assert call.protocol == "responses" and [m["role"] for m in call.messages] == ["system", "user", "user"]
    assert (await sampled(policy))[-1] == record.generation(call.index)[0]
