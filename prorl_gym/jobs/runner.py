# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A job's run, from its launch to its record in each of its batches' streams.

Each job is an asyncio task around the injected `rollout(row) -> RolloutRecord` (the pipeline, whose
StagePools do the queueing). However it ends (a record, a crash, a cancel) it gets a record, which is
journaled with its offset in each stream before any stream sees it; a run interrupted by a shutdown
gets none and runs again at the next start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import orjson

from prorl_gym.jobs.journal import StreamOffset
from prorl_gym.jobs.state import JOB_TASK_PREFIX, BatchOptions, BatchState, JobBook, JobState, Tally
from prorl_gym.jobs.stragglers import StragglerControl
from prorl_gym.pipeline.stages import RUN_CLOCK
from prorl_gym.wire.failures import Failure, FailureType
from prorl_gym.wire.records import RolloutRecord, failed_record

log = logging.getLogger(__name__)
Rollout = Callable[[dict], Awaitable[RolloutRecord]]


class Runner:
    """Runs jobs and delivers their records. After a record reaches a batch, `check_batch(batch)` applies
    the batch's policy (batch_policy.py); after each delivery `prune()` applies retention (retention.py)."""

    def __init__(
        self,
        book: JobBook,
        rollout: Rollout,
        stragglers: StragglerControl,
        policy_version: Callable[[], int] | None,
        *,
        check_batch: Callable[[BatchState], object],
        prune: Callable[[], None],
    ):
        self._book, self._rollout, self._stragglers = book, rollout, stragglers
        self._policy_version = policy_version  # the version new policy calls go under (staleness is against it)
        self._check_batch, self._prune = check_batch, prune
        self.tally = Tally(book.limits.timing_window)

    def launch(self, job: JobState, row: dict) -> None:
        job.row = row
        job.task = asyncio.get_running_loop().create_task(self._run(job, row), name=f"{JOB_TASK_PREFIX}{job.id}")
        job.task.add_done_callback(lambda task: self._on_done(job, row, task))

    async def _run(self, job: JobState, row: dict) -> RolloutRecord:
        """The rollout; one whose oldest turn lags the policy by more than its batch's max_staleness
        runs again from INIT, or comes back flagged, as the batch asks."""
        options = job.batches[0].options if job.batches else BatchOptions()
        max_reruns = self._book.limits.max_stale_reruns
        if job.go is not None:
            await job.go.wait()
        if job.batches and (clock := self._stragglers.started(job.batches[0].id, job.id)) is not None:
            RUN_CLOCK.set(clock)  # this task's: its RUN stage says when it runs
        for rerun in range(max_reruns + 1):
            record = await self._rollout(row)
            if options.max_staleness is None or self._policy_version is None or record.oldest_policy_version is None:
                return record
            lag = self._policy_version() - record.oldest_policy_version
            stale = lag > options.max_staleness
            if not stale or options.on_stale == "flag" or rerun == max_reruns:
                return record.model_copy(update={"staleness": lag, "stale": stale})
            log.info("job %s: %d versions behind (max %d): run again", job.id, lag, options.max_staleness)
        raise AssertionError("unreachable")

    def _on_done(self, job: JobState, row: dict, task: asyncio.Task) -> None:
        if task is not job.task:  # a straggler's run that a fresh sample replaced
            return
        if self._book.closing and task.cancelled() and job.cancel_reason is None:
            job.task = None  # interrupted by the shutdown: unfinished in the journal, run again at the next start
            return
        if task.cancelled():  # a record of its own, so that the consumer of the stream knows
            message = f"cancelled: {job.cancel_reason or 'task cancelled'}"
            record = self.failed_record(job, row, Failure(stage=None, type=FailureType.CANCELLED, message=message))
        elif (exc := task.exception()) is not None:
            log.error("job %s crashed", job.id, exc_info=exc)
            record = self.failed_record(job, row, Failure(stage=None, type=FailureType.AGENT_ERROR, message=repr(exc)))
        elif not isinstance(record := task.result(), RolloutRecord):
            message = f"the rollout returned {type(record).__name__}"
            record = self.failed_record(job, row, Failure(stage=None, type=FailureType.AGENT_ERROR, message=message))
        self.finish_soon(job, record)

    @staticmethod
    def failed_record(job: JobState, row: dict | None, failure: Failure) -> RolloutRecord:
        return failed_record(row, failure, {"total_s": time.monotonic() - job.started})

    def finish_soon(self, job: JobState, record: RolloutRecord) -> None:
        """Journal the job's record and its offset in each of its batches' streams, then deliver it
        (a task: the journal runs on its own thread)."""
        self._book.write_soon(self._finish(job, record))

    def share_soon(self, job: JobState, batch: BatchState) -> None:
        """A finished job joins another batch: its stored record gets an offset in that stream too."""
        self._book.write_soon(self._share(job, batch))

    async def _finish(self, job: JobState, record: RolloutRecord) -> None:
        if job.runs > 1:  # interrupted by agent restarts: each counts as an attempt
            restarts = [
                Failure(stage=None, type=FailureType.AGENT_RESTARTED, message="the agent restarted", infra=True)
            ] * (job.runs - 1)
            record = record.model_copy(
                update={
                    "attempts": record.attempts + job.runs - 1,
                    "attempt_failures": restarts + record.attempt_failures,
                }
            )
        if job.straggler is not None:
            record = record.model_copy(update={"straggler": job.straggler})
        failure = record.failure
        job.reward = record.reward if failure is None else None
        job.task, job.row = None, None
        job.status = "completed" if not failure else "cancelled" if failure.type == FailureType.CANCELLED else "failed"
        self._book.active -= 1
        self.tally.add(job.status, record)
        job.snapshot_ids = [s.snapshot_id for s in record.snapshots]
        batches = list(job.batches)
        for batch in batches:
            self._stragglers.finished(batch.id, job.id, record)
        text = orjson.dumps(record.wire()).decode()
        await self._book.journal.finish_job(
            job.id, job.status, text, self._offsets(batches), keep_row=bool(job.snapshot_ids)
        )
        self._delivered(job, batches)

    async def _share(self, job: JobState, batch: BatchState) -> None:
        await self._book.journal.add_offsets(job.id, job.status, self._offsets([batch]))
        self._delivered(job, [batch])

    @staticmethod
    def _offsets(batches: list[BatchState]) -> list[StreamOffset]:
        """The next offset in each batch's stream, taken now (so offsets follow the order of finishing)."""
        offsets = []
        for batch in batches:
            offsets.append(StreamOffset(batch.id, batch.reserved, batch.reserved + 1 == len(batch.job_ids)))
            batch.reserved += 1
        return offsets

    def _delivered(self, job: JobState, batches: list[BatchState]) -> None:
        for batch in batches:
            batch.results.append((job.id, job.status))
            batch.usable += job.status == "completed"
            batch.changed.set()
            batch.changed = asyncio.Event()  # a follower waits on the event it saw before reading
            self._check_batch(batch)
        self._prune()
