# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Evaluate one environment over a dataset split: rollouts, then a markdown report with plots.

    python -m prorl_gym.evaluation --env math --split validation [--repeats 4] [--limit N]
        [--policy-base-url URL --policy-model NAME]   a real OpenAI-compatible endpoint (key: $POLICY_API_KEY);
                                                      default: the scripted policy (offline), --scripted-mode gold
        [--local-model NAME]                          a real model on the CPU (llama.cpp; make setup fetches it)
        [--no-token-ids]                              an endpoint without token ids (evaluation only)
        [--max-failure-rate F]                        exit 1 above it (always on infra failures or all failed)
        [--policy-grace-s S]                          no endpoint healthy this long: the policy is down (60)
        [--no-policy-check]                           start without asking the endpoint first
        [--out results/eval/<env>-<split>-<timestamp>/] [--sandbox-root DIR] [--pass-threshold 1.0]
    python -m prorl_gym.evaluation --from-records rollouts.jsonl [...] --out DIR [--repeats N]
        report only, from existing records (e.g. resources_servers/math/data/example_rollouts.jsonl)

Writes into --out: report.md, metrics.json, reward_distribution.png, stage_timing.png, the raw
rollouts (rollouts.jsonl = successes, rollouts_failures.jsonl = failed rollouts) and logs/.

A real endpoint is asked first, before anything starts (prorl_gym/preflight.py, run by __main__.py
before this module's imports, which take seconds): it answers, serves the model, gives token ids as
asked; if not, the command says what it tried and what to change, and exits 2. A policy that goes down during the run (no endpoint healthy for --policy-grace-s)
is said on the terminal, its rollouts end typed policy_down, and the command exits 1.
Exit codes: 0 done, 1 failed (the last line says why), 2 the command or its policy cannot run,
128 + N stopped by signal N (Ctrl-C 130, SIGTERM 143, SIGHUP 129: everything started is stopped).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from prorl_gym.environments import discover, environment
from prorl_gym.evaluation.report import build_report
from prorl_gym.evaluation.run import SCRIPTED_MODES, Policy, run
from prorl_gym.evaluation.splits import SplitError, prepared
from prorl_gym.jsonl import read_jsonl
from prorl_gym.local_models import MODELS
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import StackError, collected_records, failures_path
from prorl_gym.wire.failures import FailureType
from prorl_gym.wire.jobs import PolicyHealthView
from prorl_gym.wire.records import ReportFields


def raw_files(output: Path) -> list[Path]:
    """What ng_collect_rollouts wrote next to `output`: successes, failures sidecar, its metrics."""
    names = [
        output.name,
        failures_path(output).name,
        f"{output.stem}_aggregate_metrics.json",
        f"{output.stem}_materialized_inputs.jsonl",
    ]
    return [output.with_name(n) for n in names if output.with_name(n).exists()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m prorl_gym.evaluation", description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=[env.name for env in discover()])
    parser.add_argument(
        "--split", default="validation", help="split type (example/train/validation) or name (default: validation)"
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help="rollouts per row: pass@k for k = 1..repeats (default 4)"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows of the split")
    parser.add_argument(
        "--policy-base-url", default=None, help="OpenAI-compatible endpoint; default: the scripted policy"
    )
    parser.add_argument("--policy-model", default=None, help="model name at --policy-base-url")
    parser.add_argument(
        "--local-model", default=None, choices=sorted(MODELS), help="a real model served here on the CPU by llama.cpp"
    )
    parser.add_argument("--scripted-mode", default="gold", choices=SCRIPTED_MODES, help="scripted policy behaviour")
    parser.add_argument(
        "--no-token-ids",
        action="store_true",
        help="evaluate an endpoint that gives no token ids (a hosted API, Ollama): records carry none",
    )
    parser.add_argument(
        "--max-failure-rate",
        type=float,
        default=None,
        help="exit 1 above this fraction of failed rollouts (always: any infrastructure failure left after "
        "retries, or every rollout failed)",
    )
    parser.add_argument(
        "--policy-grace-s",
        type=float,
        default=None,
        help="seconds without a healthy policy endpoint before the policy is declared down and the rollouts "
        "waiting for it end typed policy_down (default: the agent's policy_health.grace_s, 60)",
    )
    parser.add_argument("--no-policy-check", action="store_true", help="start without first asking the endpoint")
    parser.add_argument("--scripted-latency-ms", type=float, default=0.0, help="the scripted policy's time per answer")
    parser.add_argument("--pass-threshold", type=float, default=1.0, help="a rollout passes when reward >= this")
    parser.add_argument(
        "--sandbox-root", default=None, help="host dir for sandboxes (must be traversable by the sandbox uid)"
    )
    parser.add_argument("--parallel", type=int, default=None, help="ng_collect_rollouts' num_samples_in_parallel")
    parser.add_argument("--timeout", type=float, default=None, help="seconds for the whole collection")
    parser.add_argument(
        "--out", type=Path, default=None, help="output dir (default results/eval/<env>-<split>-<timestamp>/)"
    )
    parser.add_argument(
        "--from-records", type=Path, nargs="+", default=None, help="build the report from these jsonl files"
    )
    args = parser.parse_args(argv)
    if args.from_records is None and args.env is None:
        parser.error("--env is required (or --from-records)")
    if args.policy_base_url and not args.policy_model:
        parser.error("--policy-model is required with --policy-base-url")
    if args.policy_base_url and args.local_model:
        parser.error("--local-model or --policy-base-url, not both")
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return args


def report_fields(env: str | None) -> ReportFields:
    """The environment's own fields for the report; records of no named environment: every one's."""
    fields = ReportFields()
    for found in [environment(env)] if env else discover():
        fields = fields.merged(found.report)
    return fields


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now()
    command = "python -m prorl_gym.evaluation " + shlex.join(sys.argv[1:] if argv is None else argv)
    if args.from_records:
        out = args.out or REPO_ROOT / "results" / "eval" / f"report-{started:%Y%m%d-%H%M%S}"
        records = [
            r for path in args.from_records for r in read_jsonl(path, missing_ok=True)
        ]  # one run: successes + failures
        meta = {
            "env": args.env or "records",
            "split": args.split if args.env else ", ".join(map(str, args.from_records)),
            "repeats": args.repeats,
            "started": f"{started:%Y-%m-%d %H:%M:%S}",
            "command": command,
        }
        build_report(
            records, out, meta, repeats=args.repeats, threshold=args.pass_threshold, fields=report_fields(args.env)
        )
        print(f"report: {out / 'report.md'}")
        return 0

    repeats = args.repeats or 4
    try:
        split = prepared(args.env, args.split)
    except SplitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = (args.out or REPO_ROOT / "results" / "eval" / f"{args.env}-{split.type}-{started:%Y%m%d-%H%M%S}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    policy = Policy(
        args.policy_base_url,
        args.policy_model,
        args.scripted_mode,
        not args.no_token_ids,
        scripted_latency_ms=args.scripted_latency_ms,
        grace_s=args.policy_grace_s,
        local_model=args.local_model,
    )
    t0 = time.perf_counter()
    try:
        collected = run(
            args.env,
            split.path,
            out,
            policy,
            repeats,
            limit=args.limit,
            sandbox_root=args.sandbox_root,
            parallel=args.parallel,
            timeout_s=args.timeout,
        )
    except (StackError, subprocess.TimeoutExpired) as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    output = collected.output
    files = raw_files(output)
    meta = {
        "env": args.env,
        "split": f"{split.type} ({split.name})",
        "dataset": str(split.path.relative_to(REPO_ROOT)),
        "policy": policy.label,
        "repeats": repeats,
        "limit": args.limit,
        "started": f"{started:%Y-%m-%d %H:%M:%S}",
        "duration_s": round(time.perf_counter() - t0, 1),
        "command": command,
        "raw_files": [f.name for f in files],
    }
    records = collected_records(output)
    metrics = build_report(
        records, out, meta, repeats=repeats, threshold=args.pass_threshold, fields=report_fields(args.env)
    )
    pass_at = "  ".join(f"pass@{k} {v:.3f}" for k, v in metrics["pass_at_k"].items())
    mean = metrics["reward"]["mean_all"]
    print(
        f"[{args.env}/{split.type}] {metrics['counts']['rollouts']} rollouts, {metrics['counts']['failed_rollouts']} failed, "
        f"mean reward {mean if mean is None else round(mean, 3)}  {pass_at}"
    )
    print(f"report: {out / 'report.md'}")
    verdict = failure_verdict(records, args.max_failure_rate, collected.policy_down)
    if verdict:
        print(f"FAILED: {verdict}", file=sys.stderr)
        return 1
    return 0


def failure_verdict(
    records: list[dict], max_rate: float | None, policy_down: PolicyHealthView | None = None
) -> str | None:
    """Why the evaluation failed as a whole, if it did: the policy was declared down, an infrastructure
    failure left after retries, every rollout failed, or more than max_rate of them (the exit code scripts
    and CI read)."""
    failed = [r for r in records if r.get("failure")]
    infra = [r for r in failed if r["failure"].get("infra")]
    types = sorted({r["failure"]["type"] for r in failed})
    said = f"{len(failed)} of {len(records)} rollouts failed ({', '.join(types) or 'none'})"
    down = [r for r in failed if r["failure"]["type"] == FailureType.POLICY_DOWN]
    if policy_down is not None or down:
        why = policy_down.message if policy_down is not None else down[0]["failure"]["message"]
        return f"the policy was down: {why}; {said}"
    if infra:
        return f"{said}; {len(infra)} by infrastructure failures left after retries"
    if records and len(failed) == len(records):
        return said
    if max_rate is not None and records and len(failed) / len(records) > max_rate:
        return f"{said}, above --max-failure-rate {max_rate}"
    return None
