# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `ray` backend: sandboxes on the sandbox hosts of a Ray cluster (see this folder's __init__),
created whole there: an environment gets a RemoteSandbox with the same async API.

An instance holds the hosts it started (one HostSet per distinct options: placer.py) until it is
closed; a server holds one instance (backends/instances.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from prorl_gym.sandbox.backends.base import HasHosts, RemoteBackend
from prorl_gym.sandbox.backends.instances import backend_class
from prorl_gym.sandbox.backends.ray.options import RayOptions
from prorl_gym.sandbox.backends.ray.placer import HostSet
from prorl_gym.sandbox.backends.ray.sandbox import RemoteSandbox
from prorl_gym.sandbox.spec import SandboxSpec


class RayBackend(RemoteBackend, HasHosts):
    """Creates whole sandboxes on remote hosts, not placements here."""

    options = RayOptions

    def __init__(self) -> None:
        self._host_sets: dict[str, HostSet] = {}  # by options
        self._starting = asyncio.Lock()  # one host set started per options, however many sandboxes ask

    def check(self, spec: SandboxSpec) -> None:
        if spec.backend.inner.kind == "ray":
            raise ValueError("the ray backend's inner backend runs on a host: local or apptainer, not ray")

    def can_fork(self, spec: SandboxSpec) -> bool:
        """As its inner backend: forks are made on their parent's host."""
        inner = spec.model_copy(update={"backend": spec.backend.inner})
        return backend_class(inner.backend.kind)().can_fork(inner)

    def zygote_config(self, spec: SandboxSpec) -> None:
        return None  # hosts keep their own kernel zygotes

    async def create(self, spec: SandboxSpec, sandbox_id: str) -> RemoteSandbox:
        return await (await self._host_set(spec.backend, spec.root_dir)).create(spec, sandbox_id)

    async def _host_set(self, options: RayOptions, root_dir: str) -> HostSet:
        key = options.model_dump_json()
        async with self._starting:
            hosts = self._host_sets.get(key)
            if hosts is None:
                hosts = HostSet(options, [root_dir])
                await hosts.start()
                self._host_sets[key] = hosts
            elif root_dir not in hosts.root_dirs:
                hosts.root_dirs.append(root_dir)
        return hosts

    async def status(self) -> list[dict[str, Any]]:
        return [status for hosts in self._host_sets.values() for status in hosts.status()]

    async def drain(self, host: str, draining: bool = True) -> dict[str, Any]:
        for hosts in self._host_sets.values():
            try:
                return await hosts.drain(host, draining)
            except KeyError:
                continue
        raise KeyError(f"no sandbox host {host!r}")

    async def close(self) -> None:
        """Stop the hosts this instance started (their sandboxes end); a later create starts afresh."""
        host_sets, self._host_sets = list(self._host_sets.values()), {}
        self._starting = asyncio.Lock()  # a fresh one: a later create may run on another event loop
        for hosts in host_sets:
            await hosts.close()
