# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What token-in/token-out costs per turn, against chat mode, in one run.

    python -m benchmarks.token_modes [--rollouts 192] [--concurrency 64]

The same workload twice under ng_run: 5-turn math rollouts (4 `python` calls, then the answer) from
the scripted policy answering as vLLM serving Qwen3 would (its real tokenizer and chat template),
driven at `/run` at concurrency 64. First with the model server in chat mode (the endpoint renders
and tokenizes every turn; with a plain vLLM the ids drift), then in tito mode (the model server
extends the previous ids with the new messages' bridge, rendered and tokenized here with the local
Qwen3 tokenizer, and parses the raw generation itself). The cost of the mode is the model server's
CPU per turn, tito minus chat (`tito_overhead_per_turn_ms`; target <= 1 ms); CPU per rollout of the
whole stack but the policy is reported for both (the policy's own share moves: in chat mode it renders
every turn's whole conversation, in tito only reads its ids), with the policy's own beside it, and the
fraction of tito rollouts whose ids are contiguous (target 1.0; chat's is reported: it drifts).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from benchmarks.common import emit, raise_fd_limit
from benchmarks.cpu import cpu_spent, harness_ms_per_rollout, ms_per_rollout_by_kind, snapshot
from benchmarks.rollouts import Bench, drive, math_rows, math_stack
from prorl_gym.stack import run_cli

AGENT = "math_agent.responses_api_agents.prorl_agent"
MODEL = "policy_model.responses_api_models.balanced_vllm_model"
TARGETS = {"tito_overhead_per_turn_ms": 1.0, "tito_contiguous_fraction": 1.0}


async def measure(bench: Bench, rollouts: int, concurrency: int) -> dict:
    rows = math_rows()
    await drive(bench.agent_url, rows * 2, 8)  # warm-up
    before = snapshot(bench.pids)
    records, wall = await drive(bench.agent_url, (rows * (rollouts // len(rows) + 1))[:rollouts], concurrency)
    cpu = cpu_spent(before, snapshot(bench.pids))
    turns = sum(r["num_turns"] for r in records)
    return {
        "rollouts": len(records),
        "failures": sum(1 for r in records if r.get("failure")),
        "rollouts_per_min": round(len(records) / wall * 60, 1),
        "turns_per_rollout": statistics.fmean(r["num_turns"] for r in records),
        "contiguous_fraction": sum(r.get("token_ids_contiguous") is True for r in records) / len(records),
        "cpu_ms_per_rollout": harness_ms_per_rollout(cpu, len(records)),
        "policy_cpu_ms_per_rollout": round(cpu.get("policy", 0.0) * 1000 / len(records), 1),
        "model_server_cpu_ms_per_turn": round(cpu.get("model_server", 0.0) * 1000 / turns, 3),
        "policy_path_per_turn_ms": round(
            statistics.fmean(r["timings"]["policy_s"] / r["num_turns"] for r in records) * 1000, 3
        ),
        "cpu_ms_per_rollout_by_kind": ms_per_rollout_by_kind(cpu, len(records)),
    }


def run(mode: str, rollouts: int, concurrency: int) -> dict:
    workers = [f"+{AGENT}.{key}={concurrency}" for key in ("max_init_workers", "max_run_workers", "max_eval_workers")]
    model = [f"+{MODEL}.token_mode={mode}", f"+{MODEL}.tokenizer=qwen3"]
    with math_stack(workers + model, ["--tool-calls", "4", "--tokenizer", "qwen3"]) as bench:
        return asyncio.run(measure(bench, rollouts, concurrency))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=192)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    raise_fd_limit()
    chat, tito = (run(mode, args.rollouts, args.concurrency) for mode in ("chat", "tito"))
    results = {
        "concurrency": args.concurrency,
        "tito_overhead_per_turn_ms": round(
            tito["model_server_cpu_ms_per_turn"] - chat["model_server_cpu_ms_per_turn"], 3
        ),
        "chat_cpu_ms_per_rollout": chat["cpu_ms_per_rollout"],
        "tito_cpu_ms_per_rollout": tito["cpu_ms_per_rollout"],
        "chat_policy_cpu_ms_per_rollout": chat["policy_cpu_ms_per_rollout"],
        "tito_policy_cpu_ms_per_rollout": tito["policy_cpu_ms_per_rollout"],
        "tito_contiguous_fraction": tito["contiguous_fraction"],
        "chat_contiguous_fraction": chat["contiguous_fraction"],
        "chat": chat,
        "tito": tito,
        "targets": TARGETS,
    }
    results["meets_targets"] = {
        "tito_overhead_per_turn_ms": results["tito_overhead_per_turn_ms"] <= TARGETS["tito_overhead_per_turn_ms"],
        "tito_contiguous_fraction": results["tito_contiguous_fraction"] >= TARGETS["tito_contiguous_fraction"],
    }
    emit("token_modes", results)


if __name__ == "__main__":
    run_cli(main)
