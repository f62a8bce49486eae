# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The containment suite against the container backend (a real engine: Podman's service here).

The agent tries what it tries in the bubblewrap suite: files outside its workspace, the host's
loopback, other sandboxes, signals to host processes, a fork bomb, a memory hog, a disk fill,
an output flood; each is checked from the host where it can be, and the sandbox stays usable.
This module's sandboxes are registered with the suite's leak checks (conftest.py): at the end no
process of any of them and nothing under the module's root is left. Skipped, with the reason,
where no engine can be run (tests/support/container_engine.py).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from prorl_gym.sandbox import Sandbox, SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.container.backend import SANDBOX_LABEL
from prorl_gym.sandbox.backends.container.engine import Engine
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.instances import Backends
from prorl_gym.sandbox.errors import SandboxKernelError
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
    _status,
    _wait_until,
)

# The bubblewrap suite's tests that hold for containers as written, collected here again with this module's
# `make`: the same attacks, checked the same way, on container sandboxes. (The others assert bubblewrap's own
# mechanics: its holder process, its error messages, pid 1's environment, which a container's spawner hides.)
from tests.security.test_exhaustion import (  # noqa: F401 - collected by pytest from this module
    test_cpu_time_limit_kills_cpu_hog_with_sigxcpu,
    test_disk_fill_outside_workspace_and_tmp_is_bounded,
    test_disk_fill_through_nested_namespace_tmpfs_is_bounded,
    test_disk_fill_through_socket_dir_is_bounded,
    test_disk_fill_workspace_tmp_and_shm_gives_no_space_left,
    test_file_larger_than_limit_is_stopped_at_the_limit,
    test_foreground_fork_loop_is_interrupted_and_cleaned_up,
    test_fork_bomb_is_contained,
    test_infinite_loop_times_out_and_state_survives,
    test_memory_hog_gets_memory_error,
    test_output_flood_is_bounded,
)
from tests.security.test_filesystem import (  # noqa: F401 - collected by pytest from this module
    test_write_other_sandbox_host_dirs_fails,
)
from tests.security.test_lifecycle import (  # noqa: F401 - collected by pytest from this module
    test_background_and_detached_processes_die_at_close,
    test_close_leaves_nothing_for_the_hosts_init_to_reap,
    test_failed_start_leaves_no_sandbox_running,
)
from tests.security.test_network import (  # noqa: F401 - collected by pytest from this module
    test_connect_to_host_loopback_listener_fails,
    test_no_network_interfaces_routes_or_dns,
)
from tests.support.container_engine import engine_or_skip

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
    denied = await sb.bash("mount -t tmpfs none /mnt 2>&1 || echo NO_MOUNT; su -c id 2>&1 || echo NO_SU")
    assert "NO_MOUNT" in denied.output and "NO_SU" in denied.output, denied
    await sb.python("print(1)")
    seen_from_host = {pid: _status(pid) for pid in _procs(sb)}  # pid 1 (the spawner) included
    assert sb.placement.init_pid in seen_from_host and len(seen_from_host) >= 3, seen_from_host
    for pid, status in seen_from_host.items():
        assert status["Uid"].split() == ["100000"] * 4 and status["CapEff"] == "0000000000000000", (pid, status)
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


async def test_a_sandbox_at_its_process_limit_fails_new_programs_not_its_pid1(make):
    sb = await make(limits=LIMITS.model_copy(update={"processes": 12}))
    fill = (
        "import os, time\nfor _ in range(20):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(300)\n        os._exit(0)\nprint('full', flush=True)\ntime.sleep(300)"
    )
    await sb.write_file("/tmp/fill.py", fill)
    await sb.bash("python3 /tmp/fill.py > /tmp/full.txt 2>&1 & disown")
    said = 'read -r line < /tmp/full.txt; echo "$line"'  # builtins: no fork needed
    assert await _wait_until_async(lambda: sb.bash(said), lambda result: result.output == "full\n")
    with pytest.raises(SandboxKernelError):  # no process left for a kernel
        await sb.python("print(1)")
    assert sb.placement.init_pid in _procs(sb)  # the spawner's fork failed, the spawner did not
    await sb.bash("kill -9 -1")  # a builtin: no fork needed
    assert (await sb.python("print(6 * 7)")).output == "42\n"
    await _assert_usable(sb)


async def _wait_until_async(call, done, timeout: float = 10.0) -> bool:
    """Until done(await call()), or the timeout."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not done(await call()):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True
