# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""How many threads llama.cpp generates with, when --threads is not given.

llama.cpp's threads meet at a barrier after every operation of every token, so a generation is as fast
as its slowest thread: when anything else wants the same cores, a thread that is not scheduled holds up
the others. Measured on this project's 2-core machine: idle, 2 threads 46-48 tokens/s; under load
(load average ~11), 2 threads 0.15-0.18 tokens/s and 1 thread 1.5-2.6. So: every core this process may
use when nothing else is runnable as it starts, else one thread (never worse than one).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from pathlib import Path


def usable_cores() -> int:
    """The cores this process may run on (its affinity), within its cgroup's CPU quota if it has one."""
    cores, quota = len(os.sched_getaffinity(0)), cgroup_quota()
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def cgroup_quota() -> float | None:
    """CPUs' worth of time the cgroup may use (cgroup v2 cpu.max, or v1); None: no quota."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()  # "max 100000" or "200000 100000"
    except (OSError, ValueError):
        try:
            quota = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text().strip()  # -1: none
            period = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    return None if quota in ("max", "-1") else int(quota) / int(period)


def others_runnable(samples: int = 10, interval_s: float = 0.05) -> float:
    """The median number of runnable tasks besides this one (the machine's, /proc/loadavg), over ~0.5 s."""
    seen = []
    for i in range(samples):
        fields = Path("/proc/loadavg").read_text().split()
        seen.append(int(fields[3].split("/")[0]) - 1)  # this process is runnable while it reads
        if i < samples - 1:
            time.sleep(interval_s)
    return statistics.median(seen)


def choose_threads(cores: int, others: float) -> int:
    """Every core when the others leave them all free (fewer than half a task runnable), else one."""
    return cores if others < 0.5 else 1


def default_threads() -> tuple[int, str]:
    """(threads, why) for this machine as it is now."""
    cores, others = usable_cores(), others_runnable()
    threads = choose_threads(cores, others)
    return threads, f"{cores} usable cores, {others:g} other tasks runnable"
