# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Build an evaluation report from rollout records: metrics.json, two PNGs and report.md.

Pure with respect to the stack: give it records (e.g. read back from a run's jsonl, or the
committed example_rollouts.jsonl) and a directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prorl_gym.dashboard.export import DASHBOARD_HTML
from prorl_gym.evaluation import plots
from prorl_gym.evaluation.metrics import dedupe, evaluate
from prorl_gym.wire.records import ReportFields

REWARD_PNG = "reward_distribution.png"
TIMING_PNG = "stage_timing.png"
SECTIONS = (
    "Summary",
    "Reward",
    "pass@k",
    "Failures",
    "Stage timing",
    "Tool calls and turns",
    "Stop reasons",
    "Environment-specific",
    "Files",
)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _counts(distribution: dict[Any, int]) -> str:
    return ", ".join(f"{value}: {count}" for value, count in distribution.items())


def summary_section(m: dict[str, Any], meta: dict[str, Any]) -> str:
    c, r = m["counts"], m["reward"]
    rows = [
        [key, meta[key]]
        for key in ("env", "split", "dataset", "policy", "repeats", "limit", "started", "duration_s")
        if meta.get(key) is not None
    ]
    rows += [
        ["tasks", c["tasks"]],
        ["rollouts (recorded / expected)", f"{c['rollouts']} / {c['expected_rollouts']}"],
        [
            "valid / failed rollouts",
            f"{c['valid_rollouts']} / {c['failed_rollouts']} (failure rate {fmt(c['failure_rate'])})",
        ],
        ["mean reward, all rollouts (failed = 0)", r["mean_all"]],
        ["mean reward, valid rollouts", r["mean_valid"]],
    ]
    rows += [[f"pass@{k}", v] for k, v in m["pass_at_k"].items()]
    if m["token_ids_contiguous"]["n"]:
        rows.append(
            [
                "token ids contiguous",
                f"{fmt(m['token_ids_contiguous']['fraction'])} of {m['token_ids_contiguous']['n']}",
            ]
        )
    if m.get("without_token_ids"):
        rows.append(["token ids", f"none in {m['without_token_ids']} rollouts (evaluation only: --no-token-ids)"])
    return "## Summary\n\n" + table(["", "value"], rows)


def reward_section(m: dict[str, Any]) -> str:
    r, t = m["reward"], m["task_outcomes"]
    rows = [
        ["mean (all rollouts, failed = 0)", r["mean_all"]],
        ["mean (valid rollouts)", r["mean_valid"]],
        ["std (valid rollouts)", r["std_valid"]],
        [f"passing rollouts (reward >= {r['threshold']:g})", r["passing_rollouts"]],
        ["reward values (valid rollouts)", _counts(r["values_valid"]) or "-"],
    ]
    outcomes = table(
        ["tasks solved every time", "sometimes", "never", "with failed rollouts"],
        [[t["solved_every_time"], t["solved_sometimes"], t["never_solved"], t["with_failures"]]],
    )
    return f"## Reward\n\n{table(['', 'value'], rows)}\n\n{outcomes}\n\n![reward distribution]({REWARD_PNG})"


def pass_at_k_section(m: dict[str, Any]) -> str:
    text = (
        "Unbiased estimator (Chen et al. 2021), averaged over tasks: 1 - C(n-c, k) / C(n, k), "
        f"c = rollouts with reward >= {m['reward']['threshold']:g}; failed and missing rollouts count as not passing."
    )
    rows = [[k, v] for k, v in m["pass_at_k"].items()]
    unsolved = [t.get("task_id") or t["task"] for t in m["tasks"] if t["c"] == 0][:10]
    extra = f"\n\nNever solved (first {len(unsolved)}): " + ", ".join(f"`{u}`" for u in unsolved) if unsolved else ""
    return f"## pass@k\n\n{text}\n\n" + (table(["k", "pass@k"], rows) if rows else "No tasks.") + extra


def failures_section(m: dict[str, Any]) -> str:
    f, c = m["failures"], m["counts"]
    if not f["by_type"]:
        missing = f" {c['missing_rollouts']} rollouts are missing (no record)." if c["missing_rollouts"] else ""
        return "## Failures\n\nNo failed rollouts." + missing
    by_type = table(
        ["type", "rollouts", "share of rollouts", "example message"],
        [
            [k, v, v / c["rollouts"], f["examples"].get(k, "").replace("|", "\\|").replace("\n", " ")[:160]]
            for k, v in f["by_type"].items()
        ],
    )
    by_stage = table(["stage", "rollouts"], [[k, v] for k, v in f["by_stage"].items()])
    by_both = table(["stage/type", "rollouts"], [[k, v] for k, v in f["by_stage_type"].items()])
    missing = f"\n\nMissing rollouts (no record at all): {c['missing_rollouts']}." if c["missing_rollouts"] else ""
    return (
        f"## Failures\n\nBy type:\n\n{by_type}\n\nBy stage:\n\n{by_stage}\n\nBy stage and type:\n\n{by_both}{missing}"
    )


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"  # queue waits are microseconds, runs minutes


def timing_section(m: dict[str, Any]) -> str:
    rows = [
        [k.removesuffix("_s"), s["n"], *(seconds(s[q]) for q in ("p50", "p90", "p99", "mean", "max"))]
        for k, s in m["timings"].items()
    ]
    body = table(["timing (s)", "n", "p50", "p90", "p99", "mean", "max"], rows) if rows else "No timings recorded."
    return (
        "## Stage timing\n\ninit/run/eval: time in each pipeline stage; *_queue: wait for a stage worker; "
        "policy/tools: RUN split into model calls and tool calls; total: the whole rollout. All rollouts, failed included.\n\n"
        f"{body}\n\n![stage timing]({TIMING_PNG})"
    )


def tools_section(m: dict[str, Any]) -> str:
    tools = m["tools"]
    if not tools:
        return "## Tool calls and turns\n\nNo counts recorded."
    rows = [[k, s["mean"], s["p50"], s["max"], s["total"], _counts(s["distribution"])] for k, s in tools.items()]
    text = table(["per valid rollout", "mean", "p50", "max", "total", "distribution (value: rollouts)"], rows)
    if "malformed_tool_calls" in tools:
        text += f"\n\nRollouts with at least one malformed tool call: {tools['malformed_tool_calls']['rollouts_with_any']}."
    if paths := m.get("tool_call_paths"):  # how the model server read them (a model writing calls without tags)
        text += "\n\nTool calls by how they were read: " + ", ".join(f"{k} {v}" for k, v in paths.items()) + "."
    return "## Tool calls and turns\n\n" + text


def stop_reasons_section(m: dict[str, Any]) -> str:
    rows = [[k, v] for k, v in m["stop_reasons"].items()]
    return "## Stop reasons\n\n" + (
        table(["stop reason (valid rollouts)", "rollouts"], rows) if rows else "None recorded."
    )


def extras_section(m: dict[str, Any]) -> str:
    e, parts = m["extras"], []
    if e["numeric"]:
        parts.append(
            table(
                ["field", "n", "mean", "p50", "p90", "max"],
                [[k, s["n"], s["mean"], s["p50"], s["p90"], s["max"]] for k, s in e["numeric"].items()],
            )
        )
    if e["boolean"]:
        parts.append(
            table(["field", "n", "fraction true"], [[k, s["n"], s["fraction"]] for k, s in e["boolean"].items()])
        )
    for key, groups in e["categorical"].items():
        parts.append(
            table([key, "rollouts", "mean reward"], [[v, g["rollouts"], g["mean_reward"]] for v, g in groups.items()])
        )
    body = "\n\n".join(parts) if parts else "No environment-specific fields."
    return "## Environment-specific\n\nVerifier and row fields of this environment, over valid rollouts.\n\n" + body


def files_section(files: list[str]) -> str:
    return "## Files\n\n" + "\n".join(f"- [{name}]({name})" for name in files)


def render(m: dict[str, Any], meta: dict[str, Any], files: list[str]) -> str:
    title = f"# Evaluation: {meta.get('env', '?')} / {meta.get('split', '?')}"
    if meta.get("command"):
        title += f"\n\n`{meta['command']}`"
    sections = [
        summary_section(m, meta),
        reward_section(m),
        pass_at_k_section(m),
        failures_section(m),
        timing_section(m),
        tools_section(m),
        stop_reasons_section(m),
        extras_section(m),
        files_section(files),
    ]
    return "\n\n".join([title, *sections]) + "\n"


def build_report(
    records: list[dict[str, Any]],
    out_dir: Path,
    meta: dict[str, Any] | None = None,
    repeats: int | None = None,
    threshold: float = 1.0,
    fields: ReportFields | None = None,
) -> dict[str, Any]:
    """Write metrics.json, the PNGs and report.md into out_dir; returns the metrics. `fields`: the
    environment's own record fields to summarise (Environment.report)."""
    meta = dict(meta or {})
    out_dir.mkdir(parents=True, exist_ok=True)
    records = dedupe(records)
    metrics = evaluate(records, repeats=repeats, threshold=threshold, fields=fields)
    plots.reward_distribution(records, metrics["tasks"], out_dir / REWARD_PNG, threshold)
    plots.stage_timing(records, out_dir / TIMING_PNG)
    (out_dir / "metrics.json").write_text(json.dumps({"meta": meta, **metrics}, indent=2, default=str) + "\n")
    files = sorted({*meta.pop("raw_files", []), "metrics.json", REWARD_PNG, TIMING_PNG})
    if (out_dir / DASHBOARD_HTML).exists():  # the agent's live view at the end of collection (evaluation/run.py)
        files.append(DASHBOARD_HTML)
    (out_dir / "report.md").write_text(render(metrics, meta, files))
    return metrics
