# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The job API end to end: the example trainer and the typed client against a real stack.

One stack for the module: configs/math.yaml under ng_run, the scripted policy with 400 ms
of generation latency (so that rollouts can be caught mid-flight) and 4 RUN workers (so a
batch finishes in waves and an early stop has something left to cancel). The last test
kills the policy endpoint; the module's teardown checks every sandbox was released.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path

import aiohttp
import pytest

from examples.training_loop import training_loop
from prorl_gym.client import JobAPIError, ProRLClient
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.testing import environment_stack

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
AGENT = "+math_agent.responses_api_agents.prorl_agent"


def rows(mode: str = "gold", n: int = 5) -> list[dict]:
    out = read_jsonl(EXAMPLE)[:n]
    for row in out:
        row["responses_create_params"]["metadata"] = {"scripted_mode": mode}
    return out


def sandbox_dirs(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if not p.name.startswith(".")]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ray_cluster):
    overrides = [
        f"{AGENT}.limits.policy_call_timeout_s=5",
        f"{AGENT}.max_run_workers=4",
        f"{AGENT}.jobs.max_batch_rows=16",
        f"{AGENT}.retry.recovery_timeout_s=3",  # the last test kills the only policy endpoint
    ]
    logs = tmp_path_factory.mktemp("jobs") / "logs"
    with environment_stack("math", logs, overrides, 400, ray_cluster, check_released=True) as stack:
        yield stack


@pytest.fixture
async def client(stack):
    async with ProRLClient(stack.agent_url) as client:
        yield client


async def until(predicate, timeout_s: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def running(client: ProRLClient) -> bool:
    return (await client.status()).stages["run"]["in_flight"] > 0


async def no_sandboxes_left(stack) -> None:
    async def empty() -> bool:
        return not sandbox_dirs(stack.sandbox_root)

    await until(empty, 10, "the sandboxes to be released")


async def test_the_training_loop_example_runs_end_to_end(client):
    data = rows("gold", 2) + rows("wrong", 4)[2:]  # prompts 0, 1 gold; 2, 3 wrong
    updates = []
    started = time.perf_counter()
    reports = await training_loop(
        client,
        data,
        steps=2,
        prompts_per_step=4,
        group_size=2,
        sampling={"temperature": 1.0},
        run_id=f"e2e-{os.getpid()}",
        update=updates.append,
    )
    assert [(r.submitted, r.received, r.usable, r.failures) for r in reports] == [(8, 8, 8, {})] * 2
    for report in reports:
        assert {g.prompt: g.rewards for g in report.groups} == {
            0: [1.0, 1.0],
            1: [1.0, 1.0],
            2: [0.0, 0.0],
            3: [0.0, 0.0],
        }
        assert report.kept == [] and all(a == 0.0 for g in report.groups for a in g.advantages)  # uniform groups
    assert len(updates) == 2
    # the second step was submitted before the first was consumed, so the two overlapped
    assert time.perf_counter() - started < sum(r.seconds for r in reports)
    status = await client.status()
    assert status.completed >= 16 and set(status.stages) == {"init", "run", "eval"}
    assert {"init_s", "run_s", "eval_s", "run_queue_s", "total_s"} <= set(status.timings)


async def test_the_training_loop_stops_each_step_early_once_k_results_are_usable(stack, client):
    reports = await training_loop(
        client,
        rows("gold", 4),
        steps=2,
        prompts_per_step=4,
        group_size=4,
        stop_after=6,
        run_id=f"early-{os.getpid()}",
    )
    for report in reports:
        cancelled = report.failures.get("cancelled", 0)
        assert report.received == report.submitted == 16 and report.usable >= 6 and cancelled > 0
        assert report.usable + cancelled == 16 and set(report.failures) == {"cancelled"}
        assert all(r == 1.0 for g in report.groups for r in g.rewards)  # cancelled samples are left out, not scored 0
    await no_sandboxes_left(stack)


async def test_stop_after_k_usable_results_cancels_the_rest_and_releases_their_sandboxes(stack, client):
    batch = await client.submit(rows("gold"), samples_per_row=4, stop_after=4)
    records = [r.wire() for r in await client.results(batch.batch_id)]
    statuses = [r["status"] for r in records]
    assert len(records) == 20 and set(statuses) <= {"completed", "cancelled"}
    assert 4 <= statuses.count("completed") <= 8 and statuses[:4] == ["completed"] * 4
    for record in records:
        if record["status"] == "cancelled":
            assert record["failure"]["type"] == "cancelled" and record["_ng_failure_class"] == "cancelled"
            assert "stop_after" in record["failure"]["message"] and record["reward"] == 0.0
        else:
            assert record["reward"] == 1.0 and record["failure"] is None and record["token_ids_contiguous"]
    assert (await client.progress(batch.batch_id)).model_dump(include={"total", "done", "stop_after"}) == {
        "total": 20,
        "done": True,
        "stop_after": 4,
    }
    await no_sandboxes_left(stack)


async def test_cancel_a_job_then_its_batch_mid_flight(stack, client):
    batch = await client.submit(rows("gold", 4), samples_per_row=2)
    await until(lambda: running(client), what="rollouts in RUN")
    first = await client.cancel_job(batch.job_ids[0])
    assert first.settled and first.cancelled in ([], [batch.job_ids[0]])
    started = time.perf_counter()
    rest = await client.cancel_batch(batch.batch_id)
    assert rest.settled and time.perf_counter() - started < 5 and rest.cancelled
    assert batch.job_ids[0] not in rest.cancelled
    polled = await client.poll(rest.cancelled[0])
    assert polled.status == "cancelled" and polled.cancel_requested
    records = [r.wire() for r in await client.results(batch.batch_id)]
    assert len(records) == 8 and {r["job_id"] for r in records} == set(batch.job_ids)
    assert sum(r["status"] == "cancelled" for r in records) == len(first.cancelled) + len(rest.cancelled)
    assert (await client.status()).stages["run"]["in_flight"] == 0
    await no_sandboxes_left(stack)


async def test_resubmission_is_idempotent_and_sse_streams_work(stack, client):
    batch_id = f"idem-{os.getpid()}"
    first = await client.submit(rows("gold", 1), batch_id=batch_id)
    again = await client.submit(rows("gold", 1), batch_id=batch_id)
    assert (again.created, again.new_jobs, again.job_ids) == (False, 0, first.job_ids)
    with pytest.raises(JobAPIError) as exc:
        await client.submit(rows("wrong", 1), job_ids=first.job_ids)
    assert exc.value.status == 409 and first.job_ids[0] in exc.value.detail
    records = [r.wire() for r in await client.results(batch_id)]
    assert [r["reward"] for r in records] == [1.0], [r["failure"] for r in records]
    headers = {"Accept": "text/event-stream"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{stack.agent_url}/batches/{batch_id}/results", headers=headers) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in (await response.text()).splitlines() if line.startswith("data: ")]
    assert [json.loads(e.removeprefix("data: "))["job_id"] for e in events] == first.job_ids


async def test_bad_requests_get_a_reason_and_accepted_work_goes_on(stack, client):
    batch = await client.submit(rows("gold", 2))
    bad = [
        ({"environment": "swe"}, rows("gold", 1), 400, "serves ['math', 'math_agent']"),
        ({}, [rows("gold", 1)[0], {"prompt": "no params"}, 3], 422, "2 malformed rows"),
        ({}, rows("gold", 1) * 17, 413, "limit of 16 rows"),
    ]
    for kwargs, data, status, reason in bad:
        with pytest.raises(JobAPIError) as exc:
            await client.submit(data, **kwargs)
        assert exc.value.status == status and reason in exc.value.detail, exc.value
    with pytest.raises(ValueError):  # the typed client refuses it before sending
        await client.submit(rows("gold", 1), sampling={"temperature": -1})
    async with aiohttp.ClientSession() as http:  # the server too, field by field
        body = {"rows": rows("gold", 1), "sampling": {"temperature": -1}}
        async with http.post(f"{stack.agent_url}/jobs", json=body) as response:
            refusal = await response.json()
    assert response.status == 422 and refusal["detail"] == "invalid request"
    assert refusal["errors"][0]["loc"] == ["sampling", "temperature"]
    with pytest.raises(JobAPIError) as exc:
        await client.poll("no-such-job")
    assert exc.value.status == 404
    records = [r.wire() for r in await client.results(batch.batch_id)]
    assert [r["status"] for r in records] == ["completed", "completed"], [r["failure"] for r in records]


async def test_a_branch_goes_on_from_a_turn_with_the_sandbox_and_transcript_as_they_were(stack, client):
    (row,) = rows("stateful", 1)
    original_batch = await client.submit([row], snapshots="every_turn")
    (original,) = await client.results(original_batch.batch_id)
    assert original.reward == 1.0 and [s.turn for s in original.snapshots] == [1, 2, 3, 4]
    after_turn_2 = original.snapshots[1]
    branches = await client.branch(original.job_id, turn=2, samples=2)
    records = await client.results(branches.batch_id)
    prefix = original.response["output"][: after_turn_2.output_items]
    for record in records:
        assert record.reward == 1.0 and record.failure is None
        assert record.branched_from.model_dump() == {"job_id": original.job_id, "turn": 2}
        assert record.num_turns == original.num_turns and record.token_ids_contiguous is True
        output = record.response["output"]
        assert output[: len(prefix)] == prefix  # the policy saw exactly the original's first two turns
        results = [item["output"] for item in output if item["type"] == "function_call_output"]
        # turns 3 and 4 read what turns 1 and 2 left: a Python variable, a file, the shell's directory
        assert results[2].strip() == row["expected_answer"] and results[3].strip() == "kept"
    with pytest.raises(JobAPIError) as no_snapshot:
        await client.branch(original.job_id, turn=9)
    assert no_snapshot.value.status == 409 and "turns [1, 2, 3, 4]" in str(no_snapshot.value)
    for batch in (original_batch, branches):  # done with them: their snapshots are released
        await client.acknowledge(batch.batch_id)
    await no_sandboxes_left(stack)


MALFORMED = [
    (b"{not json", "application/json"),
    (b"\xff\xfe\x00 not text", "application/octet-stream"),
    (b"plain words", "text/plain"),
    (b"[1, 2, 3]", "application/json"),
    (b'{"unexpected": {"deep": [null]}}', "application/json"),
]


async def test_every_route_answers_a_malformed_body_4xx_with_the_reason(stack, client):
    """Each POST route that takes a body, on the agent, the resources server and the model server
    (as their OpenAPI documents list them), and /jobs, which reads its own."""
    servers = {name: url for name, url in stack.server_urls().items() if name != "head"}
    async with aiohttp.ClientSession() as http:
        routes = []
        for url in servers.values():
            async with http.get(f"{url}/openapi.json") as response:
                paths = (await response.json())["paths"]
            routes += [url + path for path, ops in paths.items() if "requestBody" in ops.get("post", {})]
        routes.append(f"{stack.agent_url}/jobs")
        assert f"{stack.agent_url}/run" in routes and any(r.endswith("/seed_session") for r in routes)
        assert any(r.endswith("/python") for r in routes) and any(r.endswith("/v1/responses") for r in routes)
        answers = {}
        for route in routes:
            for body, content_type in MALFORMED:
                async with http.post(route, data=body, headers={"content-type": content_type}) as response:
                    answers[route, body] = (response.status, await response.text())
    wrong = {key: answer for key, answer in answers.items() if not 400 <= answer[0] < 500 or not answer[1]}
    assert not wrong, wrong
    assert not [key for key, (_, text) in answers.items() if "plain words" in text or "not text" in text]  # no echo


async def test_run_and_jobs_bound_a_row_and_check_it_against_the_environment(stack, client):
    (row,) = rows("gold", 1)
    huge = row | {"padding": "x" * (9 << 20)}  # over the default bound of 8 MiB per row
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{stack.agent_url}/run", json=huge) as response:
            assert response.status == 413 and "limit of 8388608 bytes on /run" in (await response.json())["detail"]
        async with http.post(f"{stack.agent_url}/run", data=b"{not json") as response:
            assert response.status == 422
    with pytest.raises(JobAPIError) as exc:
        await client.submit([row, huge])
    assert exc.value.status == 413 and "per row" in exc.value.detail
    no_answer = {k: v for k, v in row.items() if k != "expected_answer"}  # math's own row model needs it
    with pytest.raises(JobAPIError) as exc:
        await client.submit([row, no_answer])
    assert exc.value.status == 422 and "do not fit the environment's row model" in exc.value.detail
    assert exc.value.body["rows"] == [{"index": 1, "error": "expected_answer: Field required"}]
    assert (await client.status()).active_jobs == 0  # nothing of a refused batch runs


async def test_a_deadline_ends_a_batch_with_a_straggler_on_time(stack, client):
    data = rows("gold", 2)
    straggler = rows("gold", 3)[2]
    # each of its turns takes 4.5 s (under the policy call timeout: slow, not failing): 9 s and more in all
    straggler["responses_create_params"]["metadata"]["scripted_latency_ms"] = "4500"
    started = time.monotonic()
    batch = await client.submit([*data, straggler], samples_per_row=2, min_group_size=2, deadline_s=7)
    records = [record async for record in client.stream(batch.batch_id)]
    assert time.monotonic() - started < 9  # the straggler's turns alone would take longer
    by_task = {}
    for record in records:
        by_task.setdefault(record.task_id, []).append(record)
    assert all(r.reward == 1.0 and r.failure is None for t in data for r in by_task[t["task_id"]])
    assert [r.failure.type.value for r in by_task[straggler["task_id"]]] == ["cancelled"] * 2
    progress = await client.progress(batch.batch_id)
    assert progress.expired and (progress.groups, progress.usable_groups, progress.small_groups) == (3, 2, [2])
    await no_sandboxes_left(stack)


async def policy_stats(stack) -> dict:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{stack.policy_port}/stats") as response,
    ):
        return await response.json()


async def policy_generations(stack) -> int:
    """Generations the scripted policy has answered or is answering (its own count)."""
    stats = await policy_stats(stack)
    answered = sum(n for path, n in stats["paths"].items() if path in ("/v1/chat/completions", "/v1/completions"))
    return answered + stats["generating"]


async def load_weights(stack, version: int | None) -> None:
    """The scripted policy's stand-in for a weight update: its answers say the version from now on."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{stack.policy_port}/weights", json={"version": version}) as response,
    ):
        assert response.status == 200


def weights_marks(record) -> list[int]:
    """The weights version each generated turn of a record says it came from, in order."""
    texts = [
        "".join(part.get("text", "") for part in item.get("content") or [])
        for item in record.response["output"]
        if item.get("type") == "message" and item.get("role") == "assistant"
    ]
    return [int(mark) for text in texts for mark in re.findall(r"\[weights v(\d+)\]", text)]


async def test_a_weight_update_pauses_generation_and_every_turn_says_its_version(stack, client):
    async with aiohttp.ClientSession() as http:

        async def policy(path: str, body: dict | None = None) -> dict:
            async with http.post(f"{stack.agent_url}/policy/{path}", json=body or {}) as response:
                assert response.status == 200, await response.text()
                return await response.json()

        async def quiet() -> bool:  # an earlier test's cancelled calls may still be generating there
            return (await policy_stats(stack))["generating"] == 0

        await until(quiet, 30, "the policy to finish earlier calls")
        await load_weights(stack, 1)
        await policy("version", {"version": 1})
        batch = await client.submit(rows("gold", 4))
        await until(lambda: running(client), what="rollouts to run")
        await asyncio.sleep(0.5)  # some turns done under version 1
        assert (await policy("pause", {"abort_in_flight": True}))["paused"]
        await asyncio.sleep(0.6)  # calls that were in flight at the model server finish there (discarded)
        before = await policy_generations(stack)
        await load_weights(stack, 2)  # the update, while nothing generates
        await asyncio.sleep(1.5)
        async with http.get(f"{stack.agent_url}/policy") as response:
            state = await response.json()
        assert await policy_generations(stack) == before  # nothing generated while paused
        assert state["paused"] and state["held"] + state["aborted"] > 0 and state["paused_s"] >= 2
        resumed = await policy("resume", {"version": 2})
        assert not resumed["paused"] and resumed["version"] == 2
        records = [record async for record in client.stream(batch.batch_id)]
    await load_weights(stack, None)
    assert [(r.reward, r.failure) for r in records] == [(1.0, None)] * 4  # a pause is not a failure
    # every turn's version is the one whose weights generated it (an aborted call's output never kept)
    assert all(weights_marks(r) == r.policy_versions and len(r.policy_versions) == r.num_turns for r in records)
    assert any(r.oldest_policy_version == 1 and r.newest_policy_version == 2 for r in records)  # spans the update


async def test_rollouts_staler_than_the_batch_allows_run_again_or_come_back_flagged(client):
    await client.set_policy_version(10)
    flagged = await client.submit(rows("gold", 2), max_staleness=0, on_stale="flag")
    rerun = await client.submit(rows("gold", 4)[2:], max_staleness=0)

    async def all_running() -> bool:  # the 4 RUN workers busy with the 4 rollouts
        return (await client.status()).stages["run"]["in_flight"] >= 4

    await until(all_running, what="all four rollouts to run")
    await asyncio.sleep(0.2)  # their first turns sent under version 10
    await client.set_policy_version(11)  # new weights, no pause: turns from here on are version 11
    flagged_records = [r async for r in client.stream(flagged.batch_id)]
    rerun_records = [r async for r in client.stream(rerun.batch_id)]
    # started under 10, finished when 11 is current: one version behind, beyond max_staleness 0
    assert [(r.oldest_policy_version, r.staleness, r.stale) for r in flagged_records] == [(10, 1, True)] * 2
    # run again from INIT under 11: within the bound
    assert [(r.staleness, r.stale, set(r.policy_versions)) for r in rerun_records] == [(0, False, {11})] * 2
    assert all(r.reward == 1.0 for r in flagged_records + rerun_records)


async def test_dynamic_sampling_starts_rows_until_k_groups_have_a_learning_signal(stack, client):
    # row 0 always solved (a group without a signal); rows 1-3 drawn gold and wrong in turn per sample
    data = rows("gold", 1) + rows("coin", 4)[1:]
    batch = await client.submit(data, samples_per_row=2, target_groups=2)
    records = [record async for record in client.stream(batch.batch_id)]
    progress = await client.progress(batch.batch_id)
    assert (progress.informative_groups, progress.dropped_groups, progress.waiting_groups) == (2, 1, 0)
    by_task: dict[str, list] = {}
    for record in records:
        by_task.setdefault(record.task_id, []).append(record)
    ran = [t["task_id"] for t in data[:3]]
    assert [sorted(r.reward for r in by_task[t]) for t in ran] == [[1.0, 1.0], [0.0, 1.0], [0.0, 1.0]]
    assert [r.failure.type.value for r in by_task[data[3]["task_id"]]] == ["cancelled"] * 2  # never needed
    await no_sandboxes_left(stack)


async def test_the_async_training_example_overlaps_generation_with_training_and_bounds_staleness(client):
    reports = await training_loop(
        client,
        rows("gold", 2),
        steps=3,
        prompts_per_step=2,
        group_size=2,
        run_id=f"async-{os.getpid()}",
        mode="async",
        train_s=1.0,
        weight_updates=True,
        max_staleness=1,
        deadline_s=60,
    )
    assert [(r.received, r.usable, r.stale) for r in reports] == [(4, 4, 0)] * 3
    # step n+1 generated while step n trained: from version n, and n+1 after the update's pause
    assert reports[0].versions == [0] and all(set(r.versions) <= {n - 1, n} for n, r in enumerate(reports))
    assert (await client.policy()).version == 3 and not (await client.policy()).paused


async def test_a_dead_policy_endpoint_is_a_policy_error_never_reward_zero(stack, client):
    batch = await client.submit(rows("gold"), samples_per_row=2)
    await until(lambda: running(client), what="rollouts in RUN")
    policy = stack._procs[0]  # the scripted policy: kill it, as if the GPU server died
    os.killpg(policy.pid, 9)
    policy.wait()
    records = [r.wire() for r in await asyncio.wait_for(client.results(batch.batch_id), 60)]
    assert len(records) == 10
    errors = [r for r in records if r["failure"]]
    assert errors and all(
        r["failure"]["type"] == "policy_error" and r["_ng_failure_class"] == "policy_error" for r in errors
    )
    assert all(r["reward"] == 1.0 for r in records if not r["failure"])  # never a silent 0
    status = await client.status()  # the server keeps serving
    assert status.failed_by_type["policy_error"] >= len(errors) and status.active_jobs == 0
    late = await client.results((await client.submit(rows("gold", 1))).batch_id)
    assert late[0].failure.type == "policy_error"
    await no_sandboxes_left(stack)
