# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The SWE server's INIT and EVAL around a real task: staging, the agent's diff, scoring."""

import json
from pathlib import Path

import pytest

from prorl_gym.testing import transcript
from resources_servers.swe.app import SweResourcesServer

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
