# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import json
from pathlib import Path

import pytest

from prorl_gym.testing import transcript
from resources_servers.stem.app import StemResourcesServer
from resources_servers.stem.scripted import gold_answer, wrong_answer

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLE = [json.loads(line) for line in (DATA / "example.jsonl").open()]
NUMERIC = next(r for r in EXAMPLE if r["task_id"] == "stem/hand/c08")  # 1.1855 g
CHOICE = next(r for r in EXAMPLE if r["answer"]["kind"] == "choice")
SYMBOLIC = next(r for r in EXAMPLE if r["answer"]["kind"] == "symbolic")


def verify(client, row, text, seed=True):
    if seed:
        assert client.post("/seed_session", json=row).status_code == 200
    response = client.post("/verify", json=row | {"response": transcript(text, [("search", '{"query": "x"}')])})
    assert response.status_code == 200
    return response.json()


def test_tools_are_python_and_search(client):
    tools = client.get("/tools").json()["tools"]
    assert [tool["name"] for tool in tools] == ["python", "search"]
    search = tools[1]["parameters"]
    assert search["required"] == ["query"] and search["additionalProperties"] is False


def test_a_rollout_searches_computes_then_verify_scores_and_closes_the_sandbox(client):
    row = NUMERIC
    assert client.post("/seed_session", json=row).status_code == 200
    found = client.post("/search", json={"query": row["reference"]["search"]}).json()
    assert found["content"].startswith("[1] ") and row["reference"]["source"] in found["content"]
    assert found["metadata"]["sources"][0] == row["reference"]["source"]
    python = client.post("/python", json={"code": "import scipy.constants as c; print(round(c.g, 3))"}).json()
    assert python["content"] == "9.807\n"
    result = verify(client, row, f"So \\boxed{{{gold_answer(row['answer'])}}}.", seed=False)
    assert result["reward"] == 1.0 and result["failure"] is None and result["answer_kind"] == "numeric"
    assert result["num_tool_calls"] == 1 and result["check"]["correct"] is True
    gone = client.post("/search", json={"query": "gravity"})
    assert gone.status_code == 409 and gone.json()["error"]["type"] == "unknown_session"


@pytest.mark.parametrize("row", EXAMPLE, ids=[r["task_id"] for r in EXAMPLE])
def test_gold_scores_one_and_wrong_scores_zero(client, row):
    assert verify(client, row, f"\\boxed{{{gold_answer(row['answer'])}}}")["reward"] == 1.0
    assert verify(client, row, f"\\boxed{{{wrong_answer(row['answer'])}}}")["reward"] == 0.0


@pytest.mark.parametrize(
    "row,text,problem",
    [
        (NUMERIC, "", "no_boxed_answer"),
        (NUMERIC, "The answer is 1.19 g.", "no_boxed_answer"),
        (NUMERIC, "\\boxed{1.19 g} or \\boxed{2 g}", "multiple_boxed_answers"),
        (NUMERIC, "\\boxed{}", "empty_boxed_answer"),
        (NUMERIC, "x" * 500_000, "no_boxed_answer"),
        (NUMERIC, "\\boxed{" + "9" * 100_000 + " g}", "answer_too_long"),
        (NUMERIC, "\\boxed{1.19}", "missing_unit"),
        (NUMERIC, "\\boxed{1.19 mL}", "wrong_dimension"),
        (NUMERIC, "\\boxed{1.19 g**9**9**9}", "unparseable_unit"),
        (CHOICE, "\\boxed{A, C}", "multiple_choices"),
        (CHOICE, "\\boxed{E}", "not_an_option"),
        (SYMBOLIC, "\\boxed{" + "N+" * 1000 + "N}", "answer_too_long"),
    ],
)
def test_adversarial_answers_are_wrong_not_errors(client, row, text, problem):
    result = verify(client, row, text)
    assert result["reward"] == 0.0 and result["answer_problem"] == problem and result["failure"] is None


def test_unit_conversions_are_accepted(client):
    for text in ["\\boxed{1185.5 mg}", "\\boxed{0.0011855\\,\\mathrm{kg}}", "\\boxed{1.19 \\text{ g}}"]:
        assert verify(client, NUMERIC, text)["reward"] == 1.0, text
    celsius = next(r for r in EXAMPLE if r["answer"].get("unit") == "degC")
    for text in ["\\boxed{23.5\\,^{\\circ}\\mathrm{C}}", "\\boxed{296.67 K}", "\\boxed{74.3 °F}"]:
        assert verify(client, celsius, text)["reward"] == 1.0, text


def test_symbolic_answers_in_latex_or_python_syntax(client):
    for text in [
        "\\boxed{rN(1 - N/K)}",
        "\\boxed{r*N - r*N**2/K}",
        "\\boxed{\\frac{dN}{dt} = rN\\left(1-\\frac{N}{K}\\right)}",
    ]:
        assert verify(client, SYMBOLIC, text)["reward"] == 1.0, text
    assert verify(client, SYMBOLIC, "\\boxed{rN}")["reward"] == 0.0


@pytest.mark.parametrize(
    "answer",
    [
        {"kind": "essay"},
        {"kind": "numeric", "value": 9.81, "unit": "furlongs_per_blob"},
        {"kind": "numeric", "value": 9.81, "unit": "m/s^2", "tolerance": 0.1},
        {"kind": "numeric", "value": 20, "unit": "degC"},  # °C needs abs_tol
        {"kind": "choice", "correct": "E", "options": ["A", "B", "C", "D"]},
        {"kind": "symbolic", "expression": "x**"},
        {"kind": "symbolic", "expression": "\\frac{1}{x"},
        "B",
        None,
    ],
)
def test_a_malformed_answer_spec_is_an_eval_error_not_reward_zero(client, answer):
    row = NUMERIC | {"answer": answer}
    result = verify(client, row, "\\boxed{1}")
    assert result["failure"]["type"] == "eval_error" and result["failure"]["stage"] == "eval"
    assert "spec" in result["failure"]["message"] or "parse" in result["failure"]["message"]


def test_a_malformed_spec_is_an_eval_error_even_without_an_answer(client):
    result = verify(client, NUMERIC | {"answer": {"kind": "numeric"}}, "no answer here")
    assert result["failure"]["type"] == "eval_error"


def test_a_row_without_answer_spec_is_rejected_at_init(client):
    row = {k: v for k, v in NUMERIC.items() if k != "answer"}
    assert client.post("/seed_session", json=row).status_code == 422


def test_bad_search_arguments_are_a_422(client):
    client.post("/seed_session", json=NUMERIC)
    assert client.post("/search", json={"q": "gravity"}).status_code == 422
    assert client.post("/search", json={"query": " "}).status_code == 422
    assert client.post("/search", json={"query": "x" * 501}).status_code == 422
    assert client.post("/search", json={"query": "zzzz qqqq"}).json()["content"] == "No results. Try other keywords."
    assert client.post("/release", json={}).json() == {"released": True}


def test_an_unreachable_search_api_is_a_message_for_the_policy(serve):
    config = {"backend": "http", "url": "http://127.0.0.1:9/search", "timeout_s": 2}
    client = serve(StemResourcesServer, "stem", verifier_workers=0, domain="knowledge", search=config)
    client.post("/seed_session", json=NUMERIC)
    response = client.post("/search", json={"query": "gravity"})
    assert response.status_code == 200
    assert response.json()["content"].startswith("[search failed: search API unreachable")
