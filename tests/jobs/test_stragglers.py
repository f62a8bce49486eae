# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The straggler control's rules (prorl_gym/jobs/stragglers.py), on its own with set clocks: when a
sample is a straggler (k x the p50 of its batch's RUN times, unfinished samples counted as longer, so
known once half the started samples finished usable; timed from its RUN worker, never from its queue),
what each policy does, what the export counts; the policy's unused capacity. (On a real stack, with the generation aborted at the policy:
tests/test_stragglers.py.)"""

from __future__ import annotations

import time

import pytest

from prorl_gym.jobs.groups import groups_of
from prorl_gym.jobs.stragglers import PolicyActivity, StragglerControl
from prorl_gym.wire.jobs import Stragglers
from prorl_gym.wire.records import RolloutRecord


def usable(run_s: float) -> RolloutRecord:
    return RolloutRecord(reward=1.0, timings={"run_s": run_s})


@pytest.fixture
def control():
    acted = []
    control = StragglerControl(lambda action, job_id, note: acted.append((action, job_id, note)))
    control.acted = acted
    yield control


def batch(control: StragglerControl, policy: str, jobs: int = 6, **settings) -> dict:
    control.watch("b", Stragglers(policy=policy, k=3.0, **settings))
    return {f"b/{i}": control.started("b", f"b/{i}") for i in range(jobs)}


async def test_no_sample_is_a_straggler_before_half_the_batch_finished_and_queue_time_never_counts(control):
    clocks = batch(control, "backfill", jobs=8)
    now = time.monotonic()
    for i, run_s in enumerate((0.5, 1.0, 2.0)):
        control.finished("b", f"b/{i}", usable(run_s))
    clocks["b/7"].running_since = now - 100  # 100 s in RUN, but no p50 yet: 3 of 8 finished
    control.check(now)
    assert control.acted == [] and control.progress("b").p50_s is None
    control.finished("b", "b/3", usable(1.0))  # half of 8: the p50 is the 4th fastest of 8, 2 s: threshold 6 s
    assert control.progress("b").p50_s == 2.0
    clocks["b/6"].running_since = None  # queued for its RUN worker: never a straggler, however long
    control.check(now)
    assert [(a, j) for a, j, _ in control.acted] == [("replaced", "b/7")]
    note = control.acted[0][2]
    assert note.threshold_s == 6.0 and note.after_s == pytest.approx(100, abs=1) and note.replacements == 1


async def test_backfill_replaces_up_to_max_replacements_then_waits(control):
    clocks = batch(control, "backfill", max_replacements=1)
    for i in range(3):
        control.finished("b", f"b/{i}", usable(1.0))
    now = time.monotonic()
    clocks["b/5"].running_since = now - 10
    control.check(now)
    fresh = control.started("b", "b/5")  # the job manager starts its fresh sample
    fresh.running_since = now - 10
    control.check(now)  # a second straggler in its place: max_replacements 1, so it is waited for
    assert [a for a, _, _ in control.acted] == ["replaced", "waited"]
    progress = control.progress("b")
    assert (progress.replaced, progress.waited, progress.stragglers_running) == (1, 1, 1)
    control.finished("b", "b/5", usable(12.0))
    control.finished("b", "b/4", usable(1.0))
    control.batch_done("b")
    progress = control.progress("b")
    assert progress.stragglers_running == 0 and progress.wait_s >= 0 and progress.time_saved_s >= 0
    assert control.totals.replaced == 1 and control.totals.waited == 1


async def test_evict_acts_once_per_sample_and_wait_only_counts(control):
    clocks = batch(control, "evict")
    for i in range(3):
        control.finished("b", f"b/{i}", usable(2.0))
    now = time.monotonic()
    clocks["b/4"].running_since, clocks["b/5"].running_since = now - 7, now - 5  # threshold 6 s
    control.check(now)
    control.check(now)
    assert [(a, j) for a, j, _ in control.acted] == [("evicted", "b/4")]
    assert control.progress("b").evicted == 1


async def test_the_export_of_a_batch_that_waited():
    activity = PolicyActivity()
    activity.set(4)
    activity.set(1)  # 1 of a peak of 4 calls in flight: 3/4 of the policy unused from now on
    before = activity.unused_s()
    time.sleep(0.05)
    assert activity.unused_s() - before == pytest.approx(0.75 * 0.05, rel=0.5)


def test_a_group_without_its_evicted_straggler_is_admitted_partial():
    ids = [f"b/0/{s}" for s in range(4)] + [f"b/1/{s}" for s in range(4)]
    status = {i: "completed" for i in ids} | {"b/0/3": "cancelled", "b/1/3": "cancelled"}
    groups = groups_of(ids, 4, None, status, lambda i: 1.0, lambda i: False, frozenset({"b/0/3"}))
    assert [(g.usable, g.size) for g in groups] == [(True, 3), (False, 3)]  # evicted vs merely cancelled
    groups = groups_of(ids, 4, 4, status, lambda i: 1.0, lambda i: False, frozenset({"b/0/3"}))
    assert [g.usable for g in groups] == [False, False]  # min_group_size still applies
