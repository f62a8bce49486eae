# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `ray` backend's options (its part of SandboxSpec.backend); reading them imports no Ray."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, SerializeAsAny

from prorl_gym.sandbox.backends.kinds import BackendOptions
from prorl_gym.sandbox.spec import backend_options


class RayOptions(BackendOptions):
    kind: Literal["ray"] = "ray"
    inner: Annotated[SerializeAsAny[BackendOptions], BeforeValidator(backend_options)] = Field(
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
    # Tool calls (bash, python, files) over one TCP connection per server and host (stream.py) rather
    # than an actor call each; Ray still places hosts and runs every sandbox's lifecycle.
    tool_stream: bool = True
