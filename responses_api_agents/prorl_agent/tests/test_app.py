# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio
import json

import aiohttp
import pytest
from fastapi.testclient import TestClient

from prorl_gym.testing import build_server
from responses_api_agents.prorl_agent.app import ProRLAgent
from tests.support.fakes import FakeClient, FakeResponse, model_turns, resources

ROW = {"responses_create_params": {"input": [{"role": "user", "content": "q"}]}, "expected_answer": "1"}


def build_agent(fake: FakeClient, **config) -> ProRLAgent:
    """The agent with its peers (resources server 'env', model server 'model') played by `fake`."""
    config = {"retry": {"max_attempts": 3, "backoff_s": 0.0}} | config
    agent = build_server(
        ProRLAgent,
        "agent",
        server_client=fake,
        resources_server={"type": "resources_servers", "name": "env"},
        model_server={"type": "responses_api_models", "name": "model"},
        **config,
    )
    agent._pipeline.peers.client = agent._capture.client = fake
    return agent


def agent_client(fake: FakeClient, **config) -> TestClient:
    return TestClient(build_agent(fake, **config).setup_webserver())


def released(fake: FakeClient) -> bool:
    return any(path == "/release" for _, path, _, _ in fake.calls)


@pytest.fixture
def fake():
    fake = FakeClient.create()
    resources(fake)
    fake.route(
        "model", "/v1/responses", model_turns(("calls", [("bash", '{"command": "ls"}')]), ("text", "\\boxed{1}"))
    )
    return fake


def test_a_good_rollout_goes_through_all_three_stages(fake):
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["reward"] == 1.0 and record["failure"] is None and "_ng_failure_class" not in record
    assert record["host"] == "node-a" and record["attempts"] == 1
    assert record["stop_reason"] == "answered" and record["num_turns"] == 2 and record["num_tool_calls"] == 1
    assert {"init_s", "run_s", "eval_s", "total_s", "init_queue_s", "policy_s", "tools_s"} <= set(record["timings"])
    paths = [path for _, path, _, _ in fake.calls]
    assert paths.index("/seed_session") < paths.index("/bash") < paths.index("/verify")
    assert not released(fake)  # verify closed the sandbox
    verify_body = next(body for _, path, body, _ in fake.calls if path == "/verify")
    assert verify_body["expected_answer"] == "1" and len(verify_body["response"]["output"]) == 3
    # the resources server got the server's tool list, since the row had none
    first_model_call = next(body for _, path, body, _ in fake.calls if path == "/v1/responses")
    assert [t["name"] for t in first_model_call["tools"]] == ["bash", "python"]


def test_init_failure_is_typed_and_releases_after_every_attempt(fake):
    fake.route("env", "/seed_session", lambda body: FakeResponse(503, {"error": {"type": "sandbox_error"}}))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"]["stage"] == "init" and record["failure"]["type"] == "init_error"
    assert record["failure"]["infra"] and record["attempts"] == 3 and len(record["attempt_failures"]) == 2
    assert record["_ng_failure_class"] == "init_error" and record["reward"] == 0.0
    assert sum(path == "/release" for _, path, _, _ in fake.calls) == 3


def test_an_infrastructure_failure_runs_the_rollout_again_from_a_fresh_init(fake):
    seeds = iter([FakeResponse(503, {"error": {"type": "sandbox_error"}})])
    default = fake._routes[("env", "/seed_session")]
    fake.route("env", "/seed_session", lambda body: next(seeds, None) or default(body))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["reward"] == 1.0 and record["failure"] is None and record["attempts"] == 2
    assert [f["type"] for f in record["attempt_failures"]] == ["init_error"]
    assert sum(path == "/seed_session" for _, path, _, _ in fake.calls) == 2


def test_a_bad_row_is_a_task_failure_and_never_retried(fake):
    fake.route("env", "/seed_session", lambda body: FakeResponse(422, {"detail": "expected_answer missing"}))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "init_error" and not record["failure"]["infra"] and record["attempts"] == 1


def test_a_policy_gone_before_answering_is_retried_but_not_after_partial_output(fake):
    fake.route("model", "/v1/responses", lambda body: FakeResponse(502, {"error": "down"}))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "policy_error" and record["failure"]["stage"] == "run"
    assert record["failure"]["infra"] and record["attempts"] == 3 and released(fake)
    turns = iter([model_turns(("calls", [("bash", '{"command": "ls"}')]))])
    fake.route("model", "/v1/responses", lambda body: next(turns, lambda _: FakeResponse(502, {"e": 1}))(body))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "policy_error" and not record["failure"]["infra"]
    assert record["attempts"] == 1 and record["num_turns"] == 2  # a partial trajectory: the task's outcome


def test_eval_error_reported_by_the_verifier_marks_the_rollout(fake):
    failure = {"stage": "eval", "type": "eval_error", "message": "checker crashed", "infra": False}
    fake.route("env", "/verify", lambda body: body | {"reward": 0.0, "failure": failure})
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"] == failure | {"refused": False} and record["_ng_failure_class"] == "eval_error"


def test_verify_http_error_is_an_eval_error_and_releases(fake):
    fake.route("env", "/verify", lambda body: FakeResponse(500, {"detail": "boom"}))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "eval_error" and released(fake)


def test_run_stage_timeout_is_typed_and_releases(fake):
    async def slow(body):
        await asyncio.sleep(5)

    fake.route("model", "/v1/responses", slow)
    record = agent_client(fake, run_timeout_s=0.2).post("/run", json=ROW).json()
    assert record["failure"] == {
        "stage": "run",
        "type": "timeout",
        "message": "run exceeded 0.2s",
        "infra": False,
        "refused": False,
    }
    assert record["attempts"] == 1  # the rollout's own time: not retried
    assert released(fake)


def test_status_reports_each_stage(fake):
    stats = agent_client(fake, max_run_workers=3).get("/status").json()["stages"]
    assert stats["run"] == {"workers": 3, "waiting": 0, "in_flight": 0}


def test_coupled_pipeline_gives_each_rollout_one_slot_for_all_stages(fake):
    async def slow_verify(body):
        await asyncio.sleep(0.3)
        return body | {"reward": 1.0, "failure": None}

    fake.route("env", "/verify", slow_verify)
    agent = build_agent(fake, pipeline="coupled", max_run_workers=1)

    async def two():
        return await asyncio.gather(agent.rollout(ROW), agent.rollout(ROW))

    first, second = (record.wire() for record in asyncio.run(two()))
    assert first["reward"] == second["reward"] == 1.0
    # the second rollout could not start its INIT before the first finished its EVAL
    assert sorted(r["timings"]["coupled_queue_s"] > 0.25 for r in (first, second)) == [False, True]
    assert max(first["timings"]["init_queue_s"], second["timings"]["init_queue_s"]) < 0.01


def test_a_malformed_row_is_an_init_error(fake):
    agent = build_agent(fake)
    record = asyncio.run(agent.rollout({"no": "params"}))
    assert record.failure.type == "init_error" and "malformed row" in record.failure.message


def test_several_worker_processes_are_refused_with_the_reason(fake):
    with pytest.raises(ValueError, match="num_workers must be 1"):
        agent_client(fake, num_workers=2)


def test_a_cancel_during_init_waits_for_the_sandbox_then_releases_it(fake):
    seeding = asyncio.Event()

    async def slow_seed(*_):
        seeding.set()
        await asyncio.sleep(0.2)  # the server is still starting the sandbox when the cancel lands
        return FakeResponse(200, {"sandbox_id": "sb"}, cookies={"session": "s1"})

    fake.route("env", "/seed_session", slow_seed)
    agent = build_agent(fake)

    async def cancel_mid_init():
        task = asyncio.create_task(agent.rollout(ROW))
        await seeding.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_mid_init())
    releases = [cookies for _, path, _, cookies in fake.calls if path == "/release"]
    assert releases and releases[-1].get("session") == "s1"


def statuses(*answers):
    """A GET handler answering in turn (the last one from then on); an exception is raised (unreachable)."""
    remaining = list(answers)

    def handler(body):
        answer = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handler


def failing_once(fake: FakeClient, server: str, path: str, failure: FakeResponse) -> None:
    """`path` answers `failure` the first time, then as before."""
    first, default = iter([failure]), fake._routes[(server, path)]
    fake.route(server, path, lambda body: next(first, None) or default(body))


def test_a_retry_waits_until_the_resources_server_is_healthy_again(fake):
    failing_once(fake, "env", "/seed_session", FakeResponse(503, {"error": {"type": "sandbox_error"}}))
    down = aiohttp.ClientConnectionError("connection refused")
    draining = FakeResponse(200, {"hosts": [{"name": "h", "healthy": True, "draining": True}]})
    healthy = FakeResponse(200, {"hosts": [{"name": "h", "healthy": True, "draining": False}]})
    fake.route("env", "/status", statuses(down, down, draining, healthy))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["reward"] == 1.0 and record["attempts"] == 2 and record["failure"] is None
    assert sum(path == "/status" for _, path, _, _ in fake.calls) == 4  # asked until a host could take it
    assert record["timings"]["retry_wait_s"] >= 1.5  # three polls half a second apart


def test_a_policy_endpoint_dead_after_partial_output_runs_the_rollout_again_from_a_fresh_init(fake):
    default, calls = fake._routes[("model", "/v1/responses")], []
    died = FakeResponse(503, {"detail": "policy endpoint http://a:8000/v1 died during this session"})

    def policy(body):  # the first attempt: one turn, then its endpoint dies; the second: a healthy one
        calls.append(body)
        return died if len(calls) == 2 else default(body)

    fake.route("model", "/v1/responses", policy)
    fake.route("model", "/endpoints", statuses(FakeResponse(200, {"endpoints": [{"url": "b", "healthy": True}]})))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["reward"] == 1.0 and record["failure"] is None and record["attempts"] == 2, record["failure"]
    (earlier,) = record["attempt_failures"]
    assert earlier["type"] == "policy_error" and earlier["infra"] and "died" in earlier["message"]
    assert sum(path == "/seed_session" for _, path, _, _ in fake.calls) == 2  # never stitched: a fresh INIT


def test_a_policy_retry_waits_for_an_answer_from_the_endpoint_not_its_stale_healthy_flag(fake):
    # Just after a kill the model server still lists the endpoint healthy (it declares it dead only
    # after enough failures): a retry then failed again at once and burned an attempt (busy soak).
    failing_once(fake, "model", "/v1/responses", FakeResponse(503, {"detail": "policy endpoint a died"}))
    stale = FakeResponse(200, {"endpoints": [{"url": "a", "healthy": True, "failures": 1}]})
    dead = FakeResponse(200, {"endpoints": [{"url": "a", "healthy": False, "failures": 3}]})
    back = FakeResponse(200, {"endpoints": [{"url": "a", "healthy": True, "failures": 0}]})
    fake.route("model", "/endpoints", statuses(stale, dead, back))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["reward"] == 1.0 and record["attempts"] == 2 and record["failure"] is None
    assert sum(path == "/endpoints" for _, path, _, _ in fake.calls) == 3


def test_a_server_given_up_on_ends_the_waiting_rollout_at_once_typed(fake):
    fake.route("env", "/seed_session", lambda body: FakeResponse(503, {"error": {"type": "sandbox_error"}}))
    gone = FakeResponse(503, {"error": {"type": "server_gave_up", "message": "died 5 times in a row"}})
    fake.route("env", "/status", statuses(gone))
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "server_down" and record["attempts"] == 1
    assert "died 5 times" in record["failure"]["message"] and record["_ng_failure_class"] == "server_down"


def test_a_part_not_healthy_within_the_ceiling_ends_the_rollout_saying_so(fake):
    fake.route("env", "/seed_session", lambda body: FakeResponse(503, {"error": {"type": "sandbox_error"}}))
    fake.route("env", "/status", statuses(aiohttp.ClientConnectionError("refused")))
    record = agent_client(fake, retry={"max_attempts": 3, "backoff_s": 0.0, "recovery_timeout_s": 1.0}).post(
        "/run", json=ROW
    )
    record = record.json()
    assert record["failure"]["type"] == "init_error" and record["attempts"] == 1
    assert "was not healthy again within" in record["failure"]["message"]


def test_attempts_turned_away_before_any_work_do_not_use_up_the_retry_budget(fake):
    # A policy that comes back and falls again within seconds (the soak: an agent and a policy
    # killed back to back) turned the same rollout away four times; with 8 attempts it failed.
    refusal = FakeResponse(503, {"detail": {"type": "no_healthy_endpoint", "message": "no healthy policy endpoint"}})
    default, answers = fake._routes[("model", "/v1/responses")], iter([refusal] * 5)
    fake.route("model", "/v1/responses", lambda body: next(answers, None) or default(body))
    fake.route("model", "/endpoints", statuses(FakeResponse(200, {"endpoints": [{"url": "a", "healthy": True}]})))
    record = agent_client(fake).post("/run", json=ROW).json()  # max_attempts 3
    assert record["reward"] == 1.0 and record["failure"] is None and record["attempts"] == 6
    assert [f["refused"] for f in record["attempt_failures"]] == [True] * 5
    assert sum(path == "/seed_session" for _, path, _, _ in fake.calls) == 6


def test_refusals_have_their_own_ceiling_and_other_failures_still_count(fake):
    refusal = FakeResponse(503, {"detail": {"type": "no_healthy_endpoint", "message": "no healthy policy endpoint"}})
    fake.route("model", "/v1/responses", lambda body: refusal)
    fake.route("model", "/endpoints", statuses(FakeResponse(200, {"endpoints": [{"url": "a", "healthy": True}]})))
    retry = {"max_attempts": 3, "backoff_s": 0.0, "max_refusals": 2}
    record = agent_client(fake, retry=retry).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "policy_error" and record["failure"]["refused"] and record["attempts"] == 3

    died = FakeResponse(503, {"detail": "policy endpoint http://a:8000/v1 died during this session"})
    fake.route("model", "/v1/responses", lambda body: died)  # an untyped 503: it may have run, so it counts
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "policy_error" and not record["failure"]["refused"] and record["attempts"] == 3


def test_a_resources_server_refusing_the_connection_at_init_costs_no_attempt(fake):
    refused = aiohttp.ClientConnectorError(None, OSError(111, "Connect call failed"))
    default, answers = fake._routes[("env", "/seed_session")], iter([refused] * 4)

    def seed(body):
        if (answer := next(answers, None)) is not None:
            raise answer
        return default(body)

    fake.route("env", "/seed_session", seed)
    record = agent_client(fake).post("/run", json=ROW).json()
    assert record["reward"] == 1.0 and record["attempts"] == 5
    assert all(f["refused"] and f["stage"] == "init" for f in record["attempt_failures"])


def test_the_agent_serves_capture_endpoints_for_harnesses_sticky_on_one_model_session(fake):
    seen_cookies = []

    def chat(body):
        seen_cookies.append(dict(fake.calls[-1][3]))
        prompt = [1, 2] if len(seen_cookies) == 1 else [1, 2, 3, 9]  # the second extends the first
        message = {"role": "assistant", "content": "4", "prompt_token_ids": prompt, "generation_token_ids": [3]}
        message["generation_log_probs"] = [-0.5]
        return FakeResponse(200, {"id": "c", "choices": [{"index": 0, "message": message}]}, {"session": "s1"})

    fake.route("model", "/v1/chat/completions", chat)
    client = agent_client(fake)
    opened = client.post("/capture", json={"max_calls": 5}).json()
    messages = [{"role": "user", "content": "2+2?"}]
    first = client.post(f"{opened['base_path']}/chat/completions", json={"messages": messages}).json()
    assert first["choices"][0]["message"] == {"role": "assistant", "content": "4"}
    messages += [first["choices"][0]["message"], {"role": "user", "content": "sure?"}]
    assert client.post(f"{opened['base_path']}/chat/completions", json={"messages": messages}).status_code == 200
    assert seen_cookies == [{}, {"session": "s1"}]  # the model server's session kept: one endpoint per rollout
    record = client.post(f"/capture/{opened['key']}/end").json()
    assert [c["extends"] for c in record["calls"]] == [None, 0] and [c["parent"] for c in record["calls"]] == [None, 0]
    assert [n["tokens"] for n in record["tree"]] == [[1, 2], [3], [9], [3]]  # prompt, generated, prompt, generated
    late = client.post(f"{opened['base_path']}/chat/completions", json={"messages": messages})
    assert late.status_code == 410 and late.json()["error"]["type"] == "capture_refused"
    assert client.post(f"{opened['base_path']}/chat/completions", json={"messages": []}).status_code == 422


def test_a_policy_call_timing_out_after_partial_output_is_the_infrastructures_if_its_endpoint_failed(fake):
    default, calls = fake._routes[("model", "/v1/responses")], []

    async def policy(body):  # the first attempt's second turn never comes (its endpoint was killed mid-call)
        calls.append(body)
        if len(calls) == 2:
            await asyncio.sleep(5)
        return default(body)

    fake.route("model", "/v1/responses", policy)
    failing = FakeResponse(200, {"endpoints": [{"url": "a", "healthy": True, "failures": 1}]})
    back = FakeResponse(200, {"endpoints": [{"url": "a", "healthy": True, "failures": 0}]})
    fake.route("model", "/endpoints", statuses(failing, back))
    record = agent_client(fake, limits={"policy_call_timeout_s": 0.3}).post("/run", json=ROW).json()
    assert record["failure"] is None and record["attempts"] == 2 and record["reward"] == 1.0
    assert "its endpoint failed meanwhile" in record["attempt_failures"][0]["message"]

    calls.clear()  # the same timeout with its endpoint healthy throughout: the task's (a generation too long)
    default = model_turns(("calls", [("bash", '{"command": "ls"}')]), ("text", "\\boxed{1}"))
    fake.route("model", "/endpoints", statuses(back))
    record = agent_client(fake, limits={"policy_call_timeout_s": 0.3}).post("/run", json=ROW).json()
    assert record["failure"]["type"] == "policy_error" and not record["failure"]["infra"] and record["attempts"] == 1


def test_a_rollout_held_by_a_pause_past_its_run_timeout_is_the_infrastructures(fake):
    client = agent_client(fake, run_timeout_s=0.3, retry={"max_attempts": 1, "backoff_s": 0})
    assert client.post("/policy/pause", json={}).json()["paused"]
    record = client.post("/run", json=ROW).json()
    failure = record["failure"]
    assert (failure["type"], failure["infra"]) == ("timeout", True)
    assert "paused for a weight update" in failure["message"]
    assert not [call for call in fake.calls if call[1] == "/v1/responses"]  # nothing was sent while paused
    state = client.post("/policy/resume", json={"version": 5}).json()
    assert (state["paused"], state["version"]) == (False, 5) and state["paused_s"] > 0
    record = client.post("/run", json=ROW).json()
    assert record["reward"] == 1.0 and record["policy_versions"] == [5, 5] and record["newest_policy_version"] == 5


@pytest.mark.parametrize("verify_token_ids", [False, True])
def test_the_verifier_gets_the_transcript_with_token_ids_only_if_asked(fake, verify_token_ids):
    turns = model_turns(("calls", [("bash", '{"command": "ls"}')]), ("text", "\\boxed{1}"))
    ids = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.5]}

    def with_ids(body):  # every answer's items carry the ids the policy produced
        answer = json.loads(turns(body)._body)
        return FakeResponse(
            200, answer | {"output": [item | ids for item in answer["output"]]}, {"model_session": "m1"}
        )

    fake.route("model", "/v1/responses", with_ids)
    record = agent_client(fake, verify_token_ids=verify_token_ids).post("/run", json=ROW).json()
    verify_body = next(body for _, path, body, _ in fake.calls if path == "/verify")
    items = verify_body["response"]["output"]
    assert [item["type"] for item in items] == ["function_call", "function_call_output", "message"]
    assert [("generation_token_ids" in item) for item in items] == [verify_token_ids, False, verify_token_ids]
    assert items[0]["arguments"] == '{"command": "ls"}' and items[2]["content"][0]["text"] == "\\boxed{1}"
    assert record["reward"] == 1.0  # and the record keeps every id either way
    assert [item.get("generation_token_ids") for item in record["response"]["output"]] == [[3], None, [3]]
