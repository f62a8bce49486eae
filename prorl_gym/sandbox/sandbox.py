# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The Sandbox API: one isolated place with a persistent shell, a Python kernel and files, each
started on first use.

    async with await create_sandbox(SandboxSpec()) as sb:
        await sb.bash("cd /tmp && ls")
        await sb.python("x = 1 + 1")
        await sb.write_file("a.txt", "hello")

Backends decide where it runs (`local`, ...); the drivers here are the same for all.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from prorl_gym.runtime.files import FileChannelError, SandboxFiles
from prorl_gym.runtime.kernel import IPythonKernel
from prorl_gym.runtime.python import KernelError, PythonResult, PythonRuntime
from prorl_gym.runtime.repl import PythonRepl
from prorl_gym.runtime.shell import PtyShell, ShellError, ShellResult
from prorl_gym.runtime.zygote import KernelZygote
from prorl_gym.sandbox.api import Forkable, SandboxAPI
from prorl_gym.sandbox.backends.base import HostReachable, Placement, PlacementBackend, RemoteBackend
from prorl_gym.sandbox.backends.instances import Backends, default_backends
from prorl_gym.sandbox.errors import (
    SandboxClosedError,
    SandboxError,
    SandboxForkError,
    SandboxKernelError,
    SandboxStartError,
    SandboxUnresponsiveError,
)
from prorl_gym.sandbox.fork import RESTORE_PYTHON, Template, freeze, remove_shell_state, restore_shell
from prorl_gym.sandbox.leases import Lease, abandon_lease, lease_for, remove_lease, write_lease
from prorl_gym.sandbox.spec import SandboxSpec

BASH_ARGV = ["bash", "--noprofile", "--norc", "--noediting", "-i"]
PYTHON_RUNTIMES = {"repl": PythonRepl, "ipython": IPythonKernel}  # SandboxSpec.python_runtime
EXIT_WAIT_S = 2.0  # at close, how long the shells' and kernel's wrappers may take to exit by themselves


class Sandbox(SandboxAPI, Forkable):
    """A sandbox on this machine, placed by a PlacementBackend: its shells and kernel are driven
    from this process, through its Placement."""

    def __init__(
        self,
        spec: SandboxSpec,
        backend: PlacementBackend,
        placement: Placement,
        zygote: KernelZygote | None = None,
        on_close: Callable[[str], Awaitable[None]] | None = None,
    ):
        self.spec = spec
        self.backend = backend  # the instance that placed it (its forks are placed by it too)
        self.placement = placement
        self.zygote = zygote
        self._on_close = on_close  # e.g. a fork's template, which lives as long as its forks
        self.template: Template | None = None  # the template this sandbox was forked from
        self.id = placement.sandbox_id
        self.host = socket.gethostname()  # where it runs: a remote backend's placement says otherwise
        # A fork starts its shell where its parent's was; its Python state comes with its kernel.
        self._host_reachable = isinstance(placement, HostReachable)
        restore = restore_shell(self._host_reachable) if spec.template_dir else ""
        self._shell = self._new_shell(spec.output_limit_bytes, restore)
        self._shell_started = False
        self._shell_start = asyncio.Lock()
        self.python_state_pending = False
        self._file_shell = self._new_shell(spec.output_limit_bytes)
        self._kernel: PythonRuntime | None = None
        self._kernel_warm_up: asyncio.Task | None = None
        self._lazy_start = asyncio.Lock()  # the kernel and the file shell start on first use
        self.files = SandboxFiles(self._file_shell, placement.workspace, timeout_s=spec.file_timeout_s)
        self.edit_history: dict[str, list[str | None]] = {}  # the editor tool's undo stack, per file
        self.closed = False

    def _new_shell(self, output_limit: int, restore: str = "") -> PtyShell:
        argv, init = self.placement.wrap_shell(BASH_ARGV)
        init = " && ".join(filter(None, [init, restore]))
        return PtyShell(
            argv,
            self.placement.environment(),
            cwd=self.placement.workspace,
            init=init,
            pass_fds=self.placement.spawn_fds,
            output_limit=output_limit,
            interrupt_grace_s=self.spec.interrupt_grace_s,
            start_timeout_s=self.spec.start_timeout_s,
        )

    # ------------------------------------------------------------------ lifecycle

    async def _start_shell(self) -> None:
        """The shell starts on first use, like the kernel: a rollout that only runs Python never
        pays for one (~4 CPU-ms)."""
        async with self._shell_start:
            if self._shell_started:
                return
            try:
                await self._shell.start()
            except ShellError as exc:  # the shell has closed itself
                raise SandboxStartError(f"sandbox {self.id}: {exc}") from exc
            except BaseException:  # cancelled mid-start: no half-started shell is left for the next call
                await asyncio.shield(self._shell.close())
                raise
            self._shell_started = True
            if self.spec.template_dir and self._host_reachable:  # the state it loaded goes (restore_shell)
                await asyncio.to_thread(remove_shell_state, self.placement)  # type: ignore[arg-type]

    async def close(self) -> None:
        """Kill everything the sandbox started and remove its resources. Idempotent."""
        if self.closed:
            return
        self.closed = True
        warm_up = self._kernel_warm_up
        if warm_up is not None:
            warm_up.cancel()
        if self._kernel is not None:  # no reads while it dies (see IPythonKernel.stop_reading)
            self._kernel.stop_reading()
        # The placement first: it ends every process inside, so the shells' and kernel's
        # host-side wrappers see their child exit and are reaped here, not by the host's init.
        gone = await self.placement.close()
        if warm_up is not None:  # over before the kernel is closed, so that it cannot start one after
            await asyncio.wait([warm_up], timeout=EXIT_WAIT_S)
        closers = [self._shell.close(EXIT_WAIT_S), self._file_shell.close(EXIT_WAIT_S)]
        if self._kernel is not None:
            closers.append(self._kernel.close(EXIT_WAIT_S))
        await asyncio.gather(*closers, return_exceptions=True)
        await asyncio.to_thread(remove_lease if gone else abandon_lease, self.spec.root_dir, self.id)
        if self._on_close is not None:
            await self._on_close(self.id)

    async def freeze(self, consume: bool = False) -> Template:
        """This sandbox's state as a template to spawn forks from, as often as needed (see fork.py
        for what carries over); its forks are placed by the same backend, with the same kernel
        zygote. consume: a sandbox made with fork.staging_spec is closed and its files become the
        template's (no copy)."""
        self._check_open()
        if not self.backend.can_fork(self.spec):
            raise SandboxForkError(f"sandbox {self.id}: its backend ({self.spec.backend.kind}) cannot fork")
        backend, zygote = self.backend, self.zygote

        async def start(spec: SandboxSpec, sandbox_id: str, template: Template, python_state: bool) -> Sandbox:
            sandbox = await start_sandbox(backend, spec, sandbox_id, zygote, template.release)
            sandbox.template = template
            sandbox.python_state_pending = python_state  # loaded with its kernel, before any cell of its own
            return sandbox

        return await freeze(self, start, self.spec.start_timeout_s + self.spec.command_timeout_s, consume)

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed")

    # ------------------------------------------------------------------ tools

    async def bash(self, command: str, timeout: float | None = None) -> ShellResult:
        self._check_open()
        if not self._shell_started:
            await self._start_shell()
        with self._unresponsive_is_typed():
            return await self._shell.run(command, timeout or self.spec.command_timeout_s)

    @contextlib.contextmanager
    def _unresponsive_is_typed(self):
        """A shell of ours that would not (re)start or finish: the sandbox's failure, typed as one
        (an infrastructure failure upstream), never mistaken for the command's or the file's."""
        try:
            yield
        except (ShellError, FileChannelError) as exc:
            raise SandboxUnresponsiveError(f"sandbox {self.id}: {exc}") from exc

    async def python(self, code: str, timeout: float | None = None) -> PythonResult:
        """Run code in the sandbox's Python (its spec's runtime: a lean REPL or an IPython kernel),
        starting it on first use."""
        kernel = await self._get_kernel()
        try:
            return await kernel.execute(code, timeout or self.spec.python_timeout_s)
        except KernelError as exc:  # the environment failed, not the code: a typed sandbox error
            raise SandboxKernelError(f"sandbox {self.id}: {exc}") from exc

    @property
    def workspace(self) -> str:
        """Where the sandbox's tools start, as its processes see it (a host directory when unisolated)."""
        return self.placement.workspace

    @property
    def socket_dir(self) -> Path:
        """A host directory its processes read at the same path (not write): where Unix sockets into
        it are served (its kernel's; an in-sandbox harness's model socket, resources/harness.py)."""
        return self.placement.socket_dir

    @property
    def own_pid_namespace(self) -> bool:
        """Its processes see only each other (a runner inside may end every process but its own)."""
        return self.placement.own_pid_namespace

    @property
    def kernel_started(self) -> bool:
        """A Python kernel was started for this sandbox (it costs; most tasks never need one)."""
        return self._kernel is not None

    def warm_up_kernel(self) -> None:
        """Start the kernel in the background, e.g. while the policy writes its first turn;
        python() waits for it. A failure here is left for python() to retry and report."""
        self._check_open()
        if self._kernel_warm_up is None:
            self._kernel_warm_up = asyncio.create_task(self._warm_up_kernel(), name=f"kernel warm-up {self.id}")

    async def _warm_up_kernel(self) -> None:
        with contextlib.suppress(KernelError, SandboxError):
            await (await self._get_kernel()).warm_up()

    async def _get_kernel(self) -> PythonRuntime:
        self._check_open()
        async with self._lazy_start:
            if self._kernel is None:
                kernel = PYTHON_RUNTIMES[self.spec.python_runtime](
                    self.placement,
                    output_limit=self.spec.output_limit_bytes,
                    start_timeout_s=self.spec.start_timeout_s,
                    interrupt_grace_s=max(self.spec.interrupt_grace_s, 1.0),
                    zygote=self.zygote,
                )
                if self.python_state_pending:  # a fork: its parent's variables before any cell of its own
                    await self._restore_python(kernel)
                self._kernel = kernel
            return self._kernel

    async def _restore_python(self, kernel: PythonRuntime) -> None:
        try:
            result = await kernel.execute(RESTORE_PYTHON, self.spec.python_timeout_s)
        except KernelError as exc:
            await kernel.close()
            raise SandboxKernelError(f"sandbox {self.id}: {exc}") from exc
        if result.error is not None or result.timed_out:
            await kernel.close()
            raise SandboxKernelError(f"sandbox {self.id}: its parent's Python state did not load: {result.error}")
        self.python_state_pending = False

    @contextlib.asynccontextmanager
    async def _files(self):
        self._check_open()
        with self._unresponsive_is_typed():
            if not self._file_shell.alive:
                async with self._lazy_start:
                    if not self._file_shell.alive:
                        await self._file_shell.start()
            yield self.files

    async def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        async with self._files() as files:
            return await files.read(path, start_line, end_line)

    async def read_bytes(self, path: str) -> bytes:
        async with self._files() as files:
            return await files.read_bytes(path)

    async def write_file(self, path: str, content: str | bytes) -> str:
        async with self._files() as files:
            return await files.write(path, content)

    async def edit_file(self, path: str, old: str, new: str) -> str:
        async with self._files() as files:
            return await files.edit(path, old, new)


async def create_sandbox(
    spec: SandboxSpec | None = None,
    sandbox_id: str | None = None,
    zygote: KernelZygote | None = None,
    on_close: Callable[[str], Awaitable[None]] | None = None,
    *,
    backends: Backends | None = None,
) -> SandboxAPI:
    """Place and start a sandbox with the spec's backend; on any failure nothing is left behind.

    zygote: forks the sandbox's Python kernel from a pre-imported interpreter (local backend).
    on_close: awaited with the sandbox's id once it is closed (also when its start fails).
    backends: the backend instances to use, a server's own (default: the process's default_backends())."""
    spec = spec or SandboxSpec()
    sandbox_id = sandbox_id or secrets.token_hex(6)
    backend = (backends if backends is not None else default_backends()).get(spec)
    if isinstance(backend, RemoteBackend):  # on a host elsewhere: the same API, remotely
        return await backend.create(spec, sandbox_id)
    return await start_sandbox(backend, spec, sandbox_id, zygote, on_close)


async def start_sandbox(
    backend: PlacementBackend,
    spec: SandboxSpec,
    sandbox_id: str,
    zygote: KernelZygote | None = None,
    on_close: Callable[[str], Awaitable[None]] | None = None,
) -> Sandbox:
    """Place a sandbox on this machine with `backend` and start it (see create_sandbox).

    Its lease is written before anything of it exists (owner, private directory), and again with
    its processes once placed: a server killed at any point leaves a lease its successor's reaper
    finds, never an unaccounted directory or instance."""
    try:
        await _write_lease(spec.root_dir, lease_for(sandbox_id, spec), new=True)
    except FileExistsError as exc:
        raise SandboxStartError(f"sandbox id {sandbox_id} is in use: it has a lease") from exc
    try:
        placement = await backend.place(sandbox_id, spec)
    except BaseException as exc:
        drop = abandon_lease if getattr(exc, "may_live", False) else remove_lease
        await asyncio.shield(asyncio.to_thread(drop, spec.root_dir, sandbox_id))
        if on_close is not None:
            await on_close(sandbox_id)
        if isinstance(exc, OSError):  # backends raise SandboxStartError for what they foresee
            raise SandboxStartError(f"sandbox {sandbox_id} could not be placed: {exc}") from exc
        raise
    try:
        await _write_lease(spec.root_dir, placed_lease(sandbox_id, spec, placement))
    except BaseException:
        await asyncio.shield(_abandon(placement, spec.root_dir, sandbox_id))
        if on_close is not None:
            await on_close(sandbox_id)
        raise
    return Sandbox(spec, backend, placement, zygote, on_close)  # its shells and kernel start on first use


def placed_lease(sandbox_id: str, spec: SandboxSpec, placement: Placement) -> Lease:
    """The lease of a placed sandbox: the host processes that hold it, its instance name."""
    return lease_for(sandbox_id, spec, placement.pids, placement.instance, placement.private_dir)


async def _write_lease(root_dir: str, lease: Lease, new: bool = False) -> None:
    """Write the lease even if the caller is cancelled meanwhile (then re-raise): a cancelled
    to_thread() write still runs to its end, and whoever undoes it must find it written."""
    writing = asyncio.ensure_future(asyncio.to_thread(write_lease, root_dir, lease, new))
    try:
        await asyncio.shield(writing)
    except asyncio.CancelledError:
        (failed,) = await asyncio.gather(writing, return_exceptions=True)
        if failed is None:  # ours: undone; a lease that was there already is not
            await asyncio.shield(asyncio.to_thread(remove_lease, root_dir, lease.sandbox_id))
        raise


async def _abandon(placement: Placement, root_dir: str, sandbox_id: str) -> None:
    """Undo a placement whose start was cancelled or failed, lease included."""
    gone = await placement.close()
    await asyncio.to_thread(remove_lease if gone else abandon_lease, root_dir, sandbox_id)
