# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import pytest

from prorl_gym.verify.pool import VerifierCrashed, VerifierError, VerifierPool, VerifierTimeout

CHECK = "prorl_gym.verify.math_check:check_math"


@pytest.fixture
async def pool():
    p = VerifierPool(size=1, timeout_s=30, preload=[CHECK])
    await p.start()
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
