# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""One sandbox host as its server sees it: the handle of its actor, through which every call on its
sandboxes goes, with its slots, health and loss (the placer keeps one per host; a RemoteSandbox
calls its host through it). A call whose host died raises SandboxLostError."""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from typing import Any

from ray.exceptions import RayActorError, RayTaskError

from prorl_gym.sandbox.backends.ray.stream import STREAMED, StreamBroken, ToolStream
from prorl_gym.sandbox.errors import SandboxLostError

STREAM_CONFIRM_S = 2.0  # a broken tool stream: how long the host's actor has to show it is alive


class HostHandle:
    """One host actor as the placer sees it."""

    def __init__(self, name: str, node_id: str, actor: Any, capacity: int):
        self.name = name
        self.node_id = node_id
        self.actor = actor
        self.stream: ToolStream | None = None  # its tool-call stream, once the host says where (stream.py)
        self.capacity = capacity
        self.node = name  # replaced by the host's own "<hostname>@<node>" once started
        self.live: set[str] = set()  # sandboxes placed here, starting ones included
        self.healthy = True
        self.draining = False
        self.missed = 0
        self.counts: Counter[str] = Counter()
        self.recent: OrderedDict[str, None] = OrderedDict()  # locality keys of sandboxes placed here
        self._lost: asyncio.Future = asyncio.get_running_loop().create_future()
        self._on_release: Any = None
        self._on_lost: Any = None

    @property
    def lost(self) -> bool:
        return self._lost.done()

    @property
    def available(self) -> bool:
        return not self.lost and self.healthy and not self.draining and len(self.live) < self.capacity

    @property
    def load(self) -> float:
        return len(self.live) / max(self.capacity, 1)

    async def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """One call on the host: a tool call on its stream, anything else an actor call;
        SandboxLostError if the host is or becomes lost meanwhile."""
        if self.lost:
            raise SandboxLostError(f"sandbox host {self.name} is lost")
        if self.stream is not None and method in STREAMED:
            call = asyncio.ensure_future(self.stream.call(method, *args))
        else:
            call = asyncio.ensure_future(getattr(self.actor, method).remote(*args))
        try:
            done, _ = await asyncio.wait([call, self._lost], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            raise
        if call not in done:
            call.cancel()
            if self.lost:
                raise SandboxLostError(f"sandbox host {self.name} was lost during {method}")
            raise TimeoutError(f"sandbox host {self.name}: {method} timed out after {timeout}s")
        try:
            return call.result()
        except StreamBroken:  # that call's outcome is unknown; the host is lost unless its actor still answers
            if self._on_lost and not await self._answers():
                self._on_lost(self)
            raise
        except Exception as exc:  # noqa: BLE001 - unwrapped below: the host's own error, or its loss
            error = unwrap(exc, self.name)
            if isinstance(error, SandboxLostError) and self._on_lost:
                self._on_lost(self)  # Ray says the actor died: no need to wait for the monitor
            raise error from None

    async def _answers(self, timeout: float = STREAM_CONFIRM_S) -> bool:
        try:
            await asyncio.wait_for(self.actor.health.remote(), timeout)
            return True
        except Exception:  # noqa: BLE001 - dead, unreachable or too slow: not answering
            return False

    async def close_stream(self) -> None:
        if self.stream is not None:
            await self.stream.close()

    def mark_lost(self) -> int:
        """The host is gone: fail its calls; how many sandboxes went with it."""
        if not self.lost:
            self._lost.set_result(True)
            self.counts["lost"] += len(self.live)
        return len(self.live)

    def release(self, sandbox_id: str) -> None:
        self.live.discard(sandbox_id)
        if self._on_release:
            self._on_release()

    def remember(self, key: str | None) -> None:
        if key is not None:
            self.recent[key] = None
            self.recent.move_to_end(key)
            while len(self.recent) > 4096:
                self.recent.popitem(last=False)

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node,
            "live": len(self.live),
            "capacity": self.capacity,
            "healthy": self.healthy and not self.lost,
            "draining": self.draining,
            "lost": self.lost,
            "started": self.counts["started"],
            "start_failures": self.counts["start_failures"],
            "lost_sandboxes": self.counts["lost"],
        }


def unwrap(exc: BaseException, host: str) -> BaseException:
    """The exception a remote call should raise here: the host's own (a SandboxError, a file
    error) as itself; the host's death as SandboxLostError."""
    if isinstance(exc, RayTaskError):
        cause = exc.cause if isinstance(exc.cause, BaseException) else None
        if cause is not None and not isinstance(cause, RayActorError):
            return cause
    if isinstance(exc, RayActorError):
        return SandboxLostError(f"sandbox host {host} is lost: {type(exc).__name__}")
    return exc
