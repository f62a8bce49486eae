# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A batch's policy over its jobs beyond each one's own run: when they are cancelled (the caller's
cancel, stop_after, dynamic sampling's target_groups, the deadline) and what is done with a straggler
(stragglers.py finds it; it is replaced by a fresh sample or evicted from its group here).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable

from prorl_gym.jobs.admission import JobError
from prorl_gym.jobs.state import BatchState, JobBook, JobState
from prorl_gym.jobs.stragglers import Action, StragglerControl
from prorl_gym.wire.jobs import CancelResult
from prorl_gym.wire.records import StragglerNote

log = logging.getLogger(__name__)


def cancel(jobs: list[JobState], reason: str) -> list[JobState]:
    """Cancel the running ones among `jobs` (a job shared by several batches too); returns them."""
    cancelled = [job for job in jobs if job.task is not None and job.cancel_reason is None]
    for job in cancelled:
        job.cancel_reason = reason
        job.task.cancel(reason)  # CancelledError inside the rollout: policy call dropped, sandbox released
    return cancelled


class BatchPolicy:
    """Applies a batch's stop rules and straggler actions to its jobs; `launch(job, row)` runs a job
    (runner.Runner.launch), which a replaced straggler's fresh sample needs."""

    def __init__(self, book: JobBook, launch: Callable[[JobState, dict], None]):
        self._book, self._launch = book, launch
        self.stragglers = StragglerControl(self._on_straggler)
        self.retiring: set[asyncio.Task] = set()  # replaced samples' runs, releasing their sandboxes

    def check_batch(self, batch: BatchState) -> list[JobState]:
        """Note a batch's end, or apply its stop_after; returns the jobs this cancelled."""
        if batch.done and not batch.finished:
            batch.finished, batch.finished_at = True, time.monotonic()
            self._book.finished[batch.id] = batch
            self.stragglers.batch_done(batch.id)
            if batch.deadline_timer is not None:
                batch.deadline_timer.cancel()
        elif batch.stop_after and batch.usable >= batch.stop_after and not batch.done:
            reason = f"stop_after: batch {batch.id} has {batch.usable} usable results"
            return cancel([self._book.jobs[i] for i in batch.job_ids], reason)
        elif batch.options.target_groups and not batch.done:
            return self._sample_dynamically(batch)
        return []

    def _sample_dynamically(self, batch: BatchState) -> list[JobState]:
        """Start queued groups until the running ones could make target_groups informative; once that
        many are informative, cancel the rest. Returns the jobs this cancelled."""
        jobs = self._book.jobs
        groups, wanted = self._book.groups(batch), batch.options.target_groups
        states = Counter(group.state for group in groups)
        if states["informative"] >= wanted:
            reason = f"dynamic sampling: batch {batch.id} has {states['informative']} informative groups"
            return cancel([jobs[i] for i in batch.job_ids], reason)
        open_slots = wanted - states["informative"] - states["running"]
        for group in (g for g in groups if g.state == "waiting"):
            if open_slots <= 0:
                break
            for job in (jobs.get(i) for i in group.job_ids):
                if job is not None and job.go is not None:
                    job.go.set()
            open_slots -= 1
        return []

    def schedule_deadline(self, batch: BatchState) -> None:
        if batch.options.deadline is None or batch.finished or batch.deadline_timer is not None:
            return
        delay = max(0.0, batch.options.deadline - time.time())
        batch.deadline_timer = asyncio.get_running_loop().call_later(delay, self._expire, batch)

    def _expire(self, batch: BatchState) -> None:
        """The batch's deadline: its unfinished jobs are cancelled (a straggler never holds it up)."""
        book = self._book
        if batch.finished or book.batches.get(batch.id) is not batch or book.closing:
            return
        batch.options.expired = True
        book.write_soon(book.journal.set_options(batch.id, dataclasses.asdict(batch.options)))
        unfinished = [book.jobs[i] for i in batch.job_ids if i in book.jobs]
        reason = f"deadline: batch {batch.id} was not finished by its deadline"
        log.info("%s: cancelling %d jobs", reason, len(cancel(unfinished, reason)))

    def _on_straggler(self, action: Action, job_id: str, note: StragglerNote) -> None:
        """The straggler control found a straggler: replace it with a fresh sample of the same prompt (the
        run cancelled: its policy call aborted, its sandbox released), evict it, or note that it is waited for."""
        book = self._book
        job = book.jobs.get(job_id)
        if job is None or job.task is None or job.cancel_reason is not None or book.closing:
            return
        job.straggler = note
        said = f"a straggler ({note.after_s:.1f}s in RUN, past the batch's {note.threshold_s:.1f}s)"
        if action == "replaced":
            old = job.task
            self.retiring.add(old)
            old.add_done_callback(self.retiring.discard)
            old.cancel(f"{said}: replaced by a fresh sample")
            self._launch(job, job.row or {})
        elif action == "evicted":
            for batch in job.batches:
                batch.options.evicted.append(job.id)
                book.write_soon(book.journal.set_options(batch.id, dataclasses.asdict(batch.options)))
            cancel([job], f"{said}: evicted, its group admitted without it")

    # ------------------------------------------------------------------ the caller's cancels

    async def cancel_job(self, job_id: str) -> CancelResult:
        return await self._settle(cancel([self._book.job(job_id)], f"job {job_id} cancelled by the caller"))

    async def cancel_batch(self, batch_id: str) -> CancelResult:
        jobs = [self._book.jobs[i] for i in self._book.batch(batch_id).job_ids]
        return await self._settle(cancel(jobs, f"batch {batch_id} cancelled by the caller"))

    async def stop_after(self, batch_id: str, k: int) -> CancelResult:
        """Once k usable results of the batch exist (maybe already), cancel the rest."""
        if k < 1:
            raise JobError(422, "k must be at least 1")
        batch = self._book.batch(batch_id)
        batch.stop_after = k
        await self._book.journal.set_stop_after(batch_id, k)
        return await self._settle(self.check_batch(batch))

    async def _settle(self, jobs: list[JobState]) -> CancelResult:
        wait_s = self._book.limits.cancel_wait_s
        tasks = [job.task for job in jobs if job.task is not None]
        if tasks and wait_s:
            await asyncio.wait(tasks, timeout=wait_s)  # waits; never cancels them
        if wait_s and (writes := set(self._book.writes)):
            await asyncio.wait(writes, timeout=wait_s)  # their records journaled
        return CancelResult(cancelled=[job.id for job in jobs], settled=all(job.status != "running" for job in jobs))
