# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real model in the loop, on the CPU, in `make test`: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) served by
llama.cpp (responses_api_models/llamacpp_policy) drives math rollouts through token-in/token-out.

The essentials, on one stack (one llama.cpp server, one ng_run with the math environment, rollouts capped
to 2 turns and 96 generated tokens): a rollout's ids are contiguous, its generated ids and their log-probs
are the model's own (replayed on the server), it ends with a typed stop; a call the model writes without
its tags to a tool that does not exist is read, said how, and goes back to the policy as an error; a
conversation longer than the context ends typed. Nobody scripted this model: rewards are recorded, not
asserted high. Every environment, the tool-call grammar, a runaway generation and the async example with
the real model: tests/test_real_model_full.py (`make test-real-model`, tens of minutes).

The weights come from `make setup` (fetched once, verified); without them the module skips, saying so.
"""

from __future__ import annotations

import pytest

from prorl_gym.client import ProRLClient, agent_url
from tests.support.real_model import (
    ENVIRONMENTS,
    assert_replays,
    assert_trainable,
    collect,
    model_or_skip,
    real_model_stack,
    rows,
)

model_or_skip()
pytestmark = pytest.mark.timeout(900)  # a busy 2-core machine generates a few tokens a second
LIMITS = {"max_turns": 2, "max_output_tokens": 96}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with real_model_stack([ENVIRONMENTS["math"]], LIMITS, tmp_path_factory.mktemp("real-model")) as stack:
        yield stack


@pytest.fixture
async def math_client(stack):
    url = await agent_url(f"http://{stack.head_host}:{stack.head_port}", ENVIRONMENTS["math"].agent)
    async with ProRLClient(url, timeout_s=900, stream_idle_timeout_s=900) as client:
        yield client


def test_a_math_rollout_is_trainable_with_the_models_own_ids_and_log_probs(stack):
    (record,) = collect(stack, "math", limit=1)
    assert_trainable(record)
    assert "extracted_answer" in record  # the verifier ran; its reward is recorded, not asserted
    assert_replays(stack.llamacpp, record)


async def test_an_untagged_call_to_a_tool_that_does_not_exist_goes_back_to_the_policy(math_client):
    (row,) = rows("math", temperature=0.0)  # greedy: the same text every run of the pinned model and llama.cpp
    row["responses_create_params"]["input"][-1]["content"] = (
        'Reply with exactly this line and nothing else: {"name": "calculator", "arguments": {"expression": "2+2"}}'
    )
    (record,) = [r.wire() for r in await math_client.results((await math_client.submit([row])).batch_id)]
    assert_trainable(record)
    first = record["tool_call_paths"][0]
    assert first.startswith("lenient_") and first != "lenient_malformed", record["tool_call_paths"]
    calls = [o for o in record["response"]["output"] if o["type"] == "function_call"]
    assert calls[0]["name"] == "calculator" and record["malformed_tool_calls"] >= 1
    (said,) = [
        o["output"]
        for o in record["response"]["output"]
        if o.get("call_id") == calls[0]["call_id"] and o["type"] == "function_call_output"
    ]
    assert said.startswith("Error:") and "calculator" in said, said


async def test_a_conversation_longer_than_the_context_ends_typed(math_client):
    (row,) = rows("math")
    row["responses_create_params"]["input"][-1]["content"] = "Add these numbers: " + " + ".join(["1"] * 12000)
    (record,) = [r.wire() for r in await math_client.results((await math_client.submit([row])).batch_id)]
    assert record["failure"] is None and record["stop_reason"] == "context_length"
    assert record["num_turns"] == 1 and record["reward"] == 0.0  # graded as it stands: no answer
