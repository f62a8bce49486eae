# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio
import sys

import pytest

from prorl_gym.verify.pool import VerifierCrashed, VerifierError, VerifierPool, VerifierTimeout

CHECK = "prorl_gym.verify.math_check:check_math"


@pytest.fixture
async def pool():
    p = VerifierPool(size=1, timeout_s=30, preload=[CHECK])
    await p.start(eager=True)
    try:
        yield p
    finally:
        await p.close()


async def check(pool, **kwargs):
    return await pool.check(CHECK, answer="2", expected="2", checker={"kind": "math_verify"}, **kwargs)


async def test_checks_run_in_a_worker(pool):
    assert (await check(pool))["score"] == 1.0


async def test_a_checker_exception_is_a_verifier_error(pool):
    with pytest.raises(VerifierError, match="unknown math checker"):
        await pool.check(CHECK, answer="1", expected="1", checker={"kind": "nonsense"})
    assert (await check(pool))["score"] == 1.0


async def test_timeout_kills_and_replaces_the_worker(pool):
    with pytest.raises(VerifierTimeout):
        await check(pool, timeout=1e-4)
    assert (await check(pool))["score"] == 1.0


async def test_a_crashed_worker_is_reported_and_replaced(pool):
    (worker,) = pool._workers
    worker.proc.kill()
    await worker.proc.wait()
    with pytest.raises(VerifierCrashed):
        await check(pool)
    assert (await check(pool))["score"] == 1.0


async def test_checks_are_named_by_module_and_function(pool):
    with pytest.raises(VerifierError, match="module:function"):
        await pool.check("math", answer="1", expected="1")
    with pytest.raises(VerifierError, match="ModuleNotFoundError"):
        await pool.check("no_such_module:check")
    assert await pool.check("json:dumps", obj=[1]) == "[1]"  # any importable function


async def test_a_check_cancelled_mid_call_does_not_shrink_the_pool(pool):
    # The caller's client gave up (its EVAL timed out) while the check ran: the worker is replaced
    # by the pool, not by the cancelled caller, so the pool keeps its size.
    call = asyncio.create_task(pool.check("subprocess:call", args=["sleep", "30"]))
    await asyncio.sleep(0.5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (await check(pool))["score"] == 1.0


async def test_a_replacement_that_fails_to_start_is_started_again_until_one_does(pool):
    # A pool that lost its last worker this way left every later check of its server waiting forever.
    (worker,) = pool._workers
    pool._python = "/bin/false"  # every start of a replacement fails for now
    worker.proc.kill()
    with pytest.raises(VerifierCrashed):
        await check(pool)
    await asyncio.sleep(1.0)  # START_TRIES failed starts, then a wait before trying again
    pool._python = sys.executable  # the machine recovered
    assert (await asyncio.wait_for(check(pool), 60))["score"] == 1.0


async def test_a_worker_that_died_while_idle_is_a_crash_not_an_error_of_the_server(pool):
    (worker,) = pool._workers
    worker.proc.kill()
    await worker.proc.wait()
    await asyncio.sleep(0.2)  # its pipes are closed now: writing the request fails, not reading
    with pytest.raises(VerifierCrashed):
        await check(pool)
    assert (await check(pool))["score"] == 1.0


async def test_workers_start_with_the_first_check_and_a_failed_start_is_typed_and_tried_again(tmp_path):
    lazy = VerifierPool(size=2, timeout_s=30, preload=[CHECK])
    try:
        await lazy.start()
        assert not lazy._workers  # nothing until a check needs it
        results = await asyncio.gather(*(check(lazy) for _ in range(3)))  # concurrent first checks: one start
        assert [r["score"] for r in results] == [1.0] * 3 and len(lazy._workers) == 2
    finally:
        await lazy.close()
    broken = VerifierPool(size=1, timeout_s=30, python=str(tmp_path / "no-python"), preload=[CHECK])
    try:
        await broken.start()
        for _ in range(2):  # each check tries the start again, and says why it failed
            with pytest.raises(VerifierCrashed, match="did not start"):
                await check(broken)
        broken._python = sys.executable  # the interpreter is back: the next check starts the workers
        assert (await check(broken))["score"] == 1.0
    finally:
        await broken.close()
