# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The backend interface: where a sandbox runs, and how commands are wrapped to run there.

A backend places a sandbox (private directories, an instance, ...) and returns a Placement;
the runtimes (pty bash, IPython kernel, file shell) then spawn their processes through
`Placement.wrap`, so the same drivers work for every backend.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from prorl_gym.sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from prorl_gym.sandbox.leases import Lease


class Placement(Protocol):
    sandbox_id: str
    private_dir: Path  # host directory of this sandbox (removed on close)
    workspace: str  # the working directory, as seen inside the sandbox
    socket_dir: Path  # kernel sockets; the same absolute path inside and outside
    control_dir: Path  # kernel connection files: readable inside, never writable
    log_dir: Path  # logs of processes started inside: not reachable from inside
    sandbox_uid: int | None  # the host uid of the sandbox's processes, if not the server's
    spawn_fds: dict[int, int]  # fds a process joining the sandbox needs: child fd -> ours
    python: str  # interpreter inside the sandbox that can run ipykernel

    def wrap(self, argv: list[str]) -> list[str]:
        """The host command line that runs `argv` inside this sandbox."""
        ...

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        """Like wrap, for an interactive bash: (command line, bash commands to run first)."""
        ...

    def environment(self) -> dict[str, str]:
        """The environment for processes started inside the sandbox."""
        ...

    async def close(self) -> None:
        """End every process of the sandbox and release its resources. Idempotent."""
        ...


class Backend(Protocol):
    async def place(self, sandbox_id: str, spec: SandboxSpec) -> Placement: ...

    async def reap(self, lease: Lease) -> None:
        """End whatever of a dead owner's sandbox still runs (the reaper removes its files)."""
        ...


# name -> "module:class", imported on first use so an unused backend costs nothing.
BACKENDS: dict[str, str] = {
    "local": "prorl_gym.sandbox.backends.local:LocalBackend",
    "apptainer": "prorl_gym.sandbox.backends.apptainer:ApptainerBackend",
}


class UnknownBackendError(ValueError):
    pass


def get_backend(name: str) -> Backend:
    try:
        target = BACKENDS[name]
    except KeyError:
        raise UnknownBackendError(f"unknown sandbox backend {name!r}; known: {sorted(BACKENDS)}") from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()
