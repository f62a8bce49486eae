# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A submission accepted or refused as a whole: checked (admission.py's bounds and rows, then the
environment's own row model), its batch and new jobs claimed and journaled before it is answered,
then its new jobs launched and its already-finished ones shared into its stream. The same job id
with the same content is the same job, never a second run; other content under it is a 409.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prorl_gym.jobs.admission import LISTED, Admission, JobError, admit, check_bounds
from prorl_gym.jobs.batch_policy import BatchPolicy
from prorl_gym.jobs.branch import BranchError, branch_row
from prorl_gym.jobs.retention import Retention
from prorl_gym.jobs.runner import Runner
from prorl_gym.jobs.state import BatchOptions, BatchState, JobBook, JobState
from prorl_gym.wire.jobs import Batch, SubmitRequest

# rows -> [{"index", "error"}] of those the environment's row model refuses (the agent asks its resources server)
RowCheck = Callable[[list[dict]], Awaitable[list[dict]]]


class Submission:
    def __init__(
        self,
        book: JobBook,
        runner: Runner,
        policy: BatchPolicy,
        retention: Retention,
        *,
        environments: tuple[str, ...],
        validate_row: Callable[[dict], Any] | None,
        check_rows: RowCheck | None,
    ):
        self._book, self._runner, self._policy, self._retention = book, runner, policy, retention
        self._environments, self._validate_row, self._check_rows = environments, validate_row, check_rows

    async def submit(self, request: SubmitRequest) -> Batch:
        """Accept a batch (journaled before this returns), or refuse all of it with a JobError."""
        book = self._book
        if not book.open:
            raise JobError(503, "the job service is not running")
        check_bounds(request, book.limits, self._environments)
        if request.fork_from is not None:
            rows = [await self._branch_row(request.fork_from.job_id, request.fork_from.turn)]
        else:
            rows = request.rows
        admission = admit(request, rows, book.limits, self._validate_row)
        if request.fork_from is None:  # a branch's row is its finished job's, checked then
            await self._check_with_environment(admission.rows)
            if not book.open:
                raise JobError(503, "the job service is not running")
        # From here on no await until the journal: the checks hold when the jobs are claimed.
        a, ids = admission, admission.job_ids
        if conflicts := [
            i for k, i in enumerate(ids) if i in book.jobs and book.jobs[i].fingerprint != a.fingerprints[a.row_of(k)]
        ]:
            raise JobError(409, f"{len(conflicts)} job ids exist with other content: {conflicts[:10]}")
        if (old := book.batches.get(a.batch_id)) is not None:
            if old.job_ids != ids:
                raise JobError(409, f"batch {a.batch_id!r} exists with other jobs")
            return Batch(batch_id=a.batch_id, job_ids=ids, created=False, new_jobs=0)
        new = [(k, job_id) for k, job_id in enumerate(ids) if job_id not in book.jobs]
        if book.active + len(new) > book.limits.max_active_jobs:
            raise JobError(
                429,
                f"{book.active} jobs are running; {len(new)} more would exceed {book.limits.max_active_jobs}. "
                "Retry later",
            )
        options = BatchOptions(
            deadline=time.time() + request.deadline_s if request.deadline_s else None,
            group_size=request.samples_per_row,
            min_group_size=request.min_group_size,
            max_staleness=request.max_staleness,
            on_stale=request.on_stale,
            target_groups=request.target_groups,
            stragglers=request.stragglers.model_dump() if request.stragglers is not None else None,
        )
        batch = await self._claim(a, request.stop_after, options, new)
        if request.stragglers is not None:
            self._policy.stragglers.watch(batch.id, request.stragglers)
        launch = {job_id for _, job_id in new}
        for k, job_id in enumerate(ids):
            job = book.jobs[job_id]
            job.batches.append(batch)
            if job_id in launch:
                book.active += 1
                if request.target_groups is not None and a.row_of(k) >= request.target_groups:
                    job.go = asyncio.Event()  # a row in the queue: started if a group ends without a signal
                self._runner.launch(job, a.rows[a.row_of(k)])
            elif job.status != "running":  # the same job again: shared with its first batch, not run twice
                self._runner.share_soon(job, batch)
        self._policy.check_batch(batch)
        self._policy.schedule_deadline(batch)
        self._retention.prune()
        return Batch(batch_id=a.batch_id, job_ids=ids, created=True, new_jobs=len(new))

    async def _claim(
        self, a: Admission, stop_after: int | None, options: BatchOptions, new: list[tuple[int, str]]
    ) -> BatchState:
        """The batch and its new jobs, claimed now (a concurrent submission of the same ids shares
        these jobs) and journaled before the submission is answered; undone if the journal fails."""
        book = self._book
        batch = book.batches[a.batch_id] = BatchState(a.batch_id, a.job_ids, stop_after, options)
        for k, job_id in new:
            book.jobs[job_id] = JobState(job_id, a.fingerprints[a.row_of(k)], [])
        try:
            stored = [(job_id, a.fingerprints[a.row_of(k)], a.texts[a.row_of(k)]) for k, job_id in new]
            await book.journal.add_batch(a.batch_id, a.job_ids, stop_after, stored, dataclasses.asdict(options))
        except BaseException:
            del book.batches[a.batch_id]
            for _, job_id in new:
                book.jobs.pop(job_id, None)
            raise
        return batch

    async def _branch_row(self, job_id: str, turn: int) -> dict:
        job = self._book.job(job_id)
        record = await self._book.record(job)
        try:
            return branch_row(job_id, turn, await self._book.journal.row(job_id), record)
        except BranchError as exc:
            raise JobError(409, str(exc)) from None

    async def _check_with_environment(self, rows: list[dict]) -> None:
        """422 listing the rows the environment's own row model refuses (docs/job_api.md); 503 if
        the environment could not say (submit again later)."""
        if self._check_rows is None:
            return
        try:
            problems = await self._check_rows(rows)
        except Exception as exc:  # noqa: BLE001 - whatever kept the check from answering: nothing is accepted
            raise JobError(503, f"the environment could not check the rows ({exc}); submit again") from None
        if problems:
            raise JobError(
                422,
                f"{len(problems)} rows do not fit the environment's row model (up to {LISTED} listed)",
                rows=problems[:LISTED],
            )
