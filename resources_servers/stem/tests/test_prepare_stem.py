# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The SCP-116K-style and GPQA-style converters of data/prepare.py."""

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from resources_servers.stem.check import check_answer, parse_spec
from resources_servers.stem.scripted import script

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "resources_servers" / "stem" / "data" / "samples"


@pytest.fixture(scope="module")
def prepare():
    return importlib.import_module("resources_servers.stem.data.prepare")


@pytest.mark.parametrize(
    "solution,answer,why",
    [
        ("a = 3.0 m/s^2, so \\boxed{3.0\\ \\mathrm{m/s^2}}", "3.0\\ \\mathrm{m/s^2}", ""),
        ("\\boxed{2} and again \\boxed{2}", "2", ""),  # the same answer twice is one answer
        ("W = 176.4 J.\n\nFinal answer: 176 J", "176 J", ""),
        ("(a) \\boxed{6.0} (b) \\boxed{9.0}", None, "multiple_answers"),
        ("Rayleigh scattering explains it.", None, "no_final_answer"),
    ],
)
def test_scp_final_answer(prepare, solution, answer, why):
    assert prepare.scp_final_answer(solution) == (answer, why)


@pytest.mark.parametrize(
    "answer,spec",
    [
        ("3.0\\ \\mathrm{m/s^2}", {"kind": "numeric", "value": 3.0, "unit": "m/s^2", "rel_tol": 0.02}),
        ("2.00", {"kind": "numeric", "value": 2.0, "rel_tol": 0.02}),
        (
            "36.85\\,^{\\circ}\\mathrm{C}",
            {"kind": "numeric", "value": 36.85, "unit": "degC", "rel_tol": 0.0, "abs_tol": 0.5},
        ),
        ("V_2 = \\frac{P_1 V_1}{P_2}", {"kind": "symbolic", "expression": "\\frac{P_1 V_1}{P_2}"}),
        ("\\text{it increases}", None),
    ],
)
def test_scp_answers_become_specs_the_checker_accepts(prepare, answer, spec):
    made, why = prepare.scp_spec(answer)
    assert made == spec, why
    if spec and spec["kind"] == "numeric":
        assert check_answer(answer, parse_spec(spec))["correct"]


def test_gpqa_rows_are_shuffled_reproducibly(prepare, tmp_path):
    items = [
        {
            "Record ID": f"r{i}",
            "Question": f"Question {i}?",
            "Correct Answer": "right",
            "Incorrect Answer 1": "w1",
            "Incorrect Answer 2": "w2",
            "Incorrect Answer 3": "w3",
            "High-level domain": "Physics",
        }
        for i in range(200)
    ]
    path = tmp_path / "gpqa.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    rows = prepare.convert_gpqa(path, seed=1, skipped=Counter())
    again = prepare.convert_gpqa(path, seed=1, skipped=Counter())
    reversed_file = tmp_path / "reversed.jsonl"
    reversed_file.write_text("".join(json.dumps(item) + "\n" for item in reversed(items)))
    assert rows == again and rows == list(reversed(prepare.convert_gpqa(reversed_file, seed=1, skipped=Counter())))
    letters = Counter(row["answer"]["correct"] for row in rows)
    assert set(letters) == set("ABCD") and min(letters.values()) > 25  # no position bias
    for row in rows:
        prompt = row["responses_create_params"]["input"][-1]["content"]
        assert f"({row['answer']['correct']}) right" in prompt and row["subject"] == "physics"


def test_the_committed_samples_convert_with_skips_counted(prepare):
    skipped = Counter()
    scp = prepare.convert_scp(SAMPLES / "scp116k_sample.jsonl", skipped)
    gpqa = prepare.convert_gpqa(SAMPLES / "gpqa_sample.csv", 1, skipped)
    assert len(scp) == 6 and len(gpqa) == 4
    assert skipped == Counter(
        {"scp/multiple_answers": 1, "scp/text_answer": 1, "scp/no_final_answer": 1, "gpqa/duplicate_options": 1}
    )
    for row in scp + gpqa:
        parse_spec(row["answer"])
        steps = script(row, "gold")  # no reference: search the question, print the answer
        assert [c["name"] for s in steps[:-1] for c in s.tool_calls] == ["search", "python"]
        assert steps[-1].content.count("\\boxed{") == 1
