# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Small process helpers shared by the runtimes: signal a group, reap a child without blocking."""

from __future__ import annotations

import asyncio
import os
import signal

from prorl_gym.errors import ProrlError
from prorl_gym.runtime.fdwait import fd_event

# Python ignores SIGPIPE and SIGXFSZ, and spawned children inherit ignored signals: give
# sandbox processes the normal defaults (a writer dies on a closed pipe; a file over the
# size limit kills its writer, exit 153).
DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to a process group; a group that is already gone is not an error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Gone:
    """Marker: the child has been collected, exit status unknown (not ours, or reaped before)."""


def session_members(sid: int) -> list[int]:
    """Pids of every process in session `sid` (a /proc scan: for failure paths, not hot ones)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def kill_session(sid: int, passes: int = 50) -> None:
    """SIGKILL every process of session `sid`, scanning again until none is left: a process
    may fork between a scan and its kill, and its child is only seen by the next scan."""
    for _ in range(passes):
        members = session_members(sid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _try_reap(pid: int) -> int | None | type[_Gone]:
    """The exit code once `pid` has exited (-signal if killed), None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return _Gone
    return os.waitstatus_to_exitcode(status) if done == pid else None


class StillRunning(ProrlError, TimeoutError):
    """The child did not exit within the wait: it is still ours to signal."""


async def wait_child(pid: int, timeout: float) -> int | None:
    """Wait for child `pid` to exit and collect it, woken by its pidfd (no polling).

    Returns its exit code (negative signal number if killed), None if it was collected
    before (its pid may belong to someone else now: never signal it); raises StillRunning.
    """
    code = _try_reap(pid)
    if code is None:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            pidfd = -1
        if pidfd >= 0:
            try:
                with fd_event(pidfd) as exited:
                    await asyncio.wait_for(exited, timeout)
            except TimeoutError:
                raise StillRunning(f"process {pid} still running after {timeout}s") from None
            finally:
                os.close(pidfd)
        code = _try_reap(pid)
    return None if code in (None, _Gone) else code


async def reap(pid: int, timeout: float = 5.0) -> int | None:
    """wait_child, with None also when it is still running after `timeout`."""
    if pid <= 0:
        return None
    try:
        return await wait_child(pid, timeout)
    except StillRunning:
        return None


async def exits_by_itself(pid: int, timeout: float) -> bool:
    """True once `pid` has exited and been collected within `timeout`; False if still running."""
    try:
        await wait_child(pid, timeout)
        return True
    except StillRunning:
        return False
