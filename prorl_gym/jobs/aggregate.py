# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Per-environment metrics over rollout records: rewards of valid rollouts, failures by
type, stop reasons, and stage-time percentiles. Used by the agent's /aggregate_metrics
and by the demo summary."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

STAGES = ("init", "run", "eval")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def rollout_metrics(records: list[dict[str, Any]]) -> dict[str, Any]:
    failed = [r for r in records if r.get("failure")]
    valid = [r for r in records if not r.get("failure")]
    metrics: dict[str, Any] = {
        "rollouts": len(records),
        "valid_rollouts": len(valid),
        "failed_rollouts": len(failed),
        "failure_rate": len(failed) / len(records) if records else 0.0,
        "mean_reward_valid": statistics.fmean(float(r["reward"]) for r in valid) if valid else None,
    }
    for kind, count in sorted(Counter(r["failure"]["type"] for r in failed).items()):
        metrics[f"failures/{kind}"] = count
    for reason, count in sorted(Counter(r.get("stop_reason") for r in valid if r.get("stop_reason")).items()):
        metrics[f"stop_reason/{reason}"] = count
    for stage in STAGES:
        times = [r["timings"][f"{stage}_s"] for r in records if f"{stage}_s" in (r.get("timings") or {})]
        for q in (50, 90, 99):
            value = percentile(times, q)
            if value is not None:
                metrics[f"timing/{stage}_s/p{q}"] = round(value, 4)
    for key in ("num_turns", "num_tool_calls", "malformed_tool_calls"):
        values = [r[key] for r in valid if isinstance(r.get(key), (int, float))]
        if values:
            metrics[f"mean/{key}"] = statistics.fmean(values)
    contiguous = [r["token_ids_contiguous"] for r in records if r.get("token_ids_contiguous") is not None]
    if contiguous:
        metrics["contiguous_fraction"] = sum(contiguous) / len(contiguous)
    return metrics
