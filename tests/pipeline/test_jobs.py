# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""JobManager with a fake rollout coroutine: submission, streaming, idempotency, cancellation, bounds, status.

The fake's rollouts wait until the test finishes them (in any order), so completion order,
cancellation mid-rollout and admission bounds are all under the test's control.
"""

from __future__ import annotations

import asyncio

import pytest

from prorl_gym.client import JobLimits, SubmitRequest
from prorl_gym.pipeline.jobs import JobError, JobManager
from prorl_gym.pipeline.records import RolloutRecord


def row(i: int) -> dict:
    return {"responses_create_params": {"input": f"question {i}", "temperature": 0.0}, "task_id": f"t{i}"}


class FakeRollout:
    """Each call waits on a future the test resolves; records which calls were cancelled."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict, asyncio.Future]] = []
        self.cancelled: list[dict] = []

    async def __call__(self, row: dict) -> RolloutRecord:
        future = asyncio.get_running_loop().create_future()
        self.calls.append((row, future))
        try:
            return await future
        except asyncio.CancelledError:
            self.cancelled.append(row)
            raise

    def finish(self, index: int, reward: float = 1.0, failure: dict | None = None, **timings: float) -> None:
        row, future = self.calls[index]
        record = row | {"reward": reward, "failure": failure, "timings": timings or {"run_s": 1.0}}
        future.set_result(RolloutRecord.model_validate(record))


async def turn(times: int = 5) -> None:
    """Let the event loop run the tasks and callbacks that are ready."""
    for _ in range(times):
        await asyncio.sleep(0)


async def collect(manager: JobManager, batch_id: str, after: int = 0) -> list[dict]:
    """The stream's records as the wire has them."""
    return [r.wire() async for r in manager.follow(batch_id, after) if r is not None]


STAGES = {"init": {"workers": 2, "waiting": 1, "in_flight": 2}}


@pytest.fixture
def fake() -> FakeRollout:
    return FakeRollout()


@pytest.fixture
async def manager(fake):
    limits = JobLimits(max_active_jobs=10, max_batch_rows=4, max_batch_jobs=8, cancel_wait_s=2)
    manager = JobManager(fake, limits, environments=("math", "math_agent"), stage_stats=lambda: STAGES)
    manager.start()
    yield manager
    await manager.close()


def submit(manager: JobManager, rows: list, **kwargs):
    return manager.submit(SubmitRequest(rows=rows, **kwargs))


async def test_submit_returns_ids_at_once_and_applies_sampling_per_sample(manager, fake):
    batch = submit(manager, [row(0), row(1)], samples_per_row=2, sampling={"temperature": 0.7, "seed": 3})
    assert batch.created and batch.new_jobs == 4
    assert batch.job_ids == [f"{batch.batch_id}/{i}/{s}" for i in (0, 1) for s in (0, 1)]
    await turn()
    assert len(fake.calls) == 4
    params = fake.calls[0][0]["responses_create_params"]
    assert params == {"input": "question 0", "temperature": 0.7, "seed": 3}
    assert (await manager.job(batch.job_ids[0])).status == "running"


async def test_results_stream_in_completion_order_and_the_stream_ends_with_the_batch(manager, fake):
    batch = submit(manager, [row(0), row(1), row(2)])
    await turn()
    stream = asyncio.create_task(collect(manager, batch.batch_id))
    for index, reward in ((2, 1.0), (0, 0.0), (1, 1.0)):
        fake.finish(index, reward)
        await turn()
    records = await asyncio.wait_for(stream, 1)
    assert [r["job_id"] for r in records] == [batch.job_ids[i] for i in (2, 0, 1)]
    assert all(r["batch_id"] == batch.batch_id and r["status"] == "completed" for r in records)
    assert [r["reward"] for r in records] == [1.0, 0.0, 1.0] and records[0]["task_id"] == "t2"
    # a late consumer gets the whole batch; a resuming one what it has not seen
    assert len(await collect(manager, batch.batch_id)) == 3
    assert [r["job_id"] for r in await collect(manager, batch.batch_id, after=2)] == [batch.job_ids[1]]
    polled = await manager.job(batch.job_ids[1])
    assert polled.status == "completed" and polled.record.reward == 1.0 and polled.batch_ids == [batch.batch_id]
    assert (await manager.batch(batch.batch_id)).model_dump() == {
        "batch_id": batch.batch_id,
        "total": 3,
        "finished": 3,
        "usable": 3,
        "done": True,
        "stop_after": None,
    }


async def test_an_idle_stream_sends_heartbeats(fake):
    manager = JobManager(fake, JobLimits(heartbeat_s=0.05))
    manager.start()
    batch = submit(manager, [row(0)])
    stream = manager.follow(batch.batch_id)
    assert await asyncio.wait_for(anext(stream), 1) is None
    fake.finish(0)
    assert (await asyncio.wait_for(anext(stream), 1)).status == "completed"
    await manager.close()


async def test_resubmitting_the_same_ids_never_runs_a_job_twice(manager, fake):
    first = submit(manager, [row(0), row(1)], batch_id="step-1")
    again = submit(manager, [row(0), row(1)], batch_id="step-1")
    assert not again.created and again.new_jobs == 0 and again.job_ids == first.job_ids
    # the same job ids under a new batch: the new batch shares the jobs
    await turn()
    fake.finish(0)
    await turn()
    shared = submit(manager, [row(0), row(1)], job_ids=first.job_ids)
    assert shared.created and shared.new_jobs == 0 and shared.batch_id != "step-1"
    fake.finish(1)
    await turn()
    assert len(fake.calls) == 2
    assert [r["job_id"] for r in await collect(manager, shared.batch_id)] == first.job_ids
    assert (await manager.job(first.job_ids[0])).batch_ids == ["step-1", shared.batch_id]


async def test_conflicting_content_for_an_existing_id_is_a_conflict(manager, fake):
    submit(manager, [row(0)], job_ids=["job-a"], batch_id="b1")
    with pytest.raises(JobError) as exc:
        submit(manager, [row(1)], job_ids=["job-a"])
    assert exc.value.status == 409 and "job-a" in exc.value.detail
    with pytest.raises(JobError) as exc:  # other sampling parameters are other content too
        submit(manager, [row(0)], job_ids=["job-a"], sampling={"temperature": 1.0})
    assert exc.value.status == 409
    with pytest.raises(JobError) as exc:
        submit(manager, [row(0), row(1)], batch_id="b1")
    assert exc.value.status == 409 and "b1" in exc.value.detail
    await turn()
    assert len(fake.calls) == 1


async def test_cancelling_a_job_cancels_its_rollout_and_streams_a_cancelled_record(manager, fake):
    batch = submit(manager, [row(0), row(1)])
    await turn()
    result = await manager.cancel_job(batch.job_ids[0])
    assert result.cancelled == [batch.job_ids[0]] and result.settled
    assert fake.cancelled == [fake.calls[0][0]]  # the coroutine itself saw CancelledError
    job = await manager.job(batch.job_ids[0])
    assert job.status == "cancelled" and job.cancel_requested
    record = job.record.wire()
    assert record["failure"]["type"] == "cancelled" and record["_ng_failure_class"] == "cancelled"
    assert record["reward"] == 0.0 and record["task_id"] == "t0"
    assert (await manager.cancel_job(batch.job_ids[0])).cancelled == []  # finished: nothing to cancel
    fake.finish(1)
    await turn()
    records = await collect(manager, batch.batch_id)
    assert [r["status"] for r in records] == ["cancelled", "completed"]


async def test_a_job_cancelled_before_its_rollout_started_still_gets_a_record(manager, fake):
    batch = submit(manager, [row(0)])
    result = await manager.cancel_batch(batch.batch_id)  # no turn of the loop: the coroutine never ran
    assert result.settled and not fake.calls
    assert (await manager.job(batch.job_ids[0])).record.failure.type == "cancelled"


async def test_cancelling_a_batch_leaves_finished_jobs_alone(manager, fake):
    batch = submit(manager, [row(0), row(1), row(2)])
    await turn()
    fake.finish(1)
    await turn()
    result = await manager.cancel_batch(batch.batch_id)
    assert sorted(result.cancelled) == [batch.job_ids[0], batch.job_ids[2]] and result.settled
    assert len(fake.cancelled) == 2
    statuses = {r["job_id"]: r["status"] for r in await collect(manager, batch.batch_id)}
    assert statuses == {batch.job_ids[0]: "cancelled", batch.job_ids[1]: "completed", batch.job_ids[2]: "cancelled"}


async def test_stop_after_k_usable_results_cancels_the_rest(manager, fake):
    batch = submit(manager, [row(0), row(1), row(2), row(3)], samples_per_row=2, stop_after=2)
    await turn()
    fake.finish(0, failure={"stage": "run", "type": "policy_error", "message": "down"})  # not usable
    fake.finish(1)
    await turn()
    assert not fake.cancelled
    fake.finish(2)  # the second usable result
    await turn(10)
    records = await asyncio.wait_for(collect(manager, batch.batch_id), 1)
    assert [r["status"] for r in records[:3]] == ["failed", "completed", "completed"]
    assert {r["status"] for r in records[3:]} == {"cancelled"} and len(records) == 8
    assert len(fake.cancelled) == 5 and "stop_after" in records[-1]["failure"]["message"]


async def test_stop_after_set_later_applies_at_once_if_enough_results_exist(manager, fake):
    batch = submit(manager, [row(0), row(1), row(2)])
    await turn()
    fake.finish(0)
    await turn()
    assert (await manager.stop_after(batch.batch_id, 2)).cancelled == []
    result = await manager.stop_after(batch.batch_id, 1)
    assert sorted(result.cancelled) == batch.job_ids[1:] and result.settled
    with pytest.raises(JobError) as exc:
        await manager.stop_after(batch.batch_id, 0)
    assert exc.value.status == 422


@pytest.mark.parametrize(
    ("rows", "kwargs", "status", "reason"),
    [
        ([row(0)] * 5, {}, 413, "limit of 4 rows"),
        ([row(0)] * 3, {"samples_per_row": 3}, 413, "9 jobs"),
        ([], {}, 422, "at least one row"),
        ([row(0)], {"environment": "swe"}, 400, "serves ['math', 'math_agent']"),
        ([row(0), {"responses_create_params": {"input": []}}, "text", {"x": 1}], {}, 422, "3 malformed rows"),
        ([row(0), row(1)], {"job_ids": ["a"]}, 422, "2 distinct ids"),
        ([row(0), row(1)], {"job_ids": ["a", "a"]}, 422, "2 distinct ids"),
    ],
)
async def test_bad_requests_are_refused_with_a_reason(manager, fake, rows, kwargs, status, reason):
    with pytest.raises(JobError) as exc:
        submit(manager, rows, **kwargs)
    assert exc.value.status == status and reason in exc.value.detail
    await turn()
    assert not fake.calls and (await manager.status()).active_jobs == 0


async def test_malformed_rows_are_listed_by_index(manager):
    manager._validate_row = lambda r: r["task_id"]  # the agent passes its full row validation here
    rows = [row(0), {"responses_create_params": {"input": "q"}}, 7]
    with pytest.raises(JobError) as exc:
        submit(manager, rows)
    assert [e["index"] for e in exc.value.extra["rows"]] == [1, 2]
    assert "task_id" in exc.value.extra["rows"][0]["error"] and "JSON object" in exc.value.extra["rows"][1]["error"]


async def test_a_full_service_says_429_and_keeps_what_it_accepted(manager, fake):
    first = submit(manager, [row(i) for i in range(4)], samples_per_row=2)  # 8 of 10
    with pytest.raises(JobError) as exc:
        submit(manager, [row(i) for i in range(2)], samples_per_row=2)
    assert exc.value.status == 429 and "retry later" in exc.value.detail.lower()
    assert not submit(manager, [row(0)], samples_per_row=2, job_ids=first.job_ids[:2]).new_jobs  # reuse costs nothing
    await turn()
    for i in range(8):
        fake.finish(i)
    await turn()
    assert len(await collect(manager, first.batch_id)) == 8
    assert submit(manager, [row(9)]).new_jobs == 1  # room again


async def test_status_reports_stages_counts_and_timing_percentiles(manager, fake):
    batch = submit(manager, [row(i) for i in range(4)])
    await turn()
    fake.finish(0, run_s=1.0, init_s=0.1)
    fake.finish(1, run_s=3.0, init_s=0.2)
    fake.finish(2, failure={"stage": "eval", "type": "eval_error", "message": "x"}, run_s=2.0)
    await turn()
    await manager.cancel_job(batch.job_ids[3])
    status = await manager.status()
    assert status.stages == STAGES
    assert (status.active_jobs, status.retained_jobs, status.retained_batches) == (0, 4, 1)
    assert (status.completed, status.failed, status.cancelled) == (2, 1, 1)
    assert status.failed_by_type == {"eval_error": 1, "cancelled": 1}
    assert status.timings["run_s"] == {"p50": 2.0, "p90": 3.0, "p99": 3.0, "n": 3}
    assert status.timings["init_s"]["n"] == 2 and status.limits.max_active_jobs == 10


async def test_a_crashing_rollout_is_an_agent_error_record(manager):
    async def crash(row):
        raise RuntimeError("bug")

    manager._rollout = crash
    batch = submit(manager, [row(0)])
    records = await asyncio.wait_for(collect(manager, batch.batch_id), 1)
    assert records[0]["status"] == "failed" and records[0]["failure"]["type"] == "agent_error"
    assert "bug" in records[0]["failure"]["message"]


async def test_finished_batches_are_forgotten_beyond_the_retention_bound(fake):
    manager = JobManager(fake, JobLimits(retain_jobs=2))
    manager.start()
    old, new = submit(manager, [row(0), row(1)]), submit(manager, [row(2), row(3)])
    await turn()
    for i in range(4):
        fake.finish(i)
    await turn()
    with pytest.raises(JobError) as exc:
        await manager.job(old.job_ids[0])
    assert exc.value.status == 404
    assert (await manager.batch(new.batch_id)).done and (await manager.status()).retained_jobs == 2
    # an expired id is new again
    assert submit(manager, [row(0)], job_ids=[old.job_ids[0]]).new_jobs == 1
    await manager.close()


async def test_close_cancels_everything_ends_streams_and_refuses_new_work(fake):
    manager = JobManager(fake, JobLimits(cancel_wait_s=1))
    with pytest.raises(JobError) as exc:
        submit(manager, [row(0)])
    assert exc.value.status == 503
    manager.start()
    batch = submit(manager, [row(0), row(1)])
    await turn()
    stream = asyncio.create_task(collect(manager, batch.batch_id))
    await manager.close()
    assert len(fake.cancelled) == 2
    assert [r["status"] for r in await asyncio.wait_for(stream, 1)] == ["cancelled", "cancelled"]
    with pytest.raises(JobError):
        submit(manager, [row(2)])


async def test_unknown_ids_are_404(manager):
    for call in (manager.job("nope"), manager.batch("nope"), manager.cancel_job("nope"), manager.cancel_batch("nope")):
        with pytest.raises(JobError) as exc:
            await call
        assert exc.value.status == 404
    with pytest.raises(JobError):
        manager.follow("nope")
