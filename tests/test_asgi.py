# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The plain-ASGI session and exception middlewares answer as NeMo Gym's own do."""

from __future__ import annotations

from aiohttp import ClientResponseError
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from nemo_gym.server_utils import SESSION_ID_KEY

from prorl_gym.asgi import PlainASGIMiddleware


class Server(PlainASGIMiddleware):
    def get_session_middleware_key(self) -> str:
        return "Server___test"


def client() -> TestClient:
    app, server = FastAPI(), Server()
    server.setup_session_middleware(app)
    server.setup_exception_middleware(app)

    @app.get("/id")
    async def session_id(request: Request) -> str:
        return request.session[SESSION_ID_KEY]

    @app.get("/boom")
    async def boom() -> None:
        raise ValueError("broken")

    @app.get("/inner")
    async def inner() -> None:
        error = ClientResponseError(None, (), status=502)
        error.response_content = "the inner server said no"
        raise error

    return TestClient(app, raise_server_exceptions=False)


def test_a_session_keeps_its_id_across_requests_and_a_new_client_gets_another():
    first, second = client(), client()
    ids = [first.get("/id").json() for _ in range(3)]
    assert len(set(ids)) == 1 and ids[0] and second.get("/id").json() != ids[0]
    assert "Server___test" in first.cookies


def test_exceptions_become_nemo_gyms_500_answers():
    c = client()
    assert (c.get("/boom").status_code, c.get("/boom").json()) == (500, "ValueError('broken')")
    inner = c.get("/inner")
    assert inner.status_code == 500
    assert inner.json() == "Hit an exception in Server___test calling an inner server: the inner server said no"
