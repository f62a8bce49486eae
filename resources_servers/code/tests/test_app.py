# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import json
from pathlib import Path

import pytest

from prorl_gym.testing import STOP_OTHER_SHELLS, transcript
from resources_servers.code.app import CodeResourcesServer
from resources_servers.code.scripted import wrong_solution

EXAMPLE = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "data" / "example.jsonl").open()]
FENCED = [row for row in EXAMPLE if not row.get("answer_file")]
FILE_ROW = next(row for row in EXAMPLE if row.get("answer_file"))
EVAL = {"limits": {"per_test_timeout_s": 3, "total_timeout_s": 30}}


@pytest.fixture(scope="module")
def client(serve_once):
    return serve_once(CodeResourcesServer, "code", domain="coding", eval=EVAL)


def answer(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code.rstrip()}\n```"


def verify(client, row, text, tool_calls=(("bash", '{"command": "ls"}'),)):
    response = client.post("/verify", json=row | {"response": transcript(text, list(tool_calls))})
    assert response.status_code == 200
    return response.json()


def test_tools_are_python_bash_and_editor(client):
    tools = client.get("/tools").json()["tools"]
    assert [tool["name"] for tool in tools] == ["python", "bash", "editor"]
    assert all(tool["type"] == "function" and tool["parameters"]["type"] == "object" for tool in tools)


def test_a_rollout_edits_and_runs_code_then_verify_scores_and_closes_the_sandbox(client):
    row = EXAMPLE[0]
    assert client.post("/seed_session", json=row).status_code == 200
    created = client.post(
        "/editor", json={"command": "create", "path": "solution.py", "file_text": row["canonical_solution"]}
    )
    assert created.json()["content"].startswith("File created")
    command = "python -c 'import solution; print(solution.has_close_elements([1.0, 1.1], 0.5))'"
    run = client.post("/bash", json={"command": command})
    assert run.json()["content"] == "True\n"
    result = verify(client, row, answer(row["canonical_solution"]))
    assert result["reward"] == 1.0 and result["failure"] is None and result["answer_problem"] is None
    assert (
        result["tests_passed"] == result["tests_total"] == len(row["tests"]["asserts"])
        and result["pass_fraction"] == 1.0
    )
    assert result["num_tool_calls"] == 1 and result["task_id"] == row["task_id"]  # the row passes through
    gone = client.post("/bash", json={"command": "true"})
    assert gone.status_code == 409 and gone.json()["error"]["type"] == "unknown_session"


def test_the_tests_never_enter_the_agents_sandbox(client):
    row = EXAMPLE[0]
    client.post("/seed_session", json=row)
    needle = row["tests"]["asserts"][0][-25:]
    skip = " ".join(f"--exclude-dir={d}" for d in ("proc", "sys", "dev", "usr", ".venvs"))
    search = {"command": f"grep -rlsF {skip} -- {json.dumps(needle)} / 2>/dev/null; echo done"}
    assert client.post("/bash", json=search).json()["content"] == "done\n"
    client.post("/editor", json={"command": "create", "path": "/tmp/control.txt", "file_text": needle})
    assert client.post("/bash", json=search).json()["content"] == "/tmp/control.txt\ndone\n"  # the search works


@pytest.mark.parametrize("row", FENCED, ids=[r["task_id"] for r in FENCED])
def test_gold_scores_one_and_wrong_scores_zero(client, row):
    client.post("/seed_session", json=row)
    assert verify(client, row, answer(row["canonical_solution"]))["reward"] == 1.0
    client.post("/seed_session", json=row)
    wrong = verify(client, row, answer(wrong_solution(row)))
    assert wrong["reward"] == 0.0 and wrong["failure"] is None and wrong["reason"]


def test_an_answer_file_is_read_from_the_agents_sandbox(client):
    row = FILE_ROW
    client.post("/seed_session", json=row)
    client.post(
        "/editor", json={"command": "create", "path": row["answer_file"], "file_text": row["canonical_solution"]}
    )
    result = verify(client, row, "Done: my solution is in solution.py.")
    assert result["reward"] == 1.0 and result["solution_chars"] == len(row["canonical_solution"])
    client.post("/seed_session", json=row)
    client.post("/editor", json={"command": "create", "path": row["answer_file"], "file_text": wrong_solution(row)})
    assert verify(client, row, answer(row["canonical_solution"]))["reward"] == 0.0  # the message is not the answer
    client.post("/seed_session", json=row)
    missing = verify(client, row, "I could not do it.")
    assert missing["reward"] == 0.0 and missing["answer_problem"] == "answer_file_missing"


def test_starter_code_is_staged_in_the_answer_file(client):
    row = FILE_ROW | {"starter_code": "def main():\n    pass\n"}
    client.post("/seed_session", json=row)
    assert (
        client.post("/bash", json={"command": f"cat {row['answer_file']}"}).json()["content"]
        == "def main():\n    pass\n"
    )
    client.post("/release", json={})


@pytest.mark.parametrize(
    "text,problem",
    [
        ("I think the answer is to loop over pairs.", "no_code_block"),
        ("", "no_code_block"),
        ("```python\ndef f():\n    pass\n```\nor maybe\n```python\ndef g():\n    pass\n```", "multiple_code_blocks"),
        ("x" * 500_000, "no_code_block"),
    ],
)
def test_answers_without_one_code_block_are_wrong_not_errors(client, text, problem):
    row = EXAMPLE[0]
    client.post("/seed_session", json=row)
    result = verify(client, row, text)
    assert result["reward"] == 0.0 and result["answer_problem"] == problem and result["failure"] is None


def test_ending_on_a_tool_call_has_no_answer(client):
    row = EXAMPLE[0]
    client.post("/seed_session", json=row)
    result = client.post("/verify", json=row | {"response": transcript(None, [("bash", "{}")])}).json()
    assert result["reward"] == 0.0 and result["answer_problem"] == "no_code_block"


def test_a_row_whose_tests_cannot_run_is_an_eval_error(client):
    row = EXAMPLE[0] | {
        "tests": {"kind": "functional", "entry_point": "f", "asserts": ["assert candidate(print) is None"]}
    }
    client.post("/seed_session", json=row)
    result = verify(client, row, answer("def f(g):\n    return None\n"))
    assert result["failure"]["type"] == "eval_error" and result["failure"]["stage"] == "eval"


def test_no_eval_sandbox_is_an_eval_error(serve):
    no_sandboxes = {"backend": {"kind": "apptainer", "binary": "/nonexistent/apptainer"}, "image": "x.sif"}
    client = serve(CodeResourcesServer, "code", domain="coding", sandbox=no_sandboxes)
    row = EXAMPLE[0]
    result = verify(client, row, answer(row["canonical_solution"]))
    assert result["failure"]["type"] == "eval_error" and result["reward"] == 0.0
    gone = verify(client, FILE_ROW, "done")  # and no agent sandbox to read the answer file from
    assert gone["failure"]["type"] == "eval_error"


@pytest.mark.parametrize(
    "change",
    [
        {"tests": None},
        {"tests": {"kind": "stdio", "cases": []}},
        {"tests": {"kind": "functional", "entry_point": "f", "asserts": ["assert f(1) =="]}},
        {"limits": {"per_test_timout_s": 1}},
        {"limits": {"memory_mb": 1}},
    ],
)
def test_a_bad_row_is_rejected_at_init(client, change):
    row = {k: v for k, v in (EXAMPLE[0] | change).items() if v is not None}
    assert client.post("/seed_session", json=row).status_code == 422


def test_row_limits_override_the_servers(client):
    row = EXAMPLE[2] | {"limits": {"per_test_timeout_s": 0.5, "max_timeouts": 1}}
    client.post("/seed_session", json=row)
    result = verify(client, row, answer("import time\ntime.sleep(30)\n"))
    assert result["test_statuses"] == {"timeout": 1, "not_run": len(row["tests"]["cases"]) - 1}
    assert result["reason"].startswith("timeout: no result within 0.5s")


def test_an_answer_file_the_sandbox_cannot_deliver_is_an_infra_failure_not_a_zero(serve):
    """The sandbox's own file shell stuck (here stopped from the agent's shell, as a fault would):
    the verifier could not look at the answer, so it may not score it. A FIFO for an answer, though,
    is the agent's doing: refused at once and scored 0."""
    client = serve(CodeResourcesServer, "code", domain="coding", eval=EVAL, sandbox={"file_timeout_s": 2.0})
    row = FILE_ROW
    client.post("/seed_session", json=row)
    client.post("/editor", json={"command": "create", "path": "notes.txt", "file_text": "the file shell is up"})
    assert client.post("/bash", json={"command": STOP_OTHER_SHELLS}).json()["content"] == "stopped\n"
    stuck = verify(client, row, "My solution is saved.")
    assert stuck["failure"] is not None and stuck["failure"]["infra"], stuck
    assert "SandboxUnresponsiveError" in stuck["failure"]["message"]

    client.post("/seed_session", json=row)
    client.post("/bash", json={"command": f"mkfifo {row['answer_file']}"})
    fifo = verify(client, row, "My solution is saved.")
    assert fifo["failure"] is None and fifo["reward"] == 0.0 and fifo["answer_problem"] == "answer_file_unreadable"
