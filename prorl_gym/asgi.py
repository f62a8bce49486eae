# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym's two per-request middlewares (the session id, the exception handler) as plain ASGI.

NeMo Gym adds both with `@app.middleware("http")`: each is a Starlette BaseHTTPMiddleware,
which runs the rest of the request in a task of its own and streams the response through a
memory channel, about a millisecond of CPU per layer per request. A rollout makes ~20
requests per server it touches, so our servers (the agent, the resources servers, the model
server) take this mixin instead: same behaviour, same answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from uuid import uuid4

from aiohttp import ClientResponseError
from fastapi import FastAPI
from nemo_gym.server_utils import SESSION_ID_KEY
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class SessionId:
    """Gives every request's session an id (NeMo Gym's `add_session_id`), inside SessionMiddleware."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            session = scope["session"]
            session[SESSION_ID_KEY] = session.get(SESSION_ID_KEY, str(uuid4()))  # assigned: the cookie is re-sent
        await self.app(scope, receive, send)


class ErrorsAs500:
    """An exception escaping a route becomes a JSON 500 with NeMo Gym's text, as its
    `exception_handling_middleware` answers; a cancellation (the server stopping) stays one."""

    def __init__(self, app: ASGIApp, server: str):
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if started:
                raise
            if isinstance(exc, ClientResponseError) and hasattr(exc, "response_content"):
                content = f"Hit an exception in {self.server} calling an inner server: {exc.response_content}"
            else:
                log.exception("unhandled exception in %s", self.server)
                content = repr(exc)
            body = json.dumps(content).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 500, "headers": headers})
            await send({"type": "http.response.body", "body": body})


class PlainASGIMiddleware:
    """Mix into a NeMo Gym server class (before it in the bases) to use the middlewares above."""

    def setup_session_middleware(self, app: FastAPI) -> None:
        app.add_middleware(SessionId)  # inner: added first
        key = self.get_session_middleware_key()
        app.add_middleware(SessionMiddleware, secret_key=key, session_cookie=key)

    def setup_exception_middleware(self, app: FastAPI) -> None:
        app.add_middleware(ErrorsAs500, server=self.get_session_middleware_key())
