"""The math environment end to end: scripted policy + real ng_run + ng_collect_rollouts.

One stack for the module (starting ng_run costs ~20 s). Rows carry
`metadata.scripted_mode`, which NeMo Gym's vllm_model forwards to the policy endpoint,
so gold, wrong and malformed rollouts run in one collection.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from prorl_gym.stack import REPO_ROOT, Stack

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
AGENT = "math_agent.responses_api_agents.prorl_agent"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    sandbox_root = Path(tempfile.mkdtemp(prefix="prorl-e2e-", dir="/tmp"))  # reachable by the sandbox uid
    sandbox_root.chmod(0o711)
    overrides = [
        f"+math.resources_servers.math.sandbox.root_dir={sandbox_root}",
        f"+{AGENT}.limits.policy_call_timeout_s=5",
    ]
    with Stack(["configs/math.yaml"], overrides=overrides, policy_data=[str(EXAMPLE)], log_dir=tmp / "logs") as stack:
        stack.tmp = tmp
        yield stack
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left behind"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
    shutil.rmtree(sandbox_root)
    leftovers = subprocess.run(["pgrep", "-f", f"ng_run.*{stack.head_port}"], capture_output=True, text=True).stdout
    assert not leftovers.strip(), f"processes left behind: {leftovers}"


@pytest.fixture(scope="module")
def rollouts(stack) -> dict[str, list[dict]]:
    rows = []
    for mode in ("gold", "wrong", "malformed"):
        for line in EXAMPLE.read_text().splitlines():
            row = json.loads(line)
            row["responses_create_params"]["metadata"] = {"scripted_mode": mode}
            rows.append(row)
    inputs = stack.tmp / "modes.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    output = stack.tmp / "rollouts.jsonl"
    stack.collect("math_agent", inputs, output, num_repeats=2)
    by_mode: dict[str, list[dict]] = {}
    for record in read_jsonl(output) + read_jsonl(stack.tmp / "rollouts_failures.jsonl"):
        by_mode.setdefault(record["responses_create_params"]["metadata"]["scripted_mode"], []).append(record)
    return by_mode


def test_every_rollout_completed(rollouts):
    assert {mode: len(records) for mode, records in rollouts.items()} == {"gold": 10, "wrong": 10, "malformed": 10}
    assert all(r["failure"] is None for records in rollouts.values() for r in records)


def test_gold_scores_one(rollouts):
    assert [r["reward"] for r in rollouts["gold"]] == [1.0] * 10
    assert all(r["stop_reason"] == "answered" and r["num_tool_calls"] == 1 for r in rollouts["gold"])


def test_wrong_scores_zero(rollouts):
    assert [r["reward"] for r in rollouts["wrong"]] == [0.0] * 10


def test_malformed_calls_are_returned_to_the_policy_which_recovers(rollouts):
    for record in rollouts["malformed"]:
        assert record["malformed_tool_calls"] == 3 and record["reward"] == 1.0
        errors = [o["output"] for o in record["response"]["output"] if o["type"] == "function_call_output"]
        assert len(errors) == 3 and all(e.startswith("Error: ") for e in errors)


def test_token_ids_are_present_and_contiguous(rollouts):
    for record in (r for records in rollouts.values() for r in records):
        generations = [o for o in record["response"]["output"] if "generation_token_ids" in o]
        assert generations and all(o["prompt_token_ids"] and o["generation_log_probs"] for o in generations)
        assert record["token_ids_contiguous"] is True


def test_records_carry_stage_timings(rollouts):
    for record in rollouts["gold"]:
        assert all(record["timings"][f"{stage}_s"] > 0 for stage in ("init", "run", "eval"))


def test_aggregate_metrics_were_written(stack, rollouts):
    metrics = json.loads((stack.tmp / "rollouts_aggregate_metrics.json").read_text())[0]
    assert metrics["agent_metrics"]["failure_rate"] == 0.0
    assert metrics["agent_metrics"]["contiguous_fraction"] == 1.0


def test_a_dead_policy_endpoint_is_a_typed_failure_not_reward_zero(stack, rollouts):
    policy = stack._procs[0]  # the scripted policy: stop it, as if the GPU server died
    os.killpg(policy.pid, 9)
    policy.wait()
    output = stack.tmp / "dead.jsonl"
    stack.collect("math_agent", EXAMPLE, output, extra=["+limit=2"])
    failures = read_jsonl(stack.tmp / "dead_failures.jsonl")
    assert len(failures) == 2 and not read_jsonl(output)
    assert all(f["failure"]["type"] == "policy_error" and f["_ng_failure_class"] == "policy_error" for f in failures)
