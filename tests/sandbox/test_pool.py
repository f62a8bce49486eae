# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio

from prorl_gym.sandbox.leases import read_leases
from prorl_gym.sandbox.pool import SandboxPool


async def test_acquire_hands_out_fresh_sandboxes_and_refills(sandbox_spec):
    pool = SandboxPool(sandbox_spec, size=2)
    await pool.start()
    assert pool.ready == 2
    first = await pool.acquire()
    await first.bash("echo secret > /workspace/left-behind; export MARK=1")
    assert pool.ready == 1  # the refill runs in the background
    await pool.wait_filled()
    assert pool.ready == 2
    second = await pool.acquire()
    assert second.id != first.id
    result = await second.bash("cat /workspace/left-behind; echo ${MARK:-unset}")
    assert "No such file" in result.output and result.output.endswith("unset\n")
    await asyncio.gather(first.close(), second.close())
    await pool.close()
    assert read_leases(sandbox_spec.root_dir) == []


async def test_an_empty_pool_still_serves(sandbox_spec):
    pool = SandboxPool(sandbox_spec, size=1)  # never started: acquire starts one directly
    sandbox = await pool.acquire()
    assert (await sandbox.bash("echo ok")).output == "ok\n"
    await sandbox.close()
    await pool.close()
