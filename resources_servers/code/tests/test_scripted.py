# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import json
from pathlib import Path

import pytest

from resources_servers.code.check import extract_code
from resources_servers.code.scripted import script, wrong_solution

EXAMPLE = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "data" / "example.jsonl").open()]


def names(steps) -> list[str]:
    return [call["name"] for step in steps for call in step.tool_calls]


@pytest.mark.parametrize("row", EXAMPLE, ids=[r["task_id"] for r in EXAMPLE])
def test_gold_writes_runs_and_answers_with_the_canonical_solution(row):
    steps = script(row, "gold")
    assert names(steps) == (["python"] if row.get("answer_file") and row.get("starter_code") else ["editor"]) + [
        "bash"
    ]
    written = json.loads(steps[0].tool_calls[0]["arguments"])
    assert written.get("file_text") == row["canonical_solution"] or repr(row["canonical_solution"]) in written["code"]
    final = steps[-1].content
    if row.get("answer_file"):
        assert "```" not in final and row["answer_file"] in final
    else:
        assert extract_code(final) == (row["canonical_solution"].rstrip() + "\n", None)


@pytest.mark.parametrize("row", EXAMPLE, ids=[r["task_id"] for r in EXAMPLE])
def test_wrong_answers_with_a_plausible_stub(row):
    steps = script(row, "wrong")
    if not row.get("answer_file"):
        code, _ = extract_code(steps[-1].content)
        assert code.rstrip() == wrong_solution(row).rstrip() and code != row["canonical_solution"]
        compile(code, "wrong", "exec")


def test_malformed_starts_with_three_broken_calls_then_the_gold_answer():
    row = EXAMPLE[0]
    steps = script(row, "malformed")
    assert names(steps) == ["editor", "run_tests", "bash"]
    assert steps[0].tool_calls[0]["arguments"].endswith('"a.py"')  # cut-off JSON
    assert extract_code(steps[-1].content)[0] == row["canonical_solution"].rstrip() + "\n"


def test_more_tool_calls_repeat_the_run():
    assert names(script(EXAMPLE[0], "gold", tool_calls=4)) == ["editor", "bash", "bash", "bash"]


def test_a_row_without_a_canonical_solution_cannot_be_played():
    with pytest.raises(ValueError, match="canonical_solution"):
        script(EXAMPLE[0] | {"canonical_solution": None}, "gold")
