# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio

import pytest

from prorl_gym.pipeline.stages import StagePool
from prorl_gym.wire.failures import FailureType, RolloutFailure, Stage


async def test_pool_bounds_concurrency_and_records_timings():
    pool = StagePool(Stage.RUN, workers=2, timeout_s=5)
    running = peak = 0

    async def work():
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1

    timings = [{} for _ in range(6)]
    await asyncio.gather(*(pool.run(work, t) for t in timings))
    assert peak == 2
    assert all("run_s" in t and "run_queue_s" in t for t in timings)
    assert max(t["run_queue_s"] for t in timings) >= 0.09  # the last pair waited for two rounds


async def test_stage_timeout_is_a_typed_failure():
    pool = StagePool(Stage.EVAL, workers=1, timeout_s=0.05)
    with pytest.raises(RolloutFailure) as info:
        await pool.run(lambda: asyncio.sleep(1), {})
    assert info.value.failure.type == FailureType.TIMEOUT and info.value.failure.stage == Stage.EVAL
    assert pool.in_flight == 0


async def test_a_timeout_inside_the_work_is_not_mistaken_for_the_stage_timeout():
    pool = StagePool(Stage.RUN, workers=1, timeout_s=5)

    async def inner():
        await asyncio.wait_for(asyncio.sleep(1), 0.01)

    with pytest.raises(TimeoutError):
        await pool.run(inner, {})
