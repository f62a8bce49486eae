# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Sandboxes on hosts of a real multi-node Ray cluster (three raylets on this machine): the
same API as a local sandbox, placement, drain, limits of capacity, containment from the Ray
cluster, and a node lost mid-use."""

from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path

import pytest
import ray

from prorl_gym.resources.snapshots import SnapshotStore
from prorl_gym.resources.tools.editor import EditorArgs, run_editor
from prorl_gym.sandbox import (
    Forkable,
    Sandbox,
    SandboxAPI,
    SandboxFileNotFound,
    SandboxLostError,
    SandboxSpec,
    SandboxStartError,
    default_backends,
    get_backend,
)
from prorl_gym.sandbox import create_sandbox as create
from prorl_gym.sandbox.backends.local.processes import processes_mounting, processes_naming
from prorl_gym.sandbox.backends.ray.backend import RayBackend
from prorl_gym.sandbox.backends.ray.local_cluster import LocalRayCluster
from prorl_gym.sandbox.backends.ray.sandbox import RemoteSandbox
from prorl_gym.sandbox.fork import staging_spec
from prorl_gym.sandbox.leases import read_leases


@pytest.fixture(scope="module")
def cluster():
    with LocalRayCluster(sandbox_nodes=2) as c:
        ray.init(address=c.address, log_to_driver=False)
        yield c


@pytest.fixture
async def backend(cluster):
    yield get_backend("ray")  # the default backends' instance, which create() uses
    await default_backends().close()  # this test's hosts: they live on this test's event loop


def ray_spec(root: str, **options) -> SandboxSpec:
    return SandboxSpec(backend={"kind": "ray", **options}, root_dir=root, command_timeout_s=10, python_timeout_s=20)


def our_processes(root: str) -> list[int]:
    """Processes of sandboxes under this root: bwrap's command line names their private dirs, and
    every process inside has mounts from them (also one orphaned by its host's death)."""
    return sorted(set(processes_mounting(f"{root}/")) | set(processes_naming(root)))


def test_both_sandboxes_declare_the_written_contract_and_implement_all_of_it():
    shared = {"resolve", "upload", "download"}  # written once, in the contract
    required = {
        name for name, member in vars(SandboxAPI).items() if inspect.isfunction(member) and not name.startswith("_")
    } - shared
    assert required >= {"bash", "python", "read_file", "write_file", "close"}
    for cls in (Sandbox, RemoteSandbox):
        assert SandboxAPI in cls.__mro__ and Forkable in cls.__mro__  # declared, not matched by shape
        stubs = {name for name in required if getattr(cls, name) is vars(SandboxAPI)[name]}
        assert not stubs, f"{cls.__name__} leaves {stubs} to the contract's stubs"
        assert cls.freeze is not Forkable.freeze


async def test_undo_after_a_branch_undoes_the_snapshots_last_edit_on_a_ray_host(backend, sandbox_root):
    store = SnapshotStore()
    async with await create(ray_spec(sandbox_root)) as sandbox:
        await run_editor(sandbox, EditorArgs(command="create", path="a.py", file_text="v1\n"))
        await run_editor(sandbox, EditorArgs(command="str_replace", path="a.py", old_str="v1", new_str="v2"))
        snapshot = await store.take(sandbox)
    branch = await store.branch(snapshot)
    try:
        undone = await run_editor(branch, EditorArgs(command="undo_edit", path="a.py"))
        assert undone.content == f"Undid the last edit of {branch.resolve('a.py')}"
        assert await branch.read_file("a.py") == "v1\n"
    finally:
        await branch.close()
        await store.close()


def test_a_ray_spec_forks_as_its_inner_backend_default_or_given():
    assert RayBackend().can_fork(SandboxSpec(backend="ray"))  # inner: local, isolated
    unisolated = SandboxSpec(backend={"kind": "ray", "inner": {"kind": "local", "isolation": "none"}})
    assert not RayBackend().can_fork(unisolated)


async def test_sandboxes_spread_over_hosts_and_work_as_local_ones(backend, sandbox_root):
    spec = ray_spec(sandbox_root)
    sandboxes = await asyncio.gather(*(create(spec) for _ in range(6)))
    try:
        hosts = [sb.host for sb in sandboxes]
        assert len(set(hosts)) == 2 and hosts.count(hosts[0]) == 3, hosts  # least loaded first
        sb = sandboxes[0]
        await sb.bash("cd /tmp && export X=41")
        assert (await sb.bash('echo "$((X + 1)) $PWD"')).output == "42 /tmp\n"
        assert (await sb.python("x = 6 * 7; print(x)")).output == "42\n" and sb.kernel_started
        await sb.write_file("notes/a.txt", "hello\n")
        assert await sb.read_file("notes/a.txt") == "hello\n"
        assert await sb.edit_file("notes/a.txt", "hello", "bye")
        assert (await sb.read_bytes("notes/a.txt")) == b"bye\n"
        with pytest.raises(SandboxFileNotFound):  # the host's own error, as itself
            await sb.read_file("missing.txt")
        status = await backend.status()
        assert sorted(h["live"] for h in status) == [3, 3] and all(h["healthy"] for h in status)
    finally:
        await asyncio.gather(*(sb.close() for sb in sandboxes))
    assert [h["live"] for h in await backend.status()] == [0, 0]
    assert not read_leases(sandbox_root) and not our_processes(sandbox_root)


async def test_a_remote_sandbox_forks_on_its_own_host_and_stages_once_for_a_group(backend, sandbox_root):
    spec = ray_spec(sandbox_root)
    async with await create(spec) as parent:
        await parent.bash("mkdir -p src && cd src && echo v1 > app.py && export TASK=t1")
        await parent.python("state = {'turn': 3}")
        forks = await parent.fork(2)
        try:
            assert {f.host for f in forks} == {parent.host}  # next to the files they share
            await forks[0].bash("echo mine > app.py")
            shell = await forks[1].bash("pwd; echo $TASK; cat app.py")
            assert shell.output.split() == ["/workspace/src", "t1", "v1"]
            assert (await forks[1].python("print(state['turn'])")).output == "3\n"
        finally:
            await asyncio.gather(*(f.close() for f in forks))
    staging = await create(staging_spec(spec))
    await staging.bash("echo staged > task.txt")
    template = await staging.freeze(consume=True)
    assert staging.closed
    forks = await template.spawn(3)
    await template.close()
    try:
        assert [(await f.bash("cat task.txt")).output for f in forks] == ["staged\n"] * 3
    finally:
        await asyncio.gather(*(f.close() for f in forks))
    assert [h["live"] for h in await backend.status()] == [0, 0]
    assert not read_leases(sandbox_root) and not our_processes(sandbox_root)
    assert not [p.name for p in Path(sandbox_root).iterdir() if not p.name.startswith(".")]


async def test_a_sandbox_cannot_reach_the_ray_cluster(backend, sandbox_root, cluster):
    gcs_host, gcs_port = cluster.address.split(":")
    async with await create(ray_spec(sandbox_root)) as sb:
        probe = (
            f"(exec 3<>/dev/tcp/{gcs_host}/{gcs_port}) 2>/dev/null && echo REACHED_GCS; "
            f"ls {cluster.tmpdir} 2>/dev/null && echo SEES_RAY_DIR; env | grep -c '^RAY_'; echo done"
        )
        assert (await sb.bash(probe)).output == "0\ndone\n"
        code = "import os; print(sorted(k for k in os.environ if k.startswith('RAY')))"
        assert (await sb.python(code)).output == "[]\n"


async def test_a_drained_host_takes_no_new_sandboxes_and_its_running_ones_finish(backend, sandbox_root):
    spec = ray_spec(sandbox_root)
    first = await create(spec)
    drained = await backend.drain(first.host)
    assert drained["draining"]
    later = await asyncio.gather(*(create(spec) for _ in range(3)))
    assert all(sb.host != first.host for sb in later)
    assert (await first.bash("echo still")).output == "still\n"  # not interrupted
    await backend.drain(first.host, draining=False)
    again = await create(spec)
    assert again.host == first.host  # the least loaded again
    await asyncio.gather(*(sb.close() for sb in [first, again, *later]))


async def test_with_every_slot_taken_a_start_waits_for_one_then_gives_up(backend, sandbox_root):
    spec = ray_spec(sandbox_root, slots_per_host=1, placement_timeout_s=2.0)
    held = await asyncio.gather(create(spec), create(spec))
    waiting = asyncio.create_task(create(spec))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await held[0].close()
    third = await asyncio.wait_for(waiting, 10)
    assert third.host == held[0].host
    with pytest.raises(SandboxStartError, match="no sandbox host with a free slot"):
        await create(spec)
    await asyncio.gather(held[1].close(), third.close())


async def test_a_lost_node_fails_its_sandboxes_typed_and_the_rest_go_on(backend, cluster, sandbox_root):
    spec = ray_spec(sandbox_root)
    victim_node = cluster.add_node()  # a third sandbox node, to lose
    cluster.cluster.wait_for_nodes()
    await asyncio.sleep(0)  # (hosts are started on first use, on every eligible node)
    sandboxes = await asyncio.gather(*(create(spec) for _ in range(6)))
    by_host: dict[str, list] = {}
    for sb in sandboxes:
        by_host.setdefault(sb.host, []).append(sb)
    assert len(by_host) == 3
    victim_id = victim_node.node_id
    victims = next(sbs for host, sbs in by_host.items() if host.endswith(victim_id[:8]))
    survivors = [sb for sb in sandboxes if sb not in victims]
    running = asyncio.create_task(victims[0].bash("sleep 30"))
    await asyncio.sleep(0.3)
    died = time.monotonic()
    cluster.kill_node(victim_node)
    with pytest.raises(SandboxLostError):
        await asyncio.wait_for(running, 20)
    with pytest.raises(SandboxLostError):
        await victims[1].bash("echo hi")
    lost_after = time.monotonic() - died
    for sb in survivors:
        assert (await sb.bash("echo ok")).output == "ok\n"
    fresh = await create(spec)
    assert fresh.host != victims[0].host
    status = {h["node"]: h for h in await backend.status()}
    assert status[victims[0].host]["lost"] and status[victims[0].host]["lost_sandboxes"] == 2
    await asyncio.gather(*(sb.close() for sb in [*sandboxes, fresh]))
    assert lost_after < 10
    # The dead node's sandboxes: their processes died with their host; their leases and
    # directories are what a host reaps when it starts on that machine again.
    cluster.add_node()
    cluster.cluster.wait_for_nodes()
    deadline = time.monotonic() + 30
    while read_leases(sandbox_root) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    assert not read_leases(sandbox_root)
    assert not [p.name for p in Path(sandbox_root).iterdir() if not p.name.startswith(".")]
    assert not our_processes(sandbox_root)
