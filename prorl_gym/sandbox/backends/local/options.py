# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `local` backend's options (its part of SandboxSpec.backend)."""

from __future__ import annotations

from typing import Literal

from prorl_gym.sandbox.backends.kinds import BackendOptions


class LocalOptions(BackendOptions):
    kind: Literal["local"] = "local"
    # required: refuse to run without real isolation (bubblewrap). none: processes run as the
    # server's user with the host's view of files: only for trusted code, and said loudly.
    isolation: Literal["required", "none"] = "required"
    rootfs: str | None = None  # a directory to use as / (read-only) instead of the host's /usr
    # When the server runs as root, sandboxes run as this unprivileged host uid. Not 65534: that is
    # how unmapped owners (host root) show inside, and root's files must not look like the agent's.
    host_uid: int = 100_000
    # Fork Python kernels from one pre-imported interpreter per server (~130 CPU-ms instead of
    # ~600 per kernel); each sandbox still gets a fresh kernel of its own.
    kernel_zygote: bool = True

    @property
    def hides_packages(self) -> bool:
        return self.isolation == "required"  # bubblewrap binds the placeholders (backends/local/hidden.py)
