# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""INIT once per task: the rollouts of one task (a GRPO group's G samples, repeats) start from
forks of one staged sandbox instead of each staging the task again.

The first seed of a task stages it in a sandbox of its own, freezes that into a template and
closes it; every seed of the task, the first included, gets a fork. Which rows are "the same
task" is the environment's `init_key` (by default the row without its sampling parameters and
NeMo Gym's rollout bookkeeping). A template idle for `ttl_s` is closed (its files go once its
last fork closes); at most `max_templates` are kept, the least recently used closed first.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from prorl_gym.sandbox import SandboxAPI, SandboxError, TemplateAPI

# Row keys that differ between the samples of one task, and never change how it is staged.
PER_SAMPLE_KEYS = ("responses_create_params", "_ng_rollout_index", "_ng_task_index")


def default_init_key(row: dict[str, Any]) -> str:
    task = {k: v for k, v in row.items() if k not in PER_SAMPLE_KEYS}
    return hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    template: TemplateAPI | None = None
    used: float = field(default_factory=time.monotonic)


class SharedInit:
    def __init__(self, ttl_s: float = 300.0, max_templates: int = 64):
        self.ttl_s = ttl_s
        self.max_templates = max_templates
        self._entries: dict[str, _Entry] = {}
        self.counts = {"templates": 0, "forks": 0}

    def __len__(self) -> int:
        return sum(entry.template is not None for entry in self._entries.values())

    async def fork(self, key: str, make_template: Callable[[], Awaitable[TemplateAPI]]) -> SandboxAPI:
        """A fork of the task's template, made first if there is none (one maker per key at a time:
        the other samples of the group wait for it instead of staging the task too)."""
        entry = self._entries.setdefault(key, _Entry())
        async with entry.lock:
            if entry.template is None:
                entry.template = await make_template()
                self.counts["templates"] += 1
                await self._evict()
            template = entry.template
        entry.used = time.monotonic()
        try:
            (sandbox,) = await template.spawn(1)
        except SandboxError:  # e.g. its host is lost with its node: the next sample stages the task anew
            if self._entries.get(key) is entry:
                await self._drop(key)
            raise
        self.counts["forks"] += 1
        return sandbox

    async def sweep(self) -> None:
        """Close the templates idle for longer than ttl_s."""
        cutoff = time.monotonic() - self.ttl_s
        for key in [k for k, e in self._entries.items() if e.used < cutoff and not e.lock.locked()]:
            await self._drop(key)

    async def close(self) -> None:
        for key in list(self._entries):
            await self._drop(key)

    async def _evict(self) -> None:
        live = sorted((e.used, k) for k, e in self._entries.items() if e.template is not None and not e.lock.locked())
        for _, key in live[: max(0, len(self) - self.max_templates)]:
            await self._drop(key)

    async def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry.template is not None:
            with contextlib.suppress(SandboxError):  # a lost host's template went with it
                await entry.template.close()
