# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What a sandbox should be: the one config object every backend reads."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

REPO_ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30


def default_root_dir() -> str:
    # Short on purpose: Unix socket paths (the kernel's) must stay under 108 bytes.
    return os.environ.get("PRORL_SANDBOX_ROOT") or f"/tmp/prorl-{os.getuid()}"


def default_python() -> str:
    """The interpreter inside sandboxes: the minimal .venvs/sandbox (see sandbox-requirements.txt)."""
    sandbox = REPO_ROOT / ".venvs" / "sandbox" / "bin" / "python"
    return str(sandbox) if sandbox.exists() else sys.executable


class Limits(BaseModel):
    """Enforced per sandbox with rlimits (rootless, portable) and tmpfs sizes.

    A hit gives a clear result: CPU time -> SIGXCPU, file size -> SIGXFSZ ("File too
    large"), memory -> allocation failure (MemoryError), processes -> fork fails inside the
    sandbox only (counted per sandbox: each has its own user namespace). Wall time per call
    and output size are the shell/kernel timeouts and output cap.
    """

    cpu_time_s: int | None = 600  # per process
    memory_bytes: int | None = 8 * GiB  # address space per process
    processes: int | None = 512  # per sandbox
    file_size_bytes: int | None = 1 * GiB  # per file
    open_files: int | None = 4096  # per process
    workspace_bytes: int = 4 * GiB  # tmpfs size of the workspace
    tmp_bytes: int = 1 * GiB  # tmpfs size of /tmp


class Bind(BaseModel):
    src: str
    dst: str | None = None  # default: same path inside
    writable: bool = False


class ApptainerOptions(BaseModel):
    binary: str = "apptainer"  # or "singularity" (SingularityCE / older clusters)
    fakeroot: bool = False  # --fakeroot: root inside, the user outside (needs subuid or user namespaces)
    cache_dir: str | None = (
        None  # where pulled .sif images are kept (default: $APPTAINER_CACHEDIR or ~/.apptainer/cache)
    )
    extra_args: list[str] = Field(default_factory=list)  # appended to `instance start`


class SandboxSpec(BaseModel):
    backend: str = "local"
    # required: refuse to run without real isolation (bubblewrap). none: processes run as the
    # server's user with the host's view of files: only for trusted code, and said loudly.
    isolation: Literal["required", "none"] = "required"
    network: bool = False  # off: the sandbox has its own empty network namespace
    root_dir: str = Field(default_factory=default_root_dir, description="Host directory for per-sandbox dirs.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment inside the sandbox.")
    workspace: str = "/workspace"  # the working directory (and HOME) inside an isolated sandbox
    rootfs: str | None = None  # local backend: a directory to use as / (read-only) instead of the host's /usr
    image: str | None = None  # apptainer backend: a .sif path or a docker:// URI (e.g. a SWE-bench image)
    apptainer: ApptainerOptions = Field(default_factory=ApptainerOptions)
    binds: list[Bind] = Field(default_factory=list)  # extra paths the task needs (read-only by default)
    # When the server runs as root, sandboxes run as this unprivileged host uid. Not 65534: that is
    # how unmapped owners (host root) show inside, and root's files must not look like the agent's.
    host_uid: int = 100_000
    limits: Limits = Field(default_factory=Limits)
    lease_ttl_s: float | None = 6 * 3600  # a sandbox older than this is a leak: the reaper ends it
    output_limit_bytes: int = 16 * 1024
    command_timeout_s: float = 30.0
    python_timeout_s: float = 30.0
    interrupt_grace_s: float = 1.0
    start_timeout_s: float = 30.0
    kernel_python: str = Field(
        default_factory=default_python, description="Interpreter inside the sandbox with ipykernel."
    )
    # local backend: fork Python kernels from one pre-imported interpreter per server (~130 CPU-ms
    # instead of ~600 per kernel); each sandbox still gets a fresh kernel of its own.
    kernel_zygote: bool = True
