# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What is left of a local sandbox on this machine, found by scanning /proc: processes that mount
from its private directory, name it on their command line, or carry its tag in their environment
(unisolated sandboxes). What the local backend's close and reap kill; what tests look for."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from prorl_gym.runtime.process import session_members

TAG_VAR = "PRORL_SANDBOX_ID"  # in the environment of every process of an unisolated sandbox


def processes_mounting(directory: str) -> list[int]:
    """Pids whose mount namespace has a mount from under `directory` (a sandbox's private dir: its
    processes, whoever their parent is now). Matched on its last two path parts, which are the
    same whether or not the file system above it (/tmp) is its own mount."""
    return _processes_whose("mountinfo", ("/" + "/".join(Path(directory).parts[-2:]) + "/").encode())


def processes_naming(text: str) -> list[int]:
    """Pids whose command line contains `text`: e.g. a private dir, named by a bwrap setting up
    its sandbox (and by its child until it execs), which has no mount from it yet."""
    return _processes_whose("cmdline", text.encode())


def _processes_whose(proc_file: str, needle: bytes) -> list[int]:
    """Pids (ours aside) whose /proc/<pid>/<proc_file> contains `needle`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                with open(f"/proc/{entry.name}/{proc_file}", "rb") as f:
                    if needle in f.read():
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def kill_leftovers(directory: str, passes: int = 20) -> bool:
    """SIGKILL what is left of a sandbox from its private dir: every process with a mount from it or
    naming it, and the rest of their sessions, scanning again until a pass finds none. A bwrap whose
    parent died while it was still starting is caught here: --die-with-parent cannot fire for a
    parent already gone, and its sandbox mounts the directory only later. False if some remain."""
    ours = os.getsid(0)
    for _ in range(passes):
        found = set(processes_mounting(directory)) | set(processes_naming(directory.rstrip("/")))
        if not found:
            return True
        sessions = set()
        for pid in found:
            with contextlib.suppress(OSError):
                sessions.add(os.getsid(pid))
        for pid in found | {m for sid in sessions - {ours} for m in session_members(sid)}:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return False


def kill_tagged(sandbox_id: str) -> int:
    """SIGKILL every process whose environment carries this sandbox's tag; returns how many."""
    tag = f"{TAG_VAR}={sandbox_id}".encode()
    killed = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
        except OSError:
            continue
    return killed
