# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Per-sample straggler control on a real stack (prorl_gym/jobs/stragglers.py): configs/math.yaml
under ng_run, the scripted policy answering each turn in 300 ms, and one sample of one prompt (the
first conversation of it the policy sees) 60 times slower: a straggler. Backfilled, it is replaced by
a fresh sample of the same prompt, its generation aborted at the policy (the scripted policy counts
generations whose client went away, as vLLM aborts them) and its sandbox released; evicted, its group
is admitted partial; waited for, what it cost is measured. Each batch's export is in its progress and
in /metrics."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

import aiohttp
import pytest

from prorl_gym.client import ProRLClient, agent_url
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
AGENT = "+math_agent.responses_api_agents.prorl_agent"


def sandbox_dirs(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if not p.name.startswith(".")]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    sandbox_root = Path(tempfile.mkdtemp(prefix="prorl-strag-", dir="/tmp"))  # reachable by the sandbox uid
    sandbox_root.chmod(0o711)
    overrides = [
        f"+math.resources_servers.math.sandbox.root_dir={sandbox_root}",
        f"{AGENT}.limits.policy_call_timeout_s=60",
    ]
    logs = tmp_path_factory.mktemp("stragglers") / "logs"
    with Stack(
        environment("math").config_paths(),
        overrides=overrides,
        policy_data=[str(EXAMPLE)],
        policy_args=["--latency-ms", "300"],
        log_dir=logs,
    ) as stack:
        stack.sandbox_root = sandbox_root
        stack.agent_url = asyncio.run(agent_url(f"http://127.0.0.1:{stack.head_port}", "math_agent"))
        yield stack
    assert not sandbox_dirs(sandbox_root), "sandbox directories left behind"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
    shutil.rmtree(sandbox_root)


def rows(slow_row: int, factor: float) -> list[dict]:
    """Three prompts; the first conversation of prompt `slow_row` (the first the policy sees with the setting:
    each test makes another prompt slow) `factor` times slower, the rest at 300 ms a turn."""
    out = read_jsonl(EXAMPLE)[:3]
    for i, row in enumerate(out):
        row["responses_create_params"]["metadata"] = {"scripted_mode": "gold"}
        if i == slow_row:
            row["responses_create_params"]["metadata"]["scripted_slow"] = json.dumps({"first": 1, "factor": factor})
    return out


async def get_json(url: str) -> dict:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return await response.json()


async def get_text(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return await response.text()


async def aborted_at_policy(stack) -> int:
    return (await get_json(f"http://127.0.0.1:{stack.policy_port}/stats"))["aborted"]


async def run_batch(stack, policy: str, slow_row: int, factor: float) -> tuple[list, object, int]:
    """3 prompts x 4 samples, one of them a straggler: records, progress, generations aborted at the policy
    meanwhile."""
    before = await aborted_at_policy(stack)
    async with ProRLClient(stack.agent_url) as client:
        batch = await client.submit(rows(slow_row, factor), samples_per_row=4, stragglers={"policy": policy, "k": 3.0})
        records = await asyncio.wait_for(client.results(batch.batch_id), 240)
        progress = await client.progress(batch.batch_id)
    return records, progress, await aborted_at_policy(stack) - before


async def until_no_sandboxes(stack) -> None:
    for _ in range(200):
        if not sandbox_dirs(stack.sandbox_root):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"sandboxes left: {sandbox_dirs(stack.sandbox_root)}")


@pytest.mark.timeout(600)
async def test_a_straggler_is_replaced_by_a_fresh_sample_its_generation_aborted_at_the_policy(stack):
    records, progress, aborted = await run_batch(stack, "backfill", slow_row=0, factor=60)  # 18 s a turn
    assert len(records) == 12 and all(r.failure is None and r.reward == 1.0 for r in records)
    replaced = [r for r in records if r.straggler is not None]
    assert len(replaced) == 1 and replaced[0].straggler.action == "replaced"
    assert (
        replaced[0].straggler.replacements == 1 and replaced[0].straggler.after_s > replaced[0].straggler.threshold_s
    )
    assert "[pace: slow]" not in json.dumps(replaced[0].response)  # the record is the fresh sample's
    assert aborted >= 1  # the straggler's generation, aborted at the endpoint when its run was cancelled
    s = progress.stragglers
    assert (s.policy, s.replaced, s.evicted, s.waited) == ("backfill", 1, 0, 0)
    assert progress.group_sizes == [4, 4, 4] and progress.usable_groups == 3
    await until_no_sandboxes(stack)
    metrics = await get_text(f"{stack.agent_url}/metrics")
    assert "prorl_stragglers_replaced_total 1.0" in metrics
    model = await get_text(f"{stack.server_urls()['policy_model']}/metrics")
    assert 'prorl_policy_calls_aborted_total{route="/v1/responses"}' in model


@pytest.mark.timeout(600)
async def test_a_straggler_evicted_and_its_group_admitted_partial(stack):
    records, progress, aborted = await run_batch(stack, "evict", slow_row=1, factor=60)
    evicted = [r for r in records if r.straggler is not None]
    assert len(records) == 12 and len(evicted) == 1 and evicted[0].straggler.action == "evicted"
    assert evicted[0].failure.type == "cancelled" and "evicted" in evicted[0].failure.message
    assert all(r.failure is None and r.reward == 1.0 for r in records if r is not evicted[0])
    assert aborted >= 1
    s = progress.stragglers
    assert (s.replaced, s.evicted) == (0, 1)
    assert progress.group_sizes == [4, 3, 4]  # reported, so a trainer's advantage estimate stays unbiased
    assert progress.usable_groups == 3 and progress.small_groups == []  # the partial group is admitted
    await until_no_sandboxes(stack)
    metrics = await get_text(f"{stack.agent_url}/metrics")
    assert "prorl_stragglers_evicted_total 1.0" in metrics


@pytest.mark.timeout(600)
async def test_a_straggler_waited_for_is_measured_and_exported(stack):
    records, progress, aborted = await run_batch(stack, "wait", slow_row=2, factor=15)  # 4.5 s a turn: waited for
    assert len(records) == 12 and all(r.failure is None for r in records)
    waited = [r for r in records if r.straggler is not None]
    assert len(waited) == 1 and waited[0].straggler.action == "waited" and aborted == 0
    s = progress.stragglers
    assert (s.waited, s.replaced, s.evicted, s.stragglers_running) == (1, 0, 0, 0)
    # the batch went on for the straggler, the policy mostly idle meanwhile: what it cost, exported
    assert s.wait_s > 0 and 0 < s.policy_idle_s <= s.wait_s
    metrics = await get_text(f"{stack.agent_url}/metrics")
    assert "prorl_stragglers_waited_total 1.0" in metrics
    lost = float(
        next(
            line.split()[1]
            for line in metrics.splitlines()
            if line.startswith("prorl_straggler_policy_idle_seconds_total")
        )
    )
    assert lost >= s.policy_idle_s
    live = await get_json(f"{stack.agent_url}/dashboard/api/live")
    assert live["stragglers"]["waited"] >= 1 and any(b["stragglers"] for b in live["batches"])
