# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A sandbox on a remote host: the sandbox API (sandbox/api.py), each call one actor call to its host.

A call whose host died (its node lost, its process killed) raises SandboxLostError as soon
as either Ray or the host set's own health check says so, whichever is first: the rollout
ends as a typed `sandbox_lost`, never with a result made up here.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

from prorl_gym.runtime.python import PythonResult
from prorl_gym.runtime.shell import ShellResult
from prorl_gym.sandbox.api import Forkable, SandboxAPI, TemplateAPI
from prorl_gym.sandbox.backends.ray.handle import HostHandle
from prorl_gym.sandbox.errors import SandboxClosedError, SandboxLostError
from prorl_gym.sandbox.spec import SandboxSpec


class RemoteSandbox(SandboxAPI, Forkable):
    def __init__(self, sandbox_id: str, spec: SandboxSpec, host: HostHandle, info: dict[str, Any]):
        self.id = sandbox_id
        self.spec = spec
        self.host = info["host"]  # the node it runs on, for the rollout record
        self.workspace = info["workspace"]
        self.own_pid_namespace = info["own_pid_namespace"]
        self.edit_history: dict[str, list[str | None]] = {}  # the editor tool's undo stack, per file
        self.closed = False
        self.kernel_started = False
        self._host = host
        self._warm_up: asyncio.Task | None = None

    async def _call(self, method: str, *args: Any) -> Any:
        if self.closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed")
        return await self._host.call(method, self.id, *args)

    async def bash(self, command: str, timeout: float | None = None) -> ShellResult:
        return await self._call("bash", command, timeout)

    async def python(self, code: str, timeout: float | None = None) -> PythonResult:
        self.kernel_started = True
        return await self._call("python", code, timeout)

    def warm_up_kernel(self) -> None:
        """Start the kernel on the host in the background (python() waits for it there)."""
        if self._warm_up is None and not self.closed:
            self.kernel_started = True
            self._warm_up = asyncio.create_task(self._warm_up_kernel(), name=f"kernel warm-up {self.id}")

    async def _warm_up_kernel(self) -> None:
        with contextlib.suppress(Exception):  # a failure is python()'s to report
            await self._call("warm_up_kernel")

    async def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        return await self._call("read_file", path, start_line, end_line)

    async def read_bytes(self, path: str) -> bytes:
        return await self._call("read_bytes", path)

    async def write_file(self, path: str, content: str | bytes) -> str:
        return await self._call("write_file", path, content)

    async def edit_file(self, path: str, old: str, new: str) -> str:
        return await self._call("edit_file", path, old, new)

    async def freeze(self, consume: bool = False) -> RemoteTemplate:
        """A template on this sandbox's host (consume: see Sandbox.freeze)."""
        info = await self._call("freeze", consume)
        if consume:
            self.closed = True
            self._host.release(self.id)
        return RemoteTemplate(info["template_id"], self.spec, self._host, info["dropped"])

    async def close(self) -> None:
        """Close it on its host; a lost host has nothing left to close (its node reaps the rest)."""
        if self.closed:
            return
        self.closed = True
        if self._warm_up is not None:
            self._warm_up.cancel()
        with contextlib.suppress(SandboxLostError):
            self.kernel_started |= bool(await self._host.call("close", self.id))
        self._host.release(self.id)


class RemoteTemplate(TemplateAPI):
    """A template on a host: its forks start there, next to the files they share."""

    def __init__(self, template_id: str, spec: SandboxSpec, host: HostHandle, dropped: list[str]):
        self.id = template_id
        self.spec = spec
        self.dropped = dropped
        self._host = host

    async def spawn(self, n: int = 1) -> list[RemoteSandbox]:
        ids = [secrets.token_hex(6) for _ in range(n)]
        self._host.live.update(ids)  # counted against the host's slots like any sandbox of it
        try:
            infos = await self._host.call("spawn", self.id, ids)
        except BaseException:
            for sandbox_id in ids:
                self._host.release(sandbox_id)
            raise
        self._host.counts["started"] += n
        return [RemoteSandbox(i, self.spec, self._host, info) for i, info in zip(ids, infos, strict=True)]

    async def close(self) -> None:
        with contextlib.suppress(SandboxLostError):  # a lost host took its templates with it
            await self._host.call("close_template", self.id)
