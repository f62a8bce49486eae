# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import pytest

from prorl_gym.runtime.kernel import IPythonKernel
from tests.support.hosts import local_host


@pytest.fixture
async def kernel(tmp_path):
    k = IPythonKernel(local_host(tmp_path), output_limit=4096)
    await k.start()
    try:
        yield k
    finally:
        await k.close()


async def test_state_persists_and_results_are_returned(kernel: IPythonKernel, tmp_path):
    await kernel.execute("x = 40", 10)
    result = await kernel.execute("print('sum'); x + 2", 10)
    assert result.output == "sum\n42\n"
    assert result.error is None
    cwd = await kernel.execute("import os; os.getcwd()", 10)
    assert cwd.output.strip().strip("'") == str(tmp_path)


async def test_errors_come_back_as_tracebacks(kernel: IPythonKernel):
    result = await kernel.execute("1/0", 10)
    assert result.error["ename"] == "ZeroDivisionError"
    assert "ZeroDivisionError" in result.output
    assert "\x1b[" not in result.output  # colour codes stripped
    assert (await kernel.execute("'still here'", 10)).output == "'still here'\n"


async def test_timeout_interrupts_and_keeps_state(kernel: IPythonKernel):
    await kernel.execute("kept = 1", 10)
    result = await kernel.execute("import time\nwhile True: time.sleep(0.01)", 0.5)
    assert result.timed_out
    assert result.error["ename"] == "KeyboardInterrupt"
    assert not result.kernel_restarted
    assert (await kernel.execute("kept", 10)).output == "1\n"


async def test_kernel_death_is_reported_and_recovered(kernel: IPythonKernel):
    result = await kernel.execute("import os; os._exit(3)", 10)
    assert result.kernel_restarted
    again = await kernel.execute("1 + 1", 30)
    assert again.output == "2\n"


async def test_output_is_capped(kernel: IPythonKernel):
    result = await kernel.execute("for i in range(100000): print(i)", 30)
    assert result.truncated
    assert result.output.startswith("0\n1\n")
    assert result.output.endswith("99999\n")
