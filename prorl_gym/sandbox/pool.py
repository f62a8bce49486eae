# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A warm pool: N sandboxes started ahead, so INIT is an acquire rather than a start.

Pooled sandboxes are fresh: each is handed out once and never returned, so nothing of one
rollout can reach the next (no reset to get wrong). The pool refills in the background,
a bounded number of starts at a time; when it is empty, acquire starts one directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from prorl_gym.runtime.zygote import KernelZygote
from prorl_gym.sandbox.backends.instances import Backends
from prorl_gym.sandbox.sandbox import Sandbox, SandboxError, create_sandbox
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)


class SandboxPool:
    def __init__(
        self,
        spec: SandboxSpec,
        size: int,
        max_parallel_starts: int = 4,
        zygote: KernelZygote | None = None,
        prepare: Callable[[Sandbox], None] | None = None,
        backends: Backends | None = None,
    ):
        self.spec = spec
        self._zygote = zygote
        self._backends = backends  # whose instances start its sandboxes (None: the default ones)
        self._prepare = prepare  # run on each new pooled sandbox (e.g. start its kernel in the background)
        self.size = size
        self._ready: asyncio.Queue[Sandbox] = asyncio.Queue()
        self._starting = 0
        self._start_slots = asyncio.Semaphore(max_parallel_starts)
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    @property
    def ready(self) -> int:
        return self._ready.qsize()

    async def start(self, wait: bool = True) -> None:
        self._refill()
        if wait:
            await self.wait_filled()

    async def wait_filled(self) -> None:
        """Until the refills in flight are done."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def acquire(self) -> Sandbox:
        try:
            sandbox = self._ready.get_nowait()
        except asyncio.QueueEmpty:
            sandbox = None
        self._refill()
        return (
            sandbox
            if sandbox is not None
            else await create_sandbox(self.spec, zygote=self._zygote, backends=self._backends)
        )

    def _refill(self) -> None:
        while not self._closed and self._ready.qsize() + self._starting < self.size:
            self._starting += 1
            task = asyncio.create_task(self._start_one())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _start_one(self) -> None:
        try:
            async with self._start_slots:
                sandbox = await create_sandbox(self.spec, zygote=self._zygote, backends=self._backends)
        except SandboxError:
            log.exception("warm pool: a sandbox failed to start")
            return
        finally:
            self._starting -= 1
        if self._closed:
            await sandbox.close()
        else:
            if self._prepare:
                self._prepare(sandbox)
            self._ready.put_nowait(sandbox)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        while not self._ready.empty():
            await self._ready.get_nowait().close()
