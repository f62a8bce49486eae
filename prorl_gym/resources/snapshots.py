# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Snapshots of rollouts' sandboxes at turn boundaries, to branch new rollouts from.

The agent asks for one after a turn (`snapshots: every_turn`); a branch seeds its sandbox
as a fork of it. A snapshot is a frozen template (sandbox/fork.py): its files on disk, no
process, and the editor's undo history as it was (the tool's state, carried into every branch on
every backend: `undo_edit` after a branch undoes the snapshot's last edit). It lives until released (the agent releases a batch's snapshots with the batch) or
until `ttl_s` after its creation; a killed server's are reaped by their leases. Taking and releasing
one run to their end even when the request that asked is cancelled (to_the_end.py): a snapshot taken
meanwhile is kept (the TTL or the batch's release frees it), a template is never left half closed.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

from prorl_gym.errors import ProrlError
from prorl_gym.resources.to_the_end import ToTheEnd
from prorl_gym.sandbox.api import Forkable, SandboxAPI, TemplateAPI
from prorl_gym.sandbox.errors import SandboxForkError


class UnknownSnapshotError(ProrlError, LookupError):
    """No such snapshot here: never taken, released, expired, or taken by a server since restarted."""


@dataclass
class Snapshot:
    template: TemplateAPI
    edit_history: dict[str, list[str | None]]
    taken_at: float  # time.monotonic()


class SnapshotStore:
    def __init__(self, ttl_s: float = 3600.0, max_snapshots: int = 10_000):
        self.ttl_s = ttl_s
        self.max_snapshots = max_snapshots
        self._snapshots: dict[str, Snapshot] = {}
        self.counts = {"taken": 0, "branched": 0, "released": 0}
        self._to_the_end = ToTheEnd()

    def __len__(self) -> int:
        return len(self._snapshots)

    async def take(self, sandbox: SandboxAPI) -> str:
        return await self._to_the_end.run(self._take(sandbox))

    async def _take(self, sandbox: SandboxAPI) -> str:
        if not isinstance(sandbox, Forkable):
            raise SandboxForkError(f"sandbox {sandbox.id} cannot be frozen")
        if len(self._snapshots) >= self.max_snapshots:
            await self.sweep(oldest=len(self._snapshots) - self.max_snapshots + 1)
        template = await sandbox.freeze()
        self._snapshots[template.id] = Snapshot(template, copy.deepcopy(sandbox.edit_history), time.monotonic())
        self.counts["taken"] += 1
        return template.id

    async def branch(self, snapshot_id: str) -> SandboxAPI:
        """A new sandbox as the snapshot's sandbox was when it was taken, its undo history too."""
        try:
            snapshot = self._snapshots[snapshot_id]
        except KeyError:
            raise UnknownSnapshotError(
                f"no snapshot {snapshot_id!r} (released, expired, or taken elsewhere)"
            ) from None
        (sandbox,) = await snapshot.template.spawn(1)
        sandbox.edit_history = copy.deepcopy(snapshot.edit_history)
        self.counts["branched"] += 1
        return sandbox

    async def release(self, snapshot_ids: list[str]) -> int:
        """Release snapshots (their files go once their last branch is closed); returns how many."""
        released = 0
        for snapshot_id in snapshot_ids:
            if (entry := self._snapshots.pop(snapshot_id, None)) is not None:
                await self._to_the_end.run(entry.template.close())
                released += 1
        self.counts["released"] += released
        return released

    async def sweep(self, oldest: int = 0) -> None:
        """Release the expired snapshots, and the `oldest` n besides."""
        by_age = sorted(self._snapshots, key=lambda i: self._snapshots[i].taken_at)
        cutoff = time.monotonic() - self.ttl_s
        expired = [i for i in by_age if self._snapshots[i].taken_at < cutoff]
        await self.release(list(dict.fromkeys(expired + by_age[:oldest])))

    async def close(self) -> None:
        await self._to_the_end.wait()
        await self.release(list(self._snapshots))
