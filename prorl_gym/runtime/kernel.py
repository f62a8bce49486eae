# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A persistent IPython kernel inside the sandbox, driven over ZMQ IPC (Unix sockets).

The kernel listens on sockets in a directory private to its sandbox (bound at the same
absolute path inside and outside, because the connection file names it); this process
holds the client end. No TCP, no web server. Started lazily: a kernel costs ~0.5 s and
~34 MiB, so only tasks that use Python pay for it.

The server may run as root and the sandbox must not steer it: the log is opened outside the
sandbox, and the sockets are trusted only as kernel_sockets.py says.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from functools import cache

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient

from prorl_gym.runtime.fdwait import fd_event
from prorl_gym.runtime.iopub import IOPubReader
from prorl_gym.runtime.kernel_sockets import new_connection, seal
from prorl_gym.runtime.output import BoundedOutput
from prorl_gym.runtime.process import DEFAULT_SIGNALS, reap, signal_group
from prorl_gym.runtime.python import KernelError, KernelHost, PythonResult
from prorl_gym.runtime.zygote import KernelZygote, ZygoteError

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
READY_FD = 4  # the launcher writes "bound" here once its sockets exist
# ipykernel_launcher, plus a report once the sockets are bound. Closes fd 3 first: a
# sandbox's user-namespace fd the joining process needed, not for the kernel.
LAUNCHER = (
    "import os, sys\n"
    "try: os.close(3)\nexcept OSError: pass\n"
    "from ipykernel.kernelapp import IPKernelApp\n"
    "app = IPKernelApp.instance()\n"
    "app.initialize(sys.argv[1:])\n"
    f"os.write({READY_FD}, b'bound'); os.close({READY_FD})\n"
    "app.start()\n"
)


@cache
def _client_context() -> zmq.asyncio.Context:
    """One ZMQ context for kernel clients; its sockets never reconnect to a vanished path."""
    context = zmq.asyncio.Context()
    context.setsockopt(zmq.RECONNECT_IVL, -1)
    return context


@cache
def _iopub_context() -> zmq.Context:
    """The same context, for the plain sockets of IOPubReader."""
    return zmq.Context.shadow(_client_context())


class IPythonKernel:
    """One IPython kernel; one execution at a time; state persists between executions."""

    def __init__(
        self,
        host: KernelHost,
        output_limit: int = 16 * 1024,
        start_timeout_s: float = 30.0,
        interrupt_grace_s: float = 2.0,
        zygote: KernelZygote | None = None,
    ):
        self._host = host
        self._zygote = zygote  # fork a pre-imported interpreter instead of starting one (~12x less CPU)
        self.output_limit = output_limit
        self.start_timeout_s = start_timeout_s
        self.interrupt_grace_s = interrupt_grace_s
        self._lock = asyncio.Lock()
        self._client: AsyncKernelClient | None = None  # sends requests; its replies are never read
        self._iopub: IOPubReader | None = None  # stopped when the kernel dies or stop_reading() is called
        self.pid = -1
        self._exited: asyncio.Future[None] | None = None
        self._pidfd = -1

    @property
    def alive(self) -> bool:
        return self._client is not None and self._exited is not None and not self._exited.done()

    async def start(self) -> None:
        host = self._host
        connection = new_connection(host.socket_dir, host.control_dir, host.sandbox_uid)
        conn_file = connection.connection_file
        log = str(host.log_dir / f"kernel-{connection.token}.log")
        ready_r, ready_w = os.pipe()
        try:
            self.pid = await (
                self._fork(host, log, ready_w, str(conn_file))
                if self._zygote
                else self._spawn(
                    host, log, ready_w, ["-f", str(conn_file), "--HistoryManager.enabled=False", "--quiet"]
                )
            )
        except (OSError, ZygoteError) as exc:
            os.close(ready_r)
            raise KernelError(f"could not start a kernel: {exc}") from exc
        finally:
            os.close(ready_w)
        self._watch_exit()
        try:
            async with asyncio.timeout(self.start_timeout_s):
                await self._bound(ready_r)
            seal(connection, host.sandbox_uid)
            info = connection.info
            self._iopub = IOPubReader(
                _iopub_context(), connection.iopub_address, info["key"].encode()
            )  # subscribes first
            client = AsyncKernelClient(context=_client_context())
            client.load_connection_info(info)
            # No heartbeat channel: its 1 s liveness check misfires while kernels start under
            # load; the pidfd tells us exactly when the process dies. No stdin (allow_stdin is
            # off); IOPub is read by our own reader.
            client.start_channels(iopub=False, stdin=False, hb=False)
            self._client = client
            await self._wait_ready(time.monotonic() + self.start_timeout_s)
            if not self._zygote:
                await self._enter_workspace()
        except Exception as exc:
            detail = _tail(log)
            await self.close()
            raise KernelError(f"kernel did not become ready: {exc!r}\n{detail}") from exc
        finally:
            os.close(ready_r)

    async def _enter_workspace(self) -> None:
        """posix_spawn has no cwd: move a started kernel into its working directory (a forked one
        is there already)."""
        chdir = f"import os as _os; _os.chdir({self._host.workspace!r}); del _os"
        result = PythonResult(output="")
        state = await self._collect(
            self._client.execute(chdir, silent=True, store_history=False),
            BoundedOutput(),
            result,
            time.monotonic() + self.start_timeout_s,
        )
        if state != "idle" or result.error:
            raise KernelError(f"could not enter {self._host.workspace}: {state} {result.error}")

    async def _spawn(self, host: KernelHost, log: str, ready_w: int, args: list[str]) -> int:
        argv = host.wrap([host.python, "-c", LAUNCHER, *args])
        return os.posix_spawnp(
            argv[0],
            argv,
            host.environment(),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600),
                (os.POSIX_SPAWN_DUP2, 1, 2),
                (os.POSIX_SPAWN_DUP2, ready_w, READY_FD),
                *((os.POSIX_SPAWN_DUP2, ours, theirs) for theirs, ours in host.spawn_fds.items()),
            ],
            setsid=True,
            setsigdef=DEFAULT_SIGNALS,
        )

    async def _fork(self, host: KernelHost, log: str, ready_w: int, connection_file: str) -> int:
        log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            fds = [log_fd, ready_w, *host.spawn_fds.values()]
            return await self._zygote.spawn(
                init_pid=host.init_pid,
                fds=fds,
                env=host.environment(),
                cwd=host.workspace,
                connection_file=connection_file,
                rlimits=host.rlimits,
            )
        finally:
            os.close(log_fd)

    async def _bound(self, ready_fd: int) -> None:
        """Until the launcher reports its sockets bound (or the kernel dies)."""
        with fd_event(ready_fd) as report:
            await asyncio.wait({report, self._exited}, return_when=asyncio.FIRST_COMPLETED)
        if not report.done() or os.read(ready_fd, 16) != b"bound":
            raise KernelError("kernel exited before binding its sockets")

    async def _wait_ready(self, deadline: float) -> None:
        """kernel_info requests until the kernel's IOPub status for one of them reaches us: then
        it reads our shell socket and we read its IOPub (a subscriber connected late misses what
        was published before, hence the repeats).

        Any of our requests counts: under load an answer can take longer than the poll
        interval, and insisting on the latest request would chase it forever.
        """
        iopub, sent, wait_s = self._iopub, set(), 0.02
        while True:
            if self._exited.done():
                raise KernelError("kernel exited during start-up")
            if time.monotonic() > deadline:
                raise KernelError(f"no kernel_info answer within {self.start_timeout_s}s")
            sent.add(self._client.kernel_info())
            try:
                while True:
                    msg = await iopub.get(wait_s)
                    if msg is None:
                        raise KernelError("kernel exited or was closed during start-up")
                    if msg.msg_type == "status" and msg.parent_id in sent:
                        return
            except TimeoutError:  # asked again, less often: a kernel under load takes its time
                wait_s = min(2 * wait_s, 1.0)

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        self._exited = loop.create_future()
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:  # gone already (a forked kernel is collected by the zygote)
            self._exited.set_result(None)
            return

        def on_exit() -> None:
            loop.remove_reader(self._pidfd)
            if not self._exited.done():
                self._exited.set_result(None)
            if self._iopub is not None:  # an execution waiting for output ends now
                self._iopub.stop()

        loop.add_reader(self._pidfd, on_exit)

    async def warm_up(self) -> None:
        """Start the kernel now unless it runs; an execution arriving meanwhile waits for it."""
        async with self._lock:
            await self._ensure_started()

    async def _ensure_started(self) -> None:
        if not self.alive:
            await self.close()
            await self.start()

    def stop_reading(self) -> None:
        """Read nothing more from the kernel; called before it is killed from outside. libzmq
        aborts the whole process (fq.cpp `!_more`) when a peer's pipe ends in the middle of
        a multipart message being read. An execution in progress ends as if the kernel died."""
        if self._iopub is not None:
            self._iopub.close()

    async def close(self, exit_wait_s: float = 0.0) -> None:
        """Kill the kernel; exit_wait_s: first let it exit by itself (see PtyShell.close)."""
        self.stop_reading()
        self._iopub = None
        if self._client is not None:
            self._client.stop_channels()
            self._client = None
        if self.pid > 0 and exit_wait_s and await self._exits_within(exit_wait_s):
            self.pid = -1
        if self.pid > 0:
            signal_group(self.pid, signal.SIGKILL)
            await self._exits_within(5.0)
            self.pid = -1
        if self._pidfd >= 0:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    async def _exits_within(self, timeout: float) -> bool:
        """Wait on the pidfd (a kernel forked by the zygote is not our child), then collect
        it if it is ours."""
        if self._exited is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._exited), timeout)
            except TimeoutError:
                return False
        await reap(self.pid, timeout=0.5)  # no-op for a process that is not our child
        return True

    async def execute(self, code: str, timeout: float) -> PythonResult:
        """Run `code`; errors come back as a traceback, a hang as timed_out, never as a raise."""
        async with self._lock:
            restarted = False
            await self._ensure_started()
            started = time.perf_counter()
            capture = BoundedOutput(limit=self.output_limit)
            result = PythonResult(output="")
            msg_id = self._client.execute(code, store_history=False, allow_stdin=False, stop_on_error=False)
            deadline = time.monotonic() + timeout
            state = await self._collect(msg_id, capture, result, deadline)
            if state == "timeout":
                result.timed_out = True
                self._interrupt()
                state = await self._collect(msg_id, capture, result, time.monotonic() + self.interrupt_grace_s)
            if state != "idle":  # would not stop, or died: start over next time
                await self.close()
                restarted = True
                capture.append(b"\n[the Python kernel died or would not stop; it was restarted, state was lost]\n")
            result.output = capture.text()
            result.truncated = capture.truncated
            result.kernel_restarted = restarted
            result.duration_s = time.perf_counter() - started
            return result

    async def _collect(self, msg_id: str, capture: BoundedOutput, result: PythonResult, deadline: float) -> str:
        """Read iopub until our execution is idle ('idle'), the deadline ('timeout') or death ('dead')."""
        iopub = self._iopub
        if iopub is None or self._exited.done():  # closed, or dead
            return "dead"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                msg = await iopub.get(remaining)
            except TimeoutError:
                return "timeout"
            if msg is None:  # died meanwhile, or stop_reading()
                return "dead"
            if msg.parent_id != msg_id:
                continue
            kind, content = msg.msg_type, msg.content
            if kind == "stream":
                capture.append(content["text"].encode())
            elif kind in ("execute_result", "display_data"):
                text = content.get("data", {}).get("text/plain")
                if text is not None:
                    capture.append((text + "\n").encode())
            elif kind == "error":
                traceback = _ANSI.sub("", "\n".join(content.get("traceback", [])))
                result.error = {"ename": content["ename"], "evalue": content["evalue"], "traceback": traceback}
                capture.append((traceback + "\n").encode())
            elif kind == "status" and content.get("execution_state") == "idle":
                return "idle"

    def _interrupt(self) -> None:
        """Ask the kernel to SIGINT itself (works across namespaces, unlike our signals)."""
        if self._client is None:
            return
        msg = self._client.session.msg("interrupt_request", content={})
        self._client.control_channel.send(msg)


def _tail(path: str, size: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
