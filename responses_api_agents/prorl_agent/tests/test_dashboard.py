# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The agent's dashboard (prorl_gym/dashboard) fed by its /run rollouts: counters, the inspector."""

import orjson
from fastapi.testclient import TestClient

from responses_api_agents.prorl_agent.tests.test_app import ROW, build_agent
from tests.support.fakes import FakeClient, FakeResponse, model_turns, resources


def fake_peers() -> FakeClient:
    fake = FakeClient.create()
    resources(fake)
    call, answer = model_turns(("calls", [("bash", '{"command": "ls"}')])), model_turns(("text", "1"))

    def policy(body):  # every rollout: a tool call, then the answer
        called = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in body["input"])
        return answer(body) if called else call(body)

    fake.route("model", "/v1/responses", policy)
    return fake


def test_run_rollouts_are_counted_searchable_and_open_turn_by_turn():
    fake = fake_peers()
    agent = build_agent(fake, journal={"persist": False}, dashboard={"keep_runs": 3})
    client = TestClient(agent.setup_webserver())
    other = ROW | {"task_id": "other"}
    for row in (ROW, ROW, other, ROW):
        assert client.post("/run", json=row).json()["failure"] is None
    live = client.get("/dashboard/api/live").json()
    assert live["counters"]["finished"] == 4 and live["counters"]["usable"] == 4
    found = client.get("/dashboard/api/rollouts", params={"batch": "run"}).json()
    assert found["total"] == 3, "only the last keep_runs are kept"
    assert [(i["job_id"], i["row"], i["sample"]) for i in found["items"]] == [
        ("run/3", 0, 1),
        ("run/2", 1, 0),
        ("run/1", 0, 0),
    ], "a task's samples share a row"
    opened = client.get("/dashboard/api/rollout", params={"job_id": "run/3"}).json()
    assert [len(t["tool_calls"]) for t in opened["turns"]] == [1, 0]
    assert opened["turns"][0]["tool_calls"][0]["output"] == "ran ls" and opened["record"]["reward"] == 1.0
    assert client.get("/dashboard/api/rollout", params={"job_id": "run/0"}).status_code == 404  # rolled off


def test_failed_attempts_are_counted_by_stage_and_type_retries_included():
    fake = fake_peers()
    answers = iter([FakeResponse(503, {"error": {"type": "sandbox_start"}})])
    fake.route("env", "/seed_session", lambda body: next(answers, None) or FakeResponse(200, {"host": "h"}))
    agent = build_agent(fake, journal={"persist": False})
    client = TestClient(agent.setup_webserver())
    assert client.post("/run", json=ROW).json()["attempts"] == 2
    counters = client.get("/dashboard/api/live").json()["counters"]
    assert counters["attempt_failures"] == {"init/init_error": 1} and counters["failed"] == {}
    assert counters["retried"] == 1


def test_configured_actions_drain_a_host_through_the_resources_server_and_cancel_through_the_job_service():
    fake = fake_peers()
    fake.route("env", "/hosts/drain", lambda body: {"host": body["host"], "draining": body["draining"]})
    agent = build_agent(fake, journal={"persist": False}, dashboard={"actions": True, "action_token": "t"})
    agent._dashboard.peers = fake
    client = TestClient(agent.setup_webserver())
    auth = {"Authorization": "Bearer t"}
    drained = client.post("/dashboard/api/actions/drain_host", json={"host": "node-a"}, headers=auth)
    assert drained.status_code == 200 and drained.json() == {"host": "node-a", "draining": True}
    assert ("env", "/hosts/drain", {"host": "node-a", "draining": True}, {}) in fake.calls
    unknown = client.post("/dashboard/api/actions/cancel_batch", json={"batch_id": "nope"}, headers=auth)
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]
    assert client.post("/dashboard/api/actions/drain_host", json={"host": "node-a"}).status_code == 401


def test_kept_run_records_hold_no_token_ids_but_say_how_many_were_generated():
    fake = fake_peers()
    policy = fake._routes[("model", "/v1/responses")]
    ids = {"prompt_token_ids": list(range(50)), "generation_token_ids": [7] * 9, "generation_log_probs": [-0.1] * 9}

    def with_ids(body):
        answer = orjson.loads(policy(body)._body)
        return FakeResponse(
            200, answer | {"output": [item | ids for item in answer["output"]]}, {"model_session": "m"}
        )

    fake.route("model", "/v1/responses", with_ids)
    agent = build_agent(fake, journal={"persist": False})
    client = TestClient(agent.setup_webserver())
    returned = client.post("/run", json=ROW).json()
    assert returned["response"]["output"][0]["generation_token_ids"] == [7] * 9  # the trainer's record: whole
    (kept,) = [record for _, record in agent._dashboard.runs._records]
    assert not any(key in item for item in kept.response["output"] for key in ids)
    opened = client.get("/dashboard/api/rollout", params={"job_id": "run/0"}).json()
    assert [turn["tokens"] for turn in opened["turns"]] == [9, 9]
