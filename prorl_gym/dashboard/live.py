# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The dashboard's time series: counters the pipeline's hooks bump (a few dict increments per rollout),
sampled every `sample_s` into a bounded ring (the charts of throughput, failures and stage load)."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable

from prorl_gym.wire.records import RolloutRecord


def failure_key(stage, kind) -> str:
    return f"{getattr(stage, 'value', stage) or '-'}/{getattr(kind, 'value', kind)}"


class LiveCounters:
    """Since the agent started: rollouts by outcome, failures by stage and type (of the rollouts, and of
    every attempt, retried ones included), rollouts that needed more than one attempt."""

    def __init__(self) -> None:
        self.finished = 0
        self.usable = 0
        self.failed: Counter[str] = Counter()  # "<stage>/<type>" of failed rollouts
        self.attempt_failures: Counter[str] = Counter()  # of every attempt (a retried one too)
        self.retried = 0

    def attempt(self, record: RolloutRecord) -> None:
        if (failure := record.failure) is not None:
            self.attempt_failures[failure_key(failure.stage, failure.type)] += 1

    def rollout(self, record: RolloutRecord) -> None:
        self.finished += 1
        if (failure := record.failure) is None:
            self.usable += 1
        else:
            self.failed[failure_key(failure.stage, failure.type)] += 1
        self.retried += record.attempts > 1


class Series:
    """Samples of the counters and the stages' load, every `sample_s`, the last `keep` of them."""

    def __init__(self, counters: LiveCounters, stages: Callable[[], dict], sample_s: float = 2.0, keep: int = 900):
        self.counters, self._stages, self.sample_s = counters, stages, sample_s
        self.points: deque[dict] = deque(maxlen=keep)

    def sample(self) -> dict:
        c = self.counters
        point = {
            "t": round(time.time(), 3),
            "finished": c.finished,
            "usable": c.usable,
            "retried": c.retried,
            "failed": dict(c.failed),
            "attempt_failures": dict(c.attempt_failures),
            "stages": self._stages(),
        }
        self.points.append(point)
        return point

    def since(self, t: float = 0.0) -> list[dict]:
        return [p for p in self.points if p["t"] > t]
