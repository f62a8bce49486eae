# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `ray` backend: sandboxes on the sandbox hosts of a Ray cluster (see this folder's __init__),
created whole there: an environment gets a RemoteSandbox with the same async API.

Ray itself is imported only when the backend is used (placer.py), not when a spec naming it is read."""

from __future__ import annotations

from typing import Any

from prorl_gym.sandbox.backends.base import backend_class
from prorl_gym.sandbox.backends.ray.options import RayOptions
from prorl_gym.sandbox.spec import SandboxSpec


class RayBackend:
    """Creates whole sandboxes on remote hosts (a SandboxFactory), not placements here."""

    options = RayOptions

    def check(self, spec: SandboxSpec) -> None:
        if spec.backend.inner.kind == "ray":
            raise ValueError("the ray backend's inner backend runs on a host: local or apptainer, not ray")

    def can_fork(self, spec: SandboxSpec) -> bool:
        """As its inner backend: forks are made on their parent's host."""
        inner = spec.model_copy(update={"backend": spec.backend.inner})
        return backend_class(inner.backend.kind)().can_fork(inner)

    def zygote_config(self, spec: SandboxSpec) -> None:
        return None  # hosts keep their own kernel zygotes

    async def create(self, spec: SandboxSpec, sandbox_id: str) -> Any:
        from prorl_gym.sandbox.backends.ray.placer import host_set  # Ray is imported only when used

        return await (await host_set(spec.backend, spec.root_dir)).create(spec, sandbox_id)

    async def status(self) -> list[dict[str, Any]]:
        from prorl_gym.sandbox.backends.ray.placer import host_sets

        return [status for hosts in host_sets() for status in hosts.status()]

    async def drain(self, host: str, draining: bool = True) -> dict[str, Any]:
        from prorl_gym.sandbox.backends.ray.placer import host_sets

        for hosts in host_sets():
            try:
                return await hosts.drain(host, draining)
            except KeyError:
                continue
        raise KeyError(f"no sandbox host {host!r}")

    async def close(self) -> None:
        from prorl_gym.sandbox.backends.ray.placer import close_host_sets

        await close_host_sets()
