# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Per-sample straggler control: one slow sample must not hold its group, its step, and the GPUs.

A batch submitted with `stragglers: {policy, k, max_replacements}` is watched. A running sample whose
RUN (its generations and tool calls, timed from when it got its RUN worker, so a sample queued behind
others is not a straggler) has gone on for more than `k` times the p50 of its batch's RUN times is a
straggler, and the batch's policy acts on it. The p50 is over every sample of the batch that has
started, those still running (or failed) counted as longer than any finished: the time by which half
of them finished usable, known from then on. (The median of the finished samples alone would be the
fastest ones' while few have finished, and flag ordinary samples; that of half the batch is not.)

- `wait`: nothing; the batch waits for it, as without the setting (what it costs is still measured);
- `backfill`: it is cancelled and a fresh sample of the same prompt starts at once under the same job
  id, so its group still reaches its size (its record is the fresh sample's, saying it replaced a
  straggler); at most `max_replacements` times per sample, then it is waited for;
- `evict`: it is cancelled and its group admitted without it (partial): its record is `cancelled`,
  saying `evicted`, and the group is usable with the samples it has (`min_group_size` still applies).

Cancelled means what a cancel always means here: the policy call in flight is aborted at the
endpoint (the connections to the model server and from it to the endpoint are closed, on which vLLM
and SGLang abort the generation: prorl_gym/disconnect.py) and the sandbox released.

What stragglers cost, per batch (BatchProgress.stragglers), summed in /metrics, on the dashboard:

- `wait_s`: how long the batch went on once it had a straggler: from the first detection to the
  batch's end (under `wait` the straggler itself, under `backfill` its fresh sample, are what it
  then waits on);
- `policy_idle_s`: the policy's capacity left unused meanwhile, the integral over that time of
  1 - (the agent's policy calls in flight / the most it has had in flight), in seconds of the whole
  policy: with one endpoint, the GPU-seconds lost to stragglers;
- `replaced`, `evicted`, `waited` (samples detected under `wait`);
- `time_saved_s`: an estimate, conservative, of how much sooner the batch ended than had it waited
  for the samples it replaced or evicted: each is taken to need as long again as it had run when
  removed (the median remainder of a heavy-tailed time), so the batch would have ended no sooner than
  the latest of those ends.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from prorl_gym.pipeline.stages import RunClock
from prorl_gym.wire.jobs import StragglerProgress, Stragglers
from prorl_gym.wire.records import RolloutRecord, StragglerNote

TICK_S = 0.2  # how often running samples are looked at (only while a watched batch runs)
Action = Literal["replaced", "evicted", "waited"]


class PolicyActivity:
    """The agent's policy calls in flight over time (PolicyGate reports each change): the integral of
    the policy's unused capacity, 1 - in flight / the most ever in flight."""

    def __init__(self) -> None:
        self.in_flight = self.peak = 0
        self._unused = 0.0
        self._at = time.monotonic()

    def set(self, in_flight: int) -> None:
        self._advance()
        self.in_flight, self.peak = in_flight, max(self.peak, in_flight)

    def unused_s(self) -> float:
        """Seconds of the whole policy's capacity left unused since the agent started (a running total)."""
        self._advance()
        return self._unused

    def _advance(self) -> None:
        now = time.monotonic()
        if self.peak:
            self._unused += (now - self._at) * (1 - self.in_flight / self.peak)
        self._at = now


@dataclass(eq=False)
class _Sample:
    job_id: str
    clock: RunClock
    replacements: int = 0
    flagged: bool = False  # detected (under wait: counted once)


@dataclass(eq=False)
class _Watched:
    settings: Stragglers
    run_times: list[float] = field(default_factory=list)  # RUN seconds of its samples that finished usable, sorted
    started: set[str] = field(default_factory=set)  # job ids of its samples that have started
    samples: dict[str, _Sample] = field(default_factory=dict)  # running, by job id
    replacements: dict[str, int] = field(default_factory=dict)  # by job id, kept across its fresh samples
    threshold_s: float | None = None
    replaced: int = 0
    evicted: int = 0
    waited: int = 0
    wait_started: float | None = None  # monotonic
    unused_at_wait: float = 0.0
    wait_s: float = 0.0
    policy_idle_s: float = 0.0
    removed_ends: list[float] = field(default_factory=list)  # estimated ends of the samples taken out
    time_saved_s: float = 0.0
    done: bool = False

    def update_threshold(self) -> None:
        """k x the p50 of the started samples' RUN times, unfinished ones counted as longer (see above)."""
        half = math.ceil(len(self.started) / 2)
        if half and len(self.run_times) >= half:
            self.threshold_s = self.settings.k * self.run_times[half - 1]

    def progress(self, activity: PolicyActivity) -> StragglerProgress:
        wait_s, idle_s = self.wait_s, self.policy_idle_s
        if self.wait_started is not None:  # waiting now: so far
            wait_s += time.monotonic() - self.wait_started
            idle_s += activity.unused_s() - self.unused_at_wait
        return StragglerProgress(
            policy=self.settings.policy,
            k=self.settings.k,
            threshold_s=_round(self.threshold_s),
            p50_s=_round(self.threshold_s / self.settings.k if self.threshold_s is not None else None),
            replaced=self.replaced,
            evicted=self.evicted,
            waited=self.waited,
            stragglers_running=sum(sample.flagged for sample in self.samples.values()),
            wait_s=round(wait_s, 3),
            policy_idle_s=round(idle_s, 3),
            time_saved_s=round(self.time_saved_s, 3),
        )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass
class StragglerTotals:
    """Since the agent started, over every watched batch (/metrics)."""

    replaced: int = 0
    evicted: int = 0
    waited: int = 0
    wait_s: float = 0.0
    policy_idle_s: float = 0.0
    time_saved_s: float = 0.0


class StragglerControl:
    """The watch over batches with straggler settings. The job service tells it when a sample starts
    and finishes (runner.py) and when a batch ends; it calls `act(action, job_id, note)` on a straggler
    to replace or evict (batch_policy.py's doing: the job service owns the jobs)."""

    def __init__(self, act: Callable[[Action, str, StragglerNote], None]):
        self._act = act
        self.activity = PolicyActivity()
        self.totals = StragglerTotals()
        self._batches: dict[str, _Watched] = {}
        self._task: asyncio.Task | None = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # ------------------------------------------------------------------ what the job manager says

    def watch(self, batch_id: str, settings: Stragglers) -> None:
        self._batches.setdefault(batch_id, _Watched(settings))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="stragglers")

    def started(self, batch_id: str, job_id: str) -> RunClock | None:
        """A sample of a watched batch starts (again): the clock its RUN stage sets."""
        watched = self._batches.get(batch_id)
        if watched is None or watched.done:
            return None
        sample = watched.samples[job_id] = _Sample(job_id, RunClock(), watched.replacements.get(job_id, 0))
        watched.started.add(job_id)
        watched.update_threshold()
        return sample.clock

    def finished(self, batch_id: str, job_id: str, record: RolloutRecord) -> None:
        watched = self._batches.get(batch_id)
        if watched is None:
            return
        watched.samples.pop(job_id, None)
        if record.failure is None and (run_s := record.timings.get("run_s")) is not None:
            bisect.insort(watched.run_times, run_s)
            watched.update_threshold()

    def batch_done(self, batch_id: str) -> None:
        watched = self._batches.get(batch_id)
        if watched is None or watched.done:
            return
        watched.done = True
        now = time.monotonic()
        if watched.wait_started is not None:
            self._end_wait(watched)
        if watched.removed_ends:
            watched.time_saved_s = max(0.0, max(watched.removed_ends) - now)
            self.totals.time_saved_s += watched.time_saved_s

    def forget(self, batch_id: str) -> None:
        self._batches.pop(batch_id, None)

    def progress(self, batch_id: str) -> StragglerProgress | None:
        watched = self._batches.get(batch_id)
        return watched.progress(self.activity) if watched is not None else None

    # ------------------------------------------------------------------ the watch

    async def _watch(self) -> None:
        while any(not w.done for w in self._batches.values()):
            self.check(time.monotonic())
            await asyncio.sleep(TICK_S)

    def check(self, now: float) -> None:
        """Act on every running sample of a watched batch past its batch's threshold."""
        for watched in [w for w in self._batches.values() if not w.done and w.threshold_s is not None]:
            for sample in list(watched.samples.values()):
                since = sample.clock.running_since
                if since is None or sample.flagged or now - since <= watched.threshold_s:
                    continue
                self._straggler(watched, sample, now - since, now)

    def _straggler(self, watched: _Watched, sample: _Sample, ran_s: float, now: float) -> None:
        s = watched.settings
        if watched.wait_started is None:
            watched.wait_started, watched.unused_at_wait = now, self.activity.unused_s()
        action: Action = "waited"
        if s.policy == "backfill" and sample.replacements < s.max_replacements:
            action = "replaced"
        elif s.policy == "evict":
            action = "evicted"
        note = StragglerNote(
            action=action,
            after_s=round(ran_s, 3),
            threshold_s=round(watched.threshold_s, 3),
            replacements=sample.replacements + (action == "replaced"),
        )
        if action == "waited":
            sample.flagged = True  # acted on once; counted among the running stragglers until it ends
            watched.waited += 1
            self.totals.waited += 1
        else:  # cancelled: its end, had it run on, taken to be as far again (time_saved_s)
            watched.samples.pop(sample.job_id, None)
            watched.removed_ends.append(now + ran_s)
        if action == "replaced":
            watched.replaced += 1
            self.totals.replaced += 1
            watched.replacements[sample.job_id] = note.replacements
        elif action == "evicted":
            watched.evicted += 1
            self.totals.evicted += 1
        self._act(action, sample.job_id, note)

    def _end_wait(self, watched: _Watched) -> None:
        now_unused = self.activity.unused_s()
        waited = time.monotonic() - watched.wait_started
        idle = now_unused - watched.unused_at_wait
        watched.wait_s += waited
        watched.policy_idle_s += idle
        self.totals.wait_s += waited
        self.totals.policy_idle_s += idle
        watched.wait_started = None
