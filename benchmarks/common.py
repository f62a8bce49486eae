# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What every benchmark shares: a traversable sandbox root, the fd limit, percentiles, the JSON output."""

from __future__ import annotations

import contextlib
import json
import math
import resource
import shutil
from collections.abc import Iterable
from pathlib import Path

from prorl_gym.testing import traversable_dir

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results" / "bench"


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0-100) of values, interpolated linearly between the two nearest ranks (the
    "inclusive" method of statistics.quantiles: q=50 is the median; one value is every percentile). Every
    benchmark reports its percentiles with this one, so their figures compare."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("a percentile of no values")
    position = q / 100 * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


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
