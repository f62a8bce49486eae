# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio
import json

import pytest
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

from prorl_gym.pipeline.loop import AgentLoop, LoopLimits
from prorl_gym.wire.failures import FailureType, RolloutFailure
from tests.support.fakes import TOOLS, FakeClient, FakeResponse, model_turns, resources


def make_loop(client, **limits):
    params = NeMoGymResponseCreateParamsNonStreaming(input=[{"role": "user", "content": "q"}], tools=TOOLS)
    return AgentLoop(
        client=client,
        model_server="model",
        resources_server="env",
        params=params,
        limits=LoopLimits(**limits),
        resources_cookies={"env_session": "e1"},
    )


@pytest.fixture
def client():
    client = FakeClient.create()
    resources(client)
    return client


async def test_tool_calls_then_answer(client):
    client.route(
        "model", "/v1/responses", model_turns(("calls", [("bash", '{"command": "ls"}')]), ("text", "\\boxed{1}"))
    )
    loop = make_loop(client)
    assert await loop.run() == "answered"
    assert [o.type for o in loop.outputs] == ["function_call", "function_call_output", "message"]
    assert loop.outputs[1].output == "ran ls"
    assert loop.stats.turns == 2 and loop.stats.tool_calls == 1 and loop.stats.output_tokens == 14
    # the session cookie selects the sandbox on every tool call; model cookies are kept too
    bash_call = next(c for c in client.calls if c[1] == "/bash")
    assert bash_call[3] == {"env_session": "e1"}
    assert client.calls[-1][3] == {"model_session": "m1"}
    # the second policy call sees the tool result
    second_input = [c for c in client.calls if c[1] == "/v1/responses"][1][2]["input"]
    assert second_input[-1]["output"] == "ran ls"


async def test_malformed_calls_go_back_to_the_policy_and_are_counted(client):
    client.route(
        "model",
        "/v1/responses",
        model_turns(
            ("calls", [("bash", '{"command": "ls"')]),  # invalid JSON
            ("calls", [("calculator", "{}")]),  # unknown tool
            ("calls", [("bash", '{"cmd": "ls"}')]),  # schema mismatch (422)
            ("calls", [("bash", '["ls"]')]),  # not an object
            ("text", "done"),
        ),
    )
    loop = make_loop(client)
    assert await loop.run() == "answered"
    errors = [o.output for o in loop.outputs if o.type == "function_call_output"]
    assert all(e.startswith("Error: ") for e in errors)
    assert "not valid JSON" in errors[0] and "unknown tool 'calculator'" in errors[1]
    assert "invalid arguments for 'bash'" in errors[2] and "JSON object" in errors[3]
    assert loop.stats.malformed_tool_calls == 4


async def test_a_422_whose_body_is_not_json_is_still_a_tool_error_for_the_policy(client):
    """A proxy's or a foreign server's 422 page (not JSON): the call goes back to the policy with the page's
    text, as a JSON 422 does; the rollout goes on."""
    client.route("env", "/bash", lambda body: FakeResponse(422, b"<html>unprocessable</html>"))
    client.route("model", "/v1/responses", model_turns(("calls", [("bash", '{"cmd": "ls"}')]), ("text", "done")))
    loop = make_loop(client)
    assert await loop.run() == "answered"
    error = next(o.output for o in loop.outputs if o.type == "function_call_output")
    assert error.startswith("Error: invalid arguments for 'bash'") and "<html>unprocessable</html>" in error


async def test_turn_limit_ends_the_loop_gracefully(client):
    client.route("model", "/v1/responses", model_turns(("calls", [("bash", '{"command": "ls"}')])))
    loop = make_loop(client, max_turns=3)
    assert await loop.run() == "max_turns"
    assert loop.stats.turns == 3


async def test_output_token_budget(client):
    client.route("model", "/v1/responses", model_turns(("calls", [("bash", '{"command": "ls"}')])))
    loop = make_loop(client, max_output_tokens=20)
    assert await loop.run() == "max_output_tokens"
    requested = [c[2]["max_output_tokens"] for c in client.calls if c[1] == "/v1/responses"]
    assert requested == [20, 13, 6]  # each call asks only for what is left


@pytest.mark.parametrize(("status", "infra"), [(500, True), (503, True), (429, True), (400, False), (422, False)])
async def test_policy_http_error_is_a_policy_error(client, status, infra):
    """Before any output a failing policy is the infrastructure's (tried again), unless the endpoint
    refused the request itself: the same request is refused again."""
    client.route("model", "/v1/responses", lambda body: FakeResponse(status, {"error": "boom"}))
    with pytest.raises(RolloutFailure) as info:
        await make_loop(client).run()
    failure = info.value.failure
    assert failure.type == FailureType.POLICY_ERROR and str(status) in failure.message and failure.infra is infra


async def test_silent_policy_is_a_policy_error(client):
    async def hang(body):
        await asyncio.sleep(10)

    client.route("model", "/v1/responses", hang)
    with pytest.raises(RolloutFailure) as info:
        await make_loop(client, policy_call_timeout_s=0.1).run()
    assert info.value.failure.type == FailureType.POLICY_ERROR and "did not answer" in info.value.failure.message


async def test_garbage_from_the_policy_is_a_policy_error(client):
    client.route("model", "/v1/responses", lambda body: FakeResponse(200, b"not json"))
    with pytest.raises(RolloutFailure) as info:
        await make_loop(client).run()
    assert info.value.failure.type == FailureType.POLICY_ERROR


async def test_a_broken_sandbox_is_a_lost_sandbox():
    client = FakeClient.create()
    resources(client, tool_status=503)
    client.route("model", "/v1/responses", model_turns(("calls", [("bash", '{"command": "ls"}')])))
    with pytest.raises(RolloutFailure) as info:
        await make_loop(client).run()
    assert info.value.failure.type == FailureType.SANDBOX_LOST and info.value.failure.infra


async def test_a_turn_sends_token_ids_of_the_last_turn_only_and_the_record_keeps_all(client):
    """Every reader of a request's ids reads the last turn's: older turns' ids are not sent again."""
    turn = model_turns(("calls", [("bash", '{"command": "ls"}')]))

    def with_ids(body):
        answer = json.loads(turn(body)._body)
        n = len([c for c in client.calls if c[1] == "/v1/responses"])
        answer["output"][-1] |= {
            "prompt_token_ids": [n] * 3,
            "generation_token_ids": [n],
            "generation_log_probs": [-0.5],
        }
        return FakeResponse(200, answer, {"model_session": "m1"})

    client.route("model", "/v1/responses", with_ids)
    loop = make_loop(client, max_turns=4)
    assert await loop.run() == "max_turns"
    requests = [c[2]["input"] for c in client.calls if c[1] == "/v1/responses"]
    for sent in requests[1:]:
        carrying = [item for item in sent if "prompt_token_ids" in item]
        assert len(carrying) == 1 and carrying[0] is [i for i in sent if i.get("type") == "function_call"][-1]
        assert carrying[0]["prompt_token_ids"] == [len(requests[: requests.index(sent)])] * 3  # the last turn's
        assert all("generation_log_probs" not in item for item in sent if item is not carrying[0])
    assert requests[-1][0] == {"role": "user", "content": "q"}  # the task's input, as given
    calls = [o for o in loop.outputs if o.type == "function_call"]
    assert [c.prompt_token_ids for c in calls] == [[1] * 3, [2] * 3, [3] * 3, [4] * 3]  # the record: all


def said_by_the_model_server(turn, metadata: dict, incomplete: bool = False):
    """A model server handler whose answers carry our metadata (tool-call paths, why a turn ended)."""

    def handler(body):
        answer = json.loads(turn(body)._body)
        answer["metadata"] = metadata
        if incomplete:
            answer["incomplete_details"] = {"reason": "max_output_tokens"}
        return FakeResponse(200, answer, {"model_session": "m1"})

    return handler


async def test_each_calls_path_and_repeated_calls_are_counted(client):
    """What a real model does: the same call again and again (run as asked, counted), calls read from
    JSON written without tags (the model server says so per call, and the record keeps it)."""
    turn = model_turns(("calls", [("bash", '{"command": "ls"}'), ("bash", '{"command": "ls"}')]))
    client.route(
        "model", "/v1/responses", said_by_the_model_server(turn, {"prorl_tool_calls": "lenient_fenced,tagged"})
    )
    loop = make_loop(client, max_turns=2)
    assert await loop.run() == "max_turns"
    assert loop.stats.tool_calls == 4 and loop.stats.repeated_tool_calls == 3
    assert loop.stats.tool_call_paths == ["lenient_fenced", "tagged"] * 2
    assert [o.output for o in loop.outputs if o.type == "function_call_output"] == ["ran ls"] * 4


async def test_a_full_context_ends_the_rollout_as_context_length_not_as_a_token_limit(client):
    turn = model_turns(("text", ""))
    client.route("model", "/v1/responses", said_by_the_model_server(turn, {"prorl_stop": "context_length"}, True))
    assert await make_loop(client).run() == "context_length"
    client.route("model", "/v1/responses", said_by_the_model_server(turn, {}, True))
    assert await make_loop(client).run() == "max_output_tokens"
