# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A request's handler cancelled midway, as NeMo Gym 0.7 cancels one whose client disconnected."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import anyio


async def cancelled_midway(work, midway: asyncio.Event) -> None:
    """`work` as NeMo Gym 0.7 runs a request's handler: in an anyio cancel scope cancelled when the client
    disconnects (here: once `midway` is set), after which every await in the handler is cancelled too."""
    async with anyio.create_task_group() as requests:

        async def handler():
            try:
                await work()
            finally:
                requests.cancel_scope.cancel()

        async def client_disconnects():
            await midway.wait()
            requests.cancel_scope.cancel()

        requests.start_soon(handler)
        requests.start_soon(client_disconnects)


@dataclass
class Held:
    """A method held at its call: `reached` once it is called, it goes on once `go_on` is set; `results`: what
    its calls returned."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    go_on: asyncio.Event = field(default_factory=asyncio.Event)
    results: list = field(default_factory=list)


def hold(monkeypatch, owner: type, name: str) -> Held:
    held, method = Held(), getattr(owner, name)

    async def held_method(self, *args, **kwargs):
        held.reached.set()
        await held.go_on.wait()
        held.results.append(await method(self, *args, **kwargs))
        return held.results[-1]

    monkeypatch.setattr(owner, name, held_method)
    return held
