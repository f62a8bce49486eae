# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The SWE server's INIT and EVAL around a real task: staging, the agent's diff, scoring."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from prorl_gym.testing import transcript
from resources_servers.swe.app import SweResourcesServer, SweTask
from resources_servers.swe.grading import plan_grading
from resources_servers.swe.repos import repo_env

EXAMPLE = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "data" / "example.jsonl").open()]


@pytest.fixture(scope="module")
def client(serve_once):
    return serve_once(SweResourcesServer, "swe", domain="coding")


def verify(client, row):
    response = client.post("/verify", json=row | {"response": transcript("done", [("submit", "{}")])})
    assert response.status_code == 200, response.text
    return response.json()


def test_workspace_holds_the_repository_at_its_base_commit_only(client):
    row = EXAMPLE[0]
    assert client.post("/seed_session", json=row).status_code == 200
    listed = client.get("/tools").json()
    assert [tool["name"] for tool in listed["tools"]] == ["bash", "editor", "submit"]
    assert listed["ends_rollout"] == ["submit"]
    log = client.post(
        "/bash", json={"command": "pwd; git log --oneline | wc -l; git rev-parse HEAD; git status --short"}
    ).json()
    lines = log["content"].splitlines()
    assert lines[:3] == ["/workspace", "1", row["base_commit"]] and len(lines) == 3  # one commit, clean tree
    # the gold fix is nowhere in the history; the agent's edits are what gets scored
    client.post("/bash", json={"command": f"git apply <<'EOF'\n{row['patch']}EOF"})
    result = verify(client, row)
    assert result["reward"] == 1.0 and result["failure"] is None and result["patch_bytes"] > 0


def test_submitting_without_changes_scores_zero(client):
    row = EXAMPLE[1]
    client.post("/seed_session", json=row)
    result = verify(client, row)
    assert result["reward"] == 0.0 and result["failure"] is None and result["patch_bytes"] == 0


def test_editing_the_tests_does_not_pass_them(client):
    row = EXAMPLE[2]
    client.post("/seed_session", json=row)
    cheat = "printf 'import pytest\\n@pytest.hookimpl(tryfirst=True)\\ndef pytest_runtest_call(item):\\n    pass\\n' > conftest.py"
    client.post("/bash", json={"command": cheat + "; find . -name 'test_*.py' -exec sh -c ': > \"$1\"' _ {} \\;"})
    assert verify(client, row)["reward"] == 0.0


def test_swe_bench_rows_with_json_string_test_lists_are_accepted(client):
    row = EXAMPLE[3] | {
        "FAIL_TO_PASS": json.dumps(EXAMPLE[3]["FAIL_TO_PASS"]),
        "PASS_TO_PASS": json.dumps(EXAMPLE[3]["PASS_TO_PASS"]),
    }
    assert client.post("/seed_session", json=row).status_code == 200
    assert client.post("/release", json={}).json() == {"released": True}


def test_shared_init_stages_a_task_once_and_scores_every_sample_as_unshared(client, serve_once):
    """share_init: the samples of one task start from forks of one staged repository."""
    shared = serve_once(SweResourcesServer, "swe", domain="coding", share_init=True)
    row = EXAMPLE[0]
    apply_gold = f"git apply <<'EOF'\n{row['patch']}EOF"
    rewards = {}
    for name, server in (("unshared", client), ("shared", shared)):
        sessions = []
        for _ in range(3):  # three samples of the task, all seeded before any is verified
            server.cookies.clear()
            assert server.post("/seed_session", json=row).status_code == 200
            sessions.append(dict(server.cookies))
        rewards[name] = []
        for i, cookies in enumerate(sessions):
            server.cookies.clear()
            server.cookies.update(cookies)
            state = server.post("/bash", json={"command": "pwd; git status --short; ls"}).json()["content"]
            assert state.splitlines()[0] == "/workspace" and "M " not in state  # each starts clean
            if i != 1:  # samples 0 and 2 fix the bug; sample 1 submits nothing
                server.post("/bash", json={"command": apply_gold})
            rewards[name].append(verify(server, row)["reward"])
    assert rewards["shared"] == rewards["unshared"] == [1.0, 0.0, 1.0]
    status = shared.get("/status").json()["shared_init"]
    assert status["templates"] == 1 and status["forks"] == 3


def test_a_row_names_a_graded_runner_or_gets_the_one_swebench_runs_for_it():
    """Django's and SymPy's runners are accepted by name; a SWE-bench row without one gets its harness's
    runner from its repository and version; an unknown runner is refused (422), never graded as pytest."""
    tasks = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "data" / "tasks.jsonl").open()]
    for repo, runner, version in (("django/django", "django", "5.2.8"), ("sympy/sympy", "sympy", "1.13")):
        row = next(t for t in tasks if t["repo"] == repo)
        assert SweTask.model_validate(row).test_runner == runner
        task = SweTask.model_validate({k: v for k, v in row.items() if k != "test_runner"} | {"version": version})
        assert task.test_runner is None
        assert plan_grading(task, repo_env(task)).runner.name == runner  # the spec's command: runtests.py, bin/test
    task = SweTask.model_validate({k: v for k, v in tasks[0].items() if k != "test_runner"})
    assert plan_grading(task, repo_env(task)).runner.name == "pytest"
    with pytest.raises(ValidationError, match="test_runner"):
        SweTask.model_validate(tasks[0] | {"test_runner": "nose"})
