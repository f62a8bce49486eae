# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Kernels forked by the zygote: inside their sandbox, contained, fresh per sandbox."""

import asyncio
import subprocess

import pytest

from prorl_gym.resources.sessions import kernel_zygote_for
from prorl_gym.sandbox import SandboxKernelError, create_sandbox


@pytest.fixture(params=["repl", "ipython"])
def runtime_spec(request, sandbox_spec):
    """Both runtimes the zygote forks: the lean REPL and the IPython kernel."""
    return sandbox_spec.model_copy(update={"python_runtime": request.param})


@pytest.fixture
async def zygote(runtime_spec):
    zygote = kernel_zygote_for(runtime_spec)
    await zygote.start()
    try:
        yield zygote
    finally:
        await zygote.close()


@pytest.fixture
async def sandboxes(runtime_spec, zygote):
    made = []

    async def make():
        made.append(await create_sandbox(runtime_spec, zygote=zygote))
        return made[-1]

    yield make
    await asyncio.gather(*(sb.close() for sb in made))


async def test_forked_kernel_runs_inside_its_sandbox(sandboxes):
    sb = await sandboxes()
    await sb.bash("echo from-bash > /workspace/here.txt")
    code = (
        "import os, pathlib, resource\n"
        "print(os.getcwd(), open('here.txt').read().strip(), pathlib.Path('/work/main/pyproject.toml').exists())\n"
        "print(sorted(k for k in os.environ if k.startswith(('PRORL', 'VIRTUAL_ENV', 'PYTHONPATH'))))\n"
        "print(open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0], resource.getrlimit(resource.RLIMIT_NPROC)[0])"
    )
    result = await sb.python(code)
    assert result.output == f"/workspace from-bash False\n[]\n1 {sb.spec.limits.processes}\n", result.output
    kernels = (await sb.bash("ps -eo args | grep -c '[z]ygote_main'")).output.strip()
    assert kernels == "1"  # the forked kernel (it keeps the zygote's command line) is a process of this sandbox


@pytest.mark.parametrize("runtime_spec", ["ipython"], indirect=True)
async def test_forked_kernel_is_configured_without_a_command_line(sandboxes):
    """The zygote configures kernels itself: as the launcher's flags say (no history, quiet
    log), with no debugger, no %store (it would persist values in the profile directory), no
    heartbeat (the server watches the process) and no sleep after each execution."""
    sb = await sandboxes()
    code = (
        "from ipykernel.kernelapp import IPKernelApp\n"
        "ip = get_ipython()\n"
        "app = IPKernelApp.instance()\n"
        "print(ip.history_manager.enabled, app.log_level, hasattr(ip.kernel, 'debugger'), ip.kernel._execute_sleep)\n"
        "print(app.heartbeat)\n"
        "import sys; print('debugpy' in sys.modules and sys.modules['debugpy'] is not None)"
    )
    assert (await sb.python(code)).output == "False 50 False 0.0\nNone\nFalse\n"
    stored = await sb.python("%store")
    assert "UsageError: Line magic function `%store` not found" in stored.output, stored


async def test_each_sandbox_gets_a_fresh_kernel(sandboxes):
    a, b = await sandboxes(), await sandboxes()
    await a.python("secret = 42")
    assert (await b.python("secret")).error["ename"] == "NameError"
    assert (await a.python("secret + 1")).output == "43\n"


async def test_timeouts_and_deaths_behave_as_with_a_started_kernel(sandboxes):
    sb = await sandboxes()
    assert (await sb.python("import time\nwhile True: time.sleep(0.01)", timeout=0.5)).timed_out
    died = await sb.python("import os; os._exit(1)")
    assert died.kernel_restarted
    assert (await sb.python("1 + 1")).output == "2\n"


async def test_close_leaves_no_kernel(sandboxes):
    sb = await sandboxes()
    await sb.python("1")
    pid = sb._kernel.pid
    await sb.close()
    await asyncio.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


async def test_a_dead_zygote_is_a_typed_sandbox_error(sandboxes, zygote):
    sb = await sandboxes()
    await zygote.close()
    with pytest.raises(SandboxKernelError, match="zygote"):
        await sb.python("1")


async def test_a_kernel_start_cancelled_mid_request_leaves_the_next_ones_their_own_replies(sandboxes, zygote):
    """A sandbox closed while its kernel starts (e.g. a cancelled rollout) cancels a request to
    the zygote in flight; its late reply must not become the next sandbox's."""
    doomed = [await sandboxes() for _ in range(3)]
    for sb in doomed:
        sb.warm_up_kernel()
    await asyncio.sleep(0.005)  # the requests are with the zygote
    await asyncio.gather(*(sb.close() for sb in doomed))
    survivors = [await sandboxes() for _ in range(3)]
    results = await asyncio.gather(*(sb.python("import os; print(os.getpid())") for sb in survivors))
    assert all(not r.kernel_restarted and r.error is None and r.output.strip().isdigit() for r in results), results
    await asyncio.sleep(0.2)  # kernels started for the closed sandboxes are gone: only the survivors' remain
    children = subprocess.run(["pgrep", "-P", str(zygote.pid)], capture_output=True, text=True).stdout.split()
    assert len(children) == 3, children


async def test_a_zygote_starts_with_the_first_runtime_and_not_after_it_is_closed(runtime_spec):
    zygote = kernel_zygote_for(runtime_spec)
    sandbox = await create_sandbox(runtime_spec, zygote=zygote)
    try:
        await sandbox.bash("true")
        assert zygote.pid == -1  # a sandbox whose Python is never used never starts it
        assert (await sandbox.python("print(6 * 7)")).output.strip() == "42"
        assert zygote.pid > 0
    finally:
        await sandbox.close()
        await zygote.close()
    late = await create_sandbox(runtime_spec, zygote=zygote)
    try:
        with pytest.raises(SandboxKernelError, match="closed"):
            await late.python("1")
        assert zygote.pid == -1
    finally:
        await late.close()


async def test_a_first_start_cancelled_midway_leaves_a_working_zygote(runtime_spec):
    """A sandbox closed while its Python warms up cancels the caller that started the zygote: the next
    caller gets a zygote that answers its own request (a half-started one answered with its ready
    message)."""
    zygote = kernel_zygote_for(runtime_spec)
    sandbox = await create_sandbox(runtime_spec, zygote=zygote)
    try:
        first = asyncio.ensure_future(sandbox.python("1"))
        await asyncio.sleep(0.05)  # the zygote is importing its preloads
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert (await sandbox.python("print(6 * 7)")).output.strip() == "42"
    finally:
        await sandbox.close()
        await zygote.close()
