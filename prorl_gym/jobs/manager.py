# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Jobs: rollouts handed to the service in batches, streamed back as they finish, journaled.

One job = one rollout of one sample of one row; a batch = the jobs of one submission. Nothing is
lost when the agent dies: a batch is in the journal (journal.py) before its submission is answered,
and a record is in the journal, at its offset in each stream, before any stream sees it; an agent
started again serves every finished result again at the same offsets and runs the unfinished jobs
again (or ends them as `agent_restarted`, by config). At a clean shutdown the running jobs are
interrupted, not finished: streams end without a record for them and they run again at the next
start. Admission control refuses work (429/413) rather than growing without bound.

JobManager is the service's front (the agent's routes, the dashboard and /metrics use it): it owns
the lifecycle (start: take back what the journal holds; close) and hands each call to its part:
  state.py         the batches and jobs held (JobBook), their state types, totals since start
  submission.py    a submission checked (admission.py), claimed, journaled, its jobs launched
  runner.py        a job's run, its record journaled at its offsets, delivered to its streams
  batch_policy.py  cancels (caller, stop_after, target_groups, deadline) and straggler actions
                   (stragglers.py finds them)
  streams.py       a batch's records as a stream, from any offset
  queries.py       a job, a batch's progress, /status, the dashboard's list
  retention.py     finished batches forgotten (acknowledged, or past the retention bounds)
Wire shapes: prorl_gym/wire/jobs.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from prorl_gym.jobs import streams
from prorl_gym.jobs.batch_policy import BatchPolicy
from prorl_gym.jobs.journal import Journal
from prorl_gym.jobs.queries import Queries
from prorl_gym.jobs.retention import Retention
from prorl_gym.jobs.runner import Rollout, Runner
from prorl_gym.jobs.state import BatchOptions, BatchState, BatchView, JobBook, JobState
from prorl_gym.jobs.submission import RowCheck, Submission
from prorl_gym.wire.failures import Failure, FailureType
from prorl_gym.wire.jobs import (
    Batch,
    BatchProgress,
    CancelResult,
    Job,
    JobLimits,
    PolicyHealthView,
    Status,
    Stragglers,
    SubmitRequest,
)

log = logging.getLogger(__name__)


class JobManager:
    def __init__(
        self,
        rollout: Rollout,
        limits: JobLimits | None = None,
        *,
        journal: Journal | None = None,
        on_restart: Literal["rerun", "fail"] = "rerun",
        environments: tuple[str, ...] = (),
        stage_stats: Callable[[], dict] = dict,
        validate_row: Callable[[dict], Any] | None = None,
        check_rows: RowCheck | None = None,
        release_snapshots: Callable[[list[str]], Awaitable[None]] | None = None,
        policy_version: Callable[[], int] | None = None,
        policy_health: Callable[[], PolicyHealthView] | None = None,
    ):
        self.limits = limits or JobLimits()
        self.journal = journal or Journal(None)
        self._on_restart = on_restart
        book = self._book = JobBook(self.limits, self.journal)
        # The policy relaunches a replaced straggler through the runner, made after it (hence the lambda).
        self._policy = BatchPolicy(book, lambda job, row: self._runner.launch(job, row))
        self.stragglers = self._policy.stragglers
        self._retention = Retention(book, self.stragglers, release_snapshots)
        self._runner = Runner(
            book,
            rollout,
            self.stragglers,
            policy_version,
            check_batch=self._policy.check_batch,
            prune=self._retention.prune,
        )
        self._submission = Submission(
            book,
            self._runner,
            self._policy,
            self._retention,
            environments=environments,
            validate_row=validate_row,
            check_rows=check_rows,
        )
        self._queries = Queries(book, self._runner.tally, self.stragglers, stage_stats, policy_health)

    @property
    def active(self) -> int:
        """Jobs accepted and not finished."""
        return self._book.active

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the journal, take back what it holds, run again (or end) what was running."""
        book = self._book
        stored_batches, stored_jobs = await self.journal.open()
        for stored in stored_batches:
            options = BatchOptions(**stored.options)
            batch = book.batches[stored.id] = BatchState(stored.id, stored.job_ids, stored.stop_after, options)
            batch.results = [(job_id, status) for job_id, status in stored.results]
            batch.reserved = len(batch.results)
            batch.usable = sum(status == "completed" for _, status in batch.results)
            if stored.finished is not None:
                batch.finished, batch.finished_at = True, time.monotonic() - max(0.0, time.time() - stored.finished)
                book.finished[batch.id] = batch
        for stored in stored_jobs:
            job = book.jobs[stored.id] = JobState(
                stored.id, stored.fingerprint, [], status=stored.status, runs=stored.runs
            )
            job.batches = [b for b in book.batches.values() if stored.id in b.job_ids]
        interrupted = [j for j in book.jobs.values() if j.status == "running"]
        book.open = True
        self._retention.prune()  # batches that expired while the agent was down
        if interrupted:
            log.warning("%d jobs were running when the agent stopped: %s", len(interrupted), self._on_restart)
            await self.journal.restarted([job.id for job in interrupted])
            rows = {job.id: await self.journal.row(job.id) for job in interrupted}
            for job in interrupted:
                job.runs += 1
                book.active += 1
                if self._on_restart == "rerun":
                    self._runner.launch(job, rows[job.id] or {})
                else:
                    failure = Failure(stage=None, type=FailureType.AGENT_RESTARTED, message="the agent restarted")
                    self._runner.finish_soon(job, self._runner.failed_record(job, rows[job.id], failure))
        for batch in book.batches.values():  # deadlines hold across restarts (one passed meanwhile: now)
            self._policy.schedule_deadline(batch)
            if batch.options.stragglers is not None and not batch.finished:
                self.stragglers.watch(batch.id, Stragglers(**batch.options.stragglers))

    async def close(self) -> None:
        """Refuse new work and interrupt the running jobs (they stay unfinished in the journal and
        run again at the next start); end the streams; wait (bounded) for sandboxes to be released."""
        book = self._book
        book.open, book.closing = False, True
        for batch in book.batches.values():
            if batch.deadline_timer is not None:
                batch.deadline_timer.cancel()
        await self.stragglers.close()
        running = [job for job in book.jobs.values() if job.task is not None]
        for job in running:
            job.task.cancel("the agent is shutting down")
        if waits := [job.task for job in running] + list(self._policy.retiring):
            await asyncio.wait(waits, timeout=self.limits.cancel_wait_s or None)
        if book.writes:
            await asyncio.wait(set(book.writes), timeout=self.limits.cancel_wait_s or None)
        for batch in book.batches.values():
            batch.changed.set()
        await self.journal.close()

    # ------------------------------------------------------------------ the parts' calls

    async def submit(self, request: SubmitRequest) -> Batch:
        """Accept a batch (journaled before this returns), or refuse all of it with a JobError."""
        return await self._submission.submit(request)

    def follow(self, batch_id: str, after: int = 0) -> AsyncIterator[str | None]:
        """The batch's records (stream lines) from number `after` on; None is a heartbeat (streams.py)."""
        return streams.follow(self._book, batch_id, after)

    async def job(self, job_id: str) -> Job:
        return await self._queries.job(job_id)

    async def batch(self, batch_id: str) -> BatchProgress:
        return await self._queries.batch(batch_id)

    async def status(self) -> Status:
        return await self._queries.status()

    def batch_views(self) -> list[BatchView]:
        """Every batch held, oldest first, as the dashboard reads them (read, never change)."""
        return self._queries.batch_views()

    async def cancel_job(self, job_id: str) -> CancelResult:
        return await self._policy.cancel_job(job_id)

    async def cancel_batch(self, batch_id: str) -> CancelResult:
        return await self._policy.cancel_batch(batch_id)

    async def stop_after(self, batch_id: str, k: int) -> CancelResult:
        """Once k usable results of the batch exist (maybe already), cancel the rest."""
        return await self._policy.stop_after(batch_id, k)

    async def acknowledge(self, batch_id: str) -> BatchProgress:
        """The caller has the batch's results: forget it now (409 while it is not finished)."""
        batch = self._retention.finished(batch_id)
        progress = await self._queries.batch(batch_id)
        self._retention.forget([batch])
        return progress
