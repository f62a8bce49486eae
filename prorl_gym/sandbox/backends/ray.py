# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `ray` backend: sandboxes on sandbox hosts spread over a Ray cluster (prorl_gym/sandbox/ray).

Each host runs the `inner` backend (local bubblewrap, or Apptainer on HPC nodes) on its node;
the environment gets a RemoteSandbox with the same async API. In config:

    sandbox:
      backend: {kind: ray, inner: {kind: apptainer}, slots_per_host: 32, cpus_per_sandbox: 1}

Nodes offer themselves with a custom resource (`ray start ... --resources '{"prorl_sandbox_host": 1}'`),
so operators choose which nodes run sandboxes (not the GPU nodes of the trainer). The sandbox
root, the sandbox venv and the SWE repository cache must be at the same paths on every node
(a shared file system, as on HPC clusters; the root is best node-local, like /tmp).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SerializeAsAny

from prorl_gym.sandbox.backends.base import backend_class
from prorl_gym.sandbox.spec import BackendOptions, SandboxSpec, _backend_options


class RayOptions(BackendOptions):
    kind: Literal["ray"] = "ray"
    inner: Annotated[SerializeAsAny[BackendOptions], BeforeValidator(_backend_options)] = Field(
        "local", validate_default=True
    )
    address: str | None = None  # None: the Ray this process joined (NeMo Gym's), else $RAY_ADDRESS or "auto"
    namespace: str = "prorl-gym"
    host_resource: str = "prorl_sandbox_host"  # the custom resource that marks nodes for sandboxes
    hosts_per_node: int = 1
    slots_per_host: int = 64  # sandboxes per host at most
    cpus_per_sandbox: float = 0.0  # > 0: also at most node CPUs / this per host
    memory_per_sandbox_bytes: int = 0  # > 0: also at most node memory / this per host
    health_interval_s: float = 1.0
    health_failures: int = 3  # missed health checks in a row before a host gets no new sandboxes
    host_start_timeout_s: float = 120.0
    placement_timeout_s: float = 60.0  # how long a start waits for a free slot


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
        from prorl_gym.sandbox.ray.hosts import host_set  # Ray is imported only when used

        return await (await host_set(spec.backend, spec.root_dir)).create(spec, sandbox_id)

    async def status(self) -> list[dict[str, Any]]:
        from prorl_gym.sandbox.ray.hosts import host_sets

        return [status for hosts in host_sets() for status in hosts.status()]

    async def drain(self, host: str, draining: bool = True) -> dict[str, Any]:
        from prorl_gym.sandbox.ray.hosts import host_sets

        for hosts in host_sets():
            try:
                return await hosts.drain(host, draining)
            except KeyError:
                continue
        raise KeyError(f"no sandbox host {host!r}")

    async def close(self) -> None:
        from prorl_gym.sandbox.ray.hosts import close_host_sets

        await close_host_sets()
