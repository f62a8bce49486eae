# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The container backend against a real engine (Podman's service here, Docker elsewhere): the
sandbox API through containers, images per row, typed refusals, leases and the reaper by labels.

Skipped, with the reason, where no engine can be run (tests/support/container_engine.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.container.backend import OWNER_LABEL, SANDBOX_LABEL, ContainerBackend
from prorl_gym.sandbox.backends.container.engine import Engine
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.instances import Backends, default_backends
from prorl_gym.sandbox.errors import SandboxForkError, SandboxStartError
from prorl_gym.sandbox.leases import read_leases
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.pool import SandboxPool
from prorl_gym.sandbox.reaper import reap_stale
from prorl_gym.sandbox.spec import ResourceLimits

# The sandbox API suite (tests/sandbox/test_sandbox.py), collected here again: its tests run against
# containers, with this module's `sandbox_spec` (the conftest's `sandbox` starts from it).
from tests.sandbox.test_sandbox import (  # noqa: F401 - collected by pytest from this module
    test_a_bash_call_cancelled_while_its_shell_starts_leaves_no_shell_behind,
    test_a_file_shell_that_stops_answering_is_the_sandboxs_failure,
    test_a_start_cancelled_while_its_lease_is_written_leaves_no_lease,
    test_a_warmed_up_kernel_serves_the_first_call_and_keeps_its_state,
    test_async_with_closes,
    test_bash_python_and_files_share_one_workspace,
    test_close_kills_every_process_including_escapees,
    test_closing_a_sandbox_while_its_kernel_streams_output_ends_the_call,
    test_closing_while_the_kernel_warms_up_leaves_nothing,
    test_kernel_starts_only_when_python_is_used,
    test_sandboxes_are_independent,
    test_shell_starts_only_when_bash_is_used,
    test_the_tools_leave_nothing_in_the_workspace_the_agent_did_not_write,
    test_upload_and_download,
)
from tests.support.container_engine import engine_or_skip

MiB = 1 << 20
LIMITS = ResourceLimits(processes=64, memory_bytes=1024 * MiB, file_size_bytes=16 * MiB, workspace_bytes=64 * MiB)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def socket_path() -> str:
    return engine_or_skip()[0]


@pytest.fixture
def sandbox_spec(sandbox_root, socket_path) -> SandboxSpec:
    """The API suite's spec (tests/conftest.py), in containers."""
    return SandboxSpec(
        backend=ContainerOptions(socket=socket_path), root_dir=sandbox_root, command_timeout_s=10, python_timeout_s=20
    )


@pytest.fixture(autouse=True)
async def default_backends_closed():
    """The API suite starts sandboxes with the process's default backends: their engine client lives on
    this test's event loop, so it is closed with it."""
    yield
    await default_backends().close()


@pytest.fixture
def root():
    path = tempfile.mkdtemp(prefix="prorl-ct-", dir="/tmp")
    yield path
    leases = Path(path) / ".leases"
    left = sorted(p.name for p in Path(path).iterdir() if p.name != ".leases")
    left += [f".leases/{p.name}" for p in leases.iterdir()] if leases.is_dir() else []
    subprocess.run(["rm", "-rf", path], check=False)
    assert not left, f"left under the sandbox root: {left}"


@pytest.fixture
async def backends():
    held = Backends()
    yield held
    await held.close()


@pytest.fixture
async def engine(socket_path):
    client = Engine(socket_path)
    yield client
    await client.close()


def spec(root: str, socket_path: str, **fields) -> SandboxSpec:
    base = dict(
        backend=ContainerOptions(socket=socket_path),
        root_dir=root,
        limits=LIMITS,
        command_timeout_s=10,
        python_timeout_s=20,
        start_timeout_s=30,
    )
    return SandboxSpec(**(base | fields))


async def containers_of(engine: Engine, sandbox_id: str) -> list[dict]:
    return await engine.list({SANDBOX_LABEL: sandbox_id})


async def test_shell_python_and_files_work_through_the_container(root, socket_path, backends, engine):
    async with await create_sandbox(spec(root, socket_path), backends=backends) as sb:
        await sb.bash("mkdir -p sub && cd sub && export X=41")
        result = await sb.bash('echo "$((X + 1)) $PWD $HOME $(id -u)"')
        assert result.output == "42 /workspace/sub /workspace 100000\n" and result.exit_code == 0
        assert (await sb.python("import os; x = 6 * 7; print(x, os.getcwd(), os.getuid())")).output == (
            "42 /workspace 100000\n"
        )
        assert (await sb.python("print(x + 1)")).output == "43\n"
        await sb.write_file("notes/a.txt", "hello\n")
        assert (await sb.bash("cat /workspace/notes/a.txt")).output == "hello\n"
        assert await sb.read_file("notes/a.txt") == "hello\n"
        slow = await sb.bash("sleep 30", timeout=1)
        assert slow.timed_out and (await sb.bash("echo after")).output == "after\n"
        interrupted = await sb.python("import time; time.sleep(30)", timeout=1)
        assert interrupted.timed_out and (await sb.python("print(x)")).output == "42\n"
        assert len(await containers_of(engine, sb.id)) == 1


async def test_ipython_kernel_runs_inside_driven_over_its_sockets(root, socket_path, backends):
    async with await create_sandbox(spec(root, socket_path, python_runtime="ipython"), backends=backends) as sb:
        result = await sb.python("import os; y = os.getuid(); y")
        assert result.output.strip() == "100000", result
        assert (await sb.python("%pwd")).output.strip() == "'/workspace'"


async def test_shell_that_exits_is_restarted_in_the_same_container(root, socket_path, backends):
    async with await create_sandbox(spec(root, socket_path), backends=backends) as sb:
        await sb.bash("echo kept > /tmp/f")
        gone = await sb.bash("exit 7")
        assert gone.exit_code == 7 or gone.shell_restarted
        assert (await sb.bash("cat /tmp/f")).output == "kept\n"


async def test_image_per_row_and_a_missing_image_is_a_typed_start_error(root, socket_path, backends, engine):
    image = engine_or_skip()[1]
    async with await create_sandbox(spec(root, socket_path, image=f"docker://{image}"), backends=backends) as sb:
        assert (await sb.bash("echo from-row-image")).output == "from-row-image\n"
    with pytest.raises(SandboxStartError, match="no-such-image"):
        await create_sandbox(spec(root, socket_path, image="localhost/no-such-image:1"), backends=backends)
    assert not await engine.list({OWNER_LABEL: owner_id()})  # nothing of the failed start is left
    assert not read_leases(root)


async def test_fork_is_a_typed_refusal(root, socket_path, backends):
    async with await create_sandbox(spec(root, socket_path), backends=backends) as sb:
        assert not sb.backend.can_fork(sb.spec)
        with pytest.raises(SandboxForkError, match="container"):
            await sb.freeze()


def test_root_as_sandbox_uid_is_refused_at_config_time(root):
    with pytest.raises(ValueError, match="uid"):
        ContainerBackend().check(SandboxSpec(backend=ContainerOptions(uid=0), root_dir=root))


async def test_close_removes_the_container_its_files_and_lease(root, socket_path, backends, engine):
    sandboxes = await asyncio.gather(*(create_sandbox(spec(root, socket_path), backends=backends) for _ in range(3)))
    await asyncio.gather(*(sb.python("print(1)") for sb in sandboxes))
    for sb in sandboxes:
        assert len(await containers_of(engine, sb.id)) == 1
    await asyncio.gather(*(sb.close() for sb in sandboxes))
    for sb in sandboxes:
        assert not await containers_of(engine, sb.id)
        assert not sb.placement.private_dir.exists()
    assert not read_leases(root)


async def test_warm_pool_hands_out_started_containers(root, socket_path, backends):
    pool = SandboxPool(spec(root, socket_path), size=2, backends=backends)
    await pool.start()
    try:
        assert pool.ready == 2
        sb = await pool.acquire()
        try:
            assert (await sb.bash("echo pooled")).output == "pooled\n"
        finally:
            await sb.close()
    finally:
        await pool.close()


SERVER = textwrap.dedent(
    """
    import asyncio, sys
    from prorl_gym.sandbox import SandboxSpec, create_sandbox
    from prorl_gym.sandbox.backends.container.options import ContainerOptions

    async def main():
        spec = SandboxSpec(backend=ContainerOptions(socket=sys.argv[1]), root_dir=sys.argv[2])
        sb = await create_sandbox(spec)
        await sb.bash("sleep 1000 &")  # mid-rollout
        print(sb.id, flush=True)
        await asyncio.sleep(1000)

    asyncio.run(main())
    """
)


async def test_a_killed_servers_containers_are_reaped_and_no_one_elses(root, socket_path, backends, engine):
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVER, socket_path, root, stdout=asyncio.subprocess.PIPE, cwd=REPO
    )
    try:
        dead_id = (await asyncio.wait_for(server.stdout.readline(), 60)).decode().strip()
    finally:
        server.send_signal(signal.SIGKILL)
        await server.wait()
    assert dead_id and len(await containers_of(engine, dead_id)) == 1  # the kill left it running
    async with await create_sandbox(spec(root, socket_path), backends=backends) as mine:  # a live owner's
        assert await reap_stale(root, backends) == [dead_id]  # what the restarted server does first
        assert not await containers_of(engine, dead_id)
        assert not (Path(root) / dead_id).exists()
        assert (await mine.bash("echo still-mine")).output == "still-mine\n"
        assert [lease.sandbox_id for lease in read_leases(root)] == [mine.id]


async def test_reaping_finds_a_container_by_its_labels_only(root, socket_path, backends, engine):
    """A lease of a dead owner reaps that owner's container of that sandbox; one with the same
    sandbox id of another owner stays."""
    image = engine_or_skip()[1]
    config = {"Image": image, "Cmd": ["sleep", "1000"], "HostConfig": {"NetworkMode": "none"}}
    others = {OWNER_LABEL: "elsewhere-1-2", SANDBOX_LABEL: "cafe01"}
    dead = {OWNER_LABEL: f"{owner_id().rsplit('-', 2)[0]}-999999-1", SANDBOX_LABEL: "cafe01"}
    created = [await engine.create(f"prorl-test-{os.getpid()}-{n}", config | {"Labels": labels}) for n, labels in
               enumerate((others, dead))]  # fmt: skip
    try:
        lease = {"sandbox_id": "cafe01", "backend": "container", "owner": dead[OWNER_LABEL], "owner_pid": 999999,
                 "owner_start": 1, "private_dir": f"{root}/cafe01",
                 "options": ContainerOptions(socket=socket_path).model_dump()}  # fmt: skip
        (Path(root) / ".leases").mkdir(parents=True, exist_ok=True)
        (Path(root) / ".leases" / "cafe01.json").write_text(json.dumps(lease))
        assert await reap_stale(root, backends) == ["cafe01"]
        left = {c["Labels"][OWNER_LABEL] for c in await engine.list({SANDBOX_LABEL: "cafe01"})}
        assert left == {"elsewhere-1-2"}
    finally:
        for container in created:
            await engine.remove(container)


async def test_a_container_whose_spawner_cannot_start_is_a_typed_start_error_leaving_nothing(
    root, socket_path, backends, engine
):
    with pytest.raises(SandboxStartError, match="spawner exited"):  # an interpreter that exits at once
        await create_sandbox(spec(root, socket_path, kernel_python="/usr/bin/false"), backends=backends)
    with pytest.raises(SandboxStartError, match="no-such-python"):  # one the engine cannot run
        await create_sandbox(spec(root, socket_path, kernel_python="/usr/bin/no-such-python"), backends=backends)
    assert not await engine.list({OWNER_LABEL: owner_id()})
    assert not read_leases(root)


async def test_network_when_asked_is_the_engines_default_network(root, socket_path, backends):
    async with await create_sandbox(spec(root, socket_path, network=True), backends=backends) as sb:
        interfaces = (await sb.bash("tail -n +3 /proc/net/dev | cut -d: -f1")).output.split()
        assert "lo" in interfaces and len(interfaces) >= 2, interfaces


async def test_a_dead_owners_container_without_a_lease_goes_at_the_next_start_nobody_elses(
    root, socket_path, backends, engine
):
    """Its sandbox root (and lease) removed, a dead owner's container is still found by its owner
    label when this host next starts a sandbox; a live owner's and another host's stay."""
    image = engine_or_skip()[1]
    config = {"Image": image, "Cmd": ["sleep", "1000"], "HostConfig": {"NetworkMode": "none"}}
    here = owner_id().rsplit("-", 2)[0]
    owners = {"dead": f"{here}-999999-1", "live": owner_id(), "elsewhere": "elsewhere-1-2"}
    created = {
        who: await engine.create(f"prorl-test-{os.getpid()}-{who}", config | {"Labels": {OWNER_LABEL: owner}})
        for who, owner in owners.items()
    }
    try:
        async with await create_sandbox(spec(root, socket_path), backends=backends):
            left = {c["Labels"][OWNER_LABEL] for c in await engine.list({OWNER_LABEL: None})}
        assert owners["dead"] not in left and {owners["live"], owners["elsewhere"]} <= left, left
    finally:
        for container in created.values():
            await engine.remove(container)


def test_the_sandbox_command_line_on_containers_closes_its_engine_client(socket_path):
    """`python -m prorl_gym.sandbox exec --backend container`: the command's output and exit code, and no
    "Unclosed client session" from an engine client left open when its event loop ended."""
    env = dict(os.environ, DOCKER_HOST=f"unix://{socket_path}")
    argv = [sys.executable, "-m", "prorl_gym.sandbox", "exec", "--backend", "container", "--", "echo hi; (exit 3)"]
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert (run.returncode, run.stdout) == (3, "hi\n"), run.stderr
    assert "Unclosed" not in run.stderr, run.stderr
