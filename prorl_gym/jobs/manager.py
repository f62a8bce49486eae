# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Jobs: rollouts handed to the service in batches, streamed back as they finish, journaled.

One job = one rollout of one sample of one row; a batch = the jobs of one submission. Each
job is an asyncio task around an injected `rollout(row) -> RolloutRecord` (the agent's
pipeline, whose StagePools do the queueing). Nothing is lost when the agent dies: a batch
is in the journal (journal.py) before its submission is answered, and a record is in the
journal, at its offset in each stream, before any stream sees it; an agent started again
serves every finished result again at the same offsets and runs the unfinished jobs again
(or ends them as `agent_restarted`, by config). At a clean shutdown the running jobs are
interrupted, not finished: streams end without a record for them and they run again at the
next start. Admission control refuses work (429/413) rather than growing without bound. The
same caller-supplied job id with the same content is the same job, never a second run.
Admission (what a submission must be): admission.py. Per-sample straggler control (a batch's
`stragglers`): stragglers.py, which tells this module which job to replace or evict. Wire shapes:
prorl_gym/wire/jobs.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import orjson

from prorl_gym.jobs.admission import LISTED, Admission, JobError, admit, check_bounds
from prorl_gym.jobs.aggregate import percentile
from prorl_gym.jobs.branch import BranchError, branch_row
from prorl_gym.jobs.groups import Group, groups_of
from prorl_gym.jobs.journal import Journal, StreamOffset
from prorl_gym.jobs.stragglers import Action, StragglerControl
from prorl_gym.pipeline.stages import RUN_CLOCK
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
from prorl_gym.wire.records import TIMING_KEYS, JobStatus, RolloutRecord, StragglerNote, failed_record

log = logging.getLogger(__name__)
Rollout = Callable[[dict], Awaitable[RolloutRecord]]
# rows -> [{"index", "error"}] of those the environment's row model refuses (the agent asks its resources server)
RowCheck = Callable[[list[dict]], Awaitable[list[dict]]]
STREAM_CHUNK = 64  # records read from the journal at a time by a stream


@dataclass
class BatchOptions:
    """How a batch was submitted beyond its jobs and stop_after; journaled with it."""

    deadline: float | None = None  # wall clock: then its unfinished jobs are cancelled
    expired: bool = False  # the deadline came before all its jobs finished
    group_size: int = 1  # samples_per_row: a row's jobs are its group (jobs are row-major)
    min_group_size: int | None = None  # usable samples that make a group usable (None: all of them)
    max_staleness: int | None = None  # versions a finished rollout may lag (None: any)
    on_stale: str = "rerun"  # or "flag"
    target_groups: int | None = None  # dynamic sampling: informative groups wanted
    stragglers: dict | None = None  # per-sample straggler control (wire Stragglers)
    evicted: list[str] = field(default_factory=list)  # stragglers taken out of their groups


@dataclass(eq=False)
class _Batch:
    id: str
    job_ids: list[str]
    stop_after: int | None
    options: BatchOptions = field(default_factory=BatchOptions)
    results: list[tuple[str, JobStatus]] = field(default_factory=list)  # (job id, status), stream order
    reserved: int = 0  # offsets handed out to records being written
    usable: int = 0
    finished: bool = False
    finished_at: float = 0.0  # monotonic
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    deadline_timer: asyncio.TimerHandle | None = None

    @property
    def done(self) -> bool:
        return len(self.results) == len(self.job_ids)


@dataclass(eq=False)
class _Job:
    id: str
    fingerprint: str
    batches: list[_Batch]
    task: asyncio.Task | None = None  # None once finished (or interrupted by a shutdown)
    status: JobStatus = "running"
    cancel_reason: str | None = None
    runs: int = 1  # > 1: started again after an agent restart
    snapshot_ids: list[str] = field(default_factory=list)  # its record's, released when it is forgotten
    started: float = field(default_factory=time.monotonic)
    reward: float | None = None  # once finished usable
    go: asyncio.Event | None = None  # dynamic sampling: its rollout starts once its group is started
    row: dict | None = None  # while running: what a fresh sample of it (straggler backfill) runs
    straggler: StragglerNote | None = None  # what the straggler control did with it


JOB_TASK_PREFIX = "job "  # a job's asyncio task is named "job <id>" (_launch)


def current_job_id() -> str | None:
    """The job id of the job whose task runs now, or None (read only where tracing is on: no cost otherwise)."""
    task = asyncio.current_task()
    name = task.get_name() if task is not None else ""
    return name[len(JOB_TASK_PREFIX) :] if name.startswith(JOB_TASK_PREFIX) else None


class BatchView(NamedTuple):
    """A batch as the dashboard reads it (JobManager.batch_views)."""

    id: str
    job_ids: list[str]  # row-major: job k is sample k % group_size of row k // group_size
    results: list[tuple[str, JobStatus]]  # (job id, status) in stream order
    group_size: int
    usable: int
    done: bool
    stop_after: int | None


def stream_line(record_json: bytes | str, job_id: str, batch_id: str, status: str) -> str:
    """A stored record as a stream line: the record's JSON with the stream's fields added."""
    text = record_json.decode() if isinstance(record_json, bytes) else record_json
    extra = orjson.dumps({"job_id": job_id, "batch_id": batch_id, "status": status}).decode()
    return f"{text[:-1]},{extra[1:]}" if text != "{}" else extra


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
        self._rollout, self._on_restart, self._environments = rollout, on_restart, environments
        self._stage_stats, self._validate_row, self._check_rows = stage_stats, validate_row, check_rows
        self._release_snapshots = release_snapshots  # of forgotten jobs' records (branches start from them)
        self._policy_version = policy_version  # the version new policy calls go under (staleness is against it)
        self._policy_health = policy_health  # whether the policy is there (policy_health.py), for /status
        self._jobs: dict[str, _Job] = {}
        self._batches: dict[str, _Batch] = {}
        self._finished: OrderedDict[str, _Batch] = OrderedDict()  # finished batches, oldest first
        self._writes: set[asyncio.Task] = set()  # records being written, batches being forgotten
        self._active = 0
        self._counts: Counter[str] = Counter()  # since start: final job status -> count
        self._failures: Counter[str] = Counter()  # since start: failure type -> count
        self._timings: deque[dict] = deque(maxlen=self.limits.timing_window)
        self._open = self._closing = False
        self.stragglers = StragglerControl(self._on_straggler)
        self._retiring: set[asyncio.Task] = set()  # replaced samples' runs, releasing their sandboxes

    @property
    def active(self) -> int:
        """Jobs accepted and not finished."""
        return self._active

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the journal, take back what it holds, run again (or end) what was running."""
        stored_batches, stored_jobs = await self.journal.open()
        for stored in stored_batches:
            options = BatchOptions(**stored.options)
            batch = self._batches[stored.id] = _Batch(stored.id, stored.job_ids, stored.stop_after, options)
            batch.results = [(job_id, status) for job_id, status in stored.results]
            batch.reserved = len(batch.results)
            batch.usable = sum(status == "completed" for _, status in batch.results)
            if stored.finished is not None:
                batch.finished, batch.finished_at = True, time.monotonic() - max(0.0, time.time() - stored.finished)
                self._finished[batch.id] = batch
        for stored in stored_jobs:
            job = self._jobs[stored.id] = _Job(
                stored.id, stored.fingerprint, [], status=stored.status, runs=stored.runs
            )
            job.batches = [b for b in self._batches.values() if stored.id in b.job_ids]
        interrupted = [j for j in self._jobs.values() if j.status == "running"]
        self._open = True
        self._prune()  # batches that expired while the agent was down
        if interrupted:
            log.warning("%d jobs were running when the agent stopped: %s", len(interrupted), self._on_restart)
            await self.journal.restarted([job.id for job in interrupted])
            rows = {job.id: await self.journal.row(job.id) for job in interrupted}
            for job in interrupted:
                job.runs += 1
                self._active += 1
                if self._on_restart == "rerun":
                    self._launch(job, rows[job.id] or {})
                else:
                    failure = Failure(stage=None, type=FailureType.AGENT_RESTARTED, message="the agent restarted")
                    self._finish_soon(job, self._failed_record(job, rows[job.id], failure))
        for batch in self._batches.values():  # deadlines hold across restarts (one passed meanwhile: now)
            self._schedule_deadline(batch)
            if batch.options.stragglers is not None and not batch.finished:
                self.stragglers.watch(batch.id, Stragglers(**batch.options.stragglers))

    async def close(self) -> None:
        """Refuse new work and interrupt the running jobs (they stay unfinished in the journal and
        run again at the next start); end the streams; wait (bounded) for sandboxes to be released."""
        self._open, self._closing = False, True
        for batch in self._batches.values():
            if batch.deadline_timer is not None:
                batch.deadline_timer.cancel()
        await self.stragglers.close()
        running = [job for job in self._jobs.values() if job.task is not None]
        for job in running:
            job.task.cancel("the agent is shutting down")
        if waits := [job.task for job in running] + list(self._retiring):
            await asyncio.wait(waits, timeout=self.limits.cancel_wait_s or None)
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=self.limits.cancel_wait_s or None)
        for batch in self._batches.values():
            batch.changed.set()
        await self.journal.close()

    # ------------------------------------------------------------------ submission

    async def submit(self, request: SubmitRequest) -> Batch:
        """Accept a batch (journaled before this returns), or refuse all of it with a JobError."""
        if not self._open:
            raise JobError(503, "the job service is not running")
        check_bounds(request, self.limits, self._environments)
        if request.fork_from is not None:
            rows = [await self._branch_row(request.fork_from.job_id, request.fork_from.turn)]
        else:
            rows = request.rows
        admission = admit(request, rows, self.limits, self._validate_row)
        if request.fork_from is None:  # a branch's row is its finished job's, checked then
            await self._check_with_environment(admission.rows)
            if not self._open:
                raise JobError(503, "the job service is not running")
        # From here on no await until the journal: the checks hold when the jobs are claimed.
        a, ids = admission, admission.job_ids
        if conflicts := [
            i
            for k, i in enumerate(ids)
            if i in self._jobs and self._jobs[i].fingerprint != a.fingerprints[a.row_of(k)]
        ]:
            raise JobError(409, f"{len(conflicts)} job ids exist with other content: {conflicts[:10]}")
        if (old := self._batches.get(a.batch_id)) is not None:
            if old.job_ids != ids:
                raise JobError(409, f"batch {a.batch_id!r} exists with other jobs")
            return Batch(batch_id=a.batch_id, job_ids=ids, created=False, new_jobs=0)
        new = [(k, job_id) for k, job_id in enumerate(ids) if job_id not in self._jobs]
        if self._active + len(new) > self.limits.max_active_jobs:
            raise JobError(
                429,
                f"{self._active} jobs are running; {len(new)} more would exceed {self.limits.max_active_jobs}. "
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
            self.stragglers.watch(batch.id, request.stragglers)
        launch = {job_id for _, job_id in new}
        for k, job_id in enumerate(ids):
            job = self._jobs[job_id]
            job.batches.append(batch)
            if job_id in launch:
                self._active += 1
                if request.target_groups is not None and a.row_of(k) >= request.target_groups:
                    job.go = asyncio.Event()  # a row in the queue: started if a group ends without a signal
                self._launch(job, a.rows[a.row_of(k)])
            elif job.status != "running":  # the same job again: shared with its first batch, not run twice
                self._share_soon(job, batch)
        self._check_batch(batch)
        self._schedule_deadline(batch)
        self._prune()
        return Batch(batch_id=a.batch_id, job_ids=ids, created=True, new_jobs=len(new))

    async def _claim(
        self, a: Admission, stop_after: int | None, options: BatchOptions, new: list[tuple[int, str]]
    ) -> _Batch:
        """The batch and its new jobs, claimed now (a concurrent submission of the same ids shares
        these jobs) and journaled before the submission is answered; undone if the journal fails."""
        batch = self._batches[a.batch_id] = _Batch(a.batch_id, a.job_ids, stop_after, options)
        for k, job_id in new:
            self._jobs[job_id] = _Job(job_id, a.fingerprints[a.row_of(k)], [])
        try:
            stored = [(job_id, a.fingerprints[a.row_of(k)], a.texts[a.row_of(k)]) for k, job_id in new]
            await self.journal.add_batch(a.batch_id, a.job_ids, stop_after, stored, dataclasses.asdict(options))
        except BaseException:
            del self._batches[a.batch_id]
            for _, job_id in new:
                self._jobs.pop(job_id, None)
            raise
        return batch

    async def _branch_row(self, job_id: str, turn: int) -> dict:
        job = self._job(job_id)
        stored = (await self.journal.records([job_id])).get(job_id) if job.status != "running" else None
        record = RolloutRecord.model_validate_json(stored) if stored else None
        try:
            return branch_row(job_id, turn, await self.journal.row(job_id), record)
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

    # ------------------------------------------------------------------ running and finishing

    def _launch(self, job: _Job, row: dict) -> None:
        job.row = row
        job.task = asyncio.get_running_loop().create_task(self._run(job, row), name=f"{JOB_TASK_PREFIX}{job.id}")
        job.task.add_done_callback(lambda task: self._on_done(job, row, task))

    async def _run(self, job: _Job, row: dict) -> RolloutRecord:
        """The rollout; one whose oldest turn lags the policy by more than its batch's max_staleness
        runs again from INIT, or comes back flagged, as the batch asks."""
        options = job.batches[0].options if job.batches else BatchOptions()
        if job.go is not None:
            await job.go.wait()
        if job.batches and (clock := self.stragglers.started(job.batches[0].id, job.id)) is not None:
            RUN_CLOCK.set(clock)  # this task's: its RUN stage says when it runs
        for rerun in range(self.limits.max_stale_reruns + 1):
            record = await self._rollout(row)
            if options.max_staleness is None or self._policy_version is None or record.oldest_policy_version is None:
                return record
            lag = self._policy_version() - record.oldest_policy_version
            stale = lag > options.max_staleness
            if not stale or options.on_stale == "flag" or rerun == self.limits.max_stale_reruns:
                return record.model_copy(update={"staleness": lag, "stale": stale})
            log.info("job %s: %d versions behind (max %d): run again", job.id, lag, options.max_staleness)
        raise AssertionError("unreachable")

    def _on_done(self, job: _Job, row: dict, task: asyncio.Task) -> None:
        if task is not job.task:  # a straggler's run that a fresh sample replaced
            return
        if self._closing and task.cancelled() and job.cancel_reason is None:
            job.task = None  # interrupted by the shutdown: unfinished in the journal, run again at the next start
            return
        if task.cancelled():  # a record of its own, so that the consumer of the stream knows
            message = f"cancelled: {job.cancel_reason or 'task cancelled'}"
            record = self._failed_record(job, row, Failure(stage=None, type=FailureType.CANCELLED, message=message))
        elif (exc := task.exception()) is not None:
            log.error("job %s crashed", job.id, exc_info=exc)
            record = self._failed_record(
                job, row, Failure(stage=None, type=FailureType.AGENT_ERROR, message=repr(exc))
            )
        elif not isinstance(record := task.result(), RolloutRecord):
            message = f"the rollout returned {type(record).__name__}"
            record = self._failed_record(job, row, Failure(stage=None, type=FailureType.AGENT_ERROR, message=message))
        self._finish_soon(job, record)

    def _failed_record(self, job: _Job, row: dict | None, failure: Failure) -> RolloutRecord:
        return failed_record(row, failure, {"total_s": time.monotonic() - job.started})

    def _finish_soon(self, job: _Job, record: RolloutRecord) -> None:
        """Journal the job's record and its offset in each of its batches' streams, then deliver it
        (a task: the journal runs on its own thread)."""
        self._write_soon(self._finish(job, record))

    def _share_soon(self, job: _Job, batch: _Batch) -> None:
        """A finished job joins another batch: its stored record gets an offset in that stream too."""
        self._write_soon(self._share(job, batch))

    def _write_soon(self, write: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(write)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _finish(self, job: _Job, record: RolloutRecord) -> None:
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
        self._active -= 1
        self._counts[job.status] += 1
        if failure:
            self._failures[failure.type.value] += 1
        if record.timings:
            self._timings.append(record.timings)
        job.snapshot_ids = [s.snapshot_id for s in record.snapshots]
        batches = list(job.batches)
        for batch in batches:
            self.stragglers.finished(batch.id, job.id, record)
        text = orjson.dumps(record.wire()).decode()
        await self.journal.finish_job(
            job.id, job.status, text, self._offsets(batches), keep_row=bool(job.snapshot_ids)
        )
        self._delivered(job, batches)

    async def _share(self, job: _Job, batch: _Batch) -> None:
        await self.journal.add_offsets(job.id, job.status, self._offsets([batch]))
        self._delivered(job, [batch])

    @staticmethod
    def _offsets(batches: list[_Batch]) -> list[StreamOffset]:
        """The next offset in each batch's stream, taken now (so offsets follow the order of finishing)."""
        offsets = []
        for batch in batches:
            offsets.append(StreamOffset(batch.id, batch.reserved, batch.reserved + 1 == len(batch.job_ids)))
            batch.reserved += 1
        return offsets

    def _delivered(self, job: _Job, batches: list[_Batch]) -> None:
        for batch in batches:
            self._deliver(batch, job)
            self._check_batch(batch)
        self._prune()

    def _deliver(self, batch: _Batch, job: _Job) -> None:
        batch.results.append((job.id, job.status))
        batch.usable += job.status == "completed"
        batch.changed.set()
        batch.changed = asyncio.Event()  # a follower waits on the event it saw before reading

    def _check_batch(self, batch: _Batch) -> list[_Job]:
        """Note a batch's end, or apply its stop_after; returns the jobs this cancelled."""
        if batch.done and not batch.finished:
            batch.finished, batch.finished_at = True, time.monotonic()
            self._finished[batch.id] = batch
            self.stragglers.batch_done(batch.id)
            if batch.deadline_timer is not None:
                batch.deadline_timer.cancel()
        elif batch.stop_after and batch.usable >= batch.stop_after and not batch.done:
            reason = f"stop_after: batch {batch.id} has {batch.usable} usable results"
            return self._cancel([self._jobs[i] for i in batch.job_ids], reason)
        elif batch.options.target_groups and not batch.done:
            return self._sample_dynamically(batch)
        return []

    def _groups(self, batch: _Batch) -> list[Group]:
        def reward_of(job_id: str) -> float | None:
            return job.reward if (job := self._jobs.get(job_id)) is not None else None

        def waiting(job_id: str) -> bool:
            job = self._jobs.get(job_id)
            return job is not None and job.go is not None and not job.go.is_set()

        options = batch.options
        return groups_of(
            batch.job_ids,
            options.group_size,
            options.min_group_size,
            dict(batch.results),
            reward_of,
            waiting,
            frozenset(options.evicted),
        )

    def _sample_dynamically(self, batch: _Batch) -> list[_Job]:
        """Start queued groups until the running ones could make target_groups informative; once that
        many are informative, cancel the rest. Returns the jobs this cancelled."""
        groups, wanted = self._groups(batch), batch.options.target_groups
        states = Counter(group.state for group in groups)
        if states["informative"] >= wanted:
            reason = f"dynamic sampling: batch {batch.id} has {states['informative']} informative groups"
            return self._cancel([self._jobs[i] for i in batch.job_ids], reason)
        open_slots = wanted - states["informative"] - states["running"]
        for group in (g for g in groups if g.state == "waiting"):
            if open_slots <= 0:
                break
            for job in (self._jobs.get(i) for i in group.job_ids):
                if job is not None and job.go is not None:
                    job.go.set()
            open_slots -= 1
        return []

    def _schedule_deadline(self, batch: _Batch) -> None:
        if batch.options.deadline is None or batch.finished or batch.deadline_timer is not None:
            return
        delay = max(0.0, batch.options.deadline - time.time())
        batch.deadline_timer = asyncio.get_running_loop().call_later(delay, self._expire, batch)

    def _expire(self, batch: _Batch) -> None:
        """The batch's deadline: its unfinished jobs are cancelled (a straggler never holds it up)."""
        if batch.finished or self._batches.get(batch.id) is not batch or self._closing:
            return
        batch.options.expired = True
        self._write_soon(self.journal.set_options(batch.id, dataclasses.asdict(batch.options)))
        unfinished = [self._jobs[i] for i in batch.job_ids if i in self._jobs]
        reason = f"deadline: batch {batch.id} was not finished by its deadline"
        log.info("%s: cancelling %d jobs", reason, len(self._cancel(unfinished, reason)))

    # ------------------------------------------------------------------ reading results

    def follow(self, batch_id: str, after: int = 0) -> AsyncIterator[str | None]:
        """The batch's records (stream lines, JSON) from number `after` on, until all are in; None is a
        heartbeat. Ends early when the agent shuts down (resume with `after` once it is back). 404 now."""
        return self._follow(self._batch(batch_id), max(0, after))

    async def _follow(self, batch: _Batch, index: int) -> AsyncIterator[str | None]:
        while True:
            changed = batch.changed
            if index < len(batch.results):
                chunk = batch.results[index : index + STREAM_CHUNK]
                records = await self.journal.records([job_id for job_id, _ in chunk])
                for job_id, status in chunk:
                    if job_id not in records:  # the batch was forgotten meanwhile
                        return
                    yield stream_line(records[job_id], job_id, batch.id, status)
                    index += 1
                continue
            if batch.done or self._closing:
                return
            try:
                await asyncio.wait_for(changed.wait(), self.limits.heartbeat_s)
            except TimeoutError:
                yield None

    async def job(self, job_id: str) -> Job:
        job = self._job(job_id)
        stored = (await self.journal.records([job.id])).get(job.id) if job.status != "running" else None
        return Job(
            job_id=job.id,
            batch_ids=[b.id for b in job.batches],
            status=job.status,
            cancel_requested=job.cancel_reason is not None,
            record=RolloutRecord.model_validate_json(stored) if stored else None,
        )

    async def batch(self, batch_id: str) -> BatchProgress:
        b = self._batch(batch_id)
        groups = self._groups(b)
        states = Counter(group.state for group in groups)
        return BatchProgress(
            batch_id=b.id,
            total=len(b.job_ids),
            finished=len(b.results),
            usable=b.usable,
            done=b.done,
            stop_after=b.stop_after,
            deadline=b.options.deadline,
            expired=b.options.expired,
            groups=len(groups),
            usable_groups=sum(group.usable for group in groups),
            small_groups=[group.row for group in groups if group.finished and not group.usable],
            target_groups=b.options.target_groups,
            informative_groups=states["informative"],
            dropped_groups=states["dropped"] if b.options.target_groups else 0,
            waiting_groups=states["waiting"],
            group_sizes=[group.size for group in groups],
            stragglers=self.stragglers.progress(b.id),
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

    def _on_straggler(self, action: Action, job_id: str, note: StragglerNote) -> None:
        """The straggler control found a straggler: replace it with a fresh sample of the same prompt (the
        run cancelled: its policy call aborted, its sandbox released), evict it, or note that it is waited for."""
        job = self._jobs.get(job_id)
        if job is None or job.task is None or job.cancel_reason is not None or self._closing:
            return
        job.straggler = note
        said = f"a straggler ({note.after_s:.1f}s in RUN, past the batch's {note.threshold_s:.1f}s)"
        if action == "replaced":
            old = job.task
            self._retiring.add(old)
            old.add_done_callback(self._retiring.discard)
            old.cancel(f"{said}: replaced by a fresh sample")
            self._launch(job, job.row or {})
        elif action == "evicted":
            for batch in job.batches:
                batch.options.evicted.append(job.id)
                self._write_soon(self.journal.set_options(batch.id, dataclasses.asdict(batch.options)))
            self._cancel([job], f"{said}: evicted, its group admitted without it")

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
        await self.journal.set_stop_after(batch_id, k)
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
        if self.limits.cancel_wait_s and (writes := set(self._writes)):
            await asyncio.wait(writes, timeout=self.limits.cancel_wait_s)  # their records journaled
        return CancelResult(cancelled=[job.id for job in jobs], settled=all(job.status != "running" for job in jobs))

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
            journal=await self.journal.stats(),
            policy_health=self._policy_health() if self._policy_health is not None else None,
        )

    def batch_views(self) -> list[BatchView]:
        """Every batch held, oldest first, as the dashboard reads them (its lists, not copies: read, never change)."""
        return [
            BatchView(b.id, b.job_ids, b.results, b.options.group_size, b.usable, b.done, b.stop_after)
            for b in self._batches.values()
        ]

    async def acknowledge(self, batch_id: str) -> BatchProgress:
        """The caller has the batch's results: forget it now (409 while it is not finished)."""
        batch = self._batch(batch_id)
        if not batch.finished:
            raise JobError(409, f"batch {batch_id!r} is not finished: cancel it first, or wait")
        progress = await self.batch(batch_id)
        self._forget([batch])
        return progress

    def _prune(self) -> None:
        """Forget the oldest finished batches beyond the retention count or age, and their jobs."""
        now, expired = time.monotonic(), []
        retained = len(self._jobs) - self._active
        for batch in self._finished.values():
            if retained <= self.limits.retain_jobs and now - batch.finished_at <= self.limits.retain_s:
                break
            expired.append(batch)
            retained -= len(batch.job_ids)
        if expired:
            self._forget(expired)

    def _forget(self, batches: list[_Batch]) -> None:
        gone: list[_Job] = []
        for batch in batches:
            del self._finished[batch.id], self._batches[batch.id]
            self.stragglers.forget(batch.id)
            if batch.deadline_timer is not None:
                batch.deadline_timer.cancel()
            for job_id in batch.job_ids:
                job = self._jobs.get(job_id)
                if job is None:
                    continue
                if batch in job.batches:
                    job.batches.remove(batch)
                if not job.batches and job.task is None:
                    del self._jobs[job_id]
                    gone.append(job)
        snapshots = [s for job in gone for s in job.snapshot_ids]
        self._write_soon(self._drop([b.id for b in batches], [job.id for job in gone], snapshots))

    async def _drop(self, batch_ids: list[str], job_ids: list[str], snapshot_ids: list[str]) -> None:
        if snapshot_ids and self._release_snapshots is not None:
            await self._release_snapshots(snapshot_ids)
        await self.journal.forget_batches(batch_ids, job_ids)
