# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The policy's weights as the trainer says they are: which version generates now, and whether
generation is paused for a weight update. Every policy call of the agent (its own loop's, a
harness's through the capture endpoint) goes through `PolicyGate.call`, which

- holds a new call while paused (tools, INIT and EVAL go on; sandboxes stay), outside the call's
  own timeout: a held call is not a slow policy;
- on a pause that aborts, cancels the calls in flight and issues them again after resume: an
  aborted call's partial output is never used (calls are not streamed: nothing of it was kept);
- answers with the version the call was sent under: with pause and resume around an update, the
  version that produced its tokens.

The version and the pause are journaled (an agent restarted mid-pause is still paused, at the
same version); the pause's time is counted for /policy and /metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from prorl_gym.wire.jobs import PolicyState

STATE_KEY = "policy"


class Settings(Protocol):
    """Where the gate keeps its state across agent restarts: the job service's journal
    (prorl_gym/jobs/journal.py), which sits above the pipeline and so is not imported here."""

    @property
    def opened(self) -> bool: ...

    async def setting(self, key: str) -> Any: ...

    async def set_setting(self, key: str, value: Any) -> None: ...


class PolicyGate:
    def __init__(self, journal: Settings | None = None):
        self.journal = journal
        self.version = 0
        self.paused = False
        self._paused_done_s = 0.0  # finished pauses, since the agent started
        self.aborted = 0  # calls aborted by a pause, since the agent started (each issued again)
        self._paused_at = 0.0  # monotonic
        self._running = asyncio.Event()
        self._running.set()
        self._in_flight: set[asyncio.Task] = set()
        self._aborting: set[asyncio.Task] = set()
        self._held = 0
        # told the number of calls in flight at each change (the straggler control's policy activity)
        self.on_in_flight: Callable[[int], None] | None = None

    async def restore(self) -> None:
        """The version and pause the journal holds (after an agent restart)."""
        if self.journal is not None and self.journal.opened and (stored := await self.journal.setting(STATE_KEY)):
            self.version = int(stored["version"])
            if stored.get("paused"):
                self._pause()

    @property
    def paused_s(self) -> float:
        """Time paused since the agent started, the current pause included."""
        return self._paused_done_s + (time.monotonic() - self._paused_at if self.paused else 0.0)

    def state(self) -> PolicyState:
        return PolicyState(
            version=self.version,
            paused=self.paused,
            paused_s=round(self.paused_s, 3),
            in_flight=len(self._in_flight),
            held=self._held,
            aborted=self.aborted,
        )

    async def set_version(self, version: int) -> PolicyState:
        self.version = version
        await self._save()
        return self.state()

    async def pause(self, abort_in_flight: bool = False) -> PolicyState:
        """No new policy call from now on; with abort_in_flight, the calls in flight are cancelled and
        issued again after resume (else they finish)."""
        self._pause()
        if abort_in_flight:
            for task in list(self._in_flight):
                self._aborting.add(task)
                task.cancel("paused for a weight update: issued again after resume")
        await self._save()
        return self.state()

    async def resume(self, version: int | None = None) -> PolicyState:
        if version is not None:
            self.version = version
        if self.paused:
            self._paused_done_s += time.monotonic() - self._paused_at
            self.paused = False
            self._running.set()
        await self._save()
        return self.state()

    async def call[T](self, send: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        """`send()` once not paused: (its answer, the version it was sent under)."""
        while True:
            if self.paused:
                self._held += 1
                try:
                    await self._running.wait()
                finally:
                    self._held -= 1
            version = self.version
            task = asyncio.ensure_future(send())
            self._in_flight.add(task)
            self._report()
            try:
                return await task, version
            except asyncio.CancelledError:
                if task not in self._aborting or asyncio.current_task().cancelling():
                    raise  # the rollout itself was cancelled
                self.aborted += 1  # aborted by a pause: wait for resume, then send it again
            finally:
                self._in_flight.discard(task)
                self._aborting.discard(task)
                self._report()

    def _report(self) -> None:
        if self.on_in_flight is not None:
            self.on_in_flight(len(self._in_flight))

    def _pause(self) -> None:
        if not self.paused:
            self.paused, self._paused_at = True, time.monotonic()
            self._running.clear()

    async def _save(self) -> None:
        if self.journal is not None and self.journal.opened:  # not yet: nothing to keep (the agent has not started)
            await self.journal.set_setting(STATE_KEY, {"version": self.version, "paused": self.paused})
