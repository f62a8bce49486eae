# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `container` backend's options (its part of SandboxSpec.backend)."""

from __future__ import annotations

from typing import Literal

from prorl_gym.sandbox.backends.kinds import BackendOptions

BASE_IMAGE = "localhost/prorl-gym-sandbox"  # built here from the host's packages (image.py), tagged by content


class ContainerOptions(BackendOptions):
    kind: Literal["container"] = "container"
    # The Engine API's Unix socket (Docker's, or `podman system service`'s). Default: $DOCKER_HOST
    # (unix://...), else /run/podman/podman.sock, else /var/run/docker.sock.
    socket: str | None = None
    # The image of a row that names none (SandboxSpec.image names a row's own, e.g. a SWE-bench image).
    # Default: the base image built from this host's packages (image.py; `python -m ...container.image`).
    image: str | None = None
    uid: int = 1000  # the sandbox's processes (never root; no user namespace: the same uid on the host)
    # Caps of the whole container, by the engine's cgroups (the per-process rlimits hold inside too):
    # memory (bytes; default limits.memory_bytes) and processes (limits.processes).
    memory_bytes: int | None = None
    read_only_root: bool = True  # the image's files: none writable, even where the image has them 1777
    runtime: str | None = None  # the engine's OCI runtime (e.g. runc, runsc), if not its default
