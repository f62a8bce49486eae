# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Rollouts per minute and harness overhead per agent turn, through the real servers.

    python -m benchmarks.rollout_throughput [--rollouts 320] [--concurrency 64] [--baseline-rollouts 96] [--warm-pool 8]
        [--tokenizer qwen3]

--tokenizer qwen3: the scripted policy answers as vLLM serving Qwen3 would (real tokenizer and chat
template) and the model server runs token-in/token-out, so real ids go through the whole stack.

5-turn math rollouts (4 `python` tool calls, then the boxed answer) from the scripted
policy (a stand-in for a GPU model, answering instantly), every rollout in its own sandbox
with its own fresh Python (the lean REPL, forked by the zygote), driven at `/run` of the agent
under ng_run, at concurrency 64 on this machine. Overhead per turn is measured at
concurrency 1 (no contention): everything a turn costs beyond executing the tool in the
sandbox (the policy itself answers instantly), split into where it goes. CPU per rollout is
read from /proc for every process of the stack (benchmarks/cpu.py) over the concurrency run,
by kind, the scripted policy reported but not counted: its own CPU per rollout
(`policy_cpu_ms_per_rollout`) is the machine-speed yardstick, and `cpu_per_rollout_over_policy`
the figure that does not depend on the hour. Targets (reported, not asserted): >= 600
rollouts/min, <= 15 ms overhead per turn, <= 150 CPU-ms per rollout, <= 3.0x the policy's CPU,
100% of rollouts obeying NeMo RL's token contiguity rule.

Same run, for comparison: `ipython_kernel`, the same workload with IPython kernels forked by the
zygote (python_runtime: ipython, the runtime before the REPL); `baseline_fresh_kernel`, an
IPython kernel started fresh per sandbox (no zygote, ~0.95 CPU-s per kernel); `speedup` is the
ratio of rollouts per minute to the latter, `vs_ipython_kernel` to the former.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from benchmarks.common import emit, raise_fd_limit
from benchmarks.cpu import cpu_spent, harness_ms_per_rollout, ms_per_rollout_by_kind, snapshot
from benchmarks.rollouts import Bench, drive, math_rows, math_stack
from prorl_gym.demo import real_tokens
from prorl_gym.stack import run_cli

TARGETS = {
    "rollouts_per_min": 600,
    "overhead_per_turn_ms": 15.0,
    "contiguous_fraction": 1.0,
    "cpu_ms_per_rollout": 150,
    "cpu_per_rollout_over_policy": 3.0,
}
COMPARED = ("rollouts", "wall_s", "rollouts_per_min", "failures", "contiguous_fraction", "cpu_ms_per_rollout")
AGENT = "math_agent.responses_api_agents.prorl_agent"
SERVER = "math.resources_servers.math"


def per_turn_ms(records: list[dict], part) -> float:
    return round(statistics.fmean(part(r) / r["num_turns"] for r in records) * 1000, 3)


def overhead_profile(records: list[dict], policy_busy_s: float | None = None) -> dict:
    """Where a turn's time goes. Overhead: what is spent neither executing tools in the sandbox
    nor inside the policy server (its own busy time, when known: the hop to it is overhead)."""
    t = lambda r, k: r["timings"].get(k, 0.0)  # noqa: E731
    turns = sum(r["num_turns"] for r in records)
    policy_share = (policy_busy_s or 0.0) / turns
    profile = {
        "overhead_per_turn_ms": per_turn_ms(records, lambda r: t(r, "total_s") - t(r, "tool_exec_s"))
        - policy_share * 1000,
        "policy_path_per_turn_ms": per_turn_ms(records, lambda r: t(r, "policy_s")),
        "tool_route_overhead_per_turn_ms": per_turn_ms(records, lambda r: t(r, "tools_s") - t(r, "tool_exec_s")),
        "agent_loop_per_turn_ms": per_turn_ms(records, lambda r: t(r, "run_s") - t(r, "policy_s") - t(r, "tools_s")),
        "init_per_rollout_ms": round(statistics.fmean(t(r, "init_s") for r in records) * 1000, 3),
        "eval_per_rollout_ms": round(statistics.fmean(t(r, "eval_s") for r in records) * 1000, 3),
        "tool_exec_per_turn_ms": per_turn_ms(records, lambda r: t(r, "tool_exec_s")),
    }
    if policy_busy_s is not None:  # the policy path = the policy server's own time + the hops to it
        profile["policy_server_per_turn_ms"] = round(policy_share * 1000, 3)
        profile["policy_hops_per_turn_ms"] = round(profile["policy_path_per_turn_ms"] - policy_share * 1000, 3)
    profile["overhead_per_turn_ms"] = round(profile["overhead_per_turn_ms"], 3)
    return profile


def throughput(records: list[dict], wall: float) -> float:
    return round(len(records) / wall * 60, 1)


async def measure(bench: Bench, rollouts: int, concurrency: int, single_rollouts: int) -> dict:
    rows, url = math_rows(), bench.agent_url
    await drive(url, rows * 2, 8)  # warm-up: page cache, zygote, verifier workers
    busy = await bench.policy_busy_s()
    single, _ = await drive(url, (rows * 4)[:single_rollouts], 1) if single_rollouts else ([], 0.0)
    busy = await bench.policy_busy_s() - busy
    before = snapshot(bench.pids)
    records, wall = await drive(url, (rows * (rollouts // len(rows) + 1))[:rollouts], concurrency)
    cpu = cpu_spent(before, snapshot(bench.pids))
    failed = [r for r in records if r.get("failure")]
    contiguous = [r.get("token_ids_contiguous") is True for r in records]
    results = {
        "rollouts": len(records),
        "concurrency": concurrency,
        "wall_s": round(wall, 2),
        "rollouts_per_min": throughput(records, wall),
        "failures": len(failed),
        "mean_reward": statistics.fmean(r["reward"] for r in records),
        "turns_per_rollout": statistics.fmean(r["num_turns"] for r in records),
        "contiguous_fraction": sum(contiguous) / len(contiguous),
        "cpu_ms_per_rollout": harness_ms_per_rollout(cpu, len(records)),
        "cpu_ms_per_rollout_by_kind": ms_per_rollout_by_kind(cpu, len(records)),
    }
    policy_ms = results["cpu_ms_per_rollout_by_kind"].get("policy", 0.0)
    results["policy_cpu_ms_per_rollout"] = policy_ms
    results["cpu_per_rollout_over_policy"] = round(results["cpu_ms_per_rollout"] / policy_ms, 2) if policy_ms else None
    results |= overhead_profile(single, busy) if single else {}
    results["at_concurrency"] = overhead_profile(records)
    return results


def run(
    rollouts: int,
    concurrency: int,
    single_rollouts: int,
    zygote: bool,
    warm_pool: int,
    tokenizer: str | None = None,
    runtime: str = "repl",
) -> dict:
    """zygote=False: the baseline, a runtime started from scratch in each sandbox on first use."""
    workers = [f"+{AGENT}.{key}={concurrency}" for key in ("max_init_workers", "max_run_workers", "max_eval_workers")]
    server = [
        f"+{SERVER}.sandbox.backend.kernel_zygote={str(zygote).lower()}",
        f"+{SERVER}.sandbox.python_runtime={runtime}",
        f"+{SERVER}.prestart_kernel={str(zygote).lower()}",
        f"+{SERVER}.warm_pool_size={warm_pool}",
    ]
    policy_args, model = real_tokens(tokenizer)
    with math_stack(workers + server + model, ["--tool-calls", "4", *policy_args]) as bench:
        return asyncio.run(measure(bench, rollouts, concurrency, single_rollouts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=320)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--baseline-rollouts", type=int, default=96, help="0: skip the fresh-kernel baseline")
    parser.add_argument("--ipython-rollouts", type=int, default=192, help="0: skip the forked IPython kernel run")
    parser.add_argument("--python-runtime", default="repl", choices=["repl", "ipython"])
    parser.add_argument(
        "--warm-pool", type=int, default=8, help="warm_pool_size: sandboxes (kernels running) started ahead"
    )
    parser.add_argument("--tokenizer", default=None, help="qwen3 (or a directory): real token ids, tito mode")
    args = parser.parse_args()
    raise_fd_limit()
    results = run(args.rollouts, args.concurrency, 20, True, args.warm_pool, args.tokenizer, args.python_runtime)
    results["python_runtime"] = args.python_runtime
    results["tokenizer"] = args.tokenizer or "bytes (scripted policy)"
    results["warm_pool_size"] = args.warm_pool
    compared = {}
    if args.ipython_rollouts and args.python_runtime != "ipython":  # the runtime before the REPL
        compared["ipython_kernel"] = run(
            args.ipython_rollouts, args.concurrency, 0, True, args.warm_pool, args.tokenizer, "ipython"
        )
    if args.baseline_rollouts:  # a kernel started per sandbox on first use, no pool: the design before the zygote
        compared["baseline_fresh_kernel"] = run(
            args.baseline_rollouts, args.concurrency, 0, False, 0, args.tokenizer, "ipython"
        )
    for name, other in compared.items():
        keys = (*COMPARED, "policy_cpu_ms_per_rollout", "cpu_per_rollout_over_policy", "cpu_ms_per_rollout_by_kind")
        results[name] = {k: other[k] for k in keys}
        results["contiguous_fraction"] = min(results["contiguous_fraction"], other["contiguous_fraction"])
    if "baseline_fresh_kernel" in compared:
        results["speedup"] = round(
            results["rollouts_per_min"] / compared["baseline_fresh_kernel"]["rollouts_per_min"], 2
        )
    if "ipython_kernel" in compared:
        ipython = compared["ipython_kernel"]
        results["vs_ipython_kernel"] = round(results["rollouts_per_min"] / ipython["rollouts_per_min"], 2)
    results["targets"] = TARGETS
    results["meets_targets"] = {
        "rollouts_per_min": results["rollouts_per_min"] >= TARGETS["rollouts_per_min"],
        "overhead_per_turn_ms": results["overhead_per_turn_ms"] <= TARGETS["overhead_per_turn_ms"],
        "contiguous_fraction": results["contiguous_fraction"] >= TARGETS["contiguous_fraction"],
        "cpu_ms_per_rollout": results["cpu_ms_per_rollout"] <= TARGETS["cpu_ms_per_rollout"],
        "cpu_per_rollout_over_policy": (results["cpu_per_rollout_over_policy"] or 99)
        <= TARGETS["cpu_per_rollout_over_policy"],
    }
    emit("rollout_throughput", results)


if __name__ == "__main__":
    run_cli(main)
