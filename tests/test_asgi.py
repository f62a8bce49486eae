# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The plain-ASGI session and exception middlewares answer as NeMo Gym's own do; a malformed or
oversized body is a 4xx with the reason (every route of a real stack: tests/test_job_api.py)."""

from __future__ import annotations

import json

import pytest
from aiohttp import ClientResponseError
from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from nemo_gym.server_utils import SESSION_ID_KEY
from pydantic import BaseModel, field_validator

from prorl_gym.asgi import PlainASGIMiddleware


class Server(PlainASGIMiddleware):
    def get_session_middleware_key(self) -> str:
        return "Server___test"

    def body_limits(self) -> dict[str, int]:
        return {"/bounded": 1000}


class Row(BaseModel):
    expected_answer: str
    n: int = 0

    @field_validator("n")
    @classmethod
    def _small(cls, value: int) -> int:
        if value > 10:
            raise ValueError("n is at most 10")  # pydantic keeps the exception itself in the error's ctx
        return value


def client() -> TestClient:
    app, server = FastAPI(), Server()
    server.setup_session_middleware(app)
    server.setup_exception_middleware(app)

    # What NeMo Gym's run_webserver registers after every hook of the server: a handler that
    # prints the body with json.dumps (and raises on bytes, or on an exception in an error).
    @app.exception_handler(RequestValidationError)
    async def nemo_gyms_handler(request: Request, exc):
        print(json.dumps(exc.errors()), json.dumps(exc.body))
        return await request_validation_exception_handler(request, exc)

    @app.post("/row")
    async def row(body: Row) -> str:
        return body.expected_answer

    @app.post("/bounded")
    async def bounded(body: Row) -> int:
        return len(body.expected_answer)

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


@pytest.mark.parametrize(
    ("body", "headers", "type_"),
    [
        (b"{not json", {"content-type": "application/json"}, "json_invalid"),
        (b"\xff\xfe\x00 binary", {"content-type": "application/octet-stream"}, "model_attributes_type"),
        (b"plain text", {"content-type": "text/plain"}, "model_attributes_type"),
        (b"[1, 2]", {"content-type": "application/json"}, "model_attributes_type"),
        (b'{"n": 1}', {"content-type": "application/json"}, "missing"),
        (b'{"expected_answer": "4", "n": 11}', {"content-type": "application/json"}, "value_error"),
        (b"", {"content-type": "application/json"}, "missing"),
    ],
)
def test_a_malformed_body_is_a_422_with_the_reason_never_a_500(body, headers, type_):
    answer = client().post("/row", content=body, headers=headers)
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["detail"]
    assert error["type"] == type_ and error["msg"] and "input" not in error


def test_a_bounded_route_answers_413_before_reading_past_its_limit():
    c = client()
    assert c.post("/bounded", json={"expected_answer": "x" * 900}).json() == 900
    too_big = c.post("/bounded", json={"expected_answer": "x" * 2000})
    assert too_big.status_code == 413 and "limit of 1000 bytes on /bounded" in too_big.json()["detail"]

    def chunks():  # no content-length: counted as it arrives
        yield b'{"expected_answer": "'
        for _ in range(10):
            yield b"x" * 200
        yield b'"}'

    chunked = c.post("/bounded", content=chunks(), headers={"content-type": "application/json"})
    assert chunked.status_code == 413 and "limit of 1000 bytes" in chunked.json()["detail"]
    assert c.post("/row", json={"expected_answer": "x" * 5000}).status_code == 200  # other routes: no bound


def test_servers_parse_http_with_httptools():
    """NeMo Gym runs uvicorn with http="auto": with httptools (a dependency) installed that is what
    every server parses requests with, not h11's pure Python (~10% of a rollout's CPU)."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    config = uvicorn.Config(app=lambda scope, receive, send: None, http="auto")
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol
