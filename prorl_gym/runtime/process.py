"""Small process helpers shared by the runtimes: signal a group, reap a child without blocking."""

from __future__ import annotations

import asyncio
import os
import signal

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


def _try_reap(pid: int) -> int | None | type[_Gone]:
    """The exit code once `pid` has exited (-signal if killed), None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return _Gone
    return os.waitstatus_to_exitcode(status) if done == pid else None


async def reap(pid: int, timeout: float = 5.0) -> int | None:
    """Wait for child `pid` to exit, woken by its pidfd rather than by polling.

    Returns its exit code (negative signal number if killed), or None if unknown.
    """
    if pid <= 0:
        return None
    code = _try_reap(pid)
    if code is not None:
        return None if code is _Gone else code
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        code = _try_reap(pid)
        return None if code is _Gone else code
    loop = asyncio.get_running_loop()
    exited = loop.create_future()
    loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
    try:
        await asyncio.wait_for(exited, timeout)
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    code = _try_reap(pid)
    return None if code in (None, _Gone) else code
