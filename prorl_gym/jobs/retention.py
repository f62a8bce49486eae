# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Retention: finished batches are kept (results served again, ids deduplicated) until the caller
acknowledges them or they pass the retention bounds (JobLimits.retain_jobs, retain_s); then they and
their jobs are forgotten, in memory and in the journal, and their records' snapshots released.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from prorl_gym.jobs.admission import JobError
from prorl_gym.jobs.state import BatchState, JobBook, JobState
from prorl_gym.jobs.stragglers import StragglerControl


class Retention:
    def __init__(
        self,
        book: JobBook,
        stragglers: StragglerControl,
        release_snapshots: Callable[[list[str]], Awaitable[None]] | None,
    ):
        self._book, self._stragglers = book, stragglers
        self._release_snapshots = release_snapshots  # of forgotten jobs' records (branches start from them)

    def finished(self, batch_id: str) -> BatchState:
        """The batch, which the caller may acknowledge (409 while it is not finished)."""
        batch = self._book.batch(batch_id)
        if not batch.finished:
            raise JobError(409, f"batch {batch_id!r} is not finished: cancel it first, or wait")
        return batch

    def prune(self) -> None:
        """Forget the oldest finished batches beyond the retention count or age, and their jobs."""
        book, limits = self._book, self._book.limits
        now, expired = time.monotonic(), []
        retained = len(book.jobs) - book.active
        for batch in book.finished.values():
            if retained <= limits.retain_jobs and now - batch.finished_at <= limits.retain_s:
                break
            expired.append(batch)
            retained -= len(batch.job_ids)
        if expired:
            self.forget(expired)

    def forget(self, batches: list[BatchState]) -> None:
        book = self._book
        gone: list[JobState] = []
        for batch in batches:
            del book.finished[batch.id], book.batches[batch.id]
            self._stragglers.forget(batch.id)
            if batch.deadline_timer is not None:
                batch.deadline_timer.cancel()
            for job_id in batch.job_ids:
                job = book.jobs.get(job_id)
                if job is None:
                    continue
                if batch in job.batches:
                    job.batches.remove(batch)
                if not job.batches and job.task is None:
                    del book.jobs[job_id]
                    gone.append(job)
        snapshots = [s for job in gone for s in job.snapshot_ids]
        book.write_soon(self._drop([b.id for b in batches], [job.id for job in gone], snapshots))

    async def _drop(self, batch_ids: list[str], job_ids: list[str], snapshot_ids: list[str]) -> None:
        if snapshot_ids and self._release_snapshots is not None:
            await self._release_snapshots(snapshot_ids)
        await self._book.journal.forget_batches(batch_ids, job_ids)
