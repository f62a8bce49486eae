"""The backend interface: where a sandbox runs, and how commands are wrapped to run there.

A backend places a sandbox (private directories, an instance, ...) and returns a Placement;
the runtimes (pty bash, IPython kernel, file shell) then spawn their processes through
`Placement.wrap`, so the same drivers work for every backend.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from prorl_gym.sandbox.spec import SandboxSpec


class Placement(Protocol):
    sandbox_id: str
    workspace: str  # the working directory, as seen inside the sandbox
    socket_dir: Path  # kernel sockets; the same absolute path inside and outside
    python: str  # interpreter inside the sandbox that can run ipykernel

    def wrap(self, argv: list[str]) -> list[str]:
        """The host command line that runs `argv` inside this sandbox."""
        ...

    def environment(self) -> dict[str, str]:
        """The environment for processes started inside the sandbox."""
        ...

    async def close(self) -> None:
        """End every process of the sandbox and release its resources. Idempotent."""
        ...


class Backend(Protocol):
    async def place(self, sandbox_id: str, spec: SandboxSpec) -> Placement: ...


# name -> "module:class", imported on first use so an unused backend costs nothing.
BACKENDS: dict[str, str] = {
    "local": "prorl_gym.sandbox.backends.local:LocalBackend",
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
