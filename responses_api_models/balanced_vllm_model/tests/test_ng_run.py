# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Through NeMo Gym's CLI: ng_run with two policy endpoints given as a Hydra list, real
rollouts by the ProRL agent (math), and one endpoint killed in the middle of a collection, after
its rollouts' first turns: whatever they had generated, they run again from a fresh INIT on the
survivor and every row gets its reward."""

import asyncio
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import Stack, free_port
from responses_api_models.balanced_vllm_model.tests.harness import EXAMPLE, Policies

CONFIGS = [
    "configs/base.yaml",
    "resources_servers/math/configs/math.yaml",
    "responses_api_models/balanced_vllm_model/configs/balanced_vllm_model.yaml",
]
MODEL = "policy_model.responses_api_models.balanced_vllm_model"


def answered(port: int, url: str) -> int:
    """Policy calls the model server has had answered by endpoint `url` (its /metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    prefix = f'prorl_policy_call_seconds_count{{endpoint="{url}",outcome="ok"}} '
    return sum(int(float(line[len(prefix) :])) for line in text.splitlines() if line.startswith(prefix))


def endpoints(port: int) -> dict[str, dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/endpoints", timeout=5) as r:
        return {e["url"]: e for e in json.load(r)["endpoints"]}


def test_two_endpoints_from_the_cli_and_one_dies_mid_collection(tmp_path, sandbox_root, ray_cluster):
    policies = Policies(tmp_path)
    doomed, survivor = asyncio.run(policies.start(2, latency_ms=1500))
    model_port = free_port()
    overrides = [
        f"+policy_base_url=[{doomed.url},{survivor.url}]",  # the documented form for several endpoints
        f"+{MODEL}.port={model_port}",
        f"+{MODEL}.health_interval_s=0.5",
        f"+{MODEL}.health_timeout_s=1",
        f"+math.resources_servers.math.sandbox.root_dir={sandbox_root}",
        "+math_agent.responses_api_agents.prorl_agent.limits.policy_call_timeout_s=60",
    ]
    try:
        with Stack(CONFIGS, overrides=overrides, log_dir=tmp_path / "logs", ray=ray_cluster) as stack:
            assert list(endpoints(model_port)) == [doomed.url, survivor.url]
            # Ten concurrent rollouts of 2 turns (1.5 s each): kill one endpoint once all ten
            # sessions are placed (five each) and its five have their first turn, mid-way.
            output = tmp_path / "rollouts.jsonl"
            with ThreadPoolExecutor(1) as pool:
                collection = pool.submit(stack.collect, "math_agent", EXAMPLE, output, num_repeats=2)
                deadline = time.monotonic() + 60
                while [e["sessions"] for e in endpoints(model_port).values()] != [5, 5] or answered(
                    model_port, doomed.url
                ) < 5:
                    assert time.monotonic() < deadline and not collection.done(), endpoints(model_port)
                    time.sleep(0.05)
                doomed.kill()
                collection.result(timeout=120)
            # The five rollouts on the dead endpoint had policy output already; its death is still
            # the infrastructure's failure, so the agent ran them again, from a fresh INIT, on the
            # survivor; every row has its reward.
            assert not read_jsonl(output.with_name("rollouts_failures.jsonl"), missing_ok=True)
            records = read_jsonl(output, missing_ok=True)
            assert [r["reward"] for r in records] == [1.0] * 10
            retried = [r for r in records if r["attempts"] == 2]
            assert len(retried) == 5 and all(
                f["type"] == "policy_error" and f["infra"] and doomed.url in f["message"]
                for r in retried
                for f in r["attempt_failures"]
            )
            state = endpoints(model_port)
            assert state[doomed.url]["healthy"] is False and state[survivor.url]["sessions"] == 10

            again = tmp_path / "again.jsonl"  # new rollouts all go to the live endpoint
            stack.collect("math_agent", EXAMPLE, again)
            assert [r["reward"] for r in read_jsonl(again, missing_ok=True)] == [1.0] * 5
            assert not read_jsonl(again.with_name("again_failures.jsonl"), missing_ok=True)
            assert endpoints(model_port)[survivor.url]["sessions"] == 15
    finally:
        policies.stop_all()
