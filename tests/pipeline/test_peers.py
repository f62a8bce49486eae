# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Peers' session cookies go back as a Cookie header that the servers (Starlette) read as they were set."""

from http.cookies import SimpleCookie

import pytest
from aiohttp import web
from starlette.requests import cookie_parser

from prorl_gym.pipeline.peers import PeerClient, cookie_header
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
