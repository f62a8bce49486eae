# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `container` backend's options (its part of SandboxSpec.backend)."""

from __future__ import annotations

from typing import Literal

from prorl_gym.sandbox.backends.kinds import BackendOptions

BASE_IMAGE = "localhost/prorl-gym-sandbox"  # built here from the host's packages (image.py), tagged by content


class ContainerOptions(BackendOptions):  # RunsImages (kinds.py): with_writable below
    kind: Literal["container"] = "container"
    # The Engine API's Unix socket (Docker's, or `podman system service`'s). Default: $DOCKER_HOST
    # (unix://...), else /run/podman/podman.sock, else /var/run/docker.sock.
    socket: str | None = None
    # The image of a row that names none (SandboxSpec.image names a row's own, e.g. a SWE-bench image).
    # Default: the base image built from this host's packages (image.py; `python -m ...container.image`).
    image: str | None = None
    # The sandbox's processes: never root; no user namespace, so the same uid on the host (as bubblewrap's
    # host_uid: above the range of real users).
    uid: int = 100000
    # Caps of the whole container, by the engine's cgroups (the per-process rlimits hold inside too):
    # memory (bytes; default limits.memory_bytes) and processes (limits.processes).
    memory_bytes: int | None = None
    read_only_root: bool = True  # the image's files: none writable, even where the image has them 1777
    # Image directories the sandbox may change (a SWE image's /testbed): given to the sandbox uid at start
    # (the root file system is then writable, to root and these paths only: its writes go to the engine's disk).
    writable: tuple[str, ...] = ()
    runtime: str | None = None  # the engine's OCI runtime (e.g. runc, runsc), if not its default

    def with_writable(self, *paths: str) -> ContainerOptions:
        """These options with image directories the sandbox may write (handed to its uid at start)."""
        return self.model_copy(update={"writable": tuple(dict.fromkeys((*self.writable, *paths)))})
