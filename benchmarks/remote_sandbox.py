# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Sandboxes on Ray sandbox hosts against local ones, in one run, on a real 3-node Ray cluster on
this machine (three raylets; prorl_gym/sandbox/backends/ray/local_cluster.py):

  latency   a bash `echo` through a remote sandbox (an actor call to its host) vs a local one
  start     sandbox start (bubblewrap + bash) on a host vs in this process
  spread    --spread sandboxes started at once: how evenly placement fills the hosts (max/min)
  failover  a node SIGKILLed under live sandboxes: what their calls end with (SandboxLostError, a
            typed failure; anything else counts in lost_as_reward) and after how long; seconds until
            each has a replacement started on a survivor (failover_s), until the host set stops
            placing on the lost host; where the next 10 starts go (survivors only)

    python -m benchmarks.remote_sandbox [--calls 300] [--starts 40] [--spread 300]

Prints readable lines, then one JSON object as the last line (results/bench/remote_sandbox.json).
The local sandboxes are the baseline; targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import time

from benchmarks.common import emit, ms, percentile, raise_fd_limit, sandbox_root
from prorl_gym.sandbox import SandboxLostError, SandboxSpec, create_sandbox, default_backends, get_backend
from prorl_gym.sandbox.backends.ray.local_cluster import LocalRayCluster

TARGETS = {"added_bash_echo_p50_ms": 1.0, "spread_max_over_min": 1.2, "failover_s": 5.0, "lost_as_reward": 0}


def p50(samples: list[float]) -> float:
    return round(percentile(samples, 50), 3)


def p95(samples: list[float]) -> float:
    return round(percentile(samples, 95), 3)


async def echo_latency(spec: SandboxSpec, calls: int, warmup: int = 30) -> list[float]:
    async with await create_sandbox(spec) as sb:
        for _ in range(warmup):
            await sb.bash("echo hi")
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            assert (await sb.bash("echo hi")).output == "hi\n"
            samples.append(ms(time.perf_counter() - started))
        return samples


async def start_times(spec: SandboxSpec, starts: int) -> list[float]:
    samples = []
    for _ in range(starts):
        started = time.perf_counter()
        sb = await create_sandbox(spec)
        samples.append(ms(time.perf_counter() - started))
        await sb.close()
    return samples


async def spread(spec: SandboxSpec, count: int, concurrency: int = 32) -> dict[str, int]:
    gate = asyncio.Semaphore(concurrency)

    async def one():
        async with gate:
            return await create_sandbox(spec)

    sandboxes = await asyncio.gather(*(one() for _ in range(count)))
    try:
        return dict(collections.Counter(sb.host for sb in sandboxes))
    finally:
        await asyncio.gather(*(sb.close() for sb in sandboxes))


async def failover(cluster: LocalRayCluster, spec: SandboxSpec) -> dict:
    """Sandboxes on every host; one node is SIGKILLed. How its sandboxes' calls end, how long
    until the host set stops placing there, and where the next starts go."""
    backend, sandboxes = get_backend("ray"), await asyncio.gather(*(create_sandbox(spec) for _ in range(6)))
    victim = cluster.nodes[-1]
    on_victim = victim.node_id[:8]
    lost = [sb for sb in sandboxes if sb.host.endswith(on_victim)]
    killed = time.monotonic()
    await asyncio.to_thread(cluster.kill_node, victim)
    outcomes: collections.Counter[str] = collections.Counter()
    detected: list[float] = []
    replaced: list[float] = []
    replacements = []

    async def probe(sb) -> None:
        """Call until the call fails (while the dying host's worker lingers, calls still run: right),
        then start its replacement, as a retried rollout would."""
        while time.monotonic() - killed < 60:
            try:
                if (await sb.bash("echo still here")).output != "still here\n":
                    outcomes["wrong answer"] += 1
                await asyncio.sleep(0.02)
                continue
            except SandboxLostError:
                outcomes["SandboxLostError"] += 1
            except Exception as exc:  # noqa: BLE001 - anything but SandboxLostError is what this counts
                outcomes[type(exc).__name__] += 1
            break
        else:
            outcomes["never failed"] += 1
        detected.append(time.monotonic() - killed)
        replacement = await create_sandbox(spec)
        replacements.append(replacement)
        if not replacement.host.endswith(on_victim):
            replaced.append(time.monotonic() - killed)

    await asyncio.gather(*(probe(sb) for sb in lost))
    while not any(h["node"].endswith(on_victim) and not h["healthy"] for h in await backend.status()):
        await asyncio.sleep(0.05)
    unplaced_s = time.monotonic() - killed
    after = [await create_sandbox(spec) for _ in range(10)]
    await asyncio.gather(*(sb.close() for sb in sandboxes + replacements + after), return_exceptions=True)
    return {
        "lost_sandboxes": len(lost),
        "lost_call_error_s": round(max(detected), 2) if detected else None,
        "failover_s": round(max(replaced), 2) if len(replaced) == len(lost) and lost else None,
        "lost_host_unplaced_s": round(unplaced_s, 2),
        "lost_outcomes": dict(outcomes),
        "lost_as_reward": sum(n for kind, n in outcomes.items() if kind != "SandboxLostError"),
        "starts_after_on_lost_node": sum(sb.host.endswith(on_victim) for sb in after),
    }


async def main_async(args: argparse.Namespace, cluster: LocalRayCluster, root: str) -> dict:
    local = SandboxSpec(root_dir=root)
    remote = SandboxSpec(
        root_dir=root,
        backend={"kind": "ray", "address": cluster.address, "slots_per_host": 256, "health_interval_s": 0.5},
    )
    results: dict = {"hosts": args.nodes}
    try:
        for name, spec in (("local", local), ("remote", remote)):
            samples = await echo_latency(spec, args.calls)
            results |= {f"{name}_bash_echo_p50_ms": p50(samples), f"{name}_bash_echo_p95_ms": p95(samples)}
            starts = await start_times(spec, args.starts)
            results |= {f"{name}_start_p50_ms": p50(starts), f"{name}_start_p95_ms": p95(starts)}
            print(f"{name:<7} bash echo p50 {p50(samples):7.3f} ms  start p50 {p50(starts):7.1f} ms", flush=True)
        results["added_bash_echo_p50_ms"] = round(
            results["remote_bash_echo_p50_ms"] - results["local_bash_echo_p50_ms"], 3
        )
        per_host = await spread(remote, args.spread)
        results["spread_per_host"] = sorted(per_host.values())
        results["spread_max_over_min"] = round(max(per_host.values()) / max(1, min(per_host.values())), 3)
        print(f"spread  {args.spread} sandboxes over hosts: {sorted(per_host.values())}", flush=True)
        results |= await failover(cluster, remote)
        print(
            f"failover lost sandboxes' calls fail after {results['lost_call_error_s']} s {results['lost_outcomes']}, "
            f"replaced on survivors after {results['failover_s']} s, "
            f"no placements on the lost host after {results['lost_host_unplaced_s']} s",
            flush=True,
        )
    finally:
        await default_backends().close()  # the hosts this run started
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--starts", type=int, default=40)
    parser.add_argument("--spread", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    raise_fd_limit()
    with sandbox_root() as root, LocalRayCluster(sandbox_nodes=args.nodes) as cluster:
        results = asyncio.run(main_async(args, cluster, root))
    emit("remote_sandbox", results | {"targets": TARGETS})


if __name__ == "__main__":
    main()
