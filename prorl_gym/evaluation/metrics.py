# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Evaluation metrics over rollout records (pure: no servers, no files).

`evaluate(records, repeats=...)` -> a JSON-serialisable dict that report.py renders. Records
are what ng_collect_rollouts writes (successes and `_failures.jsonl` rows alike); a failed
rollout has `failure` set and counts as not passing, never as a scored 0 hidden in the mean
of valid rollouts.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from typing import Any

from prorl_gym.jobs.aggregate import percentile
from prorl_gym.wire.records import TIMING_KEYS, ReportFields

MAX_CATEGORIES = 20


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with n samples, c of them passing (Chen et al. 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:  # every k-subset holds a passing sample
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def task_key(record: dict[str, Any]) -> Any:
    # The row index identifies a task even when two rows share a task_id; one input file may mix agents.
    agent = (record.get("agent_ref") or {}).get("name")
    index = record.get("_ng_task_index", record.get("task_id"))
    return f"{agent}#{index}" if agent else index


def dedupe(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (task, repeat): a retried rollout leaves failed attempts in the sidecar; a success wins."""
    best: dict[tuple, dict[str, Any]] = {}
    for i, record in enumerate(records):
        repeat = record.get("_ng_rollout_index")
        key = (task_key(record), repeat if repeat is not None else f"#{i}")
        if key not in best or (best[key].get("failure") and not record.get("failure")):
            best[key] = record
    return list(best.values())


def summary(values: list[float]) -> dict[str, float | int | None]:
    return {
        "n": len(values),
        "mean": statistics.fmean(values) if values else None,
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


def passes(record: dict[str, Any], threshold: float) -> bool:
    return not record.get("failure") and float(record.get("reward") or 0.0) >= threshold


def task_results(records: list[dict[str, Any]], threshold: float, repeats: int | None) -> list[dict[str, Any]]:
    """Per task: n samples (missing repeats count as not passing), c passing, mean reward."""
    by_task: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_task[task_key(record)].append(record)
    results = []

    def order(item: tuple[Any, list[dict[str, Any]]]) -> tuple:
        index = item[1][0].get("_ng_task_index")
        return (
            str((item[1][0].get("agent_ref") or {}).get("name")),
            index if isinstance(index, int) else -1,
            str(item[0]),
        )

    for key, group in sorted(by_task.items(), key=order):
        n = max(len(group), repeats or 0)
        results.append(
            {
                "task": key,
                "task_id": group[0].get("task_id"),
                "n": n,
                "recorded": len(group),
                "c": sum(passes(r, threshold) for r in group),
                "failed": sum(1 for r in group if r.get("failure")),
                "mean_reward": sum(float(r.get("reward") or 0.0) for r in group if not r.get("failure")) / n,
            }
        )
    return results


def failure_breakdown(failed: list[dict[str, Any]]) -> dict[str, Any]:
    examples: dict[str, str] = {}
    for record in failed:
        examples.setdefault(record["failure"].get("type", "?"), str(record["failure"].get("message", ""))[:300])
    return {
        "by_type": dict(Counter(r["failure"].get("type", "?") for r in failed).most_common()),
        "by_stage": dict(Counter(r["failure"].get("stage", "?") for r in failed).most_common()),
        "by_stage_type": dict(
            Counter(f"{r['failure'].get('stage')}/{r['failure'].get('type')}" for r in failed).most_common()
        ),
        "examples": examples,
    }


def timing_percentiles(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = list(TIMING_KEYS)
    keys += sorted({k for r in records for k in (r.get("timings") or {}) if k.endswith("_s") and k not in keys})
    out = {}
    for key in keys:
        values = [
            float(r["timings"][key]) for r in records if isinstance((r.get("timings") or {}).get(key), (int, float))
        ]
        if values:
            out[key] = summary(values)
    return out


def tool_stats(valid: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("num_tool_calls", "num_turns", "malformed_tool_calls", "repeated_tool_calls"):
        values = [r[key] for r in valid if isinstance(r.get(key), int)]
        if values:
            out[key] = summary(values) | {"total": sum(values), "distribution": dict(sorted(Counter(values).items()))}
    if "malformed_tool_calls" in out:
        out["malformed_tool_calls"]["rollouts_with_any"] = sum(
            1 for r in valid if (r.get("malformed_tool_calls") or 0) > 0
        )
    return out


def tool_call_paths(valid: list[dict[str, Any]]) -> dict[str, int]:
    """How the model server read the tool calls (tagged, constrained, lenient_*), over valid rollouts."""
    return dict(Counter(path for r in valid for path in r.get("tool_call_paths") or []).most_common())


def extras(valid: list[dict[str, Any]], fields: ReportFields) -> dict[str, Any]:
    """The environment's own fields (its config's `report:`), summarised over valid rollouts."""
    numeric = {}
    for key in fields.numeric:
        values = [
            float(r[key]) for r in valid if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
        ]
        if values:
            numeric[key] = summary(values)
    boolean = {}
    for key in fields.boolean:
        values = [r[key] for r in valid if isinstance(r.get(key), bool)]
        if values:
            boolean[key] = {"n": len(values), "fraction": sum(values) / len(values)}
    for key in fields.present:
        if any(key in r for r in valid):
            boolean[key] = {"n": len(valid), "fraction": sum(1 for r in valid if r.get(key)) / len(valid)}
    categorical = {}
    for key in fields.categorical:
        groups: dict[str, list[float]] = defaultdict(list)
        for r in valid:
            if r.get(key) is not None and not isinstance(r.get(key), (dict, list)):
                groups[str(r[key])].append(float(r.get("reward") or 0.0))
        if groups:
            top = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))[:MAX_CATEGORIES]
            categorical[key] = {value: {"rollouts": len(rs), "mean_reward": statistics.fmean(rs)} for value, rs in top}
    return {"numeric": numeric, "boolean": boolean, "categorical": categorical}


def evaluate(
    records: list[dict[str, Any]],
    repeats: int | None = None,
    threshold: float = 1.0,
    fields: ReportFields | None = None,
) -> dict[str, Any]:
    """Everything the report shows. `repeats`: rollouts asked per task (missing ones count as not passing);
    `fields`: the environment's own fields to summarise (its config's `report:`)."""
    records = dedupe(records)
    valid = [r for r in records if not r.get("failure")]
    failed = [r for r in records if r.get("failure")]
    tasks = task_results(records, threshold, repeats)
    k_max = min((t["n"] for t in tasks), default=0)
    rewards_all = [0.0 if r.get("failure") else float(r.get("reward") or 0.0) for r in records]
    rewards_valid = [float(r.get("reward") or 0.0) for r in valid]
    expected = sum(t["n"] for t in tasks)
    contiguous = [bool(r["token_ids_contiguous"]) for r in records if r.get("token_ids_contiguous") is not None]
    return {
        "counts": {
            "tasks": len(tasks),
            "repeats": repeats,
            "rollouts": len(records),
            "expected_rollouts": expected,
            "missing_rollouts": expected - len(records),
            "valid_rollouts": len(valid),
            "failed_rollouts": len(failed),
            "failure_rate": len(failed) / len(records) if records else 0.0,
        },
        "reward": {
            "threshold": threshold,
            "mean_all": statistics.fmean(rewards_all) if rewards_all else None,  # failed rollouts count as 0
            "mean_valid": statistics.fmean(rewards_valid) if rewards_valid else None,
            "std_valid": statistics.pstdev(rewards_valid) if rewards_valid else None,
            "passing_rollouts": sum(passes(r, threshold) for r in records),
            "values_valid": dict(sorted(Counter(round(v, 4) for v in rewards_valid).items())),
        },
        "pass_at_k": {
            str(k): statistics.fmean(pass_at_k(t["n"], t["c"], k) for t in tasks) for k in range(1, k_max + 1)
        },
        "task_outcomes": {
            "solved_every_time": sum(1 for t in tasks if t["c"] == t["n"]),
            "solved_sometimes": sum(1 for t in tasks if 0 < t["c"] < t["n"]),
            "never_solved": sum(1 for t in tasks if t["c"] == 0),
            "with_failures": sum(1 for t in tasks if t["failed"]),
        },
        "failures": failure_breakdown(failed),
        "timings": timing_percentiles(records),
        "tools": tool_stats(valid),
        "tool_call_paths": tool_call_paths(valid),
        "stop_reasons": dict(Counter(str(r.get("stop_reason")) for r in valid if r.get("stop_reason")).most_common()),
        "token_ids_contiguous": {
            "n": len(contiguous),
            "fraction": sum(contiguous) / len(contiguous) if contiguous else None,
        },
        # records that say they carry no token ids (an endpoint without them: evaluation only)
        "without_token_ids": sum(1 for r in valid if r.get("token_ids") is False),
        "extras": extras(valid, fields or ReportFields()),
        "tasks": tasks,
    }
