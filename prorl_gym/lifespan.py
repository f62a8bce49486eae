# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Run a server component for as long as its FastAPI app lives (inside the server's loop)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI


def run_with_app(
    app: FastAPI, start: Callable[[], Awaitable[None] | None] | None, close: Callable[[], Awaitable[None]]
) -> None:
    """Wrap the app's lifespan: `start` before it, `close` after it, also when startup fails."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: FastAPI):
        try:
            if start is not None and inspect.isawaitable(started := start()):
                await started
            async with inner(app_) as state:
                yield state
        finally:
            await close()

    app.router.lifespan_context = lifespan
