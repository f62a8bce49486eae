# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import json
from pathlib import Path

import pytest

from prorl_gym.verify.math_check import check_math

EXAMPLE = Path(__file__).resolve().parents[2] / "resources_servers" / "math" / "data" / "example.jsonl"
MV = {"kind": "math_verify"}


@pytest.mark.parametrize(
    "answer,expected",
    [
        ("0.5", "1/2"),
        (r"\frac{741}{928}", "741/928"),
        ("0.0, -0.1494", "-0.1494, 0.0"),  # roots in any order
        ("6*X**10 + 7*X**7 - 3*X**6", "6*X**10 + 7*X**7 - 3*X**6 + C"),  # + C optional
        ("-553883", "-553883"),
    ],
)
def test_equivalent_answers_are_correct(answer, expected):
    assert check_math(answer, expected, MV)["correct"]


@pytest.mark.parametrize(
    "answer,expected",
    [("-553882", "-553883"), ("1/3", "1/2"), ("0.0", "-0.1494, 0.0"), ("hello", "12"), ("x", "12")],
)
def test_wrong_answers_score_zero(answer, expected):
    assert check_math(answer, expected, MV)["correct"] is False


def test_generator_checker_handles_its_own_formats():
    entry = {"question": "", "answer": "-2.0 - 4.0i", "metadata": {"result": [-2.0, -4.0]}}
    checker = {"kind": "reasoning_gym", "dataset": "complex_arithmetic", "entry": entry}
    assert check_math("-2 - 4i", "-2.0 - 4.0i", checker)["correct"]
    assert check_math("2 - 4i", "-2.0 - 4.0i", checker)["correct"] is False


def test_generator_checker_rejecting_an_answer_is_a_wrong_answer():
    entry = {"question": "", "answer": "5 × 7 × 7", "metadata": {"factors": [5, 7, 7], "number": 245}}
    checker = {"kind": "reasoning_gym", "dataset": "prime_factorization", "entry": entry}
    result = check_math("5*7*7", "5 × 7 × 7", checker)
    assert result["correct"] is False and result["score"] == 0.0 and "answer_rejected" in result


def test_every_example_row_accepts_its_gold_answer_and_rejects_a_wrong_one():
    for line in EXAMPLE.read_text().splitlines():
        row = json.loads(line)
        assert check_math(row["expected_answer"], row["expected_answer"], row["checker"])["correct"], row["task_id"]
        assert check_math("0", row["expected_answer"], row["checker"])["correct"] is False, row["task_id"]


def test_a_malformed_checker_is_an_error_not_a_score():
    with pytest.raises(ValueError):
        check_math("1", "1", {"kind": "nonsense"})


@pytest.mark.parametrize(
    "answer,expected,correct",
    [
        ("-\\frac{1}{2}", "\\cos(\\frac{2\\pi}{7})+\\cos(\\frac{4\\pi}{7})+\\cos(\\frac{6\\pi}{7})", True),
        ("\\frac{1}{8}", "\\prod_{k=1}^{3}\\cos(\\frac{k\\pi}{7})", True),
        ("\\frac{1}{7}", "\\prod_{k=1}^{3}\\cos(\\frac{k\\pi}{7})", False),
        ("\\frac{355}{113}", "\\pi", False),  # close, not equal: never proven
        ("\\cos(\\frac{\\pi}{7})", "\\frac{1}{2}", False),
    ],
)
def test_identities_math_verify_misses_are_proven_exactly_and_only_those(answer, expected, correct):
    result = check_math(answer, expected, {"kind": "math_verify"})
    assert result["correct"] is correct
    assert (result.get("proof") == "closed_form") is (correct and "cos" in expected)
