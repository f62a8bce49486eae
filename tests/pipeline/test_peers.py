# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""HTTP to the peers: session cookies go back as a Cookie header that the servers (Starlette) read as they were
set; one call (`exchange`) answers status, body and cookies or a typed error; one reader of error bodies."""

import asyncio
import socket
from http.cookies import SimpleCookie

import pytest
from aiohttp import web
from starlette.requests import cookie_parser

from prorl_gym.pipeline.peers import PeerClient, PeerUnreachable, cookie_header, error_detail, error_type, exchange
from prorl_gym.testing import offline_server_client

VALUES = {"plain": "abc", "session": "eyJzZXNzaW9uX2lkIjogIjEifQ==.aGVsbG8.c2ln", "spaced": 'a b;c"d'}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_a_cookie_comes_back_as_it_was_set(name):
    jar = SimpleCookie()
    jar[name] = VALUES[name]  # as a server sets it
    as_set = {key: morsel.value for key, morsel in SimpleCookie(jar.output(header="").strip()).items()}
    assert cookie_parser(cookie_header(as_set)) == {name: VALUES[name]}


async def test_the_peer_client_sends_them_with_each_request():
    seen = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    client = PeerClient(offline_server_client())
    client._urls["peer"] = f"http://127.0.0.1:{port}"  # a server this ng_run config does not name
    try:
        for cookies in (VALUES, None):
            response = await client.post("peer", "/echo", json={}, cookies=cookies)
            assert response.status == 200
    finally:
        await client.close()
        await runner.cleanup()
    assert cookie_parser(seen[0]) == VALUES and seen[1] is None


@pytest.mark.parametrize(
    ("observability", "token_capture", "expected"),
    [
        (False, False, {"model": "/v1/responses", "tool": "/bash", "verify": "/verify"}),
        (True, False, {"model": "/ng-rollout/3-1/v1/responses", "tool": "/ng-rollout/3-1/bash"}),
        (False, True, {"model": "/ng-rollout/3-1/training-token-capture/v1/responses", "tool": "/bash"}),
        (True, True, {"model": "/ng-rollout/3-1/training-token-capture/v1/responses", "tool": "/ng-rollout/3-1/bash"}),
    ],
)
async def test_a_rollouts_calls_carry_its_id_where_nemo_gym_attributes_them(observability, token_capture, expected):
    """As NeMo Gym 0.7's ServerClient.request sends them: inside a rollout's context, a model server's generations
    under the rollout's prefix (capture's own segment with training-token capture), a resources server's routes
    under it with observability on; outside a rollout, or with neither on, as they are."""
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.rollout_correlation import rollout_context
    from nemo_gym.server_utils import ServerClient
    from omegaconf import OmegaConf

    seen = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    server = {"host": "127.0.0.1", "port": port}
    config = OmegaConf.create(
        {
            "observability_enabled": observability,
            "policy_model": {"responses_api_models": {"balanced_vllm_model": server}},
            "math": {"resources_servers": {"math": server}},
        }
    )
    client = PeerClient(
        ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=config),
        token_capture=token_capture,
    )
    try:
        with rollout_context("3-1"):
            for server_name, path in (("policy_model", "/v1/responses"), ("math", "/bash")):
                await client.post(server_name, path, json={})
            await client.post("policy_model", "/tokenize", json={})  # not a generation: never prefixed
        await client.post("math", "/verify", json={})  # no rollout context: as it is
    finally:
        await client.close()
        await runner.cleanup()
    assert seen == [expected["model"], expected["tool"], "/tokenize", "/verify"]


async def _serve(routes) -> tuple[web.AppRunner, int]:
    app = web.Application()
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


async def test_exchange_reads_the_answer_whole_with_the_cookies_the_peer_set():
    async def seed(request: web.Request) -> web.Response:
        response = web.json_response({"got": await request.json()}, status=201)
        response.set_cookie("session", "s1")
        return response

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(1)  # past the call's bound below; the server's cleanup waits for it
        return web.json_response({})

    runner, port = await _serve([("POST", "/seed", seed), ("GET", "/slow", slow)])
    client = PeerClient(offline_server_client())
    client._urls["peer"] = f"http://127.0.0.1:{port}"
    try:
        answer = await exchange(client, "post", "peer", "/seed", {"row": 1})
        assert (answer.status, answer.payload, answer.cookies) == (201, b'{"got": {"row": 1}}', {"session": "s1"})
        with pytest.raises(TimeoutError):  # the caller's bound, typed by the caller (a slow peer is not a dead one)
            await exchange(client, "get", "peer", "/slow", timeout=0.2)
    finally:
        await client.close()
        await runner.cleanup()


async def test_a_peer_that_is_not_there_is_unreachable_and_said_to_have_refused():
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    client = PeerClient(offline_server_client())
    client._urls["peer"] = f"http://127.0.0.1:{port}"
    try:
        with pytest.raises(PeerUnreachable) as caught:
            await exchange(client, "post", "peer", "/seed", {})
    finally:
        await client.close()
    # refused: nothing was sent, so the call cannot have had an effect (a rollout's INIT costs no attempt)
    assert caught.value.refused and "peer is unreachable" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "kind", "detail"),
    [
        (
            b'{"error": {"type": "sandbox_lost", "message": "gone"}}',
            "sandbox_lost",
            {"type": "sandbox_lost", "message": "gone"},
        ),
        (
            b'{"detail": {"type": "no_endpoint", "message": "none"}}',
            "no_endpoint",
            {"type": "no_endpoint", "message": "none"},
        ),
        (b'{"detail": "Not Found"}', None, "Not Found"),
        (b'{"detail": [{"loc": ["body", "cmd"]}]}', None, [{"loc": ["body", "cmd"]}]),
        (b"<html>502 Bad Gateway</html>", None, "<html>502 Bad Gateway</html>"),
        (b'["a list"]', None, ["a list"]),
        (b'{"error": {"type": 3}}', None, {"type": 3}),
        (b"", None, ""),
    ],
)
def test_one_reader_of_error_bodies_whichever_server_wrote_them(body, kind, detail):
    assert error_type(body) == kind and error_detail(body) == detail
