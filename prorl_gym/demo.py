"""`make demo`: real rollouts end to end, then a summary.

Starts the scripted policy (a stand-in for a GPU model), starts the servers with NeMo
Gym's own `ng_run`, collects rollouts of each environment's example set with
`ng_collect_rollouts` (several repeats), writes them under results/demo/ and prints a
summary per environment. Everything started is stopped at the end, also on Ctrl-C.

    python -m prorl_gym.demo [--repeats 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from prorl_gym.pipeline.metrics import rollout_metrics
from prorl_gym.stack import REPO_ROOT, Stack, StackError


@dataclass(frozen=True)
class Environment:
    name: str
    config: str
    agent: str
    example: str


ENVIRONMENTS = [
    Environment("math", "configs/math.yaml", "math_agent", "resources_servers/math/data/example.jsonl"),
]


def read_records(output: Path) -> list[dict]:
    records = []
    for path in (output, output.with_name(output.stem + "_failures.jsonl")):
        if path.exists():
            records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def summary(env: Environment, records: list[dict], output: Path, seconds: float) -> str:
    m = rollout_metrics(records)
    failures = {k.removeprefix("failures/"): v for k, v in m.items() if k.startswith("failures/")}
    stages = "  ".join(
        f"{stage} {statistics.median(r['timings'][stage + '_s'] for r in records if stage + '_s' in r['timings']):.3f}s"
        for stage in ("init", "run", "eval")
        if any(stage + "_s" in r["timings"] for r in records)
    )
    mean = statistics.fmean(r["reward"] for r in records) if records else float("nan")
    contiguous = sum(1 for r in records if r.get("token_ids_contiguous"))
    return "\n".join([
        f"[{env.name}] {m['rollouts']} rollouts in {seconds:.1f}s: mean reward {mean:.3f}"
        f" (valid {m['valid_rollouts']}, failed {m['failed_rollouts']})",
        f"[{env.name}]   failures by type: {failures or 'none'}",
        f"[{env.name}]   median time per stage: {stages}",
        f"[{env.name}]   token ids contiguous (NeMo RL rule): {contiguous}/{len(records)}",
        f"[{env.name}]   rollouts: {output.relative_to(REPO_ROOT)}",
    ])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    out_dir = REPO_ROOT / "results" / "demo"
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for env in ENVIRONMENTS:
        print(f"[{env.name}] starting the scripted policy (stand-in for a GPU model) and ng_run ...", flush=True)
        output = out_dir / f"{env.name}_rollouts.jsonl"
        try:
            with Stack([env.config], policy_data=[env.example], log_dir=out_dir / "logs" / env.name) as stack:
                print(f"[{env.name}] servers ready; collecting rollouts with ng_collect_rollouts ...", flush=True)
                started = time.perf_counter()
                stack.collect(env.agent, env.example, output, num_repeats=args.repeats)
                seconds = time.perf_counter() - started
        except StackError as exc:
            print(f"[{env.name}] FAILED: {exc}", file=sys.stderr)
            return 1
        lines.append(summary(env, read_records(output), output, seconds))
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        sys.exit(130)
