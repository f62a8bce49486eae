# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym's two per-request middlewares (the session id, the exception handler) as plain ASGI,
and what every one of our servers does with a bad request body.

NeMo Gym adds both with `@app.middleware("http")`: each is a Starlette BaseHTTPMiddleware,
which runs the rest of the request in a task of its own and streams the response through a
memory channel, about a millisecond of CPU per layer per request. A rollout makes ~20
requests per server it touches, so our servers (the agent, the resources servers, the model
server) take this mixin instead: same behaviour, same answers.

A malformed body is the client's mistake and is answered 4xx with the reason: NeMo Gym's own
handler of validation errors prints the body with json.dumps, which raises on a body that is
not JSON (or an error that holds an exception), turning it into a 500; ours answers 422 with
each error's type, place and message (never the input: it may be megabytes). Routes with a
bound (the agent's /run and /jobs) answer 413 before reading past it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from uuid import uuid4

from aiohttp import ClientResponseError
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from nemo_gym import server_utils
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
            await _answer(send, 500, content)


class BodyLimits:
    """Bounds the body of requests to some paths: 413 with the limit, before more than it is read."""

    def __init__(self, app: ASGIApp, limits: dict[str, int]):
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limits.get(scope["path"]) if scope["type"] == "http" else None
        if limit is None:
            return await self.app(scope, receive, send)
        reason = f"the request body exceeds the limit of {limit} bytes on {scope['path']}"
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            return await _answer(send, 413, {"detail": reason})
        seen = 0

        async def bounded_receive() -> Message:  # a chunked body has no length to check first
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, reason)  # FastAPI passes it through its body parsing
            return message

        await self.app(scope, bounded_receive, send)


async def _answer(send: Send, status: int, content: object) -> None:
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def validation_error_answer(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with each error's type, place and message (and context, as text)."""
    errors = [
        {"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")}
        | ({"ctx": {k: str(v) for k, v in e["ctx"].items()}} if e.get("ctx") else {})
        for e in exc.errors()
    ]
    log.info("422 on %s: %s", request.url.path, errors[:3])
    return JSONResponse({"detail": errors}, status_code=422)


def answer_validation_errors(app: FastAPI) -> None:
    """Make `validation_error_answer` the app's handler of validation errors. NeMo Gym registers
    its own after every hook a server has (in run_webserver); the handlers are read when the app
    builds its middleware, at its first request, so ours is put in place then."""
    build = app.build_middleware_stack

    def build_with_our_handler() -> ASGIApp:
        app.exception_handlers[RequestValidationError] = validation_error_answer
        return build()

    app.build_middleware_stack = build_with_our_handler


def without_joining_ray(run: Callable[[], object]) -> Callable[[], object]:
    """`run` (a NeMo Gym server's run_webserver) without its Ray join. NeMo Gym joins every server to
    the stack's Ray cluster before it starts (`initialize_ray`): a Ray driver per server (a core worker,
    its threads and connections, idle workers the raylet starts for each new job), which none of ours
    uses unless its sandboxes run on Ray hosts, whose backend joins then (sandbox/backends/ray/placer.py)."""

    def run_without_ray() -> object:
        server_utils.initialize_ray = lambda: None  # this process is the server from here on
        return run()

    return run_without_ray


class PlainASGIMiddleware:
    """Mix into a NeMo Gym server class (before it in the bases) to use the middlewares above."""

    @classmethod
    def listening_address(cls) -> tuple[str, int]:
        """Where this server listens, from its config (told to its supervisor: prorl_gym/supervise.py)."""
        config = cls.load_config_from_global_config()
        return config.host, config.port

    def body_limits(self) -> dict[str, int]:
        """path -> the largest request body it takes (bytes); other paths are not bounded."""
        return {}

    def setup_session_middleware(self, app: FastAPI) -> None:
        app.add_middleware(SessionId)  # inner: added first
        key = self.get_session_middleware_key()
        app.add_middleware(SessionMiddleware, secret_key=key, session_cookie=key)

    def setup_exception_middleware(self, app: FastAPI) -> None:
        if limits := self.body_limits():
            app.add_middleware(BodyLimits, limits=limits)
        app.add_middleware(ErrorsAs500, server=self.get_session_middleware_key())
        answer_validation_errors(app)
