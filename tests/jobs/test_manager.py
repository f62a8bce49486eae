# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""JobManager with a fake rollout coroutine: submission, streaming, idempotency, cancellation, bounds, status.

The fake's rollouts wait until the test finishes them (in any order), so completion order,
cancellation mid-rollout and admission bounds are all under the test's control.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from prorl_gym.jobs.admission import JobError
from prorl_gym.jobs.journal import Journal, JournalInUse
from prorl_gym.jobs.manager import JobManager
from prorl_gym.wire.jobs import JobLimits, SubmitRequest
from prorl_gym.wire.records import RolloutRecord


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
    return [json.loads(line) async for line in manager.follow(batch_id, after) if line is not None]


STAGES = {"init": {"workers": 2, "waiting": 1, "in_flight": 2}}


@pytest.fixture
def fake() -> FakeRollout:
    return FakeRollout()


@contextlib.asynccontextmanager
async def started(rollout, **kwargs):
    """A started JobManager with the tests' limits (kwargs: the agent's other wiring), closed after."""
    limits = JobLimits(max_active_jobs=10, max_batch_rows=4, max_batch_jobs=8, cancel_wait_s=2)
    manager = JobManager(rollout, limits, environments=("math", "math_agent"), stage_stats=lambda: STAGES, **kwargs)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.close()


@pytest.fixture
async def manager(fake):
    async with started(fake) as manager:
        yield manager


async def submit(manager: JobManager, rows: list, **kwargs):
    return await manager.submit(SubmitRequest(rows=rows, **kwargs))


async def settle(manager: JobManager) -> None:
    """Until the finished rollouts' records are journaled and delivered."""
    await turn()
    while manager._book.writes:
        await asyncio.wait(set(manager._book.writes))
        await turn()


async def test_submit_returns_ids_at_once_and_applies_sampling_per_sample(manager, fake):
    batch = await submit(manager, [row(0), row(1)], samples_per_row=2, sampling={"temperature": 0.7, "seed": 3})
    assert batch.created and batch.new_jobs == 4
    assert batch.job_ids == [f"{batch.batch_id}/{i}/{s}" for i in (0, 1) for s in (0, 1)]
    await settle(manager)
    assert len(fake.calls) == 4
    params = fake.calls[0][0]["responses_create_params"]
    assert params == {"input": "question 0", "temperature": 0.7, "seed": 3}
    assert (await manager.job(batch.job_ids[0])).status == "running"


async def test_results_stream_in_completion_order_and_the_stream_ends_with_the_batch(manager, fake):
    batch = await submit(manager, [row(0), row(1), row(2)])
    await settle(manager)
    stream = asyncio.create_task(collect(manager, batch.batch_id))
    for index, reward in ((2, 1.0), (0, 0.0), (1, 1.0)):
        fake.finish(index, reward)
        await settle(manager)
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
        "deadline": None,
        "expired": False,
        "groups": 3,
        "usable_groups": 3,
        "small_groups": [],
        "target_groups": None,
        "informative_groups": 0,
        "dropped_groups": 0,
        "waiting_groups": 0,
        "group_sizes": [1, 1, 1],
        "stragglers": None,
    }


async def test_an_idle_stream_sends_heartbeats(fake):
    manager = JobManager(fake, JobLimits(heartbeat_s=0.05))
    await manager.start()
    batch = await submit(manager, [row(0)])
    stream = manager.follow(batch.batch_id)
    assert await asyncio.wait_for(anext(stream), 1) is None
    fake.finish(0)
    assert json.loads(await asyncio.wait_for(anext(stream), 1))["status"] == "completed"
    await manager.close()


async def test_resubmitting_the_same_ids_never_runs_a_job_twice(manager, fake):
    first = await submit(manager, [row(0), row(1)], batch_id="step-1")
    again = await submit(manager, [row(0), row(1)], batch_id="step-1")
    assert not again.created and again.new_jobs == 0 and again.job_ids == first.job_ids
    # the same job ids under a new batch: the new batch shares the jobs
    await settle(manager)
    fake.finish(0)
    await settle(manager)
    shared = await submit(manager, [row(0), row(1)], job_ids=first.job_ids)
    assert shared.created and shared.new_jobs == 0 and shared.batch_id != "step-1"
    fake.finish(1)
    await settle(manager)
    assert len(fake.calls) == 2
    assert [r["job_id"] for r in await collect(manager, shared.batch_id)] == first.job_ids
    assert (await manager.job(first.job_ids[0])).batch_ids == ["step-1", shared.batch_id]


async def test_conflicting_content_for_an_existing_id_is_a_conflict(manager, fake):
    await submit(manager, [row(0)], job_ids=["job-a"], batch_id="b1")
    with pytest.raises(JobError) as exc:
        await submit(manager, [row(1)], job_ids=["job-a"])
    assert exc.value.status == 409 and "job-a" in exc.value.detail
    with pytest.raises(JobError) as exc:  # other sampling parameters are other content too
        await submit(manager, [row(0)], job_ids=["job-a"], sampling={"temperature": 1.0})
    assert exc.value.status == 409
    with pytest.raises(JobError) as exc:
        await submit(manager, [row(0), row(1)], batch_id="b1")
    assert exc.value.status == 409 and "b1" in exc.value.detail
    await settle(manager)
    assert len(fake.calls) == 1


async def test_cancelling_a_job_cancels_its_rollout_and_streams_a_cancelled_record(manager, fake):
    batch = await submit(manager, [row(0), row(1)])
    await settle(manager)
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
    await settle(manager)
    records = await collect(manager, batch.batch_id)
    assert [r["status"] for r in records] == ["cancelled", "completed"]


async def test_a_job_cancelled_before_its_rollout_started_still_gets_a_record(manager, fake):
    batch = await submit(manager, [row(0)])
    result = await manager.cancel_batch(batch.batch_id)  # no turn of the loop: the coroutine never ran
    assert result.settled and not fake.calls
    assert (await manager.job(batch.job_ids[0])).record.failure.type == "cancelled"


async def test_cancelling_a_batch_leaves_finished_jobs_alone(manager, fake):
    batch = await submit(manager, [row(0), row(1), row(2)])
    await settle(manager)
    fake.finish(1)
    await settle(manager)
    result = await manager.cancel_batch(batch.batch_id)
    assert sorted(result.cancelled) == [batch.job_ids[0], batch.job_ids[2]] and result.settled
    assert len(fake.cancelled) == 2
    statuses = {r["job_id"]: r["status"] for r in await collect(manager, batch.batch_id)}
    assert statuses == {batch.job_ids[0]: "cancelled", batch.job_ids[1]: "completed", batch.job_ids[2]: "cancelled"}


async def test_stop_after_k_usable_results_cancels_the_rest(manager, fake):
    batch = await submit(manager, [row(0), row(1), row(2), row(3)], samples_per_row=2, stop_after=2)
    await settle(manager)
    fake.finish(0, failure={"stage": "run", "type": "policy_error", "message": "down"})  # not usable
    fake.finish(1)
    await settle(manager)
    assert not fake.cancelled
    fake.finish(2)  # the second usable result
    await turn(10)
    records = await asyncio.wait_for(collect(manager, batch.batch_id), 1)
    assert [r["status"] for r in records[:3]] == ["failed", "completed", "completed"]
    assert {r["status"] for r in records[3:]} == {"cancelled"} and len(records) == 8
    assert len(fake.cancelled) == 5 and "stop_after" in records[-1]["failure"]["message"]


async def test_stop_after_set_later_applies_at_once_if_enough_results_exist(manager, fake):
    batch = await submit(manager, [row(0), row(1), row(2)])
    await settle(manager)
    fake.finish(0)
    await settle(manager)
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
        await submit(manager, rows, **kwargs)
    assert exc.value.status == status and reason in exc.value.detail
    await settle(manager)
    assert not fake.calls and (await manager.status()).active_jobs == 0


async def test_malformed_rows_are_listed_by_index(fake):
    rows = [row(0), {"responses_create_params": {"input": "q"}}, 7]
    # the agent passes its full row validation here
    async with started(fake, validate_row=lambda r: r["task_id"]) as manager:
        with pytest.raises(JobError) as exc:
            await submit(manager, rows)
    assert [e["index"] for e in exc.value.extra["rows"]] == [1, 2]
    assert "task_id" in exc.value.extra["rows"][0]["error"] and "JSON object" in exc.value.extra["rows"][1]["error"]


async def test_rows_are_checked_against_the_environments_row_model_at_submission(fake):
    async def check(rows):  # the agent asks its resources server (/check_rows)
        return [
            {"index": i, "error": "expected_answer: Field required"} for i, r in enumerate(rows) if "task_id" not in r
        ]

    missing = {"responses_create_params": {"input": "q"}}
    async with started(fake, check_rows=check) as manager:
        with pytest.raises(JobError) as exc:
            await submit(manager, [row(0), missing, row(1)])
    assert exc.value.status == 422 and "1 rows do not fit the environment's row model" in exc.value.detail
    assert exc.value.extra["rows"] == [{"index": 1, "error": "expected_answer: Field required"}]

    async def unreachable(rows):
        raise ConnectionError("the resources server is gone")

    async with started(fake, check_rows=unreachable) as manager:
        with pytest.raises(JobError) as exc:
            await submit(manager, [row(0)])
        assert exc.value.status == 503 and "the resources server is gone" in exc.value.detail
        await settle(manager)
        assert not fake.calls and (await manager.status()).active_jobs == 0  # nothing accepted


async def test_a_row_over_the_row_bound_is_413_whatever_the_batch_size(fake):
    manager = JobManager(fake, JobLimits(max_row_bytes=2000))
    await manager.start()
    small, large = row(0), {"responses_create_params": {"input": "x" * 3000}}
    with pytest.raises(JobError) as exc:
        await submit(manager, [small, large])
    assert exc.value.status == 413 and "limit of 2000 bytes per row" in exc.value.detail
    assert exc.value.extra["rows"][0]["index"] == 1
    assert (await submit(manager, [small])).new_jobs == 1
    await manager.close()


async def test_a_large_row_is_on_disk_once_through_its_jobs_life(tmp_path):
    """The row is written to the log and the database, then again in the record: the journal gives
    the space back, so a job of a 6 MB row holds about 6 MB at each step, not 12 to 24."""
    path, payload = tmp_path / "agent.sqlite", 6 << 20
    fake = FakeRollout()
    manager = journaled(fake, path)
    await manager.start()
    batch = await submit(manager, [{"responses_create_params": {"input": "x" * payload}}])
    sizes = [(await manager.status()).journal["bytes"]]
    await settle(manager)
    fake.finish(0)
    await asyncio.wait_for(collect(manager, batch.batch_id), 10)
    sizes.append((await manager.status()).journal["bytes"])
    assert all(payload < size < 1.3 * payload for size in sizes), sizes
    await manager.close()


async def test_a_full_service_says_429_and_keeps_what_it_accepted(manager, fake):
    first = await submit(manager, [row(i) for i in range(4)], samples_per_row=2)  # 8 of 10
    with pytest.raises(JobError) as exc:
        await submit(manager, [row(i) for i in range(2)], samples_per_row=2)
    assert exc.value.status == 429 and "retry later" in exc.value.detail.lower()
    assert not (
        await submit(manager, [row(0)], samples_per_row=2, job_ids=first.job_ids[:2])
    ).new_jobs  # reuse costs nothing
    await settle(manager)
    for i in range(8):
        fake.finish(i)
    await settle(manager)
    assert len(await collect(manager, first.batch_id)) == 8
    assert (await submit(manager, [row(9)])).new_jobs == 1  # room again


async def test_status_reports_stages_counts_and_timing_percentiles(manager, fake):
    batch = await submit(manager, [row(i) for i in range(4)])
    await settle(manager)
    fake.finish(0, run_s=1.0, init_s=0.1)
    fake.finish(1, run_s=3.0, init_s=0.2)
    fake.finish(2, failure={"stage": "eval", "type": "eval_error", "message": "x"}, run_s=2.0)
    await settle(manager)
    await manager.cancel_job(batch.job_ids[3])
    status = await manager.status()
    assert status.stages == STAGES
    assert (status.active_jobs, status.retained_jobs, status.retained_batches) == (0, 4, 1)
    assert (status.completed, status.failed, status.cancelled) == (2, 1, 1)
    assert status.failed_by_type == {"eval_error": 1, "cancelled": 1}
    assert status.timings["run_s"] == {"p50": 2.0, "p90": 3.0, "p99": 3.0, "n": 3}
    assert status.timings["init_s"]["n"] == 2 and status.limits.max_active_jobs == 10


async def test_a_crashing_rollout_is_an_agent_error_record():
    async def crash(row):
        raise RuntimeError("bug")

    async with started(crash) as manager:
        batch = await submit(manager, [row(0)])
        records = await asyncio.wait_for(collect(manager, batch.batch_id), 1)
    assert records[0]["status"] == "failed" and records[0]["failure"]["type"] == "agent_error"
    assert "bug" in records[0]["failure"]["message"]


async def test_finished_batches_are_forgotten_beyond_the_retention_bound(fake):
    manager = JobManager(fake, JobLimits(retain_jobs=2))
    await manager.start()
    old, new = await submit(manager, [row(0), row(1)]), await submit(manager, [row(2), row(3)])
    await settle(manager)
    for i in range(4):
        fake.finish(i)
    await settle(manager)
    with pytest.raises(JobError) as exc:
        await manager.job(old.job_ids[0])
    assert exc.value.status == 404
    assert (await manager.batch(new.batch_id)).done and (await manager.status()).retained_jobs == 2
    # an expired id is new again
    assert (await submit(manager, [row(0)], job_ids=[old.job_ids[0]])).new_jobs == 1
    await manager.close()


async def test_close_interrupts_running_jobs_ends_streams_and_refuses_new_work(fake):
    manager = JobManager(fake, JobLimits(cancel_wait_s=1))
    with pytest.raises(JobError) as exc:
        await submit(manager, [row(0)])
    assert exc.value.status == 503
    await manager.start()
    batch = await submit(manager, [row(0), row(1)])
    await settle(manager)
    stream = asyncio.create_task(collect(manager, batch.batch_id))
    await manager.close()
    assert len(fake.cancelled) == 2  # the rollouts saw CancelledError: their sandboxes were released
    # no record for an interrupted job: it is unfinished, and runs again when the agent is back
    assert await asyncio.wait_for(stream, 1) == []
    with pytest.raises(JobError):
        await submit(manager, [row(2)])


async def test_unknown_ids_are_404(manager):
    for call in (manager.job("nope"), manager.batch("nope"), manager.cancel_job("nope"), manager.cancel_batch("nope")):
        with pytest.raises(JobError) as exc:
            await call
        assert exc.value.status == 404
    with pytest.raises(JobError):
        manager.follow("nope")


# ---------------------------------------------------------------------- the journal: nothing lost across a restart


def journaled(fake: FakeRollout, path, on_restart: str = "rerun") -> JobManager:
    return JobManager(fake, JobLimits(cancel_wait_s=1), journal=Journal(path), on_restart=on_restart)


async def test_a_restarted_agent_serves_every_result_again_at_its_offset_and_reruns_the_rest(tmp_path):
    path = tmp_path / "agent.sqlite"
    fake = FakeRollout()
    manager = journaled(fake, path)
    await manager.start()
    batch = await submit(manager, [row(0), row(1), row(2)], batch_id="step-7", stop_after=3)
    await settle(manager)
    fake.finish(1)
    await settle(manager)
    seen = await asyncio.wait_for(anext(manager.follow("step-7")), 1)
    await manager.close()  # the running two are interrupted, not finished

    again = FakeRollout()
    manager = journaled(again, path)
    await manager.start()
    assert (await asyncio.wait_for(anext(manager.follow("step-7")), 1)) == seen  # the same line at offset 0
    await settle(manager)
    assert sorted(call[0]["task_id"] for call in again.calls) == ["t0", "t2"]  # only the unfinished ran again
    again.finish(0)
    again.finish(1)
    await settle(manager)
    records = await collect(manager, "step-7")
    assert [r["job_id"] for r in records][0] == batch.job_ids[1] and len(records) == 3
    rerun = records[1]
    assert rerun["attempts"] == 2 and [f["type"] for f in rerun["attempt_failures"]] == ["agent_restarted"]
    assert (await manager.batch("step-7")).stop_after == 3
    # resubmitting the batch after the restart stays idempotent
    assert not (await submit(manager, [row(0), row(1), row(2)], batch_id="step-7")).created
    await manager.close()


async def test_jobs_running_at_a_restart_can_end_as_agent_restarted_instead(tmp_path):
    path = tmp_path / "agent.sqlite"
    manager = journaled(FakeRollout(), path)
    await manager.start()
    await submit(manager, [row(0)], batch_id="b")
    await settle(manager)
    await manager.close()
    fake = FakeRollout()
    manager = journaled(fake, path, on_restart="fail")
    await manager.start()
    (record,) = await asyncio.wait_for(collect(manager, "b"), 2)
    assert record["failure"]["type"] == "agent_restarted" and record["reward"] == 0.0 and not fake.calls
    await manager.close()


async def test_acknowledged_batches_are_forgotten_in_the_journal_too(tmp_path):
    path = tmp_path / "agent.sqlite"
    fake = FakeRollout()
    manager = journaled(fake, path)
    await manager.start()
    batch = await submit(manager, [row(0), row(1)])
    with pytest.raises(JobError) as exc:
        await manager.acknowledge(batch.batch_id)
    assert exc.value.status == 409
    await settle(manager)
    fake.finish(0)
    fake.finish(1)
    await settle(manager)
    assert (await manager.acknowledge(batch.batch_id)).finished == 2
    await settle(manager)
    with pytest.raises(JobError):
        await manager.job(batch.job_ids[0])
    assert (await manager.status()).journal["bytes"] > 0
    await manager.close()
    manager = journaled(FakeRollout(), path)
    await manager.start()
    with pytest.raises(JobError):
        await manager.batch(batch.batch_id)  # gone after the restart too
    await manager.close()


async def test_one_agent_per_journal(tmp_path):
    first = journaled(FakeRollout(), tmp_path / "agent.sqlite")
    await first.start()
    with pytest.raises(JournalInUse):
        await journaled(FakeRollout(), tmp_path / "agent.sqlite").start()
    await first.close()


async def test_a_deadline_ends_the_batch_on_time_with_what_finished_and_the_straggler_cancelled(manager, fake):
    batch = await submit(manager, [row(0), row(1), row(2)], deadline_s=0.3)
    await settle(manager)
    fake.finish(0)
    fake.finish(2)
    records = await asyncio.wait_for(collect(manager, batch.batch_id), 3)  # ends: the straggler is cancelled
    assert [r["status"] for r in records] == ["completed", "completed", "cancelled"]
    assert records[-1]["failure"]["type"] == "cancelled" and "deadline" in records[-1]["failure"]["message"]
    progress = await manager.batch(batch.batch_id)
    assert progress.done and progress.expired and progress.usable == 2 and progress.deadline is not None


async def test_a_batch_that_finishes_in_time_is_not_expired(manager, fake):
    batch = await submit(manager, [row(0)], deadline_s=0.2)
    await settle(manager)
    fake.finish(0)
    await settle(manager)
    await asyncio.sleep(0.3)
    progress = await manager.batch(batch.batch_id)
    assert progress.done and not progress.expired and not fake.cancelled


async def test_groups_are_usable_with_min_group_size_usable_samples_and_small_ones_are_named(manager, fake):
    batch = await submit(manager, [row(0), row(1)], samples_per_row=3, min_group_size=2, deadline_s=0.3)
    await settle(manager)
    fake.finish(0)
    fake.finish(1)  # row 0: two of three, then its third is cancelled at the deadline
    fake.finish(3, failure={"stage": "run", "type": "policy_error", "message": "down"})  # row 1: none usable
    fake.finish(4)
    await asyncio.wait_for(collect(manager, batch.batch_id), 3)
    progress = await manager.batch(batch.batch_id)
    assert (progress.groups, progress.usable_groups, progress.small_groups) == (2, 1, [1])
    with pytest.raises(JobError, match="min_group_size 4 exceeds samples_per_row 3") as refused:
        await submit(manager, [row(0)], samples_per_row=3, min_group_size=4)
    assert refused.value.status == 422


async def test_a_deadline_holds_across_an_agent_restart(tmp_path):
    path = tmp_path / "agent.sqlite"
    manager = journaled(FakeRollout(), path)
    await manager.start()
    await submit(manager, [row(0), row(1)], batch_id="step-8", deadline_s=0.5)
    await settle(manager)
    await manager.close()  # both interrupted; the deadline passes while the agent is down
    await asyncio.sleep(0.6)

    again = FakeRollout()
    manager = journaled(again, path)
    await manager.start()
    records = await asyncio.wait_for(collect(manager, "step-8"), 3)
    assert [r["status"] for r in records] == ["cancelled", "cancelled"]
    assert (await manager.batch("step-8")).expired
    await manager.close()


async def test_a_journal_written_before_batch_options_opens_with_its_batches(tmp_path):
    import sqlite3

    path = tmp_path / "agent.sqlite"
    db = sqlite3.connect(path)  # the first schema's batches table: no options column
    db.execute(
        "CREATE TABLE batches (id TEXT PRIMARY KEY, job_ids TEXT NOT NULL, stop_after INTEGER, "
        "created REAL NOT NULL, finished REAL)"
    )
    db.execute("INSERT INTO batches VALUES ('old', '[]', 2, 0, 1)")
    db.commit()
    db.close()
    journal = Journal(path)
    (batch,), _ = await journal.open()
    assert (batch.id, batch.stop_after, batch.options) == ("old", 2, {})
    await journal.close()


class VersionedRollout(FakeRollout):
    """Each rollout's turns were generated from `oldest` on (what the record says)."""

    def finish_from(self, index: int, oldest: int) -> None:
        row, future = self.calls[index]
        record = row | {"reward": 1.0, "policy_versions": [oldest], "oldest_policy_version": oldest}
        future.set_result(RolloutRecord.model_validate(record | {"newest_policy_version": oldest}))


async def versioned(version: list[int]) -> tuple[JobManager, VersionedRollout]:
    fake = VersionedRollout()
    manager = JobManager(fake, JobLimits(max_stale_reruns=2, cancel_wait_s=1), policy_version=lambda: version[0])
    await manager.start()
    return manager, fake


async def test_a_rollout_staler_than_its_batch_allows_runs_again_from_init():
    version = [5]
    manager, fake = await versioned(version)
    batch = await submit(manager, [row(0)], max_staleness=1)
    await settle(manager)
    fake.finish_from(0, oldest=3)  # 2 behind: run again
    await settle(manager)
    assert len(fake.calls) == 2
    fake.finish_from(1, oldest=4)  # 1 behind: within the bound
    (record,) = await asyncio.wait_for(collect(manager, batch.batch_id), 1)
    assert (record["staleness"], record["stale"], record["oldest_policy_version"]) == (1, False, 4)
    await manager.close()


async def test_a_stale_rollout_is_flagged_when_the_batch_asks_or_after_its_reruns():
    version = [9]
    manager, fake = await versioned(version)
    flagged = await submit(manager, [row(0)], max_staleness=0, on_stale="flag")
    await settle(manager)
    fake.finish_from(0, oldest=8)
    (record,) = await asyncio.wait_for(collect(manager, flagged.batch_id), 1)
    assert (record["staleness"], record["stale"]) == (1, True) and len(fake.calls) == 1
    rerun = await submit(manager, [row(1)], max_staleness=0)
    for n in range(3):  # the first run and its max_stale_reruns (2) reruns, all stale
        await settle(manager)
        fake.finish_from(1 + n, oldest=7)
    (record,) = await asyncio.wait_for(collect(manager, rerun.batch_id), 1)
    assert (record["staleness"], record["stale"]) == (2, True) and len(fake.calls) == 4
    unbounded = await submit(manager, [row(2)])  # no max_staleness: as it came
    await settle(manager)
    fake.finish_from(4, oldest=1)
    (record,) = await asyncio.wait_for(collect(manager, unbounded.batch_id), 1)
    assert (record["staleness"], record["stale"]) == (None, False)
    await manager.close()


async def test_dynamic_sampling_starts_a_new_row_for_each_group_without_a_signal_until_k_are_informative(fake):
    manager = JobManager(fake, JobLimits(cancel_wait_s=1))
    await manager.start()
    batch = await submit(manager, [row(i) for i in range(4)], samples_per_row=2, target_groups=2)
    await settle(manager)
    assert [c[0]["task_id"] for c in fake.calls] == ["t0", "t0", "t1", "t1"]  # two groups started, two queued
    assert (await manager.batch(batch.batch_id)).waiting_groups == 2
    fake.finish(0, reward=1.0)
    fake.finish(1, reward=1.0)  # row 0: all solved, no signal: dropped, row 2 starts
    await settle(manager)
    assert [c[0]["task_id"] for c in fake.calls[4:]] == ["t2", "t2"]
    fake.finish(2, reward=1.0)
    fake.finish(3, reward=0.0)  # row 1: informative
    fake.finish(4, reward=0.0)
    fake.finish(5, reward=1.0)  # row 2: informative, the second: row 3 is not needed
    records = await asyncio.wait_for(collect(manager, batch.batch_id), 2)
    assert [r["status"] for r in records].count("cancelled") == 2 and len(records) == 8
    assert "dynamic sampling" in records[-1]["failure"]["message"] and len(fake.calls) == 6  # row 3 never ran
    progress = await manager.batch(batch.batch_id)
    assert (progress.informative_groups, progress.dropped_groups, progress.waiting_groups) == (2, 1, 0)
    with pytest.raises(JobError, match="samples_per_row >= 2 and no stop_after"):
        await submit(manager, [row(0)], samples_per_row=2, target_groups=1, stop_after=2)
    await manager.close()


async def test_dynamic_sampling_ends_with_what_it_has_when_the_rows_run_out(fake):
    manager = JobManager(fake, JobLimits(cancel_wait_s=1))
    await manager.start()
    batch = await submit(manager, [row(0), row(1)], samples_per_row=2, target_groups=2)
    await settle(manager)
    for i in range(4):
        fake.finish(i, reward=1.0)  # every group uniform
    records = await asyncio.wait_for(collect(manager, batch.batch_id), 2)
    progress = await manager.batch(batch.batch_id)
    assert len(records) == 4 and (progress.informative_groups, progress.dropped_groups) == (0, 2) and progress.done
    await manager.close()
