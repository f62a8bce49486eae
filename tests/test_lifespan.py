# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from prorl_gym.lifespan import run_with_app


def test_start_runs_before_the_app_and_close_after_it():
    events, app = [], FastAPI()
    app.router.on_startup.append(lambda: events.append("app up"))
    app.router.on_shutdown.append(lambda: events.append("app down"))

    async def close():
        events.append("closed")

    run_with_app(app, lambda: events.append("started"), close)  # a sync start is fine too
    with TestClient(app):
        events.append("serving")
    assert events == ["started", "app up", "serving", "app down", "closed"]


def test_close_runs_when_the_app_fails_to_start():
    events, app = [], FastAPI()

    def broken():
        raise RuntimeError("startup failed")

    async def start():
        events.append("started")

    async def close():
        events.append("closed")

    app.router.on_startup.append(broken)
    run_with_app(app, start, close)
    with pytest.raises(RuntimeError, match="startup failed"), TestClient(app):
        pass
    assert events == ["started", "closed"]
