"""The code environment end to end: scripted policy + real ng_run + ng_collect_rollouts.

One stack for the module (ng_run takes ~20 s to start). Rows carry
`metadata.scripted_mode`, which NeMo Gym's vllm_model forwards to the policy endpoint, so
gold, wrong and malformed rollouts of every example run in one collection.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from prorl_gym.stack import REPO_ROOT, Stack

EXAMPLE = REPO_ROOT / "resources_servers" / "code" / "data" / "example.jsonl"
MODES = ("gold", "wrong", "malformed")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory) -> dict[str, list[dict]]:
    tmp = tmp_path_factory.mktemp("code-e2e")
    sandbox_root = Path(tempfile.mkdtemp(prefix="prorl-code-e2e-", dir="/tmp"))  # reachable by the sandbox uid
    sandbox_root.chmod(0o711)
    rows = []
    for mode in MODES:
        for line in EXAMPLE.read_text().splitlines():
            row = json.loads(line)
            row["responses_create_params"]["metadata"] = {"scripted_mode": mode}
            rows.append(row)
    inputs, output = tmp / "modes.jsonl", tmp / "rollouts.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    overrides = [f"+code.resources_servers.code.sandbox.root_dir={sandbox_root}"]
    with Stack(["configs/code.yaml"], overrides=overrides, policy_data=[str(EXAMPLE)], log_dir=tmp / "logs") as stack:
        stack.collect("code_agent", inputs, output)
    # Agent sandboxes and eval sandboxes alike are gone.
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left behind"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
    shutil.rmtree(sandbox_root)
    by_mode: dict[str, list[dict]] = {}
    for record in read_jsonl(output) + read_jsonl(tmp / "rollouts_failures.jsonl"):
        by_mode.setdefault(record["responses_create_params"]["metadata"]["scripted_mode"], []).append(record)
    return by_mode


def test_every_rollout_completed(rollouts):
    assert {mode: len(records) for mode, records in rollouts.items()} == {mode: 5 for mode in MODES}
    assert all(r["failure"] is None for records in rollouts.values() for r in records)


def test_gold_scores_one_after_writing_and_running_its_code(rollouts):
    for record in rollouts["gold"]:
        assert record["reward"] == 1.0 and record["pass_fraction"] == 1.0, record["reason"]
        assert record["stop_reason"] == "answered" and record["num_tool_calls"] == 2


def test_wrong_scores_zero_with_a_reason(rollouts):
    for record in rollouts["wrong"]:
        assert record["reward"] == 0.0 and record["tests_passed"] < record["tests_total"] and record["reason"]


def test_malformed_calls_are_returned_to_the_policy_which_recovers(rollouts):
    for record in rollouts["malformed"]:
        assert record["malformed_tool_calls"] == 3 and record["reward"] == 1.0
        errors = [o["output"] for o in record["response"]["output"] if o["type"] == "function_call_output"][:3]
        assert all(e.startswith("Error: ") for e in errors)


def test_token_ids_are_contiguous(rollouts):
    assert all(r["token_ids_contiguous"] is True for records in rollouts.values() for r in records)
