# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The real command on a real stack: scripted policy (gold) + ng_run + ng_collect_rollouts over
the STEM example split, two repeats per row; the report's numbers must be the gold ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from prorl_gym.evaluation.report import REWARD_PNG, SECTIONS, TIMING_PNG
from prorl_gym.paths import REPO_ROOT
from prorl_gym.testing import traversable_dir


@pytest.fixture
def sandbox_root():
    root = traversable_dir("prorl-eval-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_evaluate_stem_example_split_with_the_gold_policy(tmp_path, sandbox_root):
    out = tmp_path / "eval"
    argv = [
        sys.executable,
        "-m",
        "prorl_gym.evaluation",
        "--env",
        "stem",
        "--split",
        "example",
        "--repeats",
        "2",
        "--sandbox-root",
        str(sandbox_root),
        "--out",
        str(out),
    ]
    started = time.monotonic()
    run = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=240, env=dict(os.environ, PYTHONUNBUFFERED="1")
    )
    elapsed = time.monotonic() - started
    assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    assert "Collecting rollouts" in run.stderr  # ng_collect_rollouts' progress bar reached the terminal

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["counts"] | {"failure_rate": 0.0} == {
        "tasks": 5,
        "repeats": 2,
        "rollouts": 10,
        "expected_rollouts": 10,
        "missing_rollouts": 0,
        "valid_rollouts": 10,
        "failed_rollouts": 0,
        "failure_rate": 0.0,
    }, metrics["failures"]
    assert metrics["reward"]["mean_all"] == 1.0 and metrics["reward"]["mean_valid"] == 1.0
    assert metrics["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert metrics["token_ids_contiguous"]["fraction"] == 1.0
    assert all(metrics["timings"][f"{stage}_s"]["p50"] > 0 for stage in ("init", "run", "eval"))
    assert metrics["tools"]["num_tool_calls"]["mean"] >= 1 and metrics["stop_reasons"] == {"answered": 10}

    report = (out / "report.md").read_text()
    assert all(f"\n## {section}\n" in report for section in SECTIONS)
    assert "| pass@1 | 1.000 |" in report and "| pass@2 | 1.000 |" in report and "No failed rollouts." in report
    for png in (REWARD_PNG, TIMING_PNG):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    raw = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(raw) == 10 and all(r["reward"] == 1.0 for r in raw)
    assert "[rollouts.jsonl](rollouts.jsonl)" in report
    # the agent's dashboard as it stood when collection ended, one self-contained page, linked
    assert "[dashboard.html](dashboard.html)" in report and "live dashboard: http://" in run.stderr
    assert '"finished": 10, "usable": 10' in (out / "dashboard.html").read_text()
    # Every sandbox the run created is gone (hidden entries are the backend's own bookkeeping).
    assert not [p.name for p in sandbox_root.iterdir() if not p.name.startswith(".")]
    print(f"evaluation command took {elapsed:.1f}s")
