# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import json
from pathlib import Path

import pytest

from prorl_gym.testing import transcript
from resources_servers.math.app import MathResourcesServer

EXAMPLE = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "data" / "example.jsonl").open()]


@pytest.fixture(scope="module")
def client(serve_once):
    return serve_once(MathResourcesServer, "math", verifier_workers=1, domain="math")


def verify(client, row, text):
    response = client.post("/verify", json=row | {"response": transcript(text, [("python", '{"code": "1"}')])})
    assert response.status_code == 200
    return response.json()


def test_tools_are_python_and_bash(client):
    listed = client.get("/tools").json()
    assert [tool["name"] for tool in listed["tools"]] == ["python", "bash"] and listed["ends_rollout"] == []
    assert all(tool["type"] == "function" and tool["parameters"]["type"] == "object" for tool in listed["tools"])


def test_a_rollout_uses_the_sandbox_then_verify_scores_and_closes_it(client):
    row = EXAMPLE[0]
    assert client.post("/seed_session", json=row).status_code == 200
    bash = client.post("/bash", json={"command": "echo $((6*7)); false"}).json()
    assert bash["content"].startswith("42\n") and "exit code 1" in bash["content"]
    assert bash["metadata"]["exit_code"] == 1
    python = client.post("/python", json={"code": "import sympy; x = sympy.Integer(6) * 7; x"}).json()
    assert python["content"] == "42\n"
    result = verify(client, row, f"So the answer is \\boxed{{{row['expected_answer']}}}.")
    assert result["reward"] == 1.0 and result["failure"] is None
    assert result["extracted_answer"] == row["expected_answer"] and result["num_tool_calls"] == 1
    # the sandbox is gone after verify
    gone = client.post("/bash", json={"command": "true"})
    assert gone.status_code == 409 and gone.json()["error"]["type"] == "unknown_session"


def test_verify_answers_the_transcript_as_sent_token_ids_included(client):
    """What NeMo RL trains on comes back from /verify unchanged (serialised by pydantic, as
    FastAPI's own encoder would: aliases, every field)."""
    row = EXAMPLE[0]
    response = transcript(f"\\boxed{{{row['expected_answer']}}}", [("python", '{"code": "1"}')])
    ids = {
        "prompt_token_ids": list(range(3000)),
        "generation_token_ids": [7, 8, 9],
        "generation_log_probs": [-0.5] * 3,
    }
    response["output"][-1] |= ids
    sent = row | {"response": response}
    result = client.post("/verify", json=sent).json()
    assert result["reward"] == 1.0
    assert {k: result["response"]["output"][-1][k] for k in ids} == ids


@pytest.mark.parametrize("row", EXAMPLE, ids=[r["generator"] for r in EXAMPLE])
def test_gold_scores_one_and_wrong_scores_zero(client, row):
    client.post("/seed_session", json=row)
    assert verify(client, row, f"\\boxed{{{row['expected_answer']}}}")["reward"] == 1.0
    client.post("/seed_session", json=row)
    assert verify(client, row, "\\boxed{0}")["reward"] == 0.0


@pytest.mark.parametrize(
    "text,problem",
    [
        ("The answer is -553883.", "no_boxed_answer"),
        ("", "no_boxed_answer"),
        ("\\boxed{-553883} or \\boxed{1}", "multiple_boxed_answers"),
        ("x" * 500_000, "no_boxed_answer"),
    ],
)
def test_adversarial_answers_are_wrong_not_errors(client, text, problem):
    row = EXAMPLE[0]
    client.post("/seed_session", json=row)
    result = verify(client, row, text)
    assert result["reward"] == 0.0 and result["answer_problem"] == problem and result["failure"] is None


def test_ending_on_a_tool_call_has_no_answer(client):
    row = EXAMPLE[0]
    client.post("/seed_session", json=row)
    response = client.post("/verify", json=row | {"response": transcript(None, [("python", "{}")])}).json()
    assert response["reward"] == 0.0 and response["answer_problem"] == "no_boxed_answer"


def test_a_malformed_checker_is_an_eval_error_not_reward_zero(client):
    row = EXAMPLE[0] | {"checker": {"kind": "nonsense"}}
    client.post("/seed_session", json=row)
    result = verify(client, row, "\\boxed{1}")
    assert result["failure"]["type"] == "eval_error" and result["failure"]["stage"] == "eval"


def test_a_row_without_expected_answer_is_rejected_at_init(client):
    row = {k: v for k, v in EXAMPLE[0].items() if k != "expected_answer"}
    assert client.post("/seed_session", json=row).status_code == 422


def test_bad_tool_arguments_are_a_422(client):
    client.post("/seed_session", json=EXAMPLE[0])
    assert client.post("/bash", json={"cmd": "ls"}).status_code == 422
    assert client.post("/release", json={}).json() == {"released": True}
    assert client.post("/release", json={}).json() == {"released": False}


@pytest.fixture(scope="module")
def last_boxed_client(serve_once):
    return serve_once(MathResourcesServer, "math_last", verifier_workers=1, domain="math", boxed_answers="last")


@pytest.mark.parametrize(
    "text,one,last",
    [
        ("\\boxed{1} no wait, \\boxed{-553883}", (0.0, "multiple_boxed_answers"), (1.0, None)),
        ("\\boxed{-553883} no wait, \\boxed{1}", (0.0, "multiple_boxed_answers"), (0.0, None)),
        ("\\boxed{-553883} so \\boxed{-553883}", (1.0, None), (1.0, None)),
        ("\\boxed{-553883} then \\boxed{}", (0.0, "multiple_boxed_answers"), (0.0, "empty_boxed_answer")),
    ],
)
def test_several_boxed_answers_are_none_or_the_last_as_configured(client, last_boxed_client, text, one, last):
    row = EXAMPLE[0] | {"expected_answer": "-553883", "checker": {"kind": "math_verify"}}
    for server, (reward, problem) in ((client, one), (last_boxed_client, last)):
        server.post("/seed_session", json=row)
        result = verify(server, row, text)
        assert (result["reward"], result["answer_problem"], result["failure"]) == (reward, problem, None)


def test_metrics_count_sandboxes_kernels_tool_calls_and_verifies(client):
    def value(text: str, sample: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(sample))

    before = client.get("/metrics").text
    row = EXAMPLE[0]
    client.post("/seed_session", json=row)
    client.post("/python", json={"code": "1 + 1"})
    client.post("/bash", json={"command": "true"})
    verify(client, row, f"\\boxed{{{row['expected_answer']}}}")
    after = client.get("/metrics").text
    for sample, grown in [
        ("prorl_sandbox_starts_total", 1),
        ("prorl_kernel_starts_total", 1),
        ('prorl_tool_call_seconds_count{outcome="ok",tool="python"}', 1),
        ('prorl_tool_call_seconds_count{outcome="ok",tool="bash"}', 1),
        ('prorl_verify_seconds_count{outcome="ok"}', 1),
    ]:
        assert value(after, sample) - value(before, sample) == grown, sample
    assert value(after, "prorl_sandboxes_live") == 0
