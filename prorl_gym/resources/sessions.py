# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Session id -> sandbox, for one resources server process.

A rollout's session (NeMo Gym's session cookie) owns at most one sandbox, created at
seed_session (from the warm pool when there is one) and closed at verify or release.
Sandboxes idle longer than `idle_ttl_s` (an agent that died mid-rollout) are closed by a
background sweep, which also runs the lease reaper for sandboxes of dead servers (also at
start, so a restart after `kill -9` cleans up after its predecessor); shutdown closes all.
Starting and closing a sandbox run to their end even when the request that asked for them is
cancelled (to_the_end.py); a start whose requester is gone is closed once started.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from operator import methodcaller
from pathlib import Path

from prorl_gym.errors import ProrlError
from prorl_gym.resources.shared_init import SharedInit
from prorl_gym.resources.snapshots import SnapshotStore
from prorl_gym.resources.to_the_end import ToTheEnd
from prorl_gym.runtime.zygote import KernelZygote
from prorl_gym.sandbox import Backends, SandboxAPI, SandboxError, SandboxSpec, create_sandbox, default_backends
from prorl_gym.sandbox.backends.base import HasHosts
from prorl_gym.sandbox.fork import staging_spec
from prorl_gym.sandbox.owner import short_hostname
from prorl_gym.sandbox.pool import SandboxPool
from prorl_gym.sandbox.reaper import reap_stale

log = logging.getLogger(__name__)


class UnknownSessionError(ProrlError, LookupError):
    """No live sandbox for this session: never seeded, already verified, or expired."""


class SandboxSessions:
    def __init__(
        self,
        spec: SandboxSpec,
        idle_ttl_s: float = 3600.0,
        pool_size: int = 0,
        warm_kernels: bool = False,
        shared_init: SharedInit | None = None,
        snapshots: SnapshotStore | None = None,
    ):
        self.spec = spec
        self.backends = Backends()  # this server's backend instances, closed with it
        self.backend = self.backends.get(spec)
        self.snapshots = snapshots or SnapshotStore()
        self.idle_ttl_s = idle_ttl_s
        self.zygote = kernel_zygote_for(spec, self.backends)
        self._prepare = methodcaller("warm_up_kernel") if warm_kernels else None  # every new sandbox, pooled or not
        self.pool = (
            SandboxPool(spec, pool_size, zygote=self.zygote, prepare=self._prepare, backends=self.backends)
            if pool_size
            else None
        )
        self._sandboxes: dict[str, SandboxAPI] = {}
        self.counts: Counter[str] = Counter()  # since start: sandboxes started, failed to start, kernels started
        self._last_used: dict[str, float] = {}
        self._sweeper: asyncio.Task | None = None
        self._to_the_end = ToTheEnd()  # starts and closes, also of requests cancelled meanwhile
        self.shared_init = shared_init if shared_init is not None and self.backend.can_fork(spec) else None
        if shared_init is not None and self.shared_init is None:
            log.warning(
                "share_init is on but %s sandboxes cannot fork: every rollout stages its task", spec.backend.kind
            )

    def __len__(self) -> int:
        return len(self._sandboxes)

    async def start(self) -> None:
        Path(self.spec.root_dir).mkdir(parents=True, exist_ok=True)
        if self.pool:  # (the zygote starts with the first sandbox's Python: KernelZygote.spawn)
            await self.pool.start(wait=False)
        self._sweeper = asyncio.create_task(self._sweep_forever())

    async def close(self) -> None:
        if self._sweeper:
            self._sweeper.cancel()
        if self.pool:
            await self.pool.close()
        if self.zygote:
            await self.zygote.close()
        if self.shared_init:  # templates go once their last fork below is closed
            await self.shared_init.close()
        await self.snapshots.close()
        await self._to_the_end.wait()
        sandboxes, self._sandboxes = list(self._sandboxes.values()), {}
        self._last_used.clear()
        await asyncio.gather(*(sb.close() for sb in sandboxes), return_exceptions=True)
        await self.backends.close()  # e.g. the hosts this server holds on other nodes

    async def hosts(self) -> list[dict]:
        """Where sandboxes run: each remote host (live sandboxes, capacity, health, failures), or this one."""
        if isinstance(self.backend, HasHosts):
            return await self.backend.status()
        return [
            {
                "name": short_hostname(),
                "node": short_hostname(),
                "live": len(self._sandboxes),
                "healthy": True,
                "draining": False,
                "started": self.counts["started"],
                "start_failures": self.counts["start_failures"],
            }
        ]

    async def drain(self, host: str, draining: bool = True) -> dict:
        """Stop (or resume) new sandboxes on a remote host; KeyError for an unknown host."""
        if not isinstance(self.backend, HasHosts):
            raise KeyError(f"{self.spec.backend.kind!r} sandboxes have no hosts to drain")
        return await self.backend.drain(host, draining)

    async def create(self, session_id: str, spec: SandboxSpec | None = None) -> SandboxAPI:
        """A fresh sandbox for this session (a stale one from a retried seed is closed first).

        `spec`: this task's own (e.g. with its repository bound in); the warm pool only
        serves the server's default spec."""
        return await self._open(session_id, lambda: self._new(spec))

    async def create_shared(
        self, session_id: str, key: str, spec: SandboxSpec, stage: Callable[[SandboxAPI], Awaitable[None]]
    ) -> SandboxAPI:
        """A fork of the task's template (see shared_init.py), staged by `stage` if there is none yet."""

        async def make_template():
            staging = await create_sandbox(staging_spec(spec), zygote=self._zygote_for(spec), backends=self.backends)
            try:
                await stage(staging)
                return await staging.freeze(consume=True)  # its files become the template's, uncopied
            finally:
                await staging.close()

        return await self._open(session_id, lambda: self.shared_init.fork(key, make_template))

    async def create_branch(self, session_id: str, snapshot_id: str) -> SandboxAPI:
        """A sandbox as another session's was when the snapshot was taken (snapshots.py)."""
        return await self._open(session_id, lambda: self.snapshots.branch(snapshot_id))

    async def _open(self, session_id: str, start: Callable[[], Awaitable[SandboxAPI]]) -> SandboxAPI:
        """The session's new sandbox from `start` (a stale one from a retried seed is closed first)."""
        await self.release(session_id)
        starting = self._to_the_end.start(start())
        try:
            sandbox = await asyncio.shield(starting)
        except SandboxError:
            self.counts["start_failures"] += 1
            raise
        except asyncio.CancelledError:  # the requester is gone: close what it was starting, once started
            starting.add_done_callback(self._close_if_started)
            raise
        self.counts["started"] += 1
        if self._prepare:
            self._prepare(sandbox)
        self._sandboxes[session_id] = sandbox
        self._last_used[session_id] = time.monotonic()
        return sandbox

    async def _new(self, spec: SandboxSpec | None) -> SandboxAPI:
        if spec is not None and spec != self.spec:
            return await create_sandbox(spec, zygote=self._zygote_for(spec), backends=self.backends)
        if self.pool:
            return await self.pool.acquire()
        return await create_sandbox(self.spec, zygote=self.zygote, backends=self.backends)

    def _zygote_for(self, spec: SandboxSpec) -> KernelZygote | None:
        """The server's zygote, if its forks can join this spec's sandboxes."""
        shares = self.zygote is not None and self.backends.get(spec).zygote_config(spec) == self.zygote.config
        return self.zygote if shares else None

    def get(self, session_id: str) -> SandboxAPI:
        try:
            sandbox = self._sandboxes[session_id]
        except KeyError:
            raise UnknownSessionError(
                f"no sandbox for session {session_id!r} (not seeded, finished or expired)"
            ) from None
        self._last_used[session_id] = time.monotonic()
        return sandbox

    def find(self, session_id: str) -> SandboxAPI | None:
        return self._sandboxes.get(session_id)

    async def release(self, session_id: str) -> bool:
        """Close the session's sandbox if it has one; True if there was one."""
        sandbox = self._sandboxes.pop(session_id, None)
        self._last_used.pop(session_id, None)
        if sandbox is None:
            return False
        self.counts["kernels"] += sandbox.kernel_started
        await self._to_the_end.run(sandbox.close())
        return True

    def _close_if_started(self, starting: asyncio.Task) -> None:
        if not starting.cancelled() and starting.exception() is None:
            self._to_the_end.start(starting.result().close())

    async def _sweep_forever(self) -> None:
        # What a killed predecessor left is reaped first, but not before serving: a server SIGKILLed
        # with 250 sandboxes took minutes to reap them on a busy machine, all that time unready.
        await self._reap()
        interval = max(1.0, min(60.0, self.idle_ttl_s / 4))
        while True:
            await asyncio.sleep(interval)
            cutoff = time.monotonic() - self.idle_ttl_s
            stale = [sid for sid, used in self._last_used.items() if used < cutoff]
            for sid in stale:
                log.warning("closing sandbox of session %s: idle for more than %.0fs", sid, self.idle_ttl_s)
                await self.release(sid)
            if self.shared_init:
                await self.shared_init.sweep()
            await self.snapshots.sweep()
            await self._reap()

    async def _reap(self) -> None:
        try:
            await reap_stale(self.spec.root_dir, self.backends)
        except Exception:  # the next sweep tries again; serving goes on
            log.exception("reaping stale sandboxes under %s failed", self.spec.root_dir)


def kernel_zygote_for(spec: SandboxSpec, backends: Backends | None = None) -> KernelZygote | None:
    """The kernel zygote for this server's sandboxes, if their backend forks kernels; started with the sessions."""
    config = (backends if backends is not None else default_backends()).get(spec).zygote_config(spec)
    return KernelZygote(config) if config is not None else None
