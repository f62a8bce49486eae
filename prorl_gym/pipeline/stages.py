# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Stage worker pools: INIT, RUN and EVAL each have their own capacity and time limit.

A rollout holds a slot of one stage at a time, so a slow verifier occupies an EVAL slot,
never a RUN slot, and the stages of different rollouts overlap. Each pool records queue
wait and service time, which end up on the rollout record and in /stats. The RUN pool also
sets the RunClock a caller put in the rollout's context (RUN_CLOCK): when it got its RUN worker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from prorl_gym.wire.failures import FailureType, RolloutFailure, Stage

T = TypeVar("T")


@dataclass(eq=False)
class RunClock:
    """When the rollout of the task that holds it got its RUN worker (monotonic; None while not in RUN)."""

    running_since: float | None = None


# Set by the job service's straggler control (stragglers.py) in a job's task; read by the RUN pool.
RUN_CLOCK: ContextVar[RunClock | None] = ContextVar("run_clock", default=None)


class StagePool:
    def __init__(self, stage: Stage, workers: int, timeout_s: float | None):
        if workers < 1:
            raise ValueError(f"{stage} needs at least one worker, got {workers}")
        self.stage = stage
        self.workers = workers
        self.timeout_s = timeout_s
        self._slots = asyncio.Semaphore(workers)
        self.waiting = 0
        self.in_flight = 0

    async def run(self, fn: Callable[[], Awaitable[T]], timings: dict[str, float]) -> T:
        """Run `fn` in a slot of this stage, within the stage's time limit.

        Records `<stage>_queue_s` and `<stage>_s` in `timings`; a stage timeout becomes a
        RolloutFailure(stage, TIMEOUT).
        """
        queued = time.perf_counter()
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        started = time.perf_counter()
        timings[f"{self.stage}_queue_s"] = started - queued
        self.in_flight += 1
        clock = RUN_CLOCK.get() if self.stage == Stage.RUN else None
        if clock is not None:
            clock.running_since = time.monotonic()
        deadline = asyncio.timeout(self.timeout_s)
        try:
            async with deadline:
                return await fn()
        except TimeoutError:
            if not deadline.expired():  # a timeout inside fn, not ours: let fn's caller type it
                raise
            # INIT and EVAL hang on the infrastructure (a sandbox, a verifier); RUN on the rollout itself.
            message = f"{self.stage} exceeded {self.timeout_s}s"
            raise RolloutFailure(self.stage, FailureType.TIMEOUT, message, infra=self.stage != Stage.RUN) from None
        finally:
            if clock is not None:
                clock.running_since = None
            self.in_flight -= 1
            self._slots.release()
            timings[f"{self.stage}_s"] = time.perf_counter() - started

    def stats(self) -> dict:
        return {"workers": self.workers, "waiting": self.waiting, "in_flight": self.in_flight}
