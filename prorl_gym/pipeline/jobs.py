# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Jobs: rollouts handed to the service in batches, streamed back as they finish.

One job = one rollout of one sample of one row; a batch = the jobs of one submission. Each
job is an asyncio task around an injected `rollout(row) -> record` (the agent's pipeline,
whose StagePools do the queueing); finished records go to the streams of their batches and
stay for polling for a bounded time and count. Admission control refuses work (429/413)
rather than growing without bound. The same caller-supplied job id with the same content
is the same job, never a second run. Wire shapes: prorl_gym/client.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from prorl_gym.client import (
    Batch,
    BatchProgress,
    CancelResult,
    Job,
    JobLimits,
    JobStatus,
    Status,
    SubmitRequest,
    row_problem,
)
from prorl_gym.errors import ProrlError
from prorl_gym.pipeline.failures import Failure, FailureType
from prorl_gym.pipeline.metrics import percentile
from prorl_gym.pipeline.records import NG_FAILURE_CLASS_KEY, RolloutRecord

log = logging.getLogger(__name__)
Rollout = Callable[[dict], Awaitable[RolloutRecord]]
TIMING_KEYS = (
    "init_queue_s",
    "init_s",
    "run_queue_s",
    "run_s",
    "eval_queue_s",
    "eval_s",
    "total_s",
    "policy_s",
    "tools_s",
    "tool_exec_s",
)


class JobError(ProrlError):
    """A refused request: the HTTP status and the reason the caller is told."""

    def __init__(self, status: int, detail: str, **extra: Any):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.extra = status, detail, extra


@dataclass(eq=False)
class _Batch:
    id: str
    job_ids: list[str]
    stop_after: int | None
    results: list[RolloutRecord] = field(default_factory=list)  # stream lines, in completion order
    usable: int = 0
    finished_at: float | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def done(self) -> bool:
        return len(self.results) == len(self.job_ids)


@dataclass(eq=False)
class _Job:
    id: str
    fingerprint: str
    row: dict | None  # dropped once finished: the record carries it
    batches: list[_Batch]
    task: asyncio.Task | None = None  # None once finished
    status: JobStatus = "running"
    cancel_reason: str | None = None
    record: RolloutRecord | None = None
    started: float = field(default_factory=time.monotonic)


class JobManager:
    def __init__(
        self,
        rollout: Rollout,
        limits: JobLimits | None = None,
        *,
        environments: tuple[str, ...] = (),
        stage_stats: Callable[[], dict] = dict,
        validate_row: Callable[[dict], Any] | None = None,
    ):
        self.limits = limits or JobLimits()
        self._rollout, self._environments = rollout, environments
        self._stage_stats, self._validate_row = stage_stats, validate_row
        self._jobs: dict[str, _Job] = {}
        self._batches: dict[str, _Batch] = {}
        self._finished: OrderedDict[str, _Batch] = OrderedDict()  # finished batches, oldest first
        self._active = 0
        self._counts: Counter[str] = Counter()  # since start: final job status -> count
        self._failures: Counter[str] = Counter()  # since start: failure type -> count
        self._timings: deque[dict] = deque(maxlen=self.limits.timing_window)
        self._open = False

    def start(self) -> None:  # the server's lifespan starts and closes it
        self._open = True

    async def close(self) -> None:
        """Refuse new work, cancel every running job and wait (bounded) for their sandboxes."""
        self._open = False
        await self._settle(self._cancel(list(self._jobs.values()), "the server is shutting down"))

    # ------------------------------------------------------------------ submission

    def submit(self, request: SubmitRequest) -> Batch:
        """Accept a batch, or refuse all of it with a JobError: nothing is half accepted."""
        lim, rows, samples = self.limits, request.rows, request.samples_per_row
        if not self._open:
            raise JobError(503, "the job service is not running")
        if request.environment is not None and self._environments and request.environment not in self._environments:
            raise JobError(
                400, f"unknown environment {request.environment!r}; this agent serves {list(self._environments)}"
            )
        if len(rows) > lim.max_batch_rows:
            raise JobError(413, f"{len(rows)} rows exceed the limit of {lim.max_batch_rows} rows per batch")
        if (n := len(rows) * samples) > lim.max_batch_jobs:
            raise JobError(
                413, f"{n} jobs (rows x samples_per_row) exceed the limit of {lim.max_batch_jobs} per batch"
            )
        if n == 0:
            raise JobError(422, "a batch needs at least one row")
        effective = self._effective_rows(rows, request.sampling.model_dump(exclude_none=True))
        batch_id = request.batch_id or f"b-{uuid.uuid4().hex[:12]}"
        ids = request.job_ids or [f"{batch_id}/{i}/{s}" for i in range(len(rows)) for s in range(samples)]
        if len(ids) != n or len(set(ids)) != n or not all(0 < len(i) <= 256 for i in ids):
            raise JobError(422, f"job_ids must be {n} distinct ids of 1 to 256 characters, one per row sample")
        prints = [
            hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest() for row in effective
        ]
        conflicts = [
            i for k, i in enumerate(ids) if i in self._jobs and self._jobs[i].fingerprint != prints[k // samples]
        ]
        if conflicts:
            raise JobError(409, f"{len(conflicts)} job ids exist with other content: {conflicts[:10]}")
        if (old := self._batches.get(batch_id)) is not None:
            if old.job_ids != ids:
                raise JobError(409, f"batch {batch_id!r} exists with other jobs")
            return Batch(batch_id=batch_id, job_ids=ids, created=False, new_jobs=0)
        new = sum(i not in self._jobs for i in ids)
        if self._active + new > lim.max_active_jobs:
            raise JobError(
                429, f"{self._active} jobs are running; {new} more would exceed {lim.max_active_jobs}. Retry later"
            )
        batch = self._batches[batch_id] = _Batch(batch_id, ids, request.stop_after)
        for k, job_id in enumerate(ids):
            if (job := self._jobs.get(job_id)) is None:
                job = self._jobs[job_id] = _Job(job_id, prints[k // samples], effective[k // samples], [batch])
                self._active += 1
                job.task = asyncio.get_running_loop().create_task(self._rollout(job.row), name=f"job {job_id}")
                job.task.add_done_callback(lambda task, job=job: self._on_done(job, task))
            else:  # the same job again: shared with its first batch, not run twice
                job.batches.append(batch)
                if job.record is not None:
                    self._deliver(batch, job)
        self._check_batch(batch)
        self._prune()
        return Batch(batch_id=batch_id, job_ids=ids, created=True, new_jobs=new)

    def _effective_rows(self, rows: list[Any], overrides: dict) -> list[dict]:
        """Each row with the sampling overrides applied; 422 listing every malformed row."""
        effective, errors = [], []
        for index, row in enumerate(rows):
            if (error := row_problem(row)) is None:
                row = row | {"responses_create_params": row["responses_create_params"] | overrides}
                try:
                    if self._validate_row:
                        self._validate_row(row)
                except Exception as exc:  # noqa: BLE001 - whatever the validator rejects is the row's fault
                    error = str(exc)[:500]
            if error:
                errors.append({"index": index, "error": error})
            effective.append(row)
        if errors:
            raise JobError(422, f"{len(errors)} malformed rows (up to 20 listed)", rows=errors[:20])
        return effective

    # ------------------------------------------------------------------ results

    def _on_done(self, job: _Job, task: asyncio.Task) -> None:
        if task.cancelled():  # a record of its own, so that the consumer of the stream knows
            record = self._failed_record(
                job, FailureType.CANCELLED, f"cancelled: {job.cancel_reason or 'task cancelled'}"
            )
        elif (exc := task.exception()) is not None:
            log.error("job %s crashed", job.id, exc_info=exc)
            record = self._failed_record(job, FailureType.AGENT_ERROR, repr(exc))
        elif not isinstance(record := task.result(), RolloutRecord):
            record = self._failed_record(job, FailureType.AGENT_ERROR, f"the rollout returned {type(record).__name__}")
        failure = record.failure
        job.record, job.task, job.row = record, None, None
        job.status = "completed" if not failure else "cancelled" if failure.type == FailureType.CANCELLED else "failed"
        self._active -= 1
        self._counts[job.status] += 1
        if failure:
            self._failures[failure.type.value] += 1
        if record.timings:
            self._timings.append(record.timings)
        for batch in list(job.batches):
            self._deliver(batch, job)
            self._check_batch(batch)
        self._prune()

    def _failed_record(self, job: _Job, kind: FailureType, message: str) -> RolloutRecord:
        failure = Failure(stage=None, type=kind, message=message)  # the stage is not visible from here
        return RolloutRecord.model_validate(
            (job.row or {})
            | {
                "response": None,
                "failure": failure,
                NG_FAILURE_CLASS_KEY: kind.value,
                "timings": {"total_s": time.monotonic() - job.started},
            }
        )

    def _deliver(self, batch: _Batch, job: _Job) -> None:
        batch.results.append(
            job.record.model_copy(update={"job_id": job.id, "batch_id": batch.id, "status": job.status})
        )
        batch.usable += job.status == "completed"
        batch.changed.set()
        batch.changed = asyncio.Event()  # a follower waits on the event it saw before reading

    def _check_batch(self, batch: _Batch) -> list[_Job]:
        """Note a batch's end, or apply its stop_after; returns the jobs this cancelled."""
        if batch.done and batch.finished_at is None:
            batch.finished_at = time.monotonic()
            self._finished[batch.id] = batch
        elif batch.stop_after and batch.usable >= batch.stop_after and not batch.done:
            reason = f"stop_after: batch {batch.id} has {batch.usable} usable results"
            return self._cancel([self._jobs[i] for i in batch.job_ids], reason)
        return []

    def follow(self, batch_id: str, after: int = 0) -> AsyncIterator[RolloutRecord | None]:
        """The batch's results from number `after` on, until all are in; None is a heartbeat. 404 now, not mid-stream."""
        return self._follow(self._batch(batch_id), max(0, after))

    async def _follow(self, batch: _Batch, index: int) -> AsyncIterator[RolloutRecord | None]:
        while True:
            changed = batch.changed
            while index < len(batch.results):
                yield batch.results[index]
                index += 1
            if batch.done:  # close() cancels every job, so every batch gets done
                return
            try:
                await asyncio.wait_for(changed.wait(), self.limits.heartbeat_s)
            except TimeoutError:
                yield None

    async def job(self, job_id: str) -> Job:
        job = self._job(job_id)
        return Job(
            job_id=job.id,
            batch_ids=[b.id for b in job.batches],
            status=job.status,
            cancel_requested=job.cancel_reason is not None,
            record=job.record,
        )

    async def batch(self, batch_id: str) -> BatchProgress:
        b = self._batch(batch_id)
        return BatchProgress(
            batch_id=b.id,
            total=len(b.job_ids),
            finished=len(b.results),
            usable=b.usable,
            done=b.done,
            stop_after=b.stop_after,
        )

    def _job(self, job_id: str) -> _Job:
        if (job := self._jobs.get(job_id)) is None:
            raise JobError(404, f"no job {job_id!r} (never submitted, or finished and expired)")
        return job

    def _batch(self, batch_id: str) -> _Batch:
        if (batch := self._batches.get(batch_id)) is None:
            raise JobError(404, f"no batch {batch_id!r} (never submitted, or finished and expired)")
        return batch

    # ------------------------------------------------------------------ cancellation

    async def cancel_job(self, job_id: str) -> CancelResult:
        return await self._settle(self._cancel([self._job(job_id)], f"job {job_id} cancelled by the caller"))

    async def cancel_batch(self, batch_id: str) -> CancelResult:
        jobs = [self._jobs[i] for i in self._batch(batch_id).job_ids]
        return await self._settle(self._cancel(jobs, f"batch {batch_id} cancelled by the caller"))

    async def stop_after(self, batch_id: str, k: int) -> CancelResult:
        """Once k usable results of the batch exist (maybe already), cancel the rest."""
        if k < 1:
            raise JobError(422, "k must be at least 1")
        batch = self._batch(batch_id)
        batch.stop_after = k
        return await self._settle(self._check_batch(batch))

    def _cancel(self, jobs: list[_Job], reason: str) -> list[_Job]:
        """Cancel the running ones among `jobs` (a job shared by several batches too); returns them."""
        cancelled = [job for job in jobs if job.task is not None and job.cancel_reason is None]
        for job in cancelled:
            job.cancel_reason = reason
            job.task.cancel(reason)  # CancelledError inside the rollout: policy call dropped, sandbox released
        return cancelled

    async def _settle(self, jobs: list[_Job]) -> CancelResult:
        tasks = [job.task for job in jobs if job.task is not None]
        if tasks and self.limits.cancel_wait_s:
            await asyncio.wait(tasks, timeout=self.limits.cancel_wait_s)  # waits; never cancels them
        return CancelResult(cancelled=[job.id for job in jobs], settled=all(job.task is None for job in jobs))

    # ------------------------------------------------------------------ status and retention

    async def status(self) -> Status:
        timings = {}
        for key in TIMING_KEYS:
            if values := [t[key] for t in self._timings if isinstance(t.get(key), (int, float))]:
                timings[key] = {f"p{q}": round(percentile(values, q), 4) for q in (50, 90, 99)} | {"n": len(values)}
        return Status(
            stages=self._stage_stats(),
            active_jobs=self._active,
            retained_jobs=len(self._jobs) - self._active,
            active_batches=len(self._batches) - len(self._finished),
            retained_batches=len(self._finished),
            completed=self._counts["completed"],
            failed=self._counts["failed"],
            cancelled=self._counts["cancelled"],
            failed_by_type=dict(self._failures),
            timings=timings,
            limits=self.limits,
        )

    def _prune(self) -> None:
        """Forget the oldest finished batches beyond the retention count or age, and their jobs."""
        now = time.monotonic()
        while self._finished:
            batch = next(iter(self._finished.values()))
            if (
                len(self._jobs) - self._active <= self.limits.retain_jobs
                and now - batch.finished_at <= self.limits.retain_s
            ):
                return
            del self._finished[batch.id], self._batches[batch.id]
            for job_id in batch.job_ids:
                job = self._jobs[job_id]
                job.batches.remove(batch)
                if not job.batches and job.task is None:
                    del self._jobs[job_id]
