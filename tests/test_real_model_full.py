# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real model in the loop, on the CPU, the long tier (`make test-real-model`; tens of minutes on two
cores, which is why `make test` runs only tests/test_real_model.py): Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)
served by llama.cpp (responses_api_models/llamacpp_policy) drives rollouts of every environment through
token-in/token-out.

One stack for the module: one llama.cpp server (one slot) and one ng_run with every environment,
each agent capped to a few turns and tokens. Nobody scripted this model: rewards are recorded, not
asserted high. What is asserted is what a trainer needs whatever the model does: ids contiguous, the
generated ids and their log-probs the model's own (replayed on the server), every tool call parsed and
said how, no infrastructure failure, and whatever the model does that the scripted policy never did
(calls without their tags, a generation cut at its limit) ends as a typed record; a conversation longer
than the context: tests/test_real_model.py. The same rollouts, counted: benchmarks/real_model.py.

Runs only with PRORL_REAL_MODEL_FULL=1 (the make target sets it) and the weights from `make setup`.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from examples.training_loop import training_loop
from prorl_gym.client import ProRLClient, agent_url
from prorl_gym.tokens.grammar import tool_call_grammar
from tests.support.real_model import (
    ENVIRONMENTS,
    assert_replays,
    assert_trainable,
    collect,
    generations,
    model_or_skip,
    post,
    real_model_stack,
    rows,
)

if os.environ.get("PRORL_REAL_MODEL_FULL") != "1":
    pytest.skip("the long real-model tier: make test-real-model", allow_module_level=True)
model_or_skip()

pytestmark = pytest.mark.timeout(3600)  # a busy 2-core machine generates a few tokens a second
LIMITS = {"max_turns": 3, "max_output_tokens": 192}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with real_model_stack(list(ENVIRONMENTS.values()), LIMITS, tmp_path_factory.mktemp("real-model")) as stack:
        yield stack


@pytest.fixture(scope="module")
def math_records(stack) -> list[dict]:
    return collect(stack, "math", limit=4, repeats=2)


@pytest.fixture(scope="module")
def other_records(stack) -> dict[str, list[dict]]:
    return {env: collect(stack, env, limit=1) for env in ("stem", "code", "swe")}


def test_math_rollouts_are_trainable_with_every_call_parsed_and_said_how(math_records):
    assert len(math_records) == 8
    for record in math_records:
        assert_trainable(record)
        assert "extracted_answer" in record  # the verifier ran; its reward is recorded, not asserted
    assert sum(r["num_tool_calls"] for r in math_records) > 0  # it does use its tools


@pytest.mark.parametrize("env", ["stem", "code", "swe"])
def test_a_stem_a_code_and_a_swe_rollout_are_trainable(other_records, env):
    (record,) = other_records[env]
    assert_trainable(record)


def test_generated_ids_and_their_log_probs_are_the_models_own(stack, math_records, other_records):
    """Each environment's last turn replayed on the server (tests/support/real_model.py assert_replays)."""
    for record in math_records[:1] + [r for records in other_records.values() for r in records]:
        assert_replays(stack.llamacpp, record)


def test_every_environments_tools_make_a_grammar_llamacpp_takes(stack):
    urls = stack.server_urls()
    ids = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]  # <|im_start|>user\nHi<|im_end|>\n...assistant\n
    for env in ENVIRONMENTS.values():
        with urllib.request.urlopen(f"{urls[env.name]}/tools", timeout=30) as answer:
            tools = json.load(answer)["tools"]
        grammar = tool_call_grammar(tools, parallel=False)
        first = post(
            f"{stack.llamacpp}/completion", {"prompt": ids, "grammar": grammar, "n_predict": 1, "return_tokens": True}
        )
        assert first["tokens"] == [151657], env.name  # <tool_call>, the special token itself


@pytest.fixture
async def math_client(stack):
    url = await agent_url(f"http://{stack.head_host}:{stack.head_port}", ENVIRONMENTS["math"].agent)
    async with ProRLClient(url, timeout_s=1800, stream_idle_timeout_s=1800) as client:
        yield client


async def test_tool_choice_required_constrains_the_calls_to_the_tools_schemas(math_client):
    (record,) = [
        r.wire()
        for r in await math_client.results((await math_client.submit(rows("math", tool_choice="required"))).batch_id)
    ]
    assert_trainable(record)
    assert record["tool_call_paths"] and set(record["tool_call_paths"]) == {"constrained"}
    for call in (o for o in record["response"]["output"] if o["type"] == "function_call"):
        assert call["name"] in {"python", "bash"} and isinstance(json.loads(call["arguments"]), dict)
    assert record["malformed_tool_calls"] == 0 or record["stop_reason"] == "max_output_tokens"  # a call cut short


async def test_a_runaway_generation_is_cut_and_typed_and_its_ids_kept(math_client):
    (row,) = rows("math")
    row["responses_create_params"]["input"][-1]["content"] = (
        "Do not use any tool. Write the word tick two thousand times, separated by spaces, and nothing else."
    )
    (record,) = [r.wire() for r in await math_client.results((await math_client.submit([row])).batch_id)]
    assert_trainable(record)
    assert record["stop_reason"] == "max_output_tokens"
    assert sum(len(t["generation_token_ids"]) for t in generations(record)) == LIMITS["max_output_tokens"]


async def test_the_async_training_example_pauses_and_resumes_around_weight_updates(math_client):
    reports = await training_loop(
        math_client,
        rows("math", 2),
        steps=2,
        prompts_per_step=1,
        group_size=2,
        run_id=f"real-{os.getpid()}",
        mode="async",
        train_s=0.5,
        weight_updates=True,
    )
    assert [(r.submitted, r.received) for r in reports] == [(2, 2), (2, 2)]
    assert all(set(r.failures) <= {"cancelled"} for r in reports), [r.failures for r in reports]
    assert reports[0].versions[0] == 0 and set(reports[1].versions) <= {0, 1, 2}
    policy = await math_client.policy()
    assert policy.version == 2 and not policy.paused
