# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real model in the loop, on the CPU: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) served by llama.cpp
(responses_api_models/llamacpp_policy) drives rollouts of every environment through token-in/token-out.

One stack for the module: one llama.cpp server (one slot) and one ng_run with every environment,
each agent capped to a few turns and tokens (the model generates tens of tokens a second here). Nobody
scripted this model: rewards are recorded, not asserted high. What is asserted is what a trainer needs
whatever the model does: ids contiguous, the generated ids and their log-probs the model's own
(replayed on the server), every tool call parsed and said how, no infrastructure failure, and
whatever the model does that the scripted policy never did (calls without their tags, a generation
cut at its limit, a conversation longer than the context) ends as a typed record.

The weights come from `make setup` (fetched once, verified); without them the module skips, saying so.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path

import pytest

from examples.training_loop import training_loop
from prorl_gym.client import ProRLClient, agent_url
from prorl_gym.environments import all_config_paths, discover
from prorl_gym.errors import ProrlError
from prorl_gym.jsonl import read_jsonl
from prorl_gym.local_models import local_model, verified
from prorl_gym.stack import Stack, collected_records, cpu_rollout_limits
from prorl_gym.tokens.grammar import tool_call_grammar

MODEL = "qwen2.5-coder-0.5b"
try:
    verified(local_model(MODEL))
except ProrlError as exc:  # make setup fetches it; never at test time
    pytest.skip(str(exc), allow_module_level=True)

pytestmark = pytest.mark.timeout(3600)  # a busy 2-core machine generates a few tokens a second
ENVIRONMENTS = {env.name: env for env in discover()}
LIMITS = {"max_turns": 3, "max_output_tokens": 192}
PATHS = {"tagged", "constrained", "lenient_fenced", "lenient_bare", "lenient_unbraced", "lenient_malformed"}
STOPS = {"answered", "finish_tool", "max_turns", "max_output_tokens", "context_length"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-model")
    sandbox_root = Path(tempfile.mkdtemp(prefix="prorl-real-", dir="/tmp"))  # reachable by the sandbox uid
    sandbox_root.chmod(0o711)
    envs = list(ENVIRONMENTS.values())
    overrides = [f"+{env.server_key}.sandbox.root_dir={sandbox_root}" for env in envs]
    overrides += [o for env in envs for o in cpu_rollout_limits(env.agent, **LIMITS)]
    with Stack(all_config_paths(envs), overrides=overrides, local_model=MODEL, log_dir=tmp / "logs") as stack:
        stack.tmp = tmp
        stack.llamacpp = f"http://127.0.0.1:{stack.policy_port}"
        yield stack
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left behind"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
    shutil.rmtree(sandbox_root)


def collect(stack, env: str, limit: int, repeats: int = 1) -> list[dict]:
    output = stack.tmp / f"{env}.jsonl"
    # one rollout at a time: llama.cpp's one slot keeps its conversation cached, turn after turn
    extra = [f"+limit={limit}", "+num_samples_in_parallel=1"]
    stack.collect(ENVIRONMENTS[env].agent, ENVIRONMENTS[env].example, output, repeats, extra=extra, timeout_s=3000)
    return collected_records(output)


@pytest.fixture(scope="module")
def math_records(stack) -> list[dict]:
    return collect(stack, "math", limit=4, repeats=2)


@pytest.fixture(scope="module")
def other_records(stack) -> dict[str, list[dict]]:
    return {env: collect(stack, env, limit=1) for env in ("stem", "code", "swe")}


def generations(record: dict) -> list[dict]:
    return [o for o in record["response"]["output"] if "generation_token_ids" in o]


def assert_trainable(record: dict) -> None:
    """What a trainer needs of a rollout, whatever the model did in it."""
    failure = record.get("failure")
    assert not (failure and failure["infra"]) and record["attempts"] == 1, failure or record["attempt_failures"]
    assert failure is None, failure  # nothing this model does is a failure: every end is a typed stop
    assert record["stop_reason"] in STOPS and isinstance(record["reward"], float) and 0.0 <= record["reward"] <= 1.0
    assert record["token_ids_contiguous"] is True and record["token_prompts"].get("rendered") == 1
    turns = generations(record)
    assert turns and len(turns) == record["num_turns"]
    for turn in turns:
        ids, log_probs = turn["generation_token_ids"], turn["generation_log_probs"]
        assert ids and len(log_probs) == len(ids) and all(math.isfinite(lp) and lp <= 0 for lp in log_probs)
    calls = [o for o in record["response"]["output"] if o["type"] == "function_call"]
    assert len(record["tool_call_paths"]) == len(calls) == record["num_tool_calls"]
    assert set(record["tool_call_paths"]) <= PATHS


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


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.load(answer)


def test_generated_ids_and_their_log_probs_are_the_models_own(stack, math_records, other_records):
    """Each record's last turn replayed on the server: its prompt ids, the recorded ids forced one by one
        (a grammar of token ids): the model's log-probs for them are the recorded ones. Ids re-encoded from
        text, shifted or split differently would not score so (the ids and log-probs are also checked as the
    server returned them: llamacpp.read_completion)."""
    records = math_records[:1] + [r for records in other_records.values() for r in records]
    for record in records:
        turn = generations(record)[-1]
        ids = turn["generation_token_ids"]
        grammar = "root ::= " + " ".join(f"<[{i}]>" for i in ids)
        answer = post(
            f"{stack.llamacpp}/completion",
            {"prompt": turn["prompt_token_ids"], "grammar": grammar, "n_predict": len(ids), "n_probs": 1}
            | {"return_tokens": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
        )
        assert answer["tokens"] == ids
        replayed = [e["logprob"] for e in answer["completion_probabilities"]]
        # the same ids scored again: equal up to float noise (the KV cache is batched otherwise on a replay; seen:
        # mean 0.0065, max 0.13 over 192 tokens); a token that was not the one sampled would be off by far more
        differences = [abs(a - b) for a, b in zip(replayed, turn["generation_log_probs"], strict=True)]
        assert sum(differences) / len(differences) < 0.02 and max(differences) < 1.0, differences


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


def rows(env: str, n: int = 1, **params) -> list[dict]:
    out = read_jsonl(ENVIRONMENTS[env].example)[:n]
    for row in out:
        row["responses_create_params"] |= params
    return out


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


async def test_a_conversation_longer_than_the_context_ends_typed(math_client):
    (row,) = rows("math")
    row["responses_create_params"]["input"][-1]["content"] = "Add these numbers: " + " + ".join(["1"] * 12000)
    (record,) = [r.wire() for r in await math_client.results((await math_client.submit([row])).batch_id)]
    assert record["failure"] is None and record["stop_reason"] == "context_length"
    assert record["num_turns"] == 1 and record["reward"] == 0.0  # graded as it stands: no answer


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
