# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The sandbox contract: what every sandbox is, whatever runs it and wherever.

`SandboxAPI` is what tools, evaluators and sessions use. Both sandboxes declare it (subclass it):
`Sandbox` (on this machine, sandbox.py) and `RemoteSandbox` (on a Ray host,
backends/ray/sandbox.py); the method bodies they share are written here once (resolve, upload,
download, `async with`). What not every sandbox can do is a capability of its own, checked with
isinstance on it: `Forkable` (freeze into a `TemplateAPI`, and fork; whether a given spec's
backend can is Backend.can_fork, and a freeze raises SandboxForkError where it cannot). The
backends' side of the contract (placing, creating, hosts) is backends/base.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol, Self, runtime_checkable

from prorl_gym.runtime.files import resolve_path
from prorl_gym.runtime.python import PythonResult
from prorl_gym.runtime.shell import ShellResult
from prorl_gym.sandbox.spec import SandboxSpec


class SandboxAPI(Protocol):
    """One isolated place with a persistent shell, a Python kernel and files, each started on first use."""

    id: str
    spec: SandboxSpec
    host: str  # where it runs, for the rollout record (this machine's name, or a Ray host's "<host>@<node>")
    closed: bool
    workspace: str  # where its tools start, as its processes see it (a host directory when unisolated)
    own_pid_namespace: bool  # its processes see only each other (a runner inside may end every other one)
    kernel_started: bool  # a Python kernel was started for it (it costs; most tasks never need one)
    # The editor tool's undo stack, per file: the tool's state, kept with the sandbox it edits; a
    # snapshot carries it into its branches on every backend (resources/snapshots.py).
    edit_history: dict[str, list[str | None]]

    async def bash(self, command: str, timeout: float | None = None) -> ShellResult:
        """Run a command in its persistent shell (cwd, variables and functions persist)."""
        ...

    async def python(self, code: str, timeout: float | None = None) -> PythonResult:
        """Run code in its IPython kernel, starting it on first use."""
        ...

    def warm_up_kernel(self) -> None:
        """Start the kernel in the background (e.g. while the policy writes its first turn); python()
        waits for it. A failure here is left for python() to retry and report."""
        ...

    async def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str: ...

    async def read_bytes(self, path: str) -> bytes: ...

    async def write_file(self, path: str, content: str | bytes) -> str: ...

    async def edit_file(self, path: str, old: str, new: str) -> str: ...

    async def close(self) -> None:
        """End everything it started and remove its resources. Idempotent."""
        ...

    def resolve(self, path: str) -> str:
        """A path as its tools see it (relative ones are in the workspace)."""
        return resolve_path(self.workspace, path)

    async def upload(self, local_path: str | Path, sandbox_path: str) -> str:
        """A file of this machine into the sandbox, written through the sandbox itself."""
        data = await asyncio.to_thread(Path(local_path).read_bytes)
        return await self.write_file(sandbox_path, data)

    async def download(self, sandbox_path: str, local_path: str | Path) -> None:
        """A file of the sandbox onto this machine, read through the sandbox itself."""
        data = await self.read_bytes(sandbox_path)
        await asyncio.to_thread(Path(local_path).write_bytes, data)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class TemplateAPI(Protocol):
    """A sandbox's frozen state (sandbox/fork.py): spawn() sandboxes that start from it, as often
    as needed; close() when no more are wanted (its files go once its last fork is closed too)."""

    id: str
    spec: SandboxSpec
    dropped: list[str]  # Python names of the frozen sandbox that could not be carried over

    async def spawn(self, n: int = 1) -> list[SandboxAPI]: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


@runtime_checkable
class Forkable(Protocol):
    """A sandbox that can be frozen into a template and forked (see sandbox/fork.py for what carries over)."""

    async def freeze(self, consume: bool = False) -> TemplateAPI:
        """Its state as a template to spawn forks from. consume: a sandbox made with fork.staging_spec is
        closed and its files become the template's (no copy)."""
        ...

    async def fork(self, n: int = 1) -> list[SandboxAPI]:
        """n new sandboxes starting from this one's state, isolated from it and from each other."""
        async with await self.freeze() as template:
            return await template.spawn(n)
