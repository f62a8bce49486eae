# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Every environment end to end: scripted policy + real ng_run + ng_collect_rollouts.

One stack for the module (one ng_run serving every environment found under resources_servers/).
Rows carry `metadata.scripted_mode`, which NeMo Gym's vllm_model forwards to the policy
endpoint, so gold, wrong and malformed rollouts of every example run in one collection
per environment. The policy answers as vLLM serving Qwen3 would (its real tokenizer and chat
template: real_tokens.py) and the model server is in token-in/token-out mode, so every record's
ids are real Qwen3 ids, checked against what the policy sampled; without the Qwen3 tokenizer
(make setup installs it) the byte-level stand-in and chat mode run instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from prorl_gym.environments import all_config_paths, discover
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import Stack, collected_records
from prorl_gym.testing import traversable_dir
from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3

ENVIRONMENTS = {env.name: env for env in discover()}
ENVS = tuple(ENVIRONMENTS)
MODES = ("gold", "wrong", "malformed")
try:
    REAL_TOKENS = bool(qwen3())
except TokenizerNotFound:
    REAL_TOKENS = False
MODEL = "+policy_model.responses_api_models.balanced_vllm_model"


def example(env: str) -> Path:
    return ENVIRONMENTS[env].example


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    sandbox_root = traversable_dir("prorl-e2e-")
    overrides = [f"+{env.server_key}.sandbox.root_dir={sandbox_root}" for env in ENVIRONMENTS.values()]
    overrides += [f"+{env.agent_key}.limits.policy_call_timeout_s=5" for env in ENVIRONMENTS.values()]
    # The last test kills the only policy endpoint: its rollouts wait this long for it, then fail typed.
    overrides += [f"+{env.agent_key}.retry.recovery_timeout_s=3" for env in ENVIRONMENTS.values()]
    policy_data = [str(example(env)) for env in ENVS]
    policy_args = ["--tokenizer", "qwen3"] if REAL_TOKENS else []
    if REAL_TOKENS:
        overrides += [f"{MODEL}.token_mode=tito", f"{MODEL}.tokenizer=qwen3"]
    with Stack(
        all_config_paths(list(ENVIRONMENTS.values())),
        overrides=overrides,
        policy_data=policy_data,
        policy_args=policy_args,
        log_dir=tmp / "logs",
    ) as stack:
        stack.tmp = tmp
        yield stack
    # Agent and eval sandboxes alike are gone; so is every server.
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left behind"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
    shutil.rmtree(sandbox_root)
    leftovers = subprocess.run(["pgrep", "-f", f"ng_run.*{stack.head_port}"], capture_output=True, text=True).stdout
    assert not leftovers.strip(), f"processes left behind: {leftovers}"


@pytest.fixture(scope="module")
def rollouts(stack) -> dict[str, dict[str, list[dict]]]:
    """env -> mode -> rollout records (successes and failures alike)."""
    results = {}
    for env in ENVS:
        rows = []
        for mode in MODES:
            for row in read_jsonl(example(env)):
                row["responses_create_params"]["metadata"] = {"scripted_mode": mode}
                rows.append(row)
        inputs, output = stack.tmp / f"{env}-modes.jsonl", stack.tmp / f"{env}.jsonl"
        inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
        stack.collect(ENVIRONMENTS[env].agent, inputs, output)
        by_mode: dict[str, list[dict]] = {}
        for record in collected_records(output):
            by_mode.setdefault(record["responses_create_params"]["metadata"]["scripted_mode"], []).append(record)
        results[env] = by_mode
    return results


@pytest.mark.parametrize("env", ENVS)
def test_every_rollout_completed(rollouts, env):
    assert {mode: len(records) for mode, records in rollouts[env].items()} == {mode: 5 for mode in MODES}
    failures = [r["failure"] for records in rollouts[env].values() for r in records if r["failure"]]
    assert not failures


@pytest.mark.parametrize("env", ENVS)
def test_gold_scores_one_and_wrong_scores_zero(rollouts, env):
    assert [r["reward"] for r in rollouts[env]["gold"]] == [1.0] * 5
    assert [r["reward"] for r in rollouts[env]["wrong"]] == [0.0] * 5


@pytest.mark.parametrize("env", ENVS)
def test_malformed_calls_are_returned_to_the_policy_which_recovers(rollouts, env):
    for record in rollouts[env]["malformed"]:
        assert record["malformed_tool_calls"] >= 3 and record["reward"] == 1.0
        errors = [o["output"] for o in record["response"]["output"] if o["type"] == "function_call_output"]
        assert sum(e.startswith("Error: ") for e in errors) >= 3


@pytest.mark.parametrize("env", ENVS)
def test_token_ids_are_present_and_contiguous(rollouts, env):
    for record in (r for records in rollouts[env].values() for r in records):
        generations = [o for o in record["response"]["output"] if "generation_token_ids" in o]
        assert generations and all(o["prompt_token_ids"] and o["generation_log_probs"] for o in generations)
        assert record["token_ids_contiguous"] is True


@pytest.mark.skipif(not REAL_TOKENS, reason="the Qwen3 tokenizer is not installed (make setup installs it)")
def test_token_ids_are_what_the_policy_sampled_and_each_turn_extends_the_last(stack, rollouts):
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.policy_port}/sampled", timeout=10) as response:
        log = json.load(response)
    assert log and {s["route"] for s in log} == {"completions"}  # token-id prompts only: no chat route
    sampled = {tuple(s["ids"]) for s in log}
    recorded = [
        tuple(int(t) for t in o["generation_token_ids"])
        for records in rollouts.values()
        for r in (r for by_mode in records.values() for r in by_mode)
        for o in r["response"]["output"]
        if "generation_token_ids" in o
    ]
    missing = [ids for ids in recorded if ids not in sampled]
    assert recorded and not missing, f"{len(missing)} generations are not ids the policy sampled"
    for records in rollouts.values():
        for record in (r for by_mode in records.values() for r in by_mode):
            assert (
                set(record["token_prompts"]) <= {"rendered", "extended"} and record["token_prompts"]["rendered"] == 1
            )


def test_records_carry_stage_timings_and_environment_fields(rollouts):
    for env in ENVS:
        for record in rollouts[env]["gold"]:
            assert all(record["timings"][f"{stage}_s"] > 0 for stage in ("init", "run", "eval")), env
            # NeMo Gym 0.7 collected it through the environment server its config declares (served by the agent)
            assert record["_ng_environment_server"] == ENVIRONMENTS[env].environment_server
    assert all(r["pass_fraction"] == 1.0 for r in rollouts["code"]["gold"])
    assert all(r["stop_reason"] == "finish_tool" and r["patch_bytes"] > 0 for r in rollouts["swe"]["gold"])
    assert all(r["patch_bytes"] == 0 for r in rollouts["swe"]["wrong"])  # submitted without a change


def test_swe_samples_of_one_task_started_from_one_staged_sandbox(stack, rollouts):
    """share_init (on for SWE): the gold, wrong and malformed samples of each task (the rewards
    asserted above) were forks of one staging per task, not stagings of their own."""
    with urllib.request.urlopen(f"{stack.server_urls()['swe']}/status", timeout=10) as response:
        shared = json.load(response)["shared_init"]
    tasks = len(read_jsonl(example("swe")))
    assert shared["templates"] <= tasks and shared["forks"] >= len(MODES) * tasks, shared


def test_aggregate_metrics_were_written(stack, rollouts):
    for env in ENVS:
        metrics = json.loads((stack.tmp / f"{env}_aggregate_metrics.json").read_text())[0]
        assert metrics["agent_metrics"]["failure_rate"] == 0.0
        assert metrics["agent_metrics"]["contiguous_fraction"] == 1.0


def test_plain_rows_as_a_dataset_has_them(stack, rollouts):
    """Rows straight from example.jsonl: no metadata, only what the dataset has."""
    output = stack.tmp / "plain.jsonl"
    stack.collect("math_agent", example("math"), output)
    records = read_jsonl(output, missing_ok=True)
    assert [r["reward"] for r in records] == [1.0] * 5 and not read_jsonl(
        stack.tmp / "plain_failures.jsonl", missing_ok=True
    )


def test_a_dead_policy_endpoint_is_a_typed_failure_not_reward_zero(stack, rollouts):
    policy = stack._procs[0]  # the scripted policy: stop it, as if the GPU server died
    os.killpg(policy.pid, 9)
    policy.wait()
    output = stack.tmp / "dead.jsonl"
    stack.collect("math_agent", example("math"), output, extra=["+limit=2"])
    failures = read_jsonl(stack.tmp / "dead_failures.jsonl", missing_ok=True)
    assert len(failures) == 2 and not read_jsonl(output, missing_ok=True)
    assert all(f["failure"]["type"] == "policy_error" and f["_ng_failure_class"] == "policy_error" for f in failures)


def test_a_resume_runs_again_the_infrastructures_failures_only(stack, rollouts):
    """NeMo Gym 0.7's resume (resume_from_cache) runs a failed row again unless it is `_ng_failure_terminal`,
    which our records set for the task's failures only: a row the verifier cannot use (no expected answer:
    an init_error, the task's) is not run again; a rollout whose policy never answered in time (the
    infrastructure's, retried by the agent within its budget) is, as a new attempt of its own."""
    if stack._procs[0].poll() is not None:  # the test before left the policy dead
        stack.restart_policy()
    good, no_answer, slow = (dict(row) for row in read_jsonl(example("math"))[:3])
    no_answer.pop("expected_answer")
    slow["responses_create_params"] = slow["responses_create_params"] | {
        "metadata": {"scripted_latency_ms": "30000"}  # beyond the agent's policy_call_timeout_s (5 s)
    }
    inputs, output = stack.tmp / "resume_rows.jsonl", stack.tmp / "resume.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in (good, no_answer, slow)))
    stack.collect("math_agent", inputs, output)
    by_task = {r["_ng_task_index"]: r for r in collected_records(output)}
    assert by_task[0]["reward"] == 1.0 and "_ng_failure_terminal" not in by_task[0]
    assert by_task[0]["mask_sample"] is False
    task_failure, infra_failure = by_task[1], by_task[2]
    assert task_failure["failure"]["type"] == "init_error" and task_failure["failure"]["infra"] is False
    assert (task_failure["failure_kind"], task_failure["_ng_failure_terminal"]) == ("prorl:init_error", True)
    assert infra_failure["failure"]["type"] == "policy_error" and infra_failure["failure"]["infra"] is True
    assert (infra_failure["failure_kind"], infra_failure["_ng_failure_terminal"]) == ("transport_peer_drop", False)
    assert task_failure["mask_sample"] is infra_failure["mask_sample"] is True
    assert infra_failure["failure_reason"] == infra_failure["failure"]["message"]

    stack.collect("math_agent", inputs, output, extra=["+resume_from_cache=true"])
    attempts = [(r["_ng_task_index"], r.get("_ng_attempt_index", 0)) for r in collected_records(output)]
    assert sorted(attempts) == [(0, 0), (1, 0), (2, 0), (2, 1)]  # only the infrastructure's failure ran again
