# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A Python runtime's host (runtime/python.py KernelHost) without a sandbox, for the runtime tests."""

import os
import sys
from pathlib import Path
from types import SimpleNamespace


def local_host(tmp_path: Path) -> SimpleNamespace:
    """Runs as us, in tmp_path, with this interpreter; nothing to join, no wrapper."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    (tmp_path / "run").mkdir(exist_ok=True)
    return SimpleNamespace(
        socket_dir=tmp_path / "run",
        control_dir=tmp_path / "run",
        log_dir=tmp_path,
        python=sys.executable,
        workspace=str(tmp_path),
        sandbox_uid=None,
        spawn_fds={},
        init_pid=None,
        rlimits={},
        wrap=lambda argv: argv,
        environment=lambda: env,
    )
