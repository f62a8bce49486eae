# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What the job service answers about itself: a job, a batch's progress (its groups, its stragglers),
the service's status (/status: stages, counts, timings, the journal, the policy's health), and the
batches as the dashboard lists them. Reads only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from prorl_gym.jobs.aggregate import percentile
from prorl_gym.jobs.state import BatchView, JobBook, Tally
from prorl_gym.jobs.stragglers import StragglerControl
from prorl_gym.wire.jobs import BatchProgress, Job, PolicyHealthView, Status
from prorl_gym.wire.records import TIMING_KEYS


class Queries:
    def __init__(
        self,
        book: JobBook,
        tally: Tally,
        stragglers: StragglerControl,
        stage_stats: Callable[[], dict],
        policy_health: Callable[[], PolicyHealthView] | None,
    ):
        self._book, self._tally, self._stragglers = book, tally, stragglers
        self._stage_stats = stage_stats
        self._policy_health = policy_health  # whether the policy is there (policy_health.py), for /status

    async def job(self, job_id: str) -> Job:
        job = self._book.job(job_id)
        record = await self._book.record(job)
        return Job(
            job_id=job.id,
            batch_ids=[b.id for b in job.batches],
            status=job.status,
            cancel_requested=job.cancel_reason is not None,
            record=record,
        )

    async def batch(self, batch_id: str) -> BatchProgress:
        b = self._book.batch(batch_id)
        groups = self._book.groups(b)
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
            stragglers=self._stragglers.progress(b.id),
        )

    async def status(self) -> Status:
        book, tally = self._book, self._tally
        timings = {}
        for key in TIMING_KEYS:
            if values := [t[key] for t in tally.timings if isinstance(t.get(key), (int, float))]:
                timings[key] = {f"p{q}": round(percentile(values, q), 4) for q in (50, 90, 99)} | {"n": len(values)}
        return Status(
            stages=self._stage_stats(),
            active_jobs=book.active,
            retained_jobs=len(book.jobs) - book.active,
            active_batches=len(book.batches) - len(book.finished),
            retained_batches=len(book.finished),
            completed=tally.counts["completed"],
            failed=tally.counts["failed"],
            cancelled=tally.counts["cancelled"],
            failed_by_type=dict(tally.failures),
            timings=timings,
            limits=book.limits,
            journal=await book.journal.stats(),
            policy_health=self._policy_health() if self._policy_health is not None else None,
        )

    def batch_views(self) -> list[BatchView]:
        """Every batch held, oldest first, as the dashboard reads them (its lists, not copies: read, never change)."""
        return [
            BatchView(b.id, b.job_ids, b.results, b.options.group_size, b.usable, b.done, b.stop_after)
            for b in self._book.batches.values()
        ]
