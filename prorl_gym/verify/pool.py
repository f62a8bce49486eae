# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A pool of verifier worker processes: checks run isolated, bounded in time, off the event loop.

A check that hangs is killed with its worker (which is replaced); a worker that crashes
is replaced too. Both surface as typed errors, so the caller can record an eval_error
instead of scoring the rollout 0. Replacing is the pool's own task, not the caller's: a
caller cancelled mid-check (its client gave up) or a replacement that fails to start (a busy
machine, a worker killed while it starts) must not shrink the pool for good: a pool that lost
its last worker that way left every later check of its server waiting forever (the soak).

Workers start with the first check, not with the server (`start(eager=True)` to start them at once):
each imports its checks (sympy, math-verify: ~1 CPU-s and ~75 MiB), which a stack's environments
that see no rollout never need. A start that fails is the first checks' typed error, tried again by
the next check.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
from typing import Any

from prorl_gym.errors import ProrlError

START_TRIES = 3
RESTART_BACKOFF_S = (0.5, 30.0)  # between failed starts of a replacement: first, most

log = logging.getLogger(__name__)


class VerifierError(ProrlError):
    """The checker raised: the verification itself failed (not a wrong answer)."""


class VerifierTimeout(VerifierError, TimeoutError):
    pass


class VerifierCrashed(VerifierError):
    pass


class _Worker:
    def __init__(self, python: str, preload: list[str]):
        self._python = python
        self._preload = preload
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            self._python,
            "-m",
            "prorl_gym.verify.worker",
            *self._preload,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=1 << 24,
        )
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise VerifierCrashed("verifier worker exited during start-up")

    async def call(self, request: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            await self.proc.stdin.drain()
        except (RuntimeError, ConnectionError) as exc:  # its pipe closed: it died while idle
            raise VerifierCrashed(f"verifier worker died before the check: {exc}") from exc
        line = await self.proc.stdout.readline()
        if not line:
            raise VerifierCrashed("verifier worker died during the check")
        return json.loads(line)

    async def kill(self) -> None:
        self.signal_kill()
        if self.proc:
            await self.proc.wait()

    def signal_kill(self) -> None:
        """SIGKILL without waiting: safe in a task being cancelled."""
        if self.proc and self.proc.returncode is None:
            self.proc.kill()


class VerifierPool:
    def __init__(
        self,
        size: int = 2,
        timeout_s: float = 10.0,
        start_timeout_s: float = 60.0,
        python: str = sys.executable,
        preload: list[str] | None = None,
    ):
        self.size = size
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self._python = python
        self._preload = list(preload or [])  # checks imported and warmed at worker start
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue(maxsize=size)
        self._workers: set[_Worker] = set()
        self._replacing: set[asyncio.Task] = set()
        self._ids = itertools.count()
        self._starting: asyncio.Task | None = None  # the workers' first start (lazy: the first check's)
        self._closed = False

    async def start(self, eager: bool = False) -> None:
        if eager:
            await self._ensure_started()

    async def _ensure_started(self) -> None:
        if self._closed:
            raise VerifierCrashed("the verifier pool is closed")
        if self._starting is None or (self._starting.done() and self._starting.exception() is not None):
            self._starting = asyncio.ensure_future(self._start_all())
        try:
            await asyncio.shield(self._starting)  # a caller that goes away does not cancel the others' start
        except (TimeoutError, OSError) as exc:
            raise VerifierCrashed(f"the verifier workers did not start: {exc!r}") from exc

    async def _start_all(self) -> None:
        started = await asyncio.gather(*(self._add_worker() for _ in range(self.size)), return_exceptions=True)
        failed = [s for s in started if isinstance(s, BaseException)]
        if len(failed) == len(started):
            raise failed[0]
        for _ in failed:  # some started: the pool keeps its size by replacing the others in its own time
            self._start_replacement_task(_Worker(self._python, self._preload))

    async def _add_worker(self, tries: int = START_TRIES) -> None:
        """Start a worker; one that dies while starting (killed from outside, a transient failure) is
        started again, up to `tries` times: a lost worker must not take its server down with it."""
        for attempt in range(1, tries + 1):
            worker = _Worker(self._python, self._preload)
            self._workers.add(worker)
            try:
                await worker.start(self.start_timeout_s)
            except VerifierCrashed:
                self._workers.discard(worker)
                await worker.kill()
                if attempt == tries:
                    raise
                continue
            except BaseException:
                self._workers.discard(worker)
                await worker.kill()
                raise
            self._idle.put_nowait(worker)
            return

    async def close(self) -> None:
        self._closed = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        for task in self._replacing:
            task.cancel()
        await asyncio.gather(*self._replacing, return_exceptions=True)
        await asyncio.gather(*(w.kill() for w in self._workers))
        self._workers.clear()

    async def check(self, check: str, timeout: float | None = None, **kwargs: Any) -> Any:
        """Run the check named `module:function` with kwargs in a worker; raises a VerifierError subclass on failure."""
        await self._ensure_started()
        worker = await self._idle.get()
        request = {"id": next(self._ids), "check": check, "kwargs": kwargs}
        try:
            reply = await asyncio.wait_for(worker.call(request), timeout or self.timeout_s)
        except (TimeoutError, VerifierCrashed, OSError) as exc:
            self._replace(worker)
            if isinstance(exc, TimeoutError):
                raise VerifierTimeout(f"check {check!r} exceeded {timeout or self.timeout_s}s") from None
            raise VerifierCrashed(str(exc)) from exc
        except BaseException:  # cancelled mid-call: the worker's state is unknown
            self._replace(worker)
            raise
        self._idle.put_nowait(worker)
        if not reply["ok"]:
            raise VerifierError(reply["error"])
        return reply["result"]

    def _replace(self, worker: _Worker) -> None:
        """Kill `worker` and start its replacement in the pool's own task (synchronous: the caller
        may be in the middle of being cancelled)."""
        self._workers.discard(worker)
        worker.signal_kill()
        self._start_replacement_task(worker)

    def _start_replacement_task(self, dead: _Worker) -> None:
        task = asyncio.create_task(self._start_replacement(dead))
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _start_replacement(self, dead: _Worker) -> None:
        if dead.proc is not None:
            await dead.proc.wait()
        delay, most = RESTART_BACKOFF_S
        while True:
            try:
                await self._add_worker()
                return
            except (VerifierCrashed, TimeoutError, OSError) as exc:  # tried again: the pool keeps its size
                log.warning("a replacement verifier worker failed to start (%r); trying again in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, most)
