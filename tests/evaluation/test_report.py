# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Reports built from each environment's committed example_rollouts.jsonl (real records), from
records with failures, and through the command line's --from-records; split resolution."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from prorl_gym.environments import discover, environment
from prorl_gym.evaluation import splits
from prorl_gym.evaluation.__main__ import main
from prorl_gym.evaluation.report import REWARD_PNG, SECTIONS, TIMING_PNG, build_report
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT

ENVS = [env.name for env in discover()]


def example_rollouts(env: str) -> list[dict]:
    return read_jsonl(REPO_ROOT / "resources_servers" / env / "data" / "example_rollouts.jsonl")


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    width, height = struct.unpack(">II", data[16:24])
    assert width > 0 and height > 0 and len(data) > 1000


def assert_report(out: Path) -> str:
    report = (out / "report.md").read_text()
    for section in SECTIONS:
        assert f"\n## {section}\n" in report, section
    assert f"]({REWARD_PNG})" in report and f"]({TIMING_PNG})" in report
    assert_png(out / REWARD_PNG)
    assert_png(out / TIMING_PNG)
    return report


@pytest.mark.parametrize("env", ENVS)
def test_report_from_committed_example_rollouts(env, tmp_path):
    """Every environment found, with the fields its own config asks the report for."""
    records = example_rollouts(env)
    assert records, f"resources_servers/{env}/data/example_rollouts.jsonl is empty"
    fields = environment(env).report
    metrics = build_report(records, tmp_path, {"env": env, "split": "example"}, repeats=1, fields=fields)
    report = assert_report(tmp_path)
    assert metrics["reward"]["mean_all"] == 1.0 and metrics["pass_at_k"] == {"1": 1.0}  # gold rollouts
    assert "| pass@1 | 1.000 |" in report and "No failed rollouts." in report
    declared = {name for _, names in fields for name in names}
    shown = metrics["extras"]["numeric"] | metrics["extras"]["boolean"] | metrics["extras"]["categorical"]
    in_records = {name for name in declared if any(r.get(name) is not None for r in records)}
    assert in_records and in_records == declared & set(shown), (declared, set(shown))
    assert all(name in report for name in in_records)
    for stage in ("init", "run", "eval", "init_queue", "run_queue", "eval_queue"):
        assert f"\n| {stage} | {len(records)} |" in report
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["meta"]["env"] == env and saved["counts"]["rollouts"] == len(records)


def test_report_with_failures_and_several_repeats(tmp_path):
    # Two repeats of the math examples: the second of tasks 0-1 failed in RUN, the second of task 2 scored 0.
    records = []
    for record in example_rollouts("math"):
        records.append(record)
        again = dict(record, _ng_rollout_index=1)
        if record["_ng_task_index"] in (0, 1):
            again |= {
                "reward": 0.0,
                "failure": {"stage": "run", "type": "policy_error", "message": "model server returned 500"},
            }
        elif record["_ng_task_index"] == 2:
            again |= {"reward": 0.0}
        records.append(again)
    metrics = build_report(records, tmp_path, {"env": "math", "split": "example"}, repeats=2)
    report = assert_report(tmp_path)
    assert metrics["pass_at_k"] == pytest.approx({"1": 0.7, "2": 1.0})
    assert metrics["reward"]["mean_all"] == pytest.approx(0.7) and metrics["reward"]["mean_valid"] == pytest.approx(
        7 / 8
    )
    assert "| policy_error | 2 | 0.200 | model server returned 500 |" in report
    assert "| run | 2 |" in report and "| run/policy_error | 2 |" in report


def test_command_line_builds_a_report_from_records(tmp_path, capsys):
    files = [REPO_ROOT / "resources_servers" / env / "data" / "example_rollouts.jsonl" for env in ("stem", "code")]
    assert main(["--from-records", *map(str, files), "--out", str(tmp_path)]) == 0
    assert_report(tmp_path)
    assert json.loads((tmp_path / "metrics.json").read_text())["counts"]["rollouts"] == 10
    assert str(tmp_path / "report.md") in capsys.readouterr().out


def test_splits_come_from_the_agent_configs():
    assert {s.type for s in splits.splits("math")} == {"example", "train", "validation"}
    assert splits.resolve("stem", "validation").path == REPO_ROOT / "resources_servers/stem/data/stem.jsonl"
    assert splits.resolve("math", "math_validation").type == "validation"  # by name too
    with pytest.raises(splits.SplitError, match="swe has no split 'validation'.*example"):
        splits.resolve("swe", "validation")
    with pytest.raises(splits.SplitError, match="unknown environment"):
        splits.resolve("chess", "example")
