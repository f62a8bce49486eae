# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real model on the CPU driving rollouts of every environment, beside the scripted policy on the same rows.

    python -m benchmarks.real_model [--math-rows 4] [--repeats 2] [--other-rows 1]

Two stacks in turn, each one ng_run with every environment, the same rows and the same per-rollout caps
(prorl_gym.stack.CPU_ROLLOUT_LIMITS): first the scripted policy (gold: the machine-speed yardstick, its
own CPU per rollout and the stack's), then Qwen2.5-Coder-0.5B-Instruct on llama.cpp (token-in/token-out).
Reported for the real model: rollouts, the fraction with contiguous token ids, the fraction of its tool
calls that parsed (an offered tool's name, arguments a JSON object) and how each was read (tagged,
constrained, lenient_*), infrastructure failures, mean reward per environment, stop reasons, generated
tokens per second of policy calls (prompt processing included), and CPU per rollout: the model's process and the rest of the stack, beside the scripted policy's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import emit, raise_fd_limit, sandbox_root
from benchmarks.cpu import cpu_spent, harness_ms_per_rollout, snapshot
from prorl_gym.environments import Environment, all_config_paths, discover
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import Stack, collected_records, cpu_rollout_limits

MODEL = "qwen2.5-coder-0.5b"


def rows_file(env: Environment, n: int, out: Path) -> Path:
    path = out / f"{env.name}-rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in read_jsonl(env.example)[:n]))
    return path


def collect(stack: Stack, envs: list[Environment], rows: dict[str, tuple[Path, int]], out: Path) -> dict:
    """Every environment's rows through ng_collect_rollouts: the records, wall time and CPU by kind."""
    before, started, records = snapshot(stack.pids), time.perf_counter(), {}
    for env in envs:
        path, repeats = rows[env.name]
        output = out / f"{env.name}.jsonl"
        # one rollout at a time: llama.cpp's one slot keeps the conversation cached turn after turn
        stack.collect(env.agent, path, output, repeats, extra=["+num_samples_in_parallel=1"], timeout_s=7200)
        records[env.name] = collected_records(output)
    return {
        "records": records,
        "wall_s": time.perf_counter() - started,
        "cpu": cpu_spent(before, snapshot(stack.pids)),
    }


def parsed(call: dict, offered: set[str]) -> bool:
    try:
        return call["name"] in offered and isinstance(json.loads(call["arguments"]), dict)
    except ValueError:
        return False


def real_model_figures(run: dict) -> dict:
    records = [r for rs in run["records"].values() for r in rs]
    n = len(records)
    calls = [
        (o, {t.get("name") for t in r["response"].get("tools") or []})
        for r in records
        if r.get("response")
        for o in r["response"]["output"]
        if o["type"] == "function_call"
    ]
    turns = [o for r in records if r.get("response") for o in r["response"]["output"] if "generation_token_ids" in o]
    generated = sum(len(t["generation_token_ids"]) for t in turns)
    policy_s = sum(r["timings"].get("policy_s", 0.0) for r in records)
    return {
        "real_model_rollouts": n,
        "real_model_contiguous_fraction": round(sum(r.get("token_ids_contiguous") is True for r in records) / n, 3),
        "real_model_tool_calls": len(calls),
        "real_model_tool_parse_fraction": round(sum(parsed(c, o) for c, o in calls) / len(calls), 3)
        if calls
        else None,
        "real_model_tool_call_paths": dict(Counter(p for r in records for p in r.get("tool_call_paths") or [])),
        "real_model_failed_infra": sum(bool(r.get("failure") and r["failure"].get("infra")) for r in records),
        "real_model_failures": dict(Counter(r["failure"]["type"] for r in records if r.get("failure"))),
        "real_model_mean_reward": {
            env: round(statistics.fmean(r.get("reward") or 0.0 for r in rs), 3) for env, rs in run["records"].items()
        },
        "real_model_stop_reasons": dict(Counter(str(r.get("stop_reason")) for r in records)),
        "real_model_malformed_tool_calls": sum(r.get("malformed_tool_calls") or 0 for r in records),
        "real_model_repeated_tool_calls": sum(r.get("repeated_tool_calls") or 0 for r in records),
        "real_model_turns": len(turns),
        "real_model_generated_tokens": generated,
        "real_model_prompt_tokens_last_turn_mean": round(
            statistics.fmean(len(t["prompt_token_ids"]) for t in turns), 1
        )
        if turns
        else None,
        "real_model_tokens_per_s": round(generated / policy_s, 2) if policy_s else None,
        "real_model_wall_s": round(run["wall_s"], 1),
        "real_model_policy_cpu_s_per_rollout": round(run["cpu"].get("policy", 0.0) / n, 2),
        "real_model_stack_cpu_ms_per_rollout": harness_ms_per_rollout(run["cpu"], n),
    }


def run(math_rows: int, repeats: int, other_rows: int, out: Path) -> dict:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    envs = discover()
    rows = {
        env.name: (
            rows_file(env, math_rows if env.name == "math" else other_rows, out),
            repeats if env.name == "math" else 1,
        )
        for env in envs
    }
    with sandbox_root() as root:
        overrides = [f"+{env.server_key}.sandbox.root_dir={root}" for env in envs]
        overrides += [o for env in envs for o in cpu_rollout_limits(env.agent)]
        (out / "scripted").mkdir(parents=True, exist_ok=True)
        policy_data = [str(path) for path, _ in rows.values()]
        with Stack(all_config_paths(envs), overrides, policy_data, log_dir=out / "scripted" / "logs") as stack:
            scripted = collect(stack, envs, rows, out / "scripted")
        (out / "real").mkdir(parents=True, exist_ok=True)
        with Stack(all_config_paths(envs), overrides, local_model=MODEL, log_dir=out / "real" / "logs") as stack:
            real = collect(stack, envs, rows, out / "real")
    n_scripted = sum(len(rs) for rs in scripted["records"].values())
    return {
        "model": MODEL,
        "rows": {env: {"rows": len(read_jsonl(path)), "repeats": r} for env, (path, r) in rows.items()},
        **real_model_figures(real),
        "scripted_rollouts": n_scripted,
        "scripted_mean_reward": round(
            statistics.fmean(r.get("reward") or 0.0 for rs in scripted["records"].values() for r in rs), 3
        ),
        "scripted_policy_cpu_ms_per_rollout": round(scripted["cpu"].get("policy", 0.0) * 1000 / n_scripted, 1),
        "scripted_stack_cpu_ms_per_rollout": harness_ms_per_rollout(scripted["cpu"], n_scripted),
        "scripted_wall_s": round(scripted["wall_s"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--math-rows", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="math rollouts per row")
    parser.add_argument("--other-rows", type=int, default=1, help="rows of each other environment (one rollout each)")
    parser.add_argument("--out", type=Path, default=Path("results/real_model"))
    args = parser.parse_args()
    raise_fd_limit()
    emit("real_model", run(args.math_rows, args.repeats, args.other_rows, args.out))


if __name__ == "__main__":
    main()
