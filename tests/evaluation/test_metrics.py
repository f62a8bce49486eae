# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""pass@k against hand-computed values and brute force; the metrics over small synthetic records."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from prorl_gym.evaluation.metrics import dedupe, evaluate, pass_at_k
from prorl_gym.wire.records import ReportFields


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (2, 1, 1, 0.5),
        (2, 1, 2, 1.0),
        (3, 1, 2, 2 / 3),  # 1 - C(2,2)/C(3,2) = 1 - 1/3
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 0, 4, 0.0),
        (4, 4, 1, 1.0),
        (8, 1, 1, 0.125),  # pass@1 is the pass rate
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_the_probability_that_a_random_k_subset_holds_a_pass():
    for n in range(1, 7):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                brute = Fraction(sum(any(s) for s in subsets), len(subsets))
                assert pass_at_k(n, c, k) == pytest.approx(float(brute), abs=1e-12), (n, c, k)


@pytest.mark.parametrize(("n", "c", "k"), [(2, 3, 1), (2, 1, 0), (2, 1, 3), (0, 0, 1)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def rollout(task: int, repeat: int, reward: float = 1.0, failure: str | None = None, **extra) -> dict:
    return {
        "task_id": f"t/{task}",
        "_ng_task_index": task,
        "_ng_rollout_index": repeat,
        "reward": 0.0 if failure else reward,
        "failure": {"stage": "run", "type": failure, "message": "boom"} if failure else None,
        "stop_reason": None if failure else "answered",
        "num_tool_calls": 2,
        "num_turns": 3,
        "malformed_tool_calls": 0,
        "token_ids_contiguous": True,
        "timings": {"init_s": 0.1, "run_s": 1.0 + task, "eval_s": 0.2, "run_queue_s": 0.0},
    } | extra


def test_evaluate_counts_failed_rollouts_as_not_passing():
    records = [
        rollout(0, 0),
        rollout(0, 1, reward=0.0),
        rollout(0, 2, failure="policy_error"),
        rollout(1, 0),
        rollout(1, 1),
        rollout(1, 2),
    ]
    m = evaluate(records, repeats=3)
    assert m["pass_at_k"] == pytest.approx({"1": (1 / 3 + 1) / 2, "2": (2 / 3 + 1) / 2, "3": 1.0})
    assert m["reward"]["mean_all"] == pytest.approx(4 / 6)
    assert m["reward"]["mean_valid"] == pytest.approx(4 / 5)
    assert m["counts"] == {
        "tasks": 2,
        "repeats": 3,
        "rollouts": 6,
        "expected_rollouts": 6,
        "missing_rollouts": 0,
        "valid_rollouts": 5,
        "failed_rollouts": 1,
        "failure_rate": pytest.approx(1 / 6),
    }
    assert m["failures"]["by_type"] == {"policy_error": 1} and m["failures"]["by_stage"] == {"run": 1}
    assert m["task_outcomes"] == {"solved_every_time": 1, "solved_sometimes": 1, "never_solved": 0, "with_failures": 1}
    assert m["stop_reasons"] == {"answered": 5}
    assert m["tools"]["num_tool_calls"]["mean"] == 2 and m["tools"]["num_tool_calls"]["distribution"] == {2: 5}
    assert m["timings"]["run_s"]["p50"] in (1.0, 2.0) and m["timings"]["run_s"]["max"] == 2.0
    assert m["token_ids_contiguous"] == {"n": 6, "fraction": 1.0}


def test_how_tool_calls_were_read_and_repeated_calls_are_summed():
    records = [
        rollout(0, 0, tool_call_paths=["lenient_fenced", "lenient_fenced"], repeated_tool_calls=1),
        rollout(0, 1, tool_call_paths=["tagged", "lenient_malformed"], repeated_tool_calls=0),
        rollout(1, 0, failure="policy_error", tool_call_paths=["tagged"]),  # not a valid rollout
    ]
    m = evaluate(records, repeats=2)
    assert m["tool_call_paths"] == {"lenient_fenced": 2, "tagged": 1, "lenient_malformed": 1}
    assert m["tools"]["repeated_tool_calls"]["total"] == 1


def test_missing_rollouts_count_against_the_task():
    m = evaluate([rollout(0, 0), rollout(0, 1)], repeats=4)  # two of four repeats never came back
    assert m["counts"]["missing_rollouts"] == 2
    assert m["pass_at_k"]["1"] == pytest.approx(0.5) and m["pass_at_k"]["3"] == pytest.approx(1.0)


def test_a_retried_rollout_counts_once_and_its_success_wins():
    records = [rollout(0, 0, failure="timeout"), rollout(0, 0)]
    assert dedupe(records) == [records[1]]
    assert evaluate(records)["counts"]["failed_rollouts"] == 0


def test_threshold_and_environment_extras():
    records = [
        rollout(0, 0, reward=0.5, pass_fraction=0.5, generator="gsm"),
        rollout(0, 1, reward=1.0, pass_fraction=1.0, generator="gsm"),
    ]
    assert evaluate(records)["pass_at_k"]["1"] == pytest.approx(0.5)
    m = evaluate(records, threshold=0.5, fields=ReportFields(numeric=["pass_fraction"], categorical=["generator"]))
    assert m["pass_at_k"]["1"] == pytest.approx(1.0)
    assert m["extras"]["numeric"]["pass_fraction"]["mean"] == pytest.approx(0.75)
    assert m["extras"]["categorical"]["generator"] == {"gsm": {"rollouts": 2, "mean_reward": pytest.approx(0.75)}}
    assert evaluate(records)["extras"] == {"numeric": {}, "boolean": {}, "categorical": {}}  # only what is declared


def test_no_records():
    m = evaluate([])
    assert m["pass_at_k"] == {} and m["counts"]["rollouts"] == 0 and m["reward"]["mean_all"] is None
