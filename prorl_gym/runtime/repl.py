# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The lean Python runtime, server side: drives repl_main.py inside the sandbox.

Per cell: one framed request on a socket, the cell's output read from a pipe (capped as a
shell's), one framed reply. No ZMQ, no Jupyter messages, no HMAC, no kernel threads: a cell
costs a fraction of a CPU-ms on each side, and a REPL forked from the zygote starts in a
few (a kernel: ~30-60 CPU-ms).

The REPL is a sandbox process and may be hostile: its replies are size-checked and parsed as
data only, its output is bounded as it arrives, and a REPL that stops answering is killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import time
from functools import cache
from pathlib import Path

from prorl_gym.runtime.output import BoundedOutput
from prorl_gym.runtime.process import DEFAULT_SIGNALS, reap, signal_group
from prorl_gym.runtime.python import KernelError, KernelHost, PythonResult
from prorl_gym.runtime.zygote import KernelZygote, ZygoteError

REPL_MAIN = Path(__file__).with_name("repl_main.py")
CONTROL_FD = 5  # where a spawned REPL finds its control socket (3 may be a joining launcher's namespace fd)
HEADER = struct.Struct(">I")
MAX_REPLY = 4 << 20  # a reply is an error report: anything larger is not one of ours
READ_SIZE = 1 << 16
DRAIN_READS = 64  # after a reply, what is already in the pipe (a background writer must not hold us)
RESTARTED_NOTE = b"\n[the Python interpreter died or would not stop; it was restarted, state was lost]\n"


@cache
def _launcher() -> str:
    """`python -I -c` source for a spawned REPL: into its working directory, then repl_main.py."""
    return "# prorl_gym repl_main\nimport os, sys\nos.chdir(sys.argv[2])\n" + REPL_MAIN.read_text()


class PythonRepl:
    """One REPL; one execution at a time; state persists between executions (PythonRuntime)."""

    def __init__(
        self,
        host: KernelHost,
        output_limit: int = 16 * 1024,
        start_timeout_s: float = 30.0,
        interrupt_grace_s: float = 2.0,
        zygote: KernelZygote | None = None,
    ):
        self._host = host
        self._zygote = zygote
        self.output_limit = output_limit
        self.start_timeout_s = start_timeout_s
        self.interrupt_grace_s = interrupt_grace_s
        self._lock = asyncio.Lock()
        self.pid = -1
        self._pidfd = -1
        self._control: socket.socket | None = None
        self._output = -1
        self._inbox = bytearray()
        self._replies: asyncio.Queue[dict | None] = asyncio.Queue()  # None: the REPL is gone
        self._capture: BoundedOutput | None = None
        self._cells = 0
        self._exit: asyncio.Future[None] | None = None  # done once the process is gone

    @property
    def alive(self) -> bool:
        return self._control is not None and self._exit is not None and not self._exit.done()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._inbox.clear()
        self._replies = asyncio.Queue()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        output_r, output_w = os.pipe()
        try:
            self.pid = await (self._fork(output_w, theirs) if self._zygote else self._spawn(output_w, theirs))
        except BaseException as exc:  # cancelled too: the zygote kills a runtime nobody claimed
            ours.close()
            os.close(output_r)
            if isinstance(exc, (OSError, ZygoteError)):
                raise KernelError(f"could not start a Python interpreter: {exc}") from exc
            raise
        finally:
            theirs.close()
            os.close(output_w)
        loop = asyncio.get_running_loop()
        ours.setblocking(False)
        os.set_blocking(output_r, False)
        self._control, self._output = ours, output_r
        loop.add_reader(output_r, self._on_output)
        loop.add_reader(ours.fileno(), self._on_control)
        self._watch_exit()
        said = self._capture = BoundedOutput(limit=2000)  # what it printed if it fails to start
        try:
            ready = await self._next_reply(self.start_timeout_s)
            if ready is None or ready.get("ready") is not True:
                raise KernelError("it exited during start-up" if ready is None else f"it said {ready}")
        except (KernelError, TimeoutError) as exc:
            self._drain_output()
            await self.close()
            raise KernelError(f"the Python interpreter did not become ready: {exc!r}\n{said.text()}") from exc
        except BaseException:  # cancelled while it started: nothing half-started is left for the next call
            await asyncio.shield(self.close())
            raise
        finally:
            self._capture = None

    async def _fork(self, output_w: int, control: socket.socket) -> int:
        host = self._host
        return await self._zygote.spawn(
            init_pid=host.init_pid,
            fds=[output_w, control.fileno(), *host.spawn_fds.values()],
            env=host.environment(),
            cwd=host.workspace,
            connection_file=None,
            rlimits=host.rlimits,
        )

    async def _spawn(self, output_w: int, control: socket.socket) -> int:
        host = self._host
        argv = host.wrap([host.python, "-I", "-c", _launcher(), str(CONTROL_FD), host.workspace])
        return os.posix_spawnp(
            argv[0],
            argv,
            host.environment(),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, output_w, 1),
                (os.POSIX_SPAWN_DUP2, output_w, 2),
                (os.POSIX_SPAWN_DUP2, control.fileno(), CONTROL_FD),
                *((os.POSIX_SPAWN_DUP2, ours, theirs) for theirs, ours in host.spawn_fds.items()),
            ],
            setsid=True,
            setsigdef=DEFAULT_SIGNALS,
        )

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        self._exit = loop.create_future()
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:  # gone already (a forked REPL is collected by the zygote)
            self._gone()
            return
        loop.add_reader(self._pidfd, self._gone, self._pidfd)

    def _gone(self, pidfd: int = -1) -> None:
        if pidfd >= 0:
            asyncio.get_running_loop().remove_reader(pidfd)
        if not self._exit.done():
            self._exit.set_result(None)
        self._replies.put_nowait(None)  # an execution waiting for its reply ends now

    async def warm_up(self) -> None:
        async with self._lock:
            await self._ensure_started()

    async def _ensure_started(self) -> None:
        if not self.alive:
            await self.close()
            await self.start()

    def stop_reading(self) -> None:
        """Read nothing more; an execution in progress ends as if the REPL died (it is about to)."""
        loop = asyncio.get_running_loop()
        if self._output >= 0:
            loop.remove_reader(self._output)
        if self._control is not None:
            loop.remove_reader(self._control.fileno())
        self._replies.put_nowait(None)

    async def close(self, exit_wait_s: float = 0.0) -> None:
        """Idempotent, and safe to run twice at once (an execution that saw its REPL die, and the
        sandbox's close): each resource is taken before the first await."""
        self.stop_reading()
        if self._control is not None:
            self._control.close()  # the REPL exits when its end reads EOF
            self._control = None
        if self._output >= 0:
            os.close(self._output)
            self._output = -1
        pid, self.pid = self.pid, -1
        pidfd, self._pidfd = self._pidfd, -1
        if pid > 0 and not (exit_wait_s and await self._exits_within(pid, exit_wait_s)):
            signal_group(pid, signal.SIGKILL)
            await self._exits_within(pid, 5.0)
        if pidfd >= 0:
            asyncio.get_running_loop().remove_reader(pidfd)
            os.close(pidfd)

    async def _exits_within(self, pid: int, timeout: float) -> bool:
        """Wait on the pidfd (a forked REPL is not our child), then collect it if it is ours."""
        if self._exit is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._exit), timeout)
            except TimeoutError:
                return False
        await reap(pid, timeout=0.5)  # no-op for a process that is not our child
        return True

    # ------------------------------------------------------------------ I/O

    def _on_output(self) -> None:
        try:
            data = os.read(self._output, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # every writer is gone: the REPL and whatever it started
            asyncio.get_running_loop().remove_reader(self._output)
            return
        if self._capture is not None:  # between cells (a background writer): nobody's output
            self._capture.append(data)

    def _drain_output(self) -> None:
        for _ in range(DRAIN_READS):
            try:
                data = os.read(self._output, READ_SIZE)
            except OSError:  # BlockingIOError: nothing more now
                return
            if not data:
                return
            self._capture.append(data)

    def _on_control(self) -> None:
        try:
            data = self._control.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._control.fileno())
            self._replies.put_nowait(None)
            return
        self._inbox += data
        while len(self._inbox) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._inbox)
            if size > MAX_REPLY:
                self._replies.put_nowait({"bad": f"a reply of {size} bytes"})
                self._inbox.clear()
                return
            if len(self._inbox) < HEADER.size + size:
                return
            payload = bytes(self._inbox[HEADER.size : HEADER.size + size])
            del self._inbox[: HEADER.size + size]
            try:
                message = json.loads(payload)
            except ValueError:
                message = None
            self._replies.put_nowait(message if isinstance(message, dict) else {"bad": "not a JSON object"})

    async def _next_reply(self, timeout: float) -> dict | None:
        """The REPL's next message (None: it is gone); raises TimeoutError."""
        async with asyncio.timeout(timeout):
            return await self._replies.get()

    # ------------------------------------------------------------------ execution

    async def execute(self, code: str, timeout: float) -> PythonResult:
        async with self._lock:
            await self._ensure_started()
            started = time.perf_counter()
            self._cells += 1
            cell = self._cells
            capture = self._capture = BoundedOutput(limit=self.output_limit)
            result = PythonResult(output="")
            try:
                state = await self._run(cell, code, timeout, result)
            finally:
                if self._output >= 0:
                    self._drain_output()
                self._capture = None
            if state != "done":  # would not stop, died, or broke the protocol: start over next time
                await self.close()
                capture.append(RESTARTED_NOTE)
            result.output = capture.text()
            result.truncated = capture.truncated
            result.kernel_restarted = state != "done"
            result.duration_s = time.perf_counter() - started
            return result

    async def _run(self, cell: int, code: str, timeout: float, result: PythonResult) -> str:
        """'done', or why not: 'dead', 'stuck' (would not stop), 'bad' (spoke out of protocol)."""
        try:
            await asyncio.get_running_loop().sock_sendall(self._control, _frame({"n": cell, "code": code}))
        except OSError:
            return "dead"
        try:
            reply = await self._next_reply(timeout)
        except TimeoutError:
            result.timed_out = True
            try:  # in-band (repl_main.py: SIGIO in the REPL): a KeyboardInterrupt in the cell
                await asyncio.get_running_loop().sock_sendall(self._control, _frame({"interrupt": cell}))
            except OSError:
                return "dead"
            try:
                reply = await self._next_reply(self.interrupt_grace_s)
            except TimeoutError:
                return "stuck"
        if reply is None:
            return "dead"
        if reply.get("n") != cell or "error" not in reply:
            return "bad"
        result.error = _error(reply["error"], self.output_limit)
        return "done"


def _frame(message: dict) -> bytes:
    payload = json.dumps(message).encode()
    return HEADER.pack(len(payload)) + payload


def _error(error, limit: int) -> dict | None:
    """The reply's error report as data: strings, each capped."""
    if not isinstance(error, dict):
        return None
    return {key: str(error.get(key, ""))[-limit:] for key in ("ename", "evalue", "traceback")}
