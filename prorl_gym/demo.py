# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`make demo`: real rollouts end to end, then a summary.

Starts the scripted policy (a stand-in for a GPU model) and, with one NeMo Gym `ng_run`,
the servers of every environment found under resources_servers/ (prorl_gym/environments.py); collects rollouts of each
environment's example set with `ng_collect_rollouts` (several repeats), writes them under
results/demo/ and prints a summary per environment. Everything started is stopped at the
end, also on Ctrl-C, SIGTERM or SIGHUP (exit 128 + the signal). A policy that goes down (no endpoint
healthy for the agent's grace period, 60 s) is said on the terminal, and the demo exits 1.

    python -m prorl_gym.demo [--repeats 4] [--envs math,code,stem,swe] [--tokenizer qwen3 | --policy NAME]

--tokenizer qwen3 (make demo TOKENIZER=qwen3): the policy answers as vLLM serving Qwen3 would (its real
tokenizer and chat template) and the model server runs token-in/token-out, so every record's ids are
real Qwen3 ids.

--policy qwen2.5-coder-0.5b (make demo POLICY=qwen2.5-coder-0.5b): a real model on the CPU instead of the
scripted policy (prorl_gym/local_models, served by llama.cpp, token-in/token-out), one rollout per row
by default and each rollout's generated tokens capped (CPU_ROLLOUT_LIMITS): rewards are what it earns.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from prorl_gym.dashboard.export import find_agent, save_snapshot
from prorl_gym.environments import Environment, all_config_paths, discover
from prorl_gym.jobs.aggregate import rollout_metrics
from prorl_gym.local_models import MODELS
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack, StackError, collected_records, cpu_rollout_limits, run_cli
from prorl_gym.watch import PolicyWatch


def summary(env: Environment, records: list[dict], seconds: float) -> str:
    """One line: rollouts, mean reward, failures by type, median time per stage, token contiguity."""
    m = rollout_metrics(records)
    failures = {k.removeprefix("failures/"): v for k, v in m.items() if k.startswith("failures/")}
    stages = "/".join(
        f"{statistics.median(r['timings'][f'{stage}_s'] for r in records if f'{stage}_s' in r['timings']):.2f}"
        if any(f"{stage}_s" in r["timings"] for r in records)
        else "-"
        for stage in ("init", "run", "eval")
    )
    mean = statistics.fmean(r["reward"] for r in records) if records else float("nan")
    contiguous = sum(1 for r in records if r.get("token_ids_contiguous"))
    return (
        f"[{env.name:>4}] {m['rollouts']:3d} rollouts in {seconds:5.1f}s  mean reward {mean:.3f}  "
        f"failed {m['failed_rollouts']} {failures or ''}  median init/run/eval {stages} s  "
        f"token ids contiguous {contiguous}/{len(records)}"
    )


def chosen_environments(names: str | None, root: Path = REPO_ROOT) -> list[Environment]:
    """The environments the demo runs: those named (comma-separated), or every one found."""
    found = discover(root)
    unknown = set(names.split(",")) - {env.name for env in found} if names else set()
    if unknown:
        raise SystemExit(f"unknown environments {sorted(unknown)}; found: {[env.name for env in found]}")
    return [env for env in found if names is None or env.name in names.split(",")]


def real_tokens(tokenizer: str | None) -> tuple[list[str], list[str]]:
    """(the scripted policy's arguments, ng_run overrides) for real token ids through token-in/token-out."""
    if not tokenizer:
        return [], []
    model = "+policy_model.responses_api_models.balanced_vllm_model"
    return ["--tokenizer", tokenizer], [f"{model}.token_mode=tito", f"{model}.tokenizer={tokenizer}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=None, help="rollouts per row (default 4; 1 with --policy)")
    parser.add_argument("--envs", default=None, help="comma-separated names (default: every environment found)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tokenizer", default=None, help="qwen3 (or a tokenizer directory): real token ids, tito")
    which.add_argument("--policy", choices=sorted(MODELS), default=None, help="a real model on the CPU (llama.cpp)")
    args = parser.parse_args()
    chosen = chosen_environments(args.envs)
    repeats = args.repeats or (1 if args.policy else 4)
    out_dir = REPO_ROOT / "results" / "demo"
    out_dir.mkdir(parents=True, exist_ok=True)
    policy = (
        f"{args.policy} on the CPU (llama.cpp)" if args.policy else "the scripted policy (stand-in for a GPU model)"
    )
    print(f"starting {policy} and ng_run with every environment ...", flush=True)
    lines, down = [], None
    try:
        policy_data = [str(env.example) for env in chosen]
        policy_args, overrides = real_tokens(args.tokenizer)
        if args.policy:
            overrides += [o for env in chosen for o in cpu_rollout_limits(env.agent)]
        with Stack(
            all_config_paths(chosen),
            overrides=overrides,
            policy_data=None if args.policy else policy_data,
            policy_args=policy_args,
            local_model=args.policy,
            log_dir=out_dir / "logs",
        ) as stack:
            head = f"http://{stack.head_host}:{stack.head_port}"
            agents = {env.name: find_agent(head, env.agent) for env in chosen}
            for env in chosen:  # each environment's agent serves its own (one not found was said on stderr)
                if agents[env.name]:
                    print(f"[{env.name}] live dashboard: {agents[env.name]}/dashboard", flush=True)
            for env in chosen:
                print(f"[{env.name}] collecting rollouts with ng_collect_rollouts ...", flush=True)
                output = out_dir / f"{env.name}_rollouts.jsonl"
                started = time.perf_counter()
                with PolicyWatch(agents[env.name], f"[{env.name}]") as watch:
                    stack.collect(env.agent, env.example, output, num_repeats=repeats)
                down = down or watch.down
                lines.append(summary(env, collected_records(output), time.perf_counter() - started))
                print(lines[-1], flush=True)
                if agents[env.name]:  # its charts, kept after the stack stops
                    save_snapshot(agents[env.name], out_dir / f"{env.name}_dashboard.html")
    except StackError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"\nsummary (rollouts in {out_dir.relative_to(REPO_ROOT)}/):\n" + "\n".join(lines))
    if down is not None:
        print(f"FAILED: the policy was down: {down.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run_cli(main)
