# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `apptainer` backend's options (its part of SandboxSpec.backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prorl_gym.sandbox.backends.kinds import BackendOptions


class ApptainerOptions(BackendOptions):  # RunsImages (kinds.py): with_writable below
    kind: Literal["apptainer"] = "apptainer"
    binary: str = "apptainer"  # or "singularity" (SingularityCE / older clusters)
    fakeroot: bool = False  # --fakeroot: root inside, the user outside (needs subuid or user namespaces)
    cache_dir: str | None = (
        None  # where pulled .sif images are kept (default: $APPTAINER_CACHEDIR or ~/.apptainer/cache)
    )
    # dir: writes to the image go to <private>/overlay on the node's disk (needs user namespaces with
    # kernel overlayfs, or fuse-overlayfs; a site that refuses it falls back to tmpfs with a warning).
    # tmpfs: --writable-tmpfs, capped by the site's `sessiondir max size` (64 MiB by default).
    overlay: Literal["dir", "tmpfs"] = "dir"
    disk_copies: tuple[str, ...] = ()  # image directories copied to the sandbox's disk, bound back writable
    config_dir: str | None = None  # APPTAINER_CONFIGDIR of the instances (default: <root_dir>/.apptainer)
    nproc: Literal["auto", "enforce", "off"] = "auto"  # limits.processes: see backend.py's docstring
    extra_args: tuple[str, ...] = ()  # appended to `instance start`

    def with_writable(self, *paths: str) -> ApptainerOptions:
        """These options with image directories copied to the sandbox's disk, bound back writable."""
        return self.model_copy(update={"disk_copies": tuple(dict.fromkeys((*self.disk_copies, *paths)))})


def config_dir_of(options: ApptainerOptions, root_dir: str | Path) -> Path:
    return Path(options.config_dir) if options.config_dir else Path(root_dir) / ".apptainer"
