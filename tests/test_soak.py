# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The fault-injection soak in its short form (benchmarks/soak.py; `make soak` runs the full one):
~100 rollouts over every environment through the job API with every kind of fault injected, then
ng_collect_rollouts with a resources server killed. Nothing may be lost, duplicated, scored as a
task outcome, or left behind, and the faults cost no rollout its outcome (each is run again once
what it needs is back); every record is kept."""

from __future__ import annotations

import pytest

from benchmarks.soak import FAULTS, soak_faults
from prorl_gym.environments import discover
from prorl_gym.jsonl import read_jsonl


@pytest.mark.timeout(1800)  # ~5 min on an idle machine; 15 min seen at load 17 on 2 cores
def test_short_soak_loses_nothing_under_every_kind_of_fault(tmp_path):
    results = soak_faults(rollouts=100, fault_every=10, envs=discover(), log_dir=tmp_path / "logs", probe_repeats=2)
    assert results["records"] == results["submitted"] == 100, results
    assert (results["lost"], results["duplicates"]) == (0, 0), results
    assert results["infra_failures_scored_as_reward"] == 0, results
    assert results["usable_fraction"] >= 0.98 and results["retried_ok"] > 0, results
    assert len(read_jsonl(tmp_path / "logs" / "records.jsonl")) == 100
    assert read_jsonl(tmp_path / "logs" / "suspects.jsonl", missing_ok=True) == []
    assert set(results["faults"]) == set(FAULTS), results  # every kind found something to break
    assert (results["leaked_processes"], results["leaked_sandbox_dirs"]) == (0, 0), results
    assert sorted(results["dashboards"]) == sorted(f"dashboard_{env.name}.html" for env in discover())
    assert "window.PRORL_SNAPSHOT" in (tmp_path / "logs" / results["dashboards"][0]).read_text()
    probe = results["collect_probe"]
    assert probe["records"] == probe["rows"], probe
