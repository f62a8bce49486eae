# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The prorl_local NeMo Gym sandbox provider, driven through NeMo Gym's own API on real sandboxes."""

from __future__ import annotations

import os
import time
from importlib.metadata import entry_points

import pytest
from nemo_gym.sandbox import (
    AsyncSandbox,
    Sandbox,
    SandboxCreateError,
    SandboxSpec,
    SandboxStatus,
    create_provider,
    get_provider_class,
    list_providers,
)

from prorl_gym.sandbox import SandboxClosedError
from prorl_gym.sandbox.nemo_gym_provider import RUNTIME_RETURN_CODE, ProrlLocalProvider


@pytest.fixture
def provider_config(sandbox_root) -> dict:
    # What an agent's resolved `sandbox_provider` block looks like: {provider name: constructor kwargs}.
    return {"prorl_local": {"root_dir": sandbox_root, "command_timeout_s": 10}}


def sandbox_dirs(root: str) -> list[str]:
    """Per-sandbox directories and leases left under the root: none once everything is closed."""
    leases = os.path.join(root, ".leases")
    leftover = [p for p in os.listdir(root) if not p.startswith(".")]
    return leftover + (os.listdir(leases) if os.path.isdir(leases) else [])


def test_discoverable_by_name_through_nemo_gym_registry(provider_config):
    assert [ep.value for ep in entry_points(group="nemo_gym.sandbox_providers", name="prorl_local")] == [
        "prorl_gym.sandbox.nemo_gym_provider:ProrlLocalProvider"
    ]
    assert "prorl_local" in list_providers()
    assert get_provider_class("prorl_local") is ProrlLocalProvider
    provider = create_provider(provider_config)
    assert isinstance(provider, ProrlLocalProvider) and provider.name == "prorl_local"


async def test_lifecycle_through_async_sandbox(provider_config, sandbox_root, tmp_path):
    spec = SandboxSpec(workdir="/workspace", env={"GREETING": "hi there"}, files={"notes/a.txt": "seeded"})
    sandbox = AsyncSandbox(provider_config, spec)
    assert await sandbox.status() == SandboxStatus.UNKNOWN  # not started yet
    await sandbox.start()
    try:
        assert await sandbox.status() == SandboxStatus.RUNNING

        result = await sandbox.exec("echo $GREETING; pwd; cat notes/a.txt")  # spec.files uploaded by start()
        assert (result.stdout, result.return_code, result.error_type) == ("hi there\n/workspace\nseeded", 0, None)
        # A real bubblewrap sandbox: its own UTS namespace.
        assert (await sandbox.exec("cat /proc/sys/kernel/hostname")).stdout.strip() == "sandbox"

        # stderr arrives merged into stdout (a pty); the exit code is the command's.
        result = await sandbox.exec("echo oops >&2; exit 3")
        assert (result.stdout.strip(), result.stderr, result.return_code) == ("oops", None, 3)
        assert (await sandbox.exec("false")).return_code == 1

        # NeMo Gym's exec is stateless (a fresh `sh -c` in its own providers): shell state does not
        # carry over between calls, files do.
        await sandbox.exec("X=1; cd /tmp; echo data > /workspace/kept.txt")
        result = await sandbox.exec('echo "[$X]"; pwd; cat kept.txt')
        assert result.stdout.split() == ["[]", "/workspace", "data"]

        result = await sandbox.exec('pwd; echo "$A"', cwd="/tmp", env={"A": "b 'c'"})
        assert result.stdout.splitlines() == ["/tmp", "b 'c'"]
        assert (await sandbox.exec("pwd", cwd="/nonexistent")).return_code != 0

        started = time.monotonic()
        result = await sandbox.exec("echo started; sleep 30", timeout_s=1)
        assert time.monotonic() - started < 10
        assert (result.return_code, result.error_type) == (RUNTIME_RETURN_CODE, "timeout")
        assert "started" in result.stdout and "timed out after 1s" in result.stderr
        assert (await sandbox.exec("echo alive")).stdout.strip() == "alive"  # usable after a timeout
        result = await sandbox.exec("kill -9 $PPID")  # kills our persistent shell: a runtime failure
        assert (result.return_code, result.error_type) == (RUNTIME_RETURN_CODE, "sandbox")
        assert (await sandbox.exec("echo alive")).stdout.strip() == "alive"  # and a new shell serves the next

        # Upload then download: arbitrary bytes, through the sandbox itself.
        payload = bytes(range(256)) * 64 + b"\xff\xfe not utf-8 \x00"
        (tmp_path / "in.bin").write_bytes(payload)
        await sandbox.upload(tmp_path / "in.bin", "/workspace/data/blob.bin")
        assert (await sandbox.exec("wc -c < data/blob.bin")).stdout.strip() == str(len(payload))
        await sandbox.download("/workspace/data/blob.bin", tmp_path / "out" / "blob.bin")
        assert (tmp_path / "out" / "blob.bin").read_bytes() == payload
        with pytest.raises(FileNotFoundError):
            await sandbox.download("/workspace/missing.txt", tmp_path / "missing.txt")
    finally:
        await sandbox.stop()
    assert await sandbox.status() == SandboxStatus.STOPPED
    await sandbox.stop()  # twice: a no-op
    assert sandbox_dirs(sandbox_root) == []
    with pytest.raises(RuntimeError):
        await sandbox.exec("echo after stop")


async def test_provider_close_is_idempotent(provider_config, sandbox_root):
    provider = create_provider(provider_config)
    handle = await provider.create(SandboxSpec())
    assert handle.provider_name == "prorl_local"
    assert await provider.status(handle) == SandboxStatus.RUNNING
    await provider.close(handle)
    await provider.close(handle)
    assert await provider.status(handle) == SandboxStatus.STOPPED
    assert sandbox_dirs(sandbox_root) == []
    with pytest.raises(SandboxClosedError, match="closed"):
        await provider.exec(handle, "true")
    await provider.aclose()


async def test_shared_provider_serves_several_sandboxes(provider_config):
    # AsyncSandbox.stop() calls provider.aclose(): with a shared instance the other sandbox must survive.
    provider = create_provider(provider_config)
    first, second = AsyncSandbox(provider, SandboxSpec()), AsyncSandbox(provider, SandboxSpec())
    await first.start()
    await second.start()
    try:
        await first.exec("echo one > f")
        assert (await second.exec("cat f")).return_code != 0  # separate sandboxes
        await first.stop()
        assert (await second.exec("echo two")).stdout.strip() == "two"
    finally:
        await first.stop()
        await second.stop()


def test_sync_sandbox_as_mini_swe_agent_uses_it(provider_config):
    # mini_swe_agent_2 drives nemo_gym.sandbox.Sandbox (sync, its own loop thread) with user="root".
    with Sandbox(provider_config).start(SandboxSpec(workdir="/workspace")) as sandbox:
        result = sandbox.exec("echo ok && pwd", cwd="/workspace", timeout_s=30, user="root")
        assert (result.stdout.split(), result.return_code) == (["ok", "/workspace"], 0)
        with pytest.raises(ValueError, match="single user"):
            sandbox.exec("id", user="alice")
    assert sandbox.status() == SandboxStatus.STOPPED


def test_spec_mapping(provider_config):
    provider = ProrlLocalProvider(**provider_config["prorl_local"], env={"BASE": "1"}, limits={"cpu_time_s": 5})
    ours = provider.spec_for(
        SandboxSpec(
            workdir="/testbed",
            env={"TASK": "x"},
            ready_timeout_s=60,
            ttl_s=600,
            resources={"memory_mib": 2048, "disk_gib": 2},
            provider_options={"network": True, "limits": {"processes": 64}},
        )
    )
    assert (ours.workspace, ours.env, ours.start_timeout_s, ours.lease_ttl_s, ours.network) == (
        "/testbed",
        {"BASE": "1", "TASK": "x"},
        60,
        600,
        True,
    )
    assert (ours.limits.memory_bytes, ours.limits.workspace_bytes) == (2048 << 20, 2 << 30)
    assert (ours.limits.cpu_time_s, ours.limits.processes) == (5, 64)  # merged, not replaced
    assert (ours.backend.isolation, ours.backend.kind, ours.command_timeout_s) == ("required", "local", 10)


async def test_rejects_what_it_cannot_honour(provider_config):
    with pytest.raises(ValueError, match="Unknown prorl_local provider option.*bogus"):
        create_provider({"prorl_local": {"bogus": 1}})
    with pytest.raises(ValueError):
        create_provider({"prorl_local": {"backend": {"isolation": "sometimes"}}})
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        create_provider({"prorl_local": {"backend": "nowhere"}})
    provider = create_provider(provider_config)
    with pytest.raises(ValueError, match="provider_options.*bogus"):
        await provider.create(SandboxSpec(provider_options={"bogus": 1}))
    for spec in (
        SandboxSpec(image="python:3.12"),  # the local backend cannot run an image
        SandboxSpec(entrypoint=["/init"]),
        SandboxSpec(resources={"gpu": 1}),
    ):
        with pytest.raises(SandboxCreateError):
            await provider.create(spec)


async def test_refuses_service_ports_it_cannot_expose(provider_config, sandbox_root):
    """NeMo Gym 0.7's SandboxSpec.ports asks the provider to make ports inside reachable from outside: a
    prorl_local sandbox has no network shared with the host, so it says so instead of ignoring them (and
    creates nothing)."""
    provider = create_provider(provider_config)
    with pytest.raises(SandboxCreateError, match=r"cannot expose service ports \[8080, 9000\] \(spec.ports\)"):
        await provider.create(SandboxSpec(ports=[8080, 9000]))
    assert sandbox_dirs(sandbox_root) == []
    sandbox = AsyncSandbox(provider_config, SandboxSpec(ports=()))  # none asked for: created as before
    await sandbox.start()
    try:
        assert (await sandbox.exec("echo ok")).stdout == "ok\n"
    finally:
        await sandbox.stop()
