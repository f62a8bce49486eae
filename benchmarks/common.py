# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What every benchmark shares: a traversable sandbox root, the fd limit, the JSON output."""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
from pathlib import Path

from prorl_gym.testing import traversable_dir

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results" / "bench"


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


@contextlib.contextmanager
def sandbox_root():
    """A root for sandboxes the unprivileged sandbox uid can reach (mkdtemp makes 0700)."""
    root = str(traversable_dir("prorl-bench-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def raise_fd_limit() -> None:
    """Each live sandbox holds a pty master here; lift the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def emit(name: str, results: dict) -> None:
    """Write results/bench/<name>.json and print the JSON as the last line of stdout."""
    results = {"benchmark": name} | results
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results), flush=True)
