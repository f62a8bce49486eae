# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Who owns a sandbox: an id unique to this server process on this host.

Sandbox names (Apptainer instances, lease files) carry it, so cleanup only ever touches
this server's sandboxes, and a reaper can tell a live owner from a dead one (or from an
unrelated process that reused its pid, thanks to the start time).
"""

from __future__ import annotations

import os
import socket
from functools import cache


def process_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (field 22 of /proc/<pid>/stat), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat.rsplit(b")", 1)[1].split()[19])


def process_alive(pid: int, start_time: int | None) -> bool:
    return process_start_time(pid) == start_time


def short_hostname() -> str:
    return socket.gethostname().split(".")[0][:20]


def own_start_time() -> int | None:
    """This process's start time (process_start_time), read once per process (a fork reads its own)."""
    return _start_time_of_self(os.getpid())


@cache
def _start_time_of_self(pid: int) -> int | None:
    return process_start_time(pid)


def owner_id() -> str:
    """`<host>-<pid>-<start ticks>`: stable for this process, never reused by another."""
    return _owner_id(os.getpid())


@cache
def _owner_id(pid: int) -> str:  # per pid: a process forked from this one is another owner
    return f"{short_hostname()}-{pid}-{_start_time_of_self(pid)}"


def owned_here(owner: str) -> bool:
    """Whether an owner id names a process of this host: only those can be judged alive or dead
    here (a sandbox root on a shared file system holds other nodes' leases too)."""
    return owner.rsplit("-", 2)[0] == short_hostname()


def owner_alive(owner: str) -> bool:
    """Whether the process an owner id of this host names still runs (anything not an owner id of ours
    counts as alive: never judged dead)."""
    try:
        _, pid, start = owner.rsplit("-", 2)
        return process_alive(int(pid), int(start))
    except ValueError:
        return True
