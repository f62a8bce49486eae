# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Client side of the zygote (see zygote_main.py): start it, ask it for Python runtimes.

One zygote per resources server (per sandbox Python, uid and runtime kind), shared by its
sandboxes. Requests are serialised (the zygote forks one runtime at a time, in ~1 ms); each
returns the host pid of a runtime already inside the asked-for sandbox. Explicit lifecycle:
`start()` / `close()`; `spawn()` starts it first if need be (a resources server's zygote starts with
its first sandbox's Python, not with the server: ~1 CPU-s and ~60 MiB an environment never used
does not pay).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from prorl_gym.errors import ProrlError
from prorl_gym.runtime.process import DEFAULT_SIGNALS, reap, signal_group
from prorl_gym.runtime.python import PythonRuntimeKind

ZYGOTE_MAIN = Path(__file__).with_name("zygote_main.py")
CHILD_FD = 3


class ZygoteError(ProrlError):
    pass


@dataclass(frozen=True)
class ZygoteConfig:
    """How to start a zygote (a backend says, per sandbox spec); equal configs can share one."""

    python: str  # the sandbox's interpreter (with ipykernel for runtime ipython)
    prefix: tuple[str, ...]  # e.g. setpriv: the zygote runs as the sandbox uid, never root
    env: tuple[tuple[str, str], ...]
    log_path: str
    runtime: PythonRuntimeKind = "ipython"  # what it forks: IPython kernels or lean REPLs


class KernelZygote:
    def __init__(self, config: ZygoteConfig, start_timeout_s: float = 60.0):
        self.config = config
        self._python = config.python
        self.runtime = config.runtime
        self._prefix = list(config.prefix)
        self._env = dict(config.env)
        self._log_path = config.log_path
        self._start_timeout_s = start_timeout_s
        self._channel: socket.socket | None = None
        self._lock = asyncio.Lock()
        self._starting: asyncio.Task | None = None  # a start on first use, its own task
        self._closed = False
        self.pid = -1

    async def ensure_started(self) -> None:
        """Started once, in a task of its own: a caller cancelled meanwhile (a sandbox closed while its
        Python warmed up) must not leave a half-started zygote whose ready message answers the next
        request."""
        if self._closed:
            raise ZygoteError("the kernel zygote is closed")
        if self._channel is not None:
            return
        if self._starting is None or self._starting.done():
            self._starting = asyncio.ensure_future(self.start())
        await asyncio.shield(self._starting)

    async def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [*self._prefix, self._python, "-I", str(ZYGOTE_MAIN), str(CHILD_FD), self.runtime]
        try:
            self.pid = os.posix_spawnp(
                argv[0],
                argv,
                self._env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (
                        os.POSIX_SPAWN_OPEN,
                        1,
                        self._log_path,
                        os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                        0o600,
                    ),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                    (os.POSIX_SPAWN_DUP2, theirs.fileno(), CHILD_FD),
                ],
                setsid=True,
                setsigdef=DEFAULT_SIGNALS,
            )
        finally:
            theirs.close()
        ours.setblocking(False)
        try:
            ready = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(ours, 4096), self._start_timeout_s)
        except TimeoutError:
            ready = b""
        except BaseException:  # cancelled: nothing half-started is left
            ours.close()
            await asyncio.shield(self._end_process())
            raise
        if not ready:
            ours.close()
            await self._end_process()
            raise ZygoteError(f"the kernel zygote did not start; see {self._log_path}")
        self._channel = ours  # usable once it said it is ready

    async def spawn(
        self,
        *,
        init_pid: int | None,
        fds: list[int],
        env: dict[str, str],
        cwd: str,
        connection_file: str | None,
        rlimits: dict[str, int | list[int]],
    ) -> int:
        """A runtime in the sandbox whose pid 1 is init_pid (None: no namespaces to join).

        fds: the runtime's two ([log, ready] for a kernel, [output, control] for a REPL), then the
        sandbox's user namespace if there is one to join. Returns the runtime's host pid."""
        await self.ensure_started()
        request = json.dumps(
            {"init_pid": init_pid, "env": env, "cwd": cwd, "connection_file": connection_file, "rlimits": rlimits}
        )
        # One request, one reply, in order: a caller cancelled in between must not leave its
        # reply to the next request. So the exchange is a task of its own that always runs to
        # its end (with its own copies of the fds), and a kernel started for a caller that
        # has gone is killed.
        exchange = asyncio.ensure_future(self._exchange(request.encode(), [os.dup(fd) for fd in fds]))
        try:
            reply = await asyncio.shield(exchange)
        except asyncio.CancelledError:
            exchange.add_done_callback(_kill_unclaimed_kernel)
            raise
        result = json.loads(reply)
        if "pid" not in result:
            raise ZygoteError(f"the kernel zygote could not start a kernel: {result.get('error')}")
        return int(result["pid"])

    async def _exchange(self, request: bytes, fds: list[int]) -> bytes:
        try:
            async with self._lock:
                if self._channel is None:
                    raise ZygoteError("the kernel zygote is not running")
                try:
                    socket.send_fds(self._channel, [request], fds)  # small: the buffer takes it at once
                    reply = await asyncio.get_running_loop().sock_recv(self._channel, 4096)
                except OSError as exc:
                    raise ZygoteError(f"the kernel zygote is gone: {exc}") from exc
        finally:
            for fd in fds:
                os.close(fd)
        if not reply:
            raise ZygoteError("the kernel zygote exited")
        return reply

    async def close(self) -> None:
        self._closed = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        if self._channel is not None:
            self._channel.close()  # the zygote exits when its end closes
            self._channel = None
        await self._end_process()

    async def _end_process(self) -> None:
        if self.pid > 0:
            if await reap(self.pid, timeout=2.0) is None:
                signal_group(self.pid, 9)
                await reap(self.pid)
            self.pid = -1


def _kill_unclaimed_kernel(exchange: asyncio.Future[bytes]) -> None:
    if exchange.cancelled() or exchange.exception() is not None:
        return
    pid = json.loads(exchange.result()).get("pid")
    if pid:
        signal_group(int(pid), 9)  # its own session: the kernel and anything it started
