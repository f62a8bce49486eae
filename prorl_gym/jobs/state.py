# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What the job service holds in memory: its batches and jobs (JobBook), their state types, and the
totals since start (Tally). Every part of the service (manager.py's parts) reads and changes this
one book; the journal (journal.py) is its durable copy.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import NamedTuple

from prorl_gym.jobs.admission import JobError
from prorl_gym.jobs.groups import Group, groups_of
from prorl_gym.jobs.journal import Journal
from prorl_gym.wire.jobs import JobLimits
from prorl_gym.wire.records import JobStatus, RolloutRecord, StragglerNote

JOB_TASK_PREFIX = "job "  # a job's asyncio task is named "job <id>" (runner.Runner.launch)


def current_job_id() -> str | None:
    """The job id of the job whose task runs now, or None (read only where tracing is on: no cost otherwise)."""
    task = asyncio.current_task()
    name = task.get_name() if task is not None else ""
    return name[len(JOB_TASK_PREFIX) :] if name.startswith(JOB_TASK_PREFIX) else None


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
class BatchState:
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
class JobState:
    id: str
    fingerprint: str
    batches: list[BatchState]
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


class BatchView(NamedTuple):
    """A batch as the dashboard reads it (JobManager.batch_views)."""

    id: str
    job_ids: list[str]  # row-major: job k is sample k % group_size of row k // group_size
    results: list[tuple[str, JobStatus]]  # (job id, status) in stream order
    group_size: int
    usable: int
    done: bool
    stop_after: int | None


class JobBook:
    """The batches and jobs held now (running, or finished and not yet forgotten), whether the service
    is open, and the journal writes under way (a shutdown and a cancel wait for them)."""

    def __init__(self, limits: JobLimits, journal: Journal):
        self.limits, self.journal = limits, journal
        self.jobs: dict[str, JobState] = {}
        self.batches: dict[str, BatchState] = {}
        self.finished: OrderedDict[str, BatchState] = OrderedDict()  # finished batches, oldest first
        self.writes: set[asyncio.Task] = set()  # records being written, batches being forgotten
        self.active = 0  # jobs accepted and not finished
        self.open = self.closing = False

    def job(self, job_id: str) -> JobState:
        if (job := self.jobs.get(job_id)) is None:
            raise JobError(404, f"no job {job_id!r} (never submitted, or finished and expired)")
        return job

    def batch(self, batch_id: str) -> BatchState:
        if (batch := self.batches.get(batch_id)) is None:
            raise JobError(404, f"no batch {batch_id!r} (never submitted, or finished and expired)")
        return batch

    async def record(self, job: JobState) -> RolloutRecord | None:
        """A finished job's stored record (None while it runs)."""
        stored = (await self.journal.records([job.id])).get(job.id) if job.status != "running" else None
        return RolloutRecord.model_validate_json(stored) if stored else None

    def write_soon(self, write: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(write)
        self.writes.add(task)
        task.add_done_callback(self.writes.discard)

    def groups(self, batch: BatchState) -> list[Group]:
        def reward_of(job_id: str) -> float | None:
            return job.reward if (job := self.jobs.get(job_id)) is not None else None

        def waiting(job_id: str) -> bool:
            job = self.jobs.get(job_id)
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


class Tally:
    """Since start: final job statuses, failure types, and the latest records' timings (for /status)."""

    def __init__(self, timing_window: int):
        self.counts: Counter[str] = Counter()  # final job status -> count
        self.failures: Counter[str] = Counter()  # failure type -> count
        self.timings: deque[dict] = deque(maxlen=timing_window)

    def add(self, status: JobStatus, record: RolloutRecord) -> None:
        self.counts[status] += 1
        if record.failure:
            self.failures[record.failure.type.value] += 1
        if record.timings:
            self.timings.append(record.timings)
