# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Work on sandboxes that runs to its end even when the request that asked for it is cancelled.

NeMo Gym 0.7 cancels a handler whose client disconnected (ClientDisconnectCancellationMiddleware: an
anyio cancel scope, so every later await of the handler is cancelled too). A sandbox's close, start or
freeze cut short there leaves processes and files behind that nothing knows of any more. Such work runs
as a task of its own, held here (asyncio keeps only weak references to tasks) until done, and awaited
when its owner closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class ToTheEnd:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def start(self, work: Awaitable[T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def run(self, work: Awaitable[T]) -> T:
        """`work`'s result; a cancelled caller stops waiting, the work goes on."""
        return await asyncio.shield(self.start(work))

    async def wait(self) -> None:
        """Until all work started here has ended (at close)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
