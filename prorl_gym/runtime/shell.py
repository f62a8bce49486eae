# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A persistent bash on a pseudo-terminal, driven from outside the sandbox.

We hold the pty master; bash (wrapped in whatever isolation the backend chose) holds the
slave. Each call sends one line plus a here-document:

    PS1=<marker with a fresh nonce and $?>; . /dev/stdin <<'<DELIM>'
    <command>
    <DELIM>

`source` runs the command in the shell itself (so cd, variables and functions persist),
its stdin is the already-consumed here-document (so nothing hangs waiting for input),
and a syntax error or unterminated quote ends the sourced text instead of leaving bash
waiting for more. When the command finishes, bash prints PS1: a marker carrying this
call's nonce and exit status. We wait on the fd (event loop reader), never on a timer.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import secrets
import shlex
import signal
import struct
import termios
import time

from pydantic import BaseModel

from prorl_gym.errors import ProrlError
from prorl_gym.runtime.fdwait import fd_event
from prorl_gym.runtime.output import BoundedOutput
from prorl_gym.runtime.process import DEFAULT_SIGNALS, StillRunning, exits_by_itself, reap, signal_group, wait_child

MARKER_SEP = b"\x1e"  # ASCII record separator: never produced by ordinary text output
_HOLDBACK = 40  # longest possible marker: sep + 16 hex + ':' + 3 digits + sep, with room
_READ_CHUNK = 1 << 16


class ShellError(ProrlError):
    """The shell could not be started or died unrecoverably."""


class ShellResult(BaseModel):
    """What one bash call produced. stdout and stderr arrive merged, as on a terminal."""

    output: str
    exit_code: int | None
    timed_out: bool = False
    truncated: bool = False
    output_bytes: int = 0
    shell_restarted: bool = False
    duration_s: float = 0.0


def _spawn_on_pty(argv: list[str], env: dict[str, str], pass_fds: dict[int, int]) -> tuple[int, int]:
    """Start argv as a session leader whose controlling terminal is a new pty; (master fd, pid).

    posix_spawn instead of fork (ptyprocess): measured 0.4 ms instead of 15.6 ms from a
    300 MB server process, and safe in a multi-threaded one. After setsid, opening the
    slave makes it the controlling terminal, so job control and Ctrl-C work as usual.
    """
    master, slave = os.openpty()
    try:
        attrs = termios.tcgetattr(slave)
        # No echo; non-canonical input lifts the 4 KiB line limit (long here-document lines
        # would be cut); ISIG stays on so Ctrl-C still interrupts the foreground job.
        attrs[1] &= ~termios.ONLCR  # oflag: keep \n as \n
        attrs[3] &= ~(termios.ICANON | termios.ECHO)  # lflag
        attrs[6][termios.VMIN] = 1
        attrs[6][termios.VTIME] = 0
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        pid = os.posix_spawnp(
            argv[0],
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.ttyname(slave), os.O_RDWR, 0),
                (os.POSIX_SPAWN_DUP2, 0, 1),
                (os.POSIX_SPAWN_DUP2, 0, 2),
                *((os.POSIX_SPAWN_DUP2, ours, theirs) for theirs, ours in pass_fds.items()),
            ],
            setsid=True,
            setsigdef=DEFAULT_SIGNALS,
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    return master, pid


class PtyShell:
    """One interactive bash. One command at a time; state persists between commands."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None = None,
        output_limit: int = 16 * 1024,
        interrupt_grace_s: float = 1.0,
        start_timeout_s: float = 10.0,
        init: str = "",
        pass_fds: dict[int, int] | None = None,
    ):
        self._argv = argv
        self._env = env
        self._cwd = cwd
        self._init = init  # run once at start, before any command (e.g. the sandbox's limits)
        self._pass_fds = pass_fds or {}  # child fd -> our fd, given to the shell's process alone
        self.output_limit = output_limit
        self.interrupt_grace_s = interrupt_grace_s
        self.start_timeout_s = start_timeout_s
        self._lock = asyncio.Lock()
        self._fd = -1
        self.pid = -1
        self._reset_call_state()

    # ---------------------------------------------------------------- lifecycle

    @property
    def alive(self) -> bool:
        return self._fd >= 0 and not self._eof

    async def start(self) -> None:
        nonce = secrets.token_hex(8)
        env = dict(self._env, PS1=_ps1(nonce), PS2="")
        try:
            self._fd, self.pid = _spawn_on_pty(self._argv, env, self._pass_fds)
        except OSError as exc:
            raise ShellError(f"could not start shell {self._argv[:3]}...: {exc}") from exc
        self._eof = False
        asyncio.get_running_loop().add_reader(self._fd, self._on_readable)

        # bash prints its first prompt (the marker above) once it is ready for input.
        self._begin(nonce, self.output_limit)
        try:
            await asyncio.wait_for(asyncio.shield(self._done), self.start_timeout_s)
            # Quiet, history-free shell in its working directory; sent through the normal
            # protocol so we know it worked.
            init = "set +H +o history; unset PROMPT_COMMAND MAILCHECK HISTFILE; PS2=''"
            if self._cwd:
                init += f"; cd -- {shlex.quote(self._cwd)}"
            if self._init:
                init += f" && {self._init}"
            result = await self._run_unlocked(init, self.start_timeout_s)
        except (TimeoutError, ShellError) as exc:
            startup_output = self._capture.text()
            await self.close()
            raise ShellError(f"shell did not become ready: {exc!r} {startup_output[-500:]!r}") from exc
        if result.exit_code != 0:
            await self.close()
            raise ShellError(f"shell initialisation failed: {result.output[-500:]!r}")

    async def close(self, exit_wait_s: float = 0.0) -> None:
        """Kill the shell and its foreground job, release the pty. Idempotent.

        exit_wait_s: first give the process that long to exit by itself (its sandbox was just
        ended): a wrapper such as nsenter must reap its child before it goes, or the child
        is orphaned to the host's init.
        """
        if self._fd < 0:
            return
        if exit_wait_s and self.pid > 0 and await exits_by_itself(self.pid, exit_wait_s):
            self.pid = -1
        fd, self._fd = self._fd, -1
        try:
            foreground = os.tcgetpgrp(fd)
        except OSError:
            foreground = -1
        asyncio.get_running_loop().remove_reader(fd)
        for group in {foreground, self.pid}:
            if group > 0:
                signal_group(group, signal.SIGKILL)
        os.close(fd)  # hangs up the terminal: SIGHUP to whatever else is attached
        if self._done is not None and not self._done.done():
            self._done.set_exception(ShellError("shell closed"))
            self._done.exception()  # mark retrieved
        await reap(self.pid)
        self.pid = -1

    async def restart(self) -> None:
        await self.close()
        await self.start()

    # ---------------------------------------------------------------- commands

    async def run(self, command: str, timeout: float, output_limit: int | None = None) -> ShellResult:
        """Run `command` in the persistent shell; never raises for command-level failures."""
        async with self._lock:
            restarted = False
            if not self.alive:
                await self.restart()
                restarted = True
            try:
                result = await self._run_unlocked(command, timeout, output_limit)
            except asyncio.CancelledError:  # the command runs on: stop it before the next call gets the shell
                await asyncio.shield(self._stop_cancelled())
                raise
            result.shell_restarted = result.shell_restarted or restarted
            if result.shell_restarted and not restarted:
                # The command killed or replaced the shell (exit, exec, kill -9 $$): start
                # a fresh one now so the next call finds a working shell.
                await self.restart()
            return result

    async def _run_unlocked(self, command: str, timeout: float, output_limit: int | None = None) -> ShellResult:
        started = time.perf_counter()
        nonce = secrets.token_hex(8)
        delimiter = f"PRORL_EOF_{nonce}"
        body = command if command.endswith("\n") else command + "\n"
        payload = f"PS1={_ps1_literal(nonce)}; . /dev/stdin <<'{delimiter}'\n{body}{delimiter}\n"
        self._begin(nonce, output_limit or self.output_limit)

        timed_out = False
        restarted = False
        try:
            # The write counts against the timeout too: a shell that stopped reading (SIGSTOPped,
            # or its wrapper stopped with it) leaves a payload longer than the pty's buffer unwritten.
            deadline = time.monotonic() + timeout
            await asyncio.wait_for(self._write(payload.encode("utf-8", errors="surrogateescape")), timeout)
            exit_code = await self._wait(max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            timed_out = True
            exit_code, restarted = await self._interrupt()
        except ShellError:  # EOF: the command ended the shell (`exit 3`): report its status
            exit_code, restarted = None, True
            try:
                exit_code = await wait_child(self.pid, self.interrupt_grace_s)
                self.pid = -1  # collected: never signal a pid that may now be someone else's
            except StillRunning:  # the terminal is gone but the process is not: close() kills it
                pass

        capture = self._capture
        output = capture.text()
        if restarted:
            output += "\n[the shell exited or was killed; a new shell was started, state was lost]\n"
        return ShellResult(
            output=output,
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=capture.truncated,
            output_bytes=capture.total,
            shell_restarted=restarted,
            duration_s=time.perf_counter() - started,
        )

    async def _stop_cancelled(self) -> None:
        try:
            _exit_code, gave_up = await self._interrupt()
        except ShellError:  # it ended the shell meanwhile
            gave_up = True
        if gave_up or not self.alive:
            await self.restart()

    async def _interrupt(self) -> tuple[int | None, bool]:
        """Ctrl-C; then SIGKILL the foreground job; then give up on the shell."""
        try:
            os.write(self._fd, b"\x03")
            return await self._wait(self.interrupt_grace_s), False
        except (TimeoutError, OSError):
            pass
        except ShellError:
            return None, True
        try:
            foreground = os.tcgetpgrp(self._fd)
            if foreground > 0 and foreground != self.pid:
                signal_group(foreground, signal.SIGKILL)
                return await self._wait(self.interrupt_grace_s), False
        except (TimeoutError, OSError):
            pass
        except ShellError:
            return None, True
        await self.close()
        return None, True

    # ---------------------------------------------------------------- plumbing

    def _reset_call_state(self) -> None:
        self._capture = BoundedOutput()
        self._holdback = bytearray()
        self._marker: bytes | None = None
        self._done: asyncio.Future[int] | None = None
        self._eof = False

    def _begin(self, nonce: str, output_limit: int) -> None:
        self._capture = BoundedOutput(limit=output_limit)
        self._holdback = bytearray()
        self._marker = MARKER_SEP + nonce.encode() + b":"  # then the exit status digits, then MARKER_SEP
        self._done = asyncio.get_running_loop().create_future()

    async def _wait(self, timeout: float) -> int:
        assert self._done is not None
        return await asyncio.wait_for(asyncio.shield(self._done), timeout)

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:  # EIO: every slave fd is closed, the shell is gone
            data = b""
        if not data:
            self._eof = True
            asyncio.get_running_loop().remove_reader(self._fd)
            if self._done is not None and not self._done.done():
                self._capture.append(bytes(self._holdback))
                self._holdback.clear()
                self._done.set_exception(ShellError("shell exited"))
            return
        if self._done is None or self._done.done():
            return  # output between calls (a background job): dropped, like a closed terminal
        self._holdback += data
        found = _find_marker(self._holdback, self._marker) if self._marker else None
        if found:
            start, exit_code = found
            self._capture.append(bytes(self._holdback[:start]))
            self._holdback.clear()
            self._done.set_result(exit_code)
        elif len(self._holdback) > _HOLDBACK:
            cut = len(self._holdback) - _HOLDBACK
            self._capture.append(bytes(self._holdback[:cut]))
            del self._holdback[:cut]

    async def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
                view = view[written:]
            except BlockingIOError:
                with fd_event(self._fd, write=True) as ready:
                    await ready
            except OSError as exc:
                raise ShellError(f"shell input closed: {exc}") from exc


def _find_marker(buffer: bytearray, prefix: bytes) -> tuple[int, int] | None:
    """(offset, exit status) of `<prefix><digits><MARKER_SEP>` in buffer, if complete.

    A plain find, not a regex: the nonce is fresh every call, so a pattern would be
    compiled every call."""
    start = buffer.find(prefix)
    while start >= 0:
        digits_at = start + len(prefix)
        end = buffer.find(MARKER_SEP, digits_at)
        if end < 0:
            return None  # the rest of the marker has not arrived yet
        digits = bytes(buffer[digits_at:end])
        if digits.isdigit():
            return start, int(digits)
        start = buffer.find(prefix, start + 1)
    return None


def _ps1(nonce: str) -> str:
    """The prompt as bash should see it: `$?` is expanded when the prompt is printed."""
    return f"\x1e{nonce}:$?\x1e"


def _ps1_literal(nonce: str) -> str:
    """_ps1 as a bash word: $'\\x1e' for the separators, '$?' kept unexpanded."""
    return f"$'\\x1e'{nonce}:'$?'$'\\x1e'"
