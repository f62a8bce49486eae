# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A policy killed for good is told, not waited on (prorl_gym/pipeline/policy_health.py), on a real stack:
configs/math.yaml under ng_run, the scripted policy (400 ms per answer) killed mid-batch with
retry.recovery_timeout_s left at its 600 s default and policy_health.grace_s at 4 s. Once no endpoint has
been healthy for the grace period: the batch's stream says `policy_down` (how long, which endpoint, its
last error) and its rollouts end typed policy_down; /status, /metrics and the dashboard say so; a /run
caller gets a policy_down record at once, without a sandbox being made. The policy back, work goes on."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from prorl_gym.client import ProRLClient
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.testing import environment_stack

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
AGENT = "+math_agent.responses_api_agents.prorl_agent"
GRACE_S = 4.0


def sandbox_dirs(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if not p.name.startswith(".")]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ray_cluster):
    overrides = [
        f"{AGENT}.max_run_workers=4",
        f"{AGENT}.policy_health.grace_s={GRACE_S}",
        f"{AGENT}.policy_health.poll_s=0.5",
    ]
    logs = tmp_path_factory.mktemp("down") / "logs"
    with environment_stack("math", logs, overrides, 400, ray_cluster, check_released=True) as stack:
        yield stack


async def until(predicate, timeout_s: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.text()


@pytest.mark.timeout(600)
async def test_a_policy_killed_for_good_is_told_everywhere_and_no_rollout_waits_for_it(stack):
    rows = read_jsonl(EXAMPLE)
    async with ProRLClient(stack.agent_url) as client:
        batch = await client.submit(rows, samples_per_row=2)
        events = []
        reading = asyncio.ensure_future(client.results(batch.batch_id, on_event=events.append))

        async def running() -> bool:
            return (await client.status()).stages["run"]["in_flight"] > 0

        await until(running, what="rollouts in RUN")
        killed = time.monotonic()
        stack.kill_policy()  # as a GPU server that dies for good
        # retry.recovery_timeout_s is 600 s: rollouts waiting for the policy would each wait that long
        records = await asyncio.wait_for(reading, 300)
        told_after_s = time.monotonic() - killed

        down = [event for event in events if event.event == "policy_down"]
        assert len(down) == 1 and down[0].down and down[0].unhealthy_s >= GRACE_S, events
        assert down[0].endpoints[0]["url"] == f"http://127.0.0.1:{stack.policy_port}/v1"
        assert down[0].endpoints[0]["last_error"] and "policy_down" in down[0].message
        failed = [r for r in records if r.failure is not None]
        assert len(records) == 10 and failed
        assert all(r.failure.type == "policy_down" and r.failure.infra for r in failed), [r.failure for r in failed]
        assert all(r.reward == 1.0 for r in records if r.failure is None)

        status = await client.status()
        assert status.policy_health.down and not status.policy_health.healthy
        assert status.failed_by_type["policy_down"] == len(failed)
        _, metrics = await get(f"{stack.agent_url}/metrics")
        assert "prorl_policy_down 1.0" in metrics and "prorl_policy_declared_down_total 1.0" in metrics
        _, live = await get(f"{stack.agent_url}/dashboard/api/live")
        assert '"down":true' in live.replace(" ", "")

        # /run (ng_collect_rollouts, NeMo RL): a typed answer at once, and no sandbox made for it
        async with aiohttp.ClientSession() as http, http.post(f"{stack.agent_url}/run", json=rows[0]) as response:
            record = await response.json()
        assert response.status == 200 and record["failure"]["type"] == "policy_down"
        assert record["_ng_failure_class"] == "policy_down" and record["attempts"] == 0
        assert not sandbox_dirs(stack.sandbox_root)

        stack.start_policy_again()

        async def up() -> bool:
            return not (await client.status()).policy_health.down

        await until(up, what="the policy up again")
        again = await client.results((await client.submit(rows[:2])).batch_id)
        assert [r.reward for r in again] == [1.0, 1.0]
        _, metrics = await get(f"{stack.agent_url}/metrics")
        assert "prorl_policy_down 0.0" in metrics
    print(f"policy killed: its rollouts ended policy_down {told_after_s:.1f}s later (grace {GRACE_S}s)")
