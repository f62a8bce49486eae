# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Our /v1/responses answers as NeMo Gym's vllm_model answers, for the same request and completion
(the lean path: app.py `responses`), and refuses a malformed request as FastAPI's Body() would."""

import json

import pytest
from nemo_gym.openai_utils import NeMoGymChatCompletion
from starlette.requests import Request

from prorl_gym.testing import build_server
from prorl_gym.wire.items import parse_create_params
from responses_api_models.balanced_vllm_model.app import BalancedVLLMModel
from responses_api_models.balanced_vllm_model.tests.harness import ROWS, TOOLS, Policies, serve_model
from responses_api_models.vllm_model.app import VLLMModel

IDS = {"prompt_token_ids": [1, 2, 3], "generation_token_ids": [7, 8], "generation_log_probs": [-0.1, -0.2]}
CALL = {"id": "call_1", "type": "function", "function": {"name": "python", "arguments": '{"code": "1+1"}'}}
USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
REQUEST = {
    "input": [
        {"role": "user", "content": "What is 2+2?"},
        {"type": "function_call", "name": "python", "arguments": '{"code": "2+2"}', "call_id": "c0"},
        {"type": "function_call_output", "call_id": "c0", "output": "4"},
    ],
    "tools": TOOLS,
    "temperature": 0.5,
    "max_output_tokens": 64,
    "metadata": {"task": "t1"},
}


def _completion(message: dict, finish_reason: str = "stop", usage: dict | None = USAGE) -> NeMoGymChatCompletion:
    choice = {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant"} | message}
    body = {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]}
    return NeMoGymChatCompletion.model_validate(body | ({"usage": usage} if usage else {}))


COMPLETIONS = [
    _completion({"content": None, "tool_calls": [CALL]} | IDS, "tool_calls"),
    _completion({"content": "<think>add them</think>It is \\boxed{4}."} | IDS),
    _completion({"content": "It is \\boxed{4}."}, usage=None),
    _completion({"content": "It is"} | IDS, "length"),
    _completion({"content": ""}, "content_filter"),
]


def _comparable(response) -> dict:
    dumped = response.model_dump(mode="json")
    del dumped["id"], dumped["created_at"]  # a fresh id and clock per answer
    for item in dumped["output"]:
        if str(item.get("id", "")).startswith(("msg_", "rs_", "fc_")):
            item["id"] = "<fresh>"
    return dumped


@pytest.mark.parametrize("reasoning_parser", [False, True])
@pytest.mark.parametrize("completion", COMPLETIONS, ids=lambda c: repr(c.choices[0].message.content)[:30])
async def test_our_answer_is_vllm_models_answer(completion, reasoning_parser, monkeypatch):
    server = build_server(
        BalancedVLLMModel,
        "policy_model",
        base_url="http://127.0.0.1:1/v1",
        api_key="x",
        model="scripted-gold",
        return_token_id_information=True,
        uses_reasoning_parser=reasoning_parser,
    )

    async def answer(self, request, params):  # the endpoint's completion, as chat_completions returns it
        assert params.model_dump(exclude_unset=True)["messages"][0] == {"role": "user", "content": "What is 2+2?"}
        return completion.model_copy(deep=True)

    monkeypatch.setattr(BalancedVLLMModel, "chat_completions", answer)
    request = Request({"type": "http", "method": "POST", "path": "/v1/responses", "headers": []})
    ours = await server._responses_via_chat(request, parse_create_params(json.loads(json.dumps(REQUEST))))
    theirs = await VLLMModel.responses(server, request, parse_create_params(json.loads(json.dumps(REQUEST))))
    assert _comparable(ours) == _comparable(theirs)
    assert [type(o) for o in ours.output] == [type(o) for o in theirs.output]


@pytest.fixture
def policies(tmp_path):
    started = Policies(tmp_path)
    yield started
    started.stop_all()


async def test_a_malformed_request_is_a_422_that_says_where(policies):
    (policy,) = await policies.start(1)
    async with serve_model([policy.url]) as server:
        url = f"{server.url}/v1/responses"
        bad_item = {"input": [{"type": "function_call", "name": "python", "call_id": "c1"}], "tools": TOOLS}
        async with server.http.post(url, json=bad_item) as r:
            assert r.status == 422
            errors = (await r.json())["detail"]  # the complaint of the union member its type picks, as 0.7 says it
            missing = [e["loc"][-2:] for e in errors if e["loc"][:2] == ["body", "input"] and e["type"] == "missing"]
            assert missing == [["function_call", "arguments"]]
        async with server.http.post(url, json={"input": "hi", "no_such_field": 1}) as r:
            assert r.status == 422
            assert [e["loc"] for e in (await r.json())["detail"]] == [["body", "no_such_field"]]
        async with server.http.post(url, data=b'{"input": ', headers={"content-type": "application/json"}) as r:
            assert r.status == 422 and (await r.json())["detail"][0]["type"] == "json_invalid"
        async with server.http.post(url, json=ROWS[0]["responses_create_params"] | {"tools": TOOLS}) as r:
            assert r.status == 200  # and a good one still answers
            assert (await r.json())["output"][0]["type"] == "function_call"
        # NeMo Gym's Anthropic route calls responses() with a parsed body: it answers as before
        (question,) = [m["content"] for m in ROWS[0]["responses_create_params"]["input"] if m["role"] == "user"]
        anthropic = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": question}]}
        async with server.http.post(f"{server.url}/v1/messages", json=anthropic) as r:
            assert r.status == 200, await r.text()
            assert (await r.json())["type"] == "message"
        async with server.http.post(f"{server.url}/v1/messages", json={"unexpected": {"deep": [None]}}) as r:
            assert 400 <= r.status < 500


async def test_a_missing_route_is_told_at_once_and_a_request_timeout_is_retried():
    """NeMo Gym 0.7 retries 404 and 408 too. An endpoint that lacks the route (404) answers so again: the caller
    hears at once that it is incompatible (501), after one request; a 408 (the endpoint's request timeout) is
    retried like a 5xx, MAX_NUM_TRIES requests in all (real HTTP: an aiohttp endpoint counting what it gets)."""
    from aiohttp import web
    from nemo_gym.openai_utils import MAX_NUM_TRIES

    from prorl_gym.stack import free_port

    seen: dict[int, int] = {404: 0, 408: 0}
    status = 404

    async def chat(request: web.Request) -> web.Response:
        seen[status] += 1
        return web.json_response({"error": {"message": "no"}}, status=status)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": []})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with serve_model([f"http://127.0.0.1:{port}/v1"]) as server:
            body = ROWS[0]["responses_create_params"] | {"tools": TOOLS}
            async with server.http.post(f"{server.url}/v1/responses", json=body) as r:
                assert r.status == 501 and "has no route" in (await r.json())["detail"]
            status = 408
            async with server.http.post(f"{server.url}/v1/responses", json=body) as r:
                assert r.status == 500  # the last answer (408) goes back as an engine error
    finally:
        await runner.cleanup()
    assert seen == {404: 1, 408: MAX_NUM_TRIES}
