# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A shell command and a shell's start, SWE-ReX against our sandbox, back to back in one process.

    python -m benchmarks.peer_swerex [--calls 100]

SWE-ReX 1.4.0's `LocalDeployment` (what SWE-agent runs on a laptop: a bash driven through
pexpect, no isolation) against our bubblewrap sandbox (its persistent pty bash). Start: until a
shell has answered its first command (SWE-ReX: deployment start, session, `echo hi`; ours:
sandbox placement, shell, `echo hi`). A call: `echo hi` in the running shell, p50 over `calls`.
Part of benchmarks/peer_nemo_gym's JSON as well. SWE-ReX is the `bench` extra
(`pip install -e '.[bench]'`, which `make bench` does).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from benchmarks.common import emit, ms, percentile, sandbox_root
from prorl_gym.sandbox import SandboxSpec, create_sandbox

COMMAND = "echo hi"
STARTS = 5  # each side's start is the median of this many (the first of a process pays for imports)


async def swerex_shell():
    """A started SWE-ReX bash session: (echo, stop)."""
    from swerex.deployment.local import LocalDeployment
    from swerex.runtime.abstract import BashAction, CreateBashSessionRequest

    deployment = LocalDeployment()
    await deployment.start()
    await deployment.runtime.create_session(CreateBashSessionRequest())

    async def echo() -> None:
        observation = await deployment.runtime.run_in_session(BashAction(command=COMMAND))
        if observation.output.strip() != "hi":
            raise RuntimeError(f"SWE-ReX answered {observation.output!r}")

    return echo, deployment.stop


async def our_shell(root: str):
    """A sandbox whose shell will start on its first command: (echo, close)."""
    sandbox = await create_sandbox(SandboxSpec(root_dir=root))

    async def echo() -> None:
        result = await sandbox.bash(COMMAND)
        if result.output != "hi\n":
            raise RuntimeError(f"our sandbox answered {result.output!r}")

    return echo, sandbox.close


async def measure(start_shell, calls: int) -> dict:
    """Start: until the shell has answered its first command (median of STARTS); then `calls` echoes."""
    starts = []
    for _ in range(STARTS):
        started = time.perf_counter()
        echo, stop = await start_shell()
        await echo()
        starts.append(time.perf_counter() - started)
        await stop()
    echo, stop = await start_shell()
    try:
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            await echo()
            times.append(time.perf_counter() - started)
    finally:
        await stop()
    return {"start_s": round(percentile(starts, 50), 3), "bash_echo_p50_ms": ms(percentile(times, 50))}


async def ours(calls: int) -> dict:
    with sandbox_root() as root:
        return await measure(lambda: our_shell(root), calls)


async def swerex(calls: int) -> dict:
    return await measure(swerex_shell, calls)


async def compare(calls: int = 100) -> dict:
    """The JSON keys; without SWE-ReX installed, ours alone and why."""
    mine = await ours(calls)
    result = {"ours_bash_echo_p50_ms": mine["bash_echo_p50_ms"], "ours_shell_start_s": mine["start_s"]}
    try:
        theirs = await swerex(calls)
    except ImportError:
        return result | {"swerex": "not installed: pip install -e '.[bench]'"}
    return result | {
        "swerex_bash_echo_p50_ms": theirs["bash_echo_p50_ms"],
        "swerex_shell_start_s": theirs["start_s"],
        "swerex_vs_ours_bash_echo": round(theirs["bash_echo_p50_ms"] / mine["bash_echo_p50_ms"], 1),
        "swerex_vs_ours_shell_start": round(theirs["start_s"] / mine["start_s"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    emit("peer_swerex", asyncio.run(compare(args.calls)))


if __name__ == "__main__":
    main()
