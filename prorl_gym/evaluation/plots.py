# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The report's PNGs: reward distribution and stage timing (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: evaluation runs on servers and in CI
import matplotlib.pyplot as plt

STAGES = ("init_s", "run_s", "eval_s")
QUEUES = ("init_queue_s", "run_queue_s", "eval_queue_s")


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def reward_distribution(
    records: list[dict[str, Any]], tasks: list[dict[str, Any]], path: Path, threshold: float
) -> Path:
    """Left: reward per rollout (failed rollouts stacked apart); right: pass rate per task (c/n)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    valid = [float(r.get("reward") or 0.0) for r in records if not r.get("failure")]
    failed = [0.0 for r in records if r.get("failure")]
    if valid or failed:
        low = min([0.0, *valid])
        high = max([1.0, *valid])
        bins = [low + (high - low) * i / 20 for i in range(21)]
        left.hist(
            [valid, failed],
            bins=bins,
            stacked=True,
            label=["valid", "failed (reward 0)"],
            color=["tab:blue", "tab:red"],
        )
        left.axvline(threshold, color="gray", linestyle="--", linewidth=1, label=f"pass threshold {threshold:g}")
        left.legend(fontsize=8)
    else:
        _empty(left, "no rollouts")
    left.set(title=f"Reward per rollout (n={len(records)})", xlabel="reward", ylabel="rollouts")
    if tasks:
        right.hist([t["c"] / t["n"] for t in tasks], bins=[i / 10 for i in range(11)], color="tab:green")
    else:
        _empty(right, "no tasks")
    right.set(title=f"Pass rate per task (n={len(tasks)})", xlabel="passing rollouts / rollouts", ylabel="tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _boxes(ax: Any, records: list[dict[str, Any]], keys: tuple[str, ...], title: str) -> None:
    series = {
        k: [float(r["timings"][k]) for r in records if isinstance((r.get("timings") or {}).get(k), (int, float))]
        for k in keys
    }
    series = {k: v for k, v in series.items() if v}
    if not series:
        _empty(ax, "no timing data")
    else:
        ax.boxplot(list(series.values()), whis=(1, 99), showfliers=True)  # whiskers at p1/p99
        ax.set_xticks(range(1, len(series) + 1), [k.removesuffix("_s") for k in series])
        ax.set_ylabel("seconds")
    ax.set_title(title)


def stage_timing(records: list[dict[str, Any]], path: Path) -> Path:
    """Box plots (whiskers p1-p99) of the INIT/RUN/EVAL stage times and of the waits before each."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    _boxes(left, records, STAGES, "Stage time per rollout")
    _boxes(right, records, QUEUES, "Queue wait before each stage")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
