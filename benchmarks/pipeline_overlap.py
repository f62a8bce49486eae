# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Staged pipeline vs coupled workers, with a slow verifier and a fixed number of RUN workers.

    python -m benchmarks.pipeline_overlap [--rollouts 64] [--run-workers 4] [--eval-delay-s 2]

The rollout_throughput workload (5-turn math rollouts, scripted policy answering at once,
a sandbox and fresh kernel per rollout) with every EVAL made `--eval-delay-s` slower (the
math server run as benchmarks/slow_verify_math.py: a slow verifier), all rollouts submitted at once to the
agent's /run. Staged: `--run-workers` RUN workers, INIT and EVAL pools of their own, so
the next rollouts run while earlier ones are being verified. Coupled (baseline, same run):
`--run-workers` workers that each do INIT+RUN+EVAL of one rollout in turn. Reports the
throughput ratio (target >= 1.5x) and the contiguity fraction over both runs.
"""

from __future__ import annotations

import argparse
import asyncio

from benchmarks.common import emit, raise_fd_limit
from benchmarks.rollouts import drive, math_rows, math_stack
from prorl_gym.stack import run_cli

AGENT = "math_agent.responses_api_agents.prorl_agent"
TARGET = 1.5


async def measure(url: str, rollouts: int) -> dict:
    rows = math_rows()
    await drive(url, rows, len(rows))  # warm-up: page cache, zygote, verifier workers
    records, wall = await drive(url, (rows * (rollouts // len(rows) + 1))[:rollouts], rollouts)
    return {
        "rollouts": len(records),
        "wall_s": round(wall, 2),
        "rollouts_per_min": round(len(records) / wall * 60, 1),
        "failures": sum(bool(r.get("failure")) for r in records),
        "contiguous": sum(r.get("token_ids_contiguous") is True for r in records),
        "mean_eval_s": round(sum(r["timings"].get("eval_s", 0.0) for r in records) / len(records), 3),
    }


def run(pipeline: str, args: argparse.Namespace) -> dict:
    overrides = [
        "+math.resources_servers.math.entrypoint=../../benchmarks/slow_verify_math.py",
        f"+math.resources_servers.math.eval_delay_s={args.eval_delay_s}",
        f"+{AGENT}.pipeline={pipeline}",
        f"+{AGENT}.max_run_workers={args.run_workers}",
        f"+{AGENT}.max_init_workers={args.rollouts}",  # staged: INIT and EVAL never the bottleneck
        f"+{AGENT}.max_eval_workers={args.rollouts}",
    ]
    with math_stack(overrides, ["--tool-calls", "4"]) as bench:
        return asyncio.run(measure(bench.agent_url, args.rollouts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=64)
    parser.add_argument("--run-workers", type=int, default=4)
    parser.add_argument("--eval-delay-s", type=float, default=2.0)
    args = parser.parse_args()
    raise_fd_limit()
    staged, coupled = run("staged", args), run("coupled", args)
    total = staged["rollouts"] + coupled["rollouts"]
    results = {
        "run_workers": args.run_workers,
        "eval_delay_s": args.eval_delay_s,
        "staged": staged,
        "coupled": coupled,
        "staged_vs_coupled": round(staged["rollouts_per_min"] / coupled["rollouts_per_min"], 2),
        "contiguous_fraction": (staged["contiguous"] + coupled["contiguous"]) / total,
        "target": TARGET,
    }
    results["meets_target"] = results["staged_vs_coupled"] >= TARGET
    emit("pipeline_overlap", results)


if __name__ == "__main__":
    run_cli(main)
