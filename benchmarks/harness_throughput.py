# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Rollouts per minute of existing agent harnesses on SWE against prorl-gym's own loop, same tasks, one run.

    python -m benchmarks.harness_throughput [--repeats 4] [--concurrency 8]

One ng_run stack: the SWE resources server, the model server in token-in/token-out mode (Qwen3's real
tokenizer and template), the scripted policy (the stand-in for a GPU model: it plays each task's gold
actions in whatever harness asks, instantly) and four agents: the built-in loop (`swe_agent`),
mini-swe-agent in the agent's process (`swe_mini_swe_agent`), mini-swe-agent's command line inside the
sandbox (`swe_mini_swe_agent_sandbox`) and Claude Code inside the sandbox (`swe_claude_code`). Each
collects the example's tasks `--repeats` times with ng_collect_rollouts at `--concurrency`, in turn,
after one warm-up pass of the built-in loop (repositories and test environments prepared). Reported per
agent: rollouts/min, mean reward (gold: 1.0 expected), policy calls per rollout, CPU-ms per rollout of
every process but the scripted policy, and the scripted policy's own CPU-ms per rollout (a yardstick for
the machine's speed, and for how much each harness sends: Claude Code's prompts are ~60x mini's);
`vs_builtin` is each agent's rollouts/min over the built-in loop's. Reported, not a target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks.common import emit, raise_fd_limit, sandbox_root
from benchmarks.cpu import cpu_spent, harness_ms_per_rollout, snapshot
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import Stack, collected_records, run_cli
from prorl_gym.testing import HARNESS_AGENTS, harness_stack

SWE = environment("swe")
BUILTIN = "swe_agent"  # the SWE environment's own agent: prorl-gym's loop


def collect(stack: Stack, agent: str, rows: Path, repeats: int, concurrency: int, out: Path) -> dict:
    output = out / f"{agent}.jsonl"
    before = snapshot(stack.pids)
    started = time.perf_counter()
    stack.collect(agent, rows, output, num_repeats=repeats, extra=[f"+num_samples_in_parallel={concurrency}"])
    wall = time.perf_counter() - started
    cpu = cpu_spent(before, snapshot(stack.pids))
    records = collected_records(output)
    return {
        "rollouts": len(records),
        "wall_s": round(wall, 2),
        "rollouts_per_min": round(len(records) / wall * 60, 1),
        "failures": sum(bool(r.get("failure")) for r in records),
        "mean_reward": round(statistics.fmean(r.get("reward") or 0.0 for r in records), 3),
        "policy_calls_per_rollout": round(statistics.fmean(r.get("num_turns") or 0 for r in records), 2),
        "contiguous_fraction": round(statistics.fmean(r.get("token_ids_contiguous") is True for r in records), 3),
        "cpu_ms_per_rollout": harness_ms_per_rollout(cpu, len(records)),
        "policy_cpu_ms_per_rollout": round(cpu.get("policy", 0.0) * 1000 / len(records), 1),
    }


def run(repeats: int, concurrency: int, out: Path) -> dict:
    out = out.resolve()
    (out / "warm-up").mkdir(parents=True, exist_ok=True)
    rows = out / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in read_jsonl(SWE.example)))
    workers = [
        f"+{agent}.responses_api_agents.prorl_agent.{key}={concurrency}"
        for agent in [BUILTIN, *HARNESS_AGENTS]
        for key in ("max_init_workers", "max_run_workers", "max_eval_workers")
    ]
    with sandbox_root() as root, harness_stack(root, out / "logs", workers) as stack:
        collect(stack, BUILTIN, rows, 1, concurrency, out / "warm-up")
        results = {
            agent: collect(stack, agent, rows, repeats, concurrency, out) for agent in [BUILTIN, *HARNESS_AGENTS]
        }
    base = results[BUILTIN]["rollouts_per_min"]
    for agent in HARNESS_AGENTS:
        results[agent]["vs_builtin"] = round(results[agent]["rollouts_per_min"] / base, 2)
    return {"repeats": repeats, "concurrency": concurrency, "tasks": len(read_jsonl(SWE.example)), "agents": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("results/harness_throughput"))
    args = parser.parse_args()
    raise_fd_limit()
    emit("harness_throughput", run(args.repeats, args.concurrency, args.out))


if __name__ == "__main__":
    run_cli(main)
