# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prorl_gym.sandbox import (
    EditError,
    Sandbox,
    SandboxClosedError,
    SandboxError,
    SandboxFileError,
    SandboxSpec,
    SandboxUnresponsiveError,
    UnknownBackendError,
    create_sandbox,
    get_backend,
)
from prorl_gym.sandbox.leases import read_leases, write_lease
from prorl_gym.testing import STOP_OTHER_SHELLS


async def test_bash_python_and_files_share_one_workspace(sandbox: Sandbox):
    await sandbox.bash("echo from-bash > shared.txt")
    result = await sandbox.python("print(open('shared.txt').read().strip())")
    assert result.output == "from-bash\n"
    await sandbox.write_file("notes/a.md", "# title\nbody\n")
    assert (await sandbox.bash("cat notes/a.md")).output == "# title\nbody\n"
    await sandbox.edit_file("notes/a.md", "body", "new body")
    assert await sandbox.read_file("notes/a.md", 2, 2) == "new body\n"
    with pytest.raises(EditError):
        await sandbox.edit_file("notes/a.md", "absent", "x")


async def test_the_tools_leave_nothing_in_the_workspace_the_agent_did_not_write(sandbox: Sandbox):
    """The workspace is the agent's (and a SWE patch is `git add -A` of it): IPython keeps its
    profile under /tmp, not in HOME."""
    await sandbox.python("1")
    await sandbox.write_file("mine.txt", "x")
    assert (await sandbox.bash("ls -A")).output == "mine.txt\n"


async def test_a_file_shell_that_stops_answering_is_the_sandboxs_failure(sandbox_spec):
    """A read that never finishes says nothing about the file: it is a typed SandboxError (an
    infrastructure failure upstream), never a SandboxFileError the caller would blame the file for."""
    async with await create_sandbox(sandbox_spec.model_copy(update={"file_timeout_s": 1.0})) as sandbox:
        await sandbox.write_file("answer.py", "x = 1\n")
        assert (await sandbox.bash(STOP_OTHER_SHELLS)).output == "stopped\n"
        with pytest.raises(SandboxUnresponsiveError) as raised:
            await sandbox.read_bytes("answer.py")
        assert isinstance(raised.value, SandboxError) and not isinstance(raised.value, SandboxFileError)
        assert await sandbox.read_bytes("answer.py") == b"x = 1\n"  # the stuck shell was replaced


async def test_upload_and_download(sandbox: Sandbox, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(10_000))
    await sandbox.upload(src, "in/data.bin")
    await sandbox.download("in/data.bin", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()


async def test_kernel_starts_only_when_python_is_used(sandbox: Sandbox):
    assert sandbox._kernel is None
    await sandbox.bash("true")
    assert sandbox._kernel is None
    await sandbox.python("1")
    assert sandbox._kernel is not None and sandbox._kernel.alive


async def test_shell_starts_only_when_bash_is_used(sandbox: Sandbox):
    """A rollout that only runs Python never pays for a shell; the first bash call starts one
    (not reported as a restart) and later calls share its state."""
    await sandbox.python("1")
    commands = "import os; print([open(f'/proc/{p}/comm').read().strip() for p in os.listdir('/proc') if p.isdigit()])"
    assert "bash" not in (await sandbox.python(commands)).output
    first = await sandbox.bash("cd /tmp && export GREETING=hi")
    assert first.exit_code == 0 and not first.shell_restarted
    assert (await sandbox.bash("echo $GREETING $PWD")).output == "hi /tmp\n"


async def test_a_bash_call_cancelled_while_its_shell_starts_leaves_no_shell_behind(sandbox: Sandbox):
    call = asyncio.create_task(sandbox.bash("echo one"))
    while sandbox._shell.pid <= 0:  # the shell's process exists; its prompt has not come yet
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    result = await sandbox.bash("ps -eo comm | grep -c '^bash$'")
    assert result.output == "1\n" and not result.shell_restarted


async def test_a_warmed_up_kernel_serves_the_first_call_and_keeps_its_state(sandbox: Sandbox):
    sandbox.warm_up_kernel()
    sandbox.warm_up_kernel()  # once is enough: a second call starts nothing more
    first = await sandbox.python("import os; x = os.getpid()")  # waits for the start in flight
    assert first.output == "" and not first.kernel_restarted
    assert (await sandbox.python("print(x == os.getpid())")).output == "True\n"


async def test_closing_while_the_kernel_warms_up_leaves_nothing(sandbox_spec):
    sandbox = await create_sandbox(sandbox_spec)
    sandbox.warm_up_kernel()
    await asyncio.sleep(0.01)  # the start is under way
    await sandbox.close()
    assert sandbox._kernel_warm_up.done()
    assert sandbox._kernel is None or not sandbox._kernel.alive
    await asyncio.sleep(0.1)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert sandbox.id not in ps and not (Path(sandbox_spec.root_dir) / sandbox.id).exists()


async def test_close_kills_every_process_including_escapees(sandbox_spec):
    n = os.getpid() * 10  # durations of our own: other tests' sleeps on this host do not count
    sandbox = await create_sandbox(sandbox_spec)
    await sandbox.bash(f"sleep {n} & setsid sleep {n + 1} & (sleep {n + 2} &) ; nohup sleep {n + 3} >/dev/null 2>&1 &")
    await sandbox.python(f"import subprocess; p = subprocess.Popen(['sleep', '{n + 4}'], start_new_session=True)")
    private_dir = Path(sandbox_spec.root_dir) / sandbox.id
    assert private_dir.exists()
    ours = {f"sleep {n + k}" for k in range(5)}
    assert ours <= set(_ps())
    await sandbox.close()
    await asyncio.sleep(0.1)
    assert not ours & set(_ps())
    assert not private_dir.exists()
    with pytest.raises(SandboxClosedError):
        await sandbox.bash("true")
    await sandbox.close()  # idempotent


async def test_async_with_closes(sandbox_spec):
    async with await create_sandbox(sandbox_spec) as sandbox:
        await sandbox.bash("true")
    assert sandbox.closed


async def test_unknown_backend_is_a_clear_error_at_config_time(sandbox_spec):
    with pytest.raises(
        ValueError, match="unknown sandbox backend 'nope'; known: \\['apptainer', 'container', 'local', 'ray'\\]"
    ):
        SandboxSpec.model_validate(sandbox_spec.model_dump() | {"backend": "nope"})
    with pytest.raises(UnknownBackendError, match="known: \\['apptainer', 'container', 'local', 'ray'\\]"):
        get_backend("nope")


async def test_sandboxes_are_independent(sandbox_spec):
    a, b = await asyncio.gather(create_sandbox(sandbox_spec), create_sandbox(sandbox_spec))
    try:
        await a.bash("export WHO=a; cd /")
        assert (await b.bash("echo ${WHO:-none}; pwd")).output == f"none\n{b.placement.workspace}\n"
    finally:
        await asyncio.gather(a.close(), b.close())


def test_cli_runs_a_command_and_returns_its_exit_code(sandbox_root):
    env = dict(os.environ, PRORL_SANDBOX_ROOT=sandbox_root)
    run = subprocess.run(
        [sys.executable, "-m", "prorl_gym.sandbox", "exec", "--", "echo hello; exit 3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.stdout.startswith("hello\n")
    assert run.returncode == 3
    bad = subprocess.run(
        [sys.executable, "-m", "prorl_gym.sandbox", "exec", "--backend", "nope", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and "unknown sandbox backend" in bad.stderr


async def test_a_start_cancelled_while_its_lease_is_written_leaves_no_lease(sandbox_spec, monkeypatch):
    import prorl_gym.sandbox.sandbox as module

    writing = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_write(root_dir, lease, new=False):  # runs in a thread, which a cancel cannot stop
        loop.call_soon_threadsafe(writing.set)
        time.sleep(0.3)
        write_lease(root_dir, lease, new)

    monkeypatch.setattr(module, "write_lease", slow_write)
    start = asyncio.create_task(create_sandbox(sandbox_spec))
    await writing.wait()
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    await asyncio.sleep(0.4)  # past the end of the thread's write
    assert read_leases(sandbox_spec.root_dir) == []
    assert not [p for p in Path(sandbox_spec.root_dir).iterdir() if not p.name.startswith(".")]


async def test_closing_a_sandbox_while_its_kernel_streams_output_ends_the_call(sandbox_spec):
    """The kill of a kernel whose output is being read must neither hang the call nor crash
    this process (libzmq aborts when a pipe ends mid-message: sockets are closed first)."""
    for _ in range(5):
        sandbox = await create_sandbox(sandbox_spec)
        await sandbox.python("1")
        chatty = asyncio.create_task(sandbox.python("while True: print('x' * 2000, flush=True)", timeout=30))
        await asyncio.sleep(0.3)  # output is streaming
        await sandbox.close()
        result = await asyncio.wait_for(chatty, 10)
        assert result.kernel_restarted and "x" * 2000 in result.output


def _ps() -> list[str]:
    return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
