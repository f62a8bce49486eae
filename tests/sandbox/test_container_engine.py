# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The container engine client's errors, without an engine: every call that cannot reach one says so the
same way (one place: Engine._exchange), and a refusal carries the engine's status (engine.py)."""

from __future__ import annotations

import pytest
from aiohttp import web

from prorl_gym.sandbox.backends.container.engine import Engine, EngineError
from prorl_gym.sandbox.errors import SandboxStartError


async def _chunks():
    yield b"not a tar"


async def test_every_call_without_an_engine_is_the_same_typed_error(tmp_path):
    socket = str(tmp_path / "no-engine.sock")
    engine = Engine(socket)
    try:
        for attempt in (engine.ping(), engine.inspect("c1"), engine.import_image("img", "t", _chunks())):
            with pytest.raises(EngineError, match=f"container engine at {socket} unreachable") as raised:
                await attempt
            assert isinstance(raised.value, SandboxStartError) and raised.value.status is None
    finally:
        await engine.close()


async def test_an_engine_that_refuses_answers_with_its_status(tmp_path):
    async def refuse(request: web.Request) -> web.Response:
        if request.path.endswith("/_ping"):
            return web.Response(status=500, text="down")
        if request.path.endswith("/images/create"):
            return web.Response(text='{"error": "bad tar"}\n')
        return web.json_response({"message": "no such container"}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    socket = str(tmp_path / "engine.sock")
    await web.UnixSite(runner, socket).start()
    engine = Engine(socket)
    try:
        with pytest.raises(EngineError, match="answered 500"):
            await engine.ping()
        with pytest.raises(EngineError, match="GET /containers/c1/json: 404 no such container") as raised:
            await engine.inspect("c1")
        assert raised.value.status == 404
        assert await engine.remove("c1") is False  # a 404 on removal: there was none
        with pytest.raises(EngineError, match="importing img:t failed: 200"):
            await engine.import_image("img", "t", _chunks())
    finally:
        await engine.close()
        await runner.cleanup()
