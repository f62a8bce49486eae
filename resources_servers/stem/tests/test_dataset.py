# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The hand-checked set, checked: every gold answer scores 1 and a wrong one 0 through the
real server; every reference snippet runs in the sandbox and its printed result scores 1;
every reference search finds its source document first; the committed files are current."""

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from prorl_gym.testing import transcript
from resources_servers.stem.check import parse_spec
from resources_servers.stem.scripted import gold_answer, script, wrong_answer
from resources_servers.stem.search import Bm25Backend

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "resources_servers" / "stem" / "data"


def read_jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


HAND = read_jsonl("stem.jsonl")
IDS = [row["task_id"] for row in HAND]


def load_prepare_stem():
    return importlib.import_module("resources_servers.stem.data.prepare")


def verify(client, row, text):
    assert client.post("/seed_session", json=row).status_code == 200
    response = client.post("/verify", json=row | {"response": transcript(text)})
    assert response.status_code == 200
    return response.json()


def test_the_set_covers_subjects_and_kinds():
    assert len(HAND) >= 30
    subjects = Counter(row["subject"] for row in HAND)
    kinds = Counter(row["answer"]["kind"] for row in HAND)
    assert set(subjects) == {"physics", "chemistry", "biology", "engineering"} and min(subjects.values()) >= 5
    assert set(kinds) == {"numeric", "choice", "symbolic"} and min(kinds.values()) >= 4
    assert len({row["responses_create_params"]["input"][-1]["content"] for row in HAND}) == len(HAND)
    for row in HAND:
        parse_spec(row["answer"])


def test_committed_files_match_the_sources():
    prepare = load_prepare_stem()
    assert prepare.hand_rows(DATA / "questions.yaml") == HAND, "run python resources_servers/stem/data/prepare.py"
    by_id = {row["task_id"]: row for row in HAND}
    example = read_jsonl("example.jsonl")
    assert len(example) == 5 and all(by_id[row["task_id"]] == row for row in example)
    assert {row["answer"]["kind"] for row in example} == {"numeric", "choice", "symbolic"}


@pytest.mark.parametrize("row", HAND, ids=IDS)
def test_gold_scores_one_and_wrong_scores_zero(client, row):
    gold = verify(client, row, f"The answer is \\boxed{{{gold_answer(row['answer'])}}}.")
    assert gold["reward"] == 1.0 and gold["failure"] is None, gold.get("check")
    wrong = verify(client, row, f"The answer is \\boxed{{{wrong_answer(row['answer'])}}}.")
    assert wrong["reward"] == 0.0 and wrong["failure"] is None, wrong.get("check")


def test_every_reference_computation_runs_in_the_sandbox_and_scores_one(client):
    assert client.post("/seed_session", json=HAND[0]).status_code == 200
    outputs = {}
    for row in HAND:
        if code := row["reference"].get("python"):
            output = client.post("/python", json={"code": code}).json()["content"]
            assert "Error" not in output and "Traceback" not in output, (row["task_id"], output)
            outputs[row["task_id"]] = output.strip()
    assert client.post("/release", json={}).json() == {"released": True}
    numeric = [row for row in HAND if row["answer"]["kind"] == "numeric"]
    assert all(row["task_id"] in outputs for row in numeric), "every numeric question has its computation"
    for row in numeric:
        result = verify(client, row, f"\\boxed{{{outputs[row['task_id']]}}}")
        assert result["reward"] == 1.0, (row["task_id"], outputs[row["task_id"]], result.get("check"))


def test_every_reference_search_finds_its_source_first():
    backend = Bm25Backend(DATA / "corpus")
    for row in HAND:
        reference = row["reference"]
        assert [p.source for p in backend._rank(reference["search"], 3)][:1] == [reference["source"]], row["task_id"]


@pytest.mark.parametrize("mode", ["gold", "wrong", "malformed"])
def test_the_scripts_end_with_one_boxed_answer(mode):
    for row in HAND:
        steps = script(row, mode)
        assert steps[-1].content.count("\\boxed{") == 1 and not steps[-1].tool_calls
        if mode != "malformed":
            assert [c["name"] for s in steps[:-1] for c in s.tool_calls] == ["search", "python"]
