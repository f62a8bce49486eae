# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The backend contract: where a sandbox runs, and how commands are wrapped to run there.

Every backend is a `Backend`, of one of two sorts:
- a PlacementBackend places a sandbox on this machine (private directories, an instance, ...)
  and returns a Placement; the runtimes (pty bash, IPython kernel, file shell) then spawn their
  processes through `Placement.wrap`, so the same drivers (sandbox.py) work for every such
  backend (local, apptainer);
- a RemoteBackend's sandboxes live on other machines (ray): it creates whole sandboxes, with the
  same API.
What a backend can do beyond that is a capability it declares by implementing its Protocol, and
callers check the capability (isinstance), never a backend's kind: HasHosts (a backend with hosts:
their status, drain), KeepsWrites (a placement whose writes can become a template's files),
RunsImages (options of a backend that runs images; kinds.py). The registry of kinds is
kinds.py; the instances a server holds, instances.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from prorl_gym.runtime.python import KernelHost
from prorl_gym.runtime.zygote import ZygoteConfig
from prorl_gym.sandbox.backends.kinds import BackendOptions
from prorl_gym.sandbox.leases import Lease
from prorl_gym.sandbox.spec import SandboxSpec


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


class PlacementBase:
    """What every placement on this machine sets alike; each backend's placement subclasses it and
    sets the rest of `Placement` (pids, fork_dirs, the wrapping) its own way."""

    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec):
        self.sandbox_id = sandbox_id
        self.private_dir = private_dir
        self.workspace = spec.workspace
        self.socket_dir = private_dir / "run"
        self.control_dir = private_dir / "ctl"
        self.log_dir = private_dir  # not mounted: the sandbox cannot plant a link here
        self.python = spec.kernel_python
        self.sandbox_uid: int | None = None  # who its processes are on the host, if not the server's user
        self.instance: str | None = None  # the backend's own name for it, if any (for the reaper)
        self.own_pid_namespace = True
        self._spec = spec
        self._closed = False


@runtime_checkable
class HostReachable(Protocol):
    """A placement whose files the host reaches directly while it runs (bubblewrap: through its pid 1's
    root): a snapshot then copies them on the host (sandbox/layers.py, which follows no link)."""

    def files_of(self, path: str) -> Path:
        """Where the host reaches the sandbox's `path` (a directory of it) as the sandbox sees it."""
        ...


@runtime_checkable
class KeepsWrites(Protocol):
    """A placement whose writes (a fork's or a staging sandbox's: an overlay's upper directory on
    the host) can be read apart from its template's files, or kept at close instead of removed:
    freezing it then takes them as a template layer (sandbox/fork.py)."""

    def writes_of(self, path: str) -> Path | None:
        """The host directory holding the sandbox's writes under `path` (one of its fork_dirs), or
        None where they are not apart from what it started with (a tmpfs)."""
        ...

    def keep_writes(self, destination: Path) -> None:
        """At close, move the sandbox's writes to destination/tmp and destination/<workspace>."""
        ...


class Backend(Protocol):
    options: ClassVar[type[BackendOptions]]  # this backend's part of SandboxSpec.backend

    def check(self, spec: SandboxSpec) -> None:
        """Refuse, at config time, a spec this backend cannot honour (raise ValueError)."""
        ...

    def can_fork(self, spec: SandboxSpec) -> bool:
        """Whether this spec's sandboxes can be frozen into templates and forked (sandbox/fork.py)."""
        ...

    def zygote_config(self, spec: SandboxSpec) -> ZygoteConfig | None:
        """How to start a kernel zygote whose forks can join this spec's sandboxes; None: no zygote
        (kernels start as processes of their own). Sandboxes share a zygote when configs are equal."""
        ...

    async def close(self) -> None:
        """Release what this instance holds (a remote backend's hosts: their sandboxes end).
        Nothing, for most."""


@runtime_checkable
class PlacementBackend(Backend, Protocol):
    """A backend whose sandboxes run on this machine: it places them, and reaps what is left of them."""

    async def place(self, sandbox_id: str, spec: SandboxSpec) -> Placement: ...

    async def reap(self, lease: Lease) -> bool:
        """End whatever of a dead owner's (or an abandoned) sandbox still runs; True when it is
        gone (the reaper then removes its files and lease), False to look again later."""
        ...


@runtime_checkable
class RemoteBackend(Backend, Protocol):
    """A backend whose sandboxes live elsewhere (on hosts of a cluster): it creates whole
    sandboxes, with the sandbox API, instead of placements here."""

    async def create(self, spec: SandboxSpec, sandbox_id: str) -> Any: ...


@runtime_checkable
class HasHosts(Protocol):
    """A backend whose sandboxes run on hosts it holds."""

    async def status(self) -> list[dict[str, Any]]:
        """Per host: live sandboxes, capacity, health, failures."""
        ...

    async def drain(self, host: str, draining: bool = True) -> dict[str, Any]:
        """Stop (or resume) new sandboxes on a host; its running ones finish. KeyError: no such host."""
        ...
