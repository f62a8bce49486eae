# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""One component's death is not everyone's, and nothing is lost: on a real stack (math under
ng_run, the scripted policy with 300 ms per turn), a resources server and the agent are SIGKILLed
in the middle of collections; every row still gets exactly one record, the servers come back,
and nothing of their sandboxes is left. The servers come back slowly (their supervisors wait
RESTART_DELAY_S before a restart, as on a busy node): the rollouts they held wait for them, not
for a fixed schedule. Metrics are scraped along the way."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import pytest

from prorl_gym.client import JobAPIError, ProRLClient
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack, collected_records
from prorl_gym.testing import environment_stack, supervised_server, supervisor_of

MATH = environment("math")
AGENT = f"+{MATH.agent_key}"
MATH_AGENT_FOLDER = Path(REPO_ROOT, "responses_api_agents/prorl_agent")
# Longer than the whole fixed retry schedule of before (2 + 4 + 8 s), which lost such rollouts.
RESTART_DELAY_S = 20


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ray_cluster):
    overrides = [f"{AGENT}.retry.backoff_s=0.5", f"{AGENT}.limits.policy_call_timeout_s=10"]
    logs = tmp_path_factory.mktemp("faults") / "logs"
    env = {"PRORL_RESTART_DELAY_S": str(RESTART_DELAY_S)}
    with environment_stack("math", logs, overrides, 300, ray_cluster, env, check_released=True) as stack:
        stack.tmp = logs.parent
        yield stack


def kill_when_busy(stack: Stack, folder: Path, busy, timeout_s: float = 60) -> int:
    """SIGKILL the server from `folder` once `busy()` says rollouts are in flight; its pid."""
    deadline = time.monotonic() + timeout_s
    while not busy():
        assert time.monotonic() < deadline, "nothing got busy"
        time.sleep(0.05)
    pid = supervised_server(stack.session, folder)
    os.kill(pid, signal.SIGKILL)
    return pid


def live_sandboxes(stack: Stack) -> int:
    return sum(1 for p in stack.sandbox_root.iterdir() if not p.name.startswith("."))


def test_a_resources_server_killed_mid_collection_loses_no_row(stack):
    output = stack.tmp / "killed_server.jsonl"
    with ThreadPoolExecutor(1) as pool:
        collection = pool.submit(stack.collect, MATH.agent, MATH.example, output, num_repeats=4)
        killed = kill_when_busy(stack, MATH.folder, lambda: live_sandboxes(stack) >= 8)
        collection.result(timeout=300)  # ng_collect_rollouts ends normally: no 500, no crash
    records = collected_records(output)
    assert len(records) == 20, "a record for every row"
    assert all(r["reward"] == 1.0 and r["failure"] is None for r in records), [r["failure"] for r in records]
    retried = [r for r in records if r["attempts"] > 1]
    assert retried, "the rollouts the dead server held were run again"
    assert all(f["infra"] for r in retried for f in r["attempt_failures"])
    waits = [r["timings"]["retry_wait_s"] for r in retried]
    assert min(waits) > 0 and max(waits) >= RESTART_DELAY_S  # they waited for it to be back, however long
    assert supervised_server(stack.session, MATH.folder) != killed  # started again, in the same stack
    assert stack._procs[-1].poll() is None, "ng_run went down with a server"


def test_the_agent_killed_mid_batch_serves_every_result_once_at_the_same_offsets(stack):
    async def scenario():
        async with ProRLClient(stack.agent_url) as client:
            rows = read_jsonl(MATH.example)
            batch = await client.submit(rows, samples_per_row=4)
            first, seen = [], client.stream(batch.batch_id)
            async for record in seen:
                first.append(record)
                if len(first) == 3:
                    break
            await seen.aclose()
            os.kill(supervised_server(stack.session, MATH_AGENT_FOLDER), 9)
            rest = [r async for r in client.stream(batch.batch_id, after=len(first))]  # across the restart
            again = [r async for r in client.stream(batch.batch_id)]  # the whole stream, from the journal
            return batch, first, rest, again

    batch, first, rest, again = asyncio.run(scenario())
    assert sorted(r.job_id for r in first + rest) == sorted(batch.job_ids), "each job exactly once"
    assert [r.wire() for r in again[:3]] == [r.wire() for r in first], "offsets kept across the restart"
    assert [r.job_id for r in again] == [r.job_id for r in first + rest]
    assert all(r.reward == 1.0 for r in again)
    restarted = [r for r in again if any(f.type == "agent_restarted" for f in r.attempt_failures)]
    assert restarted, "the jobs in flight at the kill ran again, counted in attempts"
    assert all(r.attempts >= 2 for r in restarted)


def test_the_agent_killed_mid_pause_comes_back_paused_at_its_version_and_loses_nothing(stack):
    async def scenario():
        async with ProRLClient(stack.agent_url) as client:
            await client.set_policy_version(4)
            batch = await client.submit(read_jsonl(MATH.example)[:3])
            await client.pause()
            os.kill(supervised_server(stack.session, MATH_AGENT_FOLDER), 9)
            for _ in range(600):  # the supervisor starts it again; its journal has the pause
                try:
                    state = await client.policy()
                    break
                except (aiohttp.ClientError, JobAPIError):
                    await asyncio.sleep(0.1)
            progress = await client.progress(batch.batch_id)
            resumed = await client.resume(version=5)
            records = [r async for r in client.stream(batch.batch_id)]
            return state, progress, resumed, records

    state, progress, resumed, records = asyncio.run(scenario())
    assert (state.version, state.paused) == (4, True) and progress.finished == 0  # held, nothing generated
    assert (resumed.version, resumed.paused) == (5, False)
    assert [r.reward for r in records] == [1.0] * 3 and all(set(r.policy_versions) == {5} for r in records)


def test_metrics_are_scraped_from_every_server(stack):
    asyncio.run(_one_rollout(stack))
    agent = scrape(stack.agent_url)
    assert 'prorl_rollouts_total{outcome="ok"}' in agent and "prorl_stage_duration_seconds_bucket" in agent
    assert "prorl_journal_bytes" in agent and "prorl_rollout_attempts_total" in agent
    servers = stack.server_urls()
    resources = scrape(servers[MATH.name])
    assert (
        "prorl_sandboxes_live" in resources
        and 'prorl_tool_call_seconds_count{outcome="ok",tool="python"}' in resources
    )
    model = scrape(servers["policy_model"])
    assert "prorl_policy_call_seconds_count" in model and "prorl_policy_endpoints_healthy 1.0" in model


async def _one_rollout(stack):
    async with ProRLClient(stack.agent_url) as client:
        batch = await client.submit(read_jsonl(MATH.example)[:1])
        assert [r.reward for r in await client.results(batch.batch_id)] == [1.0]


def scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return response.read().decode()


def test_a_run_in_flight_when_the_agent_stops_answers_a_shutdown_record(stack):
    """Last in this module: the agent is stopped for good (its supervisor too)."""
    row = read_jsonl(MATH.example)[0]
    row["responses_create_params"]["metadata"] = {"scripted_latency_ms": "20000"}  # RUN outlasts the stop
    deadline = time.monotonic() + 120
    while "\nprorl_jobs_active 0.0" not in scrape(stack.agent_url):  # the jobs the restarted agent reran
        assert time.monotonic() < deadline, "the agent's jobs never ended"
        time.sleep(0.2)
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(_post_run, stack.agent_url, row)
        deadline = time.monotonic() + 30
        while not live_sandboxes(stack):  # INIT done: RUN under way, waiting on the policy
            assert time.monotonic() < deadline, "the rollout never started"
            time.sleep(0.05)
        supervisor = supervisor_of(stack.session, MATH_AGENT_FOLDER)
        os.kill(supervisor, signal.SIGINT)  # as ng_run does at shutdown
        status, record = answer.result(timeout=60)
    assert status == 200, record
    assert record["failure"]["type"] == "shutdown" and record["_ng_failure_class"] == "shutdown"
    assert record["reward"] == 0.0 and record["task_id"] == row["task_id"]


def _post_run(url: str, row: dict) -> tuple[int, dict]:
    import json

    request = urllib.request.Request(f"{url}/run", data=json.dumps(row).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, {"body": exc.read().decode(errors="replace")}
