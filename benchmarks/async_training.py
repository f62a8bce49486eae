# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A trainer over the job API in sync mode (generate, then train) against async mode (the next step
generates while this one trains; generation paused around each weight update; staleness <= 1), on
the same simulated workload, one stack, one run.

    python -m benchmarks.async_training [--steps 8] [--train-s 6] [--deadline-s 12]

The workload (examples/training_loop.py): math rollouts, 4 prompts x 4 samples a step; the scripted
policy (the stand-in for a GPU model) answers each turn in 300 ms, one prompt of each step's four in
3 s (a long tail: its samples are the stragglers); a training step takes `--train-s`; every step's
batch has a deadline (`--deadline-s`), so a straggler is cancelled rather than holding the step.
Reported per mode: training steps per hour, the fraction of the run's time the policy generated
nothing (its own count: a GPU sitting idle), usable rollouts per step, stale rollouts, and how far
past its deadline a step's stream ended (`max_step_delay_s`, 0: never). Target: async >= 1.5x the
steps per hour of sync (`async_vs_sync_steps`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections import Counter

import aiohttp

from benchmarks.common import emit, raise_fd_limit, sandbox_root
from examples.training_loop import training_loop
from prorl_gym.client import ProRLClient, agent_url
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import Stack, run_cli

MATH = environment("math")
AGENT = "+math_agent.responses_api_agents.prorl_agent"
TARGETS = {"async_vs_sync_steps": 1.5}
TURN_MS, STRAGGLER_MS = 300, 3000


def workload() -> list[dict]:
    """Four prompts; the last one's turns are slow (the long tail)."""
    rows = read_jsonl(MATH.example)[:4]
    for i, row in enumerate(rows):
        latency = STRAGGLER_MS if i == 3 else TURN_MS
        row["responses_create_params"]["metadata"] = {"scripted_mode": "gold", "scripted_latency_ms": str(latency)}
    return rows


async def policy_idle(stack: Stack) -> tuple[float, float]:
    """(seconds the policy generated nothing, seconds it has been up), its own count."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{stack.policy_port}/stats") as response,
    ):
        stats = await response.json()
    return stats["idle_s"], stats["uptime_s"]


async def one_mode(stack: Stack, client: ProRLClient, mode: str, args: argparse.Namespace) -> dict:
    idle_before, up_before = await policy_idle(stack)
    started = time.perf_counter()
    reports = await training_loop(
        client,
        workload(),
        steps=args.steps,
        prompts_per_step=4,
        group_size=4,
        run_id=f"bench-{mode}-{os.getpid()}",
        mode=mode,
        train_s=args.train_s,
        weight_updates=True,
        max_staleness=1 if mode == "async" else None,
        deadline_s=args.deadline_s,
    )
    wall = time.perf_counter() - started
    idle_after, up_after = await policy_idle(stack)
    return {
        "steps": len(reports),
        "wall_s": round(wall, 2),
        "steps_per_hour": round(len(reports) / wall * 3600, 1),
        "policy_idle_fraction": round((idle_after - idle_before) / (up_after - up_before), 3),
        "usable_per_step": statistics.fmean(r.usable for r in reports),
        "stale": sum(r.stale for r in reports),
        "versions_per_step": [r.versions for r in reports],
        # how long after its deadline (or after the trainer began reading, if later) a step's stream ended
        "max_step_delay_s": round(max(max(0.0, r.seconds - max(args.deadline_s, r.read_at)) for r in reports), 2),
        "failures": dict(sum((Counter(r.failures) for r in reports), Counter())),
    }


async def measure(stack: Stack, args: argparse.Namespace) -> dict:
    url = await agent_url(f"http://127.0.0.1:{stack.head_port}", "math_agent")
    async with ProRLClient(url) as client:
        await training_loop(client, workload(), steps=1, prompts_per_step=4, group_size=1, run_id="warm-up")
        sync = await one_mode(stack, client, "sync", args)
        async_ = await one_mode(stack, client, "async", args)
    return {
        "train_s": args.train_s,
        "deadline_s": args.deadline_s,
        "turn_ms": TURN_MS,
        "straggler_turn_ms": STRAGGLER_MS,
        "sync": sync,
        "async": async_,
        "async_vs_sync_steps": round(async_["steps_per_hour"] / sync["steps_per_hour"], 2),
        "policy_idle_fraction_sync": sync["policy_idle_fraction"],
        "policy_idle_fraction_async": async_["policy_idle_fraction"],
        "max_step_delay_s": max(sync["max_step_delay_s"], async_["max_step_delay_s"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--train-s", type=float, default=6.0)
    parser.add_argument("--deadline-s", type=float, default=12.0)
    args = parser.parse_args()
    raise_fd_limit()
    with sandbox_root() as root:
        overrides = [
            f"+{MATH.server_key}.sandbox.root_dir={root}",
            f"{AGENT}.max_run_workers=16",
            f"{AGENT}.limits.policy_call_timeout_s=30",
        ]
        with Stack(MATH.config_paths(), overrides=overrides, policy_data=[str(MATH.example)]) as stack:
            results = asyncio.run(measure(stack, args))
    results["targets"] = TARGETS
    results["meets_targets"] = {
        "async_vs_sync_steps": results["async_vs_sync_steps"] >= TARGETS["async_vs_sync_steps"]
    }
    emit("async_training", results)


if __name__ == "__main__":
    run_cli(main)
