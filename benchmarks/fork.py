# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Sandbox fork, shared INIT and snapshots against fresh sandboxes, in one run:

  fork       a fork of a frozen template vs a fresh sandbox, each up to its first bash result (fork_p50_ms,
             fresh_start_p50_ms; target <= 10); freezing a sandbox (freeze_p50_ms)
  swe        a GRPO group of --group samples of one SWE task (--swe-project): INIT per sample when each stages the
             repository itself (swe_init_per_sample_ms_fresh) vs staging once and forking
             (swe_init_per_sample_ms_shared; target ratio >= 4x)
  memory     what a SWE sample's sandbox holds in memory beyond the files it changed: processes (PSS)
             plus its tmpfs (fresh: the repository copy) or overlay upper dir (fork) (fork_mib; target <= 2)
  snapshot   a snapshot after a turn of a math rollout (kernel state included) and of a SWE one, a fork of the
             staged task (snapshot_p50_ms, target <= 5; swe_snapshot_p50_ms, target <= 20)
  math       a group of --group math samples whose first cell needs what the parent's kernel holds:
             fresh kernels vs forks of a warmed parent (math_group_speedup)

    python -m benchmarks.fork [--samples 30] [--group 8]

Prints readable lines, then one JSON object as the last line (results/bench/fork.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

from benchmarks.common import emit, ms, percentile, raise_fd_limit, sandbox_root
from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox import SandboxAPI, SandboxSpec, create_sandbox
from prorl_gym.sandbox.fork import staging_spec
from resources_servers.swe.repos import prepare_repo, prepare_test_env, stage_repo, task_spec

SWE_TASKS = REPO_ROOT / "resources_servers" / "swe" / "data" / "tasks.jsonl"
SWE_CACHE = REPO_ROOT / "data" / "swe" / "cache"
TARGETS = {
    "swe_shared_vs_fresh": 4.0,
    "fork_p50_ms": 10.0,
    "fork_mib": 2.0,
    "snapshot_p50_ms": 5.0,
    "swe_snapshot_p50_ms": 20.0,
}
WARM_CELL = "import sympy\nx = sympy.symbols('x')\ncoeffs = list(range(50))"
GROUP_CELL = "print(sympy.expand((x + 1) ** 3), sum(coeffs))"


def p50(values: list[float]) -> float:
    return ms(percentile(values, 50))


async def timed(coro) -> tuple[float, object]:
    started = time.perf_counter()
    result = await coro
    return time.perf_counter() - started, result


async def first_bash(sandbox: SandboxAPI) -> SandboxAPI:
    assert (await sandbox.bash("echo ready")).output == "ready\n"
    return sandbox


async def first_bash_of(starting):
    """A sandbox (or a list of one) as it is started and has answered its first command."""
    started = await starting
    await first_bash(started[0] if isinstance(started, list) else started)
    return started


async def fork_vs_fresh(spec: SandboxSpec, samples: int) -> dict:
    fresh, forks, freezes = [], [], []
    async with await create_sandbox(spec) as parent:
        await parent.bash("mkdir -p src && seq 1 1000 > src/data.txt && cd src")
        for _ in range(samples):
            # Both timed to their first command's answer (a fork's shell restores its parent's state there).
            elapsed, sandbox = await timed(first_bash_of(create_sandbox(spec)))
            fresh.append(elapsed)
            await sandbox.close()
            elapsed, template = await timed(parent.freeze())
            freezes.append(elapsed)
            async with template:
                elapsed, (child,) = await timed(first_bash_of(template.spawn(1)))
                forks.append(elapsed)
                await child.close()
    return {
        "fresh_start_p50_ms": p50(fresh),
        "fork_p50_ms": p50(forks),
        "freeze_p50_ms": p50(freezes),
    }


def _swe_row(project: str) -> dict:
    rows = (json.loads(line) for line in SWE_TASKS.read_text().splitlines())
    return next(row for row in rows if row["instance_id"].startswith(f"{project}__"))


async def swe_group(spec: SandboxSpec, group: int, rounds: int, project: str) -> dict:
    row = _swe_row(project)
    repo = await prepare_repo(row, SWE_CACHE)
    test_env = await prepare_test_env(row, spec.kernel_python, SWE_CACHE)
    task = task_spec(spec, row, repo, test_env)

    async def fresh_sample() -> SandboxAPI:
        sandbox = await create_sandbox(task)
        await stage_repo(sandbox, row)
        return sandbox

    fresh_per_sample, shared_per_sample, snapshots = [], [], []
    memory = {}
    for _ in range(rounds):
        elapsed, sandboxes = await timed(asyncio.gather(*(fresh_sample() for _ in range(group))))
        fresh_per_sample.append(elapsed / group)
        memory["fresh_mib"] = _sandbox_mib(sandboxes[0])
        await asyncio.gather(*(s.close() for s in sandboxes))

        started = time.perf_counter()  # as the resources server's shared INIT does it
        staging = await create_sandbox(staging_spec(task))
        await stage_repo(staging, row)
        template = await staging.freeze(consume=True)
        forks = await template.spawn(group)
        shared_per_sample.append((time.perf_counter() - started) / group)
        await forks[0].bash("echo '# changed' >> README* 2>/dev/null; git status --short | head -3")
        memory["fork_mib"] = _sandbox_mib(forks[0])
        elapsed, snapshot = await timed(forks[0].freeze())
        snapshots.append(elapsed)
        await snapshot.close()
        await asyncio.gather(*(f.close() for f in forks))
        await template.close()
    return {
        "swe_init_per_sample_ms_fresh": p50(fresh_per_sample),
        "swe_init_per_sample_ms_shared": p50(shared_per_sample),
        "swe_shared_vs_fresh": round(percentile(fresh_per_sample, 50) / percentile(shared_per_sample, 50), 2),
        "swe_snapshot_p50_ms": p50(snapshots),
        **memory,
    }


def _sandbox_mib(sandbox: SandboxAPI) -> float:
    """Memory a SWE sample's sandbox holds: PSS of its processes, plus the pages of its writable files
    where they are memory: a fresh sandbox's tmpfs (the repository copy); a fork's writes go to its
    overlay's upper dir on disk, and its template's files are page cache shared by every fork."""
    placement = sandbox.placement
    pids = {placement.holder_pid, placement.init_pid, sandbox._shell.pid, sandbox._file_shell.pid}
    pids |= {int(p) for p in _children_of(placement.init_pid)}
    kib = sum(_pss_kib(pid) for pid in pids if pid > 0)
    if sandbox.spec.template_dir is None:
        kib += sum(_du_kib(f"/proc/{placement.init_pid}/root{path}") for path in (sandbox.workspace, "/tmp"))
    return round(kib / 1024, 2)


def _children_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _du_kib(path: str) -> int:
    total = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_blocks // 2
            except OSError:
                continue
    return total


async def math_snapshots(spec: SandboxSpec, samples: int) -> dict:
    times = []
    async with await create_sandbox(spec) as sandbox:
        await sandbox.python("answer = 42\nvalues = [i * i for i in range(100)]")
        for _ in range(samples):
            elapsed, template = await timed(sandbox.freeze())
            times.append(elapsed)
            await template.close()
    return {"snapshot_p50_ms": p50(times)}


async def math_group(spec: SandboxSpec, group: int, rounds: int) -> dict:
    async def fresh_sample() -> SandboxAPI:
        sandbox = await create_sandbox(spec)
        await sandbox.python(WARM_CELL)
        assert "sympy" not in (await sandbox.python(GROUP_CELL)).output
        return sandbox

    fresh, forked = [], []
    for _ in range(rounds):
        elapsed, sandboxes = await timed(asyncio.gather(*(fresh_sample() for _ in range(group))))
        fresh.append(elapsed)
        await asyncio.gather(*(s.close() for s in sandboxes))
        async with await create_sandbox(spec) as parent:
            await parent.python(WARM_CELL)
            started = time.perf_counter()
            forks = await parent.fork(group)
            await asyncio.gather(*(f.python(GROUP_CELL) for f in forks))
            forked.append(time.perf_counter() - started)
            await asyncio.gather(*(f.close() for f in forks))
    return {
        "math_group_fresh_ms": p50(fresh),
        "math_group_forked_ms": p50(forked),
        "math_group_speedup": round(percentile(fresh, 50) / percentile(forked, 50), 2),
    }


async def main(args: argparse.Namespace) -> dict:
    raise_fd_limit()
    with sandbox_root() as root:
        spec = SandboxSpec(root_dir=root)
        results = await fork_vs_fresh(spec, args.samples)
        print(f"fork {results}", flush=True)
        results |= await math_snapshots(spec, args.samples)
        results |= await swe_group(spec, args.group, args.rounds, args.swe_project)
        print(f"swe {results}", flush=True)
        results |= await math_group(spec, args.group, args.rounds)
    return results | {"group": args.group, "swe_project": args.swe_project, "targets": TARGETS}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fork")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--swe-project", default="funcy", help="whose task (its repository: funcy's is the largest, 7 MB)"
    )
    emit("fork", asyncio.run(main(parser.parse_args())))
