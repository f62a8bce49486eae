# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What the Python tool's runtimes share: the result model, the start error, where they run, and
the Protocol both implement.

Two runtimes, chosen per environment (`SandboxSpec.python_runtime`):
- `repl` (runtime/repl.py): a lean persistent interpreter forked from the zygote; one request and
  one reply per cell over a socket, output on a pipe. The default: what an agent's Python tool
  needs, at a fraction of a kernel's cost.
- `ipython` (runtime/kernel.py): a real IPython kernel over ZMQ, for environments that want its
  features (magics, rich display, `get_ipython()`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel

from prorl_gym.errors import ProrlError

PythonRuntimeKind = Literal["repl", "ipython"]


class KernelError(ProrlError):
    """The Python runtime could not be started."""


class PythonResult(BaseModel):
    """What one Python execution produced: printed text, results, and the traceback if it raised."""

    output: str
    error: dict | None = None  # {"ename", "evalue", "traceback"} when the code raised
    timed_out: bool = False
    truncated: bool = False
    kernel_restarted: bool = False
    duration_s: float = 0.0


class KernelHost(Protocol):
    """Where a Python runtime runs: the parts of a sandbox placement it needs."""

    socket_dir: Path  # sockets, same absolute path inside and out
    control_dir: Path  # connection files: readable inside, never writable
    log_dir: Path  # kernel logs: outside the sandbox
    python: str
    workspace: str
    sandbox_uid: int | None  # the sandbox's host uid, if it is not ours
    spawn_fds: dict[int, int]
    init_pid: int | None  # pid 1 of the sandbox's namespaces, for a zygote to join (None: none to join)
    own_pid_namespace: bool  # the sandbox sees only its own processes
    rlimits: dict[str, int | list[int]]  # what a forked runtime sets on itself (a wrapped one gets them from wrap)

    def wrap(self, argv: list[str]) -> list[str]: ...

    def environment(self) -> dict[str, str]: ...


class PythonRuntime(Protocol):
    """One persistent interpreter in a sandbox; one execution at a time; fresh per sandbox."""

    pid: int

    @property
    def alive(self) -> bool: ...

    async def warm_up(self) -> None:
        """Start it now unless it runs; an execution arriving meanwhile waits for it."""

    async def execute(self, code: str, timeout: float) -> PythonResult:
        """Run `code`; its errors come back as a traceback, a hang as timed_out (interrupted), a
        death as kernel_restarted (state lost); raises KernelError only when it cannot start."""

    def stop_reading(self) -> None:
        """Read nothing more from it; called before the sandbox kills it from outside."""

    async def close(self, exit_wait_s: float = 0.0) -> None:
        """Kill it; exit_wait_s: first let it exit by itself."""
