# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The committed splits' golds mean what they say, for every generator: the answer written as a model
writes it (LaTeX) scores 1.0 with the row's own checker, a fragment of it scores 0.0 (data/golds.py)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from prorl_gym.jsonl import read_jsonl
from prorl_gym.verify.math_check import check_math
from resources_servers.math.data.golds import fragments, model_latex
from resources_servers.math.data.prepare import GENERATORS

DATA = Path(__file__).resolve().parents[1] / "data"
VALIDATION = read_jsonl(DATA / "validation.jsonl")
# every validation row, and the first 20 train rows of each generator
_by_generator: dict[str, list[dict]] = defaultdict(list)
for _row in read_jsonl(DATA / "train.jsonl"):
    if len(_by_generator[_row["generator"]]) < 20:
        _by_generator[_row["generator"]].append(_row)
ROWS = VALIDATION + [r for rows in _by_generator.values() for r in rows]


def test_every_generator_is_in_the_splits():
    assert {r["generator"] for r in VALIDATION} == set(GENERATORS) == set(_by_generator)


@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_the_gold_scores_as_a_model_writes_it_and_a_fragment_does_not(generator):
    rows = [r for r in ROWS if r["generator"] == generator]
    for row in rows:
        expected, checker = row["expected_answer"], row["checker"]
        written = model_latex(expected) if checker["kind"] == "math_verify" else expected
        assert check_math(written, expected, checker)["correct"], (row["task_id"], written)
        for fragment in fragments(expected):
            assert not check_math(fragment, expected, checker)["correct"], (row["task_id"], fragment)


def test_antiderivatives_are_judged_on_what_they_mean():
    """The generator writes Python; the row carries its LaTeX form, which math-verify reads whole."""
    row = next(r for r in VALIDATION if r["generator"] == "simple_integration")
    assert row["answer_source"].endswith("+ C") and "**" in row["answer_source"]
    checker, expected = row["checker"], row["expected_answer"]
    assert checker["kind"] == "math_verify" and "^" in expected
    biggest = max(map(int, re.findall(r"\d+", row["answer_source"])))
    assert not check_math(str(biggest), expected, checker)["correct"]  # was 1.0 on the Python gold
    assert check_math(expected.replace("x", "X"), expected, checker)["correct"]
