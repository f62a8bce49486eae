# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxStartError, create_sandbox
from prorl_gym.sandbox.leases import Lease, read_leases, write_lease
from prorl_gym.sandbox.owner import short_hostname
from prorl_gym.sandbox.reaper import reap_stale

# A "resources server" that creates sandboxes with processes that try to outlive it.
OWNER = textwrap.dedent(
    """
    import asyncio, sys
    from prorl_gym.sandbox import SandboxSpec, create_sandbox

    async def main(root, mark):
        for isolation in ("required", "none"):
            sb = await create_sandbox(SandboxSpec(root_dir=root, backend={"isolation": isolation}))
            await sb.bash(f"sleep {mark}.{len(isolation)} & setsid sleep {mark + 1}.{len(isolation)} & true")
        print("ready", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


MARK = os.getpid() * 10  # sleep durations of this run only: nothing else on the host counts


def marked_processes() -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if line.startswith((f"sleep {MARK}.", f"sleep {MARK + 1}."))]


async def test_close_removes_the_lease(sandbox_spec):
    sandbox = await create_sandbox(sandbox_spec)
    (lease,) = read_leases(sandbox_spec.root_dir)
    assert lease.sandbox_id == sandbox.id and lease.owner_pid == os.getpid() and lease.pids
    await sandbox.close()
    assert read_leases(sandbox_spec.root_dir) == []


async def test_a_sandbox_id_in_use_is_refused_and_the_other_sandbox_keeps_its_lease(sandbox_spec):
    """A start retried elsewhere under the id of one a lost host may have started would replace
    that one's lease, and its reaper would never find it: an id with a lease is refused."""
    sandbox = await create_sandbox(sandbox_spec)
    try:
        (before,) = read_leases(sandbox_spec.root_dir)
        with pytest.raises(SandboxStartError, match="in use"):
            await create_sandbox(sandbox_spec, sandbox.id)
        assert read_leases(sandbox_spec.root_dir) == [before]
        assert (await sandbox.bash("echo alive")).output == "alive\n"
    finally:
        await sandbox.close()
    assert read_leases(sandbox_spec.root_dir) == []


async def test_nothing_of_a_killed_servers_sandboxes_survives_the_reaper(sandbox_root):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, sandbox_root, str(MARK)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "ready"
        assert len(read_leases(sandbox_root)) == 2
        deadline = time.monotonic() + 10
        while len(marked_processes()) < 4 and time.monotonic() < deadline:  # background jobs exec a moment later
            await asyncio.sleep(0.05)
        assert len(marked_processes()) == 4
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    # The next server's start-up (or its periodic sweep) reaps what the dead one left.
    reaped = await reap_stale(sandbox_root)
    assert len(reaped) == 2
    await asyncio.sleep(0.2)
    assert marked_processes() == []
    assert read_leases(sandbox_root) == []
    assert [p.name for p in Path(sandbox_root).iterdir() if not p.name.startswith(".")] == []


def foreign_lease(spec, sandbox_id: str, owner: str, expired: bool = False, **fields) -> Lease:
    """A lease written by another process (`owner`: `<host>-<pid>-<start>`), optionally expired."""
    if expired:
        fields |= {"created": time.time() - 10, "ttl_s": 1}
    private_dir = str(Path(spec.root_dir) / sandbox_id)
    return Lease(
        sandbox_id=sandbox_id,
        backend="local",
        owner=owner,
        owner_pid=1,
        owner_start=None,
        private_dir=private_dir,
        **fields,
    )


async def test_live_sandboxes_are_not_reaped_but_expired_ones_are(sandbox_spec):
    mine = await create_sandbox(sandbox_spec)
    # a lease of another live process that expired: a leak
    other = foreign_lease(sandbox_spec, "leaked", f"{short_hostname()}-1-0", expired=True)  # this host's pid 1
    write_lease(sandbox_spec.root_dir, other)
    assert await reap_stale(sandbox_spec.root_dir) == ["leaked"]
    assert (await mine.bash("echo alive")).output == "alive\n"
    await mine.close()


async def test_leases_of_other_hosts_are_left_to_them(sandbox_spec):
    """A sandbox root on a shared file system: another node's pids cannot be judged from here."""
    lease = foreign_lease(sandbox_spec, "theirs", "othernode-1-0", expired=True)
    write_lease(sandbox_spec.root_dir, lease)
    assert await reap_stale(sandbox_spec.root_dir) == []
    assert [lease.sandbox_id for lease in read_leases(sandbox_spec.root_dir)] == ["theirs"]


async def test_a_reused_pid_is_never_signalled(sandbox_spec):
    victim = subprocess.Popen(["sleep", "30"])
    try:  # the lease names the victim's pid but with another start time: a reused pid
        lease = foreign_lease(sandbox_spec, "old", f"{short_hostname()}-2-0", pids={victim.pid: 12345})
        write_lease(sandbox_spec.root_dir, lease)
        assert await reap_stale(sandbox_spec.root_dir) == ["old"]
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


async def test_a_sandbox_whose_owner_died_while_bubblewrap_started_is_reaped(sandbox_spec):
    """The owner died after starting bwrap and before the lease named its pids: bwrap outlives it
    (--die-with-parent cannot fire for a parent already gone) and mounts nothing yet. It names its
    private dir on its command line; it and the rest of its session are found by that."""
    lease = foreign_lease(sandbox_spec, "midstart", f"{short_hostname()}-2-0", expired=True)
    starting = subprocess.Popen(
        [
            "sh",
            "-c",
            f"sleep {MARK + 7} & exec {sys.executable} -c 'import time; time.sleep(60)' --ro-bind {lease.private_dir}/ctl",
        ],
        start_new_session=True,
    )
    try:
        write_lease(sandbox_spec.root_dir, lease)
        assert await reap_stale(sandbox_spec.root_dir) == ["midstart"]
        assert starting.wait(timeout=5) == -signal.SIGKILL
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert f"sleep {MARK + 7}" not in ps  # its session went with it
    finally:
        starting.kill()
        starting.wait()
