# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Sandbox start latency: create -> first bash result, and warm-pool acquire.

    python -m benchmarks.sandbox_start [--samples 60] [--concurrency 32]

Per backend available here: `local` with bubblewrap isolation (the default) and, as the
baseline without namespaces, `local` with isolation: none. At concurrency 1 (sequential)
and at concurrency N (N sandboxes started at once, each timed from its own request), then
the warm pool's acquire. Targets (reported, not asserted): p50 <= 30 ms, p99 <= 300 ms at
32 concurrent, pool acquire <= 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from benchmarks.common import emit, ms, percentile, raise_fd_limit, sandbox_root
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.pool import SandboxPool

TARGETS = {"start_p50_ms": 30.0, "start_p99_ms_c32": 300.0, "pool_acquire_p50_ms": 2.0}


async def start_once(spec: SandboxSpec) -> tuple[float, object]:
    started = time.perf_counter()
    sandbox = await create_sandbox(spec)
    result = await sandbox.bash("echo ready")
    elapsed = time.perf_counter() - started
    assert result.output == "ready\n", result
    return elapsed, sandbox


async def sequential(spec: SandboxSpec, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        elapsed, sandbox = await start_once(spec)
        times.append(elapsed)
        await sandbox.close()
    return times


async def concurrent(spec: SandboxSpec, n: int, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        outcomes = await asyncio.gather(*(start_once(spec) for _ in range(n)))
        times += [elapsed for elapsed, _ in outcomes]
        await asyncio.gather(*(sandbox.close() for _, sandbox in outcomes))
    return times


async def pool_acquire(spec: SandboxSpec, samples: int) -> list[float]:
    pool = SandboxPool(spec, size=samples)
    await pool.start()
    times, acquired = [], []
    for _ in range(samples):
        started = time.perf_counter()
        acquired.append(await pool.acquire())
        times.append(time.perf_counter() - started)
        await asyncio.sleep(0)  # let nothing else run long; refills start in the background
    await pool.close()
    await asyncio.gather(*(sandbox.close() for sandbox in acquired))
    return times


async def run(args: argparse.Namespace, root: str) -> dict:
    results: dict = {"samples": args.samples, "concurrency": args.concurrency}
    for label, isolation in (("", "required"), ("no_isolation_", "none")):
        spec = SandboxSpec(root_dir=root, backend={"isolation": isolation})
        await sequential(spec, 3)  # warm the page cache
        seq = await sequential(spec, args.samples)
        conc = await concurrent(spec, args.concurrency, args.rounds)
        results |= {
            f"{label}start_p50_ms": ms(percentile(seq, 50)),
            f"{label}start_p99_ms": ms(percentile(seq, 99)),
            f"{label}start_p50_ms_c{args.concurrency}": ms(percentile(conc, 50)),
            f"{label}start_p99_ms_c{args.concurrency}": ms(percentile(conc, 99)),
        }
        print(
            f"{isolation:>8}: sequential p50 {results[f'{label}start_p50_ms']} ms, "
            f"c{args.concurrency} p50/p99 {results[f'{label}start_p50_ms_c{args.concurrency}']}/"
            f"{results[f'{label}start_p99_ms_c{args.concurrency}']} ms",
            flush=True,
        )
    acquire = await pool_acquire(SandboxSpec(root_dir=root), args.pool_samples)
    results["pool_acquire_p50_ms"] = ms(percentile(acquire, 50))
    results["pool_acquire_p99_ms"] = ms(percentile(acquire, 99))
    results["targets"] = TARGETS
    results["meets_targets"] = {
        "start_p50_ms": results["start_p50_ms"] <= TARGETS["start_p50_ms"],
        "start_p99_ms_c32": results.get("start_p99_ms_c32", float("inf")) <= TARGETS["start_p99_ms_c32"],
        "pool_acquire_p50_ms": results["pool_acquire_p50_ms"] <= TARGETS["pool_acquire_p50_ms"],
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="bursts of --concurrency starts")
    parser.add_argument("--pool-samples", type=int, default=32)
    args = parser.parse_args()
    raise_fd_limit()
    with sandbox_root() as root:
        emit("sandbox_start", asyncio.run(run(args, root)))


if __name__ == "__main__":
    main()
