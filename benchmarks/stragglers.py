# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Stragglers through the async training example: waiting for them, backfilling them, evicting them,
side by side in one run on one stack.

    python -m benchmarks.stragglers [--steps 6] [--rounds 2] [--slow-p 0.05] [--slow-factor 20] [--k 3]
        [--latency-ms 1000] [--train-s 1.0] [--prompts 4] [--group-size 4]

The workload: math rollouts through the example trainer (examples/training_loop.py, async: step n+1
generates while step n trains for --train-s), --prompts x --group-size samples a step; the scripted
policy (the stand-in for a GPU model) answers each turn in --latency-ms, and one conversation in
twenty (--slow-p, drawn per sample) --slow-factor times slower: a heavy tail, as SWE trials are.
Each straggler policy (docs/job_api.md, "Stragglers") runs --steps steps in turn, k = --k, and meets
the same stragglers (the slow draw of a prompt's n-th conversation is seeded per round); a second round
runs them in the reverse order, with other draws, so the machine's drift falls on each alike.

Per policy: training steps per hour; the policy's idle fraction, 1 - the mean of its generations in
flight / the most it had in flight in the run (the scripted policy's own count: the share of a batching
GPU engine left unused), and the fraction of the time it generated nothing at all; the agent's export of each batch summed (GPU-seconds
lost to stragglers, the time batches went on once they had one, samples replaced, evicted, waited on,
time saved); generations aborted at the policy (its own count); group sizes (usable samples per
group, what a trainer's advantage estimate is over). `wait` is the baseline, measured in the same
run. Target: backfill and evict >= 1.5x the steps per hour of waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
POLICIES = ("wait", "backfill", "evict")
TARGETS = {"backfill_vs_wait_steps": 1.5, "evict_vs_wait_steps": 1.5}
SUMMED = ("policy_idle_s", "wait_s", "replaced", "evicted", "waited", "time_saved_s")


def workload(args: argparse.Namespace, seed: int = 0, stream: str = "") -> list[dict]:
    """Every prompt's conversations slow with probability slow_p, drawn from (seed, prompt, n-th conversation of
    the prompt in this stream): the policies of one round, each its own stream, meet the same stragglers."""
    slow = json.dumps({"p": args.slow_p, "factor": args.slow_factor, "seed": seed, "stream": stream or str(seed)})
    rows = read_jsonl(MATH.example)
    for row in rows:
        row["responses_create_params"]["metadata"] = {
            "scripted_mode": "gold",
            "scripted_latency_ms": str(args.latency_ms),
            "scripted_slow": slow,
        }
    return rows


async def policy_stats(stack: Stack) -> dict:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{stack.policy_port}/stats") as response,
    ):
        return await response.json()


async def one_phase(
    stack: Stack, client: ProRLClient, policy: str, run_id: str, seed: int, args: argparse.Namespace
) -> dict:
    before = await policy_stats(stack)
    started = time.perf_counter()
    reports = await training_loop(
        client,
        workload(args, seed, run_id),
        steps=args.steps,
        prompts_per_step=args.prompts,
        group_size=args.group_size,
        run_id=run_id,
        train_s=args.train_s,
        stragglers={"policy": policy, "k": args.k},
    )
    wall = time.perf_counter() - started
    after = await policy_stats(stack)
    progress = [await client.progress(report.batch_id) for report in reports]
    exported = {key: sum(getattr(p.stragglers, key) for p in progress) for key in SUMMED}
    return {
        "steps": len(reports),
        "wall_s": wall,
        "idle_s": after["idle_s"] - before["idle_s"],
        "generating_s": after["generating_s"] - before["generating_s"],
        "up_s": after["uptime_s"] - before["uptime_s"],
        "aborted_at_policy": after["aborted"] - before["aborted"],
        "group_sizes": [size for p in progress for size in p.group_sizes],
        "usable": sum(r.usable for r in reports),
        "failures": dict(sum((Counter(r.failures) for r in reports), Counter())),
        **exported,
    }


def summary(phases: list[dict], group_size: int, capacity: int) -> dict:
    """capacity: the most generations the policy had in flight at once in the whole run (what it can batch)."""
    steps, wall = sum(p["steps"] for p in phases), sum(p["wall_s"] for p in phases)
    sizes = [size for p in phases for size in p["group_sizes"]]
    up = sum(p["up_s"] for p in phases)
    out = {
        "steps": steps,
        "wall_s": round(wall, 1),
        "steps_per_hour": round(steps / wall * 3600, 1),
        "policy_idle_fraction": round(1 - sum(p["generating_s"] for p in phases) / (capacity * up), 3),
        "policy_no_generation_fraction": round(sum(p["idle_s"] for p in phases) / up, 3),
        "gpu_seconds_lost": round(sum(p["policy_idle_s"] for p in phases), 2),
        "gpu_seconds_lost_per_step": round(sum(p["policy_idle_s"] for p in phases) / steps, 2),
        "aborted_at_policy": sum(p["aborted_at_policy"] for p in phases),
        "usable_rollouts": sum(p["usable"] for p in phases),
        "failures": dict(sum((Counter(p["failures"]) for p in phases), Counter())),
        "group_sizes": {
            "mean": round(statistics.fmean(sizes), 3) if sizes else None,
            "min": min(sizes, default=None),
            "partial_groups": sum(size < group_size for size in sizes),
            "groups": len(sizes),
            "histogram": dict(sorted(Counter(sizes).items())),
        },
    }
    for key in ("wait_s", "time_saved_s"):
        out[f"straggler_{key}"] = round(sum(p[key] for p in phases), 2)
    for key in ("replaced", "evicted", "waited"):
        out[key] = sum(p[key] for p in phases)
    return out


async def measure(stack: Stack, args: argparse.Namespace) -> dict:
    url = await agent_url(f"http://127.0.0.1:{stack.head_port}", "math_agent")
    phases: dict[str, list[dict]] = {policy: [] for policy in POLICIES}
    async with ProRLClient(url) as client:
        warm = f"warm-up-{int(time.time())}"
        await training_loop(client, workload(args, -1), steps=1, prompts_per_step=4, group_size=1, run_id=warm)
        for round_ in range(args.rounds):
            seed = int(time.time()) * 10 + round_  # one per round: its three policies meet the same stragglers
            for policy in POLICIES if round_ % 2 == 0 else reversed(POLICIES):
                run_id = f"stragglers-{policy}-{round_}-{int(time.time())}"
                phases[policy].append(await one_phase(stack, client, policy, run_id, seed, args))
        capacity = (await policy_stats(stack))["peak_generating"]
    results = {policy: summary(phases[policy], args.group_size, capacity) for policy in POLICIES}
    base = results["wait"]["steps_per_hour"]
    return {
        "workload": {
            "steps_per_policy": args.steps * args.rounds,
            "prompts_per_step": args.prompts,
            "group_size": args.group_size,
            "turn_ms": args.latency_ms,
            "slow_p": args.slow_p,
            "slow_factor": args.slow_factor,
            "k": args.k,
            "train_s": args.train_s,
            "policy_capacity": capacity,
        },
        "baseline": "wait",
        **results,
        "backfill_vs_wait_steps": round(results["backfill"]["steps_per_hour"] / base, 2),
        "evict_vs_wait_steps": round(results["evict"]["steps_per_hour"] / base, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="steps per policy per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    parser.add_argument("--slow-p", type=float, default=0.05)
    parser.add_argument("--slow-factor", type=float, default=20.0)
    parser.add_argument("--k", type=float, default=3.0)
    parser.add_argument("--train-s", type=float, default=1.0)
    args = parser.parse_args()
    raise_fd_limit()
    with sandbox_root() as root:
        overrides = [
            f"+{MATH.server_key}.sandbox.root_dir={root}",
            f"{AGENT}.limits.policy_call_timeout_s={args.latency_ms * args.slow_factor / 1000 + 30}",
        ]
        with Stack(MATH.config_paths(), overrides=overrides, policy_data=[str(MATH.example)]) as stack:
            results = asyncio.run(measure(stack, args))
    results["targets"] = TARGETS
    results["meets_targets"] = {key: results[key] >= target for key, target in TARGETS.items()}
    emit("stragglers", results)


if __name__ == "__main__":
    run_cli(main)
