# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The containment suite against the container backend (a real engine: Podman's service here).

The agent tries what it tries in the bubblewrap suite: files outside its workspace, the host's
loopback, other sandboxes, signals to host processes, a fork bomb, a memory hog, a disk fill,
an output flood; each is checked from the host where it can be, and the sandbox stays usable.
This module's sandboxes are registered with the suite's leak checks (conftest.py): at the end no
process of any of them and nothing under the module's root is left. Skipped, with the reason,
where no engine can be run (tests/sandbox/container_engine.py).
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
from pathlib import Path

import pytest

from prorl_gym.sandbox import Sandbox, SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.container.backend import SANDBOX_LABEL
from prorl_gym.sandbox.backends.container.engine import Engine
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.registry import Backends
from tests.sandbox.container_engine import engine_or_skip
from tests.security.helpers import (
    _CREATED,
    LIMITS,
    MiB,
    _assert_usable,
    _disk_usage,
    _pid_ns,
    _pids,
    _procs,
    _start_time,
    _wait_until,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def make(module_root):
    """make(**spec_overrides) -> a started container sandbox under the module root, closed after the test."""
    socket_path = engine_or_skip()[0]
    backends = Backends()
    made: list[Sandbox] = []

    async def _make(**overrides) -> Sandbox:
        fields = dict(
            backend=ContainerOptions(socket=socket_path),
            root_dir=module_root,
            limits=LIMITS,
            command_timeout_s=10,
            python_timeout_s=20,
            start_timeout_s=30,
        )
        sb = await create_sandbox(SandboxSpec(**(fields | overrides)), backends=backends)
        made.append(sb)
        init_pid = sb.placement.init_pid
        ns = _pid_ns(init_pid)
        assert ns is not None and ns != _pid_ns(os.getpid()), "the container's pid 1 is not in a namespace of its own"
        _CREATED.append({"id": sb.id, "init_pid": init_pid, "init_start": _start_time(init_pid), "ns": ns})
        return sb

    yield _make
    await asyncio.gather(*(sb.close() for sb in made), return_exceptions=True)
    await backends.close()


async def test_files_outside_the_workspace_are_not_there_or_not_writable(make):
    a, b = await make(), await make()
    await a.write_file("secret.txt", "a's secret\n")
    canary = REPO / "pyproject.toml"
    probe = (
        f"test -e {canary} && echo SEES_REPO; test -e {a.placement.private_dir}/spawn && echo SEES_OTHER; "
        f"ls /root 2>&1 | head -2; touch /etc/canary 2>&1 || echo NO_ETC; touch /usr/canary 2>/dev/null || echo NO_USR; "
        f"touch {b.placement.socket_dir}/x 2>/dev/null || echo NO_RUN; cat /workspace/secret.txt 2>&1; echo done"
    )
    out = (await b.bash(probe)).output
    assert "SEES_REPO" not in out and "SEES_OTHER" not in out and "a's secret" not in out, out
    assert all(word in out for word in ("NO_ETC", "NO_USR", "NO_RUN")) and out.endswith("done\n"), out
    assert not Path("/etc/canary").exists() and not (b.placement.socket_dir / "x").exists()
    await _assert_usable(b)


async def test_no_network_and_no_host_loopback(make):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        sb = await make()
        interfaces = await sb.bash("tail -n +3 /proc/net/dev | cut -d: -f1")
        assert interfaces.output.split() == ["lo"], interfaces
        code = f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')\nexcept OSError as e: print('refused', e)"
        result = await sb.python(code)
        assert "refused" in result.output and "CONNECTED" not in result.output, result
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing reached the host's listener
        await _assert_usable(sb)
    finally:
        listener.close()


async def test_other_sandboxes_and_host_processes_are_out_of_reach(make):
    a, b = await make(), await make()
    await a.bash("sleep 300 &")
    seen = await b.bash("ps -eo pid,args | grep -c 'sleep 300'; ps -e | wc -l")
    assert seen.output.split()[0] == "1", seen  # only the grep itself
    me, spawner_a = os.getpid(), a.placement.init_pid
    out = (await b.bash(f"kill -9 {me} {spawner_a} 2>&1; kill -9 1 2>&1; kill -9 -1; echo sent")).output
    assert "sent" in out, out
    assert os.path.exists(f"/proc/{spawner_a}") and (await a.bash("echo a-alive")).output.startswith("a-alive")
    assert await _wait_until(lambda: b.placement.init_pid in _pids())  # its pid 1 ignores the sandbox's signals
    await _assert_usable(b)
    assert (await a.bash("jobs -r | wc -l")).output.strip() == "1"  # a's job survived b's kill -1


async def test_the_sandbox_is_an_unprivileged_uid_with_no_capabilities(make, monkeypatch):
    monkeypatch.setenv("PRORL_HOST_SECRET", "s3cret")
    sb = await make()
    out = (await sb.bash("id -u; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status")).output
    assert out.splitlines()[0] == "100000", out
    assert "CapEff:\t0000000000000000" in out and "CapPrm:\t0000000000000000" in out and "NoNewPrivs:\t1" in out, out
    env = await sb.bash("env; cat /proc/1/environ 2>&1 | tr '\\0' '\\n'")
    assert "s3cret" not in env.output
    denied = await sb.bash("mount -t tmpfs none /mnt 2>&1 || echo NO_MOUNT; unshare -Ur true 2>&1 || echo NO_USERNS")
    assert "NO_MOUNT" in denied.output, denied
    await _assert_usable(sb)


async def test_fork_bomb_is_contained_by_the_pids_cgroup(make):
    a, b = await make(), await make()
    host_before = len(_pids())
    result = await a.bash(":(){ :|:& };:", timeout=5)
    assert not result.timed_out, result
    peak_ns = peak_host = 0
    for _ in range(15):
        peak_ns = max(peak_ns, len(_procs(a)))
        peak_host = max(peak_host, len(_pids()))
        await asyncio.sleep(0.1)
    assert peak_ns <= LIMITS.processes, f"{peak_ns} processes in a sandbox limited to {LIMITS.processes}"
    assert peak_host - host_before <= LIMITS.processes + 200, f"host process count {host_before} -> {peak_host}"
    other = await b.bash("echo b-ok; /bin/echo b-fork-ok", timeout=10)
    assert other.output == "b-ok\nb-fork-ok\n" and not other.timed_out, other
    result = await a.bash("kill -9 -1; /bin/echo cleaned", timeout=10)
    assert "cleaned\n" in result.output, result
    assert await _wait_until(lambda: len(_procs(a)) <= 4), _procs(a)
    await _assert_usable(a)


async def test_memory_hog_gets_memory_error(make):
    sb = await make()
    result = await sb.bash('python3 -c "b = bytearray(2 << 30)"; echo rc=$?')
    assert "MemoryError" in result.output and result.output.endswith("rc=1\n"), result.output
    py = await sb.python("x = bytearray(2 << 30)")
    assert py.error and py.error["ename"] == "MemoryError" and not py.kernel_restarted, py
    assert (await sb.python("print(6 * 7)")).output == "42\n"
    await _assert_usable(sb)


async def test_disk_fill_gives_no_space_left_and_nothing_on_the_host_disk(make):
    sb = await make()
    for directory, size in (
        ("/workspace", LIMITS.workspace_bytes),
        ("/tmp", LIMITS.tmp_bytes),
        ("/dev/shm", LIMITS.tmp_bytes),
    ):
        result = await sb.bash(
            f"for i in $(seq 8); do dd if=/dev/zero of={directory}/fill$i bs=1M count=12 2>&1 | grep -v records; done; "
            f"echo used=$(cat {directory}/fill* | wc -c); rm -f {directory}/fill*",
            timeout=30,
        )
        used = int(re.search(r"used=(\d+)", result.output).group(1))
        assert "No space left" in result.output and used <= size, (directory, result.output[-300:])
    assert _disk_usage(sb.placement.private_dir) < MiB  # all of it was in the container's tmpfs
    big = await sb.bash("head -c 20000000 /dev/zero > /workspace/big; echo rc=$?")
    assert "rc=0" not in big.output  # the file-size limit
    await _assert_usable(sb)


async def test_output_flood_is_bounded(make):
    sb = await make()
    result = await sb.bash("yes flood | head -c 50000000; echo end", timeout=20)
    assert result.truncated and len(result.output) <= 2 * sb.spec.output_limit_bytes, len(result.output)
    assert result.output_bytes >= 50_000_000 and not result.timed_out, result.output_bytes
    await _assert_usable(sb)


async def test_close_leaves_no_container_process_or_file(make):
    sb = await make()
    await sb.bash("sleep 300 & sleep 300 &")
    await sb.python("print(1)")
    assert len(_procs(sb)) >= 4
    engine = Engine(sb.spec.backend.socket)
    try:
        await sb.close()
        assert not await engine.list({SANDBOX_LABEL: sb.id})
    finally:
        await engine.close()
    assert await _wait_until(lambda: not _procs(sb)), _procs(sb)
    assert not sb.placement.private_dir.exists()
