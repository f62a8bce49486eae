# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""How many live sandboxes one machine holds: N sandboxes with bash up, at once.

    python -m benchmarks.concurrency [--sandboxes 1000] [--parallel 32]

Starts N isolated sandboxes (bubblewrap, bash up, one command answered in each), keeps
them all alive, checks every one still answers, and reports memory per sandbox from the
machine's own accounting (the drop in MemAvailable, so kernel memory for namespaces,
page tables and tmpfs counts too; noisy if other work runs) and, as root, the summed PSS
of the sandboxes' processes; and the number of failures. Targets (reported, not
asserted): <= 5 MiB per bash-only sandbox, 0 failures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from benchmarks.common import emit, raise_fd_limit, sandbox_root
from prorl_gym.sandbox import SandboxSpec, create_sandbox

TARGETS = {"mib_per_sandbox": 5.0, "failures": 0}


def sandbox_pss_kib(uid: int) -> int | None:
    """Proportional set size of every process running as the sandbox uid (root only: as
    another user the sandboxes share the server's uid and cannot be told apart)."""
    if os.geteuid() != 0:
        return None
    total = 0
    for entry in os.scandir("/proc"):
        try:
            if not entry.name.isdigit() or entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total


def mem_available_kib() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))


async def run(args: argparse.Namespace, root: str) -> dict:
    spec = SandboxSpec(root_dir=root)
    slots = asyncio.Semaphore(args.parallel)
    sandboxes, failures = [], []

    async def start(i: int) -> None:
        async with slots:
            try:
                sandbox = await create_sandbox(spec)
                sandboxes.append(sandbox)
                result = await sandbox.bash(f"echo {i}")
                if result.output != f"{i}\n":
                    failures.append(f"sandbox {i}: {result.output!r}")
            except Exception as exc:  # noqa: BLE001 - a failure is a result here
                failures.append(f"sandbox {i}: {exc!r}"[:300])

    before = mem_available_kib()
    started = time.perf_counter()
    await asyncio.gather(*(start(i) for i in range(args.sandboxes)))
    start_s = time.perf_counter() - started
    await asyncio.sleep(2)  # let the machine settle before reading memory
    after = mem_available_kib()
    pss = await asyncio.to_thread(sandbox_pss_kib, spec.backend.host_uid)
    # every sandbox must still answer while all of them are alive
    answers = await asyncio.gather(*(sb.bash("echo alive", timeout=60) for sb in sandboxes), return_exceptions=True)
    failures += [
        f"not answering: {a!r}"[:300] for a in answers if not (hasattr(a, "output") and a.output == "alive\n")
    ]
    live = len(sandboxes)
    closing = time.perf_counter()
    await asyncio.gather(*(sb.close() for sb in sandboxes), return_exceptions=True)
    close_s = time.perf_counter() - closing
    mib = (before - after) / 1024 / max(live, 1)
    for failure in failures[:5]:
        print("FAILURE", failure, flush=True)
    print(
        f"{live} live sandboxes, {mib:.2f} MiB each, started in {start_s:.1f}s, closed in {close_s:.1f}s", flush=True
    )
    results = {
        "requested": args.sandboxes,
        "live_sandboxes": live,
        "mib_per_sandbox": round(mib, 3),
        "pss_mib_per_sandbox": round(pss / 1024 / max(live, 1), 3) if pss is not None else None,
        "failures": len(failures),
        "start_all_s": round(start_s, 2),
        "close_all_s": round(close_s, 2),
        "parallel_starts": args.parallel,
        "targets": TARGETS,
    }
    results["meets_targets"] = {"mib_per_sandbox": mib <= TARGETS["mib_per_sandbox"], "failures": not failures}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=32, help="starts in flight at once")
    args = parser.parse_args()
    raise_fd_limit()
    with sandbox_root() as root:
        emit("concurrency", asyncio.run(run(args, root)))


if __name__ == "__main__":
    main()
