# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The backend contract: where a sandbox runs, and how commands are wrapped to run there.

A backend places a sandbox (private directories, an instance, ...) and returns a Placement;
the runtimes (pty bash, IPython kernel, file shell) then spawn their processes through
`Placement.wrap`, so the same drivers work for every backend. Adding a backend: one module
with its options model (a BackendOptions subclass) and a class implementing `Backend`, plus
one line in BACKENDS. Nothing outside the backend looks at its name. A backend whose
sandboxes run on other machines (ray) is a SandboxFactory instead: it creates whole sandboxes.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from prorl_gym.errors import ProrlError
from prorl_gym.runtime.kernel import KernelHost
from prorl_gym.runtime.zygote import ZygoteConfig
from prorl_gym.sandbox.spec import BackendOptions, SandboxSpec

if TYPE_CHECKING:
    from prorl_gym.sandbox.leases import Lease


class Placement(KernelHost, Protocol):
    """One placed sandbox. The KernelHost part is what a Python kernel needs; the rest is what
    the Sandbox, the shells and the lease need. Every attribute is set by every backend."""

    sandbox_id: str
    private_dir: Path  # host directory of this sandbox (removed on close)
    pids: list[int]  # host processes that hold the sandbox: the reaper kills them if the owner dies
    instance: str | None  # the backend's own name for the sandbox (an Apptainer instance), if any
    fork_dirs: tuple[str, ...]  # directories inside that a fork carries over (sandbox/fork.py)

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        """Like wrap, for an interactive bash: (command line, bash commands to run first)."""
        ...

    async def close(self) -> bool:
        """End every process of the sandbox and release its resources. Idempotent. False if
        something of it may still run (its lease is then kept, marked abandoned, for a reaper)."""
        ...


class Backend(Protocol):
    options: ClassVar[type[BackendOptions]]  # this backend's part of SandboxSpec.backend

    async def place(self, sandbox_id: str, spec: SandboxSpec) -> Placement: ...

    async def reap(self, lease: Lease) -> bool:
        """End whatever of a dead owner's (or an abandoned) sandbox still runs; True when it is
        gone (the reaper then removes its files and lease), False to look again later."""
        ...

    def zygote_config(self, spec: SandboxSpec) -> ZygoteConfig | None:
        """How to start a kernel zygote whose forks can join this spec's sandboxes; None: no zygote
        (kernels start as processes of their own). Sandboxes share a zygote when configs are equal."""
        ...

    def check(self, spec: SandboxSpec) -> None:
        """Refuse, at config time, a spec this backend cannot honour (raise ValueError)."""
        ...

    def can_fork(self, spec: SandboxSpec) -> bool:
        """Whether this spec's sandboxes can be frozen into templates and forked (sandbox/fork.py)."""
        ...


@runtime_checkable
class SandboxFactory(Protocol):
    """A backend whose sandboxes live elsewhere (on hosts of a cluster): it creates whole
    sandboxes, with Sandbox's async API, instead of placements here."""

    options: ClassVar[type[BackendOptions]]

    async def create(self, spec: SandboxSpec, sandbox_id: str) -> Any: ...

    async def status(self) -> list[dict[str, Any]]:
        """Per host: live sandboxes, capacity, health, failures."""
        ...

    async def drain(self, host: str, draining: bool = True) -> dict[str, Any]:
        """Stop (or resume) new sandboxes on a host; its running ones finish."""
        ...

    async def close(self) -> None:
        """Release the hosts this process holds (their sandboxes end)."""
        ...


# name -> "module:class", imported on first use so an unused backend costs nothing.
BACKENDS: dict[str, str] = {
    "local": "prorl_gym.sandbox.backends.local.backend:LocalBackend",
    "apptainer": "prorl_gym.sandbox.backends.apptainer.backend:ApptainerBackend",
    "ray": "prorl_gym.sandbox.backends.ray.backend:RayBackend",
}


class UnknownBackendError(ProrlError, ValueError):
    pass


@cache
def backend_class(name: str) -> type[Backend]:
    try:
        target = BACKENDS[name]
    except KeyError:
        raise UnknownBackendError(f"unknown sandbox backend {name!r}; known: {sorted(BACKENDS)}") from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def private_dir_of(spec: SandboxSpec, sandbox_id: str) -> Path:
    """Every backend keeps a sandbox's host files in <root_dir>/<sandbox id> (the lease names it
    before the backend creates it, so a reaper can remove what a killed server half made)."""
    return Path(spec.root_dir) / sandbox_id


def get_backend(spec_or_name: SandboxSpec | str) -> Backend:
    """The backend of a spec (or by name)."""
    name = spec_or_name if isinstance(spec_or_name, str) else spec_or_name.backend.kind
    return backend_class(name)()
