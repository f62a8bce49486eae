# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Where sandboxes keep their files on the host, and which interpreter runs inside them by default."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from prorl_gym.paths import REPO_ROOT


def default_root_dir() -> str:
    # Short on purpose: Unix socket paths (the kernel's) must stay under 108 bytes.
    return os.environ.get("PRORL_SANDBOX_ROOT") or f"/tmp/prorl-{os.getuid()}"


def default_python() -> str:
    """The interpreter inside sandboxes: the minimal .venvs/sandbox (see sandbox-requirements.txt)."""
    sandbox = REPO_ROOT / ".venvs" / "sandbox" / "bin" / "python"
    return str(sandbox) if sandbox.exists() else sys.executable


def private_dir_of(root_dir: str | Path, sandbox_id: str) -> Path:
    """Every backend keeps a sandbox's host files in <root_dir>/<sandbox id> (the lease names it
    before the backend creates it, so a reaper can remove what a killed server half made)."""
    return Path(root_dir) / sandbox_id
